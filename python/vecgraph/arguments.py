"""Argument checking and conversion for the :class:`~vecgraph.Graph` facade.

Every public call of the facade passes its arguments through these functions before anything
reaches the core: each returns the value as the core takes it (C-contiguous float32 arrays,
int64 microseconds, JSON texts, filter conditions) or raises a clear error naming the argument,
what it expected and what it got. Nothing here changes a graph, so a rejected call leaves no
trace. The search settings' defaults (:data:`FULL_SCAN_MAX_NODES`, :data:`FILTER_SCAN_MAX_NODES`)
live here with the functions that read them from arguments and the environment.
"""

from __future__ import annotations

import datetime
import json
import math
import numbers
import operator
import os
import sys
from collections.abc import Iterable, Sequence
from typing import Any, Optional, Union

import numpy as np

from . import _core
from .errors import InvalidArgumentError, _got, _short

Key = Union[str, int]  # a node key
Timestamp = Union[int, datetime.datetime, datetime.date]  # int: microseconds since the epoch
Timestamps = Union[Timestamp, Sequence[Timestamp], np.ndarray, None]  # one for all rows, or one per row

_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_DIRECTIONS = ("out", "in", "both")
FULL_SCAN_MAX_NODES = 4096
"""Default of ``full_scan_max_nodes``: graphs of at most this many nodes find seeds by an exact
scan (at 4,096 nodes of 384-d int8 codes within 1.3x of an HNSW search with the default
parameters; see :class:`Graph`). The environment variable
``VECGRAPH_FULL_SCAN_MAX_NODES`` replaces it for graphs made without the argument."""
FILTER_SCAN_MAX_NODES = _core.FILTER_SCAN_AUTO_FLOOR
"""The least limit of ``filter_scan_max_nodes="auto"`` (the default), 10,000: a search whose label
or tenant filter admits at most the limit's count of live nodes finds its seeds by scanning
just those nodes instead of HNSW. "auto" sets the limit to
``max(FILTER_SCAN_MAX_NODES, isqrt(1000 * rows))`` for a graph of ``rows`` node rows: 10,000
up to 100,000 rows, 31,622 at 1,000,000 (see :class:`Graph`). The environment variable
``VECGRAPH_FILTER_SCAN_MAX_NODES`` (an int, or "auto") replaces "auto" for graphs made without
the argument."""
FILTER_SCAN_AUTO = "auto"
_ASCII_SPACE = " \t\n\r\v\f"  # what may surround a number in an environment variable
_METRICS = ("cos", "ip", "l2")
_EPOCH = datetime.datetime(1970, 1, 1, tzinfo=datetime.timezone.utc)
_MAX_THREADS = 1024

_FLOAT32_MAX = float(np.finfo(np.float32).max)


def _float32_or_inf(value: Union[int, float]) -> float:
    """A Python number as float32 takes it: beyond float32, an infinity of its sign (the core
    refuses it by name as not finite) instead of NumPy's overflow warning."""
    try:
        value = float(value)
    except OverflowError:  # an int beyond float
        return math.inf if value > 0 else -math.inf
    return math.copysign(math.inf, value) if abs(value) > _FLOAT32_MAX else value


def _float_array(values: Any, name: str, ndim: int) -> np.ndarray:
    """``values`` as a C-contiguous float32 array of rank ``ndim``, or a clear error."""
    if type(values) is np.ndarray and values.dtype == np.float32 and values.ndim == ndim and values.flags.c_contiguous:
        return values  # the common case, kept cheap: this runs on every search
    want = "(dim,)" if ndim == 1 else "(n, dim)"
    if values is None:
        raise TypeError(f"{name} must be a numeric array of shape {want}, got None")
    try:
        array = np.asarray(values)
    except ValueError as e:  # rows of different lengths
        raise ValueError(f"{name} must be a numeric array of shape {want}; its rows differ in length ({e})") from None
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        text = " (text is passed as a str: one query, or a list of str to search_batch)" if array.dtype.kind in "US" else ""
        raise TypeError(f"{name} must be a numeric array, got dtype {array.dtype}{text}")
    if np.issubdtype(array.dtype, np.complexfloating):
        raise TypeError(f"{name} must be real-valued, got dtype {array.dtype}")
    if array.ndim != ndim:
        raise ValueError(f"{name} must have shape {want}, got shape {array.shape}")
    if array.dtype.kind != "f" or array.dtype.itemsize <= 4:  # no value can overflow float32
        return np.ascontiguousarray(array, dtype=np.float32)
    with np.errstate(over="ignore"):
        converted = np.ascontiguousarray(array, dtype=np.float32)
    finite = np.isfinite(converted)
    if finite.all():  # one pass in the common case; NaN/inf given as such are the core's to name
        return converted
    overflowed = ~finite & np.isfinite(array)  # finite, but beyond float32
    if overflowed.any():
        at = np.argwhere(overflowed)[0]
        if name == "weights":
            raise InvalidArgumentError(
                f"weights row {int(at[0])} has {float(array[tuple(at)])!r}, beyond float32's range (±3.4e38): "
                f"weights are stored as float32, so every weight must be finite in float32")
        row, position = (0, int(at[0])) if ndim == 1 else (int(at[0]), int(at[1]))
        raise InvalidArgumentError(
            f"{name} row {row} has {float(array[tuple(at)])!r} at position {position}, beyond float32's range "
            f"(±3.4e38): vectors are stored as float32, so every value must be finite in float32")
    return converted


