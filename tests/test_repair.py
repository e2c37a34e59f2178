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
            file = os.path.join(root, name)
            if name == storage.LOCK or os.path.islink(file):
                continue
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
    rows = os.path.join(os.path.dirname(path), "rows.jsonl")
    with open(rows, "w") as f:
        f.write(json.dumps({"key": "z", "vector": [0.5] * DIM}) + "\n")
    assert cli.main(["ingest", path, "--nodes", rows, "--dim", str(DIM)]) == 1
    assert "MANIFEST is missing" in capsys.readouterr().err
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
    assert report["repaired"] and report["reason"].startswith("the MANIFEST was damaged (")
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
        vg.Graph.repair(path, metric="cosin")
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


def _segmented(path: str) -> tuple[dict, dict]:
    """Two generations, 4 KiB WAL segments, writes after each: the oldest segments serve only
    the fallback to the previous generation."""
    rng = np.random.default_rng(8)
    g = vg.Graph.open(path, dim=DIM, segment_bytes=4096)
    model = {}
    for batch in range(9):
        keys = [f"k{batch}-{j}" for j in range(20)]
        vectors = rng.standard_normal((20, DIM)).astype(np.float32)
        g.add_nodes(keys, vectors)
        model.update(zip(keys, vectors))
        if batch in (2, 5):
            g.checkpoint()
    g.use_embedder(_Embedder())
    manifest = g._manifest
    g.close()
    return model, manifest


def _oldest_segment(path: str) -> str:
    return os.path.join(path, storage.WAL_DIR, sorted(os.listdir(os.path.join(path, storage.WAL_DIR)))[0])


def _all_back(path: str, model: dict) -> None:
    with vg.Graph.open(path) as g:
        assert len(g) == len(model)
        for key in ("k0-0", "k4-4", "k8-19"):
            assert g.search(model[key], k=1, exact=True).keys == [key]


def test_a_damaged_fallback_segment_costs_only_the_fallback(tmp_path):
    path = str(tmp_path / "g.vg")
    model, original = _segmented(path)
    with open(_oldest_segment(path), "r+b") as f:  # its header: only the fallback needs it
        f.seek(3)
        f.write(b"\xff")
    os.remove(os.path.join(path, storage.MANIFEST))
    report = vg.Graph.repair(path)
    assert report["snapshot"] == original["snapshot"] and report["manifest"]["previous"] is None
    assert any("fallback" in s and "no valid header" in s for s in report["skipped"])
    with pytest.warns(RuntimeWarning, match="fall back"):
        _all_back(path, model)


def test_a_fallback_that_would_not_read_back_is_not_recorded(tmp_path):
    path = str(tmp_path / "g.vg")
    model, original = _segmented(path)
    with open(_oldest_segment(path), "r+b") as f:  # a record in the middle of it
        f.seek(300)
        f.write(b"\xa5" * 8)
    os.remove(os.path.join(path, storage.MANIFEST))
    report = vg.Graph.repair(path)
    assert report["manifest"]["previous"] is None
    assert any("the fallback to" in s for s in report["skipped"])
    _all_back(path, model)
    assert snapshot.verify(path) == []


def test_the_embedder_survives_a_repair_from_the_older_generation(tmp_path):
    path = str(tmp_path / "g.vg")
    model, original = _segmented(path)
    with open(os.path.join(path, original["snapshot"], "nodes.arrow"), "r+b") as f:
        f.seek(150)
        f.write(b"\x00" * 16)
    os.remove(os.path.join(path, storage.MANIFEST))
    report = vg.Graph.repair(path)
    assert report["snapshot"] == original["previous"]["snapshot"]
    assert report["manifest"]["embedder"] == {"name": "test-embedder", "dim": DIM}
    _all_back(path, model)


def test_a_changed_byte_in_a_description_passes_its_generation_over(tmp_path):
    path = str(tmp_path / "g.vg")
    model, original = _segmented(path)
    described = os.path.join(path, original["snapshot"], storage.SNAPSHOT_DESCRIPTION)
    with open(described, "rb") as f:
        text = f.read()
    with open(described, "wb") as f:
        f.write(text.replace(b'"connectivity": 24', b'"connectivity": 64'))
    os.remove(os.path.join(path, storage.MANIFEST))
    report = vg.Graph.repair(path)
    assert report["snapshot"] == original["previous"]["snapshot"]
    assert report["manifest"]["hnsw"]["connectivity"] == 24
    assert any("fails its checksum" in s for s in report["skipped"])
    _all_back(path, model)


