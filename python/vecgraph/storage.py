"""The graph folder on disk: MANIFEST, LOCK, Arrow snapshots (the layout below; ARCHITECTURE.md).

::

    mydb.vg/
      MANIFEST            JSON: format version, db uuid, dim, metric, HNSW parameters,
                          snapshot folder, snapshot LSN, generation, sha256 of each snapshot file,
                          the embedder (name, dim) that built the graph, if one was recorded
      snapshots/<gen>/    nodes.arrow, edges.arrow (Arrow IPC files), and hnsw.usearch (the HNSW
                          graph at the same LSN, when it indexes exactly the snapshot's nodes)
      wal/<lsn>.log       WAL segments (format: cpp/include/vecgraph/wal_format.hpp)
      WAL_TAIL            48 bytes: db uuid and the first LSN of the newest WAL segment, with a
                          CRC32C (wal_format.hpp, TAIL MARKER); beside wal/, not in it
      LOCK                held (flock) by the process that has the graph open for writing
                          (exclusive), or by those that have it open read-only (shared)

The MANIFEST is the one commit point: it is replaced atomically (write a temporary file,
fsync it, rename it over MANIFEST, fsync the folder), so after a crash it names either the old
snapshot or the new one, never half of one. Snapshot files are written and fsynced before the
MANIFEST that names them; WAL segments older than the snapshot's LSN are dropped only after.

WAL_TAIL is rewritten the same way by the WAL writer, once per new segment (never per write):
after the segment is durable in wal/ and before a record goes into it. So the newest segment
in wal/ always starts at or after the LSN WAL_TAIL names; when it does not (the newest segments,
or all of wal/, were deleted or not copied), the writes they held are lost and opening the
graph raises CorruptionError (:func:`check_wal_tail`) instead of silently going on without
them. A folder without WAL_TAIL (written by an earlier version, or the file removed to accept
the loss) is not checked; the writer writes one when it attaches.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import uuid as uuidlib
from typing import Any, Optional

import numpy as np

from . import _core
from .errors import CorruptionError, InvalidArgumentError, StorageError

FORMAT_VERSION = 1
SNAPSHOT_SCHEMA_VERSION = 1
MANIFEST = "MANIFEST"
LOCK = "LOCK"
WAL_DIR = "wal"
WAL_TAIL = "WAL_TAIL"  # wal::tail_marker_name
SNAPSHOT_DIR = "snapshots"
KEEP_GENERATIONS = 2
SNAPSHOT_FILES = ("nodes.arrow", "edges.arrow")
HNSW_FILE = "hnsw.usearch"
# A generation's own description (the MANIFEST's fields as of it, its files' sha256).
SNAPSHOT_DESCRIPTION = "snapshot.json"
DESCRIBED = ("format_version", "uuid", "dim", "metric", "hnsw", "embedder", "filterable")
# The HNSW parameters of a graph made without them (Graph, Graph.open, a restore of a snapshot
# whose description has none). A graph's own parameters are kept in its MANIFEST.
DEFAULT_HNSW = {"connectivity": 24, "expansion_add": 128, "expansion_search": 128}

__all__ = ["FolderLock", "read_manifest", "write_manifest", "new_manifest", "write_snapshot", "load_snapshot"]


def folder_bytes(path: str) -> int:
    """Bytes of every file below ``path`` (files removed meanwhile count 0)."""
    total = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                total += os.path.getsize(os.path.join(root, name))
            except OSError:
                pass
    return total


def fsync_dir(path: str) -> None:
    """fsync a folder so that a rename or a new file in it survives a crash."""
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_file_durably(path: str, data: bytes) -> None:
    with open(path, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())


def _lock_error(folder: str, path: str, error: OSError, fd: int) -> StorageError:
    """The error for a failed ``flock`` of ``fd`` (open on ``path``), naming the holder's pid
    written in the file."""
    import fcntl

    if error.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
        return StorageError(f"cannot lock {path}: {error}")
    try:  # a shared lock is refused only by a writer's exclusive one: else readers hold it
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError:
        pass
    else:
        fcntl.flock(fd, fcntl.LOCK_UN)
        return StorageError(f"{folder} is open read-only in another Graph (Graph.open(..., read_only=True), in this "
                            "or another process); close it first")
    try:
        holder = os.pread(fd, 64, 0).decode(errors="replace").strip()
    except OSError:
        holder = ""
    if holder == str(os.getpid()):
        return StorageError(f"{folder} is already open for writing in this process (another Graph object that "
                            "was not closed, or a forked child holding it); close it first")
    return StorageError(f"{folder} is already open for writing (LOCK held by pid {holder or '?'}); "
                        "close the other Graph or process first")


class FolderLock:
    """An exclusive ``flock`` on ``<folder>/LOCK``, held while a graph is open for writing, or a
    shared one, held while it is open read-only (any number of readers, no writer meanwhile).

    The kernel releases the lock when the holding process dies, so a stale LOCK file left by a
    killed process never blocks reopening. Two Graph objects in one process conflict as well.
    """

    def __init__(self, folder: str, *, stamp: bool = True, shared: bool = False) -> None:
        """Takes the lock; with ``stamp``, also writes this process's pid into the file (else
        :meth:`stamp` does, so that a caller can still back out leaving an existing LOCK as
        it was). ``shared`` takes the readers' lock: the LOCK is opened for reading only, and
        neither created nor stamped (a folder without one was never open for writing, or sits
        on a read-only filesystem where no writer can open it)."""
        self._fd: Optional[int] = None
        import fcntl  # POSIX only

        self.path = os.path.join(folder, LOCK)
        if shared:
            try:
                self._fd = os.open(self.path, os.O_RDONLY)
            except FileNotFoundError:
                return
            except OSError as e:
                raise StorageError(f"cannot open {self.path} for reading: {e}") from e
            self._flock(folder, fcntl.LOCK_SH)
            return
        while True:
            try:
                self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                hint = ("; to read the graph, open it with read_only=True"
                        if e.errno in (errno.EROFS, errno.EACCES, errno.EPERM) else "")
                raise StorageError(f"cannot open {self.path} for writing: {e}{hint}") from e
            self._flock(folder, fcntl.LOCK_EX)
            # A failed open removes the LOCK it made while holding it: a lock taken on the file
            # it removed (opened before the removal) guards nothing, so take the one now there.
            try:
                same = os.path.samestat(os.fstat(self._fd), os.stat(self.path))
            except FileNotFoundError:
                same = False
            if same:
                break
            os.close(self._fd)
            self._fd = None
        if stamp:
            self.stamp()

    def _flock(self, folder: str, kind: int) -> None:
        """Takes the ``flock`` of ``kind`` (LOCK_SH or LOCK_EX) on the open LOCK without waiting;
        on a refusal closes it and raises the StorageError naming the holder."""
        import fcntl

        try:
            fcntl.flock(self._fd, kind | fcntl.LOCK_NB)
        except OSError as e:
            error = _lock_error(folder, self.path, e, self._fd)
            os.close(self._fd)
            self._fd = None
            raise error from None

    def stamp(self) -> None:
        """Writes this process's pid into the LOCK file (named in a second opener's error)."""
        if self._fd is not None:
            os.ftruncate(self._fd, 0)
            os.pwrite(self._fd, f"{os.getpid()}\n".encode(), 0)

    def release(self) -> None:
        if self._fd is not None:
            os.close(self._fd)  # closing the descriptor releases the flock
            self._fd = None

    def __del__(self) -> None:
        if getattr(self, "_fd", None) is not None:
            self.release()


def new_manifest(dim: int, metric: str, hnsw: dict) -> dict:
    return {
        "format_version": FORMAT_VERSION,
        "uuid": uuidlib.uuid4().hex,
        "dim": dim,
        "metric": metric,
        "hnsw": hnsw,
        "snapshot": None,
        "snapshot_lsn": 0,
        "generation": 0,
        "files": {},
        "previous": None,
        "embedder": None,
        "filterable": {},
    }


def read_manifest(folder: str) -> Optional[dict]:
    """The MANIFEST of ``folder``, or None if there is none. Raises CorruptionError if it is
    not a MANIFEST this version can read."""
    path = os.path.join(folder, MANIFEST)
    try:
        with open(path, "rb") as f:
            raw = f.read()
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StorageError(f"cannot read {path}: {e}") from e
    hint = f"; `vecgraph repair {folder}` rebuilds it from the snapshots and the WAL"
    try:
        manifest = json.loads(raw)
    except ValueError as e:
        raise CorruptionError(f"{path} is not valid JSON ({e}){hint}") from None
    problem = _manifest_problem(manifest)
    if problem:
        raise CorruptionError(f"{path} is not a valid vecgraph MANIFEST: {problem}{hint}")
    return manifest


def _manifest_problem(m: Any) -> str:
    """What is wrong with a parsed MANIFEST, or "" if nothing."""
    def is_int(v: Any) -> bool:
        return type(v) is int

    if not isinstance(m, dict):
        return "not a JSON object"
    for key in ("format_version", "uuid", "dim", "metric", "hnsw", "snapshot", "snapshot_lsn", "generation", "files"):
        if key not in m:
            return f"{key!r} is missing"
    if not is_int(m["format_version"]):
        return f"format_version must be an int, got {m['format_version']!r}"
    if m["format_version"] != FORMAT_VERSION:
        return f"format version {m['format_version']}; this vecgraph reads version {FORMAT_VERSION}"
    if not (isinstance(m["uuid"], str) and len(m["uuid"]) == 32 and all(c in "0123456789abcdef" for c in m["uuid"])):
        return f"uuid must be 32 lowercase hex digits, got {m['uuid']!r}"
    if not is_int(m["dim"]) or not 1 <= m["dim"] <= 65536:
        return f"dim must be an int in [1, 65536], got {m['dim']!r}"
    if m["metric"] not in ("cos", "ip", "l2"):
        return f"metric must be 'cos', 'ip' or 'l2', got {m['metric']!r}"
    hnsw = m["hnsw"]
    if not isinstance(hnsw, dict) or any(not is_int(hnsw.get(k)) or hnsw.get(k) < 1
                                         for k in ("connectivity", "expansion_add", "expansion_search")):
        return f"hnsw must hold positive ints connectivity, expansion_add, expansion_search; got {hnsw!r}"
    if not is_int(m["snapshot_lsn"]) or m["snapshot_lsn"] < 0:
        return f"snapshot_lsn must be an int >= 0, got {m['snapshot_lsn']!r}"
    if not is_int(m["generation"]) or m["generation"] < 0:
        return f"generation must be an int >= 0, got {m['generation']!r}"
    snapshot = m["snapshot"]
    if snapshot is None:
        if m["snapshot_lsn"] != 0:
            return f"snapshot_lsn is {m['snapshot_lsn']} but no snapshot is named"
    elif not (isinstance(snapshot, str) and snapshot.startswith(SNAPSHOT_DIR + "/") and ".." not in snapshot):
        return f"snapshot must be null or '{SNAPSHOT_DIR}/<generation>', got {snapshot!r}"
    if "text_lsn" in m and not (is_int(m["text_lsn"]) and 0 <= m["text_lsn"] <= m["snapshot_lsn"]):
        return f"text_lsn must be an int in [0, snapshot_lsn], got {m['text_lsn']!r}"
    filterable = m.get("filterable")
    if filterable is not None and not (
        isinstance(filterable, dict)
        and all(isinstance(k, str) and k and v in ("str", "int64", "float64", "timestamp") for k, v in filterable.items())
    ):
        return f"filterable must be null or {{name: 'str' | 'int64' | 'float64' | 'timestamp'}}, got {filterable!r}"
    embedder = m.get("embedder")
    if embedder is not None and not (
        isinstance(embedder, dict)
        and isinstance(embedder.get("name"), str)
        and embedder["name"]
        and is_int(embedder.get("dim"))
        and embedder["dim"] == m["dim"]
        and isinstance(embedder.get("spec", ""), str)
    ):
        return f"embedder must be null or {{'name': <non-empty str>, 'dim': {m['dim']}}}, got {embedder!r}"
    files = m["files"]
    if not isinstance(files, dict) or (
        snapshot is not None and not set(SNAPSHOT_FILES) <= set(files) <= {*SNAPSHOT_FILES, HNSW_FILE}
    ):
        return f"files must name the sha256 of nodes.arrow, edges.arrow (and hnsw.usearch), got {files!r}"
    if any(not (isinstance(v, str) and len(v) == 64) for v in files.values()):
        return f"files must map file names to sha256 hex digests, got {files!r}"
    previous = m.get("previous")
    if previous is not None and not (
        isinstance(previous, dict)
        and isinstance(previous.get("snapshot"), str)
        and previous["snapshot"].startswith(SNAPSHOT_DIR + "/")
        and ".." not in previous["snapshot"]
        and is_int(previous.get("snapshot_lsn"))
        and isinstance(previous.get("files"), dict)
    ):
        return f"previous must be null or name a snapshot, its LSN and files, got {previous!r}"
    return ""


def disk_full(error: BaseException) -> bool:
    """Whether ``error`` (an OSError, or an error raised from one) says the disk or quota is full."""
    while error is not None:
        if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        if "No space left on device" in str(error) or "Disk quota exceeded" in str(error):
            return True
        error = error.__cause__ or error.__context__  # type: ignore[assignment]
    return False


def graph_remnants(folder: str) -> list[str]:
    """What of a graph a folder holds besides its MANIFEST (snapshots/, wal/, WAL_TAIL): a
    folder holding some without a MANIFEST lost it (see :func:`missing_manifest`)."""
    def starts_with(path: str, magic: bytes) -> bool:
        try:
            with open(path, "rb") as f:
                return f.read(len(magic)) == magic
        except OSError:
            return False

    def listing(path: str) -> list[str]:
        try:
            return os.listdir(path) if os.path.isdir(path) else []
        except OSError:
            return []

    found = []
    snapshots = os.path.join(folder, SNAPSHOT_DIR)
    if any(name.isdigit() and starts_with(os.path.join(snapshots, name, SNAPSHOT_FILES[0]), b"ARROW1")
           for name in listing(snapshots)):
        found.append(SNAPSHOT_DIR)
    wal = os.path.join(folder, WAL_DIR)
    if any(name.endswith(".log") and starts_with(os.path.join(wal, name), b"VGWAL\0\r\n") for name in listing(wal)):
        found.append(WAL_DIR)
    if starts_with(os.path.join(folder, WAL_TAIL), b"VGTAIL\0\n"):
        found.append(WAL_TAIL)
    return found


def missing_manifest(folder: str, remnants: list[str]) -> CorruptionError:
    """The error of opening a folder that holds a graph's ``remnants`` but no readable MANIFEST."""
    return CorruptionError(
        f"{folder} holds a vecgraph graph ({', '.join(remnants)}) but its {MANIFEST} is missing: "
        f"`vecgraph repair {folder}` (vecgraph.Graph.repair) rebuilds it from the newest sound snapshot "
        "and the WAL, or restore the folder from a backup")


