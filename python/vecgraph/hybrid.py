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
import re
import threading
import unicodedata
from concurrent.futures import ThreadPoolExecutor
from typing import Any, Callable, Iterator, NamedTuple, Optional, Sequence, Union

import numpy as np

from .errors import InvalidArgumentError
from .fusion import convex_unchecked, fuse, minmax, rrf_with_ranks
from .text import _decode_key, _encode_key

__all__ = ["CHANNELS", "FUSIONS", "DEFAULT_FUSION", "HybridHit", "HybridResult", "ScoredEdge", "EntityIndex",
           "Mention", "estimate_tokens", "name_specificity", "entity_scores"]

CHANNELS = ("dense", "bm25", "graph", "entity")
ALIAS_SEPARATOR = "\x1f"

# Name matching: a CJK character is a token of its own (no spaces between words); otherwise a
# run of letters and digits, joined by - _ . ' inside (so "A7-Pro" and "v2.0" stay whole) and
# ending in any + or # ("C++", "C#" are not "C").
_CJK = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TOKEN = re.compile(rf"[{_CJK}]|[^\W_{_CJK}]+(?:[-_.'][^\W_{_CJK}]+)*[+#]*")
MAX_NAME_TOKENS = 32
_JOINERS = re.compile(r"[-_]")


def _stopwords() -> frozenset:
    from .text import STOPWORDS

    return STOPWORDS


def normalize_name(name: str) -> str:
    """How names are compared: Unicode NFC, casefolded, ``-`` and ``_`` read as spaces, and
    whitespace collapsed to one space (so "A7-Pro", "a7 pro" and "A7_PRO" are one name)."""
    return " ".join(_JOINERS.sub(" ", unicodedata.normalize("NFC", name).casefold()).split())


def _plain_key(key: Any) -> Any:
    """A key as the graph stores and returns it: a str, or a plain int for any integer type
    (np.int64, IntEnum, ...), so that the same node's key is one dict key here however the
    caller spelled it (the text index's key rule)."""
    return _decode_key(*_encode_key(key, "key"))


class Mention(NamedTuple):
    """A name of the entity index found in a text: the normalised name, where it starts in
    the normalised text, and the nodes holding it as ``(key, via_alias)`` pairs (``via_alias``:
    the name is one of the node's aliases, not only its key)."""

    name: str
    start: int
    holders: tuple


