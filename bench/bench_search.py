"""Search latency, recall and batch throughput: vecgraph against the baseline, same graph, same queries.

Every latency benchmark first times each of the session's queries once with perf_counter_ns
(p50 / p99 in extra_info and in the end-of-session list; also the thread CPU time of each call,
cpu_p50 / cpu_p99, which leaves out the time a shared machine gives the core to other
processes), then lets pytest-benchmark time the same call, cycling through the queries.
"""

from __future__ import annotations

import itertools

import common
import pytest
from conftest import COUNT_RECALL

SEARCH = common.SEARCH


def _latency_benchmark(benchmark, fn, qs, **extra):
    wall, cpu = common.time_calls_wall_cpu(fn, qs, warmup=100)
    figures, cpu_figures = common.latency(wall), common.latency(cpu)
    common.record(benchmark, p50_us=figures["p50_us"], p99_us=figures["p99_us"], mean_us=figures["mean_us"],
                  cpu_p50_us=cpu_figures["p50_us"], cpu_p99_us=cpu_figures["p99_us"], **extra)
    cycle = itertools.cycle(qs)
    benchmark(lambda: fn(next(cycle)))
    return figures


def bench_search_vecgraph(benchmark, data, graph, references):
    """g.search(q, k=10, seeds=8, hops=2, max_visited=2000), one thread."""
    _, qs = data
    rq = qs[:COUNT_RECALL]
    found = [graph.search(q, **SEARCH).keys for q in rq]
    benchmark.group = "search"
    _latency_benchmark(
        benchmark, lambda q: graph.search(q, **SEARCH), qs,
        recall_vs_exact=common.recall(found, references["vecgraph_exact"]),
        recall_vs_float32_exact=common.recall(found, references["float32_exact"]),
        mean_visited=sum(graph.search(q, **SEARCH).count_visited for q in rq) / len(rq),
    )


def bench_search_baseline(benchmark, data, baseline, references):
    """usearch f32 seeds + scipy CSR BFS + NumPy float32 scoring, one thread."""
    _, qs = data
    rq = qs[:COUNT_RECALL]
    found = [baseline.search(q, **SEARCH)[0] for q in rq]
    benchmark.group = "search"
    _latency_benchmark(
        benchmark, lambda q: baseline.search(q, **SEARCH), qs,
        recall_vs_exact=common.recall(found, references["vecgraph_exact"]),
        recall_vs_float32_exact=common.recall(found, references["float32_exact"]),
    )


@pytest.mark.parametrize("ef", common.OTHER_EFS)
def bench_search_vecgraph_ef(benchmark, data, graph, references, ef):
    """The default search with another HNSW ef: the recall / latency trade-off."""
    _, qs = data
    rq = qs[:COUNT_RECALL]
    found = [graph.search(q, **SEARCH, ef=ef).keys for q in rq]
    benchmark.group = "search"
    _latency_benchmark(
        benchmark, lambda q: graph.search(q, **SEARCH, ef=ef), qs,
        recall_vs_exact=common.recall(found, references["vecgraph_exact"]),
        recall_vs_float32_exact=common.recall(found, references["float32_exact"]),
    )


def bench_search_int8_vs_float32(benchmark, data, graph):
    """int8 scoring against float32 scoring of the same visited set (search with k=max_visited)."""
    graph_data, qs = data
    benchmark.group = "search breakdown"
    common.record(benchmark, recall=common.int8_vs_float32_recall(graph, graph_data.vectors, qs[:COUNT_RECALL]))
    cycle = itertools.cycle(qs)
    benchmark(lambda: graph.search(next(cycle), **{**SEARCH, "k": SEARCH["max_visited"]}))


@pytest.mark.parametrize("part", ["seeds_only", "one_hop", "raw_binding"])
def bench_search_breakdown(benchmark, data, graph, part):
    """Where the time goes: seeds only (hops=0), one hop, and the binding call without the facade."""
    _, qs = data
    benchmark.group = "search breakdown"
    if part == "raw_binding":
        engine = graph._engine
        args = graph._search_args(SEARCH["k"], SEARCH["seeds"], SEARCH["hops"], SEARCH["max_visited"],
                                  SEARCH["max_fanout"], "both", None, None, None, None, None, 1.0, False, None)
        fn = lambda q: engine.search(q, *args)
    else:
        params = {**SEARCH, "hops": 0 if part == "seeds_only" else 1}
        fn = lambda q: graph.search(q, **params)
    _latency_benchmark(benchmark, fn, qs)


def bench_search_baseline_seeds_only(benchmark, data, baseline):
    """The baseline's seed search alone (usearch, one thread)."""
    _, qs = data
    benchmark.group = "search breakdown"
    _latency_benchmark(benchmark, lambda q: baseline.seeds(q, SEARCH["seeds"]), qs)


def bench_search_exact(benchmark, data, graph):
    """exact=True: brute-force int8 seeds over every node, then the same expansion."""
    _, qs = data
    benchmark.group = "search exact"
    subset = qs[:200]
    figures = common.latency(common.time_calls(lambda q: graph.search(q, **SEARCH, exact=True), subset, warmup=5))
    common.record(benchmark, p50_us=figures["p50_us"], p99_us=figures["p99_us"])
    cycle = itertools.cycle(subset)
    benchmark.pedantic(lambda: graph.search(next(cycle), **SEARCH, exact=True), rounds=50, warmup_rounds=2)


THROUGHPUT: dict = {}


@pytest.mark.parametrize("threads", [1, 2])
def bench_search_batch(benchmark, data, graph, threads):
    """search_batch of every query on 1 and 2 threads; queries/s, and 2-thread speed-up."""
    _, qs = data
    benchmark.group = "search_batch"
    benchmark.pedantic(graph.search_batch, args=(qs,), kwargs={**SEARCH, "threads": threads}, rounds=5,
                       warmup_rounds=1)
    THROUGHPUT[threads] = common.batch_throughput(graph, qs, threads)
    figures = {"queries_per_s": THROUGHPUT[threads]["qps"], "queries_per_cpu_s": THROUGHPUT[threads]["qps_per_cpu_s"],
               "load_average": common.load_average()}
    if threads == 2 and 1 in THROUGHPUT:
        figures["speedup_vs_1_thread"] = THROUGHPUT[2]["qps"] / THROUGHPUT[1]["qps"]
        figures["cpu_normalised_speedup"] = THROUGHPUT[2]["qps_per_cpu_s"] / THROUGHPUT[1]["qps_per_cpu_s"]
    common.record(benchmark, **figures)
