"""Rerankers: functions that rescore a query's candidate texts, and the steps that apply them.

A reranker is any callable

    ``reranker(query: str, texts: list[str]) -> Sequence[float]``

returning one score per text, higher = more relevant (a list, tuple or 1-D numpy array of real
numbers, finite). It sees the query and the candidates' texts only, so it can read them
together (a cross-encoder) where a first-stage retriever compared vectors or terms one side at
a time. :func:`rerank` reorders the first ``depth`` candidates of a ranked list by such scores
and keeps the rest after them.

Rerankers here: :class:`TermOverlapReranker` (BM25 over the candidates themselves; no model,
no dependency: for tests and as an example) and :class:`CrossEncoderReranker` (a
sentence-transformers cross-encoder, ``pip install "vecgraph[rerank]"``).
:class:`vecgraph.remote.HTTPReranker` calls a reranking service.

>>> r = TermOverlapReranker()
>>> rerank("red apple", ["k1", "k2", "k3"], ["green pear", "red apple pie", "apple"], r, depth=3)[0]
['k2', 'k3', 'k1']
"""

from __future__ import annotations

import math
import numbers
import re
import unicodedata
from collections import Counter
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from .errors import InvalidArgumentError

__all__ = [
    "CrossEncoderReranker",
    "Reranker",
    "TermOverlapReranker",
    "check_reranker",
    "check_scores",
    "rerank",
    "reranker_name",
    "terms",
]


@runtime_checkable
class Reranker(Protocol):
    """What vecgraph needs of a reranker: a callable from a query and candidate texts to one
    score per text, higher = more relevant (``isinstance(obj, Reranker)`` checks that it is
    callable; :func:`check_scores` checks what it returns)."""

    def __call__(self, query: str, texts: list[str]) -> Sequence[float]:
        """One real score per text, in the order of ``texts``."""
        ...


def reranker_name(reranker: Any) -> str:
    """How messages name ``reranker``: its ``name`` attribute if it is a non-empty str, else
    its ``__name__`` (a function), else its type's name."""
    name = getattr(reranker, "name", None)
    if isinstance(name, str) and name:
        return name
    name = getattr(reranker, "__name__", None)
    return name if isinstance(name, str) and name else type(reranker).__name__


def check_reranker(reranker: Any) -> Reranker:
    """``reranker`` if it is callable.

    Raises:
        TypeError: not callable (the message says what a reranker is).
    """
    if not callable(reranker):
        raise TypeError(f"a reranker must be callable as reranker(query: str, texts: list[str]) -> one float "
                        f"per text; got {type(reranker).__name__}")
    return reranker


def _is_bool(value: Any) -> bool:
    return isinstance(value, (bool, np.bool_))


def _is_real(value: Any) -> bool:
    """A real number that is not a boolean (Python or numpy ints and floats, fractions, ...)."""
    return isinstance(value, numbers.Real) and not _is_bool(value)


