"""A WAL that lost its newest segments is refused: WAL_TAIL (beside wal/) names the newest
segment the writer created, so deleting the newest segments, or all of wal/ (a folder copied
without its logs), makes Graph.open raise CorruptionError naming the missing segment and the
LSN from which acknowledged writes are lost, and change nothing in the folder. Removing
WAL_TAIL opens the graph without those writes; a folder without WAL_TAIL (an earlier version's)
opens as before. The marker's format: cpp/include/vecgraph/wal_format.hpp, TAIL MARKER."""

from __future__ import annotations

import json
import os
import shutil
import struct
import subprocess
import sys

import numpy as np
import pytest
import vecgraph as vg
from vecgraph import snapshot
from vecgraph.errors import CorruptionError

DIM = 16
SEGMENT_BYTES = 4096
BASE_NODES = 20
LATER_WRITES = 90
PADDING = "p" * 160  # node text, so that a record takes a few hundred bytes and segments roll often
# The subprocess imports the same vecgraph as this test module.
PACKAGE_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(vg.__file__)))


def vector(i: int) -> np.ndarray:
    return np.random.default_rng(i).standard_normal(DIM).astype(np.float32)


def segments(folder: str) -> list:
    wal = os.path.join(folder, "wal")
    return sorted(n for n in os.listdir(wal) if n.endswith(".log") and n[:-4].isdigit())


def first_lsn(name: str) -> int:
    return int(name[:-4])


def read_marker(folder: str) -> tuple:
    """(uuid hex, first LSN) of WAL_TAIL, checked against the documented layout."""
    with open(os.path.join(folder, "WAL_TAIL"), "rb") as f:
        data = f.read()
    assert len(data) == 48
    magic, version, size, uuid, lsn, _crc, reserved = struct.unpack("<8sII16sQII", data)
    assert (magic, version, size, reserved) == (b"VGTAIL\0\n", 1, 48, 0)
    return uuid.hex(), lsn


def listing(folder: str) -> dict:
    """``folder`` and every file and folder below it, with size (files) and mtime (ns): what a
    refused open must leave as it was (a file made and removed again changes the folder's mtime)."""
    out = {".": (None, os.stat(folder).st_mtime_ns)}
    for root, dirs, files in os.walk(folder):
        for name in dirs + files:
            path = os.path.join(root, name)
            st = os.lstat(path)
            out[os.path.relpath(path, folder)] = (st.st_size if name in files else None, st.st_mtime_ns)
    return out


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """A closed graph: BASE_NODES nodes and a ring of edges, a checkpoint, then LATER_WRITES
    writes (a node each, an edge to it after every third) over several 4 KiB segments. Returns
    (folder, lsn_of: {("node", key) | ("edge", src, dst): LSN}, snapshot LSN)."""
    folder = str(tmp_path_factory.mktemp("tail") / "db")
    lsn_of = {}
    with vg.Graph.open(folder, dim=DIM, metric="cos", sync="always", segment_bytes=SEGMENT_BYTES) as g:
        keys = [f"n{i}" for i in range(BASE_NODES)]
        g.add_nodes(keys, np.stack([vector(i) for i in range(BASE_NODES)]))
        g.add_edges(keys, keys[1:] + keys[:1], rels=["next"] * BASE_NODES)
        snapshot_lsn = g.checkpoint()["lsn"]
        for i in range(BASE_NODES, BASE_NODES + LATER_WRITES):
            g.add_nodes([f"n{i}"], vector(i)[None, :], texts=[PADDING])
            lsn_of[("node", f"n{i}")] = g._engine.last_lsn()
            if i % 3 == 0:
                g.add_edges([f"n{i - 1}"], [f"n{i}"], rels=["late"])
                lsn_of[("edge", f"n{i - 1}", f"n{i}")] = g._engine.last_lsn()
    assert snapshot_lsn == 2
    assert sorted(lsn_of.values()) == list(range(3, 3 + len(lsn_of)))  # one record per write
    names = segments(folder)
    assert len(names) >= 5, names
    assert first_lsn(names[0]) == snapshot_lsn + 1  # the checkpoint dropped the older segments
    return folder, lsn_of, snapshot_lsn


