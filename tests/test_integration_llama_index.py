"""vecgraph.integrations.llama_index: the vector store through LlamaIndex's own index and
retrievers, metadata filters against LlamaIndex's reference filter, deletes, upserts, a folder
reopened, bad input refused with nothing written, the hybrid retriever, QueryFusionRetriever
over both, and the README's example. Offline: a hashed bag-of-words embedding, no LLM call, and
any connection to another host than 127.0.0.1 fails the test."""

from __future__ import annotations

import asyncio
import re
import socket
import subprocess
import sys
import zlib
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import vecgraph as vg
from llama_index.core import Document, Settings, StorageContext, VectorStoreIndex
from llama_index.core.embeddings import BaseEmbedding
from llama_index.core.llms import MockLLM
from llama_index.core.node_parser import SentenceSplitter
from llama_index.core.retrievers import QueryFusionRetriever
from llama_index.core.schema import NodeRelationship, QueryBundle, RelatedNodeInfo, TextNode
from llama_index.core.vector_stores.types import (
    FilterCondition,
    FilterOperator,
    MetadataFilter,
    MetadataFilters,
    VectorStoreQuery,
    VectorStoreQueryMode,
)
from llama_index.core.vector_stores.utils import build_metadata_filter_fn, node_to_metadata_dict
from vecgraph.integrations.llama_index import (
    VecgraphEmbedding,
    VecgraphRetriever,
    VecgraphVectorStore,
    split_filters,
)

README = Path(__file__).resolve().parent.parent / "README.md"
DIM = 64


class HashEmbedding(BaseEmbedding):
    """Deterministic, offline: each lowercase word adds 1 to bucket crc32(word) % 64 (plus 0.01
    everywhere, so that no vector is zero), normalised."""

    def _vector(self, text: str) -> list[float]:
        v = np.full(DIM, 0.01)
        for word in re.findall(r"\w+", text.lower()):
            v[zlib.crc32(word.encode()) % DIM] += 1.0
        return (v / np.linalg.norm(v)).tolist()

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._vector(text)

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._vector(query)


class NoCallLLM(MockLLM):
    """An LLM that fails the test when called."""

    def complete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError(f"an LLM was called: {prompt[:80]!r}")

    async def acomplete(self, prompt: str, formatted: bool = False, **kwargs: Any) -> Any:
        raise AssertionError(f"an LLM was called: {prompt[:80]!r}")


EMBED = HashEmbedding()
DOCS = [
    ("weather", "Rain and thunderstorms are expected over the coast tomorrow afternoon.", 2021),
    ("widget", "The A7-Pro widget costs 99 dollars and ships in a blue box.", 2024),
    ("acme", "ACME Corp manufactures widgets at its factory in Ohio.", 2019),
    ("python", "Python lists grow by over-allocation so appends are amortised constant time.", 2023),
    ("cooking", "Simmer the tomato sauce slowly with garlic, basil and olive oil.", 2020),
]


@pytest.fixture(autouse=True)
def offline(monkeypatch):
    """No network but 127.0.0.1, and LlamaIndex's global LLM and embedding model are mocks."""
    real_connect = socket.socket.connect

    def connect(self, address):
        host = address[0] if isinstance(address, tuple) else address
        if self.family in (socket.AF_INET, socket.AF_INET6) and host not in ("127.0.0.1", "::1", "localhost"):
            raise AssertionError(f"a test tried to reach {address!r}")
        return real_connect(self, address)

    monkeypatch.setattr(socket.socket, "connect", connect)
    saved = (Settings._llm, Settings._embed_model)
    Settings.llm = NoCallLLM()
    Settings.embed_model = EMBED
    yield
    Settings._llm, Settings._embed_model = saved


def _documents() -> list[Document]:
    return [Document(text=text, metadata={"topic": name, "year": year}, id_=f"doc-{name}")
            for name, text, year in DOCS]


def _index(store: VecgraphVectorStore) -> VectorStoreIndex:
    return VectorStoreIndex.from_documents(_documents(), storage_context=StorageContext.from_defaults(vector_store=store),
                                           embed_model=EMBED)


def _cos(a: Any, b: Any) -> float:
    a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
    return float(a @ b / np.linalg.norm(a) / np.linalg.norm(b))


# ------------------------------------------------------------------------------------ the index

def test_vector_store_index_retrieves_the_expected_node_with_its_cosine():
    store = VecgraphVectorStore()
    index = _index(store)
    assert len(store.graph) == 5 and store.graph.dim == DIM and store.graph.filterable == {"ref_doc_id": "str"}
    hits = index.as_retriever(similarity_top_k=2).retrieve("how much does the widget cost in dollars?")
    assert hits[0].node.ref_doc_id == "doc-widget" and len(hits) == 2
    best = hits[0]
    assert best.node.get_content() == DOCS[1][1]
    assert best.node.metadata == {"topic": "widget", "year": 2024}
    assert best.node.relationships[NodeRelationship.SOURCE].node_id == "doc-widget"
    expected = _cos(EMBED.get_query_embedding("how much does the widget cost in dollars?"), EMBED.get_text_embedding(
        best.node.get_content(metadata_mode="embed")))
    assert best.score == pytest.approx(expected, abs=0.01)  # int8 codes: within 1% of the float cosine
    assert hits[0].score > hits[1].score
    # The same question as a VectorStoreQuery: ids, similarities and nodes line up.
    res = store.query(VectorStoreQuery(query_embedding=EMBED.get_query_embedding("thunderstorms on the coast"),
                                       similarity_top_k=3))
    assert res.ids[0] == res.nodes[0].node_id and res.nodes[0].ref_doc_id == "doc-weather"
    assert len(res.ids) == len(res.similarities) == 3 and res.similarities == sorted(res.similarities, reverse=True)


