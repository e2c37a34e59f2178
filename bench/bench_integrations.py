"""What the framework integrations (vecgraph.integrations) add to the calls they wrap, each
measured against the direct vecgraph call on the same graph and queries in the same run.

LangChain (``bench_langchain_*``): ``VecgraphRetriever.invoke(query)`` against a direct
``Graph.hybrid_search(query, vector, k=10)`` with the query embedded by the same embedder, on a
graph of N nodes (default 10,000) whose texts are bench_text.py's corpus (short Zipf texts with
identifiers and some Chinese), 5 random edges a node, and vectors from a cheap deterministic
LangChain embedder (a hashed bag of words, 64-d; a few µs a query, paid by both sides). The two
are timed alternately, query by query (their order swapped every other query), so that both
see the same machine state. Reported: both p50s, the difference of the p50s and the median of
the per-query differences, and a breakdown: the direct call plus what any caller pays to hand
LangChain Documents (each hit's text and props read with ``Graph.get_node``, a ``Document``
object each), and ``invoke`` of a retriever that returns a fixed list (LangChain's own cost of a
call: callback and tracing configuration, the run's start and end), called back to back and
right after a direct search (as it runs in a real call, its code and data no longer in the
nearest caches). Also: the share of queries
whose retriever keys are the direct call's, in order (must be 1.0).

Target: the retriever's overhead <= 50 µs at p50.

    pytest bench/bench_integrations.py --benchmark-only -k langchain -s

Environment: VECGRAPH_BENCH_INTEGRATIONS_N (nodes, default 10000), VECGRAPH_BENCH_INTEGRATIONS_QUERIES
(timed queries per side, default 2000).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import hashlib
import re
import time

import bench_text
import common
import numpy as np
import pytest
import vecgraph as vg

N = common.env_int("VECGRAPH_BENCH_INTEGRATIONS_N", 10_000)
COUNT_QUERIES = common.env_int("VECGRAPH_BENCH_INTEGRATIONS_QUERIES", 2000)
K = 10


# ------------------------------------------------------------------------------------ LangChain


def _hashed_words_embeddings(dim: int = 64):
    from langchain_core.embeddings import Embeddings

    class HashedWords(Embeddings):
        """Deterministic and cheap: each lower-cased word adds 1 to one of dim - 1 dimensions
        (blake2b of the word), plus a bias in dimension 0 so that no vector is zero; L2-normalised."""

        def _one(self, text: str) -> list:
            row = np.zeros(dim, np.float32)
            row[0] = 0.5
            for word in re.findall(r"\w+", text.lower()):
                digest = hashlib.blake2b(word.encode("utf-8"), digest_size=4).digest()
                row[1 + int.from_bytes(digest, "little") % (dim - 1)] += 1.0
            return (row / np.linalg.norm(row)).tolist()

        def embed_documents(self, texts: list) -> list:
            return [self._one(t) for t in texts]

        def embed_query(self, text: str) -> list:
            return self._one(text)

    return HashedWords()


@pytest.fixture(scope="module")
def langchain_setup():
    """(graph, retriever, the embedder adapter, query texts): N nodes with texts and edges,
    built through VecgraphVectorStore, warmed up."""
    from vecgraph.integrations.langchain import VecgraphRetriever, VecgraphVectorStore

    items, queries = bench_text.make_corpus(N, COUNT_QUERIES, seed=11)
    embeddings = _hashed_words_embeddings()
    store = VecgraphVectorStore.from_texts([item[1] for item in items], embeddings,
                                           [{"n": i, "label": item[3]} for i, item in enumerate(items)],
                                           ids=[f"doc-{i}" for i in range(N)])
    rng = np.random.default_rng(12)
    src = np.repeat(np.arange(N), 5)
    dst = rng.integers(0, N, src.size)
    store.graph.add_edges([f"doc-{i}" for i in src], [f"doc-{i}" for i in dst], rels="links")
    retriever = VecgraphRetriever(graph=store.graph, embedding=embeddings, k=K)
    for query in queries[:200]:
        retriever.invoke(query)
    return store.graph, retriever, store.embedder, queries


def _paired(first, second, items: list) -> tuple[np.ndarray, np.ndarray]:
    """ns of ``first(item)`` and ``second(item)`` for each item, alternating which runs first."""
    a = np.empty(len(items), np.int64)
    b = np.empty(len(items), np.int64)
    for i, item in enumerate(items):
        for which in ((0, 1) if i % 2 == 0 else (1, 0)):
            fn, out = (first, a) if which == 0 else (second, b)
            started = time.perf_counter_ns()
            fn(item)
            out[i] = time.perf_counter_ns() - started
    return a, b


def _constant_retriever(documents: list):
    """A LangChain retriever that returns ``documents`` as they are: what ``invoke`` costs on
    its own (configuring callbacks and tracing, the run's start and end)."""
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.retrievers import BaseRetriever

    class Constant(BaseRetriever):
        def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun) -> list:
            return documents

    return Constant()


