"""A deterministic write workload for crash testing a durable vecgraph folder, shared by
tests/test_crash.py and bench/crash_loop.py.

One *cycle*: a writer subprocess (``python crash_workload.py FOLDER MODEL_JSON SEED CYCLE SYNC``)
opens the folder and issues writes numbered 0, 1, 2, ...; after write i RETURNS it writes
``ack i`` to stdout with one os.write (no buffering). The parent SIGKILLs it at a random moment,
reopens the folder and checks that the state equals, exactly, the plain-Python model after a
prefix of the issued writes: writes are issued one at a time and ``ack i`` precedes write i+1,
so with A acks the prefix is A (write A had not returned) or A+1 (write A returned but its ack
was not written yet).

The op sequence is a function of (seed, cycle, starting model) only: both processes generate it
with :func:`next_op` from the same model, so the parent knows every write the child issued.
"""

from __future__ import annotations

import itertools
import json
import os
import random
import select
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field

import numpy as np
import vecgraph as vg

DIM = 16
METRIC = "cos"
TENANTS = ("t0", "t1", "t2")
RELS = ("r0", "r1")
CHECKPOINT_EVERY = 50
COMPACT_EVERY = 97
LIVE_CAP = 300  # above it the mix deletes more than it adds, so the graph stays small
DELETED_MEMORY = 2000  # deleted keys the model remembers (re-add candidates, keys checked absent)
THIS_FILE = os.path.abspath(__file__)


def vector(tag: tuple) -> np.ndarray:
    """The deterministic vector of a node version (tag = (seed, cycle, write, row))."""
    return np.random.default_rng(list(tag)).standard_normal(DIM).astype(np.float32)


@dataclass
class Model:
    """What the graph must hold. nodes: key -> (tag, tenant), in insertion order (deterministic
    choices depend on it); edges: (src, rel, dst, weight) in insertion order; deleted: the last
    DELETED_MEMORY keys deleted and not live now, in deletion order (older ones are forgotten so
    that long runs stay fast; len(g) equal to the live count still rules out their return)."""

    nodes: dict = field(default_factory=dict)
    edges: list = field(default_factory=list)
    deleted: dict = field(default_factory=dict)

    def copy(self) -> Model:
        return Model(dict(self.nodes), list(self.edges), dict(self.deleted))

    def to_json(self) -> str:
        return json.dumps({
            "nodes": [[k, list(tag), t] for k, (tag, t) in self.nodes.items()],
            "edges": [list(e) for e in self.edges],
            "deleted": list(self.deleted),
        })

    @classmethod
    def from_json(cls, text: str) -> Model:
        raw = json.loads(text)
        return cls({k: (tuple(tag), t) for k, tag, t in raw["nodes"]},
                   [tuple(e) for e in raw["edges"]],
                   {k: None for k in raw["deleted"]})

    def _drop_node(self, key: str) -> None:
        del self.nodes[key]
        self.deleted[key] = None
        if len(self.deleted) > DELETED_MEMORY:
            del self.deleted[next(iter(self.deleted))]
        self.edges = [e for e in self.edges if e[0] != key and e[2] != key]

    def apply(self, op: tuple) -> None:
        kind = op[0]
        if kind in ("add", "upsert"):
            _, keys, tags, tenants = op
            for k, tag, t in zip(keys, tags, tenants):
                if kind == "add":
                    assert k not in self.nodes
                self.nodes[k] = (tuple(tag), t)
                self.deleted.pop(k, None)
        elif kind == "edges":
            _, src, dst, rels, weights = op
            self.edges.extend(zip(src, rels, dst, weights))
        elif kind == "delete":
            for k in op[1]:
                self._drop_node(k)
        elif kind == "delete_edges":
            _, src, dst, rels = op
            gone = set(zip(src, rels, dst))
            self.edges = [e for e in self.edges if (e[0], e[1], e[2]) not in gone]
        elif kind == "delete_tenant":
            for k in [k for k, (_, t) in self.nodes.items() if t == op[1]]:
                self._drop_node(k)
        elif kind in ("checkpoint", "compact"):
            pass
        else:
            raise ValueError(op)


