"""vecgraph search == the NumPy reference (tests/reference.py), on random graphs (hypothesis)
and on named corner cases."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import vecgraph as vg
from conftest import examples, TESTS_DIR, GraphSpec, assert_same, build_graph, edge_tuples
from reference import build_model, reference_search, score_all

LABELS = ["", "a", "b"]
TENANTS = ["", "x", "y"]
RELS = ["", "r", "s", "t"]
WEIGHTS = [0.0, -0.0, 0.5, 1.0, 2.0, -1.5]
DIRECTIONS = ["out", "in", "both"]

key_strategy = st.one_of(
    st.integers(min_value=-(2**63), max_value=2**63 - 1),
    st.integers(min_value=-3, max_value=40),
    st.text(max_size=4),
    st.sampled_from(["1", "0", "café", "cafe\u0301", "", "a\"b\\c", "\U0001f600"]),
)


def _fix_zero_rows(vectors: np.ndarray, metric: str) -> np.ndarray:
    """cos rejects all-zero vectors (tested in test_bad_input); nudge such rows."""
    if metric == "cos" and len(vectors):
        zero = ~np.any(vectors != 0, axis=1)
        vectors[zero, 0] = 1.0
    return vectors


def vectors_strategy(n: int, dim: int, mode: str):
    """(n, dim) float32 vectors: "grid" (small integers: many exact score ties), "floats" (hypothesis
    floats: duplicates and special values), or "normal" (seeded Gaussian: distinct vectors)."""
    if mode == "normal":
        return st.integers(0, 2**32 - 1).map(
            lambda seed: np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float32))
    if mode == "grid":
        elements = st.integers(min_value=-2, max_value=2).map(float)
    else:
        # Values below 1e-30 become 0: a non-zero ip / l2 row whose largest |value| is under
        # 1.5e-36 is refused (test_bad_input covers that), and a row of such values would be.
        elements = st.floats(min_value=-8, max_value=8, width=32, allow_nan=False, allow_infinity=False).map(
            lambda v: v if abs(v) >= 1e-30 else 0.0 * v)
    return hnp.arrays(np.float32, (n, dim), elements=elements)


VECTOR_MODES = ["grid", "floats", "normal"]


@st.composite
def graph_specs(draw, max_nodes: int = 60, dims=(1, 3, 8, 17, 97), metrics=("cos", "ip", "l2"), modes=VECTOR_MODES):
    dim = draw(st.sampled_from(dims))
    metric = draw(st.sampled_from(metrics))
    n = draw(st.integers(min_value=0, max_value=max_nodes))
    keys = draw(st.lists(key_strategy, min_size=n, max_size=n, unique_by=lambda k: (type(k), k)))
    mode = draw(st.sampled_from(modes))
    vectors = _fix_zero_rows(draw(vectors_strategy(n, dim, mode)), metric)
    labels = draw(st.lists(st.sampled_from(LABELS), min_size=n, max_size=n))
    tenants = draw(st.lists(st.sampled_from(TENANTS), min_size=n, max_size=n))
    ts = draw(st.lists(st.integers(min_value=0, max_value=5), min_size=n, max_size=n))
    edges = []
    if n:
        hubs = draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=2))
        node = st.one_of(st.integers(0, n - 1), st.sampled_from(hubs))
        weight = st.one_of(st.sampled_from(WEIGHTS), st.floats(-3, 3, width=32))
        rel = st.sampled_from(RELS)
        count = draw(st.integers(min_value=0, max_value=3 * n + 10))
        for _ in range(count):
            kind = draw(st.sampled_from(["plain"] * 6 + ["self", "hub_self", "parallel", "reverse"]))
            s = draw(st.sampled_from(hubs)) if kind == "hub_self" else draw(node)
            d = s if kind in ("self", "hub_self") else draw(node)
            edges.append((keys[s], keys[d], draw(rel), float(np.float32(draw(weight)))))
            if kind == "parallel":  # the same pair again, maybe with another rel / weight
                edges.append((keys[s], keys[d], draw(rel), float(np.float32(draw(weight)))))
            elif kind == "reverse":  # both directions: under "both" the neighbour appears twice
                edges.append((keys[d], keys[s], draw(rel), float(np.float32(draw(weight)))))
    return GraphSpec(dim=dim, metric=metric, keys=keys, vectors=vectors, labels=labels, tenants=tenants, ts=ts,
                     edges=edges)


def names_filter(pool):
    """None, or a subset of the pool, possibly with names the graph has never seen."""
    return st.one_of(st.none(), st.lists(st.sampled_from(pool + ["nope", "zz"]), max_size=3))


@st.composite
def search_params(draw):
    ts_min = draw(st.one_of(st.none(), st.integers(0, 5)))
    ts_max = draw(st.one_of(st.none(), st.integers(0 if ts_min is None else ts_min, 6)))
    return dict(
        k=draw(st.integers(1, 15)),
        seeds=draw(st.integers(1, 10)),
        hops=draw(st.integers(0, 3)),
        max_visited=draw(st.integers(1, 30)),
        direction=draw(st.sampled_from(DIRECTIONS)),
        rels=draw(names_filter(RELS[1:])) if draw(st.booleans()) else None,
        labels=draw(names_filter(LABELS)) if draw(st.integers(0, 3)) == 0 else None,
        tenants=draw(names_filter(TENANTS)) if draw(st.integers(0, 3)) == 0 else None,
        ts_min=ts_min,
        ts_max=ts_max,
        max_fanout=draw(st.integers(1, 5)),
        hop_decay=draw(st.sampled_from([1.0, 0.5])),
    )


def query_strategy(dim: int, metric: str, mode: str):
    return vectors_strategy(1, dim, mode).map(lambda a: _fix_zero_rows(a, metric)[0])


# ----------------------------------------------------------------------------- exact path


@settings(max_examples=examples(700), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), spec=graph_specs())
def test_exact_search_equals_reference(data, spec):
    node_split = data.draw(st.integers(0, len(spec.keys)), label="node_split")
    edge_split = data.draw(st.integers(0, len(spec.edges)), label="edge_split")
    g, model = build_graph(spec, node_split=node_split, edge_split=edge_split)
    queries = []
    for _ in range(data.draw(st.integers(1, 3), label="count_queries")):
        mode = data.draw(st.sampled_from(VECTOR_MODES), label="query_mode")
        queries.append(data.draw(query_strategy(spec.dim, spec.metric, mode), label="query"))
    params = data.draw(search_params(), label="params")
    results = []
    for q in queries:
        res = g.search(q, exact=True, **params)
        assert_same(res, reference_search(model, q, **params))
        assert len(res) <= params["k"]
        results.append(res)
    # search_batch (exact) == search, query by query, on 1 and 2 threads.
    threads = data.draw(st.sampled_from([1, 2]), label="threads")
    batch = g.search_batch(np.stack(queries), exact=True, threads=threads, **params)
    assert len(batch) == len(queries)
    for got, want in zip(batch, results):
        assert_same(got, want)


# ----------------------------------------------------------------------------- HNSW path


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), spec=graph_specs(dims=(3, 8, 17), modes=["normal"]))
def test_hnsw_search_equals_reference_on_small_graphs(data, spec):
    # <= 60 distinct vectors, default connectivity (24: 48 links per node on the base level) and
    # ef >= n: the HNSW seed search is exhaustive, so the whole search must equal the reference.
    # (Dozens of identical vectors can leave HNSW's graph disconnected; "normal" vectors are distinct.)
    g, model = build_graph(spec)
    n = len(spec.keys)
    ef = data.draw(st.one_of(st.none(), st.integers(max(n, 1), 100)), label="ef")
    q = data.draw(query_strategy(spec.dim, spec.metric, "normal"), label="query")
    params = data.draw(search_params(), label="params")
    # Seeds are only well defined when no two admitted nodes tie at the seed boundary.
    ref_all = reference_search(model, q, **{**params, "k": n + 1, "seeds": n + 1, "hops": 0, "max_visited": n + 1})
    s = params["seeds"]
    assume(len(ref_all.scores) <= s or ref_all.scores[s - 1] != ref_all.scores[s])
    res = g.search(q, ef=ef, **params)
    ref = reference_search(model, q, **params)
    assert res.keys == ref.keys
    assert_same(res, ref)
    batch = g.search_batch(q[None], ef=ef, threads=2, **params)
    assert_same(batch[0], ref)


# ----------------------------------------------------------------------------- named cases


def _chain_spec(n: int, metric: str = "ip") -> GraphSpec:
    """n nodes 0..n-1 on a chain 0 -> 1 -> ... -> n-1, vectors with decreasing first component."""
    vectors = np.zeros((n, 2), dtype=np.float32)
    vectors[:, 0] = np.linspace(1.0, 0.1, n) if n > 1 else 1.0
    vectors[:, 1] = 0.25
    return GraphSpec(dim=2, metric=metric, keys=list(range(n)), vectors=vectors, labels=[""] * n,
                     tenants=[""] * n, ts=[0] * n, edges=[(i, i + 1, "next", 1.0) for i in range(n - 1)])


@pytest.mark.parametrize("metric", ["cos", "ip", "l2"])
def test_empty_graph_gives_empty_result(metric):
    g = vg.Graph(3, metric)
    q = np.array([1.0, 0.0, 0.0], np.float32)
    for exact in (True, False):
        res = g.search(q, k=5, exact=exact)
        assert len(res) == 0
        assert res.keys == []
        assert res.scores.shape == (0,) and res.scores.dtype == np.float32
        assert res.hops.shape == (0,)
        assert res.paths == []
        assert res.count_seeds == 0 and res.count_visited == 0
        assert list(res) == []
    batch = g.search_batch(np.stack([q, q]), k=5, exact=True)
    assert [len(r) for r in batch] == [0, 0]
    empty_model = build_model(g, [], [], [], [], [])
    assert reference_search(empty_model, q, k=5).keys == []


def test_isolated_nodes_are_only_seeds():
    spec = _chain_spec(6)
    spec.edges = []
    g, model = build_graph(spec)
    q = np.array([1.0, 0.25], np.float32)
    res = g.search(q, k=10, seeds=3, hops=3, exact=True)
    ref = reference_search(model, q, k=10, seeds=3, hops=3)
    assert_same(res, ref)
    assert len(res) == 3
    assert list(res.hops) == [0, 0, 0]
    assert res.paths == [[], [], []]
    # ip: the largest first components win.
    assert res.keys == [0, 1, 2]


def test_hops_zero_returns_only_seeds():
    g, model = build_graph(_chain_spec(8))
    q = np.array([1.0, 0.25], np.float32)
    res = g.search(q, k=10, seeds=2, hops=0, exact=True)
    assert_same(res, reference_search(model, q, k=10, seeds=2, hops=0))
    assert res.keys == [0, 1]
    assert list(res.hops) == [0, 0]
    assert res.count_visited == 2


def test_k_larger_than_reachable_gives_fewer_results_without_padding():
    g, model = build_graph(_chain_spec(8))
    q = np.array([0.1, 0.25], np.float32)  # any direction: ip ranks by first component anyway
    res = g.search(q, k=15, seeds=1, hops=2, direction="out", exact=True)
    assert_same(res, reference_search(model, q, k=15, seeds=1, hops=2, direction="out"))
    assert res.keys == [0, 1, 2]
    assert list(res.hops) == [0, 1, 2]
    assert edge_tuples(res.paths) == [[], [(0, "next", 1, 1.0)], [(0, "next", 1, 1.0), (1, "next", 2, 1.0)]]
    assert len(res.scores) == 3 and np.all(np.isfinite(res.scores))


def test_walk_against_edge_direction_reports_stored_edges():
    spec = _chain_spec(5)  # 0 -> 1 -> 2 -> 3 -> 4
    g, model = build_graph(spec)
    q = np.array([-1.0, 0.25], np.float32)  # ip: the smallest first component (node 4) is the best
    assert g.search(q, k=5, seeds=5, hops=0, exact=True).keys == [4, 3, 2, 1, 0]
    assert g.search(q, k=5, seeds=1, hops=4, direction="out", exact=True).keys == [4]  # no out-edges
    res = g.search(q, k=5, seeds=1, hops=4, direction="in", exact=True)
    assert_same(res, reference_search(model, q, k=5, seeds=1, hops=4, direction="in"))
    assert res.keys == [4, 3, 2, 1, 0]
    assert list(res.hops) == [0, 1, 2, 3, 4]
    # Paths list the stored edges (src -> dst as added), from the seed outwards.
    assert edge_tuples(res.paths)[2] == [(3, "next", 4, 1.0), (2, "next", 3, 1.0)]
    # The ts filter applies to every node reached, not only to seeds: node 1 (ts 0) stops the walk.
    spec.ts = [5, 0, 5, 9, 9]
    g, model = build_graph(spec)
    res = g.search(q, k=5, seeds=1, hops=4, direction="in", ts_min=5, exact=True)
    assert_same(res, reference_search(model, q, k=5, seeds=1, hops=4, direction="in", ts_min=5))
    assert res.keys == [4, 3, 2]
    res = g.search(q, k=5, seeds=1, hops=4, direction="both", ts_min=9, exact=True)
    assert res.keys == [4, 3]


def test_max_visited_below_seeds_truncates_seed_level():
    g, model = build_graph(_chain_spec(10))
    q = np.array([1.0, 0.25], np.float32)
    res = g.search(q, k=10, seeds=6, hops=2, max_visited=4, exact=True)
    assert_same(res, reference_search(model, q, k=10, seeds=6, hops=2, max_visited=4))
    assert res.keys == [0, 1, 2, 3]
    assert list(res.hops) == [0, 0, 0, 0]
    assert res.count_seeds == 6 and res.count_visited == 4


def test_hub_fanout_takes_heaviest_edges_then_insertion_order():
    n = 8
    vectors = np.tile(np.array([[1.0, 0.0]], np.float32), (n, 1))
    vectors[0] = [1.0, 1.0]  # the hub is the unique best seed under cos
    weights = [1.0, 3.0, 1.0, 2.0, 3.0, 0.5, 1.0]
    spec = GraphSpec(dim=2, metric="cos", keys=[f"n{i}" for i in range(n)], vectors=vectors, labels=[""] * n,
                     tenants=[""] * n, ts=[0] * n,
                     edges=[("n0", f"n{i + 1}", "r", w) for i, w in enumerate(weights)])
    g, model = build_graph(spec)
    q = np.array([1.0, 1.0], np.float32)
    res = g.search(q, k=10, seeds=1, hops=1, max_fanout=4, exact=True)
    assert_same(res, reference_search(model, q, k=10, seeds=1, hops=1, max_fanout=4))
    # by (weight desc, edge id asc): n2 (3.0), n5 (3.0), n4 (2.0), n1 (1.0, edge 0)
    assert res.keys[0] == "n0"
    assert sorted(res.keys[1:]) == ["n1", "n2", "n4", "n5"]
    assert [e.dst for e in g.neighbors("n0")] == ["n2", "n5", "n4", "n1", "n3", "n7", "n6"]


def test_self_loop_counts_once_under_both():
    vectors = np.array([[1.0, 0.0], [0.0, 1.0], [0.5, 0.5]], np.float32)
    spec = GraphSpec(dim=2, metric="ip", keys=["a", "b", "c"], vectors=vectors, labels=[""] * 3,
                     tenants=[""] * 3, ts=[0] * 3,
                     edges=[("a", "a", "r", 5.0), ("c", "a", "r", 1.0), ("a", "b", "r", 0.5)])
    g, model = build_graph(spec)
    assert g.neighbors("a", direction="both") == [("a", "r", "a", 5.0), ("c", "r", "a", 1.0), ("a", "r", "b", 0.5)]
    q = np.array([1.0, 0.0], np.float32)
    # fanout 2 under both: the self-loop (once) and c->a; b is not reached.
    res = g.search(q, k=5, seeds=1, hops=1, max_fanout=2, direction="both", exact=True)
    assert_same(res, reference_search(model, q, k=5, seeds=1, hops=1, max_fanout=2, direction="both"))
    assert res.keys == ["a", "c"]
    res = g.search(q, k=5, seeds=1, hops=1, max_fanout=3, direction="both", exact=True)
    assert res.keys == ["a", "c", "b"]


def test_filter_rejected_neighbor_does_not_consume_max_visited():
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.8, 0.2], [0.7, 0.3]], np.float32)
    spec = GraphSpec(dim=2, metric="ip", keys=[0, 1, 2, 3], vectors=vectors, labels=["a", "b", "a", "a"],
                     tenants=[""] * 4, ts=[0] * 4,
                     edges=[(0, 1, "r", 3.0), (0, 2, "r", 2.0), (0, 3, "r", 1.0), (1, 3, "r", 1.0)])
    g, model = build_graph(spec)
    q = np.array([1.0, 0.0], np.float32)
    res = g.search(q, k=5, seeds=1, hops=2, max_visited=3, labels=["a"], exact=True)
    assert_same(res, reference_search(model, q, k=5, seeds=1, hops=2, max_visited=3, labels=["a"]))
    assert res.keys == [0, 2, 3]  # 1 is rejected (label b), so it neither counts nor leads to 3
    assert edge_tuples(res.paths)[2] == [(0, "r", 3, 1.0)]


def test_hop_decay_applies_beyond_63_hops():
    """hop_decay ** hop for every hop, however deep (no cap on the power table)."""
    n = 70
    vectors = np.tile(np.array([[1.0, 0.0]], np.float32), (n, 1))
    spec = GraphSpec(dim=2, metric="ip", keys=list(range(n)), vectors=vectors, labels=[""] * n, tenants=[""] * n,
                     ts=[0] * n, edges=[(i, i + 1, "", 1.0) for i in range(n - 1)])
    g, model = build_graph(spec)
    q = np.array([1.0, 0.0], np.float32)
    params = dict(k=n, seeds=1, hops=n, direction="out", hop_decay=0.5)
    res = g.search(q, exact=True, **params)
    ref = reference_search(model, q, **params)
    scores = dict(zip(res.keys, res.scores.tolist()))
    base = float(g.search(q, k=1, seeds=1, hops=0, exact=True).scores[0])
    for hop in (62, 63, 64, 65, 69):
        assert scores[hop] == np.float32(base * np.float32(0.5**hop)), (
            f"node at hop {hop}: score {scores[hop]!r}, expected {base} * 0.5**{hop} = {base * 0.5 ** hop!r}")
    assert_same(res, ref)


def test_reference_scores_match_dequantized_similarity():
    """Sanity check of the reference's scoring against float64 math on dequantized vectors."""
    rng = np.random.default_rng(7)
    for metric in ("cos", "ip", "l2"):
        vectors = rng.normal(size=(20, 9)).astype(np.float32)
        keys = list(range(20))
        g = vg.Graph(9, metric)
        g.add_nodes(keys, vectors)
        model = build_model(g, keys, [""] * 20, [""] * 20, [0] * 20, [])
        q = rng.normal(size=9).astype(np.float32)
        codes, scales = vg.quantize(q[None], metric)
        qd = codes[0].astype(np.float64) * float(scales[0])
        vd = model.codes.astype(np.float64) * model.scales.astype(np.float64)[:, None]
        if metric == "l2":
            want = -np.sum((vd - qd) ** 2, axis=1)
        elif metric == "cos":  # the cosine of the dequantized vectors
            want = (vd @ qd) / (np.linalg.norm(vd, axis=1) * np.linalg.norm(qd))
        else:
            want = vd @ qd
        np.testing.assert_allclose(score_all(model, q), want, rtol=1e-5, atol=1e-4)


