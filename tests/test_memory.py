"""vecgraph.Memory: remember / recall, versions, expiry, provenance, the card, entities and the
graph channel's association, the recall_memory tool, bad input, and to_context. Every test but
the last uses a hashed bag-of-words embedder (memory_helpers.FakeEmbedder) so that nothing loads
a model; erasure and crashes are in test_memory_erasure.py."""

from __future__ import annotations

import json
import re
from datetime import date, datetime, timedelta, timezone

import pytest

import vecgraph as vg
from vecgraph.results import Edge
from memory_helpers import DAY, HOUR, T0, FakeEmbedder, state

ID = re.compile(r"m-[0-9a-f]{16}")
UTC = timezone.utc
CARD_FIELDS = {"user", "profile", "preferences", "projects", "facts", "other", "last_updated", "memories", "tokens"}
SECTIONS = ("profile", "preferences", "projects", "facts", "other")


def _us(value: datetime) -> int:
    return (value - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1)


@pytest.fixture
def mem():
    store = vg.Memory.open(None, embedder=FakeEmbedder())
    yield store
    store.close()


@pytest.fixture
def folder_mem(tmp_path):
    store = vg.Memory.open(str(tmp_path / "mem.vg"), embedder=FakeEmbedder())
    yield store
    store.close()


def _ids(hits) -> list:
    return [h.id for h in hits]


def _card_ids(card: dict) -> set:
    return {entry["id"] for section in SECTIONS for entry in card[section]}


# ------------------------------------------------------------------ remember / recall


def test_remember_returns_an_id_and_recall_returns_every_field(mem):
    first = mem.remember("alice", "  order-service is written in Go  ", kind="project", source="tool",
                         session="s1", at=T0)
    second = mem.remember("alice", "I prefer green tea", kind="preference", at=T0 + DAY)
    assert ID.fullmatch(first) and ID.fullmatch(second) and first != second
    before = datetime.now(UTC)
    hits = mem.recall("alice", "which language is order-service written in", k=2)
    assert isinstance(hits, vg.memory.Recall) and hits[0].id == first
    hit = hits[0]
    assert hit.text == "order-service is written in Go"  # stripped
    assert (hit.kind, hit.source, hit.session) == ("project", "tool", "s1")
    assert hit.at == T0 and hit.at.utcoffset() == timedelta(0)
    assert hit.recorded_at <= before and hit.recorded_at.utcoffset() == timedelta(0)
    assert (hit.valid_to, hit.expires_at, hit.supersedes, hit.superseded_by, hit.origin) == (None,) * 5
    assert type(hit.score) is float and hit.score > 0
    assert set(hit.ranks) == {"dense", "bm25", "graph"} and hit.ranks["bm25"] == 1
    assert hit.mentions == ["order-service", "Go", "project"]
    assert hits[1].id == second and hits[1].session is None and hits[1].score <= hit.score
    assert json.loads(json.dumps(hit.to_dict()))["at"] == "2025-03-01T09:00:00+00:00"


def test_every_form_of_at_means_the_same_instant(mem):
    forms = [T0, T0.replace(tzinfo=None), "2025-03-01T09:00:00Z", "2025-03-01T10:00:00+01:00", _us(T0),
             T0.astimezone(timezone(timedelta(hours=-5)))]
    ids = [mem.remember("alice", f"note number {i}", at=at) for i, at in enumerate(forms)]
    assert {m.id: m.at for m in mem.memories("alice")} == {i: T0 for i in ids}
    midnight = mem.remember("alice", "a date means its midnight", at=date(2025, 3, 1))
    assert mem.history(midnight)[0].at == datetime(2025, 3, 1, tzinfo=UTC)


def test_a_write_is_visible_to_the_next_recall(mem):
    for i, word in enumerate(["walrus", "quokka", "axolotl", "pangolin", "narwhal"]):
        memory_id = mem.remember("alice", f"my favourite animal this week is the {word}", at=T0 + i * DAY)
        assert mem.recall("alice", f"{word}", k=1)[0].id == memory_id


def test_recall_never_returns_another_users_memory_even_with_identical_text(mem):
    text = "the deploy key lives in the vault under ops/deploy"
    alice = {mem.remember("alice", text, at=T0), mem.remember("alice", "alice likes chess", at=T0)}
    bob = {mem.remember("bob", text, at=T0), mem.remember("bob", "bob likes chess", at=T0)}
    for query in (text, "who likes chess", "vault"):
        assert set(_ids(mem.recall("alice", query, k=50))) == alice
        assert set(_ids(mem.recall("bob", query, k=50))) == bob
    assert mem.recall("carol", text) == []
    assert mem.users() == ["alice", "bob"]


def test_kinds_filter(mem):
    pref = mem.remember("alice", "I like my coffee black", kind="preference", at=T0)
    proj = mem.remember("alice", "coffee roaster project ships in May", kind="project", at=T0)
    fact = mem.remember("alice", "coffee was first roasted in Yemen", kind="fact", at=T0)
    assert _ids(mem.recall("alice", "coffee", k=10, kinds=["preference"])) == [pref]
    assert _ids(mem.recall("alice", "coffee", k=10, kinds="project")) == [proj]
    assert set(_ids(mem.recall("alice", "coffee", k=10, kinds=["fact", "preference"]))) == {fact, pref}
    assert mem.recall("alice", "coffee", k=10, kinds=["unheard-of"]) == []
    assert set(_ids(mem.recall("alice", "coffee", k=10))) == {pref, proj, fact}


