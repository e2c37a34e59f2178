"""Filterable properties: typed columns read from each node's props, ``where`` evaluated inside
the seed search and the traversal, checked against a plain-Python reference on random props
(including escapes, Unicode and nesting; a batch giving a declared property a value of the
wrong type is refused whole)."""

from __future__ import annotations

import datetime
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import vecgraph as vg

from conftest import examples

DECLARED = {"status": "str", "year": "int64", "price": "float64", "at": "timestamp"}


def reference_typed(kind: str, value) -> bool:
    """Whether ``value`` is of a filterable property's declared type, written plainly."""
    if kind == "str":
        return isinstance(value, str)
    if kind == "float64":
        return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
    return (isinstance(value, int) and not isinstance(value, bool)) or (
        isinstance(value, float) and value.is_integer())


def reference_accepts(props) -> bool:
    """A write takes props whose declared properties are missing, None or of their type."""
    return not props or all(props.get(name) is None or reference_typed(kind, props.get(name))
                            for name, kind in DECLARED.items())


def reference_passes(props: dict, where: dict) -> bool:
    """The documented semantics, written plainly."""
    for name, condition in where.items():
        kind = DECLARED[name]
        value = props.get(name) if props else None
        if not reference_typed(kind, value):
            return False
        if not isinstance(condition, dict):
            condition = {"in": condition} if isinstance(condition, list) else {"==": condition}
        for op, operand in condition.items():
            if op == "==" and not value == operand:
                return False
            if op == "in" and value not in operand:
                return False
            if op == ">" and not value > operand:
                return False
            if op == ">=" and not value >= operand:
                return False
            if op == "<" and not value < operand:
                return False
            if op == "<=" and not value <= operand:
                return False
    return True


json_scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-50, 50), st.floats(-50, 50, allow_nan=False),
    st.text(alphabet=st.sampled_from(list('ab"\\/\n\té中😀') + ["\u2028"]), max_size=4),
    st.sampled_from(["current", "old"]),
)
props_strategy = st.one_of(
    st.none(),
    st.dictionaries(
        st.sampled_from(["status", "year", "price", "at", "other", "stat\"us"]),
        st.one_of(json_scalars, st.lists(json_scalars, max_size=2),
                  st.dictionaries(st.sampled_from(["status", "year"]), json_scalars, max_size=2)),
        max_size=5,
    ),
)
conditions = st.one_of(
    st.fixed_dictionaries({"status": st.one_of(st.sampled_from(["current", "old", "a", '"']),
                                               st.lists(st.sampled_from(["current", "old", "é中"]), max_size=3))}),
    st.fixed_dictionaries({"year": st.one_of(
        st.integers(-50, 50), st.lists(st.integers(-5, 5), max_size=3),
        st.dictionaries(st.sampled_from([">", ">=", "<", "<="]), st.integers(-50, 50), min_size=1, max_size=2))}),
    st.fixed_dictionaries({"price": st.dictionaries(st.sampled_from([">", ">=", "<", "<="]),
                                                    st.floats(-50, 50, allow_nan=False), min_size=1, max_size=2)}),
)


