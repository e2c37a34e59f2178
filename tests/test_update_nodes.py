"""update_nodes changes only the columns it is given, and an upsert without tenants keeps each
node's tenant: checked column by column, against a slow model of every node's fields through
random writes, through a WAL replay, and through the BM25 index's tenant filter."""
import random

import numpy as np
import pytest

import vecgraph as vg

DIM = 8


def _vectors(rng, n):
    return rng.standard_normal((n, DIM)).astype(np.float32)


def _fields(g, key):
    node = g.get_node(key, vector=False)
    return {name: node[name] for name in ("label", "tenant", "ts", "text", "props", "aliases")}


@pytest.fixture
def g():
    rng = np.random.default_rng(7)
    graph = vg.Graph(dim=DIM)
    graph.add_nodes(["alice", "bob", "carol"], _vectors(rng, 3), labels="person", tenants=["user-1", "user-1", "user-2"],
                    texts=["Alice, engineer", "Bob, sales", "Carol, design"], ts=[10, 20, 30],
                    props=[{"level": 3}, None, {"team": "ux"}])
    graph.add_edges(["alice"], ["bob"], rels="knows")
    graph.add_aliases("alice", ["Ally"])
    return graph


def test_an_upsert_of_only_a_vector_keeps_the_tenant_for_filters_and_delete_tenant(g):
    g.upsert_nodes(["alice"], np.ones((1, DIM), np.float32))
    assert _fields(g, "alice") == {"label": "", "tenant": "user-1", "ts": 0, "text": "", "props": None,
                                   "aliases": ["Ally"]}
    hits = g.search(np.ones(DIM, np.float32), k=5, seeds=5, hops=0, tenants=["user-1"])
    assert "alice" in [h.key for h in hits]
    assert g.delete_tenant("user-1") == 2
    assert "alice" not in g


def test_an_upsert_with_tenants_moves_the_node_and_a_new_key_gets_the_default_tenant(g):
    g.upsert_nodes(["alice", "dave"], np.ones((2, DIM), np.float32), tenants=["user-9", "user-9"])
    assert g.get_node("alice", vector=False)["tenant"] == "user-9"
    g.upsert_nodes(["erin"], np.ones((1, DIM), np.float32))
    assert g.get_node("erin", vector=False)["tenant"] == ""


def test_update_changes_only_the_given_columns_and_keeps_the_vector_byte_for_byte(g):
    codes, scales = g.quantized(["bob"])
    g.update_nodes(["bob"], texts=["Bob, head of sales"])
    assert _fields(g, "bob") == {"label": "person", "tenant": "user-1", "ts": 20, "text": "Bob, head of sales",
                                 "props": None, "aliases": []}
    codes_after, scales_after = g.quantized(["bob"])
    assert np.array_equal(codes, codes_after) and np.array_equal(scales, scales_after)
    assert [(e.src, e.rel, e.dst) for e in g.neighbors("alice")] == [("alice", "knows", "bob")]
    g.update_nodes(["alice", "carol"], labels="staff", ts=[100, 200], props=[{"level": 4}, None])
    assert _fields(g, "alice") == {"label": "staff", "tenant": "user-1", "ts": 100, "text": "Alice, engineer",
                                   "props": {"level": 4}, "aliases": ["Ally"]}
    assert _fields(g, "carol") == {"label": "staff", "tenant": "user-2", "ts": 200, "text": "Carol, design",
                                   "props": None, "aliases": []}


def test_update_of_the_vector_moves_the_node_in_search(g):
    target = np.zeros((1, DIM), np.float32)
    target[0, 3] = 1.0
    g.update_nodes(["carol"], vectors=target)
    assert g.search(target[0], k=1, seeds=1, hops=0, exact=True)[0].key == "carol"
    assert g.search(target[0], k=1, seeds=1, hops=0)[0].key == "carol"  # the HNSW index too
    assert _fields(g, "carol")["text"] == "Carol, design"


def test_update_of_the_tenant_moves_the_node_in_every_tenant_filter(g):
    g.update_nodes(["carol"], tenants="user-1")
    q = g.get_node("carol")["vector"]
    assert "carol" in [h.key for h in g.search(q, k=5, seeds=5, hops=0, tenants=["user-1"])]
    assert len(g.search(q, k=5, seeds=5, hops=0, tenants=["user-2"])) == 0
    assert [h.key for h in g.hybrid_search("Carol design", k=5, tenants=["user-1"])] == ["carol"]
    assert [h.key for h in g.hybrid_search("Carol design", k=5, tenants=["user-2"])] == []


