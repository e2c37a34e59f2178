"""A sharded graph (``vecgraph.distributed.ShardedGraph``, shards as Ray actors on one machine)
against one in-process ``vg.Graph`` holding the same data, measured in the same run.

Data: N random unit vectors (default 100,000 x 128), 1,000 tenants (node i in tenant i mod
1,000), 2 edges a node to other nodes of its tenant, short texts (5-12 words of a 5,000-word
Zipf vocabulary) so that hybrid_search has BM25 terms. Queries: a random node's vector plus
noise (cosine about 0.86 to it), its tenant, and 3 words of its text. Both sides are folder
graphs (``Graph.open``, ``sync="off"``, vecgraph's HNSW defaults); the shards route by tenant.

Figures:

* latency p50 / p99 (µs, wall, one client thread; the two sides timed alternately, query by
  query) of a search routed to one tenant's shard, a hybrid_search routed to it (statistics=
  "graph", the default: the other shards send their counts of the query's terms; and
  statistics="routed": the routed shard's counts only), a fan-out search over 4 shards
  (hops=2, hops=0, hops=0 exact=True), and a fan-out hybrid_search (text + vector; and its
  bm25 channel alone), each with
  its overlap@10 with the in-process result of the same query (and the queries whose top 10
  keys come in the same order; for exact=True, whether scores are equal), the coordinator's
  CPU time per query (the calling thread: argument pickling, Ray submit and get, result
  unpickling, merge), and the shard calls per query (``ShardedGraph.counters()``);
* the Ray round trip of a call doing no work (one shard; all 4 shards) and the merge alone;
* throughput (queries/s) with 1, 2 and 4 shards driven by --threads client threads, of the
  fan-out search and of the search routed to one tenant, each with its ratio to the
  in-process graph's with the same threads, and the CPU the client process, the shard
  processes and the whole machine used meanwhile (cores); with 1 shard also of a hops=0
  exact=True scan (a long call), and all three with the actor serving one call at a time
  (``concurrency=1``) and 4 calls at once (``concurrency=4``), both given explicitly, in
  alternate rounds, the folder reopened for each (two runs of each), with the shard process's
  resident memory after each round. Every other ShardedGraph is created with the default
  ``concurrency``;
* in-process single-thread latency at N/4, N/2 and N nodes (a shard's size), fitted by
  a + b ln n to extrapolate a shard's search time to larger shards;
* memory: growth of a shard process's resident memory (RssAnon, VmRSS) while it loads N nodes,
  at --dim and at 384, per node, beside the graph's own ``stats()`` byte counts;
* an estimate for 100M nodes over 8, 16 and 32 machines built from these figures.

    python bench/bench_distributed.py [--nodes N] [--queries Q] [--dim D] [--threads T] [--out JSON]

Private API used: ``ShardedGraph._call`` for the no-op ``ping`` on one shard and for each
shard's own top 10, and ``vecgraph.distributed.sharded._merged`` to time the merge alone
(no public call does either).
"""

from __future__ import annotations

import argparse
import itertools
import json
import math
import os
import shutil
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import common  # first: pins the BLAS thread pools before NumPy loads
import numpy as np
import vecgraph as vg

K = 10
TENANTS = 1000
BATCH = 10_000
SYLLABLES = [
    "ka",
    "ro",
    "mi",
    "ten",
    "su",
    "lo",
    "vi",
    "dan",
    "pe",
    "qua",
    "zor",
    "bel",
    "nu",
    "fi",
    "ga",
    "tor",
    "hes",
    "wy",
    "jul",
    "bram",
]
#: Rounds of the 1-shard comparison of a shard actor's ``concurrency`` (explicit values, whatever
#: the default; alternating, two runs of each).
COMPARED_CONCURRENCY = (1, 4, 1, 4)
DEFAULT_OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "distributed.json")


# ------------------------------------------------------------------------------------- data


