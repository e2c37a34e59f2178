"""vecgraph.KnowledgeBase end to end: documents, chunks, metadata, entities, bad input, reopen."""

from __future__ import annotations

import os

import numpy as np
import pytest
import vecgraph as vg
from kb_helpers import Words
from vecgraph.errors import InvalidArgumentError, NotFoundError, ReadOnlyError
from vecgraph.kb import Chunker, Extraction, HookError, KnowledgeBase, default_contextualizer
from vecgraph.kb.extract import EntityResolver, RuleExtractor, entity_key
from vecgraph.kb.results import metadata_line

BILLING = """# Billing service

The billing-job runs every night. It reads invoices from the ledger-db and sends them
to the payment-gateway.

## Dependencies

The billing-job depends on the ledger-db for invoices. When the ledger-db is down the
billing-job retries three times.

## Owners

The billing-job belongs to the Payments Team. The Payments Team also owns the payment-gateway.
"""

SEARCH = """# Search service

The search-api answers queries from the web-frontend. It keeps its index in the ledger-db
replica and caches results in redis-cache.

## Operations

The search-api is deployed twice a week by the Platform Team. The redis-cache is flushed after
each deployment of the search-api.
"""

NOTES = """Release notes

The web-frontend moved to the new design in March. The web-frontend talks to the search-api only.

The payment-gateway gained a retry queue.
"""


@pytest.fixture
def docs(tmp_path):
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "billing.md").write_text(BILLING)
    (folder / "search.md").write_text(SEARCH)
    (folder / "notes.txt").write_text(NOTES)
    return folder


def open_kb(path, **options):
    options.setdefault("embedder", Words())
    options.setdefault("chunker", Chunker(max_tokens=64, overlap_tokens=8))
    return KnowledgeBase.open(path, **options)


def test_documents_become_document_section_and_chunk_nodes(tmp_path, docs):
    with open_kb(tmp_path / "kb.vg") as kb:
        report = kb.add_documents(docs, version="1.0", date="2024-01-31", progress=False)
        assert sorted(os.path.basename(s) for s in report.added) == ["billing.md", "notes.txt", "search.md"]
        assert report.replaced == [] and report.skipped == []
        g = kb.graph
        docs_meta = {os.path.basename(d["source"]): d for d in kb.documents()}
        assert docs_meta["billing.md"]["title"] == "Billing service"
        assert docs_meta["billing.md"]["version"] == "1.0" and docs_meta["billing.md"]["date"] == "2024-01-31"
        billing = docs_meta["billing.md"]["key"]
        sections = [e.src for e in g.neighbors(billing, rels=["part_of"], direction="in")]
        headings = sorted(g.get_node(s, vector=False)["text"] for s in sections)
        assert headings == ["Billing service", "Billing service > Dependencies", "Billing service > Owners"]
        chunks = sorted(
            (k for k in g.keys(labels=["chunk"]) if k.startswith(billing + "#")),
            key=lambda k: int(k.rsplit("#c", 1)[1]),
        )
        assert report.chunks == len(g.keys(labels=["chunk"]))
        for a, b in zip(chunks, chunks[1:]):  # next edges chain the document's chunks in order
            assert [e.dst for e in g.neighbors(a, rels=["next"])] == [b]
        assert g.neighbors(chunks[-1], rels=["next"]) == []
        node = g.get_node(chunks[0], vector=False)
        props = node["props"]
        assert (
            props["status"] == "current" and props["version"] == "1.0" and props["title"] == "Billing service"
        )
        assert node["ts"] == 1706659200 * 1_000_000
        # the prefix is indexed with the chunk and kept apart from it in results
        assert props["prefix"] == "Billing service"
        assert node["text"] == props["prefix"] + "\n\n" + node["text"][props["body_start"] :]
        hit = kb.search("billing-job runs every night", 3).chunks[0]
        assert hit.key == chunks[0]
        assert hit.prefix == "Billing service" and hit.text.startswith("The billing-job runs every night.")
        assert metadata_line(hit) == f"[{hit.source} v1.0 | 2024-01-31 | current]"


