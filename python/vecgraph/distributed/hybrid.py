"""Hybrid search over shards: each channel's lists merged across shards by its own score, then
fused once, as :meth:`vecgraph.Graph.hybrid_search` fuses one graph's (bound as
:meth:`vecgraph.distributed.ShardedGraph.hybrid_search`).

Two rounds of one Ray call per shard:

1. Each shard the query is routed to returns its dense list (top ``depth``), the document
   frequencies of the query's terms in its BM25 index and its document count, and the entity
   names the text mentions there with the holders that pass the filters; every other shard
   returns its document count and frequencies only (unless ``statistics="routed"``). The coordinator merges the dense lists by
   score; sums the counts into the whole graph's statistics; merges the mentions and scores
   the entity channel with :func:`vecgraph.entities.name_specificity` over those statistics,
   exactly as one graph does.
2. Each shard runs BM25 scored with the whole graph's N and document frequencies (its term
   scores boosted by idf_graph / idf_shard: the distributed frequencies of Elasticsearch's
   ``dfs_query_then_fetch``), and the graph channel's walks from the seeds it owns (the nodes
   the text names and the best ``seeds`` dense hits overall), with their strengths computed
   from the merged lists. The coordinator merges both by score and fuses.

Where it equals one graph (tested, routed and fan-out, in every routing mode): the dense,
entity and graph channels and the fusion, given the same dense list (``exact=True``, or HNSW
finding the exact top ``depth`` on every shard) and walks under ``max_visited``. BM25 differs in one term: its length normalisation
divides by the shard's average text length, not the graph's (tantivy scores with its own;
equal when the shards' averages are), and a shard's writes not yet published score with the
statistics given, as its published texts do. BM25 scores within 4e-7 of each other (the float32
rounding of the boost) count as one tie and order by key, as one graph orders equal scores.
"""

from __future__ import annotations

import warnings
from typing import Any, Optional, Sequence, Union

import numpy as np

from ..entities import Mention, entity_scores, firing_names, name_specificity
from ..fusion import convex_unchecked, fuse
from ..hybrid import (
    CHANNELS,
    DEFAULT_FUSION,
    _normalized,
    check_channels,
    check_entity_keys,
    check_fusion,
    check_graph_scoring,
    ranked_entities,
    seed_strengths,
)
from ..results import HybridHit, HybridResult
from ..text_pages import _key_order
from ..tokenizer import tokenize

Key = Union[str, int]


class ShardedHybridResult(HybridResult):
    """A :class:`vecgraph.results.HybridResult` fused from shards, plus ``partial`` and
    ``missing_shards`` (see :meth:`vecgraph.distributed.ShardedGraph.search`). Its ``edges``
    list is empty: the edges a walk traversed stay in the hits' paths."""

    partial: bool
    missing_shards: list


def _merge(lists: dict, depth: int, by_key: bool = False) -> tuple:
    """{shard: (keys, scores)} -> (keys, scores, owners) of the best ``depth`` by score (ties:
    by key as BM25 orders them when ``by_key``, else by shard, then the shard's order)."""
    rows = sorted(
        (-float(score), _key_order(key) if by_key else (), shard, i, key)
        for shard, (keys, scores) in lists.items()
        for i, (key, score) in enumerate(zip(keys, scores))
    )
    if by_key:
        rows = _ties_by_key(rows)
    rows = rows[:depth]
    return [r[4] for r in rows], [-r[0] for r in rows], [r[2] for r in rows]


#: BM25 scores this close (relative) are one score: a shard's boosted term score (boost * the
#: shard's idf weight) rounds in float32 where one graph's (the graph's idf weight) does not,
#: about one ulp (6e-8) apart.
_TIE_RELATIVE = 4e-7


def _ties_by_key(rows: list) -> list:
    """``rows`` sorted by score, with each run of scores within :data:`_TIE_RELATIVE` of the
    run's first made one tie (the first's score) and ordered by key, as one graph orders equal
    BM25 scores."""
    out: list = []
    start = 0
    while start < len(rows):
        top = -rows[start][0]
        end = start + 1
        while end < len(rows) and top - (-rows[end][0]) <= abs(top) * _TIE_RELATIVE:
            end += 1
        out.extend((-top,) + row[1:] for row in sorted(rows[start:end], key=lambda row: row[1]))
        start = end
    return out


