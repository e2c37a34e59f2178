"""hybrid_search: the channels, their fusion (convex and weighted RRF), entity aliases, filters in every
channel, edges as results, to_context, and the BM25 index kept in step with the graph across
deletes, reopen and a crash between the graph's write and the index's."""

from __future__ import annotations

import numpy as np
import pytest

import vecgraph as vg
from vecgraph import snapshot


def unit(*values):
    v = np.array(values, dtype=np.float32)
    return v / np.linalg.norm(v)


def products() -> vg.Graph:
    """The A7-Pro / C9-Max price example: the query's vector is closest to the wrong documents."""
    g = vg.Graph(dim=4)
    g.add_nodes(
        ["c9-price", "faq", "a7-price", "blog"],
        [unit(1, 0.1, 0, 0), unit(1, 0.2, 0, 0), unit(1, 0.45, 0, 0), unit(0, 0, 1, 0)],
        texts=["The C9-Max costs 499 dollars.", "Prices of every model are listed here.",
               "The A7-Pro costs 299 dollars.", "Our team went hiking."],
    )
    return g


def test_bm25_finds_the_identifier_dense_search_ranks_third():
    g = products()
    query_vector = unit(1, 0.05, 0, 0)
    dense = g.search(query_vector, k=3, hops=0)
    assert dense.keys == ["c9-price", "faq", "a7-price"]  # the right document third
    # RRF, with the graph channel listing its seeds (as search() does: no edges, so only seeds).
    res = g.hybrid_search("A7-Pro 多少钱？", vector=query_vector, k=3, fusion="rrf", graph_seeds=True)
    assert res.keys[0] == "a7-price"
    assert res[0].ranks == {"dense": 3, "bm25": 1, "graph": 3, "entity": None}
    assert res.keys[1:] == ["c9-price", "faq"]  # 2 / 61 beats 2 / 62
    assert res.lists["bm25"][0] == "a7-price"
    # The fused score is the weighted RRF of those ranks, exactly.
    assert res[0].score == pytest.approx(1 / 63 + 1 / 61 + 1 / 63)
    weighted = g.hybrid_search("A7-Pro 多少钱？", vector=query_vector, k=3, weights={"bm25": 2.0}, fusion="rrf",
                               graph_seeds=True)
    assert weighted[0].score == pytest.approx(1 / 63 + 2 / 61 + 1 / 63)
    # The default: the graph channel lists what walks reach (nothing here: no edges), and the
    # convex fusion puts the BM25 match first: bm25 1.0 + dense 1.0 x its min-max score.
    default = g.hybrid_search("A7-Pro 多少钱？", vector=query_vector, k=3)
    assert default.lists["graph"] == [] and default.keys[0] == "a7-price"
    dense_scores = default.channel_scores["dense"]
    weight = vg.hybrid.DEFAULT_WEIGHTS["convex"]["dense"]
    expected = 1.0 + weight * (dense_scores[2] - dense_scores[-1]) / (dense_scores[0] - dense_scores[-1])
    assert default[0].score == pytest.approx(expected)
    # A channel of weight 0 is not run: no list, no rank, the same fusion as without it.
    muted = g.hybrid_search("A7-Pro 多少钱？", vector=query_vector, k=3, weights={"dense": 0, "graph": 0})
    assert muted.channels == ("bm25", "entity") and "dense" not in muted.lists
    assert muted[0].ranks == {"bm25": 1, "entity": None}
    alone = g.hybrid_search("A7-Pro 多少钱？", vector=query_vector, k=3, channels=["bm25", "entity"])
    assert [(h.key, h.score) for h in muted] == [(h.key, h.score) for h in alone]
    with pytest.raises(vg.InvalidArgumentError, match=r"every channel that can run \(dense, graph\) has weight 0"):
        g.hybrid_search(vector=query_vector, weights={"dense": 0, "graph": 0})


