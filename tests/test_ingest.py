"""vecgraph.ingest and vecgraph.embedders: column mapping, vectors given four ways, the embedder
record, bad rows with on_error="raise" (the graph and its WAL unchanged) and "skip" (the
rejects file), batch boundaries, and search results equal to those of the same data added with
add_nodes / add_edges. Each kind of source: test_ingest_readers.py."""

from __future__ import annotations

import hashlib
import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import vecgraph as vg
from vecgraph import embedders, ingest
from ingest_helpers import DIM, _assert_same_nodes, _data, _direct, _fsl, _table


class HashEmbedder:
    """A deterministic test embedder: each text seeds a generator through its sha256."""

    def __init__(self, name: str = "hash-v1", dim: int = DIM) -> None:
        self.name, self.dim = name, dim
        self.calls = 0

    def __call__(self, texts: list) -> np.ndarray:
        self.calls += 1
        out = np.empty((len(texts), self.dim), dtype=np.float32)
        for row, text in enumerate(texts):
            seed = int.from_bytes(hashlib.sha256(text.encode()).digest()[:8], "little")
            out[row] = np.random.default_rng(seed).standard_normal(self.dim)
        return out


class Float64Embedder(HashEmbedder):
    """Returns float64 rows (the protocol asks for float32)."""

    def __call__(self, texts):
        return super().__call__(texts).astype(np.float64)


class ShortEmbedder(HashEmbedder):
    """Returns one row too few."""

    def __call__(self, texts):
        return super().__call__(texts)[:-1]


def make_hash_embedder() -> HashEmbedder:
    return HashEmbedder("hash-factory")


hash_embedder_instance = HashEmbedder("hash-instance")


def _edges(n: int, m: int = 60, seed: int = 1) -> dict:
    rng = np.random.default_rng(seed)
    return {
        "src": [f"n{i}" for i in rng.integers(0, n, m)],
        "dst": [f"n{i}" for i in rng.integers(0, n, m)],
        "rel": [["knows", "cites"][i % 2] for i in range(m)],
        "weight": rng.random(m).astype(np.float32),
    }


def _assert_same_search(g: vg.Graph, h: vg.Graph, dim: int = DIM, queries: int = 8) -> None:
    rng = np.random.default_rng(7)
    for q in rng.standard_normal((queries, dim)).astype(np.float32):
        for exact in (False, True):
            a, b = g.search(q, k=10, exact=exact), h.search(q, k=10, exact=exact)
            assert a.keys == b.keys
            assert np.array_equal(a.scores, b.scores)
            assert np.array_equal(a.hops, b.hops)
            assert a.paths == b.paths


def _unchanged(g: vg.Graph):
    """A function asserting that g still has its current node count, edge count and last LSN."""
    before = (len(g), g.count_edges, g.stats()["last_lsn"])
    return lambda: (len(g), g.count_edges, g.stats()["last_lsn"]) == before


def _rejects(path) -> list:
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f]


# ---------------------------------------------------------------------------- sources


def test_table_with_default_columns_matches_add_nodes():
    d = _data()
    g = vg.Graph(DIM)
    report = ingest.nodes(g, _table(d), progress=False)
    assert (report.rows_read, report.rows_accepted, report.rows_rejected, report.batches) == (40, 40, 0, 1)
    assert report.rejects_path is None and report.seconds >= 0
    _assert_same_nodes(g, _direct(d), d["key"])
    assert g.get_node("n5")["props"] == {"i": 5, "tags": ["a", "b"]}
    assert g.get_node("n5")["ts"] == 5_000_000


def test_search_after_ingest_equals_search_after_add(tmp_path):
    d, e = _data(300), _edges(300, 900)
    g = vg.Graph(DIM, threads=1)  # one thread: the same HNSW graph whether built at once or deferred
    ingest.nodes(g, _table(d), batch_rows=64, progress=False)
    edge_table = pa.table({"src": e["src"], "dst": e["dst"], "rel": e["rel"], "weight": e["weight"]})
    report = ingest.edges(g, edge_table, batch_rows=100, progress=False)
    assert (report.rows_accepted, report.batches) == (900, 9)
    h = _direct(d, e, threads=1)
    assert g.count_edges == h.count_edges == 900
    _assert_same_nodes(g, h, d["key"])
    for key in d["key"][:20]:
        assert g.neighbors(key, direction="both") == h.neighbors(key, direction="both")
    _assert_same_search(g, h)


def test_list_and_fixed_size_list_vectors_store_the_same_codes():
    d = _data()
    g, h = vg.Graph(DIM), vg.Graph(DIM)
    ingest.nodes(g, _table(d, "fixed"), progress=False)
    ingest.nodes(h, _table(d, "list"), progress=False)
    for a, b in zip(g.quantized(d["key"]), h.quantized(d["key"])):
        assert np.array_equal(a, b)
    # float64 and int values are converted to float32
    k = vg.Graph(DIM)
    ingest.nodes(k, pa.table({"key": d["key"], "vector": pa.array(d["vectors"].astype(np.float64).tolist())}),
                 progress=False)
    assert np.array_equal(k.quantized(d["key"])[0], g.quantized(d["key"])[0])


def test_column_mapping_and_alternative_default_names():
    d = _data(10)
    table = pa.table({"node_id": d["key"], "emb": _fsl(d["vectors"]), "kind": d["label"], "who": d["tenant"],
                      "when": d["ts"], "body": d["text"], "extra": [json.dumps({"i": i}) for i in range(10)]})
    g = vg.Graph(DIM)
    ingest.nodes(g, table, key="node_id", vector="emb", label="kind", tenant="who", ts="when", text="body",
                 props="extra", progress=False)
    node = g.get_node("n3")
    assert (node["label"], node["tenant"], node["ts"], node["text"], node["props"]) == \
        ("person", "t1", 3_000_000, "text of node 3 ✓", {"i": 3})
    # "id", "source", "target", "type" are the second default names
    h = vg.Graph(DIM)
    ingest.nodes(h, pa.table({"id": d["key"], "vector": _fsl(d["vectors"])}), progress=False)
    ingest.edges(h, pa.table({"source": ["n1", "n2"], "target": ["n2", "n3"], "type": ["a", "b"]}), progress=False)
    assert h.neighbors("n2") == [vg.graph.Edge("n2", "b", "n3", 1.0)]
    # absent optional columns take their defaults
    assert h.get_node("n1")["label"] == "" and h.get_node("n1")["ts"] == 0


def test_missing_columns_are_named():
    g = vg.Graph(DIM)
    with pytest.raises(vg.InvalidArgumentError, match=r"no key column \('key' or 'id'\).*'name', 'vector'"):
        ingest.nodes(g, pa.table({"name": ["a"], "vector": _fsl(np.ones((1, DIM), np.float32))}), progress=False)
    with pytest.raises(vg.InvalidArgumentError, match=r"no vector column.*'key'.*embedder="):
        ingest.nodes(g, pa.table({"key": ["a"]}), progress=False)
    with pytest.raises(vg.InvalidArgumentError, match=r"label='kind'.*no column 'kind'"):
        ingest.nodes(g, pa.table({"key": ["a"], "vector": _fsl(np.ones((1, DIM), np.float32))}), label="kind",
                     progress=False)
    with pytest.raises(vg.InvalidArgumentError, match=r"no dst column \('dst' or 'target'\)"):
        ingest.edges(g, pa.table({"src": ["a"], "to": ["b"]}), progress=False)
    with pytest.raises(vg.InvalidArgumentError, match="strings or integers, got Arrow type double"):
        ingest.nodes(g, pa.table({"key": [1.5], "vector": _fsl(np.ones((1, DIM), np.float32))}), progress=False)
    assert len(g) == 0


