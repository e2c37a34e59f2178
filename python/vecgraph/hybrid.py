"""Hybrid retrieval: dense, BM25, graph-guided and entity channels, fused by weighted RRF.

:meth:`vecgraph.Graph.hybrid_search` runs the channels that its input allows, fuses their
ranked lists with weighted Reciprocal Rank Fusion (:func:`vecgraph.rrf`; Cormack, Clarke &
Büttcher, SIGIR 2009) and reports each result's rank in every channel:

* ``dense``: the nearest nodes to the query vector (HNSW seeds, no traversal).
* ``bm25``: the node texts that best match the query text (BM25, :mod:`vecgraph.text`).
* ``graph``: graph-guided search: seeds from the query vector, plus every node the query text
  names by key or alias (the entity seeds, first), expanded over typed edges and rescored.
* ``entity``: the nodes the query text names (keys and aliases), longest name first.

Filters (``tenants``, ``labels``, ``since``/``until``, ``where``) apply in every channel.
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
from .fusion import rrf_with_ranks
from .text import _decode_key, _encode_key

__all__ = ["CHANNELS", "HybridHit", "HybridResult", "ScoredEdge", "EntityIndex", "estimate_tokens"]

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


class EntityIndex:
    """Names (the str keys of nodes and their aliases, normalised by :func:`normalize_name`)
    mapped to node keys, and the lookup of the names a text mentions.

    A name matches where it starts and ends at token boundaries of the text (a CJK character
    is a token by itself, so a Chinese name matches inside a sentence without spaces). A name
    is kept from its first token to its last, so what comes before or after them does not
    have to be in the text ("U.S.A." matches "made in the U.S.A", "Yahoo!" matches "Yahoo
    mail"). Names that are stopwords of :mod:`vecgraph.text` ("in", "a", "the", ...), that hold
    no token (only symbols or emoji) or more than :data:`MAX_NAME_TOKENS` tokens are not
    matched. Keys of deleted nodes may linger here; callers check results against the graph.
    """

    def __init__(self) -> None:
        self._names: dict[str, set] = {}
        self._by_key: dict = {}  # (type, key) -> its names, to forget them when the node goes
        self._max_tokens = 1
        self._lock = threading.Lock()

    def add(self, key: Any, names: Sequence[str]) -> None:
        key = _plain_key(key)
        with self._lock:
            for name in names:
                normal = normalize_name(name)
                tokens = [(m.start(), m.end()) for m in _TOKEN.finditer(normal)]
                if not tokens or len(tokens) > MAX_NAME_TOKENS:
                    continue
                normal = normal[tokens[0][0] : tokens[-1][1]]  # as match() cuts candidates from a text
                if normal in _stopwords():
                    continue  # a name that is a stopword ("in", "a") would match nearly every text
                self._names.setdefault(normal, set()).add(key)
                self._by_key.setdefault((type(key), key), set()).add(normal)
                self._max_tokens = max(self._max_tokens, len(tokens))

    def add_keys(self, keys: Sequence[Any]) -> None:
        """Each str key is a name of its own node."""
        for key in keys:
            if isinstance(key, str):
                self.add(key, [key])

    def forget(self, keys: Sequence[Any]) -> None:
        """Drop every name of these keys (their nodes were deleted)."""
        with self._lock:
            for key in map(_plain_key, keys):
                for normal in self._by_key.pop((type(key), key), ()):
                    holders = self._names.get(normal)
                    if holders is not None:
                        holders.discard(key)
                        if not holders:
                            del self._names[normal]

    def __len__(self) -> int:
        return len(self._names)

    def match(self, text: str) -> list:
        """Keys of the nodes whose names occur in ``text``: longest match first, then the
        earliest, then the name; each key once."""
        normal = normalize_name(text)
        spans = [(m.start(), m.end()) for m in _TOKEN.finditer(normal)]
        found: list[tuple] = []
        with self._lock:
            names, width = self._names, self._max_tokens
            for i in range(len(spans)):
                for j in range(i, min(i + width, len(spans))):
                    candidate = normal[spans[i][0] : spans[j][1]]
                    keys = names.get(candidate)
                    if keys:
                        for key in keys:
                            found.append((-len(candidate), spans[i][0], candidate, repr(key), key))
        found.sort(key=lambda t: t[:4])
        seen, out = set(), []
        for *_, key in found:
            marker = (type(key), key)
            if marker not in seen:
                seen.add(marker)
                out.append(key)
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

    A result pickles (for another process, or a cache): the copy holds what
    :meth:`to_context` reads from the graph as it was when pickled (each hit's label and text,
    the edges between hits), so it needs no graph.
    """

    def __init__(self, hits: list, edges: list, channels: tuple, lists: dict, graph: Any,
                 frozen: Optional[tuple] = None) -> None:
        self.hits = hits
        self.edges = edges
        self.channels = channels
        self.lists = lists
        self._graph = graph
        self._frozen = frozen  # (nodes {(type, key): node dict}, edges between hits) once pickled

    def __reduce__(self) -> tuple:
        nodes = {}
        for hit in self.hits:
            node = self._node(hit.key)
            if node is not None:
                nodes[(type(hit.key), hit.key)] = {"label": node.get("label"), "text": node.get("text")}
        frozen = (nodes, self._edges_between_hits())
        return (HybridResult, (self.hits, self.edges, self.channels, self.lists, None, frozen))

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


def check_channels(channels: Any, weights: Any) -> tuple[tuple, dict]:
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
    return chosen, {c: float(weights.get(c, 1.0)) for c in chosen}


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