def copy_of(source, tmp_path, *, lock: bool = True) -> str:
    folder = str(tmp_path / "db")
    shutil.copytree(source[0], folder)
    if not lock:
        os.unlink(os.path.join(folder, "LOCK"))
    return folder


def late_targets(g: vg.Graph, key: str) -> list:
    return [edge.dst for edge in g.neighbors(key, direction="out", rels=["late"])]


def assert_holds(folder: str, lsn_of: dict, below: int) -> None:
    """The graph holds the base nodes and edges and exactly the later writes with LSN < below."""
    with vg.Graph.open(folder) as g:
        assert len(g) == BASE_NODES + sum(1 for w, lsn in lsn_of.items() if w[0] == "node" and lsn < below)
        for i in range(BASE_NODES):
            assert f"n{i}" in g
        for write, lsn in lsn_of.items():
            if write[0] == "node":
                assert (write[1] in g) == (lsn < below), (write, lsn, below)
                if lsn < below:
                    assert g.search(vector(int(write[1][1:])), k=1, exact=True).keys == [write[1]]
            elif lsn < below:
                assert write[2] in late_targets(g, write[1]), write
            elif write[1] in g:
                assert write[2] not in late_targets(g, write[1]), write
        assert g.count_edges == BASE_NODES + sum(1 for w, lsn in lsn_of.items() if w[0] == "edge" and lsn < below)


def test_the_marker_names_the_newest_segment(source):
    folder, _, _ = source
    with open(os.path.join(folder, "MANIFEST")) as f:
        uuid = json.load(f)["uuid"]
    assert read_marker(folder) == (uuid, first_lsn(segments(folder)[-1]))
    assert not os.path.exists(os.path.join(folder, "wal", "WAL_TAIL"))


@pytest.mark.parametrize("lock", [True, False], ids=["with-LOCK", "without-LOCK"])
def test_a_deleted_newest_segment_is_refused_and_nothing_changes(source, tmp_path, lock):
    folder = copy_of(source, tmp_path, lock=lock)
    newest = segments(folder)[-1]
    os.remove(os.path.join(folder, "wal", newest))
    before = listing(folder)
    with pytest.raises(CorruptionError) as raised:
        vg.Graph.open(folder)
    message = str(raised.value)
    assert f"WAL segment {os.path.join(folder, 'wal', newest)} is missing" in message
    assert f"Writes acknowledged from LSN {first_lsn(newest)} on are lost" in message
    assert "vecgraph restore" in message
    assert f"remove {os.path.join(folder, 'WAL_TAIL')} to open it without those writes" in message
    assert listing(folder) == before
    assert os.path.exists(os.path.join(folder, "LOCK")) == lock
    # opening again refuses again: nothing was repaired behind the user's back
    with pytest.raises(CorruptionError, match="is missing"):
        vg.Graph.open(folder, dim=DIM)
    assert listing(folder) == before


def test_the_two_newest_segments_deleted_lose_from_the_end_of_the_rest(source, tmp_path):
    folder = copy_of(source, tmp_path)
    names = segments(folder)
    for name in names[-2:]:
        os.remove(os.path.join(folder, "wal", name))
    with pytest.raises(CorruptionError) as raised:
        vg.Graph.open(folder)
    assert f"{names[-1]} is missing" in str(raised.value)
    assert f"from LSN {first_lsn(names[-2])} on are lost" in str(raised.value)
    assert f"the newest segment in {os.path.join(folder, 'wal')} is {names[-3]}" in str(raised.value)