def next_op(model: Model, rng: random.Random, seed: int, cycle: int, i: int) -> tuple:
    """Write number i of a cycle, chosen from the model's current state (does not apply it)."""
    if i % CHECKPOINT_EVERY == CHECKPOINT_EVERY - 1:
        return ("checkpoint",)
    if i % COMPACT_EVERY == COMPACT_EVERY - 1:
        return ("compact",)
    live = list(model.nodes)
    n = len(live)
    r = rng.random()
    if n > LIVE_CAP:
        mix = (("add", 0.25), ("edges", 0.45), ("delete", 0.78), ("upsert", 0.88), ("delete_edges", 0.97))
    else:
        mix = (("add", 0.45), ("edges", 0.70), ("delete", 0.80), ("upsert", 0.90), ("delete_edges", 0.995))
    kind = next((name for name, bound in mix if r < bound), "delete_tenant")
    if n < 4:
        kind = "add"
    if kind == "delete_edges" and not model.edges:
        kind = "edges"
    if kind == "delete_tenant" and n < 40:
        kind = "delete"
    if kind == "add":
        rows = 1 if rng.random() < 0.8 else rng.randint(2, 4)
        keys = [f"c{cycle}.n{i}" if rows == 1 else f"c{cycle}.n{i}.{j}" for j in range(rows)]
        return ("add", keys, [(seed, cycle, i, j) for j in range(rows)], [rng.choice(TENANTS) for _ in keys])
    if kind == "edges":
        m = rng.randint(1, 3)
        src = [live[rng.randrange(n)] for _ in range(m)]
        dst = [live[rng.randrange(n)] for _ in range(m)]
        return ("edges", src, dst, [rng.choice(RELS) for _ in range(m)], [rng.randint(1, 16) / 4 for _ in range(m)])
    if kind == "delete":
        return ("delete", [live[rng.randrange(n)]])
    if kind == "upsert":
        keys = [live[rng.randrange(n)]]
        if model.deleted and rng.random() < 0.5:
            gone = list(itertools.islice(reversed(model.deleted), 200))
            keys.append(gone[rng.randrange(len(gone))])  # a deleted key comes back as a new node
        keys = list(dict.fromkeys(keys))
        return ("upsert", keys, [(seed, cycle, i, j) for j in range(len(keys))], [rng.choice(TENANTS) for _ in keys])
    if kind == "delete_edges":
        e = model.edges[rng.randrange(len(model.edges))]
        return ("delete_edges", [e[0]], [e[2]], [e[1]])
    return ("delete_tenant", rng.choice(TENANTS))


def execute(g: vg.Graph, op: tuple) -> None:
    kind = op[0]
    if kind in ("add", "upsert"):
        _, keys, tags, tenants = op
        vectors = np.stack([vector(tag) for tag in tags])
        (g.add_nodes if kind == "add" else g.upsert_nodes)(keys, vectors, tenants=tenants,
                                                           texts=[f"text of {k}" for k in keys])
    elif kind == "edges":
        _, src, dst, rels, weights = op
        g.add_edges(src, dst, rels=rels, weights=np.array(weights, np.float32))
    elif kind == "delete":
        assert g.delete_nodes(op[1]) == len(op[1])
    elif kind == "delete_edges":
        _, src, dst, rels = op
        assert g.delete_edges(src, dst, rels=rels) >= 1
    elif kind == "delete_tenant":
        g.delete_tenant(op[1])
    elif kind == "checkpoint":
        g.checkpoint()
    elif kind == "compact":
        g.compact()
    else:
        raise ValueError(op)


def ops_stream(model: Model, seed: int, cycle: int):
    """Yields (i, op) forever, applying each op to ``model`` after it is yielded and before the
    next one is generated."""
    rng = random.Random(f"{seed}/{cycle}")
    i = 0
    while True:
        op = next_op(model, rng, seed, cycle, i)
        yield i, op
        model.apply(op)
        i += 1


def writer_main(argv: list) -> None:
    folder, model_path, seed, cycle, sync = argv[0], argv[1], int(argv[2]), int(argv[3]), argv[4]
    max_writes = int(argv[5]) or 1 << 62
    segment_bytes = int(argv[6]) or 64 << 20
    with open(model_path) as f:
        model = Model.from_json(f.read())
    # Loaded by the first checkpoint anyway (pyarrow imports pandas, when installed, on its first
    # array); imported here they do not skew kill times.
    import pyarrow  # noqa: F401
    try:
        import pandas  # noqa: F401
    except ImportError:
        pass

    g = vg.Graph.open(folder, dim=DIM, metric=METRIC, sync=sync, segment_bytes=segment_bytes)
    os.write(1, b"ready\n")
    for i, op in ops_stream(model, seed, cycle):
        if i >= max_writes:
            break
        execute(g, op)
        os.write(1, f"ack {i}\n".encode())
    g.close()
    os.write(1, b"done\n")


