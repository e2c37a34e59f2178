"""Hybrid retrieval: dense, BM25, graph and entity channels, fused.

:meth:`vecgraph.Graph.hybrid_search` runs the channels that its input allows, each adding
evidence the others do not have, fuses their scored lists and reports each result's rank in
every channel:

* ``dense``: the nearest nodes to the query vector (HNSW seeds, no traversal).
* ``bm25``: the node texts that best match the query text (BM25, :mod:`vecgraph.text`).
* ``entity``: the nodes the query text names (keys and aliases), each scored by the
  specificity of the names that matched: a name's idf in the graph's texts, shared among the
  nodes that hold it (:func:`entity_scores`); a name that is a common word of the corpus does
  not fire (:func:`firing_names`).
* ``graph``: what walks from the named nodes and the nearest nodes reach (hop >= 1), each
  scored by the strength of the seed its path starts from (:func:`seed_strengths`): the
  nodes linked to what matches, not the matches again. With no edges it lists nothing.

Fusion (:data:`FUSIONS`): ``"convex"``, the default, a convex combination of normalised scores
(Bruch, Gai & Ingber, "An Analysis of Fusion Functions for Hybrid Retrieval", ACM TOIS 2023;
:func:`normalized_scores`, :data:`DEFAULT_WEIGHTS`), whose weights were chosen on the
development halves of three real data sets (bench/eval_hybrid.py, bench/README.md); or
``"rrf"``, weighted Reciprocal Rank Fusion (:func:`vecgraph.rrf`; Cormack, Clarke & Büttcher,
SIGIR 2009). Filters (``tenants``, ``labels``, ``since``/``until``, ``where``) and
``exclude_keys`` apply in every channel.
"""

from __future__ import annotations

import math
import numbers
import warnings
from collections.abc import Iterable
from concurrent.futures import Future, ThreadPoolExecutor
from typing import TYPE_CHECKING, Any, Callable, Optional, Sequence, Union

import numpy as np

from .arguments import (_count, _count_at_least, _exclude_keys, _flag, _float_array, _real, _search_args,
                        _threads, _where)
from .entities import entity_scores, firing_names, name_specificity
# vecgraph.hybrid's names from before entities.py held them.
from .entities import (ALIAS_SEPARATOR, ENTITY_AMBIGUITY_POWER, ENTITY_MAX_DF_SHARE, MAX_NAME_TOKENS,  # noqa: F401
                       EntityIndex, Mention, name_terms, normalize_name)
from .errors import DimensionMismatchError, EmbedderUnavailableError, InvalidArgumentError, _got
from .pools import LazyPool
from .fusion import convex_unchecked, fuse, minmax, rrf_with_ranks
from .results import Edge, HybridHit, HybridResult, Key, ScoredEdge, SearchResult, _node_columns, estimate_tokens

if TYPE_CHECKING:  # the class these functions are methods of (graph.py imports this module)
    from .graph import Graph

__all__ = ["CHANNELS", "FUSIONS", "DEFAULT_FUSION", "DEFAULT_WEIGHTS", "HybridHit", "HybridResult", "ScoredEdge",
           "EntityIndex", "Mention", "estimate_tokens", "name_specificity", "entity_scores", "hybrid_search",
           "hybrid_search_batch"]

CHANNELS = ("dense", "bm25", "graph", "entity")
_MAX_HYBRID_K = 100_000  # the largest k and depth


# ------------------------------------------------------------------------------------ search

# The second thread of a hybrid search (its BM25 channel), shared by every graph.
_POOL = LazyPool(lambda: 2, "vecgraph-hybrid")


def _forget_pool_after_fork() -> None:
    """In a forked child: the pool's threads stayed in the parent, so a job submitted to it
    would never run; the next parallel search makes a new one. (Called by the fork handler
    of vecgraph.folder.)"""
    _POOL.forget(after_fork=True)


def submit(call: Callable[..., Any], *args: Any, **kwargs: Any) -> Future:
    """``call(*args, **kwargs)`` in a thread of the hybrid searches' pool (run here, and
    returned done, while the interpreter shuts down). The call must not wait for a job of this
    pool: a BM25 channel submitted by a search it runs could find both threads taken."""
    try:
        return _POOL.get().submit(call, *args, **kwargs)
    except RuntimeError:  # the interpreter is shutting down
        done: Future = Future()
        try:
            done.set_result(call(*args, **kwargs))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller through the future
            done.set_exception(exc)
        return done


