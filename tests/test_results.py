"""vecgraph.results: search and hybrid results, read lazily from the graph and pickled with what they read."""

from __future__ import annotations

import numpy as np

import vecgraph as vg
from test_hybrid import team, unit


def test_a_search_result_pickles_with_its_paths():
    import pickle

    g = vg.Graph(3)
    g.add_nodes(["a", "b", "c"], np.eye(3, dtype=np.float32) + 0.1)
    g.add_edges(["a", "b"], ["b", "c"], rels=["r", "s"], weights=[1.0, 2.0])
    q = np.array([1, 0.1, 0.1], np.float32)
    res = g.search(q, k=3, seeds=1, hops=2)
    batch = g.search_batch(np.stack([q, q]), k=3, seeds=1, hops=2)
    copied = pickle.loads(pickle.dumps(res))
    copied_batch = pickle.loads(pickle.dumps(batch))
    g.close()  # the copies need no graph
    assert copied.keys == res.keys == ["a", "b", "c"]
    np.testing.assert_array_equal(copied.scores, res.scores)
    assert copied.scores.dtype == np.float32 and list(copied.hops) == [0, 1, 2]
    assert copied.paths[2] == [vg.graph.Edge("a", "r", "b", 1.0), vg.graph.Edge("b", "s", "c", 2.0)] and copied.paths == res.paths
    assert list(copied) == list(res) and (copied.count_seeds, copied.count_visited) == (1, 3)
    assert [r.keys for r in copied_batch] == [res.keys] * 2 and copied_batch[1].paths == res.paths
    assert repr(copied) == repr(res)


def test_a_result_pickles_with_what_to_context_reads():
    import pickle

    g = team()
    g.add_edges(["orion"], ["ada"], rels=["inspired_by"], texts=["named for her notes"])  # not walked
    res = g.hybrid_search("Who leads Orion?", vector=unit(0, 0, 1, 0), k=4)
    context = res.to_context(max_tokens=10_000)
    assert "[orion --inspired_by--> ada] named for her notes" in context.splitlines()
    copied = pickle.loads(pickle.dumps(res))
    g.delete_nodes(["ada"])  # the copy keeps the graph as it was when pickled; the result reads it live
    assert "[ada]" not in res.to_context(max_tokens=10_000)
    g.close()
    assert copied.hits == res.hits and copied.edges == res.edges and copied.keys == res.keys
    assert copied.channels == res.channels and copied.lists == res.lists
    assert copied.to_context(max_tokens=10_000) == context
    assert pickle.loads(pickle.dumps(copied)).to_context(max_tokens=10_000) == context
    small = copied.to_context(max_tokens=12)
    assert 0 < len(small) < len(context) and context.startswith(small)


def test_a_search_result_pickled_under_its_former_module_loads():
    """A SearchResult pickled when its module was vecgraph.graph names
    vecgraph.graph._search_result_from_state; it still loads, paths included."""
    import pickle

    g = vg.Graph(3)
    g.add_nodes(["a", "b"], np.eye(3, dtype=np.float32)[:2] + 0.1)
    g.add_edges(["a"], ["b"], rels=["r"])
    res = g.search(np.array([1, 0.1, 0.1], np.float32), k=2, seeds=1, hops=1)
    data = pickle.dumps(res, protocol=0)
    assert b"cvecgraph.results\n_search_result_from_state\n" in data
    former = data.replace(b"cvecgraph.results\n_search_result_from_state\n", b"cvecgraph.graph\n_search_result_from_state\n")
    copied = pickle.loads(former)
    assert copied.keys == ["a", "b"] and copied.paths == [[], [vg.graph.Edge("a", "r", "b", 1.0)]]
