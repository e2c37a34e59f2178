"""vecgraph.integrations.langchain: LangChain's standard test suites (langchain-tests) run on the
vector store (in memory, in a folder, scoped to a tenant) and on the retriever (with the
embeddings given, and with the embedder the graph records), then our own tests: metadata round
trip, filters inside and after the search against a brute-force reference, upsert, delete,
reopening a folder, refused embeddings that write nothing, the retriever against a direct
hybrid_search, the memory tools, LangChain's indexing API, and the README example."""

from __future__ import annotations

import hashlib
import os
import re
import subprocess
import sys
import uuid
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
import vecgraph as vg
from langchain_core.documents import Document
from langchain_core.embeddings import DeterministicFakeEmbedding, Embeddings
from langchain_core.indexing import InMemoryRecordManager, index
from langchain_core.retrievers import BaseRetriever
from langchain_core.tools import StructuredTool
from langchain_tests.integration_tests import RetrieversIntegrationTests, VectorStoreIntegrationTests
from memory_helpers import FakeEmbedder
from vecgraph import embedders
from vecgraph.integrations.langchain import (
    LangChainEmbedder,
    VecgraphRetriever,
    VecgraphVectorStore,
    memory_tools,
    relevance_score,
)

README = Path(__file__).resolve().parent.parent / "README.md"

# The standard suites' async tests are coroutines: pytest-asyncio runs them when marked. The mark
# is on the classes (their sync tests too, which pytest-asyncio leaves alone with a warning,
# silenced here).
ASYNC = [pytest.mark.asyncio,
         pytest.mark.filterwarnings("ignore:The test .* is marked with '@pytest.mark.asyncio'")]


# ------------------------------------------------------------------ the standard suites


class TestStandardStoreInMemory(VectorStoreIntegrationTests):
    pytestmark = ASYNC

    @pytest.fixture()
    def vectorstore(self):
        yield VecgraphVectorStore(vg.Graph(dim=6), self.get_embeddings())


class TestStandardStoreInFolder(VectorStoreIntegrationTests):
    pytestmark = ASYNC

    @pytest.fixture()
    def vectorstore(self, tmp_path):
        store = VecgraphVectorStore.open(str(tmp_path / "store.vg"), self.get_embeddings(), sync="off")
        yield store
        store.close()


class TestStandardStoreOfOneTenant(VectorStoreIntegrationTests):
    """The store sees only its tenant: the same texts in another tenant of the same graph never
    show (the suite checks that the store starts empty and finds exactly what it added)."""

    pytestmark = ASYNC

    @pytest.fixture()
    def vectorstore(self):
        graph = vg.Graph(dim=6)
        other = VecgraphVectorStore(graph, self.get_embeddings(), tenant="other")
        other.add_texts(["foo", "bar", "baz", "new foo"], ids=["o1", "o2", "o3", "o4"])
        yield VecgraphVectorStore(graph, self.get_embeddings(), tenant="mine")
        assert len(other.get_by_ids(["o1", "o2", "o3", "o4"])) == 4  # never touched by the suite


RETRIEVER_TEXTS = {
    "acme": "ACME Corp makes widgets and gadgets",
    "widget": "Widget A7-Pro costs 99 dollars and is made by ACME",
    "alice": "Alice is an engineer at ACME working on the A7-Pro",
    "bob": "Bob sells the A7-Pro widget to retailers",
    "carol": "Carol designs gadgets for a rival company",
    "paris": "Paris is the capital of France",
    "tokyo": "Tokyo is the capital of Japan",
    "rust": "Rust is a systems programming language",
}
RETRIEVER_EDGES = [("alice", "acme", "works_at"), ("bob", "acme", "works_at"), ("acme", "widget", "makes")]


def _retriever_graph(embedding: Embeddings) -> vg.Graph:
    store = VecgraphVectorStore.from_texts(list(RETRIEVER_TEXTS.values()), embedding, ids=list(RETRIEVER_TEXTS))
    src, dst, rels = zip(*RETRIEVER_EDGES)
    store.graph.add_edges(list(src), list(dst), rels=list(rels))
    return store.graph


