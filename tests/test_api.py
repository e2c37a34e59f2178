"""The public API with real asserted values: columns, reads, neighbours, stats, filters, batches,
paths, quantization and hop decay."""

from __future__ import annotations

import re
import threading
from datetime import date, datetime, timedelta, timezone

import numpy as np
import pytest

import vecgraph as vg
from conftest import GraphSpec, assert_same, build_graph
from reference import reference_search

METRICS = ["cos", "ip", "l2"]


def numpy_quantize(vectors: np.ndarray, metric: str) -> tuple[np.ndarray, np.ndarray]:
    """The documented quantization, in NumPy: (codes int8, scales float32)."""
    x64 = np.asarray(vectors, dtype=np.float64)
    if metric == "cos":
        x64 = x64 / np.linalg.norm(x64, axis=1, keepdims=True)
    x = x64.astype(np.float32)
    max_abs = np.max(np.abs(x), axis=1)
    scales = (max_abs / np.float32(127)).astype(np.float32)
    codes = np.zeros(x.shape, dtype=np.int8)
    nonzero = max_abs > 0
    inverse = (np.float32(127) / max_abs[nonzero]).astype(np.float32)
    products = (x[nonzero] * inverse[:, None]).astype(np.float32)
    codes[nonzero] = np.clip(np.rint(products), -127, 127).astype(np.int8)
    return codes, scales


def normalised(vectors: np.ndarray, metric: str) -> np.ndarray:
    x64 = np.asarray(vectors, dtype=np.float64)
    if metric == "cos":
        x64 = x64 / np.linalg.norm(x64, axis=1, keepdims=True)
    return x64.astype(np.float32)


@pytest.fixture(scope="module")
def people():
    """A small social graph with every column set."""
    keys = ["ann", "bob", "cat", 10, 11, "dan"]
    vectors = np.array([[3, 4, 0], [1, 0, 0], [0, 1, 0], [0, 0, 2], [1, 1, 1], [-1, 2, 0.5]], np.float32)
    labels = ["person", "person", "pet", "doc", "doc", "person"]
    tenants = ["t1", "t1", "t1", "t2", "t2", "t1"]
    ts = [100, 200, 300, 400, 500, 600]
    texts = ["Ann", "Bob", "", "doc ten", "doc eleven", "Dan \u00e9"]
    props = [{"age": 30, "tags": ["a", "b"]}, None, {"nested": {"x": 1.5, "y": None}}, {}, {"ü": "ñ"}, None]
    g = vg.Graph(3, "cos")
    g.add_nodes(keys, vectors, labels=labels, tenants=tenants, ts=ts, texts=texts, props=props)
    # edges, in insertion order (edge id = position)
    edges = [
        ("ann", "bob", "knows", 1.0),    # 0
        ("ann", "cat", "owns", 2.0),     # 1
        ("bob", "ann", "knows", 1.0),    # 2
        ("ann", 10, "wrote", 1.0),       # 3
        ("ann", "ann", "self", 0.5),     # 4
        (11, "ann", "cites", 3.0),       # 5
        ("ann", "bob", "knows", 2.0),    # 6  parallel to 0
        ("dan", "ann", "knows", -1.0),   # 7
    ]
    g.add_edges([e[0] for e in edges], [e[1] for e in edges], rels=[e[2] for e in edges],
                weights=[e[3] for e in edges], ts=list(range(len(edges))))
    return dict(g=g, keys=keys, vectors=vectors, labels=labels, tenants=tenants, ts=ts, texts=texts, props=props,
                edges=edges)


def test_get_node_returns_every_column(people):
    g = people["g"]
    assert g.dim == 3 and g.metric == "cos"
    assert repr(g) == "Graph(dim=3, metric='cos', nodes=6, edges=8)"
    for i, key in enumerate(people["keys"]):
        node = g.get_node(key)
        assert set(node) == {"key", "label", "tenant", "ts", "text", "props", "aliases", "vector"}
        assert node["aliases"] == []
        assert node["key"] == key and type(node["key"]) is type(key)
        assert node["label"] == people["labels"][i]
        assert node["tenant"] == people["tenants"][i]
        assert node["ts"] == people["ts"][i]
        assert node["text"] == people["texts"][i]
        assert node["props"] == people["props"][i]
        vector = node["vector"]
        assert vector.dtype == np.float32 and vector.shape == (3,)
        codes, scales = g.quantized([key])
        assert np.array_equal(vector, codes[0].astype(np.float32) * scales[0])  # dequantized: codes * scale
        want = normalised(people["vectors"][i : i + 1], "cos")[0]
        assert np.max(np.abs(vector - want)) <= scales[0] / 2 + 1e-6
        without = g.get_node(key, vector=False)
        assert set(without) == set(node) - {"vector"}
        assert {k: v for k, v in node.items() if k != "vector"} == without
    with pytest.raises(TypeError, match="vector must be True or False, got str"):
        g.get_node(people["keys"][0], vector="no")


@pytest.mark.parametrize("metric", METRICS)
def test_stored_vector_within_int8_error(metric):
    rng = np.random.default_rng(1)
    vectors = (rng.normal(size=(40, 13)) * rng.uniform(0.01, 100, size=(40, 1))).astype(np.float32)
    keys = list(range(40))
    g = vg.Graph(13, metric)
    g.add_nodes(keys, vectors)
    codes, scales = g.quantized(keys)
    want = normalised(vectors, metric)
    for i, key in enumerate(keys):
        vector = g.get_node(key)["vector"]
        assert np.max(np.abs(vector - want[i])) <= scales[i] / 2 + 1e-6 * max(1.0, float(np.abs(want[i]).max()))
        assert np.max(np.abs(codes[i].astype(np.int32))) == 127  # the largest component maps to +-127


