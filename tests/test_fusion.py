"""Weighted Reciprocal Rank Fusion (vecgraph.fusion): the worked example, weights, repeated
keys, empty lists, the tie-break rule, bad arguments, and equivalence with a slow reference on
random inputs."""

from __future__ import annotations

import math
import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from vecgraph import fusion
from vecgraph.errors import InvalidArgumentError
from vecgraph.fusion import Fused, rrf, rrf_with_ranks

from conftest import examples


def reference_rrf(lists, weights=None, k=60, top_n=None):
    """RRF written out as the docstring states it: first rank of each key in each list, the
    contributions summed in list order from 0.0, sorted by (score desc, best rank, first list
    giving that rank). Returns [(key, score, ranks tuple)]."""
    keys_per_list = [[item[0] if isinstance(item, tuple) else item for item in lst] for lst in lists]
    weights = [1.0] * len(lists) if weights is None else [float(w) for w in weights]
    first_rank = []
    for keys in keys_per_list:
        ranks = {}
        for position, key in enumerate(keys, start=1):
            if key not in ranks:
                ranks[key] = position
        first_rank.append(ranks)
    everything = []
    for ranks in first_rank:
        for key in ranks:
            if key not in everything:
                everything.append(key)
    rows = []
    for key in everything:
        score = 0.0
        for w, ranks in zip(weights, first_rank):
            if key in ranks:
                score += w / (k + ranks[key])
        best = min((ranks[key], i) for i, ranks in enumerate(first_rank) if key in ranks)
        rows.append((-score, best, key, tuple(ranks.get(key) for ranks in first_rank)))
    rows.sort(key=lambda row: (row[0], row[1]))
    if top_n is not None:
        rows = rows[:top_n]
    return [(key, -neg, ranks) for neg, _, key, ranks in rows]


# ------------------------------------------------------------------------------------- worked example


def test_worked_example_two_lists():
    # doc1 is at rank 1 in the first list and rank 3 in the second: 1/61 + 1/63;
    # doc2 is at rank 2 in the first list only: 1/62.
    # (0.032266 and 0.016129: 0.03226 and 0.01613 to five decimals, within 1e-5)
    fused = dict(rrf([["doc1", "doc2", "doc3"], ["doc4", "doc5", "doc1"]]))
    assert fused["doc1"] == pytest.approx(0.03226, abs=1e-5)
    assert fused["doc1"] == 1 / 61 + 1 / 63
    assert fused["doc2"] == pytest.approx(0.01613, abs=1e-5)
    assert fused["doc2"] == 1 / 62


def test_worked_example_order():
    result = rrf([["doc1", "doc2", "doc3"], ["doc4", "doc5", "doc1"]])
    # doc2 and doc5 tie at 1/62 (both best rank 2): the first list's comes first
    assert [key for key, _ in result] == ["doc1", "doc4", "doc2", "doc5", "doc3"]
    assert [score for _, score in result] == pytest.approx([0.03226, 0.01639, 0.01613, 0.01613, 0.01587], abs=1e-5)


def test_default_k_is_60_and_k_changes_scores():
    assert rrf([["a"]]) == [("a", 1 / 61)]
    assert rrf([["a", "b"]], k=1) == [("a", 1 / 2), ("b", 1 / 3)]
    assert rrf([["a"]], k=0.5) == [("a", 1 / 1.5)]


# ------------------------------------------------------------------------------------- weights


def test_weights_scale_each_list():
    result = dict(rrf([["a", "b"], ["b", "a"]], weights=[1.0, 2.0]))
    assert result["a"] == 1.0 / 61 + 2.0 / 62
    assert result["b"] == 1.0 / 62 + 2.0 / 61
    assert rrf([["a", "b"], ["b", "a"]], weights=[1.0, 2.0])[0][0] == "b"


def test_zero_weight_list_adds_nothing_but_its_keys_appear():
    result = rrf([["a"], ["b"]], weights=[1.0, 0.0])
    assert result == [("a", 1 / 61), ("b", 0.0)]


def test_weights_as_mapping_for_named_lists():
    result = rrf_with_ranks({"dense": ["x", "y"], "bm25": ["y", "z"], "graph": []}, weights={"bm25": 1.5})
    assert [f.key for f in result] == ["y", "z", "x"]
    assert result[0] == Fused("y", 1 / 62 + 1.5 / 61, {"dense": 2, "bm25": 1, "graph": None})
    assert result[1].ranks == {"dense": None, "bm25": 2, "graph": None}
    assert result[1].score == 1.5 / 62


