"""Evaluate retrieval on your own relevance judgments: recall@k, MRR@k and nDCG@k per query
and averaged, p50 / p99 latency, and per-query wins and losses against a baseline, for each
run (a set of :meth:`vecgraph.Graph.hybrid_search` arguments).

>>> queries = load_queries("queries.jsonl")                              # doctest: +SKIP
>>> report = evaluate(graph, queries, k=10, embedder="wordllama")        # doctest: +SKIP
>>> print(report.table())                                                # doctest: +SKIP

``vecgraph eval FOLDER QUERIES.jsonl`` does the same from the command line.

**Queries** are dicts (one JSON object per line in a file for :func:`load_queries`)::

    {"qid": "q1", "text": "who leads Orion?", "vector": [0.1, ...],
     "relevant": ["orion", 42] | {"orion": 2, "vega": 1} | [["orion", 2], [42, 1]],
     "exclude": ["ada"]}

``qid`` (str, unique) and ``relevant`` are required, and ``text`` or ``vector`` (or both).
``relevant`` lists the relevant node keys (str or int; each of grade 1), or grades them
(``{key: grade >= 0}``, or ``[key, grade]`` pairs: JSON object keys are always strings, so
pairs are how a JSON file grades int keys). A key is relevant when its grade is > 0; a query
needs at least one. ``exclude``: keys the search must not return (``exclude_keys``), such as
the document a question was written from. Other fields are ignored.

**Metrics**, for one query; ``ranked``: the keys returned, best first; ``g(d)``: the grade of
key ``d`` in the judgments, 0 when it is not judged:

- recall@k = |relevant keys among the first k of ranked| / |relevant keys|.
- MRR@k: 1 / the rank of the first relevant key among the first k of ranked, 0 when there is
  none (its mean over the queries is the mean reciprocal rank).
- nDCG@k = DCG@k / IDCG@k, DCG@k = Σ_{i=1..k} g(ranked[i]) / log2(i + 1), IDCG@k the DCG@k
  of the judged keys sorted by grade (the best ranking the judgments allow). Gain = grade
  (binary judgments: 1), log2 discount: Järvelin & Kekäläinen, "Cumulated gain-based
  evaluation of IR techniques", ACM TOIS 20(4), 2002, in the form trec_eval's ``ndcg_cut``,
  ir-measures and ranx compute (the paper's DCG with base b = 2 leaves rank 2 undiscounted
  too: g1 + g2 + Σ_{i>=3} g_i / log2 i).

Ranks are positions in the list as returned: a key listed twice counts once, at its first
position (its later position gains nothing); fewer than k results gain nothing for the
missing positions.

**Why the metrics are computed here** rather than by a library: they are a few lines each, and
exact per-query values are needed anyway (the wins and losses against the baseline). The
tests check them against ir-measures (trec_eval through pytrec_eval) on random graded and
binary runs, with duplicates and short lists, in the ``test`` extra. Measured for 2,000
queries at k = 10 on the project's 2-core machine: these functions take 3 ms for the three
metrics (30 ms with checking the judgments); ir-measures imports in 0.03 s and evaluates in
0.3 s (0.12 s warm), but needs pytrec_eval-terrier and SciPy (145 MB installed), takes str doc
ids only (node keys 1 and "1" would have to be mapped apart), int grades only, and orders
tied scores by doc id; ranx imports in 3.6-4.4 s (numba), compiles for 62 s on its first
evaluation (4.9 s from numba's cache later, 0.28 s warm) and installs 681 MB with its
dependencies.
"""

from __future__ import annotations

import dataclasses
import json
import math
import numbers
import os
import sys
import time
from collections.abc import Iterable, Mapping
from itertools import islice
from typing import Any

import numpy as np

from .errors import DimensionMismatchError, Error, InvalidArgumentError, _short