@settings(max_examples=examples(150), deadline=None)
@given(props=st.lists(props_strategy, min_size=1, max_size=40), where=conditions, seed=st.integers(0, 1000))
def test_where_matches_the_reference_on_random_props(props, where, seed):
    rng = np.random.default_rng(seed)
    n = len(props)
    g = vg.Graph(dim=4, filterable=DECLARED)
    if not all(reference_accepts(p) for p in props):
        first = next(row for row, p in enumerate(props) if not reference_accepts(p))
        with pytest.raises(vg.InvalidArgumentError, match=rf"^props row {first} \(key {first}\): filterable property"):
            g.add_nodes(list(range(n)), rng.normal(size=(n, 4)), props=props)
        assert len(g) == 0
        # The same rows with the mistyped values left out.
        props = [p if reference_accepts(p) else {name: value for name, value in p.items()
                                                  if name not in DECLARED or reference_typed(DECLARED[name], value)}
                 for p in props]
    g.add_nodes(list(range(n)), rng.normal(size=(n, 4)), props=props)
    expected = {i for i, p in enumerate(props) if reference_passes(p, where)}
    for exact in (True, False):
        found = g.search(rng.normal(size=4), k=n, seeds=n, hops=0, exact=exact, ef=n, where=where).keys
        assert set(found) == expected
    # Upserting every node with the props shifted by one re-derives every column.
    shifted = props[1:] + props[:1]
    g.upsert_nodes(list(range(n)), rng.normal(size=(n, 4)), props=shifted)
    expected = {i for i, p in enumerate(shifted) if reference_passes(p, where)}
    found = g.search(rng.normal(size=4), k=n, seeds=n, hops=0, exact=True, where=where).keys
    assert set(found) == expected


def test_a_filter_admitting_3_of_100000_returns_those_3():
    rng = np.random.default_rng(1)
    n = 100_000
    props = [{"status": "current" if i % 2 else "old", "year": 2000 + i % 20} for i in range(n)]
    for i in (11, 55_555, 99_998):
        props[i] = {"status": "rare", "year": 1990}
    g = vg.Graph(dim=8, filterable={"status": str, "year": int})
    g.add_nodes(list(range(n)), rng.normal(size=(n, 8)), props=props)
    g.add_edges(list(range(0, n - 1, 2)), list(range(1, n, 2)), rels="next")
    q = rng.normal(size=8)
    for where in ({"status": "rare"}, {"year": {"<": 1995}}, {"status": ["rare"], "year": 1990}):
        assert sorted(g.search(q, k=10, where=where).keys) == [11, 55_555, 99_998]
        assert sorted(g.search(q, k=10, where=where, exact=True).keys) == [11, 55_555, 99_998]
        batch = g.search_batch(np.stack([q, -q]), k=10, where=where)
        assert [sorted(r.keys) for r in batch] == [[11, 55_555, 99_998]] * 2


@pytest.mark.parametrize("filter_scan_max_nodes", [0, 10_000])
def test_searches_in_a_row_with_different_filters_each_see_only_their_own(filter_scan_max_nodes):
    # A search context keeps its filter masks from one search to the next and unsets only the
    # flags it set: a flag left over from an earlier search would admit foreign nodes.
    import reference

    rng = np.random.default_rng(3)
    n, n_tenants, n_labels, n_topics = 600, 300, 12, 40
    keys = [f"m{i}" for i in range(n)]
    tenants = [f"user-{rng.integers(n_tenants)}" for _ in range(n)]
    labels = [f"kind-{rng.integers(n_labels)}" for _ in range(n)]
    topics = [f"topic-{rng.integers(n_topics)}" for _ in range(n)]
    g = vg.Graph(dim=16, filterable={"topic": str}, filter_scan_max_nodes=filter_scan_max_nodes)
    g.add_nodes(keys, rng.normal(size=(n, 16)), labels=labels, tenants=tenants, props=[{"topic": t} for t in topics])
    model = reference.build_model(g, keys, labels, tenants, [0] * n, [])
    admitted_total = 0
    for step in range(300):
        q = rng.normal(size=16)
        scores = reference.score_all(model, q)
        named_tenants = [f"user-{rng.integers(n_tenants)}" for _ in range(rng.integers(1, 6))]
        named_labels = [f"kind-{rng.integers(n_labels)}" for _ in range(rng.integers(1, 4))]
        named_topics = [f"topic-{rng.integers(n_topics)}" for _ in range(rng.integers(1, 8))]
        use = rng.integers(1, 8)  # which of the three filters this search sets (bits)
        kwargs = {}
        admitted = np.ones(n, dtype=bool)
        if use & 1:
            kwargs["tenants"] = named_tenants
            admitted &= np.isin(tenants, named_tenants)
        if use & 2:
            kwargs["labels"] = named_labels
            admitted &= np.isin(labels, named_labels)
        if use & 4:
            kwargs["where"] = {"topic": named_topics}
            admitted &= np.isin(topics, named_topics)
        # No edges and hops=0: the result is the best 10 admitted nodes by score (id breaks ties).
        order = sorted(np.flatnonzero(admitted), key=lambda i: (-scores[i], i))[:10]
        want = [keys[i] for i in order]
        got = g.search(q, k=10, seeds=10, hops=0, ef=n, **kwargs)
        assert got.keys == want, (step, kwargs)
        assert g.search(q, k=10, seeds=10, hops=0, exact=True, **kwargs).keys == want
        admitted_total += int(admitted.sum())
    assert 300 < admitted_total < 300 * n // 4  # the filters admit some nodes and reject most


