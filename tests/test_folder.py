"""The graph folder as a user meets it: MANIFEST damage is CorruptionError, a failed open leaves
no folder behind, checkpoints from several threads are serialised, a closed graph refuses
writes, and the default tenant cannot be deleted by an empty string."""

from __future__ import annotations

import json
import os
import threading

import numpy as np
import pytest

import vecgraph as vg


def _graph(folder, n=30, dim=4, checkpoint=True):
    rng = np.random.default_rng(0)
    g = vg.Graph.open(folder, dim=dim, sync="off")
    g.add_nodes([f"n{i}" for i in range(n)], rng.normal(size=(n, dim)), tenants=["t1", "t2"] * (n // 2))
    g.add_edges([f"n{i}" for i in range(n - 1)], [f"n{i + 1}" for i in range(n - 1)], rels="next")
    if checkpoint:
        g.checkpoint()
    g.close()


@pytest.mark.parametrize("change, message", [
    ({"hnsw": None}, "hnsw"),
    ({"uuid": "12345678-1234-1234-1234-123456789abc"}, "uuid"),
    ({"snapshot": 5}, "snapshot"),
    ({"snapshot_lsn": -5}, "snapshot_lsn"),
    ({"dim": 0}, "dim"),
    ({"dim": "4"}, "dim"),
    ({"metric": "euclid"}, "metric"),
    ({"format_version": "1"}, "format_version"),
    ({"format_version": 2}, "format version 2"),
    ({"files": {}}, "files"),
    ({"snapshot": None}, "no snapshot is named"),
    ({"dim": 8}, "dim '4', the MANIFEST says '8'"),
    ({"metric": "l2"}, "metric 'cos', the MANIFEST says 'l2'"),
    ({"snapshot_lsn": 1}, "lsn"),
])
def test_damaged_manifest_is_corruption(tmp_path, change, message):
    _graph(tmp_path / "g")
    path = tmp_path / "g" / "MANIFEST"
    manifest = json.loads(path.read_text())
    manifest.update(change)
    path.write_text(json.dumps(manifest))
    with pytest.raises(vg.CorruptionError, match=message):
        vg.Graph.open(tmp_path / "g")


@pytest.mark.parametrize("raw", [b"", b"{not json", b"[]", b'{"format_version": 1}'])
def test_unreadable_manifest_is_corruption(tmp_path, raw):
    _graph(tmp_path / "g")
    (tmp_path / "g" / "MANIFEST").write_bytes(raw)
    with pytest.raises(vg.CorruptionError, match="MANIFEST"):
        vg.Graph.open(tmp_path / "g")


def test_failed_open_of_a_new_folder_leaves_nothing(tmp_path):
    with pytest.raises(vg.InvalidArgumentError, match="pass dim"):
        vg.Graph.open(tmp_path / "a" / "b")
    with pytest.raises(vg.InvalidArgumentError, match="metric"):
        vg.Graph.open(tmp_path / "c", dim=4, metric="euclid")
    with pytest.raises(vg.InvalidArgumentError, match="auto_compact_edges"):
        vg.Graph.open(tmp_path / "d", dim=4, auto_compact_edges=-1)
    with pytest.raises(vg.InvalidArgumentError, match="sync_interval_ms"):
        vg.Graph.open(tmp_path / "e", dim=4, sync_interval_ms=2**62)
    assert os.listdir(tmp_path) == []
    (tmp_path / "file").write_text("x")
    with pytest.raises(vg.StorageError, match="is a file"):
        vg.Graph.open(tmp_path / "file", dim=4)


def test_concurrent_checkpoints_are_serialised(tmp_path):
    rng = np.random.default_rng(1)
    g = vg.Graph.open(tmp_path / "g", dim=8, sync="off")
    keys = []
    for round_ in range(6):
        batch = [f"r{round_}_{i}" for i in range(50)]
        g.add_nodes(batch, rng.normal(size=(50, 8)))
        keys += batch
        errors = []

        def checkpoint():
            try:
                g.checkpoint()
            except Exception as e:  # noqa: BLE001 - collected and asserted below
                errors.append(e)

        threads = [threading.Thread(target=checkpoint) for _ in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert errors == []
    g.close()
    g = vg.Graph.open(tmp_path / "g")
    assert len(g) == len(keys) and all(k in g for k in keys)
    assert len(os.listdir(tmp_path / "g" / "snapshots")) <= 2
    g.close()


def test_checkpoint_without_new_writes_writes_nothing(tmp_path):
    _graph(tmp_path / "g", checkpoint=False)
    g = vg.Graph.open(tmp_path / "g")
    first = g.checkpoint()
    second = g.checkpoint()
    assert first == second
    assert os.listdir(tmp_path / "g" / "snapshots") == ["00000001"]
    g.close()


@pytest.mark.parametrize("on_disk", [True, False])
def test_a_closed_graph_refuses_every_write(tmp_path, on_disk):
    g = vg.Graph.open(tmp_path / "g", dim=4) if on_disk else vg.Graph(4)
    g.add_nodes(["a", "b"], np.eye(2, 4))
    g.close()
    g.close()  # idempotent
    for write in (lambda: g.add_nodes([], np.zeros((0, 4))), lambda: g.add_nodes(["c"], np.ones((1, 4))),
                  lambda: g.upsert_nodes(["a"], np.ones((1, 4))), lambda: g.add_edges(["a"], ["b"]),
                  lambda: g.delete_nodes(["zz"], missing_ok=True), lambda: g.delete_edges([], []),
                  lambda: g.delete_tenant("nope")):
        with pytest.raises(vg.ReadOnlyError, match="closed"):
            write()
    assert sorted(g.search(np.ones(4), k=5, exact=True).keys) == ["a", "b"]  # reads still work


def test_the_default_tenant_needs_an_explicit_flag(tmp_path):
    g = vg.Graph(4)
    g.add_nodes(["a", "b"], np.eye(2, 4))
    g.add_nodes(["c"], np.ones((1, 4)), tenants="t")
    with pytest.raises(vg.InvalidArgumentError, match="allow_default_tenant"):
        g.delete_tenant("")
    assert len(g) == 3
    assert g.delete_tenant("", allow_default_tenant=True) == 2
    assert len(g) == 1 and "c" in g


def test_lock_error_names_this_process(tmp_path):
    g = vg.Graph.open(tmp_path / "g", dim=4)
    with pytest.raises(vg.StorageError, match="in this process"):
        vg.Graph.open(tmp_path / "g")
    g.close()
    vg.Graph.open(tmp_path / "g").close()