class EntityIndex:
    """Names (the str keys of nodes and their aliases, normalised by :func:`normalize_name`)
    mapped to node keys, and the lookup of the names a text mentions.

    A name matches where it starts and ends at token boundaries of the text (a CJK character
    is a token by itself, so a Chinese name matches inside a sentence without spaces). A name
    is kept from its first token to its last, so what comes before or after them does not
    have to be in the text ("U.S.A." matches "made in the U.S.A", "Yahoo!" matches "Yahoo
    mail"). Names that are stopwords of :mod:`vecgraph.text` ("in", "a", "the", ...), that hold
    no token (only symbols or emoji) or more than :data:`MAX_NAME_TOKENS` tokens are not
    matched. Each holder of a name records whether the name is one of its aliases or only its
    key (so that keys can be left out of matching, see :meth:`mentions`). Keys of deleted
    nodes may linger here; callers check results against the graph.
    """

    def __init__(self) -> None:
        self._names: dict[str, dict] = {}  # name -> {(type, key): [key, via_alias]}
        self._by_key: dict = {}  # (type, key) -> its names, to forget them when the node goes
        self._max_tokens = 1
        self._lock = threading.Lock()

    def add(self, key: Any, names: Sequence[str], *, alias: bool = True) -> None:
        """Makes each of ``names`` a name of node ``key`` (``alias=False``: the key itself)."""
        key = _plain_key(key)
        marker = (type(key), key)
        with self._lock:
            for name in names:
                normal = normalize_name(name)
                tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(normal)]
                if not tokens or len(tokens) > MAX_NAME_TOKENS:
                    continue
                normal = normal[tokens[0][0] : tokens[-1][1]]  # as mentions() cuts candidates from a text
                if normal in _stopwords():
                    continue  # a name that is a stopword ("in", "a") would match nearly every text
                holders = self._names.setdefault(normal, {})
                entry = holders.get(marker)
                if entry is None:
                    holders[marker] = [key, alias]
                else:
                    entry[1] = entry[1] or alias
                self._by_key.setdefault(marker, set()).add(normal)
                self._max_tokens = max(self._max_tokens, len(tokens))

    def add_keys(self, keys: Sequence[Any]) -> None:
        """Each str key is a name of its own node."""
        for key in keys:
            if isinstance(key, str):
                self.add(key, [key], alias=False)

    def forget(self, keys: Sequence[Any]) -> None:
        """Drop every name of these keys (their nodes were deleted)."""
        with self._lock:
            for key in map(_plain_key, keys):
                marker = (type(key), key)
                for normal in self._by_key.pop(marker, ()):
                    holders = self._names.get(normal)
                    if holders is not None:
                        holders.pop(marker, None)
                        if not holders:
                            del self._names[normal]

    def __len__(self) -> int:
        return len(self._names)

    def mentions(self, text: str) -> list:
        """Every name found in ``text``, as :class:`Mention`, longest name first, then the
        earliest, then by name (overlapping names are all reported)."""
        normal = normalize_name(text)
        spans = [(m.start(), m.end()) for m in _TOKEN.finditer(normal)]
        found: list = []
        with self._lock:
            names, width = self._names, self._max_tokens
            for i in range(len(spans)):
                for j in range(i, min(i + width, len(spans))):
                    candidate = normal[spans[i][0] : spans[j][1]]
                    holders = names.get(candidate)
                    if holders:
                        ordered = sorted(holders.values(), key=lambda h: (type(h[0]).__name__, repr(h[0])))
                        found.append(Mention(candidate, spans[i][0], tuple((h[0], h[1]) for h in ordered)))
        found.sort(key=lambda m: (-len(m.name), m.start, m.name))
        return found


def name_terms(name: str) -> list:
    """The BM25 index terms of an entity name (:func:`vecgraph.text.tokenize`), each word once:
    the parts that the tokenizer adds after an identifier ("a7-pro" -> "a7", "pro") are left
    out, as the identifier itself is the word the name holds."""
    from .text import tokenize

    terms: list = []
    whole = ""
    for term in tokenize(name):
        if whole and term != whole and term in whole:
            continue  # a part of the identifier before it
        whole = term if any(c in term for c in "-_.'") else ""
        if term not in terms:
            terms.append(term)
    return terms


#: A name whose estimated share of documents holding it is above this does not fire alone: it
#: is a common word of the corpus ("copy", "get", "time"), not a specific mention.
ENTITY_MAX_DF_SHARE = 0.01


def name_specificity(names: Sequence[str], document_frequencies: Callable) -> dict:
    """The specificity of each entity name: the inverse document frequency of the name in the
    graph's texts, estimated as the sum of its words' BM25 idf (their independence assumed:
    Robertson & Zaragoza 2009, idf = ln(1 + (N - n + 0.5) / (n + 0.5))), and the estimated
    share of the N documents that hold every word of it (the product of the words' shares).

    Args:
        names: normalised names. document_frequencies: ``terms -> (N, [n per term])``, as
            :meth:`vecgraph.text.TextIndex.document_frequencies`.

    Returns:
        {name: (idf, share)}; with no document in the index every name has idf 1 and share 0
        (nothing is known to be common).
    """
    terms_of = {name: name_terms(name) for name in names}
    every = sorted({t for terms in terms_of.values() for t in terms})
    count, frequencies = document_frequencies(every) if every else (0, [])
    df = dict(zip(every, frequencies))
    out = {}
    for name, terms in terms_of.items():
        if count <= 0 or not terms:
            out[name] = (1.0, 0.0)
            continue
        idf = 0.0
        share = 1.0
        for term in terms:
            n = min(df[term], count)
            idf += math.log(1.0 + (count - n + 0.5) / (n + 0.5))
            share *= n / count
        out[name] = (idf, share)
    return out


