"""Bad input: every row asserts the exception type, that the message names what was expected and
what came, and that the graph is unchanged afterwards. Then edge cases that are not errors."""

from __future__ import annotations

import unicodedata

import numpy as np
import pytest

import vecgraph as vg
from conftest import edge_tuples, snapshot

DIM = 4
QUERY = np.array([1.0, 0.5, 0.25, 0.125], np.float32)


def make_graph(metric: str = "cos") -> vg.Graph:
    g = vg.Graph(DIM, metric)
    vectors = np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 1, 0], [1, 1, 0, 0], [1, 1, 1, 1]], np.float32)
    g.add_nodes(["a", "b", "c", 1, 2], vectors, labels=["x", "y", "x", "y", "x"], tenants="t",
                ts=[1, 2, 3, 4, 5], texts=["ta", "tb", "tc", "t1", "t2"], props=[{"i": 0}, None, None, None, {"i": 4}])
    g.add_edges(["a", "b", "c", 1, "a"], ["b", "c", 1, 2, "a"], rels=["r", "s", "r", "s", "r"],
                weights=[1.0, 2.0, 0.5, 1.0, 3.0])
    return g


def state(g: vg.Graph) -> tuple:
    """Sizes, an exact search over everything, and every node's neighbours."""
    neighbors = tuple(tuple(g.neighbors(k, direction="both")) for k in ["a", "b", "c", 1, 2] if k in g)
    return snapshot(g, QUERY), snapshot(g, QUERY, direction="out", hops=1), neighbors, g.stats()["labels"]


