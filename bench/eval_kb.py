"""vecgraph.KnowledgeBase on a real manual with real questions: the Debian FAQ's questions
against the Debian FAQ (its question headings taken out) and the Debian Reference
(:mod:`vecgraph.datasets.debian_docs`; ``apt-get install debian-faq debian-reference-en``).

Known item: a question's relevant chunks are the chunks of its answer (the section under its
heading). Rows: plain dense, BM25, hybrid, local search and tree search (RAPTOR, collapsed: the
chunks among the top 10 nodes), recall@10 / nDCG@10, for each chunker and with and without the
offline contextual prefix (title and heading path). Global search: for three global questions,
the top community summaries of level 0, and the share of the collection's sections they
represent (a section is represented when a summary quotes one of its sentences, or names one of
the entities its chunks mention).

    python bench/eval_kb.py --split dev              # choose defaults here
    python bench/eval_kb.py --split test --json bench/results/eval_kb_test.json

Everything offline: the wordllama embedder, the rule extractor, extractive summaries.
"""

from __future__ import annotations

import argparse
import json
import platform
import sys
import time
from typing import Any

import numpy as np
import vecgraph as vg
from vecgraph.datasets import debian_docs
from vecgraph.evaluate import ndcg_at_k, recall_at_k
from vecgraph.kb import Chunker, FixedChunker
from vecgraph.kb.documents import parse_text

K = 10
GLOBAL_QUESTIONS = (
    "What are the main topics of these documents?",
    "How does Debian manage software packages and their dependencies?",
    "How is the Debian project organised and how are its releases made?",
)
DEFAULT = "structure-512/64"  # Chunker()'s budget, chosen on the dev half
CHUNKERS = {
    "structure-256/32": lambda: Chunker(256, 32),
    "structure-128/16": lambda: Chunker(128, 16),
    "structure-512/64": lambda: Chunker(512, 64),
    "structure-1024/128": lambda: Chunker(1024, 128),
    "fixed-256/32": lambda: FixedChunker(256, 32),
    "fixed-512/64": lambda: FixedChunker(512, 64),
}


def no_prefix(document: Any, chunk: Any) -> str:
    return ""


def build(data: Any, chunker: str, prefix: bool, embedder: Any) -> tuple:
    options: dict = {"chunker": CHUNKERS[chunker]()}
    if not prefix:
        options["contextualizer"] = no_prefix
    kb = vg.KnowledgeBase.open(None, embedder=embedder, **options)
    documents = [parse_text(d.text, source=d.name, format="markdown") for d in data.documents]
    start = time.perf_counter()
    report = kb.add_documents(documents, progress=False)
    return kb, report, time.perf_counter() - start


def relevant_chunks(kb: Any, data: Any) -> dict:
    """qid -> the keys of the chunks that hold a sentence of the question's answer (the section
    under its heading; sentences of 30 characters or more, whitespace collapsed), or, for an
    answer without such a sentence, the chunks under that heading. One rule for every chunker:
    a fixed-size window holds an answer's sentence whatever heading it starts under."""

    def flat(text: str) -> str:
        return " ".join(text.split())

    documents = {d.name: parse_text(d.text, source=d.name, format="markdown") for d in data.documents}
    by_doc: dict = {}
    for key in kb.graph.keys(labels=["chunk"]):
        node = kb.graph.get_node(key, vector=False)
        props = node["props"]
        by_doc.setdefault(props["source"], []).append(
            (key, props["heading_path"], flat(node["text"][props["body_start"] :]))
        )
    out = {}
    for q in data.questions:
        section = next(
            s for s in documents[q.document].sections if s.heading_path and s.heading_path[-1] == q.heading
        )
        sentences = [flat(x) for x in vg.kb.summaries.split_sentences(section.text) if len(flat(x)) >= 30]
        chunks = by_doc.get(q.document, [])
        found = {key for key, _, body in chunks if any(x in body for x in sentences)}
        out[q.qid] = found or {key for key, path, _ in chunks if q.heading in path}
    return out


def score(kb: Any, questions: list, relevant: dict, run: Any) -> dict:
    recall, ndcg, times = [], [], []
    for q in questions:
        start = time.perf_counter()
        keys = run(q.text)
        times.append(time.perf_counter() - start)
        recall.append(recall_at_k(keys, relevant[q.qid], K))
        ndcg.append(ndcg_at_k(keys, relevant[q.qid], K))
    return {
        "recall@10": float(np.mean(recall)),
        "ndcg@10": float(np.mean(ndcg)),
        "p50_ms": float(np.percentile(times, 50) * 1e3),
    }


