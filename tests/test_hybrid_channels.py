"""What each hybrid channel contributes, and the fusion: the graph channel adds only what walks
reach (nothing without edges), the entity channel weighs names by how specific they are, the
convex fusion equals its plain-Python reference, exclude_keys is never returned, and the
HNSW beam (ef) per call moves recall as it should."""

from __future__ import annotations


import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vecgraph as vg
from vecgraph import _core, fusion, hybrid

from conftest import examples


def unit_rows(rng: np.random.Generator, n: int, dim: int) -> np.ndarray:
    v = rng.normal(size=(n, dim)).astype(np.float32)
    return v / np.linalg.norm(v, axis=1, keepdims=True)


def corpus(rng: np.random.Generator, n: int = 300, dim: int = 16, edges: bool = True) -> vg.Graph:
    g = vg.Graph(dim=dim)
    words = ["alpha", "beta", "gamma", "delta", "omega", "sigma", "kappa", "theta"]
    texts = [" ".join(rng.choice(words, size=5)) + f" item{i}" for i in range(n)]
    g.add_nodes([f"n{i}" for i in range(n)], unit_rows(rng, n, dim), texts=texts)
    if edges:
        src = rng.integers(0, n, size=3 * n)
        dst = rng.integers(0, n, size=3 * n)
        g.add_edges([f"n{i}" for i in src], [f"n{i}" for i in dst], rels="link")
    return g


# ------------------------------------------------------------------------------ graph channel


@pytest.mark.parametrize("fusion_name", ["convex", "rrf"])
def test_graph_channel_without_edges_adds_nothing(fusion_name):
    rng = np.random.default_rng(3)
    g = corpus(rng, edges=False)
    for i in range(20):
        q = unit_rows(rng, 1, 16)[0]
        text = f"gamma omega item{i}"
        with_graph = g.hybrid_search(text, vector=q, k=10, fusion=fusion_name)
        without = g.hybrid_search(text, vector=q, k=10, fusion=fusion_name, channels=("dense", "bm25", "entity"))
        assert with_graph.lists["graph"] == []
        assert [(h.key, h.score) for h in with_graph] == [(h.key, h.score) for h in without]


def test_graph_channel_ranks_what_walks_reach_by_seed_strength():
    """A chain a -> b -> c and a node d near the query that links nowhere: the graph channel
    lists b (one hop from the best seed a: a's strength) and c (two hops: half of it), never
    the seeds a and d themselves, and the dense seeds are not voted for twice."""
    g = vg.Graph(dim=3)
    g.add_nodes(["a", "b", "c", "d"], np.array([[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.9, 0.1, 0]], np.float32))
    g.add_edges(["a", "b"], ["b", "c"], rels="next")
    res = g.hybrid_search(vector=np.array([1, 0.05, 0], np.float32), k=4, channels=["dense", "graph"], seeds=2,
                          hops=2)
    assert res.lists["dense"][:2] == ["a", "d"]
    assert res.lists["graph"] == ["b", "c"]
    assert res.channel_scores["graph"] == pytest.approx([1.0, 0.5])  # a: dense min-max 1.0; c: one hop past b
    seeded = g.hybrid_search(vector=np.array([1, 0.05, 0], np.float32), k=4, channels=["graph"], seeds=2, hops=2,
                             graph_seeds=True)
    assert set(seeded.lists["graph"]) == {"a", "b", "c", "d"}
    assert seeded.hits[0].key == "a"


def test_graph_channel_path_and_edges_reach_the_fused_hit():
    g = vg.Graph(dim=3)
    g.add_nodes(["q", "answer"], np.array([[1, 0, 0], [0, 1, 0]], np.float32))
    g.add_edges(["q"], ["answer"], rels="answered_by", texts=["the reply to q"])
    res = g.hybrid_search("the reply", vector=np.array([1, 0, 0], np.float32), k=2, seeds=1)
    hit = next(h for h in res if h.key == "answer")
    assert hit.ranks["graph"] == 1
    assert [(e.src, e.rel, e.dst) for e in hit.path] == [("q", "answered_by", "answer")]
    assert [(e.src, e.dst) for e in res.edges] == [("q", "answer")]