def test_filters_apply_during_traversal():
    g = vg.Graph(dim=2, filterable={"status": "str"})
    g.add_nodes(["a", "b", "c"], [[1, 0], [0.9, 0.1], [0, 1]],
                props=[{"status": "current"}, {"status": "old"}, {"status": "current"}])
    g.add_edges(["a", "b"], ["b", "c"], rels="next")
    everything = g.search([1, 0], k=3, seeds=1, hops=2)
    assert everything.keys == ["a", "b", "c"]
    # b is rejected, so c (reached only through b) is not reached either.
    assert g.search([1, 0], k=3, seeds=1, hops=2, where={"status": "current"}).keys == ["a"]


def test_timestamps_and_time_windows():
    g = vg.Graph(dim=2, filterable={"published": datetime.datetime})
    day = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)
    g.add_nodes(["old", "new", "none"], [[1, 0], [1, 0.1], [1, 0.2]],
                props=[{"published": day - datetime.timedelta(days=30)}, {"published": day}, {"published": None}],
                ts=[1_000_000, 2_000_000, 3_000_000])
    assert g.get_node("new")["props"]["published"] == 1_714_521_600_000_000  # stored as microseconds
    assert g.search([1, 0], k=3, where={"published": {">=": day - datetime.timedelta(days=1)}}).keys == ["new"]
    assert g.search([1, 0], k=3, where={"published": {"<": datetime.date(2024, 5, 1)}}).keys == ["old"]
    assert g.search([1, 0], k=3, since=2_000_000).keys == ["new", "none"]
    assert g.search([1, 0], k=3, until=datetime.datetime(1970, 1, 1, 0, 0, 2)).keys == ["old", "new"]
    with pytest.raises(vg.InvalidArgumentError, match="give since or ts_min, not both"):
        g.search([1, 0], since=1, ts_min=1)


def test_filterable_persists_and_is_fixed_at_creation(tmp_path):
    declared = {"status": "str", "n": "int64"}
    g = vg.Graph.open(tmp_path / "g", dim=2, filterable=declared)
    g.add_nodes(["a", "b"], [[1, 0], [0, 1]], props=[{"status": "x", "n": 1}, {"status": "y", "n": 2}])
    g.checkpoint()
    g.add_nodes(["c"], [[1, 1]], props=[{"status": "x", "n": 3}])  # WAL only
    g.close()
    g = vg.Graph.open(tmp_path / "g")
    assert g.filterable == declared
    assert sorted(g.search([1, 0], k=3, where={"status": "x"}).keys) == ["a", "c"]
    assert g.search([1, 0], k=3, where={"n": {">": 1}, "status": "x"}).keys == ["c"]
    g.close()
    with pytest.raises(vg.InvalidArgumentError, match="fixed when a graph is created"):
        vg.Graph.open(tmp_path / "g", filterable={"status": "str"})
    g = vg.Graph.open(tmp_path / "g", filterable=declared)
    from vecgraph import snapshot

    snapshot.export(g, tmp_path / "out")
    g.close()
    restored = snapshot.restore(tmp_path / "out", tmp_path / "r")
    assert restored.filterable == declared
    assert sorted(restored.search([1, 0], k=3, where={"status": "x"}).keys) == ["a", "c"]
    restored.close()


