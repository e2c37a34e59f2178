"""Damaged write-ahead logs, through Graph.open: a torn or garbled last record is cut and the
graph recovers the writes before it; damage anywhere else, or a segment of another database,
is a CorruptionError; trailing junk is cut; the folder LOCK keeps a second writer out while its
holder lives and not after it died; deleted keys stay deleted across compaction, reopen and
checkpoints. The log format is documented in cpp/include/vecgraph/wal_format.hpp."""

from __future__ import annotations

import os
import random
import shutil
import signal
import struct
import subprocess
import sys

import numpy as np
import pytest
import vecgraph as vg
from conftest import FULL
from crash_workload import DIM, METRIC, Model, canonical, execute, observe, ops_stream, vector
from vecgraph.errors import CorruptionError, NotFoundError, StorageError

# Cutting a torn or garbled tail warns (asserted where it matters below); elsewhere it is expected.
pytestmark = pytest.mark.filterwarnings("ignore:cut .* bytes at the end of the WAL:RuntimeWarning")

HEADER_BYTES = 48
FRAME_HEADER_BYTES = 20
RECORD_TYPES = {"add": 1, "edges": 2, "upsert": 3, "delete": 4, "delete_edges": 5, "delete_tenant": 6}
BASE_OPS = 30  # writes before the one under test; no checkpoint or compaction among them


# ---------------------------------------------------------------- helpers


def segments(folder: str) -> list:
    wal = os.path.join(folder, "wal")
    return [os.path.join(wal, n) for n in sorted(os.listdir(wal)) if n.endswith(".log")]


def frames(path: str) -> list:
    """(offset, frame_bytes, type, lsn) of each complete frame of a segment, parsed per
    wal_format.hpp."""
    with open(path, "rb") as f:
        data = f.read()
    out = []
    offset = HEADER_BYTES
    while offset + FRAME_HEADER_BYTES <= len(data):
        payload = struct.unpack_from("<I", data, offset + 4)[0]
        size = (FRAME_HEADER_BYTES + payload + 7) // 8 * 8
        if offset + size > len(data):
            break
        out.append((offset, size, data[offset + 8], struct.unpack_from("<Q", data, offset + 12)[0]))
        offset += size
    return out


def build(folder: str, ops: list, **open_kwargs) -> list:
    """Creates a graph in ``folder`` with ``ops`` (one logged write each), closes it and returns
    the models after each prefix: states[i] is the state after the first i writes."""
    states = [Model()]
    with vg.Graph.open(folder, dim=DIM, metric=METRIC, **open_kwargs) as g:
        for op in ops:
            execute(g, op)
            model = states[-1].copy()
            model.apply(op)
            states.append(model)
    return states


def workload(count: int, seed: int = 5) -> list:
    """The first ``count`` logged writes of the crash workload (checkpoints and compactions,
    which change no state, left out)."""
    ops = []
    for _, op in ops_stream(Model(), seed, 0):
        if len(ops) == count:
            return ops
        if op[0] not in ("checkpoint", "compact"):
            ops.append(op)


def universe(states: list) -> set:
    keys = {"after-reopen"}
    for m in states:
        keys.update(m.nodes)
        keys.update(m.deleted)
    return keys


def assert_state(folder: str, model: Model, keys: set) -> None:
    with vg.Graph.open(folder) as g:
        assert observe(g, keys) == canonical(model)


def assert_recovers(folder: str, model: Model, keys: set) -> None:
    """Opening ``folder`` yields ``model``; a write made then survives another reopen."""
    with vg.Graph.open(folder) as g:
        assert observe(g, keys) == canonical(model)
        g.add_nodes(["after-reopen"], vector((9, 9, 9, 9))[None, :], tenants=["t0"])
    after = model.copy()
    after.apply(("add", ["after-reopen"], [(9, 9, 9, 9)], ["t0"]))
    with vg.Graph.open(folder) as g:
        assert observe(g, keys) == canonical(after)
        assert g.search(vector((9, 9, 9, 9)), k=1, exact=True).keys == ["after-reopen"]


