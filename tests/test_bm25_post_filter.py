"""The BM25 channel's post-filter: when the tenant and label filters admit most texts, the
search runs without them and the graph checks the candidates. Its rankings must equal the
filtered search's (the filters inside tantivy's query) and a slow reference (every match,
filtered in Python), ties included; a first block that admits too few falls back to the
filtered search; documents written but not yet published are never read by it."""

from __future__ import annotations

import threading

import numpy as np
import pytest
import vecgraph as vg
from vecgraph import hybrid
from vecgraph.side_indexes import text_index

WORDS = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]


def build(n: int = 400, seed: int = 0) -> vg.Graph:
    """``n`` nodes, labels in shares 70/20/10 %, two tenants, a ``rank`` property; texts of
    five words from eight, so many texts tie on the same score."""
    rng = np.random.default_rng(seed)
    g = vg.Graph(dim=8, filterable={"rank": "int64"})
    labels = rng.choice(["chunk", "entity", "note"], size=n, p=[0.7, 0.2, 0.1]).tolist()
    tenants = rng.choice(["t1", "t2"], size=n).tolist()
    texts = [" ".join(rng.choice(WORDS, size=5)) for _ in range(n)]
    vectors = rng.normal(size=(n, 8)).astype(np.float32)
    g.add_nodes(
        [f"n{i}" for i in range(n)],
        vectors,
        labels=labels,
        texts=texts,
        tenants=tenants,
        props=[{"rank": int(i % 7)} for i in range(n)],
    )
    text_index(g).flush()  # publishes: the post-filter reads only published documents
    return g


def bm25(
    g: vg.Graph, text: str, depth: int, share: float, monkeypatch: pytest.MonkeyPatch, **filters
) -> list:
    monkeypatch.setattr(hybrid, "POST_FILTER_SHARE", share)
    res = g.hybrid_search(text, k=depth, depth=depth, channels=["bm25"], **filters)
    return list(zip(res.lists["bm25"], [round(float(s), 6) for s in res.scores]))


def reference(g: vg.Graph, text: str, depth: int, labels=None, tenants=None, where=None, exclude=()) -> list:
    """Every match of the unfiltered index, filtered here by reading each node: the first
    ``depth`` by (score, key)."""
    rows = text_index(g).search(text, 10_000)
    out = []
    for key, score in rows:
        node = g.get_node(key, vector=False)
        if labels is not None and node["label"] not in labels:
            continue
        if tenants is not None and node["tenant"] not in tenants:
            continue
        if where is not None and any(
            not admits(node["props"].get(name), value) for name, value in where.items()
        ):
            continue
        if key in exclude:
            continue
        out.append((key, score))
    out.sort(key=lambda row: (-row[1], row[0]))
    return [key for key, _ in out[:depth]]


def admits(held, condition) -> bool:
    if isinstance(condition, dict):
        return held is not None and all({">=": held >= v, "<": held < v}[op] for op, v in condition.items())
    return held == condition


def count_calls(monkeypatch: pytest.MonkeyPatch) -> dict:
    calls = {"found": 0, "short": 0}
    real = hybrid.after_search

    def counted(*args, **kwargs):
        out = real(*args, **kwargs)
        calls["found" if out is not None else "short"] += 1
        return out

    monkeypatch.setattr(hybrid, "after_search", counted)
    return calls


@pytest.mark.parametrize(
    "filters",
    [
        {"labels": ["chunk"]},
        {"labels": ["chunk", "note"]},
        {"tenants": ["t1"]},
        {"labels": ["chunk"], "tenants": ["t2"]},
        {"labels": ["chunk"], "where": {"rank": 3}},
        {"labels": ["chunk"], "where": {"rank": {">=": 1}}},
        {"labels": ["chunk"], "exclude_keys": ["n1", "n2", "n3", "n5", "n8"]},
    ],
)
def test_post_filter_equals_the_filtered_search_and_the_reference(monkeypatch, filters):
    g = build()
    calls = count_calls(monkeypatch)
    for text in ["alpha beta", "gamma omega sigma", "theta", "kappa delta alpha beta"]:
        for depth in (5, 20):
            inside = bm25(g, text, depth, 2.0, monkeypatch, **filters)  # never post-filtered
            after = bm25(g, text, depth, 0.0, monkeypatch, **filters)  # always tried first
            assert after == inside
            expected = reference(
                g,
                text,
                depth,
                filters.get("labels"),
                filters.get("tenants"),
                filters.get("where"),
                set(filters.get("exclude_keys", ())),
            )
            assert [key for key, _ in after] == expected
            assert len(expected) >= 5  # the filters leave matches to rank
    if filters.get("where") == {"rank": 3}:  # it admits few nodes: the search lists their keys instead
        assert calls == {"found": 0, "short": 0}
    else:
        assert calls["found"] > 0  # the post-filter answered some of them itself