@pytest.mark.parametrize("how", ["deleted", "emptied"])
def test_a_missing_wal_folder_is_refused_and_nothing_changes(source, tmp_path, how):
    folder = copy_of(source, tmp_path, lock=False)
    _, _, snapshot_lsn = source
    shutil.rmtree(os.path.join(folder, "wal"))
    if how == "emptied":
        os.mkdir(os.path.join(folder, "wal"))
    before = listing(folder)
    with pytest.raises(CorruptionError) as raised:
        vg.Graph.open(folder)
    message = str(raised.value)
    wal = os.path.join(folder, "wal")
    assert f"{segments(source[0])[-1]} is missing" in message
    assert (f"{wal} is missing" if how == "deleted" else f"{wal} holds no segment") in message
    assert f"Writes acknowledged from LSN {snapshot_lsn + 1} on are lost" in message
    assert listing(folder) == before
    assert not os.path.exists(os.path.join(folder, "LOCK"))


def test_removing_the_marker_opens_the_graph_without_the_lost_writes(source, tmp_path):
    folder = copy_of(source, tmp_path)
    _, lsn_of, _ = source
    newest = segments(folder)[-1]
    os.remove(os.path.join(folder, "wal", newest))
    with pytest.raises(CorruptionError):
        vg.Graph.open(folder)
    os.remove(os.path.join(folder, "WAL_TAIL"))
    assert_holds(folder, lsn_of, first_lsn(newest))
    # the writer wrote a new marker naming the segment it appends to; writing goes on
    assert read_marker(folder)[1] == first_lsn(segments(folder)[-1]) < first_lsn(newest)
    with vg.Graph.open(folder, segment_bytes=SEGMENT_BYTES) as g:
        g.add_nodes(["after"], vector(999)[None, :])
        g.checkpoint()
        g.add_nodes(["after2"], vector(998)[None, :])
    with vg.Graph.open(folder) as g:
        assert "after" in g and "after2" in g
    assert read_marker(folder)[1] == first_lsn(segments(folder)[-1])


def test_a_folder_without_a_marker_opens_with_all_its_data(source, tmp_path):
    """A folder written before WAL_TAIL existed: nothing to check; the writer adds the marker."""
    folder = copy_of(source, tmp_path)
    _, lsn_of, _ = source
    os.remove(os.path.join(folder, "WAL_TAIL"))
    assert_holds(folder, lsn_of, max(lsn_of.values()) + 1)
    assert read_marker(folder)[1] == first_lsn(segments(folder)[-1])
    # and from then on the loss of the newest segment is caught
    os.remove(os.path.join(folder, "wal", segments(folder)[-1]))
    with pytest.raises(CorruptionError, match="is missing"):
        vg.Graph.open(folder)


def test_an_intact_folder_opens_with_all_its_data_and_a_stale_marker_tmp_is_removed(source, tmp_path):
    folder = copy_of(source, tmp_path)
    _, lsn_of, _ = source
    with open(os.path.join(folder, "WAL_TAIL.tmp"), "wb") as f:
        f.write(b"VGTAIL\0\n half")  # a crash while the marker was written
    assert_holds(folder, lsn_of, max(lsn_of.values()) + 1)
    assert not os.path.exists(os.path.join(folder, "WAL_TAIL.tmp"))


def test_a_deleted_oldest_segment_after_the_snapshot_is_refused(source, tmp_path):
    folder = copy_of(source, tmp_path)
    _, _, snapshot_lsn = source
    names = segments(folder)
    os.remove(os.path.join(folder, "wal", names[0]))
    with pytest.raises(CorruptionError) as raised:
        vg.Graph.open(folder)
    message = str(raised.value)
    assert f"the WAL starts at LSN {first_lsn(names[1])}" in message
    assert f"LSNs {snapshot_lsn + 1} to {first_lsn(names[1]) - 1} are missing" in message


def test_a_deleted_middle_segment_is_an_lsn_gap(source, tmp_path):
    folder = copy_of(source, tmp_path)
    names = segments(folder)
    os.remove(os.path.join(folder, "wal", names[2]))
    with pytest.raises(CorruptionError) as raised:
        vg.Graph.open(folder)
    message = str(raised.value)
    assert "LSN gap between WAL segments" in message
    assert f"ends at LSN {first_lsn(names[2]) - 1}" in message
    assert f"starts at LSN {first_lsn(names[3])}" in message


