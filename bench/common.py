"""Measurement code shared by the pytest-benchmark suites and run_all.py.

Import this module before NumPy: it pins the BLAS / OpenMP thread pools to one thread, so
the baseline's matmuls are single-threaded like a vecgraph search.
"""

from __future__ import annotations

import os

for _var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS", "NUMEXPR_NUM_THREADS",
             "VECLIB_MAXIMUM_THREADS", "BLIS_NUM_THREADS"):
    os.environ.setdefault(_var, "1")

import gc
import platform
import time
from collections.abc import Sequence
from typing import Any, Callable, Optional

import numpy as np
import vecgraph as vg
from vecgraph import storage
from vecgraph.synthetic import SyntheticGraph, clustered_graph, queries

# The search every figure is about, and the HNSW parameters both engines get (vecgraph's
# defaults; ef 48, 96, 128 and 192 are measured too, so that the speed-up at equal recall is
# taken at the cheapest ef that reaches the baseline's recall, not the next power of two).
SEARCH = {"k": 10, "seeds": 8, "hops": 2, "max_visited": 2000, "max_fanout": 256}
HNSW = dict(storage.DEFAULT_HNSW)  # connectivity, expansion_add, expansion_search
OTHER_EFS = (48, 96, 128, 192)
DIM = 384


def env_int(name: str, default: int) -> int:
    value = os.environ.get(name, "")
    return int(value.replace("_", "")) if value else default


# Figures the pytest-benchmark suites gather, printed as one list at the end of the session.
FIGURES: dict = {}


def record(benchmark: Any, **figures: Any) -> None:
    """Attach figures to a benchmark (its JSON extra_info) and to the end-of-session list."""
    for name, value in figures.items():
        benchmark.extra_info[name] = value
        FIGURES[f"{benchmark.name}: {name}"] = f"{value:,.3f}" if isinstance(value, float) else str(value)


# ------------------------------------------------------------------------------------- memory


def rss_bytes() -> int:
    """Resident set size of this process (Linux /proc; 0 elsewhere)."""
    try:
        with open("/proc/self/statm") as f:
            return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")
    except (OSError, ValueError):
        return 0