__all__ = [
    "CHANNELS",
    "EvalReport",
    "RunSummary",
    "default_runs",
    "evaluate",
    "judgments",
    "load_queries",
    "mrr_at_k",
    "ndcg_at_k",
    "recall_at_k",
]

K = 10
CHANNELS = ("dense", "bm25", "entity", "graph")  # the single-channel default runs, in table order
EMBED_BATCH = 1024  # query texts per embedder call
# evaluate() passes these to hybrid_search itself; a run may not set them.
_RESERVED = ("text", "vector", "k", "exclude_keys", "embedder")
_FIELDS = ("qid", "text", "vector", "relevant", "exclude")
_TIE = 1e-12  # nDCG differences at most this small are ties in the win / loss counts


# ====================================================================== metrics


def _key(value: Any, where: str) -> str | int:
    """A node key: a str or an int (a NumPy integer becomes an int; bool is refused)."""
    if isinstance(value, str) or (isinstance(value, int) and not isinstance(value, bool)):
        return value
    if isinstance(value, np.integer):
        return int(value)
    raise TypeError(f"{where} must be a str or int node key, got {type(value).__name__} {_short(value)}")


def _grade(value: Any, where: str) -> float:
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{where} must be a real number >= 0, got {type(value).__name__} {_short(value)}")
    grade = float(value)
    if not (math.isfinite(grade) and grade >= 0):
        raise InvalidArgumentError(f"{where} must be finite and >= 0, got {_short(value)}")
    return grade


def judgments(relevant: Any, where: str = "relevant") -> dict:
    """The judgments of one query as ``{key: grade}`` (grades as float).

    Args:
        relevant: the relevant keys (a list, tuple or set of str / int keys, each of grade 1),
            ``{key: grade}``, or a list of ``[key, grade]`` pairs; grades are real numbers >= 0.
        where: how error messages name ``relevant``.

    Raises:
        TypeError: not a collection; a key that is not a str or int; a grade that is not a
            real number.
        InvalidArgumentError: no key, no key of grade > 0 (the metrics are undefined), a
            negative or non-finite grade, a key graded twice with different grades.
    """
    if isinstance(relevant, Mapping):
        pairs = [(_key(key, f"{where} key"), _grade(grade, f"{where}[{key!r}]"))
                 for key, grade in relevant.items()]
    elif isinstance(relevant, (str, bytes)) or not isinstance(relevant, Iterable):
        raise TypeError(f"{where} must be a list of keys, {{key: grade}} or a list of [key, grade] pairs, "
                        f"got {type(relevant).__name__} {_short(relevant)}")
    else:
        pairs = []
        for i, item in enumerate(relevant):
            if isinstance(item, (list, tuple)):
                if len(item) != 2:
                    raise InvalidArgumentError(f"{where}[{i}] must be a key or a [key, grade] pair, "
                                               f"got {_short(item)}")
                pairs.append((_key(item[0], f"{where}[{i}][0]"), _grade(item[1], f"{where}[{i}][1]")))
            else:
                pairs.append((_key(item, f"{where}[{i}]"), 1.0))
    grades: dict = {}
    for key, grade in pairs:
        if grades.get(key, grade) != grade:
            raise InvalidArgumentError(f"{where} grades key {key!r} twice: {grades[key]:g} and {grade:g}")
        grades[key] = grade
    if not grades:
        raise InvalidArgumentError(f"{where} is empty: the metrics are undefined for a query without "
                                   "relevant keys")
    if not any(g > 0 for g in grades.values()):
        raise InvalidArgumentError(f"{where} has no key of grade > 0: the metrics are undefined for a query "
                                   "without relevant keys")
    return grades


def _check_k(k: Any) -> int:
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
        raise TypeError(f"k must be an int, got {type(k).__name__}")
    if k < 1:
        raise InvalidArgumentError(f"k must be >= 1, got {k}")
    return int(k)


def _ideal_dcg(grades: dict, k: int) -> float:
    best = sorted((g for g in grades.values() if g > 0), reverse=True)[:k]
    return sum(g / math.log2(i + 2) for i, g in enumerate(best))


