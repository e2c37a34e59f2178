"""Agent-memory latency: vecgraph.Memory on a store of 100,000 memories of 1,000 users.

An agent writes and reads in one loop: ``remember`` then ``recall`` of the same user (the text
channel included), ``recall`` alone, ``card`` (built and stored), and ``forget`` of one user
with 100 memories (the erasure with its folder rewrite and byte scan). Baseline in the same
run: the same pair with the BM25 index published (committed) before each recall, which is what
a search after a write did before the index kept a delta of recent writes.

The embedder's own time is left out: the store is built with wordllama, and the timed calls
embed through a cache of the vectors wordllama gave for their texts (same name and dim, so the
folder's recorded embedder is respected); the cache lookup is what remains of it.

Environment:
    VECGRAPH_BENCH_MEMORY_N      memories (default 100000)
    VECGRAPH_BENCH_MEMORY_USERS  users (default 1000)
    VECGRAPH_BENCH_MEMORY_SYNC   the WAL's fsync policy (default "always")

The store is built once (about 3 minutes here) into ~/.cache/vecgraph/bench/ and copied for
each run. Command: ``pytest bench/bench_memory.py --benchmark-only``.
"""

from __future__ import annotations

import common  # noqa: F401 - pins the BLAS / OpenMP pools before NumPy loads

import os
import random
import shutil
import statistics
import time

import numpy as np
import pytest

import vecgraph as vg
from vecgraph import embedders

N = common.env_int("VECGRAPH_BENCH_MEMORY_N", 100_000)
USERS = common.env_int("VECGRAPH_BENCH_MEMORY_USERS", 1000)
SYNC = os.environ.get("VECGRAPH_BENCH_MEMORY_SYNC", "always")
ROUNDS = 300

_SUBJECTS = ["I", "My team", "My manager", "My sister", "Our startup", "My landlord", "The client", "My doctor"]
_VERBS = ["moved", "switched", "started", "stopped", "planned", "finished", "postponed", "reviewed"]
_THINGS = ["the billing service", "the mobile app", "a marathon plan", "the kitchen renovation", "Spanish lessons",
           "the data pipeline", "a trip to Lisbon", "the tax return", "violin practice", "the garden shed"]
_NAMES = ["Atlas", "Orion", "Kestrel", "Juniper", "Nimbus", "Quartz", "Falcon", "Harbor", "Cobalt", "Meadow",
          "PostgreSQL", "Kubernetes", "Rust", "Go", "React", "Django", "Berlin", "Osaka", "Lisbon", "Denver"]
_WHEN = ["last week", "yesterday", "in March", "this morning", "two days ago", "over the weekend"]
_KINDS = ["fact", "project", "preference", "profile", "event"]


def memory_text(rng: random.Random) -> str:
    return (f"{rng.choice(_SUBJECTS)} {rng.choice(_VERBS)} {rng.choice(_THINGS)} with {rng.choice(_NAMES)} "
            f"{rng.choice(_WHEN)}")


class CachedEmbedder:
    """wordllama's vectors for known texts (computed once), by lookup; same name and dim."""

    def __init__(self, inner) -> None:
        self.inner = inner
        self.name, self.dim = inner.name, inner.dim
        self.cache: dict = {}

    def warm(self, texts: list) -> None:
        missing = [t for t in dict.fromkeys(texts) if t not in self.cache]
        if missing:
            for text, row in zip(missing, self.inner(missing)):
                self.cache[text] = row

    def __call__(self, texts: list) -> np.ndarray:
        self.warm(texts)  # names of entities new to a user: embedded once, then looked up
        return np.stack([self.cache[t] for t in texts])


def _cache_folder() -> str:
    return os.path.join(os.path.expanduser("~"), ".cache", "vecgraph", "bench", f"memory-{N}-{USERS}.vg")


