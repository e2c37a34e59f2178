"""Text in everywhere: search, search_batch, hybrid_search and Memory embed text queries with
the graph's recorded embedder, loaded by name (vecgraph.embedders.register for custom ones);
a clear error naming the embedder and how to install it when it cannot be loaded; "cosine"
taken as "cos"."""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

import vecgraph as vg
from vecgraph import embedders
from memory_helpers import FakeEmbedder

TEXTS = ["the billing job runs nightly", "payments service owns the ledger", "ada writes the billing docs",
         "orion is a search project", "the ledger feeds the billing job", "grace reviews payments"]


@pytest.fixture(autouse=True)
def _forget_registrations():
    before = dict(embedders._REGISTERED)
    yield
    embedders._REGISTERED.clear()
    embedders._REGISTERED.update(before)


def _graph(path=None) -> vg.Graph:
    emb = FakeEmbedder()
    g = vg.Graph(emb.dim) if path is None else vg.Graph.open(str(path), dim=emb.dim)
    keys = [f"n{i}" for i in range(len(TEXTS))]
    g.add_nodes(keys, emb(TEXTS), texts=TEXTS)
    g.add_edges(["n0", "n1"], ["n4", "n5"], rels=["reads", "reviewed_by"])
    g.use_embedder(emb)
    return g


def test_search_takes_text_and_embeds_it_with_the_graphs_embedder():
    g = _graph()
    emb = FakeEmbedder()
    for text in ["billing job", "who reviews payments?"]:
        by_text = g.search(text, k=4)
        by_vector = g.search(emb([text])[0], k=4)
        assert by_text.keys == by_vector.keys and len(by_text) == 4
        assert np.array_equal(by_text.scores, by_vector.scores)
    batch = g.search_batch(["billing job", "ledger"], k=3)
    reference = g.search_batch(emb(["billing job", "ledger"]), k=3)
    assert [r.keys for r in batch] == [r.keys for r in reference]
    assert g.search("billing job", k=1, embedder=emb).keys == g.search("billing job", k=1).keys


def test_a_text_query_without_an_embedder_or_with_the_wrong_one_is_refused():
    g = vg.Graph(64)
    g.add_nodes(["a"], FakeEmbedder()(["x"]))
    with pytest.raises(vg.InvalidArgumentError, match="a text query needs an embedder, and this graph records none"):
        g.search("x")

    class Other:
        name, dim = "other", 64

        def __call__(self, texts):
            return np.ones((len(texts), 64), np.float32)

    g.use_embedder(FakeEmbedder())
    with pytest.raises(vg.InvalidArgumentError, match="refusing query embedder 'other'"):
        g.search("x", embedder=Other())
    with pytest.raises(vg.InvalidArgumentError, match="embedder= embeds a text query"):
        g.search(np.ones(64), embedder=FakeEmbedder())
    with pytest.raises(vg.InvalidArgumentError, match="text 0 is empty"):
        g.search("")


def test_hybrid_search_embeds_text_with_the_recorded_embedder():
    g = _graph()
    emb = FakeEmbedder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        auto = g.hybrid_search("who owns the ledger", k=4)
    explicit = g.hybrid_search("who owns the ledger", k=4, embedder=emb)
    by_vector = g.hybrid_search("who owns the ledger", emb(["who owns the ledger"])[0], k=4)
    assert auto.channels == ("dense", "bm25", "graph", "entity")
    assert auto.keys == explicit.keys == by_vector.keys
    assert [h.score for h in auto] == [h.score for h in by_vector]
    batch = g.hybrid_search_batch(["who owns the ledger", "billing"], k=3)
    assert batch[0].keys == g.hybrid_search("who owns the ledger", k=3).keys
    assert batch[1].channels == ("dense", "bm25", "graph", "entity")


def test_a_reopened_graph_loads_its_embedder_by_the_registered_name(tmp_path):
    g = _graph(tmp_path / "g")
    before = g.search("billing job", k=3).keys
    hybrid_before = g.hybrid_search("billing job", k=3).keys
    g.close()
    g = vg.Graph.open(str(tmp_path / "g"))
    with pytest.raises(vg.InvalidArgumentError, match=r"records embedder 'test-hashed-bow-64', which vecgraph "
                                                      r"cannot load by name: register it with vecgraph.embedders."
                                                      r"register\('test-hashed-bow-64', factory\)"):
        g.search("billing job")
    embedders.register("test-hashed-bow-64", FakeEmbedder)
    assert g.search("billing job", k=3).keys == before
    assert g.hybrid_search("billing job", k=3).keys == hybrid_before
    assert isinstance(g.query_embedder(), FakeEmbedder) and g.query_embedder() is g.query_embedder()
    g.close()


