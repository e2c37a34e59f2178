"""vecgraph.kb: hierarchical Leiden communities, RAPTOR clustering and the extractive summaries."""

from __future__ import annotations

import hashlib
import itertools
import math
import re
import sys
import types

import leidenalg
import numpy as np
import pytest
from sklearn.mixture import GaussianMixture
from vecgraph.errors import InvalidArgumentError
from vecgraph.kb import raptor
from vecgraph.kb.communities import centrality, community_key, leiden_levels, level_centrality
from vecgraph.kb.raptor import cluster
from vecgraph.kb.summaries import centroid_summary, community_summary, split_sentences

# ------------------------------------------------------------------------------- shared


def clique_edges(members, weight=1.0):
    src, dst = [], []
    for i, u in enumerate(members):
        for v in members[i + 1 :]:
            src.append(u)
            dst.append(v)
    return src, dst, [weight] * len(src)


def groups(labels):
    """The partition a label array describes, as a set of frozensets (-1 left out)."""
    out: dict = {}
    for v, c in enumerate(labels):
        if c >= 0:
            out.setdefault(int(c), set()).add(v)
    return {frozenset(s) for s in out.values()}


def modularity(n, src, dst, weight, labels):
    """Newman-Girvan modularity of an undirected weighted graph (slow reference)."""
    adj: dict = {}
    for u, v, w in zip(src, dst, weight):
        if u != v:
            key = (min(u, v), max(u, v))
            adj[key] = adj.get(key, 0.0) + w
    total = sum(adj.values())
    degree = [0.0] * n
    inside: dict = {}
    for (u, v), w in adj.items():
        degree[u] += w
        degree[v] += w
        if labels[u] == labels[v]:
            inside[labels[u]] = inside.get(labels[u], 0.0) + w
    per_comm: dict = {}
    for v in range(n):
        per_comm[labels[v]] = per_comm.get(labels[v], 0.0) + degree[v]
    return sum(inside.get(c, 0.0) / total - (d / (2 * total)) ** 2 for c, d in per_comm.items())