def flip(path: str, byte: int, bit: int) -> None:
    with open(path, "r+b") as f:
        f.seek(byte)
        value = f.read(1)[0]
        f.seek(byte)
        f.write(bytes([value ^ (1 << bit)]))


def _crc32c_table() -> list:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_CRC_TABLE = _crc32c_table()


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    for b in data:
        crc = (crc >> 8) ^ _CRC_TABLE[(crc ^ b) & 0xFF]
    return crc ^ 0xFFFFFFFF


def masked_crc(data: bytes) -> int:
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def make_frame(rtype: int, lsn: int, payload: bytes, *, flags: int = 0, reserved: int = 0) -> bytes:
    """A frame as wal_format.hpp defines it, with a correct masked CRC32C."""
    body = struct.pack("<IBBHQ", len(payload), rtype, flags, reserved, lsn) + payload
    frame = struct.pack("<I", masked_crc(body)) + body
    return frame + bytes(-len(frame) % 8)


def read_frame(path: str, offset: int, size: int) -> bytes:
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(size)


def last_ops() -> dict:
    """The write under test, one of each logged kind, valid after BASE_OPS writes of workload()."""
    base = Model()
    for op in workload(BASE_OPS):
        base.apply(op)
    live = list(base.nodes)
    e = base.edges[0]
    return {
        "add": ("add", ["last-a", "last-b"], [(7, 7, 7, 0), (7, 7, 7, 1)], ["t1", "t2"]),
        "edges": ("edges", live[:3], live[-3:], ["r0", "r1", "r0"], [0.25, 1.5, 3.0]),
        "upsert": ("upsert", [live[0], "last-u"], [(7, 7, 8, 0), (7, 7, 8, 1)], ["t2", "t0"]),
        "delete": ("delete", live[1:3]),
        "delete_edges": ("delete_edges", [e[0]], [e[2]], [e[1]]),
        "delete_tenant": ("delete_tenant", "t1"),
    }


LAST_KINDS = list(RECORD_TYPES)


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    """For each kind: a closed folder whose last logged write is of that kind, with its states."""
    root = tmp_path_factory.mktemp("pristine")
    out = {}
    base = workload(BASE_OPS)
    for kind, op in last_ops().items():
        folder = str(root / kind)
        states = build(folder, base + [op])
        assert states[-1] != states[-2]
        (seg,) = segments(folder)
        recs = frames(seg)
        # one record per write, of the documented type, LSNs 1..n, the file ends at the last frame
        assert [r[2] for r in recs] == [RECORD_TYPES[o[0]] for o in base + [op]]
        assert [r[3] for r in recs] == list(range(1, len(recs) + 1))
        assert recs[-1][0] + recs[-1][1] == os.path.getsize(seg)
        out[kind] = (folder, states)
    return out


def fresh_copy(src: str, dst: str) -> str:
    """A copy of ``src`` in a folder not used before (``dst``, then ``dst.1``, ``dst.2``, ...)."""
    base, n = dst, 0
    while os.path.exists(dst):
        n += 1
        dst = f"{base}.{n}"
    shutil.copytree(src, dst)
    return dst


# ---------------------------------------------------------------- torn and garbled tails


@pytest.mark.parametrize("kind", LAST_KINDS)
def test_truncating_inside_the_last_record_recovers_the_writes_before_it(pristine, tmp_path, kind):
    src, states = pristine[kind]
    keys = universe(states)
    start, size, _, _ = frames(segments(src)[0])[-1]
    # every byte of the frame; without VECGRAPH_TESTS_FULL, every byte of its first 32 (the
    # frame header and the payload's first fields) and every 5th byte after them
    cuts = range(start, start + size) if FULL else [*range(start, start + 32), *range(start + 32, start + size, 5)]
    for cut in cuts:
        folder = fresh_copy(src, str(tmp_path / "db"))
        os.truncate(segments(folder)[0], cut)
        assert_recovers(folder, states[-2], keys)
        # the torn bytes were cut: the new write's record starts where the lost one did
        recs = frames(segments(folder)[0])
        assert recs[-1][0] == start and recs[-1][3] == len(states) - 1, f"cut at {cut}"
    # cutting nothing loses nothing
    assert_recovers(fresh_copy(src, str(tmp_path / "db")), states[-1], keys)


