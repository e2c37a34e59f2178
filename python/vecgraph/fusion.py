"""Fusion of ranked lists: weighted Reciprocal Rank Fusion (:func:`rrf`, :func:`rrf_with_ranks`)
and the convex combination of normalised scores (:func:`convex`, with :func:`minmax`);
:func:`fuse` runs either by name.

Reciprocal Rank Fusion (Cormack, Clarke and Büttcher, "Reciprocal Rank Fusion outperforms
Condorcet and individual Rank Learning Methods", SIGIR 2009) merges ranked lists by rank alone,
so channels whose raw scores live on different scales (cosine similarity, BM25, graph scores)
can be combined without calibration:

    score(d) = sum over lists i that contain d of  w_i / (k + rank_i(d))

with ranks counted from 1 and ``k = 60`` by default (the paper's constant).

The accumulation and the top-n selection run in C++ (``_core.rrf_fuse``, a few microseconds
for three lists of 100); this module checks the arguments and holds the plain-Python
reference the kernel is tested against.

>>> rrf([["a", "b", "c"], ["c", "a"]])[:2]      # doctest: +ELLIPSIS
[('a', 0.0325...), ('c', 0.0322...)]
"""

from __future__ import annotations

import functools
import math
import numbers
import sys
from collections.abc import Hashable, Iterable, Mapping, Sequence
from operator import itemgetter
from typing import Any, NamedTuple, Optional, Union

from . import _core
from .errors import InvalidArgumentError

__all__ = ["rrf", "rrf_with_ranks", "fuse", "convex", "minmax", "Fused", "DEFAULT_K"]

DEFAULT_K = 60
"""The RRF constant of Cormack et al. (2009): a document at rank 1 scores 1/61."""


class Fused(NamedTuple):
    """One fused result of :func:`rrf_with_ranks`.

    key: the key as it came in the lists. score: its fused RRF score (larger is better).
    ranks: its rank (from 1) in each input list, ``None`` where the list does not hold it; a
    tuple in list order, or a dict keyed like ``lists`` when ``lists`` was a mapping.
    """

    key: Hashable
    score: float
    ranks: Union[tuple, dict]


ListsArg = Union[Sequence[Sequence[Any]], Mapping[str, Sequence[Any]]]
WeightsArg = Union[Sequence[float], Mapping[str, float], None]


def rrf(lists: ListsArg, weights: WeightsArg = None, k: float = DEFAULT_K,
        top_n: Optional[int] = None) -> list[tuple[Hashable, float]]:
    """Fuses ranked lists by weighted Reciprocal Rank Fusion.

    ``score(d) = Σ_i w_i / (k + rank_i(d))`` over the lists ``i`` that hold ``d``, ranks from 1
    (Cormack, Clarke and Büttcher, SIGIR 2009). The sum is taken in list order in float64, so
    the same inputs always give the same bits.

    Args:
        lists: any number of ranked lists, best first, as a sequence of lists or a mapping
            ``name -> list`` (then ``weights`` may be a mapping too). Each list is a sequence
            of keys, or of ``(key, score)`` pairs (tuples, named tuples included, or lists of
            length 2; decided by the list's first item, and then every item must be a pair,
            so a list of 2-tuple keys must be wrapped), or a search result (its ``keys``):
            the scores are ignored, only the order counts. Keys are any hashable values
            (vecgraph's are str or int). A list may be empty; a set is refused (no order).
            A key repeated within one list counts at its first rank only; the later
            occurrence is skipped and the ranks of the keys after it are still their
            positions in the list (``["a", "b", "a", "c"]``: a=1, b=2, c=4).
        weights: one finite weight ``>= 0`` per list (default 1.0 each). With a mapping of
            lists, a mapping of weights may name some of the lists (the others weigh 1.0).
            A list of weight 0 adds nothing to the scores but still counts for the
            tie-break below and for the keys that appear.
        k: the RRF constant, finite and ``> 0`` (default 60).
        top_n: return at most this many results (``>= 1``); None returns every key.

    Returns:
        ``[(key, score), ...]`` best first. Ties (equal float scores) break by the key's best
        rank in any single list (smaller first), then by the first list in which it has that
        rank (earlier first): the order in which keys first appear when the lists are read
        rank by rank (every list's rank 1 in list order, then every list's rank 2, ...).
        Keys are compared for equality only, as dict keys are (hash, then ``==``): equal
        keys of different types (``1``, ``1.0``, ``True``) are one key, reported as the object
        met first (list by list, best rank first).

    Raises:
        InvalidArgumentError: a negative, NaN or infinite weight (named by its position or
            name), a weight for a list name that does not exist, ``k <= 0`` or not finite,
            ``top_n < 1``.
        TypeError / ValueError: ``lists`` or ``weights`` of the wrong type or length; an
            unhashable key.

    >>> rrf([["d1", "d2", "d3"], ["d3", "d1"]], top_n=2)   # doctest: +ELLIPSIS
    [('d1', 0.032522...), ('d3', 0.032266...)]
    """
    names, key_lists, ws = _check(lists, weights)
    return _fuse(key_lists, ws, _check_k(k), _top_n_arg(top_n), False, names)