def test_numpy_vectors_aligned_with_rows_across_batches():
    d = _data(50)
    table = pa.table({"key": d["key"], "label": d["label"]})
    g = vg.Graph(DIM)
    report = ingest.nodes(g, table, vector=d["vectors"], batch_rows=7, progress=False)
    assert report.batches == 8
    for a, b in zip(g.quantized(d["key"]), _direct(d).quantized(d["key"])):
        assert np.array_equal(a, b)
    with pytest.raises(vg.InvalidArgumentError, match="vector= array has 49 rows, the source has 50"):
        ingest.nodes(vg.Graph(DIM), table, vector=d["vectors"][:49], progress=False)
    with pytest.raises(vg.DimensionMismatchError, match="4 columns, the graph's dim is 8"):
        ingest.nodes(vg.Graph(DIM), table, vector=d["vectors"][:, :4], progress=False)


def test_ts_reads_alike_from_csv_pandas_and_jsonl(tmp_path):
    """A blank ts is 0 and a fractional one a bad row whether a CSV is read directly or by
    pandas (which makes the column float64 with NaN); JSONL takes ISO 8601 text as CSV does."""
    import pandas as pd

    path = tmp_path / "p.csv"
    path.write_text('key,vector,ts\na,"[1,2,3,4]",5\nb,"[1,2,3,5]",\nc,"[1,2,3,6]",7.5\n')
    reports = []
    for source in (str(path), pd.read_csv(path, dtype={"key": str})):
        g = vg.Graph(dim=4)
        rejects = tmp_path / f"rejects{len(reports)}.jsonl"
        reports.append(ingest.nodes(g, source, on_error="skip", rejects=str(rejects)))
        assert (reports[-1].rows_accepted, reports[-1].rows_rejected) == (2, 1)
        assert [g.get_node(k)["ts"] for k in "ab"] == [5, 0] and "c" not in g
        (reject,) = [json.loads(line) for line in rejects.read_text().splitlines()]
        assert (reject["key"], reject["column"]) == ("c", "ts")
    jsonl = tmp_path / "p.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in (
        {"key": "a", "vector": [1, 2, 3, 4], "ts": "2024-01-01T01:00:00+01:00"},
        {"key": "b", "vector": [1, 2, 3, 5], "ts": "nope"},
        {"key": "c", "vector": [1, 2, 3, 6], "ts": 17},
        {"key": "d", "vector": [1, 2, 3, 7], "ts": "2024-01-02"})))
    g = vg.Graph(dim=4)
    report = ingest.nodes(g, str(jsonl), on_error="skip", rejects=str(tmp_path / "j.jsonl"))
    assert (report.rows_accepted, report.rows_rejected) == (3, 1) and "b" not in g
    assert [g.get_node(k)["ts"] for k in "acd"] == [1_704_067_200_000_000, 17, 1_704_153_600_000_000]
    (reject,) = [json.loads(line) for line in (tmp_path / "j.jsonl").read_text().splitlines()]
    assert reject["reason"] == "ts 'nope' is neither an integer (microseconds since the epoch) nor an ISO 8601 timestamp"


@pytest.mark.parametrize("batch_rows", [1, 2, 65536])
def test_upsert_keeps_the_last_good_row_of_a_key_whatever_the_batches(tmp_path, batch_rows):
    """With upsert a key on several rows ends as its last good row, whether the rows share a
    batch or not; a bad last row leaves the earlier good one (as across batches)."""
    path = tmp_path / "dd.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (
        {"key": "a", "vector": [1, 0, 0], "text": "first"},
        {"key": "b", "vector": [0, 1, 0], "text": "b good"},
        {"key": "a", "vector": [0, 0, 1], "text": "second"},
        {"key": "b", "vector": [0, 0, 0], "text": "b all zeros"})))
    g = vg.Graph(dim=3)
    report = ingest.nodes(g, str(path), batch_rows=batch_rows, upsert=True, on_error="skip",
                          rejects=str(tmp_path / "rejects.jsonl"))
    assert (report.rows_accepted, report.rows_rejected, len(g)) == (3, 1, 2)
    assert (g.get_node("a")["text"], g.get_node("b")["text"]) == ("second", "b good")
    assert np.allclose(g.get_node("a")["vector"], [0, 0, 1], atol=0.01)
    (reject,) = [json.loads(line) for line in (tmp_path / "rejects.jsonl").read_text().splitlines()]
    assert (reject["row"], reject["key"]) == (3, "b")


def test_props_of_the_wrong_type_for_a_filterable_property_are_bad_rows(tmp_path):
    """A value of another type than a filterable property's declared one is a bad row of the
    props column: "raise" rejects its batch, naming row, property and types; "skip" writes the
    other rows and lists it in the rejects file."""
    path = tmp_path / "typed.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in (
        {"key": "a", "vector": [1, 0, 0], "props": {"year": 2020}},
        {"key": "b", "vector": [0, 1, 0], "props": {"year": "2021"}},
        {"key": "c", "vector": [0, 0, 1], "props": {"year": None}},
        {"key": "d", "vector": [1, 1, 0], "props": {"other": "x"}})))
    g = vg.Graph(dim=3, filterable={"year": int})
    with pytest.raises(ingest.IngestError) as raised:
        ingest.nodes(g, str(path), progress=False)
    assert (raised.value.row, raised.value.column) == (1, "props")
    assert raised.value.reason == "filterable property 'year' is declared int64, got str '2021'"
    assert len(g) == 0 and g.stats()["last_lsn"] == 0
    report = ingest.nodes(g, str(path), on_error="skip", rejects=str(tmp_path / "r.jsonl"), progress=False)
    assert (report.rows_accepted, report.rows_rejected) == (3, 1)
    assert sorted(g.search([1, 1, 1], k=5, exact=True).keys) == ["a", "c", "d"]
    assert g.search([1, 1, 1], k=5, exact=True, where={"year": {">=": 0}}).keys == ["a"]
    assert [(r["row"], r["key"], r["column"], r["reason"]) for r in _rejects(tmp_path / "r.jsonl")] == [
        (1, "b", "props", "filterable property 'year' is declared int64, got str '2021'")]


def test_an_ingest_error_pickles_with_its_fields(tmp_path):
    """An IngestError crosses a process boundary (a pool's worker raising it) whole: message,
    row, column, reason and the report of what was written before."""
    import pickle

    path = tmp_path / "bad.jsonl"
    path.write_text('{"key": "a", "vector": [1, 0]}\n{"key": "b", "vector": [1, "x"]}\n')
    with pytest.raises(ingest.IngestError) as raised:
        ingest.nodes(vg.Graph(dim=2), str(path), progress=False)
    copied = pickle.loads(pickle.dumps(raised.value))
    assert type(copied) is ingest.IngestError and str(copied) == str(raised.value)
    assert (copied.row, copied.column, copied.reason) == (raised.value.row, raised.value.column, raised.value.reason)
    assert (copied.row, copied.column) == (1, "vector")
    assert copied.report.rows_accepted == raised.value.report.rows_accepted == 0

