"""Write-path figures of durable graphs (``Graph.open``), each against a baseline measured in
the same run, printed as one markdown table with the targets.

    python bench/write_figures.py                          # default sizes (about 5-8 min here)
    python bench/write_figures.py --large                  # also one-node writes at 1M nodes (+3-4 min)
    python bench/write_figures.py --json bench/results/writes.json
    python bench/write_figures.py --table-from bench/results/writes.json   # re-print a table
    python bench/write_figures.py --only commit recovery   # some sections only

Sections (``--only`` names):

* ``single``: a graph of ``--n`` nodes (384-d, 5 edges per node) built with one add_nodes and
  one add_edges batch (ingest throughput: nodes/s including the HNSW inserts, edges/s), then
  ``--single-nodes`` one-node add_nodes calls (wall and thread CPU time per call; the HNSW
  insert of one node runs in the calling thread) and ``--single-edges`` one-edge add_edges
  calls between random nodes (also straight on the binding, without the Python facade).
  Once in a ``Graph.open`` folder with sync="off", once in an in-memory ``Graph`` (the
  baseline). ``--large`` adds the folder graph at ``--large-n`` nodes.
* ``commit``: sync="always", one one-node add_nodes (dim 64) per commit, from 1 thread and
  from 4 threads for ``--commit-seconds`` each, in alternating rounds, a fresh folder each
  time; commits/s and the 4-vs-1 ratio (group commit). Also sync="off" from 1 thread, the
  same with one-edge add_edges commits (no HNSW insert inside the serialised write), and a
  raw 512-byte append + fdatasync in the same file system.
* ``recovery``: a WAL of one-node add_nodes records (384-d), written until ``--recovery-n``
  records or ``--recovery-write-budget`` seconds, whichever comes first; then ``Graph.open``
  replays it, twice: with the HNSW parameters it was written with (connectivity 2,
  expansion 1: the HNSW part of the replay is negligible) and, after the MANIFEST's HNSW block
  is set to the defaults (``common.HNSW``: 24 / 128 / 64), with the real index. The same nodes added to an
  in-memory graph in one batch (2 threads) show what the HNSW inserts alone cost.
* ``delta``: ``--delta-base`` nodes built in one batch (folder, sync="off",
  auto_compact_edges=0), then ``--delta-nodes`` more nodes added ``--delta-batch`` at a time,
  each batch followed by the edges it completes (they stay in the delta); search latency
  against the same nodes and edges built fresh in one batch and compacted. Then
  ``--delta-edges`` held-back edges added ``--delta-edge-batch`` at a time to the fresh graph
  (they stay in the delta), against the same graph after ``compact()``.
* ``compaction``: on the fresh graph of ``delta`` (all nodes, all edges), one thread searches
  in a loop while another adds 1,000 edges and calls ``compact()``, back to back (compact()
  returns at once when there is nothing to fold); search p50 / p99 against idle phases
  before and after, and, as a control, beside a process that only burns CPU.

Search everywhere: ``search(q, k=10, seeds=8, hops=2, max_visited=2000)`` (bench/common.py),
perf_counter_ns and thread CPU time around each call. Temporary folders go under ``--tmp``
(default /tmp; the file system type is printed).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import threading
import time
from typing import Optional

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # first: it pins the BLAS / OpenMP pools to one thread before NumPy loads
import numpy as np
import vecgraph as vg
from vecgraph import storage
from vecgraph.synthetic import clustered_graph, queries

DIM = common.DIM
SEARCH = common.SEARCH
HNSW = common.HNSW
CHEAP_HNSW = {"connectivity": 2, "expansion_add": 1, "expansion_search": 1}
COMMIT_DIM = 64

TARGETS = {
    "one_node_p50_us": 300.0,  # at 1M nodes
    "one_edge_p50_us": 10.0,
    "ingest_nodes_per_s": 10_000.0,
    "ingest_edges_per_s": 1_000_000.0,
    "group_commit_ratio": 3.0,
    "replay_records_per_s": 200_000.0,
    "delta_p50_ratio": 1.5,
    "compaction_p99_ratio": 2.0,
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def fresh_folder(root: str, name: str) -> str:
    """An empty path for a graph folder under root, named after this process so that two runs
    on one machine never share (or delete) each other's folders."""
    path = os.path.join(root, f"{name}.{os.getpid()}")
    shutil.rmtree(path, ignore_errors=True)
    return path


def filesystem(path: str) -> str:
    try:
        out = subprocess.run(
            ["df", "-T", path], capture_output=True, text=True, check=True
        ).stdout.splitlines()
        fields = out[-1].split()
        return f"{fields[1]} ({fields[0]} on {fields[-1]})"
    except (OSError, subprocess.CalledProcessError, IndexError):
        return "unknown"