def rrf_with_ranks(lists: ListsArg, weights: WeightsArg = None, k: float = DEFAULT_K,
                   top_n: Optional[int] = None) -> list[Fused]:
    """:func:`rrf`, also reporting each result's rank in every input list.

    Arguments, order and errors as :func:`rrf`. Returns ``[Fused(key, score, ranks), ...]``
    best first; ``ranks`` is a tuple with one rank (from 1) or ``None`` per list, or, when
    ``lists`` is a mapping, a dict ``name -> rank or None`` in the mapping's order:

    >>> rrf_with_ranks({"dense": ["x", "y"], "bm25": ["y"], "graph": []})[0]  # doctest: +ELLIPSIS
    Fused(key='y', score=0.03252..., ranks={'dense': 2, 'bm25': 1, 'graph': None})
    """
    names, key_lists, ws = _check(lists, weights)
    fused = _fuse(key_lists, ws, _check_k(k), _top_n_arg(top_n), True, names)
    if names is None:
        return [Fused(key, score, ranks) for key, score, ranks in fused]
    return [Fused(key, score, dict(zip(names, ranks))) for key, score, ranks in fused]


def _fuse(key_lists: list, ws: Any, k: float, top_n: int, with_ranks: bool, names: Optional[list]) -> list:
    """_core.rrf_fuse; an unhashable key is named by its list and position."""
    try:
        return _core.rrf_fuse(key_lists, ws, k, top_n, with_ranks)
    except TypeError:
        _name_unhashable(key_lists, names)
        raise


def _name_unhashable(key_lists: list, names: Optional[list]) -> None:
    """Raises TypeError naming the first unhashable key by its list and position, if any."""
    for i, keys in enumerate(key_lists):
        for j, key in enumerate(keys):
            try:
                hash(key)
            except TypeError:
                where = f"list {names[i]!r}" if names is not None else f"list {i}"
                raise TypeError(f"{where} item {j} is unhashable ({type(key).__name__} {key!r}); keys must be "
                                "hashable, such as str or int") from None


def _top_n_arg(top_n: Any) -> int:
    top_n = _check_top_n(top_n)
    return -1 if top_n is None else min(top_n, sys.maxsize)


# ------------------------------------------------------------------------------------------ internals


@functools.lru_cache(maxsize=256)
def _contributions(w: float, k: float, n: int) -> tuple:
    """``w / (k + r)`` for the ranks ``r = 1..n``."""
    return tuple(w / (k + r) for r in range(1, n + 1))


