"""The readers of :mod:`vecgraph.ingest`, one per kind of source: each gives the source's
column names and its rows in batches of exactly ``batch_rows`` rows (the last may be shorter),
holding one batch in memory at a time.

Parquet is decoded 8,192 rows at a time through a 1 MB read buffer, Arrow IPC (a file or a
stream) batch by batch, memory-mapped, CSV and TSV block by block (pyarrow's streaming reader)
and JSON Lines ``batch_rows`` lines at a time with the json module (both also ``.gz`` and
``.bz2``); a pyarrow Table, RecordBatch, RecordBatchReader or iterable of record batches is
cut into batches of the wanted size, a pandas DataFrame sliced, and the nodes or edges of a
networkx graph come as Python rows. :func:`_open_source` picks the reader for what was passed,
:func:`_configure` tells it which fields the mapped columns hold.
"""

from __future__ import annotations

import csv as _csv
import itertools
import json
import os
from collections.abc import Iterable, Iterator
from typing import Any, Callable, Optional

import numpy as np
import pyarrow as pa

from .errors import InvalidArgumentError

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