def bench_langchain_retriever_overhead(benchmark, langchain_setup):
    from langchain_core.documents import Document

    graph, retriever, embedder, queries = langchain_setup

    def direct(query: str):
        return graph.hybrid_search(query, embedder.embed_query(query), K)

    def direct_with_documents(query: str) -> list:
        # what a caller of hybrid_search pays to hand LangChain Documents: each hit's text and
        # props (get_node) and a Document object
        out = []
        for hit in direct(query).hits:
            node = graph.get_node(hit.key, vector=False)
            out.append(Document(id=str(hit.key), page_content=node["text"],
                                metadata={**(node["props"] or {}), "key": hit.key, "score": hit.score,
                                          "ranks": hit.ranks}))
        return out

    identical = sum([str(h.key) for h in direct(q).hits] == [d.id for d in retriever.invoke(q)] for q in queries)
    assert identical == len(queries), f"the retriever and hybrid_search disagree on {len(queries) - identical} queries"
    constant = _constant_retriever(retriever.invoke(queries[0]))
    direct_ns, retriever_ns = _paired(direct, retriever.invoke, queries)
    documents_ns, retriever2_ns = _paired(direct_with_documents, retriever.invoke, queries)
    # LangChain's invoke alone, hot (called back to back) and as in a real call: right after a
    # search (its code and data then come from further down the cache hierarchy)
    constant_ns, _ = _paired(constant.invoke, lambda q: None, queries)
    after_search_ns, alone_ns = _paired(lambda q: (direct(q), constant.invoke(q)), direct, queries)
    p50 = {name: float(np.median(ns)) / 1e3 for name, ns in
           (("direct", direct_ns), ("retriever", retriever_ns), ("direct_with_documents", documents_ns))}
    figures = {
        "nodes": N, "queries": len(queries), "k": K,
        "direct_hybrid_search_p50_us": round(p50["direct"], 1),
        "retriever_p50_us": round(p50["retriever"], 1),
        "overhead_p50_difference_us": round(p50["retriever"] - p50["direct"], 1),
        "overhead_median_paired_us": round(float(np.median(retriever_ns - direct_ns)) / 1e3, 1),
        "direct_with_documents_p50_us": round(p50["direct_with_documents"], 1),
        "over_direct_with_documents_median_paired_us": round(float(np.median(retriever2_ns - documents_ns)) / 1e3, 1),
        "langchain_invoke_alone_hot_p50_us": round(float(np.median(constant_ns)) / 1e3, 1),
        "langchain_invoke_alone_after_a_search_median_paired_us": round(float(np.median(after_search_ns - alone_ns))
                                                                        / 1e3, 1),
        "same_keys_in_order_share": identical / len(queries),
    }
    common.record(benchmark, **figures)
    benchmark.group = "langchain retriever"
    counter = iter(range(10**9))
    benchmark.pedantic(lambda: retriever.invoke(queries[next(counter) % len(queries)]), rounds=500, iterations=1)
    print("\nLangChain retriever over hybrid_search: " + ", ".join(f"{k} {v}" for k, v in figures.items()))


def bench_langchain_direct_hybrid_search(benchmark, langchain_setup):
    """The baseline of bench_langchain_retriever_overhead in pytest-benchmark's own table."""
    graph, _, embedder, queries = langchain_setup
    benchmark.group = "langchain retriever"
    counter = iter(range(10**9))

    def direct() -> vg.hybrid.HybridResult:
        query = queries[next(counter) % len(queries)]
        return graph.hybrid_search(query, embedder.embed_query(query), K)

    benchmark.pedantic(direct, rounds=500, iterations=1)
