"""Selective label and tenant filters: seeds from a scan of the member lists.

When a search's label or tenant filter admits at most ``filter_scan_max_nodes`` live nodes, its
seeds are the exact best of those nodes, found by scanning the per-label / per-tenant member
lists instead of walking HNSW. Those searches must equal ``exact=True`` bit for bit, through
upserts that move nodes between labels and tenants (and back), deletes, delete_tenant,
compaction and reopening; ``verify()`` checks the lists themselves.
"""

from __future__ import annotations

import numpy as np
import pytest

import vecgraph as vg
from conftest import assert_same

DIM = 32


def _hard_graph(n: int, threshold: int, **kwargs) -> tuple[vg.Graph, np.ndarray]:
    """n unclustered 32-d nodes on a sparse HNSW graph built on one thread (ef=1 walks miss
    seeds on it), tenant "t<i % 30>", label "rare" on every 97th node else "odd"/"even", a ring
    of edges; and 60 queries."""
    rng = np.random.default_rng(11)
    g = vg.Graph(DIM, "cos", threads=1, connectivity=4, expansion_add=8, full_scan_max_nodes=0,
                 filter_scan_max_nodes=threshold, **kwargs)
    labels = ["rare" if i % 97 == 0 else ("odd" if i % 2 else "even") for i in range(n)]
    g.add_nodes(list(range(n)), rng.standard_normal((n, DIM)).astype(np.float32), labels=labels,
                tenants=[f"t{i % 30}" for i in range(n)])
    g.add_edges(list(range(n)), [(i + 1) % n for i in range(n)], rels="next")
    return g, rng.standard_normal((60, DIM)).astype(np.float32)


def _seed_paths(g: vg.Graph) -> tuple[int, int, int]:
    s = g.stats()
    return s["seed_full_scans"], s["seed_list_scans"], s["seed_hnsw_searches"]


def test_selective_filters_scan_member_lists_and_equal_exact_search():
    g, queries = _hard_graph(3000, threshold=200)  # 100 nodes a tenant, 31 "rare", 1,500 "odd"
    assert g.stats()["member_list_bytes"] >= 2 * 3000 * 4
    cases = [
        (dict(tenants=["t3"]), "list"),                          # 100 nodes
        (dict(tenants=["t3", "t4"]), "list"),                    # 200: at the threshold
        (dict(tenants=["t3", "t4", "t5"]), "hnsw"),              # 300: one list too many
        (dict(tenants=["t3", "t3", "t4"]), "list"),              # a repeated name counts once
        (dict(labels=["rare"]), "list"),                         # 31 nodes
        (dict(labels=["odd"]), "hnsw"),                          # 1,500
        (dict(labels=["rare"], tenants=["t3", "t4", "t5"]), "list"),  # the smaller side's lists
        (dict(labels=["odd"], tenants=["t3"]), "list"),          # tenant lists, label checked per node
        (dict(tenants=["no such tenant"]), "list"),              # admits nothing
        (dict(tenants=["t3"], ts_min=1), "list"),                # ts filter applied to the listed nodes
        (dict(), "hnsw"),
    ]
    for filters, path in cases:
        before = _seed_paths(g)
        for i, q in enumerate(queries):
            params = dict(k=10, seeds=1 + i % 8, hops=i % 3, ef=1, **filters)
            res = g.search(q, **params)
            if path == "list":  # HNSW at ef=1 misses seeds here (next test)
                assert_same(res, g.search(q, exact=True, **params))
            assert len(set(res.keys)) == len(res.keys)
        full, listed, hnsw = (after - b for after, b in zip(_seed_paths(g), before))
        n = len(queries)
        assert (full, listed, hnsw) == ((n, n, 0) if path == "list" else (0, 0, n)), (filters, full, listed, hnsw)
    # Unknown names admit nothing: no results, not an error.
    assert g.search(queries[0], tenants=["no such tenant"]).keys == []