def runs(kb: Any, tree: bool) -> dict:
    out = {
        "dense": lambda text: kb.search(text, K, mode="dense").keys(),
        "bm25": lambda text: kb.search(text, K, mode="bm25").keys(),
        "hybrid": lambda text: kb.search(text, K, mode="hybrid").keys(),
        "local": lambda text: kb.local_search(text, K).keys(),
    }
    if tree:
        out["tree"] = lambda text: kb.tree_search(text, K, strategy="collapsed").keys()
    return out


def coverage(kb: Any, level: int, k: int) -> dict:
    """For each global question: its top ``k`` summaries and the share of sections represented."""
    g = kb.graph
    sections: dict = {}  # (source, heading path) -> (sentences, entity keys)
    for key in g.keys(labels=["chunk"]):
        node = g.get_node(key, vector=False)
        props = node["props"]
        slot = sections.setdefault((props["source"], tuple(props["heading_path"])), [set(), set()])
        body = node["text"][props["body_start"] :]
        slot[0].update(s.strip() for s in vg.kb.summaries.split_sentences(body) if len(s.strip()) > 20)
        slot[1].update(e.dst for e in g.neighbors(key, rels=["mentions"]))
    out = []
    for question in GLOBAL_QUESTIONS:
        result = kb.global_search(question, level=level, k=k)
        members: set = set()
        quoted = 0
        named = 0
        text = " ".join(hit.summary for hit in result.communities)
        for hit in result.communities:
            members.update(e.src for e in g.neighbors(hit.key, rels=["member_of"], direction="in"))
        for sentences, entities in sections.values():
            q = any(s in text for s in sentences)
            quoted += q
            named += q or bool(entities & members)
        out.append(
            {
                "question": question,
                "summaries": [
                    {"title": h.title, "summary": h.summary, "size": h.size} for h in result.communities
                ],
                "sections": len(sections),
                "quoted": quoted / len(sections),
                "represented": named / len(sections),
            }
        )
    return out


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--split", choices=("dev", "test", "all"), default="test")
    parser.add_argument("--chunkers", nargs="+", choices=sorted(CHUNKERS), default=list(CHUNKERS))
    parser.add_argument("--json", metavar="PATH", help="write the figures as JSON")
    args = parser.parse_args(argv)
    embedder = vg.embedders.load("wordllama")
    data = debian_docs.load(args.split)
    print(
        f"{len(data.documents)} documents, {len(data.questions)} questions ({args.split}); "
        f"{platform.processor() or platform.machine()}, {platform.python_version()}"
    )
    rows = []
    default_kb = None
    for chunker in args.chunkers:
        for prefix in (True, False):
            kb, report, seconds = build(data, chunker, prefix, embedder)
            relevant = relevant_chunks(kb, data)
            main_row = chunker == DEFAULT and prefix
            tree_seconds = None
            if main_row:
                tree_seconds = kb.build_tree().seconds
            for mode, run in runs(kb, main_row).items():
                figures = score(kb, data.questions, relevant, run)
                row = {
                    "chunker": chunker,
                    "prefix": prefix,
                    "mode": mode,
                    "chunks": report.chunks,
                    "ingest_s": round(seconds, 2),
                    **figures,
                }
                rows.append(row)
                print(
                    f"{chunker:18} prefix={'on ' if prefix else 'off'} {mode:7} recall@10 {figures['recall@10']:.3f}"
                    f"  nDCG@10 {figures['ndcg@10']:.3f}  p50 {figures['p50_ms']:.2f} ms  "
                    f"({report.chunks} chunks, ingest {seconds:.1f} s)",
                    flush=True,
                )
            if main_row:
                default_kb = (kb, report, tree_seconds)
            else:
                kb.close()
    out: dict = {"split": args.split, "questions": len(data.questions), "rows": rows}
    if default_kb is not None:
        kb, report, tree_seconds = default_kb
        creport = kb.build_communities()
        out["entities"] = kb.stats()["entity"]
        out["communities"] = creport.levels
        out["community_seconds"] = creport.seconds
        out["tree_seconds"] = tree_seconds
        out["global"] = coverage(kb, 0, 5)
        print(
            f"entities {out['entities']}, communities per level {creport.levels} ({creport.seconds:.1f} s); "
            f"RAPTOR tree {tree_seconds:.1f} s"
        )
        for item in out["global"]:
            print(
                f"\nGLOBAL: {item['question']}  sections quoted {item['quoted']:.3f}, represented "
                f"{item['represented']:.3f} of {item['sections']}"
            )
            for s in item["summaries"]:
                print(f"  - {s['title']} ({s['size']} entities): {s['summary'][:300]}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