def test_numpy_weights_and_numpy_key_arrays():
    result = rrf([np.array([3, 1, 2]), np.array([2, 3])], weights=np.array([1.0, 0.5]))
    assert [key for key, _ in result] == [3, 2, 1]
    assert all(type(key) is int for key, _ in result)


# ------------------------------------------------------------------------------------- repeats, empties, pairs


def test_repeated_key_counts_at_its_first_rank_only():
    # "a" at ranks 1 and 3: only rank 1 counts; c keeps its position 4
    result = rrf_with_ranks([["a", "b", "a", "c"]])
    assert [(f.key, f.score, f.ranks) for f in result] == [
        ("a", 1 / 61, (1,)), ("b", 1 / 62, (2,)), ("c", 1 / 64, (4,))]


def test_repeated_key_in_a_later_list():
    result = dict(rrf([["a", "b"], ["c", "a", "a", "b"]]))
    assert result["a"] == 1 / 61 + 1 / 62
    assert result["b"] == 1 / 62 + 1 / 64
    assert result["c"] == 1 / 61


def test_empty_inputs():
    assert rrf([]) == []
    assert rrf([[], []]) == []
    assert rrf({}) == []
    assert rrf([[], ["a"], []]) == [("a", 1 / 61)]
    assert rrf_with_ranks([[], ["a"]]) == [Fused("a", 1 / 61, (None, 1))]


def test_key_score_pairs_use_order_not_scores():
    pairs = [("b", 0.1), ("a", 0.9)]        # scores ignored: b is rank 1
    assert rrf([pairs]) == [("b", 1 / 61), ("a", 1 / 62)]
    assert rrf([pairs, ["a"]])[0] == ("a", 1 / 62 + 1 / 61)
    assert rrf([[["b", 0.1], ["a", 0.9]]]) == [("b", 1 / 61), ("a", 1 / 62)]


def test_int_and_str_keys_are_different_and_never_compared():
    result = rrf([[1, "1", 2], ["1"]])
    assert [key for key, _ in result] == ["1", 1, 2]


def test_top_n():
    lists = [["a", "b", "c", "d"], ["d", "c"]]
    assert rrf(lists, top_n=2) == rrf(lists)[:2]
    assert rrf(lists, top_n=100) == rrf(lists)
    assert len(rrf(lists, top_n=1)) == 1


# ------------------------------------------------------------------------------------- tie-break


def test_ties_break_by_best_rank_before_list_order():
    # x is only in list 0, at rank 62, with weight 2: 2/122 == 1/61; y is only in list 1, at
    # rank 1: 1/61. Equal scores; y has the better rank, although x's list comes first.
    list0 = [f"f{i}" for i in range(61)] + ["x"]
    result = rrf([list0, ["y"]], weights=[2.0, 1.0])
    scores = dict(result)
    assert scores["x"] == scores["y"] == 1 / 61
    keys = [key for key, _ in result]
    assert keys.index("y") < keys.index("x")


def test_ties_with_the_same_best_rank_break_by_list_order():
    # each key is alone at rank r in its list: equal scores, equal best ranks
    result = rrf([["p"], ["q"], ["r"]])
    assert [key for key, _ in result] == ["p", "q", "r"]
    result = rrf([["p", "s"], ["q", "p"]])   # s (rank 2, list 0) and q... q is rank 1
    assert [key for key, _ in result] == ["p", "q", "s"]


def test_ties_are_deterministic_under_top_n():
    lists = [[f"a{i}" for i in range(20)], [f"b{i}" for i in range(20)]]
    full = rrf(lists)
    # a_i and b_i tie at 1/(61+i): a_i first
    assert [key for key, _ in full[:4]] == ["a0", "b0", "a1", "b1"]
    for n in range(1, 40):
        assert rrf(lists, top_n=n) == full[:n]


# ------------------------------------------------------------------------------------- bad arguments


@pytest.mark.parametrize("bad", [-1.0, -1e-9, math.nan, math.inf, -math.inf])
def test_bad_weight_is_named(bad):
    with pytest.raises(InvalidArgumentError, match=r"weight 1 must be finite and >= 0"):
        rrf([["a"], ["b"]], weights=[1.0, bad])


