"""The ``vecgraph`` command (also ``python -m vecgraph``).

Subcommands:
  demo   build a clustered synthetic graph, run graph-guided searches, and print what they
         found, how fast, and how close the HNSW path is to the exact one
  info   version, kernel ISA and the ISAs this CPU can run
"""

from __future__ import annotations

import argparse
import sys
import time
from typing import Optional, Sequence

import numpy as np

from . import __version__, active_isa, available_isas
from .errors import Error


def _progress(total: int, desc: str, unit: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=not sys.stderr.isatty())


def _int_in(low: int, high: int):
    """argparse type: an int in [low, high], named in the error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer in [{low:,}, {high:,}], got {value:,}")
        return value

    return parse


def _walk(hit) -> str:
    """The path of a hit as walked from its seed: ``seed -rel-> a <-rel- hit`` (arrows as stored)."""
    if not hit.path:
        return "(seed)"
    node, parts = hit.key, []
    for edge in reversed(hit.path):
        if edge.dst == node:
            parts.append(f"-{edge.rel}-> {node!r}")
            node = edge.src
        else:
            parts.append(f"<-{edge.rel}- {node!r}")
            node = edge.dst
    return " ".join([repr(node)] + parts[::-1])


def _cmd_info(args: argparse.Namespace) -> int:
    print(f"vecgraph {__version__}")
    print(f"active ISA: {active_isa()}")
    print(f"available ISAs: {', '.join(available_isas())}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .graph import Graph
    from .synthetic import clustered_graph, queries

    n, dim = args.nodes, args.dim
    print(f"vecgraph demo: {n:,} nodes, ~{5 * n:,} edges, {dim}-d, kernels: {active_isa()}")
    t0 = time.perf_counter()
    data = clustered_graph(n, dim=dim, seed=args.seed)
    print(f"  generated in {time.perf_counter() - t0:.1f} s")

    g = Graph(dim=dim, metric="cos")
    t0 = time.perf_counter()
    batch = max(1, n // 20)
    with _progress(n, "add_nodes (quantize + HNSW)", "node") as bar:
        for start in range(0, n, batch):
            stop = min(n, start + batch)
            g.add_nodes(data.keys[start:stop], data.vectors[start:stop], labels=f"cluster-{start // batch % 4}")
            bar.update(stop - start)
    t_nodes = time.perf_counter() - t0
    t0 = time.perf_counter()
    rels = [data.rel_names[i] for i in data.rel_ids]
    g.add_edges(data.src, data.dst, rels=rels, weights=data.weights)
    t_edges = time.perf_counter() - t0
    print(f"  add_nodes {t_nodes:.1f} s ({n / t_nodes:,.0f} nodes/s), add_edges {t_edges:.2f} s")

    qs = queries(data, args.queries, seed=args.seed + 1)
    params = dict(k=10, seeds=8, hops=2, max_visited=2000)
    g.search(qs[0], **params)  # builds the CSR once, warms caches
    latencies, recalls = [], []
    for q in qs:
        t0 = time.perf_counter_ns()
        fast = g.search(q, **params)
        latencies.append(time.perf_counter_ns() - t0)
        exact = g.search(q, exact=True, **params)
        recalls.append(len(set(fast.keys) & set(exact.keys)) / max(1, len(exact.keys)))
    lat_us = np.array(latencies) / 1e3
    print(f"  search (k=10, seeds=8, hops=2, max_visited=2000), {len(qs)} queries, one thread:")
    print(f"    p50 {np.percentile(lat_us, 50):.0f} µs   p99 {np.percentile(lat_us, 99):.0f} µs   "
          f"recall@10 vs exact seeds {np.mean(recalls):.3f}")
    t0 = time.perf_counter()
    g.search_batch(qs, **params)
    t_batch = time.perf_counter() - t0
    print(f"    search_batch on all cores: {len(qs) / t_batch:,.0f} queries/s")

    res = g.search(qs[0], **params)
    print("  top 5 for the first query (key, score, hop, path from its seed):")
    for hit in res[:5]:
        print(f"    {hit.key!r:>10}  {hit.score:.4f}  hop {hit.hop}  {_walk(hit)}")
    # The best hits are usually seeds; show what the walk added beyond them.
    reached = [hit for hit in res if hit.hop > 0]
    if not reached:
        reached = [hit for hit in g.search(qs[0], **{**params, "k": 50}) if hit.hop > 0][:3]
    print("  reached through the graph (not among the seeds):")
    for hit in reached[:3]:
        print(f"    {hit.key!r:>10}  {hit.score:.4f}  hop {hit.hop}  {_walk(hit)}")
    return 0


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="vecgraph", description="Embedded graph-vector engine.")
    parser.add_argument("--debug", action="store_true", help="show tracebacks on errors")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="build a synthetic graph and run graph-guided searches")
    demo.add_argument("--nodes", type=_int_in(100, 10_000_000), default=100_000,
                      help="number of nodes, 100 to 10,000,000 (default 100,000)")
    demo.add_argument("--dim", type=_int_in(2, 4096), default=384, help="vector dimension (default 384)")
    demo.add_argument("--queries", type=_int_in(1, 100_000), default=500, help="number of queries (default 500)")
    demo.add_argument("--seed", type=_int_in(0, 2**32 - 1), default=0, help="random seed (default 0)")
    demo.set_defaults(run=_cmd_demo)

    info = sub.add_parser("info", help="version and SIMD kernels in use")
    info.set_defaults(run=_cmd_info)

    args = parser.parse_args(argv)
    try:
        return args.run(args)
    except (Error, ValueError, TypeError, OSError, MemoryError) as exc:
        if args.debug:
            raise
        print(f"vecgraph {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