def test_readding_unchanged_and_changed_documents(tmp_path, docs):
    with open_kb(tmp_path / "kb.vg") as kb:
        kb.add_documents(docs, progress=False)
        before = len(kb.graph)
        again = kb.add_documents(docs, progress=False)
        assert len(again.unchanged) == 3 and again.added == [] and len(kb.graph) == before
        (docs / "notes.txt").write_text(NOTES + "\nThe ledger-db was upgraded to version 16 in April.\n")
        changed = kb.add_documents(docs, progress=False)
        assert [os.path.basename(s) for s in changed.replaced] == ["notes.txt"] and len(
            changed.unchanged
        ) == 2
        texts = [kb.graph.get_node(k, vector=False)["text"] for k in kb.graph.keys(labels=["chunk"])]
        assert sum("upgraded to version 16" in t for t in texts) == 1
        assert sum("gained a retry queue" in t for t in texts) == 1  # the old copy's chunks are gone


def test_versions_and_status_history_and_context(tmp_path):
    with open_kb(tmp_path / "kb.vg") as kb:
        kb.add_text(
            "# Guide\n\nThe api-timeout is 30 seconds.",
            source="guide",
            version="2.0",
            date="2023-05-01",
            status="deprecated",
        )
        kb.add_text(
            "# Guide\n\nThe api-timeout is 60 seconds.", source="guide", version="3.0", date="2024-01-01"
        )
        current = kb.search("api-timeout seconds", 5)
        assert [h.version for h in current.chunks] == ["3.0"]
        both = kb.search("api-timeout seconds", 5, history=True)
        assert sorted(h.version for h in both.chunks) == ["2.0", "3.0"]
        context = both.to_context(500)
        assert "[guide v3.0 | 2024-01-01 | current] Guide" in context
        assert "[guide v2.0 | 2023-05-01 | deprecated] Guide" in context
        assert kb.set_status("guide", "deprecated", version="3.0") == 1
        assert kb.search("api-timeout seconds", 5).chunks == []
        with pytest.raises(NotFoundError, match="no document of source 'nope'"):
            kb.set_status("nope", "current")


def _state(kb):
    return len(kb.graph), kb.graph.count_edges, kb.graph.stats()["last_lsn"]


def test_bad_input_names_the_file_and_writes_nothing(tmp_path, docs):
    with open_kb(tmp_path / "kb.vg") as kb:
        kb.add_documents(docs / "billing.md", progress=False)
        state = _state(kb)
        missing = docs / "missing.md"
        with pytest.raises(NotFoundError, match="missing.md"):
            kb.add_documents([docs / "search.md", missing], progress=False)
        assert _state(kb) == state
        binary = docs / "image.md"
        binary.write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR" + bytes(range(256)))
        with pytest.raises(InvalidArgumentError, match="image.md"):
            kb.add_documents([docs / "search.md", binary], progress=False)
        empty = docs / "empty.md"
        empty.write_text("   \n\n")
        with pytest.raises(InvalidArgumentError, match="empty.md"):
            kb.add_documents(empty, progress=False)
        assert _state(kb) == state
        report = kb.add_documents(
            [docs / "search.md", binary, empty, missing], on_error="skip", progress=False
        )
        assert [os.path.basename(s) for s in report.added] == ["search.md"]
        assert sorted(os.path.basename(p) for p, _ in report.skipped) == [
            "empty.md",
            "image.md",
            "missing.md",
        ]


def test_a_hook_that_raises_or_returns_the_wrong_shape_is_named(tmp_path, docs):
    def broken(document, chunk):
        raise RuntimeError("model unavailable")

    with open_kb(tmp_path / "a.vg", contextualizer=broken) as kb:
        state = _state(kb)
        with pytest.raises(HookError, match="contextualizer.*model unavailable"):
            kb.add_documents(docs, progress=False)
        assert _state(kb) == state
    with open_kb(tmp_path / "b.vg", contextualizer=lambda d, c: 42) as kb:
        with pytest.raises(InvalidArgumentError, match="contextualizer.*int"):
            kb.add_documents(docs, progress=False)
        assert kb.stats()["chunk"] == 0
    with open_kb(tmp_path / "c.vg", extractor=lambda text: {"people": []}) as kb:
        with pytest.raises(InvalidArgumentError, match="extractor"):
            kb.add_documents(docs, progress=False)
        assert kb.stats()["chunk"] == 0