def expect_error(g, call, exc_type, *fragments, also=()):
    """call(g) raises exc_type (and each type in also), its message holds every fragment, and g is unchanged."""
    before = state(g) if g is not None else None
    with pytest.raises(exc_type) as info:
        call(g)
    for extra in also:
        assert isinstance(info.value, extra), f"{type(info.value).__name__} is not a {extra.__name__}"
    message = str(info.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in message {message!r}"
    if g is not None:
        assert state(g) == before
    return info.value


# (id, graph metric, call, exception, also-instance-of, message fragments)
ERROR_ROWS = [
    # dimensions
    ("add_nodes_wrong_dim", "cos", lambda g: g.add_nodes(["n"], np.ones((1, 5), np.float32)),
     vg.DimensionMismatchError, (ValueError, vg.Error), ["dim 5", "dim 4"]),
    ("add_nodes_wrong_dim_float64", "l2", lambda g: g.add_nodes(["n", "m"], np.ones((2, 3))),
     vg.DimensionMismatchError, (ValueError,), ["dim 3", "dim 4"]),
    ("add_nodes_ragged_rows", "cos", lambda g: g.add_nodes(["n", "m"], [[1.0] * 4, [1.0] * 3]),
     ValueError, (), ["vectors must be a numeric array of shape (n, dim)", "rows differ in length"]),
    ("search_wrong_dim", "cos", lambda g: g.search(np.ones(5, np.float32)),
     vg.DimensionMismatchError, (ValueError,), ["query", "dim 5", "dim 4"]),
    ("search_exact_wrong_dim", "ip", lambda g: g.search(np.ones(3, np.float32), exact=True),
     vg.DimensionMismatchError, (ValueError,), ["query", "dim 3", "dim 4"]),
    ("search_batch_wrong_dim", "cos", lambda g: g.search_batch(np.ones((2, 5), np.float32)),
     vg.DimensionMismatchError, (ValueError,), ["queries", "dim 5", "dim 4"]),
    ("add_edges_vectors_wrong_dim", "cos",
     lambda g: g.add_edges(["a"], ["b"], vectors=np.ones((1, 5), np.float32)),
     vg.DimensionMismatchError, (ValueError,), ["vectors", "dim 5", "dim 4"]),
    # non-finite and zero vectors
    ("add_nodes_nan_in_last_row", "cos",
     lambda g: g.add_nodes(["n", "m", "o"], np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, 0, np.nan]], np.float32)),
     vg.InvalidArgumentError, (ValueError,), ["row 2", "NaN", "position 3", "finite"]),
    ("add_nodes_inf_in_first_row", "l2",
     lambda g: g.add_nodes(["n", "m"], np.array([[np.inf, 0, 0, 0], [0, 1, 0, 0]], np.float32)),
     vg.InvalidArgumentError, (ValueError,), ["row 0", "inf", "position 0", "finite"]),
    ("add_nodes_float64_overflowing_float32", "ip",
     lambda g: g.add_nodes(["n", "m"], np.array([[1, 0, 0, 0], [0, 0, -1e300, 0]])),
     vg.InvalidArgumentError, (ValueError,), ["vectors row 1", "-1e+300", "position 2", "float32", "finite"]),
    ("search_float64_overflowing_float32", "cos", lambda g: g.search(np.array([0, 1e39, 0, 0])),
     vg.InvalidArgumentError, (ValueError,), ["query row 0", "1e+39", "position 1", "float32"]),
    ("add_nodes_zero_vector_cos", "cos",
     lambda g: g.add_nodes(["n", "m"], np.array([[1, 0, 0, 0], [0, 0, 0, 0]], np.float32)),
     vg.InvalidArgumentError, (ValueError,), ["row 1", "all zeros", "cos", "non-zero"]),
    ("search_nan_query", "cos", lambda g: g.search(np.array([1, np.nan, 0, 0], np.float32)),
     vg.InvalidArgumentError, (ValueError,), ["query", "NaN", "position 1", "finite"]),
    ("search_zero_query_cos", "cos", lambda g: g.search(np.zeros(4, np.float32), exact=True),
     vg.InvalidArgumentError, (ValueError,), ["query", "all zeros", "cos"]),
    ("search_batch_nan_in_last_row", "l2",
     lambda g: g.search_batch(np.array([[1, 0, 0, 0], [0, 1, 0, 0], [0, 0, np.inf, 0]], np.float32)),
     vg.InvalidArgumentError, (ValueError,), ["queries", "row 2", "inf", "finite"]),
    ("add_edges_vectors_nan", "cos",
     lambda g: g.add_edges(["a", "b"], ["b", "c"], vectors=np.array([[1, 0, 0, 0], [np.nan, 0, 0, 0]], np.float32)),
     vg.InvalidArgumentError, (ValueError,), ["edge vectors", "row 1", "NaN", "finite"]),
    # keys
    ("duplicate_key_present", "cos", lambda g: g.add_nodes(["n", "a"], np.ones((2, 4), np.float32)),
     vg.DuplicateKeyError, (ValueError, vg.Error), ["'a'", "row 1", "already in the graph", "unique"]),
    ("duplicate_int_key_present", "ip", lambda g: g.add_nodes([2], np.ones((1, 4), np.float32)),
     vg.DuplicateKeyError, (ValueError,), ["key 2", "already in the graph"]),
    ("duplicate_key_in_batch", "cos", lambda g: g.add_nodes(["n", "m", "n"], np.ones((3, 4), np.float32)),
     vg.DuplicateKeyError, (ValueError,), ["'n'", "twice", "row 2", "unique"]),
    ("keys_single_str", "cos", lambda g: g.add_nodes("nm", np.ones((2, 4), np.float32)),
     TypeError, (), ["sequence of keys", "single str", "list"]),
    ("bool_key", "cos", lambda g: g.add_nodes(["n", True], np.ones((2, 4), np.float32)),
     TypeError, (), ["str or int", "bool", "row 1"]),
    ("float_key", "cos", lambda g: g.add_nodes([1.0], np.ones((1, 4), np.float32)),
     TypeError, (), ["str or int", "float", "row 0"]),
    ("int_key_above_int64", "cos", lambda g: g.add_nodes(["n", 2**63], np.ones((2, 4), np.float32)),
     ValueError, (), ["row 1", "int64"]),
    ("int_key_below_int64", "cos", lambda g: g.add_nodes([-(2**63) - 1], np.ones((1, 4), np.float32)),
     ValueError, (), ["row 0", "int64"]),
    ("lone_surrogate_key", "cos", lambda g: g.add_nodes(["n", "\ud800"], np.ones((2, 4), np.float32)),
     ValueError, (), ["row 1", "Unicode", "UTF-8"]),
    # edges
    ("edge_missing_dst", "cos", lambda g: g.add_edges(["a", "b"], ["b", "zz"]),
     vg.NotFoundError, (KeyError, vg.Error), ["row 1", "dst", "'zz'", "not a node"]),
    ("edge_missing_src", "cos", lambda g: g.add_edges(["a", 99], ["b", "a"], rels="r"),
     vg.NotFoundError, (KeyError,), ["row 1", "src", "99", "not a node"]),
    ("edge_nan_weight", "cos", lambda g: g.add_edges(["a", "b"], ["b", "c"], weights=[1.0, np.nan]),
     vg.InvalidArgumentError, (ValueError,), ["row 1", "weight", "nan", "finite"]),
    ("edge_inf_weight", "cos", lambda g: g.add_edges(["a"], ["b"], weights=[-np.inf]),
     vg.InvalidArgumentError, (ValueError,), ["row 0", "weight", "inf", "finite"]),
    ("edge_src_dst_lengths", "cos", lambda g: g.add_edges(["a", "b"], ["b"]),
     ValueError, (), ["src has 2", "dst has 1"]),
    # search parameters
    ("k_zero", "cos", lambda g: g.search(QUERY, k=0), vg.InvalidArgumentError, (ValueError,), ["k must be >= 1", "got 0"]),
    ("k_negative", "cos", lambda g: g.search(QUERY, k=-3, exact=True),
     vg.InvalidArgumentError, (ValueError,), ["k must be >= 1", "got -3"]),
    ("hops_negative", "cos", lambda g: g.search(QUERY, hops=-1),
     vg.InvalidArgumentError, (ValueError,), ["hops must be >= 0", "got -1"]),
    ("seeds_zero", "cos", lambda g: g.search(QUERY, seeds=0),
     vg.InvalidArgumentError, (ValueError,), ["seeds must be >= 1", "got 0"]),
    ("max_visited_zero", "cos", lambda g: g.search(QUERY, max_visited=0),
     vg.InvalidArgumentError, (ValueError,), ["max_visited must be >= 1", "got 0"]),
    ("max_fanout_zero", "cos", lambda g: g.search(QUERY, max_fanout=0),
     vg.InvalidArgumentError, (ValueError,), ["max_fanout must be >= 1", "got 0"]),
    ("search_batch_k_zero", "cos", lambda g: g.search_batch(QUERY[None], k=0),
     vg.InvalidArgumentError, (ValueError,), ["k must be >= 1", "got 0"]),
    ("unknown_direction", "cos", lambda g: g.search(QUERY, direction="sideways"),
     vg.InvalidArgumentError, (ValueError,), ["'out', 'in' or 'both'", "'sideways'"]),
    ("neighbors_unknown_direction", "cos", lambda g: g.neighbors("a", direction="up"),
     vg.InvalidArgumentError, (ValueError,), ["'out', 'in' or 'both'", "'up'"]),
    ("hop_decay_zero", "cos", lambda g: g.search(QUERY, hop_decay=0.0),
     vg.InvalidArgumentError, (ValueError,), ["hop_decay", "> 0"]),
    ("ts_range_reversed", "cos", lambda g: g.search(QUERY, ts_min=5, ts_max=1),
     vg.InvalidArgumentError, (ValueError,), ["ts_min (5)", "ts_max (1)"]),
    ("k_bool", "cos", lambda g: g.search(QUERY, k=True), TypeError, (), ["k must be an int", "bool"]),
    ("k_float", "cos", lambda g: g.search(QUERY, k=2.5), TypeError, (), ["k must be an int", "float"]),
    # array types and column lengths
    ("vectors_of_strings", "cos", lambda g: g.add_nodes(["n"], np.array([["1", "2", "3", "4"]])),
     TypeError, (), ["numeric", "<U1"]),
    ("vectors_object_dtype", "cos", lambda g: g.add_nodes(["n"], np.array([[1, 2, 3, None]], dtype=object)),
     TypeError, (), ["numeric", "object"]),
    ("query_list_of_strings", "cos", lambda g: g.search(["1", "2", "3", "4"]),
     TypeError, (), ["query", "numbers", "list of str", "search_batch"]),
    ("query_complex", "cos", lambda g: g.search(np.ones(4, np.complex64)),
     TypeError, (), ["query", "real", "complex64"]),
    ("vectors_wrong_rank", "cos", lambda g: g.add_nodes(["n"], np.ones(4, np.float32)),
     ValueError, (), ["(n, dim)", "(4,)"]),
    ("vectors_rows_vs_keys", "cos", lambda g: g.add_nodes(["n", "m"], np.ones((3, 4), np.float32)),
     ValueError, (), ["3 rows", "keys has 2"]),
    ("labels_shorter_than_keys", "cos", lambda g: g.add_nodes(["n", "m"], np.ones((2, 4), np.float32), labels=["x"]),
     ValueError, (), ["labels has 1", "expected 2"]),
    ("tenants_longer_than_keys", "cos",
     lambda g: g.add_nodes(["n"], np.ones((1, 4), np.float32), tenants=["x", "y"]),
     ValueError, (), ["tenants has 2", "expected 1"]),
    ("ts_shorter_than_keys", "cos", lambda g: g.add_nodes(["n", "m"], np.ones((2, 4), np.float32), ts=[1]),
     ValueError, (), ["ts", "(2,)", "(1,)"]),
    ("ts_floats", "cos", lambda g: g.add_nodes(["n"], np.ones((1, 4), np.float32), ts=[1.5]),
     TypeError, (), ["ts", "integers", "float64"]),
    ("rels_shorter_than_edges", "cos", lambda g: g.add_edges(["a", "b"], ["b", "c"], rels=["r"]),
     ValueError, (), ["rels has 1", "expected 2"]),
    ("weights_longer_than_edges", "cos", lambda g: g.add_edges(["a"], ["b"], weights=[1.0, 2.0]),
     ValueError, (), ["weights has 2", "expected 1"]),
    ("props_not_json", "cos", lambda g: g.add_nodes(["n"], np.ones((1, 4), np.float32), props=[{"x": {1, 2}}]),
     vg.InvalidArgumentError, (ValueError,), ["props row 0", "JSON"]),
    ("ts_above_int64", "cos", lambda g: g.add_nodes(["n"], np.ones((1, 4), np.float32), ts=[2**63]),
     (ValueError, OverflowError, TypeError), (), ["ts", "int64"]),
    ("ts_uint64_above_int64", "ip",
     lambda g: g.add_nodes(["n"], np.ones((1, 4), np.float32), ts=np.array([2**64 - 1], dtype=np.uint64)),
     (ValueError, OverflowError, TypeError), (), ["ts", "int64"]),
    ("edge_ts_above_int64", "cos", lambda g: g.add_edges(["a"], ["b"], ts=[2**63]),
     (ValueError, OverflowError, TypeError), (), ["ts", "int64"]),
    ("edge_uint64_key_above_int64", "cos",
     lambda g: g.add_edges(np.array([1, 2**64 - 1], np.uint64), np.array([2, 1], np.uint64)),
     ValueError, (), ["src row 1", "int64 range"]),
    ("edge_int_array_key_missing", "cos",
     lambda g: g.add_edges(np.array([1, 2], np.int32), np.array([2, 3], np.int32)),
     vg.NotFoundError, (KeyError,), ["row 1", "dst key 3"]),
    ("edge_int_array_2d", "cos",
     lambda g: g.add_edges(np.array([[1, 2]]), np.array([[2, 1]])),
     ValueError, (), ["src", "1-dimensional", "(1, 2)"]),
    ("label_not_str", "cos", lambda g: g.add_nodes(["n"], np.ones((1, 4), np.float32), labels=[3]),
     TypeError, (), ["labels", "str", "int"]),
    ("texts_one_str", "cos", lambda g: g.add_nodes(["n", "m"], np.ones((2, 4), np.float32), texts="same text"),
     TypeError, (), ["texts", "list of 2 str", "got one str"]),
    ("edge_texts_one_str", "cos", lambda g: g.add_edges(["a"], ["b"], texts="why"),
     TypeError, (), ["texts", "list of 1 str", "got one str"]),
    # lookups
    ("get_node_missing", "cos", lambda g: g.get_node("zz"), vg.NotFoundError, (KeyError, vg.Error), ["'zz'", "not in the graph"]),
    ("get_node_missing_int", "cos", lambda g: g.get_node(-7), vg.NotFoundError, (KeyError,), ["-7", "not in the graph"]),
    ("neighbors_missing", "cos", lambda g: g.neighbors("zz"), vg.NotFoundError, (KeyError,), ["'zz'", "not in the graph"]),
    ("neighbors_missing_int", "ip", lambda g: g.neighbors(3, direction="in"),
     vg.NotFoundError, (KeyError,), ["3", "not in the graph"]),
    ("quantized_missing", "cos", lambda g: g.quantized(["a", "zz"]), vg.NotFoundError, (KeyError,), ["'zz'", "not in the graph"]),
]


