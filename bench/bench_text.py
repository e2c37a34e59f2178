"""The text channel and fusion: BM25 search latency (vecgraph.text.TextIndex) on a corpus of
short texts, its bulk build (rebuild) and per-document upsert, and weighted RRF of three lists
of 100 keys (vecgraph.fusion.rrf).

Corpus (:func:`make_corpus`, seeded): short texts of 8-40 words drawn from a Zipf
distribution (exponent 1.0) over a 40,000-word vocabulary whose 87 most frequent entries are
English function words (about 45% of the words of a text, as in English; the tokenizer drops
them) and the rest pronounceable made-up words (about 11 terms a text remain); 30% of the
texts carry an identifier (model numbers like ``K7-Pro``, error
codes like ``ERR_0x9f41``, versions like ``v3.12``, dotted names like ``mod.fooba_bar``),
5% are Chinese (words of jieba's dictionary drawn by their frequency). 50 tenants (Zipf),
5 labels, timestamps over one year. Queries: 3-6 words of a random text (content words,
its identifier when it has one), as a user types them.

Targets (issue 5): BM25 search p50 <= 1 ms at 100,000 documents; rrf of three lists of 100
<= 20 µs.

    pytest bench/bench_text.py --benchmark-only
    python bench/bench_text.py [--n 100000] [--queries 2000] [--json out.json]

Environment: VECGRAPH_BENCH_TEXT_N (documents, default 100000), VECGRAPH_BENCH_TEXT_QUERIES
(timed queries, default 2000), VECGRAPH_BENCH_TMP (where the index file goes, default /tmp).
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import argparse
import json
import shutil
import tempfile
import time
from typing import Any, Optional

import common
import numpy as np
from vecgraph import text as vgtext
from vecgraph.fusion import rrf, rrf_with_ranks

N = common.env_int("VECGRAPH_BENCH_TEXT_N", 100_000)
COUNT_QUERIES = common.env_int("VECGRAPH_BENCH_TEXT_QUERIES", 2000)
TMP = os.environ.get("VECGRAPH_BENCH_TMP", "/tmp")
VOCAB = 40_000
ZIPF_S = 1.0
# The most frequent words of English text, most frequent first (all tokenizer stopwords): the
# head of the Zipf distribution, about 45% of the words of a text, as in real English.
FUNCTION_WORDS = [w for w in (
    "the of and to a in is that for it as was with be by on not he this are or his from at which but have an "
    "they you were their all we can her has there been if more when will would who so no she other its may "
    "these what them than some him into only do could about then also any my now such our over me most after "
    "must did those where your should very through each how being up out just").split() if w in vgtext.STOPWORDS]
UPSERTS = 500

# ------------------------------------------------------------------------------------- corpus


def _vocabulary(rng: np.random.Generator, size: int) -> list[str]:
    """``size`` distinct made-up words of 1-3 syllables, in a random order (= frequency rank)."""
    onsets = "b br c ch cl d dr f fl g gr h j k l m n p pl pr qu r s sh sl st t th tr v w z".split()
    vowels = "a e i o u ai ea ee oa ou".split()
    codas = ["", "", "", "", "n", "r", "s", "t", "l", "m", "nd", "st", "ck", "ng"]
    words: set = set()
    while len(words) < size:
        count = int(rng.choice(3, p=[0.35, 0.45, 0.2])) + 1
        parts = [onsets[rng.integers(len(onsets))] + vowels[rng.integers(len(vowels))]
                 + codas[rng.integers(len(codas))] for _ in range(count)]
        word = "".join(parts)
        if 3 <= len(word) <= 14 and word not in vgtext.STOPWORDS:
            words.add(word)
    out = sorted(words)
    rng.shuffle(out)
    return out


def _identifiers(rng: np.random.Generator, words: list[str], count: int) -> list[str]:
    suffixes = ["Pro", "Max", "Mini", "Lite", "Plus", "Ultra", "Air", "X"]
    out: set = set()
    while len(out) < count:
        kind = rng.integers(4)
        if kind == 0:
            out.add(f"{chr(65 + rng.integers(26))}{rng.integers(1, 100)}-{suffixes[rng.integers(len(suffixes))]}")
        elif kind == 1:
            out.add(f"ERR_0x{rng.integers(0, 0xFFFF):04x}")
        elif kind == 2:
            out.add(f"v{rng.integers(1, 10)}.{rng.integers(0, 30)}")
        else:
            out.add(f"{words[rng.integers(len(words))]}.{words[rng.integers(len(words))]}_"
                    f"{words[rng.integers(len(words))]}")
    return sorted(out)


def _chinese_words(limit: int = 20_000) -> tuple[list[str], np.ndarray]:
    """The ``limit`` most frequent multi-character words of jieba's dictionary and their
    probabilities."""
    import jieba

    path = os.path.join(os.path.dirname(jieba.__file__), "dict.txt")
    entries = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) >= 2 and len(parts[0]) >= 1 and all("\u4e00" <= c <= "\u9fff" for c in parts[0]):
                entries.append((int(parts[1]), parts[0]))
    entries.sort(reverse=True)
    entries = entries[:limit]
    freq = np.array([e[0] for e in entries], dtype=np.float64)
    return [e[1] for e in entries], freq / freq.sum()


def make_corpus(n: int, count_queries: int, seed: int = 0) -> tuple[list[tuple], list[str]]:
    """(items ``(key, text, tenant, label, ts)`` for TextIndex.rebuild, query texts)."""
    rng = np.random.default_rng(seed)
    vocab = list(FUNCTION_WORDS) + _vocabulary(rng, VOCAB - len(FUNCTION_WORDS))
    ranks = np.arange(1, len(vocab) + 1, dtype=np.float64)
    p = ranks ** -ZIPF_S
    p /= p.sum()
    idents = _identifiers(rng, vocab[len(FUNCTION_WORDS):], 20_000)
    zh_words, zh_p = _chinese_words()
    tenants = [f"tenant-{i}" for i in range(50)]
    tenant_p = 1.0 / np.arange(1, 51)
    tenant_p /= tenant_p.sum()
    labels = ["note", "product", "ticket", "person", "doc"]
    ts0 = 1_700_000_000_000_000
    year_us = 365 * 86400 * 10**6

    lengths = np.clip(rng.lognormal(np.log(18), 0.45, n).astype(int), 8, 40)
    word_ids = rng.choice(len(vocab), size=int(lengths.sum()), p=p)
    chinese = rng.random(n) < 0.05
    with_ident = rng.random(n) < 0.30
    tenant_ids = rng.choice(50, size=n, p=tenant_p)
    label_ids = rng.integers(0, len(labels), n)
    ts = ts0 + rng.integers(0, year_us, n)
    items: list = []
    doc_words: list = []
    start = 0
    for i in range(n):
        count = int(lengths[i])
        ids = word_ids[start:start + count]
        start += count
        if chinese[i]:
            words = [zh_words[j] for j in rng.choice(len(zh_words), size=max(4, count // 2), p=zh_p)]
            text = "".join(words) + "。"
            content = [w for w in words if len(w) >= 2]
        else:
            words = [vocab[j] for j in ids]
            content = [w for w in words if w not in vgtext.STOPWORDS]
            if with_ident[i]:
                ident = idents[rng.integers(len(idents))]
                words.insert(int(rng.integers(0, len(words) + 1)), ident)
                content.insert(0, ident)
            words[0] = words[0].capitalize()
            cut = int(rng.integers(4, max(5, len(words))))
            text = " ".join(words[:cut]) + ", " + " ".join(words[cut:]) + "." if cut < len(words) else " ".join(words) + "."
        items.append((f"doc-{i}", text, tenants[tenant_ids[i]], labels[label_ids[i]], int(ts[i])))
        doc_words.append(content)

    queries: list = []
    while len(queries) < count_queries:
        content = doc_words[rng.integers(n)]
        distinct = list(dict.fromkeys(content))
        if len(distinct) < 3:
            continue
        want = int(rng.integers(3, 7))
        picked = [distinct[j] for j in sorted(rng.choice(len(distinct), size=min(want, len(distinct)), replace=False))]
        if content and content[0] in idents and content[0] not in picked and rng.random() < 0.5:
            picked[0] = content[0]
        queries.append(" ".join(picked))
    return items, queries


# ------------------------------------------------------------------------------------- measurements


def _index_path(tag: str) -> str:
    folder = tempfile.mkdtemp(prefix=f"vg_bench_text_{tag}_", dir=TMP)
    return os.path.join(folder, "text")


def measure_build(items: list, path: str) -> tuple[vgtext.TextIndex, dict]:
    """A file index of ``items`` built by rebuild(), with its figures."""
    index = vgtext.TextIndex(path)
    cpu0, t0 = common.cpu_seconds(), time.perf_counter()
    stored = index.rebuild(items, lsn=1, progress=False)
    build_s = time.perf_counter() - t0
    cpu_s = common.cpu_seconds() - cpu0
    t0 = time.perf_counter()
    streams = [vgtext.tokenize(item[1]) for item in items[:20_000]]
    tokenize_us = (time.perf_counter() - t0) / len(streams) * 1e6
    size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    return index, {
        "docs": stored,
        "build_s": build_s,
        "build_cpu_s": cpu_s,
        "docs_per_s": stored / build_s,
        "tokenize_us_per_doc": tokenize_us,
        "terms_per_doc": float(np.mean([len(s) for s in streams])),
        "file_mb": size / 2**20,
    }


def measure_search(index: vgtext.TextIndex, queries: list, **filters: Any) -> dict:
    """Latency of search(q, 10, **filters) (wall and thread CPU) and, without filters, how many
    documents hold a query term (what a search scoring every match would score)."""
    for q in queries[:200]:
        index.search(q, 10, **filters)
    wall, cpu = common.time_calls_wall_cpu(lambda q: index.search(q, 10, **filters), queries)
    out = {f"wall_{k}": v for k, v in common.latency(wall).items()}
    out.update({f"cpu_{k}": v for k, v in common.latency(cpu).items() if k != "count"})
    if not filters:
        import tantivy

        searcher = index._searcher
        counts = [searcher.search(tantivy.Query.boolean_query(
            [(tantivy.Occur.Should, tantivy.Query.term_query(index._schema, "node", t))
             for t in dict.fromkeys(vgtext.tokenize(q))]), 1, count=True).count for q in queries[:500]]
        out["matches_p50"] = float(np.percentile(counts, 50))
        out["matches_p99"] = float(np.percentile(counts, 99))
        out["terms_p50"] = float(np.percentile([len(set(vgtext.tokenize(q))) for q in queries], 50))
    return out


def measure_upserts(index: vgtext.TextIndex, items: list, count: int = UPSERTS) -> dict:
    """One-document upsert calls replacing existing documents of the built index (tokenizing
    included), then one call replacing ``count`` documents."""
    rng = np.random.default_rng(7)
    picks = [items[i] for i in rng.choice(len(items), size=count, replace=False)]
    lsn = index.lsn
    texts = [items[i][1] for i in rng.choice(len(items), size=count)]
    calls = []
    for (key, _, tenant, label, ts), text in zip(picks, texts):
        lsn += 1
        calls.append((key, text, tenant, label, ts, lsn))
    wall, cpu = common.time_calls_wall_cpu(
        lambda c: index.upsert([c[0]], [c[1]], tenants=c[2], labels=c[3], ts=c[4], lsn=c[5]), calls)
    batch = [(key, text) for (key, _, _, _, _), text in zip(picks, texts)]
    t0 = time.perf_counter()
    index.upsert([b[0] for b in batch], [b[1] for b in batch], lsn=lsn + 1)
    batch_us = (time.perf_counter() - t0) / len(batch) * 1e6
    out = {f"wall_{k}": v for k, v in common.latency(wall).items()}
    out.update({f"cpu_{k}": v for k, v in common.latency(cpu).items() if k != "count"})
    out["batch_us_per_doc"] = batch_us
    # A write followed by a search: the search publishes the write first (one commit).
    after = []
    for (key, _, tenant, label, ts), text in list(zip(picks, texts))[:50]:
        lsn = index.lsn + 1
        index.upsert([key], [text], tenants=tenant, labels=label, ts=ts, lsn=lsn)
        t0 = time.perf_counter_ns()
        index.search(text, 10)
        after.append(time.perf_counter_ns() - t0)
    out.update({f"search_after_write_{k}": v for k, v in common.latency(np.array(after, dtype=float)).items()})
    return out


def fusion_lists(seed: int = 0) -> list:
    """Three ranked lists of 100 keys drawn from 250 (partly overlapping), like three channels."""
    rng = np.random.default_rng(seed)
    pool = [f"node-{i}" for i in range(250)]
    return [[pool[j] for j in rng.choice(250, size=100, replace=False)] for _ in range(3)]


def measure_rrf(repeat: int = 20_000) -> dict:
    lists = fusion_lists()
    pairs = [[(key, 1.0 / (r + 1)) for r, key in enumerate(lst)] for lst in lists]
    weights = [1.0, 1.2, 1.5]
    cases = {
        "rrf_top10_us": lambda: rrf(lists, weights=weights, top_n=10),
        "rrf_all_us": lambda: rrf(lists, weights=weights),
        "rrf_pairs_top10_us": lambda: rrf(pairs, weights=weights, top_n=10),
        "rrf_with_ranks_top10_us": lambda: rrf_with_ranks({"dense": lists[0], "bm25": lists[1], "graph": lists[2]},
                                                          weights={"graph": 1.5}, top_n=10),
    }
    out = {}
    for name, fn in cases.items():
        for _ in range(2000):
            fn()
        best_wall = best_cpu = float("inf")
        for _ in range(5):
            c0, t0 = time.thread_time_ns(), time.perf_counter_ns()
            for _ in range(repeat // 5):
                fn()
            best_wall = min(best_wall, (time.perf_counter_ns() - t0) / (repeat // 5) / 1e3)
            best_cpu = min(best_cpu, (time.thread_time_ns() - c0) / (repeat // 5) / 1e3)
        out[name] = best_wall
        out[name.replace("_us", "_cpu_us")] = best_cpu
    return out


# ------------------------------------------------------------------------------------- pytest-benchmark

try:
    import pytest
except ImportError:  # script mode without pytest
    pytest = None

if pytest is not None:

    @pytest.fixture(scope="module")
    def corpus():
        return make_corpus(N, COUNT_QUERIES)

    @pytest.fixture(scope="module")
    def built(corpus):
        items, _ = corpus
        path = _index_path("pytest")
        index, figures = measure_build(items, path)
        yield index, figures
        index.close()
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)

    def bench_text_build(benchmark, corpus, built):
        """rebuild() of the corpus (timed once by the fixture; here its figures, plus a rebuild of
        10,000 documents timed by pytest-benchmark)."""
        items, _ = corpus
        _, figures = built
        small = vgtext.TextIndex()
        benchmark.pedantic(lambda: small.rebuild(items[:10_000], lsn=1, progress=False), rounds=3, iterations=1)
        small.close()
        common.record(benchmark, **figures)

    def bench_text_search(benchmark, corpus, built):
        _, queries = corpus
        index, _ = built
        figures = measure_search(index, queries)
        it = iter(queries * 1000)
        benchmark(lambda: index.search(next(it), 10))
        common.record(benchmark, **{k: v for k, v in figures.items() if k.endswith(("p50_us", "p99_us"))})

    def bench_text_search_tenant(benchmark, corpus, built):
        """With a tenant filter (a tenant holding ~0.5% of the documents)."""
        _, queries = corpus
        index, _ = built
        figures = measure_search(index, queries[:500], tenants=["tenant-20"])
        it = iter(queries * 1000)
        benchmark(lambda: index.search(next(it), 10, tenants=["tenant-20"]))
        common.record(benchmark, **{k: v for k, v in figures.items() if k.endswith(("p50_us", "p99_us"))})

    def bench_text_upsert(benchmark, corpus, built):
        items, _ = corpus
        index, _ = built
        figures = measure_upserts(index, items)
        key, text = items[0][0], items[1][1]
        state = {"lsn": index.lsn}

        def one():
            state["lsn"] += 1
            index.upsert([key], [text], lsn=state["lsn"])

        benchmark(one)
        common.record(benchmark, **{k: v for k, v in figures.items() if k.endswith(("p50_us", "p99_us", "per_doc"))})

    def bench_rrf(benchmark):
        lists = fusion_lists()
        weights = [1.0, 1.2, 1.5]
        benchmark(lambda: rrf(lists, weights=weights, top_n=10))
        common.record(benchmark, **measure_rrf())


# ------------------------------------------------------------------------------------- script


def _tantivy_version() -> str:
    from importlib.metadata import version

    return version("tantivy")


def _row(name: str, value: str, target: str = "") -> str:
    return f"| {name} | {value} | {target} |"


def main(argv: Optional[list] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--n", type=int, default=N, help="documents (default %(default)s)")
    parser.add_argument("--queries", type=int, default=COUNT_QUERIES, help="timed queries (default %(default)s)")
    parser.add_argument("--json", help="also write every figure to this JSON file")
    args = parser.parse_args(argv)

    t0 = time.perf_counter()
    items, queries = make_corpus(args.n, args.queries)
    generate_s = time.perf_counter() - t0
    path = _index_path("script")
    try:
        index, build = measure_build(items, path)
        search = measure_search(index, queries)
        tenant = measure_search(index, queries[:500], tenants=["tenant-20"])
        upsert = measure_upserts(index, items)
        index.close()
    finally:
        shutil.rmtree(os.path.dirname(path), ignore_errors=True)
    fusion = measure_rrf()

    m = common.machine()
    print(f"{args.n:,} documents ({build['terms_per_doc']:.1f} terms each), {args.queries:,} queries; "
          f"{m['cpu']}, {m['cores']} cores, Python {m['python']}, tantivy {_tantivy_version()}; "
          f"corpus generated in {generate_s:.1f} s\n")
    print("| figure | value | target |")
    print("|---|---|---|")
    print(_row("BM25 search, k=10: p50 / p99 (wall)", f"{search['wall_p50_us']:,.0f} / {search['wall_p99_us']:,.0f} µs",
               "p50 <= 1,000 µs"))
    print(_row("BM25 search, k=10: p50 / p99 (thread CPU)",
               f"{search['cpu_p50_us']:,.0f} / {search['cpu_p99_us']:,.0f} µs", ""))
    print(_row("documents matching a query: p50 / p99", f"{search['matches_p50']:,.0f} / {search['matches_p99']:,.0f} "
               f"(query terms p50: {search['terms_p50']:.0f})", ""))
    print(_row("BM25 search, tenant filter (~0.5% of docs): p50 / p99 (wall)",
               f"{tenant['wall_p50_us']:,.0f} / {tenant['wall_p99_us']:,.0f} µs", ""))
    print(_row("rebuild (bulk build)", f"{build['build_s']:.1f} s ({build['docs_per_s']:,.0f} docs/s, "
               f"CPU {build['build_cpu_s']:.1f} s; tokenize {build['tokenize_us_per_doc']:.0f} µs/doc)", ""))
    print(_row("index folder", f"{build['file_mb']:.0f} MB", ""))
    print(_row("upsert, one document per call: p50 / p99 / mean (wall)",
               f"{upsert['wall_p50_us']:,.0f} / {upsert['wall_p99_us']:,.0f} / {upsert['wall_mean_us']:,.0f} µs", ""))
    print(_row(f"upsert, {UPSERTS} documents in one call", f"{upsert['batch_us_per_doc']:,.0f} µs per document", ""))
    print(_row("search right after a one-document write (publishes it): p50 / p99 (wall)",
               f"{upsert['search_after_write_p50_us']:,.0f} / {upsert['search_after_write_p99_us']:,.0f} µs", ""))
    print(_row("rrf, 3 lists x 100, top_n=10 (wall / CPU)",
               f"{fusion['rrf_top10_us']:.1f} / {fusion['rrf_top10_cpu_us']:.1f} µs", "<= 20 µs"))
    print(_row("rrf, 3 lists x 100, all 200+ keys (wall / CPU)",
               f"{fusion['rrf_all_us']:.1f} / {fusion['rrf_all_cpu_us']:.1f} µs", ""))
    print(_row("rrf of (key, score) pairs, top_n=10 (wall)", f"{fusion['rrf_pairs_top10_us']:.1f} µs", ""))
    print(_row("rrf_with_ranks, named lists, top_n=10 (wall)", f"{fusion['rrf_with_ranks_top10_us']:.1f} µs", ""))
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"machine": m, "n": args.n, "queries": args.queries, "build": build, "search": search,
                       "search_tenant": tenant, "upsert": upsert, "rrf": fusion}, f, indent=2)
    return 0


if __name__ == "__main__":
    sys.exit(main())
