"""Ingesting nodes with precomputed 384-d vectors from a Parquet file (``vecgraph.ingest.nodes``).

Figures (N nodes: int64 key, a label, a ts and a float32 fixed-size-list vector per row,
written by ``vecgraph.synthetic.clustered_graph`` in row groups of 65,536 rows):

* ingest_s / nodes_per_s: everything but the HNSW build: Parquet decoding, row checks, int8
  quantization, node columns (and the WAL with ``--folder``). Measured inside an outer
  ``Graph.deferred_indexing()`` block, so the HNSW inserts wait for its exit.
* hnsw_s: the HNSW pass at the block's exit (all cores).
* peak_rss_growth_bytes: peak RSS of the process (VmHWM, reset before ingesting where the
  kernel allows it) minus the RSS before, against graph_bytes, the graph's own size from
  ``stats()`` (vectors, keys, texts, HNSW, CSR). The Parquet file is written by a child
  process, so its generation does not count.

Run as a script: ``python bench/bench_ingest.py --nodes 1000000`` (``--folder`` ingests into
``Graph.open(..., sync="off")`` instead of an in-memory graph). Under pytest-benchmark a small
case runs (VECGRAPH_BENCH_INGEST_N nodes, default 20,000).
"""

from __future__ import annotations

import argparse
import gc
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Optional

import common
import vecgraph as vg
from vecgraph import ingest

DIM = common.DIM
ROW_GROUP = 65_536
GRAPH_BYTES = ("vector_bytes", "csr_bytes", "hnsw_bytes", "key_bytes", "text_bytes")


