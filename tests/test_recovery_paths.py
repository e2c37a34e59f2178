"""Recovery paths: a damaged WAL segment kept only to fall back to the previous snapshot, a
disk that is still full at reopen, and a checkpoint that runs out of space while writing the
HNSW file."""

from __future__ import annotations

import errno
import os
import shutil
import warnings

import numpy as np
import pytest
import vecgraph as vg
from vecgraph import snapshot, storage
from vecgraph.errors import CorruptionError

DIM = 8


def _batch(graph, prefix: str, rounds: int, rng) -> dict:
    written = {}
    for i in range(rounds):
        keys = [f"{prefix}{i}-{j}" for j in range(20)]
        vectors = rng.standard_normal((20, DIM)).astype(np.float32)
        graph.add_nodes(keys, vectors, texts=[f"{prefix} words {i}"] * 20)
        written.update(zip(keys, vectors))
    return written


def _two_generations(path: str) -> tuple[dict, dict]:
    """A graph with two snapshot generations and writes after the newest, in 4 KiB segments:
    the oldest segments hold only records the previous generation's fallback needs."""
    rng = np.random.default_rng(0)
    g = vg.Graph.open(path, dim=DIM, segment_bytes=4096)
    model = _batch(g, "a", 6, rng)
    g.checkpoint()
    model.update(_batch(g, "b", 6, rng))
    g.checkpoint()
    model.update(_batch(g, "c", 3, rng))
    manifest = g._manifest
    g.close()
    return model, manifest


def _fallback_only_segment(path: str, manifest: dict) -> str:
    wal = os.path.join(path, storage.WAL_DIR)
    names = sorted(os.listdir(wal))
    firsts = [int(name[:-4]) for name in names]
    needed = manifest["snapshot_lsn"] + 1
    only = [name for name, nxt in zip(names, firsts[1:]) if nxt <= needed]
    assert only, names  # the layout the test needs
    return os.path.join(wal, only[0])


def test_a_zero_filled_fallback_segment_opens_from_the_newest_generation_with_a_warning(tmp_path):
    path = str(tmp_path / "g.vg")
    model, manifest = _two_generations(path)
    segment = _fallback_only_segment(path, manifest)
    with open(segment, "r+b") as f:
        size = f.seek(0, 2)
        f.seek(0)
        f.write(b"\0" * size)
    with pytest.warns(RuntimeWarning, match="kept only to fall back to the previous snapshot are damaged"):
        g = vg.Graph.open(path)
    try:
        assert len(g) == len(model)
        for key in ("a0-0", "b5-19", "c2-7"):
            assert g.search(model[key], k=1, exact=True).keys == [key]
        assert len(g._recovery["fallback_damaged"]) == 1 and os.path.basename(segment) in g._recovery["fallback_damaged"][0]
    finally:
        g.close()
    problems = snapshot.verify(path)
    assert len(problems) == 1 and "falling back to the previous snapshot" in problems[0], problems
    assert os.path.basename(segment) in problems[0]


def test_a_damaged_fallback_segment_is_refused_when_the_fallback_is_needed(tmp_path):
    path = str(tmp_path / "g.vg")
    _, manifest = _two_generations(path)
    segment = _fallback_only_segment(path, manifest)
    with open(segment, "r+b") as f:
        f.write(b"\0" * 48)
    newest = os.path.join(path, manifest["snapshot"], "nodes.arrow")
    with open(newest, "r+b") as f:
        f.seek(100)
        f.write(b"\xff" * 32)
    before = {name: os.path.getsize(os.path.join(path, storage.WAL_DIR, name))
              for name in os.listdir(os.path.join(path, storage.WAL_DIR))}
    with pytest.warns(RuntimeWarning, match="recovering from the previous snapshot"):
        with pytest.raises(CorruptionError, match="bad header"):
            vg.Graph.open(path)
    after = {name: os.path.getsize(os.path.join(path, storage.WAL_DIR, name))
             for name in os.listdir(os.path.join(path, storage.WAL_DIR))}
    assert after == before


def test_damage_in_the_middle_of_a_fallback_segment_is_found_by_verify(tmp_path):
    path = str(tmp_path / "g.vg")
    model, manifest = _two_generations(path)
    segment = _fallback_only_segment(path, manifest)
    with open(segment, "r+b") as f:
        f.seek(200)
        f.write(b"\xa5" * 16)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # not needed, not read: no warning, every write there
        with vg.Graph.open(path) as g:
            assert len(g) == len(model) and g._recovery["fallback_segments"] == 2
    problems = snapshot.verify(path)
    assert len(problems) == 1 and "falling back to the previous snapshot" in problems[0], problems
    shutil.rmtree(path)


def _full_disk_graph(path: str) -> dict:
    """A graph whose BM25 index must write when it is opened for writing (texts written after
    the last checkpoint), closed."""
    rng = np.random.default_rng(5)
    g = vg.Graph.open(path, dim=DIM)
    model = _batch(g, "a", 3, rng)
    g.checkpoint()
    model.update(_batch(g, "late", 1, rng))
    g.close()
    return model