def _scores(ranked: Iterable, grades: dict, k: int, count_relevant: int, ideal: float) -> tuple:
    """(recall@k, reciprocal rank within k, nDCG@k) of one ranked list, in one pass."""
    found: set = set()
    rr = dcg = 0.0
    for i, key in enumerate(islice(ranked, k)):
        grade = grades.get(key)
        if not grade or key in found:  # not judged, grade 0, or listed before
            continue
        found.add(key)
        if not rr:
            rr = 1.0 / (i + 1)
        dcg += grade / math.log2(i + 2)
    return len(found) / count_relevant, rr, dcg / ideal


def _metrics(ranked: Iterable, relevant: Any, k: int) -> tuple:
    grades = judgments(relevant)
    k = _check_k(k)
    return _scores(ranked, grades, k, sum(g > 0 for g in grades.values()), _ideal_dcg(grades, k))


def recall_at_k(ranked: Iterable, relevant: Any, k: int = K) -> float:
    """The share of the relevant keys (grade > 0) among the first ``k`` of ``ranked``.

    Args:
        ranked: the keys returned, best first (str or int node keys).
        relevant: see :func:`judgments` (a list of keys, ``{key: grade}`` or ``[key, grade]`` pairs).
        k: the cutoff, >= 1.

    Raises:
        InvalidArgumentError / TypeError: bad judgments (see :func:`judgments`) or ``k``.
    """
    return _metrics(ranked, relevant, k)[0]


def mrr_at_k(ranked: Iterable, relevant: Any, k: int = K) -> float:
    """1 / the rank (1-based) of the first relevant key (grade > 0) among the first ``k`` of
    ``ranked``; 0.0 when there is none. Arguments and errors as :func:`recall_at_k`."""
    return _metrics(ranked, relevant, k)[1]


def ndcg_at_k(ranked: Iterable, relevant: Any, k: int = K) -> float:
    """nDCG@k = DCG@k / IDCG@k with DCG@k = Σ_{i=1..k} grade(ranked[i]) / log2(i + 1) and
    IDCG@k the DCG@k of the judged keys sorted by grade (Järvelin & Kekäläinen, ACM TOIS
    20(4), 2002; see the module docstring). In [0, 1]. Arguments and errors as
    :func:`recall_at_k`."""
    return _metrics(ranked, relevant, k)[2]


# ====================================================================== queries


@dataclasses.dataclass
class _Query:
    qid: str
    text: str | None
    vector: np.ndarray | None  # (dim,) float32
    grades: dict
    exclude: list | None
    count_relevant: int = 0
    ideal: float = 0.0