def test_text_search_and_hybrid_modes():
    store = VecgraphVectorStore()
    _index(store)
    text = store.query(VectorStoreQuery(query_str="garlic basil", mode=VectorStoreQueryMode.TEXT_SEARCH,
                                        similarity_top_k=3))
    assert [n.ref_doc_id for n in text.nodes] == ["doc-cooking"]  # only one text has the words
    bm25 = store.graph.hybrid_search("garlic basil", channels=["bm25"]).channel_scores["bm25"]
    assert text.similarities == pytest.approx([bm25[0]]) and bm25[0] > 0  # the raw BM25 score
    question = "A7-Pro widget dollars"
    vector = EMBED.get_query_embedding(question)
    hybrid = store.query(VectorStoreQuery(query_str=question, query_embedding=vector,
                                          mode=VectorStoreQueryMode.HYBRID, similarity_top_k=2))
    assert hybrid.nodes[0].ref_doc_id == "doc-widget" and hybrid.similarities[0] == pytest.approx(2.0)  # top of both
    # alpha 1: the dense ranking; alpha 0: the BM25 ranking.
    dense = store.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=5))
    only_dense = store.query(VectorStoreQuery(query_str=question, query_embedding=vector, alpha=1.0,
                                              mode=VectorStoreQueryMode.HYBRID, similarity_top_k=5))
    assert only_dense.ids == dense.ids
    only_bm25 = store.query(VectorStoreQuery(query_str=question, query_embedding=vector, alpha=0.0,
                                             mode=VectorStoreQueryMode.HYBRID, similarity_top_k=5))
    assert only_bm25.ids == store.query(VectorStoreQuery(query_str=question, similarity_top_k=5,
                                                         mode=VectorStoreQueryMode.TEXT_SEARCH)).ids
    with pytest.raises(vg.InvalidArgumentError, match="'mmr' is not supported"):
        store.query(VectorStoreQuery(query_embedding=vector, mode=VectorStoreQueryMode.MMR))
    with pytest.raises(vg.InvalidArgumentError, match="alpha must be in"):
        store.query(VectorStoreQuery(query_str="x", query_embedding=vector, alpha=1.5, mode="hybrid"))
    with pytest.raises(vg.InvalidArgumentError, match="needs query_str"):
        store.query(VectorStoreQuery(query_embedding=vector, mode=VectorStoreQueryMode.TEXT_SEARCH))


# ------------------------------------------------------------------------------------ filters

KINDS = ["report", "memo", "note"]


@pytest.fixture(scope="module")
def filtered_store():
    """60 nodes with random vectors; year (int) and kind (str) declared filterable; score
    (float), title (str) and tags (list) only in the props. Some nodes lack year or score."""
    rng = np.random.default_rng(7)
    nodes = []
    for i in range(60):
        metadata: dict = {"kind": KINDS[i % 3], "title": f"Title {i} {'alpha' if i % 4 == 0 else 'beta'}",
                          "tags": ["red", "green", "blue"][: 1 + i % 3] if i % 11 else []}
        if i % 7:
            metadata["year"] = 2000 + i % 25
        if i % 5:
            metadata["score"] = round(float(rng.uniform(0, 10)), 3)
        nodes.append(TextNode(id_=f"n{i}", text=f"node {i}", metadata=metadata,
                              embedding=rng.normal(size=16).tolist()))
    store = VecgraphVectorStore(filterable={"year": int, "kind": str})
    store.add(nodes)
    metadata = {n.node_id: {k: v for k, v in node_to_metadata_dict(n).items() if k != "_node_content"}
                for n in nodes}
    return store, metadata, rng.normal(size=16)


def _reference(store: VecgraphVectorStore, metadata: dict, query: np.ndarray, filters: MetadataFilters, k: int) -> list:
    """Brute force: LlamaIndex's own filter function, then every passing node scored as vecgraph
    scores (both sides int8-quantized, cosine)."""
    admit = build_metadata_filter_fn(lambda key: metadata[key], filters)
    keys = [key for key in metadata if admit(key)]
    if not keys:
        return []
    codes, scales = store.graph.quantized(keys)
    query_codes, query_scale = vg.quantize(np.asarray(query, np.float32)[None])
    rows = codes.astype(np.float64) * scales[:, None]
    q = query_codes[0] * float(query_scale[0])
    scores = rows @ q / np.linalg.norm(rows, axis=1) / np.linalg.norm(q)
    return [keys[i] for i in sorted(range(len(keys)), key=lambda i: -scores[i])[:k]]


def _f(key: str, op: FilterOperator, value: Any) -> MetadataFilter:
    return MetadataFilter(key=key, operator=op, value=value)


FILTER_CASES = {
    "eq declared int": [_f("year", FilterOperator.EQ, 2010)],
    "eq declared str": [_f("kind", FilterOperator.EQ, "memo")],
    "eq props float": [_f("score", FilterOperator.EQ, 0.0)],
    "ne declared": [_f("year", FilterOperator.NE, 2010)],
    "ne props str": [_f("title", FilterOperator.NE, "Title 3 beta")],
    "gt declared": [_f("year", FilterOperator.GT, 2018)],
    "gt declared, real bound": [_f("year", FilterOperator.GT, 2017.5)],
    "gte props": [_f("score", FilterOperator.GTE, 5.0)],
    "lt declared": [_f("year", FilterOperator.LT, 2004)],
    "lte props": [_f("score", FilterOperator.LTE, 2.5)],
    "in declared str": [_f("kind", FilterOperator.IN, ["memo", "note"])],
    "in declared int": [_f("year", FilterOperator.IN, [2001, 2002, 2003])],
    "in declared, empty": [_f("kind", FilterOperator.IN, [])],
    "nin declared": [_f("kind", FilterOperator.NIN, ["memo"])],
    "nin props": [_f("year", FilterOperator.NIN, [2001, 2002])],
    "text_match": [_f("title", FilterOperator.TEXT_MATCH, "alpha")],
    "text_match_insensitive": [_f("title", FilterOperator.TEXT_MATCH_INSENSITIVE, "ALPHA")],
    "contains": [_f("tags", FilterOperator.CONTAINS, "blue")],
    "any": [_f("tags", FilterOperator.ANY, ["green", "blue"])],
    "all": [_f("tags", FilterOperator.ALL, ["red", "green"])],
    "is_empty": [_f("score", FilterOperator.IS_EMPTY, None)],
    "is_empty, empty lists": [_f("tags", FilterOperator.IS_EMPTY, None)],
    "and, declared range and props": [_f("year", FilterOperator.GTE, 2005), _f("year", FilterOperator.LT, 2015),
                                      _f("score", FilterOperator.GT, 3.0)],
    "and, same key and operator twice": [_f("year", FilterOperator.GT, 2003), _f("year", FilterOperator.GT, 2010)],
    "selective, a few nodes": [_f("title", FilterOperator.EQ, "Title 8 alpha")],
}


