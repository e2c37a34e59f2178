"""What the knowledge base builds over its chunks and entities, bound as methods of
:class:`vecgraph.kb.KnowledgeBase`: :func:`build_communities` (hierarchical Leiden over the
entity graph, a summary per community) and :func:`build_tree` (RAPTOR)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from ..arguments import _count_at_least
from ..errors import _got
from .communities import community_key, leiden_levels, level_centrality
from .extract import stable_hash
from .hooks import call_hook, check_text
from .raptor import cluster
from .summaries import centroid_summary, community_summary, split_sentences

if TYPE_CHECKING:
    from .store import KnowledgeBase

__all__ = ["CommunityReport", "TreeReport", "build_communities", "build_tree"]

CHUNK, ENTITY, COMMUNITY, SUMMARY, CONFIG_KEY = "chunk", "entity", "community", "summary", "~kb"
MENTIONS, MEMBER_OF, PART_OF, SUMMARIZES = "mentions", "member_of", "part_of", "summarizes"
STRUCTURE = ("part_of", "next", "mentions", "member_of", "summarizes")
MAX_SENTENCE_CHUNKS = 24  # chunks read per community for its offline summary


@dataclass
class CommunityReport:
    """What :func:`build_communities` did: ``levels`` (communities per level), ``kept``
    (communities whose members did not change: same key, summary kept), ``added``,
    ``removed``, ``entities`` and ``edges`` of the entity graph, ``seconds``."""

    levels: list = field(default_factory=list)
    kept: int = 0
    added: int = 0
    removed: int = 0
    entities: int = 0
    edges: int = 0
    seconds: float = 0.0


@dataclass
class TreeReport:
    """What :func:`build_tree` did: ``levels`` (nodes per level, chunks first; the tenants' trees
    summed level by level), ``summaries`` written, ``seconds``."""

    levels: list = field(default_factory=list)
    summaries: int = 0
    seconds: float = 0.0


def _tenants(kb: KnowledgeBase, tenant: str | None, label: str) -> list:
    if tenant is not None:
        if not isinstance(tenant, str):
            raise TypeError(f"tenant must be a str or None, got {_got(tenant)}")
        return [tenant]
    return sorted(set(kb.graph.nodes(labels=[label], columns=["tenant"]).column("tenant").to_pylist()))


def entity_graph(kb: KnowledgeBase, tenant: str) -> tuple[list, np.ndarray, np.ndarray, np.ndarray, dict]:
    """``(entity keys, src, dst, weight, {entity index: [chunk keys]})``: entities are linked by
    the number of current chunks that mention both, plus their typed relations' weights."""
    g = kb.graph
    keys = g.keys(labels=[ENTITY], tenants=[tenant])
    index = {key: i for i, key in enumerate(keys)}
    chunks_of: dict = {}
    by_chunk: dict = {}
    current = set(g.keys(labels=[CHUNK], tenants=[tenant], where={"status": "current"}))
    src: list = []
    dst: list = []
    weight: list = []
    for i, key in enumerate(keys):
        for edge in g.neighbors(key, direction="in", rels=[MENTIONS]):
            if edge.src in current:
                chunks_of.setdefault(i, []).append(edge.src)
                by_chunk.setdefault(edge.src, []).append(i)
        for edge in g.neighbors(key, direction="out"):
            if edge.rel not in STRUCTURE and edge.dst in index:
                src.append(i), dst.append(index[edge.dst]), weight.append(float(edge.weight))
    for members in by_chunk.values():
        m = np.asarray(members, np.int64)
        if len(m) > 1:
            a, b = np.triu_indices(len(m), 1)
            src.extend(m[a].tolist()), dst.extend(m[b].tolist()), weight.extend([1.0] * len(a))
    return (
        keys,
        np.asarray(src, np.int64),
        np.asarray(dst, np.int64),
        np.asarray(weight, np.float64),
        chunks_of,
    )