def test_a_factory_that_loads_another_embedder_under_the_name_is_refused(tmp_path):
    g = _graph(tmp_path / "g")
    g.close()

    class Impostor:
        name, dim = "impostor", 64

        def __call__(self, texts):
            return np.ones((len(texts), 64), np.float32)

    class Narrow:
        name, dim = "test-hashed-bow-64", 8

        def __call__(self, texts):
            return np.ones((len(texts), 8), np.float32)

    with vg.Graph.open(str(tmp_path / "g")) as g:
        embedders.register("test-hashed-bow-64", Impostor)
        with pytest.raises(vg.InvalidArgumentError, match="now loads 'impostor', but the graph records"):
            g.search("billing")
        embedders.register("test-hashed-bow-64", Narrow, replace=True)
        with pytest.raises(vg.DimensionMismatchError, match=r"\(dim 8\), but the graph records"):
            g.search("billing")


def test_register_checks_its_arguments():
    embedders.register("tiny-ok", FakeEmbedder)
    assert "tiny-ok" in embedders.registered() and embedders.load("tiny-ok").dim == 64
    with pytest.raises(vg.InvalidArgumentError, match="an embedder named 'tiny-ok' is registered already"):
        embedders.register("tiny-ok", FakeEmbedder)
    for reserved in ("wordllama", "wordllama/x_256", "openai/text-embedding-3-small", "pkg:attr"):
        with pytest.raises(vg.InvalidArgumentError, match="reserved embedder name form"):
            embedders.register(reserved, FakeEmbedder)
    with pytest.raises(vg.InvalidArgumentError, match="registered already"):
        embedders.register("minilm", FakeEmbedder)
    with pytest.raises(TypeError, match="factory must be callable"):
        embedders.register("x", 3)
    with pytest.raises(TypeError, match="an embedder name must be a str"):
        embedders.register(3, FakeEmbedder)
    with pytest.raises(vg.InvalidArgumentError, match="non-empty"):
        embedders.register(" x", FakeEmbedder)
    embedders.register("not-an-embedder", lambda: object())
    with pytest.raises(TypeError, match="an embedder needs name"):
        embedders.load("not-an-embedder")


def test_an_embedder_whose_package_is_missing_names_itself_and_how_to_install_it(monkeypatch):
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)  # import fails as if not installed
    monkeypatch.setitem(sys.modules, "wordllama", None)
    for spec, install in (("minilm", 'pip install "vecgraph[minilm]"'),
                          ("sentence-transformers/all-MiniLM-L6-v2", 'pip install "vecgraph[minilm]"'),
                          ("wordllama", 'pip install "vecgraph[embed]"'),
                          ("wordllama/l2_supercat_256/64", 'pip install "vecgraph[embed]"')):
        with pytest.raises(vg.EmbedderUnavailableError) as caught:
            embedders.load(spec)
        assert isinstance(caught.value, ImportError)
        assert f"embedder {spec!r} cannot be loaded here" in str(caught.value) and install in str(caught.value)


def test_a_recorded_embedder_that_cannot_be_loaded_says_how_to_install_it(tmp_path, monkeypatch):
    g = vg.Graph.open(str(tmp_path / "g"), dim=256)
    g.add_nodes(["a"], np.ones((1, 256)), texts=["alpha"])
    g.use_embedder(type("W", (), {"name": "wordllama/l2_supercat_256", "dim": 256,
                                  "__call__": lambda self, t: np.ones((len(t), 256), np.float32)})())
    g.close()
    monkeypatch.setitem(sys.modules, "wordllama", None)
    with vg.Graph.open(str(tmp_path / "g")) as g:
        with pytest.raises(vg.EmbedderUnavailableError, match=r"'wordllama/l2_supercat_256' cannot be loaded here "
                                                              r".*pip install \"vecgraph\[embed\]\""):
            g.search("alpha")
        with pytest.warns(RuntimeWarning, match=r"did not run \(ran: bm25, entity\): embedder "
                                                r"'wordllama/l2_supercat_256' cannot be loaded here"):
            assert g.hybrid_search("alpha", k=1).keys == ["a"]


def test_cosine_is_taken_as_cos(tmp_path):
    assert vg.Graph(4, "cosine").metric == "cos"
    g = vg.Graph.open(str(tmp_path / "g"), dim=4, metric="cosine")
    assert g.metric == "cos"
    g.close()
    with vg.Graph.open(str(tmp_path / "g"), metric="cosine") as g:
        assert g.metric == "cos"
    with pytest.raises(vg.InvalidArgumentError, match="metric must be 'cos', 'ip' or 'l2', got 'cosin'"):
        vg.Graph(4, "cosin")
    codes, scales = vg.quantize(np.array([[3.0, 4.0]]), metric="cosine")
    assert codes.tolist() == [[95, 127]]  # round(0.6 / 0.8 * 127)


