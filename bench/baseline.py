"""The baseline: the glue code a competent user writes today for graph-guided search.

Seeds come from a USearch HNSW index (the ``usearch`` Python package, **float32** vectors,
cosine metric, the same connectivity / expansion_add / expansion_search as the vecgraph graph;
float32 rather than i8 because USearch's i8 maps a unit vector's coordinates onto a fixed
[-1, 1] scale and reaches only ~0.81 seed recall on 384-d unit vectors, where f32 reaches
~0.95 at the same ef). The expansion is a level-synchronous BFS over a ``scipy.sparse.csr_matrix``
of the merged out- and in-edges, each row ordered by (weight desc, edge id asc) once at
build time, truncated to ``max_fanout`` per node at query time, vectorised with NumPy; it
follows the rules of DESIGN.md ("Search semantics") exactly. Scoring is a float32 matmul over
the visited rows, top-k by ``argpartition``.

:class:`Float32Reference` uses the same expansion with brute-force float32 seeds: the
"float32 exact" answer that both vecgraph and the baseline are measured against.
"""

from __future__ import annotations

import json
import os
import time
from typing import Optional

import numpy as np
import scipy.sparse as sp

__all__ = ["Baseline", "Float32Reference", "exact_seeds_f32", "expand", "merged_adjacency", "top_k"]


def merged_adjacency(n_nodes: int, src: np.ndarray, dst: np.ndarray, weights: np.ndarray) -> sp.csr_matrix:
    """Out- and in-edges of every node in one CSR matrix, each row in traversal order.

    Row u holds, for each edge u->v, the entry v, and for each edge w->u, the entry w (a
    self-loop once), ordered by (weight desc, edge id asc); parallel edges stay separate
    entries (the matrix is built from (data, indices, indptr), which keeps duplicates).
    """
    m = src.shape[0]
    edge_ids = np.arange(m, dtype=np.int64)
    not_loop = src != dst
    node = np.concatenate((src, dst[not_loop]))
    neighbor = np.concatenate((dst, src[not_loop]))
    weight = np.concatenate((weights, weights[not_loop])).astype(np.float32)
    edge = np.concatenate((edge_ids, edge_ids[not_loop]))
    order = np.lexsort((edge, -weight, node))
    counts = np.bincount(node, minlength=n_nodes)
    indptr = np.zeros(n_nodes + 1, dtype=np.int64)
    np.cumsum(counts, out=indptr[1:])
    matrix = sp.csr_matrix((weight[order], neighbor[order].astype(np.int32), indptr), shape=(n_nodes, n_nodes))
    matrix.has_sorted_indices = False  # rows are in traversal order, not column order; keep it so
    return matrix