def test_since_and_until_keep_the_window_both_ends_included(mem):
    days = [mem.remember("alice", f"standup notes day {i}", at=T0 + i * DAY) for i in range(5)]
    query = "standup notes"
    assert set(_ids(mem.recall("alice", query, k=10, since=T0 + DAY, until=T0 + 3 * DAY))) == set(days[1:4])
    assert set(_ids(mem.recall("alice", query, k=10, since="2025-03-03T09:00:00Z"))) == set(days[2:])
    assert set(_ids(mem.recall("alice", query, k=10, until=T0 + DAY))) == set(days[:2])
    assert mem.recall("alice", query, k=10, since=T0 + 10 * DAY) == []
    assert set(_ids(mem.recall("alice", query, k=10))) == set(days)


def test_k_is_respected(mem):
    ids = {mem.remember("alice", f"grocery list item {i}: apples", at=T0 + i * HOUR) for i in range(12)}
    assert len(mem.recall("alice", "grocery apples", k=3)) == 3
    assert len(mem.recall("alice", "grocery apples", k=1)) == 1
    assert set(_ids(mem.recall("alice", "grocery apples", k=50))) == ids
    with pytest.raises(vg.InvalidArgumentError):
        mem.recall("alice", "apples", k=0)
    with pytest.raises(TypeError):
        mem.recall("alice", "apples", k=True)


def test_a_memory_said_after_now_is_not_recalled_yet(mem):
    later = mem.remember("alice", "dentist appointment", at=T0 + DAY)
    assert mem.recall("alice", "dentist", now=T0) == []
    assert _ids(mem.recall("alice", "dentist", now=T0 + DAY)) == [later]


# ------------------------------------------------------------------ versions


@pytest.fixture
def versions(mem):
    old = mem.remember("alice", "I live in Berlin", kind="profile", at=T0)
    new = mem.remember("alice", "I live in Lisbon", kind="profile", at=T0 + 10 * DAY, supersedes=old)
    return mem, old, new


def test_superseding_closes_the_old_version(versions):
    mem, old, new = versions
    query = "where do I live"
    assert _ids(mem.recall("alice", query, k=5)) == [new]
    assert set(_ids(mem.recall("alice", query, k=5, include_superseded=True))) == {old, new}
    assert _ids(mem.recall("alice", query, k=5, now=T0 + 5 * DAY)) == [old]
    assert _ids(mem.recall("alice", query, k=5, now=T0 + 5 * DAY, include_superseded=True)) == [old]
    assert _ids(mem.recall("alice", query, k=5, now=T0 + 10 * DAY)) == [new]  # closed at the new one's at
    assert _ids(mem.memories("alice")) == [new]
    for memory_id in (old, new):
        chain = mem.history(memory_id)
        assert _ids(chain) == [old, new]
        assert chain[0].valid_to == T0 + 10 * DAY and chain[1].valid_to is None
        assert (chain[0].superseded_by, chain[1].supersedes) == (new, old)
        assert (chain[0].supersedes, chain[1].superseded_by) == (None, None)
    assert mem.graph.neighbors(new, rels=["supersedes"]) == [Edge(new, "supersedes", old, 1.0)]
    assert mem.graph.neighbors(old, rels=["supersedes"]) == []


def test_a_chain_of_three_versions(versions):
    mem, old, new = versions
    newest = mem.remember("alice", "I live in Porto", kind="profile", at=T0 + 20 * DAY, supersedes=new)
    assert _ids(mem.history(old)) == [old, new, newest]
    assert _ids(mem.recall("alice", "where do I live", k=5, now=T0 + 15 * DAY)) == [new]
    assert _ids(mem.recall("alice", "where do I live", k=5)) == [newest]


@pytest.mark.parametrize("case", ["already superseded", "unknown id", "not an id", "entity key", "other user",
                                  "at before the old one", "not a str"])
def test_a_bad_supersede_raises_and_writes_nothing(versions, case):
    mem, old, new = versions
    bobs = mem.remember("bob", "I live in Oslo", kind="profile", at=T0)
    before = state(mem)
    call, error = {
        "already superseded": (lambda: mem.remember("alice", "I live in Rome", at=T0 + 30 * DAY, supersedes=old),
                               vg.InvalidArgumentError),
        "unknown id": (lambda: mem.remember("alice", "I live in Rome", supersedes="m-0123456789abcdef"),
                       vg.NotFoundError),
        "not an id": (lambda: mem.remember("alice", "I live in Rome", supersedes="Berlin"), vg.NotFoundError),
        "entity key": (lambda: mem.remember("alice", "I live in Rome", supersedes="ent:5:alice:profile"),
                       vg.NotFoundError),
        "other user": (lambda: mem.remember("alice", "I live in Rome", supersedes=bobs), vg.NotFoundError),
        "at before the old one": (lambda: mem.remember("alice", "I live in Rome", at=T0 + 9 * DAY, supersedes=new),
                                  vg.InvalidArgumentError),
        "not a str": (lambda: mem.remember("alice", "I live in Rome", supersedes=7), TypeError),
    }[case]
    with pytest.raises(error):
        call()
    assert state(mem) == before
    assert _ids(mem.history(old)) == [old, new] and mem.history(new)[1].valid_to is None
    assert mem.history(bobs)[0].valid_to is None


# ------------------------------------------------------------------ expiry