def test_rule_extractor_entities_mentions_and_resolution(tmp_path, docs):
    with open_kb(tmp_path / "kb.vg") as kb:
        report = kb.add_documents(docs, progress=False)
        g = kb.graph
        entities = {g.get_node(k, vector=False)["props"]["name"] for k in g.keys(labels=["entity"])}
        # proposed by two chunks or more ("Payments Team" and "Platform Team": one chunk each)
        assert entities == {
            "billing-job",
            "ledger-db",
            "payment-gateway",
            "redis-cache",
            "search-api",
            "web-frontend",
        }
        ledger = entity_key("", "ledger-db")
        mentioning = {e.src for e in g.neighbors(ledger, rels=["mentions"], direction="in")}
        having = {k for k in g.keys(labels=["chunk"]) if "ledger-db" in g.get_node(k, vector=False)["text"]}
        assert mentioning == having
        assert report.mentions == len(
            [e for k in g.keys(labels=["chunk"]) for e in g.neighbors(k, rels=["mentions"])]
        )


def test_entity_resolution_merges_spellings_within_a_tenant_only(tmp_path):
    resolver = EntityResolver(fuzzy_threshold=90)
    resolver.add("a", entity_key("a", "Kubernetes cluster"), ["Kubernetes cluster"])
    assert resolver.resolve("a", "kubernetes-cluster")[0] == entity_key("a", "Kubernetes cluster")
    key, merge = resolver.resolve("a", "Kubernets cluster")
    assert (
        key == entity_key("a", "Kubernetes cluster") and merge.reason == "fuzzy" and 90 <= merge.score < 100
    )
    assert resolver.resolve("b", "Kubernetes cluster") == (None, None)  # never across tenants
    resolver.add("a", entity_key("a", "Debian 11"), ["Debian 11"])
    assert resolver.resolve("a", "Debian 12") == (None, None)  # other digits never merge

    def extractor(text):
        names = [n for n in ("Kubernetes cluster", "Kubernets cluster") if n in text]
        return Extraction(entities=tuple(vg.kb.Entity(n) for n in names))

    with open_kb(tmp_path / "kb.vg", extractor=extractor) as kb:
        kb.add_text("# Ops\n\nThe Kubernetes cluster runs the jobs.", source="a", tenant="t1")
        kb.add_text("# Ops\n\nThe Kubernets cluster was patched.", source="b", tenant="t1")
        kb.add_text("# Ops\n\nThe Kubernets cluster is another tenant's.", source="c", tenant="t2")
        log = kb.merge_log()
        assert [(m["name"], m["into"], m["reason"]) for m in log] == [
            ("Kubernets cluster", entity_key("t1", "Kubernetes cluster"), "fuzzy")
        ]
        assert entity_key("t2", "Kubernets cluster") in kb.graph  # t2's own entity
        kb.close()
    with open_kb(tmp_path / "kb.vg", extractor=extractor) as kb:  # the log and aliases survive a reopen
        assert len(kb.merge_log()) == 1
        aliases = kb.graph.get_node(entity_key("t1", "Kubernetes cluster"), vector=False)["aliases"]
        assert aliases == ["Kubernetes cluster", "Kubernets cluster"]


def test_read_only_and_reopen_give_the_same_answers(tmp_path, docs):
    with open_kb(tmp_path / "kb.vg") as kb:
        kb.add_documents(docs, progress=False)
        first = kb.search("who owns the payment-gateway?", 5).keys()
        local = kb.local_search("who owns the payment-gateway?", 5)
    with open_kb(tmp_path / "kb.vg", read_only=True) as kb:
        assert kb.search("who owns the payment-gateway?", 5).keys() == first
        assert kb.local_search("who owns the payment-gateway?", 5).keys() == local.keys()
        with pytest.raises(ReadOnlyError):
            kb.add_documents(docs, progress=False)


def test_a_graph_that_is_not_a_knowledge_base_is_refused(tmp_path):
    g = vg.Graph.open(tmp_path / "g.vg", 64, "cos")
    g.add_nodes(["a"], np.ones((1, 64), np.float32))
    g.close()
    with pytest.raises(InvalidArgumentError, match="not a knowledge base"):
        open_kb(tmp_path / "g.vg")