class ScoredEdge(NamedTuple):
    """A traversed edge that carries text or a vector, scored against the query.

    ``score`` is the RRF of the edge's rank by vector similarity and its rank by text match
    (``vector_score``: similarity of its vector to the query vector, None without one;
    ``text_score``: the share of the query's terms found in its text, None without text).
    """

    src: Any
    rel: str
    dst: Any
    weight: float
    text: str
    score: float
    vector_score: Optional[float]
    text_score: Optional[float]


class HybridHit(NamedTuple):
    """One fused result: the node's key, its fused RRF score, its rank (from 1) in each
    channel that ran (None where that channel did not return it), and the path of edges the
    graph channel walked to it (empty for a seed or a node the graph channel did not reach)."""

    key: Any
    score: float
    ranks: dict
    path: list


def estimate_tokens(text: str) -> int:
    """A tokenizer-free estimate of the tokens ``text`` costs an LLM: one per 4 characters
    (the usual rule of thumb for English with BPE tokenizers), at least one per word."""
    return max(math.ceil(len(text) / 4), len(text.split()))


class HybridResult:
    """The fused results of :meth:`vecgraph.Graph.hybrid_search`, best first.

    Attributes:
        hits: list of :class:`HybridHit`.
        edges: traversed edges with text or a vector, best first (:class:`ScoredEdge`).
        channels: the channels that ran, in fusion order.
        lists: each channel's ranked keys (before fusion).
        channel_scores: each channel's scores, in the order of ``lists`` (dense and graph:
            similarity to the query vector; bm25: BM25; entity: the specificity of the names
            that matched, see :func:`entity_scores`).

    A result pickles (for another process, or a cache): the copy holds what
    :meth:`to_context` reads from the graph as it was when pickled (each hit's label and text,
    the edges between hits), so it needs no graph.
    """

    def __init__(self, hits: list, edges: list, channels: tuple, lists: dict, graph: Any,
                 frozen: Optional[tuple] = None, scores: Optional[dict] = None) -> None:
        self.hits = hits
        self.edges = edges
        self.channels = channels
        self.lists = lists
        self.channel_scores = scores if scores is not None else {c: [] for c in lists}
        self._graph = graph
        self._frozen = frozen  # (nodes {(type, key): node dict}, edges between hits) once pickled

    def __reduce__(self) -> tuple:
        nodes = {}
        for hit in self.hits:
            node = self._node(hit.key)
            if node is not None:
                nodes[(type(hit.key), hit.key)] = {"label": node.get("label"), "text": node.get("text")}
        frozen = (nodes, self._edges_between_hits())
        return (HybridResult, (self.hits, self.edges, self.channels, self.lists, None, frozen, self.channel_scores))

    def _node(self, key: Any) -> Optional[dict]:
        """The node ``key`` as get_node() gives it, or None when it was deleted since the search."""
        if self._frozen is not None:
            return self._frozen[0].get((type(key), key))
        try:
            return self._graph.get_node(key)
        except Exception:  # deleted since the search
            return None

    @property
    def keys(self) -> list:
        return [h.key for h in self.hits]

    @property
    def scores(self) -> np.ndarray:
        return np.array([h.score for h in self.hits], dtype=np.float64)

    def __len__(self) -> int:
        return len(self.hits)

    def __iter__(self) -> Iterator[HybridHit]:
        return iter(self.hits)

    def __getitem__(self, i: Union[int, slice]) -> Union[HybridHit, list]:
        try:
            return self.hits[i]
        except IndexError:
            raise IndexError(f"result index {i} out of range for {len(self.hits)} hits") from None

    def __repr__(self) -> str:
        shown = ", ".join(f"{h.key!r}: {h.score:.5f}" for h in self.hits[:5])
        more = ", ..." if len(self.hits) > 5 else ""
        return f"HybridResult({len(self.hits)} hits: {{{shown}{more}}}, channels={self.channels})"

    def _edges_between_hits(self) -> list:
        """Edges from one hit to another that were not scored (not traversed), after the scored ones."""
        if self._frozen is not None:
            return list(self._frozen[1])
        members = {(type(h.key), h.key) for h in self.hits}
        scored = {(type(e.src), e.src, e.rel, type(e.dst), e.dst) for e in self.edges}
        found = []
        for hit in self.hits:
            try:
                ids = self._graph._engine.neighbor_ids(hit.key, "out")
            except Exception:  # deleted since the search
                continue
            for src, rel, dst, weight, text, _props, _vector in self._graph._engine.edge_details(ids):
                if (type(dst), dst) in members and (type(src), src, rel, type(dst), dst) not in scored:
                    found.append(ScoredEdge(src, rel, dst, float(weight), text, 0.0, None, None))
        return found

    def to_context(self, max_tokens: int = 1500, *, count_tokens: Optional[Callable[[str], int]] = None) -> str:
        """The results as prompt-ready text within ``max_tokens``, most relevant first.

        One line per node, ``[key] (label) text``, in fused order, each followed by the lines
        of the edges between nodes already listed, ``[src --rel--> dst] text`` (scored edges
        first, then the other edges between hits).
        Every line is tagged with its key(s) so an answer can cite it. Lines are added while
        they fit the budget; a line that does not fit is left out (never cut in the middle).

        Args:
            max_tokens: the budget (>= 1), counted by ``count_tokens`` (default
                :func:`estimate_tokens`; pass a real tokenizer's ``len(encode(text))`` for exact counts).

        Returns:
            The lines joined by newlines ("" when nothing fits).
        """
        if isinstance(max_tokens, bool) or not isinstance(max_tokens, int):
            raise TypeError(f"max_tokens must be an int >= 1, got {type(max_tokens).__name__} {max_tokens!r}")
        if max_tokens < 1:
            raise InvalidArgumentError(f"max_tokens must be an int >= 1, got {max_tokens!r}")
        counter = count_tokens or estimate_tokens

        def count(text: str) -> int:
            n = counter(text)
            if isinstance(n, bool) or not isinstance(n, numbers.Integral) or n < 0:
                raise InvalidArgumentError(f"count_tokens must return an int >= 0, returned {n!r} for {text[:40]!r}")
            return int(n)

        lines: list[str] = []
        used = 0
        listed: set = set()
        edges = list(self.edges) + self._edges_between_hits()
        for hit in self.hits:
            node = self._node(hit.key)
            if node is None:
                continue
            label = f" ({node['label']})" if node.get("label") else ""
            text = " ".join((node.get("text") or "").split())
            line = f"[{hit.key}]{label} {text}".rstrip()
            cost = count(line) + (1 if lines else 0)
            if used + cost > max_tokens:
                continue
            lines.append(line)
            used += cost
            listed.add((type(hit.key), hit.key))
            for edge in list(edges):
                if (type(edge.src), edge.src) in listed and (type(edge.dst), edge.dst) in listed:
                    edges.remove(edge)
                    text = " ".join(edge.text.split())
                    edge_line = f"[{edge.src} --{edge.rel}--> {edge.dst}] {text}".rstrip()
                    cost = count(edge_line) + 1
                    if used + cost <= max_tokens:
                        lines.append(edge_line)
                        used += cost
        return "\n".join(lines)


