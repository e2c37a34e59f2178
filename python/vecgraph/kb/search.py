"""The knowledge base's retrieval modes, bound as methods of :class:`vecgraph.kb.KnowledgeBase`:
:func:`search` (chunks), :func:`local_search`, :func:`global_search` and :func:`tree_search`."""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import wait
from typing import TYPE_CHECKING, Any

import numpy as np

from ..arguments import _count_at_least
from ..errors import InvalidArgumentError, _got
from ..hybrid import submit
from .hooks import call_hook
from .results import ChunkHit, CommunityHit, EntityHit, KBResult, RelationHit, SummaryHit

if TYPE_CHECKING:
    from .store import KnowledgeBase

__all__ = ["MODES", "TREE_STRATEGIES", "global_search", "local_search", "search", "tree_search"]

MODES = ("dense", "bm25", "hybrid")
TREE_STRATEGIES = ("collapsed", "top_down", "bottom_up")
CHUNK, ENTITY, COMMUNITY, SUMMARY = "chunk", "entity", "community", "summary"
MENTIONS, MEMBER_OF, SUMMARIZES = "mentions", "member_of", "summarizes"
STRUCTURE = ("part_of", "next", "mentions", "member_of", "summarizes")
# The fusion weights of local search's entity ranking (convex fusion, see vecgraph.hybrid): the
# question's vector, the names it holds and walks over typed relations (hops 1-2), chosen on the
# dev half of bench/eval_kb.py with 256-token chunks when one fused list held chunks and
# entities (recall@10 / nDCG@10 0.650 / 0.551 against 0.630 / 0.537 with the graph's defaults,
# graph 0.25 and entity 4).
MAX_MENTIONS_READ = 256  # chunks read per named entity for the chunks that mention it
LOCAL_WEIGHTS = {"dense": 1.0, "bm25": 1.0, "graph": 0.1, "entity": 1.0}
MAX_RESULTS = 100_000  # the most results one hybrid search returns (vecgraph.hybrid)


def _question(question: Any) -> str:
    if not isinstance(question, str):
        raise TypeError(f"question must be a str, got {_got(question)}")
    if not question.strip():
        raise InvalidArgumentError("question must hold text, got an empty str")
    return question


def _filters(kb: KnowledgeBase, tenant: str | None, history: bool) -> dict:
    """The search filters: the tenant, and ``status == "current"`` unless ``history`` or no
    document of the knowledge base was ever anything but current (a filter that admits every
    node still costs: BM25 over 134,776 chunks 3.5 ms with it against 3.3 ms without)."""
    if tenant is not None and not isinstance(tenant, str):
        raise TypeError(f"tenant must be a str or None, got {_got(tenant)}")
    if not isinstance(history, bool):
        raise TypeError(f"history must be a bool, got {_got(history)}")
    current = None if history or not kb.has_history() else {"status": "current"}
    return {"tenants": None if tenant is None else [tenant], "where": current}


def chunk_hits(kb: KnowledgeBase, keys: Sequence, scores: Sequence[float]) -> list[ChunkHit]:
    """:class:`ChunkHit` s of chunk ``keys`` (read from the graph)."""
    out = []
    for key, score in zip(keys, scores):
        node = kb.graph.get_node(key, vector=False)
        props = node["props"] or {}
        start = int(props.get("body_start", 0))
        out.append(
            ChunkHit(
                key,
                float(score),
                node["text"][start:],
                props.get("prefix", ""),
                props.get("source", ""),
                props.get("version", ""),
                props.get("date", ""),
                props.get("status", ""),
                props.get("title", ""),
                tuple(props.get("heading_path", ())),
            )
        )
    return out