@pytest.mark.parametrize("condition", [FilterCondition.AND, FilterCondition.OR, FilterCondition.NOT])
@pytest.mark.parametrize("case", list(FILTER_CASES))
def test_metadata_filters_match_llama_index_reference(filtered_store, case, condition):
    store, metadata, query = filtered_store
    filters = MetadataFilters(filters=FILTER_CASES[case], condition=condition)
    for k in (1, 5, 60):
        res = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=k, filters=filters))
        assert res.ids == _reference(store, metadata, query, filters, k), (case, condition, k)
    got = {n.node_id for n in store.get_nodes(filters=filters)}
    assert got == set(_reference(store, metadata, query, filters, 60))


@pytest.mark.parametrize("declared", [False, True])
def test_a_filter_admitting_only_the_farthest_node_finds_it(filtered_store, declared):
    """The filtered-out nearest nodes make the post-filter ask again, down to an exact scan."""
    store, metadata, query = filtered_store
    farthest = _reference(store, metadata, -query, MetadataFilters(filters=[]), 1)[0]
    item = _f("kind", FilterOperator.IN, [metadata[farthest]["kind"]]) if declared else \
        _f("title", FilterOperator.EQ, metadata[farthest]["title"])
    filters = MetadataFilters(filters=[item, _f("title", FilterOperator.TEXT_MATCH, metadata[farthest]["title"])])
    res = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=2, filters=filters))
    assert res.ids == [farthest] and _reference(store, metadata, query, MetadataFilters(filters=[]), 60)[-1] == farthest


@pytest.fixture(scope="module")
def big_store():
    """3,000 nodes (more than search's default max_visited of 2,000), 8-d, text "node i"; the 3
    farthest from the query have tag "far", the rest "near"; rank = i."""
    rng = np.random.default_rng(3)
    n = 3000
    query = rng.normal(size=8)
    vectors = rng.normal(size=(n, 8))
    far = set(np.argsort(vectors @ query / np.linalg.norm(vectors, axis=1))[:3].tolist())
    nodes = [TextNode(id_=f"n{i}", text=f"node {i}", embedding=vectors[i].tolist(),
                      metadata={"tag": "far" if i in far else "near", "rank": i}) for i in range(n)]
    store = VecgraphVectorStore()
    store.add(nodes)
    metadata = {n.node_id: {k: v for k, v in node_to_metadata_dict(n).items() if k != "_node_content"}
                for n in nodes}
    return store, metadata, query, {f"n{i}" for i in far}


def test_a_post_filter_on_more_than_2000_nodes_finds_the_farthest(big_store):
    store, metadata, query, far = big_store
    filters = MetadataFilters(filters=[_f("tag", FilterOperator.EQ, "far")])
    expected = _reference(store, metadata, query, filters, 3)
    assert set(expected) == far
    res = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=3, filters=filters))
    assert res.ids == expected
    # hybrid (dense + BM25 of "node"), BM25 only, and the retriever: the same three nodes
    for mode in (VectorStoreQueryMode.HYBRID, VectorStoreQueryMode.TEXT_SEARCH):
        res = store.query(VectorStoreQuery(query_embedding=query.tolist(), query_str="node", similarity_top_k=3,
                                           filters=filters, mode=mode))
        assert set(res.ids) == far, mode
    hits = VecgraphRetriever(store, similarity_top_k=3, filters=filters, channels=("dense",)).retrieve(
        QueryBundle(query_str="node", embedding=query.tolist()))
    assert {h.node.node_id for h in hits} == far


def test_a_post_filter_admitting_more_than_2000_nodes_returns_them_all(big_store):
    store, metadata, query, _ = big_store
    filters = MetadataFilters(filters=[_f("rank", FilterOperator.GTE, 900)])
    res = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=2100, filters=filters))
    assert res.ids == _reference(store, metadata, query, filters, 2100)
    res = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=2500))
    assert res.ids == _reference(store, metadata, query, MetadataFilters(filters=[]), 2500)


def test_nested_filters_match_the_reference(filtered_store):
    store, metadata, query = filtered_store
    inner = MetadataFilters(filters=[_f("kind", FilterOperator.EQ, "memo"), _f("score", FilterOperator.GT, 6.0)],
                            condition=FilterCondition.OR)
    filters = MetadataFilters(filters=[_f("year", FilterOperator.GTE, 2008), inner])
    res = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=60, filters=filters))
    admit = build_metadata_filter_fn(lambda key: metadata[key], inner)
    expected = [key for key in _reference(store, metadata, query, MetadataFilters(filters=filters.filters[:1]), 60)
                if admit(key)]
    assert res.ids == expected and len(expected) > 3


BEYOND = 2**70  # outside int64: no int property holds it


