"""A multi-threaded crash workload for the soak of bench/crash_soak.py (and its short run in
tests/test_crash_soak.py): several writer threads, checkpoints and compactions from another
thread, SIGKILL at random moments, every acknowledged write checked after each reopen.

One *cycle*: a writer subprocess (``python soak_workload.py FOLDER MODELS_JSON SEED CYCLE
THREADS``) opens the folder, prints ``ready <index_pending>``, and starts

* ``THREADS`` writer threads: thread t owns tenants ``w<t>a`` / ``w<t>b`` and keys
  ``w<t>.*``, and issues its own deterministic writes 0, 1, 2, ... (adds, a bulk add of
  4,500 nodes now and then, upserts that also bring deleted keys back, deletes, edges among its
  own nodes, edge deletes, ``delete_tenant`` of one of its tenants), printing ``ack <t> <i>``
  after write i returns and before it issues write i + 1;
* a maintenance thread: a checkpoint every 20-80 ms (``cb`` before, ``ce`` after), and a
  compaction every third time;
* an index watcher that prints ``indexed`` once the background HNSW pass of the open is done
  (a bulk add replayed from the WAL leaves 4,500 nodes or more to index: the pass runs in the
  background, so kills strike it).

The parent SIGKILLs it, reopens the folder and checks, thread by thread, that the state of the
thread's keys equals its model after A or A + 1 of its writes (A = its acks: write A may have
returned without its ack printed), and that nothing else is in the graph. Each thread's writes
touch only its own keys, so threads are independent and the check is exact however the
threads interleaved. The markers tell where the kill struck: during open (before ``ready``),
during the background index pass (pending nodes and no ``indexed``; half the kills after such
an open come within 100 ms), during a checkpoint (``cb`` without ``ce``).
"""

from __future__ import annotations

import itertools
import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass

import vecgraph as vg

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from crash_workload import METRIC, Model, _Pipe, canonical, execute, vector  # noqa: E402

DIM = 16
RELS = ("r0", "r1")
BULK_ROWS = 4500  # > the 4,096 pending nodes that make open index in the background
LIVE_CAP = 200
THIS_FILE = os.path.abspath(__file__)


def thread_op(model: Model, rng: random.Random, seed: int, cycle: int, t: int, i: int) -> tuple:
    """Write number i of thread t, chosen from the thread's model (does not apply it)."""
    live = list(model.nodes)
    n = len(live)
    tenants = (f"w{t}a", f"w{t}b")
    if n > 2 * LIVE_CAP:  # after a bulk add: a tenant goes, most of the time
        kind = "delete_tenant" if rng.random() < 0.3 else rng.choice(("delete", "edges", "upsert"))
    else:
        r = rng.random()
        mix = (("add", 0.40), ("edges", 0.62), ("delete", 0.76), ("upsert", 0.88), ("delete_edges", 0.97),
               ("bulk", 0.975))
        kind = next((name for name, bound in mix if r < bound), "delete_tenant")
        if n > LIVE_CAP and kind in ("add", "bulk"):
            kind = "delete"
    if n < 4:
        kind = "add"
    if kind == "delete_edges" and not model.edges:
        kind = "edges"
    if kind == "add":
        rows = 1 if rng.random() < 0.7 else rng.randint(2, 6)
        keys = [f"w{t}.c{cycle}.n{i}.{j}" for j in range(rows)]
        return ("add", keys, [(seed, cycle, t, i, j) for j in range(rows)], [rng.choice(tenants) for _ in keys])
    if kind == "bulk":
        keys = [f"w{t}.c{cycle}.b{i}.{j}" for j in range(BULK_ROWS)]
        return ("add", keys, [(seed, cycle, t, i, j) for j in range(BULK_ROWS)], [tenants[j % 2] for j in range(BULK_ROWS)])
    if kind == "edges":
        m = rng.randint(1, 3)
        return ("edges", [live[rng.randrange(n)] for _ in range(m)], [live[rng.randrange(n)] for _ in range(m)],
                [rng.choice(RELS) for _ in range(m)], [rng.randint(1, 16) / 4 for _ in range(m)])
    if kind == "delete":
        return ("delete", [live[rng.randrange(n)]])
    if kind == "upsert":
        keys = [live[rng.randrange(n)]]
        if model.deleted and rng.random() < 0.5:
            gone = list(itertools.islice(reversed(model.deleted), 200))
            keys.append(gone[rng.randrange(len(gone))])  # a deleted key comes back as a new node
        keys = list(dict.fromkeys(keys))
        return ("upsert", keys, [(seed, cycle, t, i, j) for j in range(len(keys))], [rng.choice(tenants) for _ in keys])
    if kind == "delete_edges":
        e = model.edges[rng.randrange(len(model.edges))]
        return ("delete_edges", [e[0]], [e[2]], [e[1]])
    return ("delete_tenant", rng.choice(tenants))