def test_a_writable_reopen_on_a_full_disk_opens_for_reading_and_refuses_writes(tmp_path):
    path = str(tmp_path / "g.vg")
    model = _full_disk_graph(path)
    # Every write of the BM25 index's metadata now fails with ENOSPC, as on a full disk.
    full = os.path.join(path, "text", "vecgraph-text.json.tmp")
    os.symlink("/dev/full", full)
    before = {name: os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names
              if name != storage.LOCK and not os.path.islink(os.path.join(root, name))}
    with pytest.warns(RuntimeWarning, match="the disk is full: .* opened for reading only"):
        g = vg.Graph.open(path)
    try:
        assert g.read_only and len(g) == len(model)
        assert g.search(model["late0-3"], k=1, exact=True).keys == ["late0-3"]
        assert {key for key, _ in g._bm25("late", 50)} == {f"late0-{j}" for j in range(20)}
        assert g.get_node("a1-1")["text"] == "a words 1"
        for write in (lambda: g.add_nodes(["new"], np.ones((1, DIM), np.float32)),
                      lambda: g.delete_nodes(["a0-0"]), lambda: g.checkpoint()):
            with pytest.raises(vg.StorageError, match="the disk is full"):
                write()
        assert "a0-0" in g and "new" not in g
    finally:
        g.close()
    after = {name: os.path.getsize(os.path.join(root, name)) for root, _, names in os.walk(path) for name in names
             if name != storage.LOCK and not os.path.islink(os.path.join(root, name))}
    assert after == before
    assert not os.path.lexists(full)  # the failed write left no temporary behind; space again:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with vg.Graph.open(path) as g:
            assert not g.read_only
            g.add_nodes(["new"], np.ones((1, DIM), np.float32), texts=["fresh words"])
            assert [key for key, _ in g._bm25("fresh", 5)] == ["new"]


def test_a_checkpoint_that_fills_the_disk_writing_the_hnsw_file_says_so(tmp_path, monkeypatch):
    path = str(tmp_path / "g.vg")
    rng = np.random.default_rng(6)
    g = vg.Graph.open(path, dim=DIM)
    # Enough nodes for an HNSW file of several MiB: writes fail while USearch is still streaming
    # it out (a small file is written in one piece after USearch is done).
    g.add_nodes([f"n{i}" for i in range(12_000)], rng.standard_normal((12_000, DIM)).astype(np.float32))
    real = storage.begin_snapshot

    def hnsw_file_on_a_full_disk(folder, manifest):
        tmp = real(folder, manifest)
        os.symlink("/dev/full", os.path.join(tmp, storage.HNSW_FILE))  # writes fail with ENOSPC
        return tmp

    monkeypatch.setattr(storage, "begin_snapshot", hnsw_file_on_a_full_disk)
    with pytest.raises(vg.StorageError, match=r"cannot write the HNSW index to .*/snapshots/00000001\.tmp/hnsw\.usearch: "
                                              r"No space left on device \(the disk is full\)"):
        g.checkpoint()
    assert os.listdir(os.path.join(path, "snapshots")) == []  # the half-written generation is gone
    monkeypatch.undo()
    assert g.checkpoint()["snapshot"].endswith("snapshots/00000001")
    g.close()


def test_a_graph_opened_on_a_full_disk_exports_and_a_lock_that_cannot_be_stamped_opens_it_so(tmp_path, monkeypatch):
    path = str(tmp_path / "g.vg")
    model = _full_disk_graph(path)
    os.symlink("/dev/full", os.path.join(path, "text", "vecgraph-text.json.tmp"))
    wal_before = sorted(os.listdir(os.path.join(path, storage.WAL_DIR)))
    with pytest.warns(RuntimeWarning, match="the disk is full"):
        g = vg.Graph.open(path)
    try:
        snapshot.export(g, str(tmp_path / "out"))  # reads only: no WAL segment rolled in the folder
    finally:
        g.close()
    assert sorted(os.listdir(os.path.join(path, storage.WAL_DIR))) == wal_before
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        copy = snapshot.restore(str(tmp_path / "out"), str(tmp_path / "copy.vg"))
    assert len(copy) == len(model)
    copy.close()
    # A LOCK made by this open, on a full disk: its pid cannot be written. Open to read, again.
    os.remove(os.path.join(path, storage.LOCK))

    def stamp_on_a_full_disk(self):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(storage.FolderLock, "stamp", stamp_on_a_full_disk)
    with pytest.warns(RuntimeWarning, match="the disk is full"):
        g = vg.Graph.open(path)
    try:
        assert len(g) == len(model)
        with pytest.raises(vg.StorageError, match="the disk is full"):
            g.add_nodes(["x"], np.ones((1, DIM), np.float32))
    finally:
        g.close()