def check_channels(channels: Any, weights: Any, fusion: str = "rrf") -> tuple[tuple, dict]:
    if isinstance(channels, str) or not isinstance(channels, (list, tuple, set, frozenset)):
        raise InvalidArgumentError(f"channels must be a list of names from {CHANNELS}, got {channels!r}")
    if any(not isinstance(c, str) for c in channels):
        raise InvalidArgumentError(f"channels must be a list of str names from {CHANNELS}, got {list(channels)!r}")
    if weights is not None and not isinstance(weights, dict):
        raise InvalidArgumentError(f"weights must be a dict {{channel: weight}}, got {type(weights).__name__}")
    chosen = tuple(c for c in CHANNELS if c in set(channels))
    unknown = [c for c in channels if c not in CHANNELS]
    if unknown:
        raise InvalidArgumentError(f"unknown channel {unknown[0]!r}; channels are {', '.join(CHANNELS)}")
    if not chosen:
        raise InvalidArgumentError("channels is empty; choose from " + ", ".join(CHANNELS))
    weights = dict(weights or {})
    for name, weight in weights.items():
        if name not in CHANNELS:
            raise InvalidArgumentError(f"weights names unknown channel {name!r}; channels are {', '.join(CHANNELS)}")
        if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
            raise TypeError(f"weights[{name!r}] must be a real number >= 0, got {type(weight).__name__} {weight!r:.40}")
        try:
            finite = math.isfinite(weight)
        except OverflowError:  # an int past float64
            finite = False
        if not finite or weight < 0:
            got = (f"an int of {weight.bit_length()} bits, beyond float64" if isinstance(weight, numbers.Integral)
                   and not finite else repr(weight))
            raise InvalidArgumentError(f"weights[{name!r}] must be a finite number >= 0, got {got}")
    defaults = DEFAULT_WEIGHTS[fusion]
    return chosen, {c: float(weights.get(c, defaults[c])) for c in chosen}


def _query_terms(text: str) -> set:
    from .tokenizer import tokenize

    return set(tokenize(text))


def score_edges(graph: Any, edge_ids: np.ndarray, vector: Optional[np.ndarray], text: Optional[str],
                rrf_k: float) -> list:
    """Traversed edges with text or a vector, scored against the query (see :class:`ScoredEdge`)."""
    if len(edge_ids) == 0:
        return []
    ids = np.unique(np.asarray(edge_ids, dtype=np.uint32))
    details = graph._engine.edge_details(ids)
    if not any(d[4] or d[6] for d in details):  # no edge with text or a vector: nothing to score
        return []
    vector_scores = graph._engine.score_edges(vector, ids) if vector is not None else None
    terms = _query_terms(text) if text else set()
    from .tokenizer import tokenize

    candidates = []
    for i, (src, rel, dst, weight, edge_text, _props, has_vector) in enumerate(details):
        if not edge_text and not has_vector:
            continue
        vs = float(vector_scores[i]) if vector_scores is not None and has_vector else None
        ts = (len(terms & set(tokenize(edge_text))) / len(terms)) if terms and edge_text else None
        candidates.append((src, rel, dst, float(weight), edge_text, vs, ts))
    by_vector = [i for i in sorted(range(len(candidates)), key=lambda i: -(candidates[i][5] or 0))
                 if candidates[i][5] is not None]
    by_text = [i for i in sorted(range(len(candidates)), key=lambda i: -(candidates[i][6] or 0))
               if candidates[i][6]]
    fused = rrf_with_ranks([by_vector, by_text], k=rrf_k)
    return [ScoredEdge(*candidates[f.key][:5], f.score, candidates[f.key][5], candidates[f.key][6]) for f in fused]


#: Fusion methods of :meth:`vecgraph.Graph.hybrid_search`: ``"convex"`` (the default) and
#: ``"rrf"`` (see the module docstring).
FUSIONS = ("convex", "rrf")


DEFAULT_FUSION = "convex"


#: Channel weights when the caller gives none, per fusion. The convex weights were chosen on the
#: development halves of three data sets (bench/README.md, "Hybrid retrieval"); RRF keeps 1.0.
DEFAULT_WEIGHTS = {
    "convex": {"dense": 1.0, "bm25": 1.0, "graph": 0.25, "entity": 4.0},
    "rrf": {"dense": 1.0, "bm25": 1.0, "graph": 1.0, "entity": 1.0},
}


#: The entity channel's score s (the specificity of the names that matched) enters the convex
#: fusion half relative to the query's best entity score and half absolute, saturating: a score
#: of ENTITY_HALF_SCORE gives the absolute half 0.5 (see :func:`entity_weight`).
ENTITY_HALF_SCORE = 0.25


#: A walk's evidence halves with each hop past the first (see :func:`graph_scores`).
GRAPH_HOP_DECAY = 0.5


#: The dense channel's smallest default HNSW beam width (see :meth:`vecgraph.Graph.hybrid_search`).
HYBRID_MIN_EF = 128