def write_parquet(path: str, n_nodes: int, dim: int = DIM, seed: int = 3) -> None:
    """The bench's Parquet file: key int64, label string, ts int64, vector fixed_size_list<float32, dim>."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.parquet as pq
    from vecgraph.synthetic import clustered_graph

    data = clustered_graph(n_nodes, dim=dim, edges_per_node=0, seed=seed)
    schema = pa.schema([("key", pa.int64()), ("label", pa.string()), ("ts", pa.int64()),
                        ("vector", pa.list_(pa.float32(), dim))])
    with pq.ParquetWriter(path, schema, compression="snappy") as writer:
        for lo in range(0, n_nodes, ROW_GROUP):
            hi = min(n_nodes, lo + ROW_GROUP)
            vectors = pa.FixedSizeListArray.from_arrays(pa.array(data.vectors[lo:hi].reshape(-1)), dim)
            writer.write_table(pa.table({
                "key": pa.array(data.keys[lo:hi]),
                "label": pa.array([f"topic-{c}" for c in data.clusters[lo:hi].tolist()]),
                "ts": pa.array(np.arange(lo, hi, dtype=np.int64) * 1_000_000),
                "vector": vectors,
            }, schema=schema))


def write_parquet_in_child(path: str, n_nodes: int) -> float:
    """Write the file from a child process (so its memory is not this process's); returns seconds."""
    started = time.perf_counter()
    code = (f"import sys; sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r}); "
            f"import bench_ingest; bench_ingest.write_parquet({path!r}, {n_nodes})")
    subprocess.run([sys.executable, "-c", code], check=True)
    return time.perf_counter() - started


def _reset_peak_rss() -> bool:
    """Reset VmHWM to the current RSS (Linux: write 5 to /proc/self/clear_refs)."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def run_ingest(path: str, folder: Optional[str] = None, batch_rows: int = 65_536) -> dict:
    """Ingest the file into a fresh graph and return the figures."""
    gc.collect()
    rss_before = common.rss_bytes()
    peak_reset = _reset_peak_rss()
    graph = (vg.Graph.open(folder, dim=DIM, metric="cos", sync="off", **common.HNSW) if folder
             else vg.Graph(DIM, "cos", **common.HNSW))
    started = time.perf_counter()
    with graph.deferred_indexing():
        report = ingest.nodes(graph, path, batch_rows=batch_rows, progress=False)
        ingest_s = time.perf_counter() - started
        peak_ingest = common.peak_rss_bytes()
    hnsw_s = time.perf_counter() - started - ingest_s
    peak = common.peak_rss_bytes()
    stats = graph.stats()
    graph_bytes = sum(stats.get(k, 0) for k in GRAPH_BYTES)
    figures = {
        "nodes": report.rows_accepted,
        "batches": report.batches,
        "ingest_s": ingest_s,
        "nodes_per_s": report.rows_accepted / ingest_s,
        "hnsw_s": hnsw_s,
        "hnsw_nodes_per_s": report.rows_accepted / hnsw_s if hnsw_s > 0 else 0.0,
        "total_s": ingest_s + hnsw_s,
        "rss_before_bytes": rss_before,
        "peak_rss_growth_ingest_bytes": peak_ingest - rss_before,
        "peak_rss_growth_bytes": peak - rss_before,
        "rss_growth_after_bytes": common.rss_bytes() - rss_before,
        "graph_bytes": graph_bytes,
        "peak_over_graph": (peak - rss_before) / graph_bytes,
        "peak_reset": peak_reset,
        "stats": {k: stats[k] for k in GRAPH_BYTES if k in stats},
    }
    if folder:
        graph.close()
    return figures


def _mb(n: int) -> str:
    return f"{n / 1e6:,.0f} MB"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--nodes", type=int, default=1_000_000, help="rows of the Parquet file (default 1,000,000)")
    parser.add_argument("--batch-rows", type=int, default=65_536, help="ingest batch size (default 65,536)")
    parser.add_argument("--folder", action="store_true", help='ingest into Graph.open(..., sync="off")')
    parser.add_argument("--work-dir", default=None, help="where the Parquet file (and folder) go (default: a temp dir)")
    parser.add_argument("--keep", action="store_true", help="keep the work dir (the Parquet file is reused)")
    args = parser.parse_args(argv)
    work = args.work_dir or tempfile.mkdtemp(prefix="vg_bench_ingest_")
    os.makedirs(work, exist_ok=True)
    path = os.path.join(work, f"nodes_{args.nodes}.parquet")
    try:
        if not os.path.exists(path):
            print(f"writing {args.nodes:,} x {DIM}-d nodes to {path} ...", flush=True)
            print(f"  {write_parquet_in_child(path, args.nodes):.1f} s, {os.path.getsize(path) / 1e6:,.0f} MB",
                  flush=True)
        folder = os.path.join(work, "graph.vg") if args.folder else None
        if folder:
            shutil.rmtree(folder, ignore_errors=True)
        f = run_ingest(path, folder, args.batch_rows)
        m = common.machine()
        print(f"{m['cpu']}, {m['cores']} cores, kernels {m['isa']}; {'folder, sync=off' if folder else 'in memory'}")
        print(f"nodes ingested         {f['nodes']:>12,}  ({f['batches']} batches of {args.batch_rows:,})")
        print(f"ingest without HNSW    {f['ingest_s']:>12.2f} s   {f['nodes_per_s']:>10,.0f} nodes/s")
        print(f"HNSW build             {f['hnsw_s']:>12.2f} s   {f['hnsw_nodes_per_s']:>10,.0f} nodes/s")
        print(f"total                  {f['total_s']:>12.2f} s")
        print(f"peak RSS growth        {_mb(f['peak_rss_growth_bytes']):>12}  (during ingest, before HNSW: "
              f"{_mb(f['peak_rss_growth_ingest_bytes'])}; peak reset: {f['peak_reset']})")
        print(f"graph size (stats)     {_mb(f['graph_bytes']):>12}  "
              + ", ".join(f"{k} {_mb(v)}" for k, v in f["stats"].items()))
        print(f"peak growth / graph    {f['peak_over_graph']:>12.2f}x")
    finally:
        if not args.keep and not args.work_dir:
            shutil.rmtree(work, ignore_errors=True)
    return 0


# ------------------------------------------------------------------------------------- pytest-benchmark

try:
    import pytest
except ImportError:  # running as a script without pytest
    pytest = None

if pytest is not None:
    SMALL_N = common.env_int("VECGRAPH_BENCH_INGEST_N", 20_000)

    @pytest.fixture(scope="module")
    def parquet_file(tmp_path_factory):
        path = str(tmp_path_factory.mktemp("ingest") / f"nodes_{SMALL_N}.parquet")
        write_parquet_in_child(path, SMALL_N)
        return path

    def bench_ingest_parquet(benchmark, parquet_file):
        """Parquet -> in-memory graph: ingest (HNSW deferred) and the HNSW pass, SMALL_N nodes."""
        figures = benchmark.pedantic(run_ingest, args=(parquet_file,), rounds=1, iterations=1)
        assert figures["nodes"] == SMALL_N
        common.record(benchmark, nodes=SMALL_N, ingest_s=figures["ingest_s"], nodes_per_s=figures["nodes_per_s"],
                      hnsw_s=figures["hnsw_s"], peak_rss_growth_mb=figures["peak_rss_growth_bytes"] / 1e6,
                      graph_mb=figures["graph_bytes"] / 1e6)


if __name__ == "__main__":
    sys.exit(main())