# ------------------------------------------------------------------------------------ search

_POOL: Optional[ThreadPoolExecutor] = None
_POOL_LOCK = threading.Lock()


def _forget_pool_after_fork() -> None:
    """In a forked child: the pool's threads stayed in the parent, so a job submitted to it
    would never run; the next parallel search makes a new one. (Called by the fork handler
    of vecgraph.graph.)"""
    global _POOL, _POOL_LOCK
    _POOL = None
    _POOL_LOCK = threading.Lock()


def _pool() -> ThreadPoolExecutor:
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="vecgraph-hybrid")
        return _POOL


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
    from .text import tokenize

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
    from .text import tokenize

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


# ------------------------------------------------------------------------------- the channels

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
#: How much an ambiguous name's weight falls with the number of nodes holding it:
#: weight = idf / holders ** ENTITY_AMBIGUITY_POWER.
ENTITY_AMBIGUITY_POWER = 1.0


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
            raise TypeError(f"entity_keys[{i}] must be a label (str), got {type(label).__name__}")
    return labels


def firing_names(specificity: dict, documents: int, max_df_share: float = ENTITY_MAX_DF_SHARE) -> set:
    """The names that may name a node on their own: those whose estimated share of the
    ``documents`` holding them is at most ``max(max_df_share, 3 / documents)``; a name that is a
    common word of the corpus ("copy", "get", "time") does not fire. With no documents every
    name fires (nothing is known to be common)."""
    limit = max(max_df_share, 3.0 / documents) if documents > 0 else math.inf
    return {name for name, (_, share) in specificity.items() if share <= limit}


