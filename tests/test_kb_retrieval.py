"""vecgraph.KnowledgeBase retrieval: communities and global search, local search with relations,
RAPTOR trees and their three strategies, LLM hooks through a stub endpoint, and the CLI."""

from __future__ import annotations

import json
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import ClassVar

import pytest
from kb_helpers import Words
from vecgraph import cli
from vecgraph.errors import InvalidArgumentError
from vecgraph.kb import Chunker, Entity, Extraction, HookError, KnowledgeBase, Relation
from vecgraph.kb.extract import entity_key
from vecgraph.kb.llm_hooks import LLMContextualizer
from vecgraph.llm import OpenAIChat

TOPICS = {
    "storage": ["ledger-db", "backup-agent", "disk-array"],
    "network": ["edge-proxy", "dns-resolver", "vpn-gateway"],
    "billing": ["billing-job", "invoice-api", "payment-gateway"],
}


def topic_documents():
    """Three topics, each a document whose sections name the topic's three entities together."""
    docs = []
    for topic, names in TOPICS.items():
        parts = [f"# {topic.title()} handbook\n"]
        for i in range(4):
            a, b = names[i % 3], names[(i + 1) % 3]
            parts.append(
                f"## {topic.title()} part {i}\n\nThe {a} works with the {b} every day. "
                f"When the {a} stops, the {b} waits for it.\n"
            )
        docs.append(("\n".join(parts), topic))
    return docs


def open_kb(path=None, **options):
    options.setdefault("embedder", Words())
    options.setdefault("chunker", Chunker(max_tokens=64, overlap_tokens=0))
    return KnowledgeBase.open(path, **options)


@pytest.fixture
def kb(tmp_path):
    kb = open_kb(tmp_path / "kb.vg")
    for text, topic in topic_documents():
        kb.add_text(text, source=topic)
    yield kb
    kb.close()


def members(kb, community):
    return {e.src for e in kb.graph.neighbors(community, rels=["member_of"], direction="in")}


def test_communities_are_the_topics_and_keep_their_ids(kb):
    report = kb.build_communities()
    assert report.entities == 9 and report.added == 3 and report.kept == 0 and report.levels == [3]
    found = {frozenset(members(kb, c)) for c in kb.graph.keys(labels=["community"])}
    assert found == {frozenset(entity_key("", n) for n in names) for names in TOPICS.values()}
    summary = kb.graph.get_node(
        next(c for c in kb.graph.keys(labels=["community"]) if entity_key("", "ledger-db") in members(kb, c)),
        vector=False,
    )
    assert "ledger-db" in summary["text"] and summary["props"]["level"] == 0 and summary["props"]["size"] == 3
    again = kb.build_communities()
    assert again.kept == 3 and again.added == 0 and again.removed == 0
    # a new document joins two storage entities to a new one: only that community changes
    kb.add_text(
        "# Notes\n\n## One\n\nThe ledger-db and the disk-array need the raid-controller.\n\n"
        "## Two\n\nThe raid-controller and the ledger-db agree.",
        source="notes",
    )
    third = kb.build_communities()
    assert (third.kept, third.added, third.removed) == (2, 1, 1)


def test_global_search_ranks_summaries_and_maps_them(kb):
    with pytest.raises(InvalidArgumentError, match="build_communities"):
        kb.global_search("what are the main topics?")
    kb.build_communities()
    r = kb.global_search("what does the edge-proxy do with the dns-resolver?", k=3)
    assert len(r.communities) == 3
    assert members(kb, r.communities[0].key) == {entity_key("", n) for n in TOPICS["network"]}
    calls = []

    def map_hook(question, summary):
        calls.append(summary)
        return ("billing answer", 80.0) if "billing-job" in summary else ("", 0.0)

    mapped = kb.global_search("anything", k=3, map=map_hook)
    assert len(calls) == 3 and [h.answer for h in mapped.communities] == ["billing answer"]
    assert "Answer: billing answer" in mapped.to_context(500)
    with pytest.raises(HookError, match="map"):
        kb.global_search("anything", k=3, map=lambda q, s: "not a pair")


def test_local_search_names_entities_relations_and_communities(tmp_path):
    def extractor(text):
        names = [n for names in TOPICS.values() for n in names if n in text]
        relations = []
        if "billing-job" in text and "invoice-api" in text:
            relations.append(Relation("billing-job", "invoice-api", "depends on", "the job calls the api"))
        return Extraction(tuple(Entity(n, "service") for n in names), tuple(relations))

    with open_kb(tmp_path / "kb.vg", extractor=extractor) as kb:
        for text, topic in topic_documents():
            report = kb.add_text(text, source=topic)
        kb.build_communities()
        r = kb.local_search("which service does the billing-job depend on?", k=3)
        assert r.entities[0].key == entity_key("", "billing-job") and r.entities[0].type == "service"
        assert all("billing" in hit.source for hit in r.chunks)
        assert [(x.source, x.type, x.target, x.description) for x in r.relations] == [
            ("billing-job", "depends_on", "invoice-api", "the job calls the api")
        ]
        assert members(kb, r.communities[0].key) == {entity_key("", n) for n in TOPICS["billing"]}
        context = r.to_context(1000)
        assert "billing-job --depends_on--> invoice-api: the job calls the api" in context
        assert "[1] [billing | current] Billing handbook" in context
        assert report.relations == 2  # the relation is written once per chunk that states it


