"""The graph folder on disk: MANIFEST, LOCK, Arrow snapshots (DESIGN.md, "Folder layout").

::

    mydb.vg/
      MANIFEST            JSON: format version, db uuid, dim, metric, HNSW parameters,
                          snapshot folder, snapshot LSN, generation, sha256 of each snapshot file
      snapshots/<gen>/    nodes.arrow, edges.arrow (Arrow IPC files)
      wal/<lsn>.log       WAL segments (format: cpp/include/vecgraph/wal_format.hpp)
      LOCK                held (flock) by the process that has the graph open for writing

The MANIFEST is the one commit point: it is replaced atomically (write a temporary file,
fsync it, rename it over MANIFEST, fsync the folder), so after a crash it names either the old
snapshot or the new one, never half of one. Snapshot files are written and fsynced before the
MANIFEST that names them; WAL segments older than the snapshot's LSN are dropped only after.
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

from .errors import CorruptionError, InvalidArgumentError, StorageError

FORMAT_VERSION = 1
SNAPSHOT_SCHEMA_VERSION = 1
MANIFEST = "MANIFEST"
LOCK = "LOCK"
WAL_DIR = "wal"
SNAPSHOT_DIR = "snapshots"
KEEP_GENERATIONS = 2

__all__ = ["FolderLock", "read_manifest", "write_manifest", "new_manifest", "write_snapshot", "load_snapshot"]


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


class FolderLock:
    """An exclusive ``flock`` on ``<folder>/LOCK``, held while a graph is open for writing.

    The kernel releases the lock when the holding process dies, so a stale LOCK file left by a
    killed process never blocks reopening. Two Graph objects in one process conflict as well.
    """

    def __init__(self, folder: str) -> None:
        self._fd: Optional[int] = None
        import fcntl  # POSIX only

        self.path = os.path.join(folder, LOCK)
        try:
            self._fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise StorageError(f"cannot open {self.path} for writing: {e}") from e
        try:
            fcntl.flock(self._fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as e:
            holder = ""
            try:
                holder = os.pread(self._fd, 64, 0).decode(errors="replace").strip()
            except OSError:
                pass
            os.close(self._fd)
            self._fd = None
            if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                if holder == str(os.getpid()):
                    raise StorageError(
                        f"{folder} is already open for writing in this process (another Graph object that "
                        "was not closed, or a forked child holding it); close it first"
                    ) from None
                raise StorageError(
                    f"{folder} is already open for writing (LOCK held by pid {holder or '?'}); "
                    "close the other Graph or process first"
                ) from None
            raise StorageError(f"cannot lock {self.path}: {e}") from e
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
    try:
        manifest = json.loads(raw)
    except ValueError as e:
        raise CorruptionError(f"{path} is not valid JSON ({e})") from None
    problem = _manifest_problem(manifest)
    if problem:
        raise CorruptionError(f"{path} is not a valid vecgraph MANIFEST: {problem}")
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
    files = m["files"]
    if not isinstance(files, dict) or (snapshot is not None and set(files) != {"nodes.arrow", "edges.arrow"}):
        return f"files must name the sha256 of nodes.arrow and edges.arrow, got {files!r}"
    return ""


def remove_stale_temporaries(folder: str) -> None:
    """Remove what an interrupted checkpoint or MANIFEST commit left behind."""
    tmp_manifest = os.path.join(folder, MANIFEST + ".tmp")
    if os.path.isfile(tmp_manifest):
        os.unlink(tmp_manifest)
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


def write_snapshot(folder: str, manifest: dict, state: dict) -> dict:
    """Write ``state`` (from the engine's export_state) as the next snapshot generation and
    return the MANIFEST that commits it (the caller writes it)."""
    import pyarrow as pa

    dim = int(manifest["dim"])
    generation = int(manifest.get("generation", 0)) + 1
    name = f"{generation:08d}"
    root = os.path.join(folder, SNAPSHOT_DIR)
    os.makedirs(root, exist_ok=True)
    tmp = os.path.join(root, name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    os.makedirs(tmp)
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
            "key": pa.array(state["keys"], type=pa.binary()),
            "label": pa.array(state["labels"], type=pa.string()).dictionary_encode(),
            "tenant": pa.array(state["tenants"], type=pa.string()).dictionary_encode(),
            "ts": pa.array(state["ts"], type=pa.int64()),
            "text": pa.array(state["texts"], type=pa.large_string()),
            "props": pa.array(state["props"], type=pa.large_string()),
            "scale": pa.array(scale, type=pa.float32()),
            "sq_norm": pa.array(sq_norm, type=pa.float32()),
            "codes": codes_column(codes),
        }
    ).replace_schema_metadata(metadata)
    e_scale, e_sq_norm, e_codes = _rows_to_columns(state["edge_rows"], dim)
    has_vector = state["edge_has_vector"].astype(bool)
    # Edge vectors are optional: a list column, null where an edge has none (no bytes stored).
    offsets = np.zeros(len(has_vector) + 1, dtype=np.int32)
    np.cumsum(has_vector * dim, out=offsets[1:])
    edge_codes = pa.ListArray.from_arrays(
        pa.array(offsets, type=pa.int32()),
        pa.array(e_codes[has_vector].reshape(-1), type=pa.int8()),
        mask=pa.array(~has_vector, type=pa.bool_()),
    )
    edges = pa.table(
        {
            "src": pa.array(state["edge_src"], type=pa.uint32()),
            "dst": pa.array(state["edge_dst"], type=pa.uint32()),
            "rel": pa.array(state["edge_rels"], type=pa.string()).dictionary_encode(),
            "weight": pa.array(state["edge_weights"], type=pa.float32()),
            "ts": pa.array(state["edge_ts"], type=pa.int64()),
            "text": pa.array(state["edge_texts"], type=pa.large_string()),
            "props": pa.array(state["edge_props"], type=pa.large_string()),
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


def load_snapshot(engine: Any, folder: str, manifest: dict) -> None:
    """Load the snapshot the MANIFEST names into an empty engine.

    Raises:
        CorruptionError: a file that is missing, fails its sha256, is not Arrow IPC, has
            another schema version, or belongs to another database (uuid).
    """
    import pyarrow as pa

    snapshot = os.path.join(folder, manifest["snapshot"])
    dim = int(manifest["dim"])
    tables = {}
    for file_name in ("nodes.arrow", "edges.arrow"):
        path = os.path.join(snapshot, file_name)
        expected = manifest.get("files", {}).get(file_name)
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
        if meta.get(b"vecgraph.uuid", b"").decode() != manifest["uuid"]:
            raise CorruptionError(f"snapshot file {path} belongs to another database (uuid)")
        if meta.get(b"vecgraph.schema_version") != str(SNAPSHOT_SCHEMA_VERSION).encode():
            raise CorruptionError(f"snapshot file {path} has an unknown schema version")
        for key, expected in (("dim", str(dim)), ("metric", manifest["metric"]), ("lsn", str(manifest["snapshot_lsn"]))):
            found = meta.get(f"vecgraph.{key}".encode(), b"").decode(errors="replace")
            if found != expected:
                raise CorruptionError(f"snapshot file {path} has {key} {found!r}, the MANIFEST says {expected!r}")
        tables[file_name] = table
    nodes, edges = tables["nodes.arrow"], tables["edges.arrow"]
    try:
        keys = nodes.column("key").to_pylist()
        codes = nodes.column("codes").combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(-1, dim) if len(nodes) else np.zeros((0, dim), np.int8)
        rows = _columns_to_rows(nodes.column("scale").to_numpy(), nodes.column("sq_norm").to_numpy(), codes, dim)
        engine.load_nodes(
            keys,
            rows,
            [str(v) for v in nodes.column("label").to_pylist()],
            [str(v) for v in nodes.column("tenant").to_pylist()],
            nodes.column("ts").to_numpy().astype(np.int64),
            nodes.column("text").to_pylist(),
            nodes.column("props").to_pylist(),
        )
        if len(edges):
            src = edges.column("src").to_numpy()
            dst = edges.column("dst").to_numpy()
            if len(src) and (src.max() >= len(keys) or dst.max() >= len(keys)):
                raise CorruptionError(f"snapshot {snapshot}: an edge names a node position beyond the node table")
            has_vector = edges.column("has_vector").to_numpy(zero_copy_only=False).astype(bool)
            e_codes = np.zeros((len(edges), dim), dtype=np.int8)
            values = edges.column("codes").combine_chunks().flatten().to_numpy(zero_copy_only=False)
            if values.size != int(has_vector.sum()) * dim:
                raise CorruptionError(f"snapshot {snapshot}: edge vectors do not match has_vector")
            e_codes[has_vector] = values.reshape(-1, dim)
            e_rows = _columns_to_rows(edges.column("scale").to_numpy(), edges.column("sq_norm").to_numpy(), e_codes, dim)
            engine.load_edges(
                [keys[i] for i in src],
                [keys[i] for i in dst],
                [str(v) for v in edges.column("rel").to_pylist()],
                edges.column("weight").to_numpy().astype(np.float32),
                edges.column("ts").to_numpy().astype(np.int64),
                edges.column("text").to_pylist(),
                edges.column("props").to_pylist(),
                has_vector.astype(np.uint8),
                e_rows,
            )
    except InvalidArgumentError as e:
        raise CorruptionError(f"snapshot {snapshot} holds invalid data: {e}") from None
    except (KeyError, ValueError, TypeError, pa.ArrowException) as e:
        raise CorruptionError(f"snapshot {snapshot} does not have the expected columns or shapes: {e}") from None
