"""Rebuilding a graph folder's lost or damaged MANIFEST from its snapshots and WAL
(:meth:`vecgraph.Graph.repair`).

The MANIFEST names the snapshot generation a graph opens from, with the sha256 of its files,
and holds the graph's description (uuid, dim, metric, HNSW parameters, filterable properties,
the recorded embedder). Every generation keeps a copy of that description beside its files
(``snapshots/<generation>/snapshot.json``, with the files' sha256 and a checksum of its own), and every WAL segment's
header holds the graph's uuid, so a folder whose MANIFEST was deleted or damaged still holds
everything needed to open it. :func:`repair` proves that before it writes anything:

1. the uuid of the WAL segments, of ``WAL_TAIL`` and of the snapshot files agree;
2. the newest generation whose files pass their sha256 (and whose Arrow files read, and carry
   the same uuid, dim, metric and LSN) is chosen, newer damaged ones reported;
3. the WAL reaches back to that generation's LSN + 1 and still holds the newest segment
   ``WAL_TAIL`` names (so no acknowledged write after the snapshot is missing);
4. a recovery in memory (the snapshot loaded, every WAL record after it replayed and its
   CRC32C checked) succeeds.

Only then is the MANIFEST written (atomically; a damaged one, or another database's, is kept
as ``MANIFEST.damaged``). The previous generation is recorded as the fallback only when the WAL
segments kept for it read back whole.
What cannot be proven refuses the repair with :class:`~vecgraph.errors.CorruptionError`
naming what is missing, and changes nothing; ``force=True`` repairs anyway and lists what may
be lost in the report's ``may_lose``.
"""

from __future__ import annotations

import json
import os
import struct
import warnings
from typing import Optional, Union

from . import storage
from .arguments import _metric
from .folder import folder_path
from .errors import CorruptionError, InvalidArgumentError, StorageError

__all__ = ["repair"]

_SEGMENT_MAGIC = b"VGWAL\0\r\n"
_TAIL_MAGIC = b"VGTAIL\0\n"


def _header(path: str, magic: bytes) -> Optional[tuple[str, int]]:
    """(uuid hex, first_lsn) of a WAL segment or WAL_TAIL header (the layout of
    cpp/include/vecgraph/wal_format.hpp; its CRC is checked by the replay), or None when the
    file is too short or has another magic; StorageError when it cannot be read."""
    try:
        with open(path, "rb") as f:
            head = f.read(48)
    except FileNotFoundError:
        return None
    except OSError as e:
        raise StorageError(f"cannot read {path}: {e}") from e
    if len(head) < 48 or head[:8] != magic or struct.unpack_from("<I", head, 8)[0] != 1:
        return None
    return head[16:32].hex(), struct.unpack_from("<Q", head, 32)[0]


def _listing(path: str) -> list[str]:
    """The names in folder ``path`` (none when it does not exist); StorageError when unreadable."""
    try:
        return sorted(os.listdir(path)) if os.path.isdir(path) else []
    except OSError as e:
        raise StorageError(f"cannot read {path}: {e}") from e


def _segments(folder: str) -> list[tuple[int, str, Optional[str]]]:
    """(first LSN, file name, uuid hex or None for an unreadable header) of each WAL segment."""
    wal_dir = os.path.join(folder, storage.WAL_DIR)
    out = []
    for name in _listing(wal_dir):
        stem = name[: -len(".log")]
        if name.endswith(".log") and stem.isdigit():
            found = _header(os.path.join(wal_dir, name), _SEGMENT_MAGIC)
            out.append((int(stem), name, found[0] if found and found[1] == int(stem) else None))
    return out


