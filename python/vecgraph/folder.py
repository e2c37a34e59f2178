"""A graph folder's life: open (create, or recover from the MANIFEST's snapshot and the
write-ahead log), checkpoint (a new snapshot generation committed in the MANIFEST, the WAL
trimmed behind it), and what a forked child may do with the folders its parent opened.

The on-disk format itself (MANIFEST, snapshots, the folder LOCK, WAL_TAIL) is
:mod:`vecgraph.storage`; the WAL's records and their replay are the core's. The facade's
:meth:`~vecgraph.Graph.open` and :meth:`~vecgraph.Graph.checkpoint` call this module.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import shutil
import warnings
import weakref
from typing import TYPE_CHECKING, Any, Optional, Union

from . import aio, hybrid, storage
from .arguments import (FILTER_SCAN_AUTO, FULL_SCAN_MAX_NODES, _metric, _choice, _count, _count_at_least,
                        _filterable, _flag, _scan_max_nodes)
from .errors import CorruptionError, DimensionMismatchError, InvalidArgumentError, ReadOnlyError
from .heap import _release_after_batch
from .side_indexes import TEXT_INDEX_DIR, open_text_index

if TYPE_CHECKING:  # the class these functions are methods of (graph.py imports this module)
    from .graph import Graph

BACKGROUND_INDEX_MIN = 4096  # fewer nodes waiting for HNSW after recovery are inserted before open returns
_NEVER = 2**64 - 1


# Every graph made in this process, for the fork handler below.
_GRAPHS: "weakref.WeakSet[Any]" = weakref.WeakSet()


def _after_fork_in_child() -> None:
    # A forked child has copies of every graph's engine and BM25 index but none of their threads
    # (a fork keeps only the thread that called it). Destroying those copies would wait forever
    # for the threads (the WAL writer's condition variable) or panic (the BM25 index writer), so
    # the child keeps each graph to its end (one reference it never drops). Its folder graphs
    # refuse writes (they would go into the parent's WAL behind its back), and close() leaves the
    # parent's WAL and index alone. The inherited BM25 index is set aside unused (a search would
    # publish the parent's buffered writes through a writer without threads): a BM25 search in
    # the child builds one of its own in memory. The child's copies of the descriptors that hold
    # the folder's LOCK and the index's lock files are closed, so that the locks go with the
    # parent (an flock lasts while any copy of its descriptor is open).
    hybrid._forget_pool_after_fork()
    aio._forget_pool_after_fork()
    for graph in list(_GRAPHS):
        ctypes.pythonapi.Py_IncRef(ctypes.py_object(graph))
        graph._inherited_text, graph._text = graph._text, None
        if graph._lock is not None:
            graph._lock.release()  # closes this process's copy only: the parent keeps the lock
        if graph._path is not None:
            _close_inherited_lock_files(os.path.join(graph._path, TEXT_INDEX_DIR))


def _close_inherited_lock_files(folder: str) -> None:
    # The descriptors of this process open on "<folder>/*.lock" (Linux: /proc/self/fd).
    prefix = os.path.realpath(folder) + os.sep
    with contextlib.suppress(OSError):
        for name in os.listdir("/proc/self/fd"):
            with contextlib.suppress(OSError, ValueError):
                target = os.readlink(f"/proc/self/fd/{name}")
                if target.startswith(prefix) and target.endswith(".lock"):
                    os.close(int(name))


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork_in_child)


def folder_path(path: Any) -> str:
    """The absolute path of a graph folder argument; TypeError for an empty or non-path value,
    InvalidArgumentError for a NUL character."""
    try:
        raw_path = os.fspath(path)
    except TypeError:
        raise TypeError(f"path must be a non-empty str or os.PathLike, got {type(path).__name__} {path!r}") from None
    if not isinstance(raw_path, str) or not raw_path:
        raise TypeError(f"path must be a non-empty str or os.PathLike, got {path!r}")
    if "\0" in raw_path:
        raise InvalidArgumentError(f"path must not contain a NUL character, got {raw_path!r}")
    return os.path.abspath(raw_path)


def _check_folder_takes_a_graph(folder: str, dim: Any) -> None:
    """A folder without a MANIFEST takes a new graph only when empty (but for what an
    interrupted creation leaves) and given ``dim``; else InvalidArgumentError."""
    leftovers = storage.foreign_entries(folder)
    remnants = storage.graph_remnants(folder)
    if remnants:
        raise storage.missing_manifest(folder, remnants)
    if leftovers:
        raise InvalidArgumentError(
            f"{folder} is not empty and has no MANIFEST ({', '.join(sorted(leftovers)[:5])}); "
            "refusing to create a graph over other files"
        )
    if dim is None:
        raise InvalidArgumentError(f"{folder} holds no graph yet; pass dim (and metric) to create one")


def open_graph(
    cls: type[Graph],
    path: Union[str, os.PathLike],
    dim: Optional[int] = None,
    metric: Optional[str] = None,
    *,
    sync: str = "always",
    sync_interval_ms: int = 100,
    segment_bytes: int = 64 << 20,
    connectivity: Optional[int] = None,
    expansion_add: Optional[int] = None,
    expansion_search: Optional[int] = None,
    threads: Optional[int] = None,
    auto_compact_edges: int = 100_000,
    filterable: Optional[dict] = None,
    background_indexing: bool = True,
    full_scan_max_nodes: Optional[int] = None,
    filter_scan_max_nodes: Optional[int] = None,
    read_only: bool = False,
    _inspect: bool = False,
) -> Graph:
    """Open the graph in folder ``path``, creating it if it does not exist, or recovering it.

    Recovery loads the snapshot the MANIFEST names (if any), replays the write-ahead log
    from the snapshot's LSN, and cuts a torn tail (a record half-written when the process
    died: that write was never acknowledged). The folder is locked for writing until
    :meth:`close`; a lock left by a dead process does not block.

    HNSW: the snapshot's saved HNSW graph is loaded when it fits; nodes it does not hold
    (replayed from the WAL, or all of them without a saved graph) are inserted after the
    replay. With ``background_indexing`` and at least 4,096 such nodes, that runs in a
    background thread and ``open`` returns at once: until a node is inserted, searches
    find it as a seed by an exact scan of the nodes still waiting (same results, slower:
    about 20 M nodes/s of scan per search), and everything else (writes, deletes,
    traversal, checkpoints) works as usual. ``stats()["index_pending"]`` counts the nodes
    still waiting; :meth:`wait_for_indexing` waits for them.

    Disk failures: a write whose WAL record cannot be written, or whose fsync fails (its
    own or one that was to cover it), raises :class:`~vecgraph.errors.StorageError`, and
    the graph turns read-only: later writes raise :class:`~vecgraph.errors.ReadOnlyError`
    and write nothing. A failed fsync is never retried, since the kernel may have dropped
    the pages it was to write. A write that raised StorageError is not all or nothing: its
    record may be in the log, so it may be visible until :meth:`close`, and may or may not
    be there after a reopen. Writes acknowledged before the failure are durable.

    Running out of memory: a write refused before its record is logged raises MemoryError
    and changes nothing. One whose record is logged raises :class:`~vecgraph.errors.Error`
    and turns the graph read-only as above; the graph holds all of it or none of it (if
    the write is in the graph but its nodes could not be inserted into the HNSW index, they
    are found only by traversal and ``exact=True`` until the reopen), and a reopen applies
    or indexes it from the log. An allocation that fails while the write changes the
    graph's structures under its exclusive lock stops the process (abort, with a message)
    rather than leave searches a half-changed graph; a folder graph loses no acknowledged
    write by it.

    Args:
        path: the graph folder (created with its parents if missing).
        dim, metric: required to create a graph; when opening an existing one they are
            optional and, if given, must match what the folder holds.
        sync: when a write reaches the disk. "always": fsync before the write returns
            (concurrent writers share one fsync: group commit; a write that adds nodes
            has its fsync run by a background thread while it inserts them into the HNSW
            index); "interval": a background
            fsync at most every ``sync_interval_ms`` (a crash loses at most that window);
            "off": the operating system decides (a process crash loses nothing, a machine
            crash may).
        sync_interval_ms: period of "interval" syncing, in milliseconds.
        segment_bytes: WAL segment size; a new segment file starts past it.
        connectivity, expansion_add, expansion_search, threads, auto_compact_edges: as for
            :class:`Graph` (None: the defaults of :data:`vecgraph.storage.DEFAULT_HNSW` for a
            new graph). An existing graph's HNSW parameters come from its MANIFEST:
            ``expansion_search`` (the beam width at search) given here applies to this open
            (the MANIFEST keeps its own value); ``connectivity`` and ``expansion_add`` are
            fixed when the index is built, so a value other than the MANIFEST's is refused.
        filterable: as for :class:`Graph`, declared when the graph is created and kept in
            its MANIFEST; when opening an existing graph it may be omitted, and if given
            must equal what the MANIFEST holds.
        background_indexing: insert the nodes the HNSW graph lacks after recovery in a
            background thread (True) or before returning (False).
        full_scan_max_nodes, filter_scan_max_nodes: as for :class:`Graph` (search settings:
            not kept in the folder).
        read_only: open an existing graph to read only, changing nothing in the folder: for
            a folder on a read-only filesystem (a mounted backup, a container image), or
            for several processes that search one graph. It takes a shared lock on the
            LOCK file (many readers, no writer meanwhile; a folder without a LOCK file is
            not locked) and recovers in memory: a torn WAL tail is skipped, not cut.
            Writes, :meth:`add_aliases`, :meth:`checkpoint` and recording an embedder raise
            ReadOnlyError; searches, :meth:`compact` (in memory) and
            :func:`vecgraph.snapshot.export` work. The first BM25 search reads a private
            copy of the folder's BM25 index (rebuilt in memory if it is missing, damaged or
            out of step). ``sync`` and the WAL settings are not used.

    Raises:
        InvalidArgumentError: a new graph without dim, a bad sync policy, metric mismatch.
        DimensionMismatchError: dim differs from the existing graph's.
        StorageError: the folder is locked by another open graph (with ``read_only``: by
            one open for writing), or cannot be written; with ``read_only``, the folder
            holds no graph.
        CorruptionError: a damaged MANIFEST, snapshot or WAL (damage in the middle of the
            log, a segment of another database, a missing segment), or a WAL that lost its
            newest segments: ``WAL_TAIL`` names a segment newer than any left in ``wal/``,
            or ``wal/`` is gone (deleted, or the folder copied without it). The message
            names the missing segment and the LSN from which acknowledged writes are lost;
            restore the graph from an export (``vecgraph restore``), or remove
            ``WAL_TAIL`` to open it without those writes. Such a refused open changes
            nothing in the folder.
    """
    make: Any = cls  # a Graph class (Graph.open binds it)
    sync = _choice(sync, "sync", ("always", "interval", "off"))
    sync_interval_ms = _count(sync_interval_ms, "sync_interval_ms")
    if not 1 <= sync_interval_ms <= 86_400_000:
        raise InvalidArgumentError(f"sync_interval_ms must be in [1, 86400000] (one day), got {sync_interval_ms}")
    segment_bytes = _count_at_least(segment_bytes, "segment_bytes", 4096)
    _count_at_least(auto_compact_edges, "auto_compact_edges", 0, " (0: never)")
    for name, value in (("connectivity", connectivity), ("expansion_add", expansion_add),
                        ("expansion_search", expansion_search)):
        if value is not None:
            _count_at_least(value, name, 1)
    background_indexing = _flag(background_indexing, "background_indexing")
    read_only = _flag(read_only, "read_only") or _inspect
    # Checked before the folder is touched; Graph() resolves them again.
    _scan_max_nodes(full_scan_max_nodes, "full_scan_max_nodes", FULL_SCAN_MAX_NODES)
    _scan_max_nodes(filter_scan_max_nodes, "filter_scan_max_nodes", FILTER_SCAN_AUTO)
    if metric is not None:
        metric = _metric(metric)
    if dim is not None:
        _count_at_least(dim, "dim", 1)
    folder = folder_path(path)
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise storage.StorageError(f"{folder} is a file, not a graph folder")
    created = not os.path.exists(folder)
    if read_only and not os.path.isfile(os.path.join(folder, storage.MANIFEST)):
        if not created and storage.graph_remnants(folder):
            raise storage.missing_manifest(folder, storage.graph_remnants(folder))
        why = "does not exist" if created else f"has no {storage.MANIFEST}"
        raise storage.StorageError(f"{folder} {why}; read_only=True opens an existing graph only")
    if created and dim is None:
        raise InvalidArgumentError(f"{folder} does not exist; pass dim (and metric) to create a graph there")
    if not created and not os.path.isfile(os.path.join(folder, storage.MANIFEST)):
        # A folder that holds no graph is checked before anything in it is touched (the
        # LOCK, or the cleanup of an interrupted checkpoint, would change a user's files).
        _check_folder_takes_a_graph(folder, dim)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise storage.StorageError(f"cannot create graph folder {folder}: {e}") from e
    lock_existed = os.path.exists(os.path.join(folder, storage.LOCK))
    if not created and not lock_existed and not read_only and os.path.isfile(os.path.join(folder, storage.MANIFEST)):
        # No LOCK: no writer has the folder open. A WAL that lost its newest segments is
        # refused before a LOCK is made, so that the folder stays exactly as it was. (A LOCK
        # appearing meanwhile may be a writer's that rolled a segment during the check: then
        # the check is made again under the lock, below.)
        try:
            found = storage.read_manifest(folder)
            if found is not None:
                storage.check_wal_tail(folder, found)
        except CorruptionError:
            if not os.path.exists(os.path.join(folder, storage.LOCK)):
                raise
    # The pid goes into the LOCK once the folder is known to open: a refused open leaves a
    # LOCK that was there as it was (and removes one it made, below).
    lock = storage.FolderLock(folder, stamp=False, shared=read_only)
    loaded: Optional[dict] = None
    full: Optional[BaseException] = None  # the disk was full when the graph was to be made writable
    try:
        manifest = storage.read_manifest(folder)
        if manifest is not None:
            # Before anything on disk changes: a WAL whose newest segments are gone (deleted,
            # or the folder copied without them) lost acknowledged writes; refuse it.
            storage.check_wal_tail(folder, manifest)
        if not read_only:
            try:
                lock.stamp()
            except OSError as e:  # a LOCK made just now, on a full disk: open to read, below
                if not storage.disk_full(e):
                    raise storage.StorageError(f"cannot write {lock.path}: {e}") from e
                full = e
            if manifest is not None:
                storage.remove_stale_temporaries(folder)
        if manifest is None:
            _check_folder_takes_a_graph(folder, dim)  # again under the LOCK
            metric = metric or "cos"
            declared = _filterable(filterable)
            connectivity = storage.DEFAULT_HNSW["connectivity"] if connectivity is None else connectivity
            expansion_add = storage.DEFAULT_HNSW["expansion_add"] if expansion_add is None else expansion_add
            if expansion_search is None:
                expansion_search = storage.DEFAULT_HNSW["expansion_search"]
            manifest = storage.new_manifest(
                _count(dim, "dim"), metric,
                {"connectivity": connectivity, "expansion_add": expansion_add,
                 "expansion_search": expansion_search},
            )
            manifest["filterable"] = declared
            graph = make(manifest["dim"], metric, connectivity=connectivity, expansion_add=expansion_add,
                        expansion_search=expansion_search, threads=threads,
                        auto_compact_edges=auto_compact_edges, filterable=declared,
                        full_scan_max_nodes=full_scan_max_nodes, filter_scan_max_nodes=filter_scan_max_nodes)
            storage.write_manifest(folder, manifest)
        else:
            if dim is not None and _count(dim, "dim") != manifest["dim"]:
                raise DimensionMismatchError(f"{folder} holds a graph of dim {manifest['dim']}, dim={dim} was given")
            if metric is not None and metric != manifest["metric"]:
                raise InvalidArgumentError(
                    f"{folder} holds a graph with metric {manifest['metric']!r}, metric={metric!r} was given")
            hnsw = manifest["hnsw"]
            for name, given in (("connectivity", connectivity), ("expansion_add", expansion_add)):
                if given is not None and hnsw.get(name) is not None and _count(given, name) != hnsw[name]:
                    raise InvalidArgumentError(
                        f"{folder} holds an HNSW index built with {name}={hnsw[name]}; {name}={given!r} was "
                        "given, but it is fixed when the index is built (leave it out to open the folder; "
                        f"another {name} needs a new graph built with it)")
            connectivity = hnsw.get("connectivity", storage.DEFAULT_HNSW["connectivity"])
            expansion_add = hnsw.get("expansion_add", storage.DEFAULT_HNSW["expansion_add"])
            if expansion_search is None:
                expansion_search = hnsw.get("expansion_search", storage.DEFAULT_HNSW["expansion_search"])
            declared = manifest.get("filterable") or {}
            if filterable is not None and _filterable(filterable) != declared:
                raise InvalidArgumentError(
                    f"{folder} holds a graph with filterable properties {declared}, filterable={filterable!r} "
                    "was given (they are fixed when a graph is created)")

            def empty_graph() -> Any:
                g = make(manifest["dim"], manifest["metric"], connectivity=connectivity,
                        expansion_add=expansion_add, expansion_search=expansion_search,
                        threads=threads, auto_compact_edges=auto_compact_edges, filterable=declared,
                        full_scan_max_nodes=full_scan_max_nodes, filter_scan_max_nodes=filter_scan_max_nodes)
                g._engine.defer_indexing(True)  # HNSW: from the cached file, or one pass at the end
                return g

            graph = empty_graph()
            if manifest["snapshot"] is not None:
                try:
                    loaded = storage.load_snapshot(graph._engine, folder, manifest)
                except CorruptionError as damage:
                    previous = manifest.get("previous")
                    if not previous:
                        raise
                    warnings.warn(f"{damage}; recovering from the previous snapshot {previous['snapshot']} "
                                  "and the WAL since it", RuntimeWarning, stacklevel=2)
                    graph = empty_graph()
                    try:
                        loaded = storage.load_snapshot(graph._engine, folder, manifest, previous)
                    except CorruptionError as also:
                        raise CorruptionError(f"{damage}; the previous snapshot is damaged too: {also}") from None
                    manifest = dict(manifest, snapshot=previous["snapshot"],
                                    snapshot_lsn=previous["snapshot_lsn"], files=previous["files"], previous=None)
        uuid = bytes.fromhex(manifest["uuid"])
        wal_dir = os.path.join(folder, storage.WAL_DIR)
        wal_tail = os.path.join(folder, storage.WAL_TAIL)
        snapshot_lsn = int(manifest["snapshot_lsn"])
        graph._engine.set_last_text_lsn(int(manifest.get("text_lsn", snapshot_lsn)))
        # read_only (and _inspect, for vecgraph.snapshot.verify): recover in memory only,
        # nothing on disk changes.
        report = graph._engine.replay_wal(wal_dir, uuid, snapshot_lsn + 1, not read_only, wal_tail)
        background = background_indexing and not _inspect
        graph._engine.defer_indexing(False, BACKGROUND_INDEX_MIN if background else _NEVER)
        graph._engine.compact()
        if report["truncated_bytes"] and not _inspect:
            done = "skipped" if read_only else "cut"
            left = "; read_only leaves them in the folder (a writable open cuts them)" if read_only else ""
            warnings.warn(
                f"{done} {report['truncated_bytes']} bytes at the end of the WAL ({report['truncated_at']}): "
                "a record half-written when the process died, or damaged in its last bytes; "
                f"a write that had not returned is lost{left}", RuntimeWarning, stacklevel=2)
        if report["fallback_damaged"] and not _inspect:
            warnings.warn(
                "the WAL segments kept only to fall back to the previous snapshot are damaged ("
                + "; ".join(report["fallback_damaged"][:3]) + "): the graph opened from the newest snapshot, which "
                "with the newer segments holds every write; falling back to the previous snapshot is no longer "
                "possible (the next checkpoint drops those segments)", RuntimeWarning, stacklevel=2)
        # The WAL continues where its last segment ends; with no segment, after the snapshot.
        next_lsn = report["next_lsn"] or snapshot_lsn + 1
        if read_only:
            graph._engine.refuse_writes(
                f"the graph at {folder} is open read-only (Graph.open(..., read_only=True)); "
                "open it without read_only to write")
        else:
            # The writer makes WAL_TAIL name the segment it appends to or creates.
            try:
                graph._engine.attach_wal(wal_dir, uuid, next_lsn, sync, sync_interval_ms, segment_bytes, wal_tail)
            except storage.StorageError as e:
                if not storage.disk_full(e):
                    raise
                full = e  # opened to read; writes refused, below
    except BaseException:
        if not created and not lock_existed and not read_only:
            try:  # a LOCK this open made goes (removed while held: no one else takes it meanwhile)
                os.unlink(lock.path)
            except OSError:
                pass
        lock.release()
        if created:  # leave no trace of a graph that was never created
            shutil.rmtree(folder, ignore_errors=True)
        raise
    graph._path, graph._lock, graph._manifest = folder, lock, manifest
    graph._read_only = read_only
    try:
        if not read_only and full is None:
            try:
                open_text_index(graph)
            except storage.StorageError as e:
                if not storage.disk_full(e):
                    raise
                full = e
        if full is not None:
            _open_degraded(graph, folder, full)
    except BaseException:
        graph.close()
        raise
    graph._recovery = dict(report, snapshot=manifest["snapshot"], hnsw=loaded["hnsw"] if loaded else None)
    _release_after_batch(len(graph) + graph.count_edges)  # loading's temporaries (Arrow tables, the replay)
    return graph


def checkpoint(self: Graph, *, keep_history: bool = True) -> dict:
    """Write the current state as an Arrow snapshot, commit it in the MANIFEST, and drop
    the WAL segments it makes unnecessary. Writes wait while the state is copied out.
    The HNSW graph is saved beside it when it holds exactly the live nodes (not while a
    background pass of :meth:`open` runs); with nothing written since the last snapshot,
    a checkpoint writes a new one only to add the HNSW graph that one lacks.

    By default the previous generation and the WAL back to it are kept, so that open can fall
    back to it if the new one is found damaged. ``keep_history=False`` is for erasure: a new
    generation is always written and is the only one left, every WAL segment before it is
    deleted, and the BM25 index is filled anew from the live texts (every older segment file
    removed), so that no file of the folder still holds a deleted node's bytes (see :meth:`vecgraph.Memory.forget`). The HNSW file is
    then written only if the index holds no deleted node; otherwise the next open rebuilds it.

    Args:
        keep_history: False to drop every older generation and WAL segment (see above).

    Returns:
        {"lsn": LSN the snapshot holds, "snapshot": its folder, "nodes": n, "edges": m,
        "removed": paths of the files and folders deleted (relative to the graph's folder)}.

    Raises:
        InvalidArgumentError: an in-memory graph (nothing to checkpoint to).
        ReadOnlyError: the graph is closed.
        StorageError: the snapshot could not be written.
    """
    keep_history = _flag(keep_history, "keep_history")
    with self._checkpoint_lock:
        self._require_folder("checkpoint")
        before = _folder_files(self._path)
        unchanged = keep_history and (self._manifest["snapshot"] is not None
                     and self._manifest["snapshot_lsn"] == self._engine.last_lsn())
        if unchanged and (storage.HNSW_FILE in (self._manifest.get("files") or {})
                          or not self._engine.seed_index_complete()):
            stats = self._engine.stats()  # nothing written since the last snapshot
            return {"lsn": self._manifest["snapshot_lsn"],
                    "snapshot": os.path.join(self._path, self._manifest["snapshot"]),
                    "nodes": stats["nodes"], "edges": stats["edges"], "removed": []}
        try:
            tmp = storage.begin_snapshot(self._path, self._manifest)
        except OSError as e:
            raise storage.StorageError(f"checkpoint of {self._path} failed: {e}") from e
        try:
            # The HNSW graph is saved beside the columns at the same LSN (when it indexes
            # exactly the live nodes), so that opening reads it instead of rebuilding it.
            state = self._engine.export_state(os.path.join(tmp, storage.HNSW_FILE))
            self._engine.sync()  # the WAL must never be behind a committed snapshot
            manifest = storage.write_snapshot(self._path, self._manifest, state, tmp)
            if not keep_history:
                manifest["previous"] = None
            manifest["text_lsn"] = int(state["text_lsn"])
            storage.write_manifest(self._path, manifest)
        except BaseException as e:
            # A failed generation gives its disk space back at once (on a full disk, the
            # space the next try needs); the committed snapshots are untouched.
            shutil.rmtree(tmp, ignore_errors=True)
            adopt_manifest_on_disk(self)
            if isinstance(e, OSError):
                raise storage.StorageError(f"checkpoint of {self._path} failed: {e}") from e
            raise
        self._manifest = manifest
        # The WAL is kept back to the previous snapshot, so that either generation plus the
        # WAL recovers everything (open falls back to the previous one if this one is damaged).
        previous = manifest.get("previous")
        self._engine.drop_wal_before(int(previous["snapshot_lsn"] if previous else state["lsn"]) + 1)
        storage.remove_old_snapshots(self._path, manifest)
        with self._text_lock:
            if not keep_history and not self._read_only:
                # A deleted document's terms stay in tantivy's segments until they merge: the
                # index is filled anew from the live texts (one commit that drops every older
                # segment), and optimize() below removes their files.
                from .side_indexes import refill_text, text_index

                index = text_index(self)  # the text lock is reentrant
                # The snapshot's state serves when no write came after it (else it is read again;
                # a write that changes texts waits for the text lock held here).
                refill_text(self, index, state if int(state["lsn"]) == self._engine.last_lsn() else None)
            if self._text is not None:
                self._text.optimize()  # buffered BM25 writes survive a crash from here on
        after = _folder_files(self._path)
        return {"lsn": int(state["lsn"]), "snapshot": os.path.join(self._path, manifest["snapshot"]),
                "nodes": len(state["ts"]), "edges": len(state["edge_src"]), "removed": sorted(before - after)}


def _open_degraded(graph: Graph, folder: str, full: BaseException) -> None:
    """The disk is full at open: the graph stays open for every read (searches, the BM25 index
    in memory, export), and each write raises StorageError saying so."""
    why = (f"the disk is full: the graph at {folder} was opened for reading only ({full}); free space and "
           "open it again to write")
    text = graph._text
    graph._text = None
    if text is not None:
        with contextlib.suppress(Exception):
            text.close()
    with contextlib.suppress(Exception):
        graph._engine.close_wal()  # nothing of it to sync; an export then rolls no segment
    graph._engine.refuse_writes(why, True)
    graph._degraded = why
    graph._read_only = True  # reads use a private copy of the BM25 index, as read_only=True does
    warnings.warn(why, RuntimeWarning, stacklevel=3)


def _folder_files(folder: str) -> set:
    """The paths of the files under ``folder``, relative to it."""
    found = set()
    for root, _dirs, files in os.walk(folder):
        for name in files:
            found.add(os.path.relpath(os.path.join(root, name), folder))
    return found


def close(graph: Any) -> None:
    """:meth:`vecgraph.Graph.close`: sync and close the WAL, close the folder's BM25 index and
    release the LOCK (in a forked child, only what that process made)."""
    if graph._forked:  # the WAL, the LOCK and the folder's text index belong to the process that forked this one
        graph._closed = True
        with graph._text_lock:  # a BM25 index this process made (in memory, or a read-only graph's copy) goes
            if graph._text is not None:
                graph._text.close()
                graph._text = None
        return
    with graph._checkpoint_lock:  # a checkpoint in another thread finishes first
        if graph._closed:
            return
        graph._closed = True
        try:
            graph._engine.wait_for_compaction()
            if graph._path is not None:
                graph._engine.close_wal()
        except ReadOnlyError:
            pass  # the WAL had already failed; that write raised, and the LOCK goes below
        finally:
            if graph._path is not None and graph._text is not None:
                with graph._text_lock:
                    graph._text.close()
                    graph._text = None  # a later BM25 search builds one in memory
            if graph._lock is not None:
                graph._lock.release()
                graph._lock = None


def adopt_manifest_on_disk(graph: Any) -> None:
    """After a failed checkpoint: the MANIFEST on disk may already commit the new generation
    (its rename was done when a later fsync failed). The next checkpoint must then write the
    generation after it, not write over the one the MANIFEST names."""
    try:
        on_disk = storage.read_manifest(graph._path)
    except Exception:  # noqa: BLE001 - unreadable now: the next open reads it again
        return
    if on_disk and int(on_disk.get("generation", 0)) > int(graph._manifest.get("generation", 0)):
        graph._manifest = on_disk