def build_communities(
    kb: KnowledgeBase,
    *,
    tenant: str | None = None,
    max_levels: int = 3,
    max_cluster_size: int = 50,
    resolution: float = 1.0,
    summary_tokens: int = 300,
    min_size: int = 2,
    seed: int = 42,
) -> CommunityReport:
    """Communities of the entity graph (Leiden, hierarchical: Traag et al., Sci. Rep. 2019;
    Edge et al., "From Local to Global", 2024), each a ``community`` node with a summary.

    The entity graph links two entities by the number of current chunks that mention both and
    by their typed relations. Level 0 is Leiden over it; each deeper level splits the
    communities larger than ``max_cluster_size`` (:func:`vecgraph.kb.communities.leiden_levels`).
    A community that does not split is carried down to the next level (a node per level, so
    each level is a whole partition for :meth:`KnowledgeBase.global_search`; summarised once).
    A community of ``min_size`` entities or more becomes a node (key
    :func:`vecgraph.kb.communities.community_key`: the same members give the same key, so
    running again after new documents keeps the communities that did not change, summaries
    included, and replaces the others). Its entities link to it by ``member_of``; it is
    ``part_of`` its parent. Summary: the ``summarizer`` hook if one was given to
    :meth:`KnowledgeBase.open`, else extractive (:func:`vecgraph.kb.summaries.community_summary`:
    the most central entities and the chunk sentences that cover them best), within
    ``summary_tokens``.

    Args:
        tenant: one tenant (None: each tenant that has entities, separately).
        max_levels, max_cluster_size, resolution, seed: see ``leiden_levels``.
        summary_tokens: the budget of an offline summary (int >= 20).
        min_size: the smallest community kept (int >= 1).

    Returns:
        :class:`CommunityReport`.

    Raises:
        InvalidArgumentError: an argument out of range. HookError: the summarizer failed.
        ImportError: igraph is not installed (``pip install "vecgraph[kb]"``).
    """
    start = time.perf_counter()
    _count_at_least(max_levels, "max_levels", 1), _count_at_least(max_cluster_size, "max_cluster_size", 2)
    _count_at_least(summary_tokens, "summary_tokens", 20), _count_at_least(min_size, "min_size", 1)
    g = kb.graph
    report = CommunityReport()
    for t in _tenants(kb, tenant, ENTITY):
        keys, src, dst, weight, chunks_of = entity_graph(kb, t)
        report.entities += len(keys)
        report.edges += len(src)
        old = set(g.keys(labels=[COMMUNITY], tenants=[t]))
        if not keys:
            if old:
                g.delete_nodes(sorted(old))
                report.removed += len(old)
            continue
        levels = leiden_levels(
            len(keys),
            src,
            dst,
            weight,
            max_levels=max_levels,
            max_cluster_size=max_cluster_size,
            resolution=resolution,
            seed=seed,
        )
        new: dict = {}  # key -> (level, member indices, parent key, the members' centrality)
        parent_of: dict = {}  # (level, community index) -> key
        for level, labels in enumerate(levels):
            central = level_centrality(len(keys), src, dst, weight, labels)
            groups: dict = {}
            for i, c in enumerate(labels.tolist()):
                if c >= 0:
                    groups.setdefault(c, []).append(i)
            count = 0
            for c, members in groups.items():
                if len(members) < min_size:
                    continue
                key = community_key(level, [keys[i] for i in members])
                parent = parent_of.get((level - 1, int(levels[level - 1][members[0]]))) if level else None
                parent_of[(level, c)] = key
                new[key] = (level, members, parent, central[members])
                count += 1
            while len(report.levels) <= level:
                report.levels.append(0)
            report.levels[level] += count
        gone = sorted(old - set(new))
        if gone:
            g.delete_nodes(gone)
        report.removed += len(gone)
        report.kept += len(old & set(new))
        fresh = [key for key in new if key not in old]
        report.added += len(fresh)
        _write_communities(kb, t, fresh, new, keys, src, dst, weight, chunks_of, summary_tokens)
    kb._set_config(communities_built=True, communities_stale=False, community_levels=len(report.levels))
    kb._durable()
    report.seconds = time.perf_counter() - start
    return report