def cpu_seconds() -> float:
    """User + system CPU seconds of this process, all threads."""
    import resource

    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def peak_rss_bytes() -> int:
    """High-water mark of the resident set size (VmHWM)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        pass
    return 0


def machine() -> dict:
    flags = ""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name") and not flags:
                    flags = line.split(":", 1)[1].strip()
    except OSError:
        pass
    return {
        "cpu": flags or platform.processor(),
        "cores": os.cpu_count(),
        "isa": vg.active_isa(),
        "isas": vg.available_isas(),
        "python": platform.python_version(),
        "numpy": np.__version__,
    }


# ------------------------------------------------------------------------------------- building


def make_data(n_nodes: int, count_queries: int, dim: int = DIM, seed: int = 0) -> tuple[SyntheticGraph, np.ndarray, float]:
    started = time.perf_counter()
    data = clustered_graph(n_nodes, dim=dim, edges_per_node=5, seed=seed)
    generate_s = time.perf_counter() - started
    return data, queries(data, count_queries, seed=seed + 1), generate_s


def build_graph(data: SyntheticGraph, threads: Optional[int] = None) -> tuple[vg.Graph, dict]:
    """A graph of ``data`` (HNSW parameters :data:`HNSW`) and its build figures.

    Figures: add_nodes_s (keys, int8 quantization and the HNSW inserts), add_edges_s (edge
    columns), first_search_s (the first search builds the CSR), graph_rss_bytes (RSS growth
    across the build; the input arrays stay alive on both sides of the difference, and the
    temporary lists the facade makes are freed before the second reading), peak_rss_bytes,
    and the engine's own per-structure byte counts.
    """
    rels = data.rels  # the caller's column, made before the first reading
    gc.collect()
    rss_before = rss_bytes()
    graph = vg.Graph(data.dim, "cos", threads=threads, **HNSW)
    cpu_before = cpu_seconds()
    started = time.perf_counter()
    graph.add_nodes(data.keys, data.vectors)
    add_nodes_s = time.perf_counter() - started
    add_nodes_cpu_s = cpu_seconds() - cpu_before
    started = time.perf_counter()
    graph.add_edges(data.src, data.dst, rels=rels, weights=data.weights)
    add_edges_s = time.perf_counter() - started
    probe = data.vectors[0]
    started = time.perf_counter()
    graph.search(probe, **SEARCH)
    first_search_s = time.perf_counter() - started
    del rels
    gc.collect()
    stats = graph.stats()
    figures = {
        "add_nodes_s": add_nodes_s,
        "add_nodes_cpu_s": add_nodes_cpu_s,  # CPU seconds of this process: wall x cores it got
        "add_edges_s": add_edges_s,
        "first_search_s": first_search_s,
        "graph_rss_bytes": rss_bytes() - rss_before,
        "peak_rss_bytes": peak_rss_bytes(),
        "stats": stats,
        "stats_total_bytes": sum(stats[k] for k in ("vector_bytes", "csr_bytes", "hnsw_bytes", "key_bytes")),
    }
    return graph, figures


def baseline_cache_path(data: SyntheticGraph, dtype: str = "f32") -> Optional[str]:
    """Where the baseline's USearch index for ``data`` is cached (bench/results/cache/), named by
    a fingerprint of the vectors and the HNSW parameters; None when VECGRAPH_BENCH_NO_CACHE is set."""
    if os.environ.get("VECGRAPH_BENCH_NO_CACHE"):
        return None
    import zlib

    v = data.vectors
    fingerprint = zlib.crc32(v[:64].tobytes() + v[-64:].tobytes()) ^ zlib.crc32(data.dst[-4096:].tobytes())
    name = (f"usearch_{dtype}_n{data.count_nodes}_d{data.dim}_M{HNSW['connectivity']}_"
            f"efc{HNSW['expansion_add']}_{fingerprint:08x}.usearch")
    return os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "cache", name)


# ------------------------------------------------------------------------------------- timing


def time_calls(fn: Callable[[Any], Any], items: Sequence[Any], warmup: int = 0) -> np.ndarray:
    """int64 nanoseconds of fn(item) for each item (perf_counter_ns around each call)."""
    return time_calls_wall_cpu(fn, items, warmup)[0]


def time_calls_wall_cpu(fn: Callable[[Any], Any], items: Sequence[Any], warmup: int = 0) -> tuple[np.ndarray, np.ndarray]:
    """(wall, cpu) int64 nanoseconds of fn(item) for each item: perf_counter_ns and the calling
    thread's CPU time (thread_time_ns). A single-thread search runs in the calling thread, so its
    CPU time is its latency minus the time the OS gave the core to other processes: the figure
    to read on a shared, loaded machine (cache interference from the others remains)."""
    for item in items[:warmup]:
        fn(item)
    wall = np.empty(len(items), dtype=np.int64)
    cpu = np.empty(len(items), dtype=np.int64)
    clock, thread_clock = time.perf_counter_ns, time.thread_time_ns
    for i, item in enumerate(items):
        started_cpu = thread_clock()
        started = clock()
        fn(item)
        wall[i] = clock() - started
        cpu[i] = thread_clock() - started_cpu
    return wall, cpu


def latency(ns: np.ndarray) -> dict:
    """p50 / p99 / mean in microseconds and single-thread throughput (queries/s)."""
    us = ns / 1e3
    return {
        "p50_us": float(np.percentile(us, 50)),
        "p90_us": float(np.percentile(us, 90)),
        "p99_us": float(np.percentile(us, 99)),
        "mean_us": float(us.mean()),
        "qps": float(1e6 / us.mean()),
        "count": int(us.size),
    }


def recall(found: Sequence[Sequence[int]], reference: Sequence[Sequence[int]], k: int = 10) -> float:
    """Mean over queries of |found[:k] & reference[:k]| / |reference[:k]|."""
    hits = total = 0
    for a, b in zip(found, reference):
        b = list(b)[:k]
        hits += len(set(list(a)[:k]) & set(b))
        total += len(b)
    return hits / total if total else 1.0


def int8_vs_float32_recall(graph: vg.Graph, vectors: np.ndarray, qs: np.ndarray, k: int = 10, **params) -> float:
    """Recall@k of vecgraph's int8 top k against float32 scoring of the same visited set.

    ``search(k=max_visited)`` returns every visited node; its first k are the int8 top k,
    and rescoring all of them in float32 gives the float32 top k over the same set.
    """
    params = {**SEARCH, **params}
    max_visited = params["max_visited"]
    params["k"] = max_visited
    found, reference = [], []
    for q in qs:
        result = graph.search(q, **params)
        keys = np.asarray(result.keys, dtype=np.int64)
        found.append(keys[:k])
        scores = vectors[keys] @ q
        order = np.lexsort((keys, -scores))[:k]
        reference.append(keys[order])
    return recall(found, reference, k)


def batch_throughput(graph: vg.Graph, qs: np.ndarray, threads: int, repeats: int = 3) -> dict:
    """``search_batch`` on ``threads`` threads, best of ``repeats``: queries per wall-clock second,
    and queries per CPU-second of this process (on a shared machine a second thread may not get a
    core of its own; CPU-normalised throughput still shows whether the engine scales: it stays
    flat when it does and drops under lock contention)."""
    cpu_s = cpu_seconds
    best_wall = best_cpu = 0.0
    for _ in range(repeats):
        cpu0, started = cpu_s(), time.perf_counter()
        graph.search_batch(qs, threads=threads, **SEARCH)
        wall, cpu = time.perf_counter() - started, cpu_s() - cpu0
        best_wall = max(best_wall, qs.shape[0] / wall)
        best_cpu = max(best_cpu, qs.shape[0] / max(cpu, 1e-9))
    return {"qps": best_wall, "qps_per_cpu_s": best_cpu}


def fmt(value, digits=1) -> str:
    """A table cell: thousands separators, `digits` decimals for floats, "–" for None."""
    if value is None:
        return "–"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return f"{value:,}"


def verdict(ok) -> str:
    """A target's verdict cell: met, **missed**, or "–" when there is no target."""
    return "–" if ok is None else ("met" if ok else "**missed**")


