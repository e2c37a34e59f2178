"""vecgraph.distributed on a local Ray (2 CPUs, 4 shards as actors): sharded searches against one
graph holding the same data, routing, writes across shards, and shard failures."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import ray

import vecgraph as vg
from vecgraph.distributed import ShardedGraph, ShardUnavailableError, stable_hash

DIM = 16
N = 600
TENANTS = [f"user-{i}" for i in range(12)]
LABELS = ["billing", "search", "storage", "auth"]


def domain_of(key, label, tenant):
    """A domain function: a node's domain is its label's first letter (b, s, a)."""
    return label[:1]


def other_domain_of(key, label, tenant):
    return label


@pytest.fixture(scope="module", autouse=True)
def local_ray():
    if not ray.is_initialized():
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False)
    yield
    ray.shutdown()


def _data(seed=0):
    rng = np.random.default_rng(seed)
    vectors = rng.standard_normal((N, DIM)).astype(np.float32)
    keys = [f"n{i}" for i in range(N)]
    tenants = [TENANTS[i % len(TENANTS)] for i in range(N)]
    labels = [LABELS[(i // len(TENANTS)) % len(LABELS)] for i in range(N)]
    # Texts of one length (four terms), so every shard's average text length is the graph's.
    texts = [f"w{i % 7} t{i % 13} u{i % 5} n{(i * 7) % N}" for i in range(N)]
    # Edges inside a tenant and a label: every routing mode keeps both ends on one shard.
    src, dst = [], []
    for i in range(N):
        for step in (len(TENANTS) * len(LABELS), 2 * len(TENANTS) * len(LABELS)):
            if i + step < N:
                src.append(keys[i])
                dst.append(keys[i + step])
    return keys, vectors, tenants, labels, texts, src, dst


@pytest.fixture(scope="module", params=["tenant", "key", "label", "domain"])
def sharded(request, tmp_path_factory):
    """(mode, a 4-shard graph, one in-process graph with the same nodes and edges)."""
    mode = domain_of if request.param == "domain" else request.param
    keys, vectors, tenants, labels, texts, src, dst = _data()
    if request.param == "key":  # hashed keys: only the edges whose ends hash to one shard
        kept = [(a, b) for a, b in zip(src, dst) if stable_hash(a) % 4 == stable_hash(b) % 4]
        src, dst = [a for a, _ in kept], [b for _, b in kept]
    placement = {label: i for i, label in enumerate(LABELS)} if request.param == "label" else None
    sg = ShardedGraph.create(
        tmp_path_factory.mktemp(f"sg-{request.param}"),
        shards=4,
        dim=DIM,
        metric="cos",
        shard_by=mode,
        placement=placement,
    )
    sg.add_nodes(keys[:250], vectors[:250], tenants=tenants[:250], labels=labels[:250], texts=texts[:250])
    sg.add_nodes(keys[250:], vectors[250:], tenants=tenants[250:], labels=labels[250:], texts=texts[250:])
    sg.add_edges(src, dst, rels="next")
    g = vg.Graph(DIM, "cos")
    g.add_nodes(keys, vectors, tenants=tenants, labels=labels, texts=texts)
    g.add_edges(src, dst, rels="next")
    assert g.count_edges >= 100
    yield request.param, sg, g
    sg.close()


def _same(a, b):
    assert list(a.keys) == list(b.keys)
    np.testing.assert_allclose(np.asarray(a.scores), np.asarray(b.scores), rtol=1e-6)
    assert [int(h) for h in a.hops] == [int(h) for h in b.hops]


def test_stable_hash_values():
    # Recorded values (BLAKE2b-64 of "i:0", "i:1", "s:a", ...): a change of the hash would route
    # keys to other shards than the ones that hold them.
    assert [stable_hash(v) for v in (0, 1, "a", "user-42", "鍵")] == [
        6582890487072712790,
        8727818820637439042,
        12879428041476107001,
        3178281232189284941,
        4006078895292045730,
    ]
    assert stable_hash(1) != stable_hash("1")
    with pytest.raises(TypeError, match="str or an int"):
        stable_hash(True)


def test_every_node_on_one_shard_and_spread(sharded):
    mode, sg, single = sharded
    stats = sg.stats()
    assert stats["nodes"] == N == len(sg)
    assert stats["edges"] == single.count_edges
    per = [s["nodes"] for s in stats["shards"]]
    assert sum(per) == N and sum(1 for n in per if n) >= 2  # 12 tenants, 600 keys, 4 labels, 3 domains
    if mode == "label":  # placed one label a shard
        _, _, _, labels, *_ = _data()
        assert per == [labels.count(label) for label in LABELS]


@pytest.mark.parametrize("hops", [0, 2])
def test_fan_out_exact_search_equals_one_graph(sharded, hops):
    _, sg, single = sharded
    _, vectors, *_ = _data()
    rng = np.random.default_rng(1)
    for i in range(12):
        q = vectors[i * 7] + 0.3 * rng.standard_normal(DIM).astype(np.float32)
        got = sg.search(q, k=10, seeds=6, hops=hops, exact=True)
        want = single.search(q, k=10, seeds=6, hops=hops, exact=True)
        _same(got, want)
        assert got.partial is False and got.missing_shards == []
        assert [[tuple(e) for e in p] for p in got.paths] == [[tuple(e) for e in p] for p in want.paths]


def test_routed_query_equals_one_graph_and_touches_one_shard(sharded):
    mode, sg, single = sharded
    _, vectors, *_ = _data()
    before = sg.counters()
    if mode == "tenant":
        filters = {"tenants": ["user-3"]}
    elif mode == "label":
        filters = {"labels": ["storage"]}
    elif mode == "domain":
        filters = {"domains": ["s"]}  # search and storage
    else:
        filters = {"tenants": ["user-3"]}  # by key: a tenant is on every shard, the query fans out
    got = sg.search(vectors[5], k=10, hops=2, exact=True, **filters)
    reference = dict(filters)
    if "domains" in reference:
        reference = {"labels": ["search", "storage"]}
    want = single.search(vectors[5], k=10, hops=2, exact=True, **reference)
    _same(got, want)
    after = sg.counters()
    touched = [i for i in range(4) if after[i]["search"] > before[i]["search"]]
    if mode == "key":
        assert touched == [0, 1, 2, 3]
    else:
        assert len(touched) == 1 and set(got.shards) <= set(touched)


@pytest.mark.parametrize("fusion", ["convex", "rrf"])
def test_hybrid_equals_one_graph(sharded, fusion):
    _, sg, single = sharded
    _, vectors, *_ = _data()
    for i in range(10):
        text = f"w{i % 7} t{i % 11} n{i * 3}"
        got = sg.hybrid_search(text, vectors[i], k=10, exact=True, fusion=fusion)
        want = single.hybrid_search(text, vectors[i], k=10, fusion=fusion)
        assert got.channels == want.channels == ("dense", "bm25", "graph", "entity")
        for channel in want.lists:
            assert got.lists[channel] == want.lists[channel], (i, channel)
            np.testing.assert_allclose(got.channel_scores[channel], want.channel_scores[channel], rtol=1e-5)
        assert [h.key for h in got] == [h.key for h in want]
        np.testing.assert_allclose([h.score for h in got], [h.score for h in want], rtol=1e-5)
        assert [h.ranks for h in got] == [h.ranks for h in want]
        assert [[tuple(e) for e in h.path] for h in got] == [[tuple(e) for e in h.path] for h in want]
        assert [r["text"] for r in got.to_dicts()] == [r["text"] for r in want.to_dicts()]


def test_hybrid_text_only_and_filters(sharded):
    _, sg, single = sharded
    got = sg.hybrid_search("w3 t5 n21", k=10, tenants=["user-2", "user-5"])
    want = single.hybrid_search("w3 t5 n21", k=10, tenants=["user-2", "user-5"])
    assert got.channels == ("bm25", "entity") and got.lists == want.lists
    assert [h.key for h in got] == [h.key for h in want]


def test_bm25_statistics_are_the_graphs():
    # The shards' own idf would rank differently: here one shard holds most texts with "alpha".
    from vecgraph.text import TextIndex
    from vecgraph.tokenizer import tokenize

    whole, parts = TextIndex(), [TextIndex(), TextIndex()]
    # Texts of one length: BM25's length normalisation stays the shard's (see vecgraph.distributed.hybrid).
    texts = ["alpha beta"] * 30 + ["beta gamma"] * 30 + ["alpha delta"] * 5 + ["gamma delta"] * 5
    whole.upsert(list(range(len(texts))), texts, lsn=1)
    parts[0].upsert(list(range(40)), texts[:40], lsn=1)
    parts[1].upsert(list(range(40, len(texts))), texts[40:], lsn=1)
    for index in (whole, *parts):
        index.flush()
    terms = list(dict.fromkeys(tokenize("alpha delta")))
    counts = [part.document_frequencies(terms) for part in parts]
    statistics = (sum(c[0] for c in counts), {t: sum(c[1][j] for c in counts) for j, t in enumerate(terms)})
    merged = sorted(
        (row for part in parts for row in part.search("alpha delta", 70, statistics=statistics)),
        key=lambda row: (-row[1], row[0]),
    )
    want = whole.search("alpha delta", 70)
    assert [key for key, _ in merged] == [key for key, _ in want]
    np.testing.assert_allclose([s for _, s in merged], [s for _, s in want], rtol=1e-6)
    local = sorted(
        (row for part in parts for row in part.search("alpha delta", 70)), key=lambda r: (-r[1], r[0])
    )
    assert [s for _, s in local] != pytest.approx([s for _, s in want])  # without them it differs


def test_cross_shard_edge_refused_and_nothing_written(tmp_path):
    with ShardedGraph.create(tmp_path / "sg", shards=4, dim=4, shard_by="tenant") as sg:
        vectors = np.eye(4, dtype=np.float32)
        tenants = ["a", "a", "b", "c"]
        assert len({stable_hash(t) % 4 for t in ("a", "b")}) == 2
        sg.add_nodes([1, 2, 3, 4], vectors, tenants=tenants)
        before = [s["last_lsn"] for s in sg.stats()["shards"]]
        with pytest.raises(
            vg.InvalidArgumentError, match=r"edge 1: 1 is on shard \d and 3 on shard \d; an edge joins"
        ):
            sg.add_edges([1, 1], [2, 3])
        with pytest.raises(vg.NotFoundError, match="dst 99"):
            sg.add_edges([1], [99])
        assert [s["last_lsn"] for s in sg.stats()["shards"]] == before
        assert sg.stats()["edges"] == 0
        sg.add_edges([1], [2], rels="knows")
        assert [tuple(e) for e in sg.neighbors(1)] == [(1, "knows", 2, 1.0)]


def test_rejected_batch_leaves_no_trace_on_any_shard(tmp_path):
    with ShardedGraph.create(tmp_path / "sg", shards=4, dim=4, shard_by="tenant") as sg:
        sg.add_nodes(["x"], np.ones((1, 4), np.float32), tenants="a")
        before = [(s["nodes"], s["last_lsn"]) for s in sg.stats()["shards"]]
        rows = np.eye(4, dtype=np.float32)
        # "x" is on tenant a's shard; a batch for other tenants that repeats it is refused everywhere.
        with pytest.raises(vg.DuplicateKeyError, match="'x' is already in the graph"):
            sg.add_nodes(["p", "q", "x", "r"], rows, tenants=["b", "c", "d", "e"])
        with pytest.raises(vg.InvalidArgumentError):  # NaN, checked on its shard before any shard writes
            sg.add_nodes(
                ["p", "q"], np.array([[1, 0, 0, 0], [np.nan, 0, 0, 0]], np.float32), tenants=["b", "e"]
            )
        with pytest.raises(vg.DimensionMismatchError, match=r"shape \(2, 4\)"):
            sg.add_nodes(["p", "q"], np.ones((2, 3), np.float32))
        with pytest.raises(vg.DuplicateKeyError, match="rows 0 and 1"):
            sg.add_nodes(["p", "p"], np.ones((2, 4), np.float32))
        with pytest.raises(TypeError, match=r"tenants\[1\] must be a str"):
            sg.add_nodes(["p", "q"], np.ones((2, 4), np.float32), tenants=["b", None])
        assert [(s["nodes"], s["last_lsn"]) for s in sg.stats()["shards"]] == before
        with pytest.raises(vg.InvalidArgumentError, match="records none"):
            sg.search("text")
        with pytest.raises(vg.InvalidArgumentError, match="k must be"):
            sg.search(np.ones(4), k=0)
        with pytest.raises(vg.DimensionMismatchError):
            sg.search(np.ones(5))
        with pytest.raises(vg.InvalidArgumentError, match='routes by "tenant"'):
            sg.search(np.ones(4), domains=["x"])


def test_reopen_keeps_routing_and_answers(tmp_path):
    prefix = tmp_path / "sg"
    keys, vectors, tenants, labels, texts, src, dst = _data(3)
    with ShardedGraph.create(prefix, shards=3, dim=DIM, shard_by=domain_of) as sg:
        sg.add_nodes(keys, vectors, tenants=tenants, labels=labels, texts=texts)
        sg.add_edges(src, dst)
        want = sg.search(vectors[9], k=10, exact=True)
        per = [s["nodes"] for s in sg.stats()["shards"]]
    table = json.loads((prefix / "routing.json").read_text())
    assert table["shards"] == 3 and table["mode"] == "domain" and set(table["domains"]) == {"a", "b", "s"}
    assert table["domain_function"].endswith(":domain_of")
    with pytest.raises(vg.InvalidArgumentError, match="routes by the domain function"):
        ShardedGraph.open(prefix)
    with pytest.raises(vg.InvalidArgumentError, match="a different function"):
        ShardedGraph.open(prefix, shard_by=other_domain_of)
    with pytest.raises(vg.InvalidArgumentError, match="module-level function"):
        ShardedGraph.open(prefix, shard_by=lambda key, label, tenant: label)
    with ShardedGraph.open(prefix, shard_by=domain_of) as sg:
        assert [s["nodes"] for s in sg.stats()["shards"]] == per
        _same(sg.search(vectors[9], k=10, exact=True), want)
        with pytest.raises(FileExistsError):
            ShardedGraph.create(prefix, shards=3, dim=DIM)
    # A table whose hash no longer places keys as it did is refused, not used.
    table["probe_digest"] = "0" * 16
    (prefix / "routing.json").write_text(json.dumps(table))
    with pytest.raises(vg.CorruptionError, match="wrong shards"):
        ShardedGraph.open(prefix, shard_by=domain_of)
    with pytest.raises(FileNotFoundError, match="holds no sharded graph"):
        ShardedGraph.open(tmp_path / "nothing")


def test_a_prefix_open_elsewhere_is_refused_by_name(tmp_path):
    with ShardedGraph.create(tmp_path / "sg", shards=2, dim=4, timeout_s=20) as sg:
        sg.add_nodes([1], np.ones((1, 4), np.float32))
        with pytest.raises(
            ShardUnavailableError, match=r"could not start: .*StorageError: .*shard-000\d is already open"
        ):
            ShardedGraph.open(tmp_path / "sg", timeout_s=20)
        assert len(sg) == 1  # the graph that holds the folders goes on
    with ShardedGraph.open(tmp_path / "sg") as again:  # the failed open left no actor holding a folder
        assert len(again) == 1


def test_placement_and_bad_arguments(tmp_path):
    with pytest.raises(vg.InvalidArgumentError, match="shards must be in"):
        ShardedGraph.create(tmp_path / "a", shards=0, dim=4)
    with pytest.raises(vg.InvalidArgumentError, match="shard_by must be"):
        ShardedGraph.create(tmp_path / "b", shards=2, dim=4, shard_by="colour")
    with pytest.raises(vg.InvalidArgumentError, match="placement names the shard of a domain"):
        ShardedGraph.create(tmp_path / "c", shards=2, dim=4, placement={"x": 0})
    with pytest.raises(vg.InvalidArgumentError, match=r"placement\['x'\] must be a shard in \[0, 2\)"):
        ShardedGraph.create(tmp_path / "d", shards=2, dim=4, shard_by="label", placement={"x": 2})
    with ShardedGraph.create(
        tmp_path / "e", shards=2, dim=4, shard_by="label", placement={"x": 1, "y": 1}
    ) as sg:
        sg.add_nodes([1, 2, 3], np.eye(3, 4, dtype=np.float32), labels=["x", "y", "x"])
        assert [s["nodes"] for s in sg.stats()["shards"]] == [0, 3]
        assert sg.search(np.ones(4), labels=["nowhere"]).keys == []


def test_cli_opens_one_shard_folder(tmp_path):
    prefix = tmp_path / "sg"
    with ShardedGraph.create(prefix, shards=2, dim=4, shard_by="key") as sg:
        sg.add_nodes(list(range(10)), np.random.default_rng(0).standard_normal((10, 4)))
        per = [s["nodes"] for s in sg.stats()["shards"]]
    out = subprocess.run(
        [sys.executable, "-m", "vecgraph", "stats", str(prefix / "shard-0001"), "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout
    assert json.loads(out)["nodes"] == per[1]


def _writer(sg, acknowledged, failures, stop):
    batch = 0
    while not stop.is_set():
        keys = [f"w{batch}-{i}" for i in range(20)]
        vectors = np.random.default_rng(batch).standard_normal((20, 8)).astype(np.float32)
        try:
            sg.add_nodes(keys, vectors, tenants="t0")
            acknowledged.extend(keys)
        except ShardUnavailableError as exc:
            failures.append(exc)
            time.sleep(0.05)
        except vg.DuplicateKeyError:  # cannot happen: every batch has new keys
            raise
        batch += 1


def test_sigkill_mid_writes_keeps_every_acknowledged_write(tmp_path):
    sg = ShardedGraph.create(tmp_path / "sg", shards=4, dim=8, shard_by="tenant", sync="always", timeout_s=60)
    try:
        owner = stable_hash("t0") % 4
        acknowledged: list = []
        failures: list = []
        stop = threading.Event()
        thread = threading.Thread(target=_writer, args=(sg, acknowledged, failures, stop))
        thread.start()
        while len(acknowledged) < 200:
            time.sleep(0.01)
        pid = sg.pids()[owner]
        os.kill(pid, signal.SIGKILL)
        at_kill = len(acknowledged)
        deadline = time.monotonic() + 60
        while len(acknowledged) < at_kill + 400 and time.monotonic() < deadline:
            time.sleep(0.05)
        stop.set()
        thread.join(60)
        # A write in flight when the process died fails (it may or may not have been applied);
        # the writes sent while Ray restarts the shard wait for it.
        assert all(e.shard == owner and "may or may not have been applied" in str(e) for e in failures)
        assert len(acknowledged) >= at_kill + 400
        assert sg.pids()[owner] != pid  # restarted by Ray
        present = sg.stats()["shards"][owner]
        found = ray.get(sg._actors[owner].holds.remote(acknowledged))
        assert all(found), f"{found.count(False)} acknowledged writes lost"
        assert present["nodes"] >= len(acknowledged)
        assert ray.get(sg._actors[owner].verify.remote()) == []
        last = acknowledged[-1]
        vector = np.asarray(sg.get_node(last)["vector"], np.float32)
        assert sg.search(vector, k=1, tenants=["t0"], exact=True).keys == [last]
    finally:
        sg.close()


def test_query_waits_for_a_restart(tmp_path):
    with ShardedGraph.create(tmp_path / "sg", shards=2, dim=8, shard_by="key", timeout_s=60) as sg:
        vectors = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
        sg.add_nodes(list(range(50)), vectors)
        want = sg.search(vectors[4], k=5, exact=True)
        pid = sg.pids()[0]
        os.kill(pid, signal.SIGKILL)
        _same(sg.search(vectors[4], k=5, exact=True), want)
        assert sg.pids()[0] != pid


def test_dead_shard_fails_by_name_or_returns_partial(tmp_path):
    with ShardedGraph.create(
        tmp_path / "sg", shards=2, dim=8, shard_by="key", timeout_s=10, max_restarts=0
    ) as sg:
        vectors = np.random.default_rng(0).standard_normal((50, 8)).astype(np.float32)
        sg.add_nodes(list(range(50)), vectors)
        alive = [k for k in range(50) if stable_hash(k) % 2 == 0]
        os.kill(sg.pids()[1], signal.SIGKILL)
        with pytest.raises(ShardUnavailableError, match="shard 1 did not answer") as info:
            sg.search(vectors[4], k=5, hops=0)
        assert info.value.shard == 1
        partial = sg.search(vectors[4], k=5, hops=0, exact=True, allow_partial=True)
        assert partial.partial is True and partial.missing_shards == [1] and "partial" in repr(partial)
        assert set(partial.keys) <= set(alive) and len(partial.keys) == 5
        hybrid = sg.hybrid_search(vector=vectors[4], k=5, allow_partial=True)
        assert hybrid.partial is True and hybrid.missing_shards == [1]
        with pytest.raises(ShardUnavailableError, match="shard 1"):
            sg.add_nodes([1000 + k for k in range(8)], np.ones((8, 8), np.float32))


def test_text_queries_with_the_recorded_embedder(tmp_path):
    from memory_helpers import FakeEmbedder

    from vecgraph import embedders

    emb = FakeEmbedder()
    texts = [
        f"{w} notes about {v}"
        for w in ("billing", "search", "storage")
        for v in ("outages", "costs", "plans")
    ]
    vectors = emb(texts)
    prefix = tmp_path / "sg"
    with ShardedGraph.create(prefix, shards=2, dim=emb.dim, shard_by="key") as sg:
        assert sg.embedder is None
        sg.add_nodes(list(range(len(texts))), vectors, texts=texts)
        with pytest.raises(vg.InvalidArgumentError, match="records none"):
            sg.search("billing costs")
        sg.use_embedder(emb)
        assert sg.embedder == {"name": emb.name, "dim": emb.dim}
        got = sg.search("billing costs", k=3, hops=0, exact=True)
        _same(got, sg.search(emb(["billing costs"])[0], k=3, hops=0, exact=True))
        assert got.keys[0] == 1
        with pytest.raises(vg.DimensionMismatchError, match="64"):
            sg.use_embedder(
                type("Short", (), {"name": "short", "dim": 8, "__call__": lambda self, t: None})()
            )
        single = vg.Graph(emb.dim, "cos")
        single.add_nodes(list(range(len(texts))), vectors, texts=texts)
        single.use_embedder(emb)
        fused = sg.hybrid_search("storage plans", k=4, exact=True)
        want = single.hybrid_search("storage plans", k=4)
        assert fused.channels == want.channels == ("dense", "bm25", "graph", "entity")
        # The toy embedder ties many scores: one graph orders ties by insertion, shards by shard first.
        for channel in want.lists:
            assert dict(zip(fused.lists[channel], np.round(fused.channel_scores[channel], 5))) == dict(
                zip(want.lists[channel], np.round(want.channel_scores[channel], 5))
            )
        assert fused.keys[0] == want.keys[0] == 8
    # Reopened: the shards record the embedder by name; loading it by name needs it registered.
    before = dict(embedders._REGISTERED)
    try:
        embedders.register(emb.name, FakeEmbedder)
        with ShardedGraph.open(prefix) as sg:
            assert sg.embedder == {"name": emb.name, "dim": emb.dim}
            assert sg.search("search outages", k=1, hops=0, exact=True).keys == [3]
    finally:
        embedders._REGISTERED.clear()
        embedders._REGISTERED.update(before)
    with ShardedGraph.open(prefix) as sg, pytest.warns(RuntimeWarning, match="did not load"):
        assert sg.hybrid_search("search outages", k=2).channels == ("bm25", "entity")


def _two_tenants():
    """Two tenants that hash to different shards of 2."""
    first = "t0"
    second = next(f"t{i}" for i in range(1, 100) if stable_hash(f"t{i}") % 2 != stable_hash(first) % 2)
    return first, second


def _trace(sg):
    return [(s["nodes"], s["edges"], s["last_lsn"]) for s in sg.stats()["shards"]]


def test_a_batch_over_shards_with_one_bad_row_writes_nothing(tmp_path):
    a, b = _two_tenants()
    with ShardedGraph.create(tmp_path / "sg", shards=2, dim=4) as sg:
        sg.add_nodes(["a1", "a2", "b1", "b2"], np.eye(4, dtype=np.float32) + 0.1, tenants=[a, a, b, b])
        before = _trace(sg)
        bad_edges = [
            dict(weights=[1.0, float("nan")]),
            dict(rels=["r", None]),
            dict(weights=[1, "x"]),
            dict(props=[{}, 5]),
            dict(ts=[1, "x"]),
            dict(texts="one text"),
            dict(vectors=np.array([[1, 0, 0, 0], [np.nan, 0, 0, 0]], np.float32)),
        ]
        for columns in bad_edges:
            with pytest.raises((vg.InvalidArgumentError, TypeError, ValueError)):
                sg.add_edges(["a1", "b1"], ["a2", "b2"], **columns)
            assert _trace(sg) == before, columns
        bad_nodes = [
            (["x", 2**70], {}, "outside int64|must fit int64"),
            (["x", "\ud800"], {}, "surrogate"),
            (["x", "y"], {"texts": ["ok", "\udc00"]}, "surrogate"),
            (["x", "y"], {"props": [{}, {}, {}]}, "3"),
            (["x", "y"], {"props": [{}]}, "1"),
        ]
        for keys, columns, message in bad_nodes:
            with pytest.raises((vg.InvalidArgumentError, ValueError, TypeError), match=message):
                sg.add_nodes(keys, np.ones((2, 4), np.float32), tenants=[a, b], **columns)
            assert _trace(sg) == before, (keys, columns)
        # The error names the caller's row, not the row of a shard's part.
        rows = np.ones((8, 4), np.float32)
        rows[7, 0] = np.nan
        with pytest.raises(vg.InvalidArgumentError, match="row 7"):
            sg.add_nodes([f"k{i}" for i in range(8)], rows, tenants=[a, b] * 4)
        assert _trace(sg) == before


def test_a_failed_create_leaves_nothing_and_shard_folders_are_not_adopted(tmp_path):
    prefix = tmp_path / "sg"
    with pytest.raises(ShardUnavailableError, match="could not start: .*dim"):
        ShardedGraph.create(prefix, shards=2, dim=0)
    assert not prefix.exists()
    with pytest.raises(vg.InvalidArgumentError, match="timeout_s must be finite and > 0"):
        ShardedGraph.create(prefix, shards=2, dim=4, timeout_s=0)
    with pytest.raises(vg.InvalidArgumentError, match="module-level function"):
        ShardedGraph.create(prefix, shards=2, dim=4, shard_by=lambda key, label, tenant: label)
    assert not prefix.exists()
    with ShardedGraph.create(prefix, shards=2, dim=4, shard_by="key") as sg:
        sg.add_nodes(list(range(20)), np.ones((20, 4), np.float32))
    (prefix / "routing.json").unlink()
    with pytest.raises(FileExistsError, match="shard folders but no routing table"):
        ShardedGraph.create(prefix, shards=3, dim=4, shard_by="key")


def test_label_routing_is_not_poisoned_by_a_rejected_batch(tmp_path):
    with ShardedGraph.create(tmp_path / "sg", shards=4, dim=4, shard_by="label") as sg:
        with pytest.raises(vg.InvalidArgumentError, match="surrogate"):
            sg.add_nodes(["a"], np.ones((1, 4), np.float32), labels="\ud800")
        with pytest.raises(vg.InvalidArgumentError):
            sg.add_nodes(["a"], np.full((1, 4), np.nan, np.float32), labels="ghost")
        sg.add_nodes(["b"], np.ones((1, 4), np.float32), labels="fresh")
        table = json.loads((tmp_path / "sg" / "routing.json").read_text())
        assert list(table["domains"]) == ["fresh"] and not (tmp_path / "sg" / "routing.json.tmp").exists()
        assert sg.search(np.ones(4), labels=["ghost"]).keys == []


def test_routed_hybrid_search_uses_the_whole_graphs_statistics(sharded):
    mode, sg, single = sharded
    _, vectors, *_ = _data()
    filters = {
        "tenant": {"tenants": ["user-3"]},
        "label": {"labels": ["auth"]},
        "domain": {"domains": ["a"]},
        "key": {"tenants": ["user-3"]},
    }[mode]
    reference = {"labels": ["auth"]} if mode == "domain" else filters
    for i in range(6):
        text = f"w{i % 7} t{i % 13} n{i * 11}"
        before = sg.counters()
        got = sg.hybrid_search(text, vectors[i], k=10, exact=True, **filters)
        want = single.hybrid_search(text, vectors[i], k=10, **reference)
        for channel in want.lists:
            assert got.lists[channel] == want.lists[channel], (mode, i, channel)
        assert [h.key for h in got] == [h.key for h in want]
        after = sg.counters()
        asked = [s for s in range(4) if after[s]["statistics"] > before[s]["statistics"]]
        walked = [s for s in range(4) if after[s]["hybrid"] > before[s]["hybrid"]]
        if mode != "key":
            assert len(walked) == 1 and sorted(asked + walked) == [0, 1, 2, 3]
        local = sg.hybrid_search(text, vectors[i], k=10, exact=True, statistics="routed", **filters)
        if mode != "key":
            assert [s for s in range(4) if sg.counters()[s] != after[s]] == walked  # one shard, nothing else
        assert len(local) == 10


def test_more_bad_arguments_change_nothing(tmp_path):
    with ShardedGraph.create(tmp_path / "sg", shards=2, dim=4, shard_by="key") as sg:
        sg.add_nodes(["k0", "k1"], np.eye(2, 4, dtype=np.float32) + 0.1)
        before = _trace(sg)
        with pytest.raises(TypeError):
            sg.search(np.ones(4), exclude_keys="k0")
        with pytest.raises(TypeError):
            sg.hybrid_search(vector=np.ones(4), exclude_keys=5)
        with pytest.raises(vg.InvalidArgumentError, match="seeds"):
            sg.hybrid_search(vector=np.ones(4), seeds=0)
        with pytest.raises(vg.InvalidArgumentError, match="seeds"):
            sg.search(np.ones(4), seeds=-3, hops=2)
        with pytest.raises(vg.InvalidArgumentError, match="timeout_s"):
            sg.search(np.ones(4), timeout_s=-1)
        with pytest.raises(TypeError, match="timeout_s"):
            sg.search(np.ones(4), timeout_s="x")
        with pytest.raises(vg.InvalidArgumentError, match="statistics"):
            sg.hybrid_search("k0", statistics="mine")
        for key in (["k0"], None, 1.0, True):
            with pytest.raises(TypeError, match="must be a str or an int"):
                sg.get_node(key)
        assert _trace(sg) == before
        assert "k0" in sg and "zz" not in sg and None not in sg and np.int64(5) not in sg
        assert sg.verify() == []


def test_a_pickled_result_keeps_its_shards_and_delete_tenant(tmp_path):
    import pickle

    with ShardedGraph.create(tmp_path / "sg", shards=4, dim=4, shard_by="tenant") as sg:
        sg.add_nodes([1, 2, 3], np.eye(3, 4, dtype=np.float32) + 0.1, tenants=["a", "a", "b"])
        result = sg.search(np.ones(4), k=3, exact=True)
        copy = pickle.loads(pickle.dumps(result))
        assert copy.keys == result.keys and copy.shards == result.shards and copy.partial is False
        assert [r["tenant"] for r in copy.to_dicts()] == [r["tenant"] for r in result.to_dicts()]
        assert sg.delete_tenant("a") == 2
        assert len(sg) == 1 and 1 not in sg and 3 in sg
    table = json.loads((tmp_path / "sg" / "routing.json").read_text())
    table["folders"] = table["folders"][::-1]
    (tmp_path / "sg" / "routing.json").write_text(json.dumps(table))
    with pytest.raises(vg.CorruptionError, match="do not match 4 shards"):
        ShardedGraph.open(tmp_path / "sg")


def test_upsert_replaces_in_place_places_new_keys_and_never_moves_a_node(tmp_path):
    a, b = _two_tenants()
    rng = np.random.default_rng(5)
    first, second = (
        rng.standard_normal((4, 4)).astype(np.float32),
        rng.standard_normal((4, 4)).astype(np.float32),
    )
    single = vg.Graph(4, "cos")
    with ShardedGraph.create(tmp_path / "sg", shards=2, dim=4, shard_by="tenant") as sg:
        for g in (sg, single):
            g.add_nodes(["x", "y"], first[:2], tenants=[a, b], texts=["old x", "old y"])
            g.upsert_nodes(["x", "y", "z", "w"], second, texts=["new x", "new y", "new z", "new w"])
        assert sg.get_node("x")["tenant"] == a and sg.get_node("y")["tenant"] == b  # kept
        assert sg.get_node("z")["tenant"] == "" and sg.get_node("y")["text"] == "new y"
        for q in rng.standard_normal((5, 4)):
            _same(sg.search(q, k=4, exact=True, hops=0), single.search(q, k=4, exact=True, hops=0))
        before = _trace(sg)
        with pytest.raises(
            vg.InvalidArgumentError, match=r"keys\[0\] 'x' is on shard \d, and its new tenant"
        ):
            sg.upsert_nodes(["x", "v"], second[:2], tenants=[b, a])
        with pytest.raises(vg.InvalidArgumentError):
            sg.upsert_nodes(
                ["v", "y"], np.array([[1, 0, 0, 0], [np.nan, 0, 0, 0]], np.float32), tenants=[a, b]
            )
        assert _trace(sg) == before
        sg.upsert_nodes(["x", "v"], second[:2], tenants=[a, b])  # the same tenant: replaced in place
        sg.upsert_nodes(["x", "v"], second[:2], tenants=[a, b])  # a retried batch is harmless
        assert len(sg) == 5 and sg.shard_of("v") == stable_hash(b) % 2
