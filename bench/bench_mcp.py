"""What the MCP server adds to a search: ``tools/call search`` through the MCP Python SDK's own
client over stdio (``vecgraph mcp FOLDER``, a subprocess) against the same ``g.search`` in
process, on the same graph and the same queries.

The graph: a synthetic clustered graph (``vecgraph.synthetic.clustered_graph``, 384-d, about 5
edges per node) of VECGRAPH_BENCH_MCP_N nodes (default 10,000), each with a short text, in a
folder. Both sides search with k=10, seeds=8, hops=2; the server opens the folder read-only and
this process opens it read-only too. Each round times one in-process search, then the same query
as one tool call (the vector as JSON, the hits back as JSON with their paths, labels and texts),
so both see the same machine state. The difference of the medians is the server's overhead:
JSON-RPC framing and the stdio pipes both ways, argument validation, the per-hit node reads
and the output schema's validation, and the client's own parsing.

Target: the difference of the p50s at most 2 ms.

Environment:
    VECGRAPH_BENCH_MCP_N        nodes (default 10000)
    VECGRAPH_BENCH_MCP_ROUNDS   timed rounds (default 2000)

Command: ``python bench/bench_mcp.py`` (prints one table; ``--json`` prints the figures as JSON).
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
import tempfile
import time

import common  # before NumPy: it pins the BLAS / OpenMP pools
import numpy as np
import vecgraph as vg
from vecgraph.synthetic import clustered_graph, queries

N = common.env_int("VECGRAPH_BENCH_MCP_N", 10_000)
ROUNDS = common.env_int("VECGRAPH_BENCH_MCP_ROUNDS", 2000)
WARMUP = 100
SEARCH = {"k": 10, "seeds": 8, "hops": 2}
TARGET_MS = 2.0


def build(folder: str) -> np.ndarray:
    """Write the graph into ``folder``; returns (64, 384) float32 queries."""
    data = clustered_graph(N, dim=384, edges_per_node=5, seed=0)
    clusters = data.clusters.tolist()
    texts = [f"node {key} of cluster {cluster}" for key, cluster in zip(data.keys.tolist(), clusters)]
    with vg.Graph.open(folder, dim=384, sync="off") as g:
        g.add_nodes(data.keys, data.vectors, texts=texts, labels=[f"c{c % 10}" for c in clusters])
        g.add_edges(data.src, data.dst, rels=data.rels, weights=data.weights)
        g.checkpoint()
    return queries(data, 64, seed=1)


def percentiles(times_s: list) -> tuple:
    ms = np.asarray(times_s) * 1e3
    return float(np.percentile(ms, 50)), float(np.percentile(ms, 99))


async def measure(folder: str, qs: np.ndarray) -> dict:
    from mcp import ClientSession, StdioServerParameters
    from mcp.client.stdio import stdio_client

    server = StdioServerParameters(command=sys.executable, env=dict(os.environ),
                                   args=["-m", "vecgraph", "mcp", folder, "--read-only"])
    local_s: list = []
    remote_s: list = []
    with vg.Graph.open(folder, read_only=True) as g:
        arguments = [{"vector": q.tolist(), **SEARCH} for q in qs]
        async with stdio_client(server) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            await session.list_tools()
            for i in range(WARMUP + ROUNDS):
                q, args = qs[i % len(qs)], arguments[i % len(qs)]
                started = time.perf_counter()
                local = g.search(q, **SEARCH)
                local_done = time.perf_counter()
                result = await session.call_tool("search", args)
                remote_done = time.perf_counter()
                if result.is_error or result.structured_content is None:
                    raise RuntimeError(f"the tool call failed: {result.content}")
                if [hit["key"] for hit in result.structured_content["hits"]] != list(local.keys):
                    raise RuntimeError("the server's hits differ from the in-process search")
                if i >= WARMUP:
                    local_s.append(local_done - started)
                    remote_s.append(remote_done - local_done)
    local_p50, local_p99 = percentiles(local_s)
    remote_p50, remote_p99 = percentiles(remote_s)
    return {"nodes": N, "rounds": ROUNDS, "search_p50_ms": local_p50, "search_p99_ms": local_p99,
            "mcp_p50_ms": remote_p50, "mcp_p99_ms": remote_p99, "overhead_p50_ms": remote_p50 - local_p50,
            "overhead_p99_ms": remote_p99 - local_p99, "ratio_p50": remote_p50 / local_p50,
            "target_overhead_p50_ms": TARGET_MS, "met": remote_p50 - local_p50 <= TARGET_MS}


def main() -> None:
    with tempfile.TemporaryDirectory(prefix="vecgraph-bench-mcp-") as tmp:
        folder = os.path.join(tmp, "bench.vg")
        started = time.perf_counter()
        qs = build(folder)
        build_s = time.perf_counter() - started
        figures = asyncio.run(measure(folder, qs))
    figures["build_s"] = build_s
    if "--json" in sys.argv[1:]:
        print(json.dumps(figures))
        return
    print(f"MCP search over stdio vs in-process search: {N:,} nodes (384-d), k=10, seeds=8, hops=2, "
          f"{ROUNDS:,} rounds (graph built in {build_s:.1f} s)")
    for name, key in (("in-process g.search      ", "search"), ("tools/call search (stdio)", "mcp"),
                      ("difference               ", "overhead")):
        print(f"  {name} p50 {figures[key + '_p50_ms']:.3f} ms   p99 {figures[key + '_p99_ms']:.3f} ms")
    print(f"  the tool call takes {figures['ratio_p50']:.1f}x the search at p50")
    print(f"  target: difference of the p50s <= {TARGET_MS} ms: {'met' if figures['met'] else 'NOT met'}")


if __name__ == "__main__":
    main()