def test_bad_named_weight_is_named():
    with pytest.raises(InvalidArgumentError, match=r"weight 'bm25'"):
        rrf({"dense": ["a"], "bm25": ["b"]}, weights={"bm25": -0.5})
    with pytest.raises(InvalidArgumentError, match=r"'graf'.*'dense', 'bm25'"):
        rrf({"dense": ["a"], "bm25": ["b"]}, weights={"graf": 1.0})


def test_weights_length_and_type():
    with pytest.raises(ValueError, match="weights has 1 items, expected 2"):
        rrf([["a"], ["b"]], weights=[1.0])
    with pytest.raises(TypeError, match="weight 0 must be a real number"):
        rrf([["a"]], weights=["1"])
    with pytest.raises(TypeError, match="weight 0 must be a real number"):
        rrf([["a"]], weights=[True])
    with pytest.raises(TypeError, match="mapping only when lists is a mapping"):
        rrf([["a"]], weights={"a": 1.0})


@pytest.mark.parametrize("k", [0, -1, 0.0, math.nan, math.inf])
def test_bad_k(k):
    with pytest.raises(InvalidArgumentError, match="k must be finite and > 0"):
        rrf([["a"]], k=k)


def test_bad_k_type_and_top_n():
    with pytest.raises(TypeError, match="k must be a real number"):
        rrf([["a"]], k="60")
    with pytest.raises(TypeError, match="k must be a real number"):
        rrf([["a"]], k=True)
    with pytest.raises(InvalidArgumentError, match="top_n must be >= 1"):
        rrf([["a"]], top_n=0)
    with pytest.raises(TypeError, match="top_n must be an int"):
        rrf([["a"]], top_n=2.0)


def test_bad_lists():
    with pytest.raises(TypeError, match="lists must be"):
        rrf("abc")
    with pytest.raises(TypeError, match="list 0 must be a sequence"):
        rrf(["abc"])
    with pytest.raises(TypeError, match="list 'dense' must be a sequence"):
        rrf({"dense": 5})
    with pytest.raises(TypeError, match="unhashable"):
        rrf([[["a", "b", "c"]]])
    with pytest.raises(TypeError, match="mixes"):
        rrf([[("a", 1.0), 7]])


# ------------------------------------------------------------------------------------- property


keys_strategy = st.one_of(st.integers(0, 12), st.sampled_from(["a", "b", "c", "d", "e", "f"]))
list_strategy = st.lists(keys_strategy, max_size=25)


@settings(max_examples=examples(300), deadline=None)
@given(
    lists=st.lists(list_strategy, max_size=5),
    data=st.data(),
    k=st.sampled_from([60, 1, 0.5, 7.25, 1000]),
    top_n=st.one_of(st.none(), st.integers(1, 30)),
    pairs=st.booleans(),
)
def test_matches_reference(lists, data, k, top_n, pairs):
    weights = data.draw(st.one_of(
        st.none(),
        st.lists(st.sampled_from([0.0, 0.5, 1.0, 1.2, 1.5, 2.0, 3.0]), min_size=len(lists), max_size=len(lists)),
        st.lists(st.floats(0.0, 10.0), min_size=len(lists), max_size=len(lists)),
    ))
    given_lists = [[(key, 0.5) for key in lst] for lst in lists] if pairs else lists
    expected = reference_rrf(given_lists, weights, k, top_n)
    assert rrf(given_lists, weights=weights, k=k, top_n=top_n) == [(key, score) for key, score, _ in expected]
    got = rrf_with_ranks(given_lists, weights=weights, k=k, top_n=top_n)
    assert [tuple(f) for f in got] == expected


@settings(max_examples=examples(100), deadline=None)
@given(lists=st.lists(list_strategy, min_size=1, max_size=4), data=st.data())
def test_named_lists_match_positional(lists, data):
    names = [f"c{i}" for i in range(len(lists))]
    weights = data.draw(st.lists(st.sampled_from([0.0, 1.0, 1.5]), min_size=len(lists), max_size=len(lists)))
    positional = rrf_with_ranks(lists, weights=weights)
    named = rrf_with_ranks(dict(zip(names, lists)), weights=dict(zip(names, weights)))
    assert [(f.key, f.score) for f in named] == [(f.key, f.score) for f in positional]
    assert [f.ranks for f in named] == [dict(zip(names, f.ranks)) for f in positional]


