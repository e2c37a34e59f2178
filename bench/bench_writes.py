"""Write path of durable graphs (``Graph.open``), each figure beside a baseline from the same run:
ingest and single writes (folder with sync="off" against an in-memory graph), group commit
(sync="always" from 4 threads against 1), WAL replay in ``Graph.open`` (default HNSW against a
near-free index), search over an uncompacted delta (against a fresh build / the compacted graph)
and search during compactions (against idle). The measuring code is bench/write_figures.py,
which also prints every figure as one table with its target.

Environment (defaults in brackets):
    VECGRAPH_BENCH_WRITES_N             nodes of the single-write graph [100000]
    VECGRAPH_BENCH_WRITES_SINGLE        timed one-node add_nodes calls [300]
    VECGRAPH_BENCH_WRITES_RECOVERY_N    one-node records in the WAL, at most [200000]
    VECGRAPH_BENCH_WRITES_RECOVERY_S    seconds spent writing them, at most [40]
    VECGRAPH_BENCH_WRITES_DELTA         base nodes = delta nodes = held-back edges [100000]
    VECGRAPH_BENCH_TMP                  where the graph folders go [/tmp]
"""

from __future__ import annotations

import itertools
import os
import shutil

import common
import numpy as np
import pytest
import vecgraph as vg
import write_figures as wf

N = common.env_int("VECGRAPH_BENCH_WRITES_N", 100_000)
SINGLE = common.env_int("VECGRAPH_BENCH_WRITES_SINGLE", 300)
SINGLE_EDGES = 2000
RECOVERY_N = common.env_int("VECGRAPH_BENCH_WRITES_RECOVERY_N", 200_000)
RECOVERY_S = common.env_int("VECGRAPH_BENCH_WRITES_RECOVERY_S", 40)
DELTA = common.env_int("VECGRAPH_BENCH_WRITES_DELTA", 100_000)
DELTA_BATCH = 1000
COMMITS = 400
TMP = os.environ.get("VECGRAPH_BENCH_TMP", "/tmp")
KINDS = ("memory", "folder_off")  # the baseline first

STATE: dict = {}


def _folder(name: str) -> str:
    return wf.fresh_folder(TMP, f"vg_bench_{name}")


# ------------------------------------------------------------------------------------- ingest, single writes


@pytest.fixture(scope="module")
def single_data():
    return wf.single_write_data(N, SINGLE)


@pytest.fixture(scope="module")
def write_graphs():
    graphs: dict = {}
    yield graphs
    for graph in graphs.values():
        if graph.path:
            path = graph.path
            graph.close()
            shutil.rmtree(path, ignore_errors=True)


def _graph(write_graphs, kind):
    graph = write_graphs.get(kind)
    if graph is None:
        pytest.skip(f"needs bench_ingest_nodes[{kind}]")
    return graph


def _vs_memory(kind: str, name: str, value: float) -> dict:
    STATE.setdefault(name, {})[kind] = value
    base = STATE[name].get("memory")
    if kind == "memory" or not base:
        return {}
    return {f"{name}_vs_memory": value / base}


@pytest.mark.parametrize("kind", KINDS)
def bench_ingest_nodes(benchmark, single_data, write_graphs, kind):
    """One add_nodes batch of N 384-d nodes (int8 quantization and the HNSW inserts on all cores)."""
    data, _ = single_data
    benchmark.group = "writes: ingest nodes"
    if kind == "memory":
        graph = vg.Graph(wf.DIM, "cos", **common.HNSW)
    else:
        graph = vg.Graph.open(_folder("ingest"), dim=wf.DIM, metric="cos", sync="off", **common.HNSW)
    write_graphs[kind] = graph
    cpu0 = common.cpu_seconds()
    benchmark.pedantic(graph.add_nodes, args=(data.keys[:N], data.vectors[:N]), rounds=1, iterations=1)
    seconds = benchmark.stats.stats.min
    common.record(
        benchmark,
        nodes=N,
        nodes_per_s=N / seconds,
        cpu_s=common.cpu_seconds() - cpu0,
        **_vs_memory(kind, "nodes_per_s", N / seconds),
    )


