"""The WordNet main job: build a knowledge graph from WordNet 3.0, answer its held-out questions
through every retrieval channel, and print quality and latency side by side.

``vecgraph wordnet [FOLDER]`` (or :func:`run`):

1. **Build** (or reopen) a graph folder (default ``~/.cache/vecgraph/wordnet.vg``) from
   :mod:`vecgraph.datasets.wordnet`: one node per synset (label: part of speech, text: lemmas
   and definition, props: lexicographer file and lemmas) with its vector from the embedder
   (default ``wordllama``, offline), the typed pointers as edges, the lemmas as aliases (so a
   question that names a word seeds the graph channel with its synsets), then a checkpoint.
   A second run reopens the folder instead of building it again, as long as it was built from
   the same data with the same embedder.
2. **Evaluate** the held-out queries of both sets (``sense``: a usage example, find its synset;
   ``relation``: a question about a word in a usage example, find the synsets related to it by
   one pointer, such as its hypernym) through each channel of :meth:`Graph.hybrid_search`:
   ``dense``, ``bm25``, ``graph`` and ``hybrid`` (weighted RRF of all channels). The query
   vector is embedded once per query, outside the timed search; embedding time is reported on
   its own. For a relation query the graph channel is told the relation asked: it walks only
   edges of that rel, outward (``rels=[relation]``, ``direction="out"``): typed traversal is the
   point of a graph channel. The plain graph channel, which walks every rel, is reported too.
3. **Report** recall@10, MRR@10 and nDCG@10 (binary relevance) and p50 / p99 latency per
   channel, whether the quality bars hold, and three example questions with their top results
   and the paths that reached them.

The metric functions (:func:`recall_at_k`, :func:`mrr_at_k`, :func:`ndcg_at_k`) take a ranked
list of keys and the set of relevant keys.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import shutil
import sys
import time
from collections.abc import Callable, Sequence
from typing import Any, Optional

import numpy as np

from .evaluate import mrr_at_k, ndcg_at_k, recall_at_k  # noqa: F401 (also this module's API)
from .formatting import _columns, _short
from .formatting import _walk as _hit_path

__all__ = [
    "DEFAULT_FOLDER",
    "RELATION_SETTINGS",
    "SENSE_SETTINGS",
    "SearchSettings",
    "build",
    "evaluate",
    "mrr_at_k",
    "ndcg_at_k",
    "quality_bars",
    "recall_at_k",
    "relation_answers",
    "run",
    "subset",
]

DEFAULT_FOLDER = os.path.join("~", ".cache", "vecgraph", "wordnet.vg")
MARKER = "wordnet.json"  # in the graph folder: what the graph was built from, and whether it is complete
K = 10
EMBED_BATCH = 4096
NODE_BATCH = 8192


# ====================================================================== metrics


def _percentiles(values_ns: Sequence[int]) -> dict:
    us = np.asarray(values_ns, dtype=np.float64) / 1e3
    if not len(us):
        return {"p50_us": None, "p99_us": None}
    return {"p50_us": float(np.percentile(us, 50)), "p99_us": float(np.percentile(us, 99))}


# ====================================================================== data


def _tables(tables: Optional[dict]) -> dict:
    if tables is not None:
        return tables
    from .datasets import wordnet

    return wordnet.load(split="heldout")


def subset(tables: dict, synsets: int) -> dict:
    """The first ``synsets`` nodes, the edges between them, and the queries whose synset and
    relevant nodes are all among them (a small graph for quick runs and tests)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    nodes = tables["nodes"].slice(0, synsets)
    keys = nodes.column("key")
    edges = tables["edges"]
    edges = edges.filter(pc.and_(pc.is_in(edges.column("src"), value_set=keys),
                                 pc.is_in(edges.column("dst"), value_set=keys)))
    queries = tables["queries"]
    inside = set(keys.to_pylist())
    keep = [s in inside and all(r in inside for r in rel)
            for s, rel in zip(queries.column("synset").to_pylist(), queries.column("relevant").to_pylist())]
    return {"nodes": nodes, "edges": edges, "queries": queries.filter(pa.array(keep, pa.bool_()))}


