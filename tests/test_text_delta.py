"""The BM25 index's delta: documents written since the last publish are searched beside the
published index, without a commit, and rank as they will once published; a rebuild and
optimize() leave no file holding a deleted document; deletes still work after a clear-and-refill (tantivy ignores deletes after delete_all_documents once a delete was committed)."""

from __future__ import annotations

import os
import random

import pytest
from vecgraph.text import _DELTA_MAX, TextIndex, tokenize

WORDS = [f"w{i}" for i in range(40)] + ["kestrel", "lagoon", "quartz"]


def text(rng: random.Random) -> str:
    return " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 30)))


def published(ix: TextIndex) -> None:
    ix.count()  # a read that publishes


def _order(row):
    key = row[0]
    return (-row[1], (0, key, "") if isinstance(key, int) else (1, 0, key))


@pytest.mark.parametrize("seed", range(6))
def test_delta_ranks_like_published_then_merged(seed):
    """Committed documents keep the scores of the published state (the keys written since are
    skipped), delta documents score exactly as they do once published, and the two merge by
    (score desc, key)."""
    rng = random.Random(seed)
    ix = TextIndex()
    keys = [f"k{i}" for i in range(200)] + list(range(50))
    tenants = [rng.choice(["t1", "t2", "t3"]) for _ in keys]
    ix.upsert(keys, [text(rng) for _ in keys], tenants=tenants, ts=[rng.randint(0, 99) for _ in keys], lsn=1)
    published(ix)
    queries = [" ".join(rng.sample(WORDS, 2)) for _ in range(15)]
    filters = [{}, {"tenants": ["t2"]}, {"ts_min": 20, "ts_max": 70}, {"labels": ["L"]},
               {"keys": [f"k{i}" for i in range(0, 200, 3)] + [5, 7, 1000]}]
    before = {(q, i): ix.search(q, 1000, **f) for q in queries for i, f in enumerate(filters)}
    written = rng.sample(keys, 25) + [f"new{i}" for i in range(10)] + [1000]
    ix.upsert(written, [text(rng) for _ in written], tenants=[rng.choice(["t1", "t2"]) for _ in written],
              labels=[rng.choice(["L", ""]) for _ in written], ts=[rng.randint(0, 99) for _ in written], lsn=2)
    deleted = rng.sample([k for k in keys if k not in written], 10)
    ix.delete(deleted, lsn=3)
    changed = set(written) | set(deleted)
    assert ix._pending  # nothing was committed for the searches below
    during = {(q, i): ix.search(q, 1000, **f) for q in queries for i, f in enumerate(filters)}
    assert ix._pending
    published(ix)
    after = {(q, i): dict(ix.search(q, 1000, **f)) for q in queries for i, f in enumerate(filters)}
    for case, rows in during.items():
        old = [row for row in before[case] if row[0] not in changed]
        new = [row for row in rows if row[0] in changed]
        assert [row for row in rows if row[0] not in changed] == old
        assert {key for key, _ in new} == {key for key in after[case] if key in changed}
        for key, score in new:
            assert score == pytest.approx(after[case][key], rel=1e-6, abs=1e-6)
        assert rows == sorted(rows, key=_order)


def test_k_cuts_the_merged_ranking():
    ix = TextIndex()
    ix.upsert([f"a{i}" for i in range(30)], ["kestrel " + "w1 " * i for i in range(30)], lsn=1)
    published(ix)
    ix.upsert(["x", "y"], ["kestrel kestrel kestrel", "w1 " * 40 + "kestrel"], lsn=2)
    top = ix.search("kestrel", 3)
    full = ix.search("kestrel", 100)
    assert top == full[:3] and len(full) == 32
    assert top[0][0] == "x" and full[-1][0] == "y"  # most and least kestrel-dense


def test_exclude_callbacks_see_delta_documents():
    ix = TextIndex()
    ix.upsert(["a", "b"], ["lagoon", "lagoon w2"], lsn=1)
    published(ix)
    ix.upsert(["c", "d"], ["lagoon", "lagoon w3"], lsn=2)
    everything = ix.search("lagoon", 10)
    assert {key for key, _ in everything} == {"a", "b", "c", "d"}
    assert ix.search("lagoon", 10, exclude=lambda key: key in ("a", "c")) == \
        [row for row in everything if row[0] in ("b", "d")]
    assert ix.search("lagoon", 10, exclude_many=lambda keys: [k == "d" for k in keys]) == \
        [row for row in everything if row[0] != "d"]


def test_document_frequencies_count_the_delta():
    ix = TextIndex()
    ix.upsert(["a", "b"], ["quartz w1", "w1 w2"], lsn=1)
    published(ix)
    ix.upsert(["c", "d"], ["quartz", "quartz kestrel"], lsn=2)
    during = ix.document_frequencies(["quartz", "w1", "kestrel", "absent"])
    published(ix)
    assert during == ix.document_frequencies(["quartz", "w1", "kestrel", "absent"]) == (4, [3, 2, 1, 0])