def test_a_memory_leaves_recall_when_its_ttl_runs_out_without_expire():
    with vg.Memory.open(None, embedder=FakeEmbedder(), ttl={"event": HOUR, "fact": None}) as mem:
        event = mem.remember("alice", "fire drill in the lobby", kind="event", at=T0)
        fact = mem.remember("alice", "the lobby has a fire door", kind="fact", at=T0)
        assert mem.history(event)[0].expires_at == T0 + HOUR
        assert mem.history(fact)[0].expires_at is None
        query = "fire lobby"
        assert set(_ids(mem.recall("alice", query, now=T0 + 59 * timedelta(minutes=1)))) == {event, fact}
        assert _ids(mem.recall("alice", query, now=T0 + HOUR)) == [fact]  # at + ttl <= now: gone
        assert _ids(mem.recall("alice", query, now=T0 + 400 * DAY)) == [fact]
        assert set(_ids(mem.recall("alice", query, now=T0 + 30 * timedelta(minutes=1)))) == {event, fact}
        assert _ids(mem.memories("alice", now=T0 + 2 * HOUR)) == [fact]
        # and with the real clock (T0 is in the past): gone
        assert _ids(mem.recall("alice", query)) == [fact]


def test_expire_deletes_expired_memories_and_the_entities_only_they_mention():
    with vg.Memory.open(None, embedder=FakeEmbedder(), ttl={"event": HOUR}) as mem:
        e1 = mem.remember("alice", "kickoff with the Zanzibar team", kind="event", at=T0,
                          entities=["Zanzibar", "Kickoff"])
        e2 = mem.remember("alice", "lunch with Priya", kind="event", at=T0 + 2 * HOUR, entities=["Priya"])
        fact = mem.remember("alice", "Zanzibar runs on Postgres", kind="fact", at=T0, entities=["Zanzibar"])
        other = mem.remember("bob", "lunch with Priya", kind="event", at=T0 + 10 * HOUR, entities=["Priya"])
        nodes, edges = len(mem.graph), mem.graph.count_edges
        assert mem.expire(now=T0 + 30 * timedelta(minutes=1)) == []
        assert (len(mem.graph), mem.graph.count_edges) == (nodes, edges)

        gone = mem.expire(now=T0 + HOUR)  # only e1
        assert [(m.id, m.text, m.kind) for m in gone] == [(e1, "kickoff with the Zanzibar team", "event")]
        assert all(isinstance(m, vg.memory.MemoryHit) for m in gone)
        assert e1 not in mem.graph and "ent:5:alice:kickoff" not in mem.graph
        for kept in ("ent:5:alice:zanzibar", "ent:5:alice:event", "ent:5:alice:priya", "ent:5:alice:fact", e2, fact):
            assert kept in mem.graph
        assert len(mem.graph) == nodes - 2  # e1 and kickoff
        assert mem.graph.count_edges == edges - 3  # e1's mentions of zanzibar, kickoff and event

        gone = mem.expire(now=T0 + 4 * HOUR)  # e2, and with it priya and event (alice's)
        assert _ids(gone) == [e2]
        assert {"ent:5:alice:priya", "ent:5:alice:event", e2} & set(mem.graph.keys()) == set()
        assert "ent:3:bob:priya" in mem.graph and "ent:3:bob:event" in mem.graph and other in mem.graph
        assert len(mem.graph) == nodes - 5
        assert mem.expire(now=T0 + 4 * HOUR) == []
        assert _ids(mem.recall("alice", "Zanzibar", k=10, now=T0 + 4 * HOUR)) == [fact]
        assert e1 not in _ids(mem.recall("alice", "kickoff Zanzibar team", k=10, now=T0))  # deleted, even at T0
        with pytest.raises(vg.NotFoundError):
            mem.history(e1)


def test_set_ttl_changes_the_expiry_of_stored_memories(mem):
    first = mem.remember("alice", "parking spot B12", kind="note", at=T0)
    second = mem.remember("alice", "parking spot C7", kind="note", at=T0 + DAY)
    fact = mem.remember("alice", "the car is blue", kind="fact", at=T0)
    assert [m.expires_at for m in mem.memories("alice")] == [None, None, None]
    assert mem.set_ttl("note", timedelta(days=2)) == 2
    assert mem.ttl == {"note": timedelta(days=2)}
    expiry = {m.id: m.expires_at for m in mem.memories("alice", now=T0 + DAY)}
    assert expiry == {first: T0 + 2 * DAY, second: T0 + 3 * DAY, fact: None}
    assert _ids(mem.recall("alice", "parking spot", k=5, now=T0 + 2 * DAY + HOUR, kinds="note")) == [second]
    assert mem.set_ttl("note", 3600) == 2  # seconds
    assert mem.history(second)[0].expires_at == T0 + DAY + HOUR
    assert mem.set_ttl("note", None) == 2
    assert mem.recall("alice", "parking spot", k=5, now=T0 + 300 * DAY, kinds="note") != []
    assert mem.history(first)[0].expires_at is None
    assert mem.set_ttl("never-used", HOUR) == 0