def check_scores(reranker: Any, texts: Sequence[str], out: Any) -> np.ndarray:
    """What ``reranker`` returned for ``texts``, checked and converted.

    Args:
        reranker: the reranker that returned ``out`` (named in messages, see
            :func:`reranker_name`).
        texts: the texts it was given.
        out: what it returned: ``len(texts)`` real numbers as a list, a tuple, a 1-D numpy array
            (of a numeric dtype, or of object dtype holding real numbers), or a pandas Series
            (read by position, whatever its index).

    Returns:
        float64 array of shape (len(texts),).

    Raises:
        InvalidArgumentError: not a sequence of numbers (None, a str, a dict, booleans, strs or
            other objects in it), not 1-D, another length than ``len(texts)``, or a NaN, an inf
            or a number out of float64's range, such as an int of 400 digits (the message names
            the reranker, what was expected, what came and, for a value, its position).
    """
    name = reranker_name(reranker)
    expected = f"expected {len(texts)} real scores, one per text"
    if out is None or isinstance(out, (str, bytes, dict, set, frozenset)) or not hasattr(out, "__len__"):
        raise InvalidArgumentError(f"reranker {name!r} returned {type(out).__name__}; {expected}")
    if isinstance(out, np.ndarray):
        items: Any = out
    elif callable(getattr(out, "to_numpy", None)):  # a pandas or polars Series: by position, not label
        items = np.asarray(out.to_numpy())
    else:
        items = list(out)  # a copy: read once, indexed by position
    try:
        scores = np.asarray(items)
    except (TypeError, ValueError) as e:  # ragged nesting
        raise InvalidArgumentError(f"reranker {name!r} returned {type(out).__name__} that is not an array of "
                                   f"numbers ({e}); {expected}") from None
    if scores.ndim != 1:
        raise InvalidArgumentError(f"reranker {name!r} returned an array of shape {scores.shape}; {expected} "
                                   f"(shape ({len(texts)},))")
    if len(scores) != len(texts):
        raise InvalidArgumentError(f"reranker {name!r} returned {len(scores)} scores for {len(texts)} texts; "
                                   f"{expected}")

    def refuse(position: int, what: str) -> InvalidArgumentError:
        value = items[position]
        return InvalidArgumentError(f"reranker {name!r} returned {what} at position {position} "
                                    f"({type(value).__name__} {value!r:.40}); {expected}")

    kind = scores.dtype.kind
    if kind == "O":  # Python objects: each must be a real number, converted one by one
        values = np.empty(len(items), dtype=np.float64)
        for position, value in enumerate(items):
            if not _is_real(value):
                raise refuse(position, "a non-numeric score")
            try:
                values[position] = float(value)
            except OverflowError:
                raise refuse(position, "a score out of float64's range (not finite as a float)") from None
        scores = values
    elif kind in "iuf":  # numbers; in a list, booleans among floats would have become 0.0 and 1.0
        bad = next((i for i, v in enumerate(items) if _is_bool(v)), None) if isinstance(items, list) else None
        if bad is not None:
            raise refuse(bad, "a non-numeric score")
    else:  # booleans, complex numbers, strs, dates
        items = list(items)
        raise refuse(next((i for i, v in enumerate(items) if not _is_real(v)), 0), "a non-numeric score")
    scores = scores.astype(np.float64)
    finite = np.isfinite(scores)
    if not finite.all():
        bad = int(np.flatnonzero(~finite)[0])
        raise InvalidArgumentError(f"reranker {name!r} returned {scores[bad]} at position {bad} "
                                   f"(text {texts[bad]!r:.40}); {expected}, finite")
    return scores


def rerank(query: str, keys: Sequence[Any], texts: Sequence[str], reranker: Any,
           depth: int) -> tuple[list[Any], np.ndarray]:
    """Reorder the first ``depth`` of a ranked list by a reranker's scores.

    The reranker is called once, on ``texts[:depth]``; those candidates are sorted by
    descending score, ties kept in their original order (a stable sort), and the candidates
    after ``depth`` follow in their original order. Nothing is called for an empty list.

    Args:
        query: the query text (passed to the reranker as it is).
        keys: the candidates' keys, best first (any values: returned, never compared).
        texts: their texts, aligned with ``keys`` ("" for a candidate without text).
        reranker: see :class:`Reranker`.
        depth: how many of the first candidates to rerank (>= 1; more than ``len(keys)``
            reranks them all).

    Returns:
        ``(new_keys, scores)``: a list of every key, the reranked ones first; and a float64
        array of shape (min(depth, len(keys)),): ``scores[i]`` is the reranker's score of
        ``new_keys[i]`` (the keys after them were not scored).

    Raises:
        TypeError: a query that is not a str, a text that is not a str (its position named),
            a depth that is not an int, a reranker that is not callable.
        InvalidArgumentError: ``keys`` and ``texts`` of different lengths, depth < 1, or
            scores that :func:`check_scores` refuses.
    """
    if not isinstance(query, str):
        raise TypeError(f"query must be a str, got {type(query).__name__}")
    if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)):
        raise TypeError(f"rerank depth must be an int, got {type(depth).__name__}")
    if depth < 1:
        raise InvalidArgumentError(f"rerank depth must be >= 1, got {depth}")
    check_reranker(reranker)
    keys, texts = list(keys), list(texts)
    if len(keys) != len(texts):
        raise InvalidArgumentError(f"rerank got {len(keys)} keys and {len(texts)} texts; expected one text "
                                   "per key")
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {i} (key {keys[i]!r}) must be a str ('' for none), "
                            f"got {type(text).__name__}")
    head = min(int(depth), len(keys))
    if head == 0:
        return keys, np.zeros(0, dtype=np.float64)
    batch = texts[:head]
    scores = check_scores(reranker, batch, reranker(query, list(batch)))
    order = np.argsort(-scores, kind="stable")  # descending, ties in their original order
    return [keys[i] for i in order] + keys[head:], scores[order]