def _fuse_reference(lists: Any, weights: Any, k: Any, top_n: Any, with_ranks: bool) -> tuple:
    """The fusion in plain Python, the reference the C++ kernel (_core.rrf_fuse) is tested
    against: (keys best first, key -> score, per-list key -> first rank (only with_ranks),
    names)."""
    names, key_lists, ws = _check(lists, weights)
    k = _check_k(k)
    top_n = _check_top_n(top_n)

    # Sum the contributions in list order (0.0 + c is exactly c); a dict keeps the key object
    # met first. The insertion order does not matter (ties are ordered below).
    scores: dict = {}
    get = scores.get
    for w, keys in zip(ws, key_lists):
        n = len(keys)
        if not n:
            continue
        contributions = _contributions(w, k, n)
        if len(set(keys)) == n:
            for key, c in zip(keys, contributions):
                scores[key] = get(key, 0.0) + c
        else:  # a repeated key counts at its first rank only
            seen: set = set()
            for key, c in zip(keys, contributions):
                if key not in seen:
                    seen.add(key)
                    scores[key] = get(key, 0.0) + c

    score_of = scores.__getitem__
    order = sorted(scores, key=score_of, reverse=True)
    if top_n is not None and top_n < len(order):
        # keep the whole group of keys tied with the last one kept, to order it below
        end, boundary = top_n, scores[order[top_n - 1]]
        while end < len(order) and scores[order[end]] == boundary:
            end += 1
        del order[end:]
    if len(set(map(score_of, order))) != len(order):
        # Ties: sort again, from the reading order rank by rank (every list's rank 1 in list
        # order, then every list's rank 2, ...). A dict built from it holds each key once, at
        # its best rank and, among the lists giving it that rank, the first; the sort is stable.
        m = len(key_lists)
        if m == 1:
            reading = key_lists[0]
        else:
            reading = [_PAD] * (max(map(len, key_lists)) * m)
            for i, keys in enumerate(key_lists):
                reading[i:i + m * len(keys):m] = keys
        first_seen = dict.fromkeys(reading)
        first_seen.pop(_PAD, None)
        order = sorted(first_seen, key=score_of, reverse=True)
    if top_n is not None:
        del order[top_n:]
    positions: list = []
    if with_ranks:  # key -> first rank, per list (back to front: the first rank is written last)
        positions = [dict(zip(reversed(keys), range(len(keys), 0, -1))) for keys in key_lists]
    return order, scores, positions, names


_PAD = object()  # fills the reading order where a list is shorter than the longest


def _check(lists: Any, weights: Any) -> tuple:
    """(names or None, list of key lists, list of float weights)."""
    if isinstance(lists, Mapping):
        names = list(lists)
        for name in names:
            if not isinstance(name, str):
                raise TypeError(f"list names must be str, got {type(name).__name__} ({name!r})")
        raw = [lists[name] for name in names]
    elif type(lists) is list or type(lists) is tuple:
        names, raw = None, lists
    elif isinstance(lists, (str, bytes)) or not isinstance(lists, Iterable):
        raise TypeError(f"lists must be a sequence of ranked lists or a mapping name -> list, "
                        f"got {type(lists).__name__}")
    else:
        names, raw = None, list(lists)

    key_lists = []
    for i, lst in enumerate(raw):
        if type(lst) is not list and type(lst) is not tuple:
            lst = _as_list(lst, i if names is None else names[i])
        if lst and (type(lst[0]) is tuple or type(lst[0]) is list or isinstance(lst[0], tuple)):
            lst = _pair_keys(lst, i if names is None else names[i])
        key_lists.append(lst)

    count = len(key_lists)
    if weights is None:
        return names, key_lists, [1.0] * count
    if isinstance(weights, Mapping):
        if names is None:
            raise TypeError("weights can be a mapping only when lists is a mapping name -> list; "
                            "pass one weight per list")
        unknown = [name for name in weights if name not in lists]
        if unknown:
            raise InvalidArgumentError(f"weights name {unknown[0]!r}, which is not one of the lists "
                                       f"({', '.join(map(repr, names)) or 'none'})")
        return names, key_lists, [_check_weight(weights[name], repr(name)) if name in weights else 1.0
                                   for name in names]
    if isinstance(weights, (str, bytes)) or not isinstance(weights, Iterable):
        raise TypeError(f"weights must be a sequence of numbers, got {type(weights).__name__}")
    given = weights if type(weights) is list or type(weights) is tuple else list(weights)
    if len(given) != count:
        raise ValueError(f"weights has {len(given)} items, expected {count} (one per list)")
    ws = []
    for i, w in enumerate(given):
        if type(w) is not float or not 0.0 <= w < math.inf:  # the common case in one test
            w = _check_weight(w, repr(names[i]) if names is not None else str(i))
        ws.append(w)
    return names, key_lists, ws


def _as_list(lst: Any, where: Any) -> list:
    keys = getattr(lst, "keys", None)
    if isinstance(keys, list) and not isinstance(lst, Mapping):  # a SearchResult or HybridResult
        return keys
    if isinstance(lst, (str, bytes, Mapping)) or not isinstance(lst, Iterable):
        raise TypeError(f"list {where!r} must be a sequence of keys or (key, score) pairs, "
                        f"got {type(lst).__name__}")
    if isinstance(lst, (set, frozenset)):
        raise TypeError(f"list {where!r} is a {type(lst).__name__}, which has no order; give a ranked "
                        "list (best first)")
    return lst.tolist() if hasattr(lst, "tolist") else list(lst)