def test_default_contextualizer_and_rule_extractor_shapes():
    doc = vg.kb.documents.parse_text("# T\n\n## A\n\ntext here", source="s")
    chunk = Chunker()(doc)[0]
    assert default_contextualizer(doc, chunk) == "T > A"
    found = RuleExtractor(min_mentions=1)(
        "Run apt-get on /etc/apt/sources.list. The FSF and Debian Project agree."
    )
    assert [(e.name, e.type) for e in found.entities] == [
        ("apt-get", "identifier"),
        ("/etc/apt/sources.list", "identifier"),
        ("FSF", "acronym"),
        ("Debian Project", "phrase"),
    ]


def test_a_write_cut_short_is_written_again(tmp_path, docs, monkeypatch):
    with open_kb(tmp_path / "kb.vg") as kb:
        calls = {"n": 0}
        real = kb.graph.add_edges

        def dies(*args, **kwargs):  # the process "dies" between the nodes and the edges
            calls["n"] += 1
            raise OSError("cut")

        monkeypatch.setattr(kb.graph, "add_edges", dies)
        with pytest.raises(OSError, match="cut"):
            kb.add_documents(docs / "billing.md", progress=False)
        monkeypatch.setattr(kb.graph, "add_edges", real)
        again = kb.add_documents(docs / "billing.md", progress=False)
        assert again.unchanged == [] and [os.path.basename(s) for s in again.added + again.replaced] == [
            "billing.md"
        ]
        doc = kb.documents()[0]
        assert doc["complete"] is True
        sections = {e.src for e in kb.graph.neighbors(doc["key"], rels=["part_of"], direction="in")}
        assert len(sections) == 3 and len(kb.graph.keys(labels=["section"])) == 3
        assert len(kb.add_documents(docs / "billing.md", progress=False).unchanged) == 1


def test_one_file_in_several_spellings_is_one_document(tmp_path, docs, monkeypatch):
    monkeypatch.chdir(tmp_path)
    with open_kb(tmp_path / "kb.vg") as kb:
        report = kb.add_documents(
            [
                "docs/billing.md",
                "./docs/billing.md",
                str(docs / "billing.md"),
                "docs/../docs/billing.md",
                "docs",
            ],
            progress=False,
        )
        assert sorted(report.added) == ["docs/billing.md", "docs/notes.txt", "docs/search.md"]
        assert len(kb.documents()) == 3


def test_metadata_and_arguments_are_checked_before_anything_is_written(tmp_path, docs):
    with open_kb(tmp_path / "kb.vg") as kb:
        state = _state(kb)
        with pytest.raises(InvalidArgumentError, match="metadata must be JSON"):
            kb.add_documents(docs, metadata={"t": object()}, progress=False)
        with pytest.raises(InvalidArgumentError, match="ISO date"):
            kb.add_documents(docs, date="yesterday", on_error="skip", progress=False)
        with pytest.raises(TypeError, match="status"):
            kb.add_documents(docs, status=None, progress=False)
        assert _state(kb) == state
        kb.add_text(
            "# A\n\ntext",
            source="s",
            metadata={"team": "ops", "n": (1, 2)},
            version="v2.0",
            date="2024-01-01T00:00:00+05:00",
        )
        again = kb.add_text(
            "# A\n\ntext",
            source="s",
            metadata={"team": "ops", "n": (1, 2)},
            version="v2.0",
            date="2024-01-01T00:00:00+05:00",
        )
        assert again.unchanged == ["s"]  # the metadata compares as JSON reads it back
        hit = kb.search("text", 1).chunks[0]
        assert metadata_line(hit) == "[s v2.0 | 2023-12-31T19:00:00+00:00 | current]"
        node = kb.graph.get_node(hit.key, vector=False)
        assert node["ts"] == (1704067200 - 5 * 3600) * 1_000_000
        assert node["props"]["metadata"] == {"team": "ops", "n": [1, 2]}


def test_sources_and_versions_never_collide(tmp_path):
    with open_kb(tmp_path / "kb.vg") as kb:
        kb.add_text("Alpha text here.", source="x@y", format="text")
        kb.add_text("Beta text here.", source="x", format="text", version="y@")
        assert sorted(d["source"] for d in kb.documents()) == ["x", "x@y"]
        assert sorted(h.text for h in kb.search("text here", 5).chunks) == [
            "Alpha text here.",
            "Beta text here.",
        ]