@pytest.mark.parametrize("seed", range(5))
def test_kernel_equals_the_python_reference_on_large_random_lists(seed):
    """The C++ kernel behind rrf against the plain-Python fusion it replaced: lists of 100-300
    keys drawn from a small pool (many ties under equal weights), repeats, a weight 0."""
    rng = random.Random(seed)
    pool = [f"node-{i}" for i in range(150)] + list(range(150))
    lists = [[rng.choice(pool) for _ in range(rng.randint(100, 300))] for _ in range(rng.randint(1, 5))]
    for weights in (None, [rng.choice([0.0, 1.0, 1.5]) for _ in lists]):
        for top_n in (None, 1, 10, 100):
            order, scores, positions, _ = fusion._fuse_reference(lists, weights, 60, top_n, with_ranks=True)
            got = rrf_with_ranks(lists, weights=weights, top_n=top_n)
            assert [f.key for f in got] == order
            assert [f.score for f in got] == [scores[key] for key in order]  # the same bits
            assert [f.ranks for f in got] == [tuple(p.get(key) for p in positions) for key in order]


def test_equal_keys_of_different_types_are_one_key_reported_as_first_seen():
    assert rrf([[1, True, 1.0]]) == [(1, 1 / 61)]
    assert type(rrf([[1, True]])[0][0]) is int
    assert rrf([["x"], [True], [1]], top_n=1) == [(True, 1 / 61 + 1 / 61)]


def test_a_failing_key_comparison_raises_and_nothing_breaks():
    class Bad:
        def __hash__(self):
            return 7

        def __eq__(self, other):
            raise RuntimeError("no comparing")

    class Seven:
        def __hash__(self):
            return 7

    with pytest.raises(RuntimeError, match="no comparing"):
        rrf([[Bad(), Seven()]])
    assert rrf([["a"]]) == [("a", 1 / 61)]


def test_keys_sharing_their_low_bits_fuse_correctly():
    keys = [i << 32 for i in range(3000)]
    fused = rrf([keys, keys[::-1]], top_n=3)
    assert [key for key, _ in fused] == [0, 2999 << 32, 1 << 32]  # ties by best rank, then list
    assert fused[0][1] == 1 / 61 + 1 / 3060


def test_extreme_numbers_are_clear_errors_or_work():
    assert rrf([["a", "b"]], top_n=2**63) == rrf([["a", "b"]])
    assert rrf([["a", "b"]], top_n=10**30) == rrf([["a", "b"]])
    with pytest.raises(InvalidArgumentError, match="k must be finite"):
        rrf([["a"]], k=10**400)
    with pytest.raises(InvalidArgumentError, match="must be finite"):
        rrf([["a"]], weights=[10**400])


def test_ranks_of_many_lists_report_only_the_results_kept():
    lists = [[f"l{i}-{j}" for j in range(50)] + ["shared"] for i in range(200)]
    fused = rrf_with_ranks(lists, top_n=2)
    assert fused[0].key == "shared" and fused[0].ranks == (51,) * 200
    assert fused[1].ranks == (1,) + (None,) * 199


def test_named_tuple_pairs_results_and_sets():
    from collections import namedtuple

    import vecgraph as vg

    Pair = namedtuple("Pair", "key score")
    assert rrf([[Pair("a", 0.9), Pair("b", 0.5)], ["b"]]) == rrf([["a", "b"], ["b"]])
    with pytest.raises(TypeError, match="mixes"):
        rrf([[("a", 0.9), ("b", 0.5, "x")]])
    with pytest.raises(TypeError, match="mixes"):
        rrf([[("a", 0.9), ["b"]]])
    with pytest.raises(TypeError, match="has no order"):
        rrf([{"a", "b"}])
    g = vg.Graph(dim=2)
    g.add_nodes(["x", "y"], np.array([[1, 0], [0.8, 0.6]], dtype=np.float32))
    res = g.search(np.array([1, 0], dtype=np.float32), k=2, hops=0)
    assert rrf([res, ["y"]]) == rrf([res.keys, ["y"]])


def test_an_unhashable_key_is_named_by_list_and_position():
    for lists, where in (([["a", "b"], ["c", ["d"]]], "list 1 item 1"), ({"dense": ["x", {"y": 1}]}, "list 'dense' item 1")):
        for fuse in (rrf, rrf_with_ranks):
            with pytest.raises(TypeError) as raised:
                fuse(lists)
            assert str(raised.value).startswith(f"{where} is unhashable (")
            assert str(raised.value).endswith("); keys must be hashable, such as str or int")
