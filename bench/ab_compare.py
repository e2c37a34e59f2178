"""Two builds of vecgraph, one workload, one run: search, hybrid search, writes and ingest of
build A timed against build B, for a change that must not move the figures (a refactor).

    python bench/ab_compare.py --a OLD/python --b NEW/python [--rounds 6] [--json out.json]

Each of ``--a`` and ``--b`` is a folder holding the ``vecgraph`` package with its compiled
``_core`` (a source tree's ``python/`` folder after a build, or a site-packages). Every round
runs one child process per build, in alternating order (A B, then B A, ...), so that the noise
of a shared machine hits both alike; each child builds the same graph from the same seed and
prints its figures as JSON. The table gives each figure's median over the rounds and the ratio
B / A (for a time, below 1 is faster; for a rate, above 1 is faster).

Workload (N nodes, default 20,000, 384-d, ``vecgraph.synthetic.clustered_graph``, 5 edges per
node; every node a text of 12 words drawn from a Zipf-distributed vocabulary of 5,000, keys
``"n<i>"``):

* writes: ``add_nodes`` in batches of 1,000 and ``add_edges`` in batches of 5,000 into
  ``Graph.open(folder, sync="off")`` (rows per second); 300 one-node ``add_nodes`` calls
  (p50 µs);
* search: ``search(q, k=10)`` over 2,000 queries (p50 / p99 µs, perf_counter_ns around each
  call, after 200 untimed ones), with recall@10 against ``exact=True``;
* hybrid: ``hybrid_search(text, vector, k=10)`` over 500 queries (a node's first 6 words and
  a noisy copy of its vector; p50 / p99 µs);
* ingest: ``vecgraph.ingest.nodes`` of a Parquet file of the N nodes (keys, labels, vectors)
  into an in-memory graph inside ``deferred_indexing()`` (rows per second, HNSW pass excluded).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

WORDS = 5_000
TEXT_WORDS = 12


def _child(n: int) -> dict:
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    import vecgraph as vg
    from vecgraph.synthetic import clustered_graph, queries

    data = clustered_graph(n, dim=384, edges_per_node=5, seed=7)
    rng = np.random.default_rng(11)
    ranks = np.arange(1, WORDS + 1, dtype=np.float64)
    p = 1.0 / ranks
    p /= p.sum()
    words = rng.choice(WORDS, size=(n, TEXT_WORDS), p=p)
    texts = [" ".join(f"w{w}" for w in row) for row in words.tolist()]
    keys = [f"n{i}" for i in range(n)]
    rels = [data.rel_names[r] for r in data.rel_ids.tolist()]
    src = [f"n{i}" for i in data.src.tolist()]
    dst = [f"n{i}" for i in data.dst.tolist()]
    out: dict = {"vecgraph": os.path.dirname(vg.__file__)}
    with tempfile.TemporaryDirectory() as tmp:
        g = vg.Graph.open(os.path.join(tmp, "g.vg"), dim=384, sync="off")
        t0 = time.perf_counter()
        for lo in range(0, n, 1000):
            g.add_nodes(keys[lo:lo + 1000], data.vectors[lo:lo + 1000], texts=texts[lo:lo + 1000])
        out["add_nodes_rows_per_s"] = n / (time.perf_counter() - t0)
        t0 = time.perf_counter()
        for lo in range(0, len(src), 5000):
            g.add_edges(src[lo:lo + 5000], dst[lo:lo + 5000], rels=rels[lo:lo + 5000],
                        weights=data.weights[lo:lo + 5000])
        out["add_edges_rows_per_s"] = len(src) / (time.perf_counter() - t0)
        singles = []
        extra = rng.normal(size=(300, 384)).astype(np.float32)
        for i in range(300):
            t = time.perf_counter_ns()
            g.add_nodes([f"x{i}"], extra[i : i + 1])
            singles.append(time.perf_counter_ns() - t)
        out["add_node_single_p50_us"] = float(np.median(singles)) / 1e3
        g.wait_for_indexing()
        g.compact()

        q = queries(data, 2200, seed=3)
        for v in q[:200]:
            g.search(v, k=10)
        times = []
        for v in q[200:]:
            t = time.perf_counter_ns()
            g.search(v, k=10)
            times.append(time.perf_counter_ns() - t)
        out["search_p50_us"] = float(np.percentile(times, 50)) / 1e3
        out["search_p99_us"] = float(np.percentile(times, 99)) / 1e3
        hits = 0
        for v in q[200:700]:
            got = set(g.search(v, k=10).keys)
            want = set(g.search(v, k=10, exact=True).keys)
            hits += len(got & want)
        out["search_recall_at_10"] = hits / (500 * 10)

        picks = rng.choice(n, size=600, replace=False)
        hq = [(" ".join(texts[i].split()[:6]), q[j]) for j, i in enumerate(picks.tolist())]
        for text, v in hq[:100]:
            g.hybrid_search(text, v, k=10)
        times = []
        for text, v in hq[100:]:
            t = time.perf_counter_ns()
            g.hybrid_search(text, v, k=10)
            times.append(time.perf_counter_ns() - t)
        out["hybrid_p50_us"] = float(np.percentile(times, 50)) / 1e3
        out["hybrid_p99_us"] = float(np.percentile(times, 99)) / 1e3
        g.close()

        path = os.path.join(tmp, "nodes.parquet")
        vectors = pa.FixedSizeListArray.from_arrays(pa.array(data.vectors.reshape(-1)), 384)
        pq.write_table(pa.table({"key": pa.array(data.keys), "label": pa.array([f"c{c}" for c in data.clusters.tolist()]),
                                 "vector": vectors}), path)
        h = vg.Graph(384)
        with h.deferred_indexing():
            t0 = time.perf_counter()
            vg.ingest.nodes(h, path, progress=False)
            out["ingest_rows_per_s"] = n / (time.perf_counter() - t0)
    return out


# The child imports the package at its build's folder: first on sys.path, with an editable
# install's import hook (which would win over sys.path) dropped.
_CHILD = """
import sys
sys.meta_path[:] = [f for f in sys.meta_path if "ScikitBuild" not in type(f).__name__
                    and "skbc" not in type(f).__module__]