def test_ttl_and_strict_kinds_persist_across_reopen(tmp_path):
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder(), ttl={"event": HOUR, "fact": None}, strict_kinds=True) as mem:
        event = mem.remember("alice", "fire drill at noon", kind="event", at=T0)
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        assert mem.ttl == {"event": HOUR, "fact": None}
        assert mem.strict_kinds is True
        with pytest.raises(vg.InvalidArgumentError, match="strict_kinds"):
            mem.remember("alice", "gossip", kind="gossip")
        assert mem.history(event)[0].expires_at == T0 + HOUR
        assert _ids(mem.recall("alice", "fire drill", now=T0 + HOUR - timedelta(seconds=1))) == [event]
        assert mem.recall("alice", "fire drill", now=T0 + HOUR) == []
        later = mem.remember("alice", "another drill", kind="event", at=T0 + DAY)
        assert mem.history(later)[0].expires_at == T0 + DAY + HOUR
    # a new TTL at open is merged in and restamps the stored memories of that kind
    with vg.Memory.open(path, embedder=FakeEmbedder(), ttl={"event": 2 * HOUR}) as mem:
        assert mem.ttl == {"event": 2 * HOUR, "fact": None}
        assert mem.history(event)[0].expires_at == T0 + 2 * HOUR
        assert _ids(mem.recall("alice", "fire drill", k=1, now=T0 + HOUR + timedelta(minutes=30))) == [event]
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        assert mem.ttl == {"event": 2 * HOUR, "fact": None}
        assert mem.history(event)[0].expires_at == T0 + 2 * HOUR


@pytest.mark.parametrize("ttl, error", [(0, vg.InvalidArgumentError), (-5, vg.InvalidArgumentError),
                                        (timedelta(0), vg.InvalidArgumentError),
                                        (timedelta(seconds=-1), vg.InvalidArgumentError),
                                        (float("nan"), vg.InvalidArgumentError), ("1h", TypeError),
                                        (True, TypeError)])
def test_a_ttl_that_is_not_positive_is_refused(tmp_path, ttl, error):
    path = tmp_path / "mem.vg"
    with pytest.raises(error):
        vg.Memory.open(str(path), embedder=FakeEmbedder(), ttl={"event": ttl})
    assert not path.exists() or not any(path.iterdir())  # nothing was created
    with vg.Memory.open(str(path), embedder=FakeEmbedder(), ttl={"event": HOUR}) as mem:
        event = mem.remember("alice", "drill", kind="event", at=T0)
        before = state(mem)
        with pytest.raises(error):
            mem.set_ttl("event", ttl)
        assert mem.ttl == {"event": HOUR} and state(mem) == before
        assert mem.history(event)[0].expires_at == T0 + HOUR
    with vg.Memory.open(str(path), embedder=FakeEmbedder()) as mem:
        assert mem.ttl == {"event": HOUR}


def test_reserved_and_unknown_kinds(mem):
    with pytest.raises(vg.InvalidArgumentError):
        vg.Memory.open(None, embedder=FakeEmbedder(), ttl={"~card": HOUR})
    with vg.Memory.open(None, embedder=FakeEmbedder(), ttl={"fact": None}, strict_kinds=True) as strict:
        strict.remember("alice", "a known kind", kind="fact")
        before = state(strict)
        with pytest.raises(vg.InvalidArgumentError, match="'gossip'"):
            strict.remember("alice", "an unknown kind", kind="gossip")
        assert state(strict) == before
    mem.remember("alice", "without strict_kinds any kind goes", kind="gossip")


# ------------------------------------------------------------------ provenance


def test_an_inference_is_hidden_until_confirmed(mem):
    fact = mem.remember("alice", "alice works at the harbour office", kind="fact", at=T0)
    guess = mem.infer("alice", "alice probably commutes by ferry to the harbour", kind="fact", at=T0 + HOUR)
    query = "harbour ferry commute"
    assert _ids(mem.recall("alice", query, k=5)) == [fact]
    with_inferred = mem.recall("alice", query, k=5, include_inferred=True)
    assert set(_ids(with_inferred)) == {fact, guess}
    assert {h.id: h.source for h in with_inferred}[guess] == "model"
    assert _ids(mem.memories("alice")) == [fact]
    assert _ids(mem.memories("alice", include_inferred=True)) == [fact, guess]
    assert _card_ids(mem.card("alice", refresh=True)) == {fact}
    assert _card_ids(mem.end_session("alice")) == {fact}

    before = datetime.now(UTC)
    confirmed = mem.confirm(guess)
    after = datetime.now(UTC)
    assert (confirmed.id, confirmed.source, confirmed.origin) == (guess, "user", "model")
    assert before <= confirmed.confirmed_at <= after
    assert set(_ids(mem.recall("alice", query, k=5))) == {fact, guess}
    hit = {h.id: h for h in mem.recall("alice", query, k=5)}[guess]
    assert (hit.source, hit.origin, hit.confirmed_at) == ("user", "model", confirmed.confirmed_at)
    assert _card_ids(mem.card("alice", refresh=True)) == {fact, guess}

    tool = mem.infer("alice", "alice may own a bicycle", at=T0)
    assert mem.confirm(tool, source="tool").source == "tool"


def test_confirm_refuses_what_is_not_an_inference(mem):
    fact = mem.remember("alice", "a plain fact", at=T0)
    guess = mem.infer("alice", "a guess", at=T0)
    before = state(mem)
    with pytest.raises(vg.InvalidArgumentError, match="not an inference"):
        mem.confirm(fact)
    with pytest.raises(vg.InvalidArgumentError):
        mem.confirm(guess, source="model")
    with pytest.raises(vg.InvalidArgumentError):
        mem.confirm(guess, source="rumour")
    with pytest.raises(vg.NotFoundError):
        mem.confirm("m-0123456789abcdef")
    with pytest.raises(TypeError):
        mem.infer("alice", "x", source="user")
    assert state(mem) == before
    mem.confirm(guess)
    with pytest.raises(vg.InvalidArgumentError, match="not an inference"):
        mem.confirm(guess)  # once confirmed it is a fact


