"""vecgraph.Memory under what a demanding user does: a crash in the middle of a superseding
remember, recalls while another thread forgets, times at the edges of what a datetime holds,
a future `at`, a user id holding ':', unknown users, and the arguments recall refuses."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import warnings
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pytest

import vecgraph as vg
from memory_helpers import DAY, EMBEDDER_SOURCE, T0, FakeEmbedder, state

CHILD = EMBEDDER_SOURCE + '''
import os, sys
import vecgraph as vg
path, step = sys.argv[1], sys.argv[2]
mem = vg.Memory.open(path, embedder=FakeEmbedder())
old = mem.remember("zhang", "order-service runs on Go", kind="project", at="2025-03-01T09:00:00Z")
print(old, flush=True)
def die(*args, **kwargs):
    os._exit(9)
setattr(vg.Graph, step, die)   # the process dies at this write of the next remember
mem.remember("zhang", "order-service now runs on Rust written by Kestrel", kind="project",
             at="2025-03-02T09:00:00Z", supersedes=old)
'''


@pytest.mark.parametrize("step", ["add_aliases", "add_edges", "sync"])
def test_a_crash_inside_a_superseding_remember_never_leaves_two_current_versions(tmp_path, step):
    path = str(tmp_path / "mem.vg")
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.path.dirname(__file__)] + sys.path))
    proc = subprocess.run([sys.executable, str(script), path, step], capture_output=True, text=True, env=env,
                          timeout=120)
    assert proc.returncode == 9, proc.stderr
    old = proc.stdout.split()[0]
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        current = [m for m in mem.memories("zhang")]
        assert len(current) == 1  # one current version: the old one, or the new one with the old closed
        if current[0].id == old:  # the new version was lost with the crash (its write was not synced)
            assert current[0].superseded_by is None and len(mem.graph.keys(tenants=["zhang"])) >= 1
        else:
            new = current[0]
            assert new.supersedes == old and [h.id for h in mem.history(new.id)] == [old, new.id]
            assert mem.history(old)[0].valid_to == datetime(2025, 3, 2, 9, 0, tzinfo=timezone.utc)
            hits = mem.recall("zhang", "what does order-service run on?", include_superseded=False)
            assert old not in [h.id for h in hits]


def test_recalls_and_cards_while_another_thread_forgets_raise_nothing(tmp_path):
    with vg.Memory.open(str(tmp_path / "mem.vg"), embedder=FakeEmbedder()) as mem:
        for i in range(40):
            mem.remember("victim", f"note {i} about the garden and the shed", at=T0 + i * DAY)
            mem.remember("keeper", f"note {i} about the kitchen", at=T0 + i * DAY)
        mem.card("victim")
        errors: list = []
        done = threading.Event()

        def reader() -> None:
            while not done.is_set():
                try:
                    for hit in mem.recall("victim", "garden shed", k=5):
                        assert hit.text.startswith("note")
                    mem.card("victim")
                    mem.memories("victim")
                except Exception as exc:  # noqa: BLE001 - collected, then asserted empty
                    errors.append(repr(exc))

        threads = [threading.Thread(target=reader) for _ in range(3)]
        for t in threads:
            t.start()
        receipt = mem.forget("victim")
        done.set()
        for t in threads:
            t.join()
        assert errors == [] and receipt.verified
        assert mem.recall("victim", "garden shed") == [] and "card:victim" not in mem.graph
        assert len(mem.recall("keeper", "kitchen", k=5)) == 5


def test_times_outside_what_a_datetime_holds_are_refused_and_far_expiries_are_never():
    with vg.Memory.open(None, embedder=FakeEmbedder(), ttl={"fact": timedelta(days=365)}) as mem:
        before = state(mem)
        for at in (-(2**62), 2**62, "0000-01-01"):
            with pytest.raises(vg.InvalidArgumentError):
                mem.remember("u", "ancient memory", at=at)
        for ttl in (timedelta.max, 1e300):
            with pytest.raises(vg.InvalidArgumentError, match="9,999 years"):
                mem.set_ttl("k", ttl)
        assert state(mem) == before
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)  # a future at: warned, see below
            late = mem.remember("u", "the last day of the calendar", at=datetime(9999, 6, 1))
        hit = mem.history(late)[0]
        assert hit.expires_at is None and hit.at == datetime(9999, 6, 1, tzinfo=timezone.utc)
        assert [h.id for h in mem.recall("u", "calendar", now=datetime(9999, 7, 1))] == [late]
        early = mem.remember("u", "the first day of the calendar", at=date(1, 1, 1))
        assert [h.id for h in mem.recall("u", "first day calendar", now=datetime(1, 6, 1))] == [early]


def test_a_future_at_is_stored_with_a_warning_and_recalled_from_then_on():
    with vg.Memory.open(None, embedder=FakeEmbedder()) as mem:
        soon = datetime.now(timezone.utc) + timedelta(hours=8)
        with pytest.warns(RuntimeWarning, match="in the future"):
            m = mem.remember("u", "my locker code is 4411", at=soon.replace(tzinfo=None))
        assert mem.recall("u", "locker code") == []
        assert [h.id for h in mem.recall("u", "locker code", now=soon + timedelta(minutes=1))] == [m]
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            mem.remember("u", "said a second ago", at=datetime.now(timezone.utc))  # no warning


def test_user_ids_holding_a_colon_get_entities_of_their_own():
    with vg.Memory.open(None, embedder=FakeEmbedder()) as mem:
        a = mem.remember("a", "I use the tool daily", entities=["b:c"])
        ab = mem.remember("a:b", "I use c at work", entities=["c"])
        mentioned = {e.dst for e in mem.graph.neighbors(ab, rels=["mentions"], direction="out")}
        for key in mentioned:
            assert mem.graph.get_node(key, vector=False)["tenant"] == "a:b"
        mem.forget("a")
        assert a not in mem.graph and ab in mem.graph
        assert mentioned <= set(mem.graph.keys(tenants=["a:b"]))


def test_recall_fills_k_when_entity_nodes_crowd_the_fused_list():
    with vg.Memory.open(None, embedder=FakeEmbedder()) as mem:
        names = [f"Proj{i}" for i in range(25)]
        ids = [mem.remember("u", f"status of batch {i}", entities=names) for i in range(12)]
        query = "what about " + " ".join(names + [f"Proj{i}" for i in range(25, 40)])
        for channels in (("dense", "graph"), ("bm25", "graph"), ("graph",)):
            hits = mem.recall("u", query, k=5, channels=channels, weights={"graph": 5.0})
            assert len(hits) == 5 and {h.id for h in hits} <= set(ids)
        with pytest.raises(vg.InvalidArgumentError, match="entity"):
            mem.recall("u", query, channels=("entity",))


def test_recall_arguments_refused_or_accepted_as_documented():
    with vg.Memory.open(None, embedder=FakeEmbedder()) as mem:
        m = mem.remember("u", "kiwi fruit", at=T0)
        with pytest.raises(vg.InvalidArgumentError, match="empty window"):
            mem.recall("u", "kiwi", since=T0 + DAY, until=T0)
        with pytest.raises(TypeError, match="kinds must be"):
            mem.recall("u", "kiwi", kinds=5)
        with pytest.raises(TypeError, match="channels must be"):
            mem.recall("u", "kiwi", channels="dense")
        with pytest.raises(vg.InvalidArgumentError, match="needs some text"):
            mem.recall("u", "   ")
        assert [h.id for h in mem.recall("u", "kiwi", k=np.int64(2))] == [m]


def test_a_card_of_an_unknown_user_is_not_stored():
    with vg.Memory.open(None, embedder=FakeEmbedder()) as mem:
        before = state(mem)
        card = mem.card("ghost")
        assert card["user"] == "ghost" and card["memories"] == 0 and all(
            card[s] == [] for s in ("profile", "preferences", "projects", "facts", "other"))
        assert mem.end_session("ghost")["memories"] == 0
        assert state(mem) == before and "card:ghost" not in mem.graph


def test_a_store_opened_without_an_embedder_forgets_and_expires_but_does_not_embed(tmp_path):
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder(), ttl={"otp": timedelta(hours=1)}) as mem:
        code = mem.remember("omar", "one-time code 839201", kind="otp", at=T0)
        keep = mem.remember("zoe", "zoe likes kiwi", at=T0)
    with vg.Memory.open(path, embedder=None) as mem:
        assert [m.id for m in mem.expire(now=T0 + DAY)] == [code]
        assert mem.forget("zoe").verified and keep not in mem.graph
        for call in (lambda: mem.remember("u", "x"), lambda: mem.recall("u", "x")):
            with pytest.raises(vg.InvalidArgumentError, match="without an embedder"):
                call()
    with pytest.raises(vg.InvalidArgumentError, match="needs an embedder"):
        vg.Memory.open(str(tmp_path / "new.vg"), embedder=None)
    with pytest.raises(vg.InvalidArgumentError, match="needs an embedder"):
        vg.Memory.open(None, embedder=None)


def test_a_read_only_store_reads_and_refuses_writes(tmp_path):
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder()) as writer:
        m = writer.remember("u", "kiwi fruit salad", at=T0)
    with vg.Memory.open(path, embedder=FakeEmbedder(), read_only=True) as reader, \
            vg.Memory.open(path, embedder=FakeEmbedder(), read_only=True) as second:
        assert [h.id for h in reader.recall("u", "kiwi")] == [m] == [h.id for h in second.recall("u", "kiwi")]
        assert [e["id"] for e in reader.card("u")["facts"]] == [m] and "card:u" not in reader.graph
        with pytest.raises(vg.ReadOnlyError):
            reader.remember("u", "more")
        with pytest.raises(vg.InvalidArgumentError, match="read-write"):
            vg.Memory.open(path, embedder=FakeEmbedder(), read_only=True, ttl={"fact": None})


def test_include_superseded_puts_each_old_version_after_the_newest_one_returned():
    with vg.Memory.open(None, embedder=FakeEmbedder()) as mem:
        # The oldest version matches the question best, word for word.
        v1 = mem.remember("u", "order service language is Go Go Go", at=T0)
        v2 = mem.remember("u", "order service moved to Java", at=T0 + DAY, supersedes=v1)
        v3 = mem.remember("u", "order service now Rust", at=T0 + 2 * DAY, supersedes=v2)
        other = mem.remember("u", "order pizza on fridays", at=T0)
        q = "order service language Go"
        found = mem.recall("u", q, k=4, include_superseded=True)
        hits = [h.id for h in found]
        score = {h.id: h.score for h in found}
        assert set(hits) == {v1, v2, v3, other}
        assert score[v1] > score[v3]  # by score alone the oldest version would come first
        assert hits.index(v3) < hits.index(v2) < hits.index(v1) and hits.index(v1) == hits.index(v3) + 2
        assert [h.id for h in mem.recall("u", q, k=4)] == [h for h in hits if h in (v3, other)]
