"""The readers of :mod:`vecgraph.ingest`, one per kind of source: each gives the source's
column names and its rows in batches of exactly ``batch_rows`` rows (the last may be shorter),
holding one batch in memory at a time.

Parquet is decoded 8,192 rows at a time through a 1 MB read buffer, Arrow IPC (a file or a
stream) batch by batch, memory-mapped, CSV and TSV block by block (pyarrow's streaming reader;
a record with another number of fields than the header keeps its place as a bad row, found
with the csv module) and JSON Lines ``batch_rows`` lines at a time with the json module (both
also ``.gz`` and ``.bz2``); a pyarrow Table, RecordBatch, RecordBatchReader or iterable of
record batches is cut into batches of the wanted size, a pandas DataFrame sliced, and the
nodes or edges of a networkx graph come as Python rows. :func:`_open_source` picks the reader
for what was passed, :func:`_configure` tells it which fields the mapped columns hold.
"""

from __future__ import annotations

import collections
import csv as _csv
import io
import itertools
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa

from .errors import InvalidArgumentError, _short

Source = Any  # str | os.PathLike | pa.Table | pa.RecordBatch | pa.RecordBatchReader | Iterable | pandas.DataFrame


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
            batch = _Batch(offset, record.num_rows, {name: record.column(name) for name in wanted},
                           self._problems(offset, record.num_rows))
            offset += record.num_rows
            del record
            yield batch
            del batch  # one batch in memory at a time: not kept while the next is read

    def _problems(self, offset: int, n: int) -> Optional[dict]:
        """Rows [offset, offset + n) already known to be bad: row in the batch -> (None, reason)."""
        return None

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


def _compression(path: str) -> Optional[str]:
    """"gzip", "bz2" or None, from the file's name (any letter case)."""
    lower = path.lower()
    return "gzip" if lower.endswith(".gz") else "bz2" if lower.endswith(".bz2") else None


def _open_binary(path: str):
    compression = _compression(path)
    if compression == "gzip":
        import gzip

        return gzip.open(path, "rb")
    if compression == "bz2":
        import bz2

        return bz2.open(path, "rb")
    return open(path, "rb")


def _open_text(path: str, errors: str = "strict"):
    """The file as UTF-8 text (a BOM dropped, line ends kept for the csv module), decompressed."""
    return io.TextIOWrapper(_open_binary(path), encoding="utf-8-sig", errors=errors, newline="")


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
        if name.endswith(compressed) and name[: -len(compressed)].endswith((".csv", ".tsv", ".jsonl", ".ndjson")):
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
        raise InvalidArgumentError(f"cannot tell the format of {path} from its name; expected .parquet, .pq, "
                                   ".arrow, .arrows, .feather, .ipc, .jsonl, .ndjson, .csv or .tsv (the last four "
                                   "also with .gz or .bz2), or pass a pyarrow Table")
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


_CSV_BLOCK_BYTES = 16 << 20  # pyarrow parses a CSV file this many bytes at a time


def _csv_source(path: str, delimiter: str) -> _Source:
    try:
        with _open_text(path) as f:
            header = next((row for row in _csv.reader(f, delimiter=delimiter) if row), None)
    except (OSError, UnicodeDecodeError) as e:
        raise InvalidArgumentError(f"cannot read the header of {path}: {e}") from None
    return _CsvSource(path, delimiter, header)


class _CsvSource(_ArrowSource):
    """A CSV or TSV file read by pyarrow's streaming reader, block by block. pyarrow skips a
    record with more or fewer fields than the header; once it has skipped one, the file is also
    read with the csv module (:class:`_CsvRecords`), which finds where each such record was,
    and it comes back in its place as a row of nulls known to be bad. So row ``i`` is the
    ``i``-th record after the header (blank lines aside), whatever the records before it hold."""

    def __init__(self, path: str, delimiter: str, header: Optional[list]) -> None:
        super().__init__(header or [], self._read, 0 if header is None else None, path)
        self.file, self.delimiter = path, delimiter
        self.empty = header is None
        self.text_keys = True
        self.string_columns: set = set()
        self._skipped: list = []  # one item per record pyarrow skipped (appended from its threads)
        self._bad: collections.deque = collections.deque()  # (row, reason) not yet in a batch
        self._records: Optional[_CsvRecords] = None

    def _skip(self, row: Any) -> str:
        self._skipped.append(row.actual_columns)
        return "skip"

    def _problems(self, offset: int, n: int) -> Optional[dict]:
        bad = self._bad
        problems = {}
        while bad and bad[0][0] < offset + n:
            row, reason = bad.popleft()
            problems[row - offset] = (None, reason)
        return problems

    def _read(self, wanted: list, batch_rows: int) -> Iterator[pa.RecordBatch]:
        if self.empty:
            return
        import pyarrow.csv as pacsv

        # open_csv reads block by block; the columns _configure names are read as strings whatever
        # they look like (a label "123", a vector "[0.1, 0.2]", a key "007"). A quoted value may
        # hold line breaks, wherever the blocks end.
        reader = pacsv.open_csv(
            pa.input_stream(self.file, compression=_compression(self.file)),
            read_options=pacsv.ReadOptions(block_size=_CSV_BLOCK_BYTES),
            parse_options=pacsv.ParseOptions(delimiter=self.delimiter, newlines_in_values=True,
                                             invalid_row_handler=self._skip),
            convert_options=pacsv.ConvertOptions(
                include_columns=wanted,
                column_types={name: pa.string() for name in wanted if name in self.string_columns},
                null_values=[""], strings_can_be_null=True),
        )
        rows = 0  # rows given out
        try:
            for record in reader:
                # pyarrow calls _skip as it parses a block, before it gives the block's rows
                if self._records is None and self._skipped:
                    self._records = _CsvRecords(self, rows, batch_rows)
                if self._records is None:
                    rows += record.num_rows
                    yield record
                else:
                    yield from self._records.splice(record)
            if self._records is None and self._skipped:
                self._records = _CsvRecords(self, rows, batch_rows)
            if self._records is not None:
                yield from self._records.finish(reader.schema)
        finally:
            self.close()

    def close(self) -> None:
        if self._records is not None:
            self._records.close()


