"""The :class:`Graph` facade: typed, documented access to the C++ core."""

from __future__ import annotations

import contextlib
import ctypes
import datetime
import json
import math
import numbers
import shutil
import sys
import threading
import operator
import os
import unicodedata
import warnings
import weakref
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, NamedTuple, Optional, Union

import numpy as np

from . import _core
from . import hybrid, storage
from .fusion import rrf_with_ranks
from .errors import CorruptionError, DimensionMismatchError, Error, InvalidArgumentError, ReadOnlyError
from .errors import _short

Key = Union[str, int]

__all__ = ["Graph", "SearchResult", "Hit", "Edge", "quantize"]

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
TEXT_INDEX_DIR = "text"
BACKGROUND_INDEX_MIN = 4096  # fewer nodes waiting for HNSW after recovery are inserted before open returns
_NEVER = 2**64 - 1
LEGACY_TEXT_INDEX_FILES = ("text.sqlite", "text.sqlite-wal", "text.sqlite-shm")  # layout 1, replaced
_MAX_HYBRID_K = 100_000
_MAX_THREADS = 1024


class Edge(NamedTuple):
    """A directed edge as stored: ``src --rel--> dst`` with its weight."""

    src: Key
    rel: str
    dst: Key
    weight: float


class Hit(NamedTuple):
    """One search result: the node's key, its score, its hop distance from the nearest seed
    that reached it (0 for a seed), and the edges walked from that seed to it."""

    key: Key
    score: float
    hop: int
    path: list[Edge]


class SearchResult:
    """The result of one :meth:`Graph.search`, best first.

    Attributes:
        keys: list of node keys, length n (n <= k; fewer when fewer nodes were reached).
        scores: float32 array of shape (n,): similarity to the query computed from the int8
            codes (cos: the cosine of the dequantized vectors, which float32 rounding can push
            a hair above 1; ip: inner product; l2: minus the squared distance), decayed by
            d = ``hop_decay ** hop``
            (times d for a score >= 0, divided by d for a negative one); higher is better.
        hops: int32 array of shape (n,): hop distance from the seed that reached the node.
        paths: list of n lists of :class:`Edge`, from the seed to the node (empty for a seed);
            built on first access.
        count_seeds: how many seeds the seed search returned.
        count_visited: how many nodes the expansion visited and scored.

    A result pickles (for another process, or a cache): the copy holds its paths, read from
    the graph when it is pickled, and needs no graph.
    """

    __slots__ = ("keys", "scores", "hops", "count_seeds", "count_visited", "_offsets", "_edges", "_engine", "_paths")

    def __init__(self, raw: tuple, engine: _core.Engine) -> None:
        (self.keys, self.scores, self.hops, self._offsets, self._edges, self.count_seeds, self.count_visited) = raw
        self._engine = engine
        self._paths: Optional[list[list[Edge]]] = None

    @property
    def paths(self) -> list[list[Edge]]:
        if self._paths is None:
            edges = [Edge(*e) for e in self._engine.edges(self._edges)] if len(self._edges) else []
            offsets = self._offsets
            self._paths = [edges[offsets[i] : offsets[i + 1]] for i in range(len(self.keys))]
        return self._paths

    def __reduce__(self) -> tuple:
        return (_search_result_from_state,
                (self.keys, self.scores, self.hops, self.count_seeds, self.count_visited, self.paths))

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: Union[int, slice]) -> Union[Hit, list[Hit]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self.keys)))]
        i = _count(i, "index")
        n = len(self.keys)
        if not -n <= i < n:
            raise IndexError(f"result index {i} out of range for {n} results")
        i %= n
        return Hit(self.keys[i], float(self.scores[i]), int(self.hops[i]), self.paths[i])

    def __iter__(self) -> Iterator[Hit]:
        for i in range(len(self.keys)):
            yield self[i]

    def __repr__(self) -> str:
        shown = ", ".join(f"{k!r}: {s:.4f}" for k, s in zip(self.keys[:5], self.scores[:5]))
        more = ", ..." if len(self.keys) > 5 else ""
        return f"SearchResult({len(self.keys)} hits: {{{shown}{more}}}, visited={self.count_visited})"


def _search_result_from_state(keys: list, scores: np.ndarray, hops: np.ndarray, count_seeds: int,
                              count_visited: int, paths: list) -> SearchResult:
    """A SearchResult made by unpickling: its paths are given, so it holds no engine."""
    result = SearchResult.__new__(SearchResult)
    result.keys, result.scores, result.hops = keys, scores, hops
    result.count_seeds, result.count_visited = count_seeds, count_visited
    result._offsets = result._edges = result._engine = None
    result._paths = paths
    return result


_FLOAT32_MAX = float(np.finfo(np.float32).max)


# Every graph made in this process, for the fork handler below.
_GRAPHS: "weakref.WeakSet[Graph]" = weakref.WeakSet()


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


# A write batch of at least this many rows returns the C heap's free pages to the operating
# system when it is done: the batch's temporaries (keys, converted columns, WAL payload, HNSW
# insert buffers) are freed by then, but glibc keeps most of them in the process. Measured on a
# 300,000-node, 1.5M-edge build: 27 MB after add_nodes and 25 MB after add_edges. A smaller batch
# frees too little for the trim's cost (it walks the heap's free blocks).
_RELEASE_MEMORY_MIN_ROWS = 65_536


def _release_after_batch(count_rows: int) -> None:
    if count_rows >= _RELEASE_MEMORY_MIN_ROWS:
        _core.release_free_memory()


def _float32_or_inf(value: Union[int, float]) -> float:
    """A Python number as float32 takes it: beyond float32, an infinity of its sign (the core
    refuses it by name as not finite) instead of NumPy's overflow warning."""
    try:
        value = float(value)
    except OverflowError:  # an int beyond float
        return math.inf if value > 0 else -math.inf
    return math.copysign(math.inf, value) if abs(value) > _FLOAT32_MAX else value


def _check_folder_takes_a_graph(folder: str, dim: Any) -> None:
    """A folder without a MANIFEST takes a new graph only when empty (but for what an
    interrupted creation leaves) and given ``dim``; else InvalidArgumentError."""
    leftovers = storage.foreign_entries(folder)
    if leftovers:
        raise InvalidArgumentError(
            f"{folder} is not empty and has no MANIFEST ({', '.join(sorted(leftovers)[:5])}); "
            "refusing to create a graph over other files"
        )
    if dim is None:
        raise InvalidArgumentError(f"{folder} holds no graph yet; pass dim (and metric) to create one")


