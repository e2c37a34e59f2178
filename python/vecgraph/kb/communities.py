"""Hierarchical communities of an entity graph: Leiden at several levels of detail.

Level 0 is the Leiden partition (Traag, Waltman and van Eck, "From Louvain to Leiden:
guaranteeing well-connected communities", Scientific Reports 9, 5233, 2019) of the whole graph
under modularity with a resolution parameter (the RB configuration model; resolution 1.0 is
Newman-Girvan modularity). Each deeper level runs Leiden again inside every community of the
level above that has more than ``max_cluster_size`` members, and carries the smaller
communities down unchanged: the hierarchy of Edge et al., "From Local to Global: A Graph RAG
Approach to Query-Focused Summarization" (2024), as graspologic's ``hierarchical_leiden``
builds it. A community at level ``l + 1`` therefore always lies inside one community of level
``l``.

The optimisation runs in the C implementation of the algorithm that ships with igraph
(``Graph.community_leiden``, by the author of ``leidenalg``): on a sparse planted-partition
graph of 30,000 vertices and 90,000 edges, iterated to convergence, it took 1.4 s against
3.1 s for ``leidenalg.find_partition`` with its default two iterations, at a slightly higher
modularity (0.800 against 0.797); the tests check its quality against ``leidenalg``.

:func:`community_key` names a community by its members, so that re-running the clustering
keeps the id of every community whose members did not change; :func:`centrality` ranks the
entities of one community by their weighted degree inside it (:func:`level_centrality`: of
every community of a level in one pass).
"""

from __future__ import annotations

import hashlib
import numbers
import random
import threading
from collections.abc import Iterable
from typing import Any

import numpy as np

from ..arguments import _count_at_least, _finite_reals
from ..errors import InvalidArgumentError, _got

__all__ = ["centrality", "community_key", "leiden_levels", "level_centrality"]

# igraph draws its random numbers from one process-wide generator; a run installs a generator
# seeded for it and puts the default (Python's ``random`` module, igraph's own default) back.
_RNG_LOCK = threading.Lock()


# ------------------------------------------------------------------------------- arguments


def _igraph() -> Any:
    """The ``igraph`` module (imported on first use: ``import vecgraph`` works without it)."""
    try:
        import igraph
    except ImportError as exc:
        raise ImportError('communities need igraph: pip install "vecgraph[kb]"') from exc
    return igraph