def check_fusion(fusion: Any) -> str:
    if not isinstance(fusion, str):
        raise TypeError(f"fusion must be a str from {FUSIONS}, got {type(fusion).__name__}")
    if fusion not in FUSIONS:
        raise InvalidArgumentError(f"unknown fusion {fusion!r}; choose from {', '.join(FUSIONS)}")
    return fusion


GRAPH_SCORINGS = ("seed", "similarity")


def check_graph_scoring(value: Any) -> str:
    if not isinstance(value, str) or value not in GRAPH_SCORINGS:
        raise InvalidArgumentError(f"graph_scoring must be one of {GRAPH_SCORINGS}, got {value!r}")
    return value


def check_entity_keys(entity_keys: Any) -> Union[bool, list]:
    if isinstance(entity_keys, bool):
        return entity_keys
    if isinstance(entity_keys, (str, bytes)) or not isinstance(entity_keys, (list, tuple, set, frozenset)):
        raise TypeError("entity_keys must be True, False or a list of labels whose nodes' keys are names, got "
                        f"{type(entity_keys).__name__} {entity_keys!r:.40}")
    labels = list(entity_keys)
    for i, label in enumerate(labels):
        if not isinstance(label, str):
            raise TypeError(f"entity_keys[{i}] must be a label (str), got {_got(label)}")
    return labels


def _entity_channel(graph: Any, text: str, query: Optional[np.ndarray], args: tuple, conditions: Any,
                    exclude: Optional[list], entity_keys: Union[bool, list], depth: int) -> tuple:
    """(keys, scores) of the entity channel, best first: by score (:func:`entity_scores`), then
    by similarity to the query vector when there is one, then by the first mention."""
    mentions = named_mentions(graph, text, args[8], entity_keys)  # args[8]: the tenants filter (or None)
    names = sorted({m.name for m in mentions if m.holders})
    if not names:
        return [], []
    index = graph._text_index()
    counted: list = []

    def frequencies(terms: list) -> tuple:
        documents, found = index.document_frequencies(terms)
        counted.append(documents)
        return documents, found

    specificity = name_specificity(names, frequencies)
    fire = firing_names(specificity, counted[0] if counted else 0)
    candidates = holder_keys(m for m in mentions if m.name in fire)
    if not candidates:
        return [], []
    admitted, similarity = admitted_holders(graph, query, candidates, args, conditions, exclude)
    markers = {(type(key), key) for key in admitted}
    return ranked_entities(entity_scores(mentions, specificity, fire, admitted=markers), similarity, depth)


def named_mentions(graph: Any, text: str, tenants: Any, entity_keys: Union[bool, list]) -> list:
    """The :class:`vecgraph.entities.Mention` s of ``text`` in ``graph`` (holders of ``tenants``),
    with the holders that ``entity_keys`` does not count as named by their key left out."""
    mentions = graph._entity_index().mentions(text, tenants)
    if entity_keys is True or not mentions:
        return mentions
    key_only = [key for m in mentions for key, via_alias in m.holders if not via_alias]
    allowed: set = set()
    if entity_keys and key_only:  # a list of labels whose nodes' keys are names
        flags = graph._engine.admits(key_only, entity_keys, None, -(2**63), 2**63 - 1, None)
        allowed = {(type(key), key) for key, ok in zip(key_only, flags) if ok}
    return [m._replace(holders=tuple(h for h in m.holders if h[1] or (type(h[0]), h[0]) in allowed))
            for m in mentions]


def holder_keys(mentions: Any) -> list:
    """The keys holding ``mentions``' names, each once, in order of mention."""
    keys: list = []
    seen: set = set()
    for mention in mentions:
        for key, _ in mention.holders:
            if (type(key), key) not in seen:
                seen.add((type(key), key))
                keys.append(key)
    return keys


def admitted_holders(graph: Any, query: Optional[np.ndarray], candidates: list, args: tuple, conditions: Any,
                     exclude: Optional[list]) -> tuple:
    """``(the candidates that pass the filters of args and conditions and are not excluded,
    {(type, key): similarity to query})``; the similarities are empty without a query."""
    if query is not None:
        # One core call checks the filters and the exclusions and scores each candidate.
        entity_args = (len(candidates), 0, 0, max(args[3], len(candidates))) + args[4:]
        raw = graph._engine.search(query, *entity_args, conditions, candidates, exclude)
        return list(raw[0]), {(type(key), key): float(score) for key, score in zip(raw[0], raw[1])}
    flags = graph._engine.admits(candidates, args[7], args[8], args[9], args[10], conditions)
    excluded = {(type(key), key) for key in exclude} if exclude else set()
    return [key for key, ok in zip(candidates, flags) if ok and (type(key), key) not in excluded], {}