def test_larger_dims_exercise_kernel_tails():
    rng = np.random.default_rng(11)
    for dim in (2, 15, 16, 31, 32, 33, 63, 64, 65, 100, 257):
        for metric in ("cos", "ip", "l2"):
            n = 25
            keys = list(range(n))
            vectors = rng.normal(size=(n, dim)).astype(np.float32) * 3
            edges = [(int(a), int(b), "r", float(w)) for a, b, w in
                     zip(rng.integers(0, n, 40), rng.integers(0, n, 40), rng.integers(0, 3, 40))]
            spec = GraphSpec(dim=dim, metric=metric, keys=keys, vectors=vectors, labels=[""] * n,
                             tenants=[""] * n, ts=[0] * n, edges=edges)
            g, model = build_graph(spec)
            q = rng.normal(size=dim).astype(np.float32)
            for direction in DIRECTIONS:
                params = dict(k=12, seeds=3, hops=2, direction=direction, max_fanout=3)
                assert_same(g.search(q, exact=True, **params), reference_search(model, q, **params))


_SUBPROCESS_CHECK = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    sys.path.insert(0, {tests_dir!r})
    import vecgraph as vg
    from conftest import GraphSpec, assert_same, build_graph
    from reference import reference_search

    rng = np.random.default_rng(3)
    checked = 0
    for trial in range(24):
        metric = ("cos", "ip", "l2")[trial % 3]
        dim = (1, 3, 8, 17, 33, 100)[trial % 6]
        n = int(rng.integers(1, 40))
        keys = [i if i % 2 else "k%d" % i for i in range(n)]
        vectors = rng.integers(-2, 3, size=(n, dim)).astype(np.float32) if trial % 2 else \\
            rng.normal(size=(n, dim)).astype(np.float32)
        if metric == "cos":
            vectors[~np.any(vectors != 0, axis=1), 0] = 1.0
        m = int(rng.integers(0, 3 * n))
        edges = [(keys[int(a)], keys[int(b)], ("r", "s")[int(c)], float(w)) for a, b, c, w in
                 zip(rng.integers(0, n, m), rng.integers(0, n, m), rng.integers(0, 2, m), rng.integers(0, 3, m))]
        spec = GraphSpec(dim=dim, metric=metric, keys=keys, vectors=vectors, labels=[("a", "b")[i % 2] for i in range(n)],
                         tenants=[""] * n, ts=[int(t) for t in rng.integers(0, 4, n)], edges=edges)
        g, model = build_graph(spec)
        for direction in ("out", "in", "both"):
            q = rng.normal(size=dim).astype(np.float32)
            params = dict(k=int(rng.integers(1, 15)), seeds=int(rng.integers(1, 8)), hops=int(rng.integers(0, 4)),
                          max_visited=int(rng.integers(1, 30)), direction=direction, max_fanout=int(rng.integers(1, 5)),
                          hop_decay=(1.0, 0.5)[trial % 2], labels=None if trial % 4 else ["a"])
            assert_same(g.search(q, exact=True, **params), reference_search(model, q, **params))
            checked += 1
    print(json.dumps({{"isa": vg.active_isa(), "stats_isa": vg.Graph(2).stats()["isa"], "checked": checked}}))
    """
)


@pytest.mark.parametrize("isa", ["serial"] + [i for i in vg.available_isas() if i != "serial"])
def test_equivalence_under_forced_isa(isa):
    """The same equivalence in a fresh interpreter with VECGRAPH_FORCE_ISA (serial: the scalar path)."""
    env = dict(os.environ, VECGRAPH_FORCE_ISA=isa)
    proc = subprocess.run([sys.executable, "-c", _SUBPROCESS_CHECK.format(tests_dir=TESTS_DIR)], env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads(proc.stdout.strip().splitlines()[-1])
    assert report["isa"] == isa
    assert report["stats_isa"] == isa
    assert report["checked"] == 72


# ------------------------------------------- exclusions, named seeds, seed-propagated scores


@settings(max_examples=examples(300), deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data(), spec=graph_specs())
def test_exclusions_named_seeds_and_seed_weights_equal_reference(data, spec):
    """What hybrid_search's graph channel asks of the core (named seeds with weights, seeds=0,
    min_hop, excluded keys) and search(exclude_keys=) equal the reference, keys, scores, hops
    and paths, bit for bit."""
    g, model = build_graph(spec)
    n = len(spec.keys)
    query = data.draw(query_strategy(spec.dim, spec.metric, "normal"), label="query")
    params = data.draw(search_params(), label="params")
    excluded = sorted(set(data.draw(st.lists(st.integers(0, max(0, n - 1)), max_size=4), label="exclude"))) if n else []
    exclude_keys = [spec.keys[i] for i in excluded] or None
    res = g.search(query, exact=True, exclude_keys=exclude_keys, **params)
    assert_same(res, reference_search(model, query, exclude=set(excluded), **params))
    assert not set(res.keys) & set(exclude_keys or [])
    if not n:
        return
    named = data.draw(st.lists(st.integers(0, n - 1), min_size=1, max_size=5), label="named")
    weights = data.draw(st.lists(st.sampled_from([0.0, 0.25, 0.5, 1.0]), min_size=len(named), max_size=len(named)),
                        label="weights")
    min_hop = data.draw(st.integers(0, 2), label="min_hop")
    ts_min = -(2**63) if params["ts_min"] is None else params["ts_min"]
    ts_max = 2**63 - 1 if params["ts_max"] is None else params["ts_max"]
    raw = g._engine.search(np.asarray(query, np.float32), params["k"], 0, params["hops"], params["max_visited"],
                           params["max_fanout"], params["direction"], params["rels"], params["labels"],
                           params["tenants"], ts_min, ts_max, params["hop_decay"], True, 0, None,
                           [spec.keys[i] for i in named], exclude_keys, weights, min_hop)
    ref = reference_search(model, query, **dict(params, seeds=0), extra_seeds=named, seed_weights=weights,
                           min_hop=min_hop, exclude=set(excluded))
    assert_same(vg.graph.SearchResult(raw, g._engine), ref, counts=False)
