"""vecgraph.arguments: the checks and conversions every Graph call applies to its arguments."""

from __future__ import annotations

import numpy as np
import pytest

import vecgraph as vg

from conftest import examples


def _outcome(fn, *args):
    """(True, result with each item's type) or (False, exception type and message)."""
    try:
        result = fn(*args)
    except Exception as exc:  # noqa: BLE001 - the two paths must fail alike
        return False, (type(exc), str(exc))
    return True, tuple((type(item), item) for item in result)


def test_search_argument_fast_path_equals_the_checked_path():
    """vecgraph.arguments._search_args takes the common call (plain ints, no filters) in one expression; for
    every mix of plain, unusual and bad values it returns what the full checks return, or raises
    the same error."""
    from hypothesis import given, settings, strategies as st

    graph = vg.Graph(4)
    ints = st.one_of(st.integers(-3, 3000), st.sampled_from([2**63 - 1, 2**63, -(2**63), -(2**63) - 1, True, False]),
                     st.builds(np.int64, st.integers(0, 50)), st.sampled_from([2.0, "3", None]))
    optional_ints = st.one_of(st.none(), ints)
    names = st.one_of(st.none(), st.sampled_from(["a", ["a", "b"], ("x",), [], 3, [1]]))
    directions = st.sampled_from(["out", "in", "both", "BOTH", "", None, b"out", 1])
    decays = st.one_of(st.floats(allow_nan=True, allow_infinity=True), st.sampled_from([1, 0, True, "1", None]),
                       st.builds(np.float32, st.floats(0, 1, width=32)))
    flags = st.sampled_from([True, False, np.bool_(True), 0, 1, None, "yes"])
    times = st.one_of(st.none(), st.sampled_from([0, -5, 2**63, 1.5]))

    common = (10, 8, 2, 2000, 256, "both", None, None, None, None, None, 1.0, False, None)
    odd = (ints, ints, ints, ints, ints, directions, names, names, names, times, times, decays, flags, optional_ints)
    plain = st.integers(0, 5000)  # plain ints near the common call's

    @settings(max_examples=examples(800), deadline=None)
    @given(data=st.data())
    def check(data):
        # The common call with a few positions changed: most draws stay near the fast path's edge.
        args = list(common)
        for position in (0, 1, 2, 3, 4, 13):
            if data.draw(st.booleans()):
                args[position] = data.draw(plain)
        for position in data.draw(st.lists(st.integers(0, len(common) - 1), max_size=2)):
            args[position] = data.draw(odd[position])
        fast, checked = _outcome(vg.arguments._search_args, *args), _outcome(vg.arguments._search_args_checked, *args)
        if fast[0] or checked[0]:
            assert fast == checked
        else:
            assert fast[1][0] is checked[1][0] and fast[1][1] == checked[1][1]

    check()
    # The common call itself takes the fast path and gives the core's tuple.
    assert graph._search_args(10, 8, 2, 2000, 256, "both", None, None, None, None, None, 1.0, False, None) == (
        10, 8, 2, 2000, 256, "both", None, None, None, -(2**63), 2**63 - 1, 1.0, False, 0)


def test_methods_defined_beside_their_concern_are_named_as_graph_methods():
    """Graph methods whose code lives in folder.py, hybrid.py, entities.py and embedders.py carry
    Graph's names: TypeError messages, signatures and qualnames read as for any other method."""
    import inspect
    import sys

    import pytest

    g = vg.Graph(4)
    for name in ("open", "checkpoint", "hybrid_search", "hybrid_search_batch", "add_aliases", "aliases",
                 "use_embedder", "embed_query"):
        method = getattr(vg.Graph, name)
        assert (method.__name__, method.__qualname__, method.__module__) == (name, f"Graph.{name}", "vecgraph.graph")
    assert list(inspect.signature(vg.Graph.checkpoint).parameters) == ["self", "keep_history"]
    if sys.version_info < (3, 11):  # before 3.11 these messages name the code object, not the qualname
        return
    with pytest.raises(TypeError, match=r"^Graph\.hybrid_search\(\) got an unexpected keyword argument 'bogus'$"):
        g.hybrid_search("x", bogus=1)
    with pytest.raises(TypeError, match=r"^Graph\.open\(\) missing 1 required positional argument: 'path'$"):
        vg.Graph.open()
    with pytest.raises(TypeError, match=r"^Graph\.add_aliases\(\) missing 1 required positional argument: 'aliases'$"):
        g.add_aliases("a")


