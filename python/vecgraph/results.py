"""The results of searches: :class:`SearchResult` of :meth:`Graph.search` (each hit a
:class:`Hit` with its path of :class:`Edge`), and :class:`HybridResult` of
:meth:`Graph.hybrid_search` (each hit a :class:`HybridHit`, with the :class:`ScoredEdge` list
and prompt-ready text through :meth:`HybridResult.to_context`).

A result reads paths and node texts from the graph lazily; pickled, it carries them, and needs
no graph.
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterator
from typing import Any, Callable, NamedTuple, Optional, Union

import numpy as np

from .arguments import Key, _count
from .errors import InvalidArgumentError


__all__ = ["Edge", "Hit", "SearchResult", "ScoredEdge", "HybridHit", "HybridResult", "estimate_tokens", "path_text"]


class Edge(NamedTuple):
    """A directed edge as stored: ``src --rel--> dst`` with its weight."""

    src: Key
    rel: str
    dst: Key
    weight: float


class Hit(NamedTuple):
    """One search result: the node's key, its score, its hop distance from the nearest seed
    that reached it (0 for a seed), and the edges walked from that seed to it."""

    key: Key
    score: float
    hop: int
    path: list[Edge]


class SearchResult:
    """The result of one :meth:`Graph.search`, best first.

    Attributes:
        keys: list of node keys, length n (n <= k; fewer when fewer nodes were reached).
        scores: float32 array of shape (n,): similarity to the query computed from the int8
            codes (cos: the cosine of the dequantized vectors, which float32 rounding can push
            a hair above 1; ip: inner product; l2: minus the squared distance), decayed by
            d = ``hop_decay ** hop``
            (times d for a score >= 0, divided by d for a negative one); higher is better.
        hops: int32 array of shape (n,): hop distance from the seed that reached the node.
        paths: list of n lists of :class:`Edge`, from the seed to the node (empty for a seed);
            built on first access.
        count_seeds: how many seeds the seed search returned.
        count_visited: how many nodes the expansion visited and scored.

    A result pickles (for another process, or a cache): the copy holds its paths, read from
    the graph when it is pickled, and needs no graph.
    """

    __slots__ = ("keys", "scores", "hops", "count_seeds", "count_visited", "_offsets", "_edges", "_engine", "_paths",
                 "_nodes")

    def __init__(self, raw: tuple, engine: Any) -> None:
        (self.keys, self.scores, self.hops, self._offsets, self._edges, self.count_seeds, self.count_visited) = raw
        self._engine = engine
        self._paths: Optional[list[list[Edge]]] = None
        self._nodes: Optional[list] = None

    def _node_fields(self) -> list:
        """(label, tenant, text) of each hit, read from the graph on first use (a pickled
        result carries them)."""
        if self._nodes is None:
            self._nodes = _node_columns(self._engine, list(self.keys))
        return self._nodes

    def to_dicts(self) -> list[dict]:
        """One dict per hit, best first: ``key``, ``score`` (float), ``hop`` (int), ``path``
        (the edges from the seed as text, :func:`path_text`; "" for a seed), ``label``,
        ``tenant``, ``text`` (as the graph holds them when first read; None for a node deleted
        since the search)."""
        nodes = self._node_fields()
        return [{"key": key, "score": float(score), "hop": int(hop), "path": path_text(path),
                 "label": node[0], "tenant": node[1], "text": node[2]}
                for key, score, hop, path, node in zip(self.keys, self.scores, self.hops, self.paths, nodes)]

    def to_arrow(self) -> Any:
        """:meth:`to_dicts` as a ``pyarrow.Table`` with columns key (string, or int64 when every
        key is an int; a result mixing both gives them as strings), score (float32), hop (int32),
        path, label, tenant, text (string)."""
        import pyarrow as pa

        return _to_arrow(self.to_dicts(), ["key", "score", "hop", "path", "label", "tenant", "text"],
                         {"score": pa.float32(), "hop": pa.int32(), "path": pa.string(), "label": pa.string(),
                          "tenant": pa.string(), "text": pa.string()})

    def to_pandas(self) -> Any:
        """:meth:`to_arrow` as a ``pandas.DataFrame``, one row per hit.

        Raises:
            ImportError: pandas is not installed (``pip install pandas``).
        """
        return _to_pandas(self.to_arrow())

    def to_context(self, max_tokens: int = 1500, *, count_tokens: Optional[Callable[[str], int]] = None) -> str:
        """The hits as prompt-ready text within ``max_tokens``, best first: one line per hit,
        ``[key] (label) text``, and for a hit reached over edges the path after it,
        ``  via a --knows--> b``. A line that does not fit the budget is left out whole (with
        its path line), never cut. Counted as :meth:`HybridResult.to_context` counts.

        Raises:
            TypeError / InvalidArgumentError: a max_tokens that is not an int >= 1, a
                count_tokens that returns no int >= 0.
        """
        count = _check_budget(max_tokens, count_tokens)
        lines: list[str] = []
        used = 0
        for row in self.to_dicts():
            if row["text"] is None and row["label"] is None:
                continue  # deleted since the search
            label = f" ({row['label']})" if row["label"] else ""
            block = [f"[{row['key']}]{label} {' '.join(row['text'].split())}".rstrip()]
            if row["path"]:
                block.append(f"  via {row['path']}")
            cost = sum(count(line) for line in block) + len(block) - (0 if lines else 1)
            if used + cost <= max_tokens:
                lines.extend(block)
                used += cost
        return "\n".join(lines)

    @property
    def paths(self) -> list[list[Edge]]:
        if self._paths is None:
            edges = [Edge(*e) for e in self._engine.edges(self._edges)] if len(self._edges) else []
            offsets = self._offsets
            self._paths = [edges[offsets[i] : offsets[i + 1]] for i in range(len(self.keys))]
        return self._paths

    def __reduce__(self) -> tuple:
        return (_search_result_from_state,
                (self.keys, self.scores, self.hops, self.count_seeds, self.count_visited, self.paths,
                 self._node_fields()))

    def __len__(self) -> int:
        return len(self.keys)

    def __getitem__(self, i: Union[int, slice]) -> Union[Hit, list[Hit]]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self.keys)))]
        i = _count(i, "index")
        n = len(self.keys)
        if not -n <= i < n:
            raise IndexError(f"result index {i} out of range for {n} results")
        i %= n
        return Hit(self.keys[i], float(self.scores[i]), int(self.hops[i]), self.paths[i])

    def __iter__(self) -> Iterator[Hit]:
        for i in range(len(self.keys)):
            yield self[i]

    def __repr__(self) -> str:
        shown = ", ".join(f"{k!r}: {s:.4f}" for k, s in zip(self.keys[:5], self.scores[:5]))
        more = ", ..." if len(self.keys) > 5 else ""
        return f"SearchResult({len(self.keys)} hits: {{{shown}{more}}}, visited={self.count_visited})"


def _search_result_from_state(keys: list, scores: np.ndarray, hops: np.ndarray, count_seeds: int,
                              count_visited: int, paths: list, nodes: Optional[list] = None) -> SearchResult:
    """A SearchResult made by unpickling: its paths (and its nodes' label, tenant and text,
    unless pickled before results carried them) are given, so it holds no engine."""
    result = SearchResult.__new__(SearchResult)
    result.keys, result.scores, result.hops = keys, scores, hops
    result.count_seeds, result.count_visited = count_seeds, count_visited
    result._offsets = result._edges = result._engine = None
    result._paths = paths
    result._nodes = nodes
    return result


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
                nodes[(type(hit.key), hit.key)] = {"label": node.get("label"), "tenant": node.get("tenant"),
                                                   "text": node.get("text")}
        frozen = (nodes, self._edges_between_hits())
        return (HybridResult, (self.hits, self.edges, self.channels, self.lists, None, frozen, self.channel_scores))

    def _node(self, key: Any) -> Optional[dict]:
        """The node ``key`` as get_node(vector=False) gives it, or None when it was deleted since the search."""
        if self._frozen is not None:
            return self._frozen[0].get((type(key), key))
        try:
            return self._graph.get_node(key, vector=False)
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

    def _rank_columns(self) -> list:
        """``rank_<channel>`` for each channel that ran, and ``rank_fused`` after a reranker."""
        reranked = any("fused" in h.ranks for h in self.hits)
        return [f"rank_{c}" for c in self.channels] + (["rank_fused"] if reranked else [])

    def to_dicts(self) -> list[dict]:
        """One dict per hit, best first: ``key``, ``score`` (the fused score, or the reranker's),
        ``rank_<channel>`` for each channel that ran (int from 1, None where that channel did not
        return the hit; ``rank_fused``, the rank before reranking, when a reranker ran), ``hop``
        (edges walked to it by the graph channel; 0 when it did not reach it), ``path``
        (:func:`path_text`), ``label``, ``tenant``, ``text`` (None for a node deleted since the
        search; from the pickled copy once unpickled)."""
        if self._frozen is not None:
            nodes = [(n.get("label"), n.get("tenant"), n.get("text")) if n is not None else (None, None, None)
                     for n in (self._node(h.key) for h in self.hits)]
        else:
            nodes = _node_columns(self._graph._engine, [h.key for h in self.hits])
        ranks = self._rank_columns()
        rows = []
        for hit, node in zip(self.hits, nodes):
            row = {"key": hit.key, "score": float(hit.score)}
            row.update((name, hit.ranks.get(name[len("rank_"):])) for name in ranks)
            row.update(hop=len(hit.path), path=path_text(hit.path), label=node[0], tenant=node[1], text=node[2])
            rows.append(row)
        return rows

    def to_arrow(self) -> Any:
        """:meth:`to_dicts` as a ``pyarrow.Table``: key (string, or int64 when every key is an
        int), score (float64), rank_<channel> (int32, null where absent), hop (int32), path,
        label, tenant, text (string)."""
        import pyarrow as pa

        ranks = self._rank_columns()
        types = {"score": pa.float64(), "hop": pa.int32(), "path": pa.string(), "label": pa.string(),
                 "tenant": pa.string(), "text": pa.string(), **{name: pa.int32() for name in ranks}}
        return _to_arrow(self.to_dicts(), ["key", "score", *ranks, "hop", "path", "label", "tenant", "text"], types)

    def to_pandas(self) -> Any:
        """:meth:`to_arrow` as a ``pandas.DataFrame``, one row per hit.

        Raises:
            ImportError: pandas is not installed (``pip install pandas``).
        """
        return _to_pandas(self.to_arrow())

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
        count = _check_budget(max_tokens, count_tokens)
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


# ------------------------------------------------------------------ rows, tables, context

def _node_columns(engine: Any, keys: list) -> list:
    """``[(label, tenant, text), ...]`` of ``keys`` as the graph holds them now, (None, None,
    None) for a key deleted since the search (one call for all when none is)."""
    if engine is None or not keys:
        return [(None, None, None)] * len(keys)
    try:
        texts, tenants, labels, _ = engine.text_columns(keys)
        return list(zip(labels, tenants, texts))
    except Exception:  # some key was deleted since the search: one by one
        out = []
        for key in keys:
            try:
                texts, tenants, labels, _ = engine.text_columns([key])
                out.append((labels[0], tenants[0], texts[0]))
            except Exception:
                out.append((None, None, None))
        return out


def path_text(path: list) -> str:
    """A path of edges as one line, each edge as it is stored, ``src --rel--> dst``, chained
    while each starts where the last one ended (``"a --knows--> b --likes--> c"``), else
    separated by ``"; "`` (an edge walked against its direction); "" for no edges."""
    out = ""
    last: Any = None
    for edge in path:
        if out and edge.src == last:
            out += f" --{edge.rel}--> {edge.dst}"
        else:
            out += ("; " if out else "") + f"{edge.src} --{edge.rel}--> {edge.dst}"
        last = edge.dst
    return out


def _key_array(keys: list) -> Any:
    import pyarrow as pa

    if all(isinstance(k, str) for k in keys):
        return pa.array(keys, pa.string())
    if all(isinstance(k, int) for k in keys):
        return pa.array(keys, pa.int64())
    return pa.array([str(k) for k in keys], pa.string())  # int and str keys in one result


def _to_pandas(table: Any) -> Any:
    """``table.to_pandas()``, with an ImportError that says how to get pandas when it is missing."""
    try:
        import pandas  # noqa: F401
    except ImportError as e:
        raise ImportError(f"to_pandas needs pandas: pip install pandas ({e})") from e
    return table.to_pandas()


def _to_arrow(rows: list, columns: list, types: dict) -> Any:
    import pyarrow as pa

    arrays = []
    for name in columns:
        values = [row[name] for row in rows]
        arrays.append(_key_array(values) if name == "key" else pa.array(values, types[name]))
    return pa.Table.from_arrays(arrays, names=columns)


def _check_budget(max_tokens: Any, count_tokens: Optional[Callable[[str], int]]) -> Callable[[str], int]:
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

    return count
