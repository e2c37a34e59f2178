"""One shard of a :class:`vecgraph.distributed.ShardedGraph`: a graph folder and the calls the
coordinator makes on it.

:class:`Shard` is plain Python; :class:`vecgraph.distributed.ShardedGraph` runs it as a Ray actor
(one process per shard, restarted by Ray after a crash: ``__init__`` runs again and reopens the
folder, replaying its WAL). Every call takes and returns plain values (lists, NumPy arrays,
tuples), pickled across the process boundary.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Optional

import numpy as np

from ..arguments import _exclude_keys, _float_array, _where, quantize
from ..entities import name_terms
from ..graph import Graph
from ..hybrid import (GRAPH_HOP_DECAY, admitted_holders, bm25_channel, default_dense_ef, dense_channel,
                      holder_keys, named_mentions)
from ..results import Edge, SearchResult, _node_columns
from ..tokenizer import tokenize


def _search_args(graph: Graph, p: dict, k: int, seeds: int) -> tuple:
    return graph._search_args(
        k,
        seeds,
        p["hops"],
        p["max_visited"],
        p["max_fanout"],
        p["direction"],
        p["rels"],
        p["labels"],
        p["tenants"],
        p.get("ts_min"),
        p.get("ts_max"),
        p.get("hop_decay", 1.0),
        p["exact"],
        p["ef"],
        p["since"],
        p["until"],
    )


class _RecordedEmbedder:
    """An embedder's name and dim, for a shard to record (it never embeds: the coordinator does)."""

    def __init__(self, name: str, dim: int) -> None:
        self.name, self.dim = name, dim

    def __call__(self, texts: Any) -> np.ndarray:
        raise RuntimeError("a shard does not embed text: the ShardedGraph embeds queries before sending them")


