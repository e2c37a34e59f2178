"""Speed of vecgraph.KnowledgeBase with its offline defaults (wordllama, the rule extractor,
extractive summaries), one process on this machine's cores:

1. ingest: 1,000 pages of documentation (a page: 3,000 characters; the Debian Reference and
   FAQ as Markdown, repeated under other names until 1,000 pages) through ``add_documents``,
   embedding included;
2. a 100,000-chunk knowledge base (synthetic documents: sentences of words drawn from the
   Debian documents' own word frequencies, with package-like names drawn from a Zipf pool of
   60,000), its communities (Leiden over the entity graph), then ``local_search`` and
   ``global_search`` p50 / p99 over 300 questions (a sentence of a random chunk), next to
   ``search(mode="hybrid")`` on the same knowledge base and to a baseline ``local_search`` (the
   label filter inside the BM25 query, the entity walk after the chunks; each question runs
   through every call in turn);
3. RAPTOR: ``build_tree`` over the first 10,000 chunks' worth of documents.

    python bench/bench_kb.py                 # everything (about 10 minutes)
    python bench/bench_kb.py --parts ingest raptor --json out.json

The 100,000-chunk folder is kept in ~/.cache/vecgraph/bench-kb-100k.vg for later runs
(``--rebuild`` makes it again).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import sys
import time
from typing import Any

import numpy as np
import vecgraph as vg
from vecgraph import hybrid
from vecgraph.datasets import debian_docs
from vecgraph.kb import search as kb_search
from vecgraph.kb.documents import parse_text

PAGE_CHARS = 3000
CACHE = os.path.expanduser(os.path.join("~", ".cache", "vecgraph", "bench-kb-100k.vg"))


def machine() -> str:
    name = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            name = next(line.split(":", 1)[1].strip() for line in f if line.startswith("model name"))
    except (OSError, StopIteration):
        pass
    return f"{name}, {os.cpu_count()} cores, Python {platform.python_version()}"


def percentiles(times: list) -> dict:
    us = np.asarray(times) * 1e6
    return {"p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99))}


def bench_ingest(embedder: Any) -> dict:
    data = debian_docs.load()
    chars = sum(len(d.text) for d in data.documents)
    copies = int(np.ceil(1000 * PAGE_CHARS / chars))
    documents = [parse_text(d.text, source=f"{d.name}-{c}") for c in range(copies) for d in data.documents]
    pages = sum(len(d.text) for d in documents) / PAGE_CHARS
    kb = vg.KnowledgeBase.open(None, embedder=embedder)
    start = time.perf_counter()
    report = kb.add_documents(documents, progress=False)
    seconds = time.perf_counter() - start
    out = {
        "pages": round(pages),
        "documents": len(documents),
        "chunks": report.chunks,
        "entities": report.entities,
        "seconds": round(seconds, 2),
        "pages_per_s": round(pages / seconds, 1),
    }
    print(
        f"ingest: {out['pages']} pages ({len(documents)} documents, {report.chunks} chunks, "
        f"{report.entities} entities) in {seconds:.1f} s: {out['pages_per_s']} pages/s",
        flush=True,
    )
    kb.close()
    return out


def synthetic_documents(n_chunks: int, seed: int = 0) -> list:
    """Markdown documents of about ``n_chunks`` chunks: 10 sections of one ~200-token paragraph."""
    rng = np.random.default_rng(seed)
    data = debian_docs.load()
    words: dict = {}
    for d in data.documents:
        for w in re.findall(r"[a-z]{3,}", d.text.lower()):
            words[w] = words.get(w, 0) + 1
    vocab = np.array(sorted(words, key=lambda w: -words[w]))
    p = np.array([words[w] for w in vocab], np.float64)
    p /= p.sum()
    pool = np.array([f"{vocab[i % len(vocab)]}-{j}" for j, i in enumerate(rng.integers(0, 2000, 60_000))])
    zipf = 1.0 / np.arange(1, len(pool) + 1) ** 0.8
    zipf /= zipf.sum()
    n_docs = n_chunks // 10
    words_at = rng.choice(len(vocab), size=(n_docs, 10, 8, 14), p=p)  # drawn at once: one call, not 800k
    names_at = rng.choice(len(pool), size=(n_docs, 10, 8, 2), p=zipf)
    docs = []
    for d in range(n_docs):
        parts = [f"# Manual {d}\n"]
        for s in range(10):
            sentences = [
                f"The {pool[names_at[d, s, i, 0]]} and {pool[names_at[d, s, i, 1]]} "
                + " ".join(vocab[words_at[d, s, i]])
                + "."
                for i in range(8)
            ]
            parts.append(f"## Part {s}\n\n" + " ".join(sentences) + "\n")
        docs.append(parse_text("\n".join(parts), source=f"manual-{d}"))
    return docs


def big_kb(embedder: Any, rebuild: bool) -> tuple:
    if rebuild and os.path.exists(CACHE):
        shutil.rmtree(CACHE)
    info: dict = {}
    if not os.path.exists(CACHE):
        docs = synthetic_documents(100_000)
        kb = vg.KnowledgeBase.open(CACHE, embedder=embedder, sync="off")
        start = time.perf_counter()
        report = kb.add_documents(docs, progress=True)
        info["ingest_s"] = round(time.perf_counter() - start, 1)
        start = time.perf_counter()
        creport = kb.build_communities()
        info["communities_s"] = round(time.perf_counter() - start, 1)
        info["communities"] = creport.levels
        info["entity_graph_edges"] = creport.edges
        print(
            f"100k: {report.chunks} chunks, {report.entities} entities in {info['ingest_s']} s; communities "
            f"{creport.levels} in {info['communities_s']} s ({creport.entities} entities, {creport.edges} "
            "entity-graph edges)",
            flush=True,
        )
        kb.graph.checkpoint()
        kb.close()
    kb = vg.KnowledgeBase.open(CACHE, embedder=embedder, read_only=True)
    return kb, info


def bench_search(embedder: Any, rebuild: bool) -> dict:
    kb, info = big_kb(embedder, rebuild)
    stats = kb.stats()
    rng = np.random.default_rng(1)
    chunks = kb.graph.keys(labels=["chunk"])
    questions = []
    for i in rng.choice(len(chunks), 300, replace=False):
        text = kb.graph.get_node(chunks[int(i)], vector=False)["text"]
        sentences = text.split("\n\n", 1)[-1].split(". ")
        sentence = sentences[int(rng.integers(0, len(sentences)))]
        questions.append(" ".join(sentence.split()[:10]) + "?")
    out: dict = {
        "chunks": stats["chunk"],
        "entities": stats["entity"],
        "communities": stats["community"],
        **info,
    }
    runs = {
        "search (hybrid)": lambda q: kb.search(q, 10),
        "local_search": lambda q: kb.local_search(q, 10),
        BASELINE: lambda q: baseline_local_search(kb, q),
        "global_search": lambda q: kb.global_search(q, level=0, k=5),
        "global_search level 1": lambda q: kb.global_search(q, level=1, k=5),
    }
    for run in runs.values():
        for q in questions[:20]:  # warm up
            run(q)
    times: dict = {name: [] for name in runs}
    for q in questions:  # each question through every call in turn: the same load for all
        for name, run in runs.items():
            start = time.perf_counter()
            run(q)
            times[name].append(time.perf_counter() - start)
    same = sum(
        [h.key for h in kb.local_search(q, 10).chunks] == [h.key for h in baseline_local_search(kb, q).chunks]
        for q in questions
    )
    out["local_search equal to the baseline"] = f"{same}/{len(questions)}"
    for name in runs:
        out[name] = percentiles(times[name])
        print(
            f"{name:22} p50 {out[name]['p50_us'] / 1e3:.2f} ms  p99 {out[name]['p99_us'] / 1e3:.2f} ms",
            flush=True,
        )
    print(f"local_search returns the baseline's chunks for {same} of {len(questions)} questions")
    kb.close()
    return out


BASELINE = "local_search, baseline"


def baseline_local_search(kb: Any, question: str) -> Any:
    """``local_search`` as it ran before BM25's post-filter and the concurrent walk: the label
    filter inside tantivy's query, the walk after the chunks."""
    from concurrent.futures import Future

    def inline(call: Any, *args: Any, **kwargs: Any) -> Future:
        done: Future = Future()
        done.set_result(call(*args, **kwargs))
        return done

    share, submit = hybrid.POST_FILTER_SHARE, kb_search.submit
    hybrid.POST_FILTER_SHARE, kb_search.submit = float("inf"), inline
    try:
        return kb.local_search(question, 10)
    finally:
        hybrid.POST_FILTER_SHARE, kb_search.submit = share, submit