@pytest.mark.parametrize("kind", KINDS)
def bench_ingest_edges(benchmark, single_data, write_graphs, kind):
    """One add_edges batch of the ~5N edges among the N nodes."""
    data, base = single_data
    graph = _graph(write_graphs, kind)
    benchmark.group = "writes: ingest edges"
    rels = wf.rel_names(data, base)
    benchmark.pedantic(
        graph.add_edges,
        args=(data.src[base], data.dst[base]),
        kwargs={"rels": rels, "weights": data.weights[base]},
        rounds=1,
        iterations=1,
    )
    count = int(base.sum())
    rate = count / benchmark.stats.stats.min
    common.record(benchmark, edges=count, edges_per_s=rate, **_vs_memory(kind, "edges_per_s", rate))


@pytest.mark.parametrize("kind", KINDS)
def bench_write_one_node(benchmark, single_data, write_graphs, kind):
    """add_nodes of one 384-d node (its HNSW insert included), SINGLE times, each a new key."""
    data, _ = single_data
    graph = _graph(write_graphs, kind)
    benchmark.group = "writes: one node"
    keys = iter(range(N, N + SINGLE))

    def setup():
        k = next(keys)
        return ([k], data.vectors[k : k + 1]), {}

    benchmark.pedantic(graph.add_nodes, setup=setup, rounds=SINGLE, iterations=1)
    p50_us = benchmark.stats.stats.median * 1e6
    common.record(
        benchmark, graph_nodes=len(graph), p50_us=p50_us, **_vs_memory(kind, "one_node_p50", p50_us)
    )


@pytest.mark.parametrize("kind", KINDS)
def bench_write_one_edge(benchmark, write_graphs, kind):
    """add_edges of one edge between random existing nodes."""
    graph = _graph(write_graphs, kind)
    benchmark.group = "writes: one edge"
    rng = np.random.default_rng(5)
    pairs = iter([([int(a)], [int(b)]) for a, b in rng.integers(0, N, size=(SINGLE_EDGES + 50, 2))])

    def setup():
        src, dst = next(pairs)
        return (src, dst), {"rels": "related", "weights": 0.5}

    benchmark.pedantic(graph.add_edges, setup=setup, rounds=SINGLE_EDGES, warmup_rounds=50, iterations=1)
    p50_us = benchmark.stats.stats.median * 1e6
    common.record(benchmark, p50_us=p50_us, **_vs_memory(kind, "one_edge_p50", p50_us))


@pytest.mark.parametrize("kind", KINDS)
def bench_write_one_edge_raw_binding(benchmark, write_graphs, kind):
    """The same one-edge write straight on the binding, without the Python facade's checks."""
    graph = _graph(write_graphs, kind)
    benchmark.group = "writes: one edge"
    engine, rels, weights = graph._engine, ["related"], np.array([0.5], dtype=np.float32)
    rng = np.random.default_rng(6)
    pairs = iter([([int(a)], [int(b)]) for a, b in rng.integers(0, N, size=(SINGLE_EDGES + 50, 2))])

    def setup():
        src, dst = next(pairs)
        return (src, dst, rels, weights, None, None, None, None), {}

    benchmark.pedantic(engine.add_edges, setup=setup, rounds=SINGLE_EDGES, warmup_rounds=50, iterations=1)
    p50_us = benchmark.stats.stats.median * 1e6
    common.record(benchmark, p50_us=p50_us, **_vs_memory(kind, "one_edge_raw_p50", p50_us))


# ------------------------------------------------------------------------------------- group commit