@pytest.mark.parametrize("kind", LAST_KINDS)
def test_flipping_any_bit_of_the_last_record_recovers_the_writes_before_it(pristine, tmp_path, kind):
    src, states = pristine[kind]
    keys = universe(states)
    folder = fresh_copy(src, str(tmp_path / "db"))
    seg = segments(folder)[0]
    with open(seg, "rb") as f:
        original = f.read()
    start, size, _, _ = frames(seg)[-1]
    want = canonical(states[-2])
    # every bit of one record with VECGRAPH_TESTS_FULL; every 7th bit otherwise (each byte
    # gets at least one flip, and all 8 bit positions occur)
    for index in range(0, size * 8, 1 if kind == "add" and FULL else 7):
        byte, bit = start + index // 8, index % 8
        with open(seg, "wb") as f:
            f.write(original)
        flip(seg, byte, bit)
        with pytest.warns(RuntimeWarning, match=f"cut {size} bytes at the end of the WAL"):
            g = vg.Graph.open(folder)
        with g:
            assert observe(g, keys) == want, f"flipped bit {bit} of byte {byte - start} of the last frame"
        assert os.path.getsize(seg) == start, "the garbled frame was not cut"
    with open(seg, "wb") as f:
        f.write(original)
    flip(seg, start + size - 1, 0)  # the last pad byte (or payload byte)
    assert_recovers(folder, states[-2], keys)


@pytest.mark.parametrize("junk", ["zeros", "random"])
def test_junk_after_the_last_record_is_cut(pristine, tmp_path, junk):
    src, states = pristine["edges"]
    keys = universe(states)
    folder = fresh_copy(src, str(tmp_path / "db"))
    seg = segments(folder)[0]
    size = os.path.getsize(seg)
    data = bytes(4096) if junk == "zeros" else random.Random(3).randbytes(4096)
    with open(seg, "ab") as f:
        f.write(data)
    assert_recovers(folder, states[-1], keys)
    recs = frames(seg)
    assert recs[-1][0] == size and recs[-1][3] == len(states)  # the new record replaced the junk


def test_torn_tail_after_a_checkpoint(tmp_path):
    """Snapshot + WAL tail: a torn last record is cut, the snapshot and the records after it
    before the torn one are kept."""
    ops = workload(40)
    src = str(tmp_path / "src")
    states = [Model()]
    with vg.Graph.open(src, dim=DIM, metric=METRIC) as g:
        for i, op in enumerate(ops):
            execute(g, op)
            model = states[-1].copy()
            model.apply(op)
            states.append(model)
            if i == 29:
                assert g.checkpoint()["lsn"] == 30
    keys = universe(states)
    # The checkpoint started a new segment at LSN 31 and dropped the one before it.
    (seg,) = segments(src)
    recs = frames(seg)
    assert recs[0][3] == 31 and recs[-1][3] == 40
    start, size, _, _ = recs[-1]
    for cut in (start, start + 1, start + 19, start + 20, start + size - 1):
        folder = fresh_copy(src, str(tmp_path / "db"))
        os.truncate(segments(folder)[0], cut)
        assert_recovers(folder, states[-2], keys)
    # every record after the snapshot cut away: the snapshot alone
    folder = fresh_copy(src, str(tmp_path / "db"))
    os.truncate(segments(folder)[0], recs[0][0])
    assert_recovers(folder, states[30], keys)