def test_bad_declarations_and_conditions():
    with pytest.raises(vg.InvalidArgumentError, match="type must be 'str', 'int64', 'float64' or 'timestamp'"):
        vg.Graph(dim=2, filterable={"x": "date"})
    with pytest.raises(TypeError, match="filterable must be a dict"):
        vg.Graph(dim=2, filterable=["x"])
    g = vg.Graph(dim=2, filterable={"status": "str", "n": "int64"})
    g.add_nodes(["a"], [[1, 0]], props=[{"status": "x", "n": 1}])
    with pytest.raises(vg.InvalidArgumentError, match=r"'nope' is not a filterable property; declared: status \(str\), n \(int64\)"):
        g.search([1, 0], where={"nope": 1})
    with pytest.raises(vg.InvalidArgumentError, match="takes values, not a range"):
        g.search([1, 0], where={"status": {">": "a"}})
    with pytest.raises(vg.InvalidArgumentError, match="must be a number for a int64 property"):
        g.search([1, 0], where={"n": "1"})
    with pytest.raises(vg.InvalidArgumentError, match="operators are"):
        g.search([1, 0], where={"n": {"between": [1, 2]}})
    with pytest.raises(vg.InvalidArgumentError, match="must be finite"):
        g.search([1, 0], where={"n": {"<": math.inf}})
    for bad, text in ((5, "int 5"), ("x", "str 'x'"), (np.int64(5), f"int64 {np.int64(5)!r}")):  # "in" takes a list
        for call in (lambda: g.search([1, 0], where={"n": {"in": bad}}),
                     lambda: g.search_batch([[1, 0]], where={"n": {"in": bad}}),
                     lambda: g.hybrid_search(vector=[1, 0], where={"n": {"in": bad}})):
            with pytest.raises(vg.InvalidArgumentError) as raised:
                call()
            assert str(raised.value) == f"where['n']['in'] must be a list of values, got {text}"
    assert g.search([1, 0], where={"status": []}).keys == []  # an empty membership admits nothing
    assert g.search([1, 0], where={"n": []}).keys == []
    assert g.search([1, 0], where={"n": {">": 0.5}}).keys == ["a"]  # a real bound on an int property
    for bad in ("\ud800", ["x", "\udfff"]):  # a lone surrogate: a typed error naming it, as for tenants
        with pytest.raises(vg.InvalidArgumentError, match=r"where\['status'\].*is not valid Unicode"):
            g.search([1, 0], where={"status": bad})
    # Any iterable that is not a str is a membership, like tenants= and labels=.
    for values in (np.array(["x", "y"]), {"x": 1, "y": 2}.keys(), (v for v in ["x"]), ["y"]):
        assert g.search([1, 0], where={"status": values}).keys == (["a"] if not isinstance(values, list) else [])
    assert g.search([1, 0], where={"n": np.arange(3)}).keys == ["a"]
    assert g.search([1, 0], where={"n": np.int64(1)}).keys == ["a"]  # a NumPy scalar is one value


