"""Searches concurrent with writes: 4 searching threads and 1 writing thread on a durable graph.

The writer adds, upserts (existing, new and previously deleted keys), deletes nodes, edges and
tenants, compacts and checkpoints. After each delete returns it records the key as deleted, at a
new epoch; before a deleted key is added again it takes it off the deleted set. A search that
started after the delete was recorded (and finished with the key still deleted at that epoch)
must not return the key, neither as a seed nor as a node reached through an edge. At the end
every live key is found first by exact search for its own vector, before and after a reopen.

bench/stress_concurrency.py runs :func:`run_stress` for longer.
"""

from __future__ import annotations

import os
import collections
import random
import threading
import time
from dataclasses import dataclass, field

import numpy as np
import vecgraph as vg

DIM = 24
TENANTS = ("a", "b", "c", "d", "e", "f")
RELS = ("x", "y", "z")
LIVE_CAP = 1500


@dataclass
class StressReport:
    writes: collections.Counter = field(default_factory=collections.Counter)
    searches: int = 0
    neighbor_reads: int = 0
    contains_checks: int = 0
    queries_for_deleted_vectors: int = 0
    seeds_by: dict = field(default_factory=dict)  # stats() seed_* counters at the end
    live: int = 0
    deleted: int = 0
    errors: list = field(default_factory=list)