def expand(
    indptr: np.ndarray,
    indices: np.ndarray,
    seeds: np.ndarray,
    hops: int,
    max_visited: int,
    max_fanout: int,
    mark: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Bounded BFS from ``seeds`` (best first) by the rules of DESIGN.md.

    Args:
        indptr, indices: a CSR adjacency from :func:`merged_adjacency`.
        seeds: int64 node ids, best first.
        mark: bool (n,) scratch, all False on entry and on return.

    Returns:
        (visited int64 (v,), hop int32 (v,)) in visit order.
    """
    _, first = np.unique(seeds, return_index=True)
    frontier = seeds[np.sort(first)][:max_visited]
    parts, hop_parts = [frontier], [np.zeros(frontier.size, dtype=np.int32)]
    count = frontier.size
    mark[frontier] = True
    for hop in range(1, hops + 1):
        if count >= max_visited or frontier.size == 0:
            break
        starts = indptr[frontier]
        lengths = np.minimum(indptr[frontier + 1] - starts, max_fanout)
        total = int(lengths.sum())
        if total == 0:
            break
        # Positions starts[i] .. starts[i] + lengths[i] - 1, concatenated in frontier order.
        offsets = np.cumsum(lengths) - lengths
        positions = np.arange(total, dtype=np.int64) + np.repeat(starts - offsets, lengths)
        reached = indices[positions]
        reached = reached[~mark[reached]]
        _, first = np.unique(reached, return_index=True)
        new = reached[np.sort(first)][: max_visited - count].astype(np.int64)
        mark[new] = True
        parts.append(new)
        hop_parts.append(np.full(new.size, hop, dtype=np.int32))
        count += new.size
        frontier = new
    visited = np.concatenate(parts)
    mark[visited] = False
    return visited, np.concatenate(hop_parts)


def top_k(nodes: np.ndarray, scores: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """The k best (score desc, node id asc) of ``nodes``: argpartition, then a sort of k."""
    if nodes.size > k:
        part = np.argpartition(-scores, k - 1)[:k]
        nodes, scores = nodes[part], scores[part]
    order = np.lexsort((nodes, -scores))
    return nodes[order], scores[order]


def exact_seeds_f32(vectors: np.ndarray, queries: np.ndarray, count: int, chunk_rows: int = 65_536) -> np.ndarray:
    """int64 (q, count): the ``count`` rows of ``vectors`` with the largest dot product with
    each query (brute force, float32, best first; unit vectors: cosine)."""
    q = np.ascontiguousarray(queries, dtype=np.float32)
    best_ids = np.empty((q.shape[0], 0), dtype=np.int64)
    best_scores = np.empty((q.shape[0], 0), dtype=np.float32)
    for begin in range(0, vectors.shape[0], chunk_rows):
        scores = q @ vectors[begin : begin + chunk_rows].T
        take = min(count, scores.shape[1])
        part = np.argpartition(-scores, take - 1, axis=1)[:, :take]
        best_ids = np.concatenate((best_ids, part + begin), axis=1)
        best_scores = np.concatenate((best_scores, np.take_along_axis(scores, part, axis=1)), axis=1)
        keep = np.argsort(-best_scores, axis=1, kind="stable")[:, :count]
        best_ids = np.take_along_axis(best_ids, keep, axis=1)
        best_scores = np.take_along_axis(best_scores, keep, axis=1)
    return best_ids


class Baseline:
    """USearch (float32 HNSW) + scipy CSR BFS + NumPy float32 scoring.

    Args:
        vectors: float32 (n, dim) unit vectors (kept by reference for scoring).
        src, dst, weights: the edge list (node ids 0..n-1).
        connectivity, expansion_add, expansion_search: USearch HNSW parameters.
        dtype: USearch storage type ("f32" by default, see the module docstring).
        threads: threads for the index build (0: all cores).
        cache_path: where to save the built index and load it from next time (the file
            name must identify the data and parameters); index_build_s is then the time
            of the build that wrote it.
    """

    def __init__(
        self,
        vectors: np.ndarray,
        src: np.ndarray,
        dst: np.ndarray,
        weights: np.ndarray,
        *,
        connectivity: int = 16,
        expansion_add: int = 128,
        expansion_search: int = 64,
        dtype: str = "f32",
        threads: int = 0,
        cache_path: Optional[str] = None,
    ) -> None:
        from usearch.index import Index

        n, dim = vectors.shape
        self.vectors = vectors
        self.dtype = dtype
        self.index = Index(ndim=dim, metric="cos", dtype=dtype, connectivity=connectivity,
                           expansion_add=expansion_add, expansion_search=expansion_search)
        self.index_cached = bool(cache_path) and os.path.exists(cache_path) and os.path.exists(cache_path + ".json")
        if self.index_cached:
            self.index.load(cache_path)
            self.index.expansion_search = expansion_search
            with open(cache_path + ".json") as f:
                self.index_build_s = json.load(f)["index_build_s"]
        else:
            started = time.perf_counter()
            self.index.add(np.arange(n, dtype=np.uint64), vectors, threads=threads)
            self.index_build_s = time.perf_counter() - started
            if cache_path:
                os.makedirs(os.path.dirname(cache_path) or ".", exist_ok=True)
                self.index.save(cache_path)
                with open(cache_path + ".json", "w") as f:
                    json.dump({"index_build_s": self.index_build_s}, f)
        started = time.perf_counter()
        self.adjacency = merged_adjacency(n, src, dst, weights)
        self.csr_build_s = time.perf_counter() - started
        self._indptr = self.adjacency.indptr
        self._indices = self.adjacency.indices
        self._mark = np.zeros(n, dtype=bool)

    def seeds(self, query: np.ndarray, count: int) -> np.ndarray:
        """int64 node ids of the ``count`` HNSW nearest neighbours, best first (one thread)."""
        return self.index.search(query, count, threads=1).keys.astype(np.int64)

    def expand(self, seeds: np.ndarray, hops: int, max_visited: int, max_fanout: int) -> np.ndarray:
        return expand(self._indptr, self._indices, seeds, hops, max_visited, max_fanout, self._mark)[0]

    def search(self, query: np.ndarray, k: int = 10, seeds: int = 8, hops: int = 2, max_visited: int = 2000,
               max_fanout: int = 256) -> tuple[np.ndarray, np.ndarray]:
        """(node ids, float32 scores) of the top k, best first."""
        visited = self.expand(self.seeds(query, seeds), hops, max_visited, max_fanout)
        scores = self.vectors[visited] @ query
        return top_k(visited, scores, k)


class Float32Reference:
    """Float32 exact search: brute-force float32 seeds, the same expansion, float32 scores."""

    def __init__(self, vectors: np.ndarray, adjacency: sp.csr_matrix) -> None:
        self.vectors = vectors
        self._indptr = adjacency.indptr
        self._indices = adjacency.indices
        self._mark = np.zeros(vectors.shape[0], dtype=bool)

    def search_many(self, queries: np.ndarray, k: int = 10, seeds: int = 8, hops: int = 2, max_visited: int = 2000,
                    max_fanout: int = 256, seed_ids: Optional[np.ndarray] = None) -> list[np.ndarray]:
        """Top-k node ids (best first) of each query."""
        if seed_ids is None:
            seed_ids = exact_seeds_f32(self.vectors, queries, seeds)
        out = []
        for query, row in zip(queries, seed_ids):
            visited, _ = expand(self._indptr, self._indices, row, hops, max_visited, max_fanout, self._mark)
            out.append(top_k(visited, self.vectors[visited] @ query, k)[0])
        return out