def test_short_last_segment_is_a_torn_tail(tmp_path):
    """A last segment shorter than its 48-byte header (a crash while it was created) holds no
    record: recovery keeps the earlier segments and writing resumes."""
    ops = workload(80)
    src = str(tmp_path / "src")
    states = build(src, ops, segment_bytes=4096)
    keys = universe(states)
    segs = segments(src)
    assert len(segs) >= 2
    first_of_last = frames(segs[-1])[0][3]
    for length in (0, 1, 20, 47, 48):
        folder = fresh_copy(src, str(tmp_path / "db"))
        os.truncate(segments(folder)[-1], length)
        assert_recovers(folder, states[first_of_last - 1], keys)


def test_leftovers_of_interrupted_file_operations_are_ignored(pristine, tmp_path):
    """A segment still named .log.tmp (never renamed into the log), a MANIFEST.tmp and a
    snapshot folder .tmp from an interrupted checkpoint change nothing."""
    src, states = pristine["upsert"]
    keys = universe(states)
    folder = fresh_copy(src, str(tmp_path / "db"))
    seg = segments(folder)[0]
    with open(seg, "rb") as f:
        data = f.read()
    with open(os.path.join(folder, "wal", f"{len(states):020d}.log.tmp"), "wb") as f:
        f.write(data[:HEADER_BYTES + 10])
    with open(os.path.join(folder, "MANIFEST.tmp"), "wb") as f:
        f.write(b'{"format_version": 1, "trunc')
    os.makedirs(os.path.join(folder, "snapshots", "00000001.tmp"))
    with open(os.path.join(folder, "snapshots", "00000001.tmp", "nodes.arrow"), "wb") as f:
        f.write(b"ARROW1 half")
    assert_recovers(folder, states[-1], keys)
    with vg.Graph.open(folder) as g:
        assert g.checkpoint()["nodes"] == len(states[-1].nodes) + 1
    after = states[-1].copy()
    after.apply(("add", ["after-reopen"], [(9, 9, 9, 9)], ["t0"]))
    assert_state(folder, after, keys)


def test_python_frame_encoder_matches_the_log(pristine):
    """The helper below writes frames the reader accepts: re-encoding every record of a real
    log gives back its bytes (CRC32C check value 0xE3069283 for b"123456789")."""
    assert crc32c(b"123456789") == 0xE3069283
    seg = segments(pristine["edges"][0])[0]
    for offset, size, rtype, lsn in frames(seg):
        frame = read_frame(seg, offset, size)
        payload = frame[20:20 + struct.unpack_from("<I", frame, 4)[0]]
        assert make_frame(rtype, lsn, payload) == frame


