"""Snapshots in and out: checkpoint → reopen and export → restore keep the exact graph; the
cached HNSW graph is reused when it fits and rebuilt when it does not; a damaged snapshot falls
back to the previous generation or raises CorruptionError; verify() finds damage; the golden
snapshot under tests/data keeps loading."""

from __future__ import annotations

import json
import os
import shutil

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import vecgraph as vg
from vecgraph import snapshot, storage

from conftest import examples

GOLDEN = os.path.join(os.path.dirname(__file__), "data", "snapshot", "v1")


# ------------------------------------------------------------------------------ helpers


def plain_state(g: vg.Graph) -> dict:
    """export_state with its Arrow-layout string columns as Python lists, and one (possibly
    empty) vector row per edge."""
    state = dict(g._engine.export_state(roll_wal=False))
    for name in ("keys",):
        state[name] = storage.strings_array(state[name], pa.large_binary()).to_pylist()
    for name in ("texts", "props", "aliases", "edge_texts", "edge_props"):
        state[name] = storage.strings_array(state[name], pa.large_string()).to_pylist()
    for name in ("labels", "tenants", "edge_rels"):
        state[name] = storage.dictionary_array(state[name]).cast(pa.string()).to_pylist()
    rows = iter(state["edge_rows"])
    state["edge_rows"] = [next(rows).tobytes() if has else b"" for has in state["edge_has_vector"]]
    return state


def canonical(g: vg.Graph) -> tuple:
    """The graph's live content, independent of node and edge ids: node key → fields and int8
    row; the sorted list of edges with every field."""
    state = plain_state(g)
    keys = state["keys"]
    nodes = {
        keys[i]: (state["labels"][i], state["tenants"][i], int(state["ts"][i]), state["texts"][i], state["props"][i],
                  state["rows"][i].tobytes())
        for i in range(len(keys))
    }
    edges = sorted(
        (keys[state["edge_src"][j]], keys[state["edge_dst"][j]], state["edge_rels"][j], float(state["edge_weights"][j]),
         int(state["edge_ts"][j]), state["edge_texts"][j], state["edge_props"][j], bool(state["edge_has_vector"][j]),
         state["edge_rows"][j])
        for j in range(len(state["edge_src"]))
    )
    return nodes, edges


def results(g: vg.Graph, queries: np.ndarray, exact: bool = True) -> list:
    return [(r.keys, np.round(r.scores, 5).tolist()) for r in
            (g.search(q, k=8, seeds=4, hops=2, exact=exact) for q in queries)]


def build(g: vg.Graph, rng: np.random.Generator, keys: list, count_edges: int, edge_vectors: bool,
          deletes: int, upserts: int) -> None:
    dim = g.dim
    if keys:
        g.add_nodes(keys, rng.normal(size=(len(keys), dim)),
                    labels=[["", "person", "org"][i % 3] for i in range(len(keys))],
                    tenants=[["t1", "t2"][i % 2] for i in range(len(keys))],
                    ts=np.arange(len(keys), dtype=np.int64) * 1_000_000,
                    texts=[f"text {i} ✓" for i in range(len(keys))],
                    props=[{"i": i} if i % 3 else None for i in range(len(keys))])
    if keys and count_edges:
        src = [keys[i] for i in rng.integers(0, len(keys), count_edges)]
        dst = [keys[i] for i in rng.integers(0, len(keys), count_edges)]
        g.add_edges(src, dst, rels=[["knows", "cites"][i % 2] for i in range(count_edges)],
                    weights=rng.random(count_edges).astype(np.float32),
                    vectors=rng.normal(size=(count_edges, dim)) if edge_vectors else None,
                    texts=[f"e{i}" for i in range(count_edges)])
    if keys and upserts:
        chosen = keys[: min(upserts, len(keys))]
        g.upsert_nodes(chosen, rng.normal(size=(len(chosen), dim)), texts=["upserted"] * len(chosen))
    if keys and deletes:
        g.delete_nodes(keys[-min(deletes, len(keys)):])


