"""The readers of vecgraph.ingest (vecgraph.ingest_readers): Parquet, Arrow IPC files and
streams, JSONL, CSV, pandas, record batch readers and iterables, each read batch by batch into
the same nodes as add_nodes gives."""

from __future__ import annotations

import bz2
import gzip
import json
import re

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import vecgraph as vg
from vecgraph import ingest, ingest_readers
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


def _rejects(path) -> list:
    return [json.loads(line) for line in open(path, encoding="utf-8")]


def _lines(path) -> list:
    """The lines of a text file as a text editor numbers them (from index 0): CRLF, LF and CR
    each end one."""
    return re.split(r"\r\n|\r|\n", path.read_bytes().decode("utf-8-sig"))


def test_csv_line_of_too_few_or_too_many_fields_is_a_bad_row(tmp_path):
    """A CSV line with 3 or 5 fields under a header of 4 is a bad row like any other: with
    "skip" every good row is written, the bad ones listed with their line in the file; with
    "raise" the error names the line and nothing of its batch is written."""
    d = _data(10)
    lines = ["src,dst,rel,weight"] + [f"n{i % 10},n{(i + 1) % 10},knows,{i}" for i in range(400)] + [
        "n5,n6,knows", "n1,n2,likes,0.5", "n3,n4,likes,1,extra", "n7,n8,likes,2"]
    path = tmp_path / "edges.csv"
    path.write_text("\n".join(lines) + "\n")
    g = _direct(d)
    report = ingest.edges(g, path, on_error="skip", batch_rows=100, progress=False)
    assert (report.rows_read, report.rows_accepted, report.rows_rejected, report.batches) == (404, 402, 2, 5)
    assert report.rejects_path == str(path) + ".rejects.jsonl"
    assert _rejects(report.rejects_path) == [
        {"kind": "edge", "row": 400, "column": None, "src": None, "dst": None,
         "reason": "line 402: expected 4 fields as in the header, got 3: ['n5', 'n6', 'knows']"},
        {"kind": "edge", "row": 402, "column": None, "src": None, "dst": None,
         "reason": "line 404: expected 4 fields as in the header, got 5: ['n3', 'n4', 'likes', '1', 'extra']"}]
    assert (_lines(path)[402 - 1], _lines(path)[404 - 1]) == ("n5,n6,knows", "n3,n4,likes,1,extra")
    assert g.count_edges == 402
    assert vg.graph.Edge("n1", "likes", "n2", 0.5) in g.neighbors("n1", direction="out")
    assert g.neighbors("n7", direction="out")[-1] == vg.graph.Edge("n7", "likes", "n8", 2.0)
    h = _direct(d)
    with pytest.raises(ingest.IngestError) as info:
        ingest.edges(h, path, batch_rows=100, progress=False)
    e = info.value
    assert (e.row, e.column, e.report.rows_accepted, e.report.rows_rejected) == (400, None, 400, 4)
    assert e.reason == "line 402: expected 4 fields as in the header, got 3: ['n5', 'n6', 'knows']"
    assert str(e) == ("edge row 400, the whole row: line 402: expected 4 fields as in the header, got 3: "
                      "['n5', 'n6', 'knows'] (and 1 more bad row in this batch). Nothing of batch 5 (rows "
                      "400-403) was written; the 400 rows of earlier batches stay in the graph. Fix the row, or "
                      'pass on_error="skip" to write the good rows and list the bad ones.')
    assert h.count_edges == 400


@pytest.mark.parametrize("name", ["nodes.csv", "nodes.csv.gz", "nodes.csv.bz2", "nodes.tsv"])
def test_csv_bad_lines_are_numbered_as_the_file_holds_them(tmp_path, name):
    """The line a bad record is reported on counts every line of the file from 1: the header
    after a BOM, CRLF line ends, blank lines, line breaks inside quoted values; a bad record
    spanning lines names them all. The records after it keep their rows (a vector= array stays
    aligned), and blank lines are no rows."""
    sep = "\t" if name.endswith(".tsv") else ","
    records = ["key", "text"], ["n0", '"first\r\nsecond\r\nthird"'], [], ["n1", "plain"], ["n2"], \
        ["n3", '"a\nb"', "extra"], ["n4", '"last"']
    text = "\ufeff" + "".join(sep.join(r) + "\r\n" for r in records)
    data = text.encode("utf-8")
    path = tmp_path / name
    path.write_bytes(gzip.compress(data) if name.endswith(".gz") else bz2.compress(data) if name.endswith(".bz2")
                     else data)
    plain = tmp_path / ("plain." + name.split(".")[1])
    plain.write_bytes(data)
    vectors = _data(5)["vectors"]
    g = vg.Graph(DIM)
    report = ingest.nodes(g, path, vector=vectors, on_error="skip", rejects=tmp_path / "r.jsonl", progress=False)
    assert (report.rows_read, report.rows_accepted, report.rows_rejected) == (5, 3, 2)
    assert _rejects(tmp_path / "r.jsonl") == [
        {"kind": "node", "row": 2, "column": None, "key": None,
         "reason": "line 7: expected 2 fields as in the header, got 1: ['n2']"},
        {"kind": "node", "row": 3, "column": None, "key": None,
         "reason": "lines 8-9: expected 2 fields as in the header, got 3: ['n3', 'a\\nb', 'extra']"}]
    lines = _lines(plain)
    assert (lines[7 - 1], lines[8 - 1], lines[9 - 1]) == ("n2", f'n3{sep}"a', f'b"{sep}extra')
    assert g.get_node("n0")["text"] == "first\r\nsecond\r\nthird" and g.get_node("n4")["text"] == "last"
    ref = vg.Graph(DIM)
    ref.add_nodes(["n0", "n1", "n4"], vectors[[0, 1, 4]])
    for key in ("n0", "n1", "n4"):
        assert np.array_equal(g.get_node(key)["vector"], ref.get_node(key)["vector"]), key
    with pytest.raises(ingest.IngestError, match=r"^node row 2, the whole row: line 7: expected 2 fields as in "
                                                 r"the header, got 1: \['n2'\] \(and 1 more bad row"):
        ingest.nodes(vg.Graph(DIM), path, vector=vectors, progress=False)