# ---------------------------------------------------------------- parent side


def canonical(model: Model) -> tuple:
    """The model's state in the form :func:`observe` reads from a graph."""
    keys = sorted(model.nodes)
    if keys:
        codes, scales = vg.quantize(np.stack([vector(model.nodes[k][0]) for k in keys]), METRIC)
    nodes = tuple((k, codes[j].tobytes(), float(scales[j]), model.nodes[k][1]) for j, k in enumerate(keys))
    return nodes, tuple(sorted((s, r, d, float(w)) for s, r, d, w in model.edges))


def observe(g: vg.Graph, universe: set) -> tuple:
    """The graph's state restricted to ``universe`` (the keys the candidate states hold plus the
    remembered deleted ones), in the form of :func:`canonical`; len(g) must equal the number of
    keys found, so a key outside the universe (a forgotten deleted key come back) cannot hide."""
    keys = sorted(k for k in universe if k in g)
    assert len(g) == len(keys), f"len(g)={len(g)} but {len(keys)} known keys are present"
    nodes: tuple = ()
    edges = []
    if keys:
        codes, scales = g.quantized(keys)
        nodes = tuple((k, codes[j].tobytes(), float(scales[j]), g.get_node(k)["tenant"]) for j, k in enumerate(keys))
        for k in keys:
            edges.extend((e.src, e.rel, e.dst, float(e.weight)) for e in g.neighbors(k, direction="out"))
    assert g.count_edges == len(edges), f"count_edges={g.count_edges} but {len(edges)} edges reachable"
    return nodes, tuple(sorted(edges))


def describe_difference(seen: tuple, want: tuple) -> str:
    seen_nodes, want_nodes = {n[0]: n for n in seen[0]}, {n[0]: n for n in want[0]}
    parts = []
    missing = sorted(set(want_nodes) - set(seen_nodes))
    extra = sorted(set(seen_nodes) - set(want_nodes))
    changed = sorted(k for k in set(want_nodes) & set(seen_nodes) if want_nodes[k] != seen_nodes[k])
    if missing:
        parts.append(f"missing nodes {missing[:10]}")
    if extra:
        parts.append(f"unexpected nodes {extra[:10]}")
    if changed:
        parts.append(f"nodes with other vector/tenant {changed[:10]}")
    seen_edges, want_edges = list(seen[1]), list(want[1])
    if seen_edges != want_edges:
        from collections import Counter

        a, b = Counter(seen_edges), Counter(want_edges)
        parts.append(f"edges missing {list((b - a).elements())[:5]} unexpected {list((a - b).elements())[:5]}")
    return "; ".join(parts) or "equal"