def foreign_entries(folder: str) -> list[str]:
    """Names in a folder that holds no MANIFEST other than what creating a graph there leaves
    when it is interrupted: a LOCK holding a pid (or nothing) and a MANIFEST.tmp holding a
    manifest. A graph is only created in a folder without them."""
    foreign = []
    for name in os.listdir(folder):
        path = os.path.join(folder, name)
        try:
            if name == LOCK and os.path.isfile(path):
                with open(path, "rb") as f:
                    if f.read(32).strip().isdigit() or os.path.getsize(path) == 0:
                        continue
            elif name == MANIFEST + ".tmp" and os.path.isfile(path) and os.path.getsize(path) < (1 << 20):
                with open(path, "rb") as f:
                    data = json.loads(f.read())
                if isinstance(data, dict) and {"format_version", "uuid"} <= data.keys():
                    continue
        except (OSError, ValueError):
            pass
        foreign.append(name)
    return foreign


def probe_lock(folder: str) -> None:
    """Raises StorageError when a process holds ``<folder>/LOCK``; creates and changes nothing
    (a folder without a LOCK file is open nowhere)."""
    import fcntl

    path = os.path.join(folder, LOCK)
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return
    except OSError as e:
        raise StorageError(f"cannot open {path}: {e}") from e
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as e:
        raise _lock_error(folder, path, e, fd) from None
    finally:
        os.close(fd)  # releases the probe's lock, if it got it