def test_admitted_keys_lists_what_admits_admits_in_node_order():
    """Engine.admitted_keys against Engine.admits over every key, on random labels, tenants,
    ts and props with deleted nodes: the same keys, in node order, by the member-list path
    (a label or tenant filter) and by the row scan; None once more than `limit` are admitted."""
    from vecgraph.arguments import _where

    rng = np.random.default_rng(11)
    n = 3000
    keys = [i if i % 2 else f"n{i}" for i in range(n)]
    g = vg.Graph(dim=4, filterable={"year": "int64"})
    g.add_nodes(keys, rng.normal(size=(n, 4)), labels=[f"l{i % 5}" for i in range(n)],
                tenants=[f"t{i % 37}" for i in range(n)], ts=[int(t) for t in rng.integers(0, 1000, n)],
                props=[{"year": int(y)} if y % 9 else {} for y in rng.integers(1990, 2030, n)])
    g.delete_nodes(keys[::13])
    lo, hi = -2**63, 2**63 - 1
    cases = [(None, None, lo, hi, {"year": {"<": 2000}}), (["l1"], None, lo, hi, None),
             (["l1", "l3"], ["t2", "t5", "t30"], lo, hi, {"year": {">=": 2010}}),
             (None, ["t4"], 200, 700, None), (None, None, lo, hi, None), (["nobody"], None, lo, hi, None)]
    for labels, tenants, ts_min, ts_max, where in cases:
        conditions = _where(where, g._filterable)
        flags = g._engine.admits(keys, labels, tenants, ts_min, ts_max, conditions)
        expected = [key for key, ok in zip(keys, flags) if ok]
        assert g._engine.admitted_keys(labels, tenants, ts_min, ts_max, conditions, n) == expected
        assert g._engine.admitted_keys(labels, tenants, ts_min, ts_max, conditions, len(expected)) == expected
        if expected:
            assert g._engine.admitted_keys(labels, tenants, ts_min, ts_max, conditions, len(expected) - 1) is None
    assert len(g._engine.admitted_keys(None, None, lo, hi, None, n)) == len(g)


def _wal_bytes(folder) -> dict:
    wal = folder / "wal"
    return {p.name: p.read_bytes() for p in sorted(wal.iterdir())}


@pytest.mark.parametrize("write", ["add_nodes", "upsert_nodes"])
@pytest.mark.parametrize("on_disk", [False, True])
def test_a_value_of_the_wrong_type_for_a_filterable_property_refuses_the_whole_batch(tmp_path, on_disk, write):
    declared = {"year": int, "price": float, "at": "timestamp", "status": str}
    folder = tmp_path / "g"
    g = vg.Graph.open(folder, dim=2, filterable=declared) if on_disk else vg.Graph(2, filterable=declared)
    g.add_nodes(["a", "b"], [[1, 0], [0, 1]],
                props=[{"year": 2020, "price": 1.5, "at": 10, "status": "x"}, {"year": 2021, "status": "y"}])
    before = {"len": len(g), "a": g.get_node("a")["props"],
              "hits": g.search([1, 0], k=5, where={"year": {">=": 0}}).keys}
    wal = _wal_bytes(folder) if on_disk else None
    keys = ["c", "a"] if write == "upsert_nodes" else ["c", "d"]  # an upsert would replace a
    with pytest.raises(vg.InvalidArgumentError) as raised:
        getattr(g, write)(keys, [[1, 1], [1, 0.5]], props=[{"year": 2022}, {"year": "2023", "status": "z"}])
    assert str(raised.value) == (
        f"props row 1 (key {keys[1]!r}): filterable property 'year' is declared int64, got str '2023'; "
        "a filterable property takes a value of its declared type, or None for no value")
    assert len(g) == before["len"] and "c" not in g
    assert g.get_node("a")["props"] == before["a"]
    assert g.search([1, 0], k=5, where={"year": {">=": 0}}).keys == before["hits"] == ["a", "b"]
    if on_disk:
        assert _wal_bytes(folder) == wal
        g.add_nodes(["e"], [[0.5, 0.5]], props=[{"year": 2024}])  # the graph stays writable
        g.close()
        g = vg.Graph.open(folder)
        assert len(g) == 3 and "c" not in g and "d" not in g and "e" in g
        assert g.get_node("a")["props"] == before["a"]
        assert sorted(g.search([1, 0], k=5, where={"year": {">=": 0}}).keys) == ["a", "b", "e"]
        g.close()