class _Shared:
    """The writer's record of deletes, read by the searchers. ``deleted[key]`` is the epoch at
    which the key's delete returned; a key being added again is removed first."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.epoch = 0
        self.deleted: dict = {}
        self.live_vectors: dict = {}  # key -> vector (the writer's view)
        self.recent_deleted = collections.deque(maxlen=64)  # (key, vector) of recent deletes

    def now(self) -> int:
        with self.lock:
            return self.epoch

    def record_deleted(self, keys: list) -> None:
        with self.lock:
            self.epoch += 1
            for k in keys:
                self.deleted[k] = self.epoch
                vec = self.live_vectors.pop(k)
                self.recent_deleted.append((k, vec))

    def deleted_before(self, key, start_epoch: int) -> bool:
        """True if ``key`` was deleted at or before ``start_epoch`` and has not been re-added since."""
        e = self.deleted.get(key)
        return e is not None and e <= start_epoch


def _writer(g: vg.Graph, shared: _Shared, deadline: float, rng: random.Random, report: StressReport) -> None:
    tenants: dict = {}  # key -> tenant of live keys
    edges: list = []  # (src, dst, rel) of live edges, parallel duplicates included
    serial = 0

    def vec() -> np.ndarray:
        return np.asarray([rng.gauss(0, 1) for _ in range(DIM)], dtype=np.float32)

    def new_key():
        nonlocal serial
        serial += 1
        return serial if serial % 5 == 0 else f"k{serial}"  # int and str keys

    def forget(keys: set) -> None:
        edges[:] = [e for e in edges if e[0] not in keys and e[1] not in keys]
        for k in keys:
            tenants.pop(k)

    while time.monotonic() < deadline:
        live = list(tenants)
        # Tenant-filtered searches take turns between HNSW and the scan of the tenant's member
        # list (filter_scan_max_nodes), so that both run beside these writes.
        if rng.random() < 0.02:
            g.filter_scan_max_nodes = rng.choice((0, "auto", vg.FILTER_SCAN_MAX_NODES))
        r = rng.random()
        if len(live) < 20 or (r < 0.30 and len(live) < LIVE_CAP):
            keys = [new_key() for _ in range(rng.randint(1, 8))]
            vectors = [vec() for _ in keys]
            ts = [rng.choice(TENANTS) for _ in keys]
            g.add_nodes(keys, np.stack(vectors), tenants=ts)
            with shared.lock:
                shared.live_vectors.update(zip(keys, vectors))
            tenants.update(zip(keys, ts))
            report.writes["add_nodes"] += 1
        elif r < 0.45:
            keys = rng.sample(live, min(len(live), rng.randint(1, 3)))
            with shared.lock:
                gone = [k for k, _ in list(shared.recent_deleted) if k in shared.deleted]
            if gone and rng.random() < 0.6:
                keys.append(rng.choice(gone))
            keys.append(new_key())
            keys = list(dict.fromkeys(keys))
            with shared.lock:  # a key about to come back is no longer "deleted"
                for k in keys:
                    shared.deleted.pop(k, None)
            vectors = [vec() for _ in keys]
            ts = [rng.choice(TENANTS) for _ in keys]
            g.upsert_nodes(keys, np.stack(vectors), tenants=ts)
            with shared.lock:
                shared.live_vectors.update(zip(keys, vectors))
            tenants.update(zip(keys, ts))
            report.writes["upsert_nodes"] += 1
        elif r < 0.62:
            m = rng.randint(1, 6)
            src = [rng.choice(live) for _ in range(m)]
            dst = [rng.choice(live) for _ in range(m)]
            rels = [rng.choice(RELS) for _ in range(m)]
            g.add_edges(src, dst, rels=rels, weights=np.array([rng.uniform(0.1, 2.0) for _ in range(m)], np.float32))
            edges.extend(zip(src, dst, rels))
            report.writes["add_edges"] += 1
        elif r < 0.85:
            keys = rng.sample(live, min(len(live) - 10, rng.randint(1, 4)))
            assert g.delete_nodes(keys) == len(keys)
            shared.record_deleted(keys)
            forget(set(keys))
            for k in keys:
                assert k not in g
            report.writes["delete_nodes"] += 1
        elif r < 0.95:
            if edges:
                s, d, rel = rng.choice(edges)
                n = sum(1 for e in edges if e == (s, d, rel))
                assert g.delete_edges([s], [d], rels=[rel]) == n
                edges[:] = [e for e in edges if e != (s, d, rel)]
                report.writes["delete_edges"] += 1
        elif r < 0.96 and len(live) > 300:
            t = rng.choice(TENANTS)
            keys = [k for k in live if tenants[k] == t]
            assert g.delete_tenant(t) == len(keys)
            shared.record_deleted(keys)
            forget(set(keys))
            report.writes["delete_tenant"] += 1
        elif r < 0.99:
            g.compact()
            report.writes["compact"] += 1
        else:
            info = g.checkpoint()
            assert info["nodes"] >= 0
            report.writes["checkpoint"] += 1


def _searcher(g: vg.Graph, shared: _Shared, stop: threading.Event, rng: random.Random, report: StressReport,
              counts: dict) -> None:
    np_rng = np.random.default_rng(rng.randrange(1 << 30))
    while not stop.is_set():
        with shared.lock:
            recent = list(shared.recent_deleted)
            some_live = None
            if shared.live_vectors and rng.random() < 0.3:
                some_live = next(iter(shared.live_vectors.items()))
        r = rng.random()
        if recent and r < 0.5:
            target, query = rng.choice(recent)
        elif some_live is not None and r < 0.8:
            target, query = some_live
        else:
            target, query = None, np_rng.standard_normal(DIM).astype(np.float32)
        kind = rng.random()
        start = shared.now()
        if kind < 0.8:
            exact = rng.random() < 0.5
            tenants = [rng.choice(TENANTS)] if rng.random() < 0.2 else None
            res = g.search(query, k=rng.choice((1, 10, 50)), exact=exact, seeds=rng.choice((1, 8, 32)),
                           hops=rng.choice((0, 1, 2)), tenants=tenants)
            counts["searches"] += 1
            keys = res.keys
            assert len(set(keys)) == len(keys), f"duplicate keys in {keys}"
            assert all(a >= b for a, b in zip(res.scores, res.scores[1:])), f"scores not sorted: {res.scores}"
            bad = [k for k in keys if shared.deleted_before(k, start)]
            assert not bad, f"search returned keys deleted before it started: {bad} (exact={exact})"
            if target is not None and shared.deleted_before(target, start):
                counts["queries_for_deleted_vectors"] += 1
            for path in res.paths:
                for e in path:
                    assert not shared.deleted_before(e.src, start) and not shared.deleted_before(e.dst, start), (
                        f"path through a deleted node: {path}")
        elif kind < 0.9 and target is not None:
            try:
                out = g.neighbors(target, direction="both")
            except vg.NotFoundError:
                continue  # the target is deleted (or being deleted)
            counts["neighbor_reads"] += 1
            bad = [e for e in out if shared.deleted_before(e.src, start) or shared.deleted_before(e.dst, start)]
            assert not bad, f"neighbors({target!r}) holds edges of deleted nodes: {bad}"
        elif recent:
            key, _ = rng.choice(recent)
            if shared.deleted_before(key, start):
                present = key in g
                assert not present or not shared.deleted_before(key, start), f"{key!r} in g after its delete"
                counts["contains_checks"] += 1


def check_final_state(g: vg.Graph, shared: _Shared) -> None:
    """Every live key is found first by exact search for its own vector; deleted keys are gone."""
    assert len(g) == len(shared.live_vectors)
    for key, v in shared.live_vectors.items():
        found = g.search(v, k=1, exact=True).keys
        assert found == [key], f"exact search for {key!r}'s own vector returned {found}"
    for key in shared.deleted:
        assert key not in g, f"deleted key {key!r} is in the graph"


def run_stress(folder: str, seconds: float, *, searchers: int = 4, seed: int = 0, sync: str = "interval") -> StressReport:
    report = StressReport()
    shared = _Shared()
    rng = random.Random(seed)
    g = vg.Graph.open(folder, dim=DIM, metric="cos", sync=sync)
    stop = threading.Event()
    errors: list = []
    per_thread = [collections.Counter() for _ in range(searchers)]

    def guarded(fn, *args):
        try:
            fn(*args)
        except BaseException as e:  # noqa: BLE001 - reported by the caller
            import traceback

            errors.append(f"{threading.current_thread().name}: {type(e).__name__}: {e}\n{traceback.format_exc()}")
            stop.set()

    threads = [threading.Thread(target=guarded, name=f"searcher-{i}",
                                args=(_searcher, g, shared, stop, random.Random(rng.random()), report, per_thread[i]))
               for i in range(searchers)]
    for t in threads:
        t.start()
    deadline = time.monotonic() + seconds
    writer = threading.Thread(target=guarded, name="writer",
                              args=(_writer, g, shared, deadline, random.Random(rng.random()), report))
    writer.start()
    writer.join()
    stop.set()
    for t in threads:
        t.join()
    report.errors = errors
    for c in per_thread:
        report.searches += c["searches"]
        report.neighbor_reads += c["neighbor_reads"]
        report.contains_checks += c["contains_checks"]
        report.queries_for_deleted_vectors += c["queries_for_deleted_vectors"]
    report.live, report.deleted = len(shared.live_vectors), len(shared.deleted)
    report.seeds_by = {k: v for k, v in g.stats().items() if k.startswith("seed_")}
    if errors:
        g.close()
        return report
    try:
        check_final_state(g, shared)
        g.close()
        with vg.Graph.open(folder) as again:
            check_final_state(again, shared)
    except AssertionError as e:
        report.errors.append(f"final state: {e}")
    finally:
        g.close()
    return report


def test_searches_never_see_deleted_keys_while_one_thread_writes(tmp_path):
    report = run_stress(str(tmp_path / "db"), 5.0, searchers=4, seed=7)
    assert not report.errors, "\n".join(report.errors)
    # Both sides did real work, every kind of write ran, and the graph ended non-trivial.
    assert report.searches >= 200 and report.queries_for_deleted_vectors >= 50
    for kind in ("add_nodes", "upsert_nodes", "add_edges", "delete_nodes", "delete_edges", "compact"):
        assert report.writes[kind] >= 2, f"only {report.writes[kind]} {kind} writes: {dict(report.writes)}"
    assert report.live >= 20 and report.deleted >= 20
    # Seeds came from HNSW, from exact scans and from tenants' member lists.
    paths = ("seed_full_scans", "seed_list_scans", "seed_hnsw_searches")
    assert min(report.seeds_by[path] for path in paths) > 0, report.seeds_by


def _run_child(script: str, *args: str, timeout: float = 120, prints: str = "exit") -> str:
    """Runs ``script`` in a child Python with this test run's import path; it must exit with 0
    after printing ``prints``. Returns its stderr."""
    import subprocess
    import sys

    env = {**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)}
    done = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, env=env,
                          timeout=timeout)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.strip() == prints
    return done.stderr


def test_the_interpreter_exits_cleanly_while_daemon_threads_search():
    """Daemon threads inside engine calls when Python exits are stopped as they take the GIL
    back, also those already waiting for it when finalisation begins (CPython ends them with a
    forced unwind, which must not free the call's Python objects without the GIL); the process
    ends normally, with no abort and no crash in the final garbage collection (which 8 daemon
    threads in short search_batch calls hit in about half of the runs before)."""
    script = (
        "import threading, time, numpy as np, vecgraph as vg\n"
        "V = np.random.default_rng(0).standard_normal((5000, 32)).astype(np.float32)\n"
        "g = vg.Graph(32); g.add_nodes(list(range(5000)), V)\n"
        "def search(exact):\n"
        "    while True: g.search(V[3], k=5, exact=exact)\n"
        "def search_batch():\n"
        "    while True: g.search_batch(V[:8], k=10, hops=1, threads=1)\n"
        "for exact in (True, False):\n"
        "    threading.Thread(target=search, args=(exact,), daemon=True).start()\n"
        "for _ in range(6):\n"
        "    threading.Thread(target=search_batch, daemon=True).start()\n"
        "time.sleep(0.2)\n"
        "print('exit')\n")
    for _ in range(8):
        _run_child(script)


def test_checkpoints_beside_the_first_hybrid_search_and_stats_do_not_deadlock(tmp_path):
    """A checkpoint holds the writer lock while it builds Python columns (it needs the GIL); a
    call that waited for the writer lock while holding the GIL (the entity index's own export
    on the first text hybrid_search, stats()) deadlocked with it, at the first try. A child
    process runs it 10 times; a stall dumps the stacks and fails."""
    script = (
        "import sys, threading, faulthandler, numpy as np, vecgraph as vg\n"
        "rng = np.random.default_rng(0)\n"
        "for it in range(10):\n"
        "    faulthandler.dump_traceback_later(30, exit=True)\n"
        "    g = vg.Graph.open(f'{sys.argv[1]}/g{it}', dim=32, sync='off')\n"
        "    g.add_nodes([f'n{i}' for i in range(3000)], rng.random((3000, 32), dtype=np.float32),\n"
        "                texts=[f't{i} word' for i in range(3000)])\n"
        "    stop = False\n"
        "    def checkpoints():\n"
        "        while not stop: g.checkpoint()\n"
        "    def stats():\n"
        "        while not stop: g.stats()\n"
        "    threads = [threading.Thread(target=f) for f in (checkpoints, stats)]\n"
        "    for t in threads: t.start()\n"
        "    found = g.hybrid_search('t5 word', vector=rng.random(32, dtype=np.float32), k=5)\n"
        "    stop = True\n"
        "    for t in threads: t.join()\n"
        "    assert len(found.keys) == 5, found.keys\n"
        "    g.close()\n"
        "print('done')\n")
    _run_child(script, str(tmp_path), timeout=300, prints="done")


def test_hybrid_search_in_daemon_threads_at_exit_runs_bm25_inline():
    """At interpreter exit the shared BM25 thread pool refuses new work; a hybrid_search still
    running in a daemon thread then runs its BM25 channel in its own thread instead of raising
    RuntimeError (it did in nearly every run)."""
    script = (
        "import threading, time, numpy as np, vecgraph as vg\n"
        "rng = np.random.default_rng(0)\n"
        "g = vg.Graph(32)\n"
        "g.add_nodes([f'n{i}' for i in range(3000)], rng.random((3000, 32), dtype=np.float32),\n"
        "            texts=[f't{i} word' for i in range(3000)])\n"
        "q = rng.random(32, dtype=np.float32)\n"
        "def search():\n"
        "    while True: g.hybrid_search('t5 word', vector=q, k=5)\n"
        "for _ in range(2):\n"
        "    threading.Thread(target=search, daemon=True).start()\n"
        "time.sleep(0.3)\n"
        "print('exit')\n")
    for _ in range(5):
        stderr = _run_child(script)
        assert "Error" not in stderr, stderr[-2000:]


def test_a_graph_left_open_is_closed_at_exit_without_hanging(tmp_path):
    """A folder graph the program never closes is closed by its finaliser while the interpreter
    exits: the main thread takes the GIL back after the close (it must not wait as daemon
    threads do), the process ends promptly, and every write is there on reopen."""
    folder = tmp_path / "db"
    script = (
        "import sys, numpy as np, vecgraph as vg\n"
        "g = vg.Graph.open(sys.argv[1], dim=8, sync='always')\n"
        "g.add_nodes(['a', 'b'], np.eye(2, 8, dtype=np.float32), texts=['alpha', 'beta'])\n"
        "g.add_edges(['a'], ['b'], rels=['knows'])\n"
        "print('exit')\n")
    _run_child(script, str(folder), timeout=60)
    with vg.Graph.open(folder) as graph:
        assert len(graph) == 2
        assert [edge.dst for edge in graph.neighbors("a", rels=["knows"])] == ["b"]
        assert graph.hybrid_search(text="beta", k=1, channels=["bm25"]).keys == ["b"]


def _own_vector_misses(graph, vectors: dict, exact: bool) -> list:
    """Keys that are not the first result of a search for their own vector."""
    keys = list(vectors)
    results = graph.search_batch(np.stack([vectors[key] for key in keys]), k=1, seeds=1, hops=0, exact=exact)
    return [key for key, res in zip(keys, results) if res.keys[:1] != [key]]


def test_writers_in_several_threads_add_and_upsert_side_by_side(tmp_path):
    """Writes' HNSW inserts run beside each other (outside the writer lock): four threads add
    one node per call and upsert their own earlier nodes (which rewrites rows while other
    threads insert). Every node then holds its last vector, exact search finds each first, the
    seed index holds every node, and HNSW finds all but a rare one left by inserts running side
    by side (README "Threads")."""
    dim, threads, per_thread = 16, 4, 300
    rng = np.random.default_rng(11)
    vectors = {}
    lock = threading.Lock()
    errors = []
    with vg.Graph.open(tmp_path / "g", dim=dim, sync="always") as graph:

        def write(t: int) -> None:
            local = np.random.default_rng(100 + t)
            try:
                for i in range(per_thread):
                    key = f"t{t}-{i}"
                    x = local.standard_normal((1, dim)).astype(np.float32)
                    graph.add_nodes([key], x)
                    with lock:
                        vectors[key] = x[0]
                    if i % 10 == 9:  # upsert an earlier node of this thread
                        old = f"t{t}-{i - 5}"
                        y = local.standard_normal((1, dim)).astype(np.float32)
                        graph.upsert_nodes([old], y)
                        with lock:
                            vectors[old] = y[0]
            except Exception as error:  # reported below
                errors.append(repr(error))

        pool = [threading.Thread(target=write, args=(t,)) for t in range(threads)]
        for thread in pool:
            thread.start()
        for thread in pool:
            thread.join()
        assert errors == []
        assert len(graph) == threads * per_thread
        for key in rng.choice(sorted(vectors), 50, replace=False):
            np.testing.assert_allclose(graph.get_node(key)["vector"], vectors[key] / np.linalg.norm(vectors[key]),
                                       atol=0.02)
        assert _own_vector_misses(graph, vectors, exact=True) == []
        assert graph.verify() == []
        assert len(_own_vector_misses(graph, vectors, exact=False)) <= 1


def test_checkpoints_beside_writers_in_several_threads_keep_every_node_in_the_seed_index(tmp_path):
    """A checkpoint waits for the HNSW inserts of the writes it includes, which run after the
    writer lock is released: every checkpoint taken while four threads add nodes saves the
    seed index, and a process that dies after them reopens with the last one loaded, the later
    writes replayed, each thread's writes a complete prefix and nothing missing."""
    folder = tmp_path / "g"
    count, dim = 40_000, 16
    script = (
        "import sys, threading, numpy as np, vecgraph as vg\n"
        "g = vg.Graph.open(sys.argv[1], dim=16, sync='off')\n"
        f"X = np.random.default_rng(5).standard_normal(({count}, {dim})).astype(np.float32)\n"
        "stop = threading.Event()\n"
        "def write(t):\n"
        f"    for i in range(t, {count}, 4):\n"
        "        if stop.is_set(): break\n"
        "        g.add_nodes([f'k{i}'], X[i:i + 1])\n"
        "pool = [threading.Thread(target=write, args=(t,)) for t in range(4)]\n"
        "for th in pool: th.start()\n"
        "saved = []\n"
        "while len(saved) < 4 and all(th.is_alive() for th in pool):\n"
        "    g.checkpoint()\n"
        "    saved.append('hnsw.usearch' in g._manifest['files'])\n"
        "stop.set()\n"
        "for th in pool: th.join()\n"
        "g.add_nodes(['last'], np.ones((1, 16), np.float32))\n"
        "ok = len(saved) == 4 and all(saved)\n"
        "print('exit' if ok else f'checkpoints (with the HNSW graph?): {saved}', flush=True)\n"
        "import os; os._exit(0)\n")
    _run_child(script, str(folder), timeout=300)
    vectors = np.random.default_rng(5).standard_normal((count, dim)).astype(np.float32)
    with vg.Graph.open(folder) as graph:
        assert graph._recovery["hnsw"] == "loaded"
        assert graph._recovery["snapshot"] is not None
        assert graph.stats()["index_pending"] == 0
        assert graph.verify() == []
        written = [i for i in range(count) if f"k{i}" in graph]
        assert "last" in graph and len(written) == len(graph) - 1
        for t in range(4):  # each thread's writes are a prefix of its sequence
            mine = [i for i in written if i % 4 == t]
            assert mine == list(range(t, t + 4 * len(mine), 4))
        own = {f"k{i}": vectors[i] for i in written}
        assert _own_vector_misses(graph, own, exact=True) == []
        assert len(_own_vector_misses(graph, own, exact=False)) <= 1
