"""The :class:`Graph` facade: typed, documented access to the C++ core.

The facade checks its arguments (:mod:`vecgraph.arguments`), calls the core, and returns
result types (:mod:`vecgraph.results`). What is larger than a call lives in a module named for
it: a folder's open, recovery and checkpoint (:mod:`vecgraph.folder`), the BM25 and entity
indexes kept beside the engine (:mod:`vecgraph.side_indexes`), entity names
(:mod:`vecgraph.entities`) and hybrid retrieval (:mod:`vecgraph.hybrid`, whose
``hybrid_search`` and ``hybrid_search_batch`` are this class's methods).
"""

from __future__ import annotations

import contextlib
import inspect
import json
import os
import threading
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Optional, Union

import numpy as np

from . import _core, aio, arguments, embedders, entities, folder, hybrid, listing, side_indexes, storage
from .arguments import (FILTER_SCAN_AUTO, FILTER_SCAN_MAX_NODES, FULL_SCAN_MAX_NODES, _DIRECTIONS, Timestamps, _metric,
                        _choice, _count_at_least, _edge_columns, _exclude_keys, _filterable, _flag, _float_array,
                        _keys, _names, _node_columns, _scan_max_nodes, _scan_threshold, _strings, _threads, _where,
                        quantize)
from .entities import ALIAS_SEPARATOR
from .errors import InvalidArgumentError, ReadOnlyError, StorageError
from .heap import _release_after_batch
from .results import Edge, Hit, Key, SearchResult
# Names of this module from before the split: pickles of a SearchResult name
# vecgraph.graph._search_result_from_state; the folder constants were importable here.
from .folder import BACKGROUND_INDEX_MIN  # noqa: F401
from .repair import repair as _repair
from .results import _search_result_from_state  # noqa: F401
from .side_indexes import LEGACY_TEXT_INDEX_FILES, TEXT_INDEX_DIR  # noqa: F401

__all__ = ["Graph", "SearchResult", "Hit", "Edge", "quantize", "FULL_SCAN_MAX_NODES", "FILTER_SCAN_MAX_NODES"]


