"""The text channel: a tokenizer for English, CJK and identifier-heavy text, and a BM25 index.

:func:`tokenize` turns text into the terms both documents and queries are indexed by;
:class:`TextIndex` keeps documents (node or edge texts with their key, tenant, label and ts)
in SQLite FTS5 and ranks them by Okapi BM25 (k1 = 1.2, b = 0.75, as FTS5's ``bm25()``
computes it).

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
import json
import logging
import numbers
import os
import re
import shutil
import sqlite3
import sys
import tempfile
import threading
import unicodedata
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

__all__ = ["tokenize", "TextIndex", "STOPWORDS", "TOKENIZER_VERSION", "SCHEMA_VERSION"]

Key = Union[str, int]

TOKENIZER_VERSION = 1
"""Changes whenever :func:`tokenize` gives different terms for some text; an index written
with another version is emptied on open (see :attr:`TextIndex.reset_on_open`)."""

SCHEMA_VERSION = 1
"""Version of the tables of a :class:`TextIndex` file."""

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1

# ------------------------------------------------------------------------------------------ tokenizer

STOPWORDS = frozenset(
    # English: NLTK's English stopword list (function words, pronouns, auxiliaries, the pieces
    # of contractions such as "don't" -> "don", "t") plus a few modal verbs. They are dropped
    # from documents and queries alike: they carry almost no BM25 weight, and each would make
    # a query visit a large part of the index.
    "i me my myself we our ours ourselves you your yours yourself yourselves he him his himself she "
    "her hers herself it its itself they them their theirs themselves what which who whom this that "
    "these those am is are was were be been being have has had having do does did doing a an the and "
    "but if or because as until while of at by for with about against between into through during "
    "before after above below to from up down in out on off over under again further then once here "
    "there when where why how all any both each few more most other some such no nor not only own "
    "same so than too very s t can will just don should now d ll m o re ve y ain aren couldn didn "
    "doesn hadn hasn haven isn ma mightn mustn needn shan shouldn wasn weren won wouldn "
    "also could would may might must shall "
    # Chinese function words that jieba returns as words of their own.
    "的 了 是 在 和 与 及 或 吗 呢 吧 啊 也 都 就 着 过 而 之".split()
)
"""Terms :func:`tokenize` drops (English function words, a few Chinese particles)."""

# Characters that join alphanumeric runs into one identifier-like token.
_JOINERS = "-_.@:/"
# Hyphen look-alikes that NFKC leaves alone but that mean "-" inside a model number.
_HYPHENS = str.maketrans({"\u2010": "-", "\u2011": "-", "\u2212": "-"})
# Han ideographs (CJK unified, extensions, compatibility; 々 and 〇) go to jieba.
_HAN = "\u3005\u3007\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\U00020000-\U0003134f"
# Kana and Hangul: no segmenter here; character bigrams.
_KANA_HANGUL = "\u1100-\u11ff\u3040-\u309f\u30a0-\u30ff\u3130-\u318f\u31f0-\u31ff\ua960-\ua97f\uac00-\ud7ff"
_MAX_COMPOUND_CHARS = 64

_token_re: Optional[re.Pattern] = None
_split_re = re.compile(f"[{re.escape(_JOINERS)}]+")
_jieba: Any = None
_lazy_lock = threading.Lock()


def _marks_class() -> str:
    """Regex class body of every combining mark (Unicode categories Mn, Mc, Me) below U+30000."""
    out, start = [], None
    for cp in range(0x30001):
        is_mark = cp < 0x30000 and unicodedata.category(chr(cp))[0] == "M"
        if is_mark and start is None:
            start = cp
        elif not is_mark and start is not None:
            out.append(f"\\U{start:08x}-\\U{cp - 1:08x}")
            start = None
    return "".join(out) + "\\U000e0100-\\U000e01ef"


def _pattern() -> re.Pattern:
    global _token_re
    if _token_re is None:
        with _lazy_lock:
            if _token_re is None:
                marks = _marks_class()
                # a letter or digit that is neither '_' nor CJK, then letters, digits and marks
                letter = f"[^\\W_{_HAN}{_KANA_HANGUL}]"
                word = f"{letter}(?:{letter}|[{marks}])*"
                joiners = re.escape(_JOINERS)
                _token_re = re.compile(
                    f"(?P<han>[{_HAN}]+)|(?P<kana>[{_KANA_HANGUL}]+)"
                    f"|(?P<word>_*{word}(?:[{joiners}]+{word})*_*)"
                )
    return _token_re


def _segmenter() -> Any:
    global _jieba
    if _jieba is None:
        with _lazy_lock:
            if _jieba is None:
                import jieba

                jieba.setLogLevel(logging.WARNING)  # it logs its dictionary loading otherwise
                jieba.initialize()
                _jieba = jieba
    return _jieba


def normalize(text: str) -> str:
    """NFKC-normalised, casefolded ``text`` (then NFKC again, as casefolding can denormalise)."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", text).casefold()).translate(_HYPHENS)


