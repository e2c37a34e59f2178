"""A lost or damaged MANIFEST: opening says so with CorruptionError, and vecgraph.repair /
``vecgraph repair`` rebuild it from the snapshots and the WAL, or refuse and change nothing."""

from __future__ import annotations

import hashlib
import json
import os
import shutil

import numpy as np
import pytest
import vecgraph as vg
from vecgraph import cli, snapshot, storage
from vecgraph.errors import CorruptionError, StorageError

DIM = 8


class _Embedder:
    name, dim = "test-embedder", DIM

    def __call__(self, texts: list) -> np.ndarray:
        return _vectors(len(texts), 9)


def _vectors(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal((n, DIM)).astype(np.float32)


def _build(path: str) -> dict:
    """Writes, a checkpoint, more writes, a second checkpoint, more writes (edges, deletes,
    a tenant deleted, texts): returns the model of every acknowledged write."""
    g = vg.Graph.open(path, dim=DIM, filterable={"source": "str"})
    model = {}
    keys = [f"a{i}" for i in range(120)]
    vectors = _vectors(120, 1)
    g.add_nodes(keys, vectors, texts=[f"alpha note {i}" for i in range(120)],
                tenants=["t1" if i % 2 else "t2" for i in range(120)],
                props=[{"source": "user"}] * 120)
    model.update(zip(keys, vectors))
    g.checkpoint()
    more = [f"b{i}" for i in range(40)]
    vectors = _vectors(40, 2)
    g.add_nodes(more, vectors, texts=["beta words"] * 40, tenants="t3")
    model.update(zip(more, vectors))
    g.add_edges(["a1", "a3"], ["b1", "b2"], rels="links")
    g.checkpoint()
    g.delete_nodes(["a5", "a7"])
    del model["a5"], model["a7"]
    g.delete_tenant("t2")
    for i in range(0, 120, 2):
        model.pop(f"a{i}", None)
    late = [f"c{i}" for i in range(15)]
    vectors = _vectors(15, 3)
    g.add_nodes(late, vectors, texts=["gamma latest"] * 15)
    model.update(zip(late, vectors))
    g.add_edges(["c1"], ["b3"], rels="links")
    g.use_embedder(_Embedder())  # recorded after the last snapshot: repair keeps it too
    g.close()
    return model


def _folder_digest(path: str) -> dict:
    out = {}
    for root, _dirs, files in os.walk(path):
        for name in files:
            if name == storage.LOCK:
                continue
            file = os.path.join(root, name)
            with open(file, "rb") as f:
                out[os.path.relpath(file, path)] = hashlib.sha256(f.read()).hexdigest()
    return out


def _check_everything_back(path: str, model: dict) -> None:
    g = vg.Graph.open(path)
    try:
        assert len(g) == len(model)
        assert set(g.keys()) == set(model)
        for key in ("a1", "b7", "c14"):
            assert g.search(model[key], k=1, exact=True).keys == [key]
        assert g.count_edges == 3
        assert {k for k, _ in g._bm25("gamma latest", 50)} == {f"c{i}" for i in range(15)}
        assert "a4" not in g and "a5" not in g
        assert g.verify() == []
    finally:
        g.close()


@pytest.fixture()
def lost(tmp_path):
    path = str(tmp_path / "g.vg")
    model = _build(path)
    with open(os.path.join(path, storage.MANIFEST)) as f:
        original = json.load(f)
    os.remove(os.path.join(path, storage.MANIFEST))
    return path, model, original


def test_a_deleted_manifest_is_a_corruption_error_everywhere(lost, capsys):
    path, _, _ = lost
    before = _folder_digest(path)
    for call in (lambda: vg.Graph.open(path), lambda: vg.Graph.open(path, read_only=True),
                 lambda: vg.Graph.open(path, dim=DIM)):
        with pytest.raises(CorruptionError, match=r"MANIFEST is missing: `vecgraph repair"):
            call()
    problems = snapshot.verify(path)
    assert len(problems) == 1 and "MANIFEST is missing" in problems[0]
    assert cli.main(["verify", path]) == 1
    assert "MANIFEST is missing" in capsys.readouterr().out
    assert cli.main(["stats", path]) == 1
    assert "vecgraph repair" in capsys.readouterr().err
    assert _folder_digest(path) == before  # nothing was touched


def test_repair_brings_back_every_acknowledged_write(lost):
    path, model, original = lost
    report = vg.Graph.repair(path)
    assert report["repaired"] and report["reason"] == "the MANIFEST was missing"
    assert report["snapshot"] == original["snapshot"] and report["snapshot_lsn"] == original["snapshot_lsn"]
    assert report["skipped"] == [] and report["may_lose"] == []
    assert report["nodes"] == len(model) and report["edges"] == 3 and report["replayed"] >= 4
    assert report["manifest"] == original  # the same MANIFEST, field for field
    _check_everything_back(path, model)
    assert vg.Graph.repair(path)["repaired"] is False  # intact now: left alone


def test_repair_from_the_older_generation_when_the_newest_is_damaged(lost):
    path, model, original = lost
    newest = os.path.join(path, original["snapshot"], "nodes.arrow")
    with open(newest, "r+b") as f:
        f.seek(200)
        f.write(b"\xff" * 64)
    report = vg.Graph.repair(path)
    assert report["snapshot"] == original["previous"]["snapshot"]
    assert len(report["skipped"]) == 1 and "fails its checksum" in report["skipped"][0]
    _check_everything_back(path, model)


def test_a_damaged_manifest_is_kept_aside_and_rebuilt(tmp_path):
    path = str(tmp_path / "g.vg")
    model = _build(path)
    with open(os.path.join(path, storage.MANIFEST), "wb") as f:
        f.write(b'{"format_version": 1, "uuid": "trunc')
    with pytest.raises(CorruptionError, match="not valid JSON"):
        vg.Graph.open(path)
    report = vg.Graph.repair(path)
    assert report["repaired"] and report["reason"] == "the MANIFEST was damaged"
    with open(os.path.join(path, storage.MANIFEST + ".damaged"), "rb") as f:
        assert f.read() == b'{"format_version": 1, "uuid": "trunc'
    _check_everything_back(path, model)


def test_repair_refuses_when_writes_after_the_snapshot_are_gone(lost):
    path, _, original = lost
    wal = os.path.join(path, storage.WAL_DIR)
    segments = sorted(os.listdir(wal))
    # Drop the segment that holds the first writes after the newest snapshot.
    first = [s for s in segments if int(s[:-4]) <= original["snapshot_lsn"] + 1][-1]
    os.remove(os.path.join(wal, first))
    before = _folder_digest(path)
    with pytest.raises(CorruptionError, match="nothing was changed"):
        vg.Graph.repair(path)
    with pytest.raises(CorruptionError, match="nothing was changed"):
        vg.Graph.repair(path, force=True)  # a gap in the log cannot be forced
    assert _folder_digest(path) == before
    assert not os.path.exists(os.path.join(path, storage.MANIFEST))


def test_repair_without_wal_tail_needs_force_and_says_what_may_be_lost(lost, capsys):
    path, model, _ = lost
    os.remove(os.path.join(path, storage.WAL_TAIL))
    before = _folder_digest(path)
    with pytest.raises(CorruptionError, match=r"no WAL_TAIL.*force=True"):
        vg.Graph.repair(path)
    assert cli.main(["repair", path]) == 1
    assert "--force repairs anyway" in capsys.readouterr().err
    assert _folder_digest(path) == before
    assert cli.main(["repair", path, "--force"]) == 0
    out = capsys.readouterr().out
    assert "rebuilt it from snapshots/" in out and "may be lost: there is no WAL_TAIL" in out
    _check_everything_back(path, model)


def test_repair_of_a_graph_never_checkpointed(tmp_path):
    path = str(tmp_path / "g.vg")
    g = vg.Graph.open(path, dim=DIM, metric="l2")
    vectors = _vectors(30, 4)
    g.add_nodes([f"n{i}" for i in range(30)], vectors)
    g.close()
    os.remove(os.path.join(path, storage.MANIFEST))
    with pytest.raises(CorruptionError, match="pass dim= and metric="):
        vg.Graph.repair(path)
    with pytest.raises(CorruptionError, match="only in the MANIFEST"):
        vg.Graph.repair(path, dim=DIM, metric="l2")
    report = vg.Graph.repair(path, dim=DIM, metric="l2", force=True)
    assert report["snapshot"] is None and report["nodes"] == 30 and report["last_lsn"] == 1
    g = vg.Graph.open(path)
    assert len(g) == 30 and g.search(vectors[7], k=1, exact=True).keys == ["n7"]
    g.close()


def test_repair_refuses_an_open_folder_and_bad_arguments(lost, tmp_path):
    path, _, _ = lost
    other = str(tmp_path / "other.vg")
    g = vg.Graph.open(other, dim=DIM)
    with pytest.raises(StorageError):
        vg.Graph.repair(other)  # held by a writer
    g.close()
    with pytest.raises(vg.errors.InvalidArgumentError, match="not a folder"):
        vg.Graph.repair(str(tmp_path / "nowhere"))
    with pytest.raises(vg.errors.InvalidArgumentError, match="metric must be"):
        vg.Graph.repair(path, metric="cosine")
    with pytest.raises(TypeError, match="force must be a bool"):
        vg.Graph.repair(path, force="yes")
    with pytest.raises(vg.errors.InvalidArgumentError, match="dim=4 was given"):
        vg.Graph.repair(path, dim=4)
    assert not os.path.exists(os.path.join(path, storage.MANIFEST))


def test_repair_refuses_a_folder_of_other_files(tmp_path):
    folder = tmp_path / "photos"
    folder.mkdir()
    (folder / "a.jpg").write_bytes(b"\xff\xd8")
    with pytest.raises(CorruptionError, match="neither a sound snapshot generation nor a WAL segment"):
        vg.Graph.repair(str(folder))
    assert sorted(os.listdir(folder)) == ["a.jpg"]
    shutil.rmtree(folder)
