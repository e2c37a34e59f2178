"""The batch loop of :mod:`vecgraph.ingest`, and what it reports.

:func:`_run` reads a source batch by batch. A plan (:class:`_NodePlan`, :class:`_EdgePlan`)
prepares each batch (converts and checks its columns: :mod:`vecgraph.ingest_checks`), and the
batch is then rejected whole with :class:`IngestError` (``on_error="raise"``) or its good rows
written by the plan and its bad rows listed in the rejects file (:class:`_Rejects`,
``on_error="skip"``). :class:`IngestReport` says what one ingestion did.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import os
import stat
import sys
import time
from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa

from .errors import DimensionMismatchError, InvalidArgumentError, StorageError
from .ingest_checks import (
    _check_vectors,
    _duplicates,
    _embed_rows,
    _in_graph,
    _int_key_column,
    _is_missing,
    _key_column,
    _MISSING_TENANT,
    _Problems,
    _props_column,
    _string_column,
    _ts_column,
    _vector_column,
    _weight_column,
)
from .ingest_readers import _Batch, _Source

# ====================================================================== results


@dataclasses.dataclass(frozen=True)
class IngestReport:
    """What one ingestion did.

    Attributes:
        rows_read: rows taken from the source.
        rows_accepted: rows written to the graph.
        rows_rejected: rows not written (bad rows with ``on_error="skip"``; with "raise", the
            rows of the batch that failed).
        batches: batches read.
        seconds: wall-clock time, in seconds.
        rejects_path: the rejects file, when this ingestion wrote bad rows to it
            (``on_error="skip"``), else None.
    """

    rows_read: int
    rows_accepted: int
    rows_rejected: int
    batches: int
    seconds: float
    rejects_path: Optional[str]

    @property
    def rows_per_second(self) -> float:
        """rows_read / seconds (0 when no time elapsed)."""
        return self.rows_read / self.seconds if self.seconds > 0 else 0.0

    def __str__(self) -> str:
        text = (f"{self.rows_accepted:,} of {self.rows_read:,} rows accepted, {self.rows_rejected:,} rejected, "
                f"in {self.batches:,} batch{'es' if self.batches != 1 else ''} "
                f"({self.seconds:.2f} s, {self.rows_per_second:,.0f} rows/s)")
        if self.rejects_path:
            text += f"; rejects: {self.rejects_path}"
        return text


class IngestError(InvalidArgumentError):
    """A batch was rejected because of a bad row (``on_error="raise"``).

    Attributes:
        row: the bad row's number in the source (0-based, over the whole source; a row, not a
            line of a file).
        column: the source column at fault (None for a row that could not be parsed at all).
        reason: what is wrong with it; for a CSV record with more or fewer fields than the
            header, it starts with the record's line in the file (``"line 404: ..."``, 1-based).
        report: :class:`IngestReport` of what was done before: earlier batches stay written.
    """

    def __init__(self, message: str, *, row: int, column: Optional[str], reason: str, report: IngestReport):
        super().__init__(message)
        self.row, self.column, self.reason, self.report = row, column, reason, report

    def __reduce__(self) -> tuple:
        # For a process pool or a cache: the keyword-only fields go through the constructor.
        return (_ingest_error, (str(self), self.row, self.column, self.reason, self.report))


def _ingest_error(message: str, row: int, column: Optional[str], reason: str, report: IngestReport) -> IngestError:
    """An IngestError made by unpickling."""
    return IngestError(message, row=row, column=column, reason=reason, report=report)


# ====================================================================== rejects and progress


class _Rejects:
    """The rejects file (JSON Lines): one object per bad row with kind, row, column, reason and
    the row's key (nodes) or src/dst (edges). It is opened (emptied) when the ingestion starts,
    so that a path that cannot be written fails before any row is, and removed when it closes
    with no row written to it: a run without bad rows leaves no rejects file, not an empty one
    nor one left from an earlier run."""

    def __init__(self, path: str, append: bool = False) -> None:
        self.path = os.path.abspath(path)
        self.count_written = 0
        self._broken = False  # a write failed: what it left buffered cannot be written at close either
        try:
            self._file = open(self.path, "a" if append else "w", encoding="utf-8")
        except OSError as e:
            raise InvalidArgumentError(f"cannot write the rejects file {self.path}: {e}") from None

    def write(self, kind: str, offset: int, problems: _Problems, ids: dict) -> None:
        """One record per bad row; ``ids`` maps "key" (or "src" and "dst") to (the keys as
        read, None where bad; the source column), so that a key that could not be read is
        written as it came."""
        for row in sorted(problems.where):
            column, reason = problems.where[row]
            record = {"kind": kind, "row": offset + row, "column": column, "reason": reason}
            for name, (values, source) in ids.items():
                value = values[row]
                if value is None:
                    value = source[row].as_py() if isinstance(source, pa.Array) else source[row]
                record[name] = _as_json(value)
            try:
                self._file.write(json.dumps(record, ensure_ascii=False, allow_nan=False) + "\n")
            except OSError:
                self._broken = True
                raise
            self.count_written += 1
        try:
            self._file.flush()
        except OSError:
            self._broken = True
            raise

    def close(self) -> None:
        """Closes the file, and removes it when no row was written to it (whether the ingest
        succeeded or failed) and it is a regular file: a device such as /dev/null, or a pipe,
        given as the rejects path is left in place."""
        try:
            self._file.close()
        except OSError:
            if not self._broken:
                raise
        if self.count_written == 0:
            with contextlib.suppress(OSError):
                if stat.S_ISREG(os.stat(self.path).st_mode):
                    os.remove(self.path)


def _as_json(value: Any) -> Any:
    """``value`` as it came, for a JSON record: a str, a number, a bool, a list or a dict that
    JSON can hold stays itself; a missing value (None, NaN, pandas NA) is null; anything else
    is its repr."""
    if _is_missing(value):
        return None
    if isinstance(value, np.generic):
        value = value.item()
    if type(value) in (str, int, bool):
        return value
    if type(value) is float:
        return value if math.isfinite(value) else repr(value)
    if isinstance(value, (list, dict)):
        try:
            json.dumps(value, allow_nan=False)
            return value
        except (TypeError, ValueError):
            pass
    return repr(value)


def _progress_bar(progress: Optional[bool], total: Optional[int], desc: str):
    if progress is not None and not isinstance(progress, (bool, np.bool_)):
        raise TypeError(f"progress must be None, True or False, got {type(progress).__name__}")
    show = _stderr_is_terminal() if progress is None else bool(progress)
    if not show:
        return None
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=" rows", unit_scale=True, file=sys.stderr, dynamic_ncols=True,
                smoothing=0.1)


def _stderr_is_terminal() -> bool:
    try:
        return sys.stderr is not None and sys.stderr.isatty()
    except (AttributeError, ValueError):
        return False


# ====================================================================== the loop


@dataclasses.dataclass
class _Options:
    batch_rows: int
    on_error: str
    progress: Optional[bool]
    rejects: Optional[str]


def _options(batch_rows: Any, on_error: Any, progress: Any, rejects: Any) -> _Options:
    if isinstance(batch_rows, bool) or not isinstance(batch_rows, (int, np.integer)):
        raise TypeError(f"batch_rows must be an int, got {type(batch_rows).__name__}")
    if batch_rows < 1:
        raise InvalidArgumentError(f"batch_rows must be >= 1, got {batch_rows}")
    if on_error not in ("raise", "skip"):
        raise InvalidArgumentError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
    if rejects is not None:
        rejects = os.fspath(rejects)
    return _Options(int(batch_rows), on_error, progress, rejects)


def _rejects_path(options: _Options, source: _Source) -> Optional[str]:
    if options.on_error != "skip":
        return None
    if options.rejects is not None:
        return options.rejects
    if source.path is not None:
        return source.path + ".rejects.jsonl"
    raise InvalidArgumentError('on_error="skip" needs rejects=<path of a JSONL file> when the source is not a file')


def _run(graph: Any, source: _Source, kind: str, prepare: Callable, apply: Callable, options: _Options,
         rejects: Optional[_Rejects], array: Optional[np.ndarray], wanted: list, desc: str,
         start: float) -> IngestReport:
    if array is not None and source.total is not None and array.shape[0] != source.total:
        raise InvalidArgumentError(f"vector= array has {array.shape[0]} rows, the source has {source.total}; "
                                   "it must have one row per source row")
    read = accepted = rejected = batches = 0
    written_before = rejects.count_written if rejects is not None else 0  # from_networkx: the nodes' rows

    def report() -> IngestReport:
        wrote = rejects is not None and rejects.count_written > written_before
        return IngestReport(read, accepted, rejected, batches, time.perf_counter() - start,
                            rejects.path if wrote else None)

    bar = _progress_bar(options.progress, source.total, desc)
    try:
        batch_iter = source.batches(wanted, options.batch_rows)
        while True:
            try:
                batch = next(batch_iter)
            except StopIteration:
                break
            except pa.ArrowException as e:
                raise InvalidArgumentError(f"cannot read the source beyond the {read:,} rows taken from it "
                                           f"({accepted:,} of them ingested): {e}") from None
            batches += 1
            read += batch.n
            problems, payload = prepare(batch)
            if problems and options.on_error == "raise":
                rejected += batch.n
                row = min(problems.where)
                column, reason = problems.where[row]
                more = len(problems.where) - 1
                where = f"column {column!r}" if column else "the whole row"
                first, last = batch.offset, batch.offset + batch.n - 1
                message = (f"{kind} row {batch.offset + row}, {where}: {reason}"
                           + (f" (and {more} more bad row{'s' if more > 1 else ''} in this batch)" if more else "")
                           + f". Nothing of batch {batches} (rows {first}-{last}) was written"
                           + (f"; the {accepted:,} rows of earlier batches stay in the graph" if accepted else "")
                           + '. Fix the row, or pass on_error="skip" to write the good rows and list the bad ones.')
                raise IngestError(message, row=batch.offset + row, column=column, reason=reason, report=report())
            count = batch.n - len(problems.where)
            if count:
                try:
                    apply(payload, problems)
                except Exception as e:
                    if hasattr(e, "add_note"):
                        e.add_note(f"while writing {kind} rows {batch.offset}-{batch.offset + batch.n - 1} "
                                   f"(batch {batches}); earlier batches were written")
                    raise
            accepted += count
            rejected += len(problems.where)
            if problems and rejects is not None:
                try:
                    rejects.write(kind, batch.offset, problems, payload["ids"])
                except OSError as e:
                    raise StorageError(
                        f"cannot write the rejects file {rejects.path}: {e}. The {count:,} good rows of "
                        f"batch {batches} (rows {batch.offset}-{batch.offset + batch.n - 1}) were written, "
                        f"its {len(problems.where):,} bad rows are not listed; {accepted:,} rows were "
                        "ingested in all") from e
            if bar is not None:
                bar.update(batch.n)
            del batch, payload, problems  # not kept while the next batch is read
        if array is not None and array.shape[0] != read:
            raise InvalidArgumentError(f"vector= array has {array.shape[0]} rows, the source had {read} "
                                       f"(all {read} were ingested); it must have one row per source row")
    finally:
        if bar is not None:
            bar.close()
        source.close()
    return report()


def _deferred_indexing(graph: Any):
    """Graph.deferred_indexing() when the graph has it: HNSW inserts in one parallel pass at exit."""
    deferred = getattr(graph, "deferred_indexing", None)
    return deferred() if deferred is not None else contextlib.nullcontext()


def _run_plan(graph: Any, src: _Source, kind: str, plan: Any, options: _Options, path: Optional[str],
              array: Optional[np.ndarray], columns: dict, start: float) -> IngestReport:
    """_run with the plan's steps, writing bad rows to ``path`` (when set)."""
    writer = _Rejects(path) if path else None
    try:
        return _run(graph, src, kind, plan.prepare, plan.apply, options, writer, array,
                    [c for c in dict.fromkeys(columns.values()) if c is not None], f"ingest {kind}s", start)
    finally:
        if writer is not None:
            writer.close()