sys.path[:0] = [{path!r}, {bench!r}]
import json, ab_compare
print(json.dumps(ab_compare._child({n})))
"""


def _run_child(path: str, n: int) -> dict:
    """One child on the build at ``path``: the package found there, not an editable install."""
    code = _CHILD.format(path=path, bench=os.path.dirname(os.path.abspath(__file__)), n=n)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, check=False)
    if done.returncode != 0:
        raise SystemExit(f"the child on {path} failed:\n{done.stderr}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--a", required=True, help="folder holding build A's vecgraph package")
    parser.add_argument("--b", required=True, help="folder holding build B's vecgraph package")
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--nodes", type=int, default=20_000)
    parser.add_argument("--json", help="write every round's figures here")
    args = parser.parse_args(argv)
    runs: dict = {"a": [], "b": []}
    for r in range(args.rounds):
        order = ("a", "b") if r % 2 == 0 else ("b", "a")
        for side in order:
            runs[side].append(_run_child(getattr(args, side), args.nodes))
            print(f"round {r + 1}/{args.rounds} {side}: search p50 {runs[side][-1]['search_p50_us']:.1f} µs, "
                  f"hybrid p50 {runs[side][-1]['hybrid_p50_us']:.0f} µs", file=sys.stderr, flush=True)
    assert runs["a"][0]["vecgraph"] != runs["b"][0]["vecgraph"], "both builds resolved to the same package"
    names = [k for k in runs["a"][0] if k != "vecgraph"]
    print(f"A: {runs['a'][0]['vecgraph']}\nB: {runs['b'][0]['vecgraph']}\n")
    print("| figure | A (median) | B (median) | B / A |\n|---|---:|---:|---:|")
    for name in names:
        a = statistics.median(x[name] for x in runs["a"])
        b = statistics.median(x[name] for x in runs["b"])
        print(f"| {name} | {a:,.3f} | {b:,.3f} | {b / a:.3f} |")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"nodes": args.nodes, "rounds": args.rounds, "runs": runs}, f, indent=1)


if __name__ == "__main__":
    main()
