"""Results out and listing: SearchResult/HybridResult .to_dicts(), .to_arrow(), .to_pandas(),
SearchResult.to_context(); Graph.nodes(); the awaitable calls of vecgraph.aio. Each checked
against a slow reference built from get_node and the result's own fields."""

from __future__ import annotations

import asyncio
import json
import pickle
import threading

import numpy as np
import pyarrow as pa
import pytest

import vecgraph as vg
from vecgraph import aio
from vecgraph.results import estimate_tokens, path_text


def _graph(n: int = 60, seed: int = 3) -> vg.Graph:
    rng = np.random.default_rng(seed)
    g = vg.Graph(8, filterable={"year": "int"})
    keys = [f"k{i}" for i in range(n)]
    g.add_nodes(keys, rng.normal(size=(n, 8)), texts=[f"text number {i} about topic {i % 5}" for i in range(n)],
                labels=[["doc", "note"][i % 2] for i in range(n)], tenants=[f"t{i % 3}" for i in range(n)],
                ts=[1_000_000 * i for i in range(n)],
                props=[{"year": 2000 + i % 7, "tag": f"g{i % 4}"} if i % 5 else None for i in range(n)])
    src = rng.integers(0, n, 150)
    dst = rng.integers(0, n, 150)
    g.add_edges([keys[i] for i in src], [keys[j] for j in dst], rels=[["a", "b"][i % 2] for i in range(150)])
    return g


def _reference_row(g: vg.Graph, key, score: float) -> dict:
    node = g.get_node(key, vector=False)
    return {"key": key, "score": score, "label": node["label"], "tenant": node["tenant"], "text": node["text"]}


def test_search_result_rows_match_the_graph():
    g = _graph()
    q = np.random.default_rng(1).normal(size=8)
    res = g.search(q, k=15, seeds=3, hops=2)
    rows = res.to_dicts()
    assert len(rows) == 15
    for row, hit in zip(rows, res):
        ref = _reference_row(g, hit.key, float(hit.score))
        assert row["hop"] == hit.hop == len(hit.path)
        assert row["path"] == path_text(hit.path)
        assert {k: row[k] for k in ("key", "score", "label", "tenant", "text")} == \
            {k: ref[k] for k in ("key", "score", "label", "tenant", "text")}
    table = res.to_arrow()
    assert table.schema.names == ["key", "score", "hop", "path", "label", "tenant", "text"]
    assert table.schema.field("score").type == pa.float32() and table.schema.field("hop").type == pa.int32()
    assert table.column("key").to_pylist() == res.keys
    assert np.array_equal(table.column("score").to_numpy(), res.scores)
    frame = res.to_pandas()
    assert list(frame["key"]) == res.keys and list(frame["text"]) == [r["text"] for r in rows]


def test_path_text_chains_edges_and_separates_a_break():
    E = vg.results.Edge
    assert path_text([]) == ""
    assert path_text([E("a", "r", "b", 1.0), E("b", "s", "c", 1.0)]) == "a --r--> b --s--> c"
    assert path_text([E("a", "r", "b", 1.0), E("c", "s", "b", 1.0)]) == "a --r--> b; c --s--> b"


def test_rows_of_deleted_nodes_int_keys_and_pickles():
    g = vg.Graph(2)
    g.add_nodes([1, 2, 3], np.array([[1, 0], [0.9, 0.1], [0, 1]]), texts=["one", "two", "three"])
    res = g.search(np.array([1.0, 0.0]), k=3)
    table = res.to_arrow()
    assert table.schema.field("key").type == pa.int64() and table.column("key").to_pylist() == [1, 2, 3]
    assert res.to_dicts()[1]["text"] == "two"  # read once, kept
    fresh = g.search(np.array([1.0, 0.0]), k=3)
    g.delete_nodes([2])
    rows = {r["key"]: r for r in fresh.to_dicts()}  # first read after the delete
    assert rows[2]["text"] is None and rows[1]["text"] == "one" and res.to_dicts()[1]["text"] == "two"
    again = pickle.loads(pickle.dumps(g.search(np.array([1.0, 0.0]), k=3)))
    assert [r["text"] for r in again.to_dicts()] == ["one", "three"]
    g.add_nodes(["s"], np.array([[1.0, 0.0]]))
    mixed = g.search(np.array([1.0, 0.0]), k=3).to_arrow()
    assert mixed.schema.field("key").type == pa.string() and sorted(mixed.column("key").to_pylist()) == ["1", "3", "s"]


