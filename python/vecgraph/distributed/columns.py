"""The columns of a sharded write batch: checks made once at the coordinator, and the split of
a batch into each shard's part."""

from __future__ import annotations

from typing import Any, Callable, Optional

import numpy as np

from ..errors import InvalidArgumentError


def _rows(value: Any, n: int, name: str) -> Optional[list]:
    """A per-row list of a column given as one value for every row or n values (None: None)."""
    if value is None:
        return None
    if isinstance(value, (str, int, float)) and not isinstance(value, bool):
        return [value] * n
    values = list(value)
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} items for {n} rows")
    return values


def _plain_keys(keys: Any, name: str = "keys") -> list:
    """``keys`` as a list of str and int (NumPy integers and str as Python's), else TypeError."""
    if isinstance(keys, (str, bytes)):
        raise TypeError(f"{name} must be a sequence of keys, got a {type(keys).__name__}")
    out = [key.item() if isinstance(key, (np.integer, np.str_)) else key for key in keys]
    for i, key in enumerate(out):
        if isinstance(key, bool) or not isinstance(key, (str, int)):
            raise TypeError(f"{name}[{i}] must be a str or an int, got {type(key).__name__}")
    return out


def _check_timeout(timeout_s: Any) -> float:
    from ..arguments import _real

    timeout_s = _real(timeout_s, "timeout_s")
    if not 0 < timeout_s < float("inf"):
        raise InvalidArgumentError(f"timeout_s must be finite and > 0 (seconds), got {timeout_s}")
    return timeout_s


def _check_text(values: list, name: str) -> None:
    """Every str of ``values`` encodes as UTF-8 (no lone surrogate), and every int fits int64."""
    for i, value in enumerate(values):
        if isinstance(value, str):
            try:
                value.encode("utf-8")
            except UnicodeEncodeError as exc:
                raise InvalidArgumentError(
                    f"{name}[{i}] is not valid Unicode text: a lone surrogate "
                    f"{value[exc.start]!r} at {exc.start}"
                ) from None
        elif isinstance(value, int) and not -(2**63) <= value < 2**63:
            raise InvalidArgumentError(f"{name}[{i}] must fit int64, got {value}")


def _per_row(value: Any, n: int, name: str) -> Any:
    """A column given as one value (kept as it is) or n values (a list, or an array kept as one)."""
    if value is None or np.ndim(value) == 0:
        return value
    values = value if isinstance(value, np.ndarray) else list(value)
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} items for {n} rows")
    return values


def _split(placed: list, columns: dict, make: Callable[[list, dict], tuple]) -> dict:
    """{shard: (its rows, make(its rows, its part of each column))} of a batch whose row i goes
    to shard ``placed[i]``."""
    rows_of: dict = {}
    for row, shard in enumerate(placed):
        rows_of.setdefault(shard, []).append(row)
    return {
        shard: (rows, make(rows, {name: _part(value, rows) for name, value in columns.items()}))
        for shard, rows in rows_of.items()
    }


def _part(value: Any, rows: list) -> Any:
    """The ``rows`` of a column (one value for every row stays as it is)."""
    if isinstance(value, list):
        return [value[r] for r in rows]
    if isinstance(value, np.ndarray) and value.ndim >= 1:
        return value[rows]
    return value


def checked_search_args(*args: Any) -> tuple:
    """:func:`vecgraph.arguments._search_args` of ``(k, seeds, hops, max_visited, max_fanout,
    direction, rels, labels, tenants, ts_min, ts_max, hop_decay, exact, ef, since, until)``,
    each count's least value checked first: its fast path leaves those to the core, whose
    message, raised on a shard's call of another shape, would name another argument."""
    from ..arguments import _count_at_least, _search_args

    for name, value, least in zip(("k", "seeds", "hops", "max_visited", "max_fanout"), args[:5], (1, 1, 0, 1, 1)):
        _count_at_least(value, name, least)
    return _search_args(*args)