@pytest.mark.parametrize("props, message", [
    ({"status": 5}, "filterable property 'status' is declared str, got int 5"),
    ({"status": ["x"]}, "filterable property 'status' is declared str, got list ['x']"),
    ({"year": "2021"}, "filterable property 'year' is declared int64, got str '2021'"),
    ({"year": True}, "filterable property 'year' is declared int64, got bool True"),
    ({"year": 1.5}, "filterable property 'year' is declared int64, got float 1.5, which is not an integer "
                    "within ±9.2e18"),
    ({"year": 2**63}, f"filterable property 'year' is declared int64, got int {2**63} outside the int64 range"),
    ({"year": {"v": 1}}, "filterable property 'year' is declared int64, got dict {'v': 1}"),
    ({"price": "1.5"}, "filterable property 'price' is declared float64, got str '1.5'"),
    ({"price": np.bool_(False)}, "filterable property 'price' is declared float64, got bool False"),
    ({"price": 10**400}, "filterable property 'price' is declared float64, got int " + "1" + "0" * 56 + "..., which is not finite in float64"),
    ({"at": "2024-05-01"}, "filterable property 'at' is declared timestamp, got str '2024-05-01'"),
    ({"at": 2.5}, "filterable property 'at' is declared timestamp, got float 2.5, which is not an integer"),
])
def test_each_declared_type_refuses_values_of_another_type(props, message):
    g = vg.Graph(2, filterable=DECLARED)
    with pytest.raises(vg.InvalidArgumentError) as raised:
        g.add_nodes(["k"], [[1, 0]], props=[props])
    assert str(raised.value).startswith(f"props row 0 (key 'k'): {message}")
    assert len(g) == 0


def test_values_of_the_declared_type_none_and_missing_are_taken():
    g = vg.Graph(2, filterable=DECLARED)
    day = datetime.datetime(2024, 5, 1, tzinfo=datetime.timezone.utc)
    g.add_nodes(["typed", "integral", "numpy", "none", "missing", "no-props"], np.ones((6, 2)),
                props=[{"status": "x", "year": 2020, "price": 3, "at": day},
                       {"year": 2021.0, "price": 1.5, "at": datetime.date(2024, 5, 1)},
                       {"status": np.str_("x"), "year": np.int64(2022), "price": np.float32(2.5), "at": np.int64(7)},
                       {"status": None, "year": None, "price": None, "at": None},
                       {"other": "anything", "nested": {"year": "not declared at the top"}},
                       None])
    assert len(g) == 6
    assert g.get_node("none")["props"] == {"status": None, "year": None, "price": None, "at": None}

    def found(where):
        return sorted(g.search([1, 1], k=10, seeds=10, exact=True, where=where).keys)

    assert found({"year": {">=": 0}}) == ["integral", "numpy", "typed"]
    assert found({"year": 2021}) == ["integral"]
    assert found({"price": {">": 2}}) == ["numpy", "typed"]
    assert found({"status": "x"}) == ["numpy", "typed"]
    assert found({"at": {">=": day}}) == ["integral", "typed"]


def test_numpy_datetime64_props_are_microseconds_whatever_their_unit():
    """A datetime64 props value is stored as microseconds since the epoch like a datetime, for
    ns, us, s and D units (.item() of an ns value is an int of nanoseconds); NaT is no value."""
    g = vg.Graph(dim=2, filterable={"at": "timestamp"})
    stamps = [np.datetime64("2024-01-02T03:04:05.123456789", "ns"), np.datetime64("2024-01-02T03:04:05.123456", "us"),
              np.datetime64("2024-01-02T03:04:05", "s"), np.datetime64("2024-01-02", "D"), np.datetime64("NaT")]
    g.add_nodes(list("abcde"), np.ones((5, 2)), props=[{"at": s} for s in stamps])
    base = 1_704_153_600_000_000  # 2024-01-02T00:00:00Z in microseconds
    expected = [base + 11_045_123_456, base + 11_045_123_456, base + 11_045_000_000, base, None]
    assert [g.get_node(key)["props"]["at"] for key in "abcde"] == expected
    found = g.search(np.ones(2), k=5, where={"at": {">=": datetime.datetime(2024, 1, 2, 3, 4, 5)}}, exact=True).keys
    assert sorted(found) == ["a", "b", "c"]
    with pytest.raises(vg.InvalidArgumentError, match=r"declared int64, got datetime64 (np|numpy)\.datetime64\(.2024-01-02.\)"):
        vg.Graph(dim=2, filterable={"year": "int64"}).add_nodes(["x"], np.ones((1, 2)),
                                                                props=[{"year": np.datetime64("2024-01-02")}])