def _fingerprint(tables: dict) -> str:
    """sha256 of the node and edge columns the graph is built from."""
    digest = hashlib.sha256()
    for name, columns in (("nodes", ("key", "label", "text", "props")), ("edges", ("src", "dst", "rel"))):
        table = tables[name]
        digest.update(f"{name}:{table.num_rows}".encode())
        for column in columns:
            for chunk in table.column(column).chunks:
                for buffer in chunk.buffers():
                    if buffer is not None:
                        digest.update(buffer)
    return digest.hexdigest()


# ====================================================================== build


def _progress(total: int, desc: str, unit: str, show: Optional[bool]):
    from tqdm import tqdm

    show = sys.stderr.isatty() if show is None else show
    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=not show, leave=False)


def _read_marker(folder: str) -> Optional[dict]:
    try:
        with open(os.path.join(folder, MARKER), encoding="utf-8") as f:
            return json.load(f)
    except (OSError, ValueError):
        return None


def _write_marker(folder: str, marker: dict) -> None:
    path = os.path.join(folder, MARKER)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(marker, f, indent=1)
        f.flush()
        os.fsync(f.fileno())
    os.replace(path + ".tmp", path)


def _check_folder(folder: str) -> Optional[dict]:
    """The marker of a WordNet graph folder built by :func:`build`, None when there is nothing
    at ``folder``; refuses a folder that holds anything else."""
    from . import storage

    if not os.path.exists(folder):
        return None
    if not os.path.isdir(folder):
        raise ValueError(f"{folder} is a file, not a graph folder")
    marker = _read_marker(folder)
    if marker is None or marker.get("kind") != "vecgraph-wordnet":
        if not os.listdir(folder):
            return None
        what = "a graph" if os.path.isfile(os.path.join(folder, storage.MANIFEST)) else "other files"
        raise ValueError(f"{folder} holds {what} not built by `vecgraph wordnet`; choose another folder")
    return marker