def _write_communities(
    kb: KnowledgeBase,
    tenant: str,
    fresh: list,
    new: dict,
    keys: list,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray,
    chunks_of: dict,
    summary_tokens: int,
) -> None:
    if not fresh:
        return
    g = kb.graph
    names: dict = {}
    texts, props = [], []
    made: dict = {}  # members -> (title, summary, ranked): a community carried down is summarised once
    for key in fresh:
        level, members, parent, central = new[key]
        order = np.argsort(-central, kind="stable").tolist()
        ranked = []
        for j in order[:20]:
            i = members[j]
            if i not in names:
                names[i] = (g.get_node(keys[i], vector=False)["props"] or {}).get("name", str(keys[i]))
            ranked.append((names[i], float(central[j])))
        title = "Community: " + ", ".join(name for name, _ in ranked[:3])
        done = made.get(tuple(members))
        if done is not None:
            summary = done
        else:
            chunk_keys: list = []
            for j in order[:5]:
                for ck in chunks_of.get(members[j], [])[: MAX_SENTENCE_CHUNKS // 2]:
                    if ck not in chunk_keys:
                        chunk_keys.append(ck)
            chunk_texts = [_body(g, ck) for ck in chunk_keys[:MAX_SENTENCE_CHUNKS]]
            if kb.summarizer is not None:
                summary = check_text(
                    call_hook(kb.summarizer, "summarizer", title, chunk_texts),
                    "summarizer",
                    "a str (the summary)",
                )
            else:
                sentences = [s for text in chunk_texts for s in split_sentences(text)]
                summary = community_summary(
                    title, ranked, sentences, max_tokens=summary_tokens, count_tokens=kb.count_tokens
                )
            made[tuple(members)] = summary
        texts.append(summary)
        props.append(
            {
                "level": level,
                "title": title,
                "size": len(members),
                "status": "current",
                "entities": [name for name, _ in ranked[:10]],
                "parent": parent,
            }
        )
    vectors = kb.embed(texts)
    g.add_nodes(fresh, vectors, labels=COMMUNITY, texts=texts, tenants=tenant, props=props)
    e_src, e_dst, rels = [], [], []
    for key in fresh:
        level, members, parent, _ = new[key]
        for i in members:
            e_src.append(keys[i]), e_dst.append(key), rels.append(MEMBER_OF)
        if parent is not None and parent in g:
            e_src.append(key), e_dst.append(parent), rels.append(PART_OF)
    fresh_set = set(fresh)
    for key, (level, members, parent, _) in new.items():  # a kept community under a new parent
        if key not in fresh_set and parent in fresh_set:
            e_src.append(key), e_dst.append(parent), rels.append(PART_OF)
    g.add_edges(e_src, e_dst, rels=rels)


def _body(g: Any, key: Any) -> str:
    node = g.get_node(key, vector=False)
    return node["text"][int((node["props"] or {}).get("body_start", 0)) :]


def build_tree(
    kb: KnowledgeBase,
    *,
    tenant: str | None = None,
    max_cluster_size: int = 10,
    summary_tokens: int = 200,
    max_levels: int = 5,
    threshold: float | None = None,
    seed: int = 0,
) -> TreeReport:
    """A RAPTOR tree (Sarthi et al., ICLR 2024) over the current chunks: the chunk vectors are
    clustered (:func:`vecgraph.kb.raptor.cluster`: Gaussian mixtures, the number of
    components by BIC, global then local), each cluster summarised into a ``summary`` node
    (level 1) that ``summarizes`` its members, and the summaries clustered again, up to a root
    or ``max_levels``. An earlier tree of the tenant is replaced.

    Summary: the ``summarizer`` hook if one was given, else extractive
    (:func:`vecgraph.kb.summaries.centroid_summary`: the members' sentences nearest their
    centroid, Radev et al. 2004), within ``summary_tokens``.

    Args:
        tenant: one tenant (None: each tenant that has chunks, separately).
        max_cluster_size: the largest cluster (int >= 2).
        summary_tokens: budget of an offline summary (int >= 20).
        max_levels: the most summary levels (int >= 1).
        threshold: soft clustering (a chunk joins every cluster it belongs to with probability
            >= threshold, the paper's 0.1); None: each chunk in one cluster.
        seed: the clustering's random seed.

    Returns:
        :class:`TreeReport`.
    """
    start = time.perf_counter()
    _count_at_least(max_cluster_size, "max_cluster_size", 2)
    _count_at_least(summary_tokens, "summary_tokens", 20)
    _count_at_least(max_levels, "max_levels", 1)
    g = kb.graph
    report = TreeReport()
    tops: dict = {}
    for t in _tenants(kb, tenant, CHUNK):
        old = g.keys(labels=[SUMMARY], tenants=[t])
        if old:
            g.delete_nodes(old)
        keys = g.keys(labels=[CHUNK], tenants=[t], where={"status": "current"})
        if not keys:
            tops[t] = 0
            continue
        codes, scales = g.quantized(keys)
        vectors = codes.astype(np.float32) * scales[:, None]
        texts = [_body(g, key) for key in keys]
        _add_level(report.levels, 0, len(keys))
        level = 0
        while level < max_levels and len(keys) > 1:
            level += 1
            groups = cluster(vectors, max_cluster_size=max_cluster_size, threshold=threshold, seed=seed)
            if len(groups) >= len(keys):  # no grouping left to do
                break
            summaries = []
            for members in groups:
                member_texts = [texts[i] for i in members.tolist()]
                if kb.summarizer is not None:
                    summary = check_text(
                        call_hook(kb.summarizer, "summarizer", f"cluster of {len(members)}", member_texts),
                        "summarizer",
                        "a str (the summary)",
                    )
                else:
                    sentences = [s for text in member_texts for s in split_sentences(text)]
                    summary = (
                        centroid_summary(
                            sentences,
                            kb.embed(sentences),
                            max_tokens=summary_tokens,
                            count_tokens=kb.count_tokens,
                        )
                        if sentences
                        else ""
                    )
                summaries.append(summary or " ".join(member_texts)[:200])
            new_keys = [
                f"summary:{len(t)}:{t}:{level}:" + stable_hash("\x1f".join(str(keys[i]) for i in m.tolist()))
                for m in groups
            ]
            new_vectors = kb.embed(summaries)
            g.add_nodes(
                new_keys,
                new_vectors,
                labels=SUMMARY,
                texts=summaries,
                tenants=t,
                props=[{"level": level, "size": len(m), "status": "current"} for m in groups],
            )
            e_src = [nk for nk, m in zip(new_keys, groups) for _ in m.tolist()]
            e_dst = [keys[i] for m in groups for i in m.tolist()]
            g.add_edges(e_src, e_dst, rels=SUMMARIZES)
            report.summaries += len(new_keys)
            _add_level(report.levels, level, len(new_keys))
            keys, vectors, texts = new_keys, new_vectors, summaries
            if len(keys) == 1:
                break
        tops[t] = level
    kb._set_config(
        tree_levels=dict(kb.config().get("tree_levels", {}), **tops), tree_built=True, tree_stale=False
    )
    kb._durable()
    report.seconds = time.perf_counter() - start
    return report


def _add_level(levels: list, level: int, count: int) -> None:
    """Adds ``count`` nodes to ``levels[level]`` (the tenants' trees summed level by level)."""
    while len(levels) <= level:
        levels.append(0)
    levels[level] += count


def tree_levels(kb: KnowledgeBase, tenant: str | None = None) -> int:
    """The number of summary levels of the tenant's RAPTOR tree (0: none built); with
    ``tenant=None``, the deepest tree of any tenant."""
    levels = kb.config().get("tree_levels", {})
    if tenant is not None:
        return int(levels.get(tenant, 0))
    return max((int(v) for v in levels.values()), default=0)