# ====================================================================== plans


class _NodePlan:
    """Node rows: with ``tenant_required`` (the source has a tenant column), a row whose tenant
    is missing is bad; without, a missing tenant, label or text is ""."""

    def __init__(self, graph: Any, columns: dict, array: Optional[np.ndarray], embedder: Any, upsert: bool,
                 int_keys: bool = False, tenant_required: bool = False) -> None:
        self.graph, self.columns, self.array, self.embedder, self.upsert = graph, columns, array, embedder, upsert
        self.int_keys, self.tenant_required = int_keys, tenant_required
        self.dim, self.metric = graph.dim, graph.metric

    def prepare(self, batch: _Batch) -> tuple:
        c, n, cols = self.columns, batch.n, batch.columns
        problems = _Problems(n, batch.problems)
        col = cols[c["key"]]
        if self.int_keys:
            col = _int_key_column(col, c["key"], problems)
        keys = _key_column(col, c["key"], problems)
        if not self.upsert:  # with upsert a repeat replaces the earlier row, as across batches (apply)
            _duplicates(keys, problems, c["key"])
            _in_graph(self.graph, keys, problems, c["key"], "is already in the graph (pass upsert=True to replace it)")
        labels = _string_column(cols[c["label"]], c["label"], problems) if c["label"] else None
        missing_tenant = _MISSING_TENANT if self.tenant_required else None
        tenants = _string_column(cols[c["tenant"]], c["tenant"], problems, missing_tenant) if c["tenant"] else None
        texts = _string_column(cols[c["text"]], c["text"], problems) if c["text"] else None
        ts = _ts_column(cols[c["ts"]], c["ts"], problems) if c["ts"] else None
        props = _props_column(cols[c["props"]], c["props"], problems, self.graph.filterable) if c["props"] else None
        rows = np.ones(n, dtype=bool)
        if self.embedder is not None:
            vectors = _embed_rows(self.embedder, texts, ~problems.bad, self.dim, c["text"], problems)
            column = c["text"] or "text"
        elif self.array is not None:
            vectors = _array_rows(self.array, batch.offset, n, self.dim, "rows")
            column = "vector= array"
        else:
            vectors, _ = _vector_column(cols[c["vector"]], self.dim, c["vector"], problems, optional=False)
            column = c["vector"]
        _check_vectors(vectors, rows & ~problems.bad, self.metric, column, problems)
        payload = {"keys": keys, "vectors": vectors, "labels": labels, "tenants": tenants, "texts": texts,
                   "ts": ts, "props": props, "ids": {"key": (keys, cols[c["key"]])}}
        return problems, payload

    def apply(self, p: dict, problems: _Problems) -> None:
        keys, vectors, labels, tenants, texts, ts, props = (p["keys"], p["vectors"], p["labels"], p["tenants"],
                                                            p["texts"], p["ts"], p["props"])
        keep = ~problems.bad if problems else None
        if self.upsert and len(set(keys)) < len(keys):
            # A key on several good rows: the last one is written, as if each row were a batch.
            keep = np.ones(len(keys), dtype=bool) if keep is None else keep
            last = {key: row for row, key in enumerate(keys) if keep[row]}
            keep &= np.fromiter((last.get(key) == row for row, key in enumerate(keys)), dtype=bool, count=len(keys))
        if keep is not None:
            idx = np.flatnonzero(keep).tolist()
            keys = [keys[i] for i in idx]
            vectors = np.ascontiguousarray(vectors[keep])
            labels, tenants, texts, props = (_select(v, keep, idx) for v in (labels, tenants, texts, props))
            ts = None if ts is None else ts[keep]
        write = self.graph.upsert_nodes if self.upsert else self.graph.add_nodes
        write(keys, vectors, labels=labels, texts=texts, tenants=tenants, ts=ts, props=props)
        _record_embedder(self)


