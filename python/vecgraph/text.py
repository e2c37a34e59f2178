"""The text channel: a BM25 index of node and edge texts.

:func:`tokenize` (:mod:`vecgraph.tokenizer`: English, CJK and identifier-heavy text) turns
text into the terms both documents and queries are indexed by; :class:`TextIndex` keeps
documents (node or edge texts with their key, tenant, label and ts) in a tantivy index (a
full-text search library: incremental adds and deletes, top-k by block-max WAND) and ranks them
by Okapi BM25 (k1 = 1.2, b = 0.75). Its arguments are checked and encoded by
:mod:`vecgraph.text_checks`; a search reads the ranking through :mod:`vecgraph.text_pages`.

>>> tokenize("Widget A7-Pro costs $99 (see ERR_0x9941)")
['widget', 'a7-pro', 'a7', 'pro', 'costs', '99', 'see', 'err_0x9941', 'err', '0x9941']
>>> ix = TextIndex()
>>> ix.upsert(["a7", "c9"], ["Widget A7-Pro costs 99 dollars", "Widget C9-Max costs 149 dollars"], lsn=1)
2
>>> [key for key, score in ix.search("How much is the A7-Pro?")]
['a7']
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Callable, Optional, Union

from .errors import (
    CorruptionError,
    DuplicateKeyError,
    Error,
    InvalidArgumentError,
    ReadOnlyError,
    StorageError,
)
from .text_checks import (
    _INT64_MAX,
    _INT64_MIN,
    _KINDS,
    _check_int,
    _check_kind,
    _check_unicode,
    _column_of_str,
    _column_of_ts,
    _decode_doc_key,
    _decode_key,
    _doc_key,
    _encode_key,
    _encode_keys,
    _filter_names,
    _chunks,
    _rebuild_row,
    _term,
)
from . import text_files
from .text_delta import _delta_doc, _marker, delta_rows, idf_boosts
from .text_files import _IO_ERROR, _call, _is_panic, _progress_bar, _write
from .text_pages import MaxRowsReached, _key_order, _many_flags, _top_admitted
from .tokenizer import STOPWORDS, TOKENIZER_VERSION, normalize, tokenize  # noqa: F401 (normalize: vecgraph.text's name too)

__all__ = ["tokenize", "TextIndex", "MaxRowsReached", "STOPWORDS", "TOKENIZER_VERSION", "SCHEMA_VERSION"]

Key = Union[str, int]

SCHEMA_VERSION = text_files.SCHEMA_VERSION
"""Version of the layout of a :class:`TextIndex` folder (fields and header file)."""

# ------------------------------------------------------------------------------------------ index

# Folder of a TextIndex (SCHEMA_VERSION 3):
#   vecgraph-text.json   {"format": "vecgraph-text", "schema_version": 3, "tokenizer": 2,
#                         "lsn": N}: written (temporary file, then rename) after each commit of
#                         the tantivy index, so N is the LSN of the last write the committed
#                         index holds. close() adds "files": {name: [bytes, crc32]} of every
#                         file of the closed index, checked by the next open (a damaged file
#                         raises CorruptionError there instead of failing a search later);
#                         open drops it again before writing.
#   tantivy's own files  (meta.json and the segments): one document per (kind, key) that has
#                         terms, with the fields (only `key` stored: a search reads it for each
#                         row it returns, and more stored bytes per document made that 1.7x
#                         slower, measured)
#     node / edge   the token stream (tokenize(text) joined by single spaces), indexed with term
#                   frequencies through a whitespace tokenizer, so the indexed terms are exactly
#                   tokenize()'s. A node document fills `node`, an edge document `edge`: each
#                   kind has its own document frequencies and average length, and a search of
#                   one kind never visits the other.
#     key           "<n|e><i|s>:<key>" (e.g. "ni:42", "ns:wn:n:123"), stored: what a search
#                   returns. key_term: the same as a raw term (its digest past 1 KiB, see
#                   _term), the document's identity (replace and delete by term).
#     kind          "node" / "edge", raw (counts per kind).
#     tenant, label raw terms (filters, delete_tenant; digests past 1 KiB).
#     ts            int64, indexed and fast (time window).
#   BM25 statistics: document frequencies are per field, so per kind; the average length is
#   tantivy's, over all documents of the index (a graph indexes node texts only).
#
# Writes go to tantivy's IndexWriter at once and to the delta: the documents written since the
# last publish (at most _DELTA_MAX), kept in memory with their term counts. A search reads the
# published index (skipping the keys the delta holds) and the delta beside it, scored with the
# published statistics plus the delta's, so a write is searchable without a commit (a commit
# writes and fsyncs segment files: 5-10 ms). The writes are published (commit, then the reader
# is reloaded) when the delta is full, by count, delete_tenant, flush, optimize or close, and
# by a search after a write the delta cannot stand for. A crash loses what was not published;
# the owner sees it as an lsn behind its own and rebuilds (see Graph).

_WRITER_HEAP_BYTES = 64 << 20   # tantivy's indexing buffer; it needs >= 15 MB per thread
_WRITER_THREADS = 1             # searches keep the other core
_REBUILD_CHUNK = 4096
_DELTA_MAX = 256               # documents written since the last publish that searches read beside it


def _schema() -> Any:
    import tantivy

    builder = tantivy.SchemaBuilder()
    for kind in _KINDS:
        builder.add_text_field(kind, stored=False, tokenizer_name=_WHITESPACE, index_option="freq")
    builder.add_text_field("key", stored=True, tokenizer_name="raw", index_option="basic")
    for name in ("key_term", "kind", "tenant", "label"):
        builder.add_text_field(name, stored=False, tokenizer_name="raw", index_option="basic")
    builder.add_integer_field("ts", indexed=True, fast=True)
    return builder.build()


_WHITESPACE = "vecgraph_terms"


class TextIndex:
    """A BM25 index of node and edge texts (tantivy), with filters and a write LSN.

    ``TextIndex("folder/text")`` keeps the index in that folder (created if missing).
    ``TextIndex()`` is a scratch index for an in-memory graph, in a private temporary folder
    deleted by :meth:`close` or when the object is collected. Documents are keyed by
    ``(kind, key)``: ``kind`` is ``"node"`` or ``"edge"``, a key is a str or an int (never a
    bool; ``1`` and ``"1"`` are different keys). Each write records the caller's log sequence
    number (:attr:`lsn`), so the owner of the index knows which of its own writes the index
    holds after a crash.

    Ranking is Okapi BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25
    and Beyond", 2009) as tantivy computes it: k1 = 1.2, b = 0.75,
    idf = ln(1 + (N - n + 0.5) / (n + 0.5)) with N the documents of the index and n those
    holding the term in the searched kind's field, lengths normalised by the average over all
    documents (lengths past 40 terms are stored approximately, in one byte); top-k by
    block-max WAND, so a search reads only the postings that can still reach the top k.
    Deleted and replaced documents stay in the statistics until tantivy merges their segments
    away (as in Lucene), so scores drift a little from a fresh build after many updates.

    Visibility and durability: a write is visible to every search that starts after it
    returns. Writes are buffered and published in one tantivy commit (files written and
    fsynced, about 5-10 ms) by the first read that follows them: a search, :meth:`count`,
    :meth:`delete`, :meth:`delete_tenant`, :meth:`flush` or :meth:`close`. Searches with no
    write before them pay nothing. After a crash the folder holds the last published state and
    its :attr:`lsn`; the owner brings it forward (a graph rebuilds it from its own texts).

    Threads: any number of threads may search while one thread writes (a second writer waits
    for the first). A search reads one consistent state (tantivy searcher) for all its pages.
    An ``exclude`` callback must not write to the index. :meth:`close` must not run while
    another thread is inside a method.

    Errors: wrong Python types raise ``TypeError``, wrong lengths ``ValueError``, values
    outside their domain :class:`~vecgraph.errors.InvalidArgumentError`; a rejected write
    changes nothing (documents and lsn). A damaged folder raises
    :class:`~vecgraph.errors.CorruptionError`, an operating-system failure
    :class:`~vecgraph.errors.StorageError`, a write after :meth:`close`
    :class:`~vecgraph.errors.ReadOnlyError`.
    """

    def __init__(self, path: Optional[Union[str, os.PathLike]] = None, *, _copy_of: Optional[str] = None) -> None:
        """Opens (or creates) the index.

        Args:
            path: the index folder (created with its parents if missing; it must be empty or
                hold a vecgraph text index), or None for a scratch index in a private
                temporary folder deleted on close.

        Raises:
            CorruptionError: the folder holds something else, or a damaged index.
            StorageError: the folder cannot be created or opened, or another process writes
                to the index.
        """
        import tantivy

        self._tantivy = tantivy
        self._lock = threading.RLock()      # one writer at a time; publishing
        self._closed = False
        self._reset_on_open = False
        self._pending = False               # writes not yet published
        # (searcher, delta, added, count): the published state and what was written since,
        # swapped as one tuple so that a reader never pairs a new searcher with an old delta.
        # delta maps (kind, type(key), key) -> _DeltaDoc, or None for a key written without a
        # document (deleted, or a text without terms). added[:count]: (kind, _DeltaDoc) of every
        # document added since, the ones replaced or deleted since too (tantivy's BM25
        # statistics count them until a merge). searcher is None before open and after close.
        self._view: tuple = (None, {}, [], 0)
        self._stats: tuple = (None, {})     # (searcher, {kind: (N, avgdl)}) read from tantivy
        self._failed: Optional[str] = None  # a write that failed half-way (see _write)
        self._scratch: Optional[weakref.finalize] = None
        if path is None:
            self.path: Optional[str] = None
            try:
                folder = tempfile.mkdtemp(prefix="vecgraph-text-")
            except OSError as exc:
                raise StorageError(f"cannot create a temporary folder for a text index: {exc}") from exc
            self._scratch = weakref.finalize(self, shutil.rmtree, folder, True)
            self._folder = folder
            if _copy_of is not None:
                self._copy_files(_copy_of)
        else:
            if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
                raise TypeError(f"path must be a str, a path or None, got {type(path).__name__}")
            self.path = self._folder = os.path.abspath(os.fspath(path))
            if os.path.exists(self._folder) and not os.path.isdir(self._folder):
                raise CorruptionError(f"text index {self._folder} is a file, not an index folder")
            try:
                os.makedirs(self._folder, exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create text index folder {self._folder}: {exc}") from exc
        try:
            self._open()
        except BaseException:
            self._discard_scratch()
            raise

    @classmethod
    def copy_of(cls, path: Union[str, os.PathLike]) -> "TextIndex":
        """A scratch index (see ``TextIndex(None)``) that starts as a copy of the index in folder
        ``path``, which is only read (an index on a read-only filesystem, which tantivy cannot
        open in place: it takes its lock files even to read). The copy is checked as an open
        checks the folder.

        Raises:
            CorruptionError: ``path`` holds something else, or a damaged index.
            StorageError: ``path`` cannot be read, or the copy cannot be written.
        """
        return cls(None, _copy_of=os.path.abspath(os.fspath(path)))

    # The folder's files (vecgraph/text_files.py).
    _copy_files = text_files.copy_files
    _clear_folder = text_files.clear_folder
    _read_meta = text_files.read_meta
    _file_sums = text_files.file_sums
    _check_files = text_files.check_files
    _write_meta = text_files.write_meta

    def _open(self) -> None:
        tantivy = self._tantivy
        folder = self._folder
        try:
            entries = set(os.listdir(folder))
        except OSError as exc:
            raise StorageError(f"cannot list text index folder {folder}: {exc}") from exc
        meta: Optional[dict] = None
        if entries:
            meta = self._read_meta()
            if "meta.json" not in entries:
                raise CorruptionError(f"text index {folder}: tantivy's meta.json is missing; "
                                      "delete the folder and rebuild")
            if meta.get("files") is not None:
                self._check_files(meta["files"], entries)
            if meta["schema_version"] != SCHEMA_VERSION:
                # An index of another layout: tantivy cannot open it with this schema. Its files
                # go; the index starts empty (lsn 0, reset_on_open) for its owner to rebuild.
                self._clear_folder(entries)
                meta = {**meta, "lsn": 0}
        self._schema = _schema()
        try:
            self._index = _call(lambda: tantivy.Index(self._schema, path=folder, reuse=True), folder, "open")
        except ValueError as exc:
            if _IO_ERROR.search(str(exc)):  # the disk, not the index: no space, no permission, ...
                raise StorageError(f"cannot open text index {folder}: {exc}") from exc
            raise CorruptionError(f"text index {folder} is damaged or of another layout ({exc}); "
                                  "delete the folder and rebuild") from exc
        self._index.register_tokenizer(
            _WHITESPACE, tantivy.TextAnalyzerBuilder(tantivy.Tokenizer.whitespace()).build())
        try:
            self._writer = self._index.writer(heap_size=_WRITER_HEAP_BYTES, num_threads=_WRITER_THREADS)
        except ValueError as exc:
            raise StorageError(f"cannot write to text index {folder}: {exc} (is another process "
                               "writing to it?)") from exc
        try:
            # A commit killed before it published meta.json leaves files that no published
            # segment uses, among them a deletes file named by segment and opstamp; the next
            # commit from the published opstamp would write that name again and fail
            # ("FileAlreadyExists"). tantivy removes such files here, before any commit.
            self._writer.garbage_collect_files()
        except ValueError as exc:
            with contextlib.suppress(Exception):
                self._writer.wait_merging_threads()
            raise StorageError(f"text index {folder}: cannot remove files a killed commit left: {exc}") from exc
        try:
            self._start(meta)
        except BaseException:
            with contextlib.suppress(Exception):
                self._writer.wait_merging_threads()  # releases the writer lock
            raise

    def _delete_all(self, writer: Any) -> None:
        """Deletes every document (in the writer's next commit). Not delete_all_documents:
        after a commit that deleted documents, tantivy ignores the deletes that follow it
        (tantivy 0.27: a later delete_documents_by_term removes nothing)."""
        writer.delete_documents_by_query(self._tantivy.Query.all_query())

    def _start(self, meta: Optional[dict]) -> None:
        folder = self._folder
        self._index.config_reader("Manual")
        self._lsn = self._published_lsn = 0
        if meta is None:
            self._write_meta(0)
        elif meta["schema_version"] != SCHEMA_VERSION or meta["tokenizer"] != TOKENIZER_VERSION:
            self._reset_on_open = True
            self._commit(self._delete_all, 0)
        else:
            self._lsn = self._published_lsn = meta["lsn"]
            if meta.get("files") is not None:
                self._write_meta(self._lsn)  # the files change from here on
        _call(self._index.reload, folder, "open")
        self._searcher = self._index.searcher()
        self._view = (self._searcher, {}, [], 0)

    # -------------------------------------------------------------------------------- properties

    @property
    def lsn(self) -> int:
        """LSN of the last write (the ``lsn`` it was given); 0 for a new or cleared index.
        After reopening: the LSN of the last published write."""
        return self._lsn

    @property
    def reset_on_open(self) -> bool:
        """True when the folder held an index of another schema or tokenizer version, which was
        emptied on open (lsn 0): its owner should :meth:`rebuild` it."""
        return self._reset_on_open

    @property
    def closed(self) -> bool:
        return self._closed

    def __repr__(self) -> str:
        where = self.path or "temporary"
        state = "closed" if self._closed else f"lsn={self._lsn}"
        return f"TextIndex({where}, {state})"

    def __enter__(self) -> "TextIndex":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------- writes

    def upsert(
        self,
        keys: Sequence[Key],
        texts: Sequence[Optional[str]],
        *,
        tenants: Union[str, Sequence[Optional[str]], None] = None,
        labels: Union[str, Sequence[Optional[str]], None] = None,
        ts: Union[int, Sequence[int], None] = None,
        kind: str = "node",
        lsn: int,
    ) -> int:
        """Replaces the documents of ``keys``, then sets :attr:`lsn`.

        A key's old document (if any) is dropped and its new text indexed; an empty text (or
        None, or one that gives no terms, like ``"the"``) leaves the key without a document.

        Args:
            keys: n keys (str or int within int64, not bool), all different.
            texts: n texts (str or None).
            tenants, labels: one str for all rows or n str/None (default and None: ``""``).
            ts: one int or n ints, microseconds since the epoch (default 0), within int64.
            kind: ``"node"`` or ``"edge"``.
            lsn: the write's log sequence number, an int ``>=`` the current :attr:`lsn`.

        Returns:
            The number of documents stored (keys whose text gave terms).

        Raises:
            TypeError: a key that is not a str or int (the message names its row), a text,
                tenant or label that is not a str, ts that is not an int.
            ValueError: a column whose length is not ``len(keys)``.
            DuplicateKeyError: a key repeated in ``keys``.
            InvalidArgumentError: an unknown kind, an int key or ts outside int64, a bad lsn.
            ReadOnlyError: the index is closed.
        """
        keys_enc = _encode_keys(keys)
        n = len(keys_enc)
        text_list = _column_of_str(texts, "texts", n, broadcast=False)
        tenant_list = _column_of_str(tenants, "tenants", n)
        label_list = _column_of_str(labels, "labels", n)
        ts_list = _column_of_ts(ts, n)
        kind = _check_kind(kind)
        lsn = self._check_lsn(lsn)
        streams = [" ".join(tokenize(t)) if t else "" for t in text_list]
        docs = [(_doc_key(kind, enc), self._document(kind, _doc_key(kind, enc), stream, tenant, label, t))
                if stream else (_doc_key(kind, enc), None)
                for enc, stream, tenant, label, t in zip(keys_enc, streams, tenant_list, label_list, ts_list)]

        def apply(writer: Any) -> None:
            for key, doc in docs:
                writer.delete_documents_by_term("key_term", _term(key))
                if doc is not None:
                    writer.add_document(doc)
            self._delta_put(kind, {_marker(kind, key): _delta_doc(key, stream, tenant, label, t) if doc is not None else None
                             for (key, doc), stream, tenant, label, t in zip(docs, streams, tenant_list, label_list,
                                                                             ts_list)})

        self._write(apply, lsn)
        return sum(doc is not None for _, doc in docs)

    def delete(self, keys: Sequence[Key], *, kind: str = "node", lsn: int) -> int:
        """Removes the documents of ``keys`` (keys without one are ignored), then sets :attr:`lsn`.

        Args:
            keys: keys (str or int, not bool); repeats are allowed.
            kind: ``"node"`` or ``"edge"``.
            lsn: as in :meth:`upsert`.

        Returns:
            The number of documents removed.

        Raises:
            TypeError / InvalidArgumentError / ReadOnlyError: as :meth:`upsert`.
        """
        keys_enc = _encode_keys(keys, allow_repeats=True)
        kind = _check_kind(kind)
        lsn = self._check_lsn(lsn)
        doc_keys = list(dict.fromkeys(_doc_key(kind, enc) for enc in keys_enc))
        with self._lock:
            self._check_writable()
            # Counted without publishing: keys written since the last publish are in the delta,
            # the others are looked up in the published index.
            delta = self._view[1]
            markers = {key: _marker(kind, key) for key in doc_keys}
            removed = sum(delta[m] is not None for m in markers.values() if m in delta)
            unknown = [_term(key) for key, m in markers.items() if m not in delta]
            if unknown:
                removed += self._count_terms("key_term", unknown, publish=False)

            def apply(writer: Any) -> None:
                for key in doc_keys:
                    writer.delete_documents_by_term("key_term", _term(key))
                self._delta_put(kind, dict.fromkeys(markers.values()))

            self._write(apply, lsn)
        return removed

    def delete_tenant(self, tenant: str, *, lsn: int) -> int:
        """Removes every document (nodes and edges) of ``tenant``, then sets :attr:`lsn`.

        Returns:
            The number of documents removed.

        Raises:
            TypeError: ``tenant`` is not a str. InvalidArgumentError / ReadOnlyError: as
            :meth:`upsert`.
        """
        if not isinstance(tenant, str):
            raise TypeError(f"tenant must be a str, got {type(tenant).__name__}")
        lsn = self._check_lsn(lsn)
        with self._lock:
            self._check_writable()
            removed = self._count_terms("tenant", [_term(tenant)])
            self._write(lambda writer: writer.delete_documents_by_term("tenant", _term(tenant)), lsn)
            self._publish()  # the delta cannot stand for a deletion by tenant
        return removed

    def clear(self) -> None:
        """Removes every document and sets :attr:`lsn` to 0 (published at once).

        Raises:
            ReadOnlyError: the index is closed.
        """
        with self._lock:
            self._check_writable()
            self._publish()
            self._commit(self._delete_all, 0)

    def rebuild(self, items: Iterable[Sequence[Any]], lsn: int, *, progress: Optional[bool] = None) -> int:
        """Replaces the whole content by ``items`` in one commit, then sets :attr:`lsn`.

        Faster than :meth:`upsert` for many documents. On any error nothing changes.

        Args:
            items: an iterable of ``(key, text, tenant, label, ts)`` or
                ``(key, text, tenant, label, ts, kind)`` (kind ``"node"`` when absent);
                tenant/label None mean ``""``, ts None means 0. Items whose text gives no
                terms are skipped.
            lsn: the LSN the content corresponds to (any int >= 0: the index may go back).
            progress: show a tqdm bar on stderr; None shows one when stderr is a terminal and
                ``items`` has at least 10,000 entries (or no length).

        Returns:
            The number of documents stored.

        Raises:
            TypeError / ValueError / InvalidArgumentError: a malformed item (the message gives
                its position).
            DuplicateKeyError: two items with the same (kind, key).
            ReadOnlyError: the index is closed.
            StorageError: a write to disk failed (a full disk, an I/O error).
        """
        lsn = _check_int(lsn, "lsn")
        if lsn < 0:
            raise InvalidArgumentError(f"lsn must be >= 0, got {lsn}")
        if progress is not None and not isinstance(progress, bool):
            raise TypeError(f"progress must be True, False or None, got {type(progress).__name__}")
        total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
        bar = _progress_bar(progress, total)

        def rows() -> Iterator[tuple]:
            for chunk_start, chunk in _chunks(items, _REBUILD_CHUNK):
                for offset, item in enumerate(chunk):
                    kind, key_kind, key, tenant, label, ts, stream = _rebuild_row(item, chunk_start + offset)
                    yield kind, key_kind, key, stream, tenant, label, ts, f"items[{chunk_start + offset}]: "
                if bar is not None:
                    bar.update(len(chunk))

        return self._replace(rows(), lsn, bar)

    def _refill_nodes(self, keys: Sequence[Any], texts: Sequence[Any], tenants: Sequence[Any],
                      labels: Sequence[Any], ts: Sequence[int], lsn: int) -> int:
        """:meth:`rebuild` from node columns the graph has already checked (its own state):
        keys int or str, texts str or None, tenants and labels str or None, ts int. Skips
        rebuild's per-item checks, which cost as much as the tokenizing."""

        def rows() -> Iterator[tuple]:
            for key, text, tenant, label, t in zip(keys, texts, tenants, labels, ts):
                if text:
                    stream = " ".join(tokenize(text))
                    if stream:
                        yield "node", "i" if type(key) is int else "s", str(key), stream, tenant or "", label or "", t, ""

        return self._replace(rows(), lsn, None)

    def _replace(self, rows: Iterator[tuple], lsn: int, bar: Any) -> int:
        """Replaces the whole content by ``rows`` ((kind, key_kind, key, stream, tenant, label,
        ts, where): an empty stream is skipped, ``where`` prefixes errors) in one commit; on any
        error nothing changes. ``bar`` (a progress bar or None) is closed at the end."""
        stored = 0
        try:
            with self._lock:
                self._check_writable()
                self._publish()  # a failed rebuild rolls back to exactly the state before it
                writer = self._writer
                add = writer.add_document
                seen: set = set()
                try:
                    _write(lambda: self._delete_all(writer), self._where())
                    for kind, key_kind, key, stream, tenant, label, ts, where in rows:
                        doc_key = _doc_key(kind, (key_kind, key))
                        if doc_key in seen:
                            raise DuplicateKeyError(f"{where}{kind} key {_decode_key(key_kind, key)!r} appears twice")
                        seen.add(doc_key)
                        if stream:
                            document = self._document(kind, doc_key, stream, tenant, label, ts)
                            _write(lambda: add(document), self._where())  # noqa: B023 (called at once)
                            stored += 1
                    self._commit(None, lsn)
                except BaseException:
                    self._rollback()
                    raise
                self._reset_on_open = False
        finally:
            if bar is not None:
                bar.close()
        return stored

    def flush(self) -> None:
        """Publishes buffered writes now (one tantivy commit, fsynced), so that they survive a
        crash and the next search does not pay for it. Reads do this on their own.

        Raises:
            ReadOnlyError: the index is closed.
        """
        with self._lock:
            self._check_writable()
            self._publish()

    def optimize(self) -> None:
        """Publishes buffered writes and removes the files of merged-away segments.

        tantivy merges small segments in background threads as writes are published (its log
        merge policy), so an index written by many small writes stays close to one built at
        once; documents and :attr:`lsn` stay.

        Raises:
            ReadOnlyError: the index is closed.
        """
        with self._lock:
            self._check_writable()
            self._publish()
            try:
                self._writer.garbage_collect_files()
            except ValueError as exc:
                raise StorageError(f"text index {self._where()}: cannot remove old files: {exc}") from exc

    # -------------------------------------------------------------------------------- reads

    def search(
        self,
        text: str,
        k: int = 10,
        *,
        tenants: Union[str, Iterable[str], None] = None,
        labels: Union[str, Iterable[str], None] = None,
        ts_min: Optional[int] = None,
        ts_max: Optional[int] = None,
        kind: str = "node",
        exclude: Optional[Callable[[Key], bool]] = None,
        exclude_many: Optional[Callable[[list], Sequence[bool]]] = None,
        keys: Optional[Iterable[Key]] = None,
        statistics: Optional[tuple] = None,
        max_rows: Optional[int] = None,
    ) -> list[tuple[Key, float]]:
        """The ``k`` documents that best match ``text`` by BM25, best first.

        The query is tokenized like the documents (:func:`tokenize`) and matches documents
        holding any of its distinct terms; the score of a document is the sum of its BM25 term
        scores (positive; see the class docstring). Only the postings that can still reach the
        top k are read (block-max WAND), so a query of common words costs far less than one
        microsecond per matching document.

        Args:
            text: the query (str). No terms (empty, or only stopwords) -> ``[]``.
            k: results wanted, >= 1.
            tenants, labels: admit only documents of these tenants / labels (a str or an
                iterable of str; None: all). Applied inside the search together with the
                match, so a filter that admits few documents still returns all of those that
                match. A filter inside the query costs tantivy its block-max WAND (every
                posting of the query's terms is read); for one that admits most documents,
                ``exclude_many`` over an unfiltered search is cheaper (see
                :meth:`admitted_share` and vecgraph.hybrid.POST_FILTER_SHARE).
            ts_min, ts_max: admit only documents with ``ts_min <= ts <= ts_max`` (ints,
                microseconds; None: unbounded).
            kind: ``"node"`` or ``"edge"``.
            exclude: ``exclude(key) -> bool``, called on candidates best first; True drops the
                candidate (for a condition the index cannot check, like a property filter).
                More candidates are fetched until ``k`` are admitted or none is left.
            exclude_many: the same for a list of candidates at a time (one bool each, True
                drops), for a check that costs less per key in bulk; called on blocks of
                ``max(k, 64)`` candidates, each block four times the last (at most 16,384).
            keys: admit only the documents of these keys (an iterable of str or int keys;
                None: all), applied inside the search like ``tenants``: for a condition the
                index cannot check that admits few documents, whose keys the caller can list
                (``exclude_many`` would read every better-ranked candidate it rejects). Each
                key costs about 5 µs (measured: 1,000 keys 5 ms, 10,000 keys 29 ms).
            statistics: ``(N, {term: n})``: score idf with these corpus figures instead of the
                index's own (a shard scoring as the whole sharded graph would: N and n summed
                over the shards' :meth:`document_frequencies`; see :func:`idf_boosts`).
            max_rows: read at most this many rows of the published index's ranking (int >= 1;
                None: as many as it takes); when the ``k`` admitted are not among them,
                :class:`MaxRowsReached` is raised. For a caller that has a cheaper plan to
                fall back on (vecgraph.hybrid's post-filter).

        Returns:
            ``[(key, score), ...]``, at most ``k``, never padded. Ties (equal scores) break by
            key: int keys before str keys, ints by value, strs by code point (a tie group of
            more than 4,096 documents, such as a query word that every document holds once
            in a text of the same length, is ordered by key within blocks of 4,096, the blocks
            in the index's order).

        Raises:
            TypeError: arguments of the wrong type; ``exclude`` returning anything but a bool
            (``numpy.bool_`` counts as one), ``exclude_many`` returning anything but a sequence
            of them. ValueError: ``exclude_many`` returning another number of flags than keys.
            InvalidArgumentError: ``k < 1``, an unknown kind, a ts bound outside int64,
            ``max_rows < 1``. Error: the index is closed. MaxRowsReached: see ``max_rows``.
        """
        if max_rows is not None and _check_int(max_rows, "max_rows") < 1:
            raise InvalidArgumentError(f"max_rows must be >= 1, got {max_rows}")
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
        _check_unicode(text, "text")
        k = _check_int(k, "k")
        if k < 1:
            raise InvalidArgumentError(f"k must be >= 1, got {k}")
        kind = _check_kind(kind)
        tenant_list = _filter_names(tenants, "tenants")
        label_list = _filter_names(labels, "labels")
        if ts_min is not None:
            ts_min = _check_int(ts_min, "ts_min")
        if ts_max is not None:
            ts_max = _check_int(ts_max, "ts_max")
        for name, check in (("exclude", exclude), ("exclude_many", exclude_many)):
            if check is not None and not callable(check):
                raise TypeError(f"{name} must be callable or None, got {type(check).__name__}")

        key_terms = None
        if keys is not None:
            # bytes-like values iterate as ints: b"17" would read as the keys 49 and 55
            if isinstance(keys, (str, bytes, bytearray, memoryview)) or not isinstance(keys, Iterable):
                raise TypeError(f"keys must be an iterable of str or int keys, got {type(keys).__name__}")
            doc_keys = list(dict.fromkeys(_doc_key(kind, _encode_key(key, f"keys[{i}]")) for i, key in enumerate(keys)))
            key_terms = [_term(doc_key) for doc_key in doc_keys]

        terms = list(dict.fromkeys(tokenize(text)))
        if not terms or tenant_list == [] or label_list == [] or key_terms == []:
            return []
        if ts_min is not None and ts_max is not None and ts_min > ts_max:
            return []
        searcher, delta, added, count = self._read_view()
        written = {marker: doc for marker, doc in delta.items() if marker[0] == kind}
        Query, Occur = self._tantivy.Query, self._tantivy.Occur
        schema = self._schema
        boosts = idf_boosts(self, searcher, kind, terms, statistics) if statistics is not None else {}
        query = Query.boolean_query([(Occur.Should, Query.boost_query(Query.term_query(
            schema, kind, term, index_option="freq"), boosts[term]) if term in boosts else Query.term_query(
            schema, kind, term, index_option="freq")) for term in terms])
        filters = []
        for field, values in (("tenant", tenant_list), ("label", label_list)):
            if values is not None:
                values = [_term(value) for value in values]
                filters.append(Query.term_query(schema, field, values[0]) if len(values) == 1
                               else Query.term_set_query(schema, field, values))
        if key_terms is not None:
            filters.append(Query.term_set_query(schema, "key_term", key_terms))
        if ts_min is not None or ts_max is not None:
            filters.append(Query.range_query(schema, "ts", self._tantivy.FieldType.Integer,
                                             _INT64_MIN if ts_min is None else ts_min,
                                             _INT64_MAX if ts_max is None else ts_max))
        if filters:
            admitted = filters[0] if len(filters) == 1 else Query.boolean_query(
                [(Occur.Must, f) for f in filters])
            query = Query.boolean_query([(Occur.Must, query),
                                         (Occur.Must, Query.const_score_query(admitted, 0.0))])

        def page(limit: int, offset: int) -> list:
            def run() -> list:
                return [(float(score), address)
                        for score, address in searcher.search(query, limit, count=False, offset=offset).hits]

            try:
                return _call(run, self._where(), "search")
            except ValueError as exc:
                raise CorruptionError(f"text index {self._where()}: search failed ({exc}); "
                                      "the index is damaged, rebuild it") from exc

        def key_of(address: Any) -> Key:
            # Stored keys are read only for the rows a search returns or must order (see _ranked_pages).
            try:
                return _decode_doc_key(searcher.doc(address)["key"][0])
            except BaseException as exc:
                if isinstance(exc, (ValueError, KeyError, IndexError)) or _is_panic(exc):
                    raise CorruptionError(f"text index {self._where()}: reading a document failed ({exc}); "
                                          "the index is damaged, rebuild it") from exc
                raise

        # tantivy sizes its collector by the page: never more than the documents there are
        most = max(1, int(searcher.num_docs))
        if not written:
            return _top_admitted(page, key_of, k, most, exclude, exclude_many, max_rows)
        # Documents written since the last publish: their published versions (replaced or
        # deleted since) are skipped, and the delta's are scored here and merged in.
        changed = {(marker[1], marker[2]) for marker in written}

        def skip(keys: list) -> list:
            flags = [(type(key), key) in changed for key in keys]
            if exclude_many is not None:
                flags = [a or b for a, b in zip(flags, _many_flags(exclude_many, keys))]
            return flags

        rows = _top_admitted(page, key_of, k, most, exclude, skip, max_rows)
        admitted: Any = True
        if key_terms is not None:
            admitted = {marker[1:] for marker in (_marker(kind, doc_key) for doc_key in doc_keys)}
        rows += delta_rows(self, searcher, added[:count], written, terms, kind, k, tenant_list, label_list, ts_min,
                           ts_max, admitted, exclude, exclude_many, statistics)
        rows.sort(key=lambda row: (-row[1], _key_order(row[0])))
        return rows[:k]

    def document_frequencies(self, terms: Sequence[str], kind: str = "node") -> tuple[int, list[int]]:
        """How many documents the index holds (node and edge texts alike), and how many of
        those of ``kind`` hold each term.

        These are the statistics BM25's idf reads (see the class docstring): ``terms`` are
        index terms as :func:`tokenize` makes them (already normalised); a term no document
        holds counts 0. Deleted and replaced documents count until tantivy merges their
        segments away, as they do in BM25's own idf.

        Args:
            terms: index terms (str). kind: ``"node"`` or ``"edge"``.

        Returns:
            ``(documents, [document frequency per term])``, ints >= 0.

        Raises:
            TypeError: a term that is not a str. InvalidArgumentError: an unknown kind.
            Error: the index is closed.
        """
        kind = _check_kind(kind)
        terms = list(terms)
        for i, term in enumerate(terms):
            if not isinstance(term, str):
                raise TypeError(f"terms[{i}] must be a str, got {type(term).__name__}")
        searcher, delta, added, count = self._read_view()
        # Documents: the published ones plus those written since (a replaced one counts twice
        # until the next publish); frequencies count every document added, as BM25 does.
        documents = int(searcher.num_docs) + sum(doc is not None for doc in delta.values())
        written = [doc for doc_kind, doc in added[:count] if doc_kind == kind]
        return documents, [int(searcher.doc_freq(kind, term)) + sum(term in doc.terms for doc in written)
                           for term in terms]

    def admitted_share(self, *, tenants: Optional[Sequence[str]] = None, labels: Optional[Sequence[str]] = None,
                       kind: str = "node") -> float:
        """An estimate of the share of the published documents of ``kind`` that the tenant and
        label filters of :meth:`search` admit: the smaller of the two fields' shares, each the
        summed document frequencies of its values over the documents of ``kind`` (deleted and
        replaced documents count until tantivy merges their segments away; the filters'
        intersection may be smaller than the estimate).

        Args:
            tenants, labels: lists of str (None: that filter admits everything).
            kind: ``"node"`` or ``"edge"``.

        Returns:
            A float in [0, 1]; 1.0 with neither filter, 0.0 when no document is of ``kind``.

        Raises:
            InvalidArgumentError: an unknown kind. Error: the index is closed.
        """
        kind = _check_kind(kind)
        searcher = self._read_view()[0]
        total = int(searcher.doc_freq("kind", kind))
        share = 1.0
        for field, values in (("tenant", tenants), ("label", labels)):
            if values is not None:
                held = sum(int(searcher.doc_freq(field, _term(value))) for value in dict.fromkeys(values))
                share = min(share, held / total if total else 0.0)
        return min(share, 1.0)

    def count(self, kind: Optional[str] = None) -> int:
        """Number of documents stored (of ``kind`` ``"node"`` / ``"edge"``; None: both)."""
        if kind is not None:
            kind = _check_kind(kind)
        searcher = self._reading()
        if kind is None:
            return int(searcher.num_docs)
        query = self._tantivy.Query.term_query(self._schema, "kind", kind)
        return int(_call(lambda: searcher.search(query, 1, count=True).count, self._where(), "count"))

    def close(self) -> None:
        """Publishes buffered writes and closes the index; later writes raise ReadOnlyError,
        reads Error. Idempotent."""
        with self._lock:
            if self._closed:
                return
            clean = False
            try:
                if self._failed is None:
                    self._publish()
                    clean = True
            finally:
                self._closed = True
                writer, self._writer = self._writer, None
                try:
                    writer.wait_merging_threads()  # ends merges, releases tantivy's writer lock
                except ValueError:
                    clean = False
                self._searcher = None
                self._view = (None, {}, [], 0)
                self._index = None
                if clean and self.path is not None:
                    self._write_meta(self._lsn, self._file_sums())
                self._discard_scratch()

    # -------------------------------------------------------------------------------- internals

    def _where(self) -> str:
        return self.path or "(temporary)"

    def _document(self, kind: str, doc_key: str, stream: str, tenant: str, label: str, ts: int) -> Any:
        doc = self._tantivy.Document()
        doc.add_text(kind, stream)
        doc.add_text("key", doc_key)
        doc.add_text("key_term", _term(doc_key))
        doc.add_text("kind", kind)
        doc.add_text("tenant", _term(tenant))
        doc.add_text("label", _term(label))
        doc.add_integer("ts", ts)
        return doc

    def _check_usable(self, closed_error: type) -> None:
        if self._closed:
            raise closed_error(f"{self!r}: the index is closed" +
                               ("; writes are refused" if closed_error is ReadOnlyError else ""))
        if self._failed is not None:
            raise StorageError(f"text index {self._where()}: an earlier write failed ({self._failed}); "
                               "reopen to rebuild it")

    def _check_writable(self) -> None:
        self._check_usable(ReadOnlyError)

    def _reading(self) -> Any:
        """The searcher to read with, after publishing buffered writes."""
        self._check_usable(Error)
        if self._pending:
            with self._lock:
                if self._closed:
                    raise Error(f"{self!r}: the index is closed")
                self._publish()
        return self._searcher

    def _read_view(self) -> tuple:
        """(searcher, delta, added, count) to read with (see ``_view``): the published state
        and the documents written since."""
        self._check_usable(Error)
        view = self._view
        if view[0] is None:  # closed by another thread meanwhile
            with self._lock:
                if self._closed:
                    raise Error(f"{self!r}: the index is closed")
                self._publish()
                view = self._view
        return view

    def _delta_put(self, kind: str, entries: dict) -> None:
        """Adds ``entries`` to the delta (a new dict: readers keep the one they took)."""
        searcher, delta, added, _count = self._view
        added.extend((kind, doc) for doc in entries.values() if doc is not None)
        self._view = (searcher, {**delta, **entries}, added, len(added))

    def _write(self, apply: Callable[[Any], None], lsn: int) -> None:
        """Runs ``apply(writer)`` under the writer lock and sets the lsn. Arguments are checked
        before: a failure here is tantivy's (an I/O error), after which the buffered writes
        are rolled back and the index refuses further use until reopened."""
        with self._lock:
            self._check_writable()
            if lsn < self._lsn:  # a concurrent writer went ahead
                raise InvalidArgumentError(f"lsn {lsn} is older than the index's lsn {self._lsn}")
            try:
                apply(self._writer)
            except ValueError as exc:
                self._rollback()
                self._failed = str(exc)
                raise StorageError(f"text index {self._where()}: write failed: {exc}") from exc
            self._pending = True
            self._lsn = lsn
            if max(len(self._view[1]), self._view[3]) > _DELTA_MAX:
                self._publish()  # bounds the memory of what was written since the last publish

    def _publish(self) -> None:
        """Commits buffered writes and reloads the searcher (caller holds the lock)."""
        if self._pending:
            self._commit(None, self._lsn)

    def _commit(self, apply: Optional[Callable[[Any], None]], lsn: int) -> None:
        try:
            if apply is not None:
                apply(self._writer)
            _call(self._writer.commit, self._where(), "commit")
            _call(self._index.reload, self._where(), "commit")
        except (ValueError, CorruptionError) as exc:
            self._rollback()
            self._failed = str(exc)
            raise StorageError(f"text index {self._where()}: commit failed: {exc}") from exc
        self._write_meta(lsn)
        self._lsn = self._published_lsn = lsn
        self._searcher = self._index.searcher()  # before pending is cleared: a reader that sees
        self._view = (self._searcher, {}, [], 0)  # nothing pending reads the new state
        self._stats = (None, {})  # it held the old searcher, whose files garbage collection must free
        self._pending = False

    def _rollback(self) -> None:
        try:
            self._writer.rollback()
        except ValueError:
            pass
        self._lsn = self._published_lsn
        self._pending = False
        self._view = (self._searcher, {}, [], 0)

    def _count_terms(self, field: str, values: list, publish: bool = True) -> int:
        searcher = self._reading() if publish else self._searcher
        query = (self._tantivy.Query.term_query(self._schema, field, values[0]) if len(values) == 1
                 else self._tantivy.Query.term_set_query(self._schema, field, values))
        return int(_call(lambda: searcher.search(query, 1, count=True).count, self._where(), "count"))

    def _discard_scratch(self) -> None:
        if self._scratch is not None:
            self._scratch()

    def _check_lsn(self, lsn: Any) -> int:
        lsn = _check_int(lsn, "lsn")
        if lsn < 0:
            raise InvalidArgumentError(f"lsn must be >= 0, got {lsn}")
        if lsn < self._lsn:
            raise InvalidArgumentError(f"lsn {lsn} is older than the index's lsn {self._lsn}; writes "
                                       "must come in LSN order (rebuild() or clear() to start over)")
        return lsn