def thread_ops(model: Model, seed: int, cycle: int, t: int):
    """Yields (i, op) for thread t forever, applying each op to ``model`` after it is yielded."""
    rng = random.Random(f"{seed}/{cycle}/{t}")
    for i in itertools.count():
        op = thread_op(model, rng, seed, cycle, t, i)
        yield i, op
        model.apply(op)


def writer_main(argv: list) -> None:
    folder, models_path, seed, cycle, threads = argv[0], argv[1], int(argv[2]), int(argv[3]), int(argv[4])
    with open(models_path) as f:
        models = [Model.from_json(text) for text in json.load(f)]
    import pyarrow  # noqa: F401 - loaded here, not by the first checkpoint, so it does not skew kill times

    g = vg.Graph.open(folder, dim=DIM, metric=METRIC, sync="always", segment_bytes=1 << 16)
    pending = g.stats()["index_pending"]
    os.write(1, f"ready {pending}\n".encode())
    stop = threading.Event()

    def writer(t: int) -> None:
        for i, op in thread_ops(models[t], seed, cycle, t):
            if stop.is_set():
                return
            execute(g, op)
            os.write(1, f"ack {t} {i}\n".encode())

    def maintenance() -> None:
        rng = random.Random(f"{seed}/{cycle}/m")
        for n in itertools.count():
            if stop.wait(rng.uniform(0.02, 0.08)):
                return
            if n % 3 == 2:
                g.compact()
            os.write(1, b"cb\n")
            g.checkpoint()
            os.write(1, b"ce\n")

    def watcher() -> None:
        while g.stats()["index_pending"] and not stop.wait(0.005):
            pass
        os.write(1, b"indexed\n")

    workers = [threading.Thread(target=writer, args=(t,), daemon=True) for t in range(threads)]
    workers += [threading.Thread(target=maintenance, daemon=True), threading.Thread(target=watcher, daemon=True)]
    for w in workers:
        w.start()
    time.sleep(3600)  # killed long before


# ---------------------------------------------------------------- parent side


@dataclass
class SoakResult:
    cycle: int
    acks: int  # acknowledged writes, all threads
    ok: bool
    struck: str  # "open", "checkpoint", "index pass", "writes"
    pending: int  # nodes the writer's open left to the background index pass
    message: str = ""


def _thread_of(key: str) -> int:
    return int(key[1:key.index(".")])


def observe_threads(g: vg.Graph, universe: set, threads: int) -> list:
    """Per thread: (nodes, edges) of its keys in the graph, in the form of canonical(); the
    graph may hold no other node (len(g) equals the keys found)."""
    keys = sorted(k for k in universe if k in g)
    assert len(g) == len(keys), f"len(g)={len(g)} but {len(keys)} known keys are present"
    nodes: list = [[] for _ in range(threads)]
    edges: list = [[] for _ in range(threads)]
    if keys:
        codes, scales = g.quantized(keys)
        for j, k in enumerate(keys):
            nodes[_thread_of(k)].append((k, codes[j].tobytes(), float(scales[j]), g.get_node(k, vector=False)["tenant"]))
            edges[_thread_of(k)].extend((e.src, e.rel, e.dst, float(e.weight)) for e in g.neighbors(k, direction="out"))
    assert g.count_edges == sum(map(len, edges)), f"count_edges={g.count_edges} but {sum(map(len, edges))} reachable"
    return [(tuple(nodes[t]), tuple(sorted(edges[t]))) for t in range(threads)]