def team() -> vg.Graph:
    """People, projects and who leads what: the answer is two hops from the person named."""
    g = vg.Graph(dim=4)
    g.add_nodes(["ada", "bob", "orion", "vega"],
                [unit(1, 0, 0, 0), unit(0, 1, 0, 0), unit(0, 0, 1, 0), unit(0.3, 0, 0.9, 0.1)],
                labels=["person", "person", "project", "project"],
                texts=["Ada Lovelace, engineer", "Bob Byte, engineer", "Project Orion: a rocket engine",
                       "Project Vega: a star catalogue"])
    g.add_edges(["ada", "bob"], ["bob", "orion"], rels=["colleague_of", "leads"],
                texts=["Ada and Bob share an office", "Bob leads Orion since 2021"])
    g.add_aliases("ada", ["Ada Lovelace", "Countess of Lovelace"])
    return g


def test_a_two_hop_question_is_answered_by_the_graph_channel():
    g = team()
    # Distractors: close to the question's vector, linked to nothing.
    g.add_nodes([f"note-{i}" for i in range(10)], [unit(1, 0.05 * (i + 1), 0, 0) for i in range(10)],
                texts=[f"meeting note {i}" for i in range(10)])
    question, vector = "The colleague of Ada Lovelace leads which project?", unit(1, 0, 0, 0)
    dense = g.hybrid_search(question, vector=vector, k=5, channels=["dense"])
    assert "orion" not in dense.keys
    graph = g.hybrid_search(question, vector=vector, k=5, channels=["graph"], seeds=2, hops=2)
    assert "orion" in graph.keys
    # A link-hop question: the answer is only linked to what the question names, so the graph
    # channel needs a weight above its default (0.25) for its two-hop score (0.5) to lead.
    both = g.hybrid_search(question, vector=vector, k=5, seeds=2, hops=2, weights={"graph": 3.0})
    assert "orion" in both.keys and both.lists["entity"] == ["ada"]
    orion = next(h for h in both if h.key == "orion")
    assert orion.ranks["dense"] > 5 and orion.ranks["graph"] <= 5
    assert [(e.src, e.rel, e.dst) for e in orion.path] == [("ada", "colleague_of", "bob"), ("bob", "leads", "orion")]
    # The edges walked carry text: they come back scored by the share of query terms they hold.
    scored = {(e.src, e.dst): e for e in both.edges}
    assert set(scored) == {("ada", "bob"), ("bob", "orion")}
    terms = len(set(vg.text.tokenize(question)))
    assert scored[("bob", "orion")].text_score == pytest.approx(1 / terms)  # "leads"
    assert scored[("ada", "bob")].vector_score is None


def test_entity_names_with_punctuation_symbols_or_many_tokens_match():
    """Names that begin or end in punctuation match the text without it; C++ and C# are not C;
    a Chinese name of 15 characters (15 tokens) matches inside a sentence; a name of only
    symbols never matches."""
    g = vg.Graph(dim=4)
    keys = ["usa", "cpp", "acme", "yahoo", "csharp", "c", "cn", "dc", "pizza"]
    g.add_nodes(keys, np.ones((len(keys), 4)))
    for key, alias in [("usa", "U.S.A."), ("cpp", "C++"), ("acme", "Acme Inc."), ("yahoo", "Yahoo!"),
                       ("csharp", "C#"), ("cn", "中华人民共和国国务院新闻办公室"), ("dc", "Washington D.C."),
                       ("pizza", "🍕")]:
        g.add_aliases(key, [alias])

    def entity(text):
        return g.hybrid_search(text, channels=["entity"]).keys

    assert entity("made in the U.S.A.") == ["usa"]
    assert entity("I write C++ code") == ["cpp"]
    assert entity("Acme Inc. reported") == ["acme"]
    assert entity("Yahoo! mail") == ["yahoo"]
    assert entity("C# and C") == ["csharp", "c"]
    assert entity("plain C here") == ["c"]
    assert entity("今天中华人民共和国国务院新闻办公室举行发布会") == ["cn"]
    assert entity("Washington D.C. is") == ["dc"]
    assert entity("🍕 tonight") == []