def search(
    kb: KnowledgeBase,
    question: str,
    k: int = 10,
    *,
    mode: str = "hybrid",
    tenant: str | None = None,
    history: bool = False,
    depth: int | None = None,
) -> KBResult:
    """The ``k`` chunks best for ``question``: ``mode`` "dense" (nearest chunk vectors),
    "bm25" (BM25 over chunk texts with their prefixes) or "hybrid" (both, fused as
    :meth:`vecgraph.Graph.hybrid_search` fuses them).

    Args:
        question: the question (non-empty str).
        k: how many chunks (int >= 1).
        mode: "dense", "bm25" or "hybrid".
        tenant: only this tenant's chunks (None: every tenant).
        history: also chunks of documents whose status is not "current".
        depth: how deep each channel of "hybrid" looks (default: the graph's default).

    Raises:
        InvalidArgumentError: an empty question, k < 1, an unknown mode.
    """
    question, k = _question(question), _count_at_least(k, "k", 1)
    if mode not in MODES:
        raise InvalidArgumentError(f"mode must be one of {MODES}, got {mode!r}")
    filters = _filters(kb, tenant, history)
    g = kb.graph
    if mode == "dense":
        vector = kb.embed([question])[0]
        r = g.search(vector, k, seeds=k, hops=0, labels=[CHUNK], **filters)
        return KBResult(question, mode, chunk_hits(kb, r.keys, r.scores))
    channels = ("bm25",) if mode == "bm25" else ("dense", "bm25")
    vector = None if mode == "bm25" else kb.embed([question])[0]
    r = g.hybrid_search(
        question, vector=vector, k=k, channels=channels, labels=[CHUNK], depth=depth, **filters
    )
    return KBResult(question, mode, chunk_hits(kb, r.keys, r.scores))


def _entity_hits(kb: KnowledgeBase, keys: Sequence, scores: Sequence[float]) -> list[EntityHit]:
    out = []
    for key, score in zip(keys, scores):
        props = kb.graph.get_node(key, vector=False)["props"] or {}
        out.append(
            EntityHit(
                key,
                props.get("name", str(key)),
                props.get("type", ""),
                props.get("description", ""),
                float(score),
            )
        )
    return out


