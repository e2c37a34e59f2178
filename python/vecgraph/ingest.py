"""Bulk ingestion of nodes and edges from Arrow, Parquet, Arrow IPC, JSONL, CSV, pandas and
networkx, in bounded memory, with row-level validation and a rejects file.

>>> import numpy as np, pyarrow as pa, vecgraph as vg
>>> g = vg.Graph(dim=4)
>>> table = pa.table({"id": ["a", "b"], "vector": [[1, 0, 0, 0], [0, 1, 0, 0]], "label": ["x", "y"]})
>>> print(vg.ingest.nodes(g, table, progress=False))  # doctest: +ELLIPSIS
2 of 2 rows accepted, 0 rejected, in 1 batch (... s, ... rows/s)
>>> _ = vg.ingest.edges(g, pa.table({"source": ["a"], "target": ["b"], "type": ["knows"]}), progress=False)
>>> g.neighbors("a")
[Edge(src='a', rel='knows', dst='b', weight=1.0)]

How it works: the source is read in batches of ``batch_rows`` rows (row ``i`` of the source is
in batch ``i // batch_rows``); each batch is converted to columns and checked row by row with
vectorised NumPy checks; only then is it written with one :meth:`Graph.add_nodes` (or
``upsert_nodes`` / ``add_edges``) call. A batch that fails validation is never written, so it
leaves no trace in the graph or its write-ahead log. Memory stays bounded by a batch, whatever
the size of the source: Parquet is decoded 8,192 rows at a time through a 1 MB read buffer,
Arrow IPC batch by batch (memory-mapped), CSV block by block (pyarrow's streaming reader) and
JSONL ``batch_rows`` lines at a time. At 384-d, a batch of 65,536 rows holds 100 MB of float32
vectors.

Rows are numbered from 0 over the whole source (for JSONL: over the non-blank lines).
"""

from __future__ import annotations

import contextlib
import csv as _csv
import dataclasses
import datetime as _dt
import itertools
import json
import math
import os
import re
import stat
import sys
import time
from collections.abc import Iterable, Iterator
from typing import Any, Callable, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .embedders import check_embedder, check_output
from .errors import DimensionMismatchError, InvalidArgumentError, StorageError, _short
from .graph import _filterable_mismatch

__all__ = ["nodes", "edges", "from_networkx", "IngestReport", "IngestError"]

_INT64_MAX = 2**63 - 1
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_ONE_US = _dt.timedelta(microseconds=1)