@pytest.mark.parametrize("threads", [1, 4])
def bench_group_commit(benchmark, threads):
    """COMMITS one-node add_nodes (dim 64) with sync="always", split over 1 or 4 threads; each
    round on a new graph folder."""
    benchmark.group = "writes: group commit"
    vectors = np.random.default_rng(threads).standard_normal((4096, wf.COMMIT_DIM)).astype(np.float32)
    graphs = []

    def setup():
        graph = vg.Graph.open(
            _folder(f"commit_{threads}_{len(graphs)}"), dim=wf.COMMIT_DIM, metric="cos", sync="always"
        )
        graphs.append(graph)
        return (graph, threads, COMMITS, vectors), {}

    benchmark.pedantic(wf.fixed_commits, setup=setup, rounds=3, iterations=1)
    for graph in graphs:
        path = graph.path
        graph.close()
        shutil.rmtree(path, ignore_errors=True)
    rate = COMMITS / benchmark.stats.stats.median
    STATE.setdefault("commits_per_s", {})[threads] = rate
    figures = {"commits_per_s": rate, "fs": wf.filesystem(TMP)}
    if threads == 4 and 1 in STATE["commits_per_s"]:
        figures["ratio_vs_1_thread"] = rate / STATE["commits_per_s"][1]
    common.record(benchmark, **figures)


# ------------------------------------------------------------------------------------- recovery


@pytest.fixture(scope="module")
def recovery_log():
    data = wf.clustered_graph(RECOVERY_N, dim=wf.DIM, edges_per_node=1, seed=11)
    path = _folder("recovery")
    written = wf.write_one_node_log(path, data.vectors, RECOVERY_N, RECOVERY_S, wf.CHEAP_HNSW)
    yield path, written, data
    shutil.rmtree(path, ignore_errors=True)


@pytest.mark.parametrize("index", ["cheap_hnsw", "default_hnsw"])
def bench_recovery_open(benchmark, recovery_log, index):
    """Graph.open of a WAL of one-node add_nodes records (384-d): replayed with the HNSW
    parameters it was written with (connectivity 2, expansion 1: a near-free index), then with
    the MANIFEST's HNSW block set to the defaults."""
    path, written, _ = recovery_log
    benchmark.group = "writes: recovery"
    if index == "default_hnsw":
        wf.set_manifest_hnsw(path, common.HNSW)
    result = benchmark.pedantic(wf.timed_open, args=(path,), rounds=1, iterations=1)
    STATE.setdefault("open_s", {})[index] = result["open_s"]
    figures = {
        "records": result["replayed"],
        "records_per_s": result["records_per_s"],
        "wal_mib": written["wal_bytes"] / 2**20,
    }
    if index == "default_hnsw" and "cheap_hnsw" in STATE["open_s"]:
        figures["hnsw_share"] = max(0.0, 1 - STATE["open_s"]["cheap_hnsw"] / result["open_s"])
    common.record(benchmark, **figures)


def bench_recovery_memory_batch(benchmark, recovery_log):
    """The same nodes added to an in-memory graph in one batch (HNSW on all cores)."""
    _, written, data = recovery_log
    n = written["records"]
    benchmark.group = "writes: recovery"
    graph = vg.Graph(wf.DIM, "cos", **common.HNSW)
    benchmark.pedantic(graph.add_nodes, args=(data.keys[:n], data.vectors[:n]), rounds=1, iterations=1)
    common.record(benchmark, nodes=n, nodes_per_s=n / benchmark.stats.stats.min)


# ------------------------------------------------------------------------------------- search over a delta


@pytest.fixture(scope="module")
def delta():
    dd = wf.DeltaData(DELTA, DELTA, DELTA, 2000)
    path = _folder("delta")
    live, _ = dd.build_node_delta(path, DELTA_BATCH)
    fresh, _ = dd.build_fresh()
    graphs = {"dd": dd, "live": live, "fresh": fresh}
    yield graphs
    live.close()
    shutil.rmtree(path, ignore_errors=True)