def _none_in_list(name: str, row: int, whole: str) -> str:
    return f"{name}[{row}] must be a str, got None (None inside the list is refused; {name}=None {whole})"


_DEFAULT = 'gives every row the default ""'
_TS_NONE = ("ts[{row}] must be an int (microseconds since the epoch), a datetime or a date, got None "
            "(None inside the list is refused; ts=None gives every row the default 0)")


def test_none_inside_a_column_of_a_write_is_refused_naming_the_row_and_changes_nothing(tmp_path):
    """None inside a list of labels, texts, tenants, rels or timestamps is no value: the write is
    refused whole with a TypeError naming the argument, the row, a str (or timestamp) expected
    and None come, and the graph, its WAL and its BM25 index keep nothing of it. Before,
    tenants=[None] wrote the default tenant "" (and labels, texts, rels likewise)."""
    import datetime

    import pytest

    with vg.Graph.open(tmp_path / "g", dim=2) as g:
        g.add_nodes(["a", "b"], [[1, 0], [0, 1]], tenants=["t", "t"], texts=["red apple", "green pear"])
        g.add_edges(["a"], ["b"], rels=["r"])
        assert g.hybrid_search("apple", k=5, channels=["bm25"], tenants=["t"]).keys == ["a"]  # the index is in use
        before = (len(g), g.count_edges, g.stats()["last_lsn"])
        one, two = [[1, 1]], [[1, 1], [1, 2]]
        calls = [
            (lambda: g.add_nodes(["z", "y"], two, tenants=["t", None]), _none_in_list("tenants", 1, _DEFAULT)),
            (lambda: g.add_nodes(["z"], one, tenants=[None], texts=["zebra"]), _none_in_list("tenants", 0, _DEFAULT)),
            (lambda: g.add_nodes(["z", "y"], two, labels=(None, "x")), _none_in_list("labels", 0, _DEFAULT)),
            (lambda: g.add_nodes(["z"], one, texts=[None]), _none_in_list("texts", 0, _DEFAULT)),
            (lambda: g.upsert_nodes(["a", "z"], two, tenants=["t", None], texts=["zebra", "zebra"]),
             _none_in_list("tenants", 1, _DEFAULT)),
            (lambda: g.add_nodes(["z", "y"], two, ts=[5, None]), _TS_NONE.format(row=1)),
            (lambda: g.add_nodes(["z", "y"], two, ts=[datetime.date(2024, 1, 1), None]), _TS_NONE.format(row=1)),
            (lambda: g.add_nodes(["z"], one, ts=np.array([None], dtype=object)), _TS_NONE.format(row=0)),
            (lambda: g.add_edges(["a", "b"], ["b", "a"], rels=["r", None]), _none_in_list("rels", 1, _DEFAULT)),
            (lambda: g.add_edges(["a"], ["b"], texts=[None]), _none_in_list("texts", 0, _DEFAULT)),
            (lambda: g.add_edges(["a"], ["b"], ts=[None]), _TS_NONE.format(row=0)),
            (lambda: g.delete_edges(["a"], ["b"], rels=[None]),
             _none_in_list("rels", 0, "deletes the edges of every relation")),
            (lambda: g.add_nodes(["z"], one, labels=[7]), "labels[0] must be a str, got int 7"),
        ]
        for call, message in calls:
            with pytest.raises(TypeError) as raised:
                call()
            assert str(raised.value) == message
            assert (len(g), g.count_edges, g.stats()["last_lsn"]) == before
        assert "z" not in g and g.get_node("a", vector=False)["tenant"] == "t"
        assert g.hybrid_search("zebra", k=5, channels=["bm25"]).keys == []
        assert [(e.rel, e.dst) for e in g.neighbors("a")] == [("r", "b")]
    with vg.Graph.open(tmp_path / "g") as g:  # the WAL holds none of the refused writes
        assert (len(g), g.count_edges, g.stats()["last_lsn"]) == before
        assert g.hybrid_search("zebra", k=5, channels=["bm25"]).keys == []
        # The whole argument None gives every row the default; "" in a list spells it out; props
        # keep None per row (no props), as documented.
        g.add_nodes(["c", "d"], [[1, 1], [1, 2]], labels=None, texts=None, tenants=None, ts=None,
                    props=[None, {"x": 1}])
        g.add_nodes(["e", "f"], [[2, 1], [3, 1]], labels=["", "l"], texts=["", "zebra"], tenants=["", "t"],
                    ts=[0, 7])
        g.add_edges(["c"], ["d"], rels=None)
        g.add_edges(["d"], ["e"], rels=[""], texts=[""], ts=[3], props=[None])
        node = g.get_node("c", vector=False)
        assert (node["label"], node["tenant"], node["text"], node["ts"], node["props"]) == ("", "", "", 0, None)
        assert g.get_node("d", vector=False)["props"] == {"x": 1}
        assert (g.get_node("f", vector=False)["tenant"], g.get_node("f", vector=False)["ts"]) == ("t", 7)
        assert sorted(g.search([1, 1], k=10, tenants=[""], hops=0, exact=True).keys) == ["c", "d", "e"]
        assert sorted(g.search([1, 1], k=10, tenants=None, hops=0, exact=True).keys) == list("abcdef")
        assert sorted(g.search([1, 1], k=10, labels=[""], hops=0, exact=True).keys) == list("abcde")
        assert [(e.rel, e.dst) for e in g.neighbors("c")] == [("", "d")]
        assert [(e.rel, e.dst) for e in g.neighbors("d", rels=[""])] == [("", "e")]
        assert g.hybrid_search("zebra", k=5, channels=["bm25"]).keys == ["f"]