# ------------------------------------------------------------------------------ entity channel


def test_an_ambiguous_name_weighs_less_than_a_unique_one():
    g = vg.Graph(dim=4)
    rng = np.random.default_rng(5)
    keys = ["planet-mercury", "element-mercury", "god-mercury", "planet-venus"]
    filler = [f"f{i}" for i in range(40)]
    g.add_nodes(keys + filler, unit_rows(rng, len(keys) + len(filler), 4),
                texts=["a planet", "a metal", "a god", "a planet"] + [f"filler text {i}" for i in range(40)])
    for key in keys[:3]:
        g.add_aliases(key, ["Mercury"])
    g.add_aliases("planet-venus", ["Venus"])
    res = g.hybrid_search("Mercury and Venus", k=4, channels=["entity"])
    scores = dict(zip(res.lists["entity"], res.channel_scores["entity"]))
    assert res.lists["entity"][0] == "planet-venus"
    assert scores["planet-venus"] == pytest.approx(3 * scores["planet-mercury"])  # idf / holders, holders 1 vs 3
    assert scores["planet-mercury"] == scores["element-mercury"] == scores["god-mercury"]


def test_a_name_that_is_a_common_word_of_the_corpus_does_not_fire_alone():
    g = vg.Graph(dim=4)
    rng = np.random.default_rng(6)
    n = 200
    texts = [f"copy the file number {i}" if i < 50 else f"unrelated words {i}" for i in range(n)]
    keys = ["copy"] + [f"doc{i}" for i in range(1, n)]
    g.add_nodes(keys, unit_rows(rng, n, 4), texts=texts)
    g.add_aliases("doc7", ["zanzibar"])
    # "copy" is in 25% of the texts (above entities.ENTITY_MAX_DF_SHARE): it names nothing alone.
    assert g.hybrid_search("how do I copy a file", k=5, channels=["entity"]).keys == []
    assert g.hybrid_search("copy to zanzibar", k=5, channels=["entity"]).keys == ["doc7"]


def test_entity_keys_false_leaves_keys_out_and_keeps_aliases():
    g = vg.Graph(dim=2)
    g.add_nodes(["get", "orion", "vega"], np.eye(3, 2, dtype=np.float32) + 0.1, labels=["verb", "project", "star"],
                texts=["fetch", "a project", "a star"])
    g.add_aliases("vega", ["Alpha Lyrae"])
    text = "get the orion notes about Alpha Lyrae"
    assert set(g.hybrid_search(text, k=5, channels=["entity"]).keys) == {"get", "orion", "vega"}
    assert g.hybrid_search(text, k=5, channels=["entity"], entity_keys=False).keys == ["vega"]
    assert set(g.hybrid_search(text, k=5, channels=["entity"], entity_keys=["project"]).keys) == {"orion", "vega"}
    with pytest.raises(TypeError, match="entity_keys"):
        g.hybrid_search(text, channels=["entity"], entity_keys="project")


def test_document_frequencies_count_node_texts():
    from vecgraph.text import TextIndex

    with TextIndex() as index:
        index.upsert(["a", "b", "c"], ["open the file", "open a socket", "close it"], lsn=1)
        assert index.document_frequencies(["open", "close", "socket", "nothing"]) == (3, [2, 1, 1, 0])
        with pytest.raises(TypeError, match=r"terms\[0\]"):
            index.document_frequencies([3])


# ------------------------------------------------------------------------------ fusion


def _random_lists(draw_keys, rng):
    lists, scores = {}, {}
    for name in ("dense", "bm25", "graph", "entity"):
        n = int(rng.integers(0, 12))
        keys = [draw_keys[int(i)] for i in rng.integers(0, len(draw_keys), size=n)]
        lists[name] = keys
        # few distinct values, so that ties happen
        scores[name] = [float(x) for x in rng.choice([0.0, 0.25, 0.5, 1.0, 0.3], size=n)]
    return lists, scores