@pytest.mark.parametrize("condition", [FilterCondition.AND, FilterCondition.OR, FilterCondition.NOT])
@pytest.mark.parametrize("items", [
    [_f("year", FilterOperator.GTE, BEYOND)], [_f("year", FilterOperator.GT, BEYOND)],
    [_f("year", FilterOperator.LT, BEYOND)], [_f("year", FilterOperator.LTE, BEYOND)],
    [_f("year", FilterOperator.GT, -BEYOND)], [_f("year", FilterOperator.LT, -BEYOND)],
    [_f("year", FilterOperator.GTE, 1e30)], [_f("year", FilterOperator.LT, 10**400)],
    [_f("year", FilterOperator.EQ, BEYOND)], [_f("year", FilterOperator.IN, [2001, BEYOND, 2003])],
    [_f("year", FilterOperator.IN, [BEYOND])], [_f("year", FilterOperator.NE, BEYOND)],
    [_f("year", FilterOperator.LT, BEYOND), _f("kind", FilterOperator.EQ, "memo")],
    [_f("year", FilterOperator.LT, BEYOND), _f("year", FilterOperator.GTE, 2010)],
    [_f("kind", FilterOperator.EQ, "memo"), _f("year", FilterOperator.GTE, BEYOND)],
], ids=lambda items: " & ".join(f"{i.key} {i.operator.value} {i.value if not isinstance(i.value, int) or abs(i.value) < 2**80 else 'huge'}"
                                 for i in items))
def test_numbers_outside_int64_on_an_int_property_are_compared(filtered_store, items, condition):
    """LlamaIndex compares them (nothing is >= 2**70, every year is < 2**70); where= cannot take them."""
    store, metadata, query = filtered_store
    filters = MetadataFilters(filters=items, condition=condition)
    for k in (1, 5, 60):
        res = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=k, filters=filters))
        assert res.ids == _reference(store, metadata, query, filters, k), k
    assert {n.node_id for n in store.get_nodes(filters=filters)} == set(_reference(store, metadata, query, filters, 60))


def test_how_numbers_outside_int64_are_decided(filtered_store):
    store, metadata, query = filtered_store
    declared = {"year": "int64", "kind": "str", "price": "float64"}
    with_year = [key for key in metadata if "year" in metadata[key]]
    assert len(with_year) == 51  # i % 7 != 0 for 51 of 60 nodes
    below = MetadataFilters(filters=[_f("year", FilterOperator.LT, BEYOND)])
    assert split_filters(below, declared) == ({"year": {">=": -(2**63)}}, None)  # the key present
    res = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=60, filters=below))
    assert sorted(res.ids) == sorted(with_year)
    above = MetadataFilters(filters=[_f("kind", FilterOperator.EQ, "memo"), _f("year", FilterOperator.GTE, BEYOND)])
    assert split_filters(above, declared) == ({"year": {"in": []}}, None)  # admits nothing
    assert store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=60, filters=above)).ids == []
    some = MetadataFilters(filters=[_f("year", FilterOperator.IN, [2001, BEYOND])])
    assert split_filters(some, declared) == ({"year": {"in": [2001]}}, None)
    # The int64 extremes: nothing is > 2**63 - 1 or < -2**63.
    extremes = VecgraphVectorStore(filterable={"year": int})
    extremes.add([TextNode(id_=str(year), text="x", metadata={"year": year}, embedding=[1.0, 0.0])
                  for year in (2**63 - 1, -(2**63), 0)])
    for op, value, expected in ((FilterOperator.GT, 2**63 - 1, []), (FilterOperator.LT, -(2**63), []),
                                (FilterOperator.GTE, 2**63 - 1, [str(2**63 - 1)]),
                                (FilterOperator.LTE, -(2**63), [str(-(2**63))])):
        filters = MetadataFilters(filters=[_f("year", op, value)])
        assert [n.node_id for n in extremes.get_nodes(filters=filters)] == expected, (op, value)
    # A float property: only numbers float64 holds exactly go into where=; the others are compared after.
    for value in (10**400, 2**53 + 1):
        where, rest = split_filters(MetadataFilters(filters=[_f("price", FilterOperator.LT, value)]), declared)
        assert where is None and rest({"price": 2.0**53}) is (value > 2**53) and not rest({}), value


def test_which_filters_run_inside_the_search():
    declared = {"year": "int64", "kind": "str", "price": "float64"}
    where, rest = split_filters(MetadataFilters(filters=[_f("year", FilterOperator.GTE, 2020),
                                                         _f("year", FilterOperator.LT, 2024.5),
                                                         _f("kind", FilterOperator.IN, ["a", "b"]),
                                                         _f("price", FilterOperator.EQ, 3)]), declared)
    assert where == {"year": {">=": 2020, "<": 2024.5}, "kind": {"in": ["a", "b"]}, "price": {"==": 3}}
    assert rest is None
    # Not expressible by where: NE, a range on a str, a str for an int, an undeclared key, OR.
    for item in (_f("year", FilterOperator.NE, 2020), _f("kind", FilterOperator.GT, "a"),
                 _f("year", FilterOperator.EQ, "2020"), _f("title", FilterOperator.EQ, "x")):
        where, rest = split_filters(MetadataFilters(filters=[item]), declared)
        assert where is None and rest is not None, item
    where, rest = split_filters(MetadataFilters(filters=[_f("year", FilterOperator.EQ, 1), _f("kind", FilterOperator.EQ,
                                                                                             "a")],
                                                condition=FilterCondition.OR), declared)
    assert where is None and rest({"year": 1}) and rest({"kind": "a"}) and not rest({"year": 2, "kind": "b"})


def test_node_ids_and_doc_ids_restrict_the_query(filtered_store):
    store, metadata, query = filtered_store
    subset = ["n3", "n10", "n11", "n40", "n59", "missing"]
    res = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=3, node_ids=subset))
    everything = _reference(store, metadata, query, MetadataFilters(filters=[]), 60)
    assert res.ids == [key for key in everything if key in subset][:3]
    filters = MetadataFilters(filters=[_f("kind", FilterOperator.EQ, "report")])
    res = store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=5, node_ids=subset,
                                       filters=filters))
    reports = [key for key in everything if key in subset and metadata[key]["kind"] == "report"]
    assert res.ids == reports and reports == ["n3"]
    assert store.query(VectorStoreQuery(query_embedding=query.tolist(), similarity_top_k=5,
                                        node_ids=[])).ids == everything[:5]  # empty: no restriction
    other = VecgraphVectorStore()
    index = _index(other)
    vector = EMBED.get_query_embedding("widgets")
    res = other.query(VectorStoreQuery(query_embedding=vector, similarity_top_k=5, doc_ids=["doc-acme", "doc-python"]))
    assert sorted(n.ref_doc_id for n in res.nodes) == ["doc-acme", "doc-python"]
    assert index.as_retriever(similarity_top_k=5, doc_ids=["doc-cooking"]).retrieve("widgets")[0].node.ref_doc_id == \
        "doc-cooking"


