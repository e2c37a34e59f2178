"""Selective label filters on a 100,000-node graph: seeds by a scan of the label's member list
(the default up to ``vecgraph.FILTER_SCAN_MAX_NODES`` admitted nodes) against seeds by HNSW with
the filter inside its walk (``filter_scan_max_nodes=0``), same graph and queries, same run.

The graph is the clustered synthetic one of the other suites (384-d, about 5 edges per node);
labels admit 0.2%, 1% and 5% of the nodes, drawn at random. Each case times the default search
(k=10, seeds=8, hops=2, max_visited=2000) with the label filter once per query
(perf_counter_ns and thread CPU time), then lets pytest-benchmark time it; recall@10 is against
``exact=True`` with the same filter.

    pytest bench/bench_filtered.py --benchmark-only
"""

from __future__ import annotations

import itertools

import common
import numpy as np
import pytest
import vecgraph as vg

N = common.env_int("VECGRAPH_BENCH_FILTERED_N", 100_000)
SHARES = (0.002, 0.01, 0.05)
COUNT_QUERIES = 200


@pytest.fixture(scope="module")
def labelled():
    """(graph, queries, nodes by label): label "s<share>" on a random `share` of the nodes,
    "rest" elsewhere."""
    data, qs, _ = common.make_data(N, COUNT_QUERIES)
    u = np.random.default_rng(21).random(N)
    labels = np.full(N, "rest", dtype=object)
    low = 0.0
    for share in SHARES:  # disjoint bands of u
        labels[(u >= low) & (u < low + share)] = f"s{share}"
        low += share
    g = vg.Graph(data.dim, "cos", full_scan_max_nodes=0, **common.HNSW)
    g.add_nodes(data.keys, data.vectors, labels=list(labels))
    g.add_edges(data.src, data.dst, rels=data.rels, weights=data.weights)
    names, counts = np.unique(labels.astype(str), return_counts=True)
    return g, qs, dict(zip(names.tolist(), counts.tolist()))


@pytest.mark.parametrize("seeds_by", ["list_scan", "hnsw"])
@pytest.mark.parametrize("share", SHARES, ids=lambda s: f"share{s}")
def bench_filtered_search(benchmark, labelled, share, seeds_by):
    """The default search with a label admitting `share` of the nodes."""
    g, qs, count_by_label = labelled
    admitted = count_by_label[f"s{share}"]
    search = dict(common.SEARCH, labels=[f"s{share}"])
    g.filter_scan_max_nodes = vg.FILTER_SCAN_MAX_NODES if seeds_by == "list_scan" else 0
    try:
        before = g.stats()["seed_list_scans"]
        found = [g.search(q, **search).keys for q in qs]
        listed = g.stats()["seed_list_scans"] - before
        exact = [g.search(q, exact=True, **search).keys for q in qs]
        wall, cpu = common.time_calls_wall_cpu(lambda q: g.search(q, **search), qs, warmup=20)
        figures, cpu_figures = common.latency(wall), common.latency(cpu)
        benchmark.group = f"label filter admitting {share:.1%} of {len(g):,} nodes"
        common.record(benchmark, admitted=admitted, p50_us=figures["p50_us"],
                      p99_us=figures["p99_us"], cpu_p50_us=cpu_figures["p50_us"],
                      recall_vs_exact=common.recall(found, exact))
        cycle = itertools.cycle(qs)
        benchmark(lambda: g.search(next(cycle), **search))
        # The default scans the label's list when it admits few enough nodes, and that is exact.
        scanned = seeds_by == "list_scan" and admitted <= vg.FILTER_SCAN_MAX_NODES
        assert listed == (len(qs) if scanned else 0)
        if scanned:
            assert common.recall(found, exact) == 1.0
    finally:
        g.filter_scan_max_nodes = vg.FILTER_SCAN_MAX_NODES