def check_wal_tail(folder: str, manifest: dict) -> None:
    """Raises CorruptionError when ``folder``'s WAL lacks the newest segment WAL_TAIL names
    (the message names the segment, the LSN from which writes are lost, and what to do), or
    WAL_TAIL is damaged. Nothing to check without WAL_TAIL, or with one of another database.
    Reads only."""
    _core.check_wal_tail(os.path.join(folder, WAL_DIR), os.path.join(folder, WAL_TAIL),
                         bytes.fromhex(manifest["uuid"]), int(manifest["snapshot_lsn"]) + 1)


def remove_stale_temporaries(folder: str) -> None:
    """Remove what an interrupted checkpoint, MANIFEST commit or WAL_TAIL commit left behind."""
    for name in (MANIFEST + ".tmp", MANIFEST + ".repair.tmp", WAL_TAIL + ".tmp"):
        tmp = os.path.join(folder, name)
        if os.path.isfile(tmp):
            os.unlink(tmp)
    root = os.path.join(folder, SNAPSHOT_DIR)
    if os.path.isdir(root):
        for name in os.listdir(root):
            if name.endswith(".tmp"):
                shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def write_manifest(folder: str, manifest: dict) -> None:
    """Replace MANIFEST atomically: temporary file, fsync, rename, fsync the folder."""
    path = os.path.join(folder, MANIFEST)
    tmp = path + ".tmp"
    _write_file_durably(tmp, json.dumps(manifest, indent=1, sort_keys=True).encode())
    os.replace(tmp, path)
    fsync_dir(folder)