# ------------------------------------------------------------------ the card


def test_the_card_is_json_with_a_section_per_kind(mem):
    ids = {
        "profile": mem.remember("alice", "alice is a marine biologist", kind="profile", at=T0),
        "preferences": mem.remember("alice", "alice prefers window seats", kind="preference", at=T0),
        "projects": mem.remember("alice", "alice is mapping the kelp forest", kind="project", at=T0),
        "facts": mem.remember("alice", "alice's boat is called Petrel", kind="fact", at=T0),
        "other": mem.remember("alice", "alice hums while diving", kind="habit", at=T0),
    }
    mem.remember("bob", "bob is a baker", kind="profile", at=T0)
    card = mem.card("alice", now=T0 + DAY)
    assert json.loads(json.dumps(card)) == card
    assert set(card) == CARD_FIELDS and card["user"] == "alice"
    for section, memory_id in ids.items():
        assert [e["id"] for e in card[section]] == [memory_id]
        assert card[section][0]["at"] == T0.isoformat()
    assert card["other"][0]["kind"] == "habit" and "kind" not in card["facts"][0]
    assert card["profile"][0]["text"] == "alice is a marine biologist"
    assert datetime.fromisoformat(card["last_updated"]) == T0 + DAY
    assert card["memories"] == 5
    # "tokens" is the count of the card's own JSON (its digits included)
    assert card["tokens"] == mem.count_tokens(json.dumps(card, ensure_ascii=False))
    assert _card_ids(mem.card("bob")) != set() and _card_ids(mem.card("bob")).isdisjoint(ids.values())
    assert _card_ids(mem.card("nobody")) == set()


@pytest.mark.parametrize("budget", [100, 150, 163, 170, 200, 241, 300])
def test_the_card_stays_within_card_tokens(budget):
    with vg.Memory.open(None, embedder=FakeEmbedder(), card_tokens=budget) as mem:
        kinds = ["profile", "preference", "project", "fact", "hobby"]
        for i in range(40):
            mem.remember("alice", f"memory number {i} about thing{i}", kind=kinds[i % 5], at=T0 + i * HOUR)
        card = mem.card("alice")
        text = json.dumps(card, ensure_ascii=False)
        assert mem.count_tokens(text) <= budget
        assert card["tokens"] == mem.count_tokens(text)
        entries = sum(len(card[s]) for s in SECTIONS)
        assert entries < 40
        if budget >= 200:
            assert entries >= 1
        assert json.loads(mem.graph.get_node("card:alice", vector=False)["text"]) == card


def test_the_card_leaves_out_superseded_expired_and_inferred_memories():
    with vg.Memory.open(None, embedder=FakeEmbedder(), ttl={"event": HOUR}) as mem:
        old = mem.remember("alice", "I live in Berlin", kind="profile", at=T0)
        new = mem.remember("alice", "I live in Lisbon", kind="profile", at=T0 + DAY, supersedes=old)
        event = mem.remember("alice", "fire drill today", kind="event", at=T0 + DAY)
        guess = mem.infer("alice", "probably likes fado", kind="preference", at=T0 + DAY)
        pref = mem.remember("alice", "likes custard tarts", kind="preference", at=T0 + DAY)
        half_an_hour_later = T0 + DAY + 30 * timedelta(minutes=1)
        assert _card_ids(mem.card("alice", refresh=True, now=half_an_hour_later)) == {new, event, pref}
        assert _card_ids(mem.card("alice", refresh=True, now=T0 + 2 * DAY)) == {new, pref}
        assert _card_ids(mem.card("alice", refresh=True, now=T0 + HOUR)) == {old}
        assert guess not in json.dumps(mem.card("alice", refresh=True))


def test_expire_refreshes_a_stored_card_that_quotes_an_expired_memory():
    with vg.Memory.open(None, embedder=FakeEmbedder(), ttl={"event": HOUR}) as mem:
        event = mem.remember("alice", "fire drill today", kind="event", at=T0)
        pref = mem.remember("alice", "likes custard tarts", kind="preference", at=T0)
        assert _card_ids(mem.end_session("alice", now=T0 + timedelta(minutes=10))) == {event, pref}
        assert _ids(mem.expire(now=T0 + 2 * HOUR)) == [event]
        card = mem.card("alice")
        assert _card_ids(card) == {pref}
        assert "fire drill" not in mem.graph.get_node("card:alice", vector=False)["text"]


def test_the_card_is_a_node_of_the_graph_and_persists(tmp_path):
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        pref = mem.remember("alice", "likes custard tarts", kind="preference", at=T0)
        card = mem.card("alice", now=T0 + DAY)
        node = mem.graph.get_node("card:alice", vector=False)
        assert (node["label"], node["tenant"]) == ("~card", "alice")
        assert json.loads(node["text"]) == card
        # no recall returns the card node, whatever the query
        assert _ids(mem.recall("alice", "custard tarts preferences profile projects facts", k=20)) == [pref]
    with vg.Memory.open(path, embedder=FakeEmbedder()) as mem:
        assert mem.card("alice") == card  # the stored one, not rebuilt (same last_updated)
        assert "card:alice" in mem.graph