def test_a_description_that_would_make_an_invalid_manifest_is_refused(tmp_path):
    path = str(tmp_path / "g.vg")
    _build(path)
    with open(os.path.join(path, storage.MANIFEST)) as f:
        current = json.load(f)["snapshot"]
    described = os.path.join(path, current, storage.SNAPSHOT_DESCRIPTION)
    description = storage.read_description(described)
    description["embedder"] = {"name": "e", "dim": DIM * 2}  # well-formed, checksummed, impossible
    with open(described, "wb") as f:
        f.write(storage.describe(description))
    os.remove(os.path.join(path, storage.MANIFEST))
    before = _folder_digest(path)
    with pytest.raises(CorruptionError, match=r"would not be valid \(embedder must be"):
        vg.Graph.repair(path)
    assert _folder_digest(path) == before


def test_another_databases_manifest_is_set_aside(tmp_path):
    path, other = str(tmp_path / "a.vg"), str(tmp_path / "b.vg")
    model = _build(path)
    _build(other)
    shutil.copyfile(os.path.join(other, storage.MANIFEST), os.path.join(path, storage.MANIFEST))
    report = vg.Graph.repair(path)
    assert report["repaired"] and "another database" in report["reason"]
    assert os.path.isfile(os.path.join(path, storage.MANIFEST + ".damaged"))
    _check_everything_back(path, model)


def test_a_forced_repair_without_a_generation_says_what_may_be_lost(tmp_path):
    path = str(tmp_path / "g.vg")
    with vg.Graph.open(path, dim=DIM, connectivity=8, filterable={"lvl": "int64"}) as g:
        g.add_nodes(["a", "b"], _vectors(2, 1))
    os.remove(os.path.join(path, storage.MANIFEST))
    report = vg.Graph.repair(path, dim=DIM, metric="cos", force=True)
    assert len(report["may_lose"]) == 1 and "HNSW parameters, filterable properties" in report["may_lose"][0]


def test_a_manifest_that_is_a_folder_and_odd_arguments(tmp_path, capsys):
    path = str(tmp_path / "g.vg")
    model = _build(path)
    os.remove(os.path.join(path, storage.MANIFEST))
    os.mkdir(os.path.join(path, storage.MANIFEST))
    report = vg.Graph.repair(path)
    assert report["repaired"] and "is not a file" in report["reason"]
    assert os.path.isdir(os.path.join(path, storage.MANIFEST + ".damaged"))
    _check_everything_back(path, model)
    with pytest.raises(TypeError, match="non-empty str"):
        vg.Graph.repair("")
    stray = tmp_path / "photos"
    (stray / "snapshots" / "00000001").mkdir(parents=True)
    (stray / "snapshots" / "00000001" / "nodes.arrow").write_bytes(b"not arrow at all")
    with pytest.raises(vg.InvalidArgumentError, match="not empty and has no MANIFEST"):
        vg.Graph.open(str(stray), dim=DIM)  # user files that merely look like a graph's are not one
    os.remove(os.path.join(path, storage.MANIFEST))
    os.remove(os.path.join(path, storage.WAL_TAIL))
    assert cli.main(["repair", path, "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert out["repaired"] is False and "WAL_TAIL" in out["error"]


def test_repair_on_a_full_disk_changes_nothing(tmp_path):
    path = str(tmp_path / "g.vg")
    _build(path)
    with open(os.path.join(path, storage.MANIFEST), "wb") as f:
        f.write(b"{garbage")
    os.symlink("/dev/full", os.path.join(path, storage.MANIFEST + ".repair.tmp"))  # its write fails: ENOSPC
    before = _folder_digest(path)
    with pytest.raises(StorageError, match="No space left on device"):
        vg.Graph.repair(path)
    assert _folder_digest(path) == before
    assert sorted(os.listdir(path)) == sorted(["LOCK", "MANIFEST", "WAL_TAIL", "snapshots", "text", "wal"])
