"""The BM25 channel's post-filter: when the tenant and label filters admit most texts, the
search runs without them and the graph checks the candidates. Its rankings must equal the
filtered search's (the filters inside tantivy's query) and a slow reference (every match,
filtered in Python), ties included; a first block that admits too few falls back to the
filtered search; documents written but not yet published are never read by it."""

from __future__ import annotations

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


def test_a_short_first_block_falls_back_to_the_filtered_search(monkeypatch):
    """ "note" holds a tenth of the texts: the first 64 candidates of a common word cannot give
    50 notes, so the search runs again with the filter inside; the result is the same."""
    g = build()
    calls = count_calls(monkeypatch)
    inside = bm25(g, "alpha beta gamma", 50, 2.0, monkeypatch, labels=["note"])
    after = bm25(g, "alpha beta gamma", 50, 0.0, monkeypatch, labels=["note"])
    assert after == inside
    assert [key for key, _ in after] == reference(g, "alpha beta gamma", 50, labels=["note"])
    assert calls == {"found": 0, "short": 1}


def test_the_share_decides_and_unpublished_writes_skip_the_post_filter(monkeypatch):
    g = build()
    calls = count_calls(monkeypatch)
    bm25(g, "alpha", 10, hybrid.POST_FILTER_SHARE, monkeypatch, labels=["chunk"])  # ~70 % of texts
    assert calls == {"found": 1, "short": 0}
    bm25(g, "alpha", 10, hybrid.POST_FILTER_SHARE, monkeypatch, labels=["note"])  # ~10 %
    assert calls == {"found": 1, "short": 0}
    # a write the index holds in memory: the filtered search reads it, the post-filter is not tried
    g.add_nodes(
        ["new"], np.ones((1, 8), np.float32), labels="chunk", texts=["alpha alpha alpha"], tenants="t1"
    )
    assert text_index(g).unpublished == 1
    got = bm25(g, "alpha", 10, 0.0, monkeypatch, labels=["chunk"])
    assert calls == {"found": 1, "short": 0}
    assert got[0][0] == "new"
    assert [key for key, _ in got] == reference(g, "alpha", 10, labels=["chunk"])


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
