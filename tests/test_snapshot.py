"""Checkpoints: the Arrow snapshot holds the exact live state (int8 rows bit for bit, texts,
props, edge vectors, edge order), reopening from it gives the same graph, and a damaged
snapshot is reported as CorruptionError."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

import vecgraph as vg


def _state(g: vg.Graph) -> dict:
    from test_snapshot_io import plain_state

    return plain_state(g)


def _assert_same_state(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for name in a:
        if isinstance(a[name], np.ndarray):
            assert a[name].dtype == b[name].dtype, name
            assert np.array_equal(a[name], b[name]), name
        else:
            assert a[name] == b[name], name


def _build(folder, rng, dim: int = 6, metric: str = "l2") -> vg.Graph:
    g = vg.Graph.open(folder, dim=dim, metric=metric, sync="off")
    keys = [f"n{i}" for i in range(40)] + [7, "café", "cafe\u0301", "\U0001f600"]
    g.add_nodes(keys, rng.normal(size=(len(keys), dim)) * 3,
                labels=[["", "person", "org"][i % 3] for i in range(len(keys))],
                tenants=[["u1", "u2"][i % 2] for i in range(len(keys))],
                ts=np.arange(len(keys), dtype=np.int64) * 1000,
                texts=[f"text {i} ✓" for i in range(len(keys))],
                props=[{"i": i, "tag": "x"} if i % 4 else None for i in range(len(keys))])
    src = [keys[i] for i in rng.integers(0, len(keys), 120)]
    dst = [keys[i] for i in rng.integers(0, len(keys), 120)]
    g.add_edges(src[:60], dst[:60], rels="knows", weights=rng.random(60))
    g.add_edges(src[60:], dst[60:], rels=["likes", "cites"] * 30, vectors=rng.normal(size=(60, dim)),
                texts=[f"edge {i}" for i in range(60)], props=[{"e": i} for i in range(60)])
    g.upsert_nodes(["n3", "new"], rng.normal(size=(2, dim)), texts=["replaced", "added"])
    g.delete_nodes(["n5", 7])
    g.delete_edges([src[0]], [dst[0]], missing_ok=True)
    g.delete_tenant("nobody")
    return g


# Dims on both sides of the in-memory code stride's rules (a power of two below 64 bytes, a
# multiple of 64 from there): the row layout of logs and snapshots is the same for all of them.
@pytest.mark.parametrize("dim, metric", [(6, "l2"), (64, "ip"), (97, "cos"), (384, "cos")])
def test_checkpoint_and_reopen_restore_the_exact_state(tmp_path, dim, metric):
    rng = np.random.default_rng(3)
    folder = tmp_path / "g"
    g = _build(folder, rng, dim, metric)
    before = _state(g)
    queries = rng.normal(size=(5, dim))
    results = [g.search(q, exact=True, k=10, hops=2, seeds=3).keys for q in queries]
    info = g.checkpoint()
    assert info["nodes"] == len(g) and info["edges"] == g.count_edges and info["lsn"] == before["lsn"]
    g.add_nodes(["after"], rng.normal(size=(1, dim)))  # in the WAL only, after the snapshot
    g.close()

    g = vg.Graph.open(folder)
    assert g._recovery["replayed"] == 1
    assert "after" in g and "n5" not in g and 7 not in g
    g.delete_nodes(["after"])
    after = _state(g)
    after["lsn"] = before["lsn"]  # the add and delete of "after" moved it on
    after["text_lsn"] = before["text_lsn"]
    _assert_same_state(before, after)
    assert [g.search(q, exact=True, k=10, hops=2, seeds=3).keys for q in queries] == results
    assert g.get_node("n3")["text"] == "replaced"
    assert g.get_node("café")["props"] == {"i": 41, "tag": "x"} and "cafe\u0301" in g
    g.close()


def test_only_two_snapshot_generations_are_kept(tmp_path):
    rng = np.random.default_rng(4)
    g = _build(tmp_path / "g", rng)
    for i in range(4):
        g.add_nodes([f"extra{i}"], rng.normal(size=(1, 6)))
        g.checkpoint()
    assert sorted(os.listdir(tmp_path / "g" / "snapshots")) == ["00000003", "00000004"]
    g.close()


@pytest.mark.parametrize("damage", ["flip", "truncate", "delete"])
def test_damaged_snapshot_is_corruption(tmp_path, damage):
    rng = np.random.default_rng(5)
    g = _build(tmp_path / "g", rng)
    g.checkpoint()
    g.close()
    path = tmp_path / "g" / "snapshots" / "00000001" / "nodes.arrow"
    data = bytearray(path.read_bytes())
    if damage == "flip":
        data[len(data) // 2] ^= 0x10
        path.write_bytes(bytes(data))
    elif damage == "truncate":
        path.write_bytes(bytes(data[: len(data) // 3]))
    else:
        path.unlink()
    with pytest.raises(vg.CorruptionError, match="nodes.arrow"):
        vg.Graph.open(tmp_path / "g")
    # The failed open released the folder: after repairing nothing, it still refuses, never crashes.
    with pytest.raises(vg.CorruptionError):
        vg.Graph.open(tmp_path / "g")


def test_reopened_hnsw_graph_renumbered_by_node_returns_the_same_results(tmp_path):
    """One-node writes from several threads take HNSW slots out of node order; the saved graph
    is renumbered on load so that each node sits in the slot of its id. It is the same graph, so
    the default (HNSW) search returns the same keys and scores after reopening."""
    rng = np.random.default_rng(12)
    dim, count = 12, 3000
    vectors = rng.normal(size=(count, dim)).astype(np.float32)
    g = vg.Graph.open(tmp_path / "g", dim=dim, sync="off", expansion_search=32)

    def write(first):
        for i in range(first, count, 3):
            g.add_nodes([f"n{i}"], vectors[i : i + 1])

    pool = [threading.Thread(target=write, args=(t,)) for t in range(3)]
    for thread in pool:
        thread.start()
    for thread in pool:
        thread.join()
    src = rng.integers(0, count, size=4 * count)
    dst = rng.integers(0, count, size=4 * count)
    g.add_edges([f"n{i}" for i in src], [f"n{i}" for i in dst], rels="r")
    queries = rng.normal(size=(60, dim)).astype(np.float32)

    def results(graph):
        found = [graph.search(q, k=10, seeds=6, hops=1) for q in queries]
        return [(r.keys, r.scores.tolist()) for r in found], [graph.search(q, k=5, hops=0).keys for q in queries]

    before = results(g)
    assert all(len(keys) == 10 for keys, _ in before[0])
    g.checkpoint()
    g.close()
    with vg.Graph.open(tmp_path / "g") as again:
        assert again._recovery["hnsw"] == "loaded"
        assert again.verify() == []
        assert results(again) == before