def test_search_result_context_fits_its_budget_and_lists_the_best_first():
    g = _graph()
    res = g.search(np.random.default_rng(2).normal(size=8), k=10, seeds=2, hops=2)
    full = res.to_context(100_000)
    lines = full.split("\n")
    hit_lines = [line for line in lines if not line.startswith("  via ")]
    assert hit_lines == [f"[{r['key']}] ({r['label']}) {r['text']}" for r in res.to_dicts()]
    assert sum(1 for line in lines if line.startswith("  via ")) == sum(1 for h in res if h.hop > 0)
    for budget in (5, 20, 50, 120):
        text = res.to_context(budget)
        used = sum(estimate_tokens(line) for line in text.split("\n")) + text.count("\n") if text else 0
        assert used <= budget
        assert all(line in lines for line in text.split("\n") if text)
    with pytest.raises(vg.InvalidArgumentError, match="max_tokens must be an int >= 1"):
        res.to_context(0)


def test_hybrid_rows_have_a_rank_per_channel():
    g = _graph()
    q = np.random.default_rng(4).normal(size=8)
    res = g.hybrid_search("topic 3", q, k=8)
    rows = res.to_dicts()
    for row, hit in zip(rows, res.hits):
        assert row["key"] == hit.key and row["score"] == hit.score and row["hop"] == len(hit.path)
        for channel in res.channels:
            assert row[f"rank_{channel}"] == hit.ranks[channel]
            in_list = [k for k in res.lists[channel]]
            assert (hit.key in in_list) == (hit.ranks[channel] is not None)
        node = g.get_node(hit.key, vector=False)
        assert (row["label"], row["tenant"], row["text"]) == (node["label"], node["tenant"], node["text"])
    table = res.to_arrow()
    assert table.schema.names == ["key", "score", "rank_dense", "rank_bm25", "rank_graph", "rank_entity", "hop",
                                  "path", "label", "tenant", "text"]
    assert table.column("rank_dense").to_pylist() == [r["rank_dense"] for r in rows]
    assert res.to_pandas().shape == (len(rows), 11)
    frozen = pickle.loads(pickle.dumps(res))
    assert frozen.to_dicts() == rows


def _reference_nodes(g: vg.Graph, keys: list) -> list:
    out = []
    for key in keys:
        node = g.get_node(key)
        out.append(node)
    return out


def test_nodes_lists_what_the_filters_admit_as_get_node_gives_it():
    g = _graph()
    for filters in ({}, {"tenants": ["t1"]}, {"labels": ["doc"], "where": {"year": {">=": 2003}}},
                    {"since": 10_000_000, "until": 20_000_000}, {"tenants": ["nobody"]}):
        table = g.nodes(**filters)
        keys = g.keys(**filters)
        assert table.column("key").to_pylist() == keys
        reference = _reference_nodes(g, keys)
        assert table.column("text").to_pylist() == [n["text"] for n in reference]
        assert table.column("tenant").to_pylist() == [n["tenant"] for n in reference]
        assert table.column("label").to_pylist() == [n["label"] for n in reference]
        assert [int(t.timestamp() * 1_000_000) for t in table.column("ts").to_pylist()] == [n["ts"] for n in reference]
        assert [json.loads(p) if p else None for p in table.column("props").to_pylist()] == \
            [n["props"] for n in reference]
    keys = g.keys(tenants=["t2"])
    table = g.nodes(tenants=["t2"], columns=["vector", "key", "year", "tag", "aliases"], limit=7)
    assert table.schema.names == ["vector", "key", "year", "tag", "aliases"] and table.num_rows == 7
    reference = _reference_nodes(g, keys[:7])
    assert np.allclose(np.array(table.column("vector").to_pylist()), np.array([n["vector"] for n in reference]),
                       atol=0, rtol=1e-6)
    assert table.column("year").to_pylist() == [(n["props"] or {}).get("year") for n in reference]
    assert table.column("tag").to_pylist() == [(n["props"] or {}).get("tag") for n in reference]
    assert table.column("aliases").to_pylist() == [[] for _ in reference]