def test_props_come_back_as_json_reads_them():
    """As add_nodes documents: props are JSON text, so int keys come back as str, tuples as
    lists and datetimes as int microseconds since the epoch."""
    g = vg.Graph(2)
    when = datetime(2024, 1, 1, tzinfo=timezone.utc)
    g.add_nodes(["a", "b"], [[1, 0], [0, 1]], props=[{1: (2, 3), "when": when}, {"nested": {2: None}}])
    assert g.get_node("a")["props"] == {"1": [2, 3], "when": 1_704_067_200_000_000}
    assert g.get_node("b")["props"] == {"nested": {"2": None}}


def test_ts_takes_datetimes_dates_and_datetime64():
    """ts of nodes and edges: ints (microseconds), datetimes (naive: UTC; aware: their offset),
    dates (midnight UTC), mixed in a list, or a datetime64 array; a value of another type or
    NaT is refused and the batch leaves nothing."""
    g = vg.Graph(2)
    day = 86_400_000_000
    jan1 = 1_704_067_200_000_000  # 2024-01-01T00:00:00Z
    g.add_nodes(["a", "b", "c"], [[1, 0], [0, 1], [1, 1]],
                ts=[datetime(2024, 1, 1), date(2024, 1, 2), 5])
    g.add_nodes(["d"], [[1, 2]], ts=datetime(2024, 1, 1, 2, tzinfo=timezone(timedelta(hours=2))))
    g.add_nodes(["e", "f"], [[2, 1], [2, 2]], ts=np.array(["2024-01-01", "2024-01-02T00:00:01"], dtype="datetime64"))
    assert [g.get_node(k)["ts"] for k in "abcdef"] == [jan1, jan1 + day, 5, jan1, jan1, jan1 + day + 1_000_000]
    assert g.search([1, 0], k=10, exact=True, since=date(2024, 1, 2)).keys == ["f", "b"]
    with pytest.raises(TypeError, match=r"ts\[1\] must be an int .* got str 'x'"):
        g.add_nodes(["x", "y"], [[1, 0], [0, 1]], ts=[datetime(2024, 1, 1), "x"])
    with pytest.raises(vg.InvalidArgumentError, match="NaT at row 0"):
        g.add_nodes(["x", "y"], [[1, 0], [0, 1]], ts=np.array(["NaT", "2024-01-01"], dtype="datetime64[s]"))
    assert len(g) == 6 and "x" not in g
    # Beyond int64 microseconds NumPy's conversion wraps; a duration is no timestamp.
    # (datetime64[Y] from ints counts years from 1970)
    with pytest.raises(vg.InvalidArgumentError, match=r"ts holds 301970 at row 1, beyond int64 microseconds"):
        g.add_nodes(["x", "y"], [[1, 0], [0, 1]], ts=np.array([54, 300_000], "datetime64[Y]"))
    with pytest.raises(vg.InvalidArgumentError, match=r"ts holds -298030 at row 0"):
        g.add_edges(["a"], ["b"], ts=np.array([-300_000], "datetime64[Y]"))
    with pytest.raises(TypeError, match=r"ts must be timestamps .* got a timedelta64\[s\] array of durations"):
        g.add_nodes(["x"], [[1, 0]], ts=np.array([5], "timedelta64[s]"))
    with pytest.raises(vg.InvalidArgumentError) as raised:
        g.add_nodes(["x", "y"], [[1, 0], [0, 1]], props=[None, {"when": np.datetime64(300_000, "Y")}])
    assert str(raised.value) == ("props row 1 is not JSON-serializable: a datetime64 value holds 301970, beyond int64 "
                                 "microseconds since the epoch (about 290,000 years either side of 1970)")
    assert len(g) == 6 and "x" not in g and g.stats()["edges"] == 0
    g.add_nodes(["g"], [[1, 3]], ts=np.array([292_000], "datetime64[Y]"))  # year 293970: within range, kept exactly
    assert g.get_node("g")["ts"] == int(np.datetime64(292_000, "Y").astype("datetime64[us]").astype(np.int64))
    g.add_edges(["a"], ["b"], ts=[datetime(2024, 1, 1)])
    assert g.stats()["edges"] == 1


def test_defaults_for_unset_columns():
    g = vg.Graph(2, "ip")
    g.add_nodes(["a", "b"], [[1, 2], [3, 4]])
    node = g.get_node("b")
    assert (node["label"], node["tenant"], node["ts"], node["text"], node["props"]) == ("", "", 0, "", None)
    g.add_edges(["a"], ["b"])
    assert g.neighbors("a") == [("a", "", "b", 1.0)]
    # one label / tenant / ts for all rows
    g.add_nodes(["c", "d"], [[1, 0], [0, 1]], labels="L", tenants="T", ts=7)
    assert [g.get_node(k)["label"] for k in "abcd"] == ["", "", "L", "L"]
    assert [g.get_node(k)["tenant"] for k in "abcd"] == ["", "", "T", "T"]
    assert [g.get_node(k)["ts"] for k in "abcd"] == [0, 0, 7, 7]
    g.add_edges(["c", "d"], ["d", "c"], rels="R", weights=0.25)
    assert g.neighbors("c", direction="both") == [("c", "R", "d", 0.25), ("d", "R", "c", 0.25)]