def test_none_inside_a_filter_is_refused_naming_its_position():
    """Reads follow the writes' rule: None inside rels, labels or tenants is refused with a
    TypeError naming the argument, the position, a str expected and None come; the whole
    argument None means no filter."""
    import pytest

    g = vg.Graph(2)
    g.add_nodes(["a", "b"], [[1, 0], [0, 1]], tenants=["t", ""], texts=["red apple", "green pear"])
    g.add_edges(["a"], ["b"], rels="r")
    no_filter = "means no filter"
    calls = [
        (lambda: g.search([1, 0], tenants=["t", None]), _none_in_list("tenants", 1, no_filter)),
        (lambda: g.search([1, 0], labels=[None]), _none_in_list("labels", 0, no_filter)),
        (lambda: g.search([1, 0], rels=("r", None)), _none_in_list("rels", 1, no_filter)),
        (lambda: g.search([1, 0], tenants=[None], strict=True), _none_in_list("tenants", 0, no_filter)),
        (lambda: g.search_batch([[1, 0]], tenants=[None]), _none_in_list("tenants", 0, no_filter)),
        (lambda: g.hybrid_search("apple", vector=[1, 0], tenants=[None]), _none_in_list("tenants", 0, no_filter)),
        (lambda: g.hybrid_search("apple", labels=["x", None]), _none_in_list("labels", 1, no_filter)),
        (lambda: g.hybrid_search("apple", vector=[1, 0], rels=[None]), _none_in_list("rels", 0, no_filter)),
        (lambda: g.hybrid_search_batch(["apple"], tenants=[None]), _none_in_list("tenants", 0, no_filter)),
        (lambda: g.neighbors("a", rels=[None]), _none_in_list("rels", 0, no_filter)),
        (lambda: g.unknown_names("tenants", ["t", None]), _none_in_list("tenants", 1, no_filter)),
        (lambda: g.search([1, 0], tenants=[b"t"]), "tenants[0] must be a str, got bytes b't'"),
        (lambda: g.hybrid_search("apple", entity_keys=[None]), "entity_keys[0] must be a label (str), got None"),
        (lambda: g.add_aliases("a", ["apple", None]), "aliases[1] must be a str, got None"),
    ]
    for call, message in calls:
        with pytest.raises(TypeError) as raised:
            call()
        assert str(raised.value) == message
    assert g.aliases("a") == []
    assert g.search([1, 0], k=2, tenants=None, hops=0, exact=True).keys == ["a", "b"]
    assert g.search([1, 0], k=2, tenants=[""], hops=0, exact=True).keys == ["b"]
    assert g.hybrid_search("apple", k=2, tenants=["t"], channels=["bm25"]).keys == ["a"]