def test_memory_opens_a_store_with_the_embedder_it_records(tmp_path):
    embedders.register("test-hashed-bow-64", FakeEmbedder)
    mem = vg.Memory.open(str(tmp_path / "m"), embedder=FakeEmbedder())
    mem.remember("u1", "my daughter plays the cello")
    mem.close()
    mem = vg.Memory.open(str(tmp_path / "m"))  # "auto": the recorded embedder, loaded by name
    assert mem.embedder.name == "test-hashed-bow-64"
    assert [h.text for h in mem.recall("u1", "what instrument does she play?", k=1)] == ["my daughter plays the cello"]
    mem.close()


def test_an_embedder_that_fails_while_it_loads_is_unavailable_and_hybrid_falls_back(tmp_path):
    g = _graph(tmp_path / "g")
    g.close()

    def broken():
        raise ImportError("No module named 'torch'")

    def crashing():
        raise RuntimeError("weights are damaged")

    for factory, cause in ((broken, "ImportError: No module named 'torch'"),
                           (crashing, "RuntimeError: weights are damaged")):
        embedders.register("test-hashed-bow-64", factory, replace=True)
        with vg.Graph.open(str(tmp_path / "g")) as g:
            with pytest.raises(vg.EmbedderUnavailableError, match=f"'test-hashed-bow-64' cannot be loaded here.*{cause}"):
                g.search("billing")
            with pytest.warns(RuntimeWarning, match="did not run"):
                assert g.hybrid_search("billing job", k=2).channels == ("bm25", "entity")


def test_a_recorded_module_spec_that_no_longer_imports_is_unavailable(tmp_path, monkeypatch):
    module = tmp_path / "spec_embedder_mod.py"
    module.write_text("from memory_helpers import FakeEmbedder as Model\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    g = vg.Graph.open(str(tmp_path / "g"), dim=64)
    emb = embedders.load("spec_embedder_mod:Model")
    g.add_nodes(["a"], emb(["alpha"]), texts=["alpha"])
    g.use_embedder(emb)
    assert g.embedder == {"name": "test-hashed-bow-64", "dim": 64, "spec": "spec_embedder_mod:Model"}
    g.close()
    monkeypatch.setitem(sys.modules, "spec_embedder_mod", None)
    with vg.Graph.open(str(tmp_path / "g")) as g:
        with pytest.raises(vg.EmbedderUnavailableError, match="'spec_embedder_mod:Model' cannot be loaded here"):
            g.search("alpha")
        with pytest.warns(RuntimeWarning, match="cannot be loaded here"):
            assert g.hybrid_search("alpha", k=1).keys == ["a"]


def test_an_openai_name_loads_only_with_its_endpoint_in_the_environment(monkeypatch):
    for variable in ("VECGRAPH_EMBEDDINGS_BASE_URL", "OPENAI_BASE_URL"):
        monkeypatch.delenv(variable, raising=False)
    with pytest.raises(vg.EmbedderUnavailableError, match="neither VECGRAPH_EMBEDDINGS_BASE_URL nor OPENAI_BASE_URL"):
        embedders.load("openai/some-model", dim=8)
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_BASE_URL", "http://127.0.0.1:9/v1")  # never called: dim is given
    emb = embedders.load("openai/some-model", dim=8)
    assert (emb.name, emb.dim) == ("openai/some-model", 8)


def test_text_in_the_wrong_shape_says_what_to_pass():
    g = _graph()
    with pytest.raises(TypeError, match=r"search takes one query, .*got a list of str \(search_batch takes a list"):
        g.search(["billing", "ledger"])
    with pytest.raises(TypeError, match=r"got dtype <U7 \(text is passed as a str"):
        g.search(np.array(["billing"]))


def test_a_batch_of_bm25_queries_embeds_nothing():
    g = _graph()
    calls = []

    class Counting(FakeEmbedder):
        def __call__(self, texts):
            calls.append(list(texts))
            return super().__call__(texts)

    g._query_embedder = Counting()
    res = g.hybrid_search_batch(["billing", "ledger"], k=2, channels=["bm25"])
    assert calls == [] and [r.channels for r in res] == [("bm25",), ("bm25",)]
    g.hybrid_search_batch(["billing", "ledger"], k=2)
    assert calls == [["billing", "ledger"]]


def test_a_factory_that_raises_type_error_is_unavailable():
    def needs_an_argument(model_path):
        return FakeEmbedder()

    embedders.register("needs-arg", needs_an_argument)
    with pytest.raises(vg.EmbedderUnavailableError, match="'needs-arg' cannot be loaded here .*TypeError"):
        embedders.load("needs-arg")