def test_csv_weight_and_ts_cells_are_parsed_row_by_row(tmp_path):
    """A CSV weight or ts cell that does not parse is one bad row, wherever it is in the file;
    ts takes integers and ISO 8601 dates and timestamps (UTC unless it names an offset)."""
    n = 3000
    march_1_us = 1709251200 * 10**6  # 2024-03-01T00:00:00Z
    hour_us = 3600 * 10**6
    with vg.Graph.open(tmp_path / "g", dim=DIM, sync="off") as g:
        # nodes: ts cells of every accepted form, one bad one far past Arrow's first block
        node_ts = {i: i for i in range(n)}
        texts = {i: str(i) for i in range(n)}
        texts[2000], node_ts[2000] = "2024-03-01T10:00:00+02:00", march_1_us + 8 * hour_us
        texts[2001], node_ts[2001] = "2024-03-01", march_1_us
        texts[2002], node_ts[2002] = "2024-03-01 10:00:00", march_1_us + 10 * hour_us
        texts[2003], node_ts[2003] = "2024-03-01T10:00:00Z", march_1_us + 10 * hour_us
        texts[2004], node_ts[2004] = "", 0
        texts[2500] = "yesterday"
        vector = '"' + json.dumps(_V) + '"'
        nodes_path = tmp_path / "nodes.csv"
        nodes_path.write_text("key,vector,ts\n" + "".join(f"p{i},{vector},{texts[i]}\n" for i in range(n)))
        report = ingest.nodes(g, nodes_path, on_error="skip", rejects=tmp_path / "n.jsonl", batch_rows=700,
                              progress=False)
        assert (report.rows_accepted, report.rows_rejected) == (n - 1, 1)
        assert [(r["row"], r["column"], r["reason"]) for r in _rejects(tmp_path / "n.jsonl")] == [
            (2500, "ts", "ts 'yesterday' is neither an integer (microseconds since the epoch) "
                         "nor an ISO 8601 timestamp")]
        for i in (0, 1999, 2000, 2001, 2002, 2003, 2004, 2999):
            assert g.get_node(f"p{i}")["ts"] == node_ts[i], i
        g.add_nodes(["p2500"], np.ones((1, DIM), np.float32))
        # edges: a bad weight cell in the block Arrow infers types from, and far past it
        unchanged = _unchanged(g)
        rows = [f"p{i},p{i + 1},{i / 8},{i}" for i in range(n - 1)]
        rows[1] = "p1,p2,abc,7"
        rows[2100] = "p2100,p2101,2.5,yesterday"
        rows[2200] = "p2200,p2201,,2024-03-01T10:00:00+02:00"  # empty: weight 1.0
        rows[2300] = "p2300,p2301,1e400,2024-03-01"  # beyond float32
        rows[2400] = "p2400,p2401, 0.25 ,2024-03-01 10:00:00"
        path = tmp_path / "edges.csv"
        path.write_text("src,dst,weight,ts\n" + "\n".join(rows) + "\n")
        with pytest.raises(ingest.IngestError, match="edge row 1, column 'weight': weight 'abc' is not a number"):
            ingest.edges(g, path, progress=False)
        assert unchanged()
        rejects = tmp_path / "r.jsonl"
        report = ingest.edges(g, path, on_error="skip", rejects=rejects, batch_rows=500, progress=False)
        assert (report.rows_read, report.rows_accepted, report.rows_rejected) == (n - 1, n - 4, 3)
        assert [(r["row"], r["column"], r["reason"]) for r in _rejects(rejects)] == [
            (1, "weight", "weight 'abc' is not a number"),
            (2100, "ts", "ts 'yesterday' is neither an integer (microseconds since the epoch) "
                         "nor an ISO 8601 timestamp"),
            (2300, "weight", "weight inf is not finite (or beyond float32)"),
        ]
        assert g.count_edges == n - 4
        for i, weight in [(0, 0.0), (999, 999 / 8), (2200, 1.0), (2400, 0.25)]:
            assert g.neighbors(f"p{i}") == [vg.graph.Edge(f"p{i}", "", f"p{i + 1}", pytest.approx(weight))]
        assert g.neighbors("p1") == g.neighbors("p2100") == g.neighbors("p2300") == []
        # a run that fails leaves no empty rejects file behind; one with rejects keeps it
        bad = pa.table({"src": ["p0"], "dst": ["p1"], "weight": [True]})
        with pytest.raises(vg.InvalidArgumentError, match="column 'weight': weights must be numbers, got Arrow type bool"):
            ingest.edges(g, bad, on_error="skip", rejects=tmp_path / "none.jsonl", progress=False)
        assert not (tmp_path / "none.jsonl").exists() and rejects.exists()


def test_csv_keys_are_strings_unless_key_type_int(tmp_path):
    vector = '"[1, 0, 0, 0, 0, 0, 0, 0]"'
    nodes = tmp_path / "nodes.csv"
    nodes.write_text("key,vector\n" + "".join(f"{k},{vector}\n" for k in ("007", "008", "1e3", "+5", "1", "2")))
    edges = tmp_path / "edges.csv"
    edges.write_text("src,dst\n1,2\n007,1e3\n")
    g = vg.Graph(DIM)
    assert ingest.nodes(g, nodes, progress=False).rows_accepted == 6
    assert all(k in g for k in ("007", "008", "1e3", "+5", "1", "2"))
    assert not any(k in g for k in (7, 8, 1000, 5, 1, 2))
    report = ingest.edges(g, edges, progress=False)
    assert report.rows_accepted == 2
    assert g.neighbors("1") == [vg.graph.Edge("1", "", "2", 1.0)]
    assert g.neighbors("007") == [vg.graph.Edge("007", "", "1e3", 1.0)]
    # mapped column names and TSV too
    tsv = tmp_path / "links.tsv"
    tsv.write_text("from\tto\n008\t+5\n")
    ingest.edges(g, tsv, src="from", dst="to", progress=False)
    assert g.neighbors("008") == [vg.graph.Edge("008", "", "+5", 1.0)]

    # key_type="int": keys parsed as integers; text that is not one is a bad row
    h = vg.Graph(DIM)
    with pytest.raises(ingest.IngestError, match=r"node row 2, column 'key': key '1e3' is not an int64 "
                                                 r'integer \(key_type="int"\)') as info:
        ingest.nodes(h, nodes, key_type="int", progress=False)
    assert info.value.row == 2 and len(h) == 0
    report = ingest.nodes(h, nodes, key_type="int", on_error="skip", rejects=tmp_path / "r.jsonl", progress=False)
    assert (report.rows_accepted, report.rows_rejected) == (5, 1)
    assert sorted(h.search(np.ones(DIM), k=10, exact=True).keys) == [1, 2, 5, 7, 8]
    ints = tmp_path / "ints.csv"
    ints.write_text("id,vector\n 12 ,%s\n-3,%s\n9223372036854775808,%s\n0x10,%s\n" % ((vector,) * 4))
    report = ingest.nodes(h, ints, key_type="int", on_error="skip", rejects=tmp_path / "r.jsonl", progress=False)
    assert report.rows_accepted == 2 and 12 in h and -3 in h
    assert [(r["row"], r["reason"]) for r in _rejects(tmp_path / "r.jsonl")] == [
        (2, 'key \'9223372036854775808\' is not an int64 integer (key_type="int")'),
        (3, 'key \'0x10\' is not an int64 integer (key_type="int")')]
    # string keys from CSV against int nodes: dangling, with a hint
    int_edges = tmp_path / "int_edges.csv"
    int_edges.write_text("src,dst\n1,2\n+5,007\n")
    with pytest.raises(ingest.IngestError, match="src '1' is not a node of the graph \\(dangling edge\\); the "
                                                 'graph has the int key 1: read the keys as ints with key_type="int"'):
        ingest.edges(h, int_edges, progress=False)
    assert ingest.edges(h, int_edges, key_type="int", progress=False).rows_accepted == 2
    assert h.neighbors(5) == [vg.graph.Edge(5, "", 7, 1.0)]
    # typed sources keep their types whatever key_type says
    ingest.nodes(h, pa.table({"key": ["100"], "vector": _fsl(np.ones((1, DIM), np.float32))}),
                 key_type="int", progress=False)
    assert "100" in h and 100 not in h
    with pytest.raises(vg.InvalidArgumentError, match="key_type must be 'str' or 'int', got 'float'"):
        ingest.nodes(vg.Graph(DIM), nodes, key_type="float")
    with pytest.raises(vg.InvalidArgumentError, match="key_type must be 'str' or 'int', got None"):
        ingest.edges(g, edges, key_type=None)


def test_networkx_graph():
    nx = pytest.importorskip("networkx")
    d, e = _data(30), _edges(30, 80)
    G = nx.MultiDiGraph()
    for i, key in enumerate(d["key"]):
        G.add_node(key, vector=d["vectors"][i], label=d["label"][i], tenant=d["tenant"][i], ts=int(d["ts"][i]),
                   text=d["text"][i], **(d["props"][i] or {}))
    for s, t, r, w in zip(e["src"], e["dst"], e["rel"], e["weight"]):
        G.add_edge(s, t, rel=r, weight=float(w))
    g = vg.Graph(DIM, threads=1)
    node_report, edge_report = ingest.from_networkx(g, G, batch_rows=16, progress=False)
    assert (node_report.rows_accepted, edge_report.rows_accepted) == (30, 80)
    h = _direct(d, e, threads=1)
    _assert_same_nodes(g, h, d["key"])
    _assert_same_search(g, h)
    # undirected graphs: each edge once; attributes other than the mapped ones become props
    U = nx.Graph()
    U.add_node(1, vector=[1.0] * DIM, colour="red")
    U.add_node("b", vector=[2.0] * DIM)
    U.add_edge(1, "b", type="x", since=2020)
    k = vg.Graph(DIM)
    ingest.from_networkx(k, U, rel_attr="type", progress=False)
    assert k.get_node(1)["props"] == {"colour": "red"} and k.get_node("b")["props"] is None
    assert k.neighbors(1, direction="both") == [vg.graph.Edge(1, "x", "b", 1.0)]
    assert k.count_edges == 1