class TestStandardRetriever(RetrieversIntegrationTests):
    pytestmark = ASYNC

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return VecgraphRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        embedding = DeterministicFakeEmbedding(size=16)
        return {"graph": _retriever_graph(embedding), "embedding": embedding, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "Who makes the A7-Pro widget?"


class TestStandardRetrieverRecordedEmbedder(RetrieversIntegrationTests):
    """A graph built by vecgraph with a vecgraph embedder (recorded by its spec): the retriever
    is given no embedding and embeds queries with the one the graph records."""

    pytestmark = ASYNC

    @property
    def retriever_constructor(self) -> type[BaseRetriever]:
        return VecgraphRetriever

    @property
    def retriever_constructor_params(self) -> dict:
        embedder = embedders.load("memory_helpers:FakeEmbedder")
        graph = vg.Graph(dim=embedder.dim)
        graph.use_embedder(embedder)
        keys = list(RETRIEVER_TEXTS)
        graph.add_nodes(keys, embedder(list(RETRIEVER_TEXTS.values())), texts=list(RETRIEVER_TEXTS.values()))
        return {"graph": graph, "k": 4}

    @property
    def retriever_query_example(self) -> str:
        return "Who makes the A7-Pro widget?"


# ------------------------------------------------------------------ helpers


class CountingEmbeddings(Embeddings):
    """DeterministicFakeEmbedding that counts its calls; ``document_width`` makes
    embed_documents return vectors of another width than embed_query (a broken model)."""

    def __init__(self, size: int = 16, document_width: int | None = None) -> None:
        self.inner = DeterministicFakeEmbedding(size=size)
        self.document_width = document_width
        self.calls = 0

    def embed_documents(self, texts: list[str]) -> list[list[float]]:
        self.calls += 1
        rows = self.inner.embed_documents(texts)
        return [row[: self.document_width] if self.document_width else row for row in rows]

    def embed_query(self, text: str) -> list[float]:
        self.calls += 1
        return self.inner.embed_query(text)


def _state(graph: vg.Graph) -> tuple:
    """What a refused call must leave unchanged: counts, keys, the recorded embedder, and for a
    folder graph the bytes of its WAL and MANIFEST."""
    files = None
    if graph.path is not None:
        files = sorted((str(p.relative_to(graph.path)), p.stat().st_size) for p in Path(graph.path).rglob("*")
                       if p.is_file() and ("wal" in p.parts or p.name == "MANIFEST"))
    return len(graph), graph.count_edges, graph.keys(), graph.embedder, files


def _cosines(store: VecgraphVectorStore, query: str) -> dict:
    """Brute force: the cosine of the query's embedding and every stored vector, both as int8
    codes dequantized (how the graph scores, see vecgraph.quantize)."""
    codes, scales = vg.quantize(np.asarray([store.embeddings.embed_query(query)], np.float32))
    q = codes[0].astype(np.float64) * float(scales[0])
    out = {}
    keys = store.graph.keys()
    for key in keys:
        v = store.graph.get_node(key)["vector"].astype(np.float64)
        out[key] = float(q @ v / (np.linalg.norm(q) * np.linalg.norm(v)))
    return out


# ------------------------------------------------------------------ the vector store


def test_metadata_and_text_round_trip_through_the_node():
    store = VecgraphVectorStore(vg.Graph(dim=16), DeterministicFakeEmbedding(size=16))
    metadata = {"source": "wiki/Ada_Lovelace", "page": 3, "score": 0.25, "draft": False, "tags": ["a", "β"],
                "nested": {"x": [1, {"y": None}]}, "emoji": "数据 ✓", "when": datetime(2024, 5, 1, tzinfo=timezone.utc),
                "pair": (1, 2)}
    ids = store.add_documents([Document(page_content="Ada wrote the first program", metadata=metadata, id="ada"),
                               Document(page_content="no metadata here")])
    assert ids[0] == "ada" and uuid.UUID(ids[1]).version == 4
    expected = {k: v for k, v in metadata.items() if k not in ("when", "pair")}
    expected["when"] = 1714521600000000  # datetimes are stored as microseconds since the epoch, UTC
    expected["pair"] = [1, 2]  # JSON has no tuples
    node = store.graph.get_node("ada", vector=False)
    assert node["text"] == "Ada wrote the first program" and node["props"] == expected
    assert store.get_by_ids(["ada"]) == [Document(id="ada", page_content="Ada wrote the first program",
                                                  metadata=expected)]
    found = store.similarity_search("no metadata here", k=1)
    assert found == [Document(id=ids[1], page_content="no metadata here", metadata={})]
    assert metadata["pair"] == (1, 2)  # the caller's dict is not changed


def test_generated_ids_are_distinct_uuids_and_given_ids_are_kept():
    store = VecgraphVectorStore(vg.Graph(dim=16), DeterministicFakeEmbedding(size=16))
    ids = store.add_texts(["a", "b", "c"], ids=["x", None, ""])
    assert ids[0] == "x" and len(set(ids)) == 3
    assert all(uuid.UUID(i).version == 4 for i in ids[1:])
    assert sorted(store.graph.keys()) == sorted(ids)


def test_scores_are_cosine_similarities_and_relevance_is_them_clipped():
    store = VecgraphVectorStore.from_texts([f"text {i}" for i in range(40)], DeterministicFakeEmbedding(size=24))
    reference = _cosines(store, "text 7")
    pairs = store.similarity_search_with_score("text 7", k=40)
    assert pairs[0][0].page_content == "text 7"
    assert [doc.id for doc, _ in pairs] == sorted(reference, key=lambda key: -reference[key])
    for doc, score in pairs:
        assert score == pytest.approx(reference[doc.id], abs=1e-5)
    assert min(score for _, score in pairs) < 0  # random vectors: some cosines are negative
    relevant = store.similarity_search_with_relevance_scores("text 7", k=40)
    assert [(d.id, round(s, 5)) for d, s in relevant] == [(d.id, round(min(1.0, max(0.0, s)), 5)) for d, s in pairs]
    above = store.similarity_search_with_relevance_scores("text 7", k=40, score_threshold=0.2)
    assert [d.id for d, _ in above] == [d.id for d, s in pairs if min(1.0, s) >= 0.2]
    assert relevance_score(-0.5) == 0.0 and relevance_score(1.0000001) == 1.0 and relevance_score(0.3) == 0.3
    assert relevance_score(-2.0, "l2") == pytest.approx(0.0) and relevance_score(-0.5, "l2") == pytest.approx(0.5)


def test_search_by_vector_and_max_marginal_relevance():
    emb = DeterministicFakeEmbedding(size=16)
    store = VecgraphVectorStore.from_texts([f"t{i}" for i in range(30)], emb)
    q = emb.embed_query("t3")
    assert store.similarity_search_by_vector(q, k=3) == store.similarity_search("t3", k=3)
    assert store.similarity_search_with_score_by_vector(q, k=3) == store.similarity_search_with_score("t3", k=3)
    # lambda_mult=1: relevance only, the similarity order; lower: a diverse set with the best first
    assert store.max_marginal_relevance_search("t3", k=4, fetch_k=10, lambda_mult=1.0) == \
        store.similarity_search("t3", k=4)
    diverse = store.max_marginal_relevance_search("t3", k=4, fetch_k=10, lambda_mult=0.3)
    assert len(diverse) == 4 and diverse[0].page_content == "t3" and len({d.id for d in diverse}) == 4
    assert {d.id for d in diverse} <= {d.id for d in store.similarity_search("t3", k=10)}
    with pytest.raises(vg.DimensionMismatchError):
        store.similarity_search_by_vector([0.1] * 15, k=1)


def _filter_store(n: int = 400) -> tuple[VecgraphVectorStore, list]:
    graph = vg.Graph(dim=16, filterable={"year": int, "kind": str})
    rng = np.random.default_rng(5)
    metadatas = [{"year": int(2000 + rng.integers(0, 25)), "kind": ["a", "b", "c"][i % 3],
                  "colour": "red" if i % 97 == 0 else ["green", "blue"][i % 2], "rank": i} for i in range(n)]
    store = VecgraphVectorStore(graph, DeterministicFakeEmbedding(size=16))
    store.add_texts([f"document number {i}" for i in range(n)], metadatas, ids=[f"d{i}" for i in range(n)])
    return store, metadatas


def _reference(store: VecgraphVectorStore, metadatas: list, query: str, k: int, keep) -> list:
    cosines = _cosines(store, query)
    admitted = [f"d{i}" for i, m in enumerate(metadatas) if keep(m)]
    return sorted(admitted, key=lambda key: -cosines[key])[:k]


@pytest.mark.parametrize("name,filter,keep", [
    ("filterable equality", {"kind": "b"}, lambda m: m["kind"] == "b"),
    ("filterable range", {"year": {">=": 2020, "<": 2023}}, lambda m: 2020 <= m["year"] < 2023),
    ("filterable membership", {"year": [2001, 2017]}, lambda m: m["year"] in (2001, 2017)),
    ("rare post-filter value", {"colour": "red"}, lambda m: m["colour"] == "red"),
    ("post-filter range", {"rank": {">": 390}}, lambda m: m["rank"] > 390),
    ("post-filter membership", {"colour": ["red", "blue"]}, lambda m: m["colour"] in ("red", "blue")),
    ("both", {"kind": "a", "colour": "red"}, lambda m: m["kind"] == "a" and m["colour"] == "red"),
    ("nothing passes", {"colour": "purple"}, lambda m: False),
    ("wrong type never equal", {"rank": "3"}, lambda m: False),
])
def test_filters_give_the_exact_filtered_nearest(name, filter, keep):
    store, metadatas = _filter_store()
    for query in ("document number 17", "document number 333"):
        expected = _reference(store, metadatas, query, 3, keep)
        found = store.similarity_search(query, k=3, filter=filter)
        assert [d.id for d in found] == expected, name
        assert all(keep(d.metadata) for d in found)
    if name == "rare post-filter value":
        assert len(expected) == 3 and sum(keep(m) for m in metadatas) == 5  # 5 of 400 pass


def test_filterable_keys_run_inside_the_search_and_others_after_it(monkeypatch):
    store, _ = _filter_store()
    calls = []
    search = store.graph.search

    def spy(query, k=10, **kwargs):
        assert kwargs["seeds"] == kwargs["max_visited"] == k  # hops=0: the seeds are the result
        calls.append((k, kwargs["where"], kwargs["exact"]))
        return search(query, k, **kwargs)

    monkeypatch.setattr(store.graph, "search", spy)
    store.similarity_search("document number 5", k=3, filter={"kind": "b", "year": {">=": 2010}})
    assert calls == [(3, {"kind": "b", "year": {">=": 2010}}, False)]  # one search, filtered inside
    calls.clear()
    store.similarity_search("document number 5", k=3, filter={"kind": "a", "colour": "red"})
    # where for kind, the colour checked on the props of 12, 48, 192, then every node (exact: 400)
    assert calls == [(12, {"kind": "a"}, False), (48, {"kind": "a"}, False), (192, {"kind": "a"}, False),
                     (400, {"kind": "a"}, True)]
    calls.clear()
    store.similarity_search("document number 5", k=3, filter={"colour": "red"}, exact=True)
    assert calls == [(400, None, True)]  # exact: a scan of every node at once, then the filter
    calls.clear()
    store.similarity_search("document number 5", k=2, filter={"colour": "green"}, fetch_k=50)
    assert calls == [(50, None, False)]  # half the documents are green: the first fetch is enough


def test_bad_filters_are_refused_clearly():
    store, _ = _filter_store(20)
    with pytest.raises(vg.InvalidArgumentError, match="year"):  # a filterable int compared with a str
        store.similarity_search("x", k=2, filter={"year": "2020"})
    with pytest.raises(TypeError, match="filter must be a dict"):
        store.similarity_search("x", k=2, filter=[("kind", "a")])
    with pytest.raises(vg.InvalidArgumentError, match="operators are"):
        store.similarity_search("x", k=2, filter={"colour": {"~": "r"}})
    with pytest.raises(vg.InvalidArgumentError, match="None"):
        store.similarity_search("x", k=2, filter={"colour": None})
    with pytest.raises(vg.InvalidArgumentError, match="k must be >= 1"):
        store.similarity_search("x", k=0)
    with pytest.raises(TypeError, match="unexpected keyword"):
        store.similarity_search("x", k=2, filters={"kind": "a"})


def _brute_force(graph: vg.Graph, query: np.ndarray, keys: list) -> list:
    """``keys`` by the cosine of their int8 codes (dequantized) and the query's, best first: how
    the graph scores (see vecgraph.quantize)."""
    codes, scales = graph.quantized(keys)
    rows = codes.astype(np.float64) * scales[:, None]
    query_codes, query_scales = vg.quantize(np.asarray([query], np.float32))
    q = query_codes[0].astype(np.float64) * float(query_scales[0])
    cosines = rows @ q / (np.linalg.norm(rows, axis=1) * np.linalg.norm(q))
    return [keys[i] for i in np.argsort(-cosines, kind="stable")]


@pytest.fixture(scope="module")
def big_store() -> VecgraphVectorStore:
    """3,000 documents (more than search's default max_visited of 2,000), 8-d: tag "rare" on
    the 6 with i % 500 == 7."""
    graph = vg.Graph(dim=8)
    store = VecgraphVectorStore(graph, DeterministicFakeEmbedding(size=8))
    n = 3000
    vectors = np.random.default_rng(11).normal(size=(n, 8)).astype(np.float32)
    graph.upsert_nodes([f"d{i}" for i in range(n)], vectors, texts=[f"document {i}" for i in range(n)],
                       props=[{"tag": "rare" if i % 500 == 7 else "common", "i": i} for i in range(n)])
    return store


@pytest.mark.parametrize("exact", [False, True])
def test_a_post_filter_on_a_graph_of_more_than_2000_nodes_finds_every_match(big_store, exact):
    rare = [f"d{i}" for i in range(3000) if i % 500 == 7]
    for seed in range(3):
        q = np.random.default_rng(seed).normal(size=8)
        expected = _brute_force(big_store.graph, q, rare)
        found = big_store.similarity_search_by_vector(q.tolist(), k=4, filter={"tag": "rare"}, exact=exact)
        assert [d.id for d in found] == expected[:4]
        every = big_store.similarity_search_by_vector(q.tolist(), k=10, filter={"tag": "rare"}, exact=exact)
        assert [d.id for d in every] == expected  # all 6, none cut by max_visited
        # a range admitting 2,100 of the 3,000 (more than 2,000 read in the last round)
        wide = big_store.similarity_search_with_score_by_vector(q.tolist(), k=2100, filter={"i": {">=": 900}},
                                                                exact=exact)
        assert [d.id for d, _ in wide] == _brute_force(big_store.graph, q, [f"d{i}" for i in range(900, 3000)])


def test_more_than_2000_results_without_a_filter(big_store):
    q = np.random.default_rng(7).normal(size=8)
    found = big_store.similarity_search_by_vector(q.tolist(), k=2500, exact=True)
    assert [d.id for d in found] == _brute_force(big_store.graph, q, big_store.graph.keys())[:2500]
    assert len(big_store.similarity_search_by_vector(q.tolist(), k=5000)) == 3000


def test_exact_with_a_post_filter_scans_every_node():
    store, metadatas = _filter_store()
    for query in ("document number 17", "document number 333"):
        for filter, keep in (({"colour": "red"}, lambda m: m["colour"] == "red"),
                             ({"kind": "c", "rank": {"<": 40}}, lambda m: m["kind"] == "c" and m["rank"] < 40)):
            expected = _reference(store, metadatas, query, 3, keep)
            assert len(expected) == 3
            assert [d.id for d in store.similarity_search(query, k=3, filter=filter, exact=True)] == expected


BAD_FILTER_VALUES = [  # (the value, the declared key of the type where= would give it)
    (float("nan"), "year"), (float("inf"), "year"), (-float("inf"), "year"), (2**70, "year"), (-(2**63) - 1, "year"),
    ("\ud800", "kind"),
]


@pytest.mark.parametrize("value,declared", BAD_FILTER_VALUES)
@pytest.mark.parametrize("shape", ["==", "in", ">="])
def test_a_post_filter_refuses_what_where_refuses_with_its_message(value, declared, shape):
    store, _ = _filter_store(20)
    if shape == ">=" and isinstance(value, str):
        shape = "=="  # a str takes no range (tested below)
    condition = {"==": value} if shape == "==" else {"in": [value]} if shape == "in" else {">=": value}
    with pytest.raises(vg.InvalidArgumentError) as inside:
        store.similarity_search("x", k=2, filter={declared: condition})
    post_key = "rank" if declared == "year" else "colour"  # the same values, not declared filterable
    before = _state(store.graph)
    with pytest.raises(vg.InvalidArgumentError) as after:
        store.similarity_search("x", k=2, filter={post_key: condition})
    assert str(after.value) == str(inside.value).replace("where[", "filter[").replace(repr(declared), repr(post_key))
    assert _state(store.graph) == before


@pytest.mark.parametrize("filter,message", [
    ({"colour": ["red", 3]}, r"compares a number \(3\) and a str \('red'\)"),
    ({"rank": {">": 3, "<": "9"}}, "a range takes a number or a datetime, got str '9'"),
    ({"colour": {">": "a"}}, "a range takes a number or a datetime, got str 'a'"),
    ({"draft": {">=": True}}, "a range takes a number or a datetime, got bool True"),
    ({"draft": [True, 1]}, r"compares a bool \(True\) and a number \(1\)"),
    ({"colour": ["red", None]}, "values are str, numbers, bools, datetimes or dates; got NoneType None"),
    ({"colour": {"==": ("red",)}}, "values are str, numbers, bools, datetimes or dates; got tuple"),
])
def test_a_post_filter_refuses_mixed_types_and_ranges_of_str(filter, message):
    store, _ = _filter_store(20)
    with pytest.raises(vg.InvalidArgumentError, match=message):
        store.similarity_search("x", k=2, filter=filter)


def test_post_filters_on_datetimes_and_bools_match_the_stored_values():
    store = VecgraphVectorStore(vg.Graph(dim=16), DeterministicFakeEmbedding(size=16))
    days = [datetime(2024, 1, d, tzinfo=timezone.utc) for d in range(1, 11)]
    store.add_texts([f"day {i}" for i in range(10)], [{"when": day, "draft": i % 3 == 0, "n": i}
                                                      for i, day in enumerate(days)], ids=[f"d{i}" for i in range(10)])
    found = store.similarity_search("day", k=10, filter={"when": {">=": datetime(2024, 1, 8, tzinfo=timezone.utc)}})
    assert sorted(d.id for d in found) == ["d7", "d8", "d9"]
    found = store.similarity_search("day", k=10, filter={"when": {"<": np.datetime64("2024-01-03")}})
    assert sorted(d.id for d in found) == ["d0", "d1"]
    assert sorted(d.id for d in store.similarity_search("day", k=10, filter={"draft": True})) == ["d0", "d3", "d6",
                                                                                                  "d9"]
    assert store.similarity_search("day", k=10, filter={"n": True}) == []  # a bool never equals a number
    assert sorted(d.id for d in store.similarity_search("day", k=10, filter={"n": [np.int64(2), 4.0]})) == ["d2",
                                                                                                           "d4"]


def test_an_id_added_again_is_replaced_and_keeps_its_edges():
    store = VecgraphVectorStore(vg.Graph(dim=16), DeterministicFakeEmbedding(size=16))
    store.add_texts(["old text", "other"], [{"v": 1}, {"v": 0}], ids=["a", "b"])
    store.graph.add_edges(["a"], ["b"], rels="cites")
    old_vector = store.graph.get_node("a")["vector"]
    store.add_documents([Document(page_content="new text", metadata={"v": 2, "extra": True}, id="a")])
    assert len(store.graph) == 2
    assert store.get_by_ids(["a"]) == [Document(id="a", page_content="new text", metadata={"v": 2, "extra": True})]
    assert not np.allclose(store.graph.get_node("a")["vector"], old_vector)
    assert store.similarity_search("new text", k=1)[0].id == "a"
    assert [(e.src, e.rel, e.dst) for e in store.graph.neighbors("a")] == [("a", "cites", "b")]
    # ids= given to add_documents take precedence over the documents' ids
    store.add_documents([Document(page_content="third", id="ignored")], ids=["c"])
    assert "ignored" not in store.graph and store.get_by_ids(["c"])[0].page_content == "third"


def test_bad_writes_are_refused_before_embedding_and_write_nothing(tmp_path):
    emb = CountingEmbeddings()
    store = VecgraphVectorStore.open(str(tmp_path / "s.vg"), emb)
    store.add_texts(["kept"], ids=["k"])
    before, calls = _state(store.graph), emb.calls
    cases = [
        (ValueError, "metadatas has 1 items, texts has 2", lambda: store.add_texts(["a", "b"], [{"x": 1}])),
        (ValueError, "ids has 1 items", lambda: store.add_texts(["a", "b"], ids=["x"])),
        (vg.DuplicateKeyError, "'x' is given twice", lambda: store.add_texts(["a", "b"], ids=["x", "x"])),
        (TypeError, r"texts\[1\] must be a str", lambda: store.add_texts(["a", 7])),
        (TypeError, r"ids\[0\] must be a str", lambda: store.add_texts(["a"], ids=[3])),
        (TypeError, r"metadatas\[0\] must be a dict", lambda: store.add_texts(["a"], ["x=1"])),
        (vg.InvalidArgumentError, "not JSON-serializable", lambda: store.add_texts(["a"], [{"x": object()}])),
        (vg.InvalidArgumentError, "not JSON-serializable", lambda: store.add_texts(["a"], [{"x": float("nan")}])),
        (TypeError, "unexpected keyword", lambda: store.add_texts(["a"], idz=["x"])),
        (vg.InvalidArgumentError, "batch_size", lambda: store.add_texts(["a"], batch_size=0)),
    ]
    for error, message, call in cases:
        with pytest.raises(error, match=message):
            call()
    assert _state(store.graph) == before and emb.calls == calls  # nothing written, nothing embedded
    store.close()


def test_batches_write_every_text():
    emb = CountingEmbeddings()
    store = VecgraphVectorStore(vg.Graph(dim=16), emb)
    calls = emb.calls
    ids = store.add_texts([f"t{i}" for i in range(10)], batch_size=4)
    assert emb.calls - calls == 3 and len(store.get_by_ids(ids)) == 10


def test_wrong_width_embeddings_are_refused_and_nothing_is_written(tmp_path):
    graph = vg.Graph.open(str(tmp_path / "g.vg"), dim=6)
    before = _state(graph)
    with pytest.raises(vg.DimensionMismatchError, match="make 8-d vectors, the graph's dim is 6"):
        VecgraphVectorStore(graph, DeterministicFakeEmbedding(size=8))
    assert _state(graph) == before and graph.embedder is None  # not even recorded
    # a model whose document vectors are not as wide as its query vectors: refused at the write
    broken = CountingEmbeddings(size=6, document_width=5)
    store = VecgraphVectorStore(graph, broken)
    before = _state(graph)
    with pytest.raises(vg.DimensionMismatchError, match=r"returned shape \(2, 5\) for 2 texts, expected \(2, 6\)"):
        store.add_texts(["a", "b"])
    assert _state(graph) == before
    graph.close()
    # and the store's constructors refuse before making a folder or a graph
    with pytest.raises(vg.DimensionMismatchError):
        VecgraphVectorStore.from_texts(["a"], CountingEmbeddings(size=6, document_width=4), path=str(tmp_path / "n.vg"))
    assert not (tmp_path / "n.vg").exists()


def test_a_graph_built_with_another_model_refuses_these_embeddings():
    graph = vg.Graph(dim=16)
    VecgraphVectorStore(graph, DeterministicFakeEmbedding(size=16)).add_texts(["x"])
    assert graph.embedder == {"name": "langchain/DeterministicFakeEmbedding/16", "dim": 16}
    with pytest.raises(vg.InvalidArgumentError, match="built with embedder 'langchain/DeterministicFakeEmbedding/16'"):
        VecgraphVectorStore(graph, DeterministicFakeEmbedding(size=16), embedder_name="openai/text-embedding-3-small")
    with pytest.raises(vg.InvalidArgumentError, match="refusing embedder 'langchain/FakeEmbedder/16'"):
        VecgraphVectorStore(graph, LangChainEmbedder(DeterministicFakeEmbedding(size=16), name="langchain/FakeEmbedder/16"))
    assert len(graph) == 1


def test_delete_ignores_missing_ids_and_stays_in_the_tenant():
    graph = vg.Graph(dim=16)
    emb = DeterministicFakeEmbedding(size=16)
    mine = VecgraphVectorStore(graph, emb, tenant="mine")
    theirs = VecgraphVectorStore(graph, emb, tenant="theirs")
    mine.add_texts(["a", "b", "c"], ids=["m1", "m2", "m3"])
    theirs.add_texts(["a", "b"], ids=["t1", "t2"])
    assert mine.delete(["m1", "t1", "nope"]) is True
    assert graph.keys() == ["m2", "m3", "t1", "t2"]  # t1 is not mine to delete
    assert mine.get_by_ids(["t2", "m3", "m2", "m3"]) == [Document(id="m3", page_content="c"),
                                                           Document(id="m2", page_content="b")]
    with pytest.raises(vg.InvalidArgumentError, match="tenant 'theirs' and label '', outside"):
        mine.add_texts(["overwrite"], ids=["t2"])
    assert mine.delete() is True  # every document of the store
    assert graph.keys() == ["t1", "t2"] and mine.similarity_search("a", k=5) == []
    plain = VecgraphVectorStore(graph, emb)
    plain.delete(["t1", "t1", "zz"])
    assert graph.keys() == ["t2"]
    with pytest.raises(TypeError, match="ids must be a list of str"):
        plain.delete("t2")


def test_labels_scope_a_store():
    graph = vg.Graph(dim=16)
    emb = DeterministicFakeEmbedding(size=16)
    notes = VecgraphVectorStore(graph, emb, label="note")
    VecgraphVectorStore(graph, emb, label="task").add_texts(["same text"], ids=["t"])
    notes.add_texts(["same text"], ids=["n"])
    assert graph.get_node("n", vector=False)["label"] == "note"
    assert [d.id for d in notes.similarity_search("same text", k=5)] == ["n"]
    assert notes.get_by_ids(["t", "n"]) == [Document(id="n", page_content="same text")]
    with pytest.raises(vg.InvalidArgumentError, match="label 'task', outside"):
        notes.add_texts(["taken over"], ids=["t"])
    assert graph.get_node("t", vector=False)["text"] == "same text"


def test_a_reopened_folder_store_keeps_its_documents(tmp_path):
    path = str(tmp_path / "docs.vg")
    emb = DeterministicFakeEmbedding(size=16)
    store = VecgraphVectorStore.from_texts(["alpha", "beta", "gamma"], emb, [{"n": 1}, {"n": 2}, {"n": 3}],
                                           ids=["a", "b", "c"], path=path)
    store.delete(["b"])
    store.add_texts(["delta"], [{"n": 4}], ids=["d"])
    expected = store.similarity_search_with_score("gamma", k=3)
    store.close()
    again = VecgraphVectorStore.open(path, emb)
    assert again.graph.embedder == {"name": "langchain/DeterministicFakeEmbedding/16", "dim": 16}
    assert again.get_by_ids(["a", "b", "c", "d"]) == [
        Document(id="a", page_content="alpha", metadata={"n": 1}),
        Document(id="c", page_content="gamma", metadata={"n": 3}),
        Document(id="d", page_content="delta", metadata={"n": 4})]
    assert again.similarity_search_with_score("gamma", k=3) == expected
    again.close()
    with pytest.raises(vg.DimensionMismatchError):
        VecgraphVectorStore.open(path, DeterministicFakeEmbedding(size=8))
    with pytest.raises(vg.InvalidArgumentError, match="refusing embedder"):
        VecgraphVectorStore.open(path, emb, embedder_name="another-model")
    # from_texts on the existing folder adds to it
    more = VecgraphVectorStore.from_texts(["epsilon"], emb, ids=["e"], path=path)
    assert sorted(more.graph.keys()) == ["a", "c", "d", "e"]
    more.close()


def test_langchain_indexing_api_keeps_the_store_in_step():
    store = VecgraphVectorStore(vg.Graph(dim=16), DeterministicFakeEmbedding(size=16))
    manager = InMemoryRecordManager(namespace="docs")
    manager.create_schema()
    docs = [Document(page_content=f"doc {i}", metadata={"source": f"s{i}"}) for i in range(5)]
    first = index(docs, manager, store, cleanup="full", source_id_key="source", batch_size=2, key_encoder="sha256")
    assert (first["num_added"], first["num_deleted"]) == (5, 0) and len(store.graph) == 5
    second = index(docs[:3] + [Document(page_content="doc 9", metadata={"source": "s9"})], manager, store,
                   cleanup="full", source_id_key="source", key_encoder="sha256")
    assert (second["num_added"], second["num_skipped"], second["num_deleted"]) == (1, 3, 2)
    assert sorted(d.page_content for d in store.get_by_ids(store.graph.keys())) == ["doc 0", "doc 1", "doc 2",
                                                                                     "doc 9"]


def test_two_tenant_stores_indexing_the_same_content_need_tenant_prefixed_ids():
    graph = vg.Graph(dim=16)
    emb = DeterministicFakeEmbedding(size=16)
    docs = [Document(page_content=f"policy {i}", metadata={"source": f"s{i}"}) for i in range(3)]
    stores, managers = {}, {}
    for tenant in ("acme", "globex"):
        stores[tenant] = VecgraphVectorStore(graph, emb, tenant=tenant)
        managers[tenant] = InMemoryRecordManager(namespace=f"docs/{tenant}")
        managers[tenant].create_schema()
    index(docs, managers["acme"], stores["acme"], cleanup="full", source_id_key="source", key_encoder="sha256")
    before = _state(graph)
    # content-hash ids are the same for both tenants, and ids are graph-wide keys
    with pytest.raises(vg.InvalidArgumentError) as refused:
        index(docs, managers["globex"], stores["globex"], cleanup="full", source_id_key="source",
              key_encoder="sha256")
    message = str(refused.value)
    assert "is a node of tenant 'acme'" in message and "Ids are graph-wide keys" in message
    assert "tenant prefix" in message and "key_encoder=" in message and "one graph per tenant" in message
    assert _state(graph) == before
    # the remedy the message gives: ids with a tenant prefix
    for tenant in ("acme", "globex"):
        def key(doc: Document, tenant: str = tenant) -> str:
            return f"{tenant}:" + hashlib.sha256(doc.page_content.encode()).hexdigest()
        fresh = InMemoryRecordManager(namespace=f"prefixed/{tenant}")
        fresh.create_schema()
        result = index(docs, fresh, stores[tenant], cleanup="full", source_id_key="source", key_encoder=key)
        assert result["num_added"] == 3
    acme = stores["acme"].similarity_search("policy 1", k=10)  # the unprefixed ids of the first index() too
    globex = stores["globex"].similarity_search("policy 1", k=10)
    assert len(acme) == 6 and sum(d.id.startswith("acme:") for d in acme) == 3
    assert sorted(d.page_content for d in globex) == ["policy 0", "policy 1", "policy 2"]
    assert all(d.id.startswith("globex:") for d in globex) and len(graph) == 9


# ------------------------------------------------------------------ the retriever


def test_the_retriever_returns_what_hybrid_search_returns():
    emb = DeterministicFakeEmbedding(size=16)
    graph = _retriever_graph(emb)
    retriever = VecgraphRetriever(graph=graph, embedding=emb, k=5, search_kwargs={"seeds": 2})
    query = "Who works at the company that makes the A7-Pro?"
    direct = graph.hybrid_search(query, np.asarray(emb.embed_query(query), np.float32), 5, seeds=2)
    docs = retriever.invoke(query)
    assert [d.id for d in docs] == [str(h.key) for h in direct.hits] and len(docs) == 5
    for doc, hit in zip(docs, direct.hits):
        assert doc.metadata == {"key": hit.key, "score": hit.score, "ranks": hit.ranks}
        assert doc.page_content == RETRIEVER_TEXTS[hit.key]
    assert set(docs[0].metadata["ranks"]) == {"dense", "bm25", "graph", "entity"}
    assert any(d.metadata["ranks"]["graph"] is not None for d in docs)  # the walks reached someone


def test_the_retriever_passes_filters_channels_and_overrides():
    emb = DeterministicFakeEmbedding(size=16)
    graph = vg.Graph(dim=16, filterable={"year": int})
    store = VecgraphVectorStore(graph, emb, tenant="t1")
    store.add_texts(["widget made in 2020", "widget made in 2024", "gadget made in 2024"],
                    [{"year": 2020}, {"year": 2024}, {"year": 2024}], ids=["w20", "w24", "g24"])
    VecgraphVectorStore(graph, emb, tenant="t2").add_texts(["widget from elsewhere"], ids=["other"])
    retriever = VecgraphRetriever(graph=graph, embedding=emb, k=10, tenants=["t1"], where={"year": 2024})
    assert sorted(d.id for d in retriever.invoke("widget")) == ["g24", "w24"]
    bm25 = retriever.invoke("widget", channels=["bm25"], where=None)
    assert [d.id for d in bm25] == ["w20", "w24"] or [d.id for d in bm25] == ["w24", "w20"]
    assert all(set(d.metadata["ranks"]) == {"bm25"} for d in bm25)
    assert len(retriever.invoke("widget", k=1)) == 1
    assert [d.id for d in retriever.invoke("widget", tenants=["t2"], where=None)] == ["other"]
    assert retriever.invoke("widget", k=3, tenants=["t1"], labels=["nothing"]) == []
    with pytest.raises(TypeError, match="unexpected keyword"):
        retriever.invoke("widget", topk=3)


def test_the_retriever_without_an_embedder_runs_the_text_channels():
    graph = vg.Graph(dim=4)
    graph.add_nodes(["a", "b"], np.eye(4, dtype=np.float32)[:2], texts=["red apples", "green pears"])
    docs = VecgraphRetriever(graph=graph, k=2).invoke("apples")
    assert [d.id for d in docs] == ["a"] and set(docs[0].metadata["ranks"]) == {"bm25", "entity"}


def test_the_retriever_refuses_embeddings_the_graph_was_not_built_with():
    emb = DeterministicFakeEmbedding(size=16)
    graph = _retriever_graph(emb)
    with pytest.raises(vg.DimensionMismatchError, match="make 8-d vectors, the graph's dim is 16"):
        VecgraphRetriever(graph=graph, embedding=DeterministicFakeEmbedding(size=8))
    with pytest.raises(vg.InvalidArgumentError, match="refusing 'other'"):
        VecgraphRetriever(graph=graph, embedding=emb, embedder_name="other")
    with pytest.raises(vg.InvalidArgumentError, match="refusing embedder 'test-hashed-bow-64-v2'"):
        VecgraphRetriever(graph=_bow_graph(), embedding=FakeEmbedder2())
    with pytest.raises(TypeError, match="graph must be a vecgraph.Graph"):
        VecgraphRetriever(graph="docs.vg", embedding=emb)
    assert graph.embedder == {"name": "langchain/DeterministicFakeEmbedding/16", "dim": 16}  # a retriever records nothing


def test_the_retriever_embeds_with_the_store_s_embeddings_or_needs_them_given(tmp_path):
    emb = DeterministicFakeEmbedding(size=16)
    store = VecgraphVectorStore.from_texts(list(RETRIEVER_TEXTS.values()), emb, ids=list(RETRIEVER_TEXTS),
                                           path=str(tmp_path / "r.vg"))
    query = "Who makes the A7-Pro widget?"
    given = VecgraphRetriever(graph=store.graph, embedding=emb).invoke(query)
    assert VecgraphRetriever(graph=store.graph).invoke(query) == given  # the store's, on the same graph object
    assert given[0].metadata["ranks"]["dense"] is not None
    store.close()
    # reopened in a new graph object, the graph records LangChain embeddings that vecgraph cannot
    # load by name: they must be given
    with vg.Graph.open(str(tmp_path / "r.vg")) as graph:
        with pytest.raises(vg.InvalidArgumentError, match="pass embedding="):
            VecgraphRetriever(graph=graph)
        assert VecgraphRetriever(graph=graph, embedding=emb).invoke(query) == given


class FakeEmbedder2(FakeEmbedder):
    name = "test-hashed-bow-64-v2"


def _bow_graph() -> vg.Graph:
    graph = vg.Graph(dim=64)
    graph.use_embedder(FakeEmbedder())
    return graph


# ------------------------------------------------------------------ memory tools


@pytest.fixture
def memory():
    store = vg.Memory.open(None, embedder=FakeEmbedder())
    yield store
    store.close()


def test_memory_tools_call_through_for_their_user_only(memory):
    tools = memory_tools(memory, user="zhang", session="s1")
    assert [t.name for t in tools] == ["remember", "recall", "card", "forget"]
    assert all(isinstance(t, StructuredTool) for t in tools)
    remember, recall, card, forget = tools
    assert set(remember.args) == {"text", "kind", "supersedes"} and set(recall.args) == {"query", "k"}
    assert "user" not in remember.args  # bound, not the model's to choose
    first = remember.invoke({"text": "order-service is written in Go 1.21", "kind": "project"})
    assert re.fullmatch(r"m-[0-9a-f]{16}", first)
    second = remember.invoke({"text": "order-service is written in Go 1.22", "kind": "project",
                              "supersedes": first})
    memory_tools(memory, user="li")[0].invoke({"text": "Li writes order-service in Rust"})
    hits = recall.invoke({"query": "which language is order-service written in?"})
    assert [h["id"] for h in hits] == [second]  # the superseded version and li's memory stay out
    assert hits[0]["text"] == "order-service is written in Go 1.22" and hits[0]["kind"] == "project"
    assert hits[0]["source"] == "user" and memory.history(second)[-1].session == "s1"
    profile = card.invoke({"refresh": True})
    assert profile["user"] == "zhang" and profile["memories"] == 1
    assert "Go 1.22" in str(profile["projects"])
    assert forget.invoke({"confirm": False})["erased"] is False and len(memory.memories("zhang")) == 1
    receipt = forget.invoke({"confirm": True})
    assert receipt["erased"] is True and receipt["memories"] == 2
    assert recall.invoke({"query": "order-service"}) == [] and len(memory.memories("li")) == 1


def test_memory_tools_return_errors_about_the_models_arguments(memory):
    remember, recall, _, _ = memory_tools(memory, user="zhang", name_prefix="mem_")
    assert remember.name == "mem_remember"
    before = len(memory.graph)
    assert "empty" in remember.invoke({"text": "   "})  # returned to the model, not raised
    assert "m-0000000000000000" in remember.invoke({"text": "x", "supersedes": "m-0000000000000000"})
    assert len(memory.graph) == before
    assert "k must be in [1, 1000]" in recall.invoke({"query": "x", "k": 0})
    with pytest.raises(TypeError, match="vecgraph.Memory"):
        memory_tools(vg.Graph(dim=4), user="zhang")  # type: ignore[arg-type]
    with pytest.raises(vg.InvalidArgumentError, match="non-empty"):
        memory_tools(memory, user="")


def test_arguments_that_fail_the_schema_come_back_to_the_model(memory):
    remember, recall, card, _ = memory_tools(memory, user="zhang", name_prefix="mem_")
    remember.invoke({"text": "Zhang drinks green tea"})
    before = _state(memory.graph)
    assert recall.invoke({}) == ("invalid arguments for mem_recall: query: Field required. It takes (query: string, "
                                 "k: integer = 5).")
    assert remember.invoke({"text": 5}) == (
        "invalid arguments for mem_remember: text: Input should be a valid string (got 5). It takes (text: string, "
        'kind: string = "fact", supersedes: string | null = null).')
    assert "refresh: Input should be a valid boolean" in card.invoke({"refresh": "often"})
    # as a model's tool call: a ToolMessage with the message and status "error"
    reply = recall.invoke({"type": "tool_call", "id": "call-1", "name": "mem_recall", "args": {"k": 2}})
    assert reply.status == "error" and reply.content.startswith("invalid arguments for mem_recall: query: Field "
                                                                "required")
    assert _state(memory.graph) == before


@pytest.mark.parametrize("confirm", ["true", "True", 1, 1.0, "yes", None, [True]])
def test_forget_erases_only_with_the_boolean_true(memory, confirm):
    remember, _, _, forget = memory_tools(memory, user="zhang")
    remember.invoke({"text": "Zhang drinks green tea"})
    before = _state(memory.graph)
    reply = forget.invoke({"confirm": confirm})
    assert reply.startswith("invalid arguments for forget: confirm: Input should be a valid boolean")
    assert _state(memory.graph) == before and len(memory.memories("zhang")) == 1
    assert forget.invoke({"confirm": True})["erased"] is True and memory.memories("zhang") == []


def test_a_read_only_memory_gets_recall_and_card_only(tmp_path):
    path = str(tmp_path / "memory")
    writer = vg.Memory.open(path, embedder=FakeEmbedder())
    writer.remember("zhang", "Zhang drinks green tea")
    writer.close()
    reader = vg.Memory.open(path, embedder=FakeEmbedder(), read_only=True)
    try:
        tools = memory_tools(reader, user="zhang")
        assert [t.name for t in tools] == ["recall", "card"]
        recall, card = tools
        assert [h["text"] for h in recall.invoke({"query": "what does Zhang drink?"})] == ["Zhang drinks green tea"]
        assert card.invoke({"refresh": True})["memories"] == 1  # built, not stored
        assert "card:zhang" not in reader.graph
    finally:
        reader.close()


# ------------------------------------------------------------------ packaging and README


def test_a_missing_langchain_core_names_the_extra():
    code = ("import sys; sys.modules['langchain_core'] = None\n"
            "try:\n    import vecgraph.integrations.langchain\nexcept ImportError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True,
                          env=dict(os.environ))
    assert 'pip install "vecgraph[langchain]"' in done.stdout, done.stdout + done.stderr


def _readme_block() -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index("### LangChain"):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_example_runs(capsys):
    namespace: dict = {"__name__": "readme"}  # the block imports what it uses
    exec(compile(_readme_block(), "README.md (LangChain)", "exec"), namespace)  # noqa: S102 - the README's own code
    store, people, doc = namespace["store"], namespace["people"], namespace["doc"]
    assert sorted(store.graph.keys()) == ["acme", "alice", "bob"]
    assert store.get_by_ids(["bob"])[0].page_content == "Bob, head of sales at ACME"
    assert sorted(d.id for d in people) == ["alice", "bob"] and doc.id == "acme"
    assert namespace["cosine"] == pytest.approx(1.0, abs=1e-3)
    lines = capsys.readouterr().out.splitlines()
    assert len(lines) == 4 and {line.split()[0] for line in lines[:3]} == {"acme", "alice", "bob"}
    assert "Prefers answers in French" in lines[3]