def tokenize(text: str) -> list[str]:
    """The terms of ``text``, in order, as documents and queries are both indexed.

    Rules, applied in order:

    1. **Normalisation**: NFKC (full-width ``Ａ７`` -> ``a7``, ligature ``ﬁ`` -> ``fi``,
       half-width katakana -> full-width, ``①`` -> ``1``), then casefolding (``Straße`` ->
       ``strasse``); the hyphen look-alikes U+2010, U+2011 and U+2212 become ``-``.
    2. **Identifiers** are kept whole and also split: a run of letters and digits joined by
       ``- _ . @ : /`` (leading or trailing ``_`` allowed) gives the whole run, then each
       alphanumeric part, so both the exact identifier (a rare term, high idf) and its pieces
       match: ``A7-Pro`` -> ``a7-pro a7 pro``; ``ERR_0x9941`` -> ``err_0x9941 err 0x9941``;
       ``v2.0`` -> ``v2.0 v2 0``; ``foo.bar_baz`` -> ``foo.bar_baz foo bar baz``;
       ``ann@example.com`` -> ``ann@example.com ann example com``; ``std::vector`` ->
       ``std::vector std vector``; ``__init__`` -> ``__init__ init``. A joiner at the end of
       a run is punctuation (``v2.0.`` -> ``v2.0 v2 0``). Whole runs longer than 64
       characters are not kept (their parts are).
    3. **Words**: any other character (spaces, punctuation, symbols) separates words:
       ``don't stop!`` -> ``stop`` (``don`` and ``t`` are stopwords). Combining marks stay
       inside words (Devanagari, Thai, decomposed accents), diacritics are kept
       (``café`` != ``cafe``). There is no stemming (``prices`` != ``price``) and no
       camelCase or letter/digit splitting (``A7`` stays ``a7``).
    4. **Chinese**: runs of Han characters are segmented by jieba in search mode, which also
       returns the shorter words inside long ones: ``A7-Pro 多少钱？`` -> ``a7-pro a7 pro
       多少 钱``; ``中华人民共和国`` -> ``中华 华人 人民 共和 共和国 中华人民共和国``. jieba
       is loaded on the first text with Han characters (about half a second).
    5. **Japanese kana and Korean Hangul** have no segmenter here: their runs become
       overlapping character bigrams (``カタカナ`` -> ``カタ タカ カナ``; a one-character
       run stays itself). Kanji inside Japanese text are Han runs, segmented by jieba.
    6. **Stopwords**: terms in :data:`STOPWORDS` (English function words, a few Chinese
       particles) are dropped, except whole identifiers. Scripts without spaces other than
       the above (Thai, Lao, Khmer, ...) give one term per run.

    Args:
        text: any str (an empty one gives ``[]``).

    Returns:
        list of str terms, in text order, repeated as often as they occur (BM25 counts them).

    Raises:
        TypeError: ``text`` is not a str.

    >>> tokenize("ＦＵＬＬ-width ﬁne Straße")
    ['full-width', 'full', 'width', 'fine', 'strasse']
    """
    if not isinstance(text, str):
        raise TypeError(f"text must be a str, got {type(text).__name__}")
    if not text:
        return []
    text = normalize(text)
    out: list[str] = []
    append = out.append
    stop = STOPWORDS
    for m in _pattern().finditer(text):
        group = m.lastgroup
        tok = m.group()
        if group == "word":
            if tok.isalnum():
                if tok not in stop:
                    append(tok)
                continue
            parts = [p for p in _split_re.split(tok) if p]
            if (len(parts) > 1 or parts[0] != tok) and len(tok) <= _MAX_COMPOUND_CHARS:
                append(tok)
            for part in parts:
                if part not in stop:
                    append(part)
        elif group == "han":
            for word in _segmenter().lcut_for_search(tok):
                if word not in stop:
                    append(word)
        else:  # kana / hangul
            if len(tok) == 1:
                append(tok)
            else:
                out.extend(tok[i:i + 2] for i in range(len(tok) - 1))
    return out


# ------------------------------------------------------------------------------------------ index

# Tables of a TextIndex (SCHEMA_VERSION 1):
#
#   meta(name, value)   rows: 'schema_version', 'tokenizer' (TOKENIZER_VERSION), 'lsn'.
#   docs(id, kind, key_kind, key, tenant, label, ts)
#       id: INTEGER PRIMARY KEY, the rowid of the document's row in fts_node or fts_edge.
#       kind: 'node' or 'edge'. key_kind: 's' (key is the str) or 'i' (key is the decimal int).
#       tenant, label: str ('' by default). ts: int64 microseconds (0 by default).
#       Unique on (kind, key_kind, key); indexed on tenant.
#   fts_node(tokens), fts_edge(tokens)
#       FTS5, rowid = docs.id; `tokens` is tokenize(text) joined by spaces. One table per kind,
#       so node and edge texts have their own BM25 statistics (document count, average
#       length, document frequencies) and a search of one kind never visits the other.
#
# The FTS5 tables are regular ones (they store the token stream in their own content table)
# rather than external-content or contentless: deleting or replacing a document is then a
# plain DELETE / UPDATE by rowid that FTS5 keeps consistent on its own, while an
# external-content or contentless table (before SQLite 3.43) must be handed the exact old
# tokens to delete them, and a mismatch silently corrupts the index. The stored stream costs
# about the size of the texts.
#
# FTS5's `ascii` tokenizer with the joiners as token characters does not split the stream
# again: tokenize() emits only letters, digits, marks and joiners, every non-ASCII character is
# a token character for `ascii`, and the ASCII letters are already lower case. (`unicode61`
# would split words at combining marks.) A document whose text gives no terms is not stored.