def hybrid_search(
    self: Any,
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
    exact: bool = False,
    exclude_keys: Optional[Sequence[Key]] = None,
    entity_keys: Union[bool, Sequence[str]] = True,
    graph_seeds: bool = False,
    graph_scoring: str = "seed",
    domains: Optional[Sequence[str]] = None,
    allow_partial: bool = False,
    timeout_s: Optional[float] = None,
    statistics: str = "graph",
) -> ShardedHybridResult:
    """:meth:`vecgraph.Graph.hybrid_search` over the shards (see :mod:`vecgraph.distributed.hybrid`
    for how, and where it equals one graph's).

    Arguments as :meth:`vecgraph.Graph.hybrid_search`, plus ``exact`` (the dense channel scans
    instead of searching HNSW), ``domains``, ``allow_partial`` and ``timeout_s`` (as
    :meth:`search`), and ``statistics``: ``"graph"`` (default) scores BM25 and entity names
    with the whole graph's document counts, so a query routed to one shard also asks every
    other shard for its counts of the query's terms (one light call each); ``"routed"`` uses
    the routed shards' counts only, and calls no other shard (per-tenant idf; a routed query
    then equals one graph holding those shards' nodes). Text without a vector is embedded here, once, with ``embedder`` or the
    recorded one (:meth:`~vecgraph.distributed.ShardedGraph.query_embedder`); with neither,
    bm25 and entity run alone. No reranker: rerank the result's texts
    (``result.to_dicts()``) with :func:`vecgraph.rerankers.rerank`.

    Returns:
        :class:`ShardedHybridResult`.

    Raises:
        InvalidArgumentError: as :meth:`vecgraph.Graph.hybrid_search`.
        ShardUnavailableError: a shard did not answer in time (without ``allow_partial``).
    """
    from ..arguments import _count, _exclude_keys
    from .columns import checked_search_args
    from ..errors import InvalidArgumentError

    fusion = check_fusion(fusion)
    chosen, channel_weights = check_channels(channels, weights, fusion)
    graph_scoring = check_graph_scoring(graph_scoring)
    entity_keys = check_entity_keys(entity_keys)
    if text is not None and not isinstance(text, str):
        raise TypeError(f"text must be str or None, got {type(text).__name__}")
    text = text or None
    k = _count(k, "k")
    if not 1 <= k <= 100_000:
        raise InvalidArgumentError(f"k must be in [1, 100,000], got {k}")
    depth = min(max(3 * k, 30), 100_000) if depth is None else _count(depth, "depth")
    if not 1 <= depth <= 100_000:
        raise InvalidArgumentError(f"depth must be in [1, 100,000], got {depth}")
    # checked here, once, before any shard is called
    checked_search_args(depth, seeds, hops, max_visited, max_fanout, direction, rels, labels, tenants, None, None,
                        1.0, exact, ef, since, until)
    exclude_keys = _exclude_keys(exclude_keys)
    query = None
    if (
        vector is None
        and text is not None
        and any(c in ("dense", "graph") and channel_weights[c] > 0 for c in chosen)
    ):
        if embedder is None and self.embedder is not None:
            from ..errors import DimensionMismatchError, EmbedderUnavailableError

            try:
                embedder = self.query_embedder()
            except (InvalidArgumentError, EmbedderUnavailableError, DimensionMismatchError) as exc:
                warnings.warn(
                    f"hybrid_search got text without a vector, and the graph's embedder did not load, so "
                    f"the dense and graph channels did not run: {exc}",
                    RuntimeWarning,
                    stacklevel=2,
                )
        if embedder is not None:
            vector = self._text_vector(text, embedder)
    if vector is not None:
        query = np.asarray(vector, np.float32)
        if query.shape != (self.dim,):
            from ..errors import DimensionMismatchError

            raise DimensionMismatchError(f"vector must have shape ({self.dim},), got {query.shape}")
    if query is None and text is None:
        raise InvalidArgumentError("hybrid_search needs text, a vector, or both")
    runnable = tuple(
        c
        for c in chosen
        if channel_weights[c] > 0
        and (
            (c in ("dense", "graph") and query is not None) or (c in ("bm25", "entity") and text is not None)
        )
    )
    if not runnable:
        raise InvalidArgumentError(
            f"none of the channels {list(chosen)} can run with a weight > 0: dense and graph "
            "need a vector (or text with an embedder), bm25 and entity need text"
        )
    p = {
        "depth": depth,
        "seeds": seeds,
        "hops": hops,
        "max_visited": max_visited,
        "max_fanout": max_fanout,
        "direction": direction,
        "rels": rels,
        "labels": labels,
        "tenants": tenants,
        "where": where,
        "since": since,
        "until": until,
        "ef": ef,
        "exact": exact,
        "exclude_keys": exclude_keys,
        "entity_keys": entity_keys,
        "runnable": runnable,
        "graph_seeds": bool(graph_seeds),
        "graph_scoring": graph_scoring,
    }
    if statistics not in ("graph", "routed"):
        raise InvalidArgumentError(f'statistics must be "graph" or "routed", got {statistics!r}')
    targets = self._targets(tenants, labels, domains)
    opts = {"allow_partial": allow_partial, "timeout_s": timeout_s}
    others = (
        [s for s in self._all() if s not in targets] if statistics == "graph" and text is not None else []
    )
    terms = list(dict.fromkeys(tokenize(text))) if text is not None else []
    methods = {s: "hybrid_first" for s in targets}
    methods.update({s: "text_statistics" for s in others})
    calls = {s: (text, query, p) for s in targets}
    calls.update({s: (terms,) for s in others})
    answered, missing = self._call(sorted(methods), methods, calls, **opts)
    first = {s: answered[s] for s in targets if s in answered}
    # Every shard's text statistics (the routed ones' and, by default, the others'): {shard: [N, {term: n}]}
    sources = {s: [first[s]["documents"], first[s]["frequencies"]] for s in first}
    sources.update({s: list(answered[s]) for s in others if s in answered})
    targets = sorted(first)
    lists: dict = {}
    scores: dict = {}
    nodes: dict = {}
    owner: dict = {}
    for shard in targets:
        nodes.update(first[shard]["nodes"])
    dense_keys, dense_scores, dense_owner = _merge({s: first[s]["dense"] for s in targets}, depth)
    for key, shard in zip(dense_keys, dense_owner):
        owner[(type(key), key)] = shard
    if "dense" in runnable:
        lists["dense"], scores["dense"] = dense_keys, dense_scores
    # The whole graph's statistics: N and each term's document frequency, summed over the shards.
    documents = sum(source[0] for source in sources.values())
    frequencies: dict = {}
    for source in sources.values():
        for term, n in source[1].items():
            frequencies[term] = frequencies.get(term, 0) + n
    named, named_scores = _entity_lists(
        self, first, targets, sources, documents, frequencies, depth, owner, opts
    )
    if "entity" in runnable:
        lists["entity"], scores["entity"] = named, named_scores
    normal: dict = {}
    starts: dict = {}
    if "graph" in runnable:
        normal["dense"], normal["entity"] = (
            _normalized("dense", dense_scores),
            _normalized("entity", named_scores),
        )
        strength = seed_strengths(dense_keys, normal["dense"], named, normal["entity"])
        known: set = set()
        for key in list(named) + list(dense_keys[:seeds]):
            marker = (type(key), key)
            if marker not in known:
                known.add(marker)
                starts.setdefault(owner[marker], ([], []))
                starts[owner[marker]][0].append(key)
                starts[owner[marker]][1].append(strength[marker])
    second: dict = {}
    if "bm25" in runnable or starts:
        corpus = (documents, {t: frequencies.get(t, 0) for t in terms}) if text is not None else None
        round_two = sorted(set(targets) if "bm25" in runnable else set(starts))
        second, more = self._call(
            round_two,
            "hybrid_second",
            {s: (text, query, p, corpus, *starts.get(s, ([], []))) for s in round_two},
            **opts,
        )
        missing = sorted(set(missing) | set(more))
    paths: dict = {}
    for shard, out in second.items():
        nodes.update(out["nodes"])
        for key, path in zip(out["graph"][0], out["graph"][2]):
            paths[(type(key), key)] = path
    if "bm25" in runnable:
        lists["bm25"], scores["bm25"], _ = _merge({s: second[s]["bm25"] for s in second}, depth, by_key=True)
    if "graph" in runnable:
        lists["graph"], scores["graph"], _ = _merge({s: second[s]["graph"][:2] for s in second}, depth)
        listed = {(type(key), key) for key in lists["graph"]}  # paths of the merged list only, as one graph's
        paths = {marker: path for marker, path in paths.items() if marker in listed}
    ordered = {c: lists[c] for c in runnable}
    ordered_scores = {c: scores[c] for c in runnable}
    if fusion == "convex":
        fused = convex_unchecked(
            list(runnable),
            [ordered[c] for c in runnable],
            [normal[c] if c in normal else _normalized(c, ordered_scores[c]) for c in runnable],
            [channel_weights[c] for c in runnable],
            k,
        )
    else:
        fused = fuse(
            ordered,
            ordered_scores,
            method=fusion,
            weights={c: channel_weights[c] for c in runnable},
            rrf_k=rrf_k,
            top_n=k,
        )
    hits = [
        HybridHit(
            f.key, float(f.score), {c: f.ranks.get(c) for c in runnable}, paths.get((type(f.key), f.key), [])
        )
        for f in fused
    ]
    frozen = ({(type(h.key), h.key): nodes.get((type(h.key), h.key)) for h in hits}, [])
    result = ShardedHybridResult(hits, [], runnable, ordered, None, frozen, ordered_scores)
    result.partial, result.missing_shards = bool(missing), list(missing)
    return result