key_lists = st.one_of(
    st.lists(st.integers(-(2**63), 2**63 - 1), unique=True, max_size=60),
    st.lists(st.text(min_size=1, max_size=8), unique=True, max_size=60),
    st.lists(st.one_of(st.integers(-50, 50), st.text(min_size=1, max_size=4)), unique=True, max_size=60),
)


# ------------------------------------------------------------------------------ round trips


@settings(max_examples=examples(20), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(keys=key_lists, count_edges=st.integers(0, 150), edge_vectors=st.booleans(), deletes=st.integers(0, 5),
       upserts=st.integers(0, 3), seed=st.integers(0, 2**32 - 1), table_format=st.sampled_from(["parquet", "arrow"]))
def test_round_trips_keep_nodes_edges_and_results(tmp_path_factory, keys, count_edges, edge_vectors, deletes, upserts,
                                                   seed, table_format):
    rng = np.random.default_rng(seed)
    folder = tmp_path_factory.mktemp("g")
    g = vg.Graph.open(folder / "graph", dim=5, metric="cos", sync="off")
    build(g, rng, keys, count_edges, edge_vectors, deletes, upserts)
    queries = rng.normal(size=(4, 5))
    expected_content, expected_results = canonical(g), results(g, queries)
    g.checkpoint()
    g.close()

    reopened = vg.Graph.open(folder / "graph")
    assert canonical(reopened) == expected_content
    assert results(reopened, queries) == expected_results
    assert reopened.verify() == []
    info = snapshot.export(reopened, folder / "export", format=table_format)
    assert info["nodes"] == len(expected_content[0]) and info["edges"] == len(expected_content[1])
    reopened.close()

    restored = snapshot.restore(folder / "export", folder / "restored")
    try:
        assert canonical(restored) == expected_content
        assert results(restored, queries) == expected_results
        assert restored.verify() == []
        assert restored._manifest["uuid"] != reopened._manifest["uuid"]  # a new database
    finally:
        restored.close()


def test_cached_hnsw_is_reused_and_gives_the_same_seeds(tmp_path):
    rng = np.random.default_rng(1)
    g = vg.Graph.open(tmp_path / "g", dim=16, sync="off")
    g.add_nodes(list(range(3000)), rng.normal(size=(3000, 16)))
    g.add_edges(list(range(2999)), list(range(1, 3000)), rels="next")
    queries = rng.normal(size=(30, 16))
    approximate = results(g, queries, exact=False)
    g.checkpoint()
    g.close()
    files = storage.read_manifest(str(tmp_path / "g"))["files"]
    assert set(files) == {"nodes.arrow", "edges.arrow", "hnsw.usearch"}
    g = vg.Graph.open(tmp_path / "g")
    assert g._recovery["hnsw"] == "loaded"
    assert results(g, queries, exact=False) == approximate  # the very same HNSW graph
    assert g.verify() == []
    g.close()


def test_hnsw_is_not_cached_after_deletes_or_upserts(tmp_path):
    rng = np.random.default_rng(2)
    for change in ("delete", "upsert"):
        g = vg.Graph.open(tmp_path / change, dim=8, sync="off")
        g.add_nodes(list(range(200)), rng.normal(size=(200, 8)))
        if change == "delete":
            g.delete_nodes([5])
        else:
            g.upsert_nodes([5], rng.normal(size=(1, 8)))
        g.checkpoint()
        g.close()
        assert "hnsw.usearch" not in storage.read_manifest(str(tmp_path / change))["files"]
        g = vg.Graph.open(tmp_path / change)
        assert g._recovery["hnsw"] == "rebuild"
        assert g.verify() == [] and len(g) == (199 if change == "delete" else 200)
        q = g.get_node(7)["vector"]
        assert g.search(q, k=1, hops=0, ef=200).keys == [7]  # ef = n: the HNSW search reaches every node
        g.checkpoint()  # the loaded graph is compact again: the next snapshot caches its HNSW
        g.add_nodes([1000], rng.normal(size=(1, 8)))
        g.checkpoint()
        g.close()
        assert "hnsw.usearch" in storage.read_manifest(str(tmp_path / change))["files"]


def test_damaged_or_foreign_hnsw_file_is_rebuilt(tmp_path):
    rng = np.random.default_rng(3)
    for name, n in (("small", 300), ("big", 400)):
        g = vg.Graph.open(tmp_path / name, dim=8, sync="off")
        g.add_nodes(list(range(n)), rng.normal(size=(n, 8)))
        g.checkpoint()
        g.close()
    small = tmp_path / "small"
    manifest = storage.read_manifest(str(small))
    target = small / manifest["snapshot"] / "hnsw.usearch"
    # Another graph's HNSW file (more members than nodes), with a matching sha256 in the MANIFEST.
    foreign = tmp_path / "big" / storage.read_manifest(str(tmp_path / "big"))["snapshot"] / "hnsw.usearch"
    shutil.copyfile(foreign, target)
    manifest["files"]["hnsw.usearch"] = storage._sha256(str(target))
    storage.write_manifest(str(small), manifest)
    with pytest.warns(RuntimeWarning, match="HNSW index file .* 400 members for a graph of 300 nodes"):
        g = vg.Graph.open(small)
    assert g._recovery["hnsw"] == "damaged" and g.verify() == []
    assert g.search(g.get_node(3)["vector"], k=1, hops=0).keys == [3]
    g.close()
    # Truncated, with a matching sha256: the layout check catches it before USearch reads it.
    shutil.copyfile(foreign, target)
    target.write_bytes(target.read_bytes()[:-100])
    manifest = storage.read_manifest(str(small))
    manifest["files"]["hnsw.usearch"] = storage._sha256(str(target))
    storage.write_manifest(str(small), manifest)
    with pytest.warns(RuntimeWarning, match="HNSW index file"):
        g = vg.Graph.open(small)
    assert g._recovery["hnsw"] == "damaged" and g.verify() == [] and len(g) == 300
    g.close()
    # A flipped byte: the sha256 catches it.
    data = bytearray(target.read_bytes())
    data[len(data) // 2] ^= 1
    target.write_bytes(bytes(data))
    with pytest.warns(RuntimeWarning, match="fails its checksum"):
        g = vg.Graph.open(small)
    assert g._recovery["hnsw"] == "damaged" and g.verify() == []
    g.close()


# ------------------------------------------------------------------------------ damage and fallback


def _two_generations(folder) -> tuple[vg.Graph, list]:
    rng = np.random.default_rng(4)
    g = vg.Graph.open(folder, dim=6, sync="off")
    g.add_nodes([f"a{i}" for i in range(50)], rng.normal(size=(50, 6)))
    g.add_edges([f"a{i}" for i in range(49)], [f"a{i}" for i in range(1, 50)], rels="next")
    g.checkpoint()  # generation 1
    g.add_nodes(["b"], rng.normal(size=(1, 6)))
    g.checkpoint()  # generation 2
    g.add_nodes(["c"], rng.normal(size=(1, 6)))  # WAL only
    g.delete_nodes(["a0"])
    expected = canonical(g)
    g.close()
    return g, expected


def _damage(path, how: str, folder) -> None:
    data = bytearray(path.read_bytes())
    if how == "flip":
        data[len(data) // 2] ^= 0x04
        path.write_bytes(bytes(data))
    elif how == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif how == "delete":
        path.unlink()
    elif how in ("schema", "uuid"):
        table = pa.ipc.open_file(pa.BufferReader(bytes(data))).read_all()
        meta = dict(table.schema.metadata)
        if how == "schema":
            table = table.drop_columns(["codes"])
        else:
            meta[b"vecgraph.uuid"] = b"0" * 32
        table = table.replace_schema_metadata(meta)
        with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
            writer.write_table(table)
        # A consistent MANIFEST: only the content is wrong.
        manifest = storage.read_manifest(str(folder))
        manifest["files"][path.name] = storage._sha256(str(path))
        storage.write_manifest(str(folder), manifest)


@pytest.mark.parametrize("how", ["flip", "truncate", "delete", "schema", "uuid"])
def test_damaged_snapshot_falls_back_to_the_previous_generation(tmp_path, how):
    folder = tmp_path / "g"
    _, expected = _two_generations(folder)
    current = folder / storage.read_manifest(str(folder))["snapshot"] / "nodes.arrow"
    _damage(current, how, folder)
    with pytest.warns(RuntimeWarning, match="recovering from the previous snapshot"):
        g = vg.Graph.open(folder)
    assert canonical(g) == expected  # nothing lost: the WAL covers everything since generation 1
    assert g.verify() == []
    g.checkpoint()  # a new generation replaces the damaged one
    g.close()
    g = vg.Graph.open(folder)
    assert canonical(g) == expected
    g.close()
    assert snapshot.verify(folder) == []


@pytest.mark.parametrize("how", ["flip", "truncate", "delete", "schema", "uuid"])
def test_damaged_snapshot_without_a_previous_one_is_corruption(tmp_path, how):
    folder = tmp_path / "g"
    g = vg.Graph.open(folder, dim=6, sync="off")
    g.add_nodes(["x", "y"], np.eye(6)[:2])
    g.checkpoint()
    g.close()
    _damage(folder / storage.read_manifest(str(folder))["snapshot"] / "nodes.arrow", how, folder)
    expected = {"uuid": "another database", "schema": "expected columns"}.get(how, "nodes.arrow")
    with pytest.raises(vg.CorruptionError, match=expected):
        vg.Graph.open(folder)
    problems = snapshot.verify(folder)
    assert problems and any("nodes.arrow" in p or "recovery fails" in p for p in problems)


def test_both_generations_damaged_names_both(tmp_path):
    folder = tmp_path / "g"
    _two_generations(folder)
    manifest = storage.read_manifest(str(folder))
    for name in (manifest["snapshot"], manifest["previous"]["snapshot"]):
        _damage(folder / name / "edges.arrow", "flip", folder)
    with pytest.warns(RuntimeWarning), pytest.raises(vg.CorruptionError, match="previous snapshot is damaged too"):
        vg.Graph.open(folder)


def test_verify_reports_damage_in_the_previous_generation(tmp_path):
    folder = tmp_path / "g"
    _two_generations(folder)
    assert snapshot.verify(folder) == []
    previous = folder / storage.read_manifest(str(folder))["previous"]["snapshot"] / "edges.arrow"
    _damage(previous, "flip", folder)
    problems = snapshot.verify(folder)
    assert len(problems) == 1 and "edges.arrow fails its checksum" in problems[0]
    with pytest.raises(vg.InvalidArgumentError, match="no vecgraph graph"):
        snapshot.verify(tmp_path / "nothing")


# ------------------------------------------------------------------------------ export and restore


def test_export_is_readable_by_plain_pyarrow(tmp_path):
    g = vg.Graph(dim=4, metric="cos")
    g.add_nodes([10, 20, 30], np.eye(4)[:3], labels=["a", "b", "a"], texts=["x", "y", "z"], ts=[1, 2, 3],
                props=[{"k": 1}, None, {"k": 3}])
    g.add_edges([10, 20], [20, 30], rels=["r", "s"], weights=[0.5, 1.0], vectors=[[1, 0, 0, 0], [0, 1, 0, 0]])
    info = snapshot.export(g, tmp_path / "out")
    assert info["hnsw"] and set(info["files"]) == {"nodes.parquet", "edges.parquet", "hnsw.usearch"}
    nodes = pq.read_table(tmp_path / "out" / "nodes.parquet")
    assert nodes.column("key").to_pylist() == [10, 20, 30]
    assert nodes.schema.field("key").type == pa.int64()
    assert nodes.schema.field("ts").type == pa.timestamp("us", tz="UTC")
    assert nodes.schema.field("vector_codes").type == pa.list_(pa.int8(), 4)
    assert nodes.column("label").cast(pa.string()).to_pylist() == ["a", "b", "a"]
    assert [json.loads(p) if p else None for p in nodes.column("props").to_pylist()] == [{"k": 1}, None, {"k": 3}]
    codes = np.array(nodes.column("vector_codes").to_pylist(), dtype=np.float32)
    approx = codes * nodes.column("vector_scale").to_numpy()[:, None]
    assert np.allclose(approx, np.eye(4)[:3], atol=0.01)  # vector ≈ codes * scale
    edges = pq.read_table(tmp_path / "out" / "edges.parquet")
    assert edges.column("src").to_pylist() == [10, 20] and edges.column("dst").to_pylist() == [20, 30]
    assert edges.column("weight").to_pylist() == [0.5, 1.0]
    description = json.loads((tmp_path / "out" / "vecgraph.json").read_text())
    assert description["dim"] == 4 and description["metric"] == "cos" and description["nodes"] == 3


def test_export_into_the_graph_folder_is_refused(tmp_path):
    """An export folder inside the graph's own folder is refused before anything is written;
    one beside it is fine."""
    folder = tmp_path / "g.vg"
    with vg.Graph.open(folder, dim=4) as g:
        g.add_nodes(["a"], np.ones((1, 4)))
        before = sorted(p.name for p in folder.iterdir())
        for inside in (folder / "out", folder / "snapshots" / "x", folder):
            with pytest.raises(vg.InvalidArgumentError, match=r"^the export folder .* is inside the graph folder "):
                snapshot.export(g, inside, overwrite=True)
        assert sorted(p.name for p in folder.iterdir()) == before
        assert snapshot.export(g, tmp_path / "beside")["nodes"] == 1

def test_export_and_restore_refuse_bad_input(tmp_path):
    g = vg.Graph(dim=4)
    g.add_nodes(["a"], np.ones((1, 4)))
    with pytest.raises(vg.InvalidArgumentError, match="format must be 'parquet' or 'arrow', got 'csv'"):
        snapshot.export(g, tmp_path / "x", format="csv")
    assert not (tmp_path / "x").exists()
    snapshot.export(g, tmp_path / "x")
    with pytest.raises(vg.InvalidArgumentError, match="exists; pass overwrite=True"):
        snapshot.export(g, tmp_path / "x")
    (tmp_path / "other").mkdir()
    (tmp_path / "other" / "keep.txt").write_text("user data")
    with pytest.raises(vg.InvalidArgumentError, match="not a vecgraph export"):
        snapshot.export(g, tmp_path / "other", overwrite=True)
    assert (tmp_path / "other" / "keep.txt").read_text() == "user data"
    with pytest.raises(vg.InvalidArgumentError, match="it is not a vecgraph export"):
        snapshot.restore(tmp_path / "other", tmp_path / "r")
    with pytest.raises(vg.InvalidArgumentError, match="exists; pass overwrite=True"):
        snapshot.restore(tmp_path / "x", tmp_path / "other")
    with pytest.raises(vg.InvalidArgumentError, match="not a vecgraph graph folder"):
        snapshot.restore(tmp_path / "x", tmp_path / "other", overwrite=True)
    data = bytearray((tmp_path / "x" / "nodes.parquet").read_bytes())
    data[len(data) // 2] ^= 1
    (tmp_path / "x" / "nodes.parquet").write_bytes(bytes(data))
    with pytest.raises(vg.CorruptionError, match="nodes.parquet fails its checksum"):
        snapshot.restore(tmp_path / "x", tmp_path / "r")
    assert not (tmp_path / "r").exists()
    with pytest.raises(vg.InvalidArgumentError, match="needs a vecgraph.Graph, got str"):
        snapshot.export("not a graph", tmp_path / "y")
    with pytest.raises(vg.InvalidArgumentError, match=r"format must be 'parquet' or 'arrow', got \['parquet'\]"):
        snapshot.export(g, tmp_path / "y", format=["parquet"])
    with pytest.raises(TypeError, match="overwrite must be True or False, got str"):
        snapshot.export(g, tmp_path / "x", overwrite="no")
    with pytest.raises(TypeError, match="overwrite must be True or False, got str"):
        snapshot.restore(tmp_path / "x", tmp_path / "other", overwrite="yes")
    (tmp_path / "afile").write_text("user data")
    with pytest.raises(vg.InvalidArgumentError, match="is a file, not a vecgraph export"):
        snapshot.export(g, tmp_path / "afile", overwrite=True)
    with pytest.raises(vg.InvalidArgumentError, match="is a file, not a vecgraph graph folder"):
        snapshot.restore(tmp_path / "x", tmp_path / "afile", overwrite=True)
    assert (tmp_path / "afile").read_text() == "user data"
    assert not (tmp_path / "y").exists()


def test_restore_over_an_open_graph_is_refused(tmp_path):
    g = vg.Graph(dim=4)
    g.add_nodes(["a"], np.ones((1, 4)))
    snapshot.export(g, tmp_path / "x")
    live = vg.Graph.open(tmp_path / "live", dim=4)
    with pytest.raises(vg.StorageError, match="already open"):
        snapshot.restore(tmp_path / "x", tmp_path / "live", overwrite=True)
    live.add_nodes(["still"], np.ones((1, 4)))  # untouched
    live.close()


def test_a_failed_restore_leaves_the_target_as_it_was(tmp_path):
    export = vg.Graph(dim=4)
    export.add_nodes(["new"], np.eye(1, 4))
    snapshot.export(export, tmp_path / "x")
    with vg.Graph.open(tmp_path / "keep", dim=4) as g:
        g.add_nodes(["precious"], np.ones((1, 4)))
    before = sorted(p.name for p in (tmp_path / "keep").rglob("*"))
    # Bad open arguments are only seen when the new folder opens: the old graph must survive.
    with pytest.raises(vg.InvalidArgumentError, match="sync must be"):
        snapshot.restore(tmp_path / "x", tmp_path / "keep", overwrite=True, sync="sometimes")
    with pytest.raises(TypeError, match="no_such_option"):
        snapshot.restore(tmp_path / "x", tmp_path / "keep", overwrite=True, no_such_option=1)
    assert sorted(p.name for p in (tmp_path / "keep").rglob("*")) == before
    with vg.Graph.open(tmp_path / "keep") as g:
        assert g.search(np.ones(4), k=5, hops=0).keys == ["precious"]
    with pytest.raises(TypeError, match="no_such_option"):
        snapshot.restore(tmp_path / "x", tmp_path / "fresh", no_such_option=1)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep", "x"]  # nothing built is left
    # The check that no process has the target open changes nothing either: a graph folder
    # without a LOCK file (or an empty folder) gains none, a LOCK keeps its contents.
    (tmp_path / "keep" / "LOCK").unlink()
    (tmp_path / "empty").mkdir()
    for target in ("keep", "empty"):
        before = {p: p.read_bytes() for p in (tmp_path / target).rglob("*") if p.is_file()}
        with pytest.raises(vg.InvalidArgumentError, match="sync must be"):
            snapshot.restore(tmp_path / "x", tmp_path / target, overwrite=True, sync="sometimes")
        assert {p: p.read_bytes() for p in (tmp_path / target).rglob("*") if p.is_file()} == before
    (tmp_path / "empty").rmdir()
    with pytest.raises(vg.InvalidArgumentError, match="sync must be"):  # parents made for it go too
        snapshot.restore(tmp_path / "x", tmp_path / "new" / "deeper" / "r.vg", sync="sometimes")
    assert not (tmp_path / "new").exists()
    with snapshot.restore(tmp_path / "x", tmp_path / "keep", overwrite=True) as g:
        assert g.search(np.ones(4), k=5, hops=0).keys == ["new"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["keep", "x"]


# ------------------------------------------------------------------------------ deferred indexing


def test_deferred_indexing_indexes_once_at_the_end(tmp_path):
    rng = np.random.default_rng(5)
    vectors = rng.normal(size=(500, 8))
    g = vg.Graph.open(tmp_path / "g", dim=8, sync="off")
    with g.deferred_indexing():
        g.add_nodes(list(range(500)), vectors)
        assert g._engine.count_deferred() == 500
        assert g.search(vectors[7], k=1, hops=0).keys == []  # not an HNSW seed yet
        assert g.search(vectors[7], k=1, hops=0, exact=True).keys == [7]
        g.upsert_nodes([8], vectors[9:10])
        g.delete_nodes([9])
        with g.deferred_indexing():  # nested: joins the outer block
            g.add_nodes([600], vectors[:1])
        assert g._engine.indexing_deferred()
    assert not g._engine.indexing_deferred() and g._engine.count_deferred() == 0
    assert g.verify() == []
    # HNSW is approximate: nearly every node finds itself (all 500 are indexed, verify says).
    assert sum(g.search(vectors[i], k=1, hops=0, ef=500).keys == [i] for i in range(500) if i not in (8, 9)) >= 490
    assert 9 not in g.search(vectors[9], k=5, hops=0).keys
    g.close()
    # A crash inside the block loses nothing: the WAL holds the nodes, and recovery indexes them.
    g = vg.Graph.open(tmp_path / "g")
    assert len(g) == 500 and g.verify() == []
    assert sum(g.search(vectors[i], k=1, hops=0, ef=500).keys == [i] for i in range(500) if i not in (8, 9)) >= 490
    g.close()


# ------------------------------------------------------------------------------ golden snapshot


def golden_graph(g: vg.Graph) -> None:
    """The writes that made tests/data/snapshot/v1 (checkpointed after them, then one WAL write)."""
    rng = np.random.default_rng(2024)
    keys = [f"node-{i}" for i in range(30)] + [7, -1, "café", "最近公共祖先", "\U0001f600"]
    g.add_nodes(keys, rng.normal(size=(len(keys), 8)),
                labels=[["", "person", "org"][i % 3] for i in range(len(keys))],
                tenants=[["t1", "t2"][i % 2] for i in range(len(keys))],
                ts=np.arange(len(keys), dtype=np.int64) * 1_000_000,
                texts=[f"text of {k}" for k in keys],
                props=[{"i": i} if i % 2 else None for i in range(len(keys))])
    g.add_edges(keys[:-1], keys[1:], rels=[["knows", "cites"][i % 2] for i in range(len(keys) - 1)],
                weights=np.linspace(0.1, 1.0, len(keys) - 1, dtype=np.float32))
    g.add_edges(keys[:5], keys[10:15], rels="vec", vectors=rng.normal(size=(5, 8)), texts=["with vector"] * 5)


def make_golden(folder: str) -> None:  # run by hand to write a new version's golden folder
    g = vg.Graph.open(folder, dim=8, metric="cos", sync="always")
    golden_graph(g)
    g.checkpoint()
    g.add_nodes(["after-checkpoint"], np.ones((1, 8)), texts=["in the WAL only"])
    g.close()
    os.unlink(os.path.join(folder, storage.LOCK))


def test_golden_snapshot_still_loads(tmp_path):
    folder = tmp_path / "golden"
    shutil.copytree(GOLDEN, folder)
    g = vg.Graph.open(folder)
    assert g._recovery["hnsw"] == "loaded" and g._recovery["replayed"] == 1
    assert len(g) == 36 and g.count_edges == 39
    assert g.get_node("最近公共祖先")["text"] == "text of 最近公共祖先"
    assert g.get_node(-1)["props"] == {"i": 31} and g.get_node(7)["props"] is None and g.get_node("after-checkpoint")["text"] == "in the WAL only"
    assert [(e.rel, e.dst) for e in g.neighbors("node-0")] == [("vec", "node-10"), ("knows", "node-1")]
    assert g.verify() == []
    # The same writes today give the same graph, bit for bit.
    fresh = vg.Graph(dim=8, metric="cos")
    golden_graph(fresh)
    fresh.add_nodes(["after-checkpoint"], np.ones((1, 8)), texts=["in the WAL only"])
    assert canonical(g) == canonical(fresh)
    queries = np.random.default_rng(0).normal(size=(5, 8))
    assert results(g, queries) == results(fresh, queries)
    g.close()


def test_verify_reports_a_damaged_wal_tail_without_changing_the_folder(tmp_path):
    folder = tmp_path / "g"
    g = vg.Graph.open(folder, dim=4, sync="always")
    g.add_nodes(["base"], np.ones((1, 4)))
    g.checkpoint()
    for i in range(3):
        g.add_nodes([f"r{i}"], np.random.default_rng(i).random((1, 4)))
    g.close()
    segment = sorted((folder / "wal").iterdir())[-1]
    data = bytearray(segment.read_bytes())
    data[len(data) - 20] ^= 0x01  # inside the last record
    segment.write_bytes(bytes(data))
    problems = snapshot.verify(folder)
    assert len(problems) == 1 and "do not form a valid record" in problems[0]
    assert segment.read_bytes() == bytes(data)  # verify changed nothing
    with pytest.warns(RuntimeWarning, match="cut .* bytes at the end of the WAL"):
        g = vg.Graph.open(folder)
    assert len(g) == 3 and "r2" not in g
    g.close()
    assert snapshot.verify(folder) == []


def test_verify_reports_a_wal_that_no_longer_reaches_the_previous_generation(tmp_path):
    folder = tmp_path / "g"
    _two_generations(folder)
    assert snapshot.verify(folder) == []
    first = sorted((folder / "wal").iterdir())[0]
    first.unlink()
    problems = snapshot.verify(folder)
    assert any("falling back to that snapshot would lose writes" in p for p in problems)


def test_restore_checks_the_description_against_the_files_and_warns_on_a_damaged_hnsw(tmp_path):
    g = vg.Graph(dim=4)
    g.add_nodes(["a", "b"], np.eye(4)[:2], props=[{"x": 1}, None])
    snapshot.export(g, tmp_path / "x")
    nodes = pq.read_table(tmp_path / "x" / "nodes.parquet")
    assert nodes.column("props").to_pylist() == ['{"x": 1}', None]  # no props: null, not ""
    described = json.loads((tmp_path / "x" / "vecgraph.json").read_text())
    hnsw = tmp_path / "x" / "hnsw.usearch"
    hnsw.write_bytes(hnsw.read_bytes()[:-8])
    with pytest.warns(RuntimeWarning, match="hnsw.usearch is missing or fails its checksum"):
        restored = snapshot.restore(tmp_path / "x", tmp_path / "r")
    assert restored.get_node("a")["props"] == {"x": 1} and restored.get_node("b")["props"] is None
    restored.close()
    described["metric"] = "ip"
    (tmp_path / "x" / "vecgraph.json").write_text(json.dumps(described))
    with pytest.raises(vg.CorruptionError, match="says metric 'ip', the schema metadata of nodes.parquet says 'cos'"):
        snapshot.restore(tmp_path / "x", tmp_path / "r2")
    assert not (tmp_path / "r2").exists()