def _generation(folder: str, name: str) -> dict:
    """What a snapshot generation folder holds: {"name", "described" (its snapshot.json's
    description, or None), "uuid", "dim", "metric", "lsn" (from its Arrow files' metadata),
    "files" ({name: sha256} that pass), "problem" ("" when sound)}."""
    import pyarrow as pa

    path = os.path.join(folder, storage.SNAPSHOT_DIR, name)
    out: dict = {"name": name, "described": None, "files": {}, "problem": ""}
    present = _listing(path)
    try:
        out["described"] = storage.read_description(os.path.join(path, storage.SNAPSHOT_DESCRIPTION))
    except CorruptionError as e:
        out["problem"] = str(e)
        return out
    expected = (out["described"] or {}).get("files") or {}
    if not isinstance(expected, dict):
        out["problem"] = f"{path}/{storage.SNAPSHOT_DESCRIPTION} names no files"
        return out
    metadata = []
    for file_name in storage.SNAPSHOT_FILES:
        file = os.path.join(path, file_name)
        if file_name not in present or not os.path.isfile(file):
            out["problem"] = f"{file} is missing"
            return out
        try:
            digest = storage._sha256(file)
        except OSError as e:
            raise StorageError(f"cannot read {file}: {e}") from e
        if expected and expected.get(file_name) != digest:
            out["problem"] = f"{file} fails its checksum (sha256 in {storage.SNAPSHOT_DESCRIPTION})"
            return out
        try:
            with pa.memory_map(file, "r") as source:
                reader = pa.ipc.open_file(source)
                if not expected:  # no checksum to trust: every batch must read and validate
                    for i in range(reader.num_record_batches):
                        reader.get_batch(i).validate(full=True)
                meta = reader.schema.metadata or {}
        except pa.ArrowException as e:
            out["problem"] = f"{file} is not a readable Arrow IPC file: {e}"
            return out
        except OSError as e:
            raise StorageError(f"cannot read {file}: {e}") from e
        metadata.append({key: meta.get(f"vecgraph.{key}".encode(), b"").decode(errors="replace")
                         for key in ("uuid", "dim", "metric", "lsn", "schema_version")})
        out["files"][file_name] = digest
    if metadata[0] != metadata[1]:
        out["problem"] = f"{path}: nodes.arrow and edges.arrow describe different graphs ({metadata[0]} / {metadata[1]})"
        return out
    meta = metadata[0]
    if meta["schema_version"] != str(storage.SNAPSHOT_SCHEMA_VERSION) or not meta["lsn"].isdigit() \
            or not meta["dim"].isdigit():
        out["problem"] = f"{path}: its Arrow files have no vecgraph metadata this version reads ({meta})"
        return out
    out.update(uuid=meta["uuid"], dim=int(meta["dim"]), metric=meta["metric"], lsn=int(meta["lsn"]))
    described = out["described"]
    if described is not None and (described.get("uuid") != out["uuid"] or described.get("snapshot_lsn") != out["lsn"]
                                  or described.get("dim") != out["dim"] or described.get("metric") != out["metric"]):
        out["problem"] = f"{path}: {storage.SNAPSHOT_DESCRIPTION} disagrees with its Arrow files"
        return out
    hnsw = os.path.join(path, storage.HNSW_FILE)
    if expected.get(storage.HNSW_FILE) and os.path.isfile(hnsw) and storage._sha256(hnsw) == expected[storage.HNSW_FILE]:
        out["files"][storage.HNSW_FILE] = expected[storage.HNSW_FILE]  # else the next open rebuilds it
    return out