def test_csv_bad_lines_across_blocks(tmp_path, monkeypatch):
    """Blocks of 64 bytes cut the file between and inside records (quoted values with line
    breaks among them): bad records first, in a run longer than a batch, at block ends and
    last keep their rows and lines, and every good record is written."""
    monkeypatch.setattr(ingest_readers, "_CSV_BLOCK_BYTES", 64)
    rows = []  # (fields, bad)
    for i in range(60):
        rel = f'"r{i}\nmore {i}"' if i % 7 == 3 else f"r{i}"
        fields = [f"n{i % 10}", f"n{(i * 3 + 1) % 10}", rel, str(i)]
        bad = i in (0, 1, 12, 20, 21, 22, 23, 24, 25, 26, 31, 45, 58, 59)
        if bad:
            fields = fields[:2] if i % 2 else fields + [""]
        rows.append((fields, bad))
    text, line, expected = "src,dst,rel,weight\n", 2, []
    for row, (fields, bad) in enumerate(rows):
        record = ",".join(fields)
        last = line + record.count("\n")
        if bad:
            where = f"line {line}" if last == line else f"lines {line}-{last}"
            expected.append((row, f"{where}: expected 4 fields as in the header, got {len(fields)}"))
        text += record + "\n"
        line = last + 1
    path = tmp_path / "edges.csv"
    path.write_text(text)
    g = _direct(_data(10))
    report = ingest.edges(g, path, on_error="skip", rejects=tmp_path / "r.jsonl", batch_rows=3, progress=False)
    assert (report.rows_read, report.rows_accepted, report.rows_rejected) == (60, 46, 14)
    assert [(r["row"], r["reason"].rsplit(": ", 1)[0]) for r in _rejects(tmp_path / "r.jsonl")] == expected
    assert expected[:3] == [
        (0, "line 2: expected 4 fields as in the header, got 5"),
        (1, "line 3: expected 4 fields as in the header, got 2"),
        (12, "line 16: expected 4 fields as in the header, got 5")]
    written = sorted(tuple(e) for key in _data(10)["key"] for e in g.neighbors(key, direction="out"))
    assert written == sorted((f[0], f[2].strip('"'), f[1], float(f[3])) for f, bad in rows if not bad)
    with pytest.raises(ingest.IngestError, match="^edge row 0, the whole row: line 2: expected 4 fields"):
        ingest.edges(_direct(_data(10)), path, batch_rows=3, progress=False)


def test_a_source_that_fails_mid_way_says_how_many_rows_were_taken(tmp_path):
    """A source whose reading fails after some batches: the message gives the rows taken from
    it and how many of them were ingested (a bad row among them was not)."""
    d = _data(10)
    table = _table(d)

    def batches():
        yield from table.to_batches(max_chunksize=5)
        raise pa.ArrowInvalid("the rest is unreadable")

    g = vg.Graph(DIM)
    g.add_nodes(["n3"], d["vectors"][:1])
    with pytest.raises(vg.InvalidArgumentError) as info:
        ingest.nodes(g, batches(), batch_rows=5, on_error="skip", rejects=tmp_path / "r.jsonl", progress=False)
    assert str(info.value) == ("cannot read the source beyond the 10 rows taken from it (9 of them ingested): "
                               "the rest is unreadable")
    assert len(g) == 10


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


@pytest.mark.parametrize("name", ["nodes.tsv.gz", "NODES.TSV.GZ", "Nodes.Csv.Bz2"])
def test_compressed_csv_and_tsv_of_any_letter_case(tmp_path, name):
    import bz2
    import gzip

    sep = "\t" if ".tsv" in name.lower() else ","
    text = f"key{sep}vector{sep}text\nk1{sep}\"[1, 1]\"{sep}one\nk2{sep}\"[1, 2]\"{sep}two\n"
    opener = gzip.open if name.lower().endswith(".gz") else bz2.open
    with opener(tmp_path / name, "wt") as f:
        f.write(text)
    g = vg.Graph(2)
    report = vg.ingest.nodes(g, str(tmp_path / name))
    assert (report.rows_accepted, len(g)) == (2, 2)
    assert g.get_node("k2", vector=False)["text"] == "two"
