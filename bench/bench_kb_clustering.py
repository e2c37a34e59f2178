"""The numeric parts of vecgraph.kb: hierarchical Leiden over an entity graph and RAPTOR
clustering of chunk vectors (plus the offline summarisers), wall-clock seconds.

Entity graph (:func:`entity_graph`, seeded): 100,000 vertices in planted communities whose
sizes follow a Pareto law (5 to 2,000 members), degree propensities from a Pareto law
(exponent 1.1, capped at 2,000: power-law degrees, hubs of degree ~2,000, ~17% of the
vertices without an edge, like entities named once), 300,000 edges, 80% of them inside a
community (both ends drawn by propensity), weights uniform in [0.1, 1.1). Timed:
``leiden_levels`` with its defaults (3 levels, max_cluster_size 50); then ``level_centrality``
for every level and ``community_key`` for every community; ``centrality`` of one community.
Target: leiden_levels <= 30 s on 2 cores.

Chunk vectors (:func:`chunk_vectors`, seeded): 10,000 x 256 float32 unit vectors, 20 topics of
10 subtopics each (topic direction + 0.8 subtopic direction + noise 1.2, normalised: cosine
~0.55 inside a subtopic, ~0.3 inside a topic, ~0 across). Timed: ``cluster`` with its
defaults (max_cluster_size 10, hard), with ``threshold=0.1`` (soft, the paper's), and on the
level-2 input: one vector per level-1 cluster (its members' normalised mean, a stand-in for
the summary's embedding). Target: a whole RAPTOR build of 10,000 chunks <= 60 s on 2 cores,
clustering of every level included. Purity: the share of rows whose cluster's majority
subtopic is their own.

    python bench/bench_kb_clustering.py [--entities 100000] [--edges 300000] [--chunks 10000]
                                        [--dim 256] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import time

import numpy as np
from sklearn.metrics import normalized_mutual_info_score
from vecgraph.kb.communities import centrality, community_key, leiden_levels, level_centrality
from vecgraph.kb.raptor import cluster
from vecgraph.kb.summaries import centroid_summary, community_summary, split_sentences


def entity_graph(n: int = 100_000, m: int = 300_000, p_in: float = 0.8, seed: int = 0):
    """``(src, dst, weight, planted)``: a sparse graph with planted communities and power-law
    degrees (see the module docstring)."""
    rng = np.random.default_rng(seed)
    sizes = []
    total = 0
    while total < n:
        size = min(n - total, int(min(2000, max(5, rng.pareto(1.5) * 20 + 5))))
        sizes.append(size)
        total += size
    sizes = np.array(sizes)
    planted = np.repeat(np.arange(sizes.size), sizes)
    propensity = np.minimum(rng.pareto(1.1, n) + 1.0, 2000.0)
    starts = np.concatenate([[0], np.cumsum(sizes)])
    cum = np.cumsum(propensity)
    cum0 = np.concatenate([[0.0], cum])
    mass = cum0[starts[1:]] - cum0[starts[:-1]]
    inside = rng.random(m) < p_in
    k = int(inside.sum())
    comm = np.minimum(
        np.searchsorted(np.cumsum(mass), rng.random(k) * mass.sum(), side="right"), sizes.size - 1
    )

    def draw(lo: np.ndarray, hi: np.ndarray) -> np.ndarray:
        return np.minimum(np.searchsorted(cum, lo + rng.random(lo.size) * (hi - lo), side="right"), n - 1)

    lo, hi = cum0[starts[comm]], cum0[starts[comm + 1]]
    zeros, full = np.zeros(m - k), np.full(m - k, cum[-1])
    src = np.concatenate([draw(lo, hi), draw(zeros, full)])
    dst = np.concatenate([draw(lo, hi), draw(zeros, full)])
    return src, dst, rng.random(m) + 0.1, planted


def chunk_vectors(n: int = 10_000, d: int = 256, topics: int = 20, sub: int = 10, seed: int = 0):
    """``(vectors, subtopic)``: clustered float32 unit vectors (see the module docstring)."""
    rng = np.random.default_rng(seed)
    topic_dirs = rng.normal(size=(topics, d))
    sub_dirs = rng.normal(size=(topics, sub, d))
    t = rng.integers(0, topics, n)
    s = rng.integers(0, sub, n)
    x = topic_dirs[t] + 0.8 * sub_dirs[t, s] + 1.2 * rng.normal(size=(n, d))
    x /= np.linalg.norm(x, axis=1, keepdims=True)
    return x.astype(np.float32), t * sub + s


def timed(fn, *args, **kwargs):
    start = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - start


def purity(clusters: list, labels: np.ndarray) -> float:
    return sum(int(np.bincount(labels[c]).max()) for c in clusters) / sum(c.size for c in clusters)


def describe(clusters: list) -> str:
    sizes = np.array([c.size for c in clusters])
    single = int((sizes == 1).sum())
    return f"{len(clusters):,} clusters, size max {sizes.max()} mean {sizes.mean():.1f}, {single} single"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entities", type=int, default=100_000)
    parser.add_argument("--edges", type=int, default=300_000)
    parser.add_argument("--chunks", type=int, default=10_000)
    parser.add_argument("--dim", type=int, default=256)
    parser.add_argument("--json", help="write the figures to this file")
    args = parser.parse_args()
    rows: list[tuple[str, float | None, str]] = []
    print(
        f"# vecgraph.kb clustering: {platform.processor() or platform.machine()}, "
        f"{os.cpu_count()} CPUs, Python {platform.python_version()}"
    )

    src, dst, weight, planted = entity_graph(args.entities, args.edges)
    levels, seconds = timed(leiden_levels, args.entities, src, dst, weight)
    counts = [int(labels.max()) + 1 for labels in levels]
    largest = [int(np.bincount(labels[labels >= 0]).max()) for labels in levels]
    rows.append(
        (
            f"leiden_levels {args.entities:,} entities, {args.edges:,} edges",
            seconds,
            f"communities per level {counts}, largest {largest}, {int((levels[0] < 0).sum()):,} isolated",
        )
    )
    linked = levels[0] >= 0
    rows.append(
        (
            "  level 0 vs planted (NMI)",
            None,
            f"{normalized_mutual_info_score(planted[linked], levels[0][linked]):.3f}",
        )
    )
    start = time.perf_counter()
    keys = 0
    groups = []
    for level, labels in enumerate(levels):
        level_centrality(args.entities, src, dst, weight, labels)
        order = np.argsort(labels, kind="stable")
        bounds = np.searchsorted(labels[order], np.arange(int(labels.max()) + 2))
        for c in range(int(labels.max()) + 1):
            members = order[bounds[c] : bounds[c + 1]]
            groups.append(members)
            community_key(level, [f"entity:{i}" for i in members.tolist()])
            keys += 1
    rows.append((f"level_centrality + community_key, {keys:,} communities", time.perf_counter() - start, ""))
    sample = groups[:: max(1, len(groups) // 200)]
    start = time.perf_counter()
    for members in sample:
        centrality(args.entities, src, dst, weight, members)
    per_call = (time.perf_counter() - start) / len(sample)
    rows.append(
        (
            "centrality, one community",
            per_call,
            f"{per_call * 1e3:.2f} ms: mean of {len(sample)} calls, one pass over the edges each",
        )
    )

    vectors, subtopic = chunk_vectors(args.chunks, args.dim)
    level1, seconds = timed(cluster, vectors)
    rows.append(
        (
            f"cluster {args.chunks:,} x {args.dim} (hard)",
            seconds,
            f"{describe(level1)}, purity {purity(level1, subtopic):.3f}",
        )
    )
    soft, seconds = timed(cluster, vectors, threshold=0.1)
    total = sum(c.size for c in soft)
    rows.append(
        (
            f"cluster {args.chunks:,} x {args.dim} (threshold 0.1)",
            seconds,
            f"{describe(soft)}, {total / args.chunks:.3f} clusters a row",
        )
    )
    means = np.stack([vectors[c].mean(axis=0) for c in level1])
    means /= np.linalg.norm(means, axis=1, keepdims=True)
    level2, seconds2 = timed(cluster, means)
    rows.append((f"cluster level 2: {means.shape[0]:,} x {args.dim}", seconds2, describe(level2)))
    tree_seconds = rows[-3][1] + seconds2
    upper = level2
    vecs = means
    while len(upper) > 1:  # the remaining levels, up to the root
        vecs = np.stack([vecs[c].mean(axis=0) for c in upper])
        vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
        upper, s = timed(cluster, vecs)
        tree_seconds += s
    rows.append(("cluster, every level of the tree", tree_seconds, "target: whole build <= 60 s"))

    rng = np.random.default_rng(1)
    vocab = [f"w{i}" for i in range(500)]
    text = " ".join(" ".join(rng.choice(vocab, rng.integers(5, 25))) + "." for _ in range(300))
    sentences, seconds = timed(split_sentences, text)
    rows.append((f"split_sentences, {len(text):,} characters", seconds, f"{len(sentences)} sentences"))
    sentence_vectors = rng.normal(size=(len(sentences), 384)).astype(np.float32)
    summary, seconds = timed(
        centroid_summary, sentences, sentence_vectors, max_tokens=200, count_tokens=lambda s: len(s.split())
    )
    rows.append((f"centroid_summary, {len(sentences)} sentences", seconds, f"{len(summary.split())} words"))
    entities = [(vocab[i], float(50 - i)) for i in range(20)]
    report, seconds = timed(
        community_summary,
        "Community",
        entities,
        sentences,
        max_tokens=200,
        count_tokens=lambda s: len(s.split()),
    )
    rows.append(
        (
            f"community_summary, 20 entities, {len(sentences)} sentences",
            seconds,
            f"{len(report.split())} words",
        )
    )

    width = max(len(name) for name, _, _ in rows)
    print(f"\n| {'what'.ljust(width)} | seconds | notes |")
    print(f"|{'-' * (width + 2)}|--------:|-------|")
    for name, secs, note in rows:
        shown = "" if secs is None else f"{secs:.3f}"
        print(f"| {name.ljust(width)} | {shown:>7} | {note} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump([{"what": n, "seconds": s, "notes": t} for n, s, t in rows], f, indent=1)


if __name__ == "__main__":
    main()