# ------------------------------------------------------------------------------------ writes

def test_delete_by_ref_doc_id_and_other_deletes():
    store = VecgraphVectorStore()
    index = _index(store)
    index.delete_ref_doc("doc-widget")
    assert len(store.graph) == 4 and not store._document_keys(["doc-widget"])
    hits = index.as_retriever(similarity_top_k=5).retrieve("A7-Pro widget dollars")
    assert "doc-widget" not in {h.node.ref_doc_id for h in hits} and len(hits) == 4
    store.delete("no-such-document")  # not an error
    store.delete_nodes(filters=MetadataFilters(filters=[_f("year", FilterOperator.LT, 2021)]))
    assert sorted(n.ref_doc_id for n in store.get_nodes()) == ["doc-python", "doc-weather"]
    store.delete_nodes(node_ids=[store.get_nodes()[0].node_id, "missing"])
    assert len(store.graph) == 1
    with pytest.raises(vg.InvalidArgumentError, match="needs node_ids or filters"):
        store.delete_nodes()
    store.clear()
    assert len(store.graph) == 0 and store.query(VectorStoreQuery(query_embedding=[1.0] * DIM)).ids == []


def test_delete_on_a_graph_without_the_ref_doc_id_column():
    graph = vg.Graph(DIM)  # given by the caller: nothing declared filterable, props scanned
    store = VecgraphVectorStore(graph=graph)
    _index(store)
    graph.add_nodes(["plain"], np.ones((1, DIM), np.float32), texts=["written by vecgraph itself"])
    store.delete("doc-acme")
    assert len(graph) == 5 and "plain" in graph
    assert {n.node_id for n in store.get_nodes(node_ids=["plain"])} == {"plain"}
    assert store.get_nodes(node_ids=["plain"])[0].get_content() == "written by vecgraph itself"


def test_upsert_replaces_a_node_and_the_last_of_a_batch_wins():
    store = VecgraphVectorStore()
    first = TextNode(id_="n1", text="zebra stripes", metadata={"v": 1}, embedding=[1.0, 0.0, 0.0, 0.0])
    store.add([first, TextNode(id_="n2", text="other", embedding=[0.0, 1.0, 0.0, 0.0])])
    store.add([TextNode(id_="n1", text="giraffe necks", metadata={"v": 2}, embedding=[0.0, 0.0, 1.0, 0.0])])
    assert len(store.graph) == 2
    res = store.query(VectorStoreQuery(query_embedding=[0.0, 0.0, 1.0, 0.0], similarity_top_k=1))
    assert res.ids == ["n1"] and res.nodes[0].get_content() == "giraffe necks" and res.nodes[0].metadata == {"v": 2}
    assert res.similarities[0] == pytest.approx(1.0, abs=1e-6)
    assert store.query(VectorStoreQuery(query_str="zebra", mode="text_search")).ids == []  # the old text is gone
    ids = store.add([TextNode(id_="n3", text="a", embedding=[1.0, 1.0, 0.0, 0.0]),
                     TextNode(id_="n3", text="b", embedding=[0.0, 1.0, 1.0, 0.0])])
    assert ids == ["n3", "n3"] and store.get_nodes(node_ids=["n3"])[0].get_content() == "b"


def test_chunk_relationships_become_edges_the_graph_channel_walks():
    text = " ".join(f"Paragraph {i} is about {topic}." for i, topic in
                    enumerate(["volcanoes and lava", "migrating geese", "sourdough starters", "tidal pools",
                               "glass blowing", "chess openings"] * 4))
    splitter = SentenceSplitter(chunk_size=40, chunk_overlap=0)
    store = VecgraphVectorStore()
    index = VectorStoreIndex.from_documents([Document(text=text, id_="long")], embed_model=EMBED,
                                            transformations=[splitter],
                                            storage_context=StorageContext.from_defaults(vector_store=store))
    chunks = store.get_nodes()
    assert len(chunks) >= 4
    following = {n.node_id: n.relationships[NodeRelationship.NEXT].node_id for n in chunks
                 if NodeRelationship.NEXT in n.relationships}
    edges = {(e.src, e.dst) for n in chunks for e in store.graph.neighbors(n.node_id, rels=["next"])}
    assert edges == set(following.items()) and len(edges) == len(chunks) - 1
    again = [c.model_copy(update={"embedding": EMBED.get_text_embedding(c.get_content())}) for c in chunks[:2]]
    store.add(again)
    assert store.graph.count_edges == len(chunks) - 1  # upserting linked nodes adds no edge twice
    walk = VecgraphRetriever(index.vector_store, embed_model=EMBED, similarity_top_k=3, channels=["graph"], hops=1,
                             seeds=1)
    best = store.query(VectorStoreQuery(query_embedding=EMBED.get_query_embedding(chunks[2].get_content()),
                                        similarity_top_k=1)).ids[0]
    neighbours = {following.get(best)} | {k for k, v in following.items() if v == best}
    hits = walk.retrieve(chunks[2].get_content())
    assert {h.node.node_id for h in hits} == neighbours - {None} and len(hits) in (1, 2)


# ------------------------------------------------------------------------------------ folders