_FTS_TOKENIZER = "ascii tokenchars '" + _JOINERS + "'"
_KINDS = ("node", "edge")
_FTS = {"node": "fts_node", "edge": "fts_edge"}
_DDL_DOCS = (
    "CREATE TABLE docs(id INTEGER PRIMARY KEY, kind TEXT NOT NULL, key_kind TEXT NOT NULL, "
    "key TEXT NOT NULL, tenant TEXT NOT NULL, label TEXT NOT NULL, ts INTEGER NOT NULL)"
)
_DDL_DOCS_INDEXES = (
    "CREATE UNIQUE INDEX docs_key ON docs(kind, key_kind, key)",
    "CREATE INDEX docs_tenant ON docs(tenant)",
)
_DDL_FTS = tuple(f'CREATE VIRTUAL TABLE {table} USING fts5(tokens, tokenize="{_FTS_TOKENIZER}")'
                 for table in _FTS.values())
_PROGRESS_MIN_ITEMS = 10_000
_REBUILD_CHUNK = 4096
_IN_LIST_MAX = 256        # longer tenant/label lists go through json_each
_SMALL_FILTER = 2048      # tenant filters admitting fewer documents are applied before matching
_MMAP_BYTES = 256 << 20   # read through mmap: the join with docs reads a page per match