def _keys(values: Any, name: str, int_arrays: bool = False) -> Sequence:
    """``values`` as a sequence of keys for the core. With ``int_arrays``, a 1-d NumPy integer
    array is passed as it is (the core encodes it from its buffer: no Python int per key)."""
    if type(values) is list or type(values) is tuple:  # the common case, without ABC checks
        return values
    if isinstance(values, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of keys, not a single {type(values).__name__}; wrap it in a list")
    if values is None or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list, tuple or array of keys (str or int), got {type(values).__name__}")
    if isinstance(values, (set, frozenset, dict)):
        raise TypeError(f"{name} must be ordered (a list, tuple or array), got {type(values).__name__}: "
                        "its order decides which row belongs to which key")
    if isinstance(values, np.ndarray):
        if values.ndim != 1:
            raise ValueError(f"{name} must be 1-dimensional, got shape {values.shape}")
        if int_arrays and type(values) is np.ndarray and values.dtype.kind in "iu":  # not a masked array
            return values
        return values.tolist()
    if not isinstance(values, Sequence):
        values = list(values)
    return values


def _exclude_keys(values: Any) -> Optional[list]:
    """``exclude_keys`` as a list of keys for the core (a set is accepted: order does not
    matter here), or None for none."""
    if values is None:
        return None
    if isinstance(values, (str, bytes)):
        raise TypeError(f"exclude_keys must be a collection of keys, not a single {type(values).__name__}; "
                        "wrap it in a list")
    if isinstance(values, dict) or not isinstance(values, Iterable):
        raise TypeError(f"exclude_keys must be a list, tuple, set or array of keys, got {type(values).__name__}")
    out = values.tolist() if isinstance(values, np.ndarray) else list(values)
    for i, key in enumerate(out):
        if isinstance(key, bool) or not isinstance(key, (str, numbers.Integral)):
            raise TypeError(f"exclude_keys[{i}] must be a str or int key, got {type(key).__name__} {key!r:.40}")
    return out or None


def _not_a_str(name: str, row: int, value: Any, whole_none: str) -> TypeError:
    """The error for item ``row`` of the list argument ``name`` that is not a str. For None it
    says what None means as the whole argument (``whole_none``), which it never means inside."""
    if value is None:
        return TypeError(f"{name}[{row}] must be a str, got None (None inside the list is refused; "
                         f"{name}=None {whole_none})")
    return TypeError(f"{name}[{row}] must be a str, got {_got(value)}")


def _check_str_items(values: list, name: str, whole_none: str) -> list:
    """``values`` when every item is a str (a subclass too), else the error of :func:`_not_a_str`
    for the first item that is not."""
    if set(map(type, values)) <= {str}:  # one pass in C: the common case
        return values
    for row, value in enumerate(values):
        if not isinstance(value, str):
            raise _not_a_str(name, row, value, whole_none)
    return values


_DEFAULT_FOR_EVERY_ROW = 'gives every row the default ""'


def _strings(values: Any, name: str, count: int, one_for_all: bool = True,
             whole_none: str = _DEFAULT_FOR_EVERY_ROW) -> Optional[list]:
    """None, one str for every row (when ``one_for_all``), or a sequence of ``count`` str. An item
    that is not a str, None included, is refused (TypeError naming its row): None means the
    default (``whole_none`` says which) only as the whole argument."""
    if values is None:
        return None
    if isinstance(values, str):
        if not one_for_all:
            raise TypeError(f"{name} must be a list of {count} str (one per row), got one str "
                            f"(wrap it in a list)")
        return [values] * count
    if type(values) is list and len(values) == count:  # the common case: no copy
        return _check_str_items(values, name, whole_none)
    if isinstance(values, (bytes, dict, set, frozenset)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a str or a list of {count} str, got {type(values).__name__}")
    values = list(values)
    if len(values) != count:
        raise ValueError(f"{name} has {len(values)} items, expected {count} (one per row)")
    return _check_str_items(values, name, whole_none)


def _not_a_timestamp(name: str, row: int, value: Any) -> TypeError:
    """The error for item ``row`` of the timestamps ``name`` that is not one; None is refused
    there too (``name=None`` gives every row the default 0)."""
    expected = f"{name}[{row}] must be an int (microseconds since the epoch), a datetime or a date"
    if value is None:
        return TypeError(f"{expected}, got None (None inside the list is refused; {name}=None gives every row "
                         "the default 0)")
    return TypeError(f"{expected}, got {type(value).__name__} {value!r}")


def _int64s(values: Any, name: str, count: int) -> Optional[np.ndarray]:
    if values is None:
        return None
    if isinstance(values, (int, np.integer)) and not isinstance(values, bool):
        return np.full(count, _count(values, name), dtype=np.int64)
    if isinstance(values, (float, np.floating, str, bytes, bool, np.bool_)):
        raise TypeError(f"{name} must be an int or a list of {count} ints (microseconds since the epoch), "
                        f"got {type(values).__name__}")
    try:
        array = np.asarray(values)
    except OverflowError:
        raise ValueError(f"{name} holds an int outside the int64 range") from None
    if array.ndim == 0:  # a datetime, None-like or other scalar
        raise TypeError(f"{name} must be an int or a list of {count} ints (microseconds since the epoch), "
                        f"datetimes or dates, got {type(values).__name__}")
    if array.shape != (count,):
        raise ValueError(f"{name} must have shape ({count},), got {array.shape}")
    if array.dtype == object:
        items = array.tolist()
        row = next((row for row, v in enumerate(items) if v is None), None)
        if row is not None:
            raise _not_a_timestamp(name, row, None)
        if all(isinstance(v, int) and not isinstance(v, bool) for v in items):
            raise ValueError(f"{name} holds an int outside the int64 range")
    if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer)):
        raise TypeError(f"{name} must be integers (microseconds since the epoch), got dtype {array.dtype}")
    if array.size and array.dtype.kind == "u" and int(array.max()) > _INT64_MAX:
        raise ValueError(f"{name} holds {int(array.max())}, outside the int64 range (max {_INT64_MAX})")
    return np.ascontiguousarray(array, dtype=np.int64)