@pytest.mark.parametrize("row", ERROR_ROWS, ids=[r[0] for r in ERROR_ROWS])
def test_bad_input_raises_and_leaves_graph_unchanged(row):
    _, metric, call, exc_type, also, fragments = row
    g = make_graph(metric)
    expect_error(g, call, exc_type, *fragments, also=also)
    # Still fully usable: a valid write and search after the failed call.
    g.add_nodes(["after"], np.array([[0.5, 0.5, 0.5, 0.5]], np.float32))
    assert len(g) == 6
    assert "after" in g
    assert "after" in g.search(np.array([0.5, 0.5, 0.5, 0.5], np.float32), k=6, seeds=6, exact=True).keys


def test_nothing_of_a_failed_node_batch_is_added():
    g = make_graph()
    vectors = np.array([[1, 2, 3, 4], [4, 3, 2, 1], [0, 0, np.nan, 0]], np.float32)
    expect_error(g, lambda g: g.add_nodes(["n1", "n2", "n3"], vectors), vg.InvalidArgumentError, "row 2")
    assert len(g) == 5
    for key in ("n1", "n2", "n3"):
        assert key not in g
        with pytest.raises(vg.NotFoundError):
            g.get_node(key)
    # Same keys, now valid: accepted (the failed batch left no trace in the key table).
    g.add_nodes(["n1", "n2", "n3"], vectors[:2].tolist() + [[1, 1, 1, 1]])
    assert len(g) == 8
    expect_error(g, lambda g: g.add_nodes(["m1", "m2", "m1"], np.ones((3, 4))), vg.DuplicateKeyError, "'m1'")
    assert "m1" not in g and "m2" not in g