def random_graph(n, m, seed):
    rng = np.random.default_rng(seed)
    comm = rng.integers(0, max(1, n // 40), n)
    src = rng.integers(0, n, m)
    same = np.flatnonzero(rng.random(m) < 0.8)
    dst = rng.integers(0, n, m)
    for i in same:  # a partner in the same planted community
        members = np.flatnonzero(comm == comm[src[i]])
        dst[i] = members[rng.integers(0, members.size)]
    return src, dst, rng.random(m) + 0.05


def check_numbering(labels):
    valid = labels[labels >= 0]
    _, first = np.unique(valid, return_index=True)
    assert list(valid[np.sort(first)]) == list(range(len(first)))


# ------------------------------------------------------------------------------- leiden_levels


def test_four_cliques_joined_by_single_edges_are_four_communities():
    cliques = [list(range(i * 8, i * 8 + 8)) for i in range(4)]
    src, dst, w = [], [], []
    for members in cliques:
        s, d, ww = clique_edges(members)
        src += s
        dst += d
        w += ww
    for i in range(4):  # a ring of single edges between the cliques
        src.append(cliques[i][0])
        dst.append(cliques[(i + 1) % 4][-1])
        w.append(1.0)
    levels = leiden_levels(32, np.array(src), np.array(dst), np.array(w))
    assert len(levels) == 1  # no community above max_cluster_size: nothing to split
    assert levels[0].dtype == np.int64 and levels[0].shape == (32,)
    assert groups(levels[0]) == {frozenset(c) for c in cliques}
    assert list(levels[0]) == [v // 8 for v in range(32)]


def clique_of_cliques():
    """6 groups of 4 cliques of 6: cliques weight 1 inside, 0.3 between the cliques of a group
    (every pair), a ring of single edges between groups."""
    src, dst, w = [], [], []
    cliques = []
    for g in range(6):
        base = g * 24
        group_cliques = [list(range(base + c * 6, base + c * 6 + 6)) for c in range(4)]
        cliques += group_cliques
        for members in group_cliques:
            s, d, ww = clique_edges(members)
            src += s
            dst += d
            w += ww
        for a in range(4):
            for b in range(a + 1, 4):
                for u in group_cliques[a]:
                    for v in group_cliques[b]:
                        src.append(u)
                        dst.append(v)
                        w.append(0.3)
        src.append(base)
        dst.append((base + 24 + 5) % 144)
        w.append(1.0)
    return np.array(src), np.array(dst), np.array(w), cliques


def test_clique_of_cliques_splits_at_level_one():
    src, dst, w, cliques = clique_of_cliques()
    levels = leiden_levels(144, src, dst, w, max_cluster_size=10)
    assert len(levels) == 2
    assert groups(levels[0]) == {frozenset(range(g * 24, g * 24 + 24)) for g in range(6)}
    assert groups(levels[1]) == {frozenset(c) for c in cliques}
    assert list(levels[1]) == [v // 6 for v in range(144)]
    # A size limit above the groups keeps level 0 only; max_levels=1 stops there too.
    assert len(leiden_levels(144, src, dst, w, max_cluster_size=24)) == 1
    one = leiden_levels(144, src, dst, w, max_cluster_size=10, max_levels=1)
    assert len(one) == 1 and np.array_equal(one[0], levels[0])


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_levels_nest_and_small_communities_carry_down(seed):
    n = 400
    src, dst, w = random_graph(n, 1200, seed)
    levels = leiden_levels(n, src, dst, w, max_levels=4, max_cluster_size=12, seed=seed)
    assert 2 <= len(levels) <= 4
    for labels in levels:
        assert labels.dtype == np.int64 and labels.shape == (n,)
        check_numbering(labels)
        assert np.array_equal(labels < 0, levels[0] < 0)
    for upper, lower in itertools.pairwise(levels):
        for comm in groups(lower):
            assert len({int(upper[v]) for v in comm}) == 1  # inside one community above
        for comm in groups(upper):
            if len(comm) <= 12:
                assert comm in groups(lower)  # carried down unchanged
        assert groups(lower) != groups(upper)  # a level that changes nothing is not returned


def test_level_zero_matches_leidenalg_quality():
    n = 600
    src, dst, w = random_graph(n, 2400, 7)
    ours = leiden_levels(n, src, dst, w, max_levels=1)[0]
    import igraph

    pairs: dict = {}
    for u, v, x in zip(src, dst, w):
        if u != v:
            key = (min(u, v), max(u, v))
            pairs[key] = pairs.get(key, 0.0) + x
    graph = igraph.Graph(n=n, edges=list(pairs))
    reference = leidenalg.find_partition(
        graph,
        leidenalg.RBConfigurationVertexPartition,
        weights=list(pairs.values()),
        seed=42,
        n_iterations=-1,
    )
    labels = [int(c) if c >= 0 else -1 - v for v, c in enumerate(ours)]  # isolated: singletons
    ours_q = modularity(n, src, dst, w, labels)
    ref_q = modularity(n, src, dst, w, reference.membership)
    assert ours_q > 0.5
    assert ours_q >= ref_q - 0.01


def test_resolution_gives_smaller_communities():
    n = 400
    src, dst, w = random_graph(n, 1600, 3)
    coarse = leiden_levels(n, src, dst, w, max_levels=1, resolution=0.5)[0]
    fine = leiden_levels(n, src, dst, w, max_levels=1, resolution=4.0)[0]
    assert fine.max() > coarse.max()


def test_isolated_vertices_get_minus_one():
    # 0-1-2 triangle, 3 isolated, 4 only a self-loop, 5-6 an edge of weight 0, 7-8 an edge.
    src = np.array([0, 1, 2, 4, 5, 7])
    dst = np.array([1, 2, 0, 4, 6, 8])
    w = np.array([1.0, 1.0, 1.0, 5.0, 0.0, 2.0])
    levels = leiden_levels(9, src, dst, w, max_cluster_size=1)
    for labels in levels:
        assert list(labels[[3, 4, 5, 6]]) == [-1, -1, -1, -1]
    assert list(levels[0]) == [0, 0, 0, -1, -1, -1, -1, 1, 1]
    assert [
        list(x) for x in leiden_levels(3, np.array([], dtype=np.int64), np.array([], dtype=np.int64))
    ] == [[-1, -1, -1]]
    assert [list(x) for x in leiden_levels(0, np.zeros(0, np.int64), np.zeros(0, np.int64))] == [[]]


def test_duplicate_pairs_are_summed_and_runs_are_deterministic():
    n = 300
    src, dst, w = random_graph(n, 900, 11)
    a = leiden_levels(n, src, dst, w, max_cluster_size=10, seed=5)
    b = leiden_levels(n, src, dst, w, max_cluster_size=10, seed=5)
    assert len(a) == len(b) and all(np.array_equal(x, y) for x, y in zip(a, b))
    # Each edge given as two halves, one of them reversed: the same graph, the same levels.
    src2 = np.concatenate([src, dst])
    dst2 = np.concatenate([dst, src])
    c = leiden_levels(n, src2, dst2, np.concatenate([w / 2, w / 2]), max_cluster_size=10, seed=5)
    assert len(a) == len(c) and all(np.array_equal(x, y) for x, y in zip(a, c))
    # weight=None is weight 1.0 each.
    d = leiden_levels(n, src, dst, None, seed=5)
    e = leiden_levels(n, src, dst, np.ones(src.size), seed=5)
    assert all(np.array_equal(x, y) for x, y in zip(d, e))


def test_leiden_levels_argument_errors():
    s, d = np.array([0, 1]), np.array([1, 2])
    with pytest.raises(InvalidArgumentError, match="same length"):
        leiden_levels(3, s, np.array([1]))
    with pytest.raises(InvalidArgumentError, match=r"\[0, 3\), got 3"):
        leiden_levels(3, s, np.array([1, 3]))
    with pytest.raises(InvalidArgumentError, match=r"got -1"):
        leiden_levels(3, np.array([-1, 0]), d)
    with pytest.raises(InvalidArgumentError, match="weight must be >= 0"):
        leiden_levels(3, s, d, np.array([1.0, -0.5]))
    with pytest.raises(InvalidArgumentError, match="finite"):
        leiden_levels(3, s, d, np.array([1.0, np.nan]))
    with pytest.raises(InvalidArgumentError, match="one weight per edge"):
        leiden_levels(3, s, d, np.array([1.0]))
    with pytest.raises(TypeError, match="integer vertex indices"):
        leiden_levels(3, np.array([0.0, 1.0]), d)
    with pytest.raises(TypeError, match="n must be an int"):
        leiden_levels(3.0, s, d)
    with pytest.raises(InvalidArgumentError, match="n must be >= 0"):
        leiden_levels(-1, s[:0], d[:0])
    with pytest.raises(InvalidArgumentError, match="max_levels must be >= 1"):
        leiden_levels(3, s, d, max_levels=0)
    with pytest.raises(InvalidArgumentError, match="max_cluster_size must be >= 1"):
        leiden_levels(3, s, d, max_cluster_size=0)
    with pytest.raises(InvalidArgumentError, match="resolution"):
        leiden_levels(3, s, d, resolution=0.0)
    with pytest.raises(TypeError, match="resolution"):
        leiden_levels(3, s, d, resolution="1")
    with pytest.raises(InvalidArgumentError, match="2-D|1-D"):
        leiden_levels(3, s.reshape(1, 2), d.reshape(1, 2))


# ------------------------------------------------------------------------------- key, centrality


def test_community_key_is_stable_and_depends_on_members_only():
    key = community_key(1, ["b", "a", "c"])
    expected = hashlib.blake2b(
        "\n".join(sorted(repr(k) for k in ["a", "b", "c"])).encode(), digest_size=8
    ).hexdigest()
    assert key == f"community:1:{expected}"
    assert re.fullmatch(r"community:1:[0-9a-f]{16}", key)
    assert community_key(1, ("c", "a", "b", "a")) == key  # order and repeats do not matter
    assert community_key(1, {"a", "b", "c"}) == key
    assert community_key(2, ["a", "b", "c"]) != key
    assert community_key(1, ["a", "b"]) != key
    assert community_key(0, [3, 1, 2]) == community_key(0, np.array([1, 2, 3]))
    assert community_key(0, [1]) != community_key(0, ["1"])
    with pytest.raises(InvalidArgumentError, match="at least one"):
        community_key(0, [])
    with pytest.raises(TypeError, match="iterable of keys"):
        community_key(0, "abc")
    with pytest.raises(InvalidArgumentError, match="level must be >= 0"):
        community_key(-1, ["a"])


def test_centrality_against_a_loop():
    rng = np.random.default_rng(4)
    n = 50
    src = rng.integers(0, n, 400)
    dst = rng.integers(0, n, 400)
    w = rng.random(400)
    members = np.array([3, 7, 8, 20, 21, 33, 40, 41, 49])
    got = centrality(n, src, dst, w, members)
    member_set = set(members.tolist())
    for i, m in enumerate(members):
        expected = sum(x for u, v, x in zip(src, dst, w) if u != v and {u, v} <= member_set and m in (u, v))
        assert got[i] == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert got.dtype == np.float64 and got.shape == members.shape
    labels = np.full(n, -1)
    labels[members] = 0
    labels[[0, 1, 2, 4, 5]] = 1
    whole = level_centrality(n, src, dst, w, labels)
    assert np.allclose(whole[members], got, rtol=1e-12, atol=1e-12)
    assert np.allclose(
        whole[[0, 1, 2, 4, 5]], centrality(n, src, dst, w, [0, 1, 2, 4, 5]), rtol=1e-12, atol=1e-12
    )
    assert (whole[labels < 0] == 0).all()
    with pytest.raises(InvalidArgumentError, match="length n"):
        level_centrality(n, src, dst, w, labels[:-1])
    assert list(centrality(3, np.array([0, 0]), np.array([1, 1]), None, [0, 1, 2])) == [2.0, 2.0, 0.0]


# ------------------------------------------------------------------------------- raptor


def check_clusters(clusters, n, partition):
    assert all(c.dtype == np.int64 and c.size > 0 for c in clusters)
    assert all(np.array_equal(c, np.unique(c)) for c in clusters)
    everything = np.concatenate(clusters)
    assert set(everything.tolist()) == set(range(n))
    if partition:
        assert everything.size == n


def test_cluster_hard_is_a_partition_with_sizes_within_limit():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(500, 32)).astype(np.float32)
    clusters = cluster(x, max_cluster_size=10)
    check_clusters(clusters, 500, partition=True)
    assert max(c.size for c in clusters) <= 10
    firsts = [int(c[0]) for c in clusters]
    assert firsts == sorted(firsts)


def test_cluster_recovers_well_separated_blobs():
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(12, 32)) * 5
    labels = np.repeat(np.arange(12), 8)
    x = (centers[labels] + rng.normal(size=(96, 32)) * 0.3).astype(np.float32)
    clusters = cluster(x, max_cluster_size=10)
    check_clusters(clusters, 96, partition=True)
    assert sorted(tuple(c) for c in clusters) == [tuple(range(b * 8, b * 8 + 8)) for b in range(12)]
    # Blobs of 30 with a limit of 10: split further, each piece inside one blob.
    labels = np.repeat(np.arange(5), 30)
    x = (centers[:5][labels] + rng.normal(size=(150, 32)) * 0.3).astype(np.float32)
    clusters = cluster(x, max_cluster_size=10)
    check_clusters(clusters, 150, partition=True)
    assert all(c.size <= 10 and len(set(labels[c])) == 1 for c in clusters)


def test_cluster_soft_threshold():
    rng = np.random.default_rng(5)
    centers = np.array([[0, 0, 5], [2.5, 0, 5], [0, 2.5, 5], [2.5, 2.5, 5.0]])
    x = (centers[rng.integers(0, 4, 400)] + rng.normal(size=(400, 3)) * 0.8).astype(np.float32)
    hard = cluster(x, max_cluster_size=200)
    check_clusters(hard, 400, partition=True)
    soft = cluster(x, max_cluster_size=200, threshold=0.1)
    check_clusters(soft, 400, partition=False)
    counts = np.bincount(np.concatenate(soft), minlength=400)
    assert counts.min() >= 1 and (counts > 1).sum() > 0  # some rows in two clusters or more
    stricter = cluster(x, max_cluster_size=200, threshold=0.3)
    assert np.concatenate(stricter).size < np.concatenate(soft).size
    certain = cluster(x, max_cluster_size=200, threshold=1.0)  # only the most probable: hard
    assert len(certain) == len(hard) and all(np.array_equal(a, b) for a, b in zip(certain, hard))


def test_cluster_is_deterministic():
    rng = np.random.default_rng(9)
    x = rng.normal(size=(2500, 48)).astype(np.float32)  # more rows than the BIC sample
    a = cluster(x, max_cluster_size=100, seed=3)
    b = cluster(x, max_cluster_size=100, seed=3)
    assert len(a) == len(b) and all(np.array_equal(p, q) for p, q in zip(a, b))
    check_clusters(a, 2500, partition=True)


def test_cluster_small_and_degenerate_inputs():
    x = np.random.default_rng(1).normal(size=(10, 5)).astype(np.float32)
    assert [list(c) for c in cluster(x, max_cluster_size=10)] == [list(range(10))]
    assert cluster(np.zeros((0, 5), np.float32)) == []
    # Identical rows cannot be told apart: one cluster, over the limit.
    same = cluster(np.ones((30, 8), np.float32), max_cluster_size=10)
    assert [list(c) for c in same] == [list(range(30))]
    eleven = cluster(np.random.default_rng(2).normal(size=(11, 4)), max_cluster_size=10)
    check_clusters(eleven, 11, partition=True)
    assert len(eleven) >= 2


def test_bic_one_matches_scikit_learn():
    z = np.random.default_rng(6).normal(size=(60, 5)) * np.array([1.0, 2.0, 3.0, 0.1, 0.01])
    expected = GaussianMixture(1, covariance_type="diag").fit(z).bic(z)
    assert raptor._bic_one(z) == pytest.approx(expected, rel=1e-9)


def test_cluster_umap_reducer(monkeypatch):
    calls = []

    class FakeUMAP:
        def __init__(self, n_neighbors, n_components, metric, random_state):
            calls.append((n_neighbors, n_components, metric, random_state))
            self.n_components = n_components

        def fit_transform(self, x):
            return x[:, : self.n_components] * 3.0

    monkeypatch.setitem(sys.modules, "umap", types.SimpleNamespace(UMAP=FakeUMAP))
    rng = np.random.default_rng(3)
    centers = rng.normal(size=(4, 6)) * 5
    x = (centers[np.repeat(np.arange(4), 10)] + rng.normal(size=(40, 6)) * 0.1).astype(np.float32)
    clusters = cluster(x, max_cluster_size=10, reducer="umap", reduce_dim=4, seed=7)
    check_clusters(clusters, 40, partition=True)
    assert calls[0] == (int(math.sqrt(39)), 4, "cosine", 7)
    monkeypatch.setitem(sys.modules, "umap", None)  # not installed
    with pytest.raises(ImportError, match="umap-learn"):
        cluster(x, reducer="umap")


def test_cluster_argument_errors():
    x = np.zeros((20, 4), np.float32)
    with pytest.raises(InvalidArgumentError, match="2-D"):
        cluster(np.zeros(5))
    bad = x.copy()
    bad[3, 1] = np.nan
    with pytest.raises(InvalidArgumentError, match="row 3"):
        cluster(bad)
    with pytest.raises(InvalidArgumentError, match=r"\(0, 1\]"):
        cluster(x, threshold=0.0)
    with pytest.raises(InvalidArgumentError, match=r"\(0, 1\]"):
        cluster(x, threshold=1.5)
    with pytest.raises(TypeError, match="threshold"):
        cluster(x, threshold="0.1")
    with pytest.raises(InvalidArgumentError, match="reducer"):
        cluster(x, reducer="tsne")
    with pytest.raises(InvalidArgumentError, match="max_cluster_size must be >= 1"):
        cluster(x, max_cluster_size=0)
    with pytest.raises(TypeError, match="real numbers"):
        cluster(np.array([["a", "b"]]))


# ------------------------------------------------------------------------------- sentences


def test_split_sentences_english():
    text = (
        'Hello world. This is Dr. Smith, e.g. a doctor! Is it?  Yes... "Quoted." Pi is 3.14 '
        "roughly. J. K. Rowling wrote it. See http://x.test/a?b=1 now.\n\nNew paragraph\nwith a break"
    )
    assert split_sentences(text) == [
        "Hello world.",
        "This is Dr. Smith, e.g. a doctor!",
        "Is it?",
        "Yes...",
        '"Quoted."',
        "Pi is 3.14 roughly.",
        "J. K. Rowling wrote it.",
        "See http://x.test/a?b=1 now.",
        "New paragraph with a break",
    ]
    assert split_sentences("") == [] and split_sentences("   \n\n ") == []
    assert split_sentences("no end") == ["no end"]
    with pytest.raises(TypeError, match="str"):
        split_sentences(None)


def test_split_sentences_chinese_and_mixed():
    assert split_sentences("我爱北京。你呢？“好的！”他说。天气很好") == [
        "我爱北京。",
        "你呢？",
        "“好的！”",
        "他说。",
        "天气很好",
    ]
    assert split_sentences("混合中文句子。English after. 问号?后面！！") == [
        "混合中文句子。",
        "English after.",
        "问号?",
        "后面！！",
    ]


# ------------------------------------------------------------------------------- centroid_summary


def words(text):
    return len(text.split())


def reference_centroid_summary(sentences, vectors, max_tokens, count_tokens, threshold):
    m = len(sentences)
    unit = []
    for row in vectors:
        norm = math.sqrt(sum(float(x) * float(x) for x in row))
        unit.append([float(x) / norm if norm > 0 else 0.0 for x in row])
    centroid = [sum(u[j] for u in unit) / m for j in range(len(unit[0]))]
    length = math.sqrt(sum(c * c for c in centroid))
    scores = [sum(a * b for a, b in zip(u, centroid)) / length if length > 0 else 0.0 for u in unit]
    order = sorted(range(m), key=lambda i: (-scores[i], i))
    taken, used = [], 0
    for i in order:
        if not sentences[i].strip():
            continue
        if any(sum(a * b for a, b in zip(unit[i], unit[j])) >= threshold for j in taken):
            continue
        if used + count_tokens(sentences[i]) <= max_tokens:
            taken.append(i)
            used += count_tokens(sentences[i])
    return " ".join(sentences[i] for i in sorted(taken)), sorted(taken)


@pytest.mark.parametrize("seed", range(6))
def test_centroid_summary_against_a_loop(seed):
    rng = np.random.default_rng(seed)
    m = 40
    vocab = ["alpha", "beta", "gamma", "delta", "eps", "zeta", "eta", "theta"]
    sentences = [f"s{i:02d} " + " ".join(rng.choice(vocab, rng.integers(0, 12))) + "." for i in range(m)]
    vectors = rng.normal(size=(m, 8)) + np.array([1.0, 0.5, 0, 0, 0, 0, 0, 0])
    vectors[5] = vectors[4] * 2.0  # a duplicate direction
    vectors[7] = 0.0  # a zero vector
    for budget in (0, 7, 30, 120, 10_000):
        got = centroid_summary(
            sentences,
            vectors.astype(np.float32),
            max_tokens=budget,
            count_tokens=words,
            max_sentences_similarity=0.9,
        )
        expected, taken = reference_centroid_summary(
            sentences, vectors.astype(np.float32), budget, words, 0.9
        )
        assert got == expected
        assert words(got) <= budget
        assert not (4 in taken and 5 in taken)
        positions = [got.find(sentences[i]) for i in taken]
        assert positions == sorted(positions)  # original order


def test_centroid_summary_small_example_and_errors():
    sentences = ["Cats purr.", "Dogs bark loudly at night.", "Cats purr softly.", "Stocks fell."]
    vectors = np.array([[1.0, 0.1, 0], [0.8, 0.6, 0], [1.0, 0.1, 0], [0, 0, 1.0]])
    out = centroid_summary(sentences, vectors, max_tokens=7, count_tokens=words)
    # Ranking: 0 and 2 tie (0 first; 2 its duplicate, skipped), then 1 (5 words: fits), then 3.
    assert out == "Cats purr. Dogs bark loudly at night."
    assert centroid_summary(sentences, vectors, max_tokens=3, count_tokens=words) == "Cats purr."
    assert centroid_summary([], np.zeros((0, 3)), max_tokens=5, count_tokens=words) == ""
    with pytest.raises(InvalidArgumentError, match="one row per sentence"):
        centroid_summary(sentences, vectors[:3], max_tokens=5, count_tokens=words)
    with pytest.raises(InvalidArgumentError, match="max_tokens must be >= 0"):
        centroid_summary(sentences, vectors, max_tokens=-1, count_tokens=words)
    with pytest.raises(TypeError, match="count_tokens"):
        centroid_summary(sentences, vectors, max_tokens=5, count_tokens=None)
    with pytest.raises(InvalidArgumentError, match="int >= 0"):
        centroid_summary(sentences, vectors, max_tokens=5, count_tokens=lambda s: -1)
    with pytest.raises(InvalidArgumentError, match=r"\(0, 1\]"):
        centroid_summary(sentences, vectors, max_tokens=5, count_tokens=words, max_sentences_similarity=0)
    with pytest.raises(TypeError, match=r"sentences\[1\]"):
        centroid_summary(["a", 2], vectors[:2], max_tokens=5, count_tokens=words)


# ------------------------------------------------------------------------------- community_summary


def test_community_summary_cover_order():
    entities = [("Acme", 5.0), ("Bob", 3.0), ("Carol", 2.0), ("Dana", 1.0)]
    sentences = [
        "Carol met Dana.",  # 0: Carol+Dana = 3
        "Acme hired Bob.",  # 1: Acme+Bob = 8  -> first
        "Annual report of acmeCorp.",  # 2: no whole-word mention
        "Bob and Carol and Dana left ACME.",  # 3: 11 first; then nothing new
        "Dana likes Carol.",  # 4: Carol+Dana = 3 (tie with 0, later)
        "Bob, Bob and Bob.",  # 5: fill: 3 * 3 = 9
        "Nothing here.",  # 6
    ]
    out = community_summary("Acme and friends", entities, sentences, max_tokens=100, count_tokens=words)
    # Cover: 3 covers everything at once; fill by weighted mention counts: 5 (9), 1 (8), 0 (3), 4 (3).
    assert out.split("\n") == [
        "Acme and friends",
        "Entities: Acme, Bob, Carol, Dana",
        (
            "Bob and Carol and Dana left ACME. Bob, Bob and Bob. Acme hired Bob. Carol met Dana. "
            "Dana likes Carol."
        ),
    ]
    sentences[3] = "Bob and Carol left."  # now: 1 (Acme+Bob 8), then 0 (Dana 1; 0 before 4), then fill
    out = community_summary("", entities, sentences, max_tokens=100, count_tokens=words, max_listed=2)
    assert out.split("\n") == [
        "Entities: Acme, Bob",
        "Acme hired Bob. Carol met Dana. Bob, Bob and Bob. Bob and Carol left. Dana likes Carol.",
    ]


def test_community_summary_budget_and_cjk():
    entities = [("北京", 2.0), ("Acme", 1.0)]
    sentences = ["我爱北京天安门。", "Acme opened an office.", "Acme and 北京 partner today."]
    for budget in range(16):
        out = community_summary("Title here", entities, sentences, max_tokens=budget, count_tokens=words)
        assert words(out) <= budget
    out = community_summary("T", entities, sentences, max_tokens=100, count_tokens=words)
    assert out.split("\n") == [
        "T",
        "Entities: 北京, Acme",
        "Acme and 北京 partner today. 我爱北京天安门。 Acme opened an office.",
    ]
    # Budget 4: the title (1 word) and the entity line (3) fill it.
    assert (
        community_summary("T", entities, sentences, max_tokens=4, count_tokens=words)
        == "T\nEntities: 北京, Acme"
    )
    assert (
        community_summary("T", entities, sentences, max_tokens=3, count_tokens=words) == "T\nEntities: 北京"
    )
    with pytest.raises(InvalidArgumentError, match="centrality"):
        community_summary("T", [("a", -1.0)], [], max_tokens=5, count_tokens=words)
    with pytest.raises(InvalidArgumentError, match="blank"):
        community_summary("T", [(" ", 1.0)], [], max_tokens=5, count_tokens=words)
    with pytest.raises(TypeError, match="pair"):
        community_summary("T", ["a"], [], max_tokens=5, count_tokens=words)
    with pytest.raises(TypeError, match="title"):
        community_summary(None, [], [], max_tokens=5, count_tokens=words)


def joins_cost(text: str) -> int:
    """A token counter on which joining costs more than the parts: each space counts twice."""
    return len(text.split()) + 2 * text.count(" ")


def test_summaries_keep_the_budget_when_joining_costs_tokens_and_never_repeat_a_sentence():
    entities = [("Acme", 3.0), ("Bob", 2.0), ("Carol", 1.0)]
    sentences = ["Acme hired Bob.", "Carol left Acme.", "Acme hired Bob.", "Bob met Carol.", "Bob sold Acme."]
    for budget in range(40):
        out = community_summary("Acme", entities, sentences, max_tokens=budget, count_tokens=joins_cost)
        assert joins_cost(out) <= budget
        body = out.split("\n")[-1] if budget >= 10 else ""
        assert body.count("Acme hired Bob.") <= 1
    # with room for all, each distinct sentence once: the cover (Acme+Bob, then Carol: the first of
    # two ties), then the rest by weighted mentions (Bob sold Acme 5, Bob met Carol 3)
    out = community_summary("Acme", entities, sentences, max_tokens=200, count_tokens=joins_cost)
    assert out.split("\n") == [
        "Acme",
        "Entities: Acme, Bob, Carol",
        "Acme hired Bob. Carol left Acme. Bob sold Acme. Bob met Carol.",
    ]
    vectors = np.eye(5)
    for budget in range(30):
        out = centroid_summary(sentences, vectors, max_tokens=budget, count_tokens=joins_cost)
        assert joins_cost(out) <= budget
    # all equally central (orthogonal rows): document order; "Acme hired Bob." costs 3 + 2 * 2 = 7
    assert centroid_summary(sentences, vectors, max_tokens=6, count_tokens=joins_cost) == ""
    assert centroid_summary(sentences, vectors, max_tokens=7, count_tokens=joins_cost) == "Acme hired Bob."
