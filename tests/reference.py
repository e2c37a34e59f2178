"""A plain, obviously-correct NumPy/Python implementation of vecgraph search.

This is the executable version of DESIGN.md "Search semantics" and the rules in
cpp/include/vecgraph/traversal.hpp / vector_store.hpp. It is deliberately slow and simple:
no SIMD, no CSR, no epoch marks, no partial sorts. Every fast path in the engine is checked
against it (tests/test_reference.py).

Quantization is tested separately (tests/test_api.py); here the stored int8 codes and float32
scales are taken from the graph itself (``g.quantized(keys)``) and the query is quantized with
``vg.quantize``. Everything after that (dot products, scores, seeds, expansion, top-k, paths) is
recomputed here from scratch.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

import numpy as np

F32 = np.float32


@dataclass
class Model:
    """What the reference needs to know about a graph, all in insertion order.

    Node i: keys[i], labels[i], tenants[i], ts[i], codes[i] (int8, dim), scales[i] (float32).
    Edge e (edge id = position): edges[e] = (src index, dst index, rel, weight).
    """

    metric: str
    dim: int
    keys: list = field(default_factory=list)
    labels: list = field(default_factory=list)
    tenants: list = field(default_factory=list)
    ts: list = field(default_factory=list)
    codes: np.ndarray = None  # (n, dim) int8
    scales: np.ndarray = None  # (n,) float32
    edges: list = field(default_factory=list)  # (src_idx, dst_idx, rel, weight float32)

    def __post_init__(self) -> None:
        if self.codes is None:
            self.codes = np.zeros((0, self.dim), dtype=np.int8)
        if self.scales is None:
            self.scales = np.zeros((0,), dtype=np.float32)


@dataclass
class RefResult:
    keys: list
    scores: np.ndarray  # float32
    hops: list
    paths: list  # list of lists of (src_key, rel, dst_key, weight)
    count_seeds: int
    count_visited: int


def build_model(graph: Any, keys: Sequence, labels: Sequence[str], tenants: Sequence[str], ts: Sequence[int],
                edges: Sequence[tuple]) -> Model:
    """A Model of ``graph`` whose nodes were added in the order of ``keys`` and whose edges were
    added in the order of ``edges`` (each ``(src_key, dst_key, rel, weight)``)."""
    keys = list(keys)
    if keys:
        codes, scales = graph.quantized(keys)
        codes = np.array(codes, dtype=np.int8)
        scales = np.array(scales, dtype=np.float32)
    else:
        codes = np.zeros((0, graph.dim), dtype=np.int8)
        scales = np.zeros((0,), dtype=np.float32)
    index = {_key_id(k): i for i, k in enumerate(keys)}
    model_edges = [(index[_key_id(s)], index[_key_id(d)], str(rel), F32(w)) for s, d, rel, w in edges]
    return Model(metric=graph.metric, dim=graph.dim, keys=keys, labels=list(labels), tenants=list(tenants),
                 ts=[int(t) for t in ts], codes=codes, scales=scales, edges=model_edges)


def _key_id(key: Any) -> tuple:
    # 1 and "1" are different keys; so are True-ish things, but bools are never keys.
    return (type(key).__name__, key)


# ----------------------------------------------------------------------------- scoring


def sq_norm(codes_row: np.ndarray, scale: np.float32) -> np.float32:
    """float32(sum code^2) * scale * scale, left to right, in float32."""
    total = F32(int(np.sum(codes_row.astype(np.int64) ** 2)))
    return F32(F32(total * F32(scale)) * F32(scale))


def score_one(metric: str, dot: int, scale_q: np.float32, sq_q: np.float32, scale_v: np.float32,
              sq_v: np.float32) -> np.float32:
    """The engine's score_from_dot, one operation at a time in float32."""
    product = F32(F32(dot) * F32(F32(scale_q) * F32(scale_v)))
    if metric == "l2":
        return F32(-(F32(F32(sq_q + sq_v) - F32(F32(2) * product))))
    if metric == "cos":
        return F32(product / np.sqrt(F32(F32(sq_q) * F32(sq_v))))
    return product


def quantize_query(query: Any, metric: str) -> tuple[np.ndarray, np.float32, np.float32]:
    import vecgraph as vg

    q = np.asarray(query, dtype=np.float32)[None]
    codes, scales = vg.quantize(q, metric)
    codes = np.asarray(codes, dtype=np.int8)[0]
    scale = F32(scales[0])
    return codes, scale, sq_norm(codes, scale)


def score_all(model: Model, query: Any) -> np.ndarray:
    """Score (float32) of every node of the model against the query, without decay."""
    q_codes, q_scale, q_sq = quantize_query(query, model.metric)
    out = np.zeros(len(model.keys), dtype=np.float32)
    q64 = q_codes.astype(np.int64)
    for i in range(len(model.keys)):
        dot = int(np.dot(q64, model.codes[i].astype(np.int64)))
        assert -(2**31) <= dot < 2**31
        out[i] = score_one(model.metric, dot, q_scale, q_sq, model.scales[i], sq_norm(model.codes[i], model.scales[i]))
    return out


# ----------------------------------------------------------------------------- search


def _admits(model: Model, i: int, labels, tenants, ts_min, ts_max) -> bool:
    if labels is not None and model.labels[i] not in labels:
        return False
    if tenants is not None and model.tenants[i] not in tenants:
        return False
    if ts_min is not None and model.ts[i] < ts_min:
        return False
    if ts_max is not None and model.ts[i] > ts_max:
        return False
    return True