def test_unknown_filter_names_match_nothing_and_strict_refuses_them():
    """A rel, label or tenant name the graph never held matches nothing (the semantics stay);
    unknown_names lists such names, and search(strict=True) / search_batch(strict=True)
    raise naming them, while known names (also ones no live node uses any more) pass."""
    g = vg.Graph(3)
    g.add_nodes(["a", "b", "c"], np.eye(3, dtype=np.float32) + 0.1, labels=["person", "org", "person"],
                tenants=["t1", "t1", "t2"])
    g.add_edges(["a"], ["b"], rels=["works_at"])
    g.delete_nodes(["c"])  # "t2" is no live node's tenant now, but the graph held it
    q = np.array([1, 0.1, 0.1], np.float32)
    assert g.unknown_names("labels", ["person", "robot", "org", "alien"]) == ["robot", "alien"]
    assert g.unknown_names("tenants", "t2") == [] and g.unknown_names("rels", ["knows"]) == ["knows"]
    assert g.search(q, k=3, labels=["robot"]).keys == []
    assert g.search(q, k=3, labels=["person", "robot"], strict=False).keys == ["a"]
    with pytest.raises(vg.InvalidArgumentError, match=r"^labels names 'robot', which the graph has never held"):
        g.search(q, k=3, labels=["person", "robot"], strict=True)
    with pytest.raises(vg.InvalidArgumentError, match=r"^rels names 'knows', which the graph has never held"):
        g.search_batch(np.stack([q, q]), k=3, rels="knows", strict=True)
    with pytest.raises(vg.InvalidArgumentError, match=r"^tenants names 'nobody'"):
        g.search(q, k=3, tenants=["t1", "nobody"], strict=True)
    assert g.search(q, k=3, labels=["person", "org"], tenants=["t1", "t2"], rels=["works_at"], strict=True).keys == ["a", "b"]
    with pytest.raises(TypeError, match="strict must be True or False, got str"):
        g.search(q, strict="yes")
    with pytest.raises(vg.InvalidArgumentError, match="kind must be 'labels', 'tenants' or 'rels'"):
        g.unknown_names("label", ["x"])


def test_strict_bounds_at_the_ends_of_int64_admit_nothing_past_them():
    """``> 2**63 - 1`` and ``< -2**63`` leave no int64 value: they admit nothing, not the node
    that holds the end value (a bound is not clamped into int64 before it is made strict)."""
    g = vg.Graph(2, filterable={"y": int, "t": "timestamp"})
    top, bottom = 2**63 - 1, -(2**63)
    g.add_nodes(["max", "min", "zero"], np.array([[1.0, 0.1], [0.1, 1.0], [1.0, 1.0]]),
                props=[{"y": top, "t": top}, {"y": bottom, "t": bottom}, {"y": 0, "t": 0}])
    for where, expected in (({"y": {">": top}}, []), ({"y": {">=": top}}, ["max"]),
                            ({"y": {"<": bottom}}, []), ({"y": {"<=": bottom}}, ["min"]),
                            ({"y": {">": top - 1}}, ["max"]), ({"y": {"<": bottom + 1}}, ["min"]),
                            ({"t": {">": top}}, []), ({"y": {">": top, "in": [top, 0]}}, []),
                            ({"y": {">": -1, "<": 1}}, ["zero"])):
        assert g.keys(where=where) == expected, where
        assert sorted(g.search(np.array([1.0, 1.0]), k=3, where=where, exact=True).keys) == expected, where