_COARSE_DATETIME_UNITS = ("Y", "M", "W", "D", "h", "m", "s", "ms", "us")


def _datetime64_us(values: np.ndarray, name: str, rows: bool = True) -> np.ndarray:
    """int64 microseconds since the epoch of a datetime64 array without NaT. InvalidArgumentError
    names the first value beyond int64 microseconds (about 290,000 years either side of 1970),
    which NumPy's conversion would wrap, and its row (with ``rows``); a unit finer than µs is
    floored to it (rounded toward -inf)."""
    us = values.astype("datetime64[us]")
    if np.datetime_data(values.dtype)[0] in _COARSE_DATETIME_UNITS:
        wrapped = us.astype(values.dtype) != values
        if wrapped.any():
            row = int(np.argmax(wrapped.reshape(-1)))
            where = f" at row {row}" if rows else ""
            raise InvalidArgumentError(f"{name} holds {values.reshape(-1)[row]}{where}, beyond int64 microseconds "
                                       "since the epoch (about 290,000 years either side of 1970)")
    return us.astype(np.int64)


def _timestamps(values: Any, name: str, count: int) -> Optional[np.ndarray]:
    """ts for a write: one value or ``count`` values, each int microseconds since the epoch, a
    datetime (naive: UTC) or a date (midnight UTC); or a NumPy datetime64 array."""
    if isinstance(values, (datetime.datetime, datetime.date)):
        return np.full(count, _timestamp_us(values, name), dtype=np.int64)
    if not isinstance(values, np.ndarray) and getattr(getattr(values, "dtype", None), "kind", "") == "M":
        values = np.asarray(values)  # a pandas Series or DatetimeIndex of naive datetime64 values
    if isinstance(values, np.ndarray) and values.dtype.kind == "M":
        if values.shape != (count,):
            raise ValueError(f"{name} must have shape ({count},), got {values.shape}")
        if np.isnat(values).any():
            raise InvalidArgumentError(f"{name} holds NaT at row {int(np.argmax(np.isnat(values)))}; "
                                       "every row needs a timestamp")
        return np.ascontiguousarray(_datetime64_us(values, name))
    if isinstance(values, np.ndarray) and values.dtype.kind == "m":
        raise TypeError(f"{name} must be timestamps (int microseconds since the epoch, datetimes, dates or a "
                        f"datetime64 array), got a {values.dtype} array of durations")
    if isinstance(values, (list, tuple)) and any(isinstance(v, (datetime.datetime, datetime.date)) for v in values):
        if len(values) != count:
            raise ValueError(f"{name} must have shape ({count},), got ({len(values)},)")
        for i, v in enumerate(values):
            if not isinstance(v, (datetime.datetime, datetime.date, numbers.Integral)) or isinstance(v, bool):
                raise _not_a_timestamp(name, i, v)
        return np.fromiter((_timestamp_us(v, f"{name}[{i}]") for i, v in enumerate(values)), dtype=np.int64, count=count)
    return _int64s(values, name, count)