def repair(cls: type, path: Union[str, os.PathLike], *, force: bool = False, dim: Optional[int] = None,
           metric: Optional[str] = None) -> dict:
    """Rebuild the MANIFEST of the graph folder ``path`` from its snapshots and WAL (bound as
    :meth:`vecgraph.Graph.repair`; ``vecgraph repair FOLDER`` on the command line).

    For a folder whose MANIFEST was deleted or damaged (opening it raises
    :class:`~vecgraph.errors.CorruptionError` saying so). The steps and what they prove are in
    :mod:`vecgraph.repair`; a folder whose MANIFEST is intact is left alone. Afterwards
    :meth:`vecgraph.Graph.open` recovers the graph as usual (the WAL replayed from the chosen
    snapshot; the BM25 index checked and rebuilt if it is behind).

    Args:
        path: the graph folder.
        force: repair even when completeness cannot be proven (no ``WAL_TAIL``, a generation
            without its description, segments missing after the snapshot are *not* forced:
            the replay cannot cross a gap); ``may_lose`` in the report says what may be lost.
        dim, metric: the graph's, needed only when the folder holds no snapshot generation
            (a graph never checkpointed: its description was only in the MANIFEST).

    Returns:
        {"repaired": bool, "reason": str, "snapshot": "snapshots/<generation>" or None,
        "snapshot_lsn": int, "replayed": records replayed after it, "last_lsn": int,
        "nodes": int, "edges": int, "skipped": [problems of newer generations passed over],
        "may_lose": [what ``force`` accepted], "manifest": the MANIFEST written (dict)}.

    Raises:
        InvalidArgumentError: ``path`` is not a folder, or bad ``dim`` / ``metric``.
        StorageError: the folder is open (its LOCK is held) or the MANIFEST cannot be written.
        CorruptionError: the repair cannot be proven complete (the message says what is
            missing and whether ``force`` would help); nothing was changed.
    """
    folder = folder_path(path)
    if not os.path.isdir(folder):
        raise InvalidArgumentError(f"{folder} is not a folder")
    if not isinstance(force, bool):
        raise TypeError(f"force must be a bool, got {type(force).__name__}")
    if metric is not None:
        metric = _metric(metric)
    if dim is not None and (isinstance(dim, bool) or not isinstance(dim, int) or dim < 1):
        raise InvalidArgumentError(f"dim must be an int >= 1, got {dim!r}")
    lock_path = os.path.join(folder, storage.LOCK)
    lock_existed = os.path.lexists(lock_path)
    lock = storage.FolderLock(folder, stamp=False)  # a writer or reader holding it: StorageError
    try:
        try:
            return _repair_locked(cls, folder, force, dim, metric)
        except OSError as e:
            if isinstance(e, StorageError):
                raise
            raise StorageError(f"cannot repair {folder}: {e}") from e
    except BaseException:
        if not lock_existed:  # a refused repair leaves the folder as it was
            try:
                os.unlink(lock_path)
            except OSError:
                pass
        raise
    finally:
        lock.release()