def core_build() -> str:
    """Path and modification time of the loaded C++ extension, and the repository's commit
    (which build was measured)."""
    path = vg._core.__file__
    built = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(os.path.getmtime(path)))
    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    try:
        commit = subprocess.run(
            ["git", "-C", repo, "log", "-1", "--format=%h %ci"], capture_output=True, text=True, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "-C", repo, "status", "--porcelain", "--", "cpp", "python"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
        commit += " (cpp/ or python/ modified)" if dirty else ""
    except (OSError, subprocess.CalledProcessError):
        commit = "unknown"
    return f"{path} built {built} UTC; repository at {commit}"


def rel_names(data, mask) -> list:
    names = data.rel_names
    return [names[i] for i in data.rel_ids[mask].tolist()]


def timed(fn, *args, **kwargs) -> tuple[float, float]:
    """(wall seconds, process CPU seconds) of one call."""
    cpu0, t0 = common.cpu_seconds(), time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - t0, common.cpu_seconds() - cpu0


def summary(wall_ns: np.ndarray, cpu_ns: np.ndarray) -> dict:
    w, c = common.latency(wall_ns), common.latency(cpu_ns)
    return {
        "p50_us": w["p50_us"],
        "p90_us": w["p90_us"],
        "p99_us": w["p99_us"],
        "mean_us": w["mean_us"],
        "max_us": float(wall_ns.max() / 1e3) if wall_ns.size else 0.0,
        "count": w["count"],
        "cpu_p50_us": c["p50_us"],
        "cpu_p99_us": c["p99_us"],
    }


# ------------------------------------------------------------------------------- 1. single writes, ingest


def single_write_data(n: int, count_single: int, seed: int = 0):
    """Data of n + count_single nodes; the first n form the graph, the rest are added one by one."""
    data = clustered_graph(n + count_single, dim=DIM, edges_per_node=5, seed=seed)
    base = (data.src < n) & (data.dst < n)
    return data, base


def ingest(graph: vg.Graph, data, n: int, base_edges: np.ndarray) -> dict:
    """One add_nodes batch of the first n nodes, one add_edges batch of the edges among them."""
    rels = rel_names(data, base_edges)
    src, dst, weights = data.src[base_edges], data.dst[base_edges], data.weights[base_edges]
    nodes_s, nodes_cpu = timed(graph.add_nodes, data.keys[:n], data.vectors[:n])
    edges_s, edges_cpu = timed(graph.add_edges, src, dst, rels=rels, weights=weights)
    return {
        "nodes": n,
        "edges": int(src.size),
        "add_nodes_s": nodes_s,
        "add_nodes_cpu_s": nodes_cpu,
        "nodes_per_s": n / nodes_s,
        "add_edges_s": edges_s,
        "add_edges_cpu_s": edges_cpu,
        "edges_per_s": src.size / edges_s,
    }


def one_node_writes(graph: vg.Graph, data, first: int, count: int) -> dict:
    """add_nodes([key], vector[None]) for keys first .. first+count-1, each timed."""
    keys = [[int(k)] for k in range(first, first + count)]
    rows = [data.vectors[k : k + 1] for k in range(first, first + count)]
    wall, cpu = common.time_calls_wall_cpu(lambda i: graph.add_nodes(keys[i], rows[i]), range(count))
    return summary(wall, cpu)


def one_edge_writes(graph: vg.Graph, n: int, count: int, seed: int = 0) -> dict:
    """add_edges([src], [dst], rels="related", weights=0.5) between random existing nodes, each timed."""
    rng = np.random.default_rng(seed)
    pairs = [([int(a)], [int(b)]) for a, b in rng.integers(0, n, size=(count, 2))]
    for src, dst in pairs[:50]:  # warm-up (also present in the timed set: parallel edges are allowed)
        graph.add_edges(src, dst, rels="related", weights=0.5)
    wall, cpu = common.time_calls_wall_cpu(
        lambda p: graph.add_edges(p[0], p[1], rels="related", weights=0.5), pairs
    )
    out = summary(wall, cpu)
    # The same call on the binding, without the Python facade's argument checks.
    engine, rels, weights = graph._engine, ["related"], np.array([0.5], dtype=np.float32)
    raw_pairs = [([int(a)], [int(b)]) for a, b in rng.integers(0, n, size=(count, 2))]
    wall, cpu = common.time_calls_wall_cpu(
        lambda p: engine.add_edges(p[0], p[1], rels, weights, None, None, None, None), raw_pairs
    )
    out["raw_binding"] = summary(wall, cpu)
    return out


def single_section(
    tmp: str, n: int, count_nodes: int, count_edges: int, kinds=("folder_off", "memory")
) -> dict:
    data, base = single_write_data(n, count_nodes)
    out: dict = {"n": n, "load_average_start": common.load_average()}
    for kind in kinds:
        if kind == "folder_off":
            path = fresh_folder(tmp, f"vg_single_{n}")
            graph = vg.Graph.open(path, dim=DIM, metric="cos", sync="off", **HNSW)
        else:
            path, graph = None, vg.Graph(DIM, "cos", **HNSW)
        figures = {"ingest": ingest(graph, data, n, base)}
        log(
            f"single n={n} {kind}: ingest {figures['ingest']['nodes_per_s']:,.0f} nodes/s, "
            f"{figures['ingest']['edges_per_s']:,.0f} edges/s"
        )
        figures["one_node"] = one_node_writes(graph, data, n, count_nodes)
        figures["one_edge"] = one_edge_writes(graph, n, count_edges)
        log(
            f"single n={n} {kind}: one-node p50 {figures['one_node']['p50_us']:,.1f} µs, "
            f"one-edge p50 {figures['one_edge']['p50_us']:,.2f} µs"
        )
        if path:
            figures["folder_bytes"] = storage.folder_bytes(path)
            graph.close()
            shutil.rmtree(path, ignore_errors=True)
        del graph
        out[kind] = figures
    out["load_average_end"] = common.load_average()
    return out


# ------------------------------------------------------------------------------------- 2. group commit


def commit_rate(
    path: str, threads: int, seconds: float, sync: str = "always", dim: int = COMMIT_DIM, write: str = "node"
) -> dict:
    """One write per commit from `threads` threads for `seconds`, on a new graph in `path`:
    a one-node add_nodes (`write="node"`), or a one-edge add_edges between two of 4,096 nodes
    added first (`write="edge"`: no HNSW insert, the cheapest write)."""
    shutil.rmtree(path, ignore_errors=True)
    graph = vg.Graph.open(path, dim=dim, metric="cos", sync=sync)
    vectors = np.random.default_rng(threads).standard_normal((4096, dim)).astype(np.float32)
    if write == "edge":
        graph.add_nodes(np.arange(-4096, 0), vectors)
    counts = [0] * threads
    start = threading.Barrier(threads + 1)
    deadline = [0.0]

    def worker(t: int) -> None:
        start.wait()
        i, stop = t, deadline[0]
        while time.perf_counter() < stop:
            if write == "node":
                graph.add_nodes([i], vectors[i % 4096 : i % 4096 + 1])
            else:
                graph.add_edges([-1 - i % 4096], [-1 - (i * 7 + 1) % 4096])
            counts[t] += 1
            i += threads

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    deadline[0] = time.perf_counter() + seconds
    t0 = time.perf_counter()
    start.wait()
    for thread in pool:
        thread.join()
    elapsed = time.perf_counter() - t0
    graph.close()
    shutil.rmtree(path, ignore_errors=True)
    return {
        "threads": threads,
        "commits": sum(counts),
        "seconds": elapsed,
        "commits_per_s": sum(counts) / elapsed,
    }


def fixed_commits(graph: vg.Graph, threads: int, count: int, vectors: np.ndarray) -> float:
    """`count` one-node add_nodes commits (keys 0..count-1) split over `threads` threads;
    returns the wall seconds from the first to the last."""
    start = threading.Barrier(threads + 1)

    def worker(t: int) -> None:
        start.wait()
        for i in range(t, count, threads):
            graph.add_nodes([i], vectors[i % len(vectors) : i % len(vectors) + 1])

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for thread in pool:
        thread.start()
    t0 = time.perf_counter()
    start.wait()
    for thread in pool:
        thread.join()
    return time.perf_counter() - t0


def raw_fdatasync(path: str, count: int = 300) -> dict:
    """512-byte appends, each followed by fdatasync: what one commit costs on this file system."""
    os.makedirs(path, exist_ok=True)
    name = os.path.join(path, f"vg_fdatasync.{os.getpid()}.bin")
    fd = os.open(name, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    ns = np.empty(count, dtype=np.int64)
    block = b"\x01" * 512
    try:
        for i in range(count):
            os.write(fd, block)
            t0 = time.perf_counter_ns()
            os.fdatasync(fd)
            ns[i] = time.perf_counter_ns() - t0
    finally:
        os.close(fd)
        os.unlink(name)
    return {
        "p50_us": float(np.percentile(ns, 50) / 1e3),
        "mean_us": float(ns.mean() / 1e3),
        "syncs_per_s": float(1e9 / ns.mean()),
    }


def commit_section(tmp: str, seconds: float, rounds: int) -> dict:
    path = fresh_folder(tmp, "vg_commit")
    out: dict = {
        "fs": filesystem(tmp),
        "dim": COMMIT_DIM,
        "seconds": seconds,
        "rounds": [],
        "load_average_start": common.load_average(),
    }
    out["raw_fdatasync"] = raw_fdatasync(tmp)
    for r in range(rounds):
        one = commit_rate(path, 1, seconds)
        four = commit_rate(path, 4, seconds)
        out["rounds"].append(
            {
                "threads_1": one["commits_per_s"],
                "threads_4": four["commits_per_s"],
                "ratio": four["commits_per_s"] / one["commits_per_s"],
            }
        )
        log(
            f"commit round {r + 1}: 1 thread {one['commits_per_s']:,.0f}/s, 4 threads "
            f"{four['commits_per_s']:,.0f}/s ({four['commits_per_s'] / one['commits_per_s']:.2f}x)"
        )
    out["threads_1_median"] = float(np.median([x["threads_1"] for x in out["rounds"]]))
    out["threads_4_median"] = float(np.median([x["threads_4"] for x in out["rounds"]]))
    out["ratio_of_medians"] = out["threads_4_median"] / out["threads_1_median"]
    out["sync_off_1_thread"] = commit_rate(path, 1, seconds, sync="off")["commits_per_s"]
    edge = [
        (
            commit_rate(path, 1, seconds, write="edge")["commits_per_s"],
            commit_rate(path, 4, seconds, write="edge")["commits_per_s"],
        )
        for _ in range(max(1, rounds - 1))
    ]
    out["edge_threads_1_median"] = float(np.median([a for a, _ in edge]))
    out["edge_threads_4_median"] = float(np.median([b for _, b in edge]))
    out["edge_ratio_of_medians"] = out["edge_threads_4_median"] / out["edge_threads_1_median"]
    out["edge_sync_off_1_thread"] = commit_rate(path, 1, seconds, sync="off", write="edge")["commits_per_s"]
    log(
        f"commit, one-edge writes: 1 thread {out['edge_threads_1_median']:,.0f}/s, 4 threads "
        f"{out['edge_threads_4_median']:,.0f}/s ({out['edge_ratio_of_medians']:.2f}x)"
    )
    out["load_average_end"] = common.load_average()
    return out


# ------------------------------------------------------------------------------------- 3. recovery


def write_one_node_log(path: str, vectors: np.ndarray, limit: int, budget_s: float, hnsw: dict) -> dict:
    """A new graph in `path` with sync="off" and one add_nodes record per node, until `limit`
    records or `budget_s` seconds; returns what was written."""
    shutil.rmtree(path, ignore_errors=True)
    graph = vg.Graph.open(path, dim=vectors.shape[1], metric="cos", sync="off", **hnsw)
    t0 = time.perf_counter()
    count = 0
    checkpoints = []
    while count < limit:
        end = min(limit, count + 1000)
        for k in range(count, end):
            graph.add_nodes([k], vectors[k : k + 1])
        count = end
        elapsed = time.perf_counter() - t0
        if count % 10_000 == 0:
            checkpoints.append((count, elapsed))
        if elapsed > budget_s:
            break
    write_s = time.perf_counter() - t0
    graph.close()
    return {
        "records": count,
        "write_s": write_s,
        "writes_per_s": count / write_s,
        "wal_bytes": storage.folder_bytes(os.path.join(path, storage.WAL_DIR)),
        "progress": checkpoints,
    }


def timed_open(path: str, background: bool = False, qs: Optional[np.ndarray] = None) -> dict:
    """Graph.open of ``path``; with ``background``, also the searches run while the HNSW pass
    is running (``qs``, p50) and the time until it ends."""
    cpu0, t0 = common.cpu_seconds(), time.perf_counter()
    graph = vg.Graph.open(path, sync="off", background_indexing=background)
    wall, cpu = time.perf_counter() - t0, common.cpu_seconds() - cpu0
    report = dict(graph._recovery)
    count = len(graph)
    out = {
        "open_s": wall,
        "open_cpu_s": cpu,
        "replayed": int(report.get("replayed", 0)),
        "nodes": count,
        "records_per_s": report.get("replayed", 0) / wall,
        "report": report,
        "pending_at_open": int(graph.stats()["index_pending"]),
    }
    if background:
        if qs is not None:
            ns = []
            for q in qs:
                started = time.perf_counter_ns()
                graph.search(q, **SEARCH)
                ns.append(time.perf_counter_ns() - started)
            out["search_during_p50_us"] = float(np.percentile(ns, 50)) / 1e3
        graph.wait_for_indexing()
        out["indexed_s"] = time.perf_counter() - t0
    graph.close()
    return out


def set_manifest_hnsw(path: str, hnsw: dict) -> None:
    manifest = storage.read_manifest(path)
    manifest["hnsw"] = dict(hnsw)
    storage.write_manifest(path, manifest)


def recovery_section(tmp: str, limit: int, budget_s: float) -> dict:
    data = clustered_graph(limit, dim=DIM, edges_per_node=1, seed=11)
    path = fresh_folder(tmp, "vg_recovery")
    out: dict = {"dim": DIM, "load_average_start": common.load_average()}
    out["write"] = write_one_node_log(path, data.vectors, limit, budget_s, CHEAP_HNSW)
    n = out["write"]["records"]
    log(
        f"recovery: wrote {n:,} one-node records in {out['write']['write_s']:.1f}s "
        f"({out['write']['wal_bytes'] / 2**20:.1f} MiB of WAL)"
    )
    out["open_cheap_hnsw"] = timed_open(path)
    log(f"recovery: open with connectivity 2 / expansion 1: {out['open_cheap_hnsw']['open_s']:.2f}s")
    set_manifest_hnsw(path, HNSW)
    out["open_default_hnsw"] = timed_open(path)
    log(f"recovery: open with the default HNSW: {out['open_default_hnsw']['open_s']:.2f}s")
    out["open_background"] = timed_open(path, background=True, qs=data.vectors[:20])
    log(f"recovery: open with the default HNSW in the background: returns in "
        f"{out['open_background']['open_s']:.2f}s, indexed after {out['open_background']['indexed_s']:.2f}s")
    memory = vg.Graph(DIM, "cos", **HNSW)
    wall, cpu = timed(memory.add_nodes, data.keys[:n], data.vectors[:n])
    out["memory_batch"] = {"add_nodes_s": wall, "add_nodes_cpu_s": cpu, "nodes_per_s": n / wall}
    del memory
    shutil.rmtree(path, ignore_errors=True)
    out["load_average_end"] = common.load_average()
    return out


# ------------------------------------------------------------------------------- 4. delta, 5. compaction


def search_timings(graph: vg.Graph, qs: np.ndarray, warmup: int = 100) -> tuple[np.ndarray, np.ndarray]:
    return common.time_calls_wall_cpu(lambda q: graph.search(q, **SEARCH), qs, warmup=warmup)


def interleaved(graphs: dict, qs: np.ndarray, blocks: int = 4) -> dict:
    """Search latency of each graph, timed in alternating blocks of the same queries."""
    for g in graphs.values():
        search_timings(g, qs[:200], warmup=0)
    parts = {name: ([], []) for name in graphs}
    for block in np.array_split(np.arange(len(qs)), blocks):
        for name, g in graphs.items():
            wall, cpu = search_timings(g, qs[block], warmup=0)
            parts[name][0].append(wall)
            parts[name][1].append(cpu)
    return {name: summary(np.concatenate(w), np.concatenate(c)) for name, (w, c) in parts.items()}


def recall_vs_exact(graph: vg.Graph, qs: np.ndarray) -> float:
    found = [graph.search(q, **SEARCH).keys for q in qs]
    exact = [graph.search(q, **SEARCH, exact=True).keys for q in qs]
    return common.recall(found, exact)


class DeltaData:
    """A clustered graph of base_n + delta_n nodes, its queries, and a random set of
    ``held_edges`` edges held back (added later, one batch at a time, as an edge delta)."""

    def __init__(
        self, base_n: int, delta_n: int, held_edges: int, count_queries: int, seed: int = 21
    ) -> None:
        self.base_n, self.delta_n, self.n = base_n, delta_n, base_n + delta_n
        self.data = data = clustered_graph(self.n, dim=DIM, edges_per_node=5, seed=seed)
        self.qs = queries(data, count_queries, seed=seed + 1)
        rng = np.random.default_rng(seed + 2)
        self.held = np.zeros(data.count_edges, dtype=bool)
        self.held[rng.choice(data.count_edges, size=min(held_edges, data.count_edges), replace=False)] = True
        self.kept = ~self.held
        self.rels = np.array(data.rel_names, dtype=object)[data.rel_ids]

    def add_edges(self, graph: vg.Graph, ids: np.ndarray) -> None:
        d = self.data
        graph.add_edges(d.src[ids], d.dst[ids], rels=self.rels[ids].tolist(), weights=d.weights[ids])

    def build_node_delta(self, path: str, batch: int) -> tuple[vg.Graph, float]:
        """A folder graph (sync="off", auto_compact_edges=0): the base nodes in one batch with the
        kept edges among them, compacted; then the other nodes `batch` at a time, each batch
        followed by the kept edges it completes, all left in the delta. Returns (graph, seconds
        spent on the small batches)."""
        d, base_n, n = self.data, self.base_n, self.n
        graph = vg.Graph.open(path, dim=DIM, metric="cos", sync="off", auto_compact_edges=0, **HNSW)
        base_edges = self.kept & (d.src < base_n) & (d.dst < base_n)
        graph.add_nodes(d.keys[:base_n], d.vectors[:base_n])
        self.add_edges(graph, np.flatnonzero(base_edges))
        graph.compact()
        rest = np.flatnonzero(self.kept & ~base_edges)
        ready = (np.maximum(d.src[rest], d.dst[rest]) - base_n) // batch
        order = np.argsort(ready, kind="stable")
        rest, ready = rest[order], ready[order]
        bounds = np.searchsorted(ready, np.arange(1, (self.delta_n + batch - 1) // batch + 1))
        t0 = time.perf_counter()
        begin = 0
        for b, first in enumerate(range(base_n, n, batch)):
            graph.add_nodes(d.keys[first : first + batch], d.vectors[first : first + batch])
            if bounds[b] > begin:
                self.add_edges(graph, rest[begin : bounds[b]])
            begin = bounds[b]
        return graph, time.perf_counter() - t0

    def build_fresh(self) -> tuple[vg.Graph, float]:
        """The same nodes and kept edges in one batch each, compacted (in memory,
        auto_compact_edges=0 so that the held-back edges added later stay in the delta)."""
        d = self.data
        graph = vg.Graph(DIM, "cos", auto_compact_edges=0, **HNSW)
        add_nodes_s, _ = timed(graph.add_nodes, d.keys, d.vectors)
        self.add_edges(graph, np.flatnonzero(self.kept))
        graph.compact()
        return graph, add_nodes_s

    def add_held_edges(self, graph: vg.Graph, batch: int) -> float:
        ids = np.flatnonzero(self.held)
        t0 = time.perf_counter()
        for first in range(0, ids.size, batch):
            self.add_edges(graph, ids[first : first + batch])
        return time.perf_counter() - t0


def delta_section(
    tmp: str,
    base_n: int,
    delta_n: int,
    batch: int,
    delta_edges: int,
    edge_batch: int,
    count_queries: int,
    count_recall: int,
    state: dict,
) -> dict:
    dd = DeltaData(base_n, delta_n, delta_edges, count_queries)
    qs, rq = dd.qs, dd.qs[:count_recall]
    out: dict = {
        "base_nodes": base_n,
        "delta_nodes": delta_n,
        "batch": batch,
        "edges": int(dd.kept.sum()),
        "load_average_start": common.load_average(),
    }
    path = fresh_folder(tmp, "vg_delta")
    live, out["delta_write_s"] = dd.build_node_delta(path, batch)
    out["delta_edges_in_delta"] = live.stats()["delta_edges"]
    log(
        f"delta: {delta_n:,} nodes in batches of {batch} with {out['delta_edges_in_delta']:,} delta edges, "
        f"{out['delta_write_s']:.1f}s; building the fresh graph"
    )
    fresh, out["fresh_add_nodes_s"] = dd.build_fresh()

    lat = interleaved({"node_delta": live, "fresh": fresh}, qs)
    live.compact()
    lat2 = interleaved({"node_delta_compacted": live, "fresh": fresh}, qs)
    out["nodes"] = {
        "node_delta": lat["node_delta"],
        "fresh": lat["fresh"],
        "node_delta_compacted": lat2["node_delta_compacted"],
        "fresh_2": lat2["fresh"],
        "recall_node_delta_compacted": recall_vs_exact(live, rq),
        "recall_fresh": recall_vs_exact(fresh, rq),
    }
    out["nodes"]["p50_ratio_delta_vs_fresh"] = lat["node_delta"]["p50_us"] / lat["fresh"]["p50_us"]
    out["nodes"]["p50_ratio_compacted_vs_fresh"] = (
        lat2["node_delta_compacted"]["p50_us"] / lat2["fresh"]["p50_us"]
    )
    out["nodes"]["cpu_p50_ratio_delta_vs_fresh"] = (
        lat["node_delta"]["cpu_p50_us"] / lat["fresh"]["cpu_p50_us"]
    )
    log(
        f"delta: node delta p50 {lat['node_delta']['p50_us']:.0f} µs vs fresh {lat['fresh']['p50_us']:.0f} µs"
    )
    live.close()
    del live
    shutil.rmtree(path, ignore_errors=True)

    out["edge_delta_write_s"] = dd.add_held_edges(fresh, edge_batch)
    out["edge_delta_edges"] = fresh.stats()["delta_edges"]
    before = interleaved({"edge_delta": fresh}, qs)["edge_delta"]
    recall_delta = recall_vs_exact(fresh, rq)
    t0 = time.perf_counter()
    fresh.compact()
    out["compact_s"] = time.perf_counter() - t0
    after = interleaved({"edge_compacted": fresh}, qs)["edge_compacted"]
    out["edges"] = {
        "edge_delta": before,
        "edge_compacted": after,
        "recall_edge_delta": recall_delta,
        "recall_edge_compacted": recall_vs_exact(fresh, rq),
        "p50_ratio_delta_vs_compacted": before["p50_us"] / after["p50_us"],
        "cpu_p50_ratio_delta_vs_compacted": before["cpu_p50_us"] / after["cpu_p50_us"],
    }
    log(
        f"delta: {out['edge_delta_edges']:,} delta edges p50 {before['p50_us']:.0f} µs vs compacted "
        f"{after['p50_us']:.0f} µs"
    )
    out["load_average_end"] = common.load_average()
    out["graph_nodes"], out["graph_edges"] = len(fresh), fresh.count_edges
    state["graph"], state["delta_data"] = fresh, dd
    return out


def search_phase(graph: vg.Graph, qs: np.ndarray, seconds: float) -> tuple[np.ndarray, np.ndarray]:
    """Search in a loop over qs for `seconds`; wall and thread-CPU ns of every call."""
    wall, cpu = [], []
    clock, thread_clock = time.perf_counter_ns, time.thread_time_ns
    stop = clock() + int(seconds * 1e9)
    i = 0
    while clock() < stop:
        q = qs[i % len(qs)]
        c0 = thread_clock()
        t0 = clock()
        graph.search(q, **SEARCH)
        wall.append(clock() - t0)
        cpu.append(thread_clock() - c0)
        i += 1
    return np.array(wall, dtype=np.int64), np.array(cpu, dtype=np.int64)


class Compactor:
    """While active (a context manager), a thread adds ``edges_per_round`` edges (copies of
    random edges of ``dd``: parallel edges are allowed) and calls compact(), back to back.
    compact() returns at once when there is no delta, so each round gives it one to fold; the
    new CSR is built from every edge either way."""

    def __init__(self, graph: vg.Graph, dd: DeltaData, edges_per_round: int = 1000, seed: int = 31) -> None:
        self.graph, self.dd, self.edges_per_round = graph, dd, edges_per_round
        self.rng = np.random.default_rng(seed)
        self.durations: list = []
        self.running = threading.Event()
        self.thread: threading.Thread | None = None
        self.started = self.stopped = 0.0

    def _run(self) -> None:
        count = self.dd.data.count_edges
        while self.running.is_set():
            self.dd.add_edges(self.graph, self.rng.integers(0, count, size=self.edges_per_round))
            t0 = time.perf_counter()
            self.graph.compact()
            self.durations.append(time.perf_counter() - t0)

    def __enter__(self):
        self.running.set()
        self.thread = threading.Thread(target=self._run)
        self.started = time.perf_counter()
        self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.running.clear()
        self.thread.join()
        self.stopped = time.perf_counter()

    def figures(self) -> dict:
        busy = float(np.sum(self.durations))
        return {
            "compactions": len(self.durations),
            "compact_mean_s": busy / len(self.durations) if self.durations else 0.0,
            "compact_busy_fraction": busy / max(1e-9, self.stopped - self.started),
        }


def cpu_burner() -> subprocess.Popen:
    """A child process that only burns one core (the control for compaction figures)."""
    return subprocess.Popen([sys.executable, "-c", "while True: pass"])


def search_during_compaction(graph: vg.Graph, dd: DeltaData, seconds: float) -> dict:
    """Idle phase, compaction phase, idle phase; then, as a control, the same search loop beside
    a process that only burns CPU, to tell sharing two cores apart from waiting on the engine."""
    qs = dd.qs
    search_phase(graph, qs, 1.0)
    idle1 = search_phase(graph, qs, seconds / 2)
    with Compactor(graph, dd) as compactor:
        busy = search_phase(graph, qs, seconds)
    idle2 = search_phase(graph, qs, seconds / 2)
    burner = cpu_burner()
    try:
        time.sleep(0.2)
        burn = summary(*search_phase(graph, qs, seconds / 2))
    finally:
        burner.kill()
        burner.wait()
    idle = summary(np.concatenate([idle1[0], idle2[0]]), np.concatenate([idle1[1], idle2[1]]))
    during = summary(*busy)
    return {
        "idle": idle,
        "during": during,
        "cpu_burner": burn,
        **compactor.figures(),
        "p99_ratio": during["p99_us"] / idle["p99_us"],
        "p50_ratio": during["p50_us"] / idle["p50_us"],
        "cpu_p99_ratio": during["cpu_p99_us"] / idle["cpu_p99_us"],
        "nodes": len(graph),
        "edges": graph.count_edges,
        "load_average": common.load_average(),
    }


# ------------------------------------------------------------------------------------- table


fmt, verdict = common.fmt, common.verdict


def table(r: dict) -> str:
    m = r["machine"]
    header = (
        f"Machine: {m['cpu']}, {m['cores']} cores; vecgraph kernels: {m['isa']} "
        f"(available: {', '.join(m['isas'])}); Python {m['python']}, NumPy {m['numpy']}; "
        f"temporary folders on {r['tmp']}: {r['fs']}; engine: {r['core']}."
    )
    lines = [header, ""]
    lines.append("| # | figure | size | measured | baseline (same run) | ratio | target | verdict |")
    lines.append("|---|---|---|---:|---:|---:|---|---|")
    t = TARGETS

    def row(num, name, size, measured, base=None, ratio=None, target="", ok=None, digits=1):
        lines.append(
            f"| {num} | {name} | {size} | "
            f"{fmt(measured, digits) if not isinstance(measured, str) else measured} | "
            f"{fmt(base, digits) if not isinstance(base, str) else base} | "
            f"{'–' if ratio is None else f'{ratio:.2f}x'} | {target} | {verdict(ok)} |"
        )

    for key in ("single", "single_large"):
        s = r.get(key)
        if not s:
            continue
        n = s["n"]
        size = f"{n:,} nodes"
        f, mem = s.get("folder_off"), s.get("memory")
        at_1m = n >= 1_000_000
        on, oe = f["one_node"], f["one_edge"]
        row(
            1,
            "one-node add_nodes p50 µs, folder sync=off (thread CPU p50)",
            size,
            f"{fmt(on['p50_us'])} ({fmt(on['cpu_p50_us'])})",
            mem and mem["one_node"]["p50_us"],
            mem and on["p50_us"] / mem["one_node"]["p50_us"],
            "<= 300 µs at 1M",
            (on["p50_us"] <= t["one_node_p50_us"]) if at_1m else None,
        )
        if not at_1m:
            row(
                1,
                "  same, would-be verdict at this size",
                size,
                on["p50_us"],
                None,
                None,
                "(<= 300 µs at 1M)",
                on["p50_us"] <= t["one_node_p50_us"],
            )
        row(
            1,
            "one-edge add_edges p50 µs, folder sync=off (thread CPU p50)",
            size,
            f"{fmt(oe['p50_us'], 2)} ({fmt(oe['cpu_p50_us'], 2)})",
            mem and mem["one_edge"]["p50_us"],
            mem and oe["p50_us"] / mem["one_edge"]["p50_us"],
            "<= 10 µs",
            oe["p50_us"] <= t["one_edge_p50_us"],
            2,
        )
        if "raw_binding" in oe:
            mraw = mem and mem["one_edge"]["raw_binding"]["p50_us"]
            row(
                1,
                "  same call on the binding, without the Python facade",
                size,
                oe["raw_binding"]["p50_us"],
                mraw,
                mraw and oe["raw_binding"]["p50_us"] / mraw,
                "",
                None,
                2,
            )
        for kind, label in (("folder_off", "folder sync=off"), ("memory", "in-memory")):
            x = s.get(kind)
            if not x:
                continue
            ing = x["ingest"]
            base = s["memory"]["ingest"] if kind == "folder_off" and mem else None
            row(
                1,
                f"batch ingest nodes/s incl. HNSW, {label} (CPU s)",
                size,
                f"{fmt(ing['nodes_per_s'], 0)} ({fmt(ing['add_nodes_cpu_s'])})",
                base and base["nodes_per_s"],
                base and ing["nodes_per_s"] / base["nodes_per_s"],
                ">= 10,000/s",
                ing["nodes_per_s"] >= t["ingest_nodes_per_s"],
                0,
            )
            row(
                1,
                f"batch ingest edges/s, {label}",
                f"{ing['edges']:,} edges",
                ing["edges_per_s"],
                base and base["edges_per_s"],
                base and ing["edges_per_s"] / base["edges_per_s"],
                ">= 1,000,000/s",
                ing["edges_per_s"] >= t["ingest_edges_per_s"],
                0,
            )
    c = r.get("commit")
    if c:
        row(
            2,
            f"sync=always commits/s, 4 threads (median of {len(c['rounds'])})",
            f"dim {c['dim']}",
            c["threads_4_median"],
            c["threads_1_median"],
            c["ratio_of_medians"],
            ">= 3x of 1 thread",
            c["ratio_of_medians"] >= t["group_commit_ratio"],
            0,
        )
        ratios = ", ".join(f"{x['ratio']:.2f}x" for x in c["rounds"])
        row(
            2,
            f"  per-round 4/1 ratios: {ratios}; sync=off 1 thread {fmt(c['sync_off_1_thread'], 0)}/s; "
            f"raw fdatasync p50 {fmt(c['raw_fdatasync']['p50_us'], 0)} µs",
            c["fs"].split()[0],
            "–",
        )
        if "edge_ratio_of_medians" in c:
            row(
                2,
                f"  same with one-edge add_edges commits (no HNSW insert); sync=off 1 thread "
                f"{fmt(c['edge_sync_off_1_thread'], 0)}/s",
                f"dim {c['dim']}",
                c["edge_threads_4_median"],
                c["edge_threads_1_median"],
                c["edge_ratio_of_medians"],
                "",
                None,
                0,
            )
    rec = r.get("recovery")
    if rec:
        n = rec["write"]["records"]
        d, ch = rec["open_default_hnsw"], rec["open_cheap_hnsw"]
        bg = rec.get("open_background")
        if bg:
            row(
                3,
                "replay records/s, Graph.open returns, HNSW in the background (open s; indexed after s; "
                "search p50 while indexing, µs)",
                f"{n:,} records, {rec['dim']}-d",
                f"{fmt(bg['records_per_s'], 0)} ({fmt(bg['open_s'], 2)} s; {fmt(bg['indexed_s'], 2)} s; "
                f"{fmt(bg.get('search_during_p50_us', float('nan')), 0)})",
                None,
                None,
                ">= 200,000/s",
                bg["records_per_s"] >= t["replay_records_per_s"],
                0,
            )
        row(
            3,
            "replay records/s, Graph.open, default HNSW before it returns (open s)",
            f"{n:,} records, {rec['dim']}-d",
            f"{fmt(d['records_per_s'], 0)} ({fmt(d['open_s'], 2)} s)",
            None,
            None,
            ">= 200,000/s",
            d["records_per_s"] >= t["replay_records_per_s"],
            0,
        )
        row(
            3,
            "replay records/s, HNSW connectivity 2 / expansion 1 (open s)",
            f"{n:,} records",
            f"{fmt(ch['records_per_s'], 0)} ({fmt(ch['open_s'], 2)} s)",
            None,
            None,
            "(non-HNSW part)",
            ch["records_per_s"] >= t["replay_records_per_s"],
            0,
        )
        hnsw_s = max(0.0, d["open_s"] - ch["open_s"])
        memory_batch = rec["memory_batch"]
        row(
            3,
            "HNSW share of the default replay; in-memory one-batch add of the same nodes (s, CPU s)",
            f"{n:,} nodes",
            f"{100 * hnsw_s / d['open_s']:.0f}%",
            f"{fmt(memory_batch['add_nodes_s'], 2)} s ({fmt(memory_batch['add_nodes_cpu_s'], 2)})",
            d["open_s"] / rec["memory_batch"]["add_nodes_s"],
            "",
            None,
        )
        row(
            3,
            "writing the log: one-node add_nodes/s (connectivity 2 / expansion 1, sync=off)",
            f"{rec['write']['wal_bytes'] / 2**20:.1f} MiB WAL",
            rec["write"]["writes_per_s"],
            None,
            None,
            "",
            None,
            0,
        )
    de = r.get("delta")
    if de:
        nd, ed = de["nodes"], de["edges"]
        size = f"{de['base_nodes']:,} + {de['delta_nodes']:,} nodes"
        row(
            4,
            f"search p50 µs, {de['delta_nodes']:,}-node delta (batches of {de['batch']}, "
            f"{de['delta_edges_in_delta']:,} delta edges) vs fresh build",
            size,
            nd["node_delta"]["p50_us"],
            nd["fresh"]["p50_us"],
            nd["p50_ratio_delta_vs_fresh"],
            "<= 1.5x",
            nd["p50_ratio_delta_vs_fresh"] <= t["delta_p50_ratio"],
        )
        row(
            4,
            "  same graph after compact() vs fresh build",
            size,
            nd["node_delta_compacted"]["p50_us"],
            nd["fresh_2"]["p50_us"],
            nd["p50_ratio_compacted_vs_fresh"],
            "",
            None,
        )
        row(
            4,
            "  recall@10 vs exact=True: compacted delta graph / fresh",
            size,
            f"{nd['recall_node_delta_compacted']:.3f}",
            f"{nd['recall_fresh']:.3f}",
            None,
            "",
            None,
        )
        row(
            4,
            f"search p50 µs, {de['edge_delta_edges']:,} delta edges vs after compact()",
            f"{de['graph_nodes']:,} nodes, {de['graph_edges']:,} edges",
            ed["edge_delta"]["p50_us"],
            ed["edge_compacted"]["p50_us"],
            ed["p50_ratio_delta_vs_compacted"],
            "<= 1.5x",
            ed["p50_ratio_delta_vs_compacted"] <= t["delta_p50_ratio"],
        )
        row(
            4,
            "  thread CPU p50 µs, same two states",
            "",
            ed["edge_delta"]["cpu_p50_us"],
            ed["edge_compacted"]["cpu_p50_us"],
            ed["cpu_p50_ratio_delta_vs_compacted"],
            "",
            None,
        )
    co = r.get("compaction")
    if co:
        size = f"{co['nodes']:,} nodes, {co['edges']:,} edges"
        row(
            5,
            f"search p99 µs during compactions ({co['compactions']} x {co['compact_mean_s']:.2f} s, "
            f"{100 * co['compact_busy_fraction']:.0f}% of the phase) vs idle",
            size,
            co["during"]["p99_us"],
            co["idle"]["p99_us"],
            co["p99_ratio"],
            "<= 2x",
            co["p99_ratio"] <= t["compaction_p99_ratio"],
        )
        row(
            5,
            "  p50 µs, same phases",
            size,
            co["during"]["p50_us"],
            co["idle"]["p50_us"],
            co["p50_ratio"],
            "",
            None,
        )
        row(
            5,
            "  thread CPU p99 µs, same phases",
            size,
            co["during"]["cpu_p99_us"],
            co["idle"]["cpu_p99_us"],
            co["cpu_p99_ratio"],
            "",
            None,
        )
        if "cpu_burner" in co:
            row(
                5,
                "  control: p99 µs beside a CPU-burning process (no engine calls) vs idle",
                size,
                co["cpu_burner"]["p99_us"],
                co["idle"]["p99_us"],
                co["cpu_burner"]["p99_us"] / co["idle"]["p99_us"],
                "",
                None,
            )
    return "\n".join(lines)


# ------------------------------------------------------------------------------------- main


SECTIONS = ("single", "commit", "recovery", "delta", "compaction")


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--only", nargs="*", choices=SECTIONS, help="sections to run (default: all)")
    parser.add_argument("--tmp", default="/tmp", help="where the temporary graph folders go")
    parser.add_argument("--n", type=int, default=100_000, help="nodes of the single-write graph")
    parser.add_argument("--single-nodes", type=int, default=300, help="timed one-node add_nodes calls")
    parser.add_argument("--single-edges", type=int, default=2000, help="timed one-edge add_edges calls")
    parser.add_argument(
        "--large", action="store_true", help="also the single-write section at --large-n (folder only)"
    )
    parser.add_argument("--large-n", type=int, default=1_000_000)
    parser.add_argument("--large-single-nodes", type=int, default=30)
    parser.add_argument("--commit-seconds", type=float, default=3.0)
    parser.add_argument("--commit-rounds", type=int, default=3)
    parser.add_argument("--recovery-n", type=int, default=200_000, help="one-node records to write (at most)")
    parser.add_argument(
        "--recovery-write-budget", type=float, default=40.0, help="seconds; stops writing early"
    )
    parser.add_argument("--delta-base", type=int, default=100_000)
    parser.add_argument("--delta-nodes", type=int, default=100_000)
    parser.add_argument("--delta-batch", type=int, default=1000)
    parser.add_argument("--delta-edges", type=int, default=100_000)
    parser.add_argument("--delta-edge-batch", type=int, default=1000)
    parser.add_argument("--queries", type=int, default=2000)
    parser.add_argument("--recall-queries", type=int, default=200)
    parser.add_argument("--compaction-seconds", type=float, default=6.0)
    parser.add_argument("--json", help="write the raw figures here")
    parser.add_argument("--table-from", help="print the table of an earlier --json file and exit")
    args = parser.parse_args()
    if args.table_from:
        with open(args.table_from) as f:
            print(table(json.load(f)))
        return
    sections = args.only or list(SECTIONS)
    if "compaction" in sections and "delta" not in sections:
        sections.append("delta")
    os.makedirs(args.tmp, exist_ok=True)
    results: dict = {
        "machine": common.machine(),
        "tmp": args.tmp,
        "fs": filesystem(args.tmp),
        "core": core_build(),
        "args": vars(args),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "load_average_start": common.load_average(),
    }
    log(f"isa {vg.active_isa()}, {results['fs']}, load {results['load_average_start']:.2f}")
    t0 = time.perf_counter()
    timings = {}
    state: dict = {}
    for section in SECTIONS:
        if section not in sections:
            continue
        s0 = time.perf_counter()
        if section == "single":
            results["single"] = single_section(args.tmp, args.n, args.single_nodes, args.single_edges)
            if args.large:
                results["single_large"] = single_section(
                    args.tmp, args.large_n, args.large_single_nodes, args.single_edges, kinds=("folder_off",)
                )
        elif section == "commit":
            results["commit"] = commit_section(args.tmp, args.commit_seconds, args.commit_rounds)
        elif section == "recovery":
            results["recovery"] = recovery_section(args.tmp, args.recovery_n, args.recovery_write_budget)
        elif section == "delta":
            results["delta"] = delta_section(
                args.tmp,
                args.delta_base,
                args.delta_nodes,
                args.delta_batch,
                args.delta_edges,
                args.delta_edge_batch,
                args.queries,
                args.recall_queries,
                state,
            )
        elif section == "compaction":
            results["compaction"] = search_during_compaction(
                state["graph"], state["delta_data"], args.compaction_seconds
            )
        timings[section] = time.perf_counter() - s0
        log(f"{section} done in {timings[section]:.0f}s")
    results["section_s"] = timings
    results["total_s"] = time.perf_counter() - t0
    results["load_average_end"] = common.load_average()
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1, default=float)
    print(table(results))
    print(
        f"\nTotal {results['total_s']:.0f} s ("
        + ", ".join(f"{k} {v:.0f} s" for k, v in timings.items())
        + f"); load average {results['load_average_start']:.2f} at start, "
        f"{results['load_average_end']:.2f} at end."
    )


if __name__ == "__main__":
    main()