def _pair_keys(lst: list, where: Any) -> list:
    """The keys of a list of (key, score) pairs (decided by its first item: a tuple or list of
    two items, named tuples included); every item must then be such a pair."""
    if len(lst[0]) != 2:
        return lst
    if not all((type(item) is tuple or type(item) is list or isinstance(item, tuple)) and len(item) == 2
               for item in lst):
        raise TypeError(f"list {where!r} mixes (key, score) pairs with other items; "
                        "give all keys or all pairs")
    return list(map(itemgetter(0), lst))


def _check_weight(w: Any, name: str) -> float:
    if isinstance(w, bool) or not isinstance(w, numbers.Real):
        raise TypeError(f"weight {name} must be a real number, got {type(w).__name__}")
    try:
        w = float(w)
    except OverflowError:
        raise InvalidArgumentError(f"weight {name} must be finite and >= 0, got {w}") from None
    if not math.isfinite(w) or w < 0:
        raise InvalidArgumentError(f"weight {name} must be finite and >= 0, got {w}")
    return w


def _check_k(k: Any) -> float:
    if isinstance(k, bool) or not isinstance(k, numbers.Real):
        raise TypeError(f"k must be a real number, got {type(k).__name__}")
    try:
        finite = math.isfinite(k)
    except OverflowError:
        finite = False
    if not finite or k <= 0:
        raise InvalidArgumentError(f"k must be finite and > 0, got {k}")
    return k if type(k) is int else float(k)


def _check_top_n(top_n: Any) -> Optional[int]:
    if top_n is None:
        return None
    if isinstance(top_n, bool) or not isinstance(top_n, numbers.Integral):
        raise TypeError(f"top_n must be an int or None, got {type(top_n).__name__}")
    if top_n < 1:
        raise InvalidArgumentError(f"top_n must be >= 1 (or None for all), got {top_n}")
    return int(top_n)


def minmax(scores: Sequence[float]) -> list[float]:
    """Scores mapped onto [0, 1] by the list's own range: (s - min) / (max - min); a list whose
    scores are all equal maps to 1.0 each (every item is as good as the best).

    Raises:
        TypeError: a score that is not a real number. ValueError: a score that is not finite.
    """
    values = []
    for i, x in enumerate(scores):
        if isinstance(x, bool) or not isinstance(x, numbers.Real) or not math.isfinite(x):
            if isinstance(x, numbers.Real) and not isinstance(x, bool):
                raise ValueError(f"scores[{i}] must be finite, got {x!r}")
            raise TypeError(f"scores[{i}] must be a real number, got {type(x).__name__} {x!r:.40}")
        values.append(float(x))
    if not values:
        return []
    low, high = min(values), max(values)
    if not high > low:
        return [1.0] * len(values)
    if math.isfinite(high - low):
        span = high - low
        return [(x - low) / span for x in values]
    half_low, span = low / 2, high / 2 - low / 2  # the range overflows float64: halve everything
    return [(x / 2 - half_low) / span for x in values]


def convex(lists: Mapping[str, Sequence[Any]], scores: Mapping[str, Sequence[float]],
           weights: Optional[Mapping[str, float]] = None, top_n: Optional[int] = None) -> list[Fused]:
    """Fuses named lists by a convex combination of their (already normalised) scores:
    ``score(d) = Σ_c w_c · s_c(d)``, where ``s_c(d)`` is d's score in list c and 0 where c does
    not hold d (Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval",
    ACM TOIS 2023; the weights need not sum to 1, which scales every score alike).

    The accumulation and the top-n selection run in C++ (``_core.convex_fuse``); the sum is
    taken in list order in float64, as :func:`_convex_reference` does in plain Python.

    Args:
        lists: name -> keys, best first (any hashable keys). scores: name -> one finite score
            per key, normalised to a common scale (e.g. :func:`minmax`). weights: name ->
            weight >= 0 (default 1.0; names not in ``lists`` are refused).
        top_n: at most this many results (>= 1; None: all).

    Returns:
        ``[Fused(key, score, ranks), ...]`` best first, ``ranks`` a dict name -> rank (from 1)
        or None. Ties break as in :func:`rrf`: by the key's best rank in any list, then the
        first list giving it that rank. A key repeated within a list counts at its first rank.

    Raises:
        ValueError: a list and its scores of different lengths; a score that is not finite.
        InvalidArgumentError: a weight that is negative or not finite, ``top_n < 1``.
        TypeError: lists or scores of the wrong type; an unhashable key.
    """
    names, key_lists, ws, score_lists = _check_scored(lists, scores, weights)
    try:
        return convex_unchecked(names, key_lists, score_lists, ws, _top_n_arg(top_n))
    except TypeError:
        _name_unhashable(key_lists, names)
        raise