class _CsvRecords:
    """The records of a CSV file as the csv module reads them, beside pyarrow's reading of the
    same file: finds the records with another number of fields than the header, and splices a
    row of nulls into pyarrow's record batches where each of them was, its reason queued in the
    source's ``_bad``. Lines are counted as a text editor numbers them, from 1: the header,
    blank lines and the line breaks inside quoted values count (``\\n``, ``\\r\\n`` or ``\\r``
    each end one)."""

    def __init__(self, source: _CsvSource, rows: int, batch_rows: int) -> None:
        self.source, self.rows, self.batch_rows = source, rows, batch_rows  # rows: given out so far
        self.spliced = 0  # bad records spliced in
        self.records = 0  # records after the header the csv module has read
        self.header: Optional[list] = None
        try:
            self._file = _open_text(source.file, errors="replace")
        except OSError as e:
            raise InvalidArgumentError(f"cannot read {source.file} again to find its bad lines: {e}") from None
        self._reader = _csv.reader(self._file, delimiter=source.delimiter)
        self._next = self._find()

    def close(self) -> None:
        self._file.close()

    def _find(self) -> Optional[tuple]:
        """(row, reason) of the next record with another number of fields than the header, or
        None at the end of the file."""
        reader = self._reader
        limit = _csv.field_size_limit(2**31 - 1)  # a field as long as pyarrow takes
        try:
            while True:
                first = reader.line_num + 1
                fields = next(reader, None)
                if fields is None:
                    return None
                if not fields:  # a blank line: pyarrow skips it too
                    continue
                if self.header is None:
                    self.header = fields
                    continue
                self.records += 1
                if len(fields) != len(self.header):
                    last = reader.line_num
                    where = f"line {first}" if last == first else f"lines {first}-{last}"
                    return self.records - 1, (f"{where}: expected {len(self.header)} fields as in the header, "
                                              f"got {len(fields)}: {_short(fields, 80)}")
        except _csv.Error as e:
            raise InvalidArgumentError(f"cannot read {self.source.file} with the csv module to find its bad "
                                       f"lines: line {reader.line_num}: {e}") from None
        finally:
            _csv.field_size_limit(limit)

    def _take(self, room: int, last: bool) -> list:
        """The bad records before the next ``room`` good rows from pyarrow, and also those right
        after them when they are the ``last``, at most ``batch_rows`` of them."""
        taken: list = []
        while self._next is not None and self._next[0] < self.rows + room + len(taken) + last \
                and len(taken) < self.batch_rows:
            if self._next[0] < self.rows:
                self._disagree()
            taken.append(self._next)
            self._next = self._find()
        self.spliced += len(taken)
        if self.spliced > len(self.source._skipped):
            self._disagree()
        return taken

    def splice(self, record: pa.RecordBatch, last: bool = False) -> Iterator[pa.RecordBatch]:
        """``record`` (the good rows pyarrow read next) with a row of nulls in the place of each
        bad record before its rows (and after them, when they are the ``last``), in pieces holding
        at most ``batch_rows`` bad rows each."""
        m, used = record.num_rows, 0  # used: rows of record given out
        while True:
            bad = self._take(m - used, last)
            if not bad:
                if used < m:
                    self.rows += m - used
                    yield record if used == 0 else record.slice(used)
                return
            full = len(bad) == self.batch_rows
            end = bad[-1][0] + 1 if full else self.rows + (m - used) + len(bad)
            good = end - self.rows - len(bad)
            mask = np.zeros(end - self.rows, dtype=bool)
            mask[[row - self.rows for row, _ in bad]] = True
            indices = np.zeros(end - self.rows, dtype=np.int64)
            indices[~mask] = np.arange(used, used + good)
            self.source._bad.extend(bad)
            piece = record.take(pa.array(indices, mask=mask))
            self.rows, used = end, used + good
            yield piece
            del piece
            if not full:
                return

    def finish(self, schema: pa.Schema) -> Iterator[pa.RecordBatch]:
        """The bad records after pyarrow's last good row; then checks that pyarrow and the csv
        module saw the same records."""
        empty = pa.RecordBatch.from_arrays([pa.nulls(0, f.type) for f in schema], schema=schema)
        yield from self.splice(empty, last=True)
        if self._next is not None or self.records != self.rows or self.spliced != len(self.source._skipped):
            self._disagree()

    def _disagree(self) -> None:
        raise InvalidArgumentError(
            f"cannot tell where the bad lines of {self.source.file} are: pyarrow skipped "
            f"{len(self.source._skipped):,} records with another number of fields than the header, and the "
            f"csv module splits the file into other records ({self.records:,} records after the header so far, "
            f"{self.spliced:,} of them bad); check its quoting")


# ====================================================================== configuration

_STRING_FIELDS = ("label", "tenant", "text", "props", "rel", "vector")
_KEY_FIELDS = ("key", "src", "dst")  # read from CSV as text too, whatever key_type says
# Read from CSV as text and parsed here, so that one bad cell is one bad row: Arrow's CSV type
# inference would make the whole column text, or fail the read in a later block.
_TEXT_PARSED_FIELDS = ("weight", "ts")


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