def test_hnsw_with_the_same_selective_filter_misses_seeds():
    """The list path above is not equal to exact search by chance: with HNSW (filter_scan_max_nodes 0) and
    ef=1 the same tenant-filtered searches miss seeds on this graph."""
    g, queries = _hard_graph(3000, threshold=0)
    misses = 0
    for q in queries:
        params = dict(k=8, seeds=8, hops=0, ef=1, tenants=["t3"])
        misses += g.search(q, **params).keys != g.search(q, exact=True, **params).keys
    assert misses > 0
    # 0: HNSW always, even for a filter that admits nothing.
    before = _seed_paths(g)
    assert g.search(queries[0], tenants=["no such tenant"], ef=1).keys == []
    assert [a - b for a, b in zip(_seed_paths(g), before)] == [0, 0, 1]
    g.filter_scan_max_nodes = 100
    assert all(g.search(q, k=8, seeds=8, hops=0, ef=1, tenants=["t3"]).keys ==
               g.search(q, k=8, seeds=8, hops=0, exact=True, tenants=["t3"]).keys for q in queries)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_member_lists_follow_random_writes(tmp_path, seed):
    """Random adds, upserts that move nodes between labels and tenants (and back), deletes,
    delete_tenant, compaction, checkpoint and reopen: after each step verify() is clean and every
    filtered search equals exact=True whichever path it takes."""
    rng = np.random.default_rng(seed)
    path = tmp_path / "g"
    g = vg.Graph.open(path, dim=DIM, metric="cos", connectivity=4, expansion_add=8, threads=1,
                      filter_scan_max_nodes=40, sync="off")
    tenants, labels = [f"t{i}" for i in range(6)], [f"l{i}" for i in range(4)]
    live: set[int] = set()
    next_key = compared = 0
    queries = rng.standard_normal((6, DIM)).astype(np.float32)
    for step in range(40):
        op = rng.integers(0, 10) if live else 0
        if op <= 3:  # add
            count = int(rng.integers(1, 60))
            keys = list(range(next_key, next_key + count))
            next_key += count
            g.add_nodes(keys, rng.standard_normal((count, DIM)).astype(np.float32),
                        labels=[labels[i] for i in rng.integers(0, len(labels), count)],
                        tenants=[tenants[i] for i in rng.integers(0, len(tenants), count)])
            g.add_edges(keys, [int(rng.choice(keys)) for _ in keys])
            live.update(keys)
        elif op <= 6:  # upsert: new label / tenant, some moving back and forth
            keys = [int(k) for k in rng.choice(sorted(live), size=min(len(live), 30), replace=False)]
            for _ in range(2):
                g.upsert_nodes(keys, rng.standard_normal((len(keys), DIM)).astype(np.float32),
                               labels=[labels[i] for i in rng.integers(0, len(labels), len(keys))],
                               tenants=[tenants[i] for i in rng.integers(0, 2, len(keys))])
        elif op == 7:  # delete
            keys = [int(k) for k in rng.choice(sorted(live), size=max(1, len(live) // 3), replace=False)]
            g.delete_nodes(keys)
            live.difference_update(keys)
        elif op == 8:
            gone = {k for k in live if g.get_node(k)["tenant"] == "t0"}
            assert g.delete_tenant("t0") == len(gone)
            live -= gone
        else:
            g.compact()
            if rng.integers(0, 2):
                g.checkpoint()
                g.close()
                g = vg.Graph.open(path, filter_scan_max_nodes=40, sync="off")
        assert g.verify() == [], step
        assert len(g) == len(live)
        for q in queries:
            for filters in ([dict(tenants=[t]) for t in tenants[:3]] + [dict(labels=[lab]) for lab in labels[:2]]
                            + [dict(tenants=["t1"], labels=["l1"])]):
                params = dict(k=8, seeds=4, hops=1, ef=1, **filters)
                listed = g.stats()["seed_list_scans"]
                res = g.search(q, **params)
                if g.stats()["seed_list_scans"] > listed:  # else HNSW at ef=1: approximate
                    assert_same(res, g.search(q, exact=True, **params))
                    compared += 1
                assert len(set(res.keys)) == len(res.keys)
    assert compared > 100 and g.stats()["seed_hnsw_searches"] > 0
    g.close()


def test_member_lists_drop_stale_entries():
    """A list is rewritten once its stale entries (deleted nodes, nodes moved away) outnumber
    its live ones: deleting most of a tenant shrinks the lists; moving nodes away and back
    repeatedly does not make a search return a node twice."""
    rng = np.random.default_rng(5)
    g = vg.Graph(DIM, "cos", filter_scan_max_nodes=1000)
    g.add_nodes(list(range(3000)), rng.standard_normal((3000, DIM)).astype(np.float32),
                tenants=["big" if i < 1500 else "other" for i in range(3000)])
    before = g.stats()["member_list_bytes"]
    g.delete_nodes(list(range(1400)))
    assert g.verify() == []
    assert g.stats()["member_list_bytes"] <= before - 1400 * 4  # "big" now lists its 100 live nodes
    moved = list(range(1400, 1450))
    for tenant in ["other", "big"] * 3:
        g.upsert_nodes(moved, rng.standard_normal((50, DIM)).astype(np.float32), tenants=[tenant] * 50)
        assert g.verify() == []
    q = rng.standard_normal(DIM).astype(np.float32)
    for params in (dict(k=100, seeds=100, hops=0), dict(k=10, seeds=8, hops=2)):  # no edges: seeds only
        res = g.search(q, tenants=["big"], **params)
        assert len(set(res.keys)) == len(res.keys) == params["seeds"]
        assert_same(res, g.search(q, tenants=["big"], exact=True, **params))
    assert g.stats()["seed_list_scans"] == 2


def test_one_upsert_batch_adding_to_a_list_and_pruning_it():
    """New keys join tenant/label "A" and, later in the same upsert batch, existing nodes leave
    "A" while its list is due for a rewrite (many deleted entries): the rewrite keeps the new
    nodes (their tombstone flags exist by then)."""
    rng = np.random.default_rng(8)
    for trial in range(60):
        g = vg.Graph(8, full_scan_max_nodes=0, filter_scan_max_nodes=1000)
        n = int(rng.integers(200, 3000))
        g.add_nodes(list(range(n)), rng.standard_normal((n, 8)).astype(np.float32), labels="A", tenants="A",
                    texts=["x" * int(rng.integers(0, 200)) for _ in range(n)])
        keep, m = int(rng.integers(2, 20)), int(rng.integers(1, 60))
        g.delete_nodes(list(range(keep, n)))
        new = [f"new{i}" for i in range(m)]
        g.upsert_nodes(new + list(range(keep)), rng.standard_normal((m + keep, 8)).astype(np.float32),
                       labels=["A"] * m + ["B"] * keep, tenants=["A"] * m + ["B"] * keep)
        assert g.verify() == [], trial
        q = rng.standard_normal(8).astype(np.float32)
        assert sorted(g.search(q, tenants=["A"], k=100, seeds=100, hops=0).keys) == sorted(new)
        assert g.delete_tenant("A") == m and not any(k in g for k in new)


def test_many_names_in_one_filter():
    """A filter naming thousands of tenants (some repeated, some unknown) counts each once."""
    rng = np.random.default_rng(9)
    g = vg.Graph(8, full_scan_max_nodes=0, filter_scan_max_nodes=3000)
    g.add_nodes(list(range(20_000)), rng.standard_normal((20_000, 8)).astype(np.float32),
                tenants=[f"t{i}" for i in range(20_000)])
    q = rng.standard_normal(8).astype(np.float32)
    for names, path in (([f"t{i}" for i in range(0, 6000, 2)] * 2 + ["nobody"], "list"),  # 3,000 tenants
                        ([f"t{i}" for i in range(3001)], "hnsw")):
        listed = g.stats()["seed_list_scans"]
        res = g.search(q, tenants=names, k=20, seeds=20, hops=0)
        assert (g.stats()["seed_list_scans"] - listed == 1) == (path == "list")
        if path == "list":
            assert_same(res, g.search(q, tenants=names, k=20, seeds=20, hops=0, exact=True))


def test_walk_gives_up_for_a_scan_when_any_filter_admits_very_few():
    """A where= or ts filter has no member lists: the HNSW walk measures how few of the members
    it walks the filter admits and, when filling the beam would cost more than a scan, gives up
    for an exact scan (seed_scan_fallbacks); the seeds then equal exact=True's. A filter that
    admits half the nodes keeps the walk. filter_scan_max_nodes=0: HNSW always."""
    rng = np.random.default_rng(12)
    n = 6000
    g = vg.Graph(16, "cos", full_scan_max_nodes=0, filter_scan_max_nodes=1000, filterable={"group": "int64"})
    g.add_nodes(list(range(n)), rng.standard_normal((n, 16)).astype(np.float32),
                props=[{"group": i % 500} for i in range(n)], ts=[i for i in range(n)])
    g.add_edges(list(range(n)), [(i * 7 + 1) % n for i in range(n)])
    queries = rng.standard_normal((20, 16)).astype(np.float32)

    def run(**filters) -> tuple[int, int]:
        before = g.stats()
        for i, q in enumerate(queries):
            params = dict(k=10, seeds=1 + i % 8, hops=i % 3, ef=16, **filters)
            fallbacks = g.stats()["seed_scan_fallbacks"]
            res = g.search(q, **params)
            if g.stats()["seed_scan_fallbacks"] > fallbacks:
                assert_same(res, g.search(q, exact=True, **params))
        after = g.stats()
        return (after["seed_hnsw_searches"] - before["seed_hnsw_searches"],
                after["seed_scan_fallbacks"] - before["seed_scan_fallbacks"])

    assert run(where={"group": 3}) == (20, 20)          # 12 of 6,000 nodes
    assert run(ts_min=100, ts_max=111) == (20, 20)      # 12 nodes
    assert run(where={"group": {"<": 250}}) == (20, 0)  # half the nodes
    assert run() == (20, 0)
    g.filter_scan_max_nodes = 0
    assert run(where={"group": 3}) == (20, 0)


def test_filter_admitting_only_nodes_far_from_the_query():
    """Anti-correlated filter: it admits half the graph (so the sampled share is high and the
    walk does not give up), but none of the nodes near the query. The walk must cross its
    cluster of rejected nodes and still return the best admitted nodes (those exact=True finds)."""
    rng = np.random.default_rng(14)
    n_side, dim = 3000, 16
    centre = np.zeros(dim, dtype=np.float32)
    centre[0] = 1.0
    near = centre + 0.35 * rng.standard_normal((n_side, dim)).astype(np.float32)
    far = -centre + 0.35 * rng.standard_normal((n_side, dim)).astype(np.float32)
    g = vg.Graph(dim, "cos", full_scan_max_nodes=0, filter_scan_max_nodes=1000, filterable={"side": "str"})
    g.add_nodes(list(range(2 * n_side)), np.vstack([near, far]),
                props=[{"side": "near"}] * n_side + [{"side": "far"}] * n_side,
                labels=["near"] * n_side + ["far"] * n_side)
    found = total = 0
    for q in centre + 0.2 * rng.standard_normal((30, dim)).astype(np.float32):
        for filters in ({"where": {"side": "far"}}, {"labels": ["far"]}):  # 3,000 > 1,000: HNSW both
            res = g.search(q, k=10, seeds=10, hops=0, **filters)
            exact = g.search(q, k=10, seeds=10, hops=0, exact=True, **filters)
            assert all(key >= n_side for key in res.keys) and len(res.keys) == 10
            found += len(set(res.keys) & set(exact.keys))
            total += 10
    assert found / total >= 0.9
    stats = g.stats()
    assert stats["seed_scan_fallbacks"] == 0 and stats["seed_list_scans"] == 0


def test_auto_limit_grows_with_the_graph():
    """filter_scan_max_nodes="auto": 10,000 admitted nodes up to 100,000 rows, then
    isqrt(1000 * rows); a label just under the limit takes the list scan (equal to exact=True),
    one just over it HNSW, at two graph sizes, and adding nodes moves the limit."""
    rng = np.random.default_rng(5)
    g = vg.Graph(2, "cos", threads=1, connectivity=4, expansion_add=8, full_scan_max_nodes=0,
                 filter_scan_max_nodes="auto")

    def add(count: int, label: str) -> None:
        first = len(g)
        g.add_nodes(list(range(first, first + count)), rng.standard_normal((count, 2)) + 3.0, labels=label)

    add(10_000, "at_floor")
    add(10_001, "over_floor")
    assert g.stats()["filter_scan_max_nodes"] == 10_000 == vg.FILTER_SCAN_MAX_NODES
    add(10_400, "grown")  # 10,400 admitted: over the floor, under isqrt(1000 * 110,000) = 10,488
    q = np.array([1.0, 0.5])
    before = _seed_paths(g)
    assert_same(g.search(q, labels=["at_floor"], hops=0), g.search(q, labels=["at_floor"], hops=0, exact=True))
    g.search(q, labels=["grown"], hops=0)
    after_small = _seed_paths(g)
    assert (after_small[1] - before[1], after_small[2] - before[2]) == (1, 1)  # grown: HNSW at 30,401 rows
    add(110_000 - len(g), "rest")
    assert len(g) == 110_000 and g.stats()["filter_scan_max_nodes"] == 10_488
    for label in ("grown", "over_floor"):  # 10,400 and 10,001 <= 10,488 now: list scans, exact
        assert_same(g.search(q, labels=[label], hops=0), g.search(q, labels=[label], hops=0, exact=True))
    after_large = _seed_paths(g)
    assert (after_large[1] - after_small[1], after_large[2] - after_small[2]) == (2, 0)  # exact=True: full scans
    g.filter_scan_max_nodes = 10_000  # a set number is the limit at any size
    g.search(q, labels=["grown"], hops=0)
    assert _seed_paths(g)[2] - after_large[2] == 1 and g.stats()["filter_scan_max_nodes"] == 10_000