_INTEGRAL_REAL_MAX = 9.2e18  # the largest |float| the core takes as an int64 / timestamp value


def _filterable_mismatch(name: str, kind: str, value: Any) -> Optional[str]:
    """Why ``value`` in props cannot be the value of filterable property ``name`` of type
    ``kind`` (the core would keep it in props but never let it pass a filter), or None when it
    can: None (no value); for "str" a str; for "int64" and "timestamp" an int in the int64
    range or a float with an integral value within ±9.2e18, and for "timestamp" also a
    datetime or date; for "float64" a finite int or float. bool is no number."""
    if value is None or (isinstance(value, np.datetime64) and np.isnat(value)):
        return None
    if isinstance(value, np.generic) and not isinstance(value, np.datetime64):
        value = value.item()  # stored as its Python value; a datetime64 as microseconds (see _json_default)
    if kind == "str":
        problem = None if isinstance(value, str) else ""
    elif isinstance(value, bool):
        problem = ""
    elif kind in ("int64", "timestamp") and isinstance(value, numbers.Integral):
        problem = None if _INT64_MIN <= int(value) <= _INT64_MAX else " outside the int64 range"
    elif kind in ("int64", "timestamp") and isinstance(value, float):
        integral = math.isfinite(value) and value.is_integer() and abs(value) <= _INTEGRAL_REAL_MAX
        problem = None if integral else ", which is not an integer within ±9.2e18"
    elif kind == "timestamp":
        problem = None if isinstance(value, (datetime.datetime, datetime.date, np.datetime64)) else ""
    elif kind == "float64" and isinstance(value, (numbers.Integral, float)):
        try:
            finite = math.isfinite(float(value))
        except OverflowError:  # an int beyond float
            finite = False
        problem = None if finite else ", which is not finite in float64"
    else:
        problem = ""
    if problem is None:
        return None
    return f"filterable property {name!r} is declared {kind}, got {type(value).__name__} {_short(value, 60)}{problem}"


def _props(values: Any, count: int, filterable: Optional[dict] = None,
           keys: Optional[Sequence] = None) -> Optional[list]:
    """props as the core takes them: one JSON text per row ("" for None). With ``filterable``
    ({name: type}), a row whose value for a declared property is of another type is refused
    (InvalidArgumentError naming the row, its key from ``keys``, the property and both types)."""
    if values is None:
        return None
    if isinstance(values, (dict, str, bytes)) or not isinstance(values, Iterable):
        raise TypeError(f"props must be a list of {count} dicts (or None), one per row; got {type(values).__name__}")
    values = list(values)
    if len(values) != count:
        raise ValueError(f"props has {len(values)} items, expected {count} (one per row)")
    out = []
    for row, value in enumerate(values):
        if value is None:
            out.append("")
            continue
        if not isinstance(value, dict):
            raise TypeError(f"props row {row} must be a dict or None, got {type(value).__name__}")
        if filterable:
            for name, kind in filterable.items():
                problem = _filterable_mismatch(name, kind, value.get(name))
                if problem is not None:
                    key = f" (key {keys[row]!r})" if keys is not None else ""
                    raise InvalidArgumentError(
                        f"props row {row}{key}: {problem}; a filterable property takes a value of its declared "
                        "type, or None for no value")
        try:
            out.append(json.dumps(value, ensure_ascii=False, allow_nan=False, default=_json_default))
        except (TypeError, ValueError) as exc:
            raise InvalidArgumentError(f"props row {row} is not JSON-serializable: {exc}") from None
        except RecursionError:
            raise InvalidArgumentError(f"props row {row} is nested too deeply to store as JSON "
                                       f"(more than about {sys.getrecursionlimit()} levels)") from None
    return out


def _timestamp_us(value: Any, name: str) -> int:
    """Microseconds since the Unix epoch from an int (taken as microseconds), a datetime
    (naive: UTC) or a date (midnight UTC)."""
    if isinstance(value, datetime.datetime):
        if value != value:  # pandas' NaT (a datetime that equals nothing): no time at all
            raise InvalidArgumentError(f"{name} holds NaT; every row needs a timestamp")
        if value.tzinfo is None:
            value = value.replace(tzinfo=datetime.timezone.utc)
        delta = value - _EPOCH
        return (delta.days * 86_400 + delta.seconds) * 1_000_000 + delta.microseconds
    if isinstance(value, datetime.date):
        return (value - _EPOCH.date()).days * 86_400_000_000
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    raise InvalidArgumentError(f"{name} must be an int (microseconds since the epoch), a datetime or a date, "
                               f"got {type(value).__name__} {value!r}")