def _sha256(path: str) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def _rows_to_columns(rows: np.ndarray, dim: int) -> tuple:
    scale = np.ascontiguousarray(rows[:, 0:4]).view(np.float32).reshape(-1)
    sq_norm = np.ascontiguousarray(rows[:, 4:8]).view(np.float32).reshape(-1)
    codes = np.ascontiguousarray(rows[:, 8 : 8 + dim])
    return scale, sq_norm, codes


def _columns_to_rows(scale: np.ndarray, sq_norm: np.ndarray, codes: np.ndarray, dim: int) -> np.ndarray:
    n = len(scale)
    stride = 8 + (dim + 3) // 4 * 4
    rows = np.zeros((n, stride), dtype=np.int8)
    rows[:, 0:4] = np.asarray(scale, dtype=np.float32).reshape(n, 1).view(np.int8)
    rows[:, 4:8] = np.asarray(sq_norm, dtype=np.float32).reshape(n, 1).view(np.int8)
    rows[:, 8 : 8 + dim] = codes
    return rows


def begin_snapshot(folder: str, manifest: dict) -> str:
    """Create (empty) the temporary folder the next snapshot generation is written into."""
    generation = int(manifest.get("generation", 0)) + 1
    root = os.path.join(folder, SNAPSHOT_DIR)
    os.makedirs(root, exist_ok=True)
    tmp = os.path.join(root, f"{generation:08d}.tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
    return tmp


def edge_vector_columns(state: dict, dim: int) -> tuple:
    """Edge vectors of an export_state (whose edge_rows hold only the edges that have a vector,
    in edge order) as per-edge columns: (has_vector bool (m,), scale float32 (m,), sq_norm
    float32 (m,) with 0 where an edge has no vector, and the codes as an Arrow list<int8>
    column, null where an edge has none, so no bytes are stored for it)."""
    import pyarrow as pa

    has_vector = np.asarray(state["edge_has_vector"]).astype(bool)
    m = len(has_vector)
    v_scale, v_sq_norm, v_codes = _rows_to_columns(state["edge_rows"], dim)
    scale = np.zeros(m, dtype=np.float32)
    sq_norm = np.zeros(m, dtype=np.float32)
    scale[has_vector] = v_scale
    sq_norm[has_vector] = v_sq_norm
    offsets = np.zeros(m + 1, dtype=np.int32)
    np.cumsum(has_vector * dim, out=offsets[1:])
    codes = pa.ListArray.from_arrays(pa.array(offsets, type=pa.int32()), pa.array(v_codes.reshape(-1), type=pa.int8()),
                                     mask=pa.array(~has_vector, type=pa.bool_()))
    return has_vector, scale, sq_norm, codes


def write_snapshot(folder: str, manifest: dict, state: dict, tmp: Optional[str] = None) -> dict:
    """Write ``state`` (from the engine's export_state) as the next snapshot generation and
    return the MANIFEST that commits it (the caller writes it). ``tmp`` is the folder from
    :func:`begin_snapshot`, which may already hold ``hnsw.usearch`` (then
    ``state["hnsw_saved"]`` is true)."""
    import pyarrow as pa

    dim = int(manifest["dim"])
    generation = int(manifest.get("generation", 0)) + 1
    name = f"{generation:08d}"
    root = os.path.join(folder, SNAPSHOT_DIR)
    if tmp is None:
        tmp = begin_snapshot(folder, manifest)
    metadata = {
        b"vecgraph.schema_version": str(SNAPSHOT_SCHEMA_VERSION).encode(),
        b"vecgraph.uuid": manifest["uuid"].encode(),
        b"vecgraph.lsn": str(state["lsn"]).encode(),
        b"vecgraph.dim": str(dim).encode(),
        b"vecgraph.metric": manifest["metric"].encode(),
    }

    def codes_column(codes: np.ndarray) -> pa.Array:
        return pa.FixedSizeListArray.from_arrays(pa.array(codes.reshape(-1), type=pa.int8()), dim)

    scale, sq_norm, codes = _rows_to_columns(state["rows"], dim)
    nodes = pa.table(
        {
            "key": strings_array(state["keys"], pa.large_binary()),
            "label": dictionary_array(state["labels"]),
            "tenant": dictionary_array(state["tenants"]),
            "ts": pa.array(state["ts"], type=pa.int64()),
            "text": strings_array(state["texts"], pa.large_string()),
            "props": strings_array(state["props"], pa.large_string()),
            "aliases": strings_array(state["aliases"], pa.large_string()) if "aliases" in state
            else pa.nulls(len(state["ts"]), pa.large_string()).fill_null(""),
            "scale": pa.array(scale, type=pa.float32()),
            "sq_norm": pa.array(sq_norm, type=pa.float32()),
            "codes": codes_column(codes),
        }
    ).replace_schema_metadata(metadata)
    has_vector, e_scale, e_sq_norm, edge_codes = edge_vector_columns(state, dim)
    edges = pa.table(
        {
            "src": pa.array(state["edge_src"], type=pa.uint32()),
            "dst": pa.array(state["edge_dst"], type=pa.uint32()),
            "rel": dictionary_array(state["edge_rels"]),
            "weight": pa.array(state["edge_weights"], type=pa.float32()),
            "ts": pa.array(state["edge_ts"], type=pa.int64()),
            "text": strings_array(state["edge_texts"], pa.large_string()),
            "props": strings_array(state["edge_props"], pa.large_string()),
            "has_vector": pa.array(has_vector, type=pa.bool_()),
            "scale": pa.array(e_scale, type=pa.float32()),
            "sq_norm": pa.array(e_sq_norm, type=pa.float32()),
            "codes": edge_codes,
        }
    ).replace_schema_metadata(metadata)
    files = {}
    for file_name, table in (("nodes.arrow", nodes), ("edges.arrow", edges)):
        path = os.path.join(tmp, file_name)
        with pa.OSFile(path, "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=1 << 16)
        with open(path, "rb+") as f:
            os.fsync(f.fileno())
        files[file_name] = _sha256(path)
    if state.get("hnsw_saved"):
        files[HNSW_FILE] = _sha256(os.path.join(tmp, HNSW_FILE))  # written and fsynced by the engine
    # What the MANIFEST says of this generation, kept beside it so that a lost or damaged
    # MANIFEST can be rebuilt from the folder (vecgraph.repair).
    description = {k: manifest.get(k) for k in DESCRIBED}
    description.update(generation=generation, snapshot_lsn=int(state["lsn"]), files=files,
                       text_lsn=int(state.get("text_lsn", state["lsn"])))
    _write_file_durably(os.path.join(tmp, SNAPSHOT_DESCRIPTION), describe(description))
    fsync_dir(tmp)
    final = os.path.join(root, name)
    shutil.rmtree(final, ignore_errors=True)
    os.replace(tmp, final)
    fsync_dir(root)
    committed = dict(manifest)
    committed.update(
        snapshot=f"{SNAPSHOT_DIR}/{name}",
        snapshot_lsn=int(state["lsn"]),
        generation=generation,
        files=files,
        previous={k: manifest.get(k) for k in ("snapshot", "snapshot_lsn", "files")} if manifest.get("snapshot") else None,
    )
    return committed


def describe(description: dict) -> bytes:
    """The bytes of a generation's ``snapshot.json``: the description and the sha256 of its
    canonical JSON, so that a changed byte shows (:func:`read_description`)."""
    body = json.dumps(description, sort_keys=True)
    return json.dumps({"description": description, "sha256": hashlib.sha256(body.encode()).hexdigest()},
                      indent=1, sort_keys=True).encode()


def read_description(path: str) -> Optional[dict]:
    """The description in a ``snapshot.json`` (:func:`describe`), or None when the file is
    missing; CorruptionError when it is not one or fails its checksum; StorageError when it
    cannot be read."""
    try:
        with open(path, "rb") as f:
            raw = json.loads(f.read())
    except FileNotFoundError:
        return None
    except ValueError as e:
        raise CorruptionError(f"{path} is not valid JSON ({e})") from None
    except OSError as e:
        raise StorageError(f"cannot read {path}: {e}") from e
    if not (isinstance(raw, dict) and isinstance(raw.get("description"), dict) and isinstance(raw.get("sha256"), str)):
        raise CorruptionError(f"{path} is not a generation description")
    body = json.dumps(raw["description"], sort_keys=True)
    if hashlib.sha256(body.encode()).hexdigest() != raw["sha256"]:
        raise CorruptionError(f"{path} fails its checksum")
    return raw["description"]


def describe_embedder(folder: str, manifest: dict) -> None:
    """Copy the MANIFEST's embedder record into the description of every generation it keeps
    (the record is made after they were written), so that a MANIFEST rebuilt from any of them
    keeps it."""
    for generation in (manifest, manifest.get("previous") or {}):
        if not generation.get("snapshot"):
            continue
        path = os.path.join(folder, generation["snapshot"], SNAPSHOT_DESCRIPTION)
        try:
            description = read_description(path)
        except (CorruptionError, StorageError):
            continue  # a damaged description: that generation is not used to rebuild
        if description is None:
            continue  # a generation of an earlier version, without a description
        description["embedder"] = manifest.get("embedder")
        _write_file_durably(path + ".tmp", describe(description))
        os.replace(path + ".tmp", path)
        fsync_dir(os.path.dirname(path))


def remove_old_snapshots(folder: str, manifest: dict) -> None:
    """Delete snapshot generations other than the current and the previous one."""
    root = os.path.join(folder, SNAPSHOT_DIR)
    keep = {os.path.basename(manifest["snapshot"] or "")}
    if manifest.get("previous") and manifest["previous"].get("snapshot"):
        keep.add(os.path.basename(manifest["previous"]["snapshot"]))
    if not os.path.isdir(root):
        return
    for name in os.listdir(root):
        if name not in keep:
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def decode_key(encoded: bytes) -> Any:
    """A key as the engine encodes it (b"s" + UTF-8, or b"i" + int64 little-endian) → str or int."""
    if encoded[:1] == b"i" and len(encoded) == 9:
        return int.from_bytes(encoded[1:], "little", signed=True)
    if encoded[:1] == b"s":
        return encoded[1:].decode()
    raise CorruptionError(f"{encoded!r} is not an encoded key")


def strings_array(value: Any, type: Any) -> Any:
    """An Arrow array of ``type`` (large_string or large_binary) from an export_state column,
    ``(offsets int64 (n + 1), data uint8)``, from an Arrow array, or from a list."""
    import pyarrow as pa

    if isinstance(value, tuple):
        offsets, data = value
        return pa.Array.from_buffers(type, len(offsets) - 1, [None, pa.py_buffer(offsets), pa.py_buffer(data)])
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if isinstance(value, pa.Array):
        return value.cast(type)
    return pa.array(value, type=type)


def dictionary_array(value: Any) -> Any:
    """A dictionary-encoded string array from an export_state column ``(indices int32, values
    list)``, from an Arrow (dictionary or string) array, or from a list."""
    import pyarrow as pa
    import pyarrow.types as pat

    if isinstance(value, tuple):
        indices, values = value
        return pa.DictionaryArray.from_arrays(pa.array(indices, type=pa.int32()), pa.array(values, type=pa.string()))
    if isinstance(value, pa.ChunkedArray):
        value = value.combine_chunks()
    if not isinstance(value, pa.Array):
        value = pa.array(value, type=pa.string())
    if pat.is_dictionary(value.type):
        value = value.cast(pa.string())
    return value.cast(pa.string()).dictionary_encode()


def string_column(column: Any) -> Any:
    """An Arrow string / binary column in the form the engine's loaders read without a Python
    object per value: (offsets int64, data uint8) buffers, or (indices int32, values list)
    for a dictionary column. Nulls read as empty strings."""
    import pyarrow as pa
    import pyarrow.types as pat

    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if pat.is_dictionary(array.type):
        if array.null_count:
            array = array.cast(pa.string()).fill_null("").dictionary_encode()
        values = [v if isinstance(v, (str, bytes)) else str(v) for v in array.dictionary.to_pylist()]
        return np.ascontiguousarray(array.indices.to_numpy(zero_copy_only=False), dtype=np.int32), values
    if array.null_count:
        array = array.fill_null(b"" if pat.is_binary(array.type) or pat.is_large_binary(array.type) else "")
    large = pat.is_large_string(array.type) or pat.is_large_binary(array.type)
    if not (large or pat.is_string(array.type) or pat.is_binary(array.type)):
        raise ValueError(f"expected a string or binary column, got {array.type}")
    buffers = array.buffers()
    offsets = np.frombuffer(buffers[1], dtype=np.int64 if large else np.int32)[array.offset : array.offset + len(array) + 1]
    data = np.frombuffer(buffers[2], dtype=np.uint8) if buffers[2] is not None else np.zeros(0, np.uint8)
    return offsets.astype(np.int64, copy=not large), data


def load_snapshot(engine: Any, folder: str, manifest: dict, generation: Optional[dict] = None) -> dict:
    """Load a snapshot into an empty engine: the one the MANIFEST names, or ``generation``
    (``manifest["previous"]``: {"snapshot", "snapshot_lsn", "files"}).

    The Arrow files are memory-mapped and read without a copy; node rows are assembled once.
    With the engine's indexing deferred and an ``hnsw.usearch`` file whose sha256 matches,
    the HNSW graph is read from it instead of being rebuilt; a damaged one is left aside (a
    RuntimeWarning) and the index is rebuilt when deferral ends.

    Returns:
        {"hnsw": "loaded" | "rebuild" | "damaged", "nodes": n, "edges": m}.

    Raises:
        CorruptionError: a file that is missing, fails its sha256, is not Arrow IPC, has
            another schema version, or belongs to another database (uuid).
    """
    import pyarrow as pa

    generation = generation or manifest
    snapshot = os.path.join(folder, generation["snapshot"])
    snapshot_lsn = int(generation["snapshot_lsn"])
    files = generation.get("files") or {}
    dim = int(manifest["dim"])
    tables = {}
    for file_name in SNAPSHOT_FILES:
        path = os.path.join(snapshot, file_name)
        expected = files.get(file_name)
        if not os.path.exists(path):
            raise CorruptionError(f"snapshot file {path} is missing")
        if expected is None or _sha256(path) != expected:
            raise CorruptionError(f"snapshot file {path} fails its checksum (sha256 in MANIFEST)")
        try:
            with pa.memory_map(path, "r") as source:
                table = pa.ipc.open_file(source).read_all()
        except (pa.ArrowException, OSError) as e:
            raise CorruptionError(f"snapshot file {path} is not a readable Arrow IPC file: {e}") from None
        meta = table.schema.metadata or {}
        if meta.get(b"vecgraph.uuid", b"").decode(errors="replace") != manifest["uuid"]:
            raise CorruptionError(f"snapshot file {path} belongs to another database (uuid)")
        if meta.get(b"vecgraph.schema_version") != str(SNAPSHOT_SCHEMA_VERSION).encode():
            raise CorruptionError(f"snapshot file {path} has an unknown schema version")
        for key, expected in (("dim", str(dim)), ("metric", manifest["metric"]), ("lsn", str(snapshot_lsn))):
            found = meta.get(f"vecgraph.{key}".encode(), b"").decode(errors="replace")
            if found != expected:
                raise CorruptionError(f"snapshot file {path} has {key} {found!r}, the MANIFEST says {expected!r}")
        tables[file_name] = table
    nodes, edges = tables["nodes.arrow"], tables["edges.arrow"]
    try:
        n = len(nodes)
        codes = nodes.column("codes").combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(-1, dim) if n else np.zeros((0, dim), np.int8)
        rows = _columns_to_rows(nodes.column("scale").to_numpy(), nodes.column("sq_norm").to_numpy(), codes, dim)
        del codes
        engine.load_nodes(
            string_column(nodes.column("key")),
            rows,
            string_column(nodes.column("label")),
            string_column(nodes.column("tenant")),
            nodes.column("ts").to_numpy().astype(np.int64),
            string_column(nodes.column("text")),
            string_column(nodes.column("props")),
        )
        del rows
        if "aliases" in nodes.column_names:  # absent in snapshots written before aliases existed
            import pyarrow.compute as pc

            aliases = nodes.column("aliases").combine_chunks().fill_null("")
            named = pc.not_equal(pc.binary_length(aliases), 0)
            if pc.any(named).as_py():
                keys = [decode_key(k) for k in nodes.column("key").combine_chunks().filter(named).to_pylist()]
                engine.set_aliases(keys, aliases.filter(named).to_pylist())
        if len(edges):
            # Node positions in the snapshot are node ids in the freshly loaded engine.
            src = np.ascontiguousarray(edges.column("src").to_numpy(), dtype=np.uint32)
            dst = np.ascontiguousarray(edges.column("dst").to_numpy(), dtype=np.uint32)
            if len(src) and (src.max() >= n or dst.max() >= n):
                raise CorruptionError(f"snapshot {snapshot}: an edge names a node position beyond the node table")
            has_vector = edges.column("has_vector").to_numpy(zero_copy_only=False).astype(bool)
            values = edges.column("codes").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            if values.size != int(has_vector.sum()) * dim:
                raise CorruptionError(f"snapshot {snapshot}: edge vectors do not match has_vector")
            if has_vector.any():
                e_codes = np.zeros((len(edges), dim), dtype=np.int8)
                e_codes[has_vector] = values.reshape(-1, dim)
                e_rows = _columns_to_rows(edges.column("scale").to_numpy(), edges.column("sq_norm").to_numpy(), e_codes, dim)
                del e_codes
            else:
                e_rows = np.zeros((0, 8 + (dim + 3) // 4 * 4), dtype=np.int8)
            engine.load_edges(
                src,
                dst,
                string_column(edges.column("rel")),
                edges.column("weight").to_numpy().astype(np.float32),
                edges.column("ts").to_numpy().astype(np.int64),
                string_column(edges.column("text")),
                string_column(edges.column("props")),
                has_vector.astype(np.uint8),
                e_rows,
            )
    except InvalidArgumentError as e:
        raise CorruptionError(f"snapshot {snapshot} holds invalid data: {e}") from None
    except (KeyError, ValueError, TypeError, pa.ArrowException) as e:
        raise CorruptionError(f"snapshot {snapshot} does not have the expected columns or shapes: {e}") from None
    hnsw = "rebuild"
    if HNSW_FILE in files and engine.indexing_deferred():
        path = os.path.join(snapshot, HNSW_FILE)
        try:
            if not os.path.exists(path) or _sha256(path) != files[HNSW_FILE]:
                raise CorruptionError(f"{path} is missing or fails its checksum (sha256 in MANIFEST)")
            engine.load_seed_index(path)
            hnsw = "loaded"
        except CorruptionError as e:
            import warnings

            warnings.warn(f"the cached HNSW index is not used, it is rebuilt: {e}", RuntimeWarning, stacklevel=3)
            hnsw = "damaged"
    return {"hnsw": hnsw, "nodes": len(nodes), "edges": len(edges)}