def allowed_edges(model: Model, u: int, rels: Optional[set], direction: str, max_fanout: Optional[int]) -> list:
    """[(neighbor, edge_id)] of node u in traversal order, at most max_fanout (None: all)."""
    found = []  # (weight, edge id, neighbor)
    for e, (s, d, rel, w) in enumerate(model.edges):
        if rels is not None and rel not in rels:
            continue
        is_out = s == u
        is_in = d == u
        if direction == "out" and is_out:
            found.append((w, e, d))
        elif direction == "in" and is_in:
            found.append((w, e, s))
        elif direction == "both" and (is_out or is_in):
            if is_out:
                found.append((w, e, d))
            if is_in and not is_out:  # a self-loop counts once
                found.append((w, e, s))
        elif direction not in ("out", "in", "both"):
            raise ValueError(direction)
    found.sort(key=lambda t: (-float(t[0]), t[1]))
    if max_fanout is not None:
        found = found[:max_fanout]
    return [(v, e) for _, e, v in found]


def reference_search(model: Model, query: Any, k: int = 10, seeds: int = 8, hops: int = 2, max_visited: int = 2000,
                     rels: Optional[Sequence[str]] = None, direction: str = "both",
                     labels: Optional[Sequence[str]] = None, tenants: Optional[Sequence[str]] = None,
                     ts_min: Optional[int] = None, ts_max: Optional[int] = None, max_fanout: int = 256,
                     hop_decay: float = 1.0, extra_seeds: Optional[Sequence[int]] = None,
                     seed_weights: Optional[Sequence[float]] = None, min_hop: int = 0,
                     exclude: Optional[set] = None) -> RefResult:
    """The search rules of DESIGN.md, plus: ``extra_seeds`` (node indices seeded first, in this
    order, before the ``seeds`` most similar), ``exclude`` (node indices rejected like a filter
    rejects them), ``min_hop`` (hits nearer their seed are not returned) and ``seed_weights``
    (one per extra seed, with seeds=0: a node scores the weight of the seed its path starts
    from times float32(hop_decay ** (hop - 1)) past the first hop, ties by similarity)."""
    n = len(model.keys)
    rel_set = None if rels is None else set(rels)
    label_set = None if labels is None else set(labels)
    tenant_set = None if tenants is None else set(tenants)
    if n == 0:
        return RefResult([], np.zeros(0, np.float32), [], [], 0, 0)

    raw = score_all(model, query)

    def admits(i: int) -> bool:
        return (exclude is None or i not in exclude) and _admits(model, i, label_set, tenant_set, ts_min, ts_max)

    # Seeds: the extra seeds (admitted, each once, in order), then the `seeds` best admitted
    # nodes by (score desc, index asc) that are not among them.
    candidates = [i for i in range(n) if admits(i)]
    candidates.sort(key=lambda i: (-float(raw[i]), i))
    seed_list, weight_of = [], {}
    for j, i in enumerate(extra_seeds or ()):
        if admits(i) and i not in seed_list:
            seed_list.append(i)
            if seed_weights is not None:
                weight_of[i] = F32(seed_weights[j])
    seed_list += [i for i in candidates[:seeds] if i not in seed_list]

    # Level 0.
    visited: list[int] = []
    hop_of: dict[int, int] = {}
    parent: dict[int, Optional[int]] = {}
    origin: dict[int, int] = {}
    for s in seed_list:
        if len(visited) >= max_visited:
            break
        visited.append(s)
        hop_of[s] = 0
        parent[s] = None
        origin[s] = s

    # Levels 1..hops.
    full = len(visited) >= max_visited
    level = list(visited)
    for hop in range(1, hops + 1):
        if full or not level:
            break
        next_level = []
        for u in level:
            for v, e in allowed_edges(model, u, rel_set, direction, max_fanout):
                if v in hop_of:
                    continue
                if not admits(v):
                    continue
                visited.append(v)
                next_level.append(v)
                hop_of[v] = hop
                parent[v] = e
                origin[v] = origin[u]
                if len(visited) >= max_visited:
                    full = True
                    break
            if full:
                break
        level = next_level

    # Score, decay, top k.
    scored = []
    for i in visited:
        if hop_of[i] < min_hop:
            continue
        if seed_weights is not None:
            score = weight_of[origin[i]]
            if hop_of[i] > 1 and hop_decay != 1.0 and score != 0:
                score = F32(score * F32(hop_decay ** (hop_of[i] - 1)))
            scored.append((score, -float(raw[i]), i))
            continue
        score = F32(raw[i])
        if hop_decay != 1.0 and score != 0:  # decay moves every score down: multiply a positive one,
            # divide a negative one; 0 stays 0
            d = F32(hop_decay ** hop_of[i])
            score = F32(score * d) if score >= 0 else F32(score / d)
        scored.append((score, 0.0, i))
    scored.sort(key=lambda t: (-float(t[0]), t[1], t[2]))
    top = [(t[0], t[2]) for t in scored[:k]]

    def path_of(i: int) -> list:
        path = []
        node = i
        while parent[node] is not None:
            e = parent[node]
            s, d, rel, w = model.edges[e]
            path.append((model.keys[s], rel, model.keys[d], float(w)))
            node = d if s == node else s
        path.reverse()
        return path

    return RefResult(
        keys=[model.keys[i] for _, i in top],
        scores=np.array([s for s, _ in top], dtype=np.float32),
        hops=[hop_of[i] for _, i in top],
        paths=[path_of(i) for _, i in top],
        count_seeds=len(seed_list),
        count_visited=len(visited),
    )