def test_nothing_of_a_failed_edge_batch_is_added():
    g = make_graph()
    before = g.neighbors("a", direction="both")
    expect_error(g, lambda g: g.add_edges(["a", "a", "a"], ["b", "c", "missing"], rels="new"),
                 vg.NotFoundError, "row 2", "'missing'")
    expect_error(g, lambda g: g.add_edges(["a", "a"], ["b", "c"], weights=[1.0, float("nan")]),
                 vg.InvalidArgumentError, "row 1")
    assert g.count_edges == 5
    assert g.neighbors("a", direction="both") == before
    assert g.neighbors("a", rels=["new"]) == []
    assert g.stats()["rels"] == 2  # "r" and "s": the failed batch interned nothing


def test_integer_array_edge_keys_equal_the_same_keys_as_python_ints():
    # NumPy integer arrays are encoded from their buffer; every integer dtype gives the keys that
    # a list of the same Python ints gives, and str keys in an object array still work.
    rng = np.random.default_rng(3)
    keys = [-2**63, -5, 0, 7, 2**31 + 1, 2**63 - 1]
    pairs = rng.integers(0, len(keys), size=(40, 2))
    from_list, from_arrays = vg.Graph(DIM), vg.Graph(DIM)
    for g in (from_list, from_arrays):
        g.add_nodes(keys + ["s"], rng.normal(size=(len(keys) + 1, DIM)).astype(np.float32))
    src = [keys[i] for i in pairs[:, 0]]
    dst = [keys[i] for i in pairs[:, 1]]
    from_list.add_edges(src, dst, rels="r")
    from_arrays.add_edges(np.array(src, np.int64), np.array(dst, np.int64), rels="r")
    small = np.array([-5, 0, 7], np.int8)
    for dtype in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.uint64):
        src_small = small[small >= 0] if np.dtype(dtype).kind == "u" else small
        from_list.add_edges(src_small.tolist(), src_small[::-1].tolist(), rels=np.dtype(dtype).name)
        from_arrays.add_edges(src_small.astype(dtype), src_small[::-1].astype(dtype), rels=np.dtype(dtype).name)
    from_list.add_edges(["s", 7], [7, "s"], rels="mixed")
    from_arrays.add_edges(np.array(["s", 7], dtype=object), np.array([7, "s"], dtype=object), rels="mixed")
    assert from_arrays.count_edges == from_list.count_edges == 40 + 3 * 3 + 2 * 4 + 2
    for key in keys + ["s"]:
        got = from_arrays.neighbors(key, direction="both")
        assert got == from_list.neighbors(key, direction="both")
        assert all(type(k) in (int, str) for e in got for k in (e.src, e.dst))
    assert sorted(e.dst for e in from_arrays.neighbors(2**63 - 1, direction="out")) == sorted(
        d for s, d in zip(src, dst) if s == 2**63 - 1)
    assert from_arrays.delete_edges(np.array([-5], np.int64), np.array([7], np.int64), rels="int8") == 1