def dense_channel(graph: Any, query: np.ndarray, args: tuple, conditions: Any, exclude: Optional[list],
                  depth: int, dense_ef: int) -> tuple:
    """(keys, scores) of the dense channel: the ``depth`` nearest nodes that pass the filters."""
    raw = graph._engine.search(query, depth, max(depth, args[1]), 0, *args[3:13], dense_ef, conditions, None,
                               exclude)
    return raw[0], [float(x) for x in raw[1]]


def default_dense_ef(graph: Any, depth: int) -> int:
    """The dense channel's HNSW beam width when ``ef`` is not given (see :func:`hybrid_search`)."""
    return max(HYBRID_MIN_EF, depth, graph._hnsw["expansion_search"])


def ranked_entities(scored: dict, similarity: dict, depth: int) -> tuple:
    """(keys, scores) of the entity channel's best ``depth``: ``scored`` (from
    :func:`vecgraph.entities.entity_scores`) by score, then by ``similarity`` to the query
    ({(type, key): score}), then by the first mention, then by key."""

    def order(marker: tuple) -> tuple:
        entry = scored[marker]
        return (-entry[1], -similarity.get(marker, 0.0), entry[2], repr(entry[0]))

    ranked = sorted(scored, key=order)[:depth]
    return [scored[m][0] for m in ranked], [scored[m][1] for m in ranked]


def entity_weight(score: float, best: Optional[float] = None) -> float:
    """The entity channel's score on [0, 1]: ``0.5 * s / best + 0.5 * s / (s + ENTITY_HALF_SCORE)``
    (``best``: the query's best entity score; None: ``s``). The relative half ranks the query's
    own candidates over the whole range, as min-max does for the other channels; the absolute
    half keeps the evidence comparable across queries: a name shared by many nodes, or a
    common one, never counts as much as a rare, unique name."""
    top = score if best is None else best
    relative = score / top if top > 0 else 0.0
    return 0.5 * relative + 0.5 * score / (score + ENTITY_HALF_SCORE)


def _normalized(channel: str, values: list) -> list:
    if channel == "entity":
        best = max(values) if values else 0.0
        return [entity_weight(v, best) for v in values]
    if channel == "graph":
        return list(values)
    return minmax(values)


def normalized_scores(scores: dict) -> dict:
    """Each channel's scores on [0, 1] for the convex fusion: dense and bm25 by the min-max of
    their own list (their raw scales differ from query to query), entity by
    :func:`entity_weight` (its scores are idf sums, comparable across queries), graph as
    the walk scores them (seed strengths on [0, 1], see :func:`seed_strengths`)."""
    return {channel: _normalized(channel, values) for channel, values in scores.items()}


def seed_strengths(dense_keys: list, dense_normal: list, entity_keys: list, entity_normal: list) -> dict:
    """How strongly each seed of the graph channel matches the query, on [0, 1]: the best of
    its normalised dense and entity scores (:func:`normalized_scores`). The graph channel ranks
    the nodes a walk reaches (hop >= 1) by the strength of the seed their path starts from,
    times ``GRAPH_HOP_DECAY ** (hop - 1)``, ties by their own similarity to the query: what the
    graph knows is that they are linked to a node that matches the query (score propagation
    over a document graph: Diaz, "Regularizing ad hoc retrieval scores", CIKM 2005)."""
    strength = {(type(key), key): value for key, value in zip(dense_keys, dense_normal)}
    for key, value in zip(entity_keys, entity_normal):
        marker = (type(key), key)
        strength[marker] = max(strength.get(marker, 0.0), value)
    return strength


# A tenant or label filter inside the BM25 search (a conjunction in tantivy's query) costs tantivy
# its block-max WAND: it reads every posting of the query's terms. On the 306,312 node texts of
# bench/bench_kb.py's knowledge base (10-word questions), the 30 best chunks took 2.55-3.24 ms with
# the label filter inside and 1.09 ms without. When the filters admit at least POST_FILTER_SHARE of
# the texts, the search runs without them and the graph checks the candidates (engine.admits),
# reading at most two pages of the ranking (max_rows); when they do not hold depth admitted ones,
# or a write changed the graph meanwhile, the search runs again with the filters inside.
POST_FILTER_SHARE = 0.25


def failing(engine: Any, labels: Any, tenants: Any, conditions: Any,
            excluded: Optional[set]) -> Callable[[list], list]:
    """The ``exclude_many`` of a BM25 search: True for each key the graph's ``labels``,
    ``tenants`` and where ``conditions`` refuse (one engine call per block of candidates; a call
    per key cost ~10 µs), or that ``excluded`` holds (markers ``(type(key), key)``)."""
    check = labels is not None or tenants is not None or bool(conditions)

    def drops(keys: list) -> list:
        flags = engine.admits(keys, labels, tenants, -(2**63), 2**63 - 1, conditions) if check else None
        return [(flags is not None and not flags[i])
                or (excluded is not None and (type(key), key) in excluded) for i, key in enumerate(keys)]

    return drops


