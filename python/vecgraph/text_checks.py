"""What a :class:`vecgraph.text.TextIndex` is given, checked and encoded.

Every argument of the index is checked here before anything is written (wrong Python types
raise ``TypeError``, wrong lengths ``ValueError``, values outside their domain
:class:`~vecgraph.errors.InvalidArgumentError`, text that is not valid Unicode ``ValueError``):
keys, the columns of a write, the filters of a search and the items of a rebuild. A key (a str,
or an int within int64; never a bool) is encoded as ``("s", key)`` or ``("i", str(key))``, its
document key as ``"<n|e><i|s>:<key>"`` (node or edge), and a key, tenant or label as the
index term :func:`_term` gives.
"""

from __future__ import annotations

import hashlib
import numbers
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Optional, Union

from .errors import DuplicateKeyError, InvalidArgumentError
from .tokenizer import tokenize

Key = Union[str, int]

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
_KINDS = ("node", "edge")
_KIND_PREFIX = {"node": "n", "edge": "e"}
_TERM_MAX_BYTES = 1024         # longer keys, tenants and labels are indexed by their digest

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


def _check_unicode(value: str, where: str) -> str:
    """``value`` if it encodes to UTF-8 (no lone surrogates); else ValueError naming ``where``."""
    if not value.isascii():
        try:
            value.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{where} is not valid Unicode (a lone surrogate); text must encode to UTF-8") from None
    return value


def _encode_key(key: Any, where: str) -> tuple[str, str]:
    if type(key) is str:
        return ("s", _check_unicode(key, where))
    if type(key) is int or (isinstance(key, numbers.Integral) and not isinstance(key, bool)
                            and type(key).__name__ != "bool_"):
        v = int(key)
        if not _INT64_MIN <= v <= _INT64_MAX:
            raise InvalidArgumentError(f"{where} is {v}, outside int64; int keys must fit int64")
        return ("i", str(v))
    if isinstance(key, str):
        return ("s", _check_unicode(str(key), where))
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
        return [_check_unicode(values, name)] * n
    values = _sequence(values, name)
    if len(values) != n:
        raise ValueError(f"{name} has {len(values)} items, expected {n} (one per key)")
    out = []
    for row, value in enumerate(values):
        if value is None:
            out.append("")
        elif isinstance(value, str):
            out.append(_check_unicode(value, f"{name}[{row}]"))
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
        _check_unicode(value, name)
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
        if value:
            _check_unicode(value, f"{where} {col}")
    ts = 0 if ts is None else _check_int(ts, f"{where} ts")
    stream = " ".join(tokenize(text)) if text else ""
    return (kind, key_kind, key, tenant or "", label or "", ts, stream)


# ------------------------------------------------------------------------------------------ terms


def _term(value: str) -> str:
    """The indexed term of a key, tenant or label: the value itself, or for a value longer than
    _TERM_MAX_BYTES (tantivy drops terms past 65,530 bytes) a 256-bit BLAKE2b digest of it."""
    if len(value) * 4 <= _TERM_MAX_BYTES or len(value.encode("utf-8", "surrogatepass")) <= _TERM_MAX_BYTES:
        return value
    return "\x00blake2b:" + hashlib.blake2b(value.encode("utf-8", "surrogatepass"), digest_size=32).hexdigest()


def _doc_key(kind: str, enc: tuple[str, str]) -> str:
    return f"{_KIND_PREFIX[kind]}{enc[0]}:{enc[1]}"


def _decode_doc_key(doc_key: str) -> Key:
    return int(doc_key[3:]) if doc_key[1] == "i" else doc_key[3:]


def _chunks(items: Iterable, size: int) -> Iterator[tuple[int, list]]:
    """(start, list) blocks of ``size`` items (the last one shorter) of a rebuild's items."""
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