def test_timestamps_and_upsert():
    d = _data(5)
    g = vg.Graph(DIM)
    ts = pa.array([0, 1_000, 2_000_000, 3, 4], pa.timestamp("ns"))
    ingest.nodes(g, pa.table({"key": d["key"], "vector": _fsl(d["vectors"]), "ts": ts}), progress=False)
    assert [g.get_node(k)["ts"] for k in d["key"]] == [0, 1, 2000, 0, 0]
    new = np.ones((2, DIM), np.float32)
    table = pa.table({"key": ["n1", "x"], "vector": _fsl(new), "label": ["new", "new"]})
    with pytest.raises(ingest.IngestError, match="already in the graph"):
        ingest.nodes(g, table, progress=False)
    ingest.nodes(g, table, upsert=True, progress=False)
    assert len(g) == 6 and g.get_node("n1")["label"] == "new"


def test_edge_vectors_some_rows_without():
    d = _data(6)
    g = vg.Graph(DIM)
    ingest.nodes(g, _table(d), progress=False)
    vectors = [None, [1.0] * DIM, [2.0] * DIM, None, [3.0] * DIM]
    table = pa.table({"src": ["n0", "n1", "n2", "n3", "n4"], "dst": ["n1", "n2", "n3", "n4", "n5"],
                      "vector": pa.array(vectors, pa.list_(pa.float32()))})
    ingest.edges(g, table, progress=False)
    assert g.count_edges == 5 and g.stats()["edge_vectors"] == 3
    assert [g.neighbors(f"n{i}")[0].dst for i in range(5)] == ["n1", "n2", "n3", "n4", "n5"]


# ---------------------------------------------------------------------------- embedders


def test_embedder_computes_vectors_and_is_recorded():
    d = _data(20)
    emb = HashEmbedder()
    g = vg.Graph(DIM)
    assert g.embedder is None
    report = ingest.nodes(g, pa.table({"key": d["key"], "text": d["text"]}), embedder=emb, batch_rows=8,
                          progress=False)
    assert report.rows_accepted == 20 and emb.calls == 3
    assert g.embedder == {"name": "hash-v1", "dim": DIM}
    h = vg.Graph(DIM)
    h.add_nodes(d["key"], emb(d["text"]), texts=d["text"])
    _assert_same_nodes(g, h, d["key"])
    q = g.embed_query("text of node 3 ✓", emb)
    assert q.shape == (DIM,) and q.dtype == np.float32
    assert g.search(q, k=1, hops=0).keys == ["n3"]
    assert g.embed_query(["a", "b"], emb).shape == (2, DIM)
    # another name, another dim: refused, naming both
    with pytest.raises(vg.InvalidArgumentError, match="built with embedder 'hash-v1'.*'hash-v2'"):
        ingest.nodes(g, pa.table({"key": ["z"], "text": ["z"]}), embedder=HashEmbedder("hash-v2"), progress=False)
    with pytest.raises(vg.InvalidArgumentError, match="'hash-v1'.*query embedder 'hash-v2'"):
        g.embed_query("x", HashEmbedder("hash-v2"))
    with pytest.raises(vg.DimensionMismatchError, match="'hash-v1' makes 4-d vectors, the graph's dim is 8; "
                                                        "it was built with embedder 'hash-v1'"):
        g.use_embedder(HashEmbedder("hash-v1", dim=4))
    with pytest.raises(vg.DimensionMismatchError, match="4-d vectors, the graph's dim is 8"):
        vg.Graph(DIM).use_embedder(HashEmbedder(dim=4))
    with pytest.raises(vg.InvalidArgumentError, match="text 0 is empty"):
        g.embed_query("", emb)
    for bad in (5, b"x", {"a"}, None):  # before, 5 gave a bare "'int' object is not iterable"
        with pytest.raises(TypeError) as raised:
            g.embed_query(bad, emb)
        assert str(raised.value) == f"text must be a str or a sequence of str, got {type(bad).__name__}"
    with pytest.raises(TypeError, match="text 1 must be a str, got int"):
        g.embed_query(["a", 5], emb)
    assert len(g) == 20


def test_embedder_record_survives_reopen_and_checkpoint(tmp_path):
    d = _data(10)
    folder = tmp_path / "g"
    with vg.Graph.open(folder, dim=DIM, sync="off") as g:
        ingest.nodes(g, pa.table({"key": d["key"], "text": d["text"]}), embedder=HashEmbedder(), progress=False)
    with vg.Graph.open(folder) as g:
        assert g.embedder == {"name": "hash-v1", "dim": DIM}
        with pytest.raises(vg.InvalidArgumentError, match="'hash-v1'.*'other'"):
            g.use_embedder(HashEmbedder("other"))
        g.checkpoint()
        g.use_embedder(HashEmbedder())  # the same one: accepted
    with vg.Graph.open(folder) as g:
        assert g.embedder == {"name": "hash-v1", "dim": DIM}
        assert len(g) == 10
        with pytest.raises(vg.InvalidArgumentError, match="refusing query embedder 'other'"):
            g.embed_query("q", HashEmbedder("other"))


def test_embedder_output_is_checked(tmp_path):
    class NaNForBad(HashEmbedder):
        def __call__(self, texts):
            out = super().__call__(texts)
            out[[t == "bad" for t in texts]] = np.nan
            return out

    table = pa.table({"key": ["a", "b", "c", "d"], "text": ["x", "bad", "", "y"]})
    with pytest.raises(TypeError, match="returned dtype float64, expected float32"):
        ingest.nodes(vg.Graph(DIM), table, embedder=Float64Embedder(), progress=False)
    with pytest.raises(vg.DimensionMismatchError, match=r"returned shape \(2, 8\) for 3 texts, expected \(3, 8\)"):
        ingest.nodes(vg.Graph(DIM), table, embedder=ShortEmbedder(), on_error="skip", rejects=tmp_path / "r.jsonl",
                     progress=False)
    g = vg.Graph(DIM)
    report = ingest.nodes(g, table, embedder=NaNForBad(), on_error="skip", rejects=tmp_path / "r.jsonl",
                          progress=False)
    assert report.rows_accepted == 2 and sorted(g.search(np.ones(DIM), k=5, exact=True).keys) == ["a", "d"]
    assert [(r["row"], r["column"], r["reason"]) for r in _rejects(tmp_path / "r.jsonl")] == [
        (1, "text", "embedder 'hash-v1' returned NaN or inf for this text"),
        (2, "text", "empty text: nothing to embed")]
    with pytest.raises(TypeError, match="pass vector= or embedder=, not both"):
        ingest.nodes(g, table, vector="v", embedder=HashEmbedder())