class Graph:
    """A graph of nodes with vectors, typed directed edges, and graph-guided search.

    ``Graph(dim)`` lives in memory only; :meth:`Graph.open` keeps it in a folder on disk with a
    write-ahead log, so that no acknowledged write is lost when the process dies.

    Args:
        dim: vector length (1 to 65536).
        metric: "cos" (cosine; vectors are normalised), "ip" (inner product) or "l2"
            (squared Euclidean distance, scored as its negative).
        connectivity: HNSW M, links per node (2M on the base level). Default 24: with 48 links
            on the base level a walk reaches a given recall at a smaller ef than with M=16, and
            the walk's cost is its chain of dependent steps, so fewer, wider steps are faster
            (HNSW: Malkov and Yashunin, IEEE TPAMI 2020). It costs about 30% more HNSW memory
            (273 against 212 MB at 1,000,000 nodes).
        expansion_add: HNSW efConstruction. Default 128.
        expansion_search: HNSW ef at query time (raised to ``seeds`` when smaller), also the
            per-search ``ef``. Default 128 (:data:`vecgraph.storage.DEFAULT_HNSW`). On clustered
            384-d data at 100,000 nodes (k=10, 8 seeds, hops=2) ef=64 gives recall@10 against
            ``exact=True`` of 0.994-0.996 at p50 89-94 µs, where M=16 with ef=128 gave 0.995 at
            113 µs; at 1,000,000 nodes 0.979-0.981 (ef=128: 0.988). On WordNet (256-d text
            embeddings, 117,659 nodes) ef=64 gives 0.965, ef=96 0.981 and ef=128 0.989, at 1.3x
            and 1.7x the search time of ef=64.
        threads: threads for bulk work (quantization, HNSW inserts); default: all cores.
        auto_compact_edges: compaction starts in the background once this many edges were
            added or deleted since the last one (and at least 1/8 of the graph's edges);
            a batch this large is compacted at once. 0 turns automatic compaction off.
        filterable: node properties to keep in typed columns for ``where`` filters,
            ``{name: type}`` with type "str", "int64", "float64" or "timestamp" (or str, int,
            float, datetime). Each node's value is read from its ``props`` dict (a timestamp as
            microseconds since the epoch; datetimes in props are stored that way). A value
            must be of the declared type: for "str" a str; for "int64" an int in the int64
            range (or a float with an integral value); for "float64" a finite int or float;
            for "timestamp" an int, a datetime or a date. A write giving a value of another
            type (a str for an int64, a bool for a number) is refused. A missing value or
            None is allowed and never passes a filter.
        full_scan_max_nodes: while the graph holds at most this many nodes (deleted ones
            count until their rows are reclaimed: when the graph is reopened from a checkpoint
            taken after the deletes), searches find their seeds by an exact scan
            of the int8 codes instead of HNSW: about as fast at that size, and exact (the
            seeds ``exact=True`` would give). Default :data:`FULL_SCAN_MAX_NODES` (4,096), or
            the environment variable ``VECGRAPH_FULL_SCAN_MAX_NODES``; 0: HNSW always. Also
            the settable property of the same name. On this project's 2-core test machine
            (AVX2, 384-d, k=10, 8 seeds, hops=0), seeds by scan against HNSW at M=16, ef 128: 15
            against 67 µs at 1,000 nodes, 77 against 137 µs at 5,000. With the default M=24,
            ef=64 on an AVX-512 VNNI machine: 13 against 29 µs at 1,000 nodes, 26 against 30 at
            3,000, 39 against 31 at 4,096, 138 against 32 at 10,000.
        filter_scan_max_nodes: a search whose ``labels`` or ``tenants`` filter admits at most
            this many live nodes finds its seeds by scanning just those nodes, read from
            per-label and per-tenant member lists, instead of HNSW: exact (the seeds
            ``exact=True`` would give), and far faster for a selective filter, which HNSW
            walks past many rejected nodes to satisfy (the same choice as Qdrant's
            payload-index cardinality check and Weaviate's flat-search cutoff). With both
            filters, the one admitting fewer nodes supplies the lists. Any other filter
            (``where``, ``ts_min`` / ``ts_max``, or labels / tenants with more nodes) that the
            HNSW walk finds to admit very few of the nodes it walks (checked every 1,024
            members walked, against the filter's share of 1,024 sampled nodes) makes the walk
            give up for an exact scan of the graph once that is predicted to be cheaper than
            filling the beam (a ``where`` admitting 0.2% of 100,000 nodes: 0.59 ms against
            33 ms). Default "auto", or the environment variable
            ``VECGRAPH_FILTER_SCAN_MAX_NODES`` (an int, or "auto"); 0: HNSW always (no lists,
            no giving up). "auto" sets the limit to ``max(FILTER_SCAN_MAX_NODES,
            isqrt(1000 * rows))`` for the graph's node rows at each search: 10,000 up to 100,000
            rows, 31,622 at 1,000,000. A list scan costs about one gathered row per admitted node
            and a filtered HNSW walk about ef * rows / admitted members, so the two meet where
            the admitted count grows as the square root of the graph. Also a settable property.
            On this project's 2-core test machine (AVX2, 384-d, seeds only), a label admitting
            1,000 of 100,000 nodes: 52 µs against 6.8 ms by HNSW; 10,000 of 1,000,000: 0.47
            against 14.5 ms; 20,000 of 1,000,000: 1.5 against 7.5 ms; the two meet near 14,000
            admitted nodes at 100,000 and 30,000-38,000 at 1,000,000.

    Vectors are stored once, as int8 codes with a float32 scale per vector (see
    :func:`quantize`); the HNSW index (Malkov & Yashunin, TPAMI 2018, via USearch) computes its
    distances over those codes.

    Concurrency: any number of threads may search while others write. Writes take turns (a
    second thread's write waits, no error) only to check, log and append their rows in memory;
    each write's HNSW inserts and fsync then run beside the next writes'. A write is visible to
    every search that starts after it returns. Searches never wait for a disk sync or an HNSW
    insert; they wait only while a write appends its rows in memory (microseconds; a rehash
    when the key map doubles).

    Raises:
        InvalidArgumentError: dim, metric or an HNSW parameter out of range.
    """

    def __init__(
        self,
        dim: int,
        metric: str = "cos",
        *,
        connectivity: int = storage.DEFAULT_HNSW["connectivity"],
        expansion_add: int = storage.DEFAULT_HNSW["expansion_add"],
        expansion_search: int = storage.DEFAULT_HNSW["expansion_search"],
        threads: Optional[int] = None,
        auto_compact_edges: int = 100_000,
        filterable: Optional[dict] = None,
        full_scan_max_nodes: Optional[int] = None,
        filter_scan_max_nodes: Optional[int] = None,
    ) -> None:
        dim = _count_at_least(dim, "dim", 1)
        for name, value, least in (("connectivity", connectivity, 2), ("expansion_add", expansion_add, 1),
                                   ("expansion_search", expansion_search, 1)):
            _count_at_least(value, name, least)
        threads = (os.cpu_count() or 1) if threads is None else _threads(threads, "threads")
        auto_compact_edges = _count_at_least(auto_compact_edges, "auto_compact_edges", 0, " (0: never)")
        self._filterable = _filterable(filterable)
        full_scan_max_nodes = _scan_max_nodes(full_scan_max_nodes, "full_scan_max_nodes", FULL_SCAN_MAX_NODES)
        filter_scan_max_nodes = _scan_max_nodes(filter_scan_max_nodes, "filter_scan_max_nodes", FILTER_SCAN_AUTO)
        self._engine = _core.Engine(dim, _metric(metric), connectivity, expansion_add,
                                    expansion_search, threads, auto_compact_edges, list(self._filterable.items()))
        self._engine.full_scan_max_nodes = full_scan_max_nodes
        self._engine.filter_scan_max_nodes = filter_scan_max_nodes
        self._hnsw = {"connectivity": connectivity, "expansion_add": expansion_add, "expansion_search": expansion_search}
        self._path: Optional[str] = None
        self._lock: Optional[storage.FolderLock] = None
        self._manifest: Optional[dict] = None
        self._embedder: Optional[dict] = None  # {"name", "dim"} of an in-memory graph's embedder
        self._query_embedder: Any = None  # the embedder object of text queries (query_embedder)
        self._closed = False
        self._read_only = False  # a folder graph opened with read_only=True
        self._degraded: Optional[str] = None  # why writes raise StorageError (the disk was full at open)
        self._pid = os.getpid()  # of the process that made this graph (see _forked)
        folder._GRAPHS.add(self)
        self._checkpoint_lock = threading.Lock()  # one checkpoint at a time; close waits for it
        # BM25 over node texts (vecgraph.text), kept in step with the graph's writes; entity
        # names (str keys and aliases) for the entity channel; both built on first use.
        self._text: Any = None
        self._text_lock = threading.RLock()  # writes that change texts, in LSN order
        self._entities: Any = None

    # ---------------------------------------------------------------- durable graphs

    # A graph in a folder (vecgraph/folder.py): created, or recovered from its snapshot and WAL;
    # a checkpoint commits a new snapshot generation.
    open = classmethod(folder.open_graph)
    repair = classmethod(_repair)
    checkpoint = folder.checkpoint

    @property
    def filterable(self) -> dict:
        """The filterable properties declared when the graph was created, ``{name: type}``
        with types "str", "int64", "float64" or "timestamp"."""
        return dict(self._filterable)

    @property
    def path(self) -> Optional[str]:
        """The graph folder, or None for an in-memory graph."""
        return self._path

    @property
    def read_only(self) -> bool:
        """True for a folder graph opened with ``read_only=True`` (writes raise ReadOnlyError)."""
        return self._read_only

    full_scan_max_nodes = _scan_threshold(
        "full_scan_max_nodes", FULL_SCAN_MAX_NODES,
        """Searches find seeds by an exact scan while the graph holds at most this many nodes
        (see :class:`Graph`); settable at any time, 0 for HNSW always. Raises
        InvalidArgumentError for a negative value, TypeError for a non-int.""")

    filter_scan_max_nodes = _scan_threshold(
        "filter_scan_max_nodes", FILTER_SCAN_AUTO,
        """Searches whose label or tenant filter admits at most this many live nodes find seeds
        by scanning just those nodes (see :class:`Graph`); "auto" (the default): a limit that
        grows with the graph, ``max(FILTER_SCAN_MAX_NODES, isqrt(1000 * rows))``, in force now as
        ``stats()["filter_scan_max_nodes"]``. Settable at any time; 0 for HNSW always. Raises
        InvalidArgumentError for a negative value or another str, TypeError for another type.""")

    @contextlib.contextmanager
    def deferred_indexing(self) -> Iterator["Graph"]:
        """Bulk loading: nodes added or upserted inside the block are checked, logged and
        applied at once, but inserted into the HNSW seed index in one parallel pass when the
        block ends (faster than one insert per batch). Inside the block those nodes are found
        by traversal and ``exact=True`` searches, not yet as HNSW seeds. Nested blocks join the
        outer one. A crash inside the block loses nothing: recovery indexes what the WAL holds.
        Entering the block waits for a background HNSW pass of :meth:`open` to finish, and
        raises as :meth:`wait_for_indexing` does when that pass failed. When the insert at the
        end of the block runs out of memory, leaving it raises MemoryError; the nodes stay
        found by an exact scan, and the next :meth:`wait_for_indexing` inserts them.

        Raises:
            ReadOnlyError: the graph is closed.
        """
        self._check_open()
        if self._engine.indexing_deferred():
            yield self
            return
        self._engine.defer_indexing(True)
        try:
            yield self
        finally:
            self._engine.defer_indexing(False)

    def verify(self, limit: int = 100) -> list[str]:
        """Check the invariants searches rely on: column lengths, the key map, tombstone
        counts, the label and tenant member lists (live counts exact, every live node
        listed), the CSR (offsets, endpoints, edge ids, (weight desc, edge id asc) order, out
        and in agreeing with the edge columns), the delta graph, and that the HNSW seed index
        holds every live node and links only to its own members.

        Returns:
            Up to ``limit`` problems, one line each; empty when the graph is sound.

        Raises:
            TypeError: ``limit`` is not an int. InvalidArgumentError: ``limit`` < 0.
        """
        return list(self._engine.verify(_count_at_least(limit, "limit", 0)))

    def sync(self) -> None:
        """Make every write so far durable (fsync), whatever the sync policy (an in-memory
        graph has nothing to sync).

        Raises:
            ReadOnlyError: the graph is closed (:meth:`close` synced it).
            StorageError: the fsync failed; the graph turns read-only (see :meth:`open`).
        """
        self._check_open("sync needs")
        self._engine.sync()

    def compact(self) -> None:
        """Fold the delta (edges added or deleted since the last compaction) into a new CSR,
        built beside the live one and swapped in; searches keep running meanwhile. It changes
        no data, only the in-memory layout.

        Raises:
            ReadOnlyError: the graph is closed.
        """
        self._check_open("compact needs")
        self._engine.compact()

    def close(self) -> None:
        """Sync and close the WAL and release the folder's LOCK. Idempotent.

        After it, whatever would change the graph or its files raises ReadOnlyError: writes,
        :meth:`add_aliases`, recording an embedder (:meth:`use_embedder`), :meth:`checkpoint`,
        :meth:`sync`, :meth:`compact` and :meth:`deferred_indexing`. Reads keep working on the
        in-memory state: searches, :meth:`get_node`, :meth:`neighbors`, :meth:`stats`,
        :meth:`verify`, ``len`` and ``in``."""
        folder.close(self)

    def __enter__(self) -> "Graph":
        """The graph itself; :meth:`close` runs when the block ends.

        Raises:
            ReadOnlyError: the graph is already closed (a ``with`` block on it would suggest
                writes that cannot happen), as ``with`` on a closed file raises.
        """
        if self._closed:
            self._check_open("a with block needs")
        return self

    def __del__(self) -> None:
        # A graph dropped without close(): sync the WAL before the LOCK goes.
        if getattr(self, "_lock", None) is not None:
            try:
                self.close()
            except Exception:
                pass

    def __exit__(self, *exc_info: Any) -> None:
        self.close()

    @property
    def _forked(self) -> bool:
        """True in a process forked from the one that made this graph."""
        return os.getpid() != self._pid

    def _check_open(self, needs: str = "writes need") -> None:
        """ReadOnlyError on a closed graph, naming what ``needs`` an open graph, and on a folder
        graph inherited by a forked process."""
        self._check_not_inherited()
        if self._closed:
            where = f" at {self._path}" if self._path else ""
            raise ReadOnlyError(f"the graph{where} is closed; {needs} an open graph")

    def _check_not_inherited(self) -> None:
        """ReadOnlyError on a folder graph inherited by a forked process."""
        if self._forked and self._path is not None:
            raise ReadOnlyError(
                f"the graph at {self._path} was opened by process {self._pid}, and this process "
                f"({os.getpid()}) is a fork of it: its writes would go into that process's write-ahead "
                "log behind its back (searches work). To write, open the folder in this process once "
                "the other has closed it")

    def _require_folder(self, what: str) -> None:
        if self._path is None:
            raise InvalidArgumentError(f"{what} needs a graph on disk; use vecgraph.Graph.open(path, ...)")
        self._check_writable(f"{what} needs")

    def _check_writable(self, needs: str = "writes need") -> None:
        """ReadOnlyError as :meth:`_check_open`, and on a graph opened with read_only=True."""
        self._check_open(needs)
        if self._degraded is not None:
            raise StorageError(self._degraded)
        if self._read_only:
            raise ReadOnlyError(f"the graph at {self._path} is open read-only (Graph.open(..., read_only=True)); "
                                f"{needs} a graph opened for writing")

    # ---------------------------------------------------------------- properties

    @property
    def dim(self) -> int:
        """Vector length."""
        return self._engine.dim

    @property
    def metric(self) -> str:
        """"cos", "ip" or "l2"."""
        return self._engine.metric

    def __len__(self) -> int:
        """Number of nodes."""
        return self._engine.count_nodes()

    @property
    def count_edges(self) -> int:
        """Number of edges."""
        return self._engine.count_edges()

    def __contains__(self, key: object) -> bool:
        return self._engine.contains(key)

    # ---------------------------------------------------------------- embedder

    @property
    def embedder(self) -> Optional[dict]:
        """The embedder that built this graph's vectors, ``{"name": str, "dim": int}`` (and
        ``"spec"``, the ``"module:attribute"`` it was loaded from by :func:`vecgraph.embedders.load`,
        when that is not its name), or None if none was recorded (see :meth:`use_embedder`). A
        folder graph keeps it in its MANIFEST."""
        recorded = self._manifest.get("embedder") if self._manifest is not None else self._embedder
        return dict(recorded) if recorded else None

    # Recording and checking the embedder (vecgraph/embedders.py).
    use_embedder = embedders.use_embedder
    embed_query = embedders.embed_query
    query_embedder = embedders.query_embedder
    _text_query = embedders._text_query

    def __copy__(self):
        raise TypeError("a Graph cannot be copied: it owns its C++ engine; build a new one and add the same data")

    def __deepcopy__(self, memo: dict):
        self.__copy__()

    def __reduce__(self):
        raise TypeError("a Graph cannot be pickled")

    def __repr__(self) -> str:
        where = f", path={self._path!r}" if self._path else ""
        if self._read_only:
            where += ", read_only=True"
        return f"Graph(dim={self.dim}, metric={self.metric!r}, nodes={len(self)}, edges={self.count_edges}{where})"

    # ---------------------------------------------------------------- writes

    def add_nodes(
        self,
        keys: Sequence[Key],
        vectors: Any,
        *,
        labels: Union[str, Sequence[str], None] = None,
        texts: Optional[Sequence[str]] = None,
        tenants: Union[str, Sequence[str], None] = None,
        ts: Timestamps = None,
        props: Optional[Sequence[Optional[dict]]] = None,
    ) -> None:
        """Add a batch of nodes. All or nothing: on any error but StorageError the graph is unchanged.

        Args:
            keys: n unique keys, each a str (kept byte for byte: NFC and NFD spellings are
                different keys) or an int in the int64 range.
            vectors: (n, dim) array-like of real numbers, converted to float32.
            labels: one label for all rows, or n labels (default "").
            texts: a list of n texts (default ""; a bare str is refused, not copied to every row).
            tenants: one tenant for all rows, or n tenants (default "").
            ts: one timestamp or n timestamps: int64 microseconds since the epoch, datetimes
                (naive: UTC), dates (midnight UTC) or a datetime64 array (default 0).
            props: n items, each a JSON-serializable dict or None (no props for that row),
                stored as JSON text: they come back as JSON reads them (``{1: (2, 3)}`` as
                ``{"1": [2, 3]}``; datetimes and dates as int microseconds since the epoch).

            The default of a column is what the whole argument left as None gives every row.
            Inside a list of labels, texts, tenants or timestamps, None is no value: it is
            refused (TypeError naming the row), so a row meant for a tenant never lands in the
            default tenant ""; write "" (or 0) for the default.

        Raises:
            DimensionMismatchError: vectors of the wrong length.
            DuplicateKeyError: a key already in the graph or repeated in the batch.
            InvalidArgumentError: NaN or inf in a vector, an all-zero vector under "cos",
                props that are not JSON, props giving a filterable property (see
                :class:`Graph`) a value of another type than the one declared (the message
                names the row, its key, the property and both types); on a folder graph, a
                batch whose WAL record would pass 1 GiB (split it: nothing is written and the
                graph stays writable).
            ReadOnlyError: the graph is closed, or read-only after a failed WAL write or fsync
                (nothing was written).
            StorageError: on a folder graph, the WAL write or fsync failed: the graph turns
                read-only and this write may or may not be kept (see :meth:`open`).
            TypeError / ValueError: keys, columns or arrays of the wrong type or length; an item
                of labels, texts or tenants that is not a str, None included, or a timestamp that
                is None (TypeError naming the row and what came).
        """
        _release_after_batch(self._write_nodes(self._engine.add_nodes, keys, vectors, labels, texts, tenants, ts, props))

    def _write_nodes(self, write, keys, vectors, labels, texts, tenants, ts, props, vectors_required=True) -> int:
        # Checks and converts the columns of add_nodes / upsert_nodes / update_nodes, calls the
        # core's `write` and keeps the BM25 and entity indexes in step; returns the batch's size.
        # An upsert without tenants keeps the tenants of keys already in the graph, and an update
        # every column it is not given: the BM25 index then takes the nodes' columns as the write
        # left them.
        self._check_writable()
        keys, matrix, labels, tenants, ts, texts, props = _node_columns(keys, vectors, labels, texts, tenants, ts,
                                                                        props, self._filterable, vectors_required)
        n = len(keys)
        add = write == self._engine.add_nodes
        if add and not (texts and any(texts)) and self._entities is None:
            write(keys, matrix, labels, tenants, ts, texts, props)  # nothing for the text index
            return n
        with self._text_lock:
            write(keys, matrix, labels, tenants, ts, texts, props)
            columns = None  # the nodes' text columns as the write left them, read once
            if add or (write == self._engine.upsert_nodes and tenants is not None):
                columns = (texts or [""] * n, tenants if tenants is not None else [""] * n, labels, ts)
            if self._text is not None and (not add or (texts and any(texts))):
                columns = columns or self._engine.text_columns(keys)
                self._write_text(lambda index: index.upsert(keys, columns[0], tenants=columns[1], labels=columns[2],
                                                            ts=columns[3], lsn=self._engine.last_lsn()))
            if self._entities is not None:
                tenants_now = (columns or self._engine.text_columns(keys))[1]
                self._write_entities(lambda index: index.add_keys(keys, tenants_now))
        return n

    def add_edges(
        self,
        src: Sequence[Key],
        dst: Sequence[Key],
        *,
        rels: Union[str, Sequence[str], None] = None,
        weights: Any = None,
        ts: Timestamps = None,
        texts: Optional[Sequence[str]] = None,
        props: Optional[Sequence[Optional[dict]]] = None,
        vectors: Any = None,
    ) -> None:
        """Add a batch of directed edges ``src[i] --rels[i]--> dst[i]``. All or nothing.

        Self-loops and parallel edges are allowed.

        Args:
            src, dst: n keys of nodes already in the graph. A 1-d NumPy integer array is read
                from its buffer, with no Python int per key: the fast form for large batches.
            rels: one relation type for all rows, or n of them (default ""); a list that repeats
                a few names is converted once per distinct name.
            weights: one weight for every edge, or n of them; finite in float32 (default 1.0).
                A hub expands its heaviest edges first.
            ts: one timestamp or n timestamps, as for :meth:`add_nodes` (default 0).
            texts: a list of n texts (default ""; a bare str is refused). props: n items, each a
                JSON-serializable dict or None (no props for that edge), stored as JSON text as
                for :meth:`add_nodes`.
            vectors: optional (n, dim) edge vectors, stored as int8 like node vectors.

            None inside a list of rels, texts or timestamps is refused, as for :meth:`add_nodes`;
            the whole argument None gives every edge the default.

        Raises:
            NotFoundError: an endpoint that is not a node.
            InvalidArgumentError: a NaN or infinite weight, a bad edge vector; on a folder
                graph, a batch whose WAL record would pass 1 GiB (nothing is written).
            DimensionMismatchError: edge vectors of the wrong length.
            ReadOnlyError: the graph is closed, or read-only after a failed WAL write or fsync
                (nothing was written).
            StorageError: on a folder graph, the WAL write or fsync failed: the graph turns
                read-only and this write may or may not be kept (see :meth:`open`).
            TypeError: an item of rels or texts that is not a str, None included, or a timestamp
                that is None (the message names the row and what came).
        """
        self._check_writable()
        columns = _edge_columns(src, dst, rels, weights, ts, texts, props, vectors)
        self._engine.add_edges(*columns)
        _release_after_batch(len(columns[0]))

    def upsert_nodes(
        self,
        keys: Sequence[Key],
        vectors: Any,
        *,
        labels: Union[str, Sequence[str], None] = None,
        texts: Optional[Sequence[str]] = None,
        tenants: Union[str, Sequence[str], None] = None,
        ts: Timestamps = None,
        props: Optional[Sequence[Optional[dict]]] = None,
    ) -> None:
        """Add new keys and replace existing ones: label, ts, text, props and vector are all
        replaced (omitted columns take their defaults); edges and aliases stay. All or nothing.

        The tenant is replaced only when ``tenants`` is given: without it a node already in
        the graph keeps its tenant (a new one gets ``""``), so an upsert never moves a node out
        of its tenant's filters or :meth:`delete_tenant` unasked. To change some columns and
        keep the others, use :meth:`update_nodes`.

        Arguments and errors as :meth:`add_nodes`, except that a key already in the graph is
        not an error (a key repeated within the batch still is).
        """
        _release_after_batch(self._write_nodes(self._engine.upsert_nodes, keys, vectors, labels, texts, tenants, ts, props))

    def update_nodes(
        self,
        keys: Sequence[Key],
        *,
        vectors: Any = None,
        labels: Union[str, Sequence[str], None] = None,
        texts: Optional[Sequence[str]] = None,
        tenants: Union[str, Sequence[str], None] = None,
        ts: Timestamps = None,
        props: Optional[Sequence[Optional[dict]]] = None,
    ) -> None:
        """Change only the given columns of nodes already in the graph; every column left
        ``None`` keeps each node's value (its vector byte for byte, not re-quantized), and
        edges and aliases stay. All or nothing. A batch that keeps the vectors does not
        re-insert the nodes into the HNSW index.

        Args:
            keys: n unique keys of nodes in the graph.
            vectors: None, or (n, dim) array-like of real numbers (converted to float32).
            labels, tenants: None, one str for all rows, or n str.
            texts: None, or a list of n texts. props: None, or n JSON-serializable dicts or
                None (None: the node's props are cleared), as for :meth:`add_nodes`.
            ts: None, one timestamp or n timestamps, as for :meth:`add_nodes`.

        Raises:
            NotFoundError: a key not in the graph (nothing changes; :meth:`upsert_nodes` adds).
            DuplicateKeyError: a key repeated within the batch.
            DimensionMismatchError, InvalidArgumentError, ReadOnlyError, StorageError,
            TypeError / ValueError: as for :meth:`add_nodes`.

        Example:
            >>> g.update_nodes(["alice"], texts=["Alice, staff engineer"])  # doctest: +SKIP
        """
        _release_after_batch(self._write_nodes(self._engine.update_nodes, keys, vectors, labels, texts, tenants, ts,
                                               props, vectors_required=False))

    def delete_nodes(self, keys: Sequence[Key], *, missing_ok: bool = False) -> int:
        """Delete nodes and every edge at them; they are never returned again. A deleted key
        can be added again later, as a new node. All or nothing.

        Returns:
            The number of nodes deleted (a key repeated in ``keys`` counts once).

        Raises:
            NotFoundError: a key not in the graph (unless ``missing_ok``).
            ReadOnlyError, StorageError: as for :meth:`add_nodes`.
        """
        self._check_writable()
        keys = _keys(keys, "keys")
        with self._text_lock:
            deleted = self._engine.delete_nodes(keys, _flag(missing_ok, "missing_ok"))
            if deleted and self._text is not None:
                self._write_text(lambda index: index.delete(keys, lsn=self._engine.last_lsn()))
            if deleted and self._entities is not None:
                self._write_entities(lambda index: index.forget(keys))
        return deleted

    def delete_edges(
        self,
        src: Sequence[Key],
        dst: Sequence[Key],
        *,
        rels: Union[str, Sequence[str], None] = None,
        missing_ok: bool = False,
    ) -> int:
        """Delete every edge ``src[i] -> dst[i]`` (only those of relation ``rels[i]`` when rels
        is given, one str for all pairs or n of them; parallel edges all go). All or nothing.

        Returns:
            The number of edges deleted.

        Raises:
            NotFoundError: a pair with no such edge (unless ``missing_ok``).
            ReadOnlyError, StorageError: as for :meth:`add_nodes`.
            TypeError: an item of rels that is not a str, None included (rels=None, not
                ``[None]``, deletes the edges of every relation).
        """
        self._check_writable()
        src = _keys(src, "src", int_arrays=True)
        dst = _keys(dst, "dst", int_arrays=True)
        if len(src) != len(dst):
            raise ValueError(f"src has {len(src)} keys, dst has {len(dst)}")
        rels = _strings(rels, "rels", len(src), whole_none="deletes the edges of every relation")
        return self._engine.delete_edges(src, dst, rels, _flag(missing_ok, "missing_ok"))

    def delete_tenant(self, tenant: str, *, allow_default_tenant: bool = False) -> int:
        """Delete every node of ``tenant`` and their edges, as one logged write.

        Nodes added without ``tenants=`` belong to the default tenant ``""``; deleting it takes
        ``allow_default_tenant=True``, so that an empty string cannot wipe them by accident.

        Returns:
            The number of nodes deleted (0 for a tenant the graph does not have).

        Raises:
            InvalidArgumentError: ``tenant`` is "" without ``allow_default_tenant=True``.
            ReadOnlyError, StorageError: as for :meth:`add_nodes`.
        """
        self._check_writable()
        if not isinstance(tenant, str):
            raise TypeError(f"tenant must be str, got {type(tenant).__name__}")
        allow_default_tenant = _flag(allow_default_tenant, "allow_default_tenant")
        if tenant == "" and not allow_default_tenant:
            raise InvalidArgumentError(
                'tenant "" is the default tenant of every node added without tenants=; '
                "pass allow_default_tenant=True to delete all of them")
        with self._text_lock:
            deleted = self._engine.delete_tenant(tenant)
            if deleted and self._text is not None:
                self._write_text(lambda index: index.delete_tenant(tenant, lsn=self._engine.last_lsn()))
            if deleted and self._entities is not None:
                self._write_entities(lambda index: index.forget_tenant(tenant))
        return deleted

    # ---------------------------------------------------------------- names and text

    # Other names of a node, for the entity channel (vecgraph/entities.py).
    add_aliases = entities.add_aliases
    aliases = entities.aliases

    # The BM25 and entity indexes kept beside the engine (vecgraph/side_indexes.py).
    _text_index = side_indexes.text_index
    _write_text = side_indexes.write_text
    _write_entities = side_indexes.write_entities
    _bm25 = side_indexes.bm25
    _entity_index = side_indexes.entity_index

    # ---------------------------------------------------------------- search

    _search_args = staticmethod(arguments._search_args)  # checked search arguments as the core takes them

    def search(
        self,
        query: Any,
        k: int = 10,
        *,
        seeds: int = 8,
        hops: int = 2,
        max_visited: int = 2000,
        rels: Optional[Sequence[str]] = None,
        direction: str = "both",
        labels: Optional[Sequence[str]] = None,
        tenants: Optional[Sequence[str]] = None,
        ts_min: Optional[int] = None,
        ts_max: Optional[int] = None,
        max_fanout: int = 256,
        hop_decay: float = 1.0,
        exact: bool = False,
        ef: Optional[int] = None,
        where: Optional[dict] = None,
        since: Any = None,
        until: Any = None,
        exclude_keys: Optional[Iterable[Key]] = None,
        strict: bool = False,
        embedder: Any = None,
    ) -> SearchResult:
        """Graph-guided vector search.

        1. Seeds: the ``seeds`` nodes most similar to ``query`` that pass the filters, from
           the HNSW index (``exact=True``: a brute-force scan).
        2. Expansion: breadth-first from the seeds, best seed first, over edges whose rel is in
           ``rels`` (None: any) in ``direction``, up to ``hops`` levels; each node is visited
           once, through the first edge that reaches it; a node expands at most its first
           ``max_fanout`` allowed edges by (weight desc, insertion order); expansion stops when
           ``max_visited`` nodes (seeds included) are visited. The filters apply to every node
           reached: a node they reject is neither scored nor walked through.
        3. Scoring: every visited node is scored against the query with the int8 kernels,
           decayed by d = ``hop_decay ** hop`` (score * d, or score / d when negative, so a
           decay below 1 always moves farther nodes down).
        4. Result: the top ``k`` by score (ties: insertion order), never padded.

        Args:
            query: (dim,) array-like of real numbers, or a str: text embedded with ``embedder``
                (default: the graph's, :meth:`query_embedder`).
            k: results wanted (>= 1). seeds: seed nodes (>= 1). hops: levels (>= 0).
            max_visited: cap on visited nodes (>= 1). max_fanout: cap on edges per node (>= 1).
            rels: relation types to follow (None: all; unknown names match nothing).
            direction: "out", "in" or "both".
            labels, tenants: admit only nodes with these labels / tenants (None: all). When
                they admit at most ``filter_scan_max_nodes`` live nodes (see :class:`Graph`),
                the seeds are those nodes' exact best, found by scanning them instead of
                walking HNSW past the nodes the filter rejects. rels, labels and tenants take
                one str or a list of str: None inside the list is refused (TypeError naming
                its position), only the whole argument None means no filter; the default
                tenant and label are ``""``.
            ts_min, ts_max: admit only nodes with ts in [ts_min, ts_max] (microseconds).
            since, until: the same window as datetimes (naive: UTC), dates or microseconds,
                both ends included; a date is its midnight UTC, so ``until=date(2024, 1, 1)``
                ends as that day begins.
            where: conditions on the filterable properties declared when the graph was created,
                all of which must hold: ``{"status": "current"}`` (equality),
                ``{"status": ["a", "b"]}`` (membership: any iterable that is not a str, such as
                a list, set, array or generator), ``{"year": {">=": 2020, "<": 2024}}``
                (ranges; operators ``==``, ``in``, ``>``, ``>=``, ``<``, ``<=``). Evaluated inside
                the seed search and the traversal, like labels and tenants, so a filter that
                admits few nodes still returns up to ``k`` of them. A node without the property
                (or with None for it) never passes.
            hop_decay: score multiplier per hop (> 0; 1.0: none).
            exact: brute-force seeds instead of HNSW.
            ef: HNSW beam width at search (None or 0: the graph's ``expansion_search``; raised
                to ``seeds`` when smaller). A wider beam finds more of the exact nearest seeds
                (higher recall against ``exact=True``) and takes longer.
            exclude_keys: keys (a list, set or array) that the search neither returns nor
                walks through, as if a filter rejected them (leave-one-out evaluation, "more
                like this" without the item itself); keys not in the graph are ignored.
            strict: a name in ``rels``, ``labels`` or ``tenants`` that the graph has never held
                matches nothing; with ``strict=True`` it raises InvalidArgumentError instead
                (see :meth:`unknown_names`).

        Returns:
            SearchResult with keys, scores (float32), hops (int32) and paths, best first.
            ``stats()`` counts searches by how their seeds were found (seed_full_scans,
            seed_list_scans, seed_hnsw_searches, seed_scan_fallbacks).

        Raises:
            DimensionMismatchError: query of the wrong length.
            InvalidArgumentError: k, seeds, max_visited or max_fanout < 1, hops < 0, an unknown
                direction, hop_decay <= 0, ts_min after ts_max (an empty time window), NaN/inf in
                the query, an all-zero query under "cos", ``where`` on a property that was not
                declared filterable (the message names the declared ones) or with a value of
                the wrong type.
            TypeError: arguments of the wrong type; an item of rels, labels or tenants that is
                not a str, None included (the message names its position).
        """
        if strict is not False:
            self._check_known_names(strict, rels, labels, tenants)
        args = self._search_args(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                 ts_min, ts_max, hop_decay, exact, ef, since, until)
        # where (and extra_seeds) go positionally: pybind11 takes keyword arguments a slow way
        # (about 5 µs a call).
        if embedder is not None or isinstance(query, str):
            query = self._text_query(query, embedder)
        elif isinstance(query, (list, tuple)) and query and isinstance(query[0], str):
            raise TypeError("search takes one query, a vector of numbers or a text as a str, got a list of str "
                            "(search_batch takes a list of texts)")
        if exclude_keys is None:
            return SearchResult(self._engine.search(_float_array(query, "query", 1), *args,
                                                    _where(where, self._filterable)), self._engine)
        return SearchResult(self._engine.search(_float_array(query, "query", 1), *args, _where(where, self._filterable),
                                                None, _exclude_keys(exclude_keys)), self._engine)

    def search_batch(
        self,
        queries: Any,
        k: int = 10,
        *,
        seeds: int = 8,
        hops: int = 2,
        max_visited: int = 2000,
        rels: Optional[Sequence[str]] = None,
        direction: str = "both",
        labels: Optional[Sequence[str]] = None,
        tenants: Optional[Sequence[str]] = None,
        ts_min: Optional[int] = None,
        ts_max: Optional[int] = None,
        max_fanout: int = 256,
        hop_decay: float = 1.0,
        exact: bool = False,
        ef: Optional[int] = None,
        threads: Optional[int] = None,
        where: Optional[dict] = None,
        since: Any = None,
        until: Any = None,
        exclude_keys: Optional[Iterable[Key]] = None,
        strict: bool = False,
        embedder: Any = None,
    ) -> list[SearchResult]:
        """:meth:`search` for each row of an (n, dim) array of queries, on ``threads`` threads
        (default: all cores), with the GIL released. Returns n results in query order.
        Every query is checked before any runs; Ctrl-C stops between chunks of 1024 queries.

        Args:
            queries: (n, dim) array of numbers, converted to float32, or a list of str embedded
                as :meth:`search` embeds one.
            threads: worker threads (>= 1; None: all cores). The other arguments: as :meth:`search`
                (``exclude_keys`` applies to every query).

        Raises:
            DimensionMismatchError: rows that are not of the graph's dim.
            InvalidArgumentError: NaN or inf in a query (naming its row), or a bad search argument.
            TypeError / ValueError: ``queries`` not a numeric 2-d array; arguments of the wrong type
                (None inside rels, labels or tenants included, as for :meth:`search`).
        """
        if strict is not False:
            self._check_known_names(strict, rels, labels, tenants)
        args = self._search_args(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                 ts_min, ts_max, hop_decay, exact, ef, since, until)
        threads = 0 if threads is None else _threads(threads, "threads")
        queries = self._text_query(queries, embedder)
        raw = self._engine.search_batch(_float_array(queries, "queries", 2), *args, threads,
                                        _where(where, self._filterable), _exclude_keys(exclude_keys))
        return [SearchResult(r, self._engine) for r in raw]

    # Hybrid retrieval (vecgraph/hybrid.py): channels, fusion and their arguments live there.
    hybrid_search = hybrid.hybrid_search
    hybrid_search_batch = hybrid.hybrid_search_batch

    # Awaitable searches and writes for asyncio (vecgraph/aio.py), on a thread pool.
    asearch, ahybrid_search, asearch_batch = aio.asearch, aio.ahybrid_search, aio.asearch_batch
    aadd_nodes, aadd_edges, aupsert_nodes = aio.aadd_nodes, aio.aadd_edges, aio.aupsert_nodes
    aupdate_nodes, adelete_nodes, adelete_edges = aio.aupdate_nodes, aio.adelete_nodes, aio.adelete_edges

    # ---------------------------------------------------------------- reads

    def unknown_names(self, kind: str, names: Union[str, Sequence[str]]) -> list[str]:
        """The names of ``names`` that the graph has never held as a ``kind`` ("labels",
        "tenants" or "rels"), in the order given: a filter naming them matches nothing.

        Raises:
            InvalidArgumentError: another ``kind``. TypeError: ``names`` not a str or list of str
                (an item that is None included, naming its position).
        """
        kind = _choice(kind, "kind", ("labels", "tenants", "rels"))
        return list(self._engine.unknown_names(kind, _names(names, kind) or []))

    def _check_known_names(self, strict: Any, rels: Any, labels: Any, tenants: Any) -> None:
        """InvalidArgumentError (``strict=True``) naming the first filter name the graph never held."""
        if not _flag(strict, "strict"):
            return
        for kind, names in (("rels", rels), ("labels", labels), ("tenants", tenants)):
            unknown = self.unknown_names(kind, names) if names is not None else []
            if unknown:
                raise InvalidArgumentError(
                    f"{kind} names {', '.join(map(repr, unknown))}, which the graph has never held: the filter "
                    "would match nothing through them (strict=True; without it, they match nothing)")

    def keys(
        self,
        *,
        labels: Optional[Sequence[str]] = None,
        tenants: Optional[Sequence[str]] = None,
        where: Optional[dict] = None,
        since: Any = None,
        until: Any = None,
    ) -> list[Key]:
        """The keys of the live nodes that pass the filters, in insertion order (of the slots
        the nodes hold: an upserted node keeps its place).

        Args:
            labels, tenants, where, since, until: the filters of :meth:`search`, with the
                same meaning (None: no condition). With labels or tenants, only those names'
                member lists are read; otherwise every node is checked.

        Returns:
            list of keys (str or int).

        Raises:
            InvalidArgumentError, TypeError: bad filters, as for :meth:`search`.
        """
        args = self._search_args(1, 1, 0, 1, 1, "both", None, labels, tenants, None, None, 1.0, False, None,
                                 since, until)
        conditions = _where(where, self._filterable)
        found = self._engine.admitted_keys(args[7], args[8], args[9], args[10], conditions, len(self) + 1)
        return list(found) if found is not None else []

    nodes = listing.nodes  # the nodes that pass filters, as an Arrow table (vecgraph/listing.py)

    def neighbors(self, key: Key, rels: Optional[Sequence[str]] = None, direction: str = "out") -> list[Edge]:
        """Edges at ``key`` in traversal order (weight desc, insertion order).

        Args:
            key: a node key. rels: relation types to keep (None: all; None inside the list is
                refused with TypeError, as for :meth:`search`).
            direction: "out" (edges from key), "in" (edges to key) or "both".

        Raises:
            NotFoundError: key is not in the graph.
        """
        direction = _choice(direction, "direction", _DIRECTIONS)
        return [Edge(*e) for e in self._engine.neighbors(key, direction, _names(rels, "rels"))]

    def get_node(self, key: Key, *, vector: bool = True) -> dict:
        """A node's fields: key, label, tenant, ts (int microseconds since the epoch, as stored
        whatever form was written: ``datetime(1970, 1, 1, tzinfo=timezone.utc) +
        timedelta(microseconds=ts)`` is its UTC datetime), text, props (dict or None), aliases
        (list of str, see :meth:`add_aliases`) and, with ``vector`` (the default), vector
        (float32 (dim,), dequantized: codes * scale); ``vector=False`` leaves it out.

        Raises:
            NotFoundError: key is not in the graph.
            TypeError: ``vector`` is not a bool.
        """
        node = self._engine.get_node(key, _flag(vector, "vector"))
        node["props"] = json.loads(node["props"]) if node["props"] else None
        node["aliases"] = node["aliases"].split(ALIAS_SEPARATOR) if node["aliases"] else []
        return node

    def quantized(self, keys: Sequence[Key]) -> tuple[np.ndarray, np.ndarray]:
        """Stored int8 codes (n, dim) and float32 scales (n,) of the given nodes, in the order
        of ``keys`` (a stored vector is about ``codes * scale``).

        Raises:
            NotFoundError: a key that is not a node of the graph.
            TypeError: ``keys`` not a sequence of str / int keys.
        """
        return self._engine.node_codes(_keys(keys, "keys"))

    def stats(self) -> dict:
        """Counts (nodes, edges, labels, tenants, rels: the label, tenant and rel names the
        graph has interned, including names no live node or edge uses any more, until a reopen
        from a later checkpoint drops them), configuration, the kernel ISA, and
        memory held by each structure in bytes (vector_bytes, csr_bytes, hnsw_bytes, key_bytes);
        ``index_pending``: nodes waiting for their HNSW insert (see :meth:`open`);
        ``index_relinked``: HNSW members re-linked since open because inserts running side by
        side (``threads`` > 1, or a background pass beside writes) had left them with no
        in-link, so that no search could reach them; ``full_scan_max_nodes`` (see
        :class:`Graph`); ``filter_scan_max_nodes``: the filter scan limit in force at the
        graph's current size (the number "auto" stands for); ``member_list_bytes``: the per-label and per-tenant member lists;
        ``seed_full_scans``, ``seed_list_scans``, ``seed_hnsw_searches``: searches since the
        graph was made or opened whose seeds came from an exact scan of every node (``exact=True``
        or a small graph), from a scan of a selective label / tenant filter's member lists, or
        from HNSW; ``seed_scan_fallbacks``: those of the HNSW searches whose walk gave up for
        an exact scan of every node because their filter admitted too few nodes (see
        ``filter_scan_max_nodes``; counted there, not in seed_full_scans)."""
        return dict(self._engine.stats(), full_scan_max_nodes=self._engine.full_scan_max_nodes,
                    filter_scan_max_nodes=self._engine.filter_scan_limit)

    def wait_for_indexing(self) -> None:
        """Waits until every node is in the HNSW seed index (see ``background_indexing`` of
        :meth:`open`); returns at once when none waits.

        A background pass that failed (out of memory) is reported by one call; the next call
        (or entering :meth:`deferred_indexing`) runs it again over the nodes it did not reach
        and waits for that, as it does for the nodes of a :meth:`deferred_indexing` block whose
        insert failed. Until then those nodes are found by an exact scan.

        Raises:
            Error: the background pass failed (or failed again when run again).
            ReadOnlyError: a folder graph inherited by a forked process (the pass runs in the
                process that opened it).
        """
        self._check_not_inherited()
        self._engine.wait_for_indexing()


# The public methods whose code lives in the module named for their concern (bound in the
# class body above) are Graph's own: named so in signatures, tracebacks, pickles and TypeError
# messages ("Graph.hybrid_search() got an unexpected keyword argument ...").
for _name, _member in list(vars(Graph).items()):
    _function = getattr(_member, "__func__", _member)  # open is a classmethod
    if not _name.startswith("_") and inspect.isfunction(_function) and _function.__module__ != __name__:
        _function.__name__, _function.__qualname__, _function.__module__ = _name, f"Graph.{_name}", __name__
del _name, _member, _function