@settings(max_examples=examples(400), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), top_n=st.one_of(st.none(), st.integers(1, 15)))
def test_convex_fusion_equals_its_plain_python_reference(seed, top_n):
    rng = np.random.default_rng(seed)
    keys = ["a", "b", "c", 1, 2, "d", 3, "e"]
    lists, scores = _random_lists(keys, rng)
    weights = {name: float(w) for name, w in zip(lists, rng.choice([0.0, 0.25, 1.0, 2.0], size=4))}
    got = fusion.convex(lists, scores, weights, top_n)
    want = fusion._convex_reference(lists, scores, weights, top_n)
    assert [(f.key, type(f.key), f.score) for f in got] == [(k, type(k), s) for k, s, _ in want]  # bit for bit
    assert [tuple(f.ranks.values()) for f in got] == [r for _, _, r in want]
    # and the sums are what the formula says
    for f in got:
        expected = 0.0
        for name in lists:
            if f.key in lists[name]:
                expected += weights[name] * scores[name][lists[name].index(f.key)]
        assert f.score == pytest.approx(expected)


def test_convex_fusion_refuses_bad_input():
    with pytest.raises(ValueError, match="has 2 keys and 1 scores"):
        fusion.convex({"a": ["x", "y"]}, {"a": [1.0]})
    with pytest.raises(ValueError, match="finite"):
        fusion.convex({"a": ["x"]}, {"a": [float("nan")]})
    with pytest.raises(vg.InvalidArgumentError):
        fusion.convex({"a": ["x"]}, {"a": [1.0]}, {"a": -1.0})
    with pytest.raises(TypeError, match="unhashable"):
        fusion.convex({"a": [["x"]]}, {"a": [1.0]})
    assert fusion.minmax([3.0, 1.0, 2.0]) == [1.0, 0.0, 0.5]
    assert fusion.minmax([2.0, 2.0]) == [1.0, 1.0]
    assert fusion.minmax([-1e308, 1e308, 0.0]) == [0.0, 1.0, 0.5]  # a range past float64 still maps
    with pytest.raises(ValueError, match=r"scores\[0\] must be finite"):
        fusion.minmax([float("nan"), 1.0])
    with pytest.raises(TypeError, match=r"scores\[1\] must be a real number"):
        fusion.minmax([1.0, "2"])
    assert _core.convex_fuse([["x", "y"]], [[0.5, 0.25]], [2.0], -1, False) == [("x", 1.0), ("y", 0.5)]


def test_default_fusion_is_the_convex_combination_of_normalised_channel_scores():
    rng = np.random.default_rng(11)
    g = corpus(rng)
    for i in range(10):
        q = unit_rows(rng, 1, 16)[0]
        res = g.hybrid_search(f"alpha sigma item{i} n{i}", vector=q, k=10)
        normal = hybrid.normalized_scores(res.channel_scores)
        weights = hybrid.DEFAULT_WEIGHTS["convex"]
        want = fusion._convex_reference(res.lists, normal, {c: weights[c] for c in res.channels}, 10)
        assert [(h.key, h.score) for h in res] == [(k, s) for k, s, _ in want]


# ------------------------------------------------------------------------------ exclude_keys


@settings(max_examples=examples(60), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), count=st.integers(1, 40))
def test_exclude_keys_is_never_returned_by_any_channel(seed, count):
    rng = np.random.default_rng(seed)
    g = _shared_graph()
    excluded = {f"n{i}" for i in rng.integers(0, 300, size=count)}
    q = unit_rows(rng, 1, 16)[0]
    text = "alpha beta " + " ".join(sorted(excluded)[:5])
    res = g.hybrid_search(text, vector=q, k=20, exclude_keys=excluded)
    assert not set(res.keys) & excluded
    for keys in res.lists.values():
        assert not set(keys) & excluded
    assert not set(g.search(q, k=20, exclude_keys=sorted(excluded)).keys) & excluded
    for hit in res:
        for edge in hit.path:  # not walked through either
            assert edge.src not in excluded and edge.dst not in excluded


_GRAPH: list = []


def _shared_graph() -> vg.Graph:
    if not _GRAPH:
        _GRAPH.append(corpus(np.random.default_rng(1)))
    return _GRAPH[0]