Source = Any  # str | os.PathLike | pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable | pandas.DataFrame


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
        row: the bad row's number in the source (0-based, over the whole source).
        column: the source column at fault (None for a row that could not be parsed at all).
        reason: what is wrong with it.
        report: :class:`IngestReport` of what was done before: earlier batches stay written.
    """

    def __init__(self, message: str, *, row: int, column: Optional[str], reason: str, report: IngestReport):
        super().__init__(message)
        self.row, self.column, self.reason, self.report = row, column, reason, report


# ====================================================================== sources


class _Batch:
    """Rows [offset, offset + n) of the source as columns (each a pyarrow Array or a Python
    list), plus rows already known to be bad (a JSONL line that is not JSON)."""

    __slots__ = ("offset", "n", "columns", "problems")

    def __init__(self, offset: int, n: int, columns: dict, problems: Optional[dict] = None) -> None:
        self.offset, self.n, self.columns, self.problems = offset, n, columns, problems or {}


class _Source:
    """A source: its column names, its row count when known, its path when it is a file, and
    its batches of exactly ``batch_rows`` rows (the last one may be shorter)."""

    names: list
    total: Optional[int] = None
    path: Optional[str] = None
    schemaless = False  # JSONL / networkx: optional columns with one default name are always read
    empty = False  # a file without a single row nor a header (0 bytes, or blank lines only)
    text_keys = False  # CSV: key columns are text, read as str (key_type="int" parses them)

    def batches(self, wanted: list, batch_rows: int) -> Iterator[_Batch]:
        raise NotImplementedError

    def close(self) -> None:
        pass


def _concat(parts: list) -> pa.RecordBatch:
    if len(parts) == 1:
        return parts[0]
    if hasattr(pa, "concat_batches"):
        return pa.concat_batches(parts)
    return pa.Table.from_batches(parts).combine_chunks().to_batches()[0]


def _rechunk(batches: Iterable, batch_rows: int) -> Iterator[pa.RecordBatch]:
    """Record batches of exactly batch_rows rows (the last may be shorter) from batches of any size."""
    pending: list = []
    count = 0
    for batch in batches:
        start = 0
        while start < batch.num_rows:
            take = min(batch_rows - count, batch.num_rows - start)
            pending.append(batch.slice(start, take) if take != batch.num_rows else batch)
            count += take
            start += take
            if count == batch_rows:
                out = _concat(pending)
                pending, count = [], 0  # the pieces go before the batch is used
                yield out
                del out  # nor is it kept while the next one is read
    if count:
        yield _concat(pending)


class _ArrowSource(_Source):
    def __init__(self, names: list, open_batches: Callable[[list, int], Iterable], total: Optional[int] = None,
                 path: Optional[str] = None, close: Optional[Callable[[], None]] = None) -> None:
        self.names, self._open, self.total, self.path, self._close = list(names), open_batches, total, path, close

    def batches(self, wanted: list, batch_rows: int) -> Iterator[_Batch]:
        offset = 0
        for record in _rechunk(self._open(wanted, batch_rows), batch_rows):
            batch = _Batch(offset, record.num_rows, {name: record.column(name) for name in wanted})
            offset += record.num_rows
            del record
            yield batch
            del batch  # one batch in memory at a time: not kept while the next is read

    def close(self) -> None:
        if self._close is not None:
            self._close()


class _JsonlSource(_Source):
    """JSON Lines read ``batch_rows`` lines at a time and parsed with the json module, so every
    record keeps its own types (int and str keys, props objects of any shape, fields that
    appear only in later records). The vector of each record becomes a float32 array as soon as
    its line is parsed, so a batch holds 4 bytes per value, not a Python float."""

    schemaless = True
    _PEEK = 1000  # records read to learn the field names

    def __init__(self, path: str) -> None:
        self.path = path
        self.vector_column: Optional[str] = None
        self._file = _open_binary(path)
        self._first = self._read(self._PEEK)
        self.empty = not self._first  # _read stops early only at the end of the file
        names: dict = {}
        for record in self._first:
            if isinstance(record, dict):
                names.update(dict.fromkeys(record))
        self.names = list(names)

    def _read(self, count: int) -> list:
        records = []
        vector = self.vector_column
        for line in self._file:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
            except ValueError as e:
                record = _BadLine(f"not valid JSON: {e}")
            if vector is not None and type(record) is dict:
                _compact_vector(record, vector)
            records.append(record)
            if len(records) == count:
                break
        return records

    def batches(self, wanted: list, batch_rows: int) -> Iterator[_Batch]:
        offset = 0
        pending, self._first = self._first or [], None
        if self.vector_column is not None:
            for record in pending:
                if type(record) is dict:
                    _compact_vector(record, self.vector_column)
        while True:
            records = pending[:batch_rows]
            pending = pending[batch_rows:]
            if len(records) < batch_rows:
                records += self._read(batch_rows - len(records))
            if not records:
                return
            problems = {}
            columns: dict = {name: [] for name in wanted}
            for row, record in enumerate(records):
                if not isinstance(record, dict):
                    reason = record.reason if isinstance(record, _BadLine) else \
                        f"a JSON {type(record).__name__} where a JSON object was expected"
                    problems[row] = (None, reason)
                    record = {}
                for name in wanted:
                    columns[name].append(record.get(name))
            batch = _Batch(offset, len(records), columns, problems)
            offset += len(records)
            del records, columns
            yield batch
            del batch

    def close(self) -> None:
        self._file.close()


def _compact_vector(record: dict, name: str) -> None:
    """A list of numbers under ``name`` becomes a float32 array (left alone if it is anything
    else: the row checks report it)."""
    value = record.get(name)
    if type(value) is list:
        try:
            with np.errstate(over="ignore"):
                array = np.array(value, dtype=np.float32)
        except (TypeError, ValueError):
            return
        if array.ndim == 1:
            record[name] = array


def _open_binary(path: str):
    lower = path.lower()
    if lower.endswith(".gz"):
        import gzip

        return gzip.open(path, "rb")
    if lower.endswith(".bz2"):
        import bz2

        return bz2.open(path, "rb")
    return open(path, "rb")


class _BadLine:
    __slots__ = ("reason",)

    def __init__(self, reason: str) -> None:
        self.reason = reason


class _ListSource(_Source):
    """Chunks of Python rows (networkx), each turned into columns by ``columns_of(chunk)``."""

    schemaless = True

    def __init__(self, names: list, rows: Iterable, total: Optional[int], columns_of: Callable) -> None:
        self.names, self._rows, self.total, self._columns_of = names, rows, total, columns_of

    def batches(self, wanted: list, batch_rows: int) -> Iterator[_Batch]:
        offset = 0
        it = iter(self._rows)
        while True:
            chunk = list(itertools.islice(it, batch_rows))
            if not chunk:
                return
            columns = self._columns_of(chunk)
            yield _Batch(offset, len(chunk), {name: columns[name] for name in wanted})
            offset += len(chunk)


class _PandasSource(_Source):
    def __init__(self, df: Any) -> None:
        self._df = df
        self._by_name = {str(c): c for c in df.columns}
        self.names = list(self._by_name)
        self.total = len(df)

    def batches(self, wanted: list, batch_rows: int) -> Iterator[_Batch]:
        df = self._df
        for start in range(0, len(df), batch_rows):
            part = df.iloc[start:start + batch_rows]
            columns = {}
            for name in wanted:
                series = part[self._by_name[name]]
                if series.dtype == object and name == self._props_name:
                    columns[name] = series.tolist()  # dicts stay dicts, whatever their shape
                    continue
                try:
                    columns[name] = pa.array(series, from_pandas=True)
                except (pa.ArrowInvalid, pa.ArrowTypeError, pa.ArrowNotImplementedError):
                    columns[name] = series.tolist()  # mixed types: checked row by row
            yield _Batch(start, len(part), columns)

    _props_name: Optional[str] = None


def _suffix(path: str) -> str:
    name = os.path.basename(path).lower()
    for compressed in (".gz", ".bz2"):
        if name.endswith(compressed) and name[: -len(compressed)].endswith((".csv", ".jsonl", ".ndjson")):
            name = name[: -len(compressed)]
    return os.path.splitext(name)[1]


def _open_source(source: Source, batch_rows: int) -> _Source:
    """A _Source for whatever was passed."""
    if isinstance(source, (str, os.PathLike)):
        path = os.fspath(source)
        if not isinstance(path, str):
            raise TypeError(f"source path must be a str, got {path!r}")
        if not os.path.isfile(path):
            raise FileNotFoundError(f"ingest source {path} does not exist or is not a file")
        suffix = _suffix(path)
        if suffix in (".parquet", ".pq"):
            return _parquet_source(path)
        if suffix in (".arrow", ".feather", ".ipc", ".arrows"):
            return _ipc_source(path)
        if suffix in (".jsonl", ".ndjson"):
            return _JsonlSource(path)
        if suffix in (".csv", ".tsv"):
            return _csv_source(path, delimiter="\t" if suffix == ".tsv" else ",")
        raise InvalidArgumentError(f"cannot tell the format of {path} from its name; expected .parquet, .arrow, "
                                   ".feather, .ipc, .jsonl, .ndjson or .csv (or pass a pyarrow Table)")
    if isinstance(source, pa.Table):
        return _ArrowSource(source.schema.names, lambda wanted, _: source.select(wanted).to_batches(), len(source))
    if isinstance(source, pa.RecordBatch):
        return _ArrowSource(source.schema.names, lambda wanted, _: [source.select(wanted)], source.num_rows)
    if isinstance(source, pa.RecordBatchReader):
        return _ArrowSource(source.schema.names, lambda wanted, _: (b.select(wanted) for b in source))
    module = type(source).__module__ or ""
    if module.startswith("pandas") and hasattr(source, "iloc") and hasattr(source, "columns"):
        return _PandasSource(source)
    if module.startswith("networkx"):
        raise TypeError("for a networkx graph use vecgraph.ingest.from_networkx(graph, G)")
    if isinstance(source, Iterable) and not isinstance(source, (bytes, dict)):
        return _batches_source(source)
    raise TypeError(f"cannot ingest from {type(source).__name__}: pass a file path, a pyarrow Table, RecordBatch, "
                    "RecordBatchReader or iterable of RecordBatches, or a pandas DataFrame")


def _batches_source(source: Iterable) -> _Source:
    total = sum(b.num_rows for b in source) if isinstance(source, (list, tuple)) and all(
        isinstance(b, (pa.RecordBatch, pa.Table)) for b in source) else None
    it = iter(source)
    first = next(it, None)
    if first is None:
        return _ArrowSource([], lambda wanted, _: [], 0)
    if not isinstance(first, (pa.RecordBatch, pa.Table)):
        raise TypeError(f"an iterable source must yield pyarrow RecordBatches, got {type(first).__name__}")
    schema = first.schema

    def gen(wanted: list, _: int) -> Iterator[pa.RecordBatch]:
        for number, item in enumerate(itertools.chain([first], it)):
            if not isinstance(item, (pa.RecordBatch, pa.Table)):
                raise TypeError(f"item {number} of the source is a {type(item).__name__}, not a RecordBatch")
            if not item.schema.equals(schema):
                raise InvalidArgumentError(f"record batch {number} has another schema than the first one:\n"
                                           f"{item.schema}\nexpected:\n{schema}")
            yield from (item.select(wanted).to_batches() if isinstance(item, pa.Table) else [item.select(wanted)])

    return _ArrowSource(schema.names, gen, total)


def _parquet_source(path: str) -> _Source:
    import pyarrow.parquet as pq

    try:
        # buffer_size streams each column chunk through a 1 MB buffer instead of reading it whole,
        # and pieces of at most 8192 rows keep the decoder's temporaries (values, repetition and
        # definition levels of list columns) small; _rechunk joins them into batches.
        pf = pq.ParquetFile(path, pre_buffer=False, buffer_size=1 << 20)
    except (pa.ArrowException, OSError) as e:
        raise InvalidArgumentError(f"{path} is not a readable Parquet file: {e}") from None

    def open_batches(wanted: list, batch_rows: int) -> Iterator[pa.RecordBatch]:
        return pf.iter_batches(batch_size=min(batch_rows, 8192), columns=wanted, use_threads=True)

    return _ArrowSource(pf.schema_arrow.names, open_batches, pf.metadata.num_rows, path, getattr(pf, "close", None))


def _ipc_source(path: str) -> _Source:
    from pyarrow import ipc

    mapped = pa.memory_map(path, "r")
    try:
        reader = ipc.open_file(mapped)
    except pa.ArrowInvalid:
        mapped.seek(0)
        try:
            stream = ipc.open_stream(mapped)
        except pa.ArrowInvalid as e:
            mapped.close()
            raise InvalidArgumentError(f"{path} is neither an Arrow IPC file nor an Arrow IPC stream: {e}") from None
        return _ArrowSource(stream.schema.names, lambda wanted, _: (b.select(wanted) for b in stream), None, path,
                            mapped.close)
    try:
        total = reader.count_rows()
    except (AttributeError, pa.ArrowException):
        total = None
    return _ArrowSource(
        reader.schema.names,
        lambda wanted, _: (reader.get_batch(i).select(wanted) for i in range(reader.num_record_batches)),
        total, path, mapped.close)


def _csv_source(path: str, delimiter: str) -> _Source:
    import pyarrow.csv as pacsv

    opener = open
    if path.lower().endswith((".gz", ".bz2")):
        import bz2
        import gzip

        opener = gzip.open if path.lower().endswith(".gz") else bz2.open
    try:
        with opener(path, "rt", encoding="utf-8-sig", newline="") as f:
            header = next((row for row in _csv.reader(f, delimiter=delimiter) if row), None)
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidArgumentError(f"cannot read the header of {path}: {e}") from None
    source: _ArrowSource

    def open_batches(wanted: list, _: int) -> Iterator[pa.RecordBatch]:
        if source.empty:
            return iter(())
        # open_csv reads block by block; string fields are read as strings whatever they look like
        # (a label "123", a vector "[0.1, 0.2]", a key "007"); ts and weight columns keep their
        # inferred types.
        return pacsv.open_csv(
            path,
            read_options=pacsv.ReadOptions(block_size=16 << 20),
            parse_options=pacsv.ParseOptions(delimiter=delimiter),
            convert_options=pacsv.ConvertOptions(
                include_columns=wanted,
                column_types={name: pa.string() for name in wanted if name in source.string_columns},
                null_values=[""], strings_can_be_null=True),
        )

    source = _ArrowSource(header or [], open_batches, 0 if header is None else None, path)
    source.empty = header is None
    source.text_keys = True
    source.string_columns = set()
    return source


# ====================================================================== columns

_NODE_DEFAULTS = {"key": ("key", "id"), "vector": ("vector",), "label": ("label",), "tenant": ("tenant",),
                  "ts": ("ts",), "text": ("text",), "props": ("props",)}
_EDGE_DEFAULTS = {"src": ("src", "source"), "dst": ("dst", "target"), "rel": ("rel", "type"),
                  "weight": ("weight",), "ts": ("ts",), "text": ("text",), "props": ("props",),
                  "vector": ("vector",)}
_STRING_FIELDS = ("label", "tenant", "text", "props", "rel", "vector")
_KEY_FIELDS = ("key", "src", "dst")  # read from CSV as text too, whatever key_type says
# Read from CSV as text and parsed here, so that one bad cell is one bad row: Arrow's CSV type
# inference would make the whole column text, or fail the read in a later block.
_TEXT_PARSED_FIELDS = ("weight", "ts")


def _resolve(source: _Source, given: dict, defaults: dict, required: tuple) -> dict:
    """field -> source column name (or None when absent), from the arguments and the defaults."""
    names = source.names
    if source.empty:  # no row to read: every field absent, none missing
        return {field: None for field in defaults}
    shown = ", ".join(map(repr, names[:30])) + (", ..." if len(names) > 30 else "") if names else "none"
    resolved = {}
    for field, candidates in defaults.items():
        value = given.get(field)
        if value is not None:
            if not isinstance(value, str):
                raise TypeError(f"{field}= must name a column (a str), got {type(value).__name__}")
            if value not in names and not (source.schemaless and field not in required):
                raise InvalidArgumentError(f"{field}={value!r}: the source has no column {value!r}; "
                                           f"its columns are {shown}")
            resolved[field] = value
            continue
        found = next((c for c in candidates if c in names), None)
        if found is None and source.schemaless and len(candidates) == 1 and field not in required:
            found = candidates[0]  # JSONL: a field the first records lack may appear later
        if found is None and field in required:
            options = " or ".join(repr(c) for c in candidates)
            raise InvalidArgumentError(f"the source has no {field} column ({options}); its columns are {shown}; "
                                       f"name it with {field}=")
        resolved[field] = found
    return resolved


class _Problems:
    """The first problem of each bad row of a batch: row -> (column, reason)."""

    def __init__(self, n: int, known: dict) -> None:
        self.bad = np.zeros(n, dtype=bool)
        self.where: dict = {}
        for row, problem in known.items():
            self.bad[row] = True
            self.where[row] = problem

    def add(self, row: int, column: Optional[str], reason: str) -> None:
        if not self.bad[row]:
            self.bad[row] = True
            self.where[row] = (column, reason)

    def add_mask(self, mask: np.ndarray, column: Optional[str], reason: Union[str, Callable[[int], str]]) -> None:
        new = mask & ~self.bad
        if new.any():
            for row in np.flatnonzero(new).tolist():
                self.where[row] = (column, reason(row) if callable(reason) else reason)
            self.bad |= new

    def __bool__(self) -> bool:
        return bool(self.where)


def _structural(column: str, message: str) -> InvalidArgumentError:
    return InvalidArgumentError(f"column {column!r}: {message}")


def _is_string_type(t: pa.DataType) -> bool:
    return pa.types.is_string(t) or pa.types.is_large_string(t) or getattr(pa.types, "is_string_view", bool)(t)


def _decode(col: pa.Array) -> pa.Array:
    return col.dictionary_decode() if pa.types.is_dictionary(col.type) else col


def _null_mask(col: pa.Array) -> np.ndarray:
    if col.null_count == 0:
        return np.zeros(len(col), dtype=bool)
    return col.is_null().to_numpy(zero_copy_only=False)


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and math.isnan(value)) or type(value).__name__ in (
        "NAType", "NaTType")


def _key_column(col: Any, column: str, problems: _Problems) -> list:
    """Keys as a list of str / int (None where the row is bad)."""
    if isinstance(col, pa.Array):
        col = _decode(col)
        t = col.type
        missing_key = "missing key (null)"
        if pa.types.is_floating(t):  # pandas turns an int column with missing values into floats
            values = col.to_numpy(zero_copy_only=False).astype(np.float64)  # nulls become NaN
            missing = np.isnan(values)
            present = values[~missing]
            if np.array_equal(present, np.trunc(present)) and bool((np.abs(present) < 2.0**63).all()):
                col, t = pa.array(np.where(missing, 0, values).astype(np.int64), mask=missing), pa.int64()
                missing_key = "missing key (null or NaN)"
        if pa.types.is_integer(t):
            if col.null_count == 0:
                keys = col.to_numpy().tolist()
            else:
                keys = col.to_pylist()
                problems.add_mask(_null_mask(col), column, missing_key)
            if pa.types.is_uint64(t) and len(col) and (pc.max(col).as_py() or 0) > _INT64_MAX:
                too_big = pc.fill_null(pc.greater(col, pa.scalar(_INT64_MAX, pa.uint64())), False)
                too_big = too_big.to_numpy(zero_copy_only=False)
                problems.add_mask(too_big, column, lambda r: f"key {keys[r]} is beyond int64")
                keys = [None if b else k for k, b in zip(keys, too_big)]
            return keys
        if _is_string_type(t) or pa.types.is_null(t):
            keys = col.to_pylist()
            if col.null_count:
                problems.add_mask(_null_mask(col), column, "missing key (null)")
            return keys
        raise _structural(column, f"keys must be strings or integers, got Arrow type {t}")
    keys = list(col)
    for row, key in enumerate(keys):
        t = type(key)
        if t is str:
            continue
        if t is int:
            if not -_INT64_MAX - 1 <= key <= _INT64_MAX:
                problems.add(row, column, f"key {key} is outside the int64 range")
                keys[row] = None
            continue
        if _is_missing(key):
            problems.add(row, column, "missing key (null)" if key is None else f"missing key ({key})")
            keys[row] = None
        elif isinstance(key, (int, np.integer)) and not isinstance(key, (bool, np.bool_)):
            keys[row] = int(key)
            if not -_INT64_MAX - 1 <= keys[row] <= _INT64_MAX:
                problems.add(row, column, f"key {key} is outside the int64 range")
                keys[row] = None
        elif isinstance(key, str):
            keys[row] = str(key)
        else:
            problems.add(row, column,
                         f"a key must be a str or an int, got {type(key).__name__} {_short(key)}")
            keys[row] = None
    return keys


_INT_TEXT = re.compile(r"\s*[+-]?[0-9]+\s*", re.ASCII)


def _parse_int(text: str) -> Optional[int]:
    """The integer ``text`` spells (optional sign, decimal digits, blanks around), else None."""
    if not _INT_TEXT.fullmatch(text):
        return None
    try:
        return int(text)
    except ValueError:  # more digits than int() converts
        return None


def _int_key_column(col: Any, column: str, problems: _Problems) -> Any:
    """Keys read as text (CSV) parsed as int64 integers, for key_type="int": optional sign,
    decimal digits, surrounding blanks ignored. Any other text is a bad row."""
    if not isinstance(col, pa.Array):
        return col
    col = _decode(col)
    if not _is_string_type(col.type):
        return col
    trimmed = pc.utf8_trim_whitespace(col)
    if pc.all(pc.match_substring_regex(trimmed, r"^[+-]?[0-9]+$")).as_py() is not False:
        try:
            return pc.cast(pc.replace_substring_regex(trimmed, r"^\+", ""), pa.int64())
        except pa.ArrowInvalid:
            pass  # beyond int64: found row by row below
    values: list = []
    for row, text in enumerate(col.to_pylist()):
        value = None
        if text is not None:
            value = _parse_int(text)
            if value is None or not -_INT64_MAX - 1 <= value <= _INT64_MAX:
                problems.add(row, column, f'key {text!r} is not an int64 integer (key_type="int")')
                value = None
        values.append(value)
    return pa.array(values, pa.int64())


def _string_column(col: Any, column: str, problems: _Problems) -> Optional[list]:
    """A list of str / None, or None when the whole column is null."""
    if isinstance(col, pa.Array):
        col = _decode(col)
        if pa.types.is_null(col.type) or col.null_count == len(col):
            return None
        if not _is_string_type(col.type):
            raise _structural(column, f"must hold strings, got Arrow type {col.type}")
        return col.to_pylist()
    values = list(col)
    for row, value in enumerate(values):
        if type(value) is str or value is None:
            continue
        if isinstance(value, str):
            values[row] = str(value)
        elif _is_missing(value):
            values[row] = None
        else:
            problems.add(row, column, f"must be a str, got {type(value).__name__}")
            values[row] = None
    return values


def _ts_column(col: Any, column: str, problems: _Problems) -> Optional[np.ndarray]:
    """int64 microseconds since the epoch (0 where null), or None when the whole column is null."""
    if isinstance(col, pa.Array):
        t = col.type
        if pa.types.is_null(t) or col.null_count == len(col):
            return None
        if _is_string_type(t):  # CSV reads ts as text: integers or ISO 8601 timestamps, row by row if mixed
            parsed = _cast_text(col, (pa.int64(), pa.timestamp("us"), pa.timestamp("us", tz="UTC")))
            if parsed is None:
                return _ts_from_text(col, column, problems)
            col, t = parsed, parsed.type
        if pa.types.is_floating(t):  # pandas turns an int column with blanks into float64 with NaN
            return _ts_from_floats(col.to_numpy(zero_copy_only=False).astype(np.float64), column, problems)
        if pa.types.is_timestamp(t):
            col = col.cast(pa.timestamp("us", tz=t.tz), safe=False).cast(pa.int64())
        elif pa.types.is_date(t):
            col = col.cast(pa.timestamp("us")).cast(pa.int64())
        elif not pa.types.is_integer(t):
            raise _structural(column, f"ts must hold integers (microseconds since the epoch) or timestamps, "
                                      f"got Arrow type {t}")
        if pa.types.is_uint64(col.type):
            too_big = pc.fill_null(pc.greater(col, pa.scalar(_INT64_MAX, pa.uint64())), False)
            problems.add_mask(too_big.to_numpy(zero_copy_only=False), column, "ts is beyond int64")
            col = pc.if_else(too_big, pa.scalar(0, pa.uint64()), col)
        return pc.fill_null(col, 0).cast(pa.int64()).to_numpy(zero_copy_only=False)
    values = list(col)
    out = np.zeros(len(values), dtype=np.int64)
    for row, value in enumerate(values):
        if _is_missing(value):
            continue
        if isinstance(value, _dt.datetime):
            value = (value if value.tzinfo else value.replace(tzinfo=_dt.timezone.utc)) - _EPOCH
            value = value // _ONE_US
        elif isinstance(value, str):  # JSON has no timestamps: ISO 8601 text, as in a CSV
            value, problem = _ts_from_one_text(value)
            if problem:
                problems.add(row, column, problem)
                continue
        elif isinstance(value, (float, np.floating)) and float(value).is_integer():
            value = int(value)
        if isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_)):
            if -_INT64_MAX - 1 <= value <= _INT64_MAX:
                out[row] = value
            else:
                problems.add(row, column, f"ts {value} is outside the int64 range")
        else:
            problems.add(row, column, f"ts must be an int (microseconds since the epoch), got {type(value).__name__}")
    return out


def _cast_text(col: pa.Array, types: tuple) -> Optional[pa.Array]:
    """``col`` (text) cast to the first of ``types`` that parses every value, or None."""
    for t in types:
        try:
            return pc.cast(col, t)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
            continue
    return None


def _ts_from_one_text(text: str) -> tuple:
    """(microseconds, "") from an integer or an ISO 8601 date or timestamp (UTC when it names
    no offset), or (0, why not)."""
    try:
        value = int(text)
    except ValueError:
        try:
            stamp = _dt.datetime.fromisoformat(text.strip())
        except ValueError:
            return 0, f"ts {text!r} is neither an integer (microseconds since the epoch) nor an ISO 8601 timestamp"
        value = ((stamp if stamp.tzinfo else stamp.replace(tzinfo=_dt.timezone.utc)) - _EPOCH) // _ONE_US
    if not -_INT64_MAX - 1 <= value <= _INT64_MAX:
        return 0, f"ts {value} is outside the int64 range"
    return value, ""


def _ts_from_text(col: pa.Array, column: str, problems: _Problems) -> np.ndarray:
    """Row by row: an integer (microseconds since the epoch) or an ISO 8601 date or timestamp
    (UTC when it names no offset); anything else is a bad row. 0 where null."""
    out = np.zeros(len(col), dtype=np.int64)
    for row, text in enumerate(col.to_pylist()):
        if text is None:
            continue
        out[row], problem = _ts_from_one_text(text)
        if problem:
            problems.add(row, column, problem)
    return out


def _ts_from_floats(values: np.ndarray, column: str, problems: _Problems) -> np.ndarray:
    """Whole numbers of microseconds held as floats; NaN (a blank) is 0, as null is; a fraction,
    inf or a value past the int64 range is a bad row."""
    missing = np.isnan(values)
    bad = ~missing & ~(np.isfinite(values) & (values == np.trunc(values)) & (np.abs(values) < 2.0**63))
    for row in np.flatnonzero(bad):
        problems.add(int(row), column, f"ts {float(values[row])!r} is not a whole number of microseconds")
    return np.where(missing | bad, 0, values).astype(np.int64)


def _weights_from_text(col: pa.Array, column: str, problems: _Problems) -> np.ndarray:
    """float64 weights, row by row: a number, or a bad row (1.0 where null)."""
    values = np.ones(len(col), dtype=np.float64)
    for row, text in enumerate(col.to_pylist()):
        if text is None:
            continue
        try:
            values[row] = float(text)
        except ValueError:
            problems.add(row, column, f"weight {text!r} is not a number")
    return values


def _weight_column(col: Any, column: str, problems: _Problems) -> Optional[np.ndarray]:
    """float32 weights (1.0 where null), or None when the whole column is null."""
    if isinstance(col, pa.Array):
        t = col.type
        if pa.types.is_null(t) or col.null_count == len(col):
            return None
        parsed = _cast_text(col, (pa.float64(),)) if _is_string_type(t) else col  # CSV reads weights as text
        if parsed is None:  # a cell that is not a number: each such cell a bad row
            values = _weights_from_text(col, column, problems)
        elif not (pa.types.is_floating(parsed.type) or pa.types.is_integer(parsed.type)
                  or pa.types.is_decimal(parsed.type)):
            raise _structural(column, f"weights must be numbers, got Arrow type {t}")
        else:
            values = pc.fill_null(parsed.cast(pa.float64()), 1.0).to_numpy(zero_copy_only=False)
    else:
        values = np.ones(len(col), dtype=np.float64)
        for row, value in enumerate(col):
            if _is_missing(value):
                continue
            if isinstance(value, (int, float, np.integer, np.floating)) and not isinstance(value, (bool, np.bool_)):
                values[row] = value
            else:
                problems.add(row, column, f"a weight must be a number, got {type(value).__name__}")
    with np.errstate(over="ignore", invalid="ignore"):
        weights = values.astype(np.float32)
    problems.add_mask(~np.isfinite(weights), column,
                      lambda r: f"weight {float(values[r])!r} is not finite (or beyond float32)")
    return weights


def _props_column(col: Any, column: str, problems: _Problems,
                  filterable: Optional[dict] = None) -> Optional[list]:
    """A list of dict / None, or None when no row has props. With ``filterable`` ({name: type},
    the graph's), a row whose value for a declared property is of another type is a bad row."""
    if isinstance(col, pa.Array):
        col = _decode(col)
        t = col.type
        if pa.types.is_null(t) or col.null_count == len(col):
            return None
        if pa.types.is_struct(t):
            values = col.to_pylist()
        elif pa.types.is_map(t):
            values = [None if v is None else dict(v) for v in col.to_pylist()]
        elif _is_string_type(t) or pa.types.is_binary(t) or pa.types.is_large_binary(t):
            values = col.to_pylist()
        else:
            raise _structural(column, f"props must be a struct, a map or JSON strings, got Arrow type {t}")
    else:
        values = list(col)
    expected = "props must be a JSON object (a dict, or a str holding one) or null"
    for row, value in enumerate(values):
        if value is None:
            continue
        given = value
        if isinstance(value, (str, bytes)):
            if not value:
                values[row] = None
                continue
            kind = "a str" if isinstance(value, str) else "a bytes value"
            try:
                value = values[row] = json.loads(value)
            except ValueError as e:
                problems.add(row, column, f"{expected}, got {kind} that is not valid JSON "
                                          f"({_json_error(e)}): {_short(given)}")
                values[row] = None
                continue
            if value is None:  # JSON null: no props, as an empty cell or a null value
                continue
            if not isinstance(value, dict):
                problems.add(row, column, f"{expected}, got {kind} holding a JSON {_json_type(value)}, "
                                          f"not an object: {_short(given)}")
                values[row] = None
                continue
        elif not isinstance(value, dict):
            if _is_missing(value):
                values[row] = None
                continue
            problems.add(row, column, f"{expected}, got {type(value).__name__}: {_short(value)}")
            values[row] = None
            continue
        if filterable:
            mismatches = (_filterable_mismatch(name, kind, value.get(name)) for name, kind in filterable.items())
            mismatch = next((problem for problem in mismatches if problem is not None), None)
            if mismatch is not None:
                problems.add(row, column, mismatch)
                values[row] = None
                continue
        try:
            json.dumps(value, ensure_ascii=False, allow_nan=False)
        except (TypeError, ValueError) as e:
            problems.add(row, column, f"props must hold only JSON values (no NaN, inf or other objects), "
                                      f"got a {type(given).__name__} that does not ({e}): {_short(given)}")
            values[row] = None
    return values if any(v is not None for v in values) else None


def _json_type(value: Any) -> str:
    """The JSON name of what json.loads returned: object, array, string, number, boolean, null."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number"
    return {dict: "object", list: "array", str: "string"}.get(type(value), type(value).__name__)


def _json_error(e: ValueError) -> str:
    """What json.loads found wrong, and where (without repeating the text)."""
    if isinstance(e, json.JSONDecodeError):
        return f"{e.msg} at character {e.pos}"
    return str(e)


def _list_vectors(values: list, dim: int, column: str, problems: _Problems, optional: bool) -> np.ndarray:
    """Vectors from Python values (lists, arrays, or "[1, 2]" / "1 2" strings): float64 (n, dim)."""
    out = np.zeros((len(values), dim), dtype=np.float64)
    for row, value in enumerate(values):
        if value is None or (isinstance(value, float) and math.isnan(value)):
            if not optional:
                problems.add(row, column, "missing vector (null)")
            continue
        try:
            if isinstance(value, (str, bytes)):
                text = value.decode() if isinstance(value, bytes) else value
                array = np.array(text.strip().strip("[]").replace(",", " ").split(), dtype=np.float64)
            else:
                array = np.asarray(value, dtype=np.float64)
        except (TypeError, ValueError):
            problems.add(row, column, f"a vector must be a list of numbers, got {str(value)[:40]!r}")
            continue
        if array.ndim != 1 or array.shape[0] != dim:
            got = f"{array.shape[0]} values" if array.ndim == 1 else f"shape {array.shape}"
            problems.add(row, column, f"vector has {got}, the graph's dim is {dim}")
            continue
        out[row] = array
    return out


def _vector_column(col: Any, dim: int, column: str, problems: _Problems, optional: bool) -> tuple:
    """(float32 (n, dim) C-contiguous, has_vector bool (n,)) from a fixed-size-list, list or
    string column or Python values; rows that are null (optional) or bad hold zeros."""
    n = len(col)
    if isinstance(col, pa.Array):
        t = col.type
        if pa.types.is_null(t):
            if not optional:
                problems.add_mask(np.ones(n, dtype=bool), column, "missing vector (null)")
            return np.zeros((n, dim), np.float32), np.zeros(n, dtype=bool)
        if _is_string_type(t):
            matrix = _list_vectors(col.to_pylist(), dim, column, problems, optional)
            has = ~_null_mask(col)
        elif pa.types.is_fixed_size_list(t) or pa.types.is_list(t) or pa.types.is_large_list(t):
            value_type = t.value_type
            if not (pa.types.is_floating(value_type) or pa.types.is_integer(value_type)):
                raise _structural(column, f"vectors must hold numbers, got Arrow type {t}")
            nulls = _null_mask(col)
            has = ~nulls
            if not optional:
                problems.add_mask(nulls, column, "missing vector (null)")
            if pa.types.is_fixed_size_list(t):
                lengths = np.full(n, t.list_size, dtype=np.int64)
            else:
                lengths = pc.fill_null(pc.list_value_length(col), 0).to_numpy(zero_copy_only=False)
            good = has & (lengths == dim)
            problems.add_mask(has & ~good, column, lambda r: f"vector has {lengths[r]} values, the graph's dim is {dim}")
            if good.all():
                flat = col.flatten()  # honours the slice offset of the batch
            else:
                flat = col.filter(pa.array(good)).flatten()
            values = flat.to_numpy(zero_copy_only=False)  # zero-copy for float32 without nulls
            if good.all():
                matrix = values.reshape(n, dim)
            else:
                matrix = np.zeros((n, dim), dtype=values.dtype if values.dtype.kind == "f" else np.float64)
                matrix[good] = values.reshape(-1, dim)
        else:
            raise _structural(column, f"vectors must be a fixed-size list, a list or a string column, "
                                      f"got Arrow type {t}")
    else:
        values = list(col)
        matrix = None
        if not optional:
            try:  # the common case: every row is a list of dim numbers
                matrix = np.array(values, dtype=np.float64)
                if matrix.shape != (n, dim):
                    matrix = None
            except (TypeError, ValueError):
                matrix = None
        if matrix is None:
            matrix = _list_vectors(values, dim, column, problems, optional)
        has = np.array([not _is_missing(v) if not isinstance(v, (list, np.ndarray)) else True for v in values],
                       dtype=bool) if n else np.zeros(0, dtype=bool)
    with np.errstate(over="ignore", invalid="ignore"):
        matrix = np.ascontiguousarray(matrix, dtype=np.float32)
    return matrix, has


def _check_vectors(matrix: np.ndarray, rows: np.ndarray, metric: str, column: str, problems: _Problems) -> None:
    """NaN / inf (also float64 values beyond float32) and, under "cos", all-zero rows, among ``rows``."""
    finite = np.isfinite(matrix).all(axis=1)
    problems.add_mask(rows & ~finite, column, "NaN or inf in the vector (or a value beyond float32's range)")
    if metric == "cos":
        problems.add_mask(rows & ~matrix.any(axis=1), column,
                          "all-zero vector (metric 'cos' normalises vectors, so it needs a non-zero one)")


def _embed_rows(embedder: Any, texts: Optional[list], rows: np.ndarray, dim: int, text_column: Optional[str],
                problems: _Problems) -> np.ndarray:
    """Vectors for ``rows`` (bool mask) computed from their texts; other rows hold zeros."""
    n = len(rows)
    column = text_column or "text"
    if texts is None:
        problems.add_mask(rows, column, "empty text: nothing to embed")
    else:
        empty = np.fromiter((not t for t in texts), dtype=bool, count=n)
        problems.add_mask(rows & empty, column, "empty text: nothing to embed")
    matrix = np.zeros((n, dim), dtype=np.float32)
    todo = np.flatnonzero(rows & ~problems.bad)
    if len(todo):
        batch_texts = [texts[i] for i in todo.tolist()]
        matrix[todo] = check_output(embedder, batch_texts, embedder(batch_texts))
        finite = np.isfinite(matrix).all(axis=1)
        problems.add_mask(rows & ~finite, column, f"embedder {embedder.name!r} returned NaN or inf for this text")
    return matrix


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


def _select(values: Optional[list], keep: np.ndarray, idx: list) -> Optional[list]:
    if values is None:
        return None
    return [values[i] for i in idx]


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


def _same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name the same file: the same path once symbolic links and
    ``..`` are resolved, or, when both exist, the same inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _inside_folder(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it, once symbolic links and ``..`` are resolved."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _check_rejects_path(rejects: Optional[str], source: Source, graph: Any = None) -> None:
    """Refuses a rejects file that is the source file itself: opening it for writing would
    empty the input (or, for JSONL, make the source read its own rejects); and one inside the
    graph's folder, whose files (MANIFEST, WAL segments) it would empty and then remove."""
    if rejects is None:
        return
    folder = getattr(graph, "path", None)
    if isinstance(folder, str) and _inside_folder(rejects, folder):
        raise InvalidArgumentError(f"the rejects file {rejects} is inside the graph folder {folder}: writing "
                                   "the rejects there would destroy the graph's files; name a rejects file "
                                   "elsewhere")
    if not isinstance(source, (str, os.PathLike)):
        return
    path = os.fspath(source)
    if isinstance(path, str) and _same_file(rejects, path):
        raise InvalidArgumentError(f"the rejects file {rejects} is the source file {path}: writing the rejects "
                                   "there would destroy the input; name another rejects file")


def _check_graph(graph: Any) -> None:
    from .graph import Graph

    if not isinstance(graph, Graph):
        kind = type(graph)
        got = "None" if graph is None else (kind.__qualname__ if kind.__module__ == "builtins"
                                            else f"{kind.__module__}.{kind.__qualname__}")
        raise TypeError(f"graph must be a vecgraph.Graph, got {got}")


def _key_type(key_type: Any) -> str:
    if key_type not in ("str", "int"):
        raise InvalidArgumentError(f"key_type must be 'str' or 'int', got {key_type!r}")
    return key_type


def _check_embedder_fits(graph: Any, embedder: Any) -> None:
    """Refuses an embedder of another dim than the graph's, or another one than the graph
    recorded; records nothing (the plans record it once a batch it embedded is written)."""
    if graph.embedder is not None:
        graph.use_embedder(embedder)  # checks it against the record; records nothing new
    elif int(embedder.dim) != graph.dim:
        raise DimensionMismatchError(f"embedder {embedder.name!r} makes {int(embedder.dim)}-d vectors, "
                                     f"the graph's dim is {graph.dim}")


def _vector_arg(vector: Any) -> tuple:
    """(column name or None, NumPy array or None) from the vector= argument."""
    if vector is None or isinstance(vector, str):
        return vector, None
    array = np.asarray(vector)
    if array.ndim != 2:
        raise ValueError(f"vector= must be a column name or a 2-d array (rows, dim), got shape {array.shape}")
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise TypeError(f"vector= array must be numeric, got dtype {array.dtype}")
    return None, array


def _array_rows(array: np.ndarray, offset: int, n: int, dim: int, what: str) -> np.ndarray:
    if array.shape[1] != dim:
        raise DimensionMismatchError(f"vector= array has {array.shape[1]} columns, the graph's dim is {dim}")
    if offset + n > array.shape[0]:
        raise InvalidArgumentError(f"vector= array has {array.shape[0]} rows, but the source has more {what} "
                                   f"(at least {offset + n}); it must have one row per source row")
    with np.errstate(over="ignore", invalid="ignore"):
        return np.ascontiguousarray(array[offset:offset + n], dtype=np.float32)


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
                raise InvalidArgumentError(f"cannot read the source after row {read}: {e} "
                                           f"({read:,} rows before it were ingested)") from None
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


# ====================================================================== nodes


def nodes(
    graph: Any,
    source: Source,
    *,
    key: Optional[str] = None,
    vector: Any = None,
    label: Optional[str] = None,
    tenant: Optional[str] = None,
    ts: Optional[str] = None,
    text: Optional[str] = None,
    props: Optional[str] = None,
    embedder: Any = None,
    upsert: bool = False,
    key_type: str = "str",
    batch_rows: int = 65_536,
    on_error: str = "raise",
    rejects: Union[str, os.PathLike, None] = None,
    progress: Optional[bool] = None,
) -> IngestReport:
    """Add the nodes of ``source`` to ``graph``, batch by batch.

    Args:
        graph: a :class:`vecgraph.Graph` (in memory or a folder).
        source: a file path (``.parquet``; ``.arrow`` / ``.feather`` / ``.ipc``: Arrow IPC file or
            stream; ``.jsonl`` / ``.ndjson``; ``.csv``), a ``pyarrow.Table``, ``RecordBatch``,
            ``RecordBatchReader`` or iterable of record batches, or a ``pandas.DataFrame``.
        key: the key column (default ``"key"``, else ``"id"``): str or int keys, unique.
        vector: the vector column (default ``"vector"``): a fixed-size list or list of dim
            numbers per row (in CSV: a string ``"[0.1, 0.2, ...]"``), converted to float32; or a
            NumPy array (rows, dim) aligned with the source rows.
        label, tenant, text: string columns (defaults ``"label"``, ``"tenant"``, ``"text"``;
            null or absent: "").
        ts: int64 microseconds since the epoch, or an Arrow timestamp/date column, or text
            (as CSV is read): an integer or an ISO 8601 date or timestamp, UTC unless it names
            an offset (default ``"ts"``; null or absent: 0). A value none of these is a bad row.
        props: a struct or map column, JSON-object strings, or dicts (default ``"props"``).
        embedder: computes the vectors from the text column instead (see
            :mod:`vecgraph.embedders`). A graph that recorded another embedder (or whose dim
            differs) refuses it before anything is read; it is recorded in the graph with
            :meth:`Graph.use_embedder` once the first batch embedded with it is written, so an
            ingest that writes nothing records nothing. A vector column is not read then.
        upsert: replace nodes whose key is already in the graph (:meth:`Graph.upsert_nodes`)
            instead of rejecting those rows.
        key_type: how the key column of a CSV / TSV file is read, whose fields are text:
            ``"str"`` (default) keeps each key as written (``007``, ``1e3`` and ``+5`` stay
            those strings); ``"int"`` parses them as int64 integers (optional sign, decimal
            digits; any other text is a bad row). Sources that carry types (Parquet, Arrow,
            JSONL, pandas) keep their keys' types whatever key_type says.
        batch_rows: rows per batch; memory use grows with it.
        on_error: what a bad row does. ``"raise"``: its whole batch is rejected with
            :class:`IngestError` naming the source row and column, and nothing of that batch is
            written; batches before it stay written (``error.report`` says how many rows).
            ``"skip"``: bad rows are dropped, the rest of the batch is written, and each bad row
            is written to the rejects file.
        rejects: the rejects file (JSON Lines: ``{"kind", "row", "column", "reason", "key"}``
            per bad row); default ``<source>.rejects.jsonl`` next to a file source; required with
            ``on_error="skip"`` for other sources. Written only with "skip", and kept only when
            a row was rejected: a file at that path is emptied when the ingestion starts and
            removed when it ends without a bad row (a regular file only: not /dev/null), so a
            run without bad rows leaves no rejects file. It may not be the source file itself,
            nor inside the graph's folder (InvalidArgumentError).
        progress: show a tqdm progress bar on stderr (rows, rows/s, ETA when the row count is
            known). None: only when stderr is a terminal.

    A row is bad when its key is missing (null) or is not a str / int64; (without ``upsert``)
    its key repeats an earlier row or is already in the graph (with ``upsert`` the last good
    row of a key wins, in one batch as across batches); its vector is missing, has a length other than the
    graph's dim, holds NaN or inf, or is all zeros under metric "cos"; its text is empty while
    an embedder computes the vectors; its ts, label, tenant or props have the wrong type or are
    not JSON; its props give a filterable property of the graph (see :class:`Graph`) a value
    of another type than the one declared (a str for an int64, say; null is no value).

    The nodes are added inside :meth:`Graph.deferred_indexing`: they are logged and applied
    batch by batch, and enter the HNSW seed index in one parallel pass when this call ends
    (also when it raises). With precomputed 384-d vectors from Parquet, everything but that
    pass runs at about 100,000 rows/s on 2 cores (``bench/bench_ingest.py``); JSONL is parsed
    with the json module, row by row, and is several times slower.

    A file without any row (0 bytes, blank lines only, a CSV header alone, a Parquet file of
    no rows) gives a report of 0 rows.

    Returns:
        :class:`IngestReport`.

    Raises:
        IngestError (an InvalidArgumentError): a bad row with on_error="raise".
        InvalidArgumentError: a required column is missing (the message lists the columns the
            source has), a column of the wrong Arrow type, an unreadable file, a rejects file
            that is the source file, another embedder than the one the graph recorded.
        DimensionMismatchError: a vector= array or an embedder of the wrong dim.
        TypeError: arguments of the wrong type (graph not a :class:`vecgraph.Graph`);
            FileNotFoundError: no such file.
    """
    start = time.perf_counter()
    options, key_type, vector_column, array, embedder = _check_args(
        graph, source, vector, embedder, key_type, batch_rows, on_error, progress, rejects)
    upsert = bool(upsert)
    src = _open_source(source, options.batch_rows)
    try:
        required = ("key",) + (("vector",) if array is None and embedder is None else ()) + \
            (("text",) if embedder is not None else ())
        given = {"key": key, "vector": vector_column, "label": label, "tenant": tenant, "ts": ts, "text": text,
                 "props": props}
        defaults = dict(_NODE_DEFAULTS)
        if array is not None or embedder is not None:
            defaults.pop("vector")
        try:
            columns = _resolve(src, given, defaults, required)
        except InvalidArgumentError as e:
            if "vector" in required and "no vector column" in str(e):
                raise InvalidArgumentError(f"{e}; or pass vector= a NumPy array, or embedder=") from None
            raise
        _configure(src, columns)
        if embedder is not None:
            _check_embedder_fits(graph, embedder)
        path = _rejects_path(options, src)
        _check_rejects_path(path, source, graph)
    except BaseException:
        src.close()
        raise
    plan = _NodePlan(graph, columns, array, embedder, upsert, src.text_keys and key_type == "int")
    with _deferred_indexing(graph):
        return _run_plan(graph, src, "node", plan, options, path, array, columns, start)


def _check_args(graph: Any, source: Source, vector: Any, embedder: Any, key_type: str, batch_rows: int,
                on_error: str, progress: Optional[bool], rejects: Any) -> tuple:
    """The arguments nodes() and edges() share, checked: (options, key_type, vector column
    name or None, vector array or None, embedder or None)."""
    _check_graph(graph)
    options = _options(batch_rows, on_error, progress, rejects)
    key_type = _key_type(key_type)
    vector_column, array = _vector_arg(vector)
    if embedder is not None:
        embedder = check_embedder(embedder)
        if vector is not None:
            raise TypeError("pass vector= or embedder=, not both: the embedder computes the vectors from the text")
    _check_rejects_path(options.rejects, source, graph)
    return options, key_type, vector_column, array, embedder


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


def _configure(src: _Source, columns: dict) -> None:
    """Tell a source what the resolved columns are: CSV reads the string fields, the key
    columns, the vector column and the weight and ts columns as strings; JSONL turns vectors into float32 arrays as it
    parses them; pandas keeps props objects as they are."""
    if hasattr(src, "string_columns"):
        src.string_columns = {columns[f] for f in _STRING_FIELDS + _KEY_FIELDS + _TEXT_PARSED_FIELDS if columns.get(f)}
    if isinstance(src, _JsonlSource):
        src.vector_column = columns.get("vector")
    if isinstance(src, _PandasSource):
        src._props_name = columns.get("props")


class _NodePlan:
    def __init__(self, graph: Any, columns: dict, array: Optional[np.ndarray], embedder: Any, upsert: bool,
                 int_keys: bool = False) -> None:
        self.graph, self.columns, self.array, self.embedder, self.upsert = graph, columns, array, embedder, upsert
        self.int_keys = int_keys
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
        tenants = _string_column(cols[c["tenant"]], c["tenant"], problems) if c["tenant"] else None
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


def _duplicates(keys: list, problems: _Problems, column: str) -> None:
    if len(set(keys)) + (keys.count(None) - 1 if None in keys else 0) >= len(keys):
        return
    first: dict = {}
    for row, k in enumerate(keys):
        if k is None:
            continue
        if k in first:
            problems.add(row, column, f"key {k!r} repeats row {first[k]} of this batch")
        else:
            first[k] = row


def _in_graph(graph: Any, keys: list, problems: _Problems, column: str, what: str, want: bool = False,
              int_hint: bool = False) -> None:
    """Flags rows whose key is (want=False) / is not (want=True) a node of the graph. With
    int_hint, a missing str key such as "12" whose int 12 is a node says so."""
    if not keys:
        return
    if not want and len(graph) == 0:
        return
    engine = getattr(graph, "_engine", None)  # its contains() skips one Python call per key
    contains = engine.contains if engine is not None and hasattr(engine, "contains") else graph.__contains__
    if want:
        if all(map(contains, keys)):
            return
    elif not any(map(contains, keys)):
        return
    for row, k in enumerate(keys):
        if k is not None and contains(k) != want:
            reason = f"{column} {k!r} {what}"
            number = _parse_int(k) if int_hint and want and type(k) is str else None
            if number is not None and -_INT64_MAX - 1 <= number <= _INT64_MAX and contains(number):
                reason += f'; the graph has the int key {number}: read the keys as ints with key_type="int"'
            problems.add(row, column, reason)


# ====================================================================== edges


def edges(
    graph: Any,
    source: Source,
    *,
    src: Optional[str] = None,
    dst: Optional[str] = None,
    rel: Optional[str] = None,
    weight: Optional[str] = None,
    ts: Optional[str] = None,
    text: Optional[str] = None,
    props: Optional[str] = None,
    vector: Any = None,
    embedder: Any = None,
    key_type: str = "str",
    batch_rows: int = 65_536,
    on_error: str = "raise",
    rejects: Union[str, os.PathLike, None] = None,
    progress: Optional[bool] = None,
) -> IngestReport:
    """Add the edges of ``source`` to ``graph``, batch by batch; their endpoints must already
    be nodes of the graph.

    Args:
        graph, source, batch_rows, on_error, rejects, progress: as :func:`nodes` (rejects
            records carry ``src`` and ``dst`` instead of ``key``).
        src, dst: endpoint key columns (defaults ``"src"`` / ``"source"``, ``"dst"`` / ``"target"``).
        key_type: how the src and dst columns of a CSV / TSV file are read, as for
            :func:`nodes`: ``"str"`` (default) or ``"int"`` (to reach int-keyed nodes).
        rel: relation type column (default ``"rel"``, else ``"type"``; absent or null: "").
        weight: float weights (default ``"weight"``; absent or null: 1.0; in a pandas
            DataFrame NaN is null, as pandas uses it; elsewhere a NaN weight is a bad row), or
            text (as CSV is read) holding numbers: a cell that is not a number is a bad row.
        ts, text, props: as for :func:`nodes`.
        vector: optional edge vectors: a column (null rows: an edge without a vector) or a
            NumPy array (rows, dim) aligned with the source rows.
        embedder: computes edge vectors from the text column (every row then needs a text);
            checked, and recorded once a batch is written, as for :func:`nodes`.

    A row is bad when src or dst is missing or is not a node of the graph (dangling), its weight
    is NaN or inf, its vector has the wrong length or holds NaN / inf (or is all zeros under
    "cos"), or a column has the wrong type.

    Each batch is written with one :meth:`Graph.add_edges` call, except a batch in which only
    some edges have vectors: it is written in one call per run of rows with / without vectors,
    in source order.

    Returns / Raises: as :func:`nodes` (dangling edges are bad rows, never NotFoundError).
    """
    start = time.perf_counter()
    options, key_type, vector_column, array, embedder = _check_args(
        graph, source, vector, embedder, key_type, batch_rows, on_error, progress, rejects)
    src_source = _open_source(source, options.batch_rows)
    try:
        given = {"src": src, "dst": dst, "rel": rel, "weight": weight, "ts": ts, "text": text, "props": props,
                 "vector": vector_column}
        defaults = dict(_EDGE_DEFAULTS)
        if array is not None or embedder is not None:
            defaults.pop("vector")
        required = ("src", "dst") + (("text",) if embedder is not None else ())
        columns = _resolve(src_source, given, defaults, required)
        columns.setdefault("vector", None)
        _configure(src_source, columns)
        if embedder is not None:
            _check_embedder_fits(graph, embedder)
        path = _rejects_path(options, src_source)
        _check_rejects_path(path, source, graph)
    except BaseException:
        src_source.close()
        raise
    plan = _EdgePlan(graph, columns, array, embedder, src_source.text_keys, key_type == "int")
    return _run_plan(graph, src_source, "edge", plan, options, path, array, columns, start)


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


# ====================================================================== networkx


def from_networkx(
    graph: Any,
    G: Any,
    *,
    vector_attr: str = "vector",
    text_attr: str = "text",
    label_attr: str = "label",
    tenant_attr: str = "tenant",
    ts_attr: str = "ts",
    rel_attr: str = "rel",
    weight_attr: str = "weight",
    embedder: Any = None,
    upsert: bool = False,
    batch_rows: int = 65_536,
    on_error: str = "raise",
    rejects: Union[str, os.PathLike, None] = None,
    progress: Optional[bool] = None,
) -> tuple[IngestReport, IngestReport]:
    """Add the nodes, then the edges, of a networkx graph.

    Node ids become keys (str or int). Node attributes ``vector_attr`` (a sequence of dim
    numbers), ``text_attr``, ``label_attr``, ``tenant_attr`` and ``ts_attr`` fill those fields;
    every other attribute goes into props (which must be JSON-serializable). Edge attributes
    ``rel_attr``, ``weight_attr``, ``text_attr``, ``ts_attr`` and ``vector_attr`` (an optional
    edge vector) likewise, the rest into props. An edge of an undirected graph is added once,
    in the orientation networkx reports it: search it with ``direction="both"`` (the default).
    Parallel edges of a MultiGraph are all added.

    Args:
        embedder: computes node vectors from ``text_attr`` (edges keep their own vectors, if any);
            checked, and recorded once a batch is written, as for :func:`nodes`.
        upsert, batch_rows, on_error, rejects, progress: as :func:`nodes`; with
            ``on_error="skip"``, ``rejects`` is required and gets both the node and the edge
            rows (``"kind"`` tells them apart; rows are numbered in networkx's iteration order).

    Returns:
        (report for the nodes, report for the edges).

    Raises:
        As :func:`nodes` and :func:`edges`; edges whose endpoint was rejected as a node are
        dangling.
    """
    _check_graph(graph)
    options = _options(batch_rows, on_error, progress, rejects)
    if options.on_error == "skip" and options.rejects is None:
        raise InvalidArgumentError('on_error="skip" needs rejects=<path of a JSONL file> for a networkx graph')
    if embedder is not None:
        embedder = check_embedder(embedder)
    node_fields = {"vector": vector_attr, "text": text_attr, "label": label_attr, "tenant": tenant_attr,
                   "ts": ts_attr}
    edge_fields = {"rel": rel_attr, "weight": weight_attr, "text": text_attr, "ts": ts_attr,
                   "vector": vector_attr}
    for name, attr in {**node_fields, **edge_fields}.items():
        if not isinstance(attr, str):
            raise TypeError(f"{name}_attr must be a str, got {type(attr).__name__}")

    def node_columns(chunk: list) -> dict:
        columns: dict = {"key": [node for node, _ in chunk], "props": []}
        for field, attr in node_fields.items():
            columns[field] = [data.get(attr) for _, data in chunk]
        mapped = set(node_fields.values())
        columns["props"] = [{k: v for k, v in data.items() if k not in mapped} or None for _, data in chunk]
        return columns

    def edge_columns(chunk: list) -> dict:
        columns: dict = {"src": [e[0] for e in chunk], "dst": [e[1] for e in chunk]}
        for field, attr in edge_fields.items():
            columns[field] = [e[-1].get(attr) for e in chunk]
        mapped = set(edge_fields.values())
        columns["props"] = [{k: v for k, v in e[-1].items() if k not in mapped} or None for e in chunk]
        return columns

    node_source = _ListSource(["key", "props", *node_fields], G.nodes(data=True), G.number_of_nodes(), node_columns)
    columns = {"key": "key", "vector": None if embedder is not None else "vector", "label": "label",
               "tenant": "tenant", "ts": "ts", "text": "text", "props": "props"}
    if embedder is not None:
        _check_embedder_fits(graph, embedder)
    if options.on_error == "skip":
        _check_rejects_path(options.rejects, G, graph)
    writer = _Rejects(options.rejects) if options.on_error == "skip" else None
    try:
        plan = _NodePlan(graph, columns, None, embedder, bool(upsert))
        with _deferred_indexing(graph):
            node_report = _run(graph, node_source, "node", plan.prepare, plan.apply, options, writer, None,
                               [v for v in columns.values() if v is not None], "ingest nodes", time.perf_counter())
        edge_source = _ListSource(["src", "dst", "props", *edge_fields], G.edges(data=True), G.number_of_edges(),
                                  edge_columns)
        edge_columns_map = {"src": "src", "dst": "dst", "rel": "rel", "weight": "weight", "ts": "ts",
                            "text": "text", "props": "props", "vector": "vector"}
        edge_plan = _EdgePlan(graph, edge_columns_map, None, None)
        edge_report = _run(graph, edge_source, "edge", edge_plan.prepare, edge_plan.apply, options, writer, None,
                           list(edge_columns_map.values()), "ingest edges", time.perf_counter())
    finally:
        if writer is not None:
            writer.close()
    return node_report, edge_report