def test_a_full_delta_is_published_by_the_writer():
    ix = TextIndex()
    for i in range(_DELTA_MAX + 10):
        ix.upsert([f"k{i}"], [f"kestrel w{i % 40}"], lsn=i + 1)
        assert len(ix._view[1]) <= _DELTA_MAX
    assert len(ix.search("kestrel", 10_000)) == _DELTA_MAX + 10


def test_delete_tenant_is_seen_at_once():
    ix = TextIndex()
    ix.upsert(["a", "b"], ["lagoon", "lagoon"], tenants=["t1", "t2"], lsn=1)
    published(ix)
    ix.upsert(["c"], ["lagoon"], tenants="t1", lsn=2)
    assert ix.delete_tenant("t1", lsn=3) == 2
    assert [key for key, _ in ix.search("lagoon", 10)] == ["b"]


@pytest.mark.parametrize("clear", ["rebuild", "reopen_reset"])
def test_deletes_work_after_the_index_is_filled_anew(tmp_path, clear):
    ix = TextIndex(str(tmp_path / "t"))
    ix.upsert(["a1", "a2", "b1", "b2"], ["w1 one", "w1 two", "w2 one", "w2 two"], tenants=["A", "A", "B", "B"], lsn=1)
    assert ix.delete_tenant("B", lsn=2) == 2  # a committed delete, then the index is filled anew
    if clear == "rebuild":
        ix.rebuild([("a1", "w1 one", "A", None, 0), ("a2", "w1 two", "A", None, 0)], lsn=3)
    else:
        ix.clear()
        ix.upsert(["a1", "a2"], ["w1 one", "w1 two"], tenants="A", lsn=3)
        published(ix)
    assert ix.delete(["a1"], lsn=4) == 1
    assert ix.count() == 1
    assert ix.delete_tenant("A", lsn=5) == 1
    assert ix.count() == 0 and ix.search("w1", 5) == []
    ix.close()


def test_a_rebuild_leaves_no_segment_holding_a_deleted_document(tmp_path):
    folder = str(tmp_path / "t")
    ix = TextIndex(folder)
    rng = random.Random(3)
    keys = [f"k{i}" for i in range(300)]
    # One batch: the deleted documents share a segment with kept ones (a segment whose documents
    # are all deleted is dropped at commit anyway).
    texts = [text(rng) for _ in keys]
    ix.upsert(keys + ["secret-key-1", "secret-key-2"], texts + ["zanzibarish w1", "zanzibarish w2"],
              tenants=["keep"] * 300 + ["gone-tenant"] * 2, lsn=2)
    published(ix)
    ix.delete_tenant("gone-tenant", lsn=3)
    before = {q: ix.search(q, 1000) for q in ("w1 w2", "w3", "kestrel lagoon")}
    ix.optimize()

    old_segments = {name for name in os.listdir(folder) if "." in name and not name.startswith((".", "meta", "vecgraph"))}
    # Deleted, yet still in a segment: its terms count in the BM25 statistics until a merge.
    assert ix.document_frequencies(["zanzibarish"])[1] == [2]
    kept = [(k, t, "keep", None, 0) for k, t in zip(keys, texts)]
    assert ix.rebuild(kept, lsn=3) == 300
    ix.optimize()
    assert ix.document_frequencies(["zanzibarish"])[1] == [0]
    assert old_segments and old_segments & set(os.listdir(folder)) == set()  # every older segment file gone
    for q, rows in before.items():  # the same matches (scores move: deleted ones leave the statistics)
        assert sorted(key for key, _ in ix.search(q, 1000)) == sorted(key for key, _ in rows)
    assert ix.count() == 300 and ix.lsn == 3
    ix.close()
    ix = TextIndex(folder)  # the closed folder passes the file checks
    assert ix.count() == 300
    ix.close()


def test_an_index_of_an_older_layout_is_emptied_for_its_owner_to_rebuild(tmp_path):
    import json

    folder = str(tmp_path / "t")
    ix = TextIndex(folder)
    ix.upsert(["a"], ["kestrel"], lsn=7)
    ix.close()
    meta_path = os.path.join(folder, "vecgraph-text.json")
    with open(meta_path) as f:
        meta = json.load(f)
    meta["schema_version"] -= 1
    meta.pop("files", None)
    with open(meta_path, "w") as f:
        json.dump(meta, f)
    ix = TextIndex(folder)
    assert ix.reset_on_open and ix.lsn == 0 and ix.count() == 0
    ix.upsert(["b"], ["lagoon"], lsn=8)
    assert [key for key, _ in ix.search("lagoon", 5)] == ["b"]
    ix.close()


def test_tokens_of_delta_documents_are_the_tokenizers():
    ix = TextIndex()
    ix.upsert(["a"], ["Widget A7-Pro"], lsn=1)
    published(ix)
    ix.upsert(["b"], ["A7-Pro costs 99 (A7-Pro)"], lsn=2)
    doc = ix._view[1][("node", str, "b")]
    assert doc.length == len(tokenize("A7-Pro costs 99 (A7-Pro)"))
    assert doc.terms["a7-pro"] == 2