def test_two_pages_without_enough_admitted_fall_back_to_the_filtered_search(monkeypatch):
    """ "note" holds a tenth of 400 texts: the whole ranking of a common word fits the two pages
    (815 rows for 50), so the post-filter answers; "rare" holds 20 of 3,000: the two pages of
    525 rows hold about 4 of them, fewer than 10, so the search runs again with the filter
    inside. Both results equal the filtered search's."""
    g = build()
    calls = count_calls(monkeypatch)
    inside = bm25(g, "alpha beta gamma", 50, 2.0, monkeypatch, labels=["note"])
    after = bm25(g, "alpha beta gamma", 50, 0.0, monkeypatch, labels=["note"])
    assert after == inside
    assert [key for key, _ in after] == reference(g, "alpha beta gamma", 50, labels=["note"])
    assert calls == {"found": 1, "short": 0}
    rng = np.random.default_rng(2)
    n = 3000
    big = vg.Graph(dim=4)
    big.add_nodes(
        list(range(n)),
        rng.normal(size=(n, 4)).astype(np.float32),
        texts=[" ".join(rng.choice(WORDS, size=6)) for _ in range(n)],
        labels=["rare" if i % 150 == 0 else "common" for i in range(n)],
    )
    text_index(big).flush()
    inside = bm25(big, "alpha", 10, 2.0, monkeypatch, labels=["rare"])
    after = bm25(big, "alpha", 10, 0.0, monkeypatch, labels=["rare"])
    assert after == inside and len(after) == 10
    assert calls == {"found": 1, "short": 1}


def test_the_share_decides_and_unpublished_writes_are_read_too(monkeypatch):
    g = build()
    calls = count_calls(monkeypatch)
    bm25(g, "alpha", 10, hybrid.POST_FILTER_SHARE, monkeypatch, labels=["chunk"])  # ~70 % of texts
    assert calls == {"found": 1, "short": 0}
    bm25(g, "alpha", 10, hybrid.POST_FILTER_SHARE, monkeypatch, labels=["note"])  # ~10 %
    assert calls == {"found": 1, "short": 0}
    # writes the index holds in memory (not yet published): scored beside the index, checked alike
    one = np.ones((1, 8), np.float32)
    g.add_nodes(["new"], one, labels="chunk", texts=["alpha alpha alpha"], tenants="t1")
    g.add_nodes(["other"], one, labels="note", texts=["alpha alpha alpha"], tenants="t1")
    got = bm25(g, "alpha", 10, 0.0, monkeypatch, labels=["chunk"])
    assert calls == {"found": 2, "short": 0}
    assert got[0][0] == "new" and "other" not in [key for key, _ in got]
    assert got == bm25(g, "alpha", 10, 2.0, monkeypatch, labels=["chunk"])
    assert [key for key, _ in got] == reference(g, "alpha", 10, labels=["chunk"])


