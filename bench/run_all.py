"""Run every measurement at N=100,000 and N=1,000,000 nodes and print markdown tables.

    python bench/run_all.py                      # both sizes, kernels; a few minutes at 1M
    python bench/run_all.py --sizes 100000       # one size
    python bench/run_all.py --json results.json  # also write the raw figures
    python bench/run_all.py --tables-from a.json b.json  # tables of earlier runs, merged

Each size runs in its own child process (clean RSS readings, memory returned between sizes):
generate a clustered graph (5 edges per node, 384-d), build vecgraph and the baseline
(bench/baseline.py), then measure, interleaving vecgraph and baseline in blocks so that the
noise of a shared machine hits both alike (each variant's timed block follows 200 untimed
calls of its own on other queries, so that no variant pays for the caches another one emptied):

* single-thread latency of ``search(q, k=10, seeds=8, hops=2, max_visited=2000)``
  (perf_counter_ns around each call), of its seeds-only (hops=0) and one-hop parts, of the
  raw binding call, and of ``exact=True``;
* recall@10 against vecgraph ``exact=True`` and against float32 exact search (brute-force
  float32 seeds, the same expansion, float32 scores), and of int8 against float32 scoring
  of the same visited set;
* ``search_batch`` throughput on 1 and 2 threads;
* build: add_nodes (quantization + HNSW), add_edges, first search (CSR), RSS growth.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # first: it pins the BLAS / OpenMP pools to one thread before NumPy loads
import numpy as np
import vecgraph as vg
from baseline import Baseline, Float32Reference, exact_seeds_f32

WARMUP_PER_BLOCK = 200  # untimed calls of each variant before each of its timed blocks

TARGETS = {
    # N: (p50 us, p99 us or None, min speedup or None)
    100_000: (100.0, None, None),
    1_000_000: (250.0, 1000.0, 10.0),
}


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", file=sys.stderr, flush=True)


def measure_size(n: int, count_queries: int, count_recall: int, count_exact: int, blocks: int) -> dict:
    figures: dict = {"n": n, "machine": common.machine(), "load_average_start": common.load_average()}
    data, qs, figures["generate_s"] = common.make_data(n, count_queries)
    figures["edges"] = data.count_edges
    figures["intra_cluster_fraction"] = data.intra_cluster_fraction()
    figures["max_degree"] = int(data.degrees().max())
    log(f"n={n}: generated in {figures['generate_s']:.1f}s, {data.count_edges} edges; building vecgraph")

    graph, figures["build"] = common.build_graph(data)
    started = time.perf_counter()
    vg.quantize(data.vectors)  # the quantization part of add_nodes, alone (one thread; the engine uses all cores)
    figures["build"]["quantize_1_thread_s"] = time.perf_counter() - started
    log(f"n={n}: vecgraph built, add_nodes {figures['build']['add_nodes_s']:.1f}s; building the baseline")
    base = Baseline(data.vectors, data.src, data.dst, data.weights, **common.HNSW,
                    cache_path=common.baseline_cache_path(data))
    figures["baseline_build"] = {"index_build_s": base.index_build_s, "csr_build_s": base.csr_build_s,
                                 "index_cached": base.index_cached}
    log(f"n={n}: baseline built, usearch {base.index_build_s:.1f}s; timing")

    search = common.SEARCH
    engine = graph._engine
    raw_args = graph._search_args(search["k"], search["seeds"], search["hops"], search["max_visited"],
                                  search["max_fanout"], "both", None, None, None, None, None, 1.0, False, None)
    variants = {
        "vecgraph": lambda q: graph.search(q, **search),
        "vecgraph_raw_binding": lambda q: engine.search(q, *raw_args),
        "vecgraph_hops0": lambda q: graph.search(q, **{**search, "hops": 0}),
        "vecgraph_hops1": lambda q: graph.search(q, **{**search, "hops": 1}),
        "baseline": lambda q: base.search(q, **search),
        "baseline_seeds": lambda q: base.seeds(q, search["seeds"]),
    }
    for fn in variants.values():  # warm-up: page in the vectors, grow the scratch
        common.time_calls(fn, qs[:200])
    timings: dict = {name: [] for name in variants}
    cpu_timings: dict = {name: [] for name in variants}
    for block in np.array_split(np.arange(count_queries), blocks):
        # Queries of the other blocks warm each variant up before its timed block: the variant
        # before it (the baseline's float32 index, at 1M) has just pushed its data out of the
        # caches, and without this the first few hundred calls of whichever variant comes first
        # pay for refilling them.
        warm = qs[np.setdiff1d(np.arange(count_queries), block)[:WARMUP_PER_BLOCK]]
        for name, fn in variants.items():
            for q in warm:
                fn(q)
            wall, cpu = common.time_calls_wall_cpu(fn, qs[block])
            timings[name].append(wall)
            cpu_timings[name].append(cpu)
    figures["latency"] = {name: common.latency(np.concatenate(parts)) for name, parts in timings.items()}
    figures["latency_cpu"] = {name: common.latency(np.concatenate(parts)) for name, parts in cpu_timings.items()}
    figures["latency"]["vecgraph_exact"] = common.latency(
        common.time_calls(lambda q: graph.search(q, **search, exact=True), qs[:count_exact], warmup=3))
    visited = [graph.search(q, **search).count_visited for q in qs[:count_recall]]
    figures["mean_visited"] = float(np.mean(visited))
    log(f"n={n}: latency done; recall")

    rq = qs[:count_recall]
    found = {
        "vecgraph": [graph.search(q, **search).keys for q in rq],
        "vecgraph_exact": [graph.search(q, **search, exact=True).keys for q in rq],
        "baseline": [base.search(q, **search)[0] for q in rq],
    }
    reference = Float32Reference(data.vectors, base.adjacency)
    started = time.perf_counter()
    found["float32_exact"] = reference.search_many(rq, seed_ids=exact_seeds_f32(data.vectors, rq, search["seeds"]),
                                                   **search)
    figures["float32_reference_s"] = time.perf_counter() - started
    rec = {}
    for name in ("vecgraph", "baseline", "vecgraph_exact"):
        rec[f"{name}_vs_vecgraph_exact"] = common.recall(found[name], found["vecgraph_exact"])
        rec[f"{name}_vs_float32_exact"] = common.recall(found[name], found["float32_exact"])
    rec["int8_vs_float32_same_visited"] = common.int8_vs_float32_recall(graph, data.vectors, rq)
    for ef in common.OTHER_EFS:
        ef_found = [graph.search(q, **search, ef=ef).keys for q in rq]
        rec[f"vecgraph_ef{ef}_vs_vecgraph_exact"] = common.recall(ef_found, found["vecgraph_exact"])
        rec[f"vecgraph_ef{ef}_vs_float32_exact"] = common.recall(ef_found, found["float32_exact"])
        figures["latency"][f"vecgraph_ef{ef}"] = common.latency(
            common.time_calls(lambda q, ef=ef: graph.search(q, **search, ef=ef), qs[:count_recall], warmup=50))
    other_ef = common.OTHER_EFS[0]
    base.index.expansion_search = other_ef
    rec[f"baseline_ef{other_ef}_vs_float32_exact"] = common.recall([base.search(q, **search)[0] for q in rq],
                                                                  found["float32_exact"])
    figures["latency"][f"baseline_ef{other_ef}"] = common.latency(
        common.time_calls(lambda q: base.search(q, **search), qs[:count_recall], warmup=50))
    base.index.expansion_search = common.HNSW["expansion_search"]
    figures["recall"] = rec
    log(f"n={n}: recall done; batch throughput")

    one, two = (common.batch_throughput(graph, qs, t) for t in (1, 2))
    figures["batch_qps"] = {"threads_1": one["qps"], "threads_2": two["qps"],
                            "speedup_2_vs_1": two["qps"] / one["qps"],
                            "cpu_normalised_2_vs_1": two["qps_per_cpu_s"] / one["qps_per_cpu_s"]}
    figures["load_average_end"] = common.load_average()
    return figures


# ------------------------------------------------------------------------------------- tables


fmt, verdict = common.fmt, common.verdict


def tables(results: list[dict], kernels: list[dict]) -> str:
    lines = []
    if results:
        m = results[0]["machine"]
        lines.append(f"Machine: {m['cpu']}, {m['cores']} cores; vecgraph kernels: {m['isa']} "
                     f"(available: {', '.join(m['isas'])}); Python {m['python']}, NumPy {m['numpy']}.")
        lines.append("")
    lines.append("### Search, single thread (k=10, seeds=8, hops=2, max_visited=2000, max_fanout=256; "
                 f"HNSW M={common.HNSW['connectivity']}, ef_construction={common.HNSW['expansion_add']})")
    lines.append("")
    lines.append("| N (edges) | engine | p50 µs | p90 µs | p99 µs | qps | recall@10 vs exact=True | "
                 "recall@10 vs float32 exact |")
    lines.append("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in results:
        lat, rec = r["latency"], r["recall"]
        size = f"{r['n']:,} ({r['edges']:,})"
        ef = common.HNSW["expansion_search"]
        rows = [(f"vecgraph ef={ef} (default)", "vecgraph", "vecgraph_vs_vecgraph_exact", "vecgraph_vs_float32_exact")]
        rows += [(f"vecgraph ef={e}", f"vecgraph_ef{e}", f"vecgraph_ef{e}_vs_vecgraph_exact",
                  f"vecgraph_ef{e}_vs_float32_exact") for e in common.OTHER_EFS]
        rows += [
            ("vecgraph exact=True", "vecgraph_exact", None, "vecgraph_exact_vs_float32_exact"),
            (f"baseline ef={ef} (usearch f32 + scipy + numpy)", "baseline", "baseline_vs_vecgraph_exact",
             "baseline_vs_float32_exact"),
        ]
        rows += [(f"baseline ef={e}", f"baseline_ef{e}", None, f"baseline_ef{e}_vs_float32_exact")
                 for e in common.OTHER_EFS[:1]]
        rows = [row for row in rows if row[1] in lat]
        for label, lkey, r1, r2 in rows:
            l = lat[lkey]
            lines.append(f"| {size} | {label} | {fmt(l['p50_us'])} | {fmt(l['p90_us'])} | {fmt(l['p99_us'])} | "
                         f"{fmt(l['qps'], 0)} | {fmt(rec.get(r1), 3) if r1 else '–'} | {fmt(rec.get(r2), 3)} |")
    if any("latency_cpu" in r for r in results):
        lines.append("")
        lines.append("Thread CPU time per call (`time.thread_time_ns`; excludes time the OS gave the core to "
                     "other processes on this shared machine):")
        lines.append("")
        lines.append("| N | engine | CPU p50 µs | CPU p90 µs | CPU p99 µs | speed-up vs baseline (p50) |")
        lines.append("|---|---|---:|---:|---:|---:|")
        for r in results:
            cl = r.get("latency_cpu")
            if not cl:
                continue
            for label, key in (("vecgraph", "vecgraph"), ("vecgraph seeds only (hops=0)", "vecgraph_hops0"),
                               ("vecgraph hops=1", "vecgraph_hops1"), ("vecgraph raw binding", "vecgraph_raw_binding"),
                               ("baseline", "baseline"), ("baseline seeds only", "baseline_seeds")):
                s = cl["baseline"]["p50_us"] / cl["vecgraph"]["p50_us"] if key == "vecgraph" else None
                lines.append(f"| {r['n']:,} | {label} | {fmt(cl[key]['p50_us'])} | {fmt(cl[key]['p90_us'])} | "
                             f"{fmt(cl[key]['p99_us'])} | {f'{s:.1f}x' if s else '–'} |")
    lines.append("")
    lines.append("### Speed-up, breakdown and threads")
    lines.append("")
    lines.append("| N | p50 speed-up vs baseline | mean speed-up | seeds only (hops=0) p50 µs | hops=1 p50 µs | "
                 "traversal+scoring p50 µs | raw binding p50 µs | facade overhead µs (p50 difference, ±5 noise) | mean visited | "
                 "baseline seeds p50 µs | int8 vs float32 recall@10 (same visited) | batch qps 1 thr | 2 thr | 2 vs 1 | "
                 "2 vs 1 per CPU-s | load avg (start, end) |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    for r in results:
        lat, b = r["latency"], r["batch_qps"]
        lines.append(
            f"| {r['n']:,} | {lat['baseline']['p50_us'] / lat['vecgraph']['p50_us']:.1f}x | "
            f"{lat['baseline']['mean_us'] / lat['vecgraph']['mean_us']:.1f}x | {fmt(lat['vecgraph_hops0']['p50_us'])} | "
            f"{fmt(lat['vecgraph_hops1']['p50_us'])} | "
            f"{fmt(lat['vecgraph']['p50_us'] - lat['vecgraph_hops0']['p50_us'])} | "
            f"{fmt(lat['vecgraph_raw_binding']['p50_us'])} | "
            f"{fmt(lat['vecgraph']['p50_us'] - lat['vecgraph_raw_binding']['p50_us'])} | {fmt(r['mean_visited'], 0)} | "
            f"{fmt(lat['baseline_seeds']['p50_us'])} | {fmt(r['recall']['int8_vs_float32_same_visited'], 3)} | "
            f"{fmt(b['threads_1'], 0)} | {fmt(b['threads_2'], 0)} | {b['speedup_2_vs_1']:.2f}x | "
            f"{b.get('cpu_normalised_2_vs_1', float('nan')):.2f} | "
            f"{r.get('load_average_start', float('nan')):.1f}, {r.get('load_average_end', float('nan')):.1f} |")
    lines.append("")
    lines.append("### Build from NumPy arrays and memory")
    lines.append("")
    lines.append("| N | generate s | add_nodes s (quantize + HNSW) | add_nodes CPU s | add_edges s | "
                 "first search s (CSR) | add_edges + CSR s | graph RSS MB | peak RSS MB | "
                 "stats: vectors / csr / hnsw / keys MB | baseline usearch build s | baseline CSR s |")
    lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|---|---:|---:|")
    for r in results:
        bd, st = r["build"], r["build"]["stats"]
        mb = lambda x: x / 2**20
        lines.append(
            f"| {r['n']:,} | {r['generate_s']:.1f} | {bd['add_nodes_s']:.1f} | {fmt(bd.get('add_nodes_cpu_s'))} | "
            f"{bd['add_edges_s']:.2f} | {bd['first_search_s']:.2f} | {bd['add_edges_s'] + bd['first_search_s']:.2f} | "
            f"{mb(bd['graph_rss_bytes']):,.0f} | {mb(bd['peak_rss_bytes']):,.0f} | "
            f"{mb(st['vector_bytes']):,.0f} / {mb(st['csr_bytes']):,.0f} / {mb(st['hnsw_bytes']):,.0f} / "
            f"{mb(st['key_bytes']):,.0f} | {r['baseline_build']['index_build_s']:.1f} | "
            f"{r['baseline_build']['csr_build_s']:.2f} |")
    if kernels:
        lines.append("")
        lines.append("### int8 kernels, dim 384 (2,000 random rows of 1M: gather; 100k consecutive rows: scan)")
        lines.append("")
        lines.append("| ISA | gather µs | gather Mrows/s | gather GB/s | vs serial | scan ms | scan Mrows/s | "
                     "scan GB/s | vs serial |")
        lines.append("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
        for k in kernels:
            lines.append(
                f"| {k['isa']} | {k['gather_us']:.1f} | {k['gather_rows_per_s'] / 1e6:.1f} | "
                f"{k['gather_gb_per_s']:.1f} | {k['gather_speedup_vs_serial']:.1f}x | {k['scan_ms']:.2f} | "
                f"{k['scan_rows_per_s'] / 1e6:.1f} | {k['scan_gb_per_s']:.1f} | {k['scan_speedup_vs_serial']:.1f}x |")
    lines.append("")
    lines.append("### Targets")
    lines.append("")
    lines.append("| target | measured | verdict |")
    lines.append("|---|---|---|")
    for r in results:
        n, lat = r["n"], r["latency"]
        p50_target, p99_target, speedup_target = TARGETS.get(n, (None, None, None))
        cpu = r.get("latency_cpu", {}).get("vecgraph")
        if p50_target:
            extra = f" (thread CPU time: {cpu['p50_us']:.0f} µs, {verdict(cpu['p50_us'] <= p50_target)})" if cpu else ""
            lines.append(f"| N={n:,}: p50 <= {p50_target:.0f} µs | {lat['vecgraph']['p50_us']:.0f} µs wall{extra} | "
                         f"{verdict(lat['vecgraph']['p50_us'] <= p50_target)} |")
        if p99_target:
            extra = f" (thread CPU time: {cpu['p99_us']:.0f} µs, {verdict(cpu['p99_us'] <= p99_target)})" if cpu else ""
            lines.append(f"| N={n:,}: p99 <= {p99_target:.0f} µs | {lat['vecgraph']['p99_us']:.0f} µs wall{extra} | "
                         f"{verdict(lat['vecgraph']['p99_us'] <= p99_target)} |")
        if speedup_target:
            rb = r["recall"]["baseline_vs_float32_exact"]
            # The fastest vecgraph setting whose recall vs float32 exact is at least the baseline's.
            keys = [("vecgraph", f"ef={common.HNSW['expansion_search']}")]
            keys += [(f"vecgraph_ef{e}", f"ef={e}") for e in common.OTHER_EFS if f"vecgraph_ef{e}" in lat]
            candidates = [(lat[key]["p50_us"], label, r["recall"][f"{key}_vs_float32_exact"]) for key, label in keys]
            ok = [c for c in candidates if c[2] >= rb]
            p50, label, rv = min(ok) if ok else max(candidates, key=lambda c: c[2])
            s = lat["baseline"]["p50_us"] / p50
            lines.append(f"| N={n:,}: >= {speedup_target:.0f}x baseline at equal or better recall@10 | "
                         f"vecgraph {label}: {s:.1f}x (p50 {p50:.0f} vs {lat['baseline']['p50_us']:.0f} µs), "
                         f"recall vs float32 exact {rv:.3f} vs baseline {rb:.3f} | "
                         f"{verdict(s >= speedup_target and rv >= rb)} |")
        b = r["batch_qps"]["speedup_2_vs_1"]
        lines.append(f"| N={n:,}: search_batch 2 threads >= 1.7x 1 thread | {b:.2f}x | {verdict(b >= 1.7)} |")
        rv = r["recall"]["vecgraph_vs_vecgraph_exact"]
        note = "" if n <= 100_000 else " (the 100k test's threshold, for reference)"
        lines.append(f"| N={n:,}: recall@10 vs exact=True >= 0.98 (default ef={common.HNSW['expansion_search']}){note} | "
                     f"{rv:.3f} | {verdict(rv >= 0.98)} |")
        ri = r["recall"]["int8_vs_float32_same_visited"]
        lines.append(f"| N={n:,}: int8 vs float32 recall@10 >= 0.97 | {ri:.3f} | {verdict(ri >= 0.97)} |")
        if n >= 1_000_000:
            bd = r["build"]
            not_hnsw = bd["add_edges_s"] + bd["first_search_s"]
            quantize = bd.get("quantize_1_thread_s", 0.0)
            lines.append(f"| N={n:,}: build, all but HNSW <= 15 s | add_edges + CSR {not_hnsw:.1f} s, + quantization "
                         f"{quantize:.1f} s (one thread, alone) | {verdict(not_hnsw + quantize <= 15)} |")
            cpu = bd.get("add_nodes_cpu_s")
            extra = (f" wall; add_nodes used {cpu:.0f} CPU-s, {cpu / bd['add_nodes_s']:.1f} cores on average"
                     if cpu else " wall")
            lines.append(f"| N={n:,}: build with HNSW <= 300 s | {bd['add_nodes_s'] + not_hnsw:.0f} s{extra} | "
                         f"{verdict(bd['add_nodes_s'] + not_hnsw <= 300)} |")
            mem = bd["graph_rss_bytes"]
            lines.append(f"| N={n:,}: memory <= 1.2 GB | {mem / 1e9:.2f} GB RSS growth "
                         f"({bd['stats_total_bytes'] / 1e9:.2f} GB in stats()) | {verdict(mem <= 1.2e9)} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--sizes", type=int, nargs="*", default=[100_000, 1_000_000])
    parser.add_argument("--queries", type=int, default=2000, help="timed queries per variant")
    parser.add_argument("--recall-queries", type=int, default=500)
    parser.add_argument("--exact-queries", type=int, default=200)
    parser.add_argument("--blocks", type=int, default=4, help="interleaved timing blocks")
    parser.add_argument("--no-kernels", action="store_true")
    parser.add_argument("--json", help="write the raw figures here")
    parser.add_argument("--tables-from", nargs="*", help="print the tables of earlier --json files and exit")
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--child-out", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.tables_from:
        results, kernels = [], []
        for path in args.tables_from:
            with open(path) as f:
                loaded = json.load(f)
            results += loaded["sizes"]
            kernels = loaded["kernels"] or kernels
        print(tables(sorted(results, key=lambda r: r["n"]), kernels))
        return

    if args.child is not None:
        figures = measure_size(args.child, args.queries, args.recall_queries, args.exact_queries, args.blocks)
        with open(args.child_out, "w") as f:
            json.dump(figures, f)
        return

    results = []
    for n in args.sizes:
        out = f"/tmp/vecgraph_bench_{os.getpid()}_{n}.json"
        command = [sys.executable, os.path.abspath(__file__), "--child", str(n), "--child-out", out,
                   "--queries", str(args.queries), "--recall-queries", str(args.recall_queries),
                   "--exact-queries", str(args.exact_queries), "--blocks", str(args.blocks)]
        log(f"size {n:,}: {' '.join(command[1:])}")
        subprocess.run(command, check=True)
        with open(out) as f:
            results.append(json.load(f))
        os.remove(out)
    kernels = [] if args.no_kernels else common.kernel_figures()
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"sizes": results, "kernels": kernels}, f, indent=1)
    print(tables(results, kernels))


if __name__ == "__main__":
    main()