def make_data(n: int, dim: int, count_queries: int, seed: int = 0) -> dict:
    """Vectors (n, dim) float32 unit rows, tenants, texts, edges, and queries (vector, tenant, text)."""
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((n, dim), dtype=np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    tenant_ids = np.arange(n) % TENANTS
    tenants = [f"t{t}" for t in tenant_ids]
    vocab = ["".join(w) for w in itertools.product(SYLLABLES, repeat=3)]
    rng.shuffle(vocab)
    vocab = vocab[:5000]
    p = 1.0 / np.arange(1, len(vocab) + 1)
    p /= p.sum()
    lengths = rng.integers(5, 13, n)
    ids = rng.choice(len(vocab), size=int(lengths.sum()), p=p)
    bounds = np.concatenate([[0], np.cumsum(lengths)])
    words = [[vocab[j] for j in ids[bounds[i] : bounds[i + 1]]] for i in range(n)]
    texts = [" ".join(w) for w in words]
    src, dst = tenant_edges(n)
    picks = rng.integers(0, n, count_queries)
    noise = rng.standard_normal((count_queries, dim), dtype=np.float32) * np.float32(0.6 / math.sqrt(dim))
    qs = vectors[picks] + noise
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    query_texts = []
    for i in picks:
        distinct = list(dict.fromkeys(words[i]))
        chosen = rng.choice(len(distinct), size=min(3, len(distinct)), replace=False)
        query_texts.append(" ".join(distinct[j] for j in sorted(chosen)))
    return {
        "n": n,
        "dim": dim,
        "keys": list(range(n)),
        "vectors": vectors,
        "tenants": tenants,
        "texts": texts,
        "src": src,
        "dst": dst,
        "qs": qs,
        "query_tenants": [tenants[i] for i in picks],
        "query_texts": query_texts,
    }


def tenant_edges(n: int) -> tuple[list, list]:
    """Node i (tenant i mod TENANTS, position j = i // TENANTS in it) links to the nodes 1 and 3
    positions further in its tenant (wrapping): 2 edges a node, both ends in one tenant."""
    i = np.arange(n)
    t, j = i % TENANTS, i // TENANTS
    members = n // TENANTS + (t < n % TENANTS)
    src, dst = [], []
    for step in (1, 3):
        other = ((j + step) % members) * TENANTS + t
        keep = other != i
        src.append(i[keep])
        dst.append(other[keep])
    return np.concatenate(src).tolist(), np.concatenate(dst).tolist()


# ------------------------------------------------------------------------------------- builds


def build_single(folder: str, data: dict, n: int | None = None, texts: bool = True) -> tuple[vg.Graph, float]:
    n = data["n"] if n is None else n
    started = time.perf_counter()
    g = vg.Graph.open(folder, dim=data["dim"], metric="cos", sync="off")
    for lo in range(0, n, BATCH):
        hi = min(lo + BATCH, n)
        g.add_nodes(
            data["keys"][lo:hi],
            data["vectors"][lo:hi],
            tenants=data["tenants"][lo:hi],
            texts=data["texts"][lo:hi] if texts else None,
        )
    src, dst = (data["src"], data["dst"]) if n == data["n"] else tenant_edges(n)
    g.add_edges(src, dst, rels="rel")
    g.wait_for_indexing()
    g.search(data["qs"][0], K)
    return g, time.perf_counter() - started


def proc_status(pid: int) -> dict:
    """VmRSS, RssAnon, RssFile, RssShmem of a process, in bytes."""
    out = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            name = line.split(":", 1)[0]
            if name in ("VmRSS", "RssAnon", "RssFile", "RssShmem"):
                out[name] = int(line.split()[1]) * 1024
    return out


def cpu_s(pid: int) -> float:
    """User + system CPU seconds of a process (/proc/<pid>/stat)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def machine_busy_s() -> float:
    """CPU seconds all cores of the machine spent not idle (/proc/stat: every process, Ray's
    daemons and the kernel included)."""
    with open("/proc/stat") as f:
        ticks = [int(x) for x in f.readline().split()[1:9]]
    return (sum(ticks) - ticks[3] - ticks[4]) / os.sysconf("SC_CLK_TCK")


def wait_indexed(sg) -> None:
    while any(s["index_pending"] for s in sg.stats()["shards"]):
        time.sleep(0.05)


def build_sharded(prefix: str, shards: int, data: dict, dim: int | None = None) -> tuple:
    """(ShardedGraph, build seconds, per-shard memory {pid, before, after, nodes})."""
    from vecgraph.distributed import ShardedGraph

    dim = data["dim"] if dim is None else dim
    started = time.perf_counter()
    sg = ShardedGraph.create(prefix, shards=shards, dim=dim, metric="cos", shard_by="tenant", sync="off")
    pids = sg.pids()
    before = [proc_status(pid) for pid in pids]
    vectors = data["vectors"]
    half = min(
        (data["n"] // 2 + BATCH - 1) // BATCH * BATCH, (data["n"] - 1) // BATCH * BATCH
    )  # a batch start
    for lo in range(0, data["n"], BATCH):
        if lo == half:
            middle = [proc_status(pid) for pid in pids]
        hi = min(lo + BATCH, data["n"])
        sg.add_nodes(
            data["keys"][lo:hi], vectors[lo:hi], tenants=data["tenants"][lo:hi], texts=data["texts"][lo:hi]
        )
    wait_indexed(sg)
    nodes_done = [proc_status(pid) for pid in pids]
    step = 5 * BATCH
    for lo in range(0, len(data["src"]), step):
        sg.add_edges(data["src"][lo : lo + step], data["dst"][lo : lo + step], rels="rel")
    wait_indexed(sg)
    q = np.zeros(dim, np.float32)
    q[0] = 1.0
    sg.search(q, K)  # builds each shard's CSR
    build_s = time.perf_counter() - started
    stats = sg.stats()["shards"]
    memory = [
        {
            "pid": pid,
            "before": b,
            "middle": m,
            "nodes_done": d,
            "after": proc_status(pid),
            "nodes": s["nodes"],
            "edges": s["edges"],
            "stats": {
                k: s[k] for k in ("vector_bytes", "csr_bytes", "hnsw_bytes", "key_bytes", "text_bytes")
            },
        }
        for pid, b, m, d, s in zip(pids, before, middle, nodes_done, stats)
    ]
    memory[0]["rows_before_middle"] = half
    return sg, build_s, memory


# ------------------------------------------------------------------------------------- timing


def paired(sharded, single, count: int, warmup: int = 50) -> dict:
    """Time ``sharded(i)`` and ``single(i)`` for i < count, alternating which runs first;
    their results, wall ns, and the calling thread's CPU ns of the sharded call."""
    for i in range(min(warmup, count)):
        sharded(i)
        single(i)
    wall_a, wall_b, cpu_a = (np.empty(count, np.int64) for _ in range(3))
    res_a, res_b = [None] * count, [None] * count
    clock, thread_clock = time.perf_counter_ns, time.thread_time_ns
    for i in range(count):
        for which in (0, 1) if i % 2 == 0 else (1, 0):
            if which == 0:
                c0, t0 = thread_clock(), clock()
                res_a[i] = sharded(i)
                wall_a[i], cpu_a[i] = clock() - t0, thread_clock() - c0
            else:
                t0 = clock()
                res_b[i] = single(i)
                wall_b[i] = clock() - t0
    return {
        "sharded": res_a,
        "single": res_b,
        "sharded_ns": wall_a,
        "single_ns": wall_b,
        "coordinator_cpu_ns": cpu_a,
    }


def keys_of(result) -> list:
    return [h.key for h in result.hits] if hasattr(result, "hits") else list(result.keys)


def overlap(a: list, b: list) -> float:
    return common.recall([keys_of(r) for r in a], [keys_of(r) for r in b], K)


def pct(ns: np.ndarray) -> dict:
    us = ns / 1e3
    return {
        "p50_us": float(np.percentile(us, 50)),
        "p99_us": float(np.percentile(us, 99)),
        "mean_us": float(us.mean()),
    }


def compare(name: str, sharded, single, count: int, exact: bool = False, sg=None) -> dict:
    """Paired latency of ``sharded(i)`` and ``single(i)``, overlap@10, and (given ``sg``) the
    shard calls per sharded query by kind, from ``sg.counters()`` around the run."""
    before = sg.counters() if sg is not None else None
    run = paired(sharded, single, count)
    row = {
        "name": name,
        "queries": count,
        "sharded": pct(run["sharded_ns"]),
        "in_process": pct(run["single_ns"]),
        "coordinator_cpu": pct(run["coordinator_cpu_ns"]),
        "overlap_at_10": overlap(run["sharded"], run["single"]),
        "same_top10_queries": sum(
            keys_of(a)[:K] == keys_of(b)[:K] for a, b in zip(run["sharded"], run["single"])
        ),
    }
    if sg is not None:
        after, calls = sg.counters(), count + min(50, count)  # paired() warms up on min(50, count) queries
        row["shard_calls_per_query"] = {
            kind: sum(a[kind] - b[kind] for a, b in zip(after, before)) / calls
            for kind in ("search", "hybrid", "statistics")
        }
    if exact:
        same_keys = sum(keys_of(a) == keys_of(b) for a, b in zip(run["sharded"], run["single"]))
        diff = max(
            float(np.max(np.abs(np.asarray(a.scores) - np.asarray(b.scores)), initial=0.0))
            for a, b in zip(run["sharded"], run["single"])
        )
        row.update(same_keys_queries=same_keys, max_score_difference=diff)
    row["results"] = run  # dropped before the JSON is written
    return row


def throughput(fn, count_queries: int, threads: int, total: int, pids: tuple = ()) -> dict:
    """Queries per second of ``fn(i)`` called ``total`` times by ``threads`` threads, and the
    cores busy meanwhile: this (client) process's CPU seconds / wall seconds, each of ``pids``',
    and the whole machine's."""
    for i in range(min(20, total)):
        fn(i % count_queries)
    counter = itertools.count()
    failures: list = []

    def worker() -> None:
        try:
            while True:
                i = next(counter)
                if i >= total:
                    return
                fn(i % count_queries)
        except Exception as exc:  # noqa: BLE001  (raised in the caller's thread below)
            failures.append(exc)

    workers = [threading.Thread(target=worker) for _ in range(threads)]
    cpu0, shard_cpu0, busy0 = common.cpu_seconds(), [cpu_s(pid) for pid in pids], machine_busy_s()
    started = time.perf_counter()
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    wall = time.perf_counter() - started
    cpu1, shard_cpu1, busy1 = common.cpu_seconds(), [cpu_s(pid) for pid in pids], machine_busy_s()
    if failures:
        raise failures[0]
    return {
        "qps": total / wall,
        "client_cores": (cpu1 - cpu0) / wall,
        "shard_cores": [(b - a) / wall for a, b in zip(shard_cpu0, shard_cpu1)],
        "machine_cores": (busy1 - busy0) / wall,
    }


def ray_round_trip(sg, count: int = 1000) -> dict:
    """Wall ns of a Ray call that does no work (``ping``) on one shard (``_call``: no public
    call reaches one shard without work), and on all shards (``len(sg)``: a ping to each)."""
    one = common.time_calls(lambda _: sg._call([0], "ping", {0: ()}), list(range(count)), warmup=50)
    fan = common.time_calls(lambda _: len(sg), list(range(count)), warmup=50)
    return {"one_shard": pct(one), "all_shards": pct(fan)}


def merge_time(sg, qs: np.ndarray, count: int = 300) -> dict:
    """Wall ns of the coordinator's merge alone (``_merged`` of every shard's top 10, hops=0)."""
    from vecgraph.distributed.sharded import _merged

    every = list(range(sg.shards))
    p = {
        "k": K,
        "seeds": 8,
        "hops": 0,
        "max_visited": 2000,
        "rels": None,
        "direction": "both",
        "labels": None,
        "tenants": None,
        "ts_min": None,
        "ts_max": None,
        "max_fanout": 256,
        "hop_decay": 1.0,
        "exact": False,
        "ef": None,
        "where": None,
        "since": None,
        "until": None,
        "exclude_keys": None,
    }
    parts = [sorted(sg._call(every, "search", {s: (q, p) for s in every})[0].items()) for q in qs[:count]]
    return pct(common.time_calls(lambda part: _merged(part, K, []), parts, warmup=20))


# ------------------------------------------------------------------------------------- memory


def memory_row(memory: list, dim: int) -> dict:
    """Growth of the shard processes' memory while they loaded their nodes: over the whole load
    (edges included) per node, and the marginal cost of the second half of the nodes (what a
    node adds once the fixed buffers are allocated) plus the edges' per node."""
    nodes = sum(m["nodes"] for m in memory)
    edges = sum(m["edges"] for m in memory)
    half = memory[0]["rows_before_middle"]

    def grow(field: str, start: str, end: str) -> int:
        return sum(m[end][field] - m[start][field] for m in memory)

    stats = {f: sum(m["stats"][f] for m in memory) for f in memory[0]["stats"]}
    second_half = grow("RssAnon", "middle", "nodes_done") / (nodes - half)
    edges_per_node = grow("RssAnon", "nodes_done", "after") / nodes
    marginal = second_half + edges_per_node
    return {
        "dim": dim,
        "shards": len(memory),
        "nodes": nodes,
        "edges": edges,
        "process_rss_before_bytes": [m["before"]["VmRSS"] for m in memory],
        "rss_anon_per_node": grow("RssAnon", "before", "after") / nodes,
        "vm_rss_per_node": grow("VmRSS", "before", "after") / nodes,
        "rss_file_per_node": grow("RssFile", "before", "after") / nodes,
        "rss_anon_second_half_per_node": second_half,
        "rss_anon_edges_per_node": edges_per_node,
        "rss_anon_marginal_per_node": marginal,
        "rss_anon_fixed_bytes": grow("RssAnon", "before", "after") - marginal * nodes,
        "stats_per_node": {f: v / nodes for f, v in stats.items()},
        "stats_total_per_node": sum(stats.values()) / nodes,
    }


# ------------------------------------------------------------------------------------- main


def measure(n: int, count_queries: int, dim: int, threads: int, memory_nodes: int, work: str) -> dict:
    import ray
    from vecgraph.distributed import ShardedGraph
    from vecgraph.distributed.sharded import DEFAULT_CONCURRENCY

    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    out: dict = {
        "nodes": n,
        "dim": dim,
        "queries": count_queries,
        "client_threads": threads,
        "tenants": TENANTS,
        "machine": common.machine(),
        "ray": ray.__version__,
        "concurrency": DEFAULT_CONCURRENCY,
        "load_average_start": common.load_average(),
    }
    started = time.perf_counter()
    data = make_data(n, dim, count_queries)
    out["edges"] = len(data["src"])
    out["generate_s"] = time.perf_counter() - started
    qs, q_tenants, q_texts = data["qs"], data["query_tenants"], data["query_texts"]
    Q = count_queries

    g, out["in_process_build_s"] = build_single(os.path.join(work, "single"), data)
    sg4, out["sharded4_build_s"], mem4 = build_sharded(os.path.join(work, "sg4"), 4, data)
    print(
        f"{n:,} nodes x {dim}, {out['edges']:,} edges; build: in-process {out['in_process_build_s']:.1f} s, "
        f"4 shards {out['sharded4_build_s']:.1f} s (concurrency={DEFAULT_CONCURRENCY}, the default)",
        flush=True,
    )

    # ---- latency with recall, 4 shards routed by tenant
    def routed_hybrid(statistics: str):
        return lambda i: sg4.hybrid_search(
            q_texts[i], qs[i], K, tenants=[q_tenants[i]], statistics=statistics
        )

    rows = [
        compare(
            "routed: one tenant (1 of 4 shards)",
            lambda i: sg4.search(qs[i], K, tenants=[q_tenants[i]]),
            lambda i: g.search(qs[i], K, tenants=[q_tenants[i]]),
            Q,
            sg=sg4,
        ),
        compare(
            'routed hybrid_search, statistics="graph"',
            routed_hybrid("graph"),
            lambda i: g.hybrid_search(q_texts[i], qs[i], K, tenants=[q_tenants[i]]),
            Q,
            sg=sg4,
        ),
        compare(
            'routed hybrid_search, statistics="routed"',
            routed_hybrid("routed"),
            lambda i: g.hybrid_search(q_texts[i], qs[i], K, tenants=[q_tenants[i]]),
            Q,
            sg=sg4,
        ),
        compare(
            "fan-out search, hops=2", lambda i: sg4.search(qs[i], K), lambda i: g.search(qs[i], K), Q, sg=sg4
        ),
        compare(
            "fan-out search, hops=0",
            lambda i: sg4.search(qs[i], K, hops=0),
            lambda i: g.search(qs[i], K, hops=0),
            Q,
            sg=sg4,
        ),
        compare(
            "fan-out search, hops=0, exact=True",
            lambda i: sg4.search(qs[i], K, hops=0, exact=True),
            lambda i: g.search(qs[i], K, hops=0, exact=True),
            max(50, Q // 4),
            exact=True,
            sg=sg4,
        ),
        compare(
            "fan-out hybrid_search, text + vector",
            lambda i: sg4.hybrid_search(q_texts[i], qs[i], K),
            lambda i: g.hybrid_search(q_texts[i], qs[i], K),
            Q,
            sg=sg4,
        ),
        compare(
            "fan-out hybrid_search, bm25 channel only",
            lambda i: sg4.hybrid_search(q_texts[i], None, K, channels=("bm25",)),
            lambda i: g.hybrid_search(q_texts[i], None, K, channels=("bm25",)),
            max(50, Q // 4),
            sg=sg4,
        ),
    ]
    # recall of both sides against exact=True (same hops), for the approximate fan-outs
    for row, hops in ((rows[3], 2), (rows[4], 0)):
        truth = [g.search(qs[i], K, hops=hops, exact=True) for i in range(row["queries"])]
        row["sharded_recall_vs_exact"] = overlap(row["results"]["sharded"], truth)
        row["in_process_recall_vs_exact"] = overlap(row["results"]["single"], truth)
    out["latency"] = rows
    for row in rows:
        print(
            f"  {row['name']:40s} in-process p50 {row['in_process']['p50_us']:8.0f} µs  sharded p50 "
            f"{row['sharded']['p50_us']:8.0f} µs p99 {row['sharded']['p99_us']:8.0f}  overlap@10 "
            f"{row['overlap_at_10']:.3f}",
            flush=True,
        )
    out["ray_round_trip"] = ray_round_trip(sg4)
    out["merge_4_shards"] = merge_time(sg4, qs)

    # ---- throughput (fan-out and routed) and latency of the fan-out with 1, 2, 4 shards
    total = max(2 * Q, 2000)

    def fan_query(sg):
        return lambda i: sg.search(qs[i], K)

    def routed_query(sg):
        return lambda i: sg.search(qs[i], K, tenants=[q_tenants[i]])

    def exact_query(sg):  # a scan of every node: a long call, where a shard's concurrency shows
        return lambda i: sg.search(qs[i], K, hops=0, exact=True)

    single = {
        "fanout": throughput(fan_query(g), Q, threads, total),
        "fanout_1_thread": throughput(fan_query(g), Q, 1, total),
        "routed": throughput(routed_query(g), Q, threads, total),
        "exact": throughput(exact_query(g), Q, threads, total // 2),
    }
    fanout = []
    for shards in (1, 2, 4):
        if shards == 4:
            sg, build_s, memory = sg4, out["sharded4_build_s"], mem4
        else:
            sg, build_s, memory = build_sharded(os.path.join(work, f"sg{shards}"), shards, data)
        lat = compare(f"fan-out search, hops=2, {shards} shard(s)", fan_query(sg), fan_query(g), min(Q, 500))
        pids = tuple(sg.pids())
        fan = throughput(fan_query(sg), Q, threads, total, pids)
        routed = throughput(routed_query(sg), Q, threads, total, pids)
        row = {
            "shards": shards,
            "build_s": build_s,
            "fanout": fan,
            "routed": routed,
            "qps": fan["qps"],
            "qps_over_in_process": fan["qps"] / single["fanout"]["qps"],
            "routed_qps_over_in_process": routed["qps"] / single["routed"]["qps"],
            "p50_us": lat["sharded"]["p50_us"],
            "p99_us": lat["sharded"]["p99_us"],
            "in_process_p50_us": lat["in_process"]["p50_us"],
            "coordinator_cpu_p50_us": lat["coordinator_cpu"]["p50_us"],
            "overlap_at_10": lat["overlap_at_10"],
            "memory": memory_row(memory, dim),
        }
        print(
            f"  {shards} shard(s), {threads} threads: fan-out {fan['qps']:6.0f} q/s "
            f"({row['qps_over_in_process']:.2f}x in-process), routed {routed['qps']:6.0f} q/s "
            f"({row['routed_qps_over_in_process']:.2f}x); fan-out p50 {lat['sharded']['p50_us']:.0f} µs, "
            f"overlap@10 {lat['overlap_at_10']:.3f}",
            flush=True,
        )
        if shards == 1:
            # The same shard serving one call at a time (concurrency=1) and 4 at once, given
            # explicitly in alternate rounds, its folder reopened for each: two runs of each.
            row["exact"] = throughput(exact_query(sg), Q, threads, total // 2, pids)
            runs = []
            for concurrency in COMPARED_CONCURRENCY:
                sg.checkpoint()
                sg.close()
                sg = ShardedGraph.open(os.path.join(work, "sg1"), sync="off", concurrency=concurrency)
                pids = tuple(sg.pids())
                sg.search(qs[0], K)
                run = {
                    "concurrency": concurrency,
                    "fanout": throughput(fan_query(sg), Q, threads, total, pids),
                    "routed": throughput(routed_query(sg), Q, threads, total, pids),
                    "exact": throughput(exact_query(sg), Q, threads, total // 2, pids),
                }
                run["shard_memory_after"] = [proc_status(pid) for pid in pids]
                runs.append(run)
            row["concurrency_runs"] = runs
            for run in runs:
                print(
                    f"  1 shard, concurrency={run['concurrency']}: fan-out {run['fanout']['qps']:6.0f} q/s, routed "
                    f"{run['routed']['qps']:6.0f} q/s, exact=True scan {run['exact']['qps']:6.0f} q/s, shard VmRSS "
                    f"{run['shard_memory_after'][0]['VmRSS'] / 1e6:.0f} MB",
                    flush=True,
                )
        fanout.append(row)
        if shards != 4:
            sg.close()
    out["throughput"] = {
        "in_process": single,
        "in_process_qps": single["fanout"]["qps"],
        "in_process_qps_1_thread": single["fanout_1_thread"]["qps"],
        "fanout": fanout,
    }
    out["verify_4_shards"] = sg4.verify()

    # ---- a shard's search time against its size (in-process graphs of N/4, N/2, N nodes)
    scale = []
    for part in (4, 2, 1):
        size = n // part
        graph = (
            g if part == 1 else build_single(os.path.join(work, f"single-{part}"), data, size, texts=False)[0]
        )
        row = {"nodes": size}
        for hops in (2, 0):
            row[f"hops{hops}"] = pct(
                common.time_calls(
                    lambda q, graph=graph, hops=hops: graph.search(q, K, hops=hops), list(qs), warmup=50
                )
            )
        scale.append(row)
        if part != 1:
            graph.close()
    out["shard_size_scaling"] = scale
    sg4.close()
    g.close()

    # ---- memory of one shard at 384-d (the dim of common sentence embedders)
    memory = {"dim_run": fanout[0]["memory"]}
    if dim != 384 and memory_nodes:
        data384 = make_data(memory_nodes, 384, 1, seed=1)
        sg384, build_s, mem = build_sharded(os.path.join(work, "sg384"), 1, data384)
        sg384.close()
        memory["dim_384"] = dict(memory_row(mem, 384), build_s=build_s)
        del data384
    out["memory"] = memory
    out["estimate_100M"] = estimate(out)
    out["load_average_end"] = common.load_average()
    out["total_s"] = time.perf_counter() - started
    ray.shutdown()
    return out


def fit_log(scale: list, key: str) -> tuple[float, float]:
    """(a, b) of p50_us = a + b ln(nodes), least squares over the measured shard sizes."""
    x = np.log([row["nodes"] for row in scale])
    y = np.array([row[key]["p50_us"] for row in scale])
    b, a = np.polyfit(x, y, 1)
    return float(a), float(b)


def estimate(out: dict) -> list:
    """100M nodes over m machines, one shard each, fan-out search with hops >= 1 (two rounds):
    memory = a shard process before loading + the load's fixed growth + the marginal bytes per
    node (384-d when measured) x 100M / m; latency = 2 x the Ray round trip of a call doing no
    work (measured here, one shard) + a shard's search at 100M / m nodes (the a + b ln n fit of
    the in-process p50) + the coordinator's CPU per query (measured at 2 and 4 shards, both two
    rounds, extrapolated linearly in the shard count) + 2 network round trips (assumed, not
    measured: 0.1 and 0.5 ms)."""
    a, b = fit_log(out["shard_size_scaling"], "hops2")
    fan = [row for row in out["throughput"]["fanout"] if row["shards"] >= 2]
    slope, intercept = (
        float(x)
        for x in np.polyfit([row["shards"] for row in fan], [row["coordinator_cpu_p50_us"] for row in fan], 1)
    )
    ray_us = out["ray_round_trip"]["one_shard"]["p50_us"]
    mem = out["memory"].get("dim_384", out["memory"]["dim_run"])
    fixed = float(np.median(mem["process_rss_before_bytes"])) + max(0.0, mem["rss_anon_fixed_bytes"])
    rows = []
    for machines in (8, 16, 32):
        per_shard = 100_000_000 // machines
        shard_us = a + b * math.log(per_shard)
        coordinator_us = intercept + slope * machines
        rows.append(
            {
                "machines": machines,
                "nodes_per_shard": per_shard,
                "memory_per_shard_gb": (fixed + per_shard * mem["rss_anon_marginal_per_node"]) / 1e9,
                "memory_dim": mem["dim"],
                "shard_search_us": shard_us,
                "coordinator_us": coordinator_us,
                "ray_calls_us": 2 * ray_us,
                "rtt_ms_assumed": [0.1, 0.5],
                "rounds": 2,
                "latency_ms": [
                    (2 * ray_us + shard_us + coordinator_us) / 1e3 + 2 * rtt for rtt in (0.1, 0.5)
                ],
            }
        )
    return rows


def print_tables(out: dict) -> None:
    print(
        "\nlatency (µs, one client thread) | in-process p50 / p99 | sharded p50 / p99 | coordinator CPU p50 "
        "| overlap@10"
    )
    for row in out["latency"]:
        extra = ""
        if "same_keys_queries" in row:
            extra = (
                f"  same keys {row['same_keys_queries']}/{row['queries']}, max |score diff| "
                f"{row['max_score_difference']:.2g}"
            )
        if "sharded_recall_vs_exact" in row:
            extra = (
                f"  recall vs exact: sharded {row['sharded_recall_vs_exact']:.3f}, in-process "
                f"{row['in_process_recall_vs_exact']:.3f}"
            )
        extra += f"  same top 10 {row['same_top10_queries']}/{row['queries']}"
        if "shard_calls_per_query" in row:
            extra += "  calls/query " + ", ".join(
                f"{kind} {v:.2f}" for kind, v in row["shard_calls_per_query"].items() if v
            )
        print(
            f"  {row['name']:40s} {row['in_process']['p50_us']:7.0f} / {row['in_process']['p99_us']:7.0f} | "
            f"{row['sharded']['p50_us']:7.0f} / {row['sharded']['p99_us']:7.0f} | "
            f"{row['coordinator_cpu']['p50_us']:6.0f} | {row['overlap_at_10']:.3f}{extra}"
        )
    rt = out["ray_round_trip"]
    print(
        f"Ray call doing nothing: one shard p50 {rt['one_shard']['p50_us']:.0f} µs, 4 shards "
        f"{rt['all_shards']['p50_us']:.0f} µs; merge of 4 x top 10: p50 {out['merge_4_shards']['p50_us']:.1f} µs"
    )
    t = out["throughput"]
    ip = t["in_process"]

    def cores(run: dict) -> str:
        return (
            f"client {run['client_cores']:.2f} + shards {sum(run['shard_cores']):.2f} cores, machine "
            f"{run['machine_cores']:.2f}"
        )

    print(
        f"\nthroughput, {out['client_threads']} client threads, hops=2 (in-process: fan-out query "
        f"{ip['fanout']['qps']:.0f} q/s, {cores(ip['fanout'])}; 1 thread {ip['fanout_1_thread']['qps']:.0f}; "
        f"routed query {ip['routed']['qps']:.0f} q/s; exact=True scan {ip['exact']['qps']:.0f} q/s)"
    )
    for row in t["fanout"]:
        print(
            f"  {row['shards']} shard(s): fan-out {row['qps']:7.0f} q/s ({row['qps_over_in_process']:.2f}x; "
            f"{cores(row['fanout'])}), routed {row['routed']['qps']:7.0f} q/s "
            f"({row['routed_qps_over_in_process']:.2f}x; {cores(row['routed'])}), fan-out p50 "
            f"{row['p50_us']:.0f} / p99 {row['p99_us']:.0f} µs, coordinator CPU p50 "
            f"{row['coordinator_cpu_p50_us']:.0f} µs, build {row['build_s']:.1f} s"
        )
        for run in row.get("concurrency_runs", []):
            for name in ("fanout", "routed", "exact"):
                print(
                    f"    concurrency={run['concurrency']}, {name}: {run[name]['qps']:7.0f} q/s ({cores(run[name])})"
                )
            mem = run["shard_memory_after"][0]
            print(
                f"    concurrency={run['concurrency']}, shard process after the round: VmRSS {mem['VmRSS'] / 1e6:.0f} MB, "
                f"RssAnon {mem['RssAnon'] / 1e6:.0f} MB"
            )
    print(f"verify() on the 4 shards: {len(out['verify_4_shards'])} problems")
    print(
        "\nshard size -> in-process p50 (hops=2 / hops=0):  "
        + ", ".join(
            f"{r['nodes']:,}: {r['hops2']['p50_us']:.0f} / {r['hops0']['p50_us']:.0f} µs"
            for r in out["shard_size_scaling"]
        )
    )
    print("\nmemory per node (shard process growth):")
    for m in out["memory"].values():
        print(
            f"  dim {m['dim']}, {m['nodes']:,} nodes: RssAnon {m['rss_anon_per_node']:.0f} B (marginal "
            f"{m['rss_anon_marginal_per_node']:.0f} B = second half of the nodes {m['rss_anon_second_half_per_node']:.0f}"
            f" + edges {m['rss_anon_edges_per_node']:.0f}; fixed {m['rss_anon_fixed_bytes'] / 1e6:.0f} MB), "
            f"VmRSS {m['vm_rss_per_node']:.0f} B, "
            f"stats() {m['stats_total_per_node']:.0f} B ({', '.join(f'{k} {v:.0f}' for k, v in m['stats_per_node'].items())}); "
            f"a shard process before loading: {np.median(m['process_rss_before_bytes']) / 1e6:.0f} MB"
        )
    print("\nestimate, 100M nodes, one shard a machine:")
    for row in out["estimate_100M"]:
        print(
            f"  {row['machines']:2d} machines: {row['nodes_per_shard']:,} nodes/shard, "
            f"{row['memory_per_shard_gb']:.1f} GB/shard (dim {row['memory_dim']}), shard search "
            f"{row['shard_search_us']:.0f} µs + coordinator {row['coordinator_us']:.0f} µs + 2 Ray calls "
            f"{row['ray_calls_us']:.0f} µs + 2 RTT "
            f"-> {row['latency_ms'][0]:.2f}-{row['latency_ms'][1]:.2f} ms"
        )
    print(
        f"\nload average (1 min): start {out['load_average_start']:.2f}, end {out['load_average_end']:.2f}; "
        f"total {out['total_s']:.0f} s"
    )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=100_000)
    parser.add_argument("--queries", type=int, default=1000)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--threads", type=int, default=4, help="client threads of the throughput runs")
    parser.add_argument(
        "--memory-nodes",
        type=int,
        default=None,
        help="nodes of the 384-d memory run (default: --nodes; 0 skips it)",
    )
    parser.add_argument("--out", default=DEFAULT_OUT, help="write the figures here (JSON)")
    args = parser.parse_args(argv)
    work = tempfile.mkdtemp(prefix="vg-bench-distributed-")
    try:
        out = measure(
            args.nodes,
            args.queries,
            args.dim,
            args.threads,
            args.nodes if args.memory_nodes is None else args.memory_nodes,
            work,
        )
    finally:
        shutil.rmtree(work, ignore_errors=True)
    for row in out["latency"]:
        row.pop("results")
    print_tables(out)
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    print(f"wrote {args.out}")
    exact = next(row for row in out["latency"] if "same_keys_queries" in row)
    if exact["same_keys_queries"] != exact["queries"] or exact["max_score_difference"] != 0.0:
        print("exact=True fan-out differs from the in-process graph", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