def test_embedders_load_specs():
    assert isinstance(HashEmbedder(), embedders.Embedder)
    assert embedders.load("test_ingest:HashEmbedder").name == "hash-v1"  # a class: called
    assert embedders.load("test_ingest:make_hash_embedder").name == "hash-factory"  # a factory: called
    assert embedders.load("test_ingest:hash_embedder_instance") is hash_embedder_instance  # used as is
    with pytest.raises(vg.InvalidArgumentError, match="'wordllama' or 'module:attribute'"):
        embedders.load("no-colon")
    with pytest.raises(AttributeError, match="has no attribute 'Nope'"):
        embedders.load("test_ingest:Nope")
    with pytest.raises(vg.EmbedderUnavailableError, match="No module named"):  # an ImportError
        embedders.load("no_such_module_xyz:Thing")
    with pytest.raises(TypeError, match="has no name, dim"):
        embedders.load("builtins:dict")  # a class whose instances are not embedders
    with pytest.raises(vg.InvalidArgumentError, match="must not be empty"):
        embedders.check_embedder(HashEmbedder(name=""))
    with pytest.raises(vg.InvalidArgumentError, match="returned NaN or inf for text 1"):
        embedders.embed(type("E", (HashEmbedder,), {"__call__": lambda s, t: np.array(
            [[0.0] * DIM, [np.nan] * DIM], np.float32)})(), ["a", "b"])


def test_wordllama_embedder():
    pytest.importorskip("wordllama")
    emb = embedders.load("wordllama")
    assert (emb.name, emb.dim) == ("wordllama/l2_supercat_256", 256)
    out = emb(["graph databases", "vector search"])
    assert out.shape == (2, 256) and out.dtype == np.float32
    assert np.allclose(np.linalg.norm(out, axis=1), 1.0, atol=1e-3)
    with pytest.raises(vg.InvalidArgumentError, match="text 1 is empty"):
        emb(["ok", ""])
    small = embedders.WordLlamaEmbedder(trunc_dim=64)
    assert (small.name, small.dim) == ("wordllama/l2_supercat_256/64", 64)
    again = embedders.load(small.name)  # a recorded name loads the same embedder
    assert (again.name, again.dim) == (small.name, 64)
    assert np.array_equal(again(["graph databases"]), small(["graph databases"]))
    with pytest.raises(vg.InvalidArgumentError, match="not a WordLlama embedder name"):
        embedders.load("wordllama/nonsense")
    g = vg.Graph(64)
    texts = ["alice works at acme", "acme makes widgets", "bob sells widgets", "the weather is nice"]
    ingest.nodes(g, pa.table({"key": ["alice", "acme", "bob", "weather"], "text": texts}), embedder=small,
                 progress=False)
    assert g.embedder == {"name": "wordllama/l2_supercat_256/64", "dim": 64}
    assert g.search(g.embed_query("widgets made by acme", small), k=1, hops=0, exact=True).keys[0] in ("acme", "bob")
    with pytest.raises(vg.DimensionMismatchError):
        g.embed_query("x", emb)


# ---------------------------------------------------------------------------- bad rows

_V = [1.0] * DIM


def _bad_node_tables() -> list:
    """(name, table, bad row, column, reason pattern) for each kind of bad node row; the graph
    already holds node "old"."""
    vec = pa.list_(pa.float32())
    ok = [[float(i + 1)] + [1.0] * (DIM - 1) for i in range(4)]

    def table(keys, vectors, **extra):
        return pa.table({"key": keys, "vector": pa.array(vectors, vec), **extra})

    return [
        ("null key", table(["a", None, "c", "d"], ok), 1, "key", "missing key"),
        ("wrong dim", table(["a", "b", "c", "d"], ok[:2] + [[1.0] * 3] + ok[3:]), 2, "vector",
         "vector has 3 values, the graph's dim is 8"),
        ("null vector", table(["a", "b", "c", "d"], [None] + ok[1:]), 0, "vector", "missing vector"),
        ("NaN", table(["a", "b", "c", "d"], ok[:3] + [[float("nan")] + _V[1:]]), 3, "vector", "NaN or inf"),
        ("inf", table(["a", "b", "c", "d"], [ok[0], [float("inf")] + _V[1:]] + ok[2:]), 1, "vector", "NaN or inf"),
        ("zero", table(["a", "b", "c", "d"], ok[:2] + [[0.0] * DIM] + ok[3:]), 2, "vector", "all-zero vector"),
        ("duplicate in batch", table(["a", "b", "a", "d"], ok), 2, "key", "key 'a' repeats row 0 of this batch"),
        ("already in graph", table(["a", "old", "c", "d"], ok), 1, "key", "'old' is already in the graph"),
        ("bad props", table(["a", "b", "c", "d"], ok, props=["{}", "{", None, "[1]"]), 1, "props", "not valid JSON"),
        ("bad ts", pa.table({"key": ["a", "b", "c", "d"], "vector": pa.array(ok, vec),
                             "ts": pa.array([1, 2, 3, 2**63 + 5], pa.uint64())}), 3, "ts", "beyond int64"),
    ]


@pytest.mark.parametrize("case", _bad_node_tables(), ids=lambda c: c[0])
def test_bad_node_row_rejects_its_batch(tmp_path, case):
    name, table, row, column, reason = case
    with vg.Graph.open(tmp_path / "g", dim=DIM, sync="off") as g:
        g.add_nodes(["old"], np.ones((1, DIM), np.float32))
        unchanged = _unchanged(g)
        with pytest.raises(ingest.IngestError, match=f"node row {row}, column '{column}': .*{reason}") as info:
            ingest.nodes(g, table, progress=False)
        assert unchanged()
        assert (info.value.row, info.value.column) == (row, column)
        assert "Nothing of batch 1 (rows 0-3) was written" in str(info.value)
        assert info.value.report.rows_accepted == 0
        assert isinstance(info.value, vg.InvalidArgumentError)
        # skip: the good rows are written, the bad one listed
        report = ingest.nodes(g, table, on_error="skip", rejects=tmp_path / "rejects.jsonl", progress=False)
        bad = 1 if name != "bad props" else 2  # "[1]" is a JSON array, not an object
        assert (report.rows_read, report.rows_accepted, report.rows_rejected) == (4, 4 - bad, bad)
        assert len(g) == 1 + 4 - bad
        records = _rejects(tmp_path / "rejects.jsonl")
        assert report.rejects_path == str(tmp_path / "rejects.jsonl")
        assert (records[0]["kind"], records[0]["row"], records[0]["column"]) == ("node", row, column)
        assert reason in records[0]["reason"]
        assert records[0]["key"] == table.column("key")[row].as_py()


def test_bad_edge_rows(tmp_path):
    with vg.Graph.open(tmp_path / "g", dim=DIM, sync="off") as g:
        g.add_nodes(["a", "b", "c"], np.ones((3, DIM), np.float32))
        g.add_edges(["a"], ["b"])
        unchanged = _unchanged(g)
        cases = [
            (pa.table({"src": ["a", "zz", "c"], "dst": ["b", "c", "a"]}), 1, "src", "'zz' is not a node of the graph"),
            (pa.table({"src": ["a", "b", "c"], "dst": ["b", "c", "qq"]}), 2, "dst", "dangling edge"),
            (pa.table({"src": ["a", None, "c"], "dst": ["b", "c", "a"]}), 1, "src", "missing key"),
            (pa.table({"src": ["a", "b", "c"], "dst": ["b", "c", "a"], "weight": [1.0, float("nan"), 2.0]}), 1,
             "weight", "not finite"),
            (pa.table({"src": ["a", "b", "c"], "dst": ["b", "c", "a"],
                       "vector": pa.array([None, [1.0] * 3, None], pa.list_(pa.float32()))}), 1, "vector",
             "vector has 3 values"),
        ]
        for table, row, column, reason in cases:
            with pytest.raises(ingest.IngestError, match=f"edge row {row}, column '{column}': .*{reason}"):
                ingest.edges(g, table, progress=False)
            assert unchanged()
        report = ingest.edges(g, cases[0][0], on_error="skip", rejects=tmp_path / "r.jsonl", progress=False)
        assert (report.rows_accepted, report.rows_rejected) == (2, 1)
        assert _rejects(tmp_path / "r.jsonl") == [{"kind": "edge", "row": 1, "column": "src", "src": "zz",
                                                   "dst": "c", "reason": "src 'zz' is not a node of the graph "
                                                                         "(dangling edge)"}]
        assert g.count_edges == 3