def _record_embedder(plan: Any) -> None:
    """Records the plan's embedder in the graph once a batch it embedded has been written."""
    if plan.embedder is not None and not getattr(plan, "recorded", False):
        plan.graph.use_embedder(plan.embedder)
        plan.recorded = True


class _EdgePlan:
    def __init__(self, graph: Any, columns: dict, array: Optional[np.ndarray], embedder: Any,
                 text_keys: bool = False, int_keys: bool = False) -> None:
        self.graph, self.columns, self.array, self.embedder = graph, columns, array, embedder
        self.text_keys, self.int_keys = text_keys, int_keys
        self.dim, self.metric = graph.dim, graph.metric

    def prepare(self, batch: _Batch) -> tuple:
        c, n, cols = self.columns, batch.n, batch.columns
        problems = _Problems(n, batch.problems)
        ends = []
        for field in ("src", "dst"):
            col = cols[c[field]]
            if self.text_keys and self.int_keys:
                col = _int_key_column(col, c[field], problems)
            ends.append(_key_column(col, c[field], problems))
        src, dst = ends
        hint = self.text_keys and not self.int_keys  # "12" dangling where the int 12 is a node
        _in_graph(self.graph, src, problems, c["src"], "is not a node of the graph (dangling edge)", want=True,
                  int_hint=hint)
        _in_graph(self.graph, dst, problems, c["dst"], "is not a node of the graph (dangling edge)", want=True,
                  int_hint=hint)
        rels = _string_column(cols[c["rel"]], c["rel"], problems) if c["rel"] else None
        weights = _weight_column(cols[c["weight"]], c["weight"], problems) if c["weight"] else None
        ts = _ts_column(cols[c["ts"]], c["ts"], problems) if c["ts"] else None
        texts = _string_column(cols[c["text"]], c["text"], problems) if c["text"] else None
        props = _props_column(cols[c["props"]], c["props"], problems) if c["props"] else None
        vectors = has = None
        if self.embedder is not None:
            vectors = _embed_rows(self.embedder, texts, ~problems.bad, self.dim, c["text"], problems)
            has, column = np.ones(n, dtype=bool), c["text"] or "text"
        elif self.array is not None:
            vectors = _array_rows(self.array, batch.offset, n, self.dim, "rows")
            has, column = np.ones(n, dtype=bool), "vector= array"
        elif c["vector"]:
            vectors, has = _vector_column(cols[c["vector"]], self.dim, c["vector"], problems, optional=True)
            column = c["vector"]
            if not has.any():
                vectors = has = None
        if vectors is not None:
            _check_vectors(vectors, has & ~problems.bad, self.metric, column, problems)
        payload = {"src": src, "dst": dst, "rels": rels, "weights": weights, "ts": ts, "texts": texts,
                   "props": props, "vectors": vectors, "has": has,
                   "ids": {"src": (src, cols[c["src"]]), "dst": (dst, cols[c["dst"]])}}
        return problems, payload

    def apply(self, p: dict, problems: _Problems) -> None:
        keep = ~problems.bad
        idx = np.flatnonzero(keep).tolist() if problems else None
        if idx is not None:
            p = dict(p)
            for name in ("src", "dst", "rels", "texts", "props"):
                p[name] = _select(p[name], keep, idx)
            for name in ("weights", "ts", "vectors", "has"):
                if p[name] is not None:
                    p[name] = p[name][keep]
        has = p["has"]
        n = len(p["src"])
        if has is None or has.all():
            runs = [(0, n, has is not None)]
        else:  # runs of rows with / without a vector, in source order
            cuts = np.flatnonzero(np.diff(has.astype(np.int8))) + 1
            bounds = [0, *cuts.tolist(), n]
            runs = [(lo, hi, bool(has[lo])) for lo, hi in zip(bounds[:-1], bounds[1:])]
        for lo, hi, with_vectors in runs:
            def part(values, lo=lo, hi=hi):
                return None if values is None else values[lo:hi]

            self.graph.add_edges(
                part(p["src"]), part(p["dst"]), rels=part(p["rels"]), weights=part(p["weights"]), ts=part(p["ts"]),
                texts=part(p["texts"]), props=part(p["props"]),
                vectors=np.ascontiguousarray(p["vectors"][lo:hi]) if with_vectors else None)
            if with_vectors:
                _record_embedder(self)


def _array_rows(array: np.ndarray, offset: int, n: int, dim: int, what: str) -> np.ndarray:
    if array.shape[1] != dim:
        raise DimensionMismatchError(f"vector= array has {array.shape[1]} columns, the graph's dim is {dim}")
    if offset + n > array.shape[0]:
        raise InvalidArgumentError(f"vector= array has {array.shape[0]} rows, but the source has more {what} "
                                   f"(at least {offset + n}); it must have one row per source row")
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(array[offset:offset + n], dtype=np.float32)


def _select(values: Optional[list], keep: np.ndarray, idx: list) -> Optional[list]:
    if values is None:
        return None
    return [values[i] for i in idx]