def test_crafted_valid_frames(pristine, tmp_path):
    src, states = pristine["edges"]
    keys = universe(states)
    recs = frames(segments(src)[0])
    n = len(recs)
    last_off, last_size, last_type, _ = recs[-1]

    def with_segment(edit) -> str:
        folder = fresh_copy(src, str(tmp_path / "db"))
        seg = segments(folder)[0]
        with open(seg, "rb") as f:
            data = f.read()
        with open(seg, "wb") as f:
            f.write(edit(data))
        return folder

    last = read_frame(segments(src)[0], last_off, last_size)
    payload = last[20:20 + struct.unpack_from("<I", last, 4)[0]]

    # A byte copy of the last frame appended (its LSN repeats): a tail to cut, not a record to
    # apply twice (the edges would double).
    assert_recovers(with_segment(lambda d: d + last), states[-1], keys)
    # The last record stamped with a later LSN (valid CRC): a frame valid on its own beyond a
    # gap means records were lost in the middle of the log.
    restamped = make_frame(last_type, n + 5, payload)
    with pytest.raises(CorruptionError):
        vg.Graph.open(with_segment(lambda d: d[:last_off] + restamped))
    # A valid next record after a gap of garbage: records lost, not a torn tail.
    with pytest.raises(CorruptionError):
        vg.Graph.open(with_segment(lambda d: d + bytes(64) + make_frame(last_type, n + 1, payload)))
    # A middle record spliced out (every frame still valid, LSN chain broken): corruption.
    mid_off, mid_size = recs[n // 2][0], recs[n // 2][1]
    with pytest.raises(CorruptionError):
        vg.Graph.open(with_segment(lambda d: d[:mid_off] + d[mid_off + mid_size:]))
    # A middle record duplicated in place: corruption.
    with pytest.raises(CorruptionError):
        vg.Graph.open(with_segment(lambda d: d[:mid_off + mid_size] + d[mid_off:]))
    # An unknown record type from a newer version, not skippable: corruption.
    with pytest.raises(CorruptionError):
        vg.Graph.open(with_segment(lambda d: d + make_frame(200, n + 1, b"future")))
    # ... marked skippable: skipped, and writing continues after it.
    folder = with_segment(lambda d: d + make_frame(200, n + 1, b"future", flags=1))
    assert_recovers(folder, states[-1], keys)
    assert [r[3] for r in frames(segments(folder)[0])] == list(range(1, n + 3))
    # Frames that are invalid on their own (reserved bits, undefined flag bits, type 0, a
    # non-zero pad) at the end: a torn tail, cut.
    for bad in (make_frame(last_type, n, payload, reserved=1), make_frame(last_type, n, payload, flags=2),
                make_frame(0, n, payload)):
        assert_recovers(with_segment(lambda d, bad=bad: d[:last_off] + bad), states[-2], keys)
    if len(payload) % 8 != 4:  # the last frame has pad bytes
        padded = bytearray(last)
        padded[-1] = 1
        assert_recovers(with_segment(lambda d: d[:last_off] + bytes(padded)), states[-2], keys)


# ---------------------------------------------------------------- damage that must not be cut


def test_flipping_a_bit_in_a_middle_record_is_corruption(pristine, tmp_path):
    src, _ = pristine["add"]
    recs = frames(segments(src)[0])
    rng = random.Random(11)
    cases = []
    for index in (0, 1, len(recs) // 2, len(recs) - 2):
        start, size, _, _ = recs[index]
        # crc, payload_bytes (low and high bits), type, flags, reserved, lsn, payload, pad
        for byte, bit in ((0, 0), (3, 7), (4, 0), (7, 6), (8, 1), (9, 3), (10, 0), (12, 0), (19, 7),
                          (20, 2), (size - 1, 5), (rng.randrange(20, size), rng.randrange(8))):
            cases.append((index, start + byte, bit))
    for index, byte, bit in cases:
        folder = fresh_copy(src, str(tmp_path / "db"))
        seg = segments(folder)[0]
        size_before = os.path.getsize(seg)
        flip(seg, byte, bit)
        with pytest.raises(CorruptionError):
            vg.Graph.open(folder)
        assert os.path.getsize(seg) == size_before, f"record {index}: the log was cut despite the corruption"
        # the failed open released the LOCK and left the files alone: still corrupt, not half-repaired
        with pytest.raises(CorruptionError):
            vg.Graph.open(folder)


def test_flipping_a_bit_in_the_segment_header_is_corruption(pristine, tmp_path):
    """The header is written durably before the file gets its .log name, so a damaged header is
    never a torn tail: dropping the segment would lose acknowledged writes."""
    src, _ = pristine["add"]
    for byte, bit in ((0, 0), (8, 0), (12, 4), (16, 0), (31, 7), (32, 0), (40, 3)):
        folder = fresh_copy(src, str(tmp_path / "db"))
        flip(segments(folder)[0], byte, bit)
        with pytest.raises(CorruptionError):
            vg.Graph.open(folder)


def test_multi_segment_log_damage(tmp_path):
    ops = workload(120)
    src = str(tmp_path / "src")
    states = build(src, ops, segment_bytes=4096)
    keys = universe(states)
    segs = segments(src)
    assert len(segs) >= 3
    # the segments chain: each starts at the previous one's last LSN + 1 and is named after it
    lsns = [[r[3] for r in frames(s)] for s in segs]
    assert [lsn for chunk in lsns for lsn in chunk] == list(range(1, len(ops) + 1))
    assert [int(os.path.basename(s)[:-4]) for s in segs] == [chunk[0] for chunk in lsns]
    assert_state(src, states[-1], keys)

    def append_zeros(path: str) -> None:
        with open(path, "ab") as f:
            f.write(bytes(4096))

    def damaged(edit) -> str:
        folder = fresh_copy(src, str(tmp_path / "db"))
        edit(segments(folder))
        return folder

    middle = segs[1]
    start, size, _, _ = frames(middle)[-1]
    edits = {
        "bit flip in the last record of a middle segment": lambda s: flip(s[1], start + 20, 0),
        "middle segment truncated inside its last record": lambda s: os.truncate(s[1], start + size - 8),
        "middle segment missing (LSN gap)": lambda s: os.remove(s[1]),
        "zeros appended to a middle segment": lambda s: append_zeros(s[1]),
        "first segment missing": lambda s: os.remove(s[0]),
    }
    for name, edit in edits.items():
        folder = damaged(edit)
        with pytest.raises(CorruptionError):
            vg.Graph.open(folder)
        print(name, "-> CorruptionError")

    # a torn tail in the last segment is still just cut
    folder = damaged(lambda s: os.truncate(s[-1], frames(s[-1])[-1][0] + 5))
    assert_recovers(folder, states[-2], keys)


# ---------------------------------------------------------------- foreign segments


def test_segment_from_another_database_is_corruption(tmp_path):
    ops = workload(20)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    build(a, ops)
    build(b, ops)  # the same writes: only the db uuid in the header tells the segments apart
    (seg_a,), (seg_b,) = segments(a), segments(b)
    with open(seg_a, "rb") as fa, open(seg_b, "rb") as fb:
        data_a, data_b = fa.read(), fb.read()
    assert data_a[HEADER_BYTES:] == data_b[HEADER_BYTES:] and data_a[16:32] != data_b[16:32]
    shutil.copyfile(seg_b, seg_a)
    with pytest.raises(CorruptionError):
        vg.Graph.open(a)


def test_last_segment_from_another_database_is_corruption(tmp_path):
    ops = workload(80)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    states = build(a, ops, segment_bytes=4096)
    build(b, ops, segment_bytes=4096)
    segs_a, segs_b = segments(a), segments(b)
    assert [os.path.basename(s) for s in segs_a] == [os.path.basename(s) for s in segs_b]
    assert len(segs_a) >= 2
    backup = str(tmp_path / "a.bak")
    shutil.copytree(a, backup)
    for i in (len(segs_a) - 1, 0):
        shutil.rmtree(a)
        shutil.copytree(backup, a)
        shutil.copyfile(segs_b[i], segs_a[i])
        with pytest.raises(CorruptionError):
            vg.Graph.open(a)
    # a segment of another database added after the last one (named by its own first LSN)
    shutil.rmtree(a)
    shutil.copytree(backup, a)
    shutil.copyfile(segs_b[0], os.path.join(a, "wal", f"{len(ops) + 1:020d}.log"))
    with pytest.raises(CorruptionError):
        vg.Graph.open(a)
    shutil.rmtree(a)
    shutil.copytree(backup, a)
    assert_state(a, states[-1], universe(states))


# ---------------------------------------------------------------- LOCK

HOLDER = """
import sys, time, vecgraph
g = vecgraph.Graph.open(sys.argv[1], dim=16)
g.add_nodes(["held"], [[1.0] * 16])
print("ready", flush=True)
time.sleep(120)
"""


def test_lock_held_by_a_live_process_then_stale_after_sigkill(tmp_path):
    folder = str(tmp_path / "db")
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, folder], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline() == "ready\n"
        with pytest.raises(StorageError) as info:
            vg.Graph.open(folder)
        assert str(proc.pid) in str(info.value)
        with pytest.raises(StorageError):
            vg.Graph.open(folder, dim=16)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        proc.stdout.close()
    assert proc.returncode == -signal.SIGKILL
    assert os.path.exists(os.path.join(folder, "LOCK"))  # stale file, no lock
    with vg.Graph.open(folder) as g:
        assert "held" in g and len(g) == 1  # its acknowledged write survived the kill
        # a second Graph in the same process conflicts too
        with pytest.raises(StorageError):
            vg.Graph.open(folder)
    with vg.Graph.open(folder) as g:  # close() released it
        assert len(g) == 1


# ---------------------------------------------------------------- deletes stay deleted


def _assert_gone(g: vg.Graph, gone: dict, live: dict) -> None:
    """``gone``: deleted key -> its last vector; ``live``: key -> vector."""
    assert len(g) == len(live)
    for key, v in gone.items():
        assert key not in g
        with pytest.raises(NotFoundError):
            g.get_node(key)
        with pytest.raises(NotFoundError):
            g.neighbors(key)
        res = g.search(v, k=len(live) + 5, exact=True, seeds=len(live) + 5, hops=3)
        assert key not in res.keys and set(res.keys) <= set(live)
        assert key not in g.search(v, k=10, exact=False, hops=2).keys
    for key in live:
        for e in g.neighbors(key, direction="both"):
            assert e.src not in gone and e.dst not in gone
    for key, v in live.items():
        assert g.search(v, k=1, exact=True).keys == [key]


def test_deleted_keys_never_come_back(tmp_path):
    folder = str(tmp_path / "db")
    rng = np.random.default_rng(4)
    keys = [f"n{i}" for i in range(40)]
    vecs = {k: rng.standard_normal(DIM).astype(np.float32) for k in keys}
    tenant_of = {k: ("t1" if i % 4 == 0 else "t0") for i, k in enumerate(keys)}
    live = dict(vecs)
    gone: dict = {}

    def delete(g, ks):
        assert g.delete_nodes(ks) == len(ks)
        for k in ks:
            gone[k] = live.pop(k)

    g = vg.Graph.open(folder, dim=DIM, metric=METRIC)
    g.add_nodes(keys, np.stack([vecs[k] for k in keys]), tenants=[tenant_of[k] for k in keys])
    g.add_edges(keys, keys[1:] + keys[:1], rels="next")
    g.add_edges(keys[::2], keys[1::2], rels="pair")
    delete(g, ["n1", "n2"])
    _assert_gone(g, gone, live)
    g.compact()
    _assert_gone(g, gone, live)
    g.close()
    with vg.Graph.open(folder) as g:  # WAL replay
        _assert_gone(g, gone, live)
        g.checkpoint()
        _assert_gone(g, gone, live)
    with vg.Graph.open(folder) as g:  # snapshot
        _assert_gone(g, gone, live)
        delete(g, ["n3", "n10"])
        assert g.delete_tenant("t1") == sum(1 for k in live if tenant_of[k] == "t1")
        for k in [k for k in live if tenant_of[k] == "t1"]:
            gone[k] = live.pop(k)
        g.compact()
        _assert_gone(g, gone, live)
    with vg.Graph.open(folder) as g:  # snapshot + WAL tail with deletes
        _assert_gone(g, gone, live)
        g.checkpoint()
        delete(g, ["n5"])
        g.checkpoint()
    with vg.Graph.open(folder) as g:  # snapshot written after the deletes, empty tail
        _assert_gone(g, gone, live)
        # a deleted key added again is a new node: new vector, none of its old edges
        v = rng.standard_normal(DIM).astype(np.float32)
        g.add_nodes(["n2"], v[None, :], tenants=["t0"])
        live["n2"] = gone.pop("n2")
        live["n2"] = v
        assert g.neighbors("n2", direction="both") == []
        _assert_gone(g, gone, live)
    with vg.Graph.open(folder) as g:
        _assert_gone(g, gone, live)
        assert g.neighbors("n2", direction="both") == []
        added = list(zip(keys, keys[1:] + keys[:1])) + list(zip(keys[::2], keys[1::2]))
        kept = [e for e in added if e[0] in live and e[1] in live and "n2" not in e]
        assert g.count_edges == len(kept) > 0