def test_a_write_during_the_search_sends_it_to_the_filtered_plan(monkeypatch):
    """The candidates are scored by the index's view and checked against the graph's: a write
    between the two (here: node n0..n9 relabelled while the index is searched) must not mix
    them; the search runs again with the filters inside, on the state after the write."""
    g = build()
    calls = count_calls(monkeypatch)
    search = g._bm25
    wrote: list = []

    def writing(text, depth, **kw):
        if not wrote:
            g.update_nodes([f"n{i}" for i in range(10)], labels=["note"] * 10)
            wrote.append(True)
        return search(text, depth, **kw)

    monkeypatch.setattr(g, "_bm25", writing)
    got = bm25(g, "alpha beta", 20, 0.0, monkeypatch, labels=["chunk"])
    assert calls == {"found": 0, "short": 1}
    assert [key for key, _ in got] == reference(g, "alpha beta", 20, labels=["chunk"])
    assert not {f"n{i}" for i in range(10)} & {key for key, _ in got}
    # a writer holding the lock (between its graph write and its index write): not tried at all
    held, release = threading.Event(), threading.Event()

    def writer():
        with g._text_lock:
            held.set()
            release.wait(10)

    thread = threading.Thread(target=writer)
    thread.start()
    held.wait(10)
    try:
        assert hybrid.after_search(g, "alpha", 10, ["chunk"], None, None, None, {}) is None
    finally:
        release.set()
        thread.join(10)
    assert hybrid.after_search(g, "alpha", 10, ["chunk"], None, None, None, {}) is not None


def test_a_tie_group_larger_than_a_page_breaks_ties_by_key_as_the_filtered_search_does(monkeypatch):
    """8,000 equal texts (one score), inserted in shuffled key order, half of them labelled A:
    the admitted 4,000 fit one page of the filtered search and come in key order; the
    unfiltered ranking's tie group (8,000) is longer than a page, so the post-filter must not
    answer."""
    rng = np.random.default_rng(5)
    keys = rng.permutation(8000).tolist()
    g = vg.Graph(dim=2)
    g.add_nodes(
        keys,
        np.ones((8000, 2), np.float32),
        texts=["same words"] * 8000,
        labels=["A" if key % 2 == 0 else "B" for key in keys],
    )
    text_index(g).flush()
    calls = count_calls(monkeypatch)
    after = bm25(g, "words", 5, 0.0, monkeypatch, labels=["A"])
    assert [key for key, _ in after] == [0, 2, 4, 6, 8]
    assert after == bm25(g, "words", 5, 2.0, monkeypatch, labels=["A"])
    assert calls == {"found": 0, "short": 1}


def test_admitted_share_counts_labels_and_tenants():
    g = vg.Graph(dim=2)
    g.add_nodes(
        [f"a{i}" for i in range(6)], np.ones((6, 2), np.float32), labels="x", texts=["w"] * 6, tenants="p"
    )
    g.add_nodes(
        [f"b{i}" for i in range(4)], np.ones((4, 2), np.float32), labels="y", texts=["w"] * 4, tenants="q"
    )
    g.add_nodes(["c"], np.ones((1, 2), np.float32), labels="x")  # no text: not in the index
    text_index(g).flush()
    index = text_index(g)
    assert index.admitted_share() == 1.0
    assert index.admitted_share(labels=["x"]) == pytest.approx(0.6)
    assert index.admitted_share(labels=["x", "y", "x"]) == 1.0
    assert index.admitted_share(labels=["z"]) == 0.0
    assert index.admitted_share(tenants=["q"]) == pytest.approx(0.4)
    assert index.admitted_share(labels=["x"], tenants=["q"]) == pytest.approx(0.4)  # the smaller share
    assert index.admitted_share(labels=["x"], kind="edge") == 0.0  # no edge texts


def test_text_search_max_rows_reads_no_further_than_it_says():
    from vecgraph.text import MaxRowsReached, TextIndex

    index = TextIndex()
    try:
        index.rebuild(
            [(i, f"alpha {'beta ' * (i % 50)}", "", "x", 0) for i in range(300)], lsn=1, progress=False
        )
        full = index.search("beta", 10)
        assert index.search("beta", 10, max_rows=200) == full  # 49 distinct scores: one page holds them
        odd = lambda keys: [key % 2 == 0 for key in keys]  # noqa: E731 - admits odd keys only
        assert index.search("beta", 5, exclude_many=odd, max_rows=200) == index.search(
            "beta", 5, exclude_many=odd
        )
        with pytest.raises(MaxRowsReached):  # admitting one key in 300: past any 200 rows
            index.search("beta", 5, exclude_many=lambda keys: [key != 1 for key in keys], max_rows=200)
        with pytest.raises(vg.InvalidArgumentError, match="max_rows must be >= 1, got 0"):
            index.search("beta", 5, max_rows=0)
    finally:
        index.close()