def test_raptor_tree_and_its_three_strategies(tmp_path):
    with open_kb(tmp_path / "kb.vg") as kb:
        for text, topic in topic_documents():
            kb.add_text(text, source=topic)
        chunks = kb.graph.keys(labels=["chunk"])
        report = kb.build_tree(max_cluster_size=4)
        assert report.levels[0] == len(chunks) == 12 and report.levels[-1] == 1
        assert kb.tree_levels() == len(report.levels) - 1
        for key in kb.graph.keys(labels=["summary"]):  # each summary summarizes what it quotes
            node = kb.graph.get_node(key, vector=False)
            children = [e.dst for e in kb.graph.neighbors(key, rels=["summarizes"])]
            assert children and node["props"]["size"] == len(children)
        leaves = {c for c in chunks}
        covered = set()
        for key in kb.graph.keys(labels=["summary"], where={"level": 1}):
            covered.update(e.dst for e in kb.graph.neighbors(key, rels=["summarizes"]))
        assert covered == leaves  # level 1 partitions the chunks
        question = "when the vpn-gateway stops"
        collapsed = kb.tree_search(question, 5)
        assert len(collapsed.chunks) + len(collapsed.summaries) == 5
        top_down = kb.tree_search(question, 3, strategy="top_down", branch=1)
        assert [h.level for h in top_down.summaries] == list(range(kb.tree_levels(), 0, -1))
        assert top_down.chunks and all(h.source == "network" for h in top_down.chunks)
        bottom_up = kb.tree_search(question, 3, strategy="bottom_up", climb_below=1.01)
        assert bottom_up.summaries and all(h.level == 1 for h in bottom_up.summaries)
        assert kb.tree_search(question, 3, strategy="bottom_up", climb_below=-1.0).summaries == []
        # building again replaces the tree
        assert kb.build_tree(max_cluster_size=4).summaries == report.summaries
        assert len(kb.graph.keys(labels=["summary"])) == report.summaries


class _Chat(BaseHTTPRequestHandler):
    requests: ClassVar[list] = []

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        type(self).requests.append(body)
        chunk = body["messages"][-1]["content"]
        reply = {
            "choices": [
                {
                    "message": {
                        "role": "assistant",
                        "content": "About " + ("billing." if "billing" in chunk else "other."),
                    }
                }
            ]
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args):
        pass


def test_llm_contextualizer_through_a_local_endpoint(tmp_path):
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Chat)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        chat = OpenAIChat("stub-model", base_url=f"http://127.0.0.1:{server.server_port}/v1", api_key="k")
        with open_kb(tmp_path / "kb.vg", contextualizer=LLMContextualizer(chat)) as kb:
            text, topic = topic_documents()[2]
            report = kb.add_text(text, source=topic)
            prefixes = {
                kb.graph.get_node(k, vector=False)["props"]["prefix"] for k in kb.graph.keys(labels=["chunk"])
            }
            assert prefixes == {"About billing."}
            assert len(_Chat.requests) == report.chunks
            assert all(r["model"] == "stub-model" for r in _Chat.requests)
            sent = len(_Chat.requests)
            assert kb.add_text(text, source=topic).unchanged == [topic] and len(_Chat.requests) == sent
            again = kb.add_text(text, source=topic, status="deprecated")  # the metadata changed, not the text
            assert again.replaced == [topic] and len(_Chat.requests) == sent  # every prefix from the cache
            kb.add_text(text + "\nOne more line.", source=topic)  # a new document text: asked again
            assert len(_Chat.requests) == sent + report.chunks
    finally:
        server.shutdown()
        server.server_close()