def test_a_folder_store_is_there_after_a_reopen(tmp_path):
    path = tmp_path / "docs.vg"
    store = VecgraphVectorStore(path, filterable={"year": int})
    assert store.graph is None and not path.exists()  # created at the first add, with its dim
    index = _index(store)
    question = "the ACME Corp factory in Ohio"
    before = index.as_retriever(similarity_top_k=3).retrieve(question)
    index.storage_context.persist(persist_dir=str(tmp_path / "storage"))  # checkpoints the folder
    store.close()
    reopened = VecgraphVectorStore(path, filterable={"year": int})
    assert reopened.graph is not None and len(reopened.graph) == 5
    assert reopened.graph.filterable == {"year": "int64", "ref_doc_id": "str"}
    again = VectorStoreIndex.from_vector_store(reopened, embed_model=EMBED).as_retriever(similarity_top_k=3)
    after = again.retrieve(question)
    assert [h.node.node_id for h in after] == [h.node.node_id for h in before]
    assert [h.score for h in after] == pytest.approx([h.score for h in before])
    assert after[0].node.ref_doc_id == "doc-acme" and after[0].node.metadata["year"] == 2019
    reopened.close()
    with pytest.raises(vg.InvalidArgumentError, match="filterable"):
        VecgraphVectorStore(path, filterable={"year": float})


def test_async_methods_give_the_sync_results():
    store = VecgraphVectorStore()
    nodes = [TextNode(id_=f"a{i}", text=f"text {i}", embedding=[float(i == j) + 0.1 for j in range(4)])
             for i in range(4)]

    async def run() -> tuple:
        ids = await store.async_add(nodes)
        found = await store.aquery(VectorStoreQuery(query_embedding=[0.0, 0.0, 1.0, 0.0], similarity_top_k=2))
        await store.adelete_nodes(node_ids=["a0"])
        return ids, found

    ids, found = asyncio.run(run())
    assert ids == ["a0", "a1", "a2", "a3"] and found.ids[0] == "a2" and len(store.graph) == 3


# ------------------------------------------------------------------------------------ bad input

def test_bad_input_is_refused_and_writes_nothing(tmp_path):
    path = tmp_path / "bad.vg"
    store = VecgraphVectorStore(path, filterable={"year": int})
    good = TextNode(id_="ok", text="fine", embedding=[1.0, 0.0, 0.0])
    with pytest.raises(vg.InvalidArgumentError, match="node 'no-vec' has no embedding"):
        store.add([good, TextNode(id_="no-vec", text="x")])
    with pytest.raises(vg.InvalidArgumentError, match="props row 1 \\(key 'typed'\\).*year"):
        store.add([good, TextNode(id_="typed", text="x", metadata={"year": "2020"}, embedding=[0.0, 1.0, 0.0])])
    assert store.graph is None and not path.exists()  # no folder made for a refused first batch
    store.add([good])
    with pytest.raises(vg.DimensionMismatchError, match="node 'wide' has an embedding of shape \\(4,\\).*\\(3,\\)"):
        store.add([TextNode(id_="two", text="y", embedding=[0.0, 1.0, 0.0]),
                   TextNode(id_="wide", text="z", embedding=[1.0, 2.0, 3.0, 4.0])])
    with pytest.raises(vg.InvalidArgumentError, match="node 'nan' has NaN"):
        store.add([TextNode(id_="nan", text="z", embedding=[float("nan"), 0.0, 0.0])])
    with pytest.raises(vg.InvalidArgumentError, match="props row 0 \\(key 'typed'\\)"):
        store.add([TextNode(id_="typed", text="x", metadata={"year": 20.5}, embedding=[0.0, 1.0, 0.0])])
    with pytest.raises(vg.DimensionMismatchError, match="query embedding has shape \\(2,\\)"):
        store.query(VectorStoreQuery(query_embedding=[1.0, 0.0]))
    with pytest.raises(vg.InvalidArgumentError, match="needs a query embedding"):
        store.query(VectorStoreQuery(query_str="fine"))
    with pytest.raises(vg.InvalidArgumentError, match="similarity_top_k must be an int >= 1, got int 0"):
        store.query(VectorStoreQuery(query_embedding=[1.0, 0.0, 0.0], similarity_top_k=0))
    store.close()
    reopened = VecgraphVectorStore(path)
    assert reopened.graph is not None and reopened.graph.keys() == ["ok"]  # the refused batches left nothing
    reopened.close()
    with pytest.raises(vg.InvalidArgumentError, match="give path or graph"):
        VecgraphVectorStore(path, graph=vg.Graph(3))
    with pytest.raises(TypeError, match="sets k"):
        VecgraphRetriever(vg.Graph(3), k=3)


def test_metadata_that_is_not_json_is_refused_naming_the_node_and_key(tmp_path):
    path = tmp_path / "meta.vg"
    store = VecgraphVectorStore(path)
    bad = TextNode(id_="odd", text="x", metadata={"fine": 1, "o": object()}, embedding=[0.0, 1.0, 0.0])
    good = TextNode(id_="ok", text="fine", embedding=[1.0, 0.0, 0.0])
    with pytest.raises(vg.InvalidArgumentError, match=r"node 'odd': metadata\['o'\] is object .*not JSON"):
        store.add([good, bad])
    assert store.graph is None and not path.exists()  # a refused first batch makes no folder
    store.add([good])
    with pytest.raises(vg.InvalidArgumentError, match=r"node 'odd': metadata\['o'\]"):
        store.add([TextNode(id_="two", text="y", embedding=[0.0, 0.0, 1.0]), bad])
    flat = VecgraphVectorStore(graph=store.graph, flat_metadata=True)
    with pytest.raises(vg.InvalidArgumentError, match=r"node 'nested': .*metadata tags must be one of"):
        flat.add([TextNode(id_="nested", text="z", metadata={"tags": ["a"]}, embedding=[0.0, 0.0, 1.0])])
    store.close()
    reopened = VecgraphVectorStore(path)
    assert reopened.graph.keys() == ["ok"] and reopened.get_nodes()[0].get_content() == "fine"
    reopened.close()


