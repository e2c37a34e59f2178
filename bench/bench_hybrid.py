"""Hybrid retrieval latency: ``Graph.hybrid_search`` with every channel (dense, BM25, graph,
entity) on a graph of N nodes with text, beside plain graph-guided ``Graph.search`` on the same
graph and queries (the baseline of the same run), and the BM25 channel alone.

Graph: N clustered 384-d nodes (vecgraph.synthetic, about 5 edges each) whose texts are the
corpus of bench_text.py (short Zipf texts with identifiers and some Chinese); queries are a
node vector plus noise with the text query of the same row. Parameters: k=10, seeds=8,
hops=2, one thread per search (the BM25 channel runs in a second thread beside the others).

Targets: hybrid_search p50 <= 1 ms at 100,000 nodes with the default settings (issue 35; it was
2 ms in issue 5); BM25 channel alone p50 <= 1 ms. Also: plain search at the former default
beam (ef 64), hybrid with fusion="rrf", and the seeds' recall@10 against an exact scan at
both beams.

    python bench/bench_hybrid.py [--nodes 100000] [--queries 1000] [--json out.json]
    pytest bench/bench_hybrid.py --benchmark-only      (a small graph, VECGRAPH_BENCH_HYBRID_N)
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import bench_text
import common
import numpy as np
import vecgraph as vg
from vecgraph.synthetic import clustered_graph, queries as make_queries


def build(n_nodes: int, count_queries: int, seed: int = 3) -> tuple[vg.Graph, np.ndarray, list, dict]:
    data = clustered_graph(n_nodes, dim=common.DIM, edges_per_node=5, seed=seed)
    items, text_queries = bench_text.make_corpus(n_nodes, count_queries, seed=seed)
    graph = vg.Graph(common.DIM, "cos", filterable={"shard": "int64"}, **common.HNSW)
    started = time.perf_counter()
    with graph.deferred_indexing():
        graph.add_nodes(data.keys, data.vectors, texts=[item[1] for item in items],
                        tenants=[item[2] for item in items], labels=[item[3] for item in items],
                        props=[{"shard": i % 1000} for i in range(n_nodes)])
    graph.add_edges(data.src, data.dst, rels=data.rels, weights=data.weights)
    build_s = time.perf_counter() - started
    started = time.perf_counter()
    graph._text_index()  # the BM25 index, built from the graph's texts on first use
    text_s = time.perf_counter() - started
    qs = make_queries(data, count_queries, seed=seed + 1)
    return graph, qs, text_queries, {"build_s": build_s, "text_index_s": text_s}


def timed(fn, items) -> np.ndarray:
    for item in items[:20]:
        fn(item)
    ns = np.empty(len(items), dtype=np.int64)
    for i, item in enumerate(items):
        started = time.perf_counter_ns()
        fn(item)
        ns[i] = time.perf_counter_ns() - started
    return ns


def measure(n_nodes: int, count_queries: int) -> dict:
    graph, qs, text_queries, figures = build(n_nodes, count_queries)
    pairs = list(zip(qs, text_queries))
    search = timed(lambda p: graph.search(p[0], k=10, seeds=8, hops=2), pairs)
    search_ef64 = timed(lambda p: graph.search(p[0], k=10, seeds=8, hops=2, ef=64), pairs)
    hybrid_rrf = timed(lambda p: graph.hybrid_search(p[1], vector=p[0], k=10, fusion="rrf"), pairs)
    hybrid = timed(lambda p: graph.hybrid_search(p[1], vector=p[0], k=10, seeds=8, hops=2), pairs)
    sequential = timed(lambda p: graph.hybrid_search(p[1], vector=p[0], k=10, seeds=8, hops=2, parallel=False), pairs)
    bm25 = timed(lambda p: graph.hybrid_search(p[1], k=10, channels=["bm25"]), pairs)
    bm25_narrow = timed(lambda p: graph.hybrid_search(p[1], k=10, channels=["bm25"], where={"shard": 0}), pairs)
    bm25_broad = timed(lambda p: graph.hybrid_search(p[1], k=10, channels=["bm25"], where={"shard": {"<": 500}}),
                       pairs)
    # The seeds' recall@10 against an exact scan, at the default beam and at the former one (ef 64).
    sample = qs[: min(300, len(qs))]
    exact = [set(graph.search(q, k=10, seeds=10, hops=0, exact=True).keys) for q in sample]
    recall = {ef: float(np.mean([len(e & set(graph.search(q, k=10, seeds=10, hops=0, ef=ef).keys)) / 10
                                 for q, e in zip(sample, exact)])) for ef in (64, graph.stats()["expansion_search"])}
    figures.update(
        seeds_recall_at_10=recall,
        search_ef64=common.latency(search_ef64),
        hybrid_rrf=common.latency(hybrid_rrf),
        nodes=n_nodes,
        queries=count_queries,
        machine=common.machine(),
        search=common.latency(search),
        hybrid=common.latency(hybrid),
        hybrid_sequential=common.latency(sequential),
        bm25_channel=common.latency(bm25),
        bm25_where_0_1_percent=common.latency(bm25_narrow),
        bm25_where_50_percent=common.latency(bm25_broad),
        hybrid_over_search_p50=float(np.median(hybrid) / np.median(search)),
    )
    return figures


def bench_hybrid_search(benchmark):
    n = common.env_int("VECGRAPH_BENCH_HYBRID_N", 5_000)
    graph, qs, text_queries, _ = build(n, 50)
    benchmark.group = "hybrid"
    i = iter(range(10**9))
    benchmark(lambda: graph.hybrid_search(text_queries[next(i) % 50], vector=qs[next(i) % 50], k=10))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    figures = measure(args.nodes, args.queries)
    rows = [("graph-guided search (baseline)", figures["search"]), ("search, ef 64", figures["search_ef64"]),
            ("hybrid_search, all channels", figures["hybrid"]), ("hybrid_search, fusion='rrf'", figures["hybrid_rrf"]),
            ("hybrid_search, channels in one thread", figures["hybrid_sequential"]),
            ("BM25 channel alone", figures["bm25_channel"]),
            ("BM25 channel, where admits 0.1%", figures["bm25_where_0_1_percent"]),
            ("BM25 channel, where admits 50%", figures["bm25_where_50_percent"])]
    print(f"{figures['nodes']:,} nodes, {figures['queries']:,} queries; build {figures['build_s']:.1f} s, "
          f"BM25 index {figures['text_index_s']:.1f} s")
    for name, lat in rows:
        print(f"  {name:40s} p50 {lat['p50_us']:8.0f} µs   p99 {lat['p99_us']:8.0f} µs")
    print(f"  hybrid / search (p50): {figures['hybrid_over_search_p50']:.2f}x")
    print("  seeds recall@10 vs exact: " + ", ".join(f"ef {ef}: {r:.3f}" for ef, r in figures["seeds_recall_at_10"].items()))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(figures, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