def _check_query(raw: Any, where: str, dim: int | None) -> _Query:
    """One query dict checked (see the module docstring); ``where`` names it in errors."""
    if not isinstance(raw, Mapping):
        raise TypeError(f"{where} must be a dict with 'qid', 'relevant' and 'text' or 'vector', "
                        f"got {type(raw).__name__} {_short(raw)}")
    qid = raw.get("qid")
    if qid is None:
        raise InvalidArgumentError(f"{where}: 'qid' is missing: give each query a unique str id")
    if not isinstance(qid, str):
        raise TypeError(f"{where}: 'qid' must be a str, got {type(qid).__name__} {_short(qid)}")
    if not qid:
        raise InvalidArgumentError(f"{where}: 'qid' is empty")
    where = f"{where} (qid {qid!r})"
    text = raw.get("text")
    if text is not None:
        if not isinstance(text, str):
            raise TypeError(f"{where}: 'text' must be a str, got {type(text).__name__} {_short(text)}")
        if not text.strip():
            raise InvalidArgumentError(f"{where}: 'text' is empty; give some text or leave the field out")
    vector = raw.get("vector")
    if vector is not None:
        try:
            array = np.asarray(vector)
        except ValueError as exc:
            raise InvalidArgumentError(f"{where}: 'vector' must be a list of numbers ({exc})") from None
        if array.dtype == object or not (np.issubdtype(array.dtype, np.integer)
                                         or np.issubdtype(array.dtype, np.floating)):
            raise TypeError(f"{where}: 'vector' must be a list of numbers, got {_short(vector)}")
        if array.ndim != 1:
            raise InvalidArgumentError(f"{where}: 'vector' must have shape (dim,), got shape {array.shape}")
        if dim is not None and array.shape[0] != dim:
            raise DimensionMismatchError(f"{where}: 'vector' has dim {array.shape[0]}, the graph has "
                                         f"dim {dim}")
        with np.errstate(over="ignore"):
            vector = np.ascontiguousarray(array, dtype=np.float32)
        if not np.isfinite(vector).all():
            raise InvalidArgumentError(f"{where}: 'vector' has NaN or inf (or a value beyond float32)")
    if text is None and vector is None:
        raise InvalidArgumentError(f"{where}: needs 'text' or 'vector' (or both)")
    if "relevant" not in raw or raw["relevant"] is None:
        raise InvalidArgumentError(f"{where}: 'relevant' is missing: give the relevant node keys, "
                                   "as a list or {key: grade}")
    grades = judgments(raw["relevant"], f"{where}: 'relevant'")
    exclude = raw.get("exclude")
    if exclude is not None:
        if isinstance(exclude, (str, bytes, Mapping)) or not isinstance(exclude, Iterable):
            raise TypeError(f"{where}: 'exclude' must be a list of keys, got {type(exclude).__name__} "
                            f"{_short(exclude)}")
        exclude = [_key(key, f"{where}: 'exclude'[{i}]") for i, key in enumerate(exclude)] or None
        both = [key for key in exclude or () if grades.get(key, 0) > 0]
        if both:
            raise InvalidArgumentError(f"{where}: relevant key {both[0]!r} is also in 'exclude', so no search can "
                                       "return it; take it out of one of them")
    return _Query(qid, text, vector, grades, exclude)


def _check_queries(queries: Any, dim: int | None) -> list:
    if isinstance(queries, (str, bytes, Mapping)) or not isinstance(queries, Iterable):
        raise TypeError(f"queries must be an iterable of query dicts (see vecgraph.evaluate), got "
                        f"{type(queries).__name__}; a JSONL file is read by load_queries(path)")
    checked, seen = [], {}
    for i, raw in enumerate(queries):
        q = _check_query(raw, f"queries[{i}]", dim)
        if q.qid in seen:
            raise InvalidArgumentError(f"queries[{i}]: qid {q.qid!r} is also the qid of "
                                       f"queries[{seen[q.qid]}]; qids must be unique")
        seen[q.qid] = i
        checked.append(q)
    if not checked:
        raise InvalidArgumentError("queries is empty: nothing to evaluate")
    return checked


def load_queries(path: str | os.PathLike, *, dim: int | None = None) -> list:
    """Read queries from a JSONL file: one JSON object per line, with the fields described in
    the module docstring; blank lines are skipped.

    Args:
        path: the file (UTF-8).
        dim: when given, a query vector of another length is an error here, named by its
            line (pass the graph's dim).

    Returns:
        The query dicts, in file order, as JSON gives them (vectors as lists of numbers).

    Raises:
        InvalidArgumentError: a line that is not JSON or not an object, a query with missing
            or bad fields, a qid used twice, no query at all (the message names the file and
            line number).
        TypeError: a field of the wrong type (the message names the file and line number).
        DimensionMismatchError: a vector whose length is not ``dim``.
        OSError: the file cannot be read.
    """
    path = os.fspath(path)
    queries, lines = [], {}
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            where = f"{path} line {number}"
            try:
                raw = json.loads(line)
            except ValueError as exc:
                raise InvalidArgumentError(f"{where}: expected one JSON object per line, got invalid JSON "
                                           f"({exc})") from None
            if not isinstance(raw, dict):
                raise InvalidArgumentError(f"{where}: expected a JSON object with 'qid', 'relevant' and "
                                           f"'text' or 'vector', got {type(raw).__name__} {_short(raw)}")
            q = _check_query(raw, where, dim)
            if q.qid in lines:
                raise InvalidArgumentError(f"{where}: qid {q.qid!r} is also on line {lines[q.qid]}; "
                                           "qids must be unique")
            lines[q.qid] = number
            queries.append(raw)
    if not queries:
        raise InvalidArgumentError(f"{path} holds no query: expected one JSON object per line")
    return queries