def test_end_session_refreshes_the_card(mem):
    first = mem.remember("alice", "likes custard tarts", kind="preference", at=T0, session="s1")
    assert _card_ids(mem.card("alice")) == {first}
    second = mem.remember("alice", "training for a marathon", kind="project", at=T0, session="s2")
    assert _card_ids(mem.card("alice")) == {first}  # stored card, until the session ends
    card = mem.end_session("alice", "s2", now=T0 + DAY)
    assert _card_ids(card) == {first, second} and card["projects"][0]["id"] == second
    assert mem.card("alice") == card
    with pytest.raises(TypeError):
        mem.end_session("alice", 5)


def test_a_custom_summarizer_is_called_and_its_card_stored():
    calls = []

    def summarizer(user, memories, *, max_tokens, count_tokens, now):
        calls.append((user, [m.id for m in memories], max_tokens, now, count_tokens("two words")))
        return {"user": user, "summary": " / ".join(m.text for m in memories)}

    with vg.Memory.open(None, embedder=FakeEmbedder(), summarizer=summarizer, card_tokens=500) as custom:
        a = custom.remember("alice", "likes custard tarts", at=T0)
        b = custom.infer("alice", "maybe Portuguese", at=T0)
        c = custom.remember("alice", "runs marathons", at=T0 + HOUR)
        card = custom.card("alice", now=T0 + DAY)
        assert card == {"user": "alice", "summary": "likes custard tarts / runs marathons"}
        assert calls == [("alice", [a, c], 500, T0 + DAY, custom.count_tokens("two words"))]
        assert json.loads(custom.graph.get_node("card:alice", vector=False)["text"]) == card
        assert custom.card("alice") == card and len(calls) == 1  # stored: not called again
        assert b not in json.dumps(card)


def test_a_summarizer_over_budget_or_not_a_dict_is_refused_and_nothing_stored():
    def too_big(user, memories, **kw):
        return {"user": user, "blob": "many words " * 400}

    with vg.Memory.open(None, embedder=FakeEmbedder(), summarizer=too_big, card_tokens=100) as mem:
        mem.remember("alice", "likes custard tarts", at=T0)
        before = state(mem)
        with pytest.raises(vg.InvalidArgumentError, match="card_tokens=100"):
            mem.card("alice")
        with pytest.raises(vg.InvalidArgumentError):
            mem.end_session("alice")
        assert state(mem) == before and "card:alice" not in mem.graph
    with vg.Memory.open(None, embedder=FakeEmbedder(), summarizer=lambda user, memories, **kw: ["x"]) as mem:
        with pytest.raises(TypeError):
            mem.card("alice")
        assert "card:alice" not in mem.graph
    with pytest.raises(vg.InvalidArgumentError):
        vg.Memory.open(None, embedder=FakeEmbedder(), card_tokens=10)
    with pytest.raises(TypeError):
        vg.Memory.open(None, embedder=FakeEmbedder(), summarizer="not callable")


# ------------------------------------------------------------------ entities and association


def test_memories_that_mention_the_same_name_share_an_entity_node(mem):
    m1 = mem.remember("alice", "Zanzibar is the new billing service", kind="project", session="s1", at=T0)
    m2 = mem.remember("alice", "the Zanzibar release slipped a month", kind="fact", session="s2", at=T0 + DAY)
    m3 = mem.remember("bob", "Zanzibar is an island", kind="fact", at=T0)

    def entities(memory_id):
        return {e.dst for e in mem.graph.neighbors(memory_id, rels=["mentions"])}

    assert entities(m1) == {"ent:5:alice:zanzibar", "ent:5:alice:project"}
    assert entities(m2) == {"ent:5:alice:zanzibar", "ent:5:alice:fact"}
    assert entities(m3) == {"ent:3:bob:zanzibar", "ent:3:bob:fact"}
    assert {e.src for e in mem.graph.neighbors("ent:5:alice:zanzibar", rels=["mentions"], direction="in")} == {m1, m2}
    node = mem.graph.get_node("ent:5:alice:zanzibar", vector=False)
    assert (node["label"], node["tenant"], node["aliases"], node["text"]) == ("~entity", "alice", ["Zanzibar"], "")
    # a name written differently is the same entity (normalised), no new node
    nodes = len(mem.graph)
    m4 = mem.remember("alice", "ZANZIBAR billing is live", kind="project", at=T0 + 2 * DAY)
    assert "ent:5:alice:zanzibar" in entities(m4) and len(mem.graph) == nodes + 1
    assert mem.history(m4)[0].mentions == ["ZANZIBAR", "project"]


def test_the_graph_channel_finds_a_memory_of_another_session_through_an_entity(mem):
    m1 = mem.remember("alice", "Zanzibar is the new billing service", kind="project", session="s1", at=T0)
    # Said in another session with none of the query's words: an extractor (an LLM) named the entity.
    m2 = mem.remember("alice", "the release slipped to next month", kind="fact", session="s2", at=T0 + DAY,
                      entities=["Zanzibar"])
    # Enough other memories that m2 is not among the 8 nearest (the walks' similarity seeds,
    # which the graph channel does not list again).
    for text in ["likes hiking", "owns cats", "drinks tea", "plays chess", "reads novels", "runs daily",
                 "bakes bread", "paints walls", "rides bikes", "grows tomatoes", "knits scarves", "sings loudly"]:
        mem.remember("alice", text, kind="fact", session="s3", at=T0)
    hits = mem.recall("alice", "Zanzibar", k=14)
    by_id = {h.id: h for h in hits}
    assert m1 in by_id and m2 in by_id
    assert by_id[m2].ranks["graph"] is not None and by_id[m2].ranks["bm25"] is None
    assert by_id[m2].session == "s2"
    # the graph channel alone finds it (through the entity), the other two do not rank it
    assert _ids(mem.recall("alice", "Zanzibar", k=1, channels=("graph",))) == [m2]
    assert m2 not in _ids(mem.recall("alice", "Zanzibar", k=3, channels=("dense", "bm25")))


