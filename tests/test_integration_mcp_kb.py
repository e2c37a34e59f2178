"""`vecgraph mcp FOLDER` on a knowledge-base folder (vecgraph.KnowledgeBase): the kb tools are
offered beside the graph tools (and only for a knowledge base), each answers as the same call on
the KnowledgeBase does (its result's fields and its context within the budget), stale communities
and trees come back as warnings beside the result, bad arguments are tool errors after which the
server still answers, a read-only server leaves the folder as it was, and a knowledge base whose
recorded embedder does not load still serves its graph while the kb tools say why."""

from __future__ import annotations

import asyncio
import shutil
import threading
import warnings

import numpy as np
import pytest
import vecgraph as vg
from kb_helpers import Words
from mcp import Client, ClientSession
from test_integration_mcp import GRAPH_TOOLS, _error, _folder_digest, _session
from vecgraph.integrations import mcp as vg_mcp
from vecgraph.integrations.mcp import build_server, open_folder

KB_TOOLS = {"kb_search", "kb_local_search", "kb_global_search", "kb_tree_search"}
DOCUMENTS = {
    "billing.md": """# Billing Service

## Overview
The Billing Service charges customers every month. Billing Service runs on Kubernetes and stores invoices in \
Postgres.

## Dependencies
The Billing Service depends on the Ledger API. Alice Moreau maintains the Ledger API and the Billing Service.
""",
    "ledger.md": """# Ledger API

## Design
The Ledger API records every payment in Postgres. Alice Moreau designed the Ledger API in 2021.

## Operations
The Ledger API runs on Kubernetes next to the Billing Service. Bob Tanaka operates Kubernetes.
""",
    "oncall.md": """# On-call Guide

## Escalation
Page Bob Tanaka when Kubernetes fails. Page Alice Moreau when the Ledger API fails.

## Postgres
Postgres backups run nightly; Bob Tanaka checks them.
""",
}
LEDGER = "who maintains the Ledger API?"
# (tool, arguments): the calls compared with the KnowledgeBase's own answers
CALLS = [
    ("kb_search", {"question": LEDGER}),
    ("kb_search", {"question": "Postgres backups", "k": 3, "mode": "dense", "max_tokens": 60}),
    ("kb_search", {"question": "Postgres backups", "k": 2, "mode": "bm25"}),
    ("kb_search", {"question": LEDGER, "tenant": "nobody"}),
    ("kb_local_search", {"question": LEDGER}),
    (
        "kb_local_search",
        {
            "question": "what does Bob Tanaka operate?",
            "k": 3,
            "entities": 2,
            "hops": 0,
            "communities": 1,
            "history": True,
            "max_tokens": 80,
        },
    ),
    ("kb_global_search", {"question": "what are the main themes?"}),
    ("kb_global_search", {"question": "payments", "level": 0, "k": 1, "tenant": "", "max_tokens": 30}),
    ("kb_tree_search", {"question": "Postgres backups"}),
    ("kb_tree_search", {"question": "Postgres backups", "k": 3, "strategy": "top_down"}),
    ("kb_tree_search", {"question": "Kubernetes", "k": 2, "strategy": "bottom_up", "max_tokens": 50}),
]


def _build(path, folder, embedder) -> None:
    """A knowledge base of DOCUMENTS (written to ``folder``) with communities and a RAPTOR tree."""
    folder.mkdir()
    for name, text in DOCUMENTS.items():
        (folder / name).write_text(text)
    with vg.KnowledgeBase.open(str(path), embedder=embedder) as kb:
        report = kb.add_documents([str(folder / name) for name in DOCUMENTS], progress=False)
        assert report.chunks == 6 and report.entities >= 5
        kb.build_communities()
        kb.build_tree()


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> str:
    root = tmp_path_factory.mktemp("kb")
    _build(root / "docs.vg", root / "docs", "wordllama")
    return str(root / "docs.vg")


@pytest.fixture()
def docs(built, tmp_path) -> str:
    """A copy of the wordllama knowledge base, for one test."""
    return shutil.copytree(built, str(tmp_path / "docs.vg"))