# ====================================================================== runs


def default_runs(*, vectors: bool = True, texts: bool = True) -> dict:
    """The runs :func:`evaluate` makes when given none: each channel alone (``dense``,
    ``bm25``, ``entity``, ``graph``), ``hybrid`` (every channel, the default fusion) and
    ``hybrid (rrf)`` (every channel, weighted RRF). Without query ``vectors`` the dense and
    graph channels cannot run, without ``texts`` bm25 and entity: those runs are left out.

    Returns:
        {run name: hybrid_search keyword arguments}.
    """
    runs: dict = {}
    for channel in CHANNELS:
        if (vectors if channel in ("dense", "graph") else texts):
            runs[channel] = {"channels": [channel]}
    runs["hybrid"] = {}
    runs["hybrid (rrf)"] = {"fusion": "rrf"}
    return runs


def _check_runs(runs: Any) -> dict:
    if not isinstance(runs, Mapping):
        raise TypeError("runs must be a dict {name: hybrid_search keyword arguments}, got "
                        f"{type(runs).__name__}")
    if not runs:
        raise InvalidArgumentError("runs is empty: name at least one, e.g. {'hybrid': {}}")
    checked = {}
    for name, kwargs in runs.items():
        if not isinstance(name, str) or not name:
            raise TypeError(f"run names must be non-empty str, got {_short(name)}")
        if not isinstance(kwargs, Mapping):
            raise TypeError(f"run {name!r} must be a dict of hybrid_search keyword arguments, got "
                            f"{type(kwargs).__name__} {_short(kwargs)}")
        for arg in kwargs:
            if not isinstance(arg, str):
                raise TypeError(f"run {name!r}: argument names must be str, got {_short(arg)}")
            if arg in _RESERVED:
                raise InvalidArgumentError(
                    f"run {name!r} sets {arg!r}: evaluate passes text, vector, k and exclude_keys itself "
                    "(k to evaluate(k=...), embedder to evaluate(embedder=...), which embeds the texts "
                    "once, outside the timed search)")
        checked[name] = dict(kwargs)
    return checked


def _single_channel(kwargs: dict) -> str | None:
    """The channel of a run that names exactly one (``channels=["bm25"]``), else None."""
    channels = kwargs.get("channels")
    if isinstance(channels, (list, tuple)) and len(channels) == 1 and isinstance(channels[0], str):
        return channels[0]
    return None


# ====================================================================== report


@dataclasses.dataclass(frozen=True)
class RunSummary:
    """One row of an :class:`EvalReport`.

    Attributes:
        name: the run's name.
        params: the hybrid_search keyword arguments of the run (besides text, vector, k and
            exclude_keys).
        queries: how many queries ran.
        recall, mrr, ndcg: the means over the queries of recall@k, MRR@k and nDCG@k, in [0, 1].
        p50_us, p99_us: median and 99th percentile of one hybrid_search call, microseconds
            (numpy.percentile, linear interpolation).
        better, worse: queries whose nDCG@k is higher / lower than the baseline run's (ties
            within 1e-12 count as neither); None for the baseline itself, or without a baseline.
    """

    name: str
    params: dict
    queries: int
    recall: float
    mrr: float
    ndcg: float
    p50_us: float
    p99_us: float
    better: int | None = None
    worse: int | None = None