def test_a_damaged_marker_is_refused(source, tmp_path):
    folder = copy_of(source, tmp_path)
    path = os.path.join(folder, "WAL_TAIL")
    with open(path, "r+b") as f:
        f.seek(33)
        byte = f.read(1)[0]
        f.seek(33)
        f.write(bytes([byte ^ 4]))
    before = listing(folder)
    with pytest.raises(CorruptionError, match="tail marker .*WAL_TAIL is damaged: its checksum does not match"):
        vg.Graph.open(folder)
    assert listing(folder) == before


def test_a_marker_of_another_database_is_ignored_and_replaced(source, tmp_path):
    folder = copy_of(source, tmp_path)
    other = str(tmp_path / "other")
    with vg.Graph.open(other, dim=DIM) as g:
        g.add_nodes(["x"], vector(1)[None, :])
    shutil.copyfile(os.path.join(other, "WAL_TAIL"), os.path.join(folder, "WAL_TAIL"))
    os.remove(os.path.join(folder, "wal", segments(folder)[-1]))
    with vg.Graph.open(folder) as g:  # not this database's marker: nothing to check against
        assert "n0" in g
    assert read_marker(folder)[1] == first_lsn(segments(folder)[-1])


def test_verify_reports_the_missing_segment_and_changes_nothing(source, tmp_path):
    folder = copy_of(source, tmp_path, lock=False)
    newest = segments(folder)[-1]
    os.remove(os.path.join(folder, "wal", newest))
    before = listing(folder)
    problems = snapshot.verify(folder)
    assert len(problems) == 1 and f"{newest} is missing" in problems[0], problems
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in (PACKAGE_ROOT, os.environ.get("PYTHONPATH")) if p))
    proc = subprocess.run([sys.executable, "-m", "vecgraph", "verify", folder], capture_output=True, text=True,
                          env=env, timeout=120, check=False)
    assert proc.returncode == 1, (proc.stdout, proc.stderr)
    assert f"WAL segment {os.path.join(folder, 'wal', newest)} is missing" in proc.stdout
    assert f"from LSN {first_lsn(newest)} on are lost" in proc.stdout
    assert proc.stderr.startswith(f"vecgraph verify: error: {folder}: 1 problem")
    assert listing(folder) == before
    # the intact folder verifies clean
    assert snapshot.verify(source[0]) == []


def test_checkpoints_reopens_and_restore_raise_no_false_alarm(source, tmp_path):
    """Many reopens, checkpoints (two generations kept, old segments dropped) and rolls: every
    open succeeds and the marker always names the newest segment; a restored export gets its
    own marker."""
    folder = copy_of(source, tmp_path)
    written = []
    for round_ in range(6):
        with vg.Graph.open(folder, segment_bytes=SEGMENT_BYTES) as g:
            for j in range(15):
                key = f"r{round_}-{j}"
                g.add_nodes([key], vector(10_000 + 100 * round_ + j)[None, :], texts=[PADDING])
                written.append(key)
            if round_ % 2 == 0:
                g.checkpoint()
            g.compact()
        assert read_marker(folder)[1] == first_lsn(segments(folder)[-1])
    with vg.Graph.open(folder) as g:
        assert all(key in g for key in written)
        export = str(tmp_path / "export")
        snapshot.export(g, export)
    restored = snapshot.restore(export, str(tmp_path / "restored"))
    with restored:
        assert all(key in restored for key in written)
    assert read_marker(str(tmp_path / "restored"))[1] == first_lsn(segments(str(tmp_path / "restored"))[-1])
    with vg.Graph.open(str(tmp_path / "restored")) as g:
        assert len(g) == BASE_NODES + LATER_WRITES + len(written)