class TextIndex:
    """A BM25 index of node and edge texts in SQLite FTS5, with filters and a write LSN.

    ``TextIndex("folder/text.sqlite")`` keeps the index in a SQLite file (its folder is
    created; WAL journal, ``synchronous=NORMAL``: a commit survives a crash of the process, an
    operating-system crash may lose the last commits but never corrupts the file).
    ``TextIndex()`` is a scratch index for an in-memory graph: a private temporary file
    (``synchronous=OFF``, deleted by :meth:`close` or when the object is collected), so that it
    has the same concurrency as a file index (SQLite's in-memory databases make readers and
    the writer wait for each other). Documents are keyed by ``(kind, key)``: ``kind`` is
    ``"node"`` or ``"edge"``, a key is a str or an int (never a bool; ``1`` and ``"1"`` are
    different keys). Each write records the caller's log sequence number (:attr:`lsn`), so the
    owner of the index knows which of its own writes the index holds after a crash.

    Threads: any number of threads may search while one thread writes (a second writer waits
    for the first). Each searching thread gets its own read connection (``threading.local``)
    and reads one snapshot per search: the last write committed when the search started
    (WAL: searches never wait for writes, nor writes for searches). Writes go through one
    connection guarded by a lock. An ``exclude`` callback must not write to the index.
    :meth:`close` must not run while another thread is inside a method.

    Errors: wrong Python types raise ``TypeError``, wrong lengths ``ValueError``, values
    outside their domain :class:`~vecgraph.errors.InvalidArgumentError`; a rejected write
    changes nothing (documents and lsn). A damaged file raises
    :class:`~vecgraph.errors.CorruptionError`, an operating-system failure
    :class:`~vecgraph.errors.StorageError`, a write after :meth:`close`
    :class:`~vecgraph.errors.ReadOnlyError`.
    """

    def __init__(self, path: Optional[Union[str, os.PathLike]] = None) -> None:
        """Opens (or creates) the index.

        Args:
            path: the SQLite file (created with its parent folders if missing), or None for a
                scratch index in a private temporary file deleted on close.

        Raises:
            CorruptionError: the file is not a SQLite database or not a vecgraph text index.
            StorageError: the file or its folder cannot be created or opened.
        """
        self._lock = threading.Lock()       # one writer at a time
        self._local = threading.local()
        self._readers: list[sqlite3.Connection] = []
        self._readers_lock = threading.Lock()
        self._closed = False
        self._reset_on_open = False
        self._scratch: Optional[weakref.finalize] = None
        if path is None:
            self.path: Optional[str] = None
            try:
                folder = tempfile.mkdtemp(prefix="vecgraph-text-")
            except OSError as exc:
                raise StorageError(f"cannot create a temporary folder for a text index: {exc}") from exc
            self._scratch = weakref.finalize(self, shutil.rmtree, folder, True)
            self._file = os.path.join(folder, "text.sqlite")
        else:
            if isinstance(path, bytes) or not isinstance(path, (str, os.PathLike)):
                raise TypeError(f"path must be a str, a path or None, got {type(path).__name__}")
            self.path = self._file = os.path.abspath(os.fspath(path))
            try:
                os.makedirs(os.path.dirname(self.path), exist_ok=True)
            except OSError as exc:
                raise StorageError(f"cannot create the folder of text index {self.path}: {exc}") from exc
        try:
            self._writer = self._connect()
        except sqlite3.DatabaseError as exc:
            self._discard_scratch()
            raise self._error(exc, "open") from exc
        try:
            mode = self._writer.execute("PRAGMA journal_mode=WAL").fetchone()[0]
            if mode.lower() != "wal":
                raise StorageError(f"text index {self._file}: cannot use WAL journal mode (got {mode!r})")
            self._writer.execute(f"PRAGMA synchronous={'NORMAL' if self.path is not None else 'OFF'}")
            self._writer.execute("PRAGMA journal_size_limit=33554432")
            self._lsn = self._init_schema()
        except sqlite3.DatabaseError as exc:
            self._writer.close()
            self._discard_scratch()
            raise self._error(exc, "open") from exc
        except BaseException:
            self._writer.close()
            self._discard_scratch()
            raise

    # -------------------------------------------------------------------------------- properties

    @property
    def lsn(self) -> int:
        """LSN of the last write (the ``lsn`` it was given); 0 for a new or cleared index."""
        return self._lsn

    @property
    def reset_on_open(self) -> bool:
        """True when the file held an index of another schema or tokenizer version, which was
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
        """Replaces the documents of ``keys`` in one transaction, then sets :attr:`lsn`.

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

        fts = _FTS[kind]
        stored = 0
        with self._writing(lsn) as con:
            rows = zip(keys_enc, streams, tenant_list, label_list, ts_list)
            for (key_kind, key), stream, tenant, label, t in rows:
                row = con.execute("SELECT id FROM docs WHERE kind = ? AND key_kind = ? AND key = ?",
                                  (kind, key_kind, key)).fetchone()
                if row is not None:
                    if stream:
                        con.execute("UPDATE docs SET tenant = ?, label = ?, ts = ? WHERE id = ?",
                                    (tenant, label, t, row[0]))
                        con.execute(f"UPDATE {fts} SET tokens = ? WHERE rowid = ?", (stream, row[0]))
                    else:
                        con.execute(f"DELETE FROM {fts} WHERE rowid = ?", row)
                        con.execute("DELETE FROM docs WHERE id = ?", row)
                elif stream:
                    doc_id = con.execute(
                        "INSERT INTO docs(kind, key_kind, key, tenant, label, ts) VALUES (?, ?, ?, ?, ?, ?)",
                        (kind, key_kind, key, tenant, label, t)).lastrowid
                    con.execute(f"INSERT INTO {fts}(rowid, tokens) VALUES (?, ?)", (doc_id, stream))
                stored += bool(stream)
        return stored

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
        fts = _FTS[kind]
        removed = 0
        with self._writing(lsn) as con:
            for key_kind, key in dict.fromkeys(keys_enc):
                row = con.execute("SELECT id FROM docs WHERE kind = ? AND key_kind = ? AND key = ?",
                                  (kind, key_kind, key)).fetchone()
                if row is not None:
                    con.execute(f"DELETE FROM {fts} WHERE rowid = ?", row)
                    con.execute("DELETE FROM docs WHERE id = ?", row)
                    removed += 1
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
        with self._writing(lsn) as con:
            for kind, fts in _FTS.items():
                con.execute(f"DELETE FROM {fts} WHERE rowid IN "
                            "(SELECT id FROM docs WHERE tenant = ? AND kind = ?)", (tenant, kind))
            return con.execute("DELETE FROM docs WHERE tenant = ?", (tenant,)).rowcount

    def clear(self) -> None:
        """Removes every document and sets :attr:`lsn` to 0.

        Raises:
            ReadOnlyError: the index is closed.
        """
        with self._writing(0, check=False) as con:
            self._create_doc_tables(con, drop=True, indexes=True)

    def rebuild(self, items: Iterable[Sequence[Any]], lsn: int, *, progress: Optional[bool] = None) -> int:
        """Replaces the whole content by ``items`` in one transaction, then sets :attr:`lsn`.

        Faster than :meth:`upsert` for many documents (one pass, bulk inserts, indexes built
        at the end). On any error nothing changes.

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
        """
        lsn = _check_int(lsn, "lsn")
        if lsn < 0:
            raise InvalidArgumentError(f"lsn must be >= 0, got {lsn}")
        if progress is not None and not isinstance(progress, bool):
            raise TypeError(f"progress must be True, False or None, got {type(progress).__name__}")
        total = len(items) if hasattr(items, "__len__") else None  # type: ignore[arg-type]
        bar = _progress_bar(progress, total)
        seen: set = set()
        stored = 0
        try:
            with self._writing(lsn, check=False) as con:
                self._create_doc_tables(con, drop=True, indexes=False)
                for chunk_start, chunk in _chunks(items, _REBUILD_CHUNK):
                    docs_rows: list = []
                    fts_rows: dict = {kind: [] for kind in _KINDS}
                    for offset, item in enumerate(chunk):
                        row = _rebuild_row(item, chunk_start + offset)
                        ident = (row[0], row[1], row[2])
                        if ident in seen:
                            raise DuplicateKeyError(
                                f"items[{chunk_start + offset}]: {row[0]} key "
                                f"{_decode_key(row[1], row[2])!r} appears twice")
                        seen.add(ident)
                        if row[6]:
                            stored += 1
                            docs_rows.append((stored,) + row[:6])
                            fts_rows[row[0]].append((stored, row[6]))
                    con.executemany("INSERT INTO docs(id, kind, key_kind, key, tenant, label, ts) "
                                    "VALUES (?, ?, ?, ?, ?, ?, ?)", docs_rows)
                    for kind, rows in fts_rows.items():
                        if rows:
                            con.executemany(f"INSERT INTO {_FTS[kind]}(rowid, tokens) VALUES (?, ?)", rows)
                    if bar is not None:
                        bar.update(len(chunk))
                for ddl in _DDL_DOCS_INDEXES:
                    con.execute(ddl)
                for fts in _FTS.values():
                    con.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")
        finally:
            if bar is not None:
                bar.close()
        self._reset_on_open = False
        with self._lock:  # fold the rebuild's pages into the file now, so the WAL shrinks back
            if not self._closed:
                self._writer.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return stored

    def optimize(self) -> None:
        """Merges the segments of each FTS5 table into one; documents and :attr:`lsn` stay.

        Every write adds a small FTS5 segment, and FTS5 merges them as it goes but not into
        one: after many small writes a search reads more segments (at 100,000 documents
        written 1,000 per call, searches take about 1.2x as long as after a rebuild). A good
        moment is the owner's checkpoint. Takes the writer lock while it runs (about 0.1 s
        per 100,000 short documents).

        Raises:
            ReadOnlyError: the index is closed.
        """
        with self._writing(self._lsn, check=False) as con:
            for fts in _FTS.values():
                con.execute(f"INSERT INTO {fts}({fts}) VALUES ('optimize')")

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
    ) -> list[tuple[Key, float]]:
        """The ``k`` documents that best match ``text`` by BM25, best first.

        The query is tokenized like the documents (:func:`tokenize`) and matches documents
        holding any of its distinct terms; scores are FTS5's ``bm25()`` negated, so larger is
        better (positive for every match). BM25 statistics are those of the documents of
        ``kind``; FTS5 gives a term found in more than half of them an idf of 1e-6. The cost
        is about 1 µs per document holding a query term: FTS5 scores every match.

        Args:
            text: the query (str). No terms (empty, or only stopwords) -> ``[]``.
            k: results wanted, >= 1.
            tenants, labels: admit only documents of these tenants / labels (a str or an
                iterable of str; None: all). Applied in SQL together with the match, so a
                filter that admits few documents still returns all of those that match.
            ts_min, ts_max: admit only documents with ``ts_min <= ts <= ts_max`` (ints,
                microseconds; None: unbounded).
            kind: ``"node"`` or ``"edge"``.
            exclude: ``exclude(key) -> bool``, called on candidates best first; True drops the
                candidate (for a condition SQL cannot check, like a property filter). More
                candidates are fetched until ``k`` are admitted or none is left.

        Returns:
            ``[(key, score), ...]``, at most ``k``, never padded. Ties (equal scores) break by
            key: int keys before str keys, ints by value, strs by code point.

        Raises:
            TypeError: arguments of the wrong type. InvalidArgumentError: ``k < 1``, an
            unknown kind, a ts bound outside int64. Error: the index is closed.
        """
        if not isinstance(text, str):
            raise TypeError(f"text must be a str, got {type(text).__name__}")
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
        if exclude is not None and not callable(exclude):
            raise TypeError(f"exclude must be callable or None, got {type(exclude).__name__}")

        terms = list(dict.fromkeys(tokenize(text)))
        if not terms or tenant_list == [] or label_list == []:
            return []
        if ts_min is not None and ts_max is not None and ts_min > ts_max:
            return []
        match = " OR ".join(f'"{t}"' for t in terms)
        filters: list = []  # (SQL condition on docs AS d, its parameters), the tenant's first
        for column, values in (("tenant", tenant_list), ("label", label_list)):
            if values is None:
                continue
            if len(values) == 1:
                filters.append((f"d.{column} = ?", values))
            elif len(values) <= _IN_LIST_MAX:
                filters.append((f"d.{column} IN ({', '.join('?' * len(values))})", values))
            else:
                filters.append((f"d.{column} IN (SELECT value FROM json_each(?))", [json.dumps(values)]))
        if ts_min is not None:
            filters.append(("d.ts >= ?", [ts_min]))
        if ts_max is not None:
            filters.append(("d.ts <= ?", [ts_max]))

        with self._reading() as con:
            nested = con.in_transaction  # a search run from an exclude callback of this thread
            if not nested:
                con.execute("BEGIN")  # one snapshot for every statement of this search
            try:
                sql = _page_sql(con, _FTS[kind], filters, tenant_list is not None)
                params = [match, *(value for _, values in filters for value in values)]
                out: list = []
                for r, key in _ranked_pages(con, sql, params, k + max(k, 32)):
                    if exclude is None or not exclude(key):
                        out.append((key, 0.0 - r))
                        if len(out) == k:
                            break
                return out
            finally:
                if not nested:
                    con.execute("COMMIT")

    def count(self, kind: Optional[str] = None) -> int:
        """Number of documents stored (of ``kind`` ``"node"`` / ``"edge"``; None: both)."""
        with self._reading() as con:
            if kind is None:
                return con.execute("SELECT count(*) FROM docs").fetchone()[0]
            return con.execute("SELECT count(*) FROM docs WHERE kind = ?", (_check_kind(kind),)).fetchone()[0]

    def close(self) -> None:
        """Closes every connection; later writes raise ReadOnlyError, reads Error. Idempotent."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            with self._readers_lock:
                readers, self._readers = self._readers, []
            for con in readers:
                try:
                    con.close()
                except sqlite3.Error:
                    pass
            self._writer.close()
            self._discard_scratch()

    # -------------------------------------------------------------------------------- internals

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(self._file, timeout=60.0, isolation_level=None, check_same_thread=False)
        con.execute("PRAGMA busy_timeout=60000")
        con.execute(f"PRAGMA mmap_size={_MMAP_BYTES}")
        return con

    def _reader(self) -> sqlite3.Connection:
        con = getattr(self._local, "con", None)
        if con is None:
            try:
                con = self._connect()
                con.execute("PRAGMA query_only=1")
            except sqlite3.DatabaseError as exc:
                raise self._error(exc, "open a reader of") from exc
            with self._readers_lock:
                if self._closed:
                    con.close()
                    raise Error(f"{self!r}: the index is closed")
                self._readers.append(con)
            self._local.con = con
        return con

    @contextlib.contextmanager
    def _reading(self) -> Iterator[sqlite3.Connection]:
        if self._closed:
            raise Error(f"{self!r}: the index is closed")
        try:
            yield self._reader()
        except sqlite3.DatabaseError as exc:
            raise self._error(exc, "read") from exc

    def _discard_scratch(self) -> None:
        if self._scratch is not None:
            self._scratch()

    def _writing(self, lsn: int, *, check: bool = True) -> "_Writing":
        return _Writing(self, lsn, check)

    def _check_lsn(self, lsn: Any) -> int:
        lsn = _check_int(lsn, "lsn")
        if lsn < 0:
            raise InvalidArgumentError(f"lsn must be >= 0, got {lsn}")
        if lsn < self._lsn:
            raise InvalidArgumentError(f"lsn {lsn} is older than the index's lsn {self._lsn}; writes "
                                       "must come in LSN order (rebuild() or clear() to start over)")
        return lsn

    def _create_doc_tables(self, con: sqlite3.Connection, *, drop: bool, indexes: bool) -> None:
        if drop:
            for fts in _FTS.values():
                con.execute(f"DROP TABLE IF EXISTS {fts}")
            con.execute("DROP TABLE IF EXISTS docs")
        con.execute(_DDL_DOCS)
        if indexes:
            for ddl in _DDL_DOCS_INDEXES:
                con.execute(ddl)
        for ddl in _DDL_FTS:
            con.execute(ddl)

    def _init_schema(self) -> int:
        """Creates the tables of a new index or checks an existing one; returns its lsn."""
        con = self._writer
        with self._lock:
            con.execute("BEGIN IMMEDIATE")
            try:
                master = con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")
                tables = {name for (name,) in master}
                if "meta" in tables:
                    meta = dict(con.execute("SELECT name, value FROM meta"))
                    complete = {"schema_version", "tokenizer", "lsn"} <= meta.keys()
                    if not complete or not {"docs", *_FTS.values()} <= tables:
                        raise CorruptionError(f"text index {self.path}: tables or meta rows are missing "
                                              f"(tables {sorted(tables)}, meta {sorted(meta)})")
                    if meta["schema_version"] == SCHEMA_VERSION and meta["tokenizer"] == TOKENIZER_VERSION:
                        lsn = meta["lsn"]
                        if not isinstance(lsn, int) or lsn < 0:
                            raise CorruptionError(f"text index {self.path}: meta lsn is {lsn!r}, "
                                                  "not an int >= 0")
                        con.execute("COMMIT")
                        return lsn
                    self._reset_on_open = True
                    con.execute("DROP TABLE meta")
                elif tables:
                    raise CorruptionError(f"{self.path} is a SQLite database but not a vecgraph text index "
                                          f"(tables: {', '.join(sorted(tables))})")
                con.execute("CREATE TABLE meta(name TEXT PRIMARY KEY, value) WITHOUT ROWID")
                con.executemany("INSERT INTO meta(name, value) VALUES (?, ?)", [
                    ("schema_version", SCHEMA_VERSION), ("tokenizer", TOKENIZER_VERSION), ("lsn", 0)])
                self._create_doc_tables(con, drop=True, indexes=True)
                con.execute("COMMIT")
                return 0
            except BaseException:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                raise

    def _error(self, exc: sqlite3.DatabaseError, doing: str) -> Error:
        where = self.path or "(temporary)"
        text = str(exc)
        if isinstance(exc, sqlite3.OperationalError) and ("database is locked" in text or "busy" in text):
            return StorageError(f"cannot {doing} text index {where}: {text}")
        if "not a database" in text or "malformed" in text or "corrupt" in text:
            return CorruptionError(f"text index {where} is damaged ({text}); delete it and rebuild")
        if isinstance(exc, sqlite3.OperationalError):
            return StorageError(f"cannot {doing} text index {where}: {text}")
        return Error(f"cannot {doing} text index {where}: {text}")


class _Writing:
    """Context of one write: the writer lock, BEGIN IMMEDIATE ... set lsn, COMMIT (or ROLLBACK)."""

    __slots__ = ("index", "lsn", "check")

    def __init__(self, index: TextIndex, lsn: int, check: bool) -> None:
        self.index, self.lsn, self.check = index, lsn, check

    def __enter__(self) -> sqlite3.Connection:
        index = self.index
        index._lock.acquire()
        try:
            if index._closed:
                raise ReadOnlyError(f"{index!r}: the index is closed; writes are refused")
            if self.check and self.lsn < index._lsn:  # a concurrent writer went ahead
                raise InvalidArgumentError(f"lsn {self.lsn} is older than the index's lsn {index._lsn}")
            index._writer.execute("BEGIN IMMEDIATE")
        except sqlite3.DatabaseError as exc:
            index._lock.release()
            raise index._error(exc, "write") from exc
        except BaseException:
            index._lock.release()
            raise
        return index._writer

    def __exit__(self, exc_type: object, exc: object, tb: object) -> None:
        index = self.index
        con = index._writer
        try:
            if exc_type is None:
                try:
                    con.execute("UPDATE meta SET value = ? WHERE name = 'lsn'", (self.lsn,))
                    con.execute("COMMIT")
                except sqlite3.DatabaseError as commit_exc:
                    if con.in_transaction:
                        con.execute("ROLLBACK")
                    raise index._error(commit_exc, "write") from commit_exc
                index._lsn = self.lsn
            else:
                if con.in_transaction:
                    con.execute("ROLLBACK")
                if isinstance(exc, sqlite3.IntegrityError):
                    raise DuplicateKeyError(f"text index: {exc}") from exc
                if isinstance(exc, sqlite3.DatabaseError):
                    raise index._error(exc, "write") from exc
        finally:
            index._lock.release()


def _page_sql(con: sqlite3.Connection, fts: str, filters: list, tenant_first: bool) -> str:
    """SQL of one page of ranked matches, rows (doc id, bm25, key_kind, key) best first by bm25
    only (ties in any order); parameters: match, the filters' values, limit, offset.

    Without filters, FTS5 ranks its matches and only the page is joined with docs. With a
    tenant filter that admits fewer than _SMALL_FILTER documents, the admitted ids are
    collected first (through the tenant index) and FTS5 skips the other matches. Otherwise
    every match is joined with its docs row and checked, and bm25 is computed for the
    admitted ones only.
    """
    ranked = f"SELECT rowid AS id, bm25({fts}) AS r FROM {fts} WHERE {fts} MATCH ?"
    page = " ORDER BY r LIMIT ? OFFSET ?"
    if not filters:
        return f"SELECT f.id, f.r, d.key_kind, d.key FROM ({ranked}{page}) AS f JOIN docs AS d ON d.id = f.id"
    where = " AND ".join(condition for condition, _ in filters)
    if tenant_first:
        condition, values = filters[0]
        admitted = con.execute(f"SELECT count(*) FROM (SELECT 1 FROM docs AS d WHERE {condition} LIMIT ?)",
                               [*values, _SMALL_FILTER]).fetchone()[0]
        if admitted < _SMALL_FILTER:
            return (f"SELECT f.id, f.r, d.key_kind, d.key FROM ({ranked} AND +rowid IN "
                    f"(SELECT d.id FROM docs AS d WHERE {where}){page}) AS f JOIN docs AS d ON d.id = f.id")
    return (f"SELECT {fts}.rowid, bm25({fts}) AS r, d.key_kind, d.key FROM {fts} CROSS JOIN docs AS d "
            f"ON d.id = {fts}.rowid WHERE {fts} MATCH ? AND {where}{page}")


def _ranked_pages(con: sqlite3.Connection, sql: str, params: list, limit: int) -> Iterator[tuple[float, Key]]:
    """(bm25, key) of every match of ``sql`` (see _page_sql), best first, ties by key.

    SQLite orders a page by bm25 only, so rows tied with the page's last score may continue on
    the next page: a page yields only its rows scored strictly better than its last row, in
    (score, key) order, and the next page starts after them (OFFSET), fetching four times as
    many rows. The last page (fewer rows than asked) yields everything.
    """
    offset = 0
    while True:
        rows = con.execute(sql, [*params, limit, offset]).fetchall()
        ordered = sorted((r, key_kind, int(key) if key_kind == "i" else key) for _, r, key_kind, key in rows)
        if len(rows) < limit:
            for r, _, key in ordered:
                yield r, key
            return
        last = ordered[-1][0]
        count = 0
        for r, _, key in ordered:
            if r >= last:
                break
            count += 1
            yield r, key
        offset += count
        limit *= 4


# ------------------------------------------------------------------------------------------ checks


def _check_int(value: Any, name: str) -> int:
    if type(value) is int:
        v = value
    elif isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(f"{name} must be an int, got {type(value).__name__}")
    else:
        v = int(value)
    if not _INT64_MIN <= v <= _INT64_MAX:
        raise InvalidArgumentError(f"{name} must fit int64, got {v}")
    return v


def _check_kind(kind: Any) -> str:
    if kind not in _KINDS or not isinstance(kind, str):
        raise InvalidArgumentError(f"kind must be 'node' or 'edge', got {kind!r}")
    return kind


def _sequence(values: Any, name: str) -> Sequence:
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence, not a single {type(values).__name__}; wrap it in a list")
    if isinstance(values, (set, frozenset, dict)):
        raise TypeError(f"{name} must be ordered (a list, tuple or array), got {type(values).__name__}")
    if type(values) is list or type(values) is tuple:
        return values
    if hasattr(values, "tolist") and getattr(values, "ndim", 1) == 1:
        return values.tolist()
    if not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a sequence, got {type(values).__name__}")
    return list(values)


def _encode_key(key: Any, where: str) -> tuple[str, str]:
    if type(key) is str:
        return ("s", key)
    if type(key) is int or (isinstance(key, numbers.Integral) and not isinstance(key, bool)
                            and type(key).__name__ != "bool_"):
        v = int(key)
        if not _INT64_MIN <= v <= _INT64_MAX:
            raise InvalidArgumentError(f"{where} is {v}, outside int64; int keys must fit int64")
        return ("i", str(v))
    if isinstance(key, str):
        return ("s", str(key))
    raise TypeError(f"{where} is a {type(key).__name__} ({key!r}); keys must be str or int (not bool)")


def _encode_keys(keys: Any, allow_repeats: bool = False) -> list[tuple[str, str]]:
    keys = _sequence(keys, "keys")
    out = [_encode_key(key, f"keys[{row}]") for row, key in enumerate(keys)]
    if not allow_repeats and len(set(out)) != len(out):
        first: dict = {}
        for row, enc in enumerate(out):
            if enc in first:
                raise DuplicateKeyError(f"keys[{row}] ({keys[row]!r}) repeats keys[{first[enc]}]; "
                                        "each key may appear once per write")
            first[enc] = row
    return out


def _decode_key(key_kind: str, key: str) -> Key:
    return int(key) if key_kind == "i" else key


def _column_of_str(values: Any, name: str, n: int, broadcast: bool = True) -> list[str]:
    if values is None:
        return [""] * n
    if isinstance(values, str) and broadcast:
        return [values] * n
    values = _sequence(values, name)
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} items, expected {n} (one per key)")
    out = []
    for row, value in enumerate(values):
        if value is None:
            out.append("")
        elif isinstance(value, str):
            out.append(value)
        else:
            raise TypeError(f"{name}[{row}] is a {type(value).__name__}; {name} must be str (or None)")
    return out


def _column_of_ts(values: Any, n: int) -> list[int]:
    if values is None:
        return [0] * n
    if isinstance(values, numbers.Integral) and not isinstance(values, bool):
        return [_check_int(values, "ts")] * n
    values = _sequence(values, "ts")
    if len(values) != n:
        raise ValueError(f"ts has {len(values)} items, expected {n} (one per key)")
    return [_check_int(v, f"ts[{row}]") for row, v in enumerate(values)]


def _filter_names(values: Any, name: str) -> Optional[list[str]]:
    if values is None:
        return None
    if isinstance(values, str):
        return [values]
    if isinstance(values, (bytes, dict)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a str or an iterable of str, got {type(values).__name__}")
    values = list(dict.fromkeys(values))
    for value in values:
        if not isinstance(value, str):
            raise TypeError(f"{name} must hold str, got {type(value).__name__} ({value!r})")
    return values


def _rebuild_row(item: Any, position: int) -> tuple:
    """(kind, key_kind, key, tenant, label, ts, token stream) of one rebuild item."""
    where = f"items[{position}]"
    if isinstance(item, (str, bytes)) or not isinstance(item, Sequence) or len(item) not in (5, 6):
        raise TypeError(f"{where} must be (key, text, tenant, label, ts) or "
                        f"(key, text, tenant, label, ts, kind), got {item!r}")
    key_kind, key = _encode_key(item[0], f"{where} key")
    text, tenant, label, ts = item[1], item[2], item[3], item[4]
    kind = _check_kind(item[5]) if len(item) == 6 else "node"
    for value, col in ((text, "text"), (tenant, "tenant"), (label, "label")):
        if value is not None and not isinstance(value, str):
            raise TypeError(f"{where} {col} is a {type(value).__name__}; it must be str (or None)")
    ts = 0 if ts is None else _check_int(ts, f"{where} ts")
    stream = " ".join(tokenize(text)) if text else ""
    return (kind, key_kind, key, tenant or "", label or "", ts, stream)


def _chunks(items: Iterable, size: int) -> Iterator[tuple[int, list]]:
    chunk: list = []
    start = 0
    for item in items:
        chunk.append(item)
        if len(chunk) == size:
            yield start, chunk
            start += size
            chunk = []
    if chunk:
        yield start, chunk


def _progress_bar(progress: Optional[bool], total: Optional[int]) -> Any:
    if progress is None:
        try:
            terminal = sys.stderr is not None and sys.stderr.isatty()
        except (AttributeError, ValueError):
            terminal = False
        progress = terminal and (total is None or total >= _PROGRESS_MIN_ITEMS)
    if not progress:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc="text index", unit=" docs", unit_scale=True, file=sys.stderr,
                dynamic_ncols=True, leave=False)