# ------------------------------------------------------------------ the recall_memory tool


def test_recall_memory_is_a_tool(mem):
    ids = [mem.remember("alice", f"budget meeting number {i}", kind="event", at=T0 + i * DAY) for i in range(8)]
    mem.remember("bob", "budget meeting for bob", at=T0)
    out = mem.recall_memory("alice", "budget meeting")
    assert isinstance(out, list) and len(out) == 5
    for item in out:
        assert set(item) == {"id", "text", "kind", "source", "at"}
        assert item["id"] in ids and item["kind"] == "event" and item["source"] == "user"
        assert datetime.fromisoformat(item["at"]).utcoffset() == timedelta(0)
    assert json.loads(json.dumps(out)) == out
    window = {"since": "2025-03-03T09:00:00Z", "until": "2025-03-05T09:00:00Z"}
    assert {o["id"] for o in mem.recall_memory("alice", "budget meeting", window)} == set(ids[2:5])
    assert {o["id"] for o in mem.recall_memory("alice", "budget meeting", [T0 + 6 * DAY, None])} == set(ids[6:])
    assert {o["id"] for o in mem.recall_memory("alice", "budget meeting", {"until": T0 + DAY})} == set(ids[:2])
    assert {o["id"] for o in mem.recall_memory("alice", "budget meeting", ("2025-03-02T09:00:00Z",
                                                                          "2025-03-02T09:00:00Z"))} == {ids[1]}


@pytest.mark.parametrize("time_range, error", [({"from": "2025-03-01"}, vg.InvalidArgumentError),
                                               ({"since": "last tuesday"}, vg.InvalidArgumentError),
                                               ("2025-03-01", TypeError), (["2025-03-01"], TypeError),
                                               ([1, 2, 3], TypeError), ({"since": 1.5}, TypeError)])
def test_recall_memory_refuses_a_bad_time_range(mem, time_range, error):
    mem.remember("alice", "budget meeting", at=T0)
    with pytest.raises(error):
        mem.recall_memory("alice", "budget meeting", time_range)


def test_recall_memory_has_a_json_schema_and_a_docstring():
    schema = vg.Memory.recall_memory.json_schema
    assert isinstance(schema, dict) and schema["name"] == "recall_memory"
    assert schema["parameters"]["required"] == ["user", "query"]
    assert set(schema["parameters"]["properties"]) == {"user", "query", "time_range"}
    assert json.loads(json.dumps(schema)) == schema
    doc = vg.Memory.recall_memory.__doc__
    assert doc and "time_range" in doc and "query" in doc


# ------------------------------------------------------------------ bad input


BAD_CALLS = {
    "empty text": (lambda m: m.remember("alice", ""), vg.InvalidArgumentError),
    "whitespace text": (lambda m: m.remember("alice", " \n\t "), vg.InvalidArgumentError),
    "text not a str": (lambda m: m.remember("alice", b"bytes"), TypeError),
    "user not a str": (lambda m: m.remember(42, "hello"), TypeError),
    "user None": (lambda m: m.remember(None, "hello"), TypeError),
    "empty user": (lambda m: m.remember("", "hello"), vg.InvalidArgumentError),
    "whitespace user": (lambda m: m.remember("  ", "hello"), vg.InvalidArgumentError),
    "unparseable at": (lambda m: m.remember("alice", "hello", at="yesterday-ish"), vg.InvalidArgumentError),
    "at a float": (lambda m: m.remember("alice", "hello", at=1.5), TypeError),
    "at a list": (lambda m: m.remember("alice", "hello", at=[2025, 3, 1]), TypeError),
    "at a bool": (lambda m: m.remember("alice", "hello", at=True), TypeError),
    "at past int64": (lambda m: m.remember("alice", "hello", at=2**63), vg.InvalidArgumentError),
    "unknown source": (lambda m: m.remember("alice", "hello", source="rumour"), vg.InvalidArgumentError),
    "reserved kind": (lambda m: m.remember("alice", "hello", kind="~x"), vg.InvalidArgumentError),
    "empty kind": (lambda m: m.remember("alice", "hello", kind=" "), vg.InvalidArgumentError),
    "kind not a str": (lambda m: m.remember("alice", "hello", kind=3), TypeError),
    "session not a str": (lambda m: m.remember("alice", "hello", session=3), TypeError),
    "entities a str": (lambda m: m.remember("alice", "hello", entities="Zanzibar"), TypeError),
    "entities with an int": (lambda m: m.remember("alice", "hello", entities=["a", 3]), TypeError),
    "bad extractor": (lambda m: (setattr(m, "extract_entities", lambda text: "oops"), m.remember("alice", "hi")),
                      TypeError),
    "recall empty query": (lambda m: m.recall("alice", "  "), vg.InvalidArgumentError),
    "recall bad since": (lambda m: m.recall("alice", "hello", since="soon"), vg.InvalidArgumentError),
    "recall bad flag": (lambda m: m.recall("alice", "hello", include_superseded="yes"), TypeError),
    "recall bad channel": (lambda m: m.recall("alice", "hello", channels=("telepathy",)), vg.InvalidArgumentError),
    "forget empty user": (lambda m: m.forget(""), vg.InvalidArgumentError),
    "forget user not a str": (lambda m: m.forget(["alice"]), TypeError),
    "history unknown": (lambda m: m.history("m-ffffffffffffffff"), vg.NotFoundError),
    "history of an entity": (lambda m: m.history("ent:5:alice:fact"), vg.NotFoundError),
    "card bad user": (lambda m: m.card(7), TypeError),
    "set_ttl reserved kind": (lambda m: m.set_ttl("~card", HOUR), vg.InvalidArgumentError),
}


