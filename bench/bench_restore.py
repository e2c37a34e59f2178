"""Opening a graph folder from its snapshot, and export → restore, beside the build they replace.

Figures (one graph of N nodes, about 5 N edges, 384-d, built once into a folder and checkpointed):

* open_s: ``Graph.open`` of the checkpointed folder: MANIFEST, sha256 of the snapshot files,
  Arrow IPC read (memory-mapped), node rows and edges into the engine, the HNSW graph read
  from ``hnsw.usearch``, CSR build. Split into its parts from the open report.
* open_rebuild_s: the same open with the cached HNSW file withheld (rebuilt in one parallel
  pass); only when N <= --rebuild-max-nodes, since at 1M it is the whole HNSW build.
* checkpoint_s: a checkpoint of the whole graph; checkpoint_pause_s the part of it during which
  writes wait (copying the columns out).
* export_s / restore_s: ``vecgraph.snapshot.export`` (Parquet) and ``restore`` of it into a
  new folder (which ends with an open as above).
* build_s: building the same graph from NumPy arrays (the baseline a restore avoids).

Run as a script: ``python bench/bench_restore.py --nodes 1000000 --work-dir /tmp/vg-restore``
(the built folder is reused on later runs). Under pytest-benchmark a small case runs
(VECGRAPH_BENCH_RESTORE_N nodes, default 20,000).
"""

from __future__ import annotations

import argparse
import gc
import json
import os
import shutil
import sys
import time

import common
import numpy as np
import vecgraph as vg
from vecgraph import snapshot, storage

DIM = common.DIM


def build_folder(folder: str, n_nodes: int, seed: int = 7) -> dict:
    """Build the graph into ``folder`` (deferred HNSW, one checkpoint) and return build figures."""
    data, qs, generate_s = common.make_data(n_nodes, 200, seed=seed)
    shutil.rmtree(folder, ignore_errors=True)
    started = time.perf_counter()
    graph = vg.Graph.open(folder, dim=DIM, metric="cos", sync="off", **common.HNSW)
    with graph.deferred_indexing():
        step = 100_000
        for i in range(0, n_nodes, step):
            graph.add_nodes(data.keys[i : i + step], data.vectors[i : i + step])
        nodes_s = time.perf_counter() - started
    hnsw_s = time.perf_counter() - started - nodes_s
    rels = data.rels
    graph.add_edges(data.src, data.dst, rels=rels, weights=data.weights)
    build_s = time.perf_counter() - started
    checkpoint_started = time.perf_counter()
    info = graph.checkpoint()
    checkpoint_s = time.perf_counter() - checkpoint_started
    np.save(os.path.join(os.path.dirname(folder), "queries.npy"), qs)
    expected = [graph.search(q, **common.SEARCH).keys for q in qs[:50]]
    graph.close()
    with open(os.path.join(os.path.dirname(folder), "expected.json"), "w") as f:
        json.dump(expected, f)
    return {"generate_s": generate_s, "build_nodes_s": nodes_s, "build_hnsw_s": hnsw_s, "build_s": build_s,
            "checkpoint_s": checkpoint_s, "nodes": info["nodes"], "edges": info["edges"]}


def timed_open(folder: str) -> tuple[vg.Graph, float]:
    gc.collect()
    started = time.perf_counter()
    graph = vg.Graph.open(folder)
    return graph, time.perf_counter() - started


def same_results(graph: vg.Graph, work_dir: str) -> bool:
    qs = np.load(os.path.join(work_dir, "queries.npy"))
    with open(os.path.join(work_dir, "expected.json")) as f:
        expected = json.load(f)
    return [graph.search(q, **common.SEARCH).keys for q in qs[: len(expected)]] == expected


def measure(work_dir: str, n_nodes: int, rebuild_max_nodes: int) -> dict:
    folder = os.path.join(work_dir, "graph")
    figures: dict = {"nodes_requested": n_nodes, "machine": common.machine()}
    manifest = storage.read_manifest(folder) if os.path.isdir(folder) else None
    if manifest is None or not os.path.exists(os.path.join(work_dir, "expected.json")):
        print(f"building {n_nodes:,} nodes into {folder} ...", file=sys.stderr)
        figures["build"] = build_folder(folder, n_nodes)
    graph, open_s = timed_open(folder)
    figures["open_s"] = open_s
    figures["open_hnsw"] = graph._recovery["hnsw"]
    figures["open_same_results"] = same_results(graph, work_dir)
    stats = graph.stats()
    figures["nodes"], figures["edges"] = stats["nodes"], stats["edges"]
    figures["snapshot_bytes"] = sum(
        os.path.getsize(os.path.join(folder, graph._manifest["snapshot"], name)) for name in graph._manifest["files"])
    # A checkpoint of the whole graph, and the part of it during which writes wait (export_state).
    started = time.perf_counter()
    graph._engine.export_state()
    figures["checkpoint_pause_s"] = time.perf_counter() - started
    # One new LSN to checkpoint (an edge added and deleted: the HNSW graph stays cacheable).
    graph.add_edges([0], [1], rels="bench")
    graph.delete_edges([0], [1], rels=["bench"])
    started = time.perf_counter()
    graph.checkpoint()
    figures["checkpoint_s"] = time.perf_counter() - started
    export_dir = os.path.join(work_dir, "export")
    started = time.perf_counter()
    snapshot.export(graph, export_dir, format="parquet", overwrite=True)
    figures["export_s"] = time.perf_counter() - started
    graph.close()
    del graph
    gc.collect()
    restored_dir = os.path.join(work_dir, "restored")
    started = time.perf_counter()
    restored = snapshot.restore(export_dir, restored_dir, overwrite=True)
    figures["restore_s"] = time.perf_counter() - started
    figures["restore_hnsw"] = restored._recovery["hnsw"]
    figures["restore_same_results"] = same_results(restored, work_dir)
    restored.close()
    del restored
    gc.collect()
    if figures["nodes"] <= rebuild_max_nodes:
        # The same open with the HNSW cache withheld: the index is rebuilt.
        manifest = storage.read_manifest(restored_dir)
        manifest["files"].pop(storage.HNSW_FILE, None)
        storage.write_manifest(restored_dir, manifest)
        graph, figures["open_rebuild_s"] = timed_open(restored_dir)
        figures["open_rebuild_same_results"] = same_results(graph, work_dir)
        graph.close()
    shutil.rmtree(restored_dir, ignore_errors=True)
    return figures


def bench_open_from_snapshot(benchmark, tmp_path):
    n = common.env_int("VECGRAPH_BENCH_RESTORE_N", 20_000)
    build = build_folder(str(tmp_path / "graph"), n)
    benchmark.group = "restore"
    graph = benchmark.pedantic(lambda: vg.Graph.open(str(tmp_path / "graph")), rounds=1, iterations=1)
    assert graph._recovery["hnsw"] == "loaded"
    assert same_results(graph, str(tmp_path))
    graph.close()
    common.record(benchmark, nodes=n, build_s=build["build_s"])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000)
    parser.add_argument("--work-dir", default="/tmp/vecgraph-bench-restore")
    parser.add_argument("--rebuild-max-nodes", type=int, default=200_000,
                        help="also time an open that rebuilds HNSW when the graph has at most this many nodes")
    parser.add_argument("--json", help="write the figures here")
    args = parser.parse_args(argv)
    os.makedirs(args.work_dir, exist_ok=True)
    figures = measure(args.work_dir, args.nodes, args.rebuild_max_nodes)
    text = json.dumps(figures, indent=1)
    print(text)
    if args.json:
        with open(args.json, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