def load_average() -> float:
    try:
        return os.getloadavg()[0]
    except OSError:
        return float("nan")


# ------------------------------------------------------------------------------------- kernels


def kernel_figures(count_base_rows: int = 1_000_000, count_gather: int = 2_000, count_scan: int = 100_000,
                   dim: int = DIM, repeats: int = 50, seed: int = 0) -> list[dict]:
    """rows/s and GB/s of dot_rows_i8 (random gather) and scan_i8 (consecutive rows) per ISA."""
    from vecgraph import _core

    rng = np.random.default_rng(seed)
    base = rng.integers(-127, 128, size=(count_base_rows, dim), dtype=np.int8)
    query = rng.integers(-127, 128, size=dim, dtype=np.int8)
    scan_base = base[:count_scan]
    out = []
    for isa in vg.available_isas():
        gather_rounds = []
        for _ in range(repeats):
            rows = rng.integers(0, count_base_rows, size=count_gather, dtype=np.uint32)
            started = time.perf_counter_ns()
            _core.dot_rows_i8(query, base, rows, isa)
            gather_rounds.append(time.perf_counter_ns() - started)
        scan_rounds = []
        for _ in range(max(3, repeats // 10)):
            started = time.perf_counter_ns()
            _core.scan_i8(query, scan_base, isa)
            scan_rounds.append(time.perf_counter_ns() - started)
        gather_s = float(np.median(gather_rounds)) / 1e9
        scan_s = float(np.median(scan_rounds)) / 1e9
        out.append({
            "isa": isa,
            "gather_us": gather_s * 1e6,
            "gather_rows_per_s": count_gather / gather_s,
            "gather_gb_per_s": count_gather * dim / gather_s / 1e9,
            "scan_ms": scan_s * 1e3,
            "scan_rows_per_s": count_scan / scan_s,
            "scan_gb_per_s": count_scan * dim / scan_s / 1e9,
        })
    serial = out[0]
    for row in out:
        row["gather_speedup_vs_serial"] = serial["gather_us"] / row["gather_us"]
        row["scan_speedup_vs_serial"] = serial["scan_ms"] / row["scan_ms"]
    return out