def _json_default(value: Any) -> Any:
    """props values JSON has no type for: datetimes, dates and NumPy datetime64 values become
    microseconds since the epoch (UTC; NaT becomes null); other NumPy scalars their Python value."""
    if isinstance(value, (datetime.datetime, datetime.date)):
        return _timestamp_us(value, "a props value")
    if isinstance(value, np.datetime64):
        # .item() gives an int of the value's own unit for ns (and a datetime for us): microseconds always
        return None if np.isnat(value) else int(_datetime64_us(np.array([value]), "a datetime64 value", rows=False)[0])
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


_PROP_TYPES = {"str": "str", str: "str", "int": "int64", "int64": "int64", int: "int64", "float": "float64",
               "float64": "float64", float: "float64", "timestamp": "timestamp", datetime.datetime: "timestamp"}


def _filterable(value: Any) -> dict:
    """{name: type} of declared filterable properties, types normalised to the core's names."""
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise TypeError(f"filterable must be a dict {{name: type}}, got {type(value).__name__}")
    out = {}
    for name, kind in value.items():
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"filterable property names must be non-empty str, got {name!r}")
        try:
            out[name] = _PROP_TYPES[kind]
        except (KeyError, TypeError):
            raise InvalidArgumentError(
                f"filterable property {name!r}: type must be 'str', 'int64', 'float64' or 'timestamp' "
                f"(or str, int, float, datetime), got {kind!r}") from None
    return out


def _number(value: Any, kind: str, where: str) -> Union[int, float]:
    if kind == "timestamp":
        stamp = _timestamp_us(value, where)
        if not _INT64_MIN <= stamp <= _INT64_MAX:
            raise InvalidArgumentError(f"{where} must fit int64 microseconds, got {stamp}")
        return stamp
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InvalidArgumentError(f"{where} must be a number for a {kind} property, got {type(value).__name__} {value!r}")
    if kind == "int64":
        if isinstance(value, numbers.Integral):
            if not _INT64_MIN <= int(value) <= _INT64_MAX:
                raise InvalidArgumentError(f"{where} must fit int64 ([-2**63, 2**63 - 1]), got {value}")
            return int(value)
        if not math.isfinite(value):
            raise InvalidArgumentError(f"{where} must be finite, got {value!r}")
        if not -(2.0**63) <= value < 2.0**63:
            raise InvalidArgumentError(f"{where} must fit int64 ([-2**63, 2**63 - 1]), got {value}")
        return value  # a real bound on an int property: rounded inward below
    if not math.isfinite(float(value)):
        raise InvalidArgumentError(f"{where} must be finite, got {value!r}")
    return float(value)


_OPERATORS = ("==", "in", ">", ">=", "<", "<=")


def _values_list(value: Any) -> bool:
    """Whether a where condition's value is a list of values (a membership): any iterable but a
    str, bytes, dict or 0-d array (a list, tuple, set, array, generator, dict view, ...)."""
    return isinstance(value, Iterable) and not isinstance(value, (str, bytes, dict)) and not (
        isinstance(value, np.ndarray) and value.ndim == 0)


def _where(where: Any, filterable: dict) -> Optional[list]:
    """The core's conditions for ``where``: (name, values or None, int_min, int_max, real_min, real_max)."""
    if where is None:
        return None
    if not isinstance(where, dict):
        raise TypeError(f"where must be a dict {{property: condition}}, got {type(where).__name__}")
    conditions = []
    for name, condition in where.items():
        kind = filterable.get(name)
        if kind is None:
            declared = ", ".join(f"{n} ({t})" for n, t in filterable.items()) or "none was declared when the graph was created"
            raise InvalidArgumentError(f"where: {name!r} is not a filterable property; declared: {declared}")
        if isinstance(condition, dict):
            unknown = [op for op in condition if op not in _OPERATORS]
            if unknown or not condition:
                raise InvalidArgumentError(f"where[{name!r}]: operators are {', '.join(_OPERATORS)}; got {list(condition)!r}")
        elif _values_list(condition):
            condition = {"in": condition}  # a list, tuple, set, array, generator, dict view, ...
        else:
            condition = {"==": condition}
        values: Optional[list] = None
        int_min, int_max, real_min, real_max = _INT64_MIN, _INT64_MAX, -math.inf, math.inf
        for op, operand in condition.items():
            label = f"where[{name!r}][{op!r}]"
            if op in ("==", "in"):
                if op == "in" and not _values_list(operand):
                    raise InvalidArgumentError(f"{label} must be a list of values, got {type(operand).__name__} {operand!r}")
                items = list(operand) if op == "in" else [operand]
                if kind == "str":
                    bad = [v for v in items if not isinstance(v, str)]
                    if bad:
                        raise InvalidArgumentError(f"{label}: {name!r} is a str property; got {bad[0]!r}")
                    from .text_checks import _check_unicode

                    for v in items:
                        try:
                            _check_unicode(v, f"{label}: {v!r}")
                        except ValueError as exc:
                            raise InvalidArgumentError(str(exc)) from None
                    found = items
                else:
                    found = [_number(v, kind, label) for v in items]
                values = found if values is None else [v for v in values if v in found]
                continue
            if kind == "str":
                raise InvalidArgumentError(f"{label}: {name!r} is a str property; it takes values, not a range")
            bound = _number(operand, kind, label)
            if kind == "float64":
                if op in (">", ">="):
                    real_min = max(real_min, math.nextafter(bound, math.inf) if op == ">" else bound)
                else:
                    real_max = min(real_max, math.nextafter(bound, -math.inf) if op == "<" else bound)
            else:  # int64 / timestamp: inclusive integer bounds
                # Not clamped to int64: "> 2**63 - 1" leaves an empty range, made (1, 0) below.
                if op in (">", ">="):
                    int_min = max(int_min, math.floor(bound) + 1 if op == ">" else math.ceil(bound))
                else:
                    int_max = min(int_max, math.ceil(bound) - 1 if op == "<" else math.floor(bound))
        if values is not None and kind != "str":
            # Membership of numbers: the smallest range around them, then exact values in the core.
            if not values:
                int_min, int_max, real_min, real_max = 1, 0, math.inf, -math.inf  # admits nothing
            elif kind == "float64":
                real_min, real_max = max(real_min, min(values)), min(real_max, max(values))
            else:
                if any(not float(v).is_integer() for v in values):
                    values = [v for v in values if float(v).is_integer()]
                int_min = max(int_min, int(min(values))) if values else 1
                int_max = min(int_max, int(max(values))) if values else 0
        if int_min > int_max:  # admits nothing (also a bound past either end of int64)
            int_min, int_max = 1, 0
        conditions.append((name, values, int_min, int_max, real_min, real_max))
    return conditions