def _search_benchmark(benchmark, graph, qs, **extra):
    wall, cpu = wf.search_timings(graph, qs)
    figures = wf.summary(wall, cpu)
    common.record(
        benchmark,
        p50_us=figures["p50_us"],
        p99_us=figures["p99_us"],
        cpu_p50_us=figures["cpu_p50_us"],
        **extra,
    )
    cycle = itertools.cycle(qs)
    benchmark(lambda: graph.search(next(cycle), **common.SEARCH))
    return figures


@pytest.mark.parametrize("state", ["fresh", "node_delta", "node_delta_compacted"])
def bench_search_node_delta(benchmark, delta, state):
    """Search with DELTA nodes added DELTA_BATCH at a time after a DELTA-node base (with the edges
    they complete, left in the delta), the same graph after compact(), and the same nodes and edges
    built fresh."""
    benchmark.group = "writes: search over a node delta"
    graph = delta["fresh"] if state == "fresh" else delta["live"]
    if state == "node_delta_compacted":
        graph.compact()
    figures = _search_benchmark(benchmark, graph, delta["dd"].qs, delta_edges=graph.stats()["delta_edges"])
    STATE.setdefault("node_delta_p50", {})[state] = figures["p50_us"]
    if state != "fresh" and "fresh" in STATE["node_delta_p50"]:
        common.record(benchmark, p50_ratio_vs_fresh=figures["p50_us"] / STATE["node_delta_p50"]["fresh"])


@pytest.mark.parametrize("state", ["edge_delta", "edge_compacted"])
def bench_search_edge_delta(benchmark, delta, state):
    """Search with DELTA held-back edges added DELTA_BATCH at a time to the fresh graph (left in
    the delta), then after compact()."""
    benchmark.group = "writes: search over an edge delta"
    graph = delta["fresh"]
    if state == "edge_delta":
        delta["dd"].add_held_edges(graph, DELTA_BATCH)
    else:
        graph.compact()
    figures = _search_benchmark(benchmark, graph, delta["dd"].qs, delta_edges=graph.stats()["delta_edges"])
    STATE.setdefault("edge_delta_p50", {})[state] = figures["p50_us"]
    if state == "edge_compacted" and "edge_delta" in STATE["edge_delta_p50"]:
        common.record(
            benchmark, delta_p50_ratio_vs_compacted=STATE["edge_delta_p50"]["edge_delta"] / figures["p50_us"]
        )


@pytest.mark.parametrize("phase", ["idle", "compacting"])
def bench_search_during_compaction(benchmark, delta, phase):
    """Search on the fresh graph (all nodes and edges) while nothing else runs, and while another
    thread adds 1,000 edges and calls compact(), back to back."""
    benchmark.group = "writes: search during compaction"
    graph, dd = delta["fresh"], delta["dd"]
    graph.compact()
    wf.search_phase(graph, dd.qs, 1.0)
    cycle = itertools.cycle(dd.qs)
    if phase == "idle":
        wall, cpu = wf.search_phase(graph, dd.qs, 5.0)
        benchmark(lambda: graph.search(next(cycle), **common.SEARCH))
        extra = {}
    else:
        with wf.Compactor(graph, dd) as compactor:
            wall, cpu = wf.search_phase(graph, dd.qs, 5.0)
            benchmark(lambda: graph.search(next(cycle), **common.SEARCH))
        extra = compactor.figures()
    figures = wf.summary(wall, cpu)
    STATE.setdefault("compaction_p99", {})[phase] = figures["p99_us"]
    if phase == "compacting" and "idle" in STATE["compaction_p99"]:
        extra["p99_ratio_vs_idle"] = figures["p99_us"] / STATE["compaction_p99"]["idle"]
    common.record(
        benchmark,
        p50_us=figures["p50_us"],
        p99_us=figures["p99_us"],
        cpu_p99_us=figures["cpu_p99_us"],
        **extra,
    )