def test_chunker_hook_results_are_checked(tmp_path, docs):
    from vecgraph.kb import Chunk

    bad = {
        "None": lambda d: None,
        "a str": lambda d: "abc",
        "no text": lambda d: [Chunk(0, 0, "", ("A",), 0)],
        "no section": lambda d: [Chunk(0, 99, "text", ("A",), 1)],
        "not a chunk": lambda d: [1],
    }
    for name, chunker in bad.items():
        with open_kb(tmp_path / f"{name}.vg", chunker=chunker) as kb:
            with pytest.raises(HookError, match="chunker hook"):
                kb.add_documents(docs / "billing.md", progress=False)
            assert kb.stats()["chunk"] == 0 and kb.stats()["entity"] == 0


def test_a_huge_line_and_a_pipe(tmp_path, docs):
    (docs / "huge.txt").write_text("x" * 200_000)
    os.mkfifo(docs / "pipe.md")
    with open_kb(tmp_path / "kb.vg") as kb:
        report = kb.add_documents(docs, progress=False)  # the pipe is not a regular file: not read
        assert sorted(os.path.basename(s) for s in report.added) == [
            "billing.md",
            "huge.txt",
            "notes.txt",
            "search.md",
        ]
        with pytest.raises(InvalidArgumentError, match="pipe.md is not a regular file"):
            kb.add_documents(docs / "pipe.md", progress=False)


def test_entities_no_chunk_mentions_any_more_are_removed(tmp_path):
    """Replacing the only document that names an entity deletes it (and its names); an entity
    another document still names stays; naming it again makes it anew."""

    def extractor(text):
        return Extraction(
            entities=tuple(vg.kb.Entity(n) for n in ("Zephyr Gateway", "Orion Store") if n in text)
        )

    zephyr, orion = entity_key("", "Zephyr Gateway"), entity_key("", "Orion Store")
    with open_kb(tmp_path / "kb.vg", extractor=extractor) as kb:
        kb.add_text("# A\n\nThe Zephyr Gateway calls the Orion Store.", source="a")
        kb.add_text("# B\n\nThe Orion Store keeps orders.", source="b")
        assert zephyr in kb.graph and orion in kb.graph
        report = kb.add_text("# A\n\nThe gateway was retired.", source="a")  # a changed: replaced
        assert report.replaced == ["a"] and report.entities_removed == 1
        assert zephyr not in kb.graph and orion in kb.graph  # b still names the Orion Store
        assert [e.src for e in kb.graph.neighbors(orion, rels=["mentions"], direction="in")] == [
            k for k in kb.graph.keys(labels=["chunk"]) if k.startswith("doc:0::1:b@")
        ]
        assert kb.resolver.resolve("", "Zephyr Gateway") == (None, None)
        assert zephyr not in {e.key for e in kb.local_search("Zephyr Gateway", k=2).entities}
        report = kb.add_text("# C\n\nThe Zephyr Gateway is back.", source="c")
        assert report.entities == 1 and report.entities_removed == 0 and zephyr in kb.graph


def test_a_resolver_without_forget_does_not_resolve_to_a_deleted_entity(tmp_path):
    """A resolver hook with only add/resolve keeps the names of an entity that was removed (no
    chunk names it any more); naming it again makes the entity anew instead of an edge to a
    deleted node."""

    class Plain:
        def __init__(self):
            self.inner = EntityResolver()

        def add(self, tenant, key, names):
            self.inner.add(tenant, key, names)

        def resolve(self, tenant, name):
            return self.inner.resolve(tenant, name)

    def extractor(text):
        return Extraction(entities=tuple(vg.kb.Entity(n) for n in ("Zorblax",) if n in text))

    with open_kb(tmp_path / "kb.vg", extractor=extractor, resolver=Plain()) as kb:
        kb.add_text("# A\n\nZorblax runs here.", source="a")
        assert kb.add_text("# A\n\nNothing runs here.", source="a").entities_removed == 1
        report = kb.add_text("# B\n\nZorblax is back.", source="b")
        assert report.entities == 1 and entity_key("", "Zorblax") in kb.graph
        chunk = [k for k in kb.graph.keys(labels=["chunk"]) if k.startswith("doc:0::1:b@")][0]
        assert [e.dst for e in kb.graph.neighbors(chunk, rels=["mentions"])] == [entity_key("", "Zorblax")]