def test_batches_that_grow_the_columns_and_batches_that_fit_keep_every_column():
    # Batches of new keys only (their rows go into grown copies of the columns, or in place
    # when the columns have room) and batches with upserts, in random sizes; afterwards every
    # node's columns and stored codes, and the label and tenant member lists, match a model.
    rng = np.random.default_rng(7)
    dim = 5
    g = vg.Graph(dim, "l2", full_scan_max_nodes=0, filter_scan_max_nodes=100_000)  # seeds: member-list scans
    model: dict = {}
    next_key = 0
    for batch in range(40):
        upserts = batch % 4 == 3 and model
        count_new = int(rng.choice([1, 2, 7, 50, 300]))
        keys = list(range(next_key, next_key + count_new))
        next_key += count_new
        if upserts:
            keys += [int(k) for k in rng.choice(sorted(model), size=min(5, len(model)), replace=False)]
        n = len(keys)
        columns = dict(
            vectors=rng.normal(size=(n, dim)).astype(np.float32),
            labels=[f"L{rng.integers(4)}" for _ in range(n)],
            tenants=[f"T{rng.integers(3)}" for _ in range(n)],
            ts=[int(t) for t in rng.integers(0, 1 << 40, size=n)],
            texts=[f"text {k} of batch {batch}" * int(rng.integers(0, 3)) for k in keys],
            props=[{"batch": batch, "key": k} if rng.random() < 0.5 else None for k in keys],
        )
        (g.upsert_nodes if upserts else g.add_nodes)(keys, columns["vectors"],
                                                      labels=columns["labels"], tenants=columns["tenants"],
                                                      ts=columns["ts"], texts=columns["texts"], props=columns["props"])
        for i, key in enumerate(keys):
            model[key] = {name: values[i] for name, values in columns.items()}
    assert len(g) == len(model)
    keys = sorted(model)
    codes, scales = g.quantized(keys)
    want_codes, want_scales = numpy_quantize(np.stack([model[k]["vectors"] for k in keys]), "l2")
    assert np.array_equal(codes, want_codes) and np.array_equal(scales, want_scales)
    for key in keys:
        node = g.get_node(key)
        want = model[key]
        assert (node["label"], node["tenant"], node["ts"], node["text"], node["props"]) == (
            want["labels"], want["tenants"], want["ts"], want["texts"], want["props"]), key
    query = np.ones(dim, np.float32)
    for name, values in (("labels", [f"L{i}" for i in range(4)]), ("tenants", [f"T{i}" for i in range(3)])):
        for value in values:
            members = {k for k in keys if model[k][name] == value}
            found = g.search(query, k=len(model), seeds=len(model), hops=0, **{name: [value]})
            assert set(found.keys) == members, (name, value)
    assert g.stats()["seed_list_scans"] == 7


def test_len_count_edges_contains(people):
    g = people["g"]
    assert len(g) == 6
    assert g.count_edges == 8
    for key in people["keys"]:
        assert key in g
    assert "eve" not in g and 12 not in g and "10" not in g and 10.0 not in g


def test_neighbors_each_direction_in_weight_then_insertion_order(people):
    g = people["g"]
    E = vg.graph.Edge
    out = g.neighbors("ann")
    assert out == g.neighbors("ann", direction="out")
    # out-edges of ann: 0 (1.0), 1 (2.0), 3 (1.0), 4 self (0.5), 6 (2.0) -> by (weight desc, id asc): 1, 6, 0, 3, 4
    assert out == [E("ann", "owns", "cat", 2.0), E("ann", "knows", "bob", 2.0), E("ann", "knows", "bob", 1.0),
                   E("ann", "wrote", 10, 1.0), E("ann", "self", "ann", 0.5)]
    assert all(isinstance(e, E) for e in out)
    # in-edges of ann: 2 (1.0), 4 self (0.5), 5 (3.0), 7 (-1.0) -> 5, 2, 4, 7
    assert g.neighbors("ann", direction="in") == [E(11, "cites", "ann", 3.0), E("bob", "knows", "ann", 1.0),
                                                  E("ann", "self", "ann", 0.5), E("dan", "knows", "ann", -1.0)]
    # both: merged by (weight desc, edge id asc), the self-loop once -> 5, 1, 6, 0, 2, 3, 4, 7
    both = g.neighbors("ann", direction="both")
    assert both == [E(11, "cites", "ann", 3.0), E("ann", "owns", "cat", 2.0), E("ann", "knows", "bob", 2.0),
                    E("ann", "knows", "bob", 1.0), E("bob", "knows", "ann", 1.0), E("ann", "wrote", 10, 1.0),
                    E("ann", "self", "ann", 0.5), E("dan", "knows", "ann", -1.0)]
    # rel filters
    assert g.neighbors("ann", rels=["knows"]) == [E("ann", "knows", "bob", 2.0), E("ann", "knows", "bob", 1.0)]
    assert g.neighbors("ann", rels="knows", direction="both") == [
        E("ann", "knows", "bob", 2.0), E("ann", "knows", "bob", 1.0), E("bob", "knows", "ann", 1.0),
        E("dan", "knows", "ann", -1.0)]
    assert g.neighbors("ann", rels=["self", "cites"], direction="both") == [
        E(11, "cites", "ann", 3.0), E("ann", "self", "ann", 0.5)]
    assert g.neighbors("ann", rels=["no-such-rel"], direction="both") == []
    assert g.neighbors("ann", rels=[]) == []
    assert g.neighbors("cat") == []
    assert g.neighbors("cat", direction="in") == [E("ann", "owns", "cat", 2.0)]
    assert g.neighbors(10, direction="both") == [E("ann", "wrote", 10, 1.0)]