def entity_scores(mentions: Sequence[Mention], specificity: dict, fire: set, *,
                  admitted: Optional[set] = None, ambiguity_power: float = ENTITY_AMBIGUITY_POWER) -> dict:
    """Scores of the nodes that the mentions name: the sum, over the distinct firing names that
    name a node, of the name's idf / ``holders ** ambiguity_power`` (``holders``: the nodes
    holding the name that ``admitted`` lets through), so an ambiguous name weighs less than a
    unique one of the same idf.

    Args:
        mentions: :class:`Mention` list. specificity: {name: (idf, share)} from
            :func:`name_specificity`. fire: the names that may fire (:func:`firing_names`).
        admitted: markers ``(type(key), key)`` of the holders that pass the filters (None: all).

    Returns:
        {(type, key): [key, score, first position]} of the nodes named by a firing name.
    """
    out: dict = {}
    counted: set = set()
    for mention in mentions:
        if mention.name not in fire:
            continue
        holders = [(key, (type(key), key)) for key, _ in mention.holders
                   if admitted is None or (type(key), key) in admitted]
        if not holders:
            continue
        weight = specificity[mention.name][0] / len(holders) ** ambiguity_power
        for key, marker in holders:
            if (marker, mention.name) in counted:
                continue
            counted.add((marker, mention.name))
            entry = out.get(marker)
            if entry is None:
                out[marker] = [key, weight, mention.start]
            else:
                entry[1] += weight
                entry[2] = min(entry[2], mention.start)
    return out