class _Pipe:
    """Line reader over a child's stdout with a deadline (no blocking forever)."""

    def __init__(self, fd: int) -> None:
        self.fd, self.buf, self.eof = fd, b"", False

    def read_until(self, marker: bytes, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        while marker not in self.buf and not self.eof:
            left = deadline - time.monotonic()
            if left <= 0:
                return False
            ready, _, _ = select.select([self.fd], [], [], left)
            if ready:
                chunk = os.read(self.fd, 1 << 16)
                self.buf += chunk
                self.eof = not chunk
        return marker in self.buf

    def read_all(self) -> bytes:
        while not self.eof:
            chunk = os.read(self.fd, 1 << 16)
            self.buf += chunk
            self.eof = not chunk
        return self.buf


@dataclass
class CycleResult:
    cycle: int
    acks: int
    prefix: int  # writes the recovered state reflects
    killed_before_ready: bool
    exited: int | None  # exit code if the writer ended on its own
    ok: bool
    message: str = ""


def run_cycle(folder: str, model: Model, seed: int, cycle: int, rng: random.Random, *, sync: str = "always",
              max_delay: float = 0.1, early_kill: float = 0.15, search_checks: int = 5,
              work_dir: str | None = None, max_writes: int | None = None,
              segment_bytes: int | None = None, kill_after_acks: int | None = None) -> tuple[CycleResult, Model]:
    """One crash cycle. Returns the result and the model of the recovered state (the input model
    unchanged on failure). segment_bytes: the writer's WAL segment size (None: the default).
    kill_after_acks: kill once the writer has acknowledged that many writes (never early), instead
    of at a random moment within ``max_delay`` seconds of its start, so that a kill strikes a long
    run of writes however fast the machine writes."""
    work_dir = work_dir or os.path.dirname(os.path.abspath(folder))
    model_path = os.path.join(work_dir, "model.json")
    with open(model_path, "w") as f:
        f.write(model.to_json())
    args = [sys.executable, THIS_FILE, folder, model_path, str(seed), str(cycle), sync, str(max_writes or 0),
            str(segment_bytes or 0)]
    err_path = os.path.join(work_dir, "writer.stderr")
    with open(err_path, "wb") as err:
        proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=err, stdin=subprocess.DEVNULL)
    pipe = _Pipe(proc.stdout.fileno())
    early = rng.random() < early_kill and not kill_after_acks
    try:
        if early:  # may strike during import, Graph.open (recovery) or the first writes
            time.sleep(rng.uniform(0.0, 0.4))
        else:
            if not pipe.read_until(b"ready\n", 60.0):
                proc.kill()
                proc.wait()
                with open(err_path, "rb") as f:
                    err_text = f.read().decode(errors="replace")
                return CycleResult(cycle, 0, 0, False, proc.returncode, False,
                                   f"writer never became ready: {err_text[-2000:]}"), model
            if kill_after_acks:  # its ack has been written: the kill strikes the writes after it
                if not pipe.read_until(f"ack {kill_after_acks - 1}\n".encode(), 60.0) and not pipe.eof:
                    proc.kill()
                    proc.wait()
                    acks_seen = pipe.buf.decode(errors="replace").split().count("ack")
                    return CycleResult(cycle, acks_seen, -1, False, None, False,
                                       f"the writer acknowledged {acks_seen} writes in 60 s, not the "
                                       f"{kill_after_acks} the kill waits for"), model
            else:
                time.sleep(rng.uniform(0.0, max_delay))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        out = pipe.read_all()
    finally:
        proc.stdout.close()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    lines = out.decode().split()
    acks = sum(1 for token in lines if token == "ack")
    acked = [int(t) for t in lines if t.isdigit()]
    exited = None if proc.returncode == -signal.SIGKILL else proc.returncode
    if acked != list(range(acks)):
        return CycleResult(cycle, acks, -1, early, exited, False, f"acks out of order: {acked[:20]}"), model
    if exited not in (None, 0):
        with open(err_path, "rb") as f:
            err_text = f.read().decode(errors="replace")
        return CycleResult(cycle, acks, -1, early, exited, False, f"writer failed (rc {exited}): {err_text[-2000:]}"), model

    # The candidates: the model after `acks` writes, and after acks + 1 (write `acks` may have
    # returned without its ack written) unless the writer finished on its own.
    work = model.copy()
    universe = set(model.nodes) | set(model.deleted)
    for i, op in ops_stream(work, seed, cycle):
        if op[0] in ("add", "upsert"):
            universe.update(op[1])
        if i == acks:
            break
    candidates = [(acks, work.copy())]
    if exited is None:
        work.apply(op)
        candidates.insert(0, (acks + 1, work))  # preferred when both match (write acks changed nothing)

    try:
        g = vg.Graph.open(folder, dim=DIM, metric=METRIC, sync=sync)
    except Exception as e:  # noqa: BLE001 - any failure to reopen is the finding
        return CycleResult(cycle, acks, -1, early, exited, False, f"reopen failed: {type(e).__name__}: {e}"), model
    try:
        try:
            seen = observe(g, universe)
        except Exception as e:  # noqa: BLE001 - an inconsistent graph is the finding
            return CycleResult(cycle, acks, -1, early, exited, False, f"reading the state: {type(e).__name__}: {e}"), model
        prefix = -1
        for length, cand in candidates:
            if canonical(cand) == seen:
                prefix, recovered = length, cand
                break
        if prefix < 0:
            diff = describe_difference(seen, canonical(candidates[-1][1]))
            return CycleResult(cycle, acks, -1, early, exited, False,
                               f"state matches neither prefix {acks} nor {acks + 1}: vs prefix {acks}: {diff}"), model
        live = list(recovered.nodes)
        picks = live[-2:] + [live[rng.randrange(len(live))] for _ in range(search_checks)] if live else []
        for key in picks:
            res = g.search(vector(recovered.nodes[key][0]), k=3, exact=True)
            if not res.keys or res.keys[0] != key:
                return CycleResult(cycle, acks, prefix, early, exited, False,
                                   f"exact search for {key}'s own vector returned {res.keys}"), model
    finally:
        g.close()
    return CycleResult(cycle, acks, prefix, early, exited, True), recovered


if __name__ == "__main__":
    writer_main(sys.argv[1:])
