"""vecgraph.arguments: the checks and conversions every Graph call applies to its arguments."""

from __future__ import annotations

import numpy as np

import vecgraph as vg


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

    @settings(max_examples=800, deadline=None)
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
    assert list(inspect.signature(vg.Graph.checkpoint).parameters) == ["self"]
    if sys.version_info < (3, 11):  # before 3.11 these messages name the code object, not the qualname
        return
    with pytest.raises(TypeError, match=r"^Graph\.hybrid_search\(\) got an unexpected keyword argument 'bogus'$"):
        g.hybrid_search("x", bogus=1)
    with pytest.raises(TypeError, match=r"^Graph\.open\(\) missing 1 required positional argument: 'path'$"):
        vg.Graph.open()
    with pytest.raises(TypeError, match=r"^Graph\.add_aliases\(\) missing 1 required positional argument: 'aliases'$"):
        g.add_aliases("a")
