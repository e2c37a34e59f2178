"""The readers of vecgraph.ingest (vecgraph.ingest_readers): Parquet, Arrow IPC files and
streams, JSONL, CSV, pandas, record batch readers and iterables, each read batch by batch into
the same nodes as add_nodes gives."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import vecgraph as vg
from vecgraph import ingest
from ingest_helpers import DIM, _assert_same_nodes, _data, _direct, _table


def test_parquet_file_streams_in_batches(tmp_path):
    d = _data(100)
    path = tmp_path / "nodes.parquet"
    pq.write_table(_table(d), path, row_group_size=30)
    g = vg.Graph(DIM)
    report = ingest.nodes(g, path, batch_rows=16, progress=False)
    assert (report.rows_read, report.rows_accepted, report.batches) == (100, 100, 7)
    _assert_same_nodes(g, _direct(d), d["key"])


def test_arrow_ipc_file_and_stream(tmp_path):
    d = _data(30)
    table = _table(d)
    for name, new in (("nodes.arrow", pa.ipc.new_file), ("nodes.arrows", pa.ipc.new_stream),
                      ("stream.ipc", pa.ipc.new_stream), ("nodes.feather", pa.ipc.new_file)):
        path = tmp_path / name
        with pa.OSFile(str(path), "wb") as sink, new(sink, table.schema) as writer:
            writer.write_table(table, max_chunksize=8)
        g = vg.Graph(DIM)
        report = ingest.nodes(g, str(path), batch_rows=10, progress=False)
        assert (report.rows_accepted, report.batches) == (30, 3), name
        _assert_same_nodes(g, _direct(d), d["key"])


def test_jsonl_keeps_each_records_types(tmp_path):
    d = _data(12)
    path = tmp_path / "nodes.jsonl"
    with open(path, "w", encoding="utf-8") as f:
        for i in range(12):
            record = {"key": i if i % 2 else f"n{i}", "vector": d["vectors"][i].tolist(), "text": d["text"][i]}
            if i % 3 == 0:
                record["props"] = {"shape": i, "nested": {"x": [1, 2]}} if i else {"other": "field"}
            if i == 7:
                record["label"] = "late"  # a field that the first batch does not have
            f.write(json.dumps(record, ensure_ascii=False) + "\n")
            if i == 4:
                f.write("\n")  # blank lines are skipped
    g = vg.Graph(DIM)
    report = ingest.nodes(g, path, batch_rows=5, progress=False)
    assert (report.rows_read, report.rows_accepted, report.batches) == (12, 12, 3)
    assert 3 in g and "n2" in g and "3" not in g
    assert g.get_node(3)["props"] == {"shape": 3, "nested": {"x": [1, 2]}}
    assert g.get_node("n0")["props"] == {"other": "field"}
    assert g.get_node(7)["label"] == "late"
    assert g.get_node("n4")["text"] == d["text"][4]
    assert np.array_equal(g.quantized(["n2"])[0], _direct(d).quantized(["n2"])[0])


def test_csv_reads_strings_as_strings(tmp_path):
    d = _data(20)
    path = tmp_path / "nodes.csv"
    with open(path, "w", encoding="utf-8") as f:
        f.write("id,vector,label,text,ts,props\n")
        for i in range(20):
            props = json.dumps({"i": i}).replace('"', '""')
            f.write(f'{i},"{json.dumps(d["vectors"][i].tolist())}",{100 + i},"{d["text"][i]}",{i * 10},"{props}"\n')
    g = vg.Graph(DIM)
    report = ingest.nodes(g, path, key_type="int", progress=False)
    assert report.rows_accepted == 20
    node = g.get_node(4)
    assert (node["label"], node["text"], node["ts"], node["props"]) == ("104", d["text"][4], 40, {"i": 4})
    assert np.allclose(node["vector"], _direct(d).get_node("n4")["vector"])
    edges_path = tmp_path / "edges.csv"
    edges_path.write_text("source,target,weight\n1,2,0.5\n2,3,\n")
    ingest.edges(g, edges_path, key_type="int", progress=False)
    assert g.neighbors(2) == [vg.graph.Edge(2, "", 3, 1.0)]
    assert g.neighbors(1) == [vg.graph.Edge(1, "", 2, 0.5)]


def test_pandas_dataframe():
    pd = pytest.importorskip("pandas")
    d = _data(25)
    df = pd.DataFrame({
        "key": d["key"], "vector": list(d["vectors"]), "label": [None if i == 3 else x for i, x in enumerate(d["label"])],
        "ts": pd.to_datetime(d["ts"], unit="us"), "props": d["props"], 1: range(25),
    })
    g = vg.Graph(DIM)
    report = ingest.nodes(g, df, batch_rows=10, progress=False)
    assert (report.rows_accepted, report.batches) == (25, 3)
    assert g.get_node("n3")["label"] == ""
    assert g.get_node("n5")["props"] == {"i": 5, "tags": ["a", "b"]}
    assert g.get_node("n6")["ts"] == 6_000_000
    assert np.array_equal(g.quantized(d["key"])[0], _direct(d).quantized(d["key"])[0])
    edges = pd.DataFrame({"src": ["n1", "n2"], "dst": ["n2", "n3"], "weight": [0.25, np.nan]})
    ingest.edges(g, edges, progress=False)
    assert g.neighbors("n2") == [vg.graph.Edge("n2", "", "n3", 1.0)]
    # int keys with a missing value: pandas makes the column float; the keys stay ints
    k = vg.Graph(DIM)
    ingest.nodes(k, pd.DataFrame({"id": [10, 11, 12], "vector": list(d["vectors"][:3])}), progress=False)
    edges = pd.DataFrame({"src": [10, None, 12], "dst": [11, 12, 10]})
    assert edges["src"].dtype == np.float64
    with pytest.raises(ingest.IngestError, match="edge row 1, column 'src': missing key"):
        ingest.edges(k, edges, progress=False)
    ingest.edges(k, edges.iloc[[0, 2]], progress=False)
    assert k.neighbors(12) == [vg.graph.Edge(12, "", 10, 1.0)]


def test_record_batch_reader_and_iterables():
    d = _data(30)
    table = _table(d)
    for source in (table.to_reader(max_chunksize=4), table.to_batches(max_chunksize=4),
                   iter(table.to_batches(max_chunksize=11)), table.to_batches()[0]):
        g = vg.Graph(DIM)
        report = ingest.nodes(g, source, batch_rows=8, progress=False)
        assert (report.rows_accepted, report.batches) == (30, 4)
        _assert_same_nodes(g, _direct(d), d["key"])
    with pytest.raises(TypeError, match="RecordBatches, got dict"):
        ingest.nodes(vg.Graph(DIM), [{"key": 1}], progress=False)


def test_sources_are_streamed_batch_by_batch():
    d = _data(40)
    pulled = []

    def source():
        for i, batch in enumerate(_table(d).to_batches(max_chunksize=5)):
            pulled.append(i)
            yield batch

    writes = []

    class Recording(vg.Graph):
        def add_nodes(self, keys, vectors, **kwargs):
            writes.append((len(keys), len(pulled)))
            super().add_nodes(keys, vectors, **kwargs)

    g = Recording(DIM)
    ingest.nodes(g, source(), batch_rows=10, progress=False)
    # each batch of 10 rows is written after reading its two pieces of 5, before the next ones
    assert writes == [(10, 2), (10, 4), (10, 6), (10, 8)]