@pytest.mark.parametrize("case", sorted(BAD_CALLS))
def test_bad_input_raises_a_typed_error_and_changes_nothing(tmp_path, case):
    call, error = BAD_CALLS[case]
    with vg.Memory.open(str(tmp_path / "mem.vg"), embedder=FakeEmbedder()) as mem:
        mem.remember("alice", "a memory that is there", at=T0)
        mem.card("alice")
        before = state(mem)
        assert before[3] > 0
        with pytest.raises(error):
            call(mem)
        assert state(mem) == before
        assert _ids(mem.memories("alice")) == [before[2][1]]


def test_forget_of_an_unknown_user_returns_an_empty_receipt(folder_mem):
    folder_mem.remember("alice", "a memory that is there", at=T0)
    before = state(folder_mem)
    receipt = folder_mem.forget("nobody")
    assert isinstance(receipt, vg.memory.ErasureReceipt) and receipt.user == "nobody"
    assert (receipt.nodes, receipt.memories, receipt.entities, receipt.cards) == (0, 0, 0, 0)
    assert receipt.files_removed == [] and receipt.files_written == [] and receipt.found == []
    assert state(folder_mem) == before


def test_to_context_refuses_a_budget_below_one(mem):
    mem.remember("alice", "hello there", at=T0)
    hits = mem.recall("alice", "hello")
    for bad, error in ((0, vg.InvalidArgumentError), (-3, vg.InvalidArgumentError), (1.5, TypeError),
                       (True, TypeError), ("800", TypeError)):
        with pytest.raises(error):
            hits.to_context(max_tokens=bad)


# ------------------------------------------------------------------ to_context


LINE = re.compile(r"\[(m-[0-9a-f]{16})\] \(([^,]+), (user|tool|document|model), (\d{4}-\d{2}-\d{2})\) (.+)")


def test_to_context_cites_each_memory_within_the_budget(mem):
    texts = {}
    for i in range(10):
        text = f"release checklist item {i}: " + "verify the staging deploy " * (i % 3 + 1)
        texts[mem.remember("alice", text, kind="project", at=T0 + i * DAY)] = text.strip()
    hits = mem.recall("alice", "release checklist staging deploy", k=10)
    assert len(hits) == 10
    everything = hits.to_context(max_tokens=100_000)
    lines = everything.split("\n")
    assert len(lines) == 10
    for line, hit in zip(lines, hits):
        match = LINE.fullmatch(line)
        assert match, line
        assert match.groups() == (hit.id, "project", "user", hit.at.date().isoformat(), texts[hit.id])
    for budget in (1, 20, 40, 75, 130, 250):
        context = hits.to_context(max_tokens=budget)
        assert mem.count_tokens(context) <= budget
        kept = [LINE.fullmatch(line).group(1) for line in context.split("\n") if line]
        order = _ids(hits)
        assert kept == sorted(kept, key=order.index)  # best first, none repeated
        # a line that does not fit is left out whole, and a later shorter one may still go in
        assert kept == _greedy(lines, budget, mem.count_tokens)
    assert hits.to_context(max_tokens=1) == ""
    assert hits.to_context(max_tokens=100_000) == everything
    by_chars = hits.to_context(max_tokens=150, count_tokens=len)
    assert by_chars and [LINE.fullmatch(line).group(1) for line in by_chars.split("\n")] == _greedy(lines, 150, len)


def _greedy(lines: list, budget: int, count) -> list:
    used, kept = 0, []
    for line in lines:
        cost = count(line + "\n")
        if used + cost <= budget:
            kept.append(LINE.fullmatch(line).group(1))
            used += cost
    return kept


# ------------------------------------------------------------------ end to end with a real embedder


def test_end_to_end_with_wordllama(tmp_path):
    path = str(tmp_path / "mem.vg")
    with vg.Memory.open(path, embedder="wordllama") as mem:
        go = mem.remember("zhang", "order-service is written in Go 1.22", kind="project", session="s1")
        coffee = mem.remember("zhang", "I prefer dark roast coffee in the morning", kind="preference", session="s1")
        mem.remember("zhang", "my daughter plays the violin", kind="fact", session="s2")
        mem.remember("li", "order-service is written in Rust", kind="project")
        assert mem.recall("zhang", "which language is order-service in?", k=1)[0].id == go
        assert mem.recall("zhang", "what do I like to drink?", k=1)[0].id == coffee
        card = mem.end_session("zhang", "s2")
        assert _card_ids(card) == {m.id for m in mem.memories("zhang")} and len(_card_ids(card)) == 3
    with vg.Memory.open(path, embedder="wordllama") as mem:
        assert mem.recall("zhang", "which language is order-service in?", k=1)[0].id == go
        assert mem.card("zhang") == card
    with pytest.raises(vg.DimensionMismatchError):
        vg.Memory.open(path, embedder=FakeEmbedder())
