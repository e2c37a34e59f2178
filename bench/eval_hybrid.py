"""Every retrieval channel, the default fusion and RRF on the development sets, per split.

The development sets (each a real corpus with real judgments; see their modules):

- ``wordnet-sense``, ``wordnet-relation``: :mod:`vecgraph.datasets.wordnet` (the graph of
  ``vecgraph wordnet``, built there once and reopened here read-only).
- ``manpages``: :mod:`vecgraph.datasets.manpages` (known item: NAME summary -> its page).
- ``jargon``: :mod:`vecgraph.datasets.jargon` (see-also link prediction, the entry left out).

Each set is searched one query at a time on one thread (the BM25 channel in a second thread,
as ``hybrid_search`` does by default), the query vectors embedded beforehand by ``wordllama``.
Rows: each channel alone, ``hybrid`` (the defaults: convex fusion), ``hybrid (rrf)``
(``fusion="rrf"``), with recall@10, MRR@10, nDCG@10 and p50 / p99 latency; plus the dense
channel's recall@10 against an exact search at its default beam.

    python bench/eval_hybrid.py                       # held-out halves, every set
    python bench/eval_hybrid.py --split dev --sets manpages jargon --json out.json

Defaults are chosen on the ``dev`` halves only; the tables in bench/README.md are the
``heldout`` halves.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from typing import Any, Optional

import numpy as np

import vecgraph as vg
from vecgraph import embedders
from vecgraph.evaluate import evaluate

SETS = ("wordnet-sense", "wordnet-relation", "manpages", "jargon")
CACHE = os.path.join("~", ".cache", "vecgraph")
RUNS = {
    "dense": {"channels": ["dense"]},
    "bm25": {"channels": ["bm25"]},
    "entity": {"channels": ["entity"]},
    "graph": {"channels": ["graph"]},
    "hybrid": {},
    "hybrid (rrf)": {"fusion": "rrf"},
}


def _graph_of_tables(tables: dict, embedder: Any) -> Any:
    """An in-memory graph of a development set's tables: node texts embedded, aliases, edges."""
    nodes = tables["nodes"].to_pylist()
    edges = tables["edges"].to_pylist()
    vectors = embedders.embed(embedder, [n["text"] or n["key"] for n in nodes])
    g = vg.Graph(dim=vectors.shape[1])
    g.add_nodes([n["key"] for n in nodes], vectors, labels=[n["label"] for n in nodes],
                texts=[n["text"] for n in nodes])
    for n in nodes:
        if n["aliases"]:
            g.add_aliases(n["key"], n["aliases"])
    if edges:
        g.add_edges([e["src"] for e in edges], [e["dst"] for e in edges], rels=[e["rel"] for e in edges])
    return g


def load_set(name: str, split: str, embedder: Any) -> tuple:
    """(graph, queries as vecgraph.evaluate takes them) of one development set."""
    if name.startswith("wordnet"):
        from vecgraph import wordnet_demo
        from vecgraph.datasets import wordnet

        folder = os.path.expanduser(os.path.join(CACHE, "wordnet.vg"))
        if wordnet_demo._check_folder(folder) is None:
            graph, _ = wordnet_demo.build(folder, wordnet.load(split), embedder)
            graph.close()
        graph = vg.Graph.open(folder, read_only=True)
        graph.wait_for_indexing()
        kind = name.split("-", 1)[1]
        rows = [q for q in wordnet.load(split)["queries"].to_pylist() if q["kind"] == kind]
        if split == "dev":  # 46,344 / 30,235 dev queries, in synset order: an even sample of 2,000
            rows = rows[:: max(1, len(rows) // 2000)][:2000]
        queries = [{"qid": q["qid"], "text": q["text"], "relevant": q["relevant"]} for q in rows]
    else:
        from vecgraph.datasets import jargon, manpages

        module = {"manpages": manpages, "jargon": jargon}[name]
        tables = module.load(None)
        graph = _graph_of_tables(tables, embedder)
        queries = [{"qid": q["qid"], "text": q["text"], "relevant": q["relevant"], "exclude": q["exclude"]}
                   for q in tables["queries"].to_pylist() if q["split"] == split]
    vectors = embedders.embed(embedder, [q["text"] for q in queries])
    for q, v in zip(queries, vectors):
        q["vector"] = v
    return graph, queries


def dense_recall(graph: Any, queries: list, k: int = 10) -> float:
    """Recall@k of the dense channel at its default beam against an exact search."""
    found = 0
    for q in queries:
        exact = graph.search(q["vector"], k=k, seeds=k, hops=0, exact=True,
                             exclude_keys=q.get("exclude") or None).keys
        got = graph.hybrid_search(vector=q["vector"], k=k, channels=["dense"],
                                  exclude_keys=q.get("exclude") or None).keys
        found += len(set(exact) & set(got)) / max(1, len(exact))
    return found / len(queries)


def run(sets: tuple, split: str, limit: Optional[int], runs: dict, progress: Optional[bool]) -> dict:
    embedder = embedders.load("wordllama")
    out: dict = {"split": split, "machine": f"{platform.machine()} {os.cpu_count()} cores, {platform.processor()}",
                 "embedder": embedder.name, "sets": {}}
    for name in sets:
        t0 = time.perf_counter()
        graph, queries = load_set(name, split, embedder)
        if limit:
            queries = queries[:limit]
        report = evaluate(graph, queries, k=10, runs=runs, progress=progress)
        entry = report.to_dict()
        entry["dense_recall_vs_exact"] = dense_recall(graph, queries[:500])
        entry["nodes"], entry["edges"] = len(graph), graph.count_edges
        entry["seconds"] = time.perf_counter() - t0
        out["sets"][name] = entry
        print(f"\n{name} ({split}, {len(queries)} queries, {len(graph):,} nodes, {graph.count_edges:,} edges; "
              f"dense recall@10 vs exact {entry['dense_recall_vs_exact']:.3f})")
        print(report.table())
        graph.close()
    return out


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--sets", nargs="+", choices=SETS, default=list(SETS))
    parser.add_argument("--split", choices=("dev", "heldout"), default="heldout")
    parser.add_argument("--limit", type=int, default=None, help="the first N queries of each set")
    parser.add_argument("--json", metavar="PATH", help="write every figure to this JSON file")
    args = parser.parse_args(argv)
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    result = run(tuple(args.sets), args.split, args.limit, RUNS, None)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(result, f, indent=1, default=float)
    return 0


if __name__ == "__main__":
    sys.exit(main())