class Shard:
    """The graph folder ``path`` of shard ``index``, opened (created with ``options`` when missing)
    by :meth:`vecgraph.Graph.open`; the calls of the coordinator."""

    def __init__(self, index: int, path: str, options: dict) -> None:
        self.index = index
        self.path = path
        self.graph = Graph.open(path, **options)
        self.calls = {"search": 0, "hybrid": 0, "statistics": 0, "write": 0}
        self._calls_lock = threading.Lock()  # calls run in the actor's threads (max_concurrency)

    # ------------------------------------------------------------------ housekeeping

    def _count(self, kind: str) -> None:
        with self._calls_lock:
            self.calls[kind] += 1

    def ping(self) -> dict:
        """The shard's index, process id, live node count, dim and metric."""
        return {
            "shard": self.index,
            "pid": os.getpid(),
            "nodes": len(self.graph),
            "dim": self.graph.dim,
            "metric": self.graph.metric,
            "embedder": self.graph.embedder,
            "filterable": dict(self.graph._filterable),
        }

    def record_embedder(self, name: str, dim: int, spec: Optional[str]) -> None:
        """Record the embedder ``name`` (``dim``, loaded by ``spec``) as :meth:`vecgraph.Graph.use_embedder`
        does; the coordinator embeds the queries."""
        from .. import embedders

        record = _RecordedEmbedder(name, dim)
        if spec is not None:
            embedders._SPECS[record] = spec
        self.graph.use_embedder(record)

    def counters(self) -> dict:
        with self._calls_lock:
            return dict(self.calls)

    def stats(self) -> dict:
        out = dict(self.graph.stats())
        out.update(
            shard=self.index,
            path=self.path,
            pid=os.getpid(),
            nodes=len(self.graph),
            edges=self.graph.count_edges,
            calls=self.counters(),
        )
        return out

    def checkpoint(self) -> dict:
        return self.graph.checkpoint()

    def export(self, path: str, table_format: str, overwrite: bool) -> dict:
        from ..snapshot import export

        return export(self.graph, path, table_format, overwrite=overwrite)

    def sync(self) -> None:
        self.graph.sync()

    def close(self) -> None:
        self.graph.close()

    def verify(self) -> list:
        return self.graph.verify()

    # ------------------------------------------------------------------ writes

    def holds(self, keys: list) -> list:
        """Which of ``keys`` are nodes of this shard (one bool each)."""
        graph = self.graph
        return [key in graph for key in keys]

    def check_nodes(self, keys: list, vectors: Any, columns: dict, upsert: bool = False) -> None:
        """Raise what :meth:`add_nodes` would raise on this batch, writing nothing."""
        from ..errors import DuplicateKeyError
        from ..arguments import _node_columns as node_columns

        graph = self.graph
        graph._check_writable()
        columns_checked = node_columns(
            keys,
            vectors,
            columns.get("labels"),
            columns.get("texts"),
            columns.get("tenants"),
            columns.get("ts"),
            columns.get("props"),
            graph._filterable,
            True,
        )
        matrix = columns_checked[1]
        if matrix.shape[1] != graph.dim:
            from ..errors import DimensionMismatchError

            raise DimensionMismatchError(
                f"vectors have {matrix.shape[1]} columns, the graph's dim is {graph.dim}"
            )
        if len(matrix):
            quantize(matrix, graph.metric)  # the core's checks of values: NaN, inf, a zero row under cos
        for i, key in enumerate(keys if not upsert else []):
            if key in graph:
                raise DuplicateKeyError(f"key {key!r} (row {i}) is already in shard {self.index}")

    def add_nodes(self, keys: list, vectors: Any, columns: dict) -> int:
        self._count("write")
        self.graph.add_nodes(keys, vectors, **columns)
        return len(keys)

    def upsert_nodes(self, keys: list, vectors: Any, columns: dict) -> int:
        self._count("write")
        self.graph.upsert_nodes(keys, vectors, **columns)
        return len(keys)

    def add_edges(self, src: list, dst: list, columns: dict) -> int:
        self._count("write")
        self.graph.add_edges(src, dst, **columns)
        return len(src)

    def delete_nodes(self, keys: list, missing_ok: bool) -> int:
        self._count("write")
        return self.graph.delete_nodes(keys, missing_ok=missing_ok)

    def delete_tenant(self, tenant: str, allow_default_tenant: bool) -> int:
        self._count("write")
        return self.graph.delete_tenant(tenant, allow_default_tenant=allow_default_tenant)

    def get_node(self, key: Any, vector: bool) -> dict:
        return self.graph.get_node(key, vector=vector)

    def neighbors(self, key: Any, rels: Any, direction: str) -> list:
        return [tuple(e) for e in self.graph.neighbors(key, rels=rels, direction=direction)]

    # ------------------------------------------------------------------ search

    def search(self, query: np.ndarray, p: dict) -> SearchResult:
        """:meth:`vecgraph.Graph.search` with the arguments ``p`` (its keyword arguments); the
        result carries its paths and nodes (it is pickled to the coordinator)."""
        self._count("search")
        result = self.graph.search(query, **p)
        result._node_fields()
        return result

    def seeds(self, query: np.ndarray, p: dict) -> tuple:
        """(keys, scores) of this shard's best ``p["seeds"]`` seeds: the nodes that pass the
        filters most similar to ``query`` (a search of hops 0)."""
        self._count("search")
        graph = self.graph
        args = _search_args(graph, p, p["seeds"], p["seeds"])
        args = args[:2] + (0,) + args[3:]
        raw = graph._engine.search(
            _float_array(query, "query", 1),
            *args,
            _where(p["where"], graph._filterable),
            None,
            _exclude_keys(p["exclude_keys"]),
        )
        return list(raw[0]), np.asarray(raw[1], np.float32)

    def expand(self, query: np.ndarray, p: dict, starts: list) -> SearchResult:
        """The search of ``p`` with ``starts`` (this shard's share of the global seeds, best
        first) as its seeds instead of its own."""
        self._count("search")
        graph = self.graph
        args = _search_args(graph, p, p["k"], p["seeds"])
        args = (args[0], 0) + args[2:]
        raw = graph._engine.search(
            _float_array(query, "query", 1),
            *args,
            _where(p["where"], graph._filterable),
            list(starts),
            _exclude_keys(p["exclude_keys"]),
        )
        result = SearchResult(raw, graph._engine)
        result._node_fields()
        _ = result.paths  # read now: the result is pickled
        return result

    # ------------------------------------------------------------------ hybrid search

    def hybrid_first(self, text: Optional[str], query: Optional[np.ndarray], p: dict) -> dict:
        """The first round of a sharded hybrid search: this shard's dense list, its document
        frequencies of the query's terms, and the entity names the text mentions here with
        which of their holders pass the filters (and their similarity to the query)."""
        self._count("hybrid")
        graph = self.graph
        depth = p["depth"]
        args = _search_args(graph, p, depth, p["seeds"])
        conditions = _where(p["where"], graph._filterable)
        exclude = _exclude_keys(p["exclude_keys"])
        out: dict = {
            "dense": ([], []),
            "documents": 0,
            "frequencies": {},
            "mentions": [],
            "similarity": {},
            "admitted": [],
            "nodes": {},
        }
        runnable = p["runnable"]
        if query is not None and ("dense" in runnable or "graph" in runnable):
            out["dense"] = dense_channel(graph, query, args, conditions, exclude, depth,
                                         p["ef"] or default_dense_ef(graph, depth))
        if text is not None and ("bm25" in runnable or "entity" in runnable or "graph" in runnable):
            terms = list(dict.fromkeys(tokenize(text)))
            mentions = []
            if "entity" in runnable or "graph" in runnable:
                mentions = [m for m in named_mentions(graph, text, args[8], p["entity_keys"]) if m.holders]
                for m in mentions:
                    terms.extend(t for t in name_terms(m.name) if t not in terms)
            out["documents"], out["frequencies"] = self.text_statistics(terms, count=False)
            holders = holder_keys(mentions)
            if holders:
                out["admitted"], out["similarity"] = admitted_holders(graph, query, holders, args, conditions,
                                                                      exclude)
            out["mentions"] = [(m.name, m.start, m.holders) for m in mentions]
        wanted = list(out["dense"][0]) + list(out["admitted"])
        out["nodes"] = self._nodes(wanted)
        return out

    def text_statistics(self, terms: list, count: bool = True) -> tuple:
        """``(N, {term: n})``: this shard's texts, and how many hold each term."""
        if count:
            self._count("statistics")
        documents, found = self.graph._text_index().document_frequencies(terms)
        return documents, dict(zip(terms, found))

    def hybrid_second(
        self,
        text: Optional[str],
        query: Optional[np.ndarray],
        p: dict,
        statistics: Optional[tuple],
        starts: list,
        strengths: list,
    ) -> dict:
        """The second round: this shard's BM25 list scored with the whole graph's ``statistics``
        (``(N, {term: n})``), and the graph channel's walk from ``starts`` (this shard's share of
        the global seeds, best first) with their ``strengths``."""
        self._count("hybrid")
        graph = self.graph
        depth = p["depth"]
        args = _search_args(graph, p, depth, p["seeds"])
        conditions = _where(p["where"], graph._filterable)
        exclude = _exclude_keys(p["exclude_keys"])
        out: dict = {"bm25": ([], []), "graph": ([], [], []), "nodes": {}}
        if text is not None and "bm25" in p["runnable"]:
            excluded = {(type(key), key) for key in exclude} if exclude else None
            out["bm25"] = bm25_channel(graph, text, depth, args, conditions, excluded, statistics)
        if starts and query is not None and "graph" in p["runnable"]:
            min_hop = 0 if p["graph_seeds"] else 1
            if p["graph_scoring"] == "seed":
                walk_args = (depth, 0) + args[2:11] + (GRAPH_HOP_DECAY,) + args[12:]
                raw = graph._engine.search(
                    query, *walk_args, conditions, list(starts), exclude, list(strengths), min_hop
                )
            else:
                raw = graph._engine.search(
                    query, depth, 0, *args[2:], conditions, list(starts), exclude, None, min_hop
                )
            result = SearchResult(raw, graph._engine)
            out["graph"] = (list(result.keys), [float(x) for x in result.scores], result.paths)
        out["nodes"] = self._nodes(list(out["bm25"][0]) + list(out["graph"][0]))
        return out

    def _nodes(self, keys: list) -> dict:
        """{(type, key): {"label", "tenant", "text"}} of ``keys``."""
        if not keys:
            return {}
        fields = _node_columns(self.graph._engine, keys)
        return {
            (type(key), key): {"label": f[0], "tenant": f[1], "text": f[2]} for key, f in zip(keys, fields)
        }


__all__ = ["Shard", "Edge"]