def _fmt_us(us: float) -> str:
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def _jsonable(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_jsonable(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return repr(value)


@dataclasses.dataclass(frozen=True)
class EvalReport:
    """What :func:`evaluate` measured.

    Attributes:
        k: the cutoff of every metric.
        qids: the query ids, in query order.
        runs: {run name: :class:`RunSummary`}, in run order.
        per_query: {run name: {"recall": [...], "mrr": [...], "ndcg": [...], "latency_us": [...]}},
            one float per query, in ``qids`` order (latency of the hybrid_search call, µs).
        baseline: the run the others are compared with query by query (None: no comparison).
        best_channel: the single-channel run (``channels`` of one name) of the highest mean
            nDCG@k, the first one on a tie; None when no run has a single channel.
        embedded: how many query texts were embedded (queries with text and no vector).
        embed_seconds: the time that took, in seconds (not in any latency).
        unknown_relevant: relevant keys (grade > 0) that are not in the graph, summed over the
            queries (often a sign of keys of the wrong type: "42" for 42); None when the graph
            cannot tell.
    """

    k: int
    qids: list
    runs: dict
    per_query: dict
    baseline: str | None
    best_channel: str | None
    embedded: int = 0
    embed_seconds: float = 0.0
    unknown_relevant: int | None = None

    def table(self) -> str:
        """A Markdown table: run | recall@k | MRR@k | nDCG@k | p50 | p99 | better / worse than
        the baseline (number of queries whose nDCG@k is higher / lower)."""
        k, n = self.k, len(self.qids)
        versus = (f"vs {_cell(self.baseline)}: better / worse (of {n:,})" if self.baseline is not None
                  else "better / worse (no baseline)")
        lines = [f"| run | recall@{k} | MRR@{k} | nDCG@{k} | p50 | p99 | {versus} |",
                 "|---|---:|---:|---:|---:|---:|---:|"]
        for name, r in self.runs.items():
            if self.baseline is None:
                vs = "-"
            elif name == self.baseline:
                vs = "baseline"
            else:
                vs = f"{r.better:,} / {r.worse:,}"
            lines.append(f"| {_cell(name)} | {r.recall:.3f} | {r.mrr:.3f} | {r.ndcg:.3f} "
                         f"| {_fmt_us(r.p50_us)} | {_fmt_us(r.p99_us)} | {vs} |")
        return "\n".join(lines)

    def to_dict(self) -> dict:
        """Every figure as JSON-ready dicts, lists, str and numbers: ``k``, ``queries``,
        ``qids``, ``baseline``, ``best_channel``, ``embedded``, ``embed_seconds``,
        ``unknown_relevant``, ``runs`` ({name: the fields of :class:`RunSummary` but name})
        and ``per_query`` (as the attribute)."""
        return _jsonable({
            "k": self.k,
            "queries": len(self.qids),
            "qids": self.qids,
            "baseline": self.baseline,
            "best_channel": self.best_channel,
            "embedded": self.embedded,
            "embed_seconds": self.embed_seconds,
            "unknown_relevant": self.unknown_relevant,
            "runs": {name: {f.name: getattr(r, f.name) for f in dataclasses.fields(r) if f.name != "name"}
                     for name, r in self.runs.items()},
            "per_query": self.per_query,
        })


# ====================================================================== evaluate


def _progress(total: int, desc: str, unit: str, show: bool | None):
    from tqdm import tqdm

    show = sys.stderr.isatty() if show is None else show
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=not show, leave=False)


def _with_where(exc: BaseException, where: str) -> BaseException:
    """``exc`` again, its message prefixed with ``where`` (the original when its type cannot
    be made from one message)."""
    try:
        return type(exc)(f"{where}: {exc}")
    except TypeError:  # an exception type that takes other arguments
        return exc


def _embedder(embedder: Any) -> Any:
    from . import embedders

    if isinstance(embedder, str):
        embedder = embedders.load(embedder)
    return embedders.check_embedder(embedder)


def _search(graph: Any, name: str, kwargs: dict, i: int, q: _Query, k: int) -> Any:
    """One search of the run ``name``; its errors name the run and the query."""
    try:
        return graph.hybrid_search(text=q.text, vector=q.vector, k=k, exclude_keys=q.exclude, **kwargs)
    except (Error, TypeError, ValueError) as exc:
        raise _with_where(exc, f"run {name!r}, queries[{i}] (qid {q.qid!r})") from exc


def _unknown_relevant(graph: Any, queries: list) -> int | None:
    if getattr(type(graph), "__contains__", None) is None:
        return None
    return sum(1 for q in queries for key, grade in q.grades.items() if grade > 0 and key not in graph)


def evaluate(graph: Any, queries: Iterable, *, k: int = K, runs: Mapping | None = None,
             embedder: Any = None, baseline: str | None = None, progress: bool | None = None,
             warmup: int = 5) -> EvalReport:
    """Run every query through every run, one :meth:`~vecgraph.Graph.hybrid_search` call at a
    time, and measure recall@k, MRR@k, nDCG@k (see the module docstring) and latency.

    Each call is ``graph.hybrid_search(text=q["text"], vector=q["vector"], k=k,
    exclude_keys=q["exclude"] or None, **runs[name])``, timed with ``time.perf_counter_ns``
    (one thread; the BM25 channel of a multi-channel run uses a second one, as hybrid_search
    does). The first ``warmup`` queries run once through each run untimed before its timed pass.

    Args:
        graph: a :class:`vecgraph.Graph` (or any object with the same ``hybrid_search``).
        queries: an iterable of query dicts, ``{"qid": str, "text": str, "vector": (dim,)
            array-like, "relevant": list of keys | {key: grade >= 0} | [[key, grade], ...],
            "exclude": list of keys}``: qid, relevant and text or vector are required (see the
            module docstring and :func:`load_queries`).
        k: the cutoff of the metrics and the results asked of each search, >= 1.
        runs: {name: hybrid_search keyword arguments}, e.g. ``{"bm25": {"channels": ["bm25"]},
            "hybrid": {}, "rrf": {"fusion": "rrf"}}``; may not set text, vector, k,
            exclude_keys or embedder. Default: :func:`default_runs`, without the channels some
            query cannot feed (no vector for dense and graph, no text for bm25 and entity).
        embedder: embeds the text of each query that has no vector, all up front in batches of
            1,024 (not in the latencies): an embedder object (``name``, ``dim``,
            ``__call__(texts) -> (n, dim) float32``, see :mod:`vecgraph.embedders`) or a spec
            for :func:`vecgraph.embedders.load` such as ``"wordllama"``; checked against the
            graph's recorded embedder (:meth:`~vecgraph.Graph.embed_query`). None: such
            queries have no vector.
        baseline: the run every other is compared with, query by query (by nDCG@k). Default:
            the best single-channel run (:attr:`EvalReport.best_channel`).
        progress: show a tqdm bar on stderr (None: when stderr is a terminal).
        warmup: untimed searches per run before the timed ones (>= 0).

    Returns:
        :class:`EvalReport`.

    Raises:
        TypeError: a query that is not a dict or has a field of the wrong type; runs that are
            not a dict of dicts (messages name ``queries[i]``, its qid and the field).
        InvalidArgumentError: no query; a query without qid, relevant, or text and vector,
            with no relevant key of grade > 0, a NaN in its vector, or a qid used twice; a run
            that sets a reserved argument; an unknown baseline; a bad k.
        DimensionMismatchError: a query vector of another dim than the graph's.
        Error, TypeError, ValueError from hybrid_search or the embedder, the message prefixed
            with the run and query.
    """
    k = _check_k(k)
    if isinstance(warmup, bool) or not isinstance(warmup, int) or warmup < 0:
        raise InvalidArgumentError(f"warmup must be an int >= 0, got {_short(warmup)}")
    checked = _check_queries(queries, getattr(graph, "dim", None))
    for q in checked:
        q.count_relevant = sum(g > 0 for g in q.grades.values())
        q.ideal = _ideal_dcg(q.grades, k)

    embedded, embed_seconds = 0, 0.0
    missing = [q for q in checked if q.vector is None and q.text is not None]
    if embedder is not None and missing:
        embedder = _embedder(embedder)
        t0 = time.perf_counter()
        with _progress(len(missing), "embedding queries", "query", progress) as bar:
            for start in range(0, len(missing), EMBED_BATCH):
                batch = missing[start:start + EMBED_BATCH]
                try:
                    vectors = graph.embed_query([q.text for q in batch], embedder)
                except (Error, TypeError, ValueError) as exc:
                    raise _with_where(exc, f"embedding the texts of queries {batch[0].qid!r} to "
                                           f"{batch[-1].qid!r}") from exc
                for q, vector in zip(batch, vectors):
                    q.vector = vector
                bar.update(len(batch))
        embed_seconds = time.perf_counter() - t0
        embedded = len(missing)

    if runs is None:
        runs = default_runs(vectors=all(q.vector is not None for q in checked),
                            texts=all(q.text is not None for q in checked))
    else:
        runs = _check_runs(runs)
    if baseline is not None and baseline not in runs:
        raise InvalidArgumentError(f"baseline {baseline!r} is not a run; the runs are "
                                   f"{', '.join(map(repr, runs))}")

    n = len(checked)
    per_query: dict = {}
    with _progress(n * len(runs), "evaluating", "query", progress) as bar:
        for name, kwargs in runs.items():
            bar.set_description(f"run {name}")

            for i, q in enumerate(checked[:warmup]):
                _search(graph, name, kwargs, i, q, k)
            rows: dict = {"recall": [], "mrr": [], "ndcg": [], "latency_us": []}
            for i, q in enumerate(checked):
                t0 = time.perf_counter_ns()
                result = _search(graph, name, kwargs, i, q, k)
                elapsed = time.perf_counter_ns() - t0
                recall, rr, ndcg = _scores((hit.key for hit in result), q.grades, k, q.count_relevant,
                                           q.ideal)
                rows["recall"].append(recall)
                rows["mrr"].append(rr)
                rows["ndcg"].append(ndcg)
                rows["latency_us"].append(elapsed / 1e3)
                bar.update()
            per_query[name] = rows

    best_channel = None
    singles = [name for name, kwargs in runs.items() if _single_channel(kwargs) is not None]
    if singles:
        # max() keeps the first of equal ones
        best_channel = max(singles, key=lambda name: float(np.mean(per_query[name]["ndcg"])))
    if baseline is None:
        baseline = best_channel
    summaries = {}
    for name, kwargs in runs.items():
        rows = per_query[name]
        better = worse = None
        if baseline is not None and name != baseline:
            ours, theirs = np.array(rows["ndcg"]), np.array(per_query[baseline]["ndcg"])
            better, worse = int(np.sum(ours > theirs + _TIE)), int(np.sum(ours < theirs - _TIE))
        latency = np.array(rows["latency_us"])
        summaries[name] = RunSummary(
            name=name, params=kwargs, queries=n, recall=float(np.mean(rows["recall"])),
            mrr=float(np.mean(rows["mrr"])), ndcg=float(np.mean(rows["ndcg"])),
            p50_us=float(np.percentile(latency, 50)), p99_us=float(np.percentile(latency, 99)),
            better=better, worse=worse)
    return EvalReport(k=k, qids=[q.qid for q in checked], runs=summaries, per_query=per_query,
                      baseline=baseline, best_channel=best_channel, embedded=embedded,
                      embed_seconds=embed_seconds, unknown_relevant=_unknown_relevant(graph, checked))