def test_integer_array_edge_keys_in_any_layout_survive_the_wal(tmp_path):
    # Integer key arrays reach the core as int64 values: strided, big-endian and small-dtype
    # arrays name the same nodes, the WAL carries the keys (a reopen replays them), and a large
    # uint64 array with one value past int64 names its row and adds nothing.
    rng = np.random.default_rng(8)
    n = 6000
    path = str(tmp_path / "g")
    g = vg.Graph.open(path, dim=DIM)
    g.add_nodes(np.arange(-n // 2, n // 2), rng.normal(size=(n, DIM)).astype(np.float32))
    src = rng.integers(-n // 2, n // 2, 2 * n)
    dst = rng.integers(-n // 2, n // 2, 2 * n)
    g.add_edges(src[::2], dst[::2], rels="strided")
    g.add_edges(src[1::2].astype(">i8"), dst[1::2].astype(">i8"), rels="big-endian")
    g.add_edges(np.array([-3, 4], np.int16), np.array([5, -6], np.int32), rels="small")
    g.add_edges([-3], np.array([5], np.uint8), rels="list+array")
    bad = np.abs(src).astype(np.uint64)
    bad[5000] = 2**63
    expect_error(g, lambda g: g.add_edges(bad, np.abs(dst).astype(np.uint64)), ValueError, "src row 5000", "int64")
    expect_error(g, lambda g: g.add_edges(np.array([1, n], np.int64), np.array([2, 3], np.int64)), vg.NotFoundError,
                 "row 1", f"src key {n}")
    for reopen in (False, True):
        if reopen:
            g.close()
            g = vg.Graph.open(path)
        assert g.count_edges == 2 * n + 3
        for k in rng.integers(-n // 2, n // 2, 40).tolist() + [-3]:
            want = sorted([("strided", int(d)) for s, d in zip(src[::2], dst[::2]) if s == k] +
                          [("big-endian", int(d)) for s, d in zip(src[1::2], dst[1::2]) if s == k] +
                          ([("small", 5), ("list+array", 5)] if k == -3 else []))
            assert sorted((e.rel, e.dst) for e in g.neighbors(k)) == want
        assert g.verify() == []
    g.close()


def test_masked_key_arrays_are_read_by_value_never_from_the_hidden_buffer():
    g = make_graph()
    src = np.ma.masked_array([1, 1, 2], mask=[False, True, False])
    dst = np.ma.masked_array([2, 2, 1], mask=[False, False, False])
    expect_error(g, lambda g: g.add_edges(src, dst), TypeError, "src", "row 1", "NoneType")
    assert g.count_edges == 5
    g.add_edges(np.ma.masked_array([1, 2]), np.ma.masked_array([2, 1]), rels="unmasked")
    assert [e.dst for e in g.neighbors(1, rels=["unmasked"])] == [2]


def test_a_large_edge_batch_reports_its_first_bad_row():
    # 65,536 edges or more per thread are checked on several threads, in row ranges: the error
    # is still the first bad row's, and nothing of the batch is added.
    g = vg.Graph(DIM, threads=2)
    g.add_nodes(["a", "b"], np.eye(2, DIM, dtype=np.float32))
    g.add_edges(["a"] * 5, ["b"] * 5)
    n = 200_000
    src, dst = ["a"] * n, ["b"] * n
    dst[150_001], dst[190_000] = "missing-1", "missing-2"
    expect_error(g, lambda g: g.add_edges(src, dst), vg.NotFoundError, "row 150001", "dst key 'missing-1'")
    src[120_000] = "gone"
    expect_error(g, lambda g: g.add_edges(src, dst), vg.NotFoundError, "row 120000", "src key 'gone'")
    src[5] = "first"
    expect_error(g, lambda g: g.add_edges(src, dst), vg.NotFoundError, "row 5", "src key 'first'")
    assert g.count_edges == 5
    g.add_edges(["a"] * n, ["b"] * n, weights=np.arange(n, dtype=np.float32))
    assert g.count_edges == 5 + n
    heaviest = g.neighbors("a", rels=[""])[0]
    assert (heaviest.dst, heaviest.weight) == ("b", n - 1)


def test_graph_constructor_errors():
    expect_error(None, lambda _: vg.Graph(4, "dot"), vg.InvalidArgumentError, "'cos', 'ip' or 'l2'", "'dot'",
                 also=(ValueError,))
    expect_error(None, lambda _: vg.Graph(0), vg.InvalidArgumentError, "dim must be >= 1", "got 0")
    expect_error(None, lambda _: vg.Graph(-2, "l2"), vg.InvalidArgumentError, "dim must be >= 1", "got -2")
    expect_error(None, lambda _: vg.Graph(4, connectivity=0), vg.InvalidArgumentError, "connectivity", "got 0")
    expect_error(None, lambda _: vg.Graph(2.5), TypeError, "dim must be an int", "float")
    expect_error(None, lambda _: vg.Graph(True), TypeError, "dim must be an int", "bool")
    expect_error(None, lambda _: vg.Graph(4, connectivity=1), vg.InvalidArgumentError, "connectivity must be >= 2",
                 "got 1")
    expect_error(None, lambda _: vg.Graph(4, auto_compact_edges=-1), vg.InvalidArgumentError,
                 "auto_compact_edges must be >= 0", "got -1")


def test_more_argument_errors_name_what_was_expected():
    import datetime

    g = make_graph()
    expect_error(g, lambda g: g.verify(limit=-1), vg.InvalidArgumentError, "limit must be >= 0", "got -1")
    expect_error(g, lambda g: g.hybrid_search(vector=np.ones(DIM), weights={"dense": 10**400}),
                 vg.InvalidArgumentError, "weights['dense'] must be a finite number >= 0", "an int of 1329 bits")
    expect_error(g, lambda g: g.hybrid_search(vector=np.ones(DIM), rrf_k=10**400),
                 vg.InvalidArgumentError, "rrf_k must be a finite real number", "an int of 1329 bits")
    expect_error(g, lambda g: g.hybrid_search(vector=np.ones(DIM), weights={"dense": "1"}),
                 TypeError, "weights['dense'] must be a real number >= 0", "got str '1'")
    expect_error(g, lambda g: g.add_nodes(["n"], np.ones((1, DIM)), ts=object()), TypeError,
                 "ts must be an int or a list of 1 ints", "datetimes or dates", "got object")
    expect_error(g, lambda g: g.add_nodes(["n"], np.ones((1, DIM)), ts=[datetime.date(2024, 1, 1), datetime.time(1)]),
                 ValueError, "ts must have shape (1,)", "got (2,)")
    expect_error(g, lambda g: g.add_nodes(["n", "m"], np.ones((2, DIM)), ts=[datetime.date(2024, 1, 1), datetime.time(1)]),
                 TypeError, "ts[1] must be an int", "a datetime or a date", "got time")
    expect_error(g, lambda g: g.add_nodes(["n"], np.ones((1, DIM)), ts=True), TypeError,
                 "ts must be an int or a list of 1 ints", "got bool")
    error = expect_error(g, lambda g: g.search(QUERY, hop_decay=-2.25), vg.InvalidArgumentError, "hop_decay")
    assert str(error).endswith("must be a finite number > 0, got -2.25")  # as written, not -2.250000


# ----------------------------------------------------------------------------- not errors


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_zero_vector_allowed_under_ip_and_l2(metric):
    g = make_graph(metric)
    g.add_nodes(["zero"], np.zeros((1, 4), np.float32))
    assert len(g) == 6
    codes, scales = g.quantized(["zero"])
    assert codes.tolist() == [[0, 0, 0, 0]] and scales.tolist() == [0.0]
    res = g.search(QUERY, k=10, seeds=10, hops=0, exact=True)
    score = dict(zip(res.keys, res.scores.tolist()))["zero"]
    if metric == "ip":
        assert score == 0.0
    else:  # -(|q|^2 + 0 - 0): minus the query's squared norm (of its int8 approximation)
        q_codes, q_scales = vg.quantize(QUERY[None], "l2")
        sq = np.float32(np.float32(int(np.sum(q_codes.astype(np.int64) ** 2))) * q_scales[0]) * q_scales[0]
        assert score == -sq
    zero_query = g.search(np.zeros(4, np.float32), k=3, exact=True)
    assert len(zero_query) == 3


@pytest.mark.parametrize("metric", ["l2", "ip", "cos"])
def test_huge_finite_vectors_never_give_nan_scores(metric):
    """Finite vectors are accepted; then no score may be NaN (NaN breaks the best-first order).
    Under l2 an unbounded sq_norm = float(sum code^2) * scale * scale would overflow float32 for
    |x| >~ 1.5e19 and give -((inf + inf) - 2 * inf) = NaN; such vectors are rejected instead."""
    g = vg.Graph(2, metric)
    big = np.array([[1e20, 0], [0, 1e20], [1e19, 1e19], [1, 0]], np.float32)
    try:
        g.add_nodes(["a", "b", "c", "d"], big)
    except vg.InvalidArgumentError as exc:  # rejecting them would be fine too, if it says why
        assert "row 0" in str(exc)
        assert len(g) == 0
        return
    for query in ([1e20, 0], [1, 0], [1e19, 1e19]):
        res = g.search(np.array(query, np.float32), k=4, seeds=4, hops=0, exact=True)
        assert len(res) == 4
        assert not np.any(np.isnan(res.scores)), f"query {query}: keys {res.keys}, scores {res.scores.tolist()}"
        scores = res.scores.tolist()
        assert all(a >= b for a, b in zip(scores, scores[1:])), f"not best first: {scores}"


def test_one_weight_for_every_edge_of_a_batch():
    g = make_graph()
    g.add_edges(["a", "b"], ["c", "a"], rels="w", weights=2)  # int: the scalar fast path
    g.add_edges(["c"], [2], rels="w", weights=np.float32(0.25))  # NumPy scalar: the general path
    weights = {(e.src, e.dst): e.weight for k in ["a", "b", "c"] for e in g.neighbors(k, rels=["w"])}
    assert weights == {("a", "c"): 2.0, ("b", "a"): 2.0, ("c", 2): 0.25}
    g.add_edges(["b", "c"], ["c", "b"], rels="tenth", weights=0.1)  # rounded as float32 rounds it
    assert [e.weight for e in g.neighbors("b", rels=["tenth"], direction="both")] == [float(np.float32(0.1))] * 2
    for too_big in (1e39, -1e300, float("nan"), 10**40, -10**400):  # beyond float32, or NaN: refused by name
        expect_error(g, lambda g: g.add_edges(["a"], ["b"], weights=too_big), vg.InvalidArgumentError,
                     "weight is", "weights must be finite")
    expect_error(g, lambda g: g.add_edges(["a", "b"], ["b", "a"], weights=[1.0, 1e300]), vg.InvalidArgumentError,
                 "weights row 1 has 1e+300, beyond float32's range", "weights are stored as float32")
    for flag in (True, np.bool_(False), [True, False], np.array([True, False])):  # a bool is no weight, as for ts
        expect_error(g, lambda g: g.add_edges(["a", "b"], ["b", "a"], weights=flag), TypeError, "weights", "bool")


def test_empty_graph_search_is_empty():
    g = vg.Graph(DIM, "cos")
    res = g.search(QUERY, k=10, hops=2)
    assert len(res) == 0 and res.keys == [] and res.paths == []
    assert len(g) == 0 and g.count_edges == 0
    assert "a" not in g


def test_k_larger_than_reachable_gives_fewer_results():
    g = make_graph()
    res = g.search(QUERY, k=50, seeds=1, hops=1, direction="out", exact=True)
    # best seed for QUERY under cos is node 1 ([1, 1, 0, 0]); out: 1 -> 2
    assert res.keys == [1, 2]
    assert list(res.hops) == [0, 1]
    assert len(res.scores) == 2


def test_unknown_label_matches_nothing_and_unknown_rel_gives_only_seeds():
    g = make_graph()
    res = g.search(QUERY, k=10, seeds=2, hops=3, labels=["no-such-label"], exact=True)
    assert len(res) == 0 and res.count_seeds == 0
    res = g.search(QUERY, k=10, seeds=2, hops=3, tenants=["no-such-tenant"], exact=True)
    assert len(res) == 0
    res = g.search(QUERY, k=10, seeds=2, hops=3, rels=["no-such-rel"], exact=True)
    assert len(res) == 2 and list(res.hops) == [0, 0] and res.paths == [[], []]
    assert res.keys == g.search(QUERY, k=2, seeds=2, hops=0, exact=True).keys
    res = g.search(QUERY, k=10, seeds=2, hops=3, rels=[], exact=True)
    assert len(res) == 2 and list(res.hops) == [0, 0]
    res = g.search(QUERY, k=10, seeds=2, hops=3, labels=[], exact=True)
    assert len(res) == 0
    # A known label among unknown ones still matches.
    res = g.search(QUERY, k=10, seeds=5, hops=0, labels=["nope", "y"], exact=True)
    assert sorted(map(str, res.keys)) == ["1", "b"]


def test_unicode_keys_round_trip_exactly():
    nfc = unicodedata.normalize("NFC", "café")
    nfd = unicodedata.normalize("NFD", "café")
    assert nfc != nfd and len(nfc) == 4 and len(nfd) == 5
    g = vg.Graph(2, "cos")
    g.add_nodes([nfc, nfd], np.array([[1.0, 0.0], [0.0, 1.0]], np.float32), labels=[nfd, nfc])
    g.add_edges([nfc], [nfd], rels=[nfd])
    assert len(g) == 2
    assert nfc in g and nfd in g and "cafe" not in g
    assert g.get_node(nfc)["key"].encode("utf-8") == nfc.encode("utf-8")
    assert g.get_node(nfd)["key"].encode("utf-8") == nfd.encode("utf-8")
    assert g.get_node(nfc)["label"].encode("utf-8") == nfd.encode("utf-8")
    assert g.get_node(nfc)["vector"].tolist() == [1.0, 0.0]
    assert g.get_node(nfd)["vector"].tolist() == [0.0, 1.0]
    res = g.search(np.array([1.0, 0.0], np.float32), k=2, seeds=1, hops=1, exact=True)
    assert [k.encode("utf-8") for k in res.keys] == [nfc.encode("utf-8"), nfd.encode("utf-8")]
    (edge,) = res.paths[1]
    assert edge.src.encode() == nfc.encode() and edge.dst.encode() == nfd.encode() and edge.rel.encode() == nfd.encode()
    assert g.search(np.array([1.0, 0.0], np.float32), k=2, seeds=1, hops=1, rels=[nfc], exact=True).keys == [nfc]
    assert g.search(np.array([0.0, 1.0], np.float32), k=2, seeds=2, hops=0, labels=[nfc], exact=True).keys == [nfd]


SPECIAL_KEYS = ['say "hi"', "it's", "back\\slash", "\\", "\U0001f600", "\U0001f468\u200d\U0001f469", "", " ",
                "nul\x00inside", "0", "-1", 0, -1, 1, 2**63 - 1, -(2**63), "tab\tnew\nline"]


def test_special_keys_round_trip():
    g = vg.Graph(3, "l2")
    n = len(SPECIAL_KEYS)
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(n, 3)).astype(np.float32)
    g.add_nodes(SPECIAL_KEYS, vectors)
    assert len(g) == n
    chain_src, chain_dst = SPECIAL_KEYS[:-1], SPECIAL_KEYS[1:]
    g.add_edges(chain_src, chain_dst, rels="next")
    for i, key in enumerate(SPECIAL_KEYS):
        assert key in g
        got = g.get_node(key)["key"]
        assert type(got) is type(key) and got == key
        if isinstance(key, str):
            assert got.encode("utf-8") == key.encode("utf-8")
    # str "0" and int 0 are different keys; so are "-1" and -1.
    assert g.get_node("0")["vector"].tolist() != g.get_node(0)["vector"].tolist()
    res = g.search(vectors[0], k=n, seeds=1, hops=n, direction="out", exact=True)
    assert sorted(map(repr, res.keys)) == sorted(map(repr, SPECIAL_KEYS))
    for key, path in zip(res.keys, res.paths):
        i = SPECIAL_KEYS.index(key) if not isinstance(key, int) else next(
            j for j, k in enumerate(SPECIAL_KEYS) if type(k) is int and k == key)
        assert edge_tuples([path])[0] == [(SPECIAL_KEYS[j], "next", SPECIAL_KEYS[j + 1], 1.0) for j in range(i)]
        assert all(type(e.src) is type(SPECIAL_KEYS[j]) for j, e in enumerate(path))
    assert [e.dst for e in g.neighbors(2**63 - 1)] == [-(2**63)]
    assert [e.src for e in g.neighbors(-(2**63), direction="in")] == [2**63 - 1]
    # NumPy integers are int keys too.
    assert np.int64(-1) in g and g.get_node(np.int64(2**63 - 1))["key"] == 2**63 - 1


@pytest.mark.parametrize("probe, expected", [
    ("a", True), (1, True), (2, True), (np.int32(2), True),
    ("zz", False), (3, False), (-1, False), ("1", False),
    (1.0, False), (2.5, False), (float("nan"), False), (True, False), (False, False), (None, False),
    (b"a", False), (2**64, False), (-(2**70), False), (("a",), False), (["a"], False), ({"a": 1}, False),
    ("\ud800", False),
])
def test_contains_never_raises(probe, expected):
    g = make_graph()
    assert (probe in g) is expected


@pytest.mark.parametrize("metric", ["ip", "l2"])
def test_vectors_too_small_for_a_normal_int8_scale_are_refused(metric):
    """Under ip and l2 a row is quantized with 127 / max|x|, which overflows float32 below
    max|x| ~ 1.5e-36 (every code would become +-127); such rows are refused by row, an all-zero
    row is fine (codes 0, scale 0), and cos (which normalises first) takes any finite non-zero row."""
    g = vg.Graph(4, metric)
    tiny = np.array([[1.0, 0, 0, 0], [2e-37, 0.0, 1e-37, -5e-38]], np.float32)
    with pytest.raises(vg.InvalidArgumentError, match=r"row 1 has largest \|value\| 2e-37; metric '"
                                                      + metric + r"' needs at least 1.5e-36"):
        g.add_nodes(["a", "b"], tiny)
    assert len(g) == 0  # the batch left no trace
    with pytest.raises(vg.InvalidArgumentError, match="row 0 has largest"):
        vg.quantize(tiny[1:], metric)
    codes, scales = vg.quantize(np.array([[1.6e-36, 0, 8e-37, -4e-37], [0, 0, 0, 0]], np.float32), metric)
    assert codes.tolist() == [[127, 0, 64, -32], [0, 0, 0, 0]]  # 63.5 rounds half to even
    assert scales[1] == 0 and np.isclose(scales[0], 1.6e-36 / 127, rtol=1e-6)
    g.add_nodes(["zero", "one"], np.array([[0, 0, 0, 0], [1, 0, 0, 0]], np.float32))
    with pytest.raises(vg.InvalidArgumentError, match="largest"):
        g.search(np.float32(1e-37) * np.array([1, 0, 0, 0.1], np.float32), k=2)
    cos_codes, _ = vg.quantize(tiny[1:], "cos")
    assert cos_codes.tolist() == [[127, 0, 64, -32]]


def _quantize_reference(x: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """vg.quantize's documented rule in NumPy: float32 arithmetic after (cos) a float64
    normalisation whose squares are summed in row order."""
    codes = np.zeros(x.shape, np.int8)
    scales = np.zeros(x.shape[0], np.float32)
    for r, row in enumerate(x):
        if metric == "cos":
            norm = np.sqrt(np.cumsum(row.astype(np.float64) ** 2)[-1])
            row = (row.astype(np.float64) / norm).astype(np.float32)
        top = np.max(np.abs(row))
        if top == 0:
            continue
        scales[r] = top / np.float32(127)
        factor = np.float32(127) / top
        codes[r] = np.clip(np.rint(row * factor), -127, 127).astype(np.int8)
    return codes, scales


@pytest.mark.parametrize("metric", ["cos", "ip", "l2"])
def test_quantize_follows_its_documented_rule_bit_for_bit(metric):
    rng = np.random.default_rng(31)
    rows = [rng.standard_normal((300, 97)), rng.integers(-254, 255, (300, 16)) / 2.0,   # exact .5 steps
            rng.uniform(-1, 1, (300, 5)) * 10.0 ** rng.uniform(-30, 15, (300, 1))]
    for x in rows:
        x = x.astype(np.float32)
        x[np.all(x == 0, axis=1), 0] = 1
        codes, scales = vg.quantize(x, metric)
        want_codes, want_scales = _quantize_reference(x, metric)
        assert np.array_equal(codes, want_codes)
        assert scales.view(np.uint32).tolist() == want_scales.view(np.uint32).tolist()


def test_flags_of_hybrid_search_and_delete_tenant_must_be_bools():
    """parallel= and allow_default_tenant= take True or False (numpy.bool_ too); before, "no"
    and None were read for their truthiness, and allow_default_tenant was checked only for "".
    A refused call deletes nothing."""
    g = vg.Graph(2)
    g.add_nodes(["a", "b"], [[1, 0], [0, 1]], texts=["red apple", "green pear"], tenants=["t", ""])
    for bad in ("no", None, 1):
        with pytest.raises(TypeError) as raised:
            g.hybrid_search("apple", k=1, parallel=bad)
        assert str(raised.value) == f"parallel must be True or False, got {type(bad).__name__}"
        for tenant in ("t", ""):
            with pytest.raises(TypeError) as raised:
                g.delete_tenant(tenant, allow_default_tenant=bad)
            assert str(raised.value) == f"allow_default_tenant must be True or False, got {type(bad).__name__}"
    assert len(g) == 2
    assert g.hybrid_search("apple", k=1, parallel=np.bool_(False)).keys == ["a"]
    assert g.delete_tenant("t", allow_default_tenant=np.bool_(False)) == 1
    assert g.delete_tenant("", allow_default_tenant=True) == 1 and len(g) == 0


def test_props_nested_too_deeply_and_hybrid_result_index_give_clear_errors():
    g = vg.Graph(2)
    g.add_nodes(["a"], [[1, 0]], texts=["red apple"])
    deep: dict = {}
    inner = deep
    for _ in range(5000):
        inner["x"] = {}
        inner = inner["x"]
    with pytest.raises(vg.InvalidArgumentError, match=r"props row 1 is nested too deeply to store as JSON"):
        g.add_nodes(["b", "c"], [[0, 1], [1, 1]], props=[None, deep])  # before, a bare RecursionError
    assert len(g) == 1 and "b" not in g
    res = g.hybrid_search("apple", k=1)
    assert res[0].key == "a" and res[-1].key == "a"
    with pytest.raises(IndexError) as raised:
        res[5]
    assert str(raised.value) == "result index 5 out of range for 1 hits"


def test_open_with_a_path_that_is_no_path_names_what_came(tmp_path):
    for bad, text in ((None, "NoneType None"), (5, "int 5")):
        with pytest.raises(TypeError) as raised:
            vg.Graph.open(bad, dim=4)
        assert str(raised.value) == f"path must be a non-empty str or os.PathLike, got {text}"
    with pytest.raises(vg.InvalidArgumentError) as raised:
        vg.Graph.open(str(tmp_path / "a\x00b"), dim=4)
    assert str(raised.value).startswith("path must not contain a NUL character, got ")
    assert list(tmp_path.iterdir()) == []