def build(folder: str, tables: dict, embedder: Any, *, progress: Optional[bool] = None,
          rebuild: bool = False, synsets: Optional[int] = None,
          log: Callable[[str], None] = print) -> tuple[Any, dict]:
    """Open the WordNet graph in ``folder``, building it first unless it already holds the
    graph of ``tables`` built with ``embedder`` (same data fingerprint and embedder name).

    Building: embed every node text (a tqdm bar when ``progress``, default: stderr is a
    terminal), add the nodes in batches (quantization, HNSW inserts and the BM25 index), the
    edges, the lemmas as aliases, then checkpoint. A folder left by an interrupted build, or
    built from other data, is built again; a folder that holds anything else is refused.
    The folder's ``wordnet.json`` records the data's fingerprint, the embedder and ``synsets``
    (the subset size, if any), so that a later run can rebuild or reuse the same graph.

    Returns:
        (the open graph, build info: ``reused``, ``seconds`` per phase, ``nodes``, ``edges``,
        ``aliases``, ``embedder``).
    """
    from .embedders import embed
    from .graph import Graph

    folder = os.path.abspath(os.path.expanduser(folder))
    fingerprint = _fingerprint(tables)
    marker = _check_folder(folder)
    want = {"kind": "vecgraph-wordnet", "fingerprint": fingerprint, "embedder": embedder.name}
    if marker is not None and not rebuild and marker.get("complete") and all(
            marker.get(k) == v for k, v in want.items()):
        t0 = time.perf_counter()
        graph = Graph.open(folder, sync="off")
        info = dict(marker["build"], reused=True)
        info["seconds"] = dict(info["seconds"], open=time.perf_counter() - t0)
        log(f"reusing {folder}: {len(graph):,} nodes, {graph.count_edges:,} edges "
            f"(opened in {info['seconds']['open']:.2f} s; built in {marker['build']['seconds']['total']:.1f} s)")
        return graph, info
    if marker is not None:
        why = "rebuild asked" if rebuild else ("an earlier build did not finish" if not marker.get("complete")
                                               else "it was built from other data or with another embedder")
        log(f"building {folder} again ({why})")
        shutil.rmtree(folder)

    nodes, edges = tables["nodes"], tables["edges"]
    keys, texts = nodes.column("key").to_pylist(), nodes.column("text").to_pylist()
    labels = nodes.column("label").to_pylist()
    props = [json.loads(p) if p else None for p in nodes.column("props").to_pylist()]
    n = len(keys)
    seconds: dict = {}
    t_all = time.perf_counter()
    log(f"building {folder}: {n:,} synsets, {edges.num_rows:,} edges, embedder {embedder.name}")

    t0 = time.perf_counter()
    vectors = np.empty((n, int(embedder.dim)), dtype=np.float32)
    with _progress(n, "embedding synsets", "text", progress) as bar:
        for start in range(0, n, EMBED_BATCH):
            stop = min(n, start + EMBED_BATCH)
            vectors[start:stop] = embed(embedder, texts[start:stop])
            bar.update(stop - start)
    seconds["embed"] = time.perf_counter() - t0
    log(f"  embedded {n:,} texts in {seconds['embed']:.1f} s ({n / max(seconds['embed'], 1e-9):,.0f} texts/s)")

    os.makedirs(os.path.dirname(folder), exist_ok=True)
    graph = Graph.open(folder, dim=int(embedder.dim), metric="cos", sync="off")
    try:
        _write_marker(folder, dict(want, complete=False, synsets=synsets))
        graph.use_embedder(embedder)
        t0 = time.perf_counter()
        with _progress(n, "adding synsets (HNSW, BM25)", "node", progress) as bar:
            for start in range(0, n, NODE_BATCH):
                stop = min(n, start + NODE_BATCH)
                graph.add_nodes(keys[start:stop], vectors[start:stop], labels=labels[start:stop],
                                texts=texts[start:stop], props=props[start:stop])
                bar.update(stop - start)
        seconds["nodes"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        graph.add_edges(edges.column("src").to_pylist(), edges.column("dst").to_pylist(),
                        rels=edges.column("rel").to_pylist(),
                        weights=edges.column("weight").to_numpy() if "weight" in edges.column_names else None)
        seconds["edges"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        aliases = 0
        for key, p in zip(keys, props):
            lemmas = (p or {}).get("lemmas") or []
            if lemmas:
                aliases += len(graph.add_aliases(key, lemmas))
        seconds["aliases"] = time.perf_counter() - t0

        t0 = time.perf_counter()
        graph.compact()
        graph.checkpoint()
        seconds["checkpoint"] = time.perf_counter() - t0
        seconds["total"] = time.perf_counter() - t_all
        info = {"reused": False, "seconds": seconds, "nodes": len(graph), "edges": graph.count_edges,
                "aliases": aliases, "embedder": embedder.name}
        _write_marker(folder, dict(want, complete=True, build=info, synsets=synsets))
    except BaseException:
        graph.close()
        raise
    log(f"  nodes {seconds['nodes']:.1f} s, edges {seconds['edges']:.1f} s, {aliases:,} aliases "
        f"{seconds['aliases']:.1f} s, checkpoint {seconds['checkpoint']:.1f} s; total {seconds['total']:.1f} s")
    return graph, info


# ====================================================================== evaluation


@dataclasses.dataclass(frozen=True)
class SearchSettings:
    """How one query set is searched: arguments of :meth:`Graph.hybrid_search` for the graph
    channel and the fusion.

    Attributes:
        seeds, hops, max_visited, max_fanout: the graph channel's walk (as in
            :meth:`Graph.search`); the nodes the question names (lemmas are aliases) are seeds
            too, before the ``seeds`` most similar ones.
        typed: the walk follows only the relation the question asks about (``rels=[relation]``
            in ``direction``); otherwise every rel, both directions.
        weights: channel weights of the hybrid row (None: the fusion's defaults).
        answers: keep only the answers of a relation question (see :func:`relation_answers`),
            from the first ``depth`` results.
        fusion: the hybrid row's fusion (``"convex"``, the default of
            :meth:`Graph.hybrid_search`, or ``"rrf"``).
        graph_seeds: the graph channel lists its seeds too (``hybrid_search(graph_seeds=)``).
        graph_scoring: how the graph channel ranks them (``hybrid_search(graph_scoring=)``).
    """

    seeds: int = 8
    hops: int = 2
    max_visited: int = 2000
    max_fanout: int = 256
    direction: str = "both"
    typed: bool = False
    weights: Optional[dict] = None
    answers: bool = False
    depth: int = 60
    fusion: str = "convex"
    graph_seeds: bool = False
    graph_scoring: str = "seed"

    def search_args(self, relation: Optional[str]) -> dict:
        args = {"seeds": self.seeds, "hops": self.hops, "max_visited": self.max_visited,
                "max_fanout": self.max_fanout, "direction": "both", "fusion": self.fusion,
                "graph_seeds": self.graph_seeds, "graph_scoring": self.graph_scoring}
        if self.typed and relation:
            args.update(rels=[relation], direction=self.direction)
        if self.answers and relation:
            args["depth"] = self.depth
        return args


# Sense: hybrid_search's defaults (the convex fusion, whose weights were chosen on the dev
# halves of WordNet, the man pages and the Jargon File; see bench/README.md).
SENSE_SETTINGS = SearchSettings()
# Relation: chosen on the dev split (see the README's WordNet section). The walk follows the
# relation asked, one pointer out from the synsets of the words the question names (entity
# seeds) and the single most similar synset; more similarity seeds only add the relatives of
# unrelated synsets. The graph channel lists its seeds too (relation_answers keeps the seeds
# another seed points to) and ranks by similarity, as search() does, fused by RRF with the
# graph channel weighted 3.
RELATION_SETTINGS = SearchSettings(seeds=1, hops=1, direction="out", typed=True, weights={"graph": 3.0},
                                   answers=True, fusion="rrf", graph_seeds=True, graph_scoring="similarity")
PLAIN_GRAPH = SearchSettings()  # the graph channel with its defaults: every rel, both directions

ALL_CHANNELS = ("dense", "bm25", "graph", "entity")

# Rows of each table: (name, channels, settings: None for the set's own).
_ROWS = {
    "sense": (("dense", ("dense",), None), ("bm25", ("bm25",), None), ("entity", ("entity",), None),
              ("graph", ("graph",), None), ("hybrid", ALL_CHANNELS, None)),
    "relation": (("dense", ("dense",), None), ("bm25", ("bm25",), None), ("entity", ("entity",), None),
                 ("graph", ("graph",), None), ("graph (all rels)", ("graph",), PLAIN_GRAPH),
                 ("hybrid", ALL_CHANNELS, None)),
}


def relation_answers(graph: Any, hits: Sequence, relation: str) -> list:
    """The answers of a relation question among the ranked hits of a hybrid search whose graph
    channel walked only ``relation`` (in their order): each hit the walk reached through a
    path, and each graph seed (a hit the graph channel returned without a path) that another
    graph seed points to with ``relation``.

    The graph seeds are where the question starts (the synsets of the word it names, and the
    most similar ones), not its answers. But the walk visits a node once, so an answer that is
    itself a seed (the hypernym "gear" of "third gear" is named by the question too) has no
    path: the second rule keeps it. Hits the graph channel did not return are not answers.
    """
    starts = {h.key for h in hits if not h.path and h.ranks.get("graph") is not None}
    found = []
    for hit in hits:
        if hit.path or (hit.key in starts and any(
                e.src in starts and e.src != hit.key
                for e in graph.neighbors(hit.key, rels=[relation], direction="in"))):
            found.append(hit)
    return found


def _search(graph: Any, query: dict, vector: np.ndarray, channels: tuple, settings: SearchSettings) -> list:
    relation = query["relation"]
    walks = "graph" in channels
    args = settings.search_args(relation) if walks else {}
    if settings.weights and len(channels) > 1:
        args["weights"] = settings.weights
    answers = bool(settings.answers and relation and walks)
    if not answers:
        args.pop("depth", None)
    res = graph.hybrid_search(query["text"], vector=vector, k=settings.depth if answers else K,
                              channels=channels, **args)
    hits = relation_answers(graph, res.hits, relation) if answers else res.hits
    return hits[:K]


def _queries(table: Any, kind: str, limit: Optional[int]) -> list:
    rows = [q for q in table.to_pylist() if q["kind"] == kind]
    return rows[:limit] if limit is not None else rows


def evaluate(graph: Any, tables: dict, embedder: Any, *, limit: Optional[int] = None,
             settings: Optional[dict] = None, warmup: int = 5, progress: Optional[bool] = None) -> dict:
    """Run the held-out queries of both sets through every row of the tables.

    Args:
        settings: ``{"sense": SearchSettings, "relation": SearchSettings}`` to override
            :data:`SENSE_SETTINGS` / :data:`RELATION_SETTINGS`.

    Returns:
        ``{"sense": report, "relation": report}``; a report holds ``queries``, ``embedding``
        (seconds in all, p50 / p99 per query), ``channels``: {row: {recall@10, mrr@10,
        ndcg@10, p50_us, p99_us}} and ``settings``. Latency is one :meth:`Graph.hybrid_search`
        call (with :func:`relation_answers` where used), single-threaded, after ``warmup``
        searches; the query vector is embedded before, one query at a time.
    """
    from .embedders import embed

    settings = {"sense": SENSE_SETTINGS, "relation": RELATION_SETTINGS, **(settings or {})}
    out = {}
    for kind in ("sense", "relation"):
        queries = _queries(tables["queries"], kind, limit)
        embed_ns, vectors = [], []
        for q in queries:
            t0 = time.perf_counter_ns()
            vectors.append(embed(embedder, [q["text"]])[0])
            embed_ns.append(time.perf_counter_ns() - t0)
        channels, results = {}, {}
        for name, names, row_settings in _ROWS[kind]:
            chosen = row_settings or settings[kind]
            for q, v in list(zip(queries, vectors))[:warmup]:
                _search(graph, q, v, names, chosen)
            latency, found = [], []
            scores: dict = {"recall@10": [], "mrr@10": [], "ndcg@10": []}
            with _progress(len(queries), f"{kind} / {name}", "query", progress) as bar:
                for q, v in zip(queries, vectors):
                    t0 = time.perf_counter_ns()
                    hits = _search(graph, q, v, names, chosen)
                    latency.append(time.perf_counter_ns() - t0)
                    keys = [h.key for h in hits]
                    found.append(hits)
                    scores["recall@10"].append(recall_at_k(keys, q["relevant"]))
                    scores["mrr@10"].append(mrr_at_k(keys, q["relevant"]))
                    scores["ndcg@10"].append(ndcg_at_k(keys, q["relevant"]))
                    bar.update()
            row = {m: float(np.mean(v)) if v else 0.0 for m, v in scores.items()}
            row.update(_percentiles(latency))
            channels[name] = row
            results[name] = found
        out[kind] = {
            "queries": len(queries),
            "embedding": {"seconds": sum(embed_ns) / 1e9, **_percentiles(embed_ns)},
            "channels": channels,
            "settings": dataclasses.asdict(settings[kind]),
            "_queries": queries,
            "_results": results,
        }
    return out


def quality_bars(report: dict) -> list:
    """The two bars of the main job, each ``{"name", "met", "value", "target", "detail"}``."""
    bars = []
    rel = report.get("relation")
    if rel and rel["queries"]:
        c = rel["channels"]
        best_name = max(("graph", "hybrid"), key=lambda n: c[n]["ndcg@10"])
        best, dense = c[best_name]["ndcg@10"], c["dense"]["ndcg@10"]
        ratio = best / dense if dense > 0 else None  # None: dense found nothing
        met = best > 0 if ratio is None else ratio >= 1.5
        shown = "dense found nothing" if ratio is None else f"{ratio:.2f}x"
        bars.append({"name": "relation: graph-guided or hybrid nDCG@10 >= 1.5x dense-only",
                     "met": bool(met), "value": ratio, "target": 1.5,
                     "detail": f"{best_name} {best:.3f} / dense {dense:.3f} = {shown}"})
    sense = report.get("sense")
    if sense and sense["queries"]:
        c = sense["channels"]
        single = max(("dense", "bm25", "entity", "graph"), key=lambda n: c[n]["ndcg@10"])
        hybrid, best = c["hybrid"]["ndcg@10"], c[single]["ndcg@10"]
        bars.append({"name": "sense: hybrid nDCG@10 >= the best single channel (of the four it fuses)",
                     "met": bool(hybrid >= best), "value": hybrid, "target": best,
                     "detail": f"hybrid {hybrid:.3f} vs best single ({single}) {best:.3f}"})
    return bars


# ====================================================================== output


def _node_line(graph: Any, key: Any, width: int = 70) -> str:
    return _short(graph.get_node(key, vector=False)["text"], width)


def _name(graph: Any, key: Any) -> str:
    """``lemma (key)``: the synset's first lemma, for reading paths."""
    lemmas = (graph.get_node(key, vector=False)["props"] or {}).get("lemmas") or []
    return f"{lemmas[0]} ({key})" if lemmas else str(key)


def _walk(graph: Any, hit: Any) -> str:
    """The path of a hit from its seed, each node by its first lemma and key."""
    return _hit_path(hit, lambda key: _name(graph, key))


def _examples(graph: Any, report: dict, count: int = 3) -> list:
    """Three questions with the hybrid row's top results: a sense query, a hypernym question and
    a question about another relation: of those whose relevant synset the hybrid search ranked in
    its top 5, one the graph channel reached by a path, ranked highest, first in query order."""
    picks = []
    for kind, want in (("sense", None), ("relation", "hypernym"), ("relation", "not hypernym")):
        part = report.get(kind)
        if not part or not part["queries"]:
            continue
        candidates = []
        for i, q in enumerate(part["_queries"]):
            if want == "hypernym" and q["relation"] != "hypernym":
                continue
            if want == "not hypernym" and q["relation"] == "hypernym":
                continue
            hits = part["_results"]["hybrid"][i]
            ranks = [rank for rank, h in enumerate(hits[:5], 1) if h.key in set(q["relevant"])]
            if ranks:
                by_path = any(h.path for h in hits[:5] if h.key in set(q["relevant"]))
                candidates.append((0 if by_path else 1, ranks[0], i, q, hits))
        if not candidates and want == "not hypernym":
            continue
        if not candidates:
            candidates = [(2, 0, 0, part["_queries"][0], part["_results"]["hybrid"][0])]
        *_, q, found = min(candidates, key=lambda c: c[:3])
        relevant = set(q["relevant"])
        hits = []
        for rank, hit in enumerate(found[:5], 1):
            hits.append({"rank": rank, "key": hit.key, "relevant": hit.key in relevant,
                         "score": hit.score, "ranks": dict(hit.ranks), "text": _node_line(graph, hit.key),
                         "walk": _walk(graph, hit) if hit.path else None,
                         "path": [{"src": e.src, "rel": e.rel, "dst": e.dst} for e in hit.path]})
        picks.append({"kind": kind, "relation": q["relation"], "qid": q["qid"], "text": q["text"],
                      "relevant": q["relevant"],
                      "relevant_text": [_node_line(graph, k) for k in q["relevant"][:3]], "hits": hits})
        if len(picks) == count:
            break
    return picks


def _fmt_us(us: Optional[float]) -> str:
    if us is None:
        return "-"
    return f"{us / 1000:.2f} ms" if us >= 1000 else f"{us:.0f} µs"


def _print_table(kind: str, part: dict, total: int, out: Callable[[str], None]) -> None:
    e = part["embedding"]
    shown = f"{part['queries']:,}" + (f" (the first) of {total:,}" if part["queries"] < total else "")
    out(f"\n{kind} queries: {shown} held out")
    header = ("channel", "recall@10", "MRR@10", "nDCG@10", "p50", "p99")
    rows = [(name, f"{r['recall@10']:.3f}", f"{r['mrr@10']:.3f}", f"{r['ndcg@10']:.3f}",
             _fmt_us(r["p50_us"]), _fmt_us(r["p99_us"])) for name, r in part["channels"].items()]
    for j, cells in enumerate(_columns([header, *rows], (False,) + (True,) * (len(header) - 1))):
        out("  " + "  ".join(cells))
        if j == 0:
            out("  " + "  ".join("-" * len(cell) for cell in cells))
    out(f"  query embedding (before each search, not in the latencies): {e['seconds']:.2f} s in all, "
        f"p50 {_fmt_us(e['p50_us'])}, p99 {_fmt_us(e['p99_us'])}")
    s = part["settings"]
    weights = ", ".join(f"{c} {w:g}" for c, w in (s["weights"] or {}).items()) or "the defaults"
    fusion = "RRF" if s.get("fusion") == "rrf" else "convex fusion"
    out(f"  graph and hybrid rows: seeds={s['seeds']} (+ the nodes the text names), hops={s['hops']}, "
        f"max_visited={s['max_visited']:,}, max_fanout={s['max_fanout']}; hybrid: {fusion}, weights {weights}")
    if s["typed"]:
        out(f"  the graph channel is told the relation asked: rels=[relation], direction={s['direction']!r};")
        if s["answers"]:
            out("  answers: the nodes the walk reached through it (seeds are where the question starts),")
            out("  and seeds another seed points to by it")
        p = dataclasses.asdict(PLAIN_GRAPH)
        out(f"  'graph (all rels)': the plain graph channel, every rel, both directions, seeds={p['seeds']}, "
            f"hops={p['hops']}")


def _print_examples(examples: list, out: Callable[[str], None]) -> None:
    out("\nexamples (hybrid row, top 5; * relevant; rank in each channel; the path that reached it):")
    for ex in examples:
        what = ex["kind"] if ex["relation"] is None else f"relation: {ex['relation']}"
        out(f"\n  [{what}] {ex['text']}")
        for key, text in zip(ex["relevant"], ex["relevant_text"]):
            out(f"    expected {key}  {text}")
        for h in ex["hits"]:
            ranks = ", ".join(f"{c} {r if r is not None else '-'}" for c, r in h["ranks"].items())
            if h["walk"]:
                how = f"path {h['walk']}"
            elif h["ranks"].get("graph") is not None:
                how = "graph seed"
            else:
                how = "not reached by the graph channel"
            out(f"    {'*' if h['relevant'] else ' '}{h['rank']}  {h['key']}  {h['text']}")
            out(f"         {ranks}; {how}")


def run(folder: Optional[str] = None, *, limit: Optional[int] = None, embedder: Any = None,
        tables: Optional[dict] = None, synsets: Optional[int] = None, rebuild: bool = False,
        as_json: bool = False, progress: Optional[bool] = None, out: Callable[[str], None] = print) -> dict:
    """The main job: build or reopen the graph, evaluate, print tables, bars and examples.

    Args:
        folder: the graph folder (default ``~/.cache/vecgraph/wordnet.vg``).
        limit: evaluate only the first ``limit`` held-out queries of each set.
        embedder: an embedder object or spec (default: the one the folder was built with, else
            ``"wordllama"``).
        tables: the data (default :func:`vecgraph.datasets.wordnet.load`, held-out queries).
        synsets: build from the first ``synsets`` synsets only (see :func:`subset`).
        rebuild: build the folder again even if it holds the same graph.
        as_json: print one JSON object with every figure instead of the tables.

    Returns:
        Every figure: ``build``, ``sense`` and ``relation`` reports, ``bars``, ``examples``,
        ``seconds``.
    """
    from . import embedders

    t_start = time.perf_counter()
    folder = os.path.abspath(os.path.expanduser(folder or DEFAULT_FOLDER))
    log = (lambda line: print(line, file=sys.stderr)) if as_json else out
    tables = _tables(tables)
    marker = _check_folder(folder)
    if synsets is None and marker is not None and marker.get("synsets"):
        synsets = int(marker["synsets"])  # re-running reuses what the folder was built from
    if synsets is not None:
        tables = subset(tables, synsets)
    if embedder is None:
        embedder = marker.get("embedder", "wordllama") if marker is not None else "wordllama"
    if isinstance(embedder, str):
        embedder = embedders.load(embedder)
    embedder = embedders.check_embedder(embedder)

    graph, build_info = build(folder, tables, embedder, progress=progress, rebuild=rebuild, synsets=synsets, log=log)
    with graph:
        t0 = time.perf_counter()
        report = evaluate(graph, tables, embedder, limit=limit, progress=progress)
        seconds_eval = time.perf_counter() - t0
        bars = quality_bars(report)
        examples = _examples(graph, report)
    figures = {
        "folder": folder,
        "build": build_info,
        **{kind: {k: v for k, v in part.items() if not k.startswith("_")} for kind, part in report.items()},
        "bars": bars,
        "examples": examples,
        "seconds": {"evaluate": seconds_eval, "total": time.perf_counter() - t_start},
    }
    if as_json:
        out(json.dumps(figures, ensure_ascii=False, default=_json_default))
        return figures
    b = build_info
    how = (f"reused (built in {b['seconds']['total']:.1f} s)" if b["reused"] else
           f"built in {b['seconds']['total']:.1f} s, of which embedding {b['seconds']['embed']:.1f} s")
    out(f"\ngraph: {b['nodes']:,} synsets, {b['edges']:,} edges, {b['aliases']:,} aliases, "
        f"embedder {b['embedder']}; {how}")
    held_out = tables["queries"].column("kind").to_pylist()
    for kind in ("sense", "relation"):
        _print_table(kind, report[kind], held_out.count(kind), out)
    out("\nquality bars (held-out split, nDCG@10):")
    for bar in bars:
        out(f"  [{'met' if bar['met'] else 'MISSED'}] {bar['name']}: {bar['detail']}")
    _print_examples(examples, out)
    out(f"\nevaluation {seconds_eval:.1f} s; total {figures['seconds']['total']:.1f} s. "
        f"Ask your own: vecgraph query {folder} \"...\"")
    return figures


def _json_default(value: Any) -> Any:
    if isinstance(value, np.generic):
        return value.item()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")