def test_entity_aliases_are_normalised_and_persist(tmp_path):
    g = vg.Graph.open(tmp_path / "g", dim=4)
    g.add_nodes(["wn:lca", "other"], [unit(1, 0, 0, 0), unit(0, 1, 0, 0)], texts=["lowest common ancestor", ""])
    assert g.add_aliases("wn:lca", ["LCA", "Lowest  Common Ancestor", "最近公共祖先"]) == [
        "LCA", "Lowest Common Ancestor", "最近公共祖先"]
    assert g.add_aliases("wn:lca", ["lca", "ＬＣＡ"]) == ["LCA", "Lowest Common Ancestor", "最近公共祖先", "ＬＣＡ"]
    for question in ("what is an lca?", "什么是最近公共祖先？", "lowest common ancestor of two nodes"):
        assert g.hybrid_search(question, k=1, channels=["entity"]).keys == ["wn:lca"]
    g.add_aliases("other", ["in", "The"])  # stopwords: stored, never matched
    assert g.aliases("other") == ["in", "The"]
    assert g.hybrid_search("what is in the box", k=2, channels=["entity"]).keys == []
    g.checkpoint()
    g.add_aliases("other", ["the other one"])  # in the WAL only
    g.close()
    g = vg.Graph.open(tmp_path / "g")
    assert g.aliases("wn:lca")[:2] == ["LCA", "Lowest Common Ancestor"]
    assert g.aliases("other") == ["in", "The", "the other one"]
    assert g.hybrid_search("tell me about the other one", k=1, channels=["entity"]).keys == ["other"]
    snapshot.export(g, tmp_path / "out")
    g.close()
    restored = snapshot.restore(tmp_path / "out", tmp_path / "r")
    assert restored.aliases("other") == ["in", "The", "the other one"]
    assert restored.hybrid_search("LCA?", k=1, channels=["entity"]).keys == ["wn:lca"]
    restored.close()
    with pytest.raises(vg.NotFoundError):
        vg.Graph(dim=2).add_aliases("nobody", ["x"])
    with pytest.raises(TypeError, match="aliases must be a list of str"):
        vg.Graph(dim=2).add_aliases("x", "LCA")


def test_a_filter_admitting_3_of_100000_works_in_every_channel():
    rng = np.random.default_rng(7)
    n = 100_000
    g = vg.Graph(dim=8, filterable={"status": "str"})
    texts = [f"document {i} about topic {i % 97}" for i in range(n)]
    props = [{"status": "current"}] * n
    rare = [17, 50_001, 99_990]
    for i in rare:
        props[i] = {"status": "rare"}
        texts[i] = f"rare document {i} about topic 5"
    keys = [f"doc-{i}" for i in range(n)]
    g.add_nodes(keys, rng.normal(size=(n, 8)), texts=texts, props=props, tenants=["t"] * n)
    q = rng.normal(size=8)
    expected = sorted(keys[i] for i in rare)
    for channel in ("dense", "bm25", "graph"):
        res = g.hybrid_search("document about topic 5", vector=q, k=10, channels=[channel], where={"status": "rare"},
                              graph_seeds=True)
        assert sorted(res.keys) == expected, channel
    # Without its seeds the graph channel lists what walks reach: nothing, the graph has no edges.
    assert g.hybrid_search("document about topic 5", vector=q, k=10, channels=["graph"],
                           where={"status": "rare"}).keys == []
    res = g.hybrid_search("doc-17 and doc-50001 and doc-99990 and doc-5", k=10, channels=["entity"],
                          where={"status": "rare"})
    assert sorted(res.keys) == expected
    assert g.hybrid_search("document", vector=q, k=10, tenants=["nobody"]).keys == []


