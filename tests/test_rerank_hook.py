"""The reranker hook of hybrid_search and Memory.recall: the fused top rerank_depth reordered by
the reranker's scores (ties: fused order), checked against a reference built from the fused
list itself; a reranker that returns the wrong length or NaN is a clear error."""

from __future__ import annotations

import numpy as np
import pytest

import vecgraph as vg
from vecgraph.rerankers import TermOverlapReranker
from memory_helpers import FakeEmbedder

WORDS = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu".split()


def _graph(n: int = 80) -> vg.Graph:
    rng = np.random.default_rng(7)
    emb = FakeEmbedder()
    texts = [" ".join(rng.choice(WORDS, size=int(rng.integers(2, 7)))) for _ in range(n)]
    g = vg.Graph(emb.dim)
    keys = [f"d{i}" for i in range(n)]
    g.add_nodes(keys, emb(texts), texts=texts)
    g.add_edges([keys[i] for i in rng.integers(0, n, 120)], [keys[j] for j in rng.integers(0, n, 120)], rels="r")
    g.use_embedder(emb)
    return g


def _reference(g: vg.Graph, text: str, k: int, depth: int, reranker) -> list:
    fused = g.hybrid_search(text, k=depth)
    texts = [g.get_node(key, vector=False)["text"] for key in fused.keys]
    scores = list(reranker(text, texts))
    order = sorted(range(len(texts)), key=lambda i: (-scores[i], i))[:k]
    return [(fused.keys[i], scores[i], i + 1) for i in order]


@pytest.mark.parametrize("query", ["gamma delta", "kappa", "alpha alpha zeta mu"])
@pytest.mark.parametrize("k,depth", [(5, None), (3, 3), (10, 40)])
def test_hybrid_rerank_matches_the_reference(query, k, depth):
    g = _graph()
    reranker = TermOverlapReranker()
    res = g.hybrid_search(query, k=k, reranker=reranker, rerank_depth=depth)
    expected = _reference(g, query, k, max(k, 20) if depth is None else depth, reranker)
    assert [(h.key, h.score, h.ranks["fused"]) for h in res.hits] == expected
    assert len(res) == k
    assert [r["rank_fused"] for r in res.to_dicts()] == [e[2] for e in expected]
    for hit in res.hits:  # the path and channel ranks are the fused hit's own
        assert all(e.src in g and e.dst in g for e in hit.path)


def test_a_reranker_that_returns_the_wrong_length_or_nan_is_refused():
    g = _graph(30)
    before = len(g)
    with pytest.raises(vg.InvalidArgumentError, match=r"returned 2 scores for 20 texts|expected 20"):
        g.hybrid_search("alpha", k=5, reranker=lambda q, texts: [1.0, 2.0])
    with pytest.raises(vg.InvalidArgumentError, match="NaN|not finite|finite"):
        g.hybrid_search("alpha", k=5, reranker=lambda q, texts: [float("nan")] * len(texts))
    with pytest.raises(TypeError):
        g.hybrid_search("alpha", k=5, reranker="not callable")
    with pytest.raises(vg.InvalidArgumentError, match="pass text= with reranker="):
        g.hybrid_search(vector=np.ones(64), k=5, reranker=TermOverlapReranker())
    with pytest.raises(vg.InvalidArgumentError, match=r"rerank_depth must be in \[k, 100,000\] \(k = 5\), got 4"):
        g.hybrid_search("alpha", k=5, reranker=TermOverlapReranker(), rerank_depth=4)
    with pytest.raises(vg.InvalidArgumentError, match="pass reranker= with it"):
        g.hybrid_search("alpha", k=5, rerank_depth=10)
    assert len(g) == before


def test_the_reranker_sees_the_query_and_the_fused_texts_once():
    g = _graph(40)
    calls = []

    def reverse(query, texts):
        calls.append((query, list(texts)))
        return list(range(len(texts)))  # the last fused hit first

    fused = g.hybrid_search("beta theta", k=25)
    res = g.hybrid_search("beta theta", k=4, reranker=reverse, rerank_depth=25)
    assert len(calls) == 1 and calls[0][0] == "beta theta"
    assert calls[0][1] == [g.get_node(key, vector=False)["text"] for key in fused.keys]
    assert res.keys == list(reversed(fused.keys))[:4]


def test_recall_reranks_the_users_memories():
    mem = vg.Memory.open(None, embedder=FakeEmbedder())
    said = ["I play the cello on sundays", "my sister lives in Lyon", "the cello teacher is called Ana",
            "I moved to Lyon in 2019", "sundays are for hiking", "Ana also teaches piano"]
    for text in said:
        mem.remember("u1", text)
    mem.remember("u2", "the cello is in Lyon")
    reranker = TermOverlapReranker()
    fused = mem.recall("u1", "cello teacher Ana", k=6)
    texts = [h.text for h in fused]
    scores = reranker("cello teacher Ana", texts)
    expected = [texts[i] for i in sorted(range(len(texts)), key=lambda i: (-scores[i], i))[:3]]
    got = mem.recall("u1", "cello teacher Ana", k=3, reranker=reranker, rerank_depth=6)
    assert [h.text for h in got] == expected and got[0].text == "the cello teacher is called Ana"
    assert [h.ranks["fused"] for h in got] == [texts.index(t) + 1 for t in expected]
    assert all(h.text in said for h in got)  # never another user's
    with pytest.raises(vg.InvalidArgumentError, match=r"rerank_depth must be an int in \[k, 1000\]"):
        mem.recall("u1", "cello", k=3, reranker=reranker, rerank_depth=2)
    with pytest.raises(vg.InvalidArgumentError):
        mem.recall("u1", "cello", k=3, reranker=lambda q, t: [0.0])


def test_a_reranker_that_empties_its_input_is_still_checked():
    g = _graph(30)
    with pytest.raises(vg.InvalidArgumentError):
        g.hybrid_search("alpha", k=5, reranker=lambda q, texts: (texts.clear(), [])[1])
