"""vecgraph.ingest and missing values in the name columns: a row whose tenant is missing (null,
NaN, an empty CSV field, a JSONL record without it) is a bad row in every kind of source that has
a tenant column, never a row of the default tenant ""; a missing label, rel or text is "", as
documented; a source without a tenant column puts every row in the default tenant."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

import vecgraph as vg
from vecgraph import ingest

MISSING_TENANT = ('missing tenant (null); a row without a tenant is not put in the default tenant "": give it '
                  "one, or leave the tenant column out of the source")
VECTORS = [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]


def _fields(g: vg.Graph, key) -> tuple:
    node = g.get_node(key, vector=False)
    return node["tenant"], node["label"], node["text"]


def _sources(tmp_path) -> dict:
    """The same three nodes in each kind of source: row 1 has no tenant (and no label, no text)."""
    import pandas as pd

    csv = tmp_path / "n.csv"
    csv.write_text('key,vector,tenant,label,text\na,"[1,0,0]",t,l,apple\nb,"[0,1,0]",,,\nc,"[0,0,1]",u,m,cherry\n')
    jsonl = tmp_path / "n.jsonl"
    jsonl.write_text("".join(json.dumps(r) + "\n" for r in (
        {"key": "a", "vector": VECTORS[0], "tenant": "t", "label": "l", "text": "apple"},
        {"key": "b", "vector": VECTORS[1], "label": None},
        {"key": "c", "vector": VECTORS[2], "tenant": "u", "label": "m", "text": "cherry"})))
    jsonl_null = tmp_path / "null.jsonl"
    jsonl_null.write_text(jsonl.read_text().replace('"label": null', '"tenant": null'))
    columns = {"key": ["a", "b", "c"], "vector": VECTORS, "tenant": ["t", None, "u"], "label": ["l", None, "m"],
               "text": ["apple", None, "cherry"]}
    frame = pd.DataFrame(columns)
    frame.loc[1, "tenant"] = np.nan
    return {"arrow": pa.table(columns), "dictionary": pa.table(
                {**columns, "tenant": pa.array(columns["tenant"]).dictionary_encode()}),
            "csv": str(csv), "jsonl": str(jsonl), "jsonl null": str(jsonl_null), "pandas": frame}


@pytest.mark.parametrize("kind", ["arrow", "dictionary", "csv", "jsonl", "jsonl null", "pandas"])
def test_a_row_without_a_tenant_is_a_bad_row(tmp_path, kind):
    source = _sources(tmp_path)[kind]
    with vg.Graph.open(tmp_path / "g", dim=3, sync="off") as g:
        before = g.stats()["last_lsn"]
        with pytest.raises(ingest.IngestError) as raised:
            ingest.nodes(g, source, progress=False)
        assert (raised.value.row, raised.value.column, raised.value.reason) == (1, "tenant", MISSING_TENANT)
        assert str(raised.value).startswith(f"node row 1, column 'tenant': {MISSING_TENANT}. Nothing of batch 1")
        assert len(g) == 0 and g.stats()["last_lsn"] == before
        rejects = tmp_path / "rejects.jsonl"
        report = ingest.nodes(g, source, on_error="skip", rejects=rejects, progress=False)
        assert (report.rows_accepted, report.rows_rejected) == (2, 1)
        assert sorted(g.search([1, 1, 1], k=5, exact=True).keys) == ["a", "c"]
        assert (_fields(g, "a"), _fields(g, "c")) == (("t", "l", "apple"), ("u", "m", "cherry"))
        assert [json.loads(line) for line in rejects.read_text().splitlines()] == [
            {"kind": "node", "row": 1, "column": "tenant", "reason": MISSING_TENANT, "key": "b"}]
        assert g.search([0, 1, 0], k=5, tenants=[""], exact=True).keys == []


def test_a_missing_label_rel_or_text_is_empty_and_a_source_without_tenants_the_default_tenant(tmp_path):
    """Null labels, rels and texts take "" (ingest gives a missing optional value its default,
    as a null weight is 1.0); only the tenant, the boundary between users' data, must be named
    on every row of a source that has a tenant column."""
    nodes = pa.table({"key": ["a", "b"], "vector": VECTORS[:2], "label": ["l", None], "text": [None, "pear"],
                      "tenant": ["t", "t"]})
    g = vg.Graph(3)
    assert ingest.nodes(g, nodes, progress=False).rows_accepted == 2
    assert (_fields(g, "a"), _fields(g, "b")) == (("t", "l", ""), ("t", "", "pear"))
    report = ingest.edges(g, pa.table({"src": ["a", "b"], "dst": ["b", "a"], "rel": [None, "r"],
                                       "text": ["why", None]}), progress=False)
    assert report.rows_accepted == 2
    assert [(e.rel, e.dst) for e in g.neighbors("a")] == [("", "b")]
    assert [(e.rel, e.dst) for e in g.neighbors("b")] == [("r", "a")]
    # No tenant column (JSONL records that never hold the field; a table without it): the default tenant.
    jsonl = tmp_path / "n.jsonl"
    jsonl.write_text(json.dumps({"key": "c", "vector": VECTORS[2]}) + "\n")
    assert ingest.nodes(g, str(jsonl), progress=False).rows_accepted == 1
    assert ingest.nodes(g, pa.table({"key": ["d"], "vector": [[1.0, 1.0, 0.0]]}), progress=False).rows_accepted == 1
    assert (_fields(g, "c"), _fields(g, "d")) == (("", "", ""), ("", "", ""))
    # A JSONL tenant column named by tenant= that a record lacks: a bad row.
    with pytest.raises(ingest.IngestError) as raised:
        ingest.nodes(g, str(jsonl), upsert=True, tenant="org", progress=False)
    assert (raised.value.row, raised.value.column, raised.value.reason) == (0, "org", MISSING_TENANT)
    # An all-null tenant column is a column: every row is bad.
    with pytest.raises(ingest.IngestError) as raised:
        ingest.nodes(g, pa.table({"key": ["e"], "vector": [VECTORS[0]], "tenant": pa.nulls(1, pa.string())}),
                     progress=False)
    assert (raised.value.row, raised.value.column) == (0, "tenant")
    assert len(g) == 4


def test_networkx_nodes_without_the_tenant_attribute(tmp_path):
    """from_networkx: once a node has the tenant attribute, a node without it (or with None) is a
    bad row; a graph whose nodes never have it goes to the default tenant."""
    import networkx as nx
    G = nx.DiGraph()
    G.add_node("a", vector=VECTORS[0], tenant="t", label="l")
    G.add_node("b", vector=VECTORS[1], label=None)
    G.add_node("c", vector=VECTORS[2], tenant=None)
    G.add_edge("a", "b", rel=None)
    g = vg.Graph(3)
    with pytest.raises(ingest.IngestError) as raised:
        ingest.from_networkx(g, G, progress=False)
    assert (raised.value.row, raised.value.column, raised.value.reason) == (1, "tenant", MISSING_TENANT)
    assert len(g) == 0
    rejects = tmp_path / "rejects.jsonl"
    nodes, edges = ingest.from_networkx(g, G, on_error="skip", rejects=rejects, progress=False)
    assert (nodes.rows_accepted, nodes.rows_rejected, edges.rows_rejected) == (1, 2, 1)
    assert [(r["row"], r["column"], r["reason"]) for r in map(json.loads, rejects.read_text().splitlines())][:2] == [
        (1, "tenant", MISSING_TENANT), (2, "tenant", MISSING_TENANT)]
    assert _fields(g, "a") == ("t", "l", "")
    H = nx.DiGraph()
    H.add_node("a", vector=VECTORS[0], label=None)
    H.add_node("b", vector=VECTORS[1])
    H.add_edge("a", "b", rel=None)
    h = vg.Graph(3)
    assert [r.rows_accepted for r in ingest.from_networkx(h, H, progress=False)] == [2, 1]
    assert (_fields(h, "a"), _fields(h, "b")) == (("", "", ""), ("", "", ""))
    assert [(e.rel, e.dst) for e in h.neighbors("a")] == [("", "b")]