def test_none_keys_vectors_and_nat_timestamps_are_refused_by_name_and_change_nothing():
    import pandas as pd

    g = vg.Graph(4)
    one = np.ones((1, 4), np.float32)
    with pytest.raises(TypeError, match=r"keys must be a list, tuple or array of keys \(str or int\), got NoneType"):
        g.add_nodes(None, one)
    with pytest.raises(TypeError, match="keys must be a list, tuple or array of keys .*got int"):
        g.update_nodes(5, texts=["x"])
    with pytest.raises(TypeError, match=r"vectors must be a numeric array of shape \(n, dim\), got None"):
        g.add_nodes(["a"], None)
    with pytest.raises(vg.InvalidArgumentError, match="ts holds NaT; every row needs a timestamp"):
        g.add_nodes(["a"], one, ts=pd.NaT)
    with pytest.raises(vg.InvalidArgumentError, match=r"ts\[1\] holds NaT"):
        g.add_nodes(["a", "b"], np.ones((2, 4)), ts=[pd.Timestamp("2024-01-01"), pd.NaT])
    with pytest.raises(vg.InvalidArgumentError, match="ts holds NaT at row 1"):
        g.add_nodes(["a", "b"], np.ones((2, 4)), ts=pd.Series(pd.to_datetime(["2024-01-01", None])))
    assert len(g) == 0
    # A pandas Series or DatetimeIndex of datetime64 values is taken as the array it holds.
    g.add_nodes(["a", "b"], np.ones((2, 4)), ts=pd.Series(pd.to_datetime(["2024-01-01", "2024-01-02"])))
    g.add_nodes(["c"], one, ts=pd.DatetimeIndex(["2024-01-03"]))
    day = 86_400_000_000
    assert [g.get_node(k, vector=False)["ts"] for k in "abc"] == [1704067200000000 + i * day for i in range(3)]


def test_a_none_weight_is_refused_naming_its_row_and_adds_no_edge():
    g = vg.Graph(4)
    g.add_nodes(["a", "b"], np.ones((2, 4), np.float32))
    with pytest.raises(TypeError, match=r"weights\[1\] must be a number, got None .*weights=None gives every edge"):
        g.add_edges(["a", "b"], ["b", "a"], weights=[1.0, None])
    assert g.count_edges == 0
    g.add_edges(["a"], ["b"], weights=None)
    assert [e.weight for e in g.neighbors("a")] == [1.0]


def test_finite_reals_converts_real_arrays_and_names_the_first_bad_row():
    from vecgraph.arguments import _finite_reals

    out = _finite_reals(np.array([[1, 2], [3, 4]], np.int32), "v")
    assert out.dtype == np.float64 and out.tolist() == [[1.0, 2.0], [3.0, 4.0]]
    assert _finite_reals([], "v").shape == (0,) and _finite_reals(np.zeros((0, 3)), "v").shape == (0, 3)
    with pytest.raises(vg.InvalidArgumentError, match=r"^weight must be finite, got nan in edge 2$"):
        _finite_reals([0.5, 1.0, float("nan"), float("inf")], "weight", "edge")
    with pytest.raises(vg.InvalidArgumentError, match=r"^v must be finite, got -inf in row 1$"):
        _finite_reals([[1.0, 2.0], [0.0, -np.inf]], "v")
    for bad in (np.array([True, False]), np.array([1 + 2j]), np.array(["a"]), np.array([None], object)):
        with pytest.raises(TypeError, match=f"v must hold real numbers, got dtype {bad.dtype}"):
            _finite_reals(bad, "v")