def local_search(
    kb: KnowledgeBase,
    question: str,
    k: int = 10,
    *,
    entities: int = 10,
    hops: int = 2,
    communities: int = 3,
    mention_chunks: int = 2,
    tenant: str | None = None,
    history: bool = False,
) -> KBResult:
    """Local search: the chunks that answer the question, the entities around it, their
    relations and their communities, as one context.

    1. Chunks: :meth:`vecgraph.Graph.hybrid_search` over the chunks (dense and BM25, fused).
    2. Entities: one fused call over entities and chunks, the entity channel (the entities the
       question names, by name or alias) and the graph channel (walks of up to ``hops`` over
       ``mentions`` and typed relations from those entities and from the nodes nearest the
       question's vector, scored by similarity to it), with :data:`LOCAL_WEIGHTS`; then, if
       fewer than ``entities``, the entities the chunks of step 1 mention.
    3. The best chunks that walk reached from a named entity (chunks that mention it) and step
       1 did not return take the last places of the chunk list: at most ``mention_chunks``, and
       at most ``k // 5``.
    4. The typed relations at the returned entities (both ends named, with descriptions) and
       the ``communities`` whose returned members' fused scores sum highest (with their
       summaries).

    Args:
        question: the question (non-empty str).
        k: chunks to return (int >= 1).
        entities: entities to return (int >= 0).
        hops: walk depth (0-3).
        communities: communities to return (int >= 0; their summaries, when built).
        mention_chunks: named entities whose best chunk is added (int >= 0; on the dev half of
            bench/eval_kb.py recall@10 and nDCG@10 are the same for 0 to 3).
        tenant, history: as for :func:`search`.

    Returns:
        :class:`KBResult` with ``chunks``, ``entities``, ``relations`` and ``communities``.

    Raises:
        InvalidArgumentError: an empty question, bad counts (``k + entities + mention_chunks``
            at most 100,000).

    Source: the local search of Edge et al., "From Local to Global: A Graph RAG Approach to
    Query-Focused Summarization" (2024), over vecgraph's fused graph-guided search.
    """
    question, k = _question(question), _count_at_least(k, "k", 1)
    entities = _count_at_least(entities, "entities", 0)
    communities = _count_at_least(communities, "communities", 0)
    hops = _count_at_least(hops, "hops", 0)
    mention_chunks = _count_at_least(mention_chunks, "mention_chunks", 0)
    if k + entities + mention_chunks > MAX_RESULTS:
        raise InvalidArgumentError(
            f"k + entities + mention_chunks must be <= {MAX_RESULTS:,} (the walk's results), got "
            f"{k:,} + {entities:,} + {mention_chunks:,}"
        )
    if hops > 3:
        raise InvalidArgumentError(f"hops must be <= 3, got {hops}")
    filters = _filters(kb, tenant, history)
    g = kb.graph
    vector = kb.embed([question])[0]
    relation_types = list(kb.config().get("relation_types", []))
    walk = None
    if entities or mention_chunks:
        # One walk: from the entities the question names (entity channel) and the nodes nearest
        # its vector, over mentions and typed relations (graph channel, scored by similarity to
        # the question): the entities around the question, and the chunks that mention the named
        # ones. Each node expands at most max_fanout edges, however many chunks mention it. It
        # runs in a second thread while the chunks are found (the engine and tantivy release the
        # GIL).
        walk = submit(
            g.hybrid_search,
            question,
            vector=vector,
            k=entities + mention_chunks + k,
            depth=max(50, 4 * k),
            channels=("entity", "graph"),
            labels=[CHUNK, ENTITY],
            hops=hops,
            rels=[MENTIONS] + relation_types,
            weights=LOCAL_WEIGHTS,
            graph_scoring="similarity",
            **filters,
        )
    # the chunks: the question's words and vector over the chunks alone (entities in the same
    # fused list take its places and skew its normalisation: 0.742 against 0.773 recall@10 on the
    # dev half of bench/eval_kb.py)
    try:
        r = g.hybrid_search(
            question, vector=vector, k=k, channels=("dense", "bm25"), labels=[CHUNK], **filters
        )
    except BaseException:
        if walk is not None:
            wait([walk])  # no walk left running after the call returns
        raise
    e = walk.result() if walk is not None else None
    chunk_keys, chunk_scores = list(r.keys), [float(s) for s in r.scores]
    entity_keys: list = []
    entity_scores: list = []
    if e is not None:
        extra: list = []
        named = {hit.key for hit in e if hit.ranks.get("entity") is not None}
        places = min(mention_chunks, k // 5)
        for hit in e:
            if isinstance(hit.key, str) and hit.key.startswith("entity:"):
                if len(entity_keys) < entities:
                    entity_keys.append(hit.key), entity_scores.append(float(hit.score))
            elif (
                hit.key not in chunk_keys
                and len(extra) < places
                and hit.path
                and (hit.path[0].src in named or hit.path[0].dst in named)
            ):
                extra.append(hit.key)  # a chunk that mentions an entity the question names
        if len(entity_keys) < entities:  # the entities the best chunks mention, by those chunks' scores
            votes_of: dict = {}
            for key, score in zip(chunk_keys, chunk_scores):
                for edge in g.neighbors(key, rels=[MENTIONS]):
                    votes_of[edge.dst] = votes_of.get(edge.dst, 0.0) + max(score, 0.0)
            for key in sorted(votes_of, key=lambda x: -votes_of[x]):
                if len(entity_keys) >= entities:
                    break
                if key not in entity_keys:
                    entity_keys.append(key), entity_scores.append(0.0)
        if extra:
            cut = max(0, k - len(extra))
            chunk_keys, chunk_scores = chunk_keys[:cut] + extra, chunk_scores[:cut] + [0.0] * len(extra)
    result = KBResult(
        question,
        "local",
        chunk_hits(kb, chunk_keys, chunk_scores),
        _entity_hits(kb, entity_keys, entity_scores),
    )
    names = {hit.key: hit.name for hit in result.entities}
    votes: dict = {}
    seen: set = set()
    weight_of = dict(zip(entity_keys, entity_scores))
    for key in entity_keys:
        for edge in g.neighbors(key, rels=[MEMBER_OF]):
            votes[edge.dst] = votes.get(edge.dst, 0.0) + max(weight_of[key], 1e-6)
        if not relation_types:
            continue
        for direction in ("out", "in"):  # the typed relations at the returned entities, each once
            for edge in g.neighbors(key, rels=relation_types, direction=direction):
                if (edge.src, edge.rel, edge.dst) in seen:
                    continue
                seen.add((edge.src, edge.rel, edge.dst))
                result.relations.append(
                    RelationHit(
                        _name(g, names, edge.src),
                        _name(g, names, edge.dst),
                        edge.rel,
                        _edge_text(g, edge),
                        float(edge.weight),
                    )
                )
    ranked = sorted(votes, key=lambda c: (-votes[c], str(c)))[:communities]
    result.communities.extend(_community_hits(kb, ranked, [float(votes[c]) for c in ranked]))
    return result


def _name(g: Any, names: dict, key: Any) -> str:
    if key not in names:
        names[key] = (g.get_node(key, vector=False)["props"] or {}).get("name", str(key))
    return names[key]


def _edge_text(g: Any, edge: Any) -> str:
    """The description of a typed relation (kept in its source entity's props)."""
    relations = (g.get_node(edge.src, vector=False)["props"] or {}).get("relations") or {}
    return relations.get(f"{edge.rel} {edge.dst}", "")


def _community_hits(kb: KnowledgeBase, keys: Sequence, scores: Sequence[float]) -> list[CommunityHit]:
    out = []
    for key, score in zip(keys, scores):
        node = kb.graph.get_node(key, vector=False)
        props = node["props"] or {}
        out.append(
            CommunityHit(
                key,
                int(props.get("level", 0)),
                props.get("title", ""),
                node["text"],
                float(score),
                int(props.get("size", 0)),
            )
        )
    return out


def global_search(
    kb: KnowledgeBase,
    question: str,
    level: int = 0,
    k: int = 5,
    *,
    map: Callable | None = None,
    tenant: str | None = None,
) -> KBResult:
    """Global search: the ``k`` community summaries of ``level`` best for ``question`` (dense
    and BM25 over the summaries, fused), as context. With ``map`` (a ``(question, summary) ->
    (answer, score 0-100)`` hook, e.g. :class:`vecgraph.kb.llm_hooks.LLMMap`) each of them is
    mapped, reranked by its score, and those scored 0 are dropped, as Microsoft GraphRAG's
    map step does (Edge et al., 2024).

    Args:
        question: the question (non-empty str).
        level: the community level (0: the coarsest; see :meth:`KnowledgeBase.build_communities`).
        k: summaries to return (int >= 1).
        map: the map hook, or None.
        tenant: only this tenant's communities.

    Raises:
        InvalidArgumentError: an empty question, k < 1, level < 0, or no communities built
            (run :meth:`KnowledgeBase.build_communities`).
        HookError: the map hook raised or returned something else than ``(str, number)``.
    """
    question, k, level = _question(question), _count_at_least(k, "k", 1), _count_at_least(level, "level", 0)
    if map is not None and not callable(map):
        raise TypeError(f"map must be callable, got {_got(map)}")
    filters = _filters(kb, tenant, True)
    g = kb.graph
    r = g.hybrid_search(
        question,
        vector=kb.embed([question])[0],
        k=k,
        channels=("dense", "bm25"),
        labels=[COMMUNITY],
        where={"level": level},
        tenants=filters["tenants"],
    )
    keys, scores = r.keys, [float(s) for s in r.scores]
    if not keys:
        levels = int(kb.config().get("community_levels", 0))
        if not g.keys(labels=[COMMUNITY]):
            raise InvalidArgumentError("the knowledge base has no communities: run build_communities() first")
        if level >= levels:
            raise InvalidArgumentError(
                f"level must be one of the community levels 0-{levels - 1}, got {level}"
            )
    kb._warn_stale("communities")
    hits = _community_hits(kb, keys, scores)
    if map is not None:
        mapped = []
        for hit in hits:
            value = call_hook(map, "map", question, hit.summary)
            if (
                not isinstance(value, tuple)
                or len(value) != 2
                or not isinstance(value[0], str)
                or isinstance(value[1], bool)
                or not isinstance(value[1], (int, float))
                or not 0 <= value[1] <= 100
            ):
                from .hooks import HookError

                raise HookError(
                    f"the map hook must return (answer: str, score: a number in 0-100), got {_got(value)}"
                )
            if value[1] > 0:
                mapped.append(
                    CommunityHit(
                        hit.key, hit.level, hit.title, hit.summary, float(value[1]), hit.size, value[0]
                    )
                )
        hits = sorted(mapped, key=lambda h: -h.score)
    return KBResult(question, "global", communities=hits)


def _scores(kb: KnowledgeBase, keys: list, vector: np.ndarray) -> np.ndarray:
    if not keys:
        return np.zeros(0, np.float32)
    codes, scales = kb.graph.quantized(keys)
    return (codes.astype(np.float32) @ vector) * scales


def tree_search(
    kb: KnowledgeBase,
    question: str,
    k: int = 10,
    *,
    strategy: str = "collapsed",
    branch: int = 3,
    climb_below: float = 0.5,
    tenant: str | None = None,
    history: bool = False,
) -> KBResult:
    """RAPTOR retrieval (Sarthi et al., "RAPTOR: Recursive Abstractive Processing for
    Tree-Organized Retrieval", ICLR 2024) over the tree :meth:`KnowledgeBase.build_tree` made.

    Strategies:
        - "collapsed" (the default, the paper's best): chunks and summaries of every level
          in one search; the ``k`` nearest to the question's vector, whatever their level.
        - "top_down": the ``branch`` nearest nodes of the top level, then the ``branch``
          nearest of their children, down to the chunks; returns the chunks reached (best
          first) and the summaries passed.
        - "bottom_up": the ``k`` nearest chunks; when the best scores below ``climb_below``
          (cosine), also the summaries above the top chunks, each scored against the question.

    Raises:
        InvalidArgumentError: an empty question, k < 1, an unknown strategy, or no tree built
            for "top_down".
    """
    question, k = _question(question), _count_at_least(k, "k", 1)
    branch = _count_at_least(branch, "branch", 1)
    if strategy not in TREE_STRATEGIES:
        raise InvalidArgumentError(f"strategy must be one of {TREE_STRATEGIES}, got {strategy!r}")
    if isinstance(climb_below, bool) or not isinstance(climb_below, (int, float)) or math.isnan(climb_below):
        raise TypeError(f"climb_below must be a number (a cosine), got {_got(climb_below)}")
    kb._warn_stale("tree")
    filters = _filters(kb, tenant, history)
    g = kb.graph
    vector = kb.embed([question])[0]
    result = KBResult(question, "tree")
    if strategy == "collapsed":
        where = filters["where"]
        r = g.search(
            vector, k, seeds=k, hops=0, labels=[CHUNK, SUMMARY], tenants=filters["tenants"], where=where
        )
        chunks = [(key, s) for key, s in zip(r.keys, r.scores) if not str(key).startswith("summary:")]
        summaries = [(key, s) for key, s in zip(r.keys, r.scores) if str(key).startswith("summary:")]
        result.chunks = chunk_hits(kb, [c[0] for c in chunks], [c[1] for c in chunks])
        result.summaries = _summary_hits(kb, [s[0] for s in summaries], [s[1] for s in summaries])
        return result
    if strategy == "bottom_up":
        r = g.search(vector, k, seeds=k, hops=0, labels=[CHUNK], **filters)
        result.chunks = chunk_hits(kb, r.keys, r.scores)
        if len(r.keys) and float(r.scores[0]) < climb_below:
            parents: list = []
            for key in r.keys[:branch]:
                for edge in g.neighbors(key, rels=[SUMMARIZES], direction="in"):
                    if edge.src not in parents:
                        parents.append(edge.src)
            scores = _scores(kb, parents, vector)
            order = np.argsort(-scores, kind="stable")[:branch]
            result.summaries = _summary_hits(kb, [parents[i] for i in order], [scores[i] for i in order])
        return result
    top = kb.tree_levels(tenant=tenant)
    if top == 0:
        whose = "the knowledge base has" if tenant is None else f"tenant {tenant!r} has"
        raise InvalidArgumentError(f"{whose} no RAPTOR tree: run build_tree() first")
    frontier = g.keys(labels=[SUMMARY], where={"level": top}, tenants=filters["tenants"])
    passed: list = []
    while frontier:
        scores = _scores(kb, frontier, vector)
        order = np.argsort(-scores, kind="stable")
        if not str(frontier[0]).startswith("summary:"):  # the chunks: the answer
            keep: list = []  # the best k current ones (every chunk is, while no status filter is needed)
            for i in order:
                if filters["where"] is None or _current(g, frontier[i], history):
                    keep.append(i)
                    if len(keep) == k:
                        break
            result.chunks = chunk_hits(kb, [frontier[i] for i in keep], [float(scores[i]) for i in keep])
            break
        chosen = [frontier[i] for i in order[:branch]]
        passed.extend((key, float(scores[i])) for key, i in zip(chosen, order[:branch]))
        children: list = []
        for key in chosen:
            for edge in g.neighbors(key, rels=[SUMMARIZES], direction="out"):
                if edge.dst not in children:
                    children.append(edge.dst)
        frontier = children
    result.summaries = _summary_hits(kb, [p[0] for p in passed], [p[1] for p in passed])
    return result


def _current(g: Any, key: Any, history: bool) -> bool:
    return history or (g.get_node(key, vector=False)["props"] or {}).get("status") == "current"


def _summary_hits(kb: KnowledgeBase, keys: Sequence, scores: Sequence[float]) -> list[SummaryHit]:
    out = []
    for key, score in zip(keys, scores):
        node = kb.graph.get_node(key, vector=False)
        out.append(SummaryHit(key, int((node["props"] or {}).get("level", 0)), node["text"], float(score)))
    return out