def run_cycle(folder: str, models: list, seed: int, cycle: int, rng: random.Random, *, work_dir: str,
              max_delay: float = 0.4, early_kill: float = 0.1) -> tuple[SoakResult, list]:
    """One cycle; returns the result and the thread models of the recovered state (the input
    models unchanged on failure)."""
    threads = len(models)
    models_path = os.path.join(work_dir, "models.json")
    with open(models_path, "w") as f:
        json.dump([m.to_json() for m in models], f)
    err_path = os.path.join(work_dir, "writer.stderr")
    with open(err_path, "wb") as err:
        proc = subprocess.Popen([sys.executable, THIS_FILE, folder, models_path, str(seed), str(cycle), str(threads)],
                                stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
    pipe = _Pipe(proc.stdout.fileno())
    try:
        if rng.random() < early_kill:  # during import, or Graph.open (recovery)
            time.sleep(rng.uniform(0.0, 0.6))
        elif not pipe.read_until(b"ready", 120.0):
            proc.kill()
            proc.wait()
            with open(err_path, "rb") as f:
                return SoakResult(cycle, 0, False, "open", 0, "writer never became ready: " +
                                  f.read().decode(errors="replace")[-2000:]), models
        else:
            ready = next(line for line in pipe.buf.decode(errors="replace").splitlines() if line.startswith("ready"))
            # An open that left a background index pass: half the time, a kill soon enough to strike it.
            short = ready.split()[1:] != ["0"] and rng.random() < 0.5
            time.sleep(rng.uniform(0.0, 0.1 if short else max_delay))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        out = pipe.read_all().decode()
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = out.splitlines()
    if proc.returncode != -signal.SIGKILL:
        with open(err_path, "rb") as f:
            return SoakResult(cycle, 0, False, "writes", 0, f"writer exited with {proc.returncode}: " +
                              f.read().decode(errors="replace")[-2000:]), models
    ready = next((line for line in lines if line.startswith("ready")), None)
    pending = int(ready.split()[1]) if ready and len(ready.split()) == 2 else 0
    acks = [[] for _ in range(threads)]
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "ack":
            acks[int(parts[1])].append(int(parts[2]))
    total = sum(map(len, acks))
    if ready is None:
        struck = "open"
    elif pending and "indexed" not in lines:
        struck = "index pass"
    elif lines.count("cb") > lines.count("ce"):
        struck = "checkpoint"
    else:
        struck = "writes"
    for t, seen in enumerate(acks):
        if seen != list(range(len(seen))):
            return SoakResult(cycle, total, False, struck, pending, f"thread {t}: acks out of order {seen[:20]}"), models
    if ready is None and total:
        return SoakResult(cycle, total, False, struck, pending, "acks before ready"), models

    # Candidates per thread: its model after A writes, and after A + 1.
    candidates, universe = [], set()
    for t, model in enumerate(models):
        universe.update(model.nodes)
        universe.update(model.deleted)
        work = model.copy()
        for i, op in thread_ops(work, seed, cycle, t):
            if op[0] in ("add", "upsert"):
                universe.update(op[1])
            if i == len(acks[t]):
                break
        after = work.copy()
        after.apply(op)
        candidates.append([(len(acks[t]) + 1, after), (len(acks[t]), work)])
    try:
        g = vg.Graph.open(folder, dim=DIM, metric=METRIC)
    except Exception as e:  # noqa: BLE001 - any failure to reopen is the finding
        return SoakResult(cycle, total, False, struck, pending, f"reopen failed: {type(e).__name__}: {e}"), models
    recovered = []
    try:
        try:
            seen = observe_threads(g, universe, threads)
        except Exception as e:  # noqa: BLE001 - an inconsistent graph is the finding
            return SoakResult(cycle, total, False, struck, pending, f"reading the state: {type(e).__name__}: {e}"), models
        for t in range(threads):
            match = next((cand for _, cand in candidates[t] if canonical(cand) == seen[t]), None)
            if match is None:
                want = canonical(candidates[t][1][1])
                lost = sorted({n[0] for n in want[0]} - {n[0] for n in seen[t][0]})
                extra = sorted({n[0] for n in seen[t][0]} - {n[0] for n in want[0]})
                return SoakResult(cycle, total, False, struck, pending,
                                  f"thread {t}: the state matches neither {len(acks[t])} nor {len(acks[t]) + 1} "
                                  f"writes (missing {lost[:5]}, unexpected {extra[:5]}, edges "
                                  f"{len(seen[t][1])} vs {len(want[1])})"), models
            recovered.append(match)
        live = [k for m in recovered for k in m.nodes]
        for key in [live[rng.randrange(len(live))] for _ in range(5)] if live else []:
            model = recovered[_thread_of(key)]
            found = g.search(vector(model.nodes[key][0]), k=3, exact=True).keys
            if not found or found[0] != key:
                return SoakResult(cycle, total, False, struck, pending,
                                  f"exact search for {key}'s own vector returned {found}"), models
    finally:
        g.close()
    return SoakResult(cycle, total, True, struck, pending), recovered


if __name__ == "__main__":
    writer_main(sys.argv[1:])