def test_nodes_refuses_bad_columns_and_limits():
    g = _graph(5)
    with pytest.raises(TypeError, match="columns must be a list of column names"):
        g.nodes(columns="key")
    with pytest.raises(vg.InvalidArgumentError, match="columns names a column twice"):
        g.nodes(columns=["key", "key"])
    with pytest.raises(vg.InvalidArgumentError, match="columns is empty"):
        g.nodes(columns=[])
    with pytest.raises(vg.InvalidArgumentError, match="limit must be an int >= 0"):
        g.nodes(limit=-1)
    with pytest.raises(vg.InvalidArgumentError, match="not declared filterable|declared"):
        g.nodes(where={"nope": 1})


def test_awaitable_calls_give_what_the_calls_give():
    g = _graph()
    queries = np.random.default_rng(5).normal(size=(6, 8))

    async def main():
        found = await asyncio.gather(*(g.asearch(q, k=5) for q in queries))
        hybrid = await g.ahybrid_search("topic 2", queries[0], k=5)
        batch = await g.asearch_batch(queries, k=5)
        await g.aadd_nodes(["new"], np.ones((1, 8)), texts=["fresh"])
        await g.aadd_edges(["new"], ["k1"], rels=["a"])
        await g.aupdate_nodes(["new"], texts=["fresher"])
        await g.aupsert_nodes(["new2"], np.ones((1, 8)))
        removed = await g.adelete_edges(["new"], ["k1"], rels=["a"])
        deleted = await g.adelete_nodes(["new2"])
        return found, hybrid, batch, removed, deleted

    found, hybrid, batch, removed, deleted = asyncio.run(main())
    assert [r.keys for r in found] == [g.search(q, k=5).keys for q in queries] == [r.keys for r in batch]
    assert hybrid.keys == g.hybrid_search("topic 2", queries[0], k=5).keys
    assert g.get_node("new", vector=False)["text"] == "fresher" and "new2" not in g
    assert removed == 1 and deleted == 1 and g.neighbors("new") == []
    with pytest.raises(vg.DimensionMismatchError):
        asyncio.run(g.asearch(np.ones(3)))


def test_a_cancelled_write_is_applied_whole_or_not_at_all():
    g = _graph(10)
    gate = threading.Event()
    aio.set_max_workers(1)
    try:
        async def main():
            loop = asyncio.get_running_loop()
            blocker = loop.run_in_executor(aio._pool(), gate.wait)  # holds the only worker
            queued = asyncio.ensure_future(g.aadd_nodes([f"q{i}" for i in range(100)], np.ones((100, 8))))
            await asyncio.sleep(0.01)
            queued.cancel()  # its job has not started: it never runs
            with pytest.raises(asyncio.CancelledError):
                await queued
            gate.set()
            await blocker
            started = asyncio.ensure_future(g.aadd_nodes([f"s{i}" for i in range(5_000)],
                                                         np.ones((5_000, 8))))
            await asyncio.sleep(0)
            started.cancel()
            with pytest.raises(asyncio.CancelledError):
                await started
            await loop.run_in_executor(aio._pool(), lambda: None)  # the started job has ended

        asyncio.run(main())
        assert not any(f"q{i}" in g for i in range(100))
        present = [f"s{i}" in g for i in range(5_000)]
        assert all(present) or not any(present)  # whole or nothing, never part
        assert g.verify() == []
    finally:
        aio.set_max_workers(max(2, __import__("os").cpu_count() or 1))
    with pytest.raises(vg.InvalidArgumentError, match="max workers must be an int >= 1"):
        aio.set_max_workers(0)


def test_a_column_no_node_has_is_refused():
    g = _graph(10)
    with pytest.raises(vg.InvalidArgumentError, match="column 'lable' is neither a node field .* nor a property of any"):
        g.nodes(columns=["key", "lable"])
    assert g.nodes(tenants=["nobody"], columns=["key", "lable"]).num_rows == 0  # nothing listed: nothing to check