def test_a_first_write_that_fails_leaves_no_graph_behind(tmp_path, monkeypatch):
    def refuse(self, *args, **kwargs):
        raise vg.StorageError("the disk is full (simulated)")

    node = TextNode(id_="a", text="x", embedding=[1.0, 0.0])
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(vg.Graph, "upsert_nodes", refuse)
    for path in (tmp_path / "new.vg", empty):
        store = VecgraphVectorStore(path)
        with pytest.raises(vg.StorageError, match="simulated"):
            store.add([node])
        assert store.graph is None
    assert not (tmp_path / "new.vg").exists() and list(empty.iterdir()) == []  # as they were
    monkeypatch.undo()
    assert store.add([node]) == ["a"] and store.graph.path == str(empty) and len(store.graph) == 1
    store.close()


def test_the_module_says_how_to_install_llama_index_when_missing():
    code = ("import sys; sys.modules['llama_index'] = None\n"
            "try:\n    import vecgraph.integrations.llama_index\nexcept ImportError as e:\n    print(e)\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=True)
    assert 'pip install "vecgraph[llama-index]"' in done.stdout


# ------------------------------------------------------------------------------------ retrievers

def test_hybrid_retriever_returns_scored_nodes_and_filters():
    store = VecgraphVectorStore(filterable={"year": int})
    _index(store)
    hits = VecgraphRetriever(store, embed_model=EMBED, similarity_top_k=3).retrieve("A7-Pro price in dollars")
    assert hits[0].node.ref_doc_id == "doc-widget" and hits[0].node.get_content() == DOCS[1][1]
    assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
    fused = store.graph.hybrid_search("A7-Pro price in dollars", vector=EMBED.get_query_embedding(
        "A7-Pro price in dollars"), k=3)
    assert [h.node.node_id for h in hits] == fused.keys and [h.score for h in hits] == pytest.approx(
        list(fused.scores))
    old = MetadataFilters(filters=[_f("year", FilterOperator.LT, 2021), _f("topic", FilterOperator.NE, "acme")])
    hits = VecgraphRetriever(store, embed_model=EMBED, filters=old).retrieve("widgets factory sauce")
    assert [h.node.ref_doc_id for h in hits] == ["doc-cooking"]
    text_only = VecgraphRetriever(store.graph, similarity_top_k=2).retrieve("Ohio factory")  # no embed model
    assert text_only[0].node.ref_doc_id == "doc-acme"


def test_query_fusion_retriever_over_both_calls_no_llm():
    store = VecgraphVectorStore()
    index = _index(store)
    ours = VecgraphRetriever(store, embed_model=EMBED, similarity_top_k=3)
    dense = index.as_retriever(similarity_top_k=3)
    fusion = QueryFusionRetriever([ours, dense], llm=NoCallLLM(), mode="reciprocal_rerank", num_queries=1,
                                  similarity_top_k=3, use_async=False)
    question = "thunderstorms and rain on the coast"
    hits = fusion.retrieve(question)
    expected: dict = {}
    for results in (ours.retrieve(question), dense.retrieve(question)):
        for rank, hit in enumerate(sorted(results, key=lambda h: h.score or 0.0, reverse=True)):
            expected[hit.node.node_id] = expected.get(hit.node.node_id, 0.0) + 1.0 / (60 + rank)
    assert hits[0].node.ref_doc_id == "doc-weather" and hits[0].score == pytest.approx(2 / 60)
    assert {h.node.node_id: h.score for h in hits} == pytest.approx(
        dict(sorted(expected.items(), key=lambda kv: -kv[1])[:3]))


def test_tenant_scoped_stores_share_one_graph():
    graph = vg.Graph(4, filterable={"ref_doc_id": str})
    alice, bob = VecgraphVectorStore(graph=graph, tenant="alice"), VecgraphVectorStore(graph=graph, tenant="bob")
    alice.add([TextNode(id_="a1", text="alice's note", embedding=[1.0, 0.0, 0.0, 0.0])])
    bob.add([TextNode(id_="b1", text="bob's note", embedding=[1.0, 0.1, 0.0, 0.0])])
    query = VectorStoreQuery(query_embedding=[1.0, 0.0, 0.0, 0.0], similarity_top_k=5)
    assert alice.query(query).ids == ["a1"] and bob.query(query).ids == ["b1"]
    assert [h.node.node_id for h in VecgraphRetriever(bob, similarity_top_k=5).retrieve("note")] == ["b1"]
    alice.clear()
    assert graph.keys() == ["b1"]


@pytest.mark.parametrize("in_folder", [False, True])
def test_a_tenant_store_refuses_an_id_another_tenant_holds(tmp_path, in_folder):
    """Node ids are global to the graph: bob's note-1 would replace alice's."""
    path = tmp_path / "shared.vg"
    alice = VecgraphVectorStore(path, tenant="alice") if in_folder else VecgraphVectorStore(graph=vg.Graph(4),
                                                                                            tenant="alice")
    alice.add([TextNode(text="alice private note", id_="note-1", metadata={"v": 1}, embedding=[1.0, 0.0, 0.0, 0.0])])
    graph = alice.graph
    bob = VecgraphVectorStore(graph=graph, tenant="bob")
    with pytest.raises(vg.InvalidArgumentError,
                       match=r"node id 'note-1' is a node of tenant 'alice'.*'bob'.*global to the graph"):
        bob.add([TextNode(text="bob's first", id_="b-1", embedding=[0.0, 0.0, 1.0, 0.0]),
                 TextNode(text="bob note", id_="note-1", embedding=[0.0, 1.0, 0.0, 0.0])])
    node = graph.get_node("note-1")
    assert graph.keys() == ["note-1"] and (node["tenant"], node["text"]) == ("alice", "alice private note")
    assert node["vector"] == pytest.approx([1.0, 0.0, 0.0, 0.0], abs=0.01)
    assert [n.metadata for n in alice.get_nodes()] == [{"v": 1}]
    bob.add([TextNode(text="bob's first", id_="b-1", embedding=[0.0, 0.0, 1.0, 0.0])])
    bob.add([TextNode(text="bob's first, edited", id_="b-1", embedding=[0.0, 0.0, 1.0, 0.0])])  # its own: upsert
    assert graph.get_node("b-1", vector=False)["text"] == "bob's first, edited"
    if in_folder:
        alice.close()
        reopened = VecgraphVectorStore(path)
        assert reopened.graph.keys() == ["note-1", "b-1"]
        assert reopened.graph.get_node("note-1", vector=False)["tenant"] == "alice"
        assert reopened.get_nodes(node_ids=["note-1"])[0].get_content() == "alice private note"
        reopened.close()


def test_relationships_to_another_tenants_node_make_no_edge():
    graph = vg.Graph(4)
    alice, bob = VecgraphVectorStore(graph=graph, tenant="alice"), VecgraphVectorStore(graph=graph, tenant="bob")
    alice.add([TextNode(id_="a-1", text="alice one", embedding=[1.0, 0.0, 0.0, 0.0])])
    b1 = TextNode(id_="b-1", text="bob one", embedding=[0.0, 1.0, 0.0, 0.0])
    b2 = TextNode(id_="b-2", text="bob two", embedding=[0.0, 0.0, 1.0, 0.0])
    b1.relationships[NodeRelationship.NEXT] = b2.as_related_node_info()
    b1.relationships[NodeRelationship.PREVIOUS] = RelatedNodeInfo(node_id="a-1")
    b2.relationships[NodeRelationship.PARENT] = RelatedNodeInfo(node_id="a-1")
    bob.add([b1, b2])
    a2 = TextNode(id_="a-2", text="alice two", embedding=[0.0, 0.0, 0.0, 1.0])
    a2.relationships[NodeRelationship.CHILD] = [RelatedNodeInfo(node_id="b-1"), RelatedNodeInfo(node_id="a-1")]
    alice.add([a2])
    keys = graph.keys()
    edges = {(e.src, e.rel, e.dst) for key in keys for e in graph.neighbors(key, direction="out")}
    assert edges == {("b-1", "next", "b-2"), ("a-1", "parent", "a-2")}  # only within a tenant


def test_deletes_and_reads_of_a_tenant_store_leave_other_tenants_alone():
    graph = vg.Graph(4, filterable={"ref_doc_id": str})
    alice, bob = VecgraphVectorStore(graph=graph, tenant="alice"), VecgraphVectorStore(graph=graph, tenant="bob")
    default = VecgraphVectorStore(graph=graph, tenant="")

    def node(key: str, kind: str, vector: list) -> TextNode:
        made = TextNode(id_=key, text=f"{key} text", metadata={"kind": kind}, embedding=vector)
        made.relationships[NodeRelationship.SOURCE] = RelatedNodeInfo(node_id="doc-x")
        return made

    alice.add([node("a1", "memo", [1.0, 0.0, 0.0, 0.0]), node("a2", "note", [0.0, 1.0, 0.0, 0.0])])
    bob.add([node("b1", "memo", [1.0, 0.1, 0.0, 0.0]), node("b2", "note", [0.0, 1.0, 0.1, 0.0]),
             node("b3", "memo", [0.0, 0.0, 1.0, 0.0])])
    default.add([node("d1", "memo", [0.0, 0.0, 0.0, 1.0])])
    memo = MetadataFilters(filters=[_f("kind", FilterOperator.EQ, "memo")])
    assert [n.node_id for n in bob.get_nodes(node_ids=["a1", "b1", "d1"])] == ["b1"]
    assert [n.node_id for n in bob.get_nodes(filters=memo)] == ["b1", "b3"]
    assert bob.query(VectorStoreQuery(query_embedding=[1.0, 0.0, 0.0, 0.0], node_ids=["a1", "d1"])).ids == []
    bob.delete_nodes(node_ids=["a1", "a2", "d1", "b3"])
    assert graph.keys() == ["a1", "a2", "b1", "b2", "d1"]
    bob.delete_nodes(filters=memo)
    assert graph.keys() == ["a1", "a2", "b2", "d1"]
    bob.delete("doc-x")
    assert graph.keys() == ["a1", "a2", "d1"]
    bob.add([node("b4", "memo", [0.0, 0.0, 1.0, 0.0])])
    bob.clear()
    assert graph.keys() == ["a1", "a2", "d1"]
    default.clear()  # the default tenant "" is a tenant too
    assert graph.keys() == ["a1", "a2"] and [n.node_id for n in alice.get_nodes()] == ["a1", "a2"]
    assert [graph.get_node(k, vector=False)["text"] for k in ("a1", "a2")] == ["a1 text", "a2 text"]


# ------------------------------------------------------------------------------------ README

def _readme_example() -> str:
    text = README.read_text(encoding="utf-8")
    section = text.split("### LlamaIndex", 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    code = _readme_example()
    assert "VecgraphVectorStore" in code and "VecgraphRetriever" in code
    namespace: dict = {}
    exec(compile(code, "README.md", "exec"), namespace)  # noqa: S102  (the README example, as a user runs it)
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].startswith("The A7-Pro widget costs 99 dollars.") and len(lines) == 2  # filtered: 1 hit
    assert lines[1].startswith("[('The A7-Pro widget costs 99 dollars.'")
    graph = namespace["store"].graph  # closed by the example; what it held when it ended:
    assert [row["text"] for row in graph.nodes(columns=["text"]).to_pylist()] == \
        ["The A7-Pro widget costs 99 dollars."]  # one document deleted
    assert list(tmp_path.iterdir()) == []  # nothing written to disk


def test_vecgraph_embedding_is_the_vecgraph_embedder():
    embedding = VecgraphEmbedding("wordllama")
    vector = embedding.get_query_embedding("a widget")
    assert len(vector) == embedding.dim == 256 and embedding.model_name == embedding.embedder.name
    assert vector == pytest.approx(embedding.embedder(["a widget"])[0].tolist())
    assert embedding.get_text_embedding_batch(["a", "b"])[1] == pytest.approx(embedding.embedder(["b"])[0].tolist())