def bench_raptor(embedder: Any) -> dict:
    docs = synthetic_documents(10_000, seed=2)
    kb = vg.KnowledgeBase.open(None, embedder=embedder)
    report = kb.add_documents(docs, progress=False)
    start = time.perf_counter()
    tree = kb.build_tree()
    seconds = time.perf_counter() - start
    out = {"chunks": report.chunks, "levels": tree.levels, "seconds": round(seconds, 1)}
    print(f"RAPTOR: {report.chunks} chunks, nodes per level {tree.levels}, {seconds:.1f} s", flush=True)
    kb.close()
    return out


def main(argv: Any = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--parts", nargs="+", choices=("ingest", "search", "raptor"), default=["ingest", "search", "raptor"]
    )
    parser.add_argument("--rebuild", action="store_true", help="build the 100k-chunk knowledge base again")
    parser.add_argument("--json", metavar="PATH")
    args = parser.parse_args(argv)
    embedder = vg.embedders.load("wordllama")
    out: dict = {"machine": machine()}
    print(out["machine"])
    if "ingest" in args.parts:
        out["ingest"] = bench_ingest(embedder)
    if "search" in args.parts:
        out["search"] = bench_search(embedder, args.rebuild)
    if "raptor" in args.parts:
        out["raptor"] = bench_raptor(embedder)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