def test_failing_third_batch_leaves_the_first_two(tmp_path):
    d = _data(50)
    d["vectors"][23, 4] = np.nan  # row 23: batch 3 of batch_rows=10
    path = tmp_path / "nodes.parquet"
    pq.write_table(_table(d), path, row_group_size=16)
    with vg.Graph.open(tmp_path / "g", dim=DIM, sync="off") as g:
        with pytest.raises(ingest.IngestError) as info:
            ingest.nodes(g, path, batch_rows=10, progress=False)
        message = str(info.value)
        assert "node row 23, column 'vector': NaN or inf" in message
        assert "Nothing of batch 3 (rows 20-29) was written; the 20 rows of earlier batches stay" in message
        assert (info.value.report.rows_accepted, info.value.report.batches) == (20, 3)
        assert len(g) == 20 and "n19" in g and "n20" not in g
        lsn = g.stats()["last_lsn"]
    with vg.Graph.open(tmp_path / "g") as g:  # the WAL holds the first two batches only
        assert len(g) == 20 and g.stats()["last_lsn"] == lsn
        # skip: the default rejects file is next to the source
        report = ingest.nodes(g, path, batch_rows=10, on_error="skip", progress=False)
        assert (report.rows_accepted, report.rows_rejected) == (29, 21)
        assert report.rejects_path == str(path) + ".rejects.jsonl"
        records = _rejects(report.rejects_path)
        assert [r["row"] for r in records] == list(range(20)) + [23]
        assert all(r["reason"].endswith("is already in the graph (pass upsert=True to replace it)")
                   for r in records[:20])
        assert len(g) == 49 and "n23" not in g


def test_jsonl_bad_lines_are_bad_rows(tmp_path):
    path = tmp_path / "n.jsonl"
    vector = json.dumps(_V)
    path.write_text(f'{{"key": "a", "vector": {vector}}}\n{{not json}}\n[1, 2]\n{{"key": "b", "vector": {vector}}}\n')
    g = vg.Graph(DIM)
    with pytest.raises(ingest.IngestError, match="node row 1, the whole row: not valid JSON"):
        ingest.nodes(g, path, progress=False)
    report = ingest.nodes(g, path, on_error="skip", progress=False)
    assert report.rows_accepted == 2 and sorted(g.search(np.ones(DIM), k=3, exact=True).keys) == ["a", "b"]
    assert [(r["row"], r["column"]) for r in _rejects(report.rejects_path)] == [(1, None), (2, None)]


def test_nan_keys_are_reported_as_missing_naming_nan(tmp_path):
    """pandas turns an int key column with gaps into floats: NaN there is a missing key, and
    the reason names NaN (a JSON null stays "null")."""
    vectors = _fsl(np.ones((3, DIM), np.float32))
    g = vg.Graph(DIM)
    report = ingest.nodes(g, pa.table({"key": [1.0, float("nan"), 3.0], "vector": vectors}), on_error="skip",
                          rejects=tmp_path / "r.jsonl", progress=False)
    assert (report.rows_accepted, report.rows_rejected) == (2, 1)
    assert sorted(g.search(np.ones(DIM), k=3, exact=True).keys) == [1, 3]
    assert [r["reason"] for r in _rejects(report.rejects_path)] == ["missing key (null or NaN)"]
    nodes = tmp_path / "n.jsonl"  # JSON lines as Python's json module writes NaN
    nodes.write_text("".join(json.dumps({"key": k, "vector": _V}) + "\n" for k in ["a", float("nan")]))
    g = vg.Graph(DIM)
    with pytest.raises(ingest.IngestError, match=r"node row 1, column 'key': missing key \(nan\)"):
        ingest.nodes(g, nodes, progress=False)
    assert len(g) == 0


def test_rejects_file_holds_a_bad_key_as_it_came(tmp_path):
    keys = [1.5, True, 2.0, 2**70, [1], None, "ok"]
    nodes = tmp_path / "n.jsonl"
    nodes.write_text("".join(json.dumps({"key": k, "vector": _V}) + "\n" for k in keys))
    g = vg.Graph(DIM)
    with pytest.raises(ingest.IngestError, match="node row 0, column 'key': a key must be a str or an int, "
                                                 "got float 1.5"):
        ingest.nodes(g, nodes, progress=False)
    assert len(g) == 0
    report = ingest.nodes(g, nodes, on_error="skip", progress=False)
    assert (report.rows_accepted, report.rows_rejected) == (1, 6) and len(g) == 1 and "ok" in g
    records = _rejects(report.rejects_path)
    assert [(r["row"], r["key"]) for r in records] == [(0, 1.5), (1, True), (2, 2.0), (3, 2**70), (4, [1]),
                                                       (5, None)]
    assert [r["reason"] for r in records] == [
        "a key must be a str or an int, got float 1.5", "a key must be a str or an int, got bool True",
        "a key must be a str or an int, got float 2.0", f"key {2**70} is outside the int64 range",
        "a key must be a str or an int, got list [1]", "missing key (null)"]
    edges = tmp_path / "e.jsonl"
    edges.write_text("".join(json.dumps({"src": s, "dst": d}) + "\n" for s, d in
                             [(0.5, "ok"), ("ok", False), ("ok", "ok")]))
    report = ingest.edges(g, edges, on_error="skip", progress=False)
    assert (report.rows_accepted, report.rows_rejected) == (1, 2)
    assert [(r["row"], r["column"], r["src"], r["dst"]) for r in _rejects(report.rejects_path)] == [
        (0, "src", 0.5, "ok"), (1, "dst", "ok", False)]
    # CSV with key_type="int": the text that is not an integer, as written
    csv_path = tmp_path / "n.csv"
    csv_path.write_text("key,vector\n7,\"%s\"\nx7,\"%s\"\n" % (_V, _V))
    report = ingest.nodes(g, csv_path, key_type="int", on_error="skip", progress=False)
    assert (report.rows_accepted, report.rows_rejected) == (1, 1) and 7 in g
    assert [(r["row"], r["key"]) for r in _rejects(report.rejects_path)] == [(1, "x7")]


def test_bad_props_say_what_was_expected_and_what_came(tmp_path):
    expected = "props must be a JSON object (a dict, or a str holding one) or null, got "
    cases = [
        ('{"a": 1}', None),
        ("[1, 2]", expected + "a str holding a JSON array, not an object: '[1, 2]'"),
        ("null", None),  # a str holding JSON null: no props, as a null value or an empty str
        ('"text"', expected + "a str holding a JSON string, not an object: '\"text\"'"),
        ("hello", expected + "a str that is not valid JSON (Expecting value at character 0): 'hello'"),
        ('{"a": 1} x', expected + "a str that is not valid JSON (Extra data at character 9): '{\"a\": 1} x'"),
        ("x" * 100, expected + "a str that is not valid JSON (Expecting value at character 0): '" + "x" * 36 + "..."),
        ([1, 2], "props must be a JSON object (a dict, or a str holding one) or null, got list: [1, 2]"),
        (7, "props must be a JSON object (a dict, or a str holding one) or null, got int: 7"),
        ('{"a": NaN}', "props must hold only JSON values (no NaN, inf or other objects), got a str that does not "
                       "(Out of range float values are not JSON compliant): '{\"a\": NaN}'"),
    ]
    path = tmp_path / "n.jsonl"
    path.write_text("".join(json.dumps({"key": f"k{i}", "vector": _V, "props": props}) + "\n"
                            for i, (props, _) in enumerate(cases)))
    g = vg.Graph(DIM)
    with pytest.raises(ingest.IngestError) as info:
        ingest.nodes(g, path, progress=False)
    assert (info.value.row, info.value.column, info.value.reason) == (1, "props", cases[1][1])
    assert len(g) == 0
    report = ingest.nodes(g, path, on_error="skip", progress=False)
    assert (report.rows_accepted, report.rows_rejected) == (2, len(cases) - 2)
    assert g.get_node("k0")["props"] == {"a": 1}
    assert g.get_node("k2")["props"] is None
    assert [(r["row"], r["reason"]) for r in _rejects(report.rejects_path)] == [
        (row, reason) for row, (_, reason) in enumerate(cases) if reason is not None]