def _repair_locked(cls: type, folder: str, force: bool, dim: Optional[int], metric: Optional[str]) -> dict:
    may_lose: list[str] = []
    skipped: list[str] = []

    def refuse(why: str, forceable: bool) -> None:
        if forceable and force:
            may_lose.append(why)
            return
        hint = " (force=True / --force repairs anyway, accepting that)" if forceable else ""
        raise CorruptionError(f"cannot repair {folder}: {why}{hint}; nothing was changed")

    segments = _segments(folder)
    tail_path = os.path.join(folder, storage.WAL_TAIL)
    tail = _header(tail_path, _TAIL_MAGIC) if os.path.lexists(tail_path) else None
    uuids = {uuid for _, _, uuid in segments if uuid} | ({tail[0]} if tail else set())

    # The MANIFEST: intact (nothing to do), or missing, damaged, or another database's.
    manifest_path = os.path.join(folder, storage.MANIFEST)
    damaged = None
    if os.path.lexists(manifest_path) and not os.path.isfile(manifest_path):
        damaged = f"{manifest_path} is not a file"
    else:
        try:
            found = storage.read_manifest(folder)
        except CorruptionError as e:
            damaged = str(e)
        else:
            if found is not None and uuids and uuids != {found["uuid"]}:
                damaged = f"{manifest_path} belongs to another database (uuid {found['uuid']})"
            elif found is not None:
                return {"repaired": False, "reason": "the MANIFEST is intact; nothing to repair", "snapshot": None,
                        "skipped": [], "may_lose": [], "manifest": None}

    if os.path.lexists(tail_path) and tail is None:
        refuse(f"{storage.WAL_TAIL} is damaged", False)
    if len(uuids) > 1:
        refuse(f"the WAL segments and {storage.WAL_TAIL} belong to {len(uuids)} databases ({sorted(uuids)})", False)
    root = os.path.join(folder, storage.SNAPSHOT_DIR)
    names = [n for n in reversed(_listing(root)) if n.isdigit() and os.path.isdir(os.path.join(root, n))]
    generations = [_generation(folder, name) for name in names]
    sound = [g for g in generations if not g["problem"] and (not uuids or g["uuid"] in uuids)]
    skipped += [g["problem"] or f"{storage.SNAPSHOT_DIR}/{g['name']} belongs to another database (uuid)"
                for g in generations if g not in sound]
    if not uuids and not sound:
        other = " (its snapshots belong to no WAL here)" if generations else ""
        refuse(f"it holds neither a sound snapshot generation nor a WAL segment{other}: no graph to rebuild", False)
    # A newer generation that is damaged is passed over: the chosen one plus the WAL after it
    # is still complete when the WAL reaches back to it (checked below).
    chosen = sound[0] if sound else None
    uuid = chosen["uuid"] if chosen else next(iter(uuids))
    snapshot_lsn = chosen["lsn"] if chosen else 0
    described = (chosen or {}).get("described") or {}
    if chosen is None:
        if dim is None or metric is None:
            refuse("it holds no snapshot generation, and the graph's dim and metric were only in the MANIFEST: "
                   "pass dim= and metric= (--dim, --metric)", False)
        refuse("it holds no snapshot generation: the HNSW parameters, filterable properties and recorded "
               "embedder were only in the MANIFEST (defaults and none are used)", True)
    elif not described:
        refuse(f"{storage.SNAPSHOT_DIR}/{chosen['name']} has no {storage.SNAPSHOT_DESCRIPTION} (written by an earlier "
               "version): its HNSW parameters, filterable properties and recorded embedder are unknown (defaults "
               "and none are used)", True)
    if dim is not None and chosen is not None and dim != chosen["dim"]:
        raise InvalidArgumentError(f"dim={dim} was given, the snapshot holds dim {chosen['dim']}")
    if metric is not None and chosen is not None and metric != chosen["metric"]:
        raise InvalidArgumentError(f"metric={metric!r} was given, the snapshot holds metric {chosen['metric']!r}")

    # The segments recovery reads (from the last one starting at or before snapshot LSN + 1):
    # each must have a sound header; older ones only served the fallback.
    needed_from = snapshot_lsn + 1
    start = 0
    while start + 1 < len(segments) and segments[start + 1][0] <= needed_from:
        start += 1
    for first, name, seg_uuid in segments[start:]:
        if seg_uuid is None:
            refuse(f"WAL segment {storage.WAL_DIR}/{name} has no valid header, and recovery needs it", False)
    fallback_damaged = [name for _, name, seg_uuid in segments[:start] if seg_uuid is None]
    if segments and segments[start][0] > needed_from:
        refuse(f"the WAL starts at LSN {segments[start][0]}, after the snapshot's LSN {snapshot_lsn} + 1: the writes "
               "between are gone", False)
    if tail is None:
        refuse(f"there is no {storage.WAL_TAIL}, so WAL segments newer than the newest in {storage.WAL_DIR}/ "
               "could be missing unnoticed", True)

    manifest = storage.new_manifest(chosen["dim"] if chosen else int(dim or 0),
                                    chosen["metric"] if chosen else str(metric),
                                    described.get("hnsw") or dict(storage.DEFAULT_HNSW))
    manifest.update(uuid=uuid, filterable=described.get("filterable") or {},
                    embedder=described.get("embedder") or _newest_embedder(generations, uuid))
    if chosen is not None:
        manifest.update(snapshot=f"{storage.SNAPSHOT_DIR}/{chosen['name']}", snapshot_lsn=snapshot_lsn,
                        generation=int(chosen["name"]), files=chosen["files"],
                        text_lsn=described.get("text_lsn", snapshot_lsn))
        older = [g for g in sound[1:] if g["lsn"] < snapshot_lsn]
        if older and not fallback_damaged:
            previous = older[0]
            try:  # the fallback is recorded only when recovery from it would work
                from . import _core

                if not segments or segments[0][0] > previous["lsn"] + 1:
                    raise CorruptionError(f"the WAL does not reach back to LSN {previous['lsn'] + 1}")
                _core.scan_wal(os.path.join(folder, storage.WAL_DIR), bytes.fromhex(uuid), previous["lsn"] + 1)
            except CorruptionError as e:
                skipped.append(f"the fallback to {storage.SNAPSHOT_DIR}/{previous['name']}: {e}")
            else:
                manifest["previous"] = {"snapshot": f"{storage.SNAPSHOT_DIR}/{previous['name']}",
                                        "snapshot_lsn": previous["lsn"], "files": previous["files"]}
        elif older:
            skipped.append(f"the fallback to {storage.SNAPSHOT_DIR}/{older[0]['name']}: WAL segment(s) "
                           f"{', '.join(fallback_damaged)} kept for it have no valid header")
    problem = storage._manifest_problem(manifest)
    if problem:
        source = f"{manifest['snapshot']}/{storage.SNAPSHOT_DESCRIPTION}" if chosen else "the arguments"
        raise CorruptionError(f"cannot repair {folder}: the MANIFEST rebuilt from {source} would not be valid "
                              f"({problem}); nothing was changed")
    report = _recover_in_memory(cls, folder, manifest, tail is not None)
    _commit(folder, manifest, damaged is not None)
    reason = f"the MANIFEST was damaged ({damaged})" if damaged else "the MANIFEST was missing"
    return {"repaired": True, "reason": reason, "snapshot": manifest["snapshot"], "snapshot_lsn": snapshot_lsn,
            "replayed": report["replayed"], "last_lsn": report["last_lsn"], "nodes": report["nodes"],
            "edges": report["edges"], "skipped": skipped, "may_lose": may_lose, "manifest": manifest}


