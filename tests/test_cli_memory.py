"""`vecgraph memory remember|recall|card|forget|expire` and `vecgraph verify --absent-tenant`:
outputs, exit codes, and the byte scan failing on a user's data planted back in the folder."""

from __future__ import annotations

import json
import os
import shutil

import pytest
from test_cli import failed, ok, run

import vecgraph as vg


@pytest.fixture()
def store(tmp_path):
    """A folder store (wordllama) with omar's and zhang's memories, and a copy of the WAL
    segments as they were before anything was forgotten."""
    path = str(tmp_path / "agent.vg")
    ids = {}
    ids["pin"] = ok("memory", "remember", path, "--user", "omar", "my locker code is 4921 at the gym",
                    "--kind", "fact").stdout.strip()
    ids["lang"] = ok("memory", "remember", path, "--user", "zhang", "order-service is written in Go",
                     "--kind", "project", "--session", "s1", "--at", "2026-03-01T09:00:00Z").stdout.strip()
    ids["rust"] = json.loads(ok("memory", "remember", path, "--user", "zhang", "order-service is now in Rust",
                                "--kind", "project", "--supersedes", ids["lang"], "--json").stdout)["id"]
    saved = str(tmp_path / "wal-before")
    shutil.copytree(os.path.join(path, "wal"), saved)
    return path, ids, saved


def test_remember_and_recall_print_what_was_stored(store):
    path, ids, _ = store
    assert all(ids[name].startswith("m-") and len(ids[name]) == 18 for name in ids)
    out = ok("memory", "recall", path, "--user", "zhang", "which language is order-service in?").stdout
    assert ids["rust"] in out and "order-service is now in Rust" in out and ids["lang"] not in out
    old = ok("memory", "recall", path, "--user", "zhang", "which language is order-service in?",
             "--include-superseded", "--json").stdout
    assert {hit["id"] for hit in json.loads(old)} == {ids["lang"], ids["rust"]}
    past = json.loads(ok("memory", "recall", path, "--user", "zhang", "order-service language",
                         "--now", "2026-03-02", "--json").stdout)
    assert [hit["id"] for hit in past] == [ids["lang"]]
    assert "no memory of 'nobody'" in ok("memory", "recall", path, "--user", "nobody", "anything").stdout
    card = json.loads(ok("memory", "card", path, "--user", "zhang").stdout)
    assert [entry["id"] for entry in card["projects"]] == [ids["rust"]] and card["user"] == "zhang"
    assert json.loads(ok("memory", "expire", path, "--now", "2030-01-01", "--json").stdout) == {"expired": []}


def test_bad_arguments_fail_with_a_message(store, tmp_path):
    path, ids, _ = store
    assert "--user" in failed(2, "memory", "recall", path, "question")
    assert "ISO 8601" in failed(1, "memory", "remember", path, "--user", "zhang", "text", "--at", "yesterday-ish")
    assert "empty" in failed(1, "memory", "remember", path, "--user", "zhang", "   ")
    assert "not a memory of user 'omar'" in failed(1, "memory", "remember", path, "--user", "omar", "x",
                                                   "--supersedes", ids["rust"])
    assert "no vecgraph graph" in failed(1, "memory", "recall", str(tmp_path / "absent.vg"), "--user", "a", "q")
    plain = str(tmp_path / "plain.vg")
    vg.Graph.open(plain, dim=256).close()
    assert "not a memory store" in failed(1, "memory", "recall", plain, "--user", "a", "q", "--embedder",
                                          "wordllama")
    assert "--absent-tenant" in failed(1, "verify", path, "--text", "4921")


def test_verify_absent_tenant_before_and_after_forget_and_with_data_planted_back(store, tmp_path):
    path, ids, saved = store
    before = failed(1, "verify", path, "--absent-tenant", "omar")
    out = run("verify", path, "--absent-tenant", "omar").stdout
    assert "tenant 'omar' still has" in out and "wal/" in out
    forgot = ok("memory", "forget", path, "--user", "omar").stdout
    assert "forgot 'omar': 1 memory" in forgot and "verified" in forgot
    assert "no problems found" in ok("verify", path, "--absent-tenant", "omar", "--text", "locker code is 4921").stdout
    assert ids["rust"] in ok("memory", "recall", path, "--user", "zhang", "order-service").stdout  # others stay
    # An old WAL segment planted back: found, named, exit code 1.
    segment = sorted(os.listdir(saved))[0]
    planted = os.path.join(path, "wal", "old-" + segment + ".bak")
    shutil.copyfile(os.path.join(saved, segment), planted)
    err = failed(1, "verify", path, "--absent-tenant", "omar")
    out = run("verify", path, "--absent-tenant", "omar").stdout
    assert f"wal/old-{segment}.bak holds 'omar'" in out and "problem" in err
    os.remove(planted)
    # A stale snapshot holding the text: found with --text.
    stale = os.path.join(path, "snapshots", "00000099")
    os.makedirs(stale)
    with open(os.path.join(stale, "nodes.arrow"), "wb") as f:
        f.write(b"\x00" * 16 + "my locker code is 4921 at the gym".encode())
    out = run("verify", path, "--absent-tenant", "omar", "--text", "locker code is 4921").stdout
    assert "snapshots/00000099/nodes.arrow holds 'locker code is 4921' at byte 19" in out
    assert "problem" in before
    assert json.loads(ok("memory", "forget", path, "--user", "omar", "--json").stdout)["nodes"] == 0


def test_forget_json_receipt(store):
    path, ids, _ = store
    receipt = json.loads(ok("memory", "forget", path, "--user", "zhang", "--json").stdout)
    assert receipt["user"] == "zhang" and receipt["memories"] == 2 and receipt["cards"] == 0
    assert receipt["verified"] is True and receipt["found"] == [] and receipt["nodes"] >= 2
    again = json.loads(ok("memory", "forget", path, "--user", "zhang", "--json").stdout)
    assert again["nodes"] == 0 and again["files_removed"] == [] and again["verified"] is True  # scanned: nothing


def test_recall_and_card_open_the_store_read_only(store):
    path, ids, _ = store
    with vg.Memory.open(path, embedder="wordllama", read_only=True) as reader:  # another reader
        out = ok("memory", "recall", path, "--user", "zhang", "what does order-service run on?").stdout
        assert ids["rust"] in out
        card = json.loads(ok("memory", "card", path, "--user", "zhang").stdout)  # built, not stored
        assert [e["id"] for e in card["projects"]] == [ids["rust"]] and "card:zhang" not in reader.graph
        assert "open read-only in another" in failed(1, "memory", "forget", path, "--user", "zhang")  # a writer waits
    with vg.Memory.open(path) as app:  # a process writing to the store holds its LOCK
        assert "already open for writing" in failed(1, "memory", "recall", path, "--user", "zhang", "order-service")
        assert len(app.memories("zhang")) == 1


def test_a_store_built_with_an_embedder_object_is_forgotten_from_the_shell(tmp_path):
    from memory_helpers import FakeEmbedder

    path = str(tmp_path / "obj.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        mem.remember("omar", "my locker code is 4921", at="2025-03-01")
        mem.remember("zoe", "zoe likes kiwi", at="2025-03-01")
    assert "built with embedder 'test-hashed-bow-64', which cannot be loaded here" in failed(
        1, "memory", "recall", path, "--user", "zoe", "kiwi")
    assert "verified" in ok("memory", "forget", path, "--user", "omar").stdout
    assert "no problems found" in ok("verify", path, "--absent-tenant", "omar", "--text", "4921").stdout
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        assert [h.text for h in mem.recall("zoe", "kiwi")] == ["zoe likes kiwi"]