def test_skip_without_bad_rows_leaves_no_rejects_file(tmp_path):
    import networkx as nx  # a test dependency (pyproject.toml)

    d = _data(6)
    path = tmp_path / "nodes.parquet"
    pq.write_table(_table(d), path)
    default = tmp_path / "nodes.parquet.rejects.jsonl"
    g = vg.Graph(DIM)
    report = ingest.nodes(g, path, on_error="skip", progress=False)
    assert (report.rows_accepted, report.rows_rejected, report.rejects_path) == (6, 0, None)
    assert not default.exists()
    assert "rejects" not in str(report)
    # A rejects file an earlier run left at the path does not outlive a run without bad rows.
    given = tmp_path / "r.jsonl"
    given.write_text('{"kind": "node", "row": 0, "column": "key", "reason": "old", "key": "n0"}\n')
    report = ingest.nodes(g, path, on_error="skip", upsert=True, rejects=given, progress=False)
    assert (report.rows_accepted, report.rows_rejected, report.rejects_path) == (6, 0, None)
    assert not given.exists()
    # With a bad row, the file holds it (and nothing of the earlier run).
    given.write_text('{"stale": true}\n')
    report = ingest.nodes(g, path, on_error="skip", rejects=given, progress=False)
    assert (report.rows_accepted, report.rows_rejected, report.rejects_path) == (0, 6, str(given))
    assert [r["key"] for r in _rejects(given)] == d["key"]
    # networkx: nodes and edges share the file; each report names it only when it wrote to it.
    G = nx.DiGraph()
    G.add_node("a", vector=_V)
    G.add_node("b", vector=_V)
    G.add_edge("a", "b")
    out = tmp_path / "nx.jsonl"
    node_report, edge_report = ingest.from_networkx(vg.Graph(DIM), G, on_error="skip", rejects=out, progress=False)
    assert (node_report.rows_rejected, edge_report.rows_rejected) == (0, 0)
    assert (node_report.rejects_path, edge_report.rejects_path) == (None, None) and not out.exists()
    G.add_edge("a", "zz")  # zz: a node without a vector, rejected, so the edge to it dangles
    node_report, edge_report = ingest.from_networkx(vg.Graph(DIM), G, on_error="skip", rejects=out, progress=False)
    assert (node_report.rows_rejected, edge_report.rows_rejected) == (1, 1)
    assert (node_report.rejects_path, edge_report.rejects_path) == (str(out), str(out))
    assert [(r["kind"], r["row"]) for r in _rejects(out)] == [("node", 2), ("edge", 1)]
    G.nodes["zz"]["vector"] = _V
    has_zz = vg.Graph(DIM)
    has_zz.add_nodes(["zz"], np.ones((1, DIM), np.float32))  # node zz is rejected, the edges are good
    node_report, edge_report = ingest.from_networkx(has_zz, G, on_error="skip", rejects=out, progress=False)
    assert (node_report.rows_rejected, edge_report.rows_rejected) == (1, 0)
    assert (node_report.rejects_path, edge_report.rejects_path) == (str(out), None)


def test_skip_needs_a_rejects_path_for_non_file_sources():
    with pytest.raises(vg.InvalidArgumentError, match="needs rejects="):
        ingest.nodes(vg.Graph(DIM), _table(_data(3)), on_error="skip")
    with pytest.raises(vg.InvalidArgumentError, match="on_error must be 'raise' or 'skip'"):
        ingest.nodes(vg.Graph(DIM), _table(_data(3)), on_error="ignore")
    with pytest.raises(vg.InvalidArgumentError, match="batch_rows must be >= 1"):
        ingest.nodes(vg.Graph(DIM), _table(_data(3)), batch_rows=0)


# ---------------------------------------------------------------------------- progress and report


def test_progress_false_is_quiet_and_true_draws_a_bar(capsys):
    ingest.nodes(vg.Graph(DIM), _table(_data(10)), progress=False)
    assert capsys.readouterr().err == ""
    ingest.nodes(vg.Graph(DIM), _table(_data(10)))  # stderr is not a terminal under pytest
    assert capsys.readouterr().err == ""
    ingest.nodes(vg.Graph(DIM), _table(_data(10)), progress=True)
    err = capsys.readouterr().err
    assert "ingest nodes" in err and "100%" in err and "rows/s" in err


def test_report_reads_well():
    report = ingest.IngestReport(1000, 998, 2, 4, 0.5, "/tmp/x.rejects.jsonl")
    assert str(report) == ("998 of 1,000 rows accepted, 2 rejected, in 4 batches (0.50 s, 2,000 rows/s); "
                           "rejects: /tmp/x.rejects.jsonl")
    with pytest.raises(AttributeError):
        report.rows_read = 3


# ---------------------------------------------------------------------------- argument checks


def test_rejects_file_that_is_the_source_is_refused(tmp_path):
    import os

    d = _data(6)
    d["vectors"][2, 0] = np.nan  # a bad row, so that "skip" would write a reject
    parquet = tmp_path / "nodes.parquet"
    pq.write_table(_table(d), parquet)
    jsonl = tmp_path / "nodes.jsonl"
    jsonl.write_text("".join(json.dumps({"key": d["key"][i], "vector": d["vectors"][i].tolist()}) + "\n"
                             for i in range(6)))
    edges = tmp_path / "edges.jsonl"
    edges.write_text('{"src": "n0", "dst": "zz"}\n')
    os.link(jsonl, tmp_path / "hard.jsonl")
    os.symlink(parquet, tmp_path / "link.parquet")
    g = vg.Graph(DIM)
    unchanged = _unchanged(g)
    contents = {p: p.read_bytes() for p in (parquet, jsonl, edges)}
    cases = [
        (parquet, parquet), (parquet, tmp_path / "sub" / ".." / "nodes.parquet"), (parquet, tmp_path / "link.parquet"),
        (tmp_path / "link.parquet", parquet), (jsonl, jsonl), (jsonl, tmp_path / "hard.jsonl"),
        (str(jsonl), os.path.relpath(jsonl)),
    ]
    for source, rejects in cases:
        for on_error in ("skip", "raise"):
            with pytest.raises(vg.InvalidArgumentError) as info:
                ingest.nodes(g, source, on_error=on_error, rejects=rejects, progress=False)
            assert str(info.value) == (f"the rejects file {rejects} is the source file {source}: writing the "
                                       "rejects there would destroy the input; name another rejects file")
    with pytest.raises(vg.InvalidArgumentError, match="the rejects file .*edges.jsonl is the source file"):
        ingest.edges(g, edges, on_error="skip", rejects=edges, progress=False)
    assert unchanged() and {p: p.read_bytes() for p in contents} == contents
    # another rejects file works, and the inputs are as they were
    report = ingest.nodes(g, jsonl, on_error="skip", rejects=tmp_path / "r.jsonl", progress=False)
    assert (report.rows_accepted, report.rows_rejected) == (5, 1)
    assert {p: p.read_bytes() for p in contents} == contents


