"""Session fixtures for the vecgraph benchmarks: one synthetic graph, built once, plus the
baseline on the same data; threads pinned; warm-up done before any timing.

Environment:
    VECGRAPH_BENCH_N          nodes (default 100000; 1000000 is the opt-in large run)
    VECGRAPH_BENCH_QUERIES    timed queries (default 2000)
    VECGRAPH_BENCH_RECALL     queries for recall figures (default 500)
    VECGRAPH_BENCH_BUILD_N    nodes for bench_build.py (default: VECGRAPH_BENCH_N)
"""

from __future__ import annotations

# common first: it pins the BLAS / OpenMP pools to one thread before NumPy loads.
import common
import pytest
from baseline import Baseline, Float32Reference, exact_seeds_f32

N = common.env_int("VECGRAPH_BENCH_N", 100_000)
COUNT_QUERIES = common.env_int("VECGRAPH_BENCH_QUERIES", 2000)
COUNT_RECALL = common.env_int("VECGRAPH_BENCH_RECALL", 500)
BUILD_N = common.env_int("VECGRAPH_BENCH_BUILD_N", N)

@pytest.fixture(scope="session")
def data():
    """(SyntheticGraph with N nodes and 5N edges, float32 (COUNT_QUERIES, 384) queries)."""
    graph_data, qs, _ = common.make_data(N, COUNT_QUERIES)
    return graph_data, qs


@pytest.fixture(scope="session")
def built(data):
    """(vecgraph.Graph of the session data, its build figures), warmed up."""
    graph_data, qs = data
    graph, figures = common.build_graph(graph_data)
    for q in qs[:200]:
        graph.search(q, **common.SEARCH)
    return graph, figures


@pytest.fixture(scope="session")
def graph(built):
    return built[0]


@pytest.fixture(scope="session")
def baseline(data):
    """The baseline (bench/baseline.py) on the session data, warmed up."""
    graph_data, qs = data
    base = Baseline(graph_data.vectors, graph_data.src, graph_data.dst, graph_data.weights, **common.HNSW,
                    cache_path=common.baseline_cache_path(graph_data))
    for q in qs[:200]:
        base.search(q, **common.SEARCH)
    return base


@pytest.fixture(scope="session")
def references(data, graph, baseline):
    """Top-10 keys per recall query: vecgraph exact=True and float32 exact search."""
    graph_data, qs = data
    rq = qs[:COUNT_RECALL]
    exact = [graph.search(q, **common.SEARCH, exact=True).keys for q in rq]
    reference = Float32Reference(graph_data.vectors, baseline.adjacency)
    float32 = reference.search_many(rq, seed_ids=exact_seeds_f32(graph_data.vectors, rq, common.SEARCH["seeds"]),
                                    **common.SEARCH)
    return {"vecgraph_exact": exact, "float32_exact": float32}


def pytest_report_header(config):
    m = common.machine()
    line = (f"vecgraph bench: N={N:,}, queries={COUNT_QUERIES}, recall queries={COUNT_RECALL}, "
            f"build N={BUILD_N:,}; {m['cpu']}, {m['cores']} cores, kernels {m['isa']} ({', '.join(m['isas'])})")
    return [line]


def pytest_terminal_summary(terminalreporter):
    if not common.FIGURES:
        return
    terminalreporter.section("vecgraph figures")
    width = max(len(name) for name in common.FIGURES)
    for name, value in common.FIGURES.items():
        terminalreporter.write_line(f"{name:<{width}}  {value}")