def test_stats_counts(people):
    g = people["g"]
    s = g.stats()
    assert s["nodes"] == 6 and s["edges"] == 8 and s["edge_vectors"] == 0
    assert s["labels"] == 3  # person, pet, doc
    assert s["tenants"] == 2
    assert s["rels"] == 5  # knows, owns, wrote, self, cites
    assert s["dim"] == 3 and s["metric"] == "cos"
    assert (s["connectivity"], s["expansion_add"], s["expansion_search"]) == (24, 128, 128)
    assert s["isa"] == vg.active_isa() and s["isa"] in vg.available_isas()
    assert vg.available_isas()[0] == "serial"
    for name in ("vector_bytes", "csr_bytes", "hnsw_bytes", "key_bytes"):
        assert isinstance(s[name], int) and s[name] > 0
    assert s["vector_bytes"] >= 6 * 3 + 6 * 4
    g2 = vg.Graph(5, "l2", connectivity=4, expansion_add=20, expansion_search=7, threads=1)
    s2 = g2.stats()
    assert (s2["nodes"], s2["edges"], s2["labels"], s2["tenants"], s2["rels"]) == (0, 0, 0, 0, 0)
    assert (s2["dim"], s2["metric"], s2["connectivity"], s2["expansion_add"], s2["expansion_search"], s2["threads"]) == (
        5, "l2", 4, 20, 7, 1)
    g2.add_nodes([1], np.ones((1, 5)))
    g2.add_edges([1], [1], vectors=np.ones((1, 5)))
    s2 = g2.stats()
    assert (s2["nodes"], s2["edges"], s2["edge_vectors"], s2["labels"], s2["tenants"], s2["rels"]) == (1, 1, 1, 1, 1, 1)


