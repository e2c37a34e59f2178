"""vecgraph side by side with what users use today, on the same graph and the same queries.

The job: seed-expand-rescore (k=10, seeds=8, hops=2, max_visited=2000, max_fanout=256,
both directions). Every peer gets the same node ids, vectors, edges and query vectors in one
run; each is built, timed single-threaded (one query at a time, one thread), measured against
the exact reference and freed before the next one is built.

Peers:

- ``vecgraph``: ``Graph.search`` (int8 vectors and scoring, HNSW seeds, C++ expansion).
- ``baseline``: bench/baseline.py, the glue code: usearch (f32 HNSW) seeds + SciPy CSR
  level-synchronous BFS by the same rules + NumPy float32 rescoring.
- ``hnswlib``: hnswlib (f32 HNSW, cosine) seeds + the same SciPy CSR BFS + NumPy rescoring.
- ``faiss``: faiss ``IndexHNSWFlat`` (f32, inner product on unit vectors) seeds + the same.
- ``networkx``: the LightRAG / nano-graphrag style: brute-force NumPy seeds (a matrix-vector
  product over all vectors, like nano-vectordb), a Python BFS over ``nx.Graph.neighbors``
  (adjacency inserted in (weight desc, edge id asc) order, so ``max_fanout`` takes the same
  edges; parallel edges collapse), NumPy rescoring.
- ``kuzu``: Kuzu (embedded graph database): node table with a ``FLOAT[dim]`` column, its HNSW
  vector index (``CREATE_VECTOR_INDEX`` / ``QUERY_VECTOR_INDEX``) for the seeds, a Cypher
  variable-length traversal ``(a)-[:E* SHORTEST 1..hops]-(b)`` from the seeds, then NumPy:
  each reached node's hop and best seed, visit order (hop, seed rank, id), the first
  ``max_visited``, float32 rescoring. A Cypher pattern has no per-node fanout cap ordered by
  weight, so ``max_fanout`` does not apply and, where ``max_visited`` cuts the second hop,
  the cut keeps other nodes than the reference's rules do.

HNSW parameters for every engine: M=24 (48 links on the base level), efConstruction=128,
ef=64 at query time (vecgraph's defaults). Builds may use every core; queries use one thread
(BLAS pools pinned to one thread by bench/common.py, hnswlib/faiss/Kuzu told to use one).

Figures per peer: build seconds (wall, from arrays in memory to the first answered query),
RSS growth of the process across the build (glibc heap trimmed before each reading), latency
p50 / p99 (perf_counter_ns around each call) and process CPU time p50 (process_time_ns: the
figure to read on a loaded shared machine), recall@10 against vecgraph ``search(exact=True)``
on the same graph (brute-force seeds, same expansion rules). A peer whose first queries take
more than ``--slow-ms`` runs the first ``--slow-queries`` queries only (stated in the table).

Datasets: ``wordnet`` (the committed WordNet 3.0 files, synset texts embedded with the default
wordllama embedder, queries = held-out sense queries, the usage examples, embedded the same
way) and ``synthetic`` (``vecgraph.synthetic.clustered_graph``, 384-d, 5 edges per node).

    PYTHONPATH=python python bench/compare_peers.py --dataset both --queries 1000 \\
        --json bench/figures/compare_peers.json --png bench/figures/compare_peers.png
    python bench/compare_peers.py --from-json a.json b.json --json all.json --png all.png
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import common  # noqa: E402  (pins BLAS pools to one thread before NumPy loads)

import argparse  # noqa: E402
import ctypes  # noqa: E402
import gc  # noqa: E402
import itertools  # noqa: E402
import json  # noqa: E402
import shutil  # noqa: E402
import tempfile  # noqa: E402
import time  # noqa: E402
from dataclasses import dataclass  # noqa: E402
from typing import Any, Callable, Optional  # noqa: E402

import numpy as np  # noqa: E402

import vecgraph as vg  # noqa: E402
from baseline import Baseline, expand, merged_adjacency, top_k  # noqa: E402

SEARCH = dict(common.SEARCH)  # k=10, seeds=8, hops=2, max_visited=2000, max_fanout=256
HNSW = dict(common.HNSW)  # vecgraph's defaults
ALL_PEERS = ("vecgraph", "baseline", "hnswlib", "faiss", "networkx", "kuzu")
LABELS = {
    "vecgraph": "vecgraph",
    "baseline": "usearch + SciPy + NumPy",
    "hnswlib": "hnswlib + SciPy + NumPy",
    "faiss": "faiss HNSW + SciPy + NumPy",
    "networkx": "networkx + NumPy",
    "kuzu": "Kuzu (vector index + Cypher) + NumPy",
}


@dataclass
class Dataset:
    name: str
    vectors: np.ndarray  # float32 (n, dim), unit rows
    src: np.ndarray  # int64 (m,)
    dst: np.ndarray  # int64 (m,)
    weights: np.ndarray  # float32 (m,)
    rels: list  # m str
    queries: np.ndarray  # float32 (q, dim), unit rows
    info: dict

    @property
    def n(self) -> int:
        return int(self.vectors.shape[0])

    @property
    def dim(self) -> int:
        return int(self.vectors.shape[1])


# ------------------------------------------------------------------------------------ datasets


def _unit(rows: np.ndarray) -> np.ndarray:
    rows = np.ascontiguousarray(rows, dtype=np.float32)
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    norms[norms == 0] = 1.0
    return rows / norms


def load_wordnet(count_queries: int) -> Dataset:
    from vecgraph import embedders
    from vecgraph.datasets import wordnet

    started = time.perf_counter()
    tables = wordnet.load("heldout")
    nodes, edges, queries = tables["nodes"], tables["edges"], tables["queries"]
    keys = nodes.column("key").to_pylist()
    index = {key: i for i, key in enumerate(keys)}
    src = np.fromiter((index[k] for k in edges.column("src").to_pylist()), dtype=np.int64, count=edges.num_rows)
    dst = np.fromiter((index[k] for k in edges.column("dst").to_pylist()), dtype=np.int64, count=edges.num_rows)
    weights = (edges.column("weight").to_numpy().astype(np.float32) if "weight" in edges.column_names
               else np.ones(edges.num_rows, dtype=np.float32))
    rels = edges.column("rel").to_pylist()
    texts = [q["text"] for q in queries.to_pylist() if q["kind"] == "sense"][:count_queries]
    embedder = embedders.load("wordllama")
    embed_started = time.perf_counter()
    node_texts = nodes.column("text").to_pylist()
    vectors = np.concatenate([embedders.embed(embedder, node_texts[i:i + 8192])
                              for i in range(0, len(node_texts), 8192)])
    qv = embedders.embed(embedder, texts)
    info = {"nodes": len(keys), "edges": int(edges.num_rows), "dim": int(vectors.shape[1]),
            "embedder": embedder.name, "queries": "held-out sense queries (usage examples)",
            "embed_s": time.perf_counter() - embed_started, "load_s": time.perf_counter() - started}
    return Dataset("wordnet", _unit(vectors), src, dst, weights, rels, _unit(qv), info)


def load_synthetic(n_nodes: int, count_queries: int) -> Dataset:
    data, qs, generate_s = common.make_data(n_nodes, count_queries)
    info = {"nodes": data.count_nodes, "edges": data.count_edges, "dim": data.dim, "generate_s": generate_s,
            "queries": "vecgraph.synthetic.queries (a node's vector plus noise)"}
    return Dataset(f"synthetic-{n_nodes // 1000}k" if n_nodes < 1_000_000 else f"synthetic-{n_nodes / 1e6:g}M",
                   data.vectors, data.src, data.dst, data.weights, data.rels, _unit(qs), info)


# ------------------------------------------------------------------------------------ memory


try:
    _LIBC: Any = ctypes.CDLL("libc.so.6")
except OSError:  # not glibc
    _LIBC = None


def settle() -> int:
    """Collect garbage, give freed heap back to the OS, return the RSS in bytes."""
    gc.collect()
    if _LIBC is not None:
        try:
            _LIBC.malloc_trim(0)
        except AttributeError:
            pass
    return common.rss_bytes()


# ------------------------------------------------------------------------------------ peers


class Peer:
    """Build with :meth:`build`; :meth:`search` returns the top-k node ids (best first)."""

    name = ""

    def build(self, d: Dataset) -> None:
        raise NotImplementedError

    def search(self, q: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def close(self) -> None:
        pass


class VecgraphPeer(Peer):
    name = "vecgraph"

    def build(self, d: Dataset) -> None:
        self.graph = vg.Graph(d.dim, "cos", **HNSW)
        self.graph.add_nodes(list(range(d.n)), d.vectors)
        self.graph.add_edges(d.src, d.dst, rels=d.rels, weights=d.weights)
        self.graph.search(d.vectors[0], **SEARCH)  # the first search builds the CSR

    def search(self, q: np.ndarray) -> np.ndarray:
        return self.graph.search(q, **SEARCH).keys

    def exact(self, q: np.ndarray) -> np.ndarray:
        return np.asarray(self.graph.search(q, exact=True, **SEARCH).keys, dtype=np.int64)


class CsrPeer(Peer):
    """HNSW seeds from some library + bench/baseline.py's SciPy CSR BFS + NumPy rescoring."""

    def build(self, d: Dataset) -> None:
        self.vectors = d.vectors
        self.build_index(d)
        adjacency = merged_adjacency(d.n, d.src, d.dst, d.weights)
        self._indptr, self._indices = adjacency.indptr, adjacency.indices
        self._mark = np.zeros(d.n, dtype=bool)

    def build_index(self, d: Dataset) -> None:
        raise NotImplementedError

    def seeds(self, q: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def search(self, q: np.ndarray) -> np.ndarray:
        s = SEARCH
        visited, _ = expand(self._indptr, self._indices, self.seeds(q), s["hops"], s["max_visited"],
                            s["max_fanout"], self._mark)
        return top_k(visited, self.vectors[visited] @ q, s["k"])[0]


class BaselinePeer(Peer):
    name = "baseline"

    def build(self, d: Dataset) -> None:
        self.impl = Baseline(d.vectors, d.src, d.dst, d.weights, threads=0, **HNSW)

    def search(self, q: np.ndarray) -> np.ndarray:
        s = SEARCH
        return self.impl.search(q, k=s["k"], seeds=s["seeds"], hops=s["hops"], max_visited=s["max_visited"],
                                max_fanout=s["max_fanout"])[0]


class HnswlibPeer(CsrPeer):
    name = "hnswlib"

    def build_index(self, d: Dataset) -> None:
        import hnswlib

        self.index = hnswlib.Index(space="cosine", dim=d.dim)
        self.index.init_index(max_elements=d.n, M=HNSW["connectivity"], ef_construction=HNSW["expansion_add"],
                              random_seed=0)
        self.index.add_items(d.vectors, np.arange(d.n), num_threads=os.cpu_count() or 1)
        self.index.set_ef(HNSW["expansion_search"])
        self.index.set_num_threads(1)

    def seeds(self, q: np.ndarray) -> np.ndarray:
        labels, _ = self.index.knn_query(q, k=SEARCH["seeds"], num_threads=1)
        return labels[0].astype(np.int64)


class FaissPeer(CsrPeer):
    name = "faiss"

    def build_index(self, d: Dataset) -> None:
        import faiss

        self.faiss = faiss
        faiss.omp_set_num_threads(os.cpu_count() or 1)
        self.index = faiss.IndexHNSWFlat(d.dim, HNSW["connectivity"], faiss.METRIC_INNER_PRODUCT)
        self.index.hnsw.efConstruction = HNSW["expansion_add"]
        self.index.add(d.vectors)
        self.index.hnsw.efSearch = HNSW["expansion_search"]
        faiss.omp_set_num_threads(1)

    def seeds(self, q: np.ndarray) -> np.ndarray:
        _, labels = self.index.search(q[None, :], SEARCH["seeds"])
        row = labels[0]
        return row[row >= 0].astype(np.int64)


class NetworkxPeer(Peer):
    name = "networkx"

    def build(self, d: Dataset) -> None:
        import networkx as nx

        self.vectors = d.vectors
        order = np.lexsort((np.arange(d.src.size), -d.weights))  # weight desc, edge id asc
        g = nx.Graph()
        g.add_nodes_from(range(d.n))
        g.add_weighted_edges_from(zip(d.src[order].tolist(), d.dst[order].tolist(), d.weights[order].tolist()))
        self.g = g

    def search(self, q: np.ndarray) -> np.ndarray:
        s = SEARCH
        count, max_visited, max_fanout = s["seeds"], s["max_visited"], s["max_fanout"]
        scores = self.vectors @ q
        part = np.argpartition(-scores, count - 1)[:count]
        seeds = part[np.argsort(-scores[part], kind="stable")].tolist()
        visited = list(dict.fromkeys(seeds))[:max_visited]
        seen = set(visited)
        frontier = visited
        neighbors = self.g.neighbors
        for _ in range(s["hops"]):
            if len(visited) >= max_visited or not frontier:
                break
            new = []
            for u in frontier:
                for v in itertools.islice(neighbors(u), max_fanout):
                    if v not in seen:
                        seen.add(v)
                        new.append(v)
                        if len(visited) + len(new) >= max_visited:
                            break
                if len(visited) + len(new) >= max_visited:
                    break
            visited.extend(new)
            frontier = new
        ids = np.asarray(visited, dtype=np.int64)
        return top_k(ids, self.vectors[ids] @ q, s["k"])[0]


class KuzuPeer(Peer):
    name = "kuzu"

    def build(self, d: Dataset) -> None:
        import kuzu
        import pyarrow as pa
        import pyarrow.parquet as pq

        self.vectors = d.vectors
        self.folder = tempfile.mkdtemp(prefix="vecgraph-kuzu-")
        nodes_path, edges_path = os.path.join(self.folder, "nodes.parquet"), os.path.join(self.folder, "edges.parquet")
        pq.write_table(pa.table({"id": np.arange(d.n, dtype=np.int64),
                                 "emb": pa.FixedSizeListArray.from_arrays(pa.array(d.vectors.ravel()), d.dim)}),
                       nodes_path)
        pq.write_table(pa.table({"from": d.src, "to": d.dst, "w": d.weights}), edges_path)
        self.db = kuzu.Database(os.path.join(self.folder, "db"))
        build = kuzu.Connection(self.db)  # all cores
        build.execute("LOAD vector;")
        build.execute(f"CREATE NODE TABLE N(id INT64, emb FLOAT[{d.dim}], PRIMARY KEY(id))")
        build.execute("CREATE REL TABLE E(FROM N TO N, w FLOAT)")
        build.execute(f"COPY N FROM '{nodes_path}'")
        build.execute(f"COPY E FROM '{edges_path}'")
        m = HNSW["connectivity"]
        build.execute(f"CALL CREATE_VECTOR_INDEX('N', 'vidx', 'emb', metric := 'cosine', mu := {m}, "
                      f"ml := {2 * m}, efc := {HNSW['expansion_add']})")
        build.close()
        os.remove(nodes_path)
        os.remove(edges_path)
        self.conn = kuzu.Connection(self.db, num_threads=1)
        self.conn.execute("LOAD vector;")
        self.seed_query = (
            f"CALL QUERY_VECTOR_INDEX('N', 'vidx', $q, {SEARCH['seeds']}, efs := {HNSW['expansion_search']}) "
            "RETURN node.id ORDER BY distance")
        self.walk_query = (
            f"MATCH (a:N)-[r:E* SHORTEST 1..{SEARCH['hops']}]-(b:N) WHERE a.id IN $s "
            "RETURN a.id, b.id, length(r)")
        self.search(d.vectors[0])

    def search(self, q: np.ndarray) -> np.ndarray:
        s = SEARCH
        result = self.conn.execute(self.seed_query, {"q": q.tolist()})
        seeds = np.asarray([row[0] for row in result.get_all()], dtype=np.int64)
        visited = seeds[:s["max_visited"]]
        if s["hops"] > 0 and seeds.size:
            table = self.conn.execute(self.walk_query, {"s": seeds.tolist()}).get_as_arrow()
            if table.num_rows:
                a, b, hop = (table.column(i).to_numpy() for i in range(3))
                rank = np.empty(int(seeds.max()) + 1, dtype=np.int64)
                rank[seeds[::-1]] = np.arange(seeds.size)[::-1]  # a duplicate seed keeps its best rank
                order = np.lexsort((b, rank[a], hop))  # visit order: hop, then best seed, then id
                b = b[order]
                _, first = np.unique(b, return_index=True)
                reached = b[np.sort(first)]
                reached = reached[~np.isin(reached, seeds)]
                visited = np.concatenate((visited, reached))[:s["max_visited"]]
        return top_k(visited, self.vectors[visited] @ q, s["k"])[0]

    def close(self) -> None:
        self.conn.close()
        self.db.close()
        shutil.rmtree(self.folder, ignore_errors=True)


PEERS: dict[str, Callable[[], Peer]] = {
    "vecgraph": VecgraphPeer, "baseline": BaselinePeer, "hnswlib": HnswlibPeer, "faiss": FaissPeer,
    "networkx": NetworkxPeer, "kuzu": KuzuPeer,
}
MODULES = {"baseline": ("usearch", "usearch"), "hnswlib": ("hnswlib", "hnswlib"), "faiss": ("faiss", "faiss-cpu"),
           "networkx": ("networkx", "networkx"), "kuzu": ("kuzu", "kuzu")}


def version_of(peer: str) -> str:
    """The peer's package version; raises ImportError when it is not installed."""
    if peer == "vecgraph":
        return getattr(vg, "__version__", "")
    import importlib
    import importlib.metadata

    module, dist = MODULES[peer]
    importlib.import_module(module)
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return ""


# ------------------------------------------------------------------------------------ running


def time_queries(fn: Callable[[np.ndarray], Any], qs: np.ndarray) -> tuple[list, np.ndarray, np.ndarray]:
    found = []
    wall = np.empty(len(qs), dtype=np.int64)
    cpu = np.empty(len(qs), dtype=np.int64)
    clock, cpu_clock = time.perf_counter_ns, time.process_time_ns
    for i, q in enumerate(qs):
        c0 = cpu_clock()
        t0 = clock()
        out = fn(q)
        wall[i] = clock() - t0
        cpu[i] = cpu_clock() - c0
        found.append(out)
    return found, wall, cpu


def run_dataset(d: Dataset, peers: list, args: argparse.Namespace) -> dict:
    log = lambda msg: print(f"[{d.name}] {msg}", file=sys.stderr, flush=True)  # noqa: E731
    qs = d.queries
    rows, reference = [], None
    for name in peers:
        try:
            version = version_of(name)
        except Exception as e:  # noqa: BLE001
            rows.append({"peer": name, "label": LABELS[name], "error": f"not installed ({type(e).__name__}: {e})"})
            log(f"{name}: left out: {rows[-1]['error']}")
            continue
        peer = PEERS[name]()
        log(f"{name} {version}: building")
        rss_before = settle()
        started = time.perf_counter()
        try:
            peer.build(d)
        except Exception as e:  # noqa: BLE001
            rows.append({"peer": name, "label": LABELS[name], "version": version,
                         "error": f"build failed ({type(e).__name__}: {e})"})
            log(f"{name}: left out: {rows[-1]['error']}")
            peer.close()
            continue
        build_s = time.perf_counter() - started
        rss_growth = settle() - rss_before
        if name == "vecgraph":
            log("exact reference: vecgraph search(exact=True)")
            t0 = time.perf_counter()
            reference = [peer.exact(q) for q in qs]
            log(f"  {len(qs)} exact queries in {time.perf_counter() - t0:.1f} s")
        # Warm-up on the last queries (not timed); a slow peer runs a subset.
        probe = qs[-args.warmup:]
        _, probe_wall, _ = time_queries(peer.search, probe)
        probe_ms = float(np.median(probe_wall)) / 1e6
        count = len(qs) if probe_ms <= args.slow_ms else min(len(qs), args.slow_queries)
        log(f"{name}: build {build_s:.1f} s, RSS +{rss_growth / 2**20:,.0f} MiB, warm-up p50 {probe_ms:.2f} ms; "
            f"timing {count} queries")
        found, wall, cpu = time_queries(peer.search, qs[:count])
        lat, lat_cpu = common.latency(wall), common.latency(cpu)
        row = {"peer": name, "label": LABELS[name], "version": version, "queries": count,
               "subset": count < len(qs), "build_s": build_s, "rss_growth_bytes": rss_growth,
               "p50_us": lat["p50_us"], "p99_us": lat["p99_us"], "mean_us": lat["mean_us"], "qps": lat["qps"],
               "cpu_p50_us": lat_cpu["p50_us"], "cpu_p99_us": lat_cpu["p99_us"],
               "recall_at_10": common.recall(found, reference[:count], SEARCH["k"]) if reference else None}
        rows.append(row)
        log(f"{name}: p50 {row['p50_us']:,.0f} us, p99 {row['p99_us']:,.0f} us, cpu p50 {row['cpu_p50_us']:,.0f} us, "
            f"recall@10 {row['recall_at_10']}")
        peer.close()
        del peer
        settle()
    return {"dataset": d.name, "info": d.info, "queries": len(qs), "rows": rows, "ratios": ratios(rows),
            "load_average": common.load_average()}


def ratios(rows: list) -> dict:
    """Speed-up of vecgraph over the fastest peer at equal or better recall, and over the fastest peer."""
    ok = [r for r in rows if "error" not in r]
    vg_row = next((r for r in ok if r["peer"] == "vecgraph"), None)
    others = [r for r in ok if r["peer"] != "vecgraph"]
    if vg_row is None or not others:
        return {}
    out: dict = {}
    at_recall = [r for r in others if r["recall_at_10"] is not None and r["recall_at_10"] >= vg_row["recall_at_10"]]
    for key, pool in (("at_equal_or_better_recall", at_recall), ("any_recall", others)):
        if not pool:
            out[key] = None
            continue
        best = min(pool, key=lambda r: r["p50_us"])
        best_cpu = min(pool, key=lambda r: r["cpu_p50_us"])
        out[key] = {"peer": best["peer"], "peer_p50_us": best["p50_us"], "peer_recall": best["recall_at_10"],
                    "speedup_p50": best["p50_us"] / vg_row["p50_us"],
                    "cpu_peer": best_cpu["peer"], "speedup_cpu_p50": best_cpu["cpu_p50_us"] / vg_row["cpu_p50_us"]}
    return out


# ------------------------------------------------------------------------------------ output


def table(results: list) -> str:
    lines = ["| dataset | engine | queries timed | build s | RSS growth MiB | p50 µs | p99 µs | CPU p50 µs | "
             "recall@10 vs exact | vecgraph speed-up (p50) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for res in results:
        vg_row = next((r for r in res["rows"] if r["peer"] == "vecgraph" and "error" not in r), None)
        info = res["info"]
        ds = f"{res['dataset']} ({info['nodes']:,} nodes, {info['edges']:,} edges, {info['dim']}-d)"
        for r in res["rows"]:
            label = f"{r['label']} {r.get('version', '')}".strip()
            if "error" in r:
                lines.append(f"| {ds} | {label} | left out: {r['error']} | | | | | | | |")
                continue
            speed = "1" if r["peer"] == "vecgraph" else (f"{r['p50_us'] / vg_row['p50_us']:,.1f}×" if vg_row else "–")
            count = f"{r['queries']:,}" + (" (subset)" if r["subset"] else "")
            lines.append(f"| {ds} | {label} | {count} | {r['build_s']:,.1f} | {r['rss_growth_bytes'] / 2**20:,.0f} | "
                         f"{r['p50_us']:,.0f} | {r['p99_us']:,.0f} | {r['cpu_p50_us']:,.0f} | "
                         f"{common.fmt(r['recall_at_10'], 3)} | {speed} |")
    lines.append("")
    for res in results:
        rt = res["ratios"]
        for key, text in (("at_equal_or_better_recall", "fastest peer at equal or better recall"),
                          ("any_recall", "fastest peer at any recall")):
            x = rt.get(key)
            if x is None:
                lines.append(f"- {res['dataset']}: {text}: none")
            else:
                lines.append(f"- {res['dataset']}: {text}: {LABELS[x['peer']]} (recall {x['peer_recall']:.3f}, "
                             f"p50 {x['peer_p50_us']:,.0f} µs): vecgraph {x['speedup_p50']:,.1f}× faster at p50 "
                             f"(CPU time: {x['speedup_cpu_p50']:,.1f}× vs {LABELS[x['cpu_peer']]})")
    return "\n".join(lines)


def figure(results: list, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import matplotlib.ticker

    fig, axes = plt.subplots(len(results), 2, figsize=(12, 3.6 * len(results)), squeeze=False)
    for (ax_lat, ax_rec), res in zip(axes, results):
        rows = [r for r in res["rows"] if "error" not in r]
        names = [LABELS[r["peer"]] + (f"\n({r['queries']} q)" if r["subset"] else "") for r in rows]
        colors = ["#d62728" if r["peer"] == "vecgraph" else "#7f7f7f" for r in rows]
        y = np.arange(len(rows))
        ms = [r["p50_us"] / 1e3 for r in rows]
        ax_lat.barh(y, ms, color=colors)
        ax_lat.set_xscale("log")
        ax_lat.set_yticks(y, names, fontsize=8)
        ax_lat.invert_yaxis()
        for yi, v in zip(y, ms):
            ax_lat.text(v, yi, f" {v:,.2f} ms", va="center", fontsize=8)
        # Whole decades, so the log axis labels its decades only (a span under a decade would
        # label its minor ticks on top of each other).
        ax_lat.set_xlim(10 ** np.floor(np.log10(min(ms) / 2)), 10 ** np.ceil(np.log10(max(ms) * 8)))
        ax_lat.xaxis.set_minor_formatter(matplotlib.ticker.NullFormatter())
        info = res["info"]
        ax_lat.set_title(f"{res['dataset']} ({info['nodes']:,} nodes, {info['edges']:,} edges): "
                         "p50 latency, 1 thread (log)", fontsize=9)
        ax_lat.set_xlabel("ms per query")
        rec = [r["recall_at_10"] or 0.0 for r in rows]
        ax_rec.barh(y, rec, color=colors)
        ax_rec.set_yticks(y, [""] * len(rows))
        ax_rec.invert_yaxis()
        ax_rec.set_xlim(0, 1.08)
        for yi, v in zip(y, rec):
            ax_rec.text(v, yi, f" {v:.3f}", va="center", fontsize=8)
        ax_rec.set_title("recall@10 vs vecgraph exact=True (same graph, same rules)", fontsize=9)
    fig.suptitle("seed-expand-rescore: k=10, seeds=8, hops=2, max_visited=2000; "
                 f"HNSW M={HNSW['connectivity']}, efC={HNSW['expansion_add']}, ef={HNSW['expansion_search']}",
                 fontsize=10)
    fig.tight_layout()
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    fig.savefig(path, dpi=130)


def main(argv: Optional[list] = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--dataset", choices=("wordnet", "synthetic", "both"), default="both")
    p.add_argument("--queries", type=int, default=1000, help="queries per dataset (default 1000)")
    p.add_argument("--peers", default=",".join(ALL_PEERS), help=f"comma-separated subset of {','.join(ALL_PEERS)}")
    p.add_argument("--synthetic-nodes", type=lambda s: int(s.replace("_", "")), default=1_000_000)
    p.add_argument("--slow-ms", type=float, default=50.0, help="a peer slower than this (warm-up p50) runs a subset")
    p.add_argument("--slow-queries", type=int, default=100, help="queries a slow peer runs (default 100)")
    p.add_argument("--warmup", type=int, default=20, help="untimed warm-up queries (the last ones)")
    p.add_argument("--json", help="write the results here")
    p.add_argument("--png", help="write the chart here (matplotlib, Agg)")
    p.add_argument("--from-json", nargs="+", help="print / chart the results of earlier runs instead of running")
    args = p.parse_args(argv)

    if args.from_json:
        results = []
        for path in args.from_json:
            with open(path) as f:
                results.extend(json.load(f)["results"])
        machine = None
    else:
        peers = [x.strip() for x in args.peers.split(",") if x.strip()]
        unknown = [x for x in peers if x not in PEERS]
        if unknown:
            p.error(f"unknown peers {unknown}; known: {', '.join(ALL_PEERS)}")
        if "vecgraph" in peers:
            peers.remove("vecgraph")
        peers.insert(0, "vecgraph")  # first: it also computes the exact reference
        results = []
        names = ["wordnet", "synthetic"] if args.dataset == "both" else [args.dataset]
        for name in names:
            d = load_wordnet(args.queries) if name == "wordnet" else load_synthetic(args.synthetic_nodes, args.queries)
            results.append(run_dataset(d, peers, args))
            del d
            settle()
        machine = common.machine()
    print(table(results))
    if args.json:
        os.makedirs(os.path.dirname(os.path.abspath(args.json)), exist_ok=True)
        with open(args.json, "w") as f:
            json.dump({"search": SEARCH, "hnsw": HNSW, "machine": machine, "results": results,
                       "command": " ".join(["python", "bench/compare_peers.py"] + (argv or sys.argv[1:]))},
                      f, indent=1)
    if args.png:
        figure(results, args.png)
    return 0


if __name__ == "__main__":
    sys.exit(main())
