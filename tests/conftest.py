"""Shared helpers for the Python test suite.

Test modules import these with ``from conftest import ...`` (pytest puts tests/ on sys.path).
"""

from __future__ import annotations

import os
import socket
import sys
from dataclasses import dataclass, field
from typing import Any, Optional

import numpy as np
import pytest

# The tests' graphs are small: without these they would find seeds by an exact scan
# (vecgraph.FULL_SCAN_MAX_NODES, and FILTER_SCAN_MAX_NODES for filtered searches) and never
# reach the HNSW walk. Set for the subprocesses the tests start too; tests of the scans pass
# full_scan_max_nodes / filter_scan_max_nodes explicitly.
os.environ["VECGRAPH_FULL_SCAN_MAX_NODES"] = "0"
os.environ["VECGRAPH_FILTER_SCAN_MAX_NODES"] = "0"

#: With VECGRAPH_TESTS_FULL=1 (.ci/run sets it) every property test runs all its examples;
#: otherwise a quarter of them (at least 10), which keeps the README's test command short.
FULL = os.environ.get("VECGRAPH_TESTS_FULL", "") == "1"


def examples(full: int) -> int:
    """Hypothesis ``max_examples`` for a property test written for ``full`` examples."""
    return full if FULL else max(10, full // 4)


TESTS_DIR = os.path.dirname(os.path.abspath(__file__))
if TESTS_DIR not in sys.path:
    sys.path.insert(0, TESTS_DIR)

import vecgraph as vg  # noqa: E402

from reference import Model, build_model, reference_search  # noqa: E402,F401


@dataclass
class GraphSpec:
    """Everything needed to build a graph, in insertion order.

    edges: list of (src_key, dst_key, rel, weight).
    """

    dim: int
    metric: str
    keys: list
    vectors: np.ndarray
    labels: list
    tenants: list
    ts: list
    edges: list = field(default_factory=list)


def build_graph(spec: GraphSpec, *, node_split: Optional[int] = None, edge_split: Optional[int] = None,
                **graph_kwargs: Any) -> tuple[vg.Graph, Model]:
    """Builds ``spec`` as a vg.Graph (nodes in up to two batches, edges in up to two batches, with a
    search between the edge batches so that the CSR is rebuilt after it was first built) and returns
    it with its reference Model."""
    g = vg.Graph(spec.dim, spec.metric, **graph_kwargs)
    n = len(spec.keys)
    cut = n if node_split is None else max(0, min(n, node_split))
    for lo, hi in ((0, cut), (cut, n)):
        if hi > lo:
            g.add_nodes(spec.keys[lo:hi], spec.vectors[lo:hi], labels=spec.labels[lo:hi],
                        tenants=spec.tenants[lo:hi], ts=np.asarray(spec.ts[lo:hi], dtype=np.int64))
    m = len(spec.edges)
    cut = m if edge_split is None else max(0, min(m, edge_split))
    for lo, hi in ((0, cut), (cut, m)):
        if hi > lo:
            batch = spec.edges[lo:hi]
            g.add_edges([e[0] for e in batch], [e[1] for e in batch], rels=[e[2] for e in batch],
                        weights=np.array([e[3] for e in batch], dtype=np.float32))
            if n:  # search now, so the next batch has to refresh an already built CSR
                q = spec.vectors[0]
                partial = build_model(g, spec.keys, spec.labels, spec.tenants, spec.ts, spec.edges[:hi])
                assert_same(g.search(q, k=5, seeds=2, hops=2, exact=True),
                            reference_search(partial, q, k=5, seeds=2, hops=2))
    assert len(g) == n
    assert g.count_edges == m
    return g, build_model(g, spec.keys, spec.labels, spec.tenants, spec.ts, spec.edges)


def edge_tuples(paths: list) -> list:
    return [[tuple(e) for e in path] for path in paths]


def assert_same(res: Any, ref: Any, *, bit_exact: bool = True, counts: bool = True) -> None:
    """A vg.SearchResult equals a reference RefResult (or another SearchResult)."""
    ref_paths = ref.paths if not hasattr(ref, "_engine") else edge_tuples(ref.paths)
    assert res.keys == ref.keys, f"keys {res.keys!r} != {ref.keys!r}"
    assert [type(k) for k in res.keys] == [type(k) for k in ref.keys]
    assert res.scores.dtype == np.float32
    assert res.hops.dtype == np.int32
    assert list(res.hops) == list(ref.hops), f"hops {list(res.hops)} != {list(ref.hops)} for keys {res.keys!r}"
    ref_scores = np.asarray(ref.scores, dtype=np.float32)
    np.testing.assert_allclose(res.scores, ref_scores, rtol=1e-6, atol=0)
    if bit_exact:
        # Same float32 operations in the same order: the bits must agree (sign of zero included).
        assert res.scores.view(np.int32).tolist() == ref_scores.view(np.int32).tolist(), (
            f"scores not bit-identical: {res.scores.tolist()} vs {ref_scores.tolist()}")
    assert edge_tuples(res.paths) == ref_paths, f"paths {edge_tuples(res.paths)} != {ref_paths}"
    if counts:
        assert res.count_seeds == ref.count_seeds
        assert res.count_visited == ref.count_visited


def snapshot(g: vg.Graph, query: Any, **kwargs: Any) -> tuple:
    """Observable state of a graph: sizes and one exact search (keys, score bits, hops, paths)."""
    kwargs.setdefault("k", 50)
    kwargs.setdefault("seeds", 50)
    kwargs.setdefault("hops", 3)
    res = g.search(query, exact=True, **kwargs)
    return (len(g), g.count_edges, tuple(res.keys), res.scores.tobytes(), tuple(res.hops.tolist()),
            tuple(tuple(p) for p in edge_tuples(res.paths)))


@pytest.fixture()
def waits(monkeypatch):
    """The delays vecgraph.remote's retries wait, recorded instead of slept."""
    from vecgraph import remote

    delays: list = []
    monkeypatch.setattr(remote, "_sleep", delays.append)
    return delays


def closed_port_url() -> str:
    """An http://127.0.0.1:PORT/v1 URL where nothing listens now: connections are refused."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"