def _direct(path: str, calls=CALLS) -> list:
    """What each call gives on the KnowledgeBase opened read-only: to_dict(), context, warnings."""
    out = []
    with vg.KnowledgeBase.open(path, read_only=True) as kb:
        for tool, args in calls:
            args = dict(args)
            question, max_tokens = args.pop("question"), args.pop("max_tokens", 2000)
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                result = getattr(kb, tool[3:])(question, **args)
            want = dict(result.to_dict(), context=result.to_context(max_tokens=max_tokens))
            if caught:
                want["warnings"] = [str(w.message) for w in caught]
            out.append(want)
    return out


def _rounded(value):
    """``value`` with its floats rounded (scores crossed JSON and another process)."""
    if isinstance(value, dict):
        return {k: _rounded(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return round(value, 5) if isinstance(value, float) else value


def _assert_same(got: dict, want: dict) -> None:
    assert set(got) == set(want)
    for field, key in (("chunks", "key"), ("entities", "name"), ("communities", "key"), ("summaries", "key")):
        assert [hit[key] for hit in got[field]] == [hit[key] for hit in want[field]], field
    assert got["context"] == want["context"]
    assert _rounded(got) == _rounded(want)


# ---------------------------------------------------------------------------- tools and answers


def test_a_knowledge_base_offers_the_kb_tools_and_a_plain_graph_does_not(docs, tmp_path):
    async def body(s: ClientSession):
        tools = {tool.name: tool for tool in (await s.list_tools()).tools}
        assert set(tools) == GRAPH_TOOLS | KB_TOOLS
        properties = {name: set(tools[name].input_schema["properties"]) for name in KB_TOOLS}
        assert properties == {
            "kb_search": {"question", "k", "mode", "tenant", "history", "max_tokens"},
            "kb_local_search": {
                "question",
                "k",
                "entities",
                "hops",
                "communities",
                "tenant",
                "history",
                "max_tokens",
            },
            "kb_global_search": {"question", "level", "k", "tenant", "max_tokens"},
            "kb_tree_search": {"question", "k", "strategy", "tenant", "history", "max_tokens"},
        }
        for name in KB_TOOLS:
            tool = tools[name]
            assert tool.input_schema["required"] == ["question"]
            assert tool.input_schema["additionalProperties"] is False
            assert tool.annotations.read_only_hint is True and "context" in tool.description
        local = tools["kb_local_search"].input_schema["properties"]
        assert (local["hops"]["minimum"], local["hops"]["maximum"], local["hops"]["default"]) == (0, 3, 2)
        assert (local["entities"]["default"], local["communities"]["default"], local["k"]["default"]) == (
            10,
            3,
            10,
        )
        assert set(tools["kb_search"].input_schema["properties"]["mode"]["enum"]) == {
            "hybrid",
            "dense",
            "bm25",
        }
        tree = tools["kb_tree_search"].input_schema["properties"]["strategy"]
        assert set(tree["enum"]) == {"collapsed", "top_down", "bottom_up"} and tree["default"] == "collapsed"
        globl = tools["kb_global_search"].input_schema["properties"]
        assert (globl["level"]["default"], globl["k"]["default"], globl["max_tokens"]["default"]) == (
            0,
            5,
            2000,
        )
        stats = (await s.call_tool("stats", {})).structured_content
        assert stats["knowledge_base"]["chunk"] == 6 and stats["knowledge_base"]["community"] >= 1
        assert stats["query_embedder"] == "wordllama/l2_supercat_256" and stats["read_only"] is False
        # the graph tools work on the knowledge base's graph, text embedded with its embedder
        res = await s.call_tool("search", {"text": "Postgres backups", "k": 1, "hops": 0, "labels": "chunk"})
        assert res.structured_content["hits"][0]["key"].endswith("oncall.md@#c1")

    _session(docs)(body)

    plain = str(tmp_path / "plain.vg")
    with vg.Graph.open(plain, dim=4) as g:
        g.add_nodes(["a"], np.eye(4, dtype=np.float32)[:1], texts=["alpha"])

    async def plain_body(s: ClientSession):
        assert {tool.name for tool in (await s.list_tools()).tools} == GRAPH_TOOLS
        assert (await s.call_tool("stats", {})).structured_content["knowledge_base"] is None
        assert "unknown tool" in _error(await s.call_tool("kb_search", {"question": "alpha"})).lower()

    _session(plain)(plain_body)


def test_each_kb_tool_answers_as_the_knowledge_base_does(docs):
    wanted = _direct(docs)
    # what the answers hold (so that the comparison compares something)
    by_call = dict(zip(range(len(CALLS)), wanted))
    assert len(by_call[0]["chunks"]) == 6 and by_call[0]["mode"] == "hybrid"
    assert len(by_call[1]["chunks"]) == 3 and by_call[1]["chunks"][0]["key"].endswith("oncall.md@#c1")
    assert by_call[3]["chunks"] == [] and by_call[3]["context"] == ""  # another tenant
    names = [e["name"] for e in by_call[4]["entities"]]
    assert {"Alice Moreau", "Bob Tanaka", "Kubernetes", "Postgres"} <= set(names)
    assert by_call[4]["communities"] and "Alice Moreau" in by_call[4]["context"]
    assert len(by_call[5]["entities"]) == 2 and len(by_call[5]["communities"]) <= 1
    assert by_call[6]["communities"] and by_call[6]["mode"] == "global"
    assert by_call[8]["summaries"] and by_call[8]["mode"] == "tree"
    assert by_call[9]["chunks"] and by_call[9]["summaries"]
    assert not any("warnings" in want for want in wanted)  # built after the last document

    async def body(s: ClientSession):
        got = []
        for tool, args in CALLS:
            res = await s.call_tool(tool, args)
            assert not res.is_error, res
            got.append(res.structured_content)
        return got

    got = _session(docs)(body)
    for (tool, args), one, want in zip(CALLS, got, wanted):
        _assert_same(one, want)
    with vg.KnowledgeBase.open(docs, read_only=True) as kb:  # the budget is the one asked for
        small = kb.search("Postgres backups", 3, mode="dense")
        assert got[1]["context"] == small.to_context(max_tokens=60) != small.to_context(max_tokens=2000)
        assert kb.count_tokens(got[1]["context"]) <= 60


def test_stale_communities_and_tree_come_back_as_warnings_beside_the_result(docs, tmp_path):
    (tmp_path / "payroll.md").write_text(
        "# Payroll\n\n## Runs\nPayroll runs on Kubernetes; Bob Tanaka owns it.\n"
    )
    with vg.KnowledgeBase.open(docs) as kb:
        kb.add_documents([str(tmp_path / "payroll.md")], progress=False)
    calls = [
        ("kb_global_search", {"question": "payments"}),
        ("kb_tree_search", {"question": "payroll"}),
        ("kb_search", {"question": "payroll"}),
    ]
    wanted = _direct(docs, calls)
    assert "build_communities()" in wanted[0]["warnings"][0] and "build_tree()" in wanted[1]["warnings"][0]
    assert "warnings" not in wanted[2] and wanted[2]["chunks"][0]["source"].endswith("payroll.md")
    errlog_path = tmp_path / "server.err"

    async def body(s: ClientSession):
        got = []
        for _ in range(2):  # each call gets its warnings, not only the first
            for tool, args in calls:
                res = await s.call_tool(tool, args)
                assert not res.is_error, res
                got.append(res.structured_content)
        return got

    with open(errlog_path, "w") as errlog:
        got = _session(docs, "--read-only", errlog=errlog)(body)
    for one, want in zip(got, wanted + wanted):
        _assert_same(one, want)
    assert got[3]["warnings"] == [
        "documents were added or changed since the communities were built: "
        "run build_communities() to cover them"
    ]
    assert "Warning" not in errlog_path.read_text()  # in the results, not on the server's stderr


def test_bad_kb_arguments_are_tool_errors_and_the_server_keeps_answering(docs):
    wanted = _direct(docs, CALLS[:1])[0]

    async def body(s: ClientSession):
        message = _error(await s.call_tool("kb_search", {"question": LEDGER, "mode": "fuzzy"}))
        assert "mode" in message and "'hybrid', 'dense' or 'bm25'" in message and "'fuzzy'" in message
        message = _error(await s.call_tool("kb_tree_search", {"question": LEDGER, "strategy": "sideways"}))
        assert "strategy" in message and "'collapsed', 'top_down' or 'bottom_up'" in message
        assert "'sideways'" in message
        message = _error(await s.call_tool("kb_global_search", {"question": LEDGER, "level": 99}))
        assert "level must be one of the community levels 0-0, got 99" in message
        message = _error(await s.call_tool("kb_local_search", {"question": LEDGER, "hops": 4}))
        assert "hops" in message and "less than or equal to 3" in message and "input_value=4" in message
        for tool in KB_TOOLS:
            message = _error(await s.call_tool(tool, {"question": LEDGER, "k": 0}))
            assert "k" in message and "greater than or equal to 1" in message and "input_value=0" in message
        message = _error(await s.call_tool("kb_search", {"question": LEDGER, "depth": 3}))
        assert (
            "unknown argument 'depth'; kb_search takes question, k, mode, tenant, history, max_tokens"
            in message
        )
        message = _error(await s.call_tool("kb_local_search", {"question": LEDGER, "tenants": ["a"]}))
        assert "unknown argument 'tenants'" in message and "tenant" in message
        message = _error(await s.call_tool("kb_search", {"question": LEDGER, "history": 1}))
        assert "history" in message and "valid boolean" in message
        message = _error(await s.call_tool("kb_search", {"question": LEDGER, "k": True}))
        assert "k" in message and "valid integer" in message
        message = _error(await s.call_tool("kb_tree_search", {"question": LEDGER, "max_tokens": 0}))
        assert "max_tokens" in message and "greater than or equal to 1" in message
        assert "question must hold text, got an empty str" in _error(
            await s.call_tool("kb_search", {"question": " "})
        )
        message = _error(await s.call_tool("kb_global_search", {}))
        assert "question" in message and "Field required" in message
        # still serving, with the same answer
        res = await s.call_tool("kb_search", {"question": LEDGER})
        assert not res.is_error
        return res.structured_content

    _assert_same(_session(docs)(body), wanted)


def test_a_read_only_server_offers_the_kb_tools_and_leaves_the_folder_unchanged(docs):
    before = _folder_digest(docs)
    wanted = _direct(docs)

    async def body(s: ClientSession):
        assert {tool.name for tool in (await s.list_tools()).tools} == GRAPH_TOOLS | KB_TOOLS
        got = [(await s.call_tool(tool, args)).structured_content for tool, args in CALLS]
        stats = (await s.call_tool("stats", {})).structured_content
        assert stats["read_only"] is True
        return got, stats["knowledge_base"]

    got, counts = _session(docs, "--read-only")(body)
    for one, want in zip(got, wanted):
        _assert_same(one, want)
    with vg.KnowledgeBase.open(docs, read_only=True) as kb:
        assert counts == kb.stats()
    assert _folder_digest(docs) == before


# ---------------------------------------------------------------------------- a recorded embedder that fails


def test_a_knowledge_base_whose_embedder_does_not_load_serves_its_graph_and_says_why(tmp_path):
    """Words ("test-words") is no embedder vecgraph.embedders.load knows: the server's process
    cannot load it, and KnowledgeBase.open needs it."""
    path = tmp_path / "words.vg"
    _build(path, tmp_path / "docs", Words())
    errlog_path = tmp_path / "server.err"
    before = _folder_digest(str(path))

    async def body(s: ClientSession):
        assert {tool.name for tool in (await s.list_tools()).tools} == GRAPH_TOOLS | KB_TOOLS
        for tool in KB_TOOLS:
            message = _error(await s.call_tool(tool, {"question": LEDGER}))
            assert f"{tool} needs the graph's embedder, which did not load when the server started" in message
            assert "'test-words'" in message
        res = await s.call_tool(
            "hybrid_search", {"text": "Postgres backups nightly", "k": 1, "labels": "chunk"}
        )
        assert res.structured_content["channels"] == ["bm25", "entity"]
        assert res.structured_content["hits"][0]["key"].endswith("oncall.md@#c1")
        stats = (await s.call_tool("stats", {})).structured_content
        assert stats["knowledge_base"] is None and "'test-words'" in stats["query_embedder_error"]

    with open(errlog_path, "w") as errlog:
        _session(str(path), "--read-only", errlog=errlog)(body)
    notes = [line for line in errlog_path.read_text().splitlines() if "no dense channel" in line]
    assert len(notes) == 1 and ", and the kb tools fail: " in notes[0] and "'test-words'" in notes[0], notes
    assert _folder_digest(str(path)) == before

    # in this process: the folder opens as its graph alone; given the embedder, as the knowledge base
    graph, store, embedder, why = open_folder(str(path), read_only=True)
    graph.close()
    assert store is None and embedder is None and "'test-words'" in why and "\n" not in why
    graph, store, embedder, why = open_folder(str(path), read_only=True, embedder=Words())
    try:
        assert isinstance(store, vg.KnowledgeBase) and store.graph is graph and why is None
        assert embedder.name == "test-words"
        direct = store.local_search(LEDGER)

        async def main():
            async with Client(build_server(graph, kb=store, embedder=embedder)) as client:
                return (await client.call_tool("kb_local_search", {"question": LEDGER})).structured_content

        got = asyncio.run(main())
        assert [e["name"] for e in got["entities"]] == [e.name for e in direct.entities]
        assert got["context"] == direct.to_context(max_tokens=2000)
    finally:
        store.close()
    with pytest.raises(vg.DimensionMismatchError, match="makes 256-d vectors, the graph at .* has dim 64"):
        open_folder(str(path), read_only=True, embedder="wordllama")  # a given embedder must fit


def test_open_folder_gives_the_knowledge_base_and_its_recorded_embedder(docs):
    graph, store, embedder, why = open_folder(docs, read_only=True)
    try:
        assert isinstance(store, vg.KnowledgeBase) and store.graph is graph and graph.read_only
        assert why is None and embedder is store.embedder and embedder.name == "wordllama/l2_supercat_256"
    finally:
        store.close()
    graph, store, embedder, why = open_folder(docs, read_only=True, embedder="wordllama")
    store.close()
    assert isinstance(store, vg.KnowledgeBase) and embedder.name == "wordllama/l2_supercat_256"


# ---------------------------------------------------------------------------- warnings across threads


def test_concurrent_calls_each_get_their_own_warnings_and_the_capture_is_undone():
    """Call A starts, call B starts, A ends, B ends (the order that breaks catch_warnings across
    threads): each gets the warnings of its own thread, and afterwards warnings show as before."""
    shown_before, filters_before = warnings.showwarning, list(warnings.filters)
    a_in, b_in, a_out = threading.Event(), threading.Event(), threading.Event()
    caught: dict = {}

    def call(name: str, entered: threading.Event, wait_for: threading.Event, then: threading.Event | None):
        with vg_mcp._Warnings.caught() as mine:
            entered.set()
            assert wait_for.wait(30)
            warnings.warn(f"from {name}", RuntimeWarning, stacklevel=1)
            warnings.warn(f"from {name}", RuntimeWarning, stacklevel=1)  # the same one: listed once
        caught[name] = mine
        if then is not None:
            then.set()

    a = threading.Thread(target=call, args=("a", a_in, b_in, a_out))
    b = threading.Thread(target=call, args=("b", b_in, a_out, None))
    a.start()
    assert a_in.wait(30)
    b.start()
    a.join(30), b.join(30)
    assert caught == {"a": ["from a"], "b": ["from b"]}
    assert warnings.showwarning is shown_before and warnings.filters == filters_before
    with pytest.warns(RuntimeWarning, match="after"):  # warnings reach their usual handling again
        warnings.warn("after", RuntimeWarning, stacklevel=1)