def _finite_reals(values: Any, name: str, unit: str = "row") -> np.ndarray:
    """``values`` as a float64 array of the same shape (the caller checks the shape).

    Raises:
        TypeError: a dtype that is not real numbers (bool, complex, text, object).
        InvalidArgumentError: NaN or infinity, naming the first ``unit`` (a row of a 2-D
            array, an item of a 1-D one) that holds it.
    """
    array = np.asarray(values)
    if array.size and (array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.number)
                       or np.issubdtype(array.dtype, np.complexfloating)):
        raise TypeError(f"{name} must hold real numbers, got dtype {array.dtype}")
    array = array.astype(np.float64, copy=False)
    finite = np.isfinite(array)
    if not finite.all():
        at = int(np.flatnonzero(~finite.reshape(len(array), -1).all(axis=1))[0]) if array.ndim else 0
        bad = array[at] if array.ndim == 1 else array[at][~finite[at]][0]
        raise InvalidArgumentError(f"{name} must be finite, got {bad} in {unit} {at}")
    return array


def _count(value: Any, name: str) -> int:
    """An int argument that must fit int64 (the core's integer type)."""
    if type(value) is int and _INT64_MIN <= value <= _INT64_MAX:
        return value
    if isinstance(value, bool):
        raise TypeError(f"{name} must be an int, got bool")
    try:
        value = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__}") from None
    if not _INT64_MIN <= value <= _INT64_MAX:
        raise InvalidArgumentError(f"{name} must fit int64, got {value}")
    return value


def _count_at_least(value: Any, name: str, least: int, note: str = "") -> int:
    """:func:`_count`, and at least ``least`` (InvalidArgumentError naming both; ``note`` says
    what a limit value means, e.g. " (0: never)")."""
    value = _count(value, name)
    if value < least:
        raise InvalidArgumentError(f"{name} must be >= {least}{note}, got {value}")
    return value