def test_a_rejected_update_changes_nothing(g):
    before = {key: _fields(g, key) for key in ("alice", "bob", "carol")}
    with pytest.raises(vg.NotFoundError, match=r"'zed' \(row 1\) is not in the graph"):
        g.update_nodes(["alice", "zed"], texts=["changed", "changed"])
    with pytest.raises(vg.DuplicateKeyError, match="appears twice"):
        g.update_nodes(["bob", "bob"], tenants="user-3")
    with pytest.raises(vg.DimensionMismatchError):
        g.update_nodes(["bob"], vectors=np.ones((1, DIM + 1), np.float32))
    with pytest.raises(ValueError, match="vectors has 2 rows, keys has 1"):
        g.update_nodes(["bob"], vectors=np.ones((2, DIM), np.float32))
    with pytest.raises(TypeError, match="texts must be a list"):
        g.update_nodes(["bob"], texts="one str")
    assert {key: _fields(g, key) for key in ("alice", "bob", "carol")} == before
    assert [h.key for h in g.hybrid_search("changed", k=5)] == []


def test_a_folder_graph_replays_updates_and_kept_tenants_to_the_same_nodes(tmp_path):
    rng = np.random.default_rng(3)
    path = tmp_path / "g.vg"
    with vg.Graph.open(path, dim=DIM) as g:
        g.add_nodes(["a", "b"], _vectors(rng, 2), tenants=["t1", "t2"], texts=["apple pie", "banana bread"])
        g.update_nodes(["a"], texts=["apple crumble"], labels="dessert")
        g.upsert_nodes(["b"], _vectors(rng, 1))
        expected = {key: g.get_node(key) for key in ("a", "b")}
    with vg.Graph.open(path) as again:  # no checkpoint: every write comes back from the WAL
        for key, node in expected.items():
            got = again.get_node(key)
            assert np.array_equal(got.pop("vector"), node.pop("vector"))
            assert got == node
        assert expected["b"]["tenant"] == "t2"
        assert [h.key for h in again.hybrid_search("crumble", k=5, tenants=["t1"])] == ["a"]


def test_random_writes_agree_with_a_model_of_every_field():
    rng = np.random.default_rng(11)
    pick = random.Random(11)
    g = vg.Graph(dim=DIM)
    model: dict = {}
    columns = ("label", "tenant", "ts", "text", "props")
    for step in range(300):
        keys = pick.sample(range(40), pick.randint(1, 6))
        n = len(keys)
        given = {c: pick.random() < 0.5 for c in columns}
        values = {
            "label": [pick.choice(["", "x", "y"]) for _ in keys],
            "tenant": [pick.choice(["", "t1", "t2"]) for _ in keys],
            "ts": [pick.randint(0, 10**9) for _ in keys],
            "text": [pick.choice(["", "red fox", "blue whale"]) for _ in keys],
            "props": [pick.choice([None, {"n": step}]) for _ in keys],
        }
        kwargs = {{"label": "labels", "tenant": "tenants", "text": "texts"}.get(c, c): values[c]
                  for c in columns if given[c]}
        vectors = _vectors(rng, n)
        if step % 3 == 0 or any(k not in model for k in keys):
            g.upsert_nodes(keys, vectors, **kwargs)
            for i, k in enumerate(keys):
                old_tenant = model[k]["tenant"] if k in model else ""
                defaults = {"label": "", "tenant": old_tenant, "ts": 0, "text": "", "props": None}
                model[k] = {c: values[c][i] if given[c] else defaults[c] for c in columns}
        else:
            g.update_nodes(keys, vectors=vectors if step % 2 else None, **kwargs)
            for i, k in enumerate(keys):
                for c in columns:
                    if given[c]:
                        model[k][c] = values[c][i]
    for k, fields in model.items():
        node = g.get_node(k, vector=False)
        assert {c: node[c] for c in columns} == fields, k
    for tenant in ("", "t1", "t2"):
        keys = {k for k, f in model.items() if f["tenant"] == tenant}
        hits = g.search(np.ones(DIM, np.float32), k=100, seeds=100, hops=0, exact=True, tenants=[tenant])
        assert {h.key for h in hits} == keys
        text_keys = {k for k in keys if model[k]["text"] == "red fox"}
        found = {h.key for h in g.hybrid_search("fox", k=100, tenants=[tenant])}
        assert found == text_keys


def test_updates_that_keep_the_vectors_take_no_hnsw_memory_and_no_reinsert_after_a_reopen(tmp_path):
    rng = np.random.default_rng(5)
    g = vg.Graph(dim=DIM)
    keys = [f"k{i}" for i in range(10)]
    g.add_nodes(keys, _vectors(rng, 10))
    hnsw_bytes = g.stats()["hnsw_bytes"]
    for i in range(300):
        g.update_nodes(keys, ts=i)
    assert g.stats()["hnsw_bytes"] == hnsw_bytes
    # A folder graph: the update is logged as one that kept its vectors, so replaying it does
    # not insert the node into HNSW again, and the next checkpoint still saves the HNSW graph.
    path = tmp_path / "g.vg"
    with vg.Graph.open(path, dim=DIM) as f:
        f.add_nodes([f"n{i}" for i in range(300)], _vectors(rng, 300))
        f.checkpoint()
        f.update_nodes(["n1"], labels="changed")
    with vg.Graph.open(path) as f:
        assert f.get_node("n1", vector=False)["label"] == "changed"
        f.checkpoint()
        generation = f._manifest["generation"]
    assert (path / "snapshots" / f"{generation:08d}" / "hnsw.usearch").exists()
