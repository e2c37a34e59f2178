"""The column mapping and the row checks of :mod:`vecgraph.ingest`.

:func:`_resolve` maps each field (key, vector, label, ...) to a column of the source, from the
arguments and the default names. The column functions turn one column of a batch (a pyarrow
Array, or Python values) into what :class:`vecgraph.Graph` takes, with vectorised NumPy
checks; a bad cell does not raise but marks its row bad in :class:`_Problems` (the first
problem of each row, with its column and reason), so that one bad cell is one bad row.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import re
from typing import Any, Callable, Optional, Union

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .embedders import check_output
from .errors import InvalidArgumentError, _short
from .arguments import _filterable_mismatch
from .ingest_readers import _Source

_INT64_MAX = 2**63 - 1
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
_ONE_US = _dt.timedelta(microseconds=1)


# ====================================================================== columns

_NODE_DEFAULTS = {"key": ("key", "id"), "vector": ("vector",), "label": ("label",), "tenant": ("tenant",),
                  "ts": ("ts",), "text": ("text",), "props": ("props",)}
_EDGE_DEFAULTS = {"src": ("src", "source"), "dst": ("dst", "target"), "rel": ("rel", "type"),
                  "weight": ("weight",), "ts": ("ts",), "text": ("text",), "props": ("props",),
                  "vector": ("vector",)}


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


def _string_column(col: Any, column: str, problems: _Problems, missing: Optional[str] = None) -> Optional[list]:
    """A list of str ("" where the value is missing: null, NaN), or None when the whole column
    is null. With ``missing`` (a reason), a missing value makes its row bad instead."""
    if isinstance(col, pa.Array):
        col = _decode(col)
        if pa.types.is_null(col.type) or col.null_count == len(col):
            if missing is not None:
                problems.add_mask(np.ones(len(col), dtype=bool), column, missing)
            return None
        if not _is_string_type(col.type):
            raise _structural(column, f"must hold strings, got Arrow type {col.type}")
        if col.null_count == 0:
            return col.to_pylist()
        if missing is not None:
            problems.add_mask(_null_mask(col), column, missing)
        return ["" if value is None else value for value in col.to_pylist()]
    values = list(col)
    for row, value in enumerate(values):
        if type(value) is str:
            continue
        if isinstance(value, str):
            values[row] = str(value)
            continue
        if _is_missing(value):
            if missing is not None:
                problems.add(row, column, missing)
        else:
            problems.add(row, column, f"must be a str, got {type(value).__name__}")
        values[row] = ""
    return values


_MISSING_TENANT = ('missing tenant (null); a row without a tenant is not put in the default tenant "": give it '
                  "one, or leave the tenant column out of the source")


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


# ====================================================================== keys


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