def test_failed_ingest_records_no_embedder(tmp_path):
    class Raising(HashEmbedder):
        def __call__(self, texts):
            raise RuntimeError("model not loaded")

    table = pa.table({"key": ["a", "b", "c"], "text": ["x", "y", "z"]})
    folder = tmp_path / "g"
    with vg.Graph.open(folder, dim=DIM, sync="off") as g:
        with pytest.raises(TypeError, match="returned dtype float64"):
            ingest.nodes(g, table, embedder=Float64Embedder("float64"), progress=False)
        with pytest.raises(vg.DimensionMismatchError, match="returned shape"):
            ingest.nodes(g, table, embedder=ShortEmbedder("short"), progress=False)
        with pytest.raises(RuntimeError, match="model not loaded"):
            ingest.nodes(g, table, embedder=Raising("raising"), progress=False)
        empty = pa.table({"key": ["a", "b"], "text": ["x", ""]})
        with pytest.raises(ingest.IngestError, match="empty text: nothing to embed"):
            ingest.nodes(g, empty, embedder=HashEmbedder("empty-text"), progress=False)
        # every row rejected with "skip": nothing written, nothing recorded
        report = ingest.nodes(g, pa.table({"key": ["a"], "text": [""]}), embedder=HashEmbedder("all-bad"),
                              on_error="skip", rejects=tmp_path / "r.jsonl", progress=False)
        assert report.rows_accepted == 0
        with pytest.raises(RuntimeError, match="model not loaded"):
            ingest.from_networkx(g, _nx_graph(), embedder=Raising("nx-raising"), progress=False)
        assert len(g) == 0 and g.embedder is None
    assert json.loads((folder / "MANIFEST").read_text()).get("embedder") is None
    with vg.Graph.open(folder) as g:
        assert g.embedder is None
        # a dim the graph cannot take is still refused before anything is read
        with pytest.raises(vg.DimensionMismatchError, match="'wide' makes 4-d vectors, the graph's dim is 8"):
            ingest.nodes(g, table, embedder=HashEmbedder("wide", dim=4), progress=False)
        report = ingest.nodes(g, table, embedder=HashEmbedder("good"), progress=False)
        assert report.rows_accepted == 3 and g.embedder == {"name": "good", "dim": DIM}
        # edges: a failed edge embedding records nothing either (the node embedder stays)
        with pytest.raises(vg.InvalidArgumentError, match="built with embedder 'good'.*'other'"):
            ingest.edges(g, pa.table({"src": ["a"], "dst": ["b"], "text": ["e"]}), embedder=HashEmbedder("other"),
                         progress=False)
    assert json.loads((folder / "MANIFEST").read_text())["embedder"] == {"name": "good", "dim": DIM}
    h = vg.Graph(DIM)
    h.add_nodes(["a", "b"], np.ones((2, DIM), np.float32))
    with pytest.raises(TypeError, match="returned dtype float64"):
        ingest.edges(h, pa.table({"src": ["a"], "dst": ["b"], "text": ["e"]}), embedder=Float64Embedder("f"), progress=False)
    assert h.embedder is None and h.count_edges == 0
    ingest.edges(h, pa.table({"src": ["a"], "dst": ["b"], "text": ["e"]}), embedder=HashEmbedder("e"),
                 progress=False)
    assert h.embedder == {"name": "e", "dim": DIM} and h.count_edges == 1


def _nx_graph():
    nx = pytest.importorskip("networkx")
    G = nx.Graph()
    G.add_node("p", text="hello")
    return G


def test_empty_files_give_zero_row_reports(tmp_path):
    import gzip

    files = {"zero.csv": b"", "zero.tsv": b"", "zero.jsonl": b"", "zero.ndjson": b"", "blank.jsonl": b"\n \n\n",
             "blank.csv": b"\n\n", "header.csv": b"key,vector\n", "src_header.csv": b"src,dst\n"}
    for name, data in files.items():
        (tmp_path / name).write_bytes(data)
    with gzip.open(tmp_path / "zero.csv.gz", "wb"):
        pass
    pq.write_table(pa.table({"key": pa.array([], pa.string()), "vector": pa.array([], pa.list_(pa.float32()))}),
                   tmp_path / "empty.parquet")
    g = vg.Graph(DIM)
    for name in [*files, "zero.csv.gz", "empty.parquet"]:
        path = tmp_path / name
        if name != "src_header.csv":
            report = ingest.nodes(g, path, progress=False)
            assert (report.rows_read, report.rows_accepted, report.rows_rejected, report.batches) == (0, 0, 0, 0), name
            assert str(report).startswith("0 of 0 rows accepted, 0 rejected, in 0 batches"), name
        if name not in ("header.csv", "empty.parquet"):
            report = ingest.edges(g, path, progress=False)
            assert (report.rows_read, report.rows_accepted, report.batches) == (0, 0, 0), name
        report = ingest.nodes(g, path, on_error="skip", key="id", embedder=HashEmbedder(), progress=False) \
            if name.startswith(("zero", "blank")) else None
        assert report is None or (report.rows_read, report.rows_accepted) == (0, 0)
    assert len(g) == 0 and g.count_edges == 0 and g.embedder is None


def test_graph_argument_must_be_a_graph(tmp_path):
    table = _table(_data(3))
    for bad, named in ((None, "None"), ("g.vg", "str"), (tmp_path, "pathlib.PosixPath"), (object(), "object")):
        message = f"graph must be a vecgraph.Graph, got {named}"
        with pytest.raises(TypeError, match=message):
            ingest.nodes(bad, table)
        with pytest.raises(TypeError, match=message):
            ingest.edges(bad, pa.table({"src": ["a"], "dst": ["b"]}))
        with pytest.raises(TypeError, match=message):
            ingest.from_networkx(bad, _nx_graph())
    with pytest.raises(TypeError, match="graph must be a vecgraph.Graph, got networkx.classes.graph.Graph"):
        ingest.from_networkx(_nx_graph(), vg.Graph(DIM))


def test_a_device_given_as_rejects_path_is_not_removed(tmp_path, monkeypatch):
    """--rejects /dev/null (or another non-regular file) with no bad row: the rejects file is
    not removed, as a regular one would be (os.remove is recorded here, not run)."""
    import os

    assert os.path.exists(os.devnull) and not os.path.isfile(os.devnull)  # a character device
    removed = []
    monkeypatch.setattr(os, "remove", lambda path, *a, **kw: removed.append(path))
    g = vg.Graph(DIM)
    table = pa.table({"key": ["a", "b"], "vector": [[1.0] + [0.0] * (DIM - 1)] * 2})
    report = ingest.nodes(g, table, on_error="skip", rejects=os.devnull, progress=False)
    assert report.rows_accepted == 2 and report.rejects_path is None
    assert removed == []
    regular = tmp_path / "r.jsonl"
    ingest.nodes(g, table, on_error="skip", rejects=regular, upsert=True, progress=False)
    assert removed == [str(regular)]  # a regular file without bad rows is still removed


def test_rejects_path_inside_the_graph_folder_is_refused(tmp_path):
    """A rejects file inside the graph's folder would empty (and, with no bad row, remove) a
    file of the graph such as its MANIFEST: refused before anything is read or written."""
    folder = tmp_path / "g.vg"
    table = pa.table({"key": ["a", "b"], "vector": [[1.0] + [0.0] * (DIM - 1)] * 2})
    with vg.Graph.open(str(folder), dim=DIM) as g:
        ingest.nodes(g, table, progress=False)
        g.checkpoint()
        manifest = (folder / "MANIFEST").read_bytes()
        respelled = tmp_path / "x" / ".." / "g.vg" / "MANIFEST"
        for rejects in (folder / "MANIFEST", folder / "new.jsonl", respelled):
            with pytest.raises(vg.InvalidArgumentError, match="is inside the graph folder"):
                ingest.nodes(g, table, on_error="skip", rejects=rejects, upsert=True, progress=False)
            with pytest.raises(vg.InvalidArgumentError, match="is inside the graph folder"):
                ingest.edges(g, pa.table({"src": ["a"], "dst": ["b"]}), on_error="skip", rejects=rejects,
                             progress=False)
        assert (folder / "MANIFEST").read_bytes() == manifest and not (folder / "new.jsonl").exists()
        assert g.count_edges == 0
    with vg.Graph.open(str(folder)) as g:
        assert len(g) == 2


def test_a_rejects_file_that_cannot_be_written_is_named(tmp_path):
    """A write to the rejects file that fails (a full disk: /dev/full) raises StorageError
    naming the file and saying which rows were written, not a bare OSError."""
    import os

    g = vg.Graph(DIM)
    table = pa.table({"key": ["a", None, "b"], "vector": [[1.0] + [0.0] * (DIM - 1)] * 3})
    with pytest.raises(vg.errors.StorageError, match=r"cannot write the rejects file /dev/full: .*No space "
                       r"left on device.*The 2 good rows of batch 1 \(rows 0-2\) were written, "
                       r"its 1 bad rows"):
        ingest.nodes(g, table, on_error="skip", rejects="/dev/full", progress=False)
    assert sorted(g.get_node(k)["key"] for k in ("a", "b")) == ["a", "b"]
