"""Selective label filters on a 100,000-node graph: seeds by a scan of the label's member list
(the default, ``filter_scan_max_nodes="auto"``, up to 10,000 admitted nodes at 100,000 nodes and
31,622 at 1,000,000) against seeds by HNSW with the filter inside its walk
(``filter_scan_max_nodes=0``), same graph and queries, same run.

The graph is the clustered synthetic one of the other suites (384-d, about 5 edges per node);
labels admit 0.2%, 1%, 2% and 5% of the nodes, drawn at random. Each case times the default search
(k=10, seeds=8, hops=2, max_visited=2000) with the label filter once per query
(perf_counter_ns and thread CPU time), then lets pytest-benchmark time it; recall@10 is against
``exact=True`` with the same filter.

``bench_one_tenant_among_many``: a tenant filter naming one single-node tenant, on a graph where
every node is its own tenant (``VECGRAPH_BENCH_TENANTS_N`` tenants, default 200,000) against the
same search on a graph of the same nodes where only 2,000 nodes have tenants of their own and the
rest share one: the same work except for how many tenants the graph has interned, same run.

    pytest bench/bench_filtered.py --benchmark-only
"""

from __future__ import annotations

import itertools

import common
import numpy as np
import pytest
import vecgraph as vg

N = common.env_int("VECGRAPH_BENCH_FILTERED_N", 100_000)
SHARES = (0.002, 0.01, 0.02, 0.05)
COUNT_QUERIES = 200
N_TENANTS = common.env_int("VECGRAPH_BENCH_TENANTS_N", 200_000)


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
    g.filter_scan_max_nodes = "auto" if seeds_by == "list_scan" else 0
    limit = g.stats()["filter_scan_max_nodes"]
    try:
        before = g.stats()["seed_list_scans"]
        found = [g.search(q, **search).keys for q in qs]
        listed = g.stats()["seed_list_scans"] - before
        exact = [g.search(q, exact=True, **search).keys for q in qs]
        wall, cpu = common.time_calls_wall_cpu(lambda q: g.search(q, **search), qs, warmup=20)
        figures, cpu_figures = common.latency(wall), common.latency(cpu)
        benchmark.group = f"label filter admitting {share:.1%} of {len(g):,} nodes"
        common.record(benchmark, admitted=admitted, limit=limit, p50_us=figures["p50_us"],
                      p99_us=figures["p99_us"], cpu_p50_us=cpu_figures["p50_us"],
                      recall_vs_exact=common.recall(found, exact))
        cycle = itertools.cycle(qs)
        benchmark(lambda: g.search(next(cycle), **search))
        # The default scans the label's list when it admits few enough nodes, and that is exact.
        scanned = seeds_by == "list_scan" and admitted <= limit
        assert listed == (len(qs) if scanned else 0)
        if scanned:
            assert common.recall(found, exact) == 1.0
    finally:
        g.filter_scan_max_nodes = "auto"


@pytest.fixture(scope="module")
def tenant_graphs():
    """{"many": graph with one tenant per node, "few": the same nodes, 2,000 of them with a
    tenant of their own and the rest in tenant "rest"}, and 2,000 (query, tenant) pairs."""
    rng = np.random.default_rng(22)
    dim = 32
    vectors = rng.standard_normal((N_TENANTS, dim)).astype(np.float32)
    keys = np.arange(N_TENANTS)
    own = [f"user-{i}" for i in range(N_TENANTS)]
    graphs = {}
    for name, tenants in (("many", own), ("few", own[:2_000] + ["rest"] * (N_TENANTS - 2_000))):
        g = vg.Graph(dim, "cos", full_scan_max_nodes=0, **common.HNSW)
        g.add_nodes(keys, vectors, tenants=tenants)
        g.add_edges(keys[:-1], keys[1:], rels="next")
        graphs[name] = g
    asked = rng.integers(0, 2_000, COUNT_QUERIES * 10)
    queries = rng.standard_normal((asked.size, dim)).astype(np.float32)
    return graphs, list(zip(queries, (f"user-{i}" for i in asked)))


@pytest.mark.parametrize("interned", ["many", "few"])
def bench_one_tenant_among_many(benchmark, tenant_graphs, interned):
    """The default search filtered to one single-node tenant; `interned`: how many tenants the
    graph holds (N or 2,001)."""
    graphs, pairs = tenant_graphs
    g = graphs[interned]
    run = lambda pair: g.search(pair[0], tenants=[pair[1]], **common.SEARCH)  # noqa: E731
    found = [run(pair).keys for pair in pairs]
    assert found == [[int(t.split("-")[1])] for _, t in pairs]  # the tenant's one node, nothing else
    wall, cpu = common.time_calls_wall_cpu(run, pairs, warmup=50)
    figures, cpu_figures = common.latency(wall), common.latency(cpu)
    benchmark.group = f"tenant filter naming one single-node tenant, {len(g):,} nodes"
    common.record(benchmark, tenants_interned=len(g) if interned == "many" else 2_001,
                  p50_us=figures["p50_us"], p99_us=figures["p99_us"], cpu_p50_us=cpu_figures["p50_us"])
    cycle = itertools.cycle(pairs)
    benchmark(lambda: run(next(cycle)))