def _newest_embedder(generations: list, uuid: str) -> Optional[dict]:
    """The embedder record of the newest generation description of ``uuid`` that has one (a
    generation passed over for damaged Arrow files may still describe it)."""
    for generation in generations:
        described = generation.get("described") or {}
        if described.get("uuid") == uuid and described.get("embedder"):
            return described["embedder"]
    return None


def _commit(folder: str, manifest: dict, set_aside: bool) -> None:
    """Write the MANIFEST; a damaged one is set aside as MANIFEST.damaged (or .damaged-N) only
    once the new one is durable beside it, so that a failure (a full disk) changes nothing."""
    path = os.path.join(folder, storage.MANIFEST)
    tmp = path + ".repair.tmp"
    try:
        storage._write_file_durably(tmp, json.dumps(manifest, indent=1, sort_keys=True).encode())
        if set_aside:
            aside, n = path + ".damaged", 1
            while os.path.lexists(aside):
                aside, n = f"{path}.damaged-{n}", n + 1
            os.rename(path, aside)
        os.replace(tmp, path)
        storage.fsync_dir(folder)
    except OSError as e:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise StorageError(f"cannot write {path}: {e}") from e


def _recover_in_memory(cls: type, folder: str, manifest: dict, check_tail: bool) -> dict:
    """Load the snapshot ``manifest`` names and replay the WAL after it, in memory (nothing on
    disk changes); CorruptionError if any of it fails."""
    from . import _core

    hnsw = manifest["hnsw"]
    graph = cls(manifest["dim"], manifest["metric"], connectivity=hnsw["connectivity"],
                  expansion_add=hnsw["expansion_add"], expansion_search=hnsw["expansion_search"],
                  filterable=manifest["filterable"])
    try:
        graph._engine.defer_indexing(True)
        uuid = bytes.fromhex(manifest["uuid"])
        wal_dir = os.path.join(folder, storage.WAL_DIR)
        tail = os.path.join(folder, storage.WAL_TAIL)
        try:
            if manifest["snapshot"] is not None:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")  # a damaged HNSW file: the next open rebuilds it
                    storage.load_snapshot(graph._engine, folder, manifest)
            if check_tail:
                _core.check_wal_tail(wal_dir, tail, uuid, int(manifest["snapshot_lsn"]) + 1)
            replay = graph._engine.replay_wal(wal_dir, uuid, int(manifest["snapshot_lsn"]) + 1, False, tail)
        except CorruptionError as e:
            raise CorruptionError(f"cannot repair {folder}: recovery from {manifest['snapshot'] or 'the WAL alone'} "
                                  f"fails ({e}); nothing was changed") from None
        stats = graph._engine.stats()
        last = (replay["next_lsn"] or int(manifest["snapshot_lsn"]) + 1) - 1
        return {"replayed": last - int(manifest["snapshot_lsn"]), "last_lsn": last,
                "nodes": stats["nodes"], "edges": stats["edges"]}
    finally:
        graph.close()