def test_exclude_keys_are_not_walked_through():
    g = vg.Graph(dim=2)
    g.add_nodes(["start", "bridge", "far"], np.array([[1, 0], [0.7, 0.7], [0, 1]], np.float32))
    g.add_edges(["start", "bridge"], ["bridge", "far"])
    q = np.array([1, 0], np.float32)
    assert g.search(q, k=3, seeds=1, hops=2).keys == ["start", "bridge", "far"]
    assert g.search(q, k=3, seeds=1, hops=2, exclude_keys=["bridge"]).keys == ["start"]
    with pytest.raises(TypeError, match="exclude_keys"):
        g.search(q, exclude_keys="bridge")


# ------------------------------------------------------------------------------ ef per call


def test_ef_per_call_moves_recall_against_exact():
    rng = np.random.default_rng(21)
    n, dim = 6000, 24
    g = vg.Graph(dim=dim, connectivity=8, expansion_add=32, full_scan_max_nodes=0)
    g.add_nodes(list(range(n)), unit_rows(rng, n, dim))
    queries = unit_rows(rng, 60, dim)

    def recall(ef: int) -> float:
        found = 0.0
        for q in queries:
            exact = set(g.search(q, k=10, seeds=10, hops=0, exact=True).keys)
            found += len(exact & set(g.hybrid_search(vector=q, k=10, channels=["dense"], ef=ef).keys)) / 10
        return found / len(queries)

    low, high = recall(10), recall(400)
    assert low < high
    assert high >= 0.97
    assert low < 0.9


def test_graph_open_applies_expansion_search_and_refuses_a_new_connectivity(tmp_path):
    path = tmp_path / "g"
    with vg.Graph.open(path, dim=4, sync="off") as g:
        assert g.stats()["expansion_search"] == vg.storage.DEFAULT_HNSW["expansion_search"] == 128
        g.add_nodes(["a"], np.ones((1, 4), np.float32))
        g.checkpoint()
    with vg.Graph.open(path, expansion_search=300, sync="off") as g:
        assert g.stats()["expansion_search"] == 300
    with vg.Graph.open(path, sync="off") as g:  # the MANIFEST keeps its own value
        assert g.stats()["expansion_search"] == 128
    with pytest.raises(vg.InvalidArgumentError, match="connectivity=24; connectivity=8 was given"):
        vg.Graph.open(path, connectivity=8, sync="off")
    with vg.Graph.open(path, connectivity=24, sync="off") as g:  # the same value is fine
        assert len(g) == 1


# ------------------------------------------------------------------------------ batch


def test_hybrid_search_batch_equals_one_query_at_a_time():
    rng = np.random.default_rng(8)
    g = corpus(rng)
    texts = [f"alpha item{i}" for i in range(12)]
    vectors = unit_rows(rng, 12, 16)
    exclude = [[f"n{i}"] if i % 2 else None for i in range(12)]
    for threads in (1, 2):
        batch = g.hybrid_search_batch(texts, vectors, k=5, exclude_keys=exclude, threads=threads)
        for text, v, ex, got in zip(texts, vectors, exclude, batch):
            want = g.hybrid_search(text, vector=v, k=5, exclude_keys=ex)
            assert [(h.key, h.score) for h in got] == [(h.key, h.score) for h in want]
    with pytest.raises(ValueError, match="exclude_keys has 1 items, expected 12"):
        g.hybrid_search_batch(texts, vectors, exclude_keys=[["n1"]])
    with pytest.raises(ValueError, match="vectors has 11 rows"):
        g.hybrid_search_batch(texts, vectors[:11])
    with pytest.raises(TypeError, match="texts and vectors"):
        g.hybrid_search_batch(texts, vectors, parallel=True)
    bad = vectors.copy()
    bad[7, 3] = np.nan
    with pytest.raises(vg.InvalidArgumentError, match="vectors row 7 holds NaN or inf"):
        g.hybrid_search_batch(texts, bad)
    bad[7] = 0.0
    with pytest.raises(vg.InvalidArgumentError, match="vectors row 7 is all zeros"):
        g.hybrid_search_batch(texts, bad)