def _float_array(values: Any, name: str, ndim: int) -> np.ndarray:
    """``values`` as a C-contiguous float32 array of rank ``ndim``, or a clear error."""
    if type(values) is np.ndarray and values.dtype == np.float32 and values.ndim == ndim and values.flags.c_contiguous:
        return values  # the common case, kept cheap: this runs on every search
    want = "(dim,)" if ndim == 1 else "(n, dim)"
    try:
        array = np.asarray(values)
    except ValueError as e:  # rows of different lengths
        raise ValueError(f"{name} must be a numeric array of shape {want}; its rows differ in length ({e})") from None
    if array.dtype == object or not (np.issubdtype(array.dtype, np.number) or array.dtype == np.bool_):
        raise TypeError(f"{name} must be a numeric array, got dtype {array.dtype}")
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


def _strings(values: Any, name: str, count: int, one_for_all: bool = True) -> Optional[list]:
    """None, one str for every row (when ``one_for_all``), or a sequence of ``count`` str / None."""
    if values is None:
        return None
    if isinstance(values, str):
        if not one_for_all:
            raise TypeError(f"{name} must be a list of {count} str (one per row), got one str "
                            f"(wrap it in a list)")
        return [values] * count
    if type(values) is list and len(values) == count:  # items are checked by the core
        return values
    if isinstance(values, (bytes, dict, set, frozenset)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a str or a list of {count} str, got {type(values).__name__}")
    values = list(values)
    if len(values) != count:
        raise ValueError(f"{name} has {len(values)} items, expected {count} (one per row)")
    return values


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
    if array.dtype == object and all(isinstance(v, int) and not isinstance(v, bool) for v in array.tolist()):
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
                raise TypeError(f"{name}[{i}] must be an int (microseconds since the epoch), a datetime or a "
                                f"date, got {type(v).__name__} {v!r}")
        return np.fromiter((_timestamp_us(v, name) for v in values), dtype=np.int64, count=count)
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
                    from .text import _check_unicode

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
                if op in (">", ">="):
                    low = math.floor(bound) + 1 if op == ">" else math.ceil(bound)
                    int_min = max(int_min, min(low, _INT64_MAX))
                else:
                    high = math.ceil(bound) - 1 if op == "<" else math.floor(bound)
                    int_max = min(int_max, max(high, _INT64_MIN))
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
        conditions.append((name, values, int_min, int_max, real_min, real_max))
    return conditions


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
    """None (no filter), one str, or an iterable of str."""
    if values is None:
        return None
    if isinstance(values, str):
        return [values]
    if isinstance(values, (bytes, dict)) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a str or a list of str, got {type(values).__name__}")
    values = list(values)
    for row, value in enumerate(values):
        if not isinstance(value, str):
            raise TypeError(f"{name} must hold str, got {type(value).__name__} at position {row}")
    return values


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

    def get(self: "Graph") -> Union[int, str]:
        setting = getattr(self._engine, name)
        return FILTER_SCAN_AUTO if default == FILTER_SCAN_AUTO and setting == _core.FILTER_SCAN_AUTO else setting

    def set_(self: "Graph", value: Union[int, str]) -> None:
        if value is None:
            raise TypeError(f"{name} must be {_scan_expected(default)}, got None")
        setattr(self._engine, name, _scan_max_nodes(value, name, default))

    return property(get, set_, doc=doc)


def _threads(value: Any, name: str) -> int:
    threads = _count(value, name)
    if not 1 <= threads <= _MAX_THREADS:
        raise InvalidArgumentError(f"{name} must be in [1, {_MAX_THREADS}] (or None for all cores), got {threads}")
    return threads


def quantize(vectors: Any, metric: str = "cos") -> tuple[np.ndarray, np.ndarray]:
    """Quantize float vectors to int8 exactly as a graph stores them.

    Args:
        vectors: (n, dim) array-like of real numbers.
        metric: "cos" (rows are L2-normalised first), "ip" or "l2".

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
    return _core.quantize(matrix, _choice(metric, "metric", _METRICS))


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
            per-search ``ef``. Default 64. On clustered 384-d data at 100,000 nodes (k=10, 8
            seeds, hops=2) recall@10 against ``exact=True`` is 0.994-0.996 at p50 89-94 µs,
            where M=16 with ef=128 gave 0.995 at 113 µs; at 1,000,000 nodes 0.979-0.981 (ef=128:
            0.988). On WordNet (256-d text embeddings, 117,659 nodes) it is 0.965; ef=96 gives
            0.981 and ef=128 0.989, at 1.3x and 1.7x the search time.
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
        self._engine = _core.Engine(dim, _choice(metric, "metric", _METRICS), connectivity, expansion_add,
                                    expansion_search, threads, auto_compact_edges, list(self._filterable.items()))
        self._engine.full_scan_max_nodes = full_scan_max_nodes
        self._engine.filter_scan_max_nodes = filter_scan_max_nodes
        self._hnsw = {"connectivity": connectivity, "expansion_add": expansion_add, "expansion_search": expansion_search}
        self._path: Optional[str] = None
        self._lock: Optional[storage.FolderLock] = None
        self._manifest: Optional[dict] = None
        self._embedder: Optional[dict] = None  # {"name", "dim"} of an in-memory graph's embedder
        self._closed = False
        self._read_only = False  # a folder graph opened with read_only=True
        self._pid = os.getpid()  # of the process that made this graph (see _forked)
        _GRAPHS.add(self)
        self._checkpoint_lock = threading.Lock()  # one checkpoint at a time; close waits for it
        # BM25 over node texts (vecgraph.text), kept in step with the graph's writes; entity
        # names (str keys and aliases) for the entity channel; both built on first use.
        self._text: Any = None
        self._text_lock = threading.RLock()  # writes that change texts, in LSN order
        self._entities: Any = None

    # ---------------------------------------------------------------- durable graphs

    @classmethod
    def open(
        cls,
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
    ) -> "Graph":
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
            metric = _choice(metric, "metric", _METRICS)
        if dim is not None:
            _count_at_least(dim, "dim", 1)
        try:
            raw_path = os.fspath(path)
        except TypeError:
            raise TypeError(f"path must be a non-empty str or os.PathLike, got {type(path).__name__} {path!r}") from None
        if not isinstance(raw_path, str) or not raw_path:
            raise TypeError(f"path must be a non-empty str or os.PathLike, got {path!r}")
        if "\0" in raw_path:
            raise InvalidArgumentError(f"path must not contain a NUL character, got {raw_path!r}")
        folder = os.path.abspath(raw_path)
        if os.path.exists(folder) and not os.path.isdir(folder):
            raise storage.StorageError(f"{folder} is a file, not a graph folder")
        created = not os.path.exists(folder)
        if read_only and not os.path.isfile(os.path.join(folder, storage.MANIFEST)):
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
        try:
            manifest = storage.read_manifest(folder)
            if manifest is not None:
                # Before anything on disk changes: a WAL whose newest segments are gone (deleted,
                # or the folder copied without them) lost acknowledged writes; refuse it.
                storage.check_wal_tail(folder, manifest)
            if not read_only:
                lock.stamp()
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
                graph = cls(manifest["dim"], metric, connectivity=connectivity, expansion_add=expansion_add,
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

                def empty_graph() -> "Graph":
                    g = cls(manifest["dim"], manifest["metric"], connectivity=connectivity,
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
            # The WAL continues where its last segment ends; with no segment, after the snapshot.
            next_lsn = report["next_lsn"] or snapshot_lsn + 1
            if read_only:
                graph._engine.refuse_writes(
                    f"the graph at {folder} is open read-only (Graph.open(..., read_only=True)); "
                    "open it without read_only to write")
            else:
                # The writer makes WAL_TAIL name the segment it appends to or creates.
                graph._engine.attach_wal(wal_dir, uuid, next_lsn, sync, sync_interval_ms, segment_bytes, wal_tail)
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
            if not read_only:
                graph._open_text_index()
        except BaseException:
            graph.close()
            raise
        graph._recovery = dict(report, snapshot=manifest["snapshot"], hnsw=loaded["hnsw"] if loaded else None)
        _release_after_batch(len(graph) + graph.count_edges)  # loading's temporaries (Arrow tables, the replay)
        return graph

    @property
    def filterable(self) -> dict:
        """The filterable properties declared when the graph was created, ``{name: type}``
        with types "str", "int64", "float64" or "timestamp"."""
        return dict(self._filterable)

    @property
    def path(self) -> Optional[str]:
        """The graph folder, or None for an in-memory graph."""
        return self._path

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

    def checkpoint(self) -> dict:
        """Write the current state as an Arrow snapshot, commit it in the MANIFEST, and drop
        the WAL segments it makes unnecessary. Writes wait while the state is copied out.
        The HNSW graph is saved beside it when it holds exactly the live nodes (not while a
        background pass of :meth:`open` runs); with nothing written since the last snapshot,
        a checkpoint writes a new one only to add the HNSW graph that one lacks.

        Returns:
            {"lsn": LSN the snapshot holds, "snapshot": its folder, "nodes": n, "edges": m}.

        Raises:
            InvalidArgumentError: an in-memory graph (nothing to checkpoint to).
            ReadOnlyError: the graph is closed.
            StorageError: the snapshot could not be written.
        """
        with self._checkpoint_lock:
            self._require_folder("checkpoint")
            unchanged = (self._manifest["snapshot"] is not None
                         and self._manifest["snapshot_lsn"] == self._engine.last_lsn())
            if unchanged and (storage.HNSW_FILE in (self._manifest.get("files") or {})
                              or not self._engine.seed_index_complete()):
                stats = self._engine.stats()  # nothing written since the last snapshot
                return {"lsn": self._manifest["snapshot_lsn"],
                        "snapshot": os.path.join(self._path, self._manifest["snapshot"]),
                        "nodes": stats["nodes"], "edges": stats["edges"]}
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
                manifest["text_lsn"] = int(state["text_lsn"])
                storage.write_manifest(self._path, manifest)
            except BaseException as e:
                # A failed generation gives its disk space back at once (on a full disk, the
                # space the next try needs); the committed snapshots are untouched.
                shutil.rmtree(tmp, ignore_errors=True)
                self._adopt_manifest_on_disk()
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
                if self._text is not None:
                    self._text.optimize()  # buffered BM25 writes survive a crash from here on
            return {"lsn": int(state["lsn"]), "snapshot": os.path.join(self._path, manifest["snapshot"]),
                    "nodes": len(state["ts"]), "edges": len(state["edge_src"])}

    def _adopt_manifest_on_disk(self) -> None:
        """After a failed checkpoint: the MANIFEST on disk may already commit the new generation
        (its rename was done when a later fsync failed). The next checkpoint must then write the
        generation after it, not write over the one the MANIFEST names."""
        try:
            on_disk = storage.read_manifest(self._path)
        except Exception:  # noqa: BLE001 - unreadable now: the next open reads it again
            return
        if on_disk and int(on_disk.get("generation", 0)) > int(self._manifest.get("generation", 0)):
            self._manifest = on_disk

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
        if self._forked:  # the WAL, the LOCK and the folder's text index belong to the process that forked this one
            self._closed = True
            with self._text_lock:  # a BM25 index this process made (in memory, or a read-only graph's copy) goes
                if self._text is not None:
                    self._text.close()
                    self._text = None
            return
        with self._checkpoint_lock:  # a checkpoint in another thread finishes first
            if self._closed:
                return
            self._closed = True
            try:
                self._engine.wait_for_compaction()
                if self._path is not None:
                    self._engine.close_wal()
            except ReadOnlyError:
                pass  # the WAL had already failed; that write raised, and the LOCK goes below
            finally:
                if self._path is not None and self._text is not None:
                    with self._text_lock:
                        self._text.close()
                        self._text = None  # a later BM25 search builds one in memory
                if self._lock is not None:
                    self._lock.release()
                    self._lock = None

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

    def use_embedder(self, embedder: Any) -> None:
        """Record ``embedder`` (any object with ``name``, ``dim`` and ``__call__``, see
        :mod:`vecgraph.embedders`) as the one that builds this graph's vectors, or check that it
        is the one already recorded. The first call records it (for a folder graph, durably in
        the MANIFEST); later calls, also after a reopen, accept only the same name and dim.

        Raises:
            DimensionMismatchError: the embedder's dim is not the graph's dim.
            InvalidArgumentError: another embedder name is recorded.
            TypeError: not an embedder.
            ReadOnlyError: nothing recorded yet and the graph is closed.
        """
        from .embedders import check_embedder, spec_of

        embedder = check_embedder(embedder)
        name, dim = embedder.name, int(embedder.dim)
        if dim != self.dim:
            recorded = self.embedder
            built = f"; it was built with embedder {recorded['name']!r}" if recorded else ""
            raise DimensionMismatchError(
                f"embedder {name!r} makes {dim}-d vectors, the graph's dim is {self.dim}{built}")
        with self._checkpoint_lock:  # a concurrent checkpoint commits the MANIFEST it copied
            recorded = self.embedder
            if recorded is not None:
                if recorded["name"] != name:
                    raise InvalidArgumentError(
                        f"the graph was built with embedder {recorded['name']!r} (dim {recorded['dim']}); "
                        f"refusing embedder {name!r} (dim {dim}): its vectors are not comparable")
                return
            self._check_writable("recording an embedder needs")
            record = {"name": name, "dim": dim}
            spec = spec_of(embedder)
            if spec is not None and spec != name:
                record["spec"] = spec  # how to load it again (vecgraph query)
            if self._manifest is not None:
                manifest = dict(self._manifest, embedder=record)
                try:
                    storage.write_manifest(self._path, manifest)
                except OSError as e:
                    raise storage.StorageError(f"cannot record the embedder in {self._path}: {e}") from e
                self._manifest = manifest
            else:
                self._embedder = record

    def embed_query(self, text: Union[str, Sequence[str]], embedder: Any) -> np.ndarray:
        """Embed query text(s) with ``embedder``, after checking that it is the embedder this
        graph was built with (if one was recorded) and that its dim is the graph's. Queries do
        not record an embedder.

        >>> hits = g.search(g.embed_query("who makes widgets?", emb), k=5)        # doctest: +SKIP
        >>> batch = g.search_batch(g.embed_query(["q1", "q2"], emb), k=5)          # doctest: +SKIP

        Args:
            text: one non-empty str, or a sequence of them.
            embedder: see :mod:`vecgraph.embedders`.

        Returns:
            float32 array of shape (dim,) for one str, (n, dim) for a sequence.

        Raises:
            DimensionMismatchError: the embedder's dim (or the shape it returned) is wrong.
            InvalidArgumentError: another embedder is recorded; an empty text; NaN/inf returned.
            TypeError: text is not a str or a sequence of str; not an embedder.
        """
        from .embedders import check_embedder, embed

        embedder = check_embedder(embedder)
        name, dim = embedder.name, int(embedder.dim)
        recorded = self.embedder
        if dim != self.dim:
            built = f"; it was built with embedder {recorded['name']!r}" if recorded else ""
            raise DimensionMismatchError(
                f"query embedder {name!r} makes {dim}-d vectors, the graph's dim is {self.dim}{built}")
        if recorded is not None and recorded["name"] != name:
            raise InvalidArgumentError(
                f"the graph was built with embedder {recorded['name']!r} (dim {recorded['dim']}); "
                f"refusing query embedder {name!r} (dim {dim}): its vectors are not comparable")
        single = isinstance(text, str)
        if not single and (not isinstance(text, Iterable) or isinstance(text, (bytes, dict, set, frozenset))):
            raise TypeError(f"text must be a str or a sequence of str, got {type(text).__name__}")
        texts = [text] if single else list(_keys(text, "text"))
        for row, item in enumerate(texts):
            if not isinstance(item, str):
                raise TypeError(f"text {row} must be a str, got {type(item).__name__}")
            if not item:
                raise InvalidArgumentError(f"text {row} is empty; a query needs some text to embed")
        vectors = embed(embedder, texts)
        return vectors[0] if single else vectors

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
        ts: Union[int, Sequence[int], np.ndarray, None] = None,
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
            props: n JSON-serializable dicts or None, stored as JSON text: they come back
                as JSON reads them (``{1: (2, 3)}`` as ``{"1": [2, 3]}``; datetimes and dates
                as int microseconds since the epoch).

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
            TypeError / ValueError: keys, columns or arrays of the wrong type or length.
        """
        _release_after_batch(self._write_nodes(self._engine.add_nodes, keys, vectors, labels, texts, tenants, ts, props))

    def _write_nodes(self, write, keys, vectors, labels, texts, tenants, ts, props) -> int:
        # Checks and converts the columns of add_nodes / upsert_nodes, then calls the core's
        # `write`; returns the batch's size.
        self._check_writable()
        keys = _keys(keys, "keys")
        n = len(keys)
        matrix = _float_array(vectors, "vectors", 2)
        if matrix.shape[0] != n:
            raise ValueError(f"vectors has {matrix.shape[0]} rows, keys has {n}")
        labels, tenants, ts = _strings(labels, "labels", n), _strings(tenants, "tenants", n), _timestamps(ts, "ts", n)
        texts, props = _strings(texts, "texts", n, one_for_all=False), _props(props, n, self._filterable, keys)
        upsert = write == self._engine.upsert_nodes
        if not upsert and not (texts and any(texts)) and self._entities is None:
            write(keys, matrix, labels, tenants, ts, texts, props)  # nothing for the text index
            return n
        with self._text_lock:
            write(keys, matrix, labels, tenants, ts, texts, props)
            if self._text is not None and (upsert or (texts and any(texts))):
                self._write_text(lambda index: index.upsert(keys, texts or [""] * n, tenants=tenants, labels=labels,
                                                            ts=ts, lsn=self._engine.last_lsn()))
            if self._entities is not None:
                self._write_entities(lambda index: index.add_keys(keys))
        return n

    def add_edges(
        self,
        src: Sequence[Key],
        dst: Sequence[Key],
        *,
        rels: Union[str, Sequence[str], None] = None,
        weights: Any = None,
        ts: Union[int, Sequence[int], np.ndarray, None] = None,
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
            texts: a list of n texts (default ""; a bare str is refused). props: n JSON-serializable
                dicts or None, stored as JSON text as for :meth:`add_nodes`.
            vectors: optional (n, dim) edge vectors, stored as int8 like node vectors.

        Raises:
            NotFoundError: an endpoint that is not a node.
            InvalidArgumentError: a NaN or infinite weight, a bad edge vector; on a folder
                graph, a batch whose WAL record would pass 1 GiB (nothing is written).
            DimensionMismatchError: edge vectors of the wrong length.
            ReadOnlyError: the graph is closed, or read-only after a failed WAL write or fsync
                (nothing was written).
            StorageError: on a folder graph, the WAL write or fsync failed: the graph turns
                read-only and this write may or may not be kept (see :meth:`open`).
        """
        _release_after_batch(self._write_edges(src, dst, rels, weights, ts, texts, props, vectors))

    def _write_edges(self, src, dst, rels, weights, ts, texts, props, vectors) -> int:
        # Checks and converts the columns of add_edges, then calls the core; returns the batch's size.
        self._check_writable()
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
            if weights.ndim == 0:
                weights = np.full(n, weights)
            elif weights.ndim != 1:
                raise ValueError(f"weights must have shape ({n},), got {weights.shape}")
            weight_arg = _float_array(weights, "weights", 1)
            if weight_arg.shape[0] != n:
                raise ValueError(f"weights has {weight_arg.shape[0]} items, expected {n}")
        vector_matrix = None if vectors is None else _float_array(vectors, "vectors", 2)
        self._engine.add_edges(
            src,
            dst,
            _strings(rels, "rels", n),
            weight_arg,
            _timestamps(ts, "ts", n),
            _strings(texts, "texts", n, one_for_all=False),
            _props(props, n),
            vector_matrix,
        )
        return n

    def upsert_nodes(
        self,
        keys: Sequence[Key],
        vectors: Any,
        *,
        labels: Union[str, Sequence[str], None] = None,
        texts: Optional[Sequence[str]] = None,
        tenants: Union[str, Sequence[str], None] = None,
        ts: Union[int, Sequence[int], np.ndarray, None] = None,
        props: Optional[Sequence[Optional[dict]]] = None,
    ) -> None:
        """Add new keys and replace existing ones: label, tenant, ts, text, props and vector
        are all replaced (omitted columns take their defaults); edges stay. All or nothing.

        Arguments and errors as :meth:`add_nodes`, except that a key already in the graph is
        not an error (a key repeated within the batch still is).
        """
        _release_after_batch(self._write_nodes(self._engine.upsert_nodes, keys, vectors, labels, texts, tenants, ts, props))

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
        is given; parallel edges all go). All or nothing.

        Returns:
            The number of edges deleted.

        Raises:
            NotFoundError: a pair with no such edge (unless ``missing_ok``).
            ReadOnlyError, StorageError: as for :meth:`add_nodes`.
        """
        self._check_writable()
        src = _keys(src, "src", int_arrays=True)
        dst = _keys(dst, "dst", int_arrays=True)
        if len(src) != len(dst):
            raise ValueError(f"src has {len(src)} keys, dst has {len(dst)}")
        return self._engine.delete_edges(src, dst, _strings(rels, "rels", len(src)), _flag(missing_ok, "missing_ok"))

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
            if deleted:
                self._entities = None  # rebuilt from the graph on next use
        return deleted

    # ---------------------------------------------------------------- names and text

    def add_aliases(self, key: Key, aliases: Sequence[str]) -> list[str]:
        """Add other names of a node (abbreviations, translations, former names), kept with
        the node (logged, snapshotted; an upsert keeps them). A query text of
        :meth:`hybrid_search` that mentions a node's key or one of its aliases makes the node
        a graph seed and an ``entity`` result. Names compare after Unicode NFC normalisation
        and casefolding, with whitespace collapsed; an alias equal to one the node has is
        not added twice.

        Args:
            key: the node.
            aliases: list of non-empty str (without the control character U+001F).

        Returns:
            The node's aliases after the change (NFC-normalised, in the order added).

        Raises:
            NotFoundError: key is not in the graph.
            TypeError, InvalidArgumentError: aliases not a list of non-empty str.
        """
        self._check_writable()
        if isinstance(aliases, (str, bytes)) or not isinstance(aliases, Iterable):
            raise TypeError(f"aliases must be a list of str, got {type(aliases).__name__}")
        aliases, new = list(aliases), []
        for i, alias in enumerate(aliases):
            if not isinstance(alias, str):
                raise TypeError(f"aliases[{i}] must be str, got {type(alias).__name__}")
            if hybrid.ALIAS_SEPARATOR in alias:
                raise InvalidArgumentError(f"aliases[{i}] must not hold U+001F, got {alias!r}")
            alias = " ".join(unicodedata.normalize("NFC", alias).split())
            if not alias:
                raise InvalidArgumentError(f"aliases[{i}] must be a non-empty name, got {aliases[i]!r}")
            new.append(alias)
        with self._text_lock:
            current = self.aliases(key)
            known = {hybrid.normalize_name(a) for a in current}
            merged = list(current)
            for alias in new:
                if hybrid.normalize_name(alias) not in known:
                    known.add(hybrid.normalize_name(alias))
                    merged.append(alias)
            if merged != current:
                self._engine.set_aliases([key], [hybrid.ALIAS_SEPARATOR.join(merged)])
                if self._entities is not None:
                    self._write_entities(lambda index: index.add(key, merged))
        return merged

    def aliases(self, key: Key) -> list[str]:
        """The aliases of a node (see :meth:`add_aliases`). Raises NotFoundError for an unknown key."""
        joined = self._engine.get_node(key)["aliases"]
        return joined.split(hybrid.ALIAS_SEPARATOR) if joined else []

    def _text_index(self) -> Any:
        """The BM25 index of node texts, created (and filled from the graph) on first use.
        Searches do not wait for writes here (writers hold the text lock through their fsync)."""
        index = self._text
        if index is not None and not index.closed:
            return index
        with self._text_lock:
            if self._text is None or self._text.closed:
                if self._read_only and not self._closed:  # after close: in memory, the folder left alone
                    self._text = self._text_index_copy()
                elif self._path is not None and not self._closed and not self._forked:
                    self._open_text_index()  # after a failed write: reopened, caught up
                else:
                    from .text import TextIndex

                    index = TextIndex(None)
                    self._refill_text(index)
                    self._text = index
            return self._text

    def _write_text(self, write: Any) -> None:
        """Applies ``write(index)`` to the BM25 index after the graph's own write succeeded. If
        the index fails (a full disk, a damaged file, no memory left), the graph's write stands:
        the index is dropped with a warning and the next BM25 search rebuilds it from the graph."""
        try:
            write(self._text)
        except (Error, MemoryError) as failure:
            self._drop_text_index(f"a write to the BM25 index failed ({str(failure) or type(failure).__name__})")

    def _write_entities(self, write: Any) -> None:
        """Applies ``write(index)`` to the entity index (text lock held) after the graph's own
        write succeeded. If it runs out of memory, the graph's write stands: the index, which may
        be half changed, is dropped with a warning and the next entity lookup rebuilds it from
        the graph."""
        try:
            write(self._entities)
        except MemoryError:
            self._entities = None
            warnings.warn("the entity index ran out of memory during a write; it is rebuilt from the graph on the "
                          "next entity lookup", RuntimeWarning, stacklevel=4)

    def _drop_text_index(self, why: str) -> None:
        """Closes and forgets the BM25 index (removing its folder, so that it is rebuilt)."""
        warnings.warn(f"{why}; it is rebuilt from the graph on the next text search", RuntimeWarning,
                      stacklevel=4)
        with self._text_lock:
            index, self._text = self._text, None
            if index is not None:
                with contextlib.suppress(Exception):
                    index.close()
            if self._path is not None and not self._forked:  # a forked child's index is its own, in memory
                with contextlib.suppress(OSError):
                    shutil.rmtree(os.path.join(self._path, TEXT_INDEX_DIR))

    def _bm25(self, text: str, depth: int, **filters: Any) -> list:
        """TextIndex.search on the current index; a damaged index is rebuilt once, then searched."""
        index = self._text_index()
        try:
            return index.search(text, depth, **filters)
        except CorruptionError as damage:
            self._drop_text_index(f"the BM25 index is damaged ({damage})")
        except Error:
            if not index.closed:
                raise  # closed by Graph.close() while searching: search the one that follows
        return self._text_index().search(text, depth, **filters)

    def _refill_text(self, index: Any) -> None:
        """Fill ``index`` with the texts of every live node (as of the graph's last write)."""
        import pyarrow as pa

        state = self._engine.export_state(roll_wal=False)
        texts = storage.strings_array(state["texts"], pa.large_string()).to_pylist()
        if not any(texts):
            index.rebuild([], lsn=int(state["lsn"]))
            return
        keys = [storage.decode_key(k) for k in storage.strings_array(state["keys"], pa.large_binary()).to_pylist()]
        tenants = storage.dictionary_array(state["tenants"]).cast(pa.string()).to_pylist()
        labels = storage.dictionary_array(state["labels"]).cast(pa.string()).to_pylist()
        items = ((k, t, tn, lb, s) for k, t, tn, lb, s in zip(keys, texts, tenants, labels, state["ts"].tolist()) if t)
        index.rebuild(items, lsn=int(state["lsn"]))

    def _open_text_index(self) -> None:
        """Open the folder's BM25 index and bring it in step with the graph: it is rebuilt from
        the graph's texts when it is new, damaged, behind the last write that changed texts
        (a crash before its buffered writes were published), or ahead of the graph (writes the
        WAL lost)."""
        from .text import TextIndex

        for name in LEGACY_TEXT_INDEX_FILES:  # an index of an earlier layout: rebuilt below
            legacy = os.path.join(self._path, name)
            if os.path.isdir(legacy) and not os.path.islink(legacy):
                shutil.rmtree(legacy)
            elif os.path.lexists(legacy):
                os.unlink(legacy)
        path = os.path.join(self._path, TEXT_INDEX_DIR)
        existed = os.path.isdir(path) and bool(os.listdir(path))
        try:
            index = TextIndex(path)
        except CorruptionError as damage:
            warnings.warn(f"the BM25 index {path} is damaged ({damage}); it is rebuilt from the graph",
                          RuntimeWarning, stacklevel=3)
            if os.path.isdir(path) and not os.path.islink(path):
                shutil.rmtree(path)
            else:
                os.unlink(path)
            index, existed = TextIndex(path), False
        if not existed or not (self._engine.last_text_lsn() <= index.lsn <= self._engine.last_lsn()):
            self._refill_text(index)
        self._text = index

    def _text_index_copy(self) -> Any:
        """For a read-only graph: a private copy of the folder's BM25 index (in a temporary
        folder, deleted on close), when the index is there, sound and in step with the graph;
        else an index built in memory from the graph's texts."""
        from .text import TextIndex

        path = os.path.join(self._path, TEXT_INDEX_DIR)
        if os.path.isdir(path) and os.listdir(path):
            try:
                index = TextIndex.copy_of(path)
            except Error as failure:
                warnings.warn(f"the BM25 index {path} cannot be read ({failure}); a read-only graph builds one "
                              "in memory", RuntimeWarning, stacklevel=4)
            else:
                if self._engine.last_text_lsn() <= index.lsn <= self._engine.last_lsn():
                    return index
                index.close()
        index = TextIndex(None)
        self._refill_text(index)
        return index

    def _entity_index(self) -> Any:
        """Names → keys for the entity channel, built on first use and kept up to date."""
        entities = self._entities
        if entities is not None:
            return entities
        with self._text_lock:
            if self._entities is None:
                import pyarrow as pa

                index = hybrid.EntityIndex()
                state = self._engine.export_state(roll_wal=False)
                keys = [storage.decode_key(k) for k in storage.strings_array(state["keys"], pa.large_binary()).to_pylist()]
                aliases = storage.strings_array(state["aliases"], pa.large_string()).to_pylist()
                for key, joined in zip(keys, aliases):
                    if joined:
                        index.add(key, joined.split(hybrid.ALIAS_SEPARATOR))
                    if isinstance(key, str):
                        index.add(key, [key], alias=False)
                self._entities = index
            return self._entities

    # ---------------------------------------------------------------- search

    def _search_args(self, k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
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
        return self._search_args_checked(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                         ts_min, ts_max, hop_decay, exact, ef, since, until)

    def _search_args_checked(self, k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
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
            query: (dim,) array-like of real numbers.
            k: results wanted (>= 1). seeds: seed nodes (>= 1). hops: levels (>= 0).
            max_visited: cap on visited nodes (>= 1). max_fanout: cap on edges per node (>= 1).
            rels: relation types to follow (None: all; unknown names match nothing).
            direction: "out", "in" or "both".
            labels, tenants: admit only nodes with these labels / tenants (None: all). When
                they admit at most ``filter_scan_max_nodes`` live nodes (see :class:`Graph`),
                the seeds are those nodes' exact best, found by scanning them instead of
                walking HNSW past the nodes the filter rejects.
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
        """
        args = self._search_args(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                 ts_min, ts_max, hop_decay, exact, ef, since, until)
        # where (and extra_seeds) go positionally: pybind11 takes keyword arguments a slow way
        # (about 5 µs a call).
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
    ) -> list[SearchResult]:
        """:meth:`search` for each row of an (n, dim) array of queries, on ``threads`` threads
        (default: all cores), with the GIL released. Returns n results in query order.
        Every query is checked before any runs; Ctrl-C stops between chunks of 1024 queries.

        Args:
            queries: (n, dim) array of numbers, converted to float32.
            threads: worker threads (>= 1; None: all cores). The other arguments: as :meth:`search`
                (``exclude_keys`` applies to every query).

        Raises:
            DimensionMismatchError: rows that are not of the graph's dim.
            InvalidArgumentError: NaN or inf in a query (naming its row), or a bad search argument.
            TypeError / ValueError: ``queries`` not a numeric 2-d array; arguments of the wrong type.
        """
        args = self._search_args(k, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                 ts_min, ts_max, hop_decay, exact, ef, since, until)
        threads = 0 if threads is None else _threads(threads, "threads")
        raw = self._engine.search_batch(_float_array(queries, "queries", 2), *args, threads,
                                        _where(where, self._filterable), _exclude_keys(exclude_keys))
        return [SearchResult(r, self._engine) for r in raw]

    def hybrid_search(
        self,
        text: Optional[str] = None,
        vector: Any = None,
        k: int = 10,
        *,
        channels: Sequence[str] = hybrid.CHANNELS,
        weights: Optional[dict] = None,
        fusion: str = hybrid.DEFAULT_FUSION,
        embedder: Any = None,
        tenants: Optional[Sequence[str]] = None,
        labels: Optional[Sequence[str]] = None,
        where: Optional[dict] = None,
        since: Any = None,
        until: Any = None,
        seeds: int = 8,
        hops: int = 2,
        rels: Optional[Sequence[str]] = None,
        direction: str = "both",
        max_visited: int = 2000,
        max_fanout: int = 256,
        depth: Optional[int] = None,
        rrf_k: float = 60.0,
        ef: Optional[int] = None,
        exclude_keys: Optional[Iterable[Key]] = None,
        entity_keys: Union[bool, Sequence[str]] = True,
        graph_seeds: bool = False,
        graph_scoring: str = "seed",
        parallel: bool = True,
    ) -> "hybrid.HybridResult":
        """Search by text and/or vector through several channels and fuse them.

        Channels (see :mod:`vecgraph.hybrid` for what each adds): ``dense`` (nearest node
        vectors), ``bm25`` (BM25 over node texts), ``entity`` (the nodes the text names by key
        or alias, weighted by how specific each name is), ``graph`` (what walks from the
        entity and vector seeds reach, hop >= 1: the graph's own evidence, not the seeds
        again). Each channel that its input allows runs (dense and graph need a vector, or
        ``text`` with an ``embedder``; bm25 and entity need ``text``) and returns up to
        ``depth`` keys with scores; the lists are fused by ``fusion``. The BM25 channel runs in
        a second thread beside the others when ``parallel``.

        Args:
            text: the query text (None or "" for none).
            vector: (dim,) query vector; computed from ``text`` by ``embedder`` when None.
            k: results wanted (>= 1).
            channels: names from ``("dense", "bm25", "graph", "entity")``.
            weights: {channel: weight >= 0}; a channel not named takes the fusion's default
                (:data:`vecgraph.hybrid.DEFAULT_WEIGHTS`: convex dense 1, bm25 1, graph 0.25,
                entity 4; rrf 1.0 each). A channel of weight 0 is not run. A weight for a
                channel not in ``channels`` is ignored (one weights dict can serve calls with
                different channels).
            fusion: how the lists are fused (see :data:`vecgraph.hybrid.FUSIONS` and
                :func:`vecgraph.fusion.fuse`): ``"rrf"`` is weighted Reciprocal Rank Fusion,
                score(d) = Σ_c w_c / (rrf_k + rank_c(d)) (Cormack, Clarke & Büttcher, SIGIR
                2009); the default weighs each channel by the evidence of its own scores.
            embedder: embeds ``text`` when no vector is given (checked against the graph's
                recorded embedder, see :meth:`use_embedder`).
            tenants, labels, where, since, until: filters, applied inside every channel (as
                in :meth:`search`).
            seeds, hops, rels, direction, max_visited, max_fanout: the graph channel's
                traversal (as in :meth:`search`).
            depth: how many keys each channel contributes (default max(3 k, 30), at most 100,000).
            rrf_k: the RRF constant (> 0), used by ``fusion="rrf"``.
            ef: HNSW beam width of the dense channel's search (None or 0: at least
                :data:`vecgraph.hybrid.HYBRID_MIN_EF`, the graph's ``expansion_search`` and
                ``depth``, which keeps its recall against an exact search >= 0.97 on the
                real data sets measured; see bench/README.md).
            exclude_keys: keys that no channel returns and no walk passes through (as in
                :meth:`search`).
            entity_keys: whether node keys are entity names as well as aliases: True (every
                str key), False (aliases only) or a list of labels whose nodes' keys are names.
            graph_seeds: the graph channel also lists its seeds (hop 0: the nodes the text
                names and the nearest nodes), as :meth:`search` does; by default it lists only
                what the walks reach, which the dense and entity channels do not rank.
            graph_scoring: how the graph channel ranks what it lists: ``"seed"`` (default) by
                the strength of the seed each node's path starts from (its normalised dense or
                entity score) times 0.5 per hop past the first, ties by similarity to the query;
                ``"similarity"`` by similarity to the query, as :meth:`search` does.

        Returns:
            :class:`vecgraph.hybrid.HybridResult`: hits (key, fused score, rank per channel,
            path), each channel's ranked keys and scores, scored traversed edges, and
            :meth:`~vecgraph.hybrid.HybridResult.to_context`.

        Raises:
            InvalidArgumentError: neither text nor vector; an unknown channel or fusion; a
                negative or non-finite weight or rrf_k; weight 0 on every channel that can run;
                bad filters (as in :meth:`search`).
            TypeError: text that is not a str; a weight or rrf_k that is not a real number;
                ``parallel`` or ``graph_seeds`` that is not a bool; ``exclude_keys`` or
                ``entity_keys`` of the wrong type.
        """
        fusion = hybrid.check_fusion(fusion)
        chosen, channel_weights = hybrid.check_channels(channels, weights, fusion)
        parallel = _flag(parallel, "parallel")
        graph_seeds = _flag(graph_seeds, "graph_seeds")
        graph_scoring = hybrid.check_graph_scoring(graph_scoring)
        entity_keys = hybrid.check_entity_keys(entity_keys)
        if text is not None and not isinstance(text, str):
            raise TypeError(f"text must be str or None, got {type(text).__name__}")
        text = text or None
        k = _count(k, "k")
        if not 1 <= k <= _MAX_HYBRID_K:
            raise InvalidArgumentError(f"k must be in [1, {_MAX_HYBRID_K:,}], got {k}")
        depth = min(max(3 * k, 30), _MAX_HYBRID_K) if depth is None else _count(depth, "depth")
        if not 1 <= depth <= _MAX_HYBRID_K:
            raise InvalidArgumentError(f"depth must be in [1, {_MAX_HYBRID_K:,}], got {depth}")
        rrf_k = _real(rrf_k, "rrf_k")
        if not (rrf_k > 0 and math.isfinite(rrf_k)):
            raise InvalidArgumentError(f"rrf_k must be finite and > 0, got {rrf_k}")
        for name, value, least in (("seeds", seeds, 1), ("hops", hops, 0), ("max_visited", max_visited, 1),
                                   ("max_fanout", max_fanout, 1)):
            _count_at_least(value, name, least)
        if ef is not None:
            ef = _count_at_least(ef, "ef", 0) or None  # 0: the default, as in search()
        exclude = _exclude_keys(exclude_keys)
        if vector is None and text is not None and embedder is not None:
            vector = self.embed_query(text, embedder)
        if vector is None and text is None:
            raise InvalidArgumentError("hybrid_search needs text, a vector, or both")
        query = _float_array(vector, "vector", 1) if vector is not None else None
        args = self._search_args(depth, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
                                 None, None, 1.0, False, ef, since, until)
        conditions = _where(where, self._filterable)
        if args[9] > args[10]:
            raise InvalidArgumentError(
                f"the time window is empty: since/ts_min ({args[9]}) is after until/ts_max ({args[10]})")
        runnable = tuple(c for c in chosen if (c in ("dense", "graph") and query is not None)
                         or (c in ("bm25", "entity") and text is not None))
        if not runnable:
            raise InvalidArgumentError(
                f"none of the channels {list(chosen)} can run: dense and graph need a vector (or text with an "
                "embedder), bm25 and entity need text")
        if not any(channel_weights[c] > 0 for c in runnable):
            raise InvalidArgumentError(f"every channel that can run ({', '.join(runnable)}) has weight 0")
        runnable = tuple(c for c in runnable if channel_weights[c] > 0)  # weight 0: not run at all
        dense_ef = ef if ef is not None else max(hybrid.HYBRID_MIN_EF, depth, self._hnsw["expansion_search"])
        return hybrid.run(self, text=text, query=query, k=k, runnable=runnable, weights=channel_weights,
                          fusion=fusion, args=args, conditions=conditions, depth=depth, dense_ef=dense_ef,
                          exclude=exclude, entity_keys=entity_keys, graph_seeds=graph_seeds,
                          graph_scoring=graph_scoring, rrf_k=rrf_k, parallel=parallel)

    def hybrid_search_batch(
        self,
        texts: Optional[Sequence[Optional[str]]] = None,
        vectors: Any = None,
        k: int = 10,
        *,
        exclude_keys: Optional[Sequence[Optional[Iterable[Key]]]] = None,
        threads: Optional[int] = None,
        embedder: Any = None,
        **options: Any,
    ) -> list["hybrid.HybridResult"]:
        """:meth:`hybrid_search` for many queries, on ``threads`` threads (the core searches
        release the GIL). Returns one result per query, in query order; every query is checked
        before any runs.

        Args:
            texts: n query texts (None or "" for none), or None for no texts.
            vectors: (n, dim) array of query vectors, or None (computed from ``texts`` by
                ``embedder`` in one batch when given).
            k: results wanted per query.
            exclude_keys: None, or n collections of keys (one per query; None for none) that
                that query must not return nor walk through (leave-one-out evaluation).
            threads: worker threads (>= 1; None: 2, the threads one hybrid_search uses). Each
                query's channels then run in its own thread, one after another.
            embedder: embeds ``texts`` when no vectors are given.
            options: any other keyword argument of :meth:`hybrid_search`, for every query.

        Raises:
            ValueError: texts, vectors and exclude_keys of different lengths; no queries.
            The errors of :meth:`hybrid_search`, for the first query that raises them.
        """
        if "parallel" in options or "vector" in options or "text" in options:
            raise TypeError("hybrid_search_batch takes texts and vectors (plural) and runs each query's channels in "
                            "its own thread; text, vector and parallel are not arguments here")
        if texts is None and vectors is None:
            raise InvalidArgumentError("hybrid_search_batch needs texts, vectors, or both")
        if texts is not None:
            if isinstance(texts, str) or not isinstance(texts, Sequence):
                raise TypeError(f"texts must be a list of str (one per query), got {type(texts).__name__}")
            texts = list(texts)
        if vectors is None and texts is not None and embedder is not None:
            for i, text in enumerate(texts):
                if not isinstance(text, str) or not text:
                    raise InvalidArgumentError(f"texts[{i}] is {text!r}: with an embedder and no vectors every query "
                                               "needs a text to embed")
            vectors = self.embed_query(texts, embedder)
        matrix = _float_array(vectors, "vectors", 2) if vectors is not None else None
        count = len(texts) if texts is not None else len(matrix)
        if matrix is not None and len(matrix) != count:
            raise ValueError(f"vectors has {len(matrix)} rows, texts has {count} items (one per query)")
        if exclude_keys is not None:
            if isinstance(exclude_keys, (str, bytes)) or not isinstance(exclude_keys, Sequence):
                raise TypeError("exclude_keys must be a list with one collection of keys (or None) per query, got "
                                f"{type(exclude_keys).__name__}")
            if len(exclude_keys) != count:
                raise ValueError(f"exclude_keys has {len(exclude_keys)} items, expected {count} (one per query)")
        if count == 0:
            raise ValueError("hybrid_search_batch needs at least one query")
        if matrix is not None:  # every row checked before any query runs, named by its row
            if matrix.shape[1] != self.dim:
                raise DimensionMismatchError(f"vectors have dim {matrix.shape[1]}, graph has dim {self.dim}")
            finite = np.isfinite(matrix).all(axis=1)
            if not finite.all():
                row = int(np.argmin(finite))
                raise InvalidArgumentError(f"vectors row {row} holds NaN or inf")
            if self.metric == "cos" and not np.any(matrix, axis=1).all():
                row = int(np.argmin(np.any(matrix, axis=1)))
                raise InvalidArgumentError(f"vectors row {row} is all zeros, which has no direction under 'cos'")
        threads = 2 if threads is None else _threads(threads, "threads")

        def one(i: int) -> "hybrid.HybridResult":
            return self.hybrid_search(texts[i] if texts is not None else None,
                                      matrix[i] if matrix is not None else None, k,
                                      exclude_keys=exclude_keys[i] if exclude_keys is not None else None,
                                      parallel=False, **options)

        first = one(0)  # checks the arguments before the others run
        if count == 1:
            return [first]
        if threads == 1:
            return [first] + [one(i) for i in range(1, count)]
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=min(threads, count - 1), thread_name_prefix="vecgraph-batch") as pool:
            return [first] + list(pool.map(one, range(1, count)))

    # ---------------------------------------------------------------- reads

    def neighbors(self, key: Key, rels: Optional[Sequence[str]] = None, direction: str = "out") -> list[Edge]:
        """Edges at ``key`` in traversal order (weight desc, insertion order).

        Args:
            key: a node key. rels: relation types to keep (None: all).
            direction: "out" (edges from key), "in" (edges to key) or "both".

        Raises:
            NotFoundError: key is not in the graph.
        """
        direction = _choice(direction, "direction", _DIRECTIONS)
        return [Edge(*e) for e in self._engine.neighbors(key, direction, _names(rels, "rels"))]

    def get_node(self, key: Key) -> dict:
        """A node's fields: key, label, tenant, ts, text, props (dict or None), aliases (list
        of str, see :meth:`add_aliases`) and vector (float32 (dim,), dequantized: codes * scale).

        Raises:
            NotFoundError: key is not in the graph.
        """
        node = self._engine.get_node(key)
        node["props"] = json.loads(node["props"]) if node["props"] else None
        node["aliases"] = node["aliases"].split(hybrid.ALIAS_SEPARATOR) if node["aliases"] else []
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
