"""vecgraph.Memory.forget and the Graph additions it stands on: verified erasure of a user from a
folder store (checked by reading every file's bytes here, not by the store's own scan), the scan
itself (vecgraph.memory.scan_folder), purge_expired, a process SIGKILLed at each step of forget,
and Graph.keys / Graph.checkpoint(keep_history=False) against slow references."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
from datetime import timedelta

import numpy as np
import pytest

import vecgraph as vg
from memory_helpers import DAY, EMBEDDER_SOURCE, HOUR, T0, FakeEmbedder, files_containing
from vecgraph.entities import normalize_name
from vecgraph.memory import scan_folder

# A process killed mid-write leaves a torn WAL tail; Graph.open cuts it with a warning.
pytestmark = pytest.mark.filterwarnings("ignore:cut .* bytes at the end of the WAL:RuntimeWarning")

USER = "u-erase-7c1f"  # appears nowhere else: a byte search for it finds only this user's data
OTHER = "olga"
MINUTE = timedelta(minutes=1)


def _populate(mem: vg.Memory) -> dict:
    """USER's memories (a superseded version, an inference, an entity shared by name with OTHER,
    a card) and OTHER's, with two checkpointed generations and WAL records after the last one.
    Returns {"user": [ids], "texts": [texts], "other": {id: text}}."""
    ids, texts, other = [], [], {}

    def mine(text, **kw):
        memory_id = (mem.infer if kw.pop("infer", False) else mem.remember)(USER, text, **kw)
        ids.append(memory_id)
        texts.append(text)
        return memory_id

    def hers(text, **kw):
        other[mem.remember(OTHER, text, **kw)] = text

    old = mine("I live in Berlin near Gleisdreieck", kind="profile", at=T0, session="s1")
    mine("I moved to Lisbon, Alfama quarter", kind="profile", at=T0 + DAY, supersedes=old, session="s2")
    mine("my locker code is 4711-quetzal", kind="fact", at=T0)
    hers("olga's cat is named Pixel", kind="fact", at=T0)
    hers("Zanzibar invoices are due on Fridays", kind="project", at=T0)
    mem.graph.checkpoint()
    mine("probably enjoys fado music", kind="preference", at=T0 + DAY, infer=True)
    mine("leading the Zanzibar billing migration", kind="project", at=T0 + DAY)
    mem.end_session(USER, "s2")
    mem.end_session(OTHER)
    mem.graph.checkpoint()
    mine("late note after the snapshot: heron sighting", kind="note", at=T0 + 2 * DAY)
    hers("olga prefers oat milk", kind="preference", at=T0 + 2 * DAY)
    card = mem.end_session(OTHER)
    assert {e["id"] for s in ("profile", "preferences", "projects", "facts", "other") for e in card[s]} == set(other)
    return {"user": ids, "texts": texts, "other": other, "card": card}


def _needles(data: dict) -> list:
    return [USER] + data["user"] + data["texts"]


def _assert_other_intact(mem: vg.Memory, data: dict) -> None:
    assert {m.id: m.text for m in mem.memories(OTHER)} == data["other"]
    for memory_id, text in data["other"].items():
        assert memory_id in [h.id for h in mem.recall(OTHER, text, k=3)]
    if "card" in data:
        assert mem.card(OTHER) == data["card"]  # the stored card, as it was
    assert "ent:4:olga:zanzibar" in mem.graph


def _assert_user_gone(mem: vg.Memory, data: dict) -> None:
    # slow reference: every live node's tenant and key
    for key in mem.graph.keys():
        node = mem.graph.get_node(key, vector=False)
        assert node["tenant"] != USER and USER not in str(key)
    assert all(memory_id not in mem.graph for memory_id in data["user"])
    assert mem.memories(USER, include_superseded=True, include_inferred=True) == []
    assert mem.recall(USER, "Lisbon locker Zanzibar heron fado", k=20, include_inferred=True,
                      include_superseded=True) == []
    assert f"card:{USER}" not in mem.graph
    assert USER not in mem.users()


def _assert_user_whole(mem: vg.Memory, data: dict) -> None:
    stored = mem.memories(USER, include_superseded=True, include_inferred=True, now=T0 + 3 * DAY)
    assert {m.id: m.text for m in stored} == dict(zip(data["user"], data["texts"]))
    for memory_id, text in zip(data["user"][1:], data["texts"][1:]):  # the first one is superseded
        assert memory_id in [h.id for h in mem.recall(USER, text, k=3, include_inferred=True)]
    assert f"card:{USER}" in mem.graph


# ------------------------------------------------------------------ forget


def test_forget_erases_every_trace_of_the_user_and_only_theirs(tmp_path):
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        data = _populate(mem)
        names = {normalize_name(n) for m in mem.memories(USER, include_superseded=True, include_inferred=True)
                 for n in m.mentions}
        assert files_containing(path, [USER]) != []  # the check below can find something
        before_files = {os.path.relpath(os.path.join(r, f), path) for r, _d, fs in os.walk(path) for f in fs}
        assert any(f.startswith("snapshots/") for f in before_files)

        receipt = mem.forget(USER)

        assert (receipt.user, receipt.memories, receipt.entities, receipt.cards) == (USER, 6, len(names), 1)
        assert receipt.nodes == 6 + len(names) + 1
        assert receipt.verified is True and receipt.found == []
        assert receipt.seconds > 0
        assert receipt.files_removed and all(not os.path.exists(os.path.join(path, f)) for f in receipt.files_removed)
        assert all(f.split("/")[0] in ("wal", "snapshots", "text") for f in receipt.files_removed)
        assert {f for f in before_files if f.startswith(("snapshots/", "wal/"))} <= set(receipt.files_removed)
        assert receipt.files_written and all(f.startswith("snapshots/") and os.path.isfile(os.path.join(path, f))
                                             for f in receipt.files_written)
        assert json.loads(json.dumps(receipt.to_dict()))["nodes"] == receipt.nodes
        assert files_containing(path, _needles(data)) == []
        assert len(os.listdir(os.path.join(path, "snapshots"))) == 1
        _assert_user_gone(mem, data)
        _assert_other_intact(mem, data)
        assert mem.users() == [OTHER]
        assert mem.graph.get_node("~memory-erasure", vector=False)["props"] == {"pending": False}
    assert files_containing(path, _needles(data)) == []
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        _assert_user_gone(mem, data)
        _assert_other_intact(mem, data)
        # the user may come back, as anyone new
        again = mem.remember(USER, "a fresh start", at=T0)
        assert [h.id for h in mem.recall(USER, "fresh start")] == [again]
    assert files_containing(path, data["user"] + data["texts"]) == []  # the new data holds the id again


def test_forget_in_an_in_memory_store():
    with vg.Memory.open(None, embedder=FakeEmbedder()) as mem:
        data = _populate_in_memory(mem)
        receipt = mem.forget(USER)
        assert (receipt.memories, receipt.cards, receipt.nodes) == (2, 1, 2 + receipt.entities + 1)
        assert receipt.entities == 3  # zanzibar, project, fact
        assert receipt.files_removed == [] and receipt.verified is False  # no folder to verify
        _assert_user_gone(mem, data)
        assert {m.id: m.text for m in mem.memories(OTHER)} == data["other"]
        assert "ent:4:olga:zanzibar" in mem.graph


def _populate_in_memory(mem: vg.Memory) -> dict:
    a = mem.remember(USER, "Zanzibar billing migration", kind="project", at=T0)
    b = mem.remember(USER, "my locker code is 4711-quetzal", kind="fact", at=T0)
    mem.end_session(USER)
    c = mem.remember(OTHER, "Zanzibar invoices are due", kind="project", at=T0)
    return {"user": [a, b], "texts": ["Zanzibar billing migration", "my locker code is 4711-quetzal"],
            "other": {c: "Zanzibar invoices are due"}}


def test_purge_expired_leaves_no_file_holding_an_expired_memory(tmp_path):
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder(), ttl={"event": HOUR}) as mem:
        event = mem.remember(OTHER, "fire drill in the atrium at noon", kind="event", at=T0)
        fact = mem.remember(OTHER, "the atrium has a glass roof", kind="fact", at=T0)
        mem.end_session(OTHER, now=T0 + MINUTE)  # the card quotes the event
        mem.graph.checkpoint()
        assert files_containing(path, ["fire drill in the atrium"]) != []
        nothing = mem.purge_expired(now=T0 + 30 * MINUTE)  # nothing expired: history rewritten all the same
        assert nothing["expired"] == [] and any(p.startswith("snapshots/") for p in nothing["files_removed"])
        assert files_containing(path, ["fire drill in the atrium"]) != []  # still live: in the new snapshot
        result = mem.purge_expired(now=T0 + 2 * HOUR)
        assert result["expired"] == [event] and result["files_removed"]
        assert files_containing(path, ["fire drill in the atrium", event]) == []
        assert [m.id for m in mem.memories(OTHER, now=T0 + 2 * HOUR)] == [fact]
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        assert event not in mem.graph and fact in mem.graph
        assert [h.id for h in mem.recall(OTHER, "atrium", now=T0 + 2 * HOUR)] == [fact]


def test_purge_expired_after_expire_still_rewrites_the_history(tmp_path):
    """expire() deletes; a later purge_expired() that expires nothing more must still leave no
    file holding what expire() deleted."""
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder(), ttl={"otp": HOUR}) as mem:
        code = mem.remember(OTHER, "my one-time code is 839201", kind="otp", at=T0)
        mem.remember(OTHER, "the atrium has a glass roof", kind="fact", at=T0)
        assert [m.id for m in mem.expire(now=T0 + 2 * HOUR)] == [code]
        assert files_containing(path, ["839201"]) != []  # deleted, still in the WAL
        assert mem.purge_expired(now=T0 + 2 * HOUR)["expired"] == []
        assert files_containing(path, ["839201", code]) == []


def test_forget_of_a_user_with_no_live_node_still_erases_their_history(tmp_path):
    """A user whose memories all expired (deleted by expire()) has no node left, yet the WAL holds
    them: forget() rewrites the history and verifies."""
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder(), ttl={"otp": HOUR}) as mem:
        mem.remember("omar-5521", "my one-time code is 839201", kind="otp", at=T0)
        mem.remember(OTHER, "the atrium has a glass roof", kind="fact", at=T0)
        mem.expire(now=T0 + 2 * HOUR)
        assert mem.graph.keys(tenants=["omar-5521"]) == []
        assert files_containing(path, ["omar-5521", "839201"]) != []
        receipt = mem.forget("omar-5521")
        assert receipt.nodes == 0 and receipt.verified and receipt.found == [] and receipt.id_found == []
        assert receipt.files_removed and files_containing(path, ["omar-5521", "839201"]) == []
        # nothing left of them: the next forget scans, finds nothing, rewrites nothing
        again = mem.forget("omar-5521")
        assert again.verified and again.files_removed == []


# ------------------------------------------------------------------ scan_folder


def _forgotten_folder(tmp_path) -> tuple:
    """A folder store from which USER was forgotten, closed, and a copy of its WAL segments from
    before the erasure. Returns (path, data, {segment name: bytes})."""
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        data = _populate(mem)
        wal = os.path.join(path, "wal")
        saved = {}
        for name in sorted(os.listdir(wal)):
            with open(os.path.join(wal, name), "rb") as f:
                saved[name] = f.read()
        assert mem.forget(USER).verified
    return path, data, saved


def test_scan_folder_finds_an_old_wal_segment_planted_after_forget(tmp_path, monkeypatch):
    path, data, saved = _forgotten_folder(tmp_path)
    needles = _needles(data)
    assert scan_folder(path, needles) == []
    name, old = next((n, b) for n, b in saved.items() if USER.encode() in b)
    planted = os.path.join("wal", "stale-" + name + ".bak")
    with open(os.path.join(path, planted), "wb") as f:
        f.write(old)
    found = scan_folder(path, needles)
    assert found and all(rel == planted for rel, _n, _o in found)
    for rel, needle, offset in found:
        assert old[offset: offset + len(needle.encode())] == needle.encode()
    expected = [(planted, n, old.find(n.encode())) for n in needles if n.encode() in old]
    assert USER in [n for _p, n, _o in expected] and len(expected) >= 2
    for item in expected:  # the first occurrence of each needle is among the findings
        assert item in found
    # without ahocorasick_rs: one bytes.find per needle, the first occurrence of each
    monkeypatch.setitem(sys.modules, "ahocorasick_rs", None)
    assert scan_folder(path, needles) == expected


def test_scan_folder_finds_bytes_planted_in_a_stale_snapshot_folder(tmp_path, monkeypatch):
    path, data, _saved = _forgotten_folder(tmp_path)
    stale = os.path.join(path, "snapshots", "00000099")
    os.makedirs(stale)
    secret = data["texts"][2]  # the locker code
    with open(os.path.join(stale, "nodes.arrow"), "wb") as f:
        f.write(b"ARROW1\x00" * 5 + secret.encode() + b"\x00tail" + USER.encode())
    rel = os.path.join("snapshots", "00000099", "nodes.arrow")
    want = [(rel, secret, 35), (rel, USER, 35 + len(secret) + 5)]
    assert sorted(scan_folder(path, _needles(data)), key=lambda x: x[2]) == want
    monkeypatch.setitem(sys.modules, "ahocorasick_rs", None)
    assert sorted(scan_folder(path, _needles(data)), key=lambda x: x[2]) == want


def test_scan_folder_limit_and_arguments(tmp_path):
    folder = tmp_path / "plain"
    folder.mkdir()
    (folder / "a.bin").write_bytes(b"xx needle " * 10)
    (folder / "empty").write_bytes(b"")
    assert len(scan_folder(str(folder), ["needle"])) == 10
    assert scan_folder(str(folder), ["needle"], limit=3) == [("a.bin", "needle", 3), ("a.bin", "needle", 13),
                                                              ("a.bin", "needle", 23)]
    assert scan_folder(str(folder), ["", None, 5]) == []
    assert scan_folder(str(folder), ["absent"]) == []
    with pytest.raises(FileNotFoundError):
        scan_folder(str(tmp_path / "missing"), ["x"])


# ------------------------------------------------------------------ a crash during forget

CHILD = EMBEDDER_SOURCE + '''
import os
import signal
import sys

import vecgraph as vg

path, user, step = sys.argv[1:4]
mem = vg.Memory.open(path, embedder=FakeEmbedder())


def hook(name):
    print("step", name, flush=True)
    if name == step:
        os.kill(os.getpid(), signal.SIGKILL)


mem._after_step = hook
mem.forget(user)
print("forget returned", flush=True)
'''


@pytest.mark.parametrize("step", ["marked", "deleted", "rewritten"])
def test_a_crash_during_forget_never_leaves_half_a_user(tmp_path, step):
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        data = _populate(mem)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    child = subprocess.run([sys.executable, str(script), path, USER, step], capture_output=True, text=True,
                           timeout=120)
    assert child.returncode == -signal.SIGKILL, child.stderr
    assert child.stdout.splitlines()[-1] == f"step {step}" and "forget returned" not in child.stdout

    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        left = mem.graph.keys(tenants=[USER])
        if left:
            assert step == "marked", f"after a crash at {step!r} the user is still there: {left}"
            _assert_user_whole(mem, data)
        else:
            _assert_user_gone(mem, data)
            assert files_containing(path, _needles(data)) == []
        _assert_other_intact(mem, data)
        assert mem.graph.get_node("~memory-erasure", vector=False)["props"] == {"pending": False}
        if step in ("deleted", "rewritten"):
            assert left == []
        # whatever the crash left, a forget now finishes the job
        receipt = mem.forget(USER)
        assert receipt.found == [] and (receipt.verified or not left)
        _assert_user_gone(mem, data)
    assert files_containing(path, _needles(data)) == []
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        _assert_user_gone(mem, data)
        _assert_other_intact(mem, data)


# ------------------------------------------------------------------ Graph.keys


FILTERABLE = {"color": "str", "size": "int64", "when": "timestamp"}


def _random_graph(seed: int) -> tuple:
    """A graph with filterable properties, written, upserted, deleted and re-added at random,
    and the keys in the order of their slots (a new key, or a deleted one added again, takes
    a new slot at the end; an upsert keeps its slot)."""
    rng = random.Random(seed)
    g = vg.Graph(dim=4, filterable=FILTERABLE)
    order: list = []

    def node_fields():
        props = {}
        if rng.random() < 0.8:
            props["color"] = rng.choice(["red", "green", "blue"])
        if rng.random() < 0.8:
            props["size"] = rng.randint(-3, 10)
        if rng.random() < 0.7:
            props["when"] = rng.randint(0, 100)
        if rng.random() < 0.3:
            props["note"] = "not filterable"
        return (rng.choice(["a", "b", "c", ""]), rng.choice(["t1", "t2", ""]), rng.randint(0, 50),
                props or None)

    def write(keys, upsert=False):
        fields = [node_fields() for _ in keys]
        vectors = np.asarray([[rng.uniform(-1, 1) for _ in range(4)] for _ in keys], np.float32)
        (g.upsert_nodes if upsert else g.add_nodes)(
            keys, vectors, labels=[f[0] for f in fields], tenants=[f[1] for f in fields],
            ts=[f[2] for f in fields], props=[f[3] for f in fields])
        for key in keys:
            if key not in order:
                order.append(key)

    write([f"n{i}" for i in range(40)] + list(range(1000, 1020)))
    for _ in range(4):
        live = [k for k in order if k in g]
        dead = rng.sample(live, 6)
        g.delete_nodes(dead)
        for key in dead:
            order.remove(key)
        write(rng.sample([k for k in order if k in g], 8), upsert=True)
        write(rng.sample(dead, 3))  # added again: new slots
        write([f"new{rng.randint(0, 10**9)}" for _ in range(3)])
    return g, order


def _reference_keys(g, order, labels=None, tenants=None, where=None, since=None, until=None) -> list:
    out = []
    for key in order:
        node = g.get_node(key, vector=False)
        if labels is not None and node["label"] not in labels:
            continue
        if tenants is not None and node["tenant"] not in tenants:
            continue
        if since is not None and node["ts"] < since or until is not None and node["ts"] > until:
            continue
        props = node["props"] or {}
        ok = True
        for name, condition in (where or {}).items():
            value = props.get(name)
            if value is None:
                ok = False
            elif isinstance(condition, dict):
                ops = {">": value.__gt__, ">=": value.__ge__, "<": value.__lt__, "<=": value.__le__,
                       "==": value.__eq__}
                ok = ok and all(ops[op](bound) if op != "in" else value in bound for op, bound in condition.items())
            elif isinstance(condition, (list, set, tuple)):
                ok = ok and value in condition
            else:
                ok = ok and value == condition
        if ok:
            out.append(key)
    return out


FILTERS = [
    {},
    {"labels": ["a"]},
    {"labels": ["a", ""], "tenants": ["t2"]},
    {"tenants": ["t1"]},
    {"tenants": [""]},
    {"where": {"color": "red"}},
    {"where": {"color": ["red", "blue"], "size": {">=": 2, "<": 8}}},
    {"where": {"when": {"<=": 40}}, "labels": ["b", "c"]},
    {"where": {"size": {"in": [0, 1, 2, 9]}}, "tenants": ["t1", "t2"]},
    {"since": 10, "until": 30},
    {"since": 10, "until": 30, "where": {"color": "green"}, "tenants": ["t2"]},
    {"labels": ["never-seen"]},
    {"tenants": ["nobody"], "where": {"color": "red"}},
]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_graph_keys_matches_a_scan_of_every_node(seed):
    g, order = _random_graph(seed)
    live = [k for k in order if k in g]
    assert len(live) == len(g)
    assert g.keys() == live
    for filters in FILTERS:
        assert g.keys(**filters) == _reference_keys(g, live, **filters), filters
    assert any(len(_reference_keys(g, live, **f)) not in (0, len(live)) for f in FILTERS)
    with pytest.raises(vg.InvalidArgumentError):
        g.keys(where={"undeclared": 1})
    with pytest.raises(TypeError):
        g.keys(labels=["a", None])


def test_graph_keys_on_a_folder_graph_after_reopen(tmp_path):
    g, order = _random_graph(4)
    path = str(tmp_path / "g")
    live = [k for k in order if k in g]
    with vg.Graph.open(path, dim=4, filterable=FILTERABLE) as h:
        for key in live:
            node = g.get_node(key)
            h.add_nodes([key], node["vector"][None, :], labels=node["label"], tenants=node["tenant"], ts=[node["ts"]],
                        props=[node["props"]])
        h.delete_nodes(live[:5])
        expected = {str(f): _reference_keys(h, live[5:], **f) for f in map(dict, FILTERS)}
        assert {str(f): h.keys(**f) for f in FILTERS} == expected
    with vg.Graph.open(path) as h:
        assert {str(f): h.keys(**f) for f in FILTERS} == expected


# ------------------------------------------------------------------ Graph.checkpoint(keep_history=False)


def _files(path: str) -> set:
    return {os.path.relpath(os.path.join(r, f), path) for r, _d, fs in os.walk(path) for f in fs}


def bm25(graph, text):
    return graph.hybrid_search(text, k=5, channels=["bm25"]).keys


def test_checkpoint_without_history_leaves_one_generation_and_no_older_wal(tmp_path):
    path = str(tmp_path / "g")
    rng = np.random.default_rng(3)
    words = ["heron", "quetzal", "pangolin", "axolotl", "narwhal", "okapi", "tapir", "dugong"]
    with vg.Graph.open(path, dim=8, segment_bytes=4096) as g:
        texts = {f"key-{i:03d}": f"note {i} about the {words[i % 8]} and the {words[(i * 3) % 8]}" for i in range(60)}
        keys = list(texts)
        g.add_nodes(keys[:20], rng.standard_normal((20, 8)).astype(np.float32), texts=[texts[k] for k in keys[:20]],
                    tenants="tenant-kept")
        removed = g.checkpoint()["removed"]
        assert isinstance(removed, list) and not any(os.path.exists(os.path.join(path, f)) for f in removed)
        g.add_nodes(keys[20:40], rng.standard_normal((20, 8)).astype(np.float32),
                    texts=[texts[k] for k in keys[20:40]], tenants="tenant-gone")
        g.add_edges(keys[:10], keys[10:20], rels="next")
        first = g.checkpoint()
        assert len(os.listdir(os.path.join(path, "snapshots"))) == 2  # history kept by default
        g.add_nodes(keys[40:], rng.standard_normal((20, 8)).astype(np.float32), texts=[texts[k] for k in keys[40:]])
        # the BM25 index is made on the first BM25 search: here, so that it holds what is deleted below
        assert bm25(g, texts["key-007"])[0] == "key-007" and bm25(g, texts["key-025"])[0] == "key-025"
        g.delete_nodes(keys[5:15])
        g.delete_tenant("tenant-gone")
        assert len(os.listdir(os.path.join(path, "wal"))) > 1
        live = [k for k in keys if k in g]
        before = _files(path)

        result = g.checkpoint(keep_history=False)

        after = _files(path)
        assert result["removed"] == sorted(before - after)
        assert set(result["removed"]) >= {f for f in before if f.startswith("snapshots/")}
        assert any(f.startswith("wal/") for f in result["removed"])
        assert os.listdir(os.path.join(path, "snapshots")) == [os.path.basename(result["snapshot"])]
        with open(os.path.join(path, "MANIFEST")) as f:
            manifest = json.load(f)
        assert manifest["snapshot_lsn"] == result["lsn"] > first["lsn"]
        assert manifest.get("previous") is None
        segments = os.listdir(os.path.join(path, "wal"))
        assert segments and all(int(name.split(".")[0]) > result["lsn"] for name in segments)
        assert (result["nodes"], result["edges"]) == (len(live), g.count_edges) == (len(g), g.count_edges)
        deleted = [k for k in keys if k not in g]
        assert len(deleted) == 30
        # not in the WAL, the snapshot nor the BM25 index's files: texts, keys, the deleted tenant
        assert files_containing(path, [texts[k] for k in deleted] + deleted + ["tenant-gone"]) == []
        assert files_containing(path, [texts["key-042"], "key-042", "tenant-kept"]) != []

        assert bm25(g, texts["key-042"])[0] == "key-042"
        assert all(k not in bm25(g, texts[k]) for k in keys[5:15] + keys[20:40])
        nodes = {k: g.get_node(k) for k in live}
        edges = g.count_edges
        g.add_nodes(["after"], rng.standard_normal((1, 8)).astype(np.float32), texts=["written after the checkpoint"])
    with vg.Graph.open(path) as g:
        assert [k for k in g.keys() if k != "after"] == live and "after" in g
        assert g.count_edges == edges
        for k, node in nodes.items():
            got = g.get_node(k)
            assert {f: got[f] for f in ("label", "tenant", "ts", "text")} == {f: node[f] for f in ("label", "tenant",
                                                                                                 "ts", "text")}
            assert np.array_equal(got["vector"], node["vector"])
        assert bm25(g, texts["key-042"])[0] == "key-042" and bm25(g, "written after the checkpoint")[0] == "after"
        assert all(k not in bm25(g, texts[k]) for k in keys[5:15] + keys[20:40])
        again = g.checkpoint(keep_history=False)  # nothing new but "after": still one generation
        assert len(os.listdir(os.path.join(path, "snapshots"))) == 1 and again["lsn"] >= result["lsn"]


def test_checkpoint_without_history_refuses_what_it_cannot_do(tmp_path):
    with pytest.raises(vg.InvalidArgumentError):
        vg.Graph(dim=4).checkpoint(keep_history=False)
    with vg.Graph.open(str(tmp_path / "g"), dim=4) as g:
        with pytest.raises(TypeError):
            g.checkpoint(keep_history="no")


def test_checkpoint_without_history_rewrites_the_bm25_files(tmp_path):
    # tantivy keeps a deleted document in its segment files (marked in a .del file) until the
    # segment is merged away: a default checkpoint leaves it there, keep_history=False does not
    path = str(tmp_path / "g")
    rng = np.random.default_rng(0)
    gone = ["key-001", "tenant-gone", "alpha heron"]
    with vg.Graph.open(path, dim=8) as g:
        g.add_nodes(["key-001", "key-002"], rng.standard_normal((2, 8)).astype(np.float32),
                    texts=["alpha heron", "beta okapi"], tenants="tenant-gone")
        g.add_nodes(["key-003"], rng.standard_normal((1, 8)).astype(np.float32), texts=["gamma tapir"],
                    tenants="tenant-kept")
        assert bm25(g, "heron") == ["key-001"]
        g.delete_tenant("tenant-gone")
        g.checkpoint()
        assert [f for f, _n in files_containing(path, gone) if f.startswith("text/")] != []
        assert bm25(g, "heron") == []
        g.checkpoint(keep_history=False)
        assert files_containing(path, gone) == []
        assert bm25(g, "tapir") == ["key-003"] and bm25(g, "heron okapi") == []
    with vg.Graph.open(path) as g:
        assert bm25(g, "tapir") == ["key-003"] and bm25(g, "heron okapi") == []
        assert g.keys() == ["key-003"]