def test_cli_add_communities_tree_ask(tmp_path, capsys):
    folder = tmp_path / "docs"
    folder.mkdir()
    for text, topic in topic_documents():
        (folder / f"{topic}.md").write_text(text)
    target = str(tmp_path / "kb.vg")
    assert cli.main(["kb", "add", target, str(folder), "--no-progress", "--json", "--version", "1.0"]) == 0
    added = json.loads(capsys.readouterr().out)
    assert len(added["added"]) == 3 and added["chunks"] == 12 and added["entities"] == 9
    assert cli.main(["kb", "communities", target, "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["levels"] == [3]
    assert cli.main(["kb", "tree", target, "--json", "--max-cluster-size", "4"]) == 0
    assert json.loads(capsys.readouterr().out)["levels"][0] == 12
    assert cli.main(["kb", "ask", target, "what does the ledger-db do?", "--json", "-k", "2"]) == 0
    local = json.loads(capsys.readouterr().out)
    assert (
        local["mode"] == "local"
        and len(local["chunks"]) == 2
        and local["chunks"][0]["source"].endswith("storage.md")
    )
    assert "v1.0 | current]" in local["context"]
    assert cli.main(["kb", "ask", target, "main topics", "--mode", "global", "--json", "-k", "3"]) == 0
    assert len(json.loads(capsys.readouterr().out)["communities"]) == 3
    assert cli.main(["kb", "ask", target, "ledger-db", "--mode", "tree", "--strategy", "top_down"]) == 0
    assert "storage.md" in capsys.readouterr().out
    assert cli.main(["kb", "add", target, str(tmp_path / "missing.md")]) == 1
    assert "missing.md" in capsys.readouterr().err


def words(text):
    return len(text.split())


def test_to_context_stays_within_its_budget():
    from vecgraph.kb.results import ChunkHit, KBResult

    def hit(text, n):
        return ChunkHit(f"c{n}", 1.0, text, "", "src.md", "", "", "current", "T", ())

    long = KBResult(
        "q", "dense", [hit("alpha beta gamma " * 200, 0)] + [hit("short text here", i) for i in range(1, 30)]
    )
    for budget in (5, 20, 100, 700):
        context = long.to_context(budget, count_tokens=words)
        assert words(context) <= budget
    assert long.to_context(20, count_tokens=words).startswith(
        "## Sources\n[1] [src.md | current] T\nalpha beta"
    )
    short = KBResult("q", "dense", [hit("one two", 1), hit("three four", 2)])
    assert short.to_context(100, count_tokens=words) == (
        "## Sources\n[1] [src.md | current] T\none two\n[2] [src.md | current] T\nthree four"
    )
    assert short.to_context(9, count_tokens=words) == "## Sources\n[1] [src.md | current] T\none two"


def test_searches_check_their_arguments_and_warn_when_stale(kb):
    kb.build_communities()
    with pytest.raises(InvalidArgumentError, match="community levels 0-0, got 5"):
        kb.global_search("topics", level=5)
    with pytest.raises(HookError, match="0-100"):
        kb.global_search("topics", map=lambda q, s: ("a", 1000.0))
    kb.build_tree(max_cluster_size=4)
    with pytest.raises(TypeError, match="climb_below"):
        kb.tree_search("x", strategy="bottom_up", climb_below="x")
    with pytest.raises(InvalidArgumentError, match="^tenant 'nobody' has no RAPTOR tree: run build_tree"):
        kb.tree_search("x", strategy="top_down", tenant="nobody")
    with pytest.raises(InvalidArgumentError, match=r"must be <= 100,000 .*got 10 \+ 99,990 \+ 2$"):
        kb.local_search("x", k=10, entities=99_990, mention_chunks=2)
    assert len(kb.local_search("x", k=10, entities=99_988, mention_chunks=2).chunks) >= 1
    kb.add_text("# More\n\nThe ledger-db moved.", source="more")
    with pytest.warns(RuntimeWarning, match="build_communities"):
        kb.global_search("topics")
    with pytest.warns(RuntimeWarning, match="build_tree"):
        kb.tree_search("ledger-db")
    kb.build_communities()
    kb.build_tree(max_cluster_size=4)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        kb.global_search("topics")
        kb.tree_search("ledger-db")


def test_trees_of_several_tenants(tmp_path):
    with open_kb(tmp_path / "kb.vg") as kb:
        for text, topic in topic_documents():
            kb.add_text(text, source=topic, tenant="a")
        kb.add_text(topic_documents()[0][0], source="one", tenant="b")
        report = kb.build_tree(max_cluster_size=2)
        assert report.levels[0] == 16
        assert kb.tree_levels("a") > kb.tree_levels("b") >= 1 and kb.tree_levels() == kb.tree_levels("a")
        r = kb.tree_search("ledger-db", 3, strategy="top_down", tenant="b")
        assert r.chunks and all(h.source == "one" for h in r.chunks)


def test_cli_refuses_a_folder_without_a_knowledge_base(tmp_path, capsys):
    for action in (["communities"], ["tree"], ["ask", "q"]):
        folder = tmp_path / f"none-{action[0]}.vg"
        assert cli.main(["kb", action[0], str(folder), *action[1:]]) == 1
        assert "holds no knowledge base" in capsys.readouterr().err and not folder.exists()