def convex_unchecked(names: list, key_lists: list, score_lists: list, weights: list, top_n: int) -> list[Fused]:
    """:func:`convex` on arguments already known to be sound (lists of hashable keys, as many
    finite float scores, weights >= 0, ``top_n`` -1 for all): for callers whose lists are their
    own, such as hybrid search, which would pay for the checks on every query."""
    return [Fused(key, score, dict(zip(names, ranks)))
            for key, score, ranks in _core.convex_fuse(key_lists, score_lists, weights, top_n, True)]


def _check_scored(lists: Any, scores: Any, weights: Any) -> tuple:
    if not isinstance(lists, Mapping) or not isinstance(scores, Mapping):
        raise TypeError("lists and scores must be mappings name -> list, got "
                        f"{type(lists).__name__} and {type(scores).__name__}")
    names, key_lists, ws = _check(dict(lists), None if weights is None else dict(weights))
    score_lists = []
    for name, keys in zip(names, key_lists):
        if name not in scores:
            raise ValueError(f"scores has no list {name!r}")
        values = scores[name]
        values = values.tolist() if hasattr(values, "tolist") else list(values)
        if len(values) != len(keys):
            raise ValueError(f"list {name!r} has {len(keys)} keys and {len(values)} scores")
        for j, value in enumerate(values):
            if isinstance(value, bool) or not isinstance(value, numbers.Real) or not math.isfinite(value):
                raise ValueError(f"scores[{name!r}][{j}] must be a finite number, got {value!r}")
        score_lists.append([float(v) for v in values])
    return names, key_lists, ws, score_lists


def _convex_reference(lists: Any, scores: Any, weights: Any = None, top_n: Any = None) -> list:
    """:func:`convex` in plain Python, the reference the C++ kernel is tested against:
    ``[(key, score, ranks tuple)]`` best first."""
    names, key_lists, ws, score_lists = _check_scored(lists, scores, weights)
    total: dict = {}
    best: dict = {}
    first_ranks: list = []
    for i, (keys, values) in enumerate(zip(key_lists, score_lists)):
        first: dict = {}
        for r, (key, value) in enumerate(zip(keys, values), start=1):
            if key in first:
                continue
            first[key] = r
            total[key] = total.get(key, 0.0) + ws[i] * value
            if key not in best or (r, i) < best[key]:
                best[key] = (r, i)
        first_ranks.append(first)
    order = sorted(total, key=lambda key: (-total[key], best[key]))
    top_n = _check_top_n(top_n)
    if top_n is not None:
        del order[top_n:]
    return [(key, total[key], tuple(ranks.get(key) for ranks in first_ranks)) for key in order]


def fuse(lists: Mapping[str, Sequence[Any]], scores: Mapping[str, Sequence[float]], *, method: str = "convex",
         weights: Optional[Mapping[str, float]] = None, rrf_k: float = DEFAULT_K,
         top_n: Optional[int] = None) -> list[Fused]:
    """Fuses named ranked lists that carry scores, by ``method``: ``"convex"``
    (:func:`convex`, over the scores as given) or ``"rrf"`` (:func:`rrf_with_ranks`; the
    scores are not read). Returns ``[Fused(key, score, ranks), ...]`` best first."""
    if method == "convex":
        return convex(lists, scores, weights, top_n)
    if method == "rrf":
        return rrf_with_ranks(dict(lists), weights=dict(weights or {}), k=rrf_k, top_n=top_n)
    raise InvalidArgumentError(f"unknown fusion method {method!r}; choose convex or rrf")