def build_store(path: str) -> None:
    """N memories round-robin over USERS users, 5 kinds, 3 sessions each."""
    from tqdm import tqdm

    rng = random.Random(7)
    mem = vg.Memory.open(path, sync="off")
    start = 1_700_000_000_000_000
    for i in tqdm(range(N), desc="memories", mininterval=2.0):
        user = f"user{i % USERS:04d}"
        mem.remember(user, memory_text(rng), kind=_KINDS[i % len(_KINDS)], session=f"s{i // USERS % 3}",
                     at=start + i * 60_000_000)
    mem.graph.checkpoint()
    mem.close()


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    cached = _cache_folder()
    if not os.path.isdir(cached):
        os.makedirs(os.path.dirname(cached), exist_ok=True)
        partial = cached + ".building"
        shutil.rmtree(partial, ignore_errors=True)
        build_store(partial)
        os.replace(partial, cached)
    path = str(tmp_path_factory.mktemp("memory") / "store.vg")
    shutil.copytree(cached, path)
    embedder = CachedEmbedder(embedders.load("wordllama"))
    rng = random.Random(11)
    texts = [memory_text(rng) for _ in range(4 * ROUNDS)]
    questions = [f"what did I do with {rng.choice(_NAMES)} {rng.choice(_WHEN)}?" for _ in range(4 * ROUNDS)]
    embedder.warm(texts + questions)
    mem = vg.Memory.open(path, embedder=embedder, sync=SYNC)
    mem.graph.wait_for_indexing()
    for q in questions[:50]:  # warm-up
        mem.recall("user0001", q)
    yield mem, texts, questions
    mem.close()


def _p50_ms(fn, rounds: int) -> float:
    times = []
    for i in range(rounds):
        t = time.perf_counter()
        fn(i)
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e3


def bench_memory_remember_then_recall(benchmark, store):
    mem, texts, questions = store
    users = [f"user{u:04d}" for u in range(0, USERS, max(1, USERS // 50))]

    def pair(i: int) -> None:
        user = users[i % len(users)]
        mem.remember(user, texts[i % len(texts)], kind="fact")
        mem.recall(user, questions[i % len(questions)], k=5)

    # Baseline, same run: publish (commit) the BM25 index before each recall.
    def pair_publishing(i: int) -> None:
        user = users[i % len(users)]
        mem.remember(user, texts[-1 - i % len(texts)], kind="fact")
        mem.graph._text_index().flush()
        mem.recall(user, questions[i % len(questions)], k=5)

    delta = _p50_ms(pair, ROUNDS)
    publishing = _p50_ms(pair_publishing, ROUNDS)
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: pair(next(counter)), rounds=ROUNDS, iterations=1)
    benchmark.extra_info.update(p50_ms=round(delta, 3), p50_ms_publishing_each_write=round(publishing, 3),
                                speedup=round(publishing / delta, 2), memories=len(mem.graph), sync=SYNC)
    print(f"\nremember+recall p50 {delta:.3f} ms; publishing before each recall {publishing:.3f} ms "
          f"({publishing / delta:.1f}x)")


def bench_memory_recall(benchmark, store):
    mem, _, questions = store
    users = [f"user{u:04d}" for u in range(1, USERS, max(1, USERS // 50))]
    mem.graph._text_index().flush()
    p50 = _p50_ms(lambda i: mem.recall(users[i % len(users)], questions[i % len(questions)], k=5), ROUNDS)
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: mem.recall(users[next(counter) % len(users)], questions[0], k=5), rounds=ROUNDS,
                       iterations=1)
    benchmark.extra_info.update(p50_ms=round(p50, 3))
    print(f"\nrecall p50 {p50:.3f} ms")


def bench_memory_card(benchmark, store):
    mem, _, _ = store
    users = [f"user{u:04d}" for u in range(2, USERS, max(1, USERS // 50))]
    built = _p50_ms(lambda i: mem.card(users[i % len(users)], refresh=True), 100)
    stored = _p50_ms(lambda i: mem.card(users[i % len(users)]), 100)
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: mem.card(users[next(counter) % len(users)], refresh=True), rounds=50, iterations=1)
    benchmark.extra_info.update(p50_ms_build=round(built, 3), p50_ms_stored=round(stored, 3),
                                memories_per_user=N // USERS)
    print(f"\ncard: build and store p50 {built:.3f} ms, read stored p50 {stored:.3f} ms")


def bench_memory_forget(benchmark, store):
    mem, _, _ = store
    users = iter(f"user{u:04d}" for u in range(USERS - 1, 0, -1))
    receipts = []

    def forget() -> None:
        receipts.append(mem.forget(next(users)))

    benchmark.pedantic(forget, rounds=5, iterations=1)
    assert all(r.verified for r in receipts)
    seconds = [r.seconds for r in receipts]
    benchmark.extra_info.update(memories_each=[r.memories for r in receipts], seconds=[round(s, 3) for s in seconds],
                                store_memories=len(mem.graph))
    print(f"\nforget: {[r.memories for r in receipts]} memories, {statistics.median(seconds):.3f} s median")
