"""Small graphs (an agent's memory: hundreds to a few thousand nodes): seeds by an exact scan
(the default up to ``vecgraph.FULL_SCAN_MAX_NODES`` nodes) against seeds by HNSW
(``full_scan_max_nodes=0``), on the same graph and queries, in the same run.

Each size builds its own clustered synthetic graph (384-d, 5 edges per node) and times the
default search (k=10, seeds=8, hops=2, max_visited=2000) once per query with perf_counter_ns,
then lets pytest-benchmark time it; recall@10 is against ``exact=True``.

    pytest bench/bench_small_graphs.py --benchmark-only
"""

from __future__ import annotations

import itertools

import common
import pytest
import vecgraph as vg
from vecgraph.synthetic import clustered_graph, queries

SIZES = (1_000, 4_096)
COUNT_QUERIES = 1_000


@pytest.fixture(scope="module", params=SIZES, ids=lambda n: f"n{n}")
def small(request):
    """(graph, queries, exact top-10 keys per query) for one size."""
    n = request.param
    data = clustered_graph(n, dim=common.DIM, edges_per_node=5, seed=11)
    g = vg.Graph(data.dim, "cos", full_scan_max_nodes=vg.FULL_SCAN_MAX_NODES, **common.HNSW)
    g.add_nodes(data.keys, data.vectors)
    g.add_edges(data.src, data.dst, rels=data.rels, weights=data.weights)
    qs = queries(data, COUNT_QUERIES, seed=12)
    exact = [g.search(q, exact=True, **common.SEARCH).keys for q in qs]
    return g, qs, exact


@pytest.mark.parametrize("seeds_by", ["full_scan", "hnsw"])
def bench_small_graph_search(benchmark, small, seeds_by):
    """The default search with seeds by an exact scan (the default at this size) or by HNSW."""
    g, qs, exact = small
    g.full_scan_max_nodes = vg.FULL_SCAN_MAX_NODES if seeds_by == "full_scan" else 0
    try:
        found = [g.search(q, **common.SEARCH).keys for q in qs]
        wall, cpu = common.time_calls_wall_cpu(lambda q: g.search(q, **common.SEARCH), qs, warmup=100)
        figures, cpu_figures = common.latency(wall), common.latency(cpu)
        benchmark.group = f"small graph, {len(g):,} nodes"
        common.record(benchmark, nodes=len(g), p50_us=figures["p50_us"], p99_us=figures["p99_us"],
                      cpu_p50_us=cpu_figures["p50_us"], recall_vs_exact=common.recall(found, exact))
        cycle = itertools.cycle(qs)
        benchmark(lambda: g.search(next(cycle), **common.SEARCH))
        if seeds_by == "full_scan":
            assert common.recall(found, exact) == 1.0  # the scan's seeds are exact=True's
    finally:
        g.full_scan_max_nodes = vg.FULL_SCAN_MAX_NODES