def after_search(graph: Any, text: str, depth: int, labels: Any, tenants: Any, conditions: Any,
                 excluded: Optional[set], extra: dict) -> Optional[list]:
    """The ``depth`` best BM25 rows for ``text`` admitted by ``labels``, ``tenants``, the where
    ``conditions`` and ``excluded``, found by an unfiltered search whose candidates are checked
    afterwards; None when two pages of the ranking hold fewer than ``depth`` of them, or
    when a write may have changed texts or filters while it ran (the candidates are scored by
    the index's view and checked against the graph's: the two must be of one state)."""
    from .text_pages import MaxRowsReached, first_page_rows

    engine, lock = graph._engine, graph._text_lock
    # Writes that change texts, labels, tenants or props hold _text_lock across the graph's write
    # and the index's; each write moves the LSN. No writer at the start and the same LSN at the
    # end: the index's view and the graph's checks saw one state.
    if not lock.acquire(blocking=False):
        return None
    lock.release()
    lsn = engine.last_lsn()
    drops = failing(engine, labels, tenants, conditions, excluded)
    try:  # the first page and a second one four times as large
        found = graph._bm25(text, depth, exclude_many=drops, max_rows=5 * first_page_rows(depth, True),
                            **extra)
    except MaxRowsReached:
        return None
    return found if engine.last_lsn() == lsn else None


def bm25_channel(graph: Any, text: str, depth: int, args: tuple, conditions: Any, excluded: Optional[set],
                 statistics: Optional[tuple] = None) -> tuple:
    """(keys, scores) of the BM25 channel of :func:`run`: the ``depth`` best node texts for
    ``text`` that pass the filters of ``args`` (``Graph._search_args``), ``conditions`` (where)
    and ``excluded`` (markers ``(type(key), key)``), scored with the graph's own statistics or
    with ``statistics`` = ``(N, {term: n})`` (see :meth:`vecgraph.text.TextIndex.search`)."""
    engine = graph._engine
    ts_min, ts_max = args[9], args[10]
    int64_min, int64_max = -(2**63), 2**63 - 1
    extra = {} if statistics is None else {"statistics": statistics}

    def post_filter(labels: Any, tenants: Any, ts_min: int, ts_max: int) -> bool:
        # not with a time window: a range filter inside the query costs WAND too
        if (labels is None and tenants is None) or ts_min != int64_min or ts_max != int64_max:
            return False
        return graph._text_index().admitted_share(tenants=tenants, labels=labels) >= POST_FILTER_SHARE

    def channel() -> tuple:
        only = found = None
        if conditions:
            # A where that admits few nodes is applied inside the BM25 search as the list of
            # their keys (about 5 µs a key); checking ranked candidates instead reads about
            # depth * nodes / admitted of them (about 11 µs each). The two meet near
            # sqrt(2 * depth * nodes) admitted nodes.
            limit = math.isqrt(2 * depth * max(1, len(graph)))
            only = engine.admitted_keys(args[7], args[8], ts_min, ts_max, conditions, limit)
            if only is not None and (args[7] is not None or args[8] is not None):
                # The BM25 search applies tenants and labels itself, so its candidates are their
                # nodes: when the where admits at least half of those, checking the candidates
                # reads about 2 * depth of them, cheaper than a term per admitted key (measured
                # on a tenant of 123 nodes: 0.31 ms against 1.25 ms).
                within = engine.admitted_keys(args[7], args[8], ts_min, ts_max, None, 2 * len(only))
                if within is not None:
                    only = None
        if only is not None:  # the listed keys pass the tenants, labels and time window too
            if excluded:
                only = [key for key in only if (type(key), key) not in excluded]
            found = graph._bm25(text, depth, keys=only, **extra)
        elif post_filter(args[7], args[8], ts_min, ts_max):
            found = after_search(graph, text, depth, args[7], args[8], conditions, excluded, extra)
        if found is None:  # the filters inside the search; where and exclusions on its candidates
            found = graph._bm25(text, depth, tenants=args[8], labels=args[7],
                                ts_min=None if ts_min == int64_min else ts_min,
                                ts_max=None if ts_max == int64_max else ts_max,
                                exclude_many=failing(engine, None, None, conditions, excluded)
                                if conditions or excluded else None, **extra)
        return [key for key, _ in found], [float(score) for _, score in found]

    return channel()