# ------------------------------------------------------------------ BM25 over the candidates

# Han ideographs (CJK Unified Ideographs, Extension A, Compatibility) are terms one character
# each, as Chinese has no spaces; other terms are maximal runs of word characters.
_HAN = "\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff"
_TERMS = re.compile(f"[{_HAN}]|[^\\W{_HAN}]+")


def terms(text: str) -> list[str]:
    """The terms :class:`TermOverlapReranker` compares: the text NFKC-normalised and
    casefolded, cut into maximal runs of Unicode word characters (letters, digits, ``_``),
    each Han ideograph a term of its own. ``terms("The A7-Pro's 价格") == ["the", "a7",
    "pro", "s", "价", "格"]``."""
    return _TERMS.findall(unicodedata.normalize("NFKC", text).casefold())


class TermOverlapReranker:
    """BM25 (Robertson & Zaragoza, "The Probabilistic Relevance Framework: BM25 and Beyond",
    Foundations and Trends in IR 3(4), 2009) with the candidate texts as the collection: a
    reranker without a model, for tests and as an example of the protocol.

    For query q and candidate texts d_1..d_N::

        score(d) = sum over distinct terms t of q with tf(t, d) > 0 of
                   idf(t) * tf(t, d) * (k1 + 1) / (tf(t, d) + k1 * (1 - b + b * |d| / avgdl))
        idf(t)   = ln(1 + (N - df(t) + 0.5) / (df(t) + 0.5))

    tf(t, d): occurrences of t in d; |d|: d's number of terms; avgdl: the mean |d| of the
    candidates; df(t): how many candidates contain t (idf as in Lucene's BM25, always > 0).
    Terms: :func:`terms`. A text sharing no term with the query scores 0.0.

    Args:
        k1: term-frequency saturation (>= 0, finite; default 1.2).
        b: length normalisation (in [0, 1]; default 0.75).

    Raises:
        InvalidArgumentError: k1 or b out of range.
    """

    name = "term_overlap_bm25"

    def __init__(self, k1: float = 1.2, b: float = 0.75) -> None:
        for label, value in (("k1", k1), ("b", b)):
            if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
                raise TypeError(f"{label} must be a real number, got {type(value).__name__}")
        if not (math.isfinite(k1) and k1 >= 0):
            raise InvalidArgumentError(f"k1 must be finite and >= 0, got {k1}")
        if not 0 <= b <= 1:
            raise InvalidArgumentError(f"b must be in [0, 1], got {b}")
        self.k1, self.b = float(k1), float(b)

    def __call__(self, query: str, texts: list[str]) -> np.ndarray:
        """float64 scores of shape (len(texts),), by the formula above.

        Raises:
            TypeError: a query or text that is not a str.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        bags = []
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {i} must be a str, got {type(text).__name__}")
            bags.append(Counter(terms(text)))
        scores = np.zeros(len(bags), dtype=np.float64)
        wanted = set(terms(query))
        if not bags or not wanted:
            return scores
        lengths = [sum(bag.values()) for bag in bags]
        avgdl = sum(lengths) / len(bags)
        n = len(bags)
        for t in wanted:
            df = sum(1 for bag in bags if t in bag)
            if df == 0:
                continue
            idf = math.log(1.0 + (n - df + 0.5) / (df + 0.5))
            for i, bag in enumerate(bags):
                tf = bag.get(t, 0)
                if tf:  # then |d| >= 1, so avgdl > 0
                    norm = 1 - self.b + self.b * lengths[i] / avgdl
                    scores[i] += idf * tf * (self.k1 + 1) / (tf + self.k1 * norm)
        return scores

    def __repr__(self) -> str:
        return f"TermOverlapReranker(k1={self.k1}, b={self.b})"


# ------------------------------------------------------------------ cross-encoders

class CrossEncoderReranker:
    """A cross-encoder (query and text read together by one transformer, Nogueira & Cho,
    "Passage Re-ranking with BERT", 2019) through sentence-transformers' ``CrossEncoder``.

    Args:
        model_name_or_object: a model name or local folder, loaded with
            ``sentence_transformers.CrossEncoder(model_name_or_object, max_length=max_length)``
            (a name is fetched from its hub unless cached), or an object already built: anything
            with ``predict(pairs: list[tuple[str, str]], batch_size: int)`` returning one score
            per pair, such as a ``CrossEncoder``.
        batch_size: pairs per forward pass (>= 1), passed to ``predict``.
        max_length: longest input in tokens, query and text together (longer ones are
            truncated); only when loading by name (set it on a model object yourself).
        name: how messages name this reranker (default: the model name, or the object's type).

    Calls return float64 scores of shape (len(texts),): the model's outputs for the pairs
    ``(query, text)`` (for a one-label ``CrossEncoder``, after its activation: a sigmoid by
    default, so in (0, 1)); a model of one output column of shape (n, 1) is flattened.

    Raises:
        ImportError: loading by name without sentence-transformers installed.
        TypeError: an object without a callable ``predict``; a batch_size that is not an int.
        InvalidArgumentError: batch_size < 1, max_length < 1, or max_length with a model object.
    """

    def __init__(self, model_name_or_object: Any, batch_size: int = 32, max_length: int | None = None,
                 name: str | None = None) -> None:
        self.batch_size = _positive_int(batch_size, "batch_size")
        if max_length is not None:
            _positive_int(max_length, "max_length")
        if isinstance(model_name_or_object, str):
            if not model_name_or_object:
                raise InvalidArgumentError("model name must not be empty")
            try:
                from sentence_transformers import CrossEncoder
            except ImportError as e:
                raise ImportError("CrossEncoderReranker needs sentence-transformers: "
                                  'pip install "vecgraph[rerank]"') from e
            kwargs = {} if max_length is None else {"max_length": int(max_length)}
            self.model = CrossEncoder(model_name_or_object, **kwargs)
            self.name = name or model_name_or_object
        else:
            if not callable(getattr(model_name_or_object, "predict", None)):
                raise TypeError(f"a cross-encoder model must be a model name (str) or have a predict(pairs, "
                                f"batch_size=...) method; {type(model_name_or_object).__name__} has none")
            if max_length is not None:
                raise InvalidArgumentError("max_length applies when loading a model by name; set it on the "
                                           "model object instead")
            self.model = model_name_or_object
            self.name = name or type(model_name_or_object).__name__

    def __call__(self, query: str, texts: list[str]) -> np.ndarray:
        """float64 scores of shape (len(texts),), one per ``(query, text)`` pair.

        Raises:
            TypeError: a query or text that is not a str.
            InvalidArgumentError: the model returned other than one finite number per pair
                (a model of several output columns is a classifier, not a reranker).
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        for i, text in enumerate(texts):
            if not isinstance(text, str):
                raise TypeError(f"text {i} must be a str, got {type(text).__name__}")
        if len(texts) == 0:
            return np.zeros(0, dtype=np.float64)
        out: Any = self.model.predict([(query, text) for text in texts], batch_size=self.batch_size)
        if hasattr(out, "detach"):  # a torch tensor (convert_to_tensor models)
            out = out.detach().cpu().numpy()
        if isinstance(out, np.ndarray) and out.ndim == 2 and out.shape[1] == 1:
            out = out[:, 0]
        return check_scores(self, texts, out)

    def __repr__(self) -> str:
        return f"CrossEncoderReranker(name={self.name!r}, batch_size={self.batch_size})"


def _positive_int(value: int | Any, label: str) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{label} must be an int, got {type(value).__name__}")
    if value < 1:
        raise InvalidArgumentError(f"{label} must be >= 1, got {value}")
    return int(value)