def _entity_lists(
    self: Any,
    first: dict,
    targets: list,
    sources: dict,
    documents: int,
    frequencies: dict,
    depth: int,
    owner: dict,
    opts: dict,
) -> tuple:
    """(keys, scores) of the entity channel from the shards' mentions, scored with the whole
    graph's statistics (one more round only for name terms a shard was not asked about)."""
    merged: dict = {}
    for shard in targets:
        for name, start, holders in first[shard]["mentions"]:
            entry = merged.setdefault((name, start), {})
            for key, via_alias in holders:
                entry[(type(key), key)] = (key, via_alias)
    if not merged:
        return [], []
    mentions = sorted(
        (
            Mention(name, start, tuple(sorted(h.values(), key=lambda h: (type(h[0]).__name__, repr(h[0])))))
            for (name, start), h in merged.items()
        ),
        key=lambda m: (-len(m.name), m.start, m.name),
    )
    names = sorted({m.name for m in mentions if m.holders})
    admitted: set = set()
    similarity: dict = {}
    for shard in targets:
        for key in first[shard]["admitted"]:
            admitted.add((type(key), key))
            owner.setdefault((type(key), key), shard)
        similarity.update(first[shard]["similarity"])
    counted: list = []

    def document_frequencies(terms: list) -> tuple:
        unasked = {s: [t for t in terms if t not in source[1]] for s, source in sources.items()}
        unasked = {s: ts for s, ts in unasked.items() if ts}
        if unasked:
            more, _ = self._call(
                sorted(unasked), "text_statistics", {s: (ts,) for s, ts in unasked.items()}, **opts
            )
            for s, (_, found) in more.items():
                sources[s][1].update(found)
                for term, n in found.items():
                    frequencies[term] = frequencies.get(term, 0) + n
        counted.append(documents)
        return documents, [frequencies.get(t, 0) for t in terms]

    specificity = name_specificity(names, document_frequencies)
    fire = firing_names(specificity, counted[0] if counted else 0)
    return ranked_entities(entity_scores(mentions, specificity, fire, admitted=admitted), similarity, depth)