def run(graph: Any, *, text: Optional[str], query: Optional[np.ndarray], k: int, runnable: tuple, weights: dict,
        fusion: str, args: tuple, conditions: Any, depth: int, dense_ef: int, exclude: Optional[list],
        entity_keys: Union[bool, list], graph_seeds: bool, graph_scoring: str, rrf_k: float,
        parallel: bool) -> HybridResult:
    """The channels and the fusion of :meth:`vecgraph.Graph.hybrid_search`, its arguments
    checked (``args``: the tuple of ``Graph._search_args`` for ``depth`` results)."""
    engine = graph._engine
    excluded = {(type(key), key) for key in exclude} if exclude else None

    def bm25() -> tuple:
        return bm25_channel(graph, text, depth, args, conditions, excluded)

    future = None
    if "bm25" in runnable and parallel and len(runnable) > 1:
        try:
            future = _POOL.get().submit(bm25)
        except RuntimeError:  # the interpreter is shutting down: bm25 runs inline below
            pass
    lists: dict = {}
    scores: dict = {}
    named: list = []
    named_scores: list = []
    if text is not None and ("entity" in runnable or "graph" in runnable):
        named, named_scores = _entity_channel(graph, text, query, args, conditions, exclude, entity_keys, depth)
        if "entity" in runnable:
            lists["entity"], scores["entity"] = named, named_scores
    graph_result = None
    if "dense" in runnable or "graph" in runnable:
        # The dense channel's best nodes are also the graph channel's similarity seeds.
        dense_keys, dense_scores = dense_channel(graph, query, args, conditions, exclude, depth, dense_ef)
        if "dense" in runnable:
            lists["dense"], scores["dense"] = dense_keys, dense_scores
    normal: dict = {}  # the channels' scores on [0, 1], for the seeds' strengths and the fusion
    if "graph" in runnable:
        seeds = args[1]
        normal["dense"], normal["entity"] = _normalized("dense", dense_scores), _normalized("entity", named_scores)
        strength = seed_strengths(dense_keys, normal["dense"], named, normal["entity"])
        starts: list = []
        known: set = set()
        for key in list(named) + list(dense_keys[:seeds]):  # every node the text names, and the nearest
            marker = (type(key), key)
            if marker not in known:
                known.add(marker)
                starts.append(key)
        if starts:
            min_hop = 0 if graph_seeds else 1
            if graph_scoring == "seed":
                walk_args = (depth, 0) + args[2:11] + (GRAPH_HOP_DECAY,) + args[12:]
                weights_of_starts = [strength[(type(key), key)] for key in starts]
                raw = engine.search(query, *walk_args, conditions, starts, exclude, weights_of_starts, min_hop)
            else:  # "similarity": as search() scores what it reaches
                raw = engine.search(query, depth, 0, *args[2:], conditions, starts, exclude, None, min_hop)
            graph_result = SearchResult(raw, engine)
            lists["graph"] = graph_result.keys
            scores["graph"] = [float(x) for x in graph_result.scores]
        else:  # nothing to walk from
            lists["graph"], scores["graph"] = [], []
    if "bm25" in runnable:
        lists["bm25"], scores["bm25"] = future.result() if future is not None else bm25()
    ordered = {c: lists[c] for c in runnable}
    ordered_scores = {c: scores[c] for c in runnable}
    if fusion == "convex":
        # The lists and scores are the channels' own (hashable keys, finite floats): no checks.
        fused = convex_unchecked(list(runnable), [ordered[c] for c in runnable],
                                 [normal[c] if c in normal else _normalized(c, ordered_scores[c]) for c in runnable],
                                 [weights[c] for c in runnable], k)
    else:
        fused = fuse(ordered, ordered_scores, method=fusion, weights={c: weights[c] for c in runnable}, rrf_k=rrf_k,
                     top_n=k)
    paths: dict = {}
    edge_ids = np.zeros(0, np.uint32)
    if graph_result is not None and fused:
        # Only the fused hits' paths are read from the graph (one call for all their edges).
        positions = {(type(key), key): i for i, key in enumerate(graph_result.keys)}
        offsets, ids = graph_result._offsets, graph_result._edges
        kept = [(f.key, positions[(type(f.key), f.key)]) for f in fused if (type(f.key), f.key) in positions]
        if kept:
            edge_ids = np.concatenate([ids[offsets[i] : offsets[i + 1]] for _, i in kept])
            decoded = [Edge(*e) for e in engine.edges(edge_ids)] if len(edge_ids) else []
            at = 0
            for key, i in kept:
                length = int(offsets[i + 1] - offsets[i])
                paths[(type(key), key)] = decoded[at : at + length]
                at += length
    hits = [HybridHit(f.key, float(f.score), {c: f.ranks.get(c) for c in runnable},
                      paths.get((type(f.key), f.key), [])) for f in fused]
    edges = score_edges(graph, edge_ids, query, text, rrf_k)
    return HybridResult(hits, edges, runnable, ordered, graph, scores=ordered_scores)


# ------------------------------------------------------------------ the Graph methods
# Bound as vecgraph.Graph.hybrid_search and vecgraph.Graph.hybrid_search_batch.