def test_relation_names_new_known_repeated_and_rejected_across_batches(tmp_path):
    """Relation ids are assigned before the batch is applied: names new in a batch, names seen in
    earlier batches, runs of one name and "" each keep their edges; a rejected batch adds none."""
    rng = np.random.default_rng(5)
    path = str(tmp_path / "g")
    g = vg.Graph.open(path, dim=4, metric="cos")
    g.add_nodes(list(range(20)), rng.normal(size=(20, 4)))
    pool = ["", "knows", "knöws", "kno\u0308ws", "🙂", "owns", "a" * 40]
    model: dict[str, list] = {}
    for batch in range(12):
        n = int(rng.integers(1, 30))
        src, dst = rng.integers(0, 20, n).tolist(), rng.integers(0, 20, n).tolist()
        names = pool[: 2 + batch // 2]  # each later batch may bring a name never seen before
        rels = [names[int(i)] for i in np.repeat(rng.integers(0, len(names), (n + 2) // 3), 3)[:n]]
        g.add_edges(src, dst, rels=rels)
        for s, d, r in zip(src, dst, rels):
            model.setdefault(r, []).append((s, d))
        with pytest.raises(vg.NotFoundError):
            g.add_edges([0, 1], [1, 999], rels=[f"never{batch}", "knows"])
    for reopen in (False, True):
        if reopen:
            g.close()
            g = vg.Graph.open(path)
        assert g.stats()["rels"] == len(model)
        for rel, pairs in model.items():
            got = sorted((e.src, e.dst) for k in range(20) for e in g.neighbors(k, rels=[rel]))
            assert got == sorted(pairs), rel
        assert g.neighbors(0, rels=["never0"]) == []
        assert g.verify() == []
    g.close()


# ----------------------------------------------------------------------------- search


def _random_spec(n=300, dim=16, metric="cos", seed=0, count_edges=1200) -> GraphSpec:
    rng = np.random.default_rng(seed)
    keys = [i if i % 3 else f"n{i}" for i in range(n)]
    vectors = rng.normal(size=(n, dim)).astype(np.float32)
    labels = [("a", "b", "c")[i % 3] for i in range(n)]
    tenants = [("t1", "t2")[(i // 2) % 2] for i in range(n)]
    ts = [int(t) for t in rng.integers(0, 100, n)]
    src = rng.integers(0, n, count_edges)
    dst = rng.integers(0, n, count_edges)
    edges = [(keys[s], keys[d], ("r", "s", "t")[j % 3], float(np.float32(rng.uniform(0, 2))))
             for j, (s, d) in enumerate(zip(src, dst))]
    return GraphSpec(dim=dim, metric=metric, keys=keys, vectors=vectors, labels=labels, tenants=tenants, ts=ts,
                     edges=edges)


@pytest.fixture(scope="module")
def big():
    spec = _random_spec()
    g, model = build_graph(spec)
    queries = np.random.default_rng(99).normal(size=(12, spec.dim)).astype(np.float32)
    return dict(spec=spec, g=g, model=model, queries=queries)


def test_filters_restrict_results(big):
    g, spec, model = big["g"], big["spec"], big["model"]
    info = {k: (spec.labels[i], spec.tenants[i], spec.ts[i]) for i, k in enumerate(spec.keys)}
    q = big["queries"][0]
    cases = [dict(labels=["a"]), dict(labels=["b", "c"]), dict(tenants=["t2"]), dict(ts_min=20, ts_max=60),
             dict(ts_min=90), dict(ts_max=5), dict(labels=["a"], tenants=["t1"], ts_min=10, ts_max=80)]
    for filters in cases:
        res = g.search(q, k=40, seeds=8, hops=2, exact=True, **filters)
        assert len(res) > 0
        for key in res.keys:
            label, tenant, ts = info[key]
            assert "labels" not in filters or label in filters["labels"]
            assert "tenants" not in filters or tenant in filters["tenants"]
            assert ts >= filters.get("ts_min", -(2**63)) and ts <= filters.get("ts_max", 2**63 - 1)
        for path in res.paths:  # nodes walked through pass the filters too
            for edge in path:
                for end in (edge.src, edge.dst):
                    label, tenant, ts = info[end]
                    assert "labels" not in filters or label in filters["labels"]
        assert_same(res, reference_search(model, q, k=40, seeds=8, hops=2, **filters))
        # with hops=0 and seeds=k=n the filter alone decides the result set
        every = g.search(q, k=len(spec.keys), seeds=len(spec.keys), hops=0, exact=True, **filters)
        admitted = {k for k, (label, tenant, ts) in info.items()
                    if ("labels" not in filters or label in filters["labels"])
                    and ("tenants" not in filters or tenant in filters["tenants"])
                    and filters.get("ts_min", -1) <= ts <= filters.get("ts_max", 10**9)}
        assert set(every.keys) == admitted and len(every.keys) == len(admitted)
        # the HNSW path filters inside the seed search: same set
        approx = g.search(q, k=len(spec.keys), seeds=len(spec.keys), hops=0, ef=len(spec.keys), **filters)
        assert set(approx.keys) <= admitted


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("exact", [True, False])
def test_search_batch_equals_search(big, threads, exact):
    g, queries = big["g"], big["queries"]
    params = dict(k=12, seeds=5, hops=2, max_visited=60, max_fanout=6, direction="both", rels=["r", "s"])
    batch = g.search_batch(queries, threads=threads, exact=exact, **params)
    assert isinstance(batch, list) and len(batch) == len(queries)
    for q, got in zip(queries, batch):
        want = g.search(q, exact=exact, **params)
        assert_same(got, want)
        assert len(got) == 12
    assert g.search_batch(np.zeros((0, g.dim), np.float32), threads=threads, exact=exact) == []


def test_search_batch_over_several_chunks_keeps_query_order():
    spec = _random_spec(n=80, dim=6, metric="l2", seed=3, count_edges=200)
    g, model = build_graph(spec)
    queries = np.random.default_rng(5).normal(size=(2100, 6)).astype(np.float32)  # chunks of 1024
    batch = g.search_batch(queries, k=3, seeds=2, hops=1, exact=True, threads=2)
    assert len(batch) == 2100
    for i in (0, 1, 1023, 1024, 1025, 2047, 2048, 2099):
        assert_same(batch[i], reference_search(model, queries[i], k=3, seeds=2, hops=1))
    for i in range(0, 2100, 7):
        assert batch[i].keys == g.search(queries[i], k=3, seeds=2, hops=1, exact=True).keys


def test_search_from_many_threads_matches_serial(big):
    g, queries = big["g"], big["queries"]
    params = dict(k=10, seeds=4, hops=2, exact=True)
    serial = [g.search(q, **params) for q in queries]
    results = {}

    def worker(t):
        results[t] = [g.search(q, **params) for q in queries]

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for t in range(4):
        for got, want in zip(results[t], serial):
            assert_same(got, want)


def test_paths_are_valid_chains(big):
    g, spec = big["g"], big["spec"]
    n = len(spec.keys)
    for direction in ("out", "in", "both"):
        for q in big["queries"][:4]:
            res = g.search(q, k=n, seeds=3, hops=3, direction=direction, max_fanout=4, exact=True)
            hop_of = dict(zip(res.keys, res.hops.tolist()))
            assert sorted(hop_of.values()).count(0) == 3 == res.count_seeds
            assert len(res) == res.count_visited
            for hit in res:
                assert len(hit.path) == hit.hop
                node = hit.key
                for edge in reversed(hit.path):  # walk back from the node to its seed
                    if direction == "out":
                        assert edge.dst == node
                        node = edge.src
                    elif direction == "in":
                        assert edge.src == node
                        node = edge.dst
                    else:
                        assert node in (edge.src, edge.dst) and edge.src != edge.dst
                        node = edge.src if edge.dst == node else edge.dst
                assert hop_of[node] == 0  # the chain starts at a seed
                # each step of the chain goes one hop further
                walk = [node]
                for edge in hit.path:
                    nxt = edge.dst if edge.src == walk[-1] else edge.src
                    walk.append(nxt)
                assert [hop_of[k] for k in walk] == list(range(hit.hop + 1))
                for edge in hit.path:
                    assert edge in g.neighbors(edge.src) and edge.rel in ("r", "s", "t")


def test_result_accessors(people):
    g = people["g"]
    q = np.array([3, 4, 0], np.float32)
    res = g.search(q, k=3, seeds=1, hops=1, direction="out", exact=True)
    assert res.keys[0] == "ann"
    hits = list(res)
    assert len(hits) == len(res) == 3
    assert hits[0] == vg.Hit("ann", float(res.scores[0]), 0, [])
    assert res[-1] == hits[-1] and res[0].key == "ann"
    with pytest.raises(IndexError):
        res[3]
    with pytest.raises(IndexError):
        res[-4]
    assert "ann" in repr(res) and "visited=" in repr(res)
    assert abs(res.scores[0] - 1.0) < 0.02  # cos of ann with itself, int8 error only
    for hit in hits[1:]:
        assert hit.hop == 1 and len(hit.path) == 1 and hit.path[0].src == "ann"


# ----------------------------------------------------------------------------- quantization


@pytest.mark.parametrize("metric", METRICS)
def test_quantize_matches_numpy(metric):
    rng = np.random.default_rng(123)
    parts = [
        rng.normal(size=(500, 24)),
        rng.uniform(-1e-3, 1e-3, size=(100, 24)),
        rng.uniform(-1e6, 1e6, size=(100, 24)),
        rng.integers(-3, 4, size=(100, 24)).astype(np.float64),
        rng.normal(size=(100, 24)) * (rng.random((100, 24)) < 0.2),  # sparse
    ]
    vectors = np.concatenate(parts).astype(np.float32)
    vectors[~np.any(vectors != 0, axis=1), 0] = 1.0
    codes, scales = vg.quantize(vectors, metric)
    assert codes.dtype == np.int8 and codes.shape == vectors.shape
    assert scales.dtype == np.float32 and scales.shape == (len(vectors),)
    want_codes, want_scales = numpy_quantize(vectors, metric)
    if metric == "cos":  # norms in float64 may differ in the last bit between implementations
        np.testing.assert_allclose(scales, want_scales, rtol=2e-7, atol=0)
    else:
        assert scales.tolist() == want_scales.tolist()
    diff = np.abs(codes.astype(np.int32) - want_codes.astype(np.int32))
    assert diff.max() <= 1
    assert np.count_nonzero(diff) <= max(1, diff.size // 1000)
    assert codes.min() >= -127 and codes.max() <= 127
    assert np.all(np.abs(codes).max(axis=1) == 127)
    # the graph stores exactly what quantize returns
    g = vg.Graph(24, metric)
    g.add_nodes(list(range(len(vectors))), vectors)
    stored_codes, stored_scales = g.quantized(list(range(len(vectors))))
    assert np.array_equal(stored_codes, codes) and np.array_equal(stored_scales, scales)


def test_quantize_rounds_half_to_even_and_handles_zero():
    # ip: x * (127 / 254) = x / 2 exactly, so odd x lands on .5
    x = np.array([[254, 1, 3, 5, -1, -3, -5, 7]], np.float32)
    codes, scales = vg.quantize(x, "ip")
    assert codes.tolist() == [[127, 0, 2, 2, 0, -2, -2, 4]]
    assert scales.tolist() == [np.float32(254) / np.float32(127)]
    codes, scales = vg.quantize(np.zeros((2, 3)), "l2")
    assert codes.tolist() == [[0, 0, 0], [0, 0, 0]] and scales.tolist() == [0.0, 0.0]
    with pytest.raises(vg.InvalidArgumentError, match="all zeros"):
        vg.quantize(np.array([[1.0, 0.0], [0.0, 0.0]]), "cos")
    with pytest.raises(vg.InvalidArgumentError, match="NaN"):
        vg.quantize(np.array([[1.0, np.nan]]), "ip")
    codes, _ = vg.quantize(np.array([[3.0, 4.0]]), "cos")  # normalised first: (0.6, 0.8)
    assert codes.tolist() == [[95, 127]]
    codes, _ = vg.quantize(np.array([[3.0, 4.0]]), "ip")
    assert codes.tolist() == [[95, 127]]
    codes, scales = vg.quantize(np.array([[-8.0, 2.0]]), "l2")
    assert codes.tolist() == [[-127, 32]] and scales.tolist() == [np.float32(8) / np.float32(127)]


# ----------------------------------------------------------------------------- hop decay


def _decay_check(metric: str, decay: float, bit_exact: bool) -> None:
    spec = _random_spec(n=120, dim=8, metric=metric, seed=4, count_edges=400)
    g, model = build_graph(spec)
    q = np.random.default_rng(8).normal(size=8).astype(np.float32)
    params = dict(k=120, seeds=4, hops=3, max_fanout=5, direction="both", exact=True)
    plain = g.search(q, hop_decay=1.0, **params)
    decayed = g.search(q, hop_decay=decay, **params)
    assert set(decayed.keys) == set(plain.keys)  # decay changes scores, not what is visited
    assert len(plain) == plain.count_visited and max(plain.hops) == 3
    base = {k: (s, h) for k, s, h in zip(plain.keys, plain.scores, plain.hops.tolist())}
    mismatches = []
    for key, score, hop in zip(decayed.keys, decayed.scores, decayed.hops.tolist()):
        s, h = base[key]
        assert h == hop
        factor = decay**hop if s >= 0 else decay ** -hop  # a negative score is divided by the decay
        np.testing.assert_allclose(score, float(s) * factor, rtol=1e-6)
        if hop == 0:
            assert score == s
        d = np.float32(decay**hop)  # hop_decay ** hop in double, then float32
        want = np.float32(s * d) if s >= 0 else np.float32(s / d)
        if bit_exact and score != want:
            mismatches.append((key, hop, float(s), float(score), float(want)))
    assert not mismatches, (f"hop_decay={decay}: score != float32(score_at_1.0 * float32({decay} ** hop)) for "
                            f"{len(mismatches)} hits, e.g. (key, hop, plain, got, want) = {mismatches[:3]}")
    assert np.all(np.diff(decayed.scores) <= 0)  # best first
    if bit_exact:
        assert_same(decayed, reference_search(model, q, hop_decay=decay,
                                              **{k: v for k, v in params.items() if k != "exact"}))


@pytest.mark.parametrize("metric", METRICS)
@pytest.mark.parametrize("decay", [0.5, 0.25, 2.0])
def test_hop_decay_scales_scores_by_decay_power(metric, decay):
    """Dyadic decays: decay ** hop is exact in float32 and float64, so the bits must agree."""
    _decay_check(metric, decay, bit_exact=True)


@pytest.mark.parametrize("decay", [0.8, 1.7])
def test_hop_decay_within_rounding_for_any_decay(decay):
    _decay_check("cos", decay, bit_exact=False)


def test_hop_decay_power_is_computed_from_the_double_decay():
    """hop_decay ** hop of the Python float, as documented, not of hop_decay rounded to float32 first
    (narrowing hop_decay to float32 first would give float32(0.8) ** 2)."""
    _decay_check("ip", 0.8, bit_exact=True)


def test_hop_decay_below_one_moves_farther_nodes_down_under_l2():
    """l2 scores are negative: multiplying them by a decay < 1 would raise them; they are divided."""
    g = vg.Graph(dim=2, metric="l2")
    g.add_nodes(["seed", "hub", "far"], np.array([[5, 0], [100, 100], [10, 0]], np.float32))
    g.add_edges(["seed"], ["far"])
    plain = g.search(np.zeros(2, np.float32), k=2, seeds=1, exact=True)
    decayed = g.search(np.zeros(2, np.float32), k=2, seeds=1, hop_decay=0.01, exact=True)
    assert plain.keys == ["seed", "far"] and decayed.keys == ["seed", "far"]
    far = decayed.keys.index("far")
    assert decayed.scores[far] == np.float32(plain.scores[far] / np.float32(0.01))
    assert decayed.scores[far] < plain.scores[far]


@pytest.mark.parametrize("decay", [1e-50, 1e50])
def test_hop_decay_accepts_any_positive_finite_float(decay):
    """hop_decay: "> 0; 1.0: none" -- any positive finite Python float, also one that float32
    cannot hold (narrowed to float32, 1e-50 would become 0 and 1e50 inf, and be rejected)."""
    g = vg.Graph(2, "ip")
    g.add_nodes(["a", "b"], [[1.0, 0.0], [1.0, 0.0]])
    g.add_edges(["a"], ["b"])
    res = g.search(np.array([1.0, 0.0], np.float32), k=2, seeds=1, hops=1, direction="out", hop_decay=decay,
                   exact=True)
    assert res.keys == (["a", "b"] if decay < 1 else ["b", "a"])
    assert list(res.hops) == ([0, 1] if decay < 1 else [1, 0])
    hop1 = float(res.scores[res.keys.index("b")])
    with np.errstate(over="ignore"):  # 1e50 overflows float32 to inf on purpose
        expected = float(np.float32(float(res.scores[res.keys.index("a")]) * decay))  # 0.0 or inf in float32
    assert hop1 == expected


@pytest.mark.parametrize("decay", [1e39, 1e300, 1e-46, 1e-300])
def test_hop_decay_beyond_float32_gives_no_nan(decay):
    """A decay power that overflows float32 to inf keeps a score of 0 at 0 (before, 0 * inf was
    NaN); one that underflows to 0 sends a negative score to -inf (divided) and keeps 0 at 0."""
    g = vg.Graph(2)
    g.add_nodes(["a", "b", "c"], [[1.0, 0.0], [0.0, 1.0], [-1.0, 0.1]])
    g.add_edges(["a", "a"], ["b", "c"])
    res = g.search([1.0, 0.0], k=3, seeds=1, hop_decay=decay)
    scores = dict(zip(res.keys, res.scores.tolist()))
    assert not np.isnan(res.scores).any()
    assert scores["a"] == 1.0 and scores["b"] == 0.0  # b is orthogonal to the query: 0 at any decay
    with np.errstate(over="ignore", divide="ignore"):
        power = np.float32(decay)  # one hop: decay ** 1, in float32 (inf or 0 here)
        expected = float(np.float32(-1.0 / np.sqrt(1.01)) / power)  # c's negative cosine, divided
    assert expected in (0.0, float("-inf"))
    assert scores["c"] == expected and np.signbit(scores["c"]) == np.signbit(expected)


def _hard_graph(n: int, **kwargs) -> tuple[vg.Graph, np.ndarray]:
    """n unclustered 32-d nodes (a hard case for a greedy HNSW walk), built on one thread so
    that the HNSW graph is the same on every run, with a ring of edges; and 200 queries."""
    rng = np.random.default_rng(4)
    vectors = rng.standard_normal((n, 32)).astype(np.float32)
    g = vg.Graph(32, "cos", threads=1, connectivity=4, expansion_add=8, **kwargs)
    g.add_nodes(list(range(n)), vectors, labels=["odd" if i % 2 else "even" for i in range(n)])
    g.add_edges(list(range(n)), [(i + 1) % n for i in range(n)], rels="next")
    return g, rng.standard_normal((200, 32)).astype(np.float32)


def test_full_scan_seeds_equal_exact_seeds_up_to_the_threshold():
    """At or below full_scan_max_nodes, seeds come from an exact scan: every search (filters,
    deletes, hops, tiny ef) equals the same search with exact=True; one node more, and seeds come
    from HNSW again, where ef=1 misses some of them on this data."""
    n = 1500
    g, queries = _hard_graph(n, full_scan_max_nodes=n)
    assert g.full_scan_max_nodes == n and g.stats()["full_scan_max_nodes"] == n
    g.delete_nodes([3, 4, 5])  # deleted rows still count towards the threshold
    for i, q in enumerate(queries):
        params = dict(k=10, seeds=1 + i % 8, hops=i % 3, ef=1, labels=["odd"] if i % 4 == 0 else None)
        assert_same(g.search(q, **params), g.search(q, exact=True, **params))

    def misses(graph: vg.Graph) -> int:
        return sum(graph.search(q, k=8, seeds=8, hops=0, ef=1).keys != graph.search(q, k=8, seeds=8, hops=0,
                                                                                      exact=True).keys
                   for q in queries)

    assert misses(g) == 0
    g.full_scan_max_nodes = n - 1
    assert misses(g) > 0  # HNSW with ef raised only to seeds: approximate on this data
    g.full_scan_max_nodes = 0
    assert misses(g) > 0


@pytest.mark.parametrize("name, default, in_force", [("full_scan_max_nodes", 4096, 4096),
                                                      ("filter_scan_max_nodes", "auto", 10_000)])
def test_scan_thresholds_defaults_environment_and_bad_values(tmp_path, monkeypatch, name, default, in_force):
    """full_scan_max_nodes and filter_scan_max_nodes: the default (vg.FULL_SCAN_MAX_NODES; "auto"),
    the environment variable, the argument, the property, and bad values of each refused with
    nothing changed."""
    variable = "VECGRAPH_" + name.upper()
    auto = default == "auto"
    monkeypatch.delenv(variable, raising=False)
    g = vg.Graph(4)
    assert getattr(g, name) == default and g.stats()[name] == in_force
    assert (vg.FILTER_SCAN_MAX_NODES if auto else vg.FULL_SCAN_MAX_NODES) == in_force
    monkeypatch.setenv(variable, "123")
    g = vg.Graph(4)
    assert getattr(g, name) == 123 and g.stats()[name] == 123
    assert getattr(vg.Graph(4, **{name: 7}), name) == 7  # the argument wins
    with vg.Graph.open(tmp_path / "g", dim=4, **{name: 9}) as g:
        assert getattr(g, name) == 9
    with vg.Graph.open(tmp_path / "g") as g:  # a search setting: not kept in the folder
        assert getattr(g, name) == 123
    monkeypatch.setenv(variable, " 45 ")  # surrounding spaces are fine
    assert getattr(vg.Graph(4), name) == 45
    expected = 'an int >= 0 or "auto"' if auto else "an int >= 0"
    for raw in ("many", "-1", "+5", "1_000", "1e3", "٣", "0x10", "\u00a07", "7\u3000", "\x1c7",
                "auto" if not auto else "AUTO"):
        monkeypatch.setenv(variable, raw)
        with pytest.raises(vg.InvalidArgumentError, match=re.escape(f"{variable} must be {expected}, got {raw!r}")):
            vg.Graph(4)
        with pytest.raises(vg.InvalidArgumentError, match=variable):
            vg.Graph.open(tmp_path / "refused", dim=4)
        assert not (tmp_path / "refused").exists()  # refused before the folder was touched
    monkeypatch.setenv(variable, "0")
    g = vg.Graph(4)
    assert getattr(g, name) == 0
    with pytest.raises(vg.InvalidArgumentError, match=f"{name} must be >= 0 .*got -5"):
        setattr(g, name, -5)
    for bad in (True, 2.5, None, b"10"):
        with pytest.raises(TypeError, match=f"{name} must be {re.escape(expected)}"):
            setattr(g, name, bad)
    for bad in ("10", "Auto", ""):  # a str other than "auto"
        with pytest.raises(vg.InvalidArgumentError if auto else TypeError, match=f"{name} must be {re.escape(expected)}"):
            setattr(g, name, bad)
    with pytest.raises(vg.InvalidArgumentError, match=name):
        vg.Graph(4, **{name: -1})
    assert getattr(g, name) == 0  # rejected values changed nothing
    if auto:
        monkeypatch.setenv(variable, "auto")
        assert getattr(vg.Graph(4), name) == "auto"
        g.filter_scan_max_nodes = "auto"
        assert g.filter_scan_max_nodes == "auto" and g.stats()[name] == 10_000
        with vg.Graph.open(tmp_path / "g", **{name: "auto"}) as opened:
            assert getattr(opened, name) == "auto"


def test_arrays_that_went_through_pickle_are_accepted():
    """A float32 array unpickled (multiprocessing, joblib) has a dtype equal to, but not the
    same object as, NumPy's canonical one: accepted like any other (a byte-swapped one is
    converted)."""
    import pickle

    vectors = pickle.loads(pickle.dumps(np.arange(16, dtype=np.float32).reshape(2, 8) + 1))
    assert vectors.dtype == np.float32 and vectors.dtype is not np.dtype(np.float32)
    g = vg.Graph(8)
    g.add_nodes(["a", "b"], vectors)
    query = pickle.loads(pickle.dumps(vectors[1].copy()))
    assert g.search(query, k=1, hops=0).keys == ["b"]
    assert g.search_batch(pickle.loads(pickle.dumps(vectors)), k=1, hops=0)[0].keys == ["a"]
    assert g.search(vectors[0].astype(">f4"), k=1, hops=0).keys == ["a"]


def test_large_write_batches_return_freed_memory_and_small_ones_do_not(monkeypatch):
    """A batch of at least _RELEASE_MEMORY_MIN_ROWS rows (nodes, upserts, edges) ends with one
    call that returns the C heap's free pages; smaller and rejected batches make none."""
    from vecgraph import _core, heap

    assert isinstance(_core.release_free_memory(), bool)
    calls = []
    monkeypatch.setattr(_core, "release_free_memory", lambda: calls.append(1) or True)
    big = heap._RELEASE_MEMORY_MIN_ROWS
    g = vg.Graph(4)
    rng = np.random.default_rng(0)
    keys = np.arange(big, dtype=np.int64)
    g.add_nodes(keys.tolist(), rng.normal(size=(big, 4)))
    assert len(calls) == 1 and len(g) == big
    g.add_nodes(["small"], np.ones((1, 4)))
    assert len(calls) == 1
    g.add_edges(keys, np.roll(keys, 1), rels="next")
    assert len(calls) == 2 and g.count_edges == big
    g.add_edges(keys[:10], keys[10:20])
    assert len(calls) == 2
    g.upsert_nodes(keys.tolist(), rng.normal(size=(big, 4)))
    assert len(calls) == 3 and len(g) == big + 1
    with pytest.raises(vg.errors.NotFoundError):  # rejected: nothing written, nothing released
        g.add_edges(keys, np.full(big, 10**9, dtype=np.int64))
    assert len(calls) == 3 and g.count_edges == big + 10


def test_a_graph_cannot_be_copied_shallow_or_deep():
    import copy

    g = vg.Graph(2)
    for fn in (copy.copy, copy.deepcopy):  # before, deepcopy raised "__copy__() takes 1 positional argument"
        with pytest.raises(TypeError) as raised:
            fn(g)
        assert str(raised.value) == ("a Graph cannot be copied: it owns its C++ engine; build a new one and add "
                                     "the same data")