def test_bm25_with_where_and_tenants_and_labels_together():
    """The BM25 channel applies tenants, labels and the time window inside its search and the
    where conditions per candidate: every combination returns exactly the admitted matches."""
    rng = np.random.default_rng(8)
    n = 3000
    g = vg.Graph(dim=4, filterable={"topic": "str"})
    tenants = [f"u{i % 300}" for i in range(n)]
    labels = ["note" if i % 3 else "fact" for i in range(n)]
    topics = ["rare" if i % 7 == 0 else "common" for i in range(n)]
    g.add_nodes(list(range(n)), rng.normal(size=(n, 4)), texts=["alpha beta"] * n, tenants=tenants, labels=labels,
                props=[{"topic": t} for t in topics], ts=list(range(n)))
    for trial in range(20):
        listed = [f"u{i}" for i in rng.choice(300, size=int(rng.integers(1, 250)), replace=False)]
        use_labels = trial % 2 == 0
        since = int(rng.integers(0, n // 2))
        want = sorted(i for i in range(n) if tenants[i] in listed and topics[i] == "rare" and i >= since
                      and (not use_labels or labels[i] == "fact"))
        res = g.hybrid_search("alpha", k=n, channels=["bm25"], tenants=listed, where={"topic": "rare"},
                              labels=["fact"] if use_labels else None, since=since)
        assert sorted(res.keys) == want, trial


def test_deleted_nodes_never_match_and_the_index_follows_writes():
    g = products()
    assert "a7-price" in g.hybrid_search("A7-Pro", k=3, channels=["bm25"]).keys
    g.delete_nodes(["a7-price"])
    assert g.hybrid_search("A7-Pro", k=3, channels=["bm25"]).keys == []
    g.upsert_nodes(["blog"], [unit(0, 0, 1, 0)], texts=["Now about the A7-Pro"])
    assert g.hybrid_search("A7-Pro", k=3, channels=["bm25"]).keys == ["blog"]
    g.add_nodes(["a7-price"], [unit(1, 0, 0, 0)], texts=["A7-Pro again"], tenants=["t2"])
    assert sorted(g.hybrid_search("A7-Pro", k=3, channels=["bm25"]).keys) == ["a7-price", "blog"]
    g.delete_tenant("t2")
    assert g.hybrid_search("A7-Pro", k=3, channels=["bm25"]).keys == ["blog"]


def test_the_text_index_catches_up_after_a_crash_between_graph_and_index(tmp_path):
    g = vg.Graph.open(tmp_path / "g", dim=4)
    g.add_nodes(["x"], [unit(1, 0, 0, 0)], texts=["alpha bravo"])

    def crash(*args, **kwargs):
        raise KeyboardInterrupt  # the process dies after the graph's write, before the index's

    g._text.upsert = crash
    with pytest.raises(KeyboardInterrupt):
        g.add_nodes(["y"], [unit(0, 1, 0, 0)], texts=["charlie delta"])
    g.close()
    g = vg.Graph.open(tmp_path / "g")
    assert g.hybrid_search("charlie", k=2, channels=["bm25"]).keys == ["y"]
    assert g.hybrid_search("alpha", k=2, channels=["bm25"]).keys == ["x"]
    g.close()
    # A damaged index is rebuilt too, and an index file of the earlier layout is removed.
    (tmp_path / "g" / "text" / "meta.json").write_bytes(b"not json" * 100)
    (tmp_path / "g" / "text.sqlite").write_bytes(b"an index of layout 1")
    with pytest.warns(RuntimeWarning, match="rebuilt from the graph"):
        g = vg.Graph.open(tmp_path / "g")
    assert g.hybrid_search("charlie", k=2, channels=["bm25"]).keys == ["y"]
    assert not (tmp_path / "g" / "text.sqlite").exists()
    g.close()
    # After close, searches keep working (the index is rebuilt in memory).
    assert g.hybrid_search("alpha", k=2, channels=["bm25"]).keys == ["x"]


def test_a_text_index_out_of_memory_keeps_the_graph_write_and_rebuilds_the_index(tmp_path):
    g = vg.Graph.open(tmp_path / "g", dim=4)
    g.add_nodes(["x"], [unit(1, 0, 0, 0)], texts=["alpha bravo"])
    assert g.hybrid_search("alpha", k=2, channels=["bm25"]).keys == ["x"]  # the index exists

    def out_of_memory(*args, **kwargs):
        raise MemoryError

    g._text.upsert = out_of_memory
    with pytest.warns(RuntimeWarning, match=r"a write to the BM25 index failed \(MemoryError\)"):
        g.add_nodes(["y"], [unit(0, 1, 0, 0)], texts=["charlie delta"])  # the graph's write stands
    assert "y" in g and g.get_node("y")["text"] == "charlie delta"
    assert g.hybrid_search("charlie", k=2, channels=["bm25"]).keys == ["y"]  # rebuilt from the graph
    assert g.hybrid_search("alpha", k=2, channels=["bm25"]).keys == ["x"]
    g.close()


def test_an_entity_index_out_of_memory_keeps_the_graph_write_and_rebuilds_the_index():
    g = vg.Graph(dim=4)
    g.add_nodes(["orion"], [unit(1, 0, 0, 0)])
    assert g.hybrid_search("tell me about orion", k=2, channels=["entity"]).keys == ["orion"]  # the index exists

    def out_of_memory(*args, **kwargs):
        raise MemoryError

    g._entities.add_keys = out_of_memory
    with pytest.warns(RuntimeWarning, match="the entity index ran out of memory during a write"):
        g.add_nodes(["vega"], [unit(0, 1, 0, 0)])  # the graph's write stands
    assert "vega" in g and g._entities is None
    assert sorted(g.hybrid_search("is vega near orion", k=2, channels=["entity"]).keys) == ["orion", "vega"]  # rebuilt

    g._entities.add = out_of_memory
    with pytest.warns(RuntimeWarning, match="the entity index ran out of memory during a write"):
        g.add_aliases("vega", ["alpha lyrae"])
    assert g.aliases("vega") == ["alpha lyrae"]
    assert g.hybrid_search("alpha lyrae", k=2, channels=["entity"]).keys == ["vega"]

    g._entities.forget = out_of_memory
    with pytest.warns(RuntimeWarning, match="the entity index ran out of memory during a write"):
        assert g.delete_nodes(["orion"]) == 1
    assert "orion" not in g
    assert g.hybrid_search("is vega near orion", k=2, channels=["entity"]).keys == ["vega"]


def test_bad_input_and_edge_cases():
    g = products()
    with pytest.raises(vg.InvalidArgumentError, match="needs text, a vector, or both"):
        g.hybrid_search("", k=3)
    with pytest.raises(vg.InvalidArgumentError, match="unknown channel 'sparse'"):
        g.hybrid_search("x", channels=["bm25", "sparse"])
    with pytest.raises(vg.InvalidArgumentError, match=r"weights\['graph'\] must be a finite number >= 0"):
        g.hybrid_search("x", weights={"graph": -1})
    with pytest.raises(vg.InvalidArgumentError, match="weights names unknown channel"):
        g.hybrid_search("x", weights={"keyword": 1})
    with pytest.raises(vg.InvalidArgumentError, match="not a filterable property; declared: none"):
        g.hybrid_search("x", where={"status": "current"})
    text_only = g.hybrid_search("C9-Max", k=2)
    assert text_only.channels == ("bm25", "entity") and text_only.keys == ["c9-price"]
    vector_only = g.hybrid_search(vector=unit(0, 0, 1, 0), k=1)
    assert vector_only.channels == ("dense", "graph") and vector_only.keys == ["blog"]
    nothing = g.hybrid_search("zzz qqq", k=3, channels=["bm25", "entity"])
    assert nothing.keys == [] and nothing.edges == [] and nothing.to_context() == ""
    empty = vg.Graph(dim=4).hybrid_search("anything", vector=unit(1, 0, 0, 0))
    assert empty.keys == []


def test_to_context_keeps_the_budget_and_tags_every_line():
    g = team()
    res = g.hybrid_search("Who leads Orion?", vector=unit(0, 0, 1, 0), k=4)
    full = res.to_context(max_tokens=10_000)
    lines = full.splitlines()
    assert lines[0].startswith(f"[{res.keys[0]}]")
    assert "[bob --leads--> orion] Bob leads Orion since 2021" in lines
    assert all(line.startswith("[") for line in lines)
    small = res.to_context(max_tokens=12)
    assert 0 < len(small) < len(full)
    assert sum(vg.hybrid.estimate_tokens(line) + 1 for line in small.splitlines()) - 1 <= 12
    assert res.to_context(max_tokens=10_000, count_tokens=lambda s: 1).count("\n") == len(lines) - 1
    with pytest.raises(vg.InvalidArgumentError, match="max_tokens must be an int >= 1"):
        res.to_context(max_tokens=0)
    with pytest.raises(TypeError, match="max_tokens must be an int >= 1, got str '5'"):
        res.to_context(max_tokens="5")


def test_the_command_runs_hybrid_queries(tmp_path):
    import json
    import os
    import subprocess
    import sys

    g = vg.Graph.open(tmp_path / "g", dim=4)
    g.add_nodes(["a7-price", "c9-price"], [unit(1, 0, 0, 0), unit(0, 1, 0, 0)],
                texts=["The A7-Pro costs 299 dollars.", "The C9-Max costs 499 dollars."])
    g.close()
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [os.path.dirname(os.path.dirname(vg.__file__)),
                                                                   os.environ.get("PYTHONPATH")])))
    run = subprocess.run([sys.executable, "-m", "vecgraph", "query", str(tmp_path / "g"), "A7-Pro price?", "--hybrid",
                          "--json"], capture_output=True, text=True, env=env)
    assert run.returncode == 0, run.stderr
    hits = json.loads(run.stdout)
    assert hits[0]["key"] == "a7-price" and hits[0]["ranks"] == {"bm25": 1, "entity": None}
    assert hits[0]["text"] == "The A7-Pro costs 299 dollars."
    table = subprocess.run([sys.executable, "-m", "vecgraph", "query", str(tmp_path / "g"), "A7-Pro", "--hybrid"],
                           capture_output=True, text=True, env=env)
    assert table.returncode == 0 and "a7-price" in table.stdout.splitlines()[1] and "b1 e-" in table.stdout
    bad = subprocess.run([sys.executable, "-m", "vecgraph", "query", str(tmp_path / "g"), "--vector", "x.npy",
                          "--hybrid"], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and "--hybrid needs TEXT" in bad.stderr
    # --vector beside TEXT gives the dense (and graph) channels a query without an embedder.
    import numpy as np

    np.save(tmp_path / "q.npy", np.array(unit(0, 1, 0, 0), np.float32))
    both = subprocess.run([sys.executable, "-m", "vecgraph", "query", str(tmp_path / "g"), "A7-Pro price?", "--hybrid",
                           "--vector", str(tmp_path / "q.npy"), "--json"], capture_output=True, text=True, env=env)
    assert both.returncode == 0, both.stderr
    ranks = {hit["key"]: hit["ranks"] for hit in json.loads(both.stdout)}
    assert ranks["a7-price"]["bm25"] == 1 and ranks["c9-price"]["dense"] == 1 and ranks["a7-price"]["dense"] == 2
    np.save(tmp_path / "two.npy", np.ones((2, 4), np.float32))
    two = subprocess.run([sys.executable, "-m", "vecgraph", "query", str(tmp_path / "g"), "A7-Pro", "--hybrid",
                          "--vector", str(tmp_path / "two.npy")], capture_output=True, text=True, env=env)
    assert two.returncode == 2 and "with --hybrid, expected one query vector" in two.stderr \
        and "holding 2 rows" in two.stderr


def test_deleted_names_and_strict_inputs():
    g = vg.Graph(dim=4, filterable={"year": int})
    v = np.ones((1, 4), np.float32)
    g.add_nodes(["a"], v, texts=["alpha"], props=[{"year": 2000}])
    g.add_aliases("a", ["Lowest Common Ancestor"])
    assert g.hybrid_search("lowest common ancestor", channels=["entity"]).keys == ["a"]
    g.delete_nodes(["a"])
    g.add_nodes(["a"], v, texts=["beta"])  # the same key, a new node without the old aliases
    assert g.hybrid_search("lowest common ancestor", channels=["entity"]).keys == []
    res = g.hybrid_search("beta", vector=v[0], k=2)
    for bad in (lambda s: -1, lambda s: 0.5, lambda s: None):
        with pytest.raises(vg.InvalidArgumentError, match="count_tokens must return an int >= 0"):
            res.to_context(5, count_tokens=bad)
    lsn = g.stats()["last_lsn"]
    with pytest.raises(vg.InvalidArgumentError, match=r"where\['year'\]\['=='\] must fit int64"):
        g.search(v[0], where={"year": 2**70})
    with pytest.raises(vg.InvalidArgumentError, match="must not hold U\\+001F"):
        g.add_aliases("a", ["a\x1fb"])
    with pytest.raises(vg.InvalidArgumentError, match=r"aliases\[1\] must be a non-empty name"):
        g.add_aliases("a", (name for name in ["ok", " "]))
    assert g.aliases("a") == [] and g.stats()["last_lsn"] == lsn
    assert g.hybrid_search("beta", k=1, weights={"bm25": np.float32(2)}).keys == ["a"]
    for kwargs, message in (({"k": 2**62}, "k must be in"), ({"rrf_k": float("inf")}, "rrf_k must be finite"),
                            ({"channels": ["dense"]}, "none of the channels"), ({"seeds": 0}, "seeds must be >= 1"),
                            ({"since": 10, "until": 5}, "the time window is empty"),
                            ({"weights": [1, 2]}, "weights must be a dict")):
        with pytest.raises(vg.InvalidArgumentError, match=message):
            g.hybrid_search("beta", **kwargs)
    with pytest.raises(TypeError, match="mixes"):
        vg.rrf([[("a", 1.0), "bc"]])


@pytest.mark.parametrize("spell", [int, np.int64, np.uint8, "enum"])
def test_an_int_key_spelled_as_any_integer_type_is_one_node_to_the_entity_channel(spell):
    import enum

    One = enum.IntEnum("One", {"ONE": 1})
    as_given = (lambda k: One(k)) if spell == "enum" else spell
    g = vg.Graph(dim=4)
    g.add_nodes([1, 2], np.eye(2, 4, dtype=np.float32) + 0.1)
    g.hybrid_search("warm up", channels=["entity"])  # the entity index exists before the writes below
    g.add_aliases(as_given(1), ["Acme Corporation"])
    hits = g.hybrid_search("news about Acme Corporation", channels=["entity"]).keys
    assert hits == [1] and type(hits[0]) is int  # the key as the graph returns it, not as it was given
    assert g.delete_nodes([as_given(1)]) == 1
    g.add_nodes([1], np.eye(1, 4, 2, dtype=np.float32) + 0.1)  # a new node under the same key
    assert g.aliases(1) == []
    assert g.hybrid_search("news about Acme Corporation", channels=["entity"]).keys == []


def test_a_failing_text_index_never_undoes_a_graph_write_and_is_rebuilt(tmp_path):
    g = vg.Graph.open(tmp_path / "g", dim=4)
    g.add_nodes(["x"], [unit(1, 0, 0, 0)], texts=["alpha bravo"])
    assert g.hybrid_search("alpha", k=2, channels=["bm25"]).keys == ["x"]

    def full_disk(*args, **kwargs):
        raise vg.errors.StorageError("No space left on device")

    g._text.upsert = full_disk
    with pytest.warns(RuntimeWarning, match="a write to the BM25 index failed"):
        g.add_nodes(["y"], [unit(0, 1, 0, 0)], texts=["charlie delta"])
    assert g.get_node("y")["text"] == "charlie delta"  # the graph's write stands
    assert g.hybrid_search("charlie", k=2, channels=["bm25"]).keys == ["y"]  # index rebuilt
    index = g._text

    def damaged(*args, **kwargs):
        raise vg.CorruptionError("text index: search failed inside tantivy")

    index.search = damaged
    with pytest.warns(RuntimeWarning, match="the BM25 index is damaged"):
        assert g.hybrid_search("alpha", k=2, channels=["bm25"]).keys == ["x"]
    assert g._text is not index
    g.close()


def test_text_searches_do_not_wait_for_a_writer():
    import threading

    g = products()
    g.hybrid_search("A7-Pro", k=1, channels=["bm25", "entity"])  # both indexes built
    found: dict = {}
    with g._text_lock:  # held here as by a writer inside its fsync
        search = threading.Thread(target=lambda: found.update(
            keys=g.hybrid_search("A7-Pro", k=1, channels=["bm25", "entity"]).keys))
        search.start()
        search.join(20)
        finished = not search.is_alive()
    search.join()
    assert finished, "the text search waited for the writer's lock"
    assert found["keys"] == ["a7-price"]


def test_bm25_under_where_by_key_list_and_by_candidate_checks_matches_the_reference():
    """A where admitting few nodes goes into the BM25 search as their key list, one admitting
    many is checked on the ranked candidates: both give the unfiltered BM25 ranking restricted
    to the admitted nodes (checked on a filter on each side of the switch)."""
    import math

    rng = np.random.default_rng(12)
    n = 20_000
    words = [f"w{j}" for j in range(400)]
    texts = [" ".join(words[j % 400] for j in rng.zipf(1.4, size=int(rng.integers(4, 20)))) for _ in range(n)]
    years = [2000 + i % 10 if i % 50 else 1990 for i in range(n)]
    g = vg.Graph(dim=4, filterable={"year": "int64"})
    g.add_nodes(list(range(n)), rng.normal(size=(n, 4)), texts=texts, props=[{"year": y} for y in years])
    depth = 30
    limit = math.isqrt(2 * depth * n)
    for where, passes in (({"year": 1990}, lambda y: y == 1990), ({"year": {"<": 2005}}, lambda y: y < 2005)):
        count = sum(passes(y) for y in years)
        assert (count <= limit) == (where == {"year": 1990})  # one filter on each side
        for query in ("w1 w2", "w3", "w7 w40 w300", "w399"):
            ranking = [key for key, _ in g._bm25(query, n)]
            expected = [key for key in ranking if passes(years[key])][:depth]
            res = g.hybrid_search(query, k=depth, depth=depth, channels=["bm25"], where=where)
            assert res.keys == expected, (where, query)


def test_text_only_hybrid_search_says_which_channels_did_not_run_when_the_embedder_does_not_load(tmp_path):
    """A graph that records its embedder, searched by text alone: the text is embedded with it
    (every channel runs). Reopened where that embedder cannot be loaded by name, the dense and
    graph channels cannot run, and a RuntimeWarning says so, names the embedder and the
    channels that ran. With a vector, an embedder, or channels that need no vector, nothing is said."""
    import warnings

    class Tiny:
        name, dim = "tiny-test-embedder", 4

        def __call__(self, texts):
            return np.array([[1.0, len(t) % 3, 0.5, 0.25] for t in texts], dtype=np.float32)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        before = team().hybrid_search("Who leads Orion?", k=3)  # no embedder recorded: nothing to say
    g2 = vg.Graph.open(str(tmp_path / "g"), dim=4)
    g2.add_nodes(["a", "b"], np.eye(4, dtype=np.float32)[:2] + 0.1, texts=["orion lead", "ada notes"])
    g2.use_embedder(Tiny())
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert g2.hybrid_search("orion lead", k=2).channels == ("dense", "bm25", "graph", "entity")
    g2.close()
    g2 = vg.Graph.open(str(tmp_path / "g"))  # a new handle: "tiny-test-embedder" is no name load() knows
    with pytest.warns(RuntimeWarning, match=r"so the dense and graph channels did not run \(ran: bm25, entity\): "
                                            r"the graph records embedder 'tiny-test-embedder', which vecgraph "
                                            r"cannot load by name: register it") as caught:
        res = g2.hybrid_search("orion lead", k=2)
    assert caught[0].filename == __file__  # points at the caller
    assert res.channels == ("bm25", "entity") and res.keys[0] == "a"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert g2.hybrid_search("orion lead", k=2, embedder=Tiny()).channels == ("dense", "bm25", "graph", "entity")
        g2.hybrid_search("orion lead", vector=np.ones(4), k=2)
        g2.hybrid_search("orion lead", k=2, channels=["bm25", "entity"])
    g2.close()
    assert len(before) >= 1