def _vertex_array(values: Any, name: str, n: int) -> np.ndarray:
    array = np.asarray(values)
    if array.ndim != 1:
        raise InvalidArgumentError(f"{name} must be a 1-D array of vertex indices, got shape {array.shape}")
    if array.size == 0:
        return np.zeros(0, dtype=np.int64)
    if array.dtype == np.bool_ or not np.issubdtype(array.dtype, np.integer):
        raise TypeError(f"{name} must hold integer vertex indices, got dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    low, high = int(array.min()), int(array.max())
    if low < 0 or high >= n:
        bad = low if low < 0 else high
        raise InvalidArgumentError(f"{name} must hold vertex indices in [0, {n}), got {bad}")
    return array


def _checked(n: Any, src: Any, dst: Any, weight: Any) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Checks an edge list; returns ``(n, src, dst, w)`` as int64, int64, float64 arrays."""
    n = _count_at_least(n, "n", 0)
    src = _vertex_array(src, "src", n)
    dst = _vertex_array(dst, "dst", n)
    if src.shape != dst.shape:
        raise InvalidArgumentError(f"src and dst must have the same length, got {src.size} and {dst.size}")
    if weight is None:
        w = np.ones(src.size, dtype=np.float64)
    else:
        w = np.asarray(weight)
        if w.ndim != 1 or w.size != src.size:
            raise InvalidArgumentError(
                f"weight must be a 1-D array of one weight per edge ({src.size}), got shape {w.shape}"
            )
        w = _finite_reals(w, "weight", "edge")
        if w.size and (w < 0).any():
            raise InvalidArgumentError(
                f"weight must be >= 0, got {w[w < 0][0]} at edge {int(np.flatnonzero(w < 0)[0])}"
            )
    return n, src, dst, w


def _edges(n: Any, src: Any, dst: Any, weight: Any) -> tuple[int, np.ndarray, np.ndarray, np.ndarray]:
    """Checks an edge list and returns ``(n, lo, hi, w)``: each undirected pair once
    (``lo < hi``, sorted by ``(lo, hi)``), duplicate pairs summed, self-loops and pairs of
    total weight 0 dropped; ``w`` is float64."""
    n, src, dst, w = _checked(n, src, dst, weight)
    keep = src != dst
    lo = np.minimum(src, dst)[keep]
    hi = np.maximum(src, dst)[keep]
    w = w[keep]
    if lo.size == 0:
        empty = np.zeros(0, dtype=np.int64)
        return n, empty, empty.copy(), np.zeros(0, dtype=np.float64)
    pair = lo * np.int64(max(n, 1)) + hi
    unique, inverse = np.unique(pair, return_inverse=True)
    total = np.bincount(inverse.ravel(), weights=w, minlength=unique.size)
    positive = total > 0
    unique, total = unique[positive], total[positive]
    return n, unique // max(n, 1), unique % max(n, 1), total


# ------------------------------------------------------------------------------- leiden


def _leiden(
    size: int, lo: np.ndarray, hi: np.ndarray, w: np.ndarray, resolution: float, seed: int
) -> np.ndarray:
    """Leiden (modularity at ``resolution``, iterated until an iteration no longer improves it)
    over a graph of ``size`` vertices; returns the membership as an int64 array."""
    igraph = _igraph()
    graph = igraph.Graph(n=size, edges=np.column_stack([lo, hi]), directed=False)
    with _RNG_LOCK:
        igraph.set_random_number_generator(random.Random(seed))
        try:
            clustering = graph.community_leiden(
                objective_function="modularity", weights=w, resolution=resolution, n_iterations=-1
            )
        finally:
            igraph.set_random_number_generator(random)
    return np.asarray(clustering.membership, dtype=np.int64)


def _renumber(labels: np.ndarray) -> np.ndarray:
    """Renumbers labels 0.. in order of each label's first vertex; -1 stays -1."""
    out = np.full(labels.size, -1, dtype=np.int64)
    valid = labels >= 0
    if not valid.any():
        return out
    values, first, inverse = np.unique(labels[valid], return_index=True, return_inverse=True)
    rank = np.empty(values.size, dtype=np.int64)
    rank[np.argsort(first, kind="stable")] = np.arange(values.size, dtype=np.int64)
    out[valid] = rank[inverse.ravel()]
    return out


def _split_level(
    labels: np.ndarray,
    lo: np.ndarray,
    hi: np.ndarray,
    w: np.ndarray,
    max_cluster_size: int,
    resolution: float,
    seed: int,
) -> np.ndarray | None:
    """The next level below ``labels`` (numbered 0.. in order of first vertex), or None when
    no community is split."""
    n = labels.size
    valid = labels >= 0
    counts = np.bincount(labels[valid], minlength=int(labels.max()) + 1 if valid.any() else 0)
    big = np.flatnonzero(counts > max_cluster_size)
    if big.size == 0:
        return None
    # Local index of every vertex within its community (vertices sorted by (label, index)).
    order = np.argsort(np.where(valid, labels, -1), kind="stable")
    sorted_labels = labels[order]
    starts = np.searchsorted(sorted_labels, np.arange(counts.size))
    local = np.empty(n, dtype=np.int64)
    local[order] = np.arange(n, dtype=np.int64) - np.where(
        sorted_labels >= 0, starts[np.maximum(sorted_labels, 0)], 0
    )
    is_big = np.zeros(counts.size, dtype=bool)
    is_big[big] = True
    lab_lo = labels[lo]
    inside = (lab_lo == labels[hi]) & (lab_lo >= 0)
    inside &= is_big[np.maximum(lab_lo, 0)]
    e_comm = lab_lo[inside]
    e_order = np.argsort(e_comm, kind="stable")
    e_comm = e_comm[e_order]
    e_lo, e_hi, e_w = local[lo[inside][e_order]], local[hi[inside][e_order]], w[inside][e_order]
    bounds = np.searchsorted(e_comm, np.concatenate([big, big + 1]).reshape(2, -1))
    # New labels: a split community c takes labels (c, sub); encode as offset + sub.
    new = labels.copy()
    next_label = counts.size
    changed = False
    for i, c in enumerate(big):
        a, b = bounds[0, i], bounds[1, i]
        sub = _leiden(int(counts[c]), e_lo[a:b], e_hi[a:b], e_w[a:b], resolution, seed)
        parts = int(sub.max()) + 1 if sub.size else 1
        if parts <= 1:
            continue
        changed = True
        members = order[starts[c] : starts[c] + counts[c]]
        new[members] = next_label + sub
        next_label += parts
    return _renumber(new) if changed else None


def leiden_levels(
    n: int,
    src: np.ndarray,
    dst: np.ndarray,
    weight: np.ndarray | None = None,
    *,
    max_levels: int = 3,
    max_cluster_size: int = 50,
    resolution: float = 1.0,
    seed: int = 42,
) -> list[np.ndarray]:
    """Hierarchical Leiden communities of an undirected weighted graph.

    Level 0 is the Leiden partition of the whole graph under modularity with ``resolution``
    (RB configuration model; Traag, Waltman and van Eck, Sci. Rep. 2019). Level ``l + 1``
    runs Leiden again inside each community of level ``l`` with more than ``max_cluster_size``
    members (on the subgraph it induces) and carries the other communities down unchanged, as
    graspologic's ``hierarchical_leiden`` and Edge et al. (GraphRAG, 2024) do; a community of
    level ``l + 1`` lies inside one community of level ``l``. The levels stop early when one
    would change nothing (no community is larger than ``max_cluster_size``, or Leiden finds
    no split in any of them). Every Leiden run iterates until an iteration no longer improves
    the quality.

    Args:
        n: number of vertices (int >= 0); vertices are ``0 .. n-1``.
        src, dst: 1-D integer arrays of equal length ``m``: the edges' end vertices, each in
            ``[0, n)``. The graph is undirected: ``(u, v)`` and ``(v, u)`` are the same pair,
            and repeated pairs have their weights summed; self-loops are dropped.
        weight: 1-D array of ``m`` finite weights ``>= 0`` (any real dtype), or None for 1.0
            each. A pair whose summed weight is 0 is no edge.
        max_levels: at most this many levels (int >= 1).
        max_cluster_size: communities with more members than this (int >= 1) are split at
            the next level.
        resolution: modularity resolution (finite float > 0); larger gives smaller
            communities.
        seed: seed of the random choices (int >= 0); the same inputs and seed give the same
            levels. igraph draws from one process-wide generator: a run installs one seeded
            for it (under a lock) and puts igraph's default back afterwards.

    Returns:
        A list of 1 to ``max_levels`` int64 arrays of length ``n``: per level, the community
        index of each vertex, numbered ``0..`` in order of each community's first (lowest)
        vertex. Isolated vertices (no edge of positive weight) are ``-1`` at every level.

    Raises:
        TypeError: ``n``, ``max_levels``, ``max_cluster_size`` or ``seed`` not an int;
            ``src``/``dst`` not of an integer dtype; ``weight`` not real numbers;
            ``resolution`` not a real number.
        InvalidArgumentError: a negative ``n``; arrays not 1-D or of different lengths; a
            vertex index outside ``[0, n)``; a weight that is negative, NaN or infinite;
            ``max_levels`` or ``max_cluster_size`` < 1; ``resolution`` not finite or <= 0; a
            negative ``seed``.
    """
    n, lo, hi, w = _edges(n, src, dst, weight)
    max_levels = _count_at_least(max_levels, "max_levels", 1)
    max_cluster_size = _count_at_least(max_cluster_size, "max_cluster_size", 1)
    seed = _count_at_least(seed, "seed", 0)
    if isinstance(resolution, bool) or not isinstance(resolution, numbers.Real):
        raise TypeError(f"resolution must be a float, got {_got(resolution)}")
    resolution = float(resolution)
    if not np.isfinite(resolution) or resolution <= 0:
        raise InvalidArgumentError(f"resolution must be a finite number > 0, got {resolution}")

    degree = np.bincount(lo, minlength=n) + np.bincount(hi, minlength=n)
    labels = np.full(n, -1, dtype=np.int64)
    if lo.size:
        labels = _leiden(n, lo, hi, w, resolution, seed)
        labels[degree == 0] = -1
    levels = [_renumber(labels)]
    while len(levels) < max_levels:
        nxt = _split_level(levels[-1], lo, hi, w, max_cluster_size, resolution, seed)
        if nxt is None:
            break
        levels.append(nxt)
    return levels


def community_key(level: int, member_keys: Iterable[Any]) -> str:
    """A stable id for a community: ``"community:{level}:{digest}"``.

    ``digest`` is the 64-bit BLAKE2b (16 hex digits) of the members' ``repr`` strings, sorted
    and joined by newlines, so it depends only on the set of members (not their order or
    repetitions): re-running the clustering keeps the id of every community whose members did
    not change. NumPy integers and strings count as the Python ``int`` / ``str`` of the same
    value.

    Args:
        level: the community's level (int >= 0).
        member_keys: the members' keys (str or int as a rule; any values with a stable
            ``repr``), at least one.

    Returns:
        The id, e.g. ``"community:1:9f86d081884c7d65"``.

    Raises:
        TypeError: ``level`` not an int, or ``member_keys`` a str / not iterable.
        InvalidArgumentError: a negative ``level``, or no members.
    """
    level = _count_at_least(level, "level", 0)
    if isinstance(member_keys, (str, bytes)) or not isinstance(member_keys, Iterable):
        raise TypeError(f"member_keys must be an iterable of keys, got {_got(member_keys)}")
    reprs = set()
    for key in member_keys:
        if isinstance(key, np.generic):
            key = key.item()
        reprs.add(repr(key))
    if not reprs:
        raise InvalidArgumentError("member_keys must name at least one member, got none")
    digest = hashlib.blake2b("\n".join(sorted(reprs)).encode("utf-8"), digest_size=8).hexdigest()
    return f"community:{level}:{digest}"


def centrality(
    n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray | None, members: Any
) -> np.ndarray:
    """Weighted degree of each member of a community inside it (for ranking its entities).

    The graph is read as in :func:`leiden_levels` (undirected, repeated pairs summed,
    self-loops dropped); a member's centrality is the total weight of its edges to the other
    members.

    Args:
        n, src, dst, weight: the graph, as for :func:`leiden_levels`.
        members: 1-D integer array-like of the community's vertices, each in ``[0, n)``.

    Returns:
        float64 array aligned with ``members``: the weighted degree of each inside the
        community.

    Raises:
        TypeError, InvalidArgumentError: as :func:`leiden_levels` for the graph; ``members``
            not integers or out of range.
    """
    n, src, dst, w = _checked(n, src, dst, weight)
    members = _vertex_array(members, "members", n)
    inside = np.zeros(n, dtype=bool)
    inside[members] = True
    keep = inside[src] & inside[dst] & (src != dst)
    s, d, x = src[keep], dst[keep], w[keep]
    degree = np.bincount(s, weights=x, minlength=n) + np.bincount(d, weights=x, minlength=n)
    return degree[members].astype(np.float64)


def level_centrality(
    n: int, src: np.ndarray, dst: np.ndarray, weight: np.ndarray | None, labels: np.ndarray
) -> np.ndarray:
    """:func:`centrality` of every vertex within its own community, for a whole level at once.

    One pass over the edges instead of one per community: for a level of thousands of
    communities this is what to call (``centrality(..., members)`` equals
    ``level_centrality(..., labels)[members]`` for the members of one community).

    Args:
        n, src, dst, weight: the graph, as for :func:`leiden_levels`.
        labels: int array of length ``n``: a level of :func:`leiden_levels` (``-1``: no
            community).

    Returns:
        float64 array of length ``n``: each vertex's total edge weight to the other members of
        its community (0.0 for a vertex labelled ``-1``).

    Raises:
        TypeError, InvalidArgumentError: as :func:`leiden_levels` for the graph; ``labels``
            not a 1-D integer array of length ``n``.
    """
    n, src, dst, w = _checked(n, src, dst, weight)
    labels = np.asarray(labels)
    if labels.shape != (n,):
        raise InvalidArgumentError(f"labels must be a 1-D array of length n ({n}), got shape {labels.shape}")
    if labels.size and (labels.dtype == np.bool_ or not np.issubdtype(labels.dtype, np.integer)):
        raise TypeError(f"labels must hold integer community indices, got dtype {labels.dtype}")
    keep = (labels[src] == labels[dst]) & (labels[src] >= 0) & (src != dst)
    s, d, x = src[keep], dst[keep], w[keep]
    return np.bincount(s, weights=x, minlength=n) + np.bincount(d, weights=x, minlength=n)
