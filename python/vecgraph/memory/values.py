"""Values of :mod:`vecgraph.memory`: times (microseconds since the epoch, within the years a
datetime holds), TTLs, user ids, texts, kinds and sources, checked as the store's methods take
them, and the keys of entity nodes."""

from __future__ import annotations

import json
import math
from datetime import date, datetime, timedelta, timezone
from typing import Any, Iterable, Optional

import numpy as np

from ..errors import InvalidArgumentError, _got

OPEN = 2**63 - 1  # valid_to / expires_at of what is current / never expires
SOURCES = ("user", "tool", "document", "model")
_US = 1_000_000


def _utc(value: datetime) -> datetime:
    return value.replace(tzinfo=timezone.utc) if value.tzinfo is None else value.astimezone(timezone.utc)


# The times a datetime can hold (years 1 to 9999), in microseconds since the epoch: a time given
# outside them is refused, an expiry past them is "never".
_MIN_US = -62_135_596_800 * _US
_MAX_US = 253_402_300_799 * _US


def to_us(value: Any, name: str) -> int:
    """A time as int64 microseconds since the epoch (UTC): a datetime (naive: UTC), a date (its
    midnight UTC), an ISO 8601 str, or an int (already microseconds, not seconds), within the
    years 1 to 9999."""
    if isinstance(value, bool):
        raise TypeError(f"{name} must be a datetime, date, ISO 8601 str or int microseconds, got bool")
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError:
            raise InvalidArgumentError(f"{name} must be an ISO 8601 date or time such as '2026-03-01T09:30:00Z', "
                                       f"got {value!r}") from None
    if isinstance(value, datetime):
        value = _utc(value)
        return (value - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
    if isinstance(value, date):
        return (value - date(1970, 1, 1)).days * 86_400 * _US
    if isinstance(value, (int, np.integer)):
        if not _MIN_US <= int(value) <= _MAX_US:
            raise InvalidArgumentError(f"{name} must be microseconds since the epoch within the years 1 to 9999, "
                                       f"got {value}")
        return int(value)
    raise TypeError(f"{name} must be a datetime, date, ISO 8601 str or int microseconds, got {_got(value)}")


def from_us(us: int) -> datetime:
    return datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=int(us))


def _when(us: Optional[int]) -> Optional[datetime]:
    """A stored time as a datetime; None for "never" (OPEN, or past the year 9999)."""
    return None if us is None or us > _MAX_US else from_us(us)


def _ttl_us(value: Any, kind: str) -> Optional[int]:
    if value is None:
        return None
    if isinstance(value, timedelta):
        us = value // timedelta(microseconds=1)
    elif isinstance(value, (int, float)) and not isinstance(value, bool):
        if not math.isfinite(value):
            raise InvalidArgumentError(f"ttl[{kind!r}] must be finite, got {value!r}")
        us = int(round(value * _US))  # seconds
    else:
        raise TypeError(f"ttl[{kind!r}] must be a timedelta, seconds (int or float) or None (never), got {_got(value)}")
    if us <= 0:
        raise InvalidArgumentError(f"ttl[{kind!r}] must be positive (or None: never expires), got {value!r}")
    if us > _MAX_US - _MIN_US:
        raise InvalidArgumentError(f"ttl[{kind!r}] must be at most 9,999 years (or None: never expires), got {value!r}")
    return us


def _entity_key(user: str, normal: str) -> str:
    """The key of ``user``'s entity node for normalised name ``normal``: ``ent:<len>:<user>:<name>``
    (the length keeps "a" + "b:c" and "a:b" + "c" apart)."""
    return f"ent:{len(user)}:{user}:{normal}"


def _props(node: dict) -> dict:
    """A node's props as a dict (a copy)."""
    props = node["props"]
    if isinstance(props, str):
        return json.loads(props) if props else {}
    return dict(props or {})


def _user(user: Any) -> str:
    if not isinstance(user, str):
        raise TypeError(f"user must be a str, got {_got(user)}")
    if not user.strip():
        raise InvalidArgumentError(f"user must be a non-empty str, got {user!r}")
    return user


def _text(text: Any, name: str = "text") -> str:
    if not isinstance(text, str):
        raise TypeError(f"{name} must be a str, got {_got(text)}")
    if not text.strip():
        what = "a memory needs something to remember" if name == "text" else "it needs some text"
        raise InvalidArgumentError(f"{name} is empty or whitespace; {what}")
    return text.strip()


def _kinds(kinds: Any) -> list:
    if isinstance(kinds, str):
        return [_kind(kinds)]
    if not isinstance(kinds, Iterable):
        raise TypeError(f"kinds must be a str or a list of str, got {_got(kinds)}")
    return [_kind(kind) for kind in kinds]


def _kind(kind: Any) -> str:
    if not isinstance(kind, str):
        raise TypeError(f"kind must be a str, got {_got(kind)}")
    if not kind.strip() or kind.startswith("~"):
        raise InvalidArgumentError(f"kind must be a non-empty str not starting with '~' (reserved), got {kind!r}")
    return kind


def _source(source: Any) -> str:
    if source not in SOURCES:
        raise InvalidArgumentError(f"source must be one of {', '.join(map(repr, SOURCES))}, got {source!r}")
    return source


# ------------------------------------------------------------------------------ results