def hybrid_search(
    self: Graph,
    text: Optional[str] = None,
    vector: Any = None,
    k: int = 10,
    *,
    channels: Sequence[str] = CHANNELS,
    weights: Optional[dict] = None,
    fusion: str = DEFAULT_FUSION,
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
    reranker: Optional[Callable[[str, list], Any]] = None,
    rerank_depth: Optional[int] = None,
) -> HybridResult:
    """Search by text and/or vector through several channels and fuse them.

    Channels (see :mod:`vecgraph.hybrid` for what each adds): ``dense`` (nearest node
    vectors), ``bm25`` (BM25 over node texts), ``entity`` (the nodes the text names by key
    or alias, weighted by how specific each name is), ``graph`` (what walks from the
    entity and vector seeds reach, hop >= 1: the graph's own evidence, not the seeds
    again). Each channel that its input allows runs (dense and graph need a vector, or
    ``text`` with an ``embedder``; bm25 and entity need ``text``) and returns up to
    ``depth`` keys with scores; the lists are fused by ``fusion``. The BM25 channel runs in
    a second thread beside the others when ``parallel``. Text without a vector or an embedder
    is embedded with the graph's recorded embedder (:meth:`query_embedder`); when the graph
    records none, bm25 and entity run alone, and when the recorded one cannot be loaded here,
    they run alone with a RuntimeWarning that says why (``result.channels`` lists the channels
    that ran). A ``reranker`` then reorders the fused top ``rerank_depth``.

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
            recorded embedder, see :meth:`use_embedder`; default: :meth:`query_embedder`).
        tenants, labels, where, since, until: filters, applied inside every channel (as
            in :meth:`search`: None inside a list of tenants or labels is refused, only the
            whole argument None means no filter).
        seeds, hops, rels, direction, max_visited, max_fanout: the graph channel's
            traversal (as in :meth:`search`).
        depth: how many keys each channel contributes (default max(3 k, 30), at most 100,000;
            with a reranker, max(3 rerank_depth, 30)).
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
        reranker: ``(query_text, texts) -> scores`` (a sequence of ``len(texts)`` real numbers,
            higher is more relevant), e.g. a cross-encoder
            (:class:`vecgraph.rerankers.CrossEncoderReranker`) or a ``/rerank`` endpoint
            (:class:`vecgraph.remote.HTTPReranker`); called once, on the texts of the fused
            top ``rerank_depth`` hits. Those hits are reordered by its scores (ties: fused
            order) and the best ``k`` returned, each with its reranker score as ``score`` and
            its fused rank as ``ranks["fused"]``. Needs ``text``.
        rerank_depth: how many fused hits the reranker sees (>= k; default max(k, 20)).

    Returns:
        :class:`vecgraph.results.HybridResult`: hits (key, fused score, rank per channel,
        path), each channel's ranked keys and scores, scored traversed edges, and
        :meth:`~vecgraph.results.HybridResult.to_context`.

    Raises:
        InvalidArgumentError: neither text nor vector; an unknown channel or fusion; a
            negative or non-finite weight or rrf_k; weight 0 on every channel that can run;
            bad filters (as in :meth:`search`).
        InvalidArgumentError: a reranker without text, a rerank_depth below k, a reranker that
            returns the wrong number of scores or NaN (nothing is written either way).
        TypeError: text that is not a str; a weight or rrf_k that is not a real number;
            ``parallel`` or ``graph_seeds`` that is not a bool; ``exclude_keys`` or
            ``entity_keys`` of the wrong type; an item of tenants, labels or rels that is not a
            str, None included (the message names its position).
    """
    fusion = check_fusion(fusion)
    chosen, channel_weights = check_channels(channels, weights, fusion)
    parallel = _flag(parallel, "parallel")
    graph_seeds = _flag(graph_seeds, "graph_seeds")
    graph_scoring = check_graph_scoring(graph_scoring)
    entity_keys = check_entity_keys(entity_keys)
    if text is not None and not isinstance(text, str):
        raise TypeError(f"text must be str or None, got {type(text).__name__}")
    text = text or None
    k = _count(k, "k")
    if not 1 <= k <= _MAX_HYBRID_K:
        raise InvalidArgumentError(f"k must be in [1, {_MAX_HYBRID_K:,}], got {k}")
    if reranker is not None:
        from .rerankers import check_reranker

        reranker = check_reranker(reranker)
        if text is None:
            raise InvalidArgumentError("a reranker scores texts against the query text: pass text= with reranker=")
        rerank_depth = max(k, 20) if rerank_depth is None else _count(rerank_depth, "rerank_depth")
        if not k <= rerank_depth <= _MAX_HYBRID_K:
            raise InvalidArgumentError(f"rerank_depth must be in [k, {_MAX_HYBRID_K:,}] (k = {k}), got {rerank_depth}")
    elif rerank_depth is not None:
        raise InvalidArgumentError("rerank_depth is the reranker's depth: pass reranker= with it")
    fused_k = k if reranker is None else rerank_depth  # the hits fused (the reranker sees them all)
    depth = min(max(3 * fused_k, 30), _MAX_HYBRID_K) if depth is None else _count(depth, "depth")
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
    unavailable = None
    if vector is None and text is not None and any(c in ("dense", "graph") for c in chosen):
        if embedder is None:
            embedder, unavailable = _recorded_embedder(self)
        if embedder is not None:
            vector = self.embed_query(text, embedder)
    if vector is None and text is None:
        raise InvalidArgumentError("hybrid_search needs text, a vector, or both")
    query = _float_array(vector, "vector", 1) if vector is not None else None
    args = _search_args(depth, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants,
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
    skipped = [c for c in chosen if c in ("dense", "graph") and channel_weights[c] > 0] if query is None else []
    if skipped and unavailable is not None:
        warnings.warn(
            f"hybrid_search got text without a vector, and the graph's embedder did not load, so the "
            f"{' and '.join(skipped)} channel{'s' if len(skipped) > 1 else ''} did not run (ran: "
            f"{', '.join(runnable)}): {unavailable}", RuntimeWarning, stacklevel=2)
    dense_ef = ef if ef is not None else default_dense_ef(self, depth)
    result = run(self, text=text, query=query, k=fused_k, runnable=runnable,
                 weights=channel_weights, fusion=fusion, args=args, conditions=conditions, depth=depth,
                 dense_ef=dense_ef, exclude=exclude, entity_keys=entity_keys, graph_seeds=graph_seeds,
                 graph_scoring=graph_scoring, rrf_k=rrf_k, parallel=parallel)
    return result if reranker is None else _reranked(self, result, text, reranker, k)


def _recorded_embedder(graph: Any) -> tuple:
    """``(the graph's query embedder, None)``; ``(None, why)`` when it records one that cannot be
    loaded here; ``(None, None)`` when it records none."""
    if graph.embedder is None:
        return None, None
    try:
        return graph.query_embedder(), None
    except (InvalidArgumentError, EmbedderUnavailableError, DimensionMismatchError) as e:
        return None, str(e)


def _reranked(graph: Any, result: HybridResult, text: Any, reranker: Callable, k: int) -> HybridResult:
    """``result``'s hits reordered by ``reranker``'s scores of their texts (ties: fused order),
    the best ``k`` kept, each scored by the reranker and with its fused rank as ranks["fused"]."""
    from .rerankers import rerank

    if not result.hits:
        return result
    # Texts as the graph holds them now ("" for a node deleted since the channels ran).
    texts = [node[2] or "" for node in _node_columns(graph._engine, result.keys)]
    order, scores = rerank(text, range(len(texts)), texts, reranker, len(texts))
    hits = [HybridHit(result.hits[i].key, float(score), dict(result.hits[i].ranks, fused=i + 1),
                      result.hits[i].path) for i, score in zip(order[:k], scores)]
    on_paths = {(e.src, e.rel, e.dst) for hit in hits for e in hit.path}
    edges = [e for e in result.edges if (e.src, e.rel, e.dst) in on_paths]
    return HybridResult(hits, edges, result.channels, result.lists, graph, scores=result.channel_scores)


def hybrid_search_batch(
    self: Graph,
    texts: Optional[Sequence[Optional[str]]] = None,
    vectors: Any = None,
    k: int = 10,
    *,
    exclude_keys: Optional[Sequence[Optional[Iterable[Key]]]] = None,
    threads: Optional[int] = None,
    embedder: Any = None,
    **options: Any,
) -> list[HybridResult]:
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
        embedder: embeds ``texts`` when no vectors are given (default: the graph's
            :meth:`query_embedder`, when it records one that loads).
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
    wants_vector = any(c in ("dense", "graph") for c in check_channels(options.get("channels", CHANNELS), None)[0])
    if vectors is None and texts is not None and embedder is None and wants_vector:
        embedder, _ = _recorded_embedder(self)  # None: each query runs bm25 and entity alone, and says why
    if vectors is None and texts is not None and embedder is not None and wants_vector:
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

    def one(i: int) -> HybridResult:
        return hybrid_search(self, texts[i] if texts is not None else None,
                             matrix[i] if matrix is not None else None, k,
                             exclude_keys=exclude_keys[i] if exclude_keys is not None else None,
                             parallel=False, **options)

    first = one(0)  # checks the arguments before the others run
    if count == 1:
        return [first]
    if threads == 1:
        return [first] + [one(i) for i in range(1, count)]
    with ThreadPoolExecutor(max_workers=min(threads, count - 1), thread_name_prefix="vecgraph-batch") as pool:
        return [first] + list(pool.map(one, range(1, count)))
