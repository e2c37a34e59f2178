"""Building a graph from NumPy arrays: add_nodes (int8 quantization + HNSW inserts, which
the engine does inside add_nodes), add_edges, the first search (the CSR is built lazily on
the first search after add_edges), and the memory the graph holds.

One build of VECGRAPH_BENCH_BUILD_N nodes (default VECGRAPH_BENCH_N), timed step by step
(pytest-benchmark pedantic, one round each: a build is too long to repeat).
"""

from __future__ import annotations

import gc

import common
import pytest
import vecgraph as vg
from conftest import BUILD_N

STATE: dict = {}


@pytest.fixture(scope="module")
def build_data():
    graph_data, qs, generate_s = common.make_data(BUILD_N, 10, seed=7)
    return graph_data, qs[0], graph_data.rels, generate_s


def bench_build_add_nodes(benchmark, build_data):
    graph_data, _, _, generate_s = build_data
    benchmark.group = "build"
    gc.collect()
    STATE["rss_before"] = common.rss_bytes()
    graph = vg.Graph(graph_data.dim, "cos", **common.HNSW)
    cpu_before = common.cpu_seconds()
    benchmark.pedantic(graph.add_nodes, args=(graph_data.keys, graph_data.vectors), rounds=1, iterations=1)
    cpu_s = common.cpu_seconds() - cpu_before
    STATE["graph"] = graph
    common.record(benchmark, nodes=BUILD_N, generate_s=generate_s, add_nodes_s=benchmark.stats.stats.min,
                  add_nodes_cpu_s=cpu_s, load_average=common.load_average())


def bench_build_add_edges(benchmark, build_data):
    graph_data, _, rels, _ = build_data
    graph = STATE.get("graph")
    if graph is None:
        pytest.skip("needs bench_build_add_nodes")
    benchmark.group = "build"
    benchmark.pedantic(graph.add_edges, args=(graph_data.src, graph_data.dst),
                       kwargs={"rels": rels, "weights": graph_data.weights}, rounds=1, iterations=1)
    common.record(benchmark, edges=graph_data.count_edges, add_edges_s=benchmark.stats.stats.min)


def bench_build_first_search(benchmark, build_data):
    _, probe, _, _ = build_data
    graph = STATE.get("graph")
    if graph is None:
        pytest.skip("needs bench_build_add_nodes")
    benchmark.group = "build"
    benchmark.pedantic(graph.search, args=(probe,), kwargs=common.SEARCH, rounds=1, iterations=1)
    gc.collect()
    stats = graph.stats()
    common.record(
        benchmark,
        first_search_s=benchmark.stats.stats.min,
        graph_rss_mb=(common.rss_bytes() - STATE["rss_before"]) / 2**20,
        peak_rss_mb=common.peak_rss_bytes() / 2**20,
        vector_mb=stats["vector_bytes"] / 2**20,
        csr_mb=stats["csr_bytes"] / 2**20,
        hnsw_mb=stats["hnsw_bytes"] / 2**20,
        key_mb=stats["key_bytes"] / 2**20,
    )