def _names(values: Any, name: str) -> Optional[list]:
    """None (no filter), one str, or an iterable of str; an item that is not a str, None
    included, is refused (TypeError naming its position)."""
    if values is None:
        return None
    if isinstance(values, str):
        return [values]
    if isinstance(values, (bytes, dict)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a str or a list of str, got {type(values).__name__}")
    return _check_str_items(list(values), name, "means no filter")


def _choice(value: Any, name: str, allowed: tuple) -> str:
    if not isinstance(value, str) or value not in allowed:
        options = ", ".join(map(repr, allowed[:-1])) + f" or {allowed[-1]!r}"
        raise InvalidArgumentError(f"{name} must be {options}, got {value!r}")
    return value


def _flag(value: Any, name: str) -> bool:
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{name} must be True or False, got {type(value).__name__}")
    return bool(value)


def _real(value: Any, name: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__}")
    try:
        return float(value)
    except OverflowError:
        raise InvalidArgumentError(f"{name} must be a finite real number, got an int of "
                                   f"{int(value).bit_length()} bits, beyond float64") from None


def _scan_expected(default: Any) -> str:
    """What a scan threshold takes: an int, and "auto" where that is the default."""
    return "an int >= 0" + (' or "auto"' if default == FILTER_SCAN_AUTO else "")


def _scan_max_nodes(value: Any, name: str, default: Any) -> int:
    """``full_scan_max_nodes`` or ``filter_scan_max_nodes`` as the engine's setting: the argument,
    or (None) the environment variable VECGRAPH_<NAME> (ASCII digits, surrounding spaces
    allowed; "auto" where the default is "auto"), or ``default``. "auto" gives
    ``_core.FILTER_SCAN_AUTO``."""
    auto = default == FILTER_SCAN_AUTO
    if value is None:
        variable = "VECGRAPH_" + name.upper()
        raw = os.environ.get(variable)
        if raw is None or raw.strip(_ASCII_SPACE) == "":
            value = default
        else:
            text = raw.strip(_ASCII_SPACE)
            if auto and text == FILTER_SCAN_AUTO:
                value = text
            elif text.isascii() and text.isdigit():
                value = int(text)
            else:
                raise InvalidArgumentError(f"{variable} must be {_scan_expected(default)}, got {raw!r}")
            name = variable
    if auto and isinstance(value, str):
        if value != FILTER_SCAN_AUTO:
            raise InvalidArgumentError(f"{name} must be {_scan_expected(default)}, got {value!r}")
        return _core.FILTER_SCAN_AUTO
    try:
        return _count_at_least(value, name, 0, " (0: HNSW always)")
    except TypeError:
        raise TypeError(f"{name} must be {_scan_expected(default)}, got {type(value).__name__}") from None


def _scan_threshold(name: str, default: Any, doc: str) -> property:
    """The Graph property ``name`` (full_scan_max_nodes, filter_scan_max_nodes): the engine's
    setting, set through _scan_max_nodes ("auto" where the default is "auto"). None is refused:
    as an argument it means "the environment variable or the default", which a later assignment
    should not silently take."""

    def get(self: Any) -> Union[int, str]:
        setting = getattr(self._engine, name)
        return FILTER_SCAN_AUTO if default == FILTER_SCAN_AUTO and setting == _core.FILTER_SCAN_AUTO else setting

    def set_(self: Any, value: Union[int, str]) -> None:
        if value is None:
            raise TypeError(f"{name} must be {_scan_expected(default)}, got None")
        setattr(self._engine, name, _scan_max_nodes(value, name, default))

    return property(get, set_, doc=doc)


def _threads(value: Any, name: str) -> int:
    threads = _count(value, name)
    if not 1 <= threads <= _MAX_THREADS:
        raise InvalidArgumentError(f"{name} must be in [1, {_MAX_THREADS}] (or None for all cores), got {threads}")
    return threads


def _search_args(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                 ts_min, ts_max, hop_decay, exact, ef, since=None, until=None) -> tuple:
    # The common call (plain ints, no filters, no time window) in one expression; anything
    # else takes the checks below, which accept a superset and give the same tuple.
    if (type(k) is int and type(seeds) is int and type(hops) is int and type(max_visited) is int
            and type(max_fanout) is int and (ef is None or type(ef) is int) and type(hop_decay) is float
            and type(exact) is bool and rels is None and labels is None and tenants is None
            and ts_min is None and ts_max is None and since is None and until is None
            and type(direction) is str and direction in _DIRECTIONS
            and _INT64_MIN <= min(k, seeds, hops, max_visited, max_fanout)
            and max(k, seeds, hops, max_visited, max_fanout) <= _INT64_MAX
            and (ef is None or _INT64_MIN <= ef <= _INT64_MAX)):
        return (k, seeds, hops, max_visited, max_fanout, direction, None, None, None, _INT64_MIN, _INT64_MAX,
                hop_decay, exact, 0 if ef is None else ef)
    return _search_args_checked(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                ts_min, ts_max, hop_decay, exact, ef, since, until)


def _search_args_checked(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                         ts_min, ts_max, hop_decay, exact, ef, since=None, until=None) -> tuple:
    if since is not None:
        if ts_min is not None:
            raise InvalidArgumentError("give since or ts_min, not both")
        ts_min = _timestamp_us(since, "since")
    if until is not None:
        if ts_max is not None:
            raise InvalidArgumentError("give until or ts_max, not both")
        ts_max = _timestamp_us(until, "until")
    return (
        _count(k, "k"),
        _count(seeds, "seeds"),
        _count(hops, "hops"),
        _count(max_visited, "max_visited"),
        _count(max_fanout, "max_fanout"),
        _choice(direction, "direction", _DIRECTIONS),
        _names(rels, "rels"),
        _names(labels, "labels"),
        _names(tenants, "tenants"),
        _INT64_MIN if ts_min is None else _count(ts_min, "ts_min"),
        _INT64_MAX if ts_max is None else _count(ts_max, "ts_max"),
        _real(hop_decay, "hop_decay"),
        _flag(exact, "exact"),
        0 if ef is None else _count(ef, "ef"),
    )


def _node_columns(keys: Any, vectors: Any, labels: Any, texts: Any, tenants: Any, ts: Any, props: Any,
                  filterable: dict, vectors_required: bool = True) -> tuple:
    """The columns of add_nodes / upsert_nodes / update_nodes as the core takes them: ``(keys,
    vectors, labels, tenants, ts, texts, props)``, vectors a C-contiguous float32 (n, dim)
    array, or None when not ``vectors_required`` (update_nodes: the nodes keep theirs)."""
    keys = _keys(keys, "keys")
    n = len(keys)
    matrix = None
    if vectors is not None or vectors_required:
        matrix = _float_array(vectors, "vectors", 2)
        if matrix.shape[0] != n:
            raise ValueError(f"vectors has {matrix.shape[0]} rows, keys has {n}")
    labels, tenants, ts = _strings(labels, "labels", n), _strings(tenants, "tenants", n), _timestamps(ts, "ts", n)
    texts, props = _strings(texts, "texts", n, one_for_all=False), _props(props, n, filterable, keys)
    return keys, matrix, labels, tenants, ts, texts, props


def _edge_columns(src: Any, dst: Any, rels: Any, weights: Any, ts: Any, texts: Any, props: Any,
                  vectors: Any) -> tuple:
    """The columns of add_edges as the core takes them: ``(src, dst, rels, weights, ts, texts,
    props, vectors)``; weights one float or a float32 (n,) array, vectors a float32 (n, dim)
    array or None."""
    src = _keys(src, "src", int_arrays=True)
    dst = _keys(dst, "dst", int_arrays=True)
    n = len(src)
    if len(dst) != n:
        raise ValueError(f"src has {n} keys, dst has {len(dst)}")
    weight_arg = None
    if type(weights) is float or type(weights) is int:  # one weight for all: the common case, kept cheap
        weight_arg = float(weights) if abs(weights) <= _FLOAT32_MAX else _float32_or_inf(weights)  # the binding fills the column
    elif weights is not None:
        try:
            weights = np.asarray(weights)  # once: a list of millions of floats is converted here only
        except ValueError as e:  # rows of different lengths
            raise ValueError(f"weights must be one number or {n} of them ({e})") from None
        if weights.dtype == np.bool_:  # a bool is no weight (as for ts)
            raise TypeError(f"weights must be numbers (one float, or {n} of them), got bool")
        if weights.dtype == object and weights.ndim == 1:
            row = next((i for i, w in enumerate(weights.tolist()) if w is None), None)
            if row is not None:
                raise TypeError(f"weights[{row}] must be a number, got None (None inside the list is refused; "
                                "weights=None gives every edge the default 1.0)")
        if weights.ndim == 0:
            weights = np.full(n, weights)
        elif weights.ndim != 1:
            raise ValueError(f"weights must have shape ({n},), got {weights.shape}")
        weight_arg = _float_array(weights, "weights", 1)
        if weight_arg.shape[0] != n:
            raise ValueError(f"weights has {weight_arg.shape[0]} items, expected {n}")
    vector_matrix = None if vectors is None else _float_array(vectors, "vectors", 2)
    return (
        src,
        dst,
        _strings(rels, "rels", n),
        weight_arg,
        _timestamps(ts, "ts", n),
        _strings(texts, "texts", n, one_for_all=False),
        _props(props, n),
        vector_matrix,
    )


def _metric(value: Any) -> str:
    """A metric name checked: "cos", "ip" or "l2"; "cosine" is taken as "cos"."""
    if isinstance(value, str) and value == "cosine":
        return "cos"
    return _choice(value, "metric", _METRICS)


def quantize(vectors: Any, metric: str = "cos") -> tuple[np.ndarray, np.ndarray]:
    """Quantize float vectors to int8 exactly as a graph stores them.

    Args:
        vectors: (n, dim) array-like of real numbers.
        metric: "cos" (rows are L2-normalised first; "cosine" is the same), "ip" or "l2".

    Returns:
        ``(codes, scales)``: int8 array (n, dim) and float32 array (n,), with
        ``vector ≈ codes * scale``. Per row, in float32 (under "cos" x is the row divided by its
        L2 norm, computed in float64): ``scale = max|x| / 127`` and
        ``code = round(x * (127 / max|x|))``, rounding half to even, so codes lie in
        [-127, 127]. (At an exact tie this can differ by one from ``round(x / scale)``.) An
        all-zero row gives codes 0 and scale 0.

    Raises:
        InvalidArgumentError: NaN or inf anywhere, an all-zero row under "cos", or under "ip"
            and "l2" a row whose largest |value| is below 1.5e-36 (its scale would not be a
            normal float32) or whose squared norm passes 8.5e37 (scores would overflow).
    """
    matrix = _float_array(vectors, "vectors", 2)
    if matrix.shape[1] == 0:
        raise ValueError("vectors must have at least one column, got shape " + str(matrix.shape))
    return _core.quantize(matrix, _metric(metric))
