"""How a :class:`vecgraph.text.TextIndex` search reads its ranking: page by page from the index,
ties broken by key, candidates checked by the caller's exclude callbacks until k are admitted.

:func:`_top_admitted` is the whole of it; :func:`_ranked_pages` yields every match best first,
reading a stored key only for the rows it yields; :func:`_one_flag` and :func:`_many_flags`
check what the callbacks return.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from typing import Any, Callable, Optional, Union

import numpy as np

from .errors import _short

Key = Union[str, int]

_FIRST_PAGE_MIN = 32           # a search fetches k + max(k, 32) hits first
_TIE_BLOCK = 4096              # rows of a page that one tie group fills (see _ranked_pages)


class MaxRowsReached(Exception):
    """A search given ``max_rows`` (:meth:`vecgraph.text.TextIndex.search`) would have to read
    more of the index's ranking than that to find its ``k`` admitted rows."""


def _top_admitted(page: Callable[[int, int], list], key_of: Callable[[Any], Key], k: int, most: int,
                  exclude: Optional[Callable[[Key], bool]],
                  exclude_many: Optional[Callable[[list], Sequence[bool]]],
                  max_rows: Optional[int] = None) -> list:
    """The first ``k`` (key, score) rows of the ranking that ``exclude`` and ``exclude_many``
    admit (see TextIndex.search), best first; ``page``, ``key_of`` and ``most`` as for
    :func:`_ranked_pages`. With ``max_rows``, MaxRowsReached is raised rather than read more
    rows of the ranking than that (see :func:`_ranked_pages`)."""
    # Candidates are checked in blocks: one at a time with ``exclude`` alone (it is called
    # on no candidate past the k-th admitted), growing blocks with ``exclude_many``.
    if exclude_many is None:
        drops = None if exclude is None else (lambda keys: [_one_flag(exclude, keys[0])])
    elif exclude is None:
        drops = lambda keys: _many_flags(exclude_many, keys)  # noqa: E731
    else:
        drops = lambda keys: [d or _one_flag(exclude, key)  # noqa: E731
                              for key, d in zip(keys, _many_flags(exclude_many, keys))]
    block_size = 1 if exclude_many is None else max(k, 64)
    first_page = first_page_rows(k, exclude_many is not None)
    if max_rows is not None:
        first_page = min(first_page, max_rows)
    rows = _ranked_pages(page, key_of, min(first_page, most), most, max_rows)
    if drops is None:
        return list(itertools.islice(rows, k))
    out: list = []
    block: list = []
    for row in rows:
        block.append(row)
        if len(block) < block_size:
            continue
        if _admit_block(block, drops, out, k):
            return out
        if exclude_many is not None:
            block_size = min(4 * block_size, 16_384)
    if block:
        _admit_block(block, drops, out, k)
    return out


def first_page_rows(k: int, checked_in_blocks: bool) -> int:
    """Rows of the first page :func:`_top_admitted` asks the index for: its first block of
    candidates (``max(k, 64)`` with ``exclude_many``, else 1) and ``k + max(k, 32)`` more (a
    page yields only the rows scored above its last one, and a second page fetches four times
    as many)."""
    return (max(k, 64) if checked_in_blocks else 1) - 1 + k + max(k, _FIRST_PAGE_MIN)


def _key_order(key: Key) -> tuple:
    return (0, key, "") if type(key) is int else (1, 0, key)


def _is_flag(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _one_flag(exclude: Callable[[Key], bool], key: Key) -> bool:
    """``exclude(key)``; TypeError naming what came when that is not a bool."""
    flag = exclude(key)
    if not _is_flag(flag):
        raise TypeError(f"exclude must return a bool; it returned {type(flag).__name__} "
                        f"{_short(flag)} for key {_short(key)}")
    return bool(flag)


def _many_flags(exclude_many: Callable[[list], Sequence[bool]], keys: list) -> list:
    """``exclude_many(keys)`` as a list of one bool per key; TypeError when it returns no
    sequence (None, say), a str, bytes or dict, or an item that is not a bool (numpy.bool_
    counts as one); ValueError when it returns another number of flags."""
    count = len(keys)  # before the call: the callable may change the list it is given
    flags = exclude_many(keys)
    if isinstance(flags, (str, bytes, bytearray, dict)) or not isinstance(flags, Iterable):
        raise TypeError(f"exclude_many must return a sequence of bools, one per key; "
                        f"it returned {type(flags).__name__} for {count} keys")
    flags = list(flags)
    if len(flags) != count:
        raise ValueError(f"exclude_many returned {len(flags)} flags for {count} keys")
    for i, flag in enumerate(flags):
        if not _is_flag(flag):
            raise TypeError(f"exclude_many must return a sequence of bools, one per key; "
                            f"item {i} is {type(flag).__name__} {_short(flag)}")
    return flags


def _admit_block(block: list, drops: Callable[[list], Sequence[bool]], out: list, k: int) -> bool:
    """Moves the (key, score) rows of ``block`` that ``drops`` keeps to ``out``, up to ``k``
    there; True once ``out`` holds ``k``."""
    flags = drops([key for key, _ in block])
    for row, drop in zip(block, flags):
        if not drop:
            out.append(row)
            if len(out) == k:
                return True
    block.clear()
    return False


def _ranked_pages(page: Callable[[int, int], list], key_of: Callable[[Any], Key], limit: int,
                  most: int, max_rows: Optional[int] = None) -> Iterator[tuple[Key, float]]:
    """(key, score) of every match, best first, ties by key (see TextIndex.search).

    ``page(limit, offset)`` returns (score, address) pairs ordered by score only (ties in the
    index's own order); ``key_of(address)`` reads a row's key, which is done only for the rows
    yielded (a group of tied rows at a time, to order it by key), so a caller that takes the
    first k rows reads about k keys. Rows tied with a page's last score may continue on the
    next page, so a page yields only its rows scored strictly better than its last row, and the
    next page starts after them, fetching four times as many rows (at most ``most``, the
    documents of the index, and at most _TIE_BLOCK unless the first page was larger). The last
    page (fewer rows than asked, or ``most`` asked) yields everything. A page that one tie group
    fills is yielded in key order and the next page starts after it: a tie group larger than a
    page is ordered by key within each page, the pages in the index's order. With ``max_rows``,
    MaxRowsReached is raised instead of fetching a page that would end past that many rows, or
    of yielding a tie group that fills a page (so every tie group yielded is whole, in key
    order).
    """
    offset = 0
    while True:
        rows = sorted(page(limit, offset), key=lambda row: -row[0])  # stable: ties keep the index's order
        final = len(rows) < limit or limit >= most
        last = rows[-1][0] if rows else 0.0
        count = 0
        i = 0
        while i < len(rows):
            score = rows[i][0]
            if not final and score <= last:
                break
            j = i + 1
            while j < len(rows) and rows[j][0] == score:
                j += 1
            group = [key_of(address) for _, address in rows[i:j]]
            if j - i > 1:
                group.sort(key=_key_order)
            for key in group:
                yield key, score
            count += j - i
            i = j
        if final:
            return
        if count == 0 and limit >= _TIE_BLOCK:
            if max_rows is not None:
                raise MaxRowsReached  # one tie group fills the page: key order within it
            for key in sorted((key_of(address) for _, address in rows), key=_key_order):
                yield key, last
            count = len(rows)
        offset += count
        limit = min(limit * 4, most, max(limit, _TIE_BLOCK))
        if max_rows is not None and offset + limit > max_rows:
            raise MaxRowsReached