def _entity_channel(graph: Any, text: str, query: Optional[np.ndarray], args: tuple, conditions: Any,
                    exclude: Optional[list], entity_keys: Union[bool, list], depth: int) -> tuple:
    """(keys, scores) of the entity channel, best first: by score (:func:`entity_scores`), then
    by similarity to the query vector when there is one, then by the first mention."""
    mentions = graph._entity_index().mentions(text)
    if not mentions:
        return [], []
    if entity_keys is not True:
        key_only = [key for m in mentions for key, via_alias in m.holders if not via_alias]
        allowed: set = set()
        if entity_keys and key_only:  # a list of labels whose nodes' keys are names
            flags = graph._engine.admits(key_only, entity_keys, None, -(2**63), 2**63 - 1, None)
            allowed = {(type(key), key) for key, ok in zip(key_only, flags) if ok}
        mentions = [m._replace(holders=tuple(h for h in m.holders if h[1] or (type(h[0]), h[0]) in allowed))
                    for m in mentions]
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
    candidates: list = []
    seen: set = set()
    for mention in mentions:
        if mention.name in fire:
            for key, _ in mention.holders:
                if (type(key), key) not in seen:
                    seen.add((type(key), key))
                    candidates.append(key)
    if not candidates:
        return [], []
    similarity: dict = {}
    if query is not None:
        # One core call checks the filters and the exclusions and scores each candidate.
        entity_args = (len(candidates), 0, 0, max(args[3], len(candidates))) + args[4:]
        raw = graph._engine.search(query, *entity_args, conditions, candidates, exclude)
        similarity = {(type(key), key): float(score) for key, score in zip(raw[0], raw[1])}
        admitted = set(similarity)
    else:
        flags = graph._engine.admits(candidates, args[7], args[8], args[9], args[10], conditions)
        excluded = {(type(key), key) for key in exclude} if exclude else set()
        admitted = {(type(key), key) for key, ok in zip(candidates, flags) if ok and (type(key), key) not in excluded}
    scored = entity_scores(mentions, specificity, fire, admitted=admitted)

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


def run(graph: Any, *, text: Optional[str], query: Optional[np.ndarray], k: int, runnable: tuple, weights: dict,
        fusion: str, args: tuple, conditions: Any, depth: int, dense_ef: int, exclude: Optional[list],
        entity_keys: Union[bool, list], graph_seeds: bool, graph_scoring: str, rrf_k: float,
        parallel: bool) -> HybridResult:
    """The channels and the fusion of :meth:`vecgraph.Graph.hybrid_search`, its arguments
    checked (``args``: the tuple of ``Graph._search_args`` for ``depth`` results)."""
    from .graph import Edge, SearchResult

    engine = graph._engine
    ts_min, ts_max = args[9], args[10]
    int64_min, int64_max = -(2**63), 2**63 - 1
    excluded = {(type(key), key) for key in exclude} if exclude else None

    def fail_where(keys: list) -> list:
        # Only the where conditions and the exclusions: the BM25 search applies tenants, labels and
        # the time window itself. One call per block of candidates (a call per key cost ~10 µs).
        flags = engine.admits(keys, None, None, int64_min, int64_max, conditions) if conditions else None
        return [(flags is not None and not flags[i]) or (excluded is not None and (type(key), key) in excluded)
                for i, key in enumerate(keys)]

    def bm25() -> tuple:
        only = None
        if conditions:
            # A where that admits few nodes is applied inside the BM25 search as the list of
            # their keys (about 5 µs a key); checking ranked candidates instead reads about
            # depth * nodes / admitted of them (about 11 µs each). The two meet near
            # sqrt(2 * depth * nodes) admitted nodes.
            limit = math.isqrt(2 * depth * max(1, len(graph)))
            only = engine.admitted_keys(args[7], args[8], ts_min, ts_max, conditions, limit)
        if only is not None:  # the listed keys pass the tenants, labels and time window too
            if excluded:
                only = [key for key in only if (type(key), key) not in excluded]
            found = graph._bm25(text, depth, keys=only)
        else:
            found = graph._bm25(text, depth, tenants=args[8], labels=args[7],
                                ts_min=None if ts_min == int64_min else ts_min,
                                ts_max=None if ts_max == int64_max else ts_max,
                                exclude_many=fail_where if conditions or excluded else None)
        return [key for key, _ in found], [float(score) for _, score in found]

    future = None
    if "bm25" in runnable and parallel and len(runnable) > 1:
        try:
            future = _pool().submit(bm25)
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
        dense_args = (depth, max(depth, args[1]), 0) + args[3:13] + (dense_ef,)
        raw = engine.search(query, *dense_args, conditions, None, exclude)
        dense_keys, dense_scores = raw[0], [float(x) for x in raw[1]]
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
