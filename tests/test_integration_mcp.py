"""`vecgraph mcp FOLDER` (vecgraph.integrations.mcp): the server run as a subprocess and driven by
the MCP Python SDK's own client, over stdio and streamable HTTP: its tools and their schemas,
known answers on a small graph and a memory store, errors as MCP tool errors after which the
server still answers, read-only mode, the CLI's usage errors, and the README's example; tools off
the event loop, unknown and mistyped arguments refused, keys that spell numbers, a recorded
embedder that does not load, and the ways the server stops (signals, stdout closed)."""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

import numpy as np
import pytest
import vecgraph as vg
from conftest import TESTS_DIR
from mcp import ClientSession, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp.client.streamable_http import streamable_http_client
from test_cli import failed
from vecgraph import embedders
from vecgraph.integrations.mcp import open_folder, parse_http

README = Path(TESTS_DIR).parent / "README.md"
GRAPH_TOOLS = {"search", "hybrid_search", "get_node", "neighbors", "stats"}
MEMORY_TOOLS = {"remember", "recall", "card", "forget"}
FAKE_EMBEDDER = "memory_helpers:FakeEmbedder"  # tests/memory_helpers.py: importable with tests/ on PYTHONPATH
TIMEOUT_S = 120


def _env(path: str = "") -> dict:
    """The server's environment: this one, with tests/ (the fake embedder) and ``path`` importable."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (path, TESTS_DIR, env.get("PYTHONPATH", "")) if p)
    return env


def _unit(*pairs: tuple) -> np.ndarray:
    row = np.zeros(8, np.float32)
    for index, value in pairs:
        row[index] = value
    return row / np.linalg.norm(row)


@pytest.fixture()
def folder(tmp_path) -> str:
    """A graph of known answers: widget is the query's nearest node; acme makes it; alice and bob
    work at acme; 42 is an int key; zed is the only node of tenant t2."""
    path = str(tmp_path / "shop.vg")
    with vg.Graph.open(path, dim=8, filterable={"year": int}) as g:
        g.add_nodes(["widget", "acme", "alice", "bob", "zed"],
                    np.stack([_unit((3, 1.0)), _unit((3, 0.6), (2, 0.8)), _unit((3, 0.3), (0, 0.95)),
                              _unit((3, 0.2), (1, 0.98)), _unit((5, 1.0))]),
                    labels=["product", "org", "person", "person", "person"],
                    tenants=["", "", "", "", "t2"],
                    texts=["Widget A7-Pro, 99 dollars", "ACME Corp", "Alice, engineer", "Bob, sales", "Zed"],
                    props=[{"year": 2024}, {"year": 2019}, None, None, None],
                    ts=[datetime(2024, 5, 1, tzinfo=timezone.utc), 0, 0, 0, 0])
        g.add_nodes([42], _unit((4, 1.0))[None], texts=["order 42"])
        g.add_edges(["alice", "bob", "acme"], ["acme", "acme", "widget"],
                    rels=["works_at", "works_at", "makes"], weights=[1.0, 0.5, 1.0])
        g.add_aliases("widget", ["A7-Pro"])
        g.checkpoint()
    return path


def _session(folder: str, *options: str, errlog=None, path: str = ""):
    """Run ``body(session)`` against ``vecgraph mcp folder *options`` over stdio, bounded in time
    (``path``: a folder the server can import modules from)."""

    def run(body):
        async def main():
            server = StdioServerParameters(command=sys.executable, env=_env(path),
                                           args=["-m", "vecgraph", "mcp", folder, *options])
            async with stdio_client(server, errlog=errlog or sys.stderr) as (read, write), \
                    ClientSession(read, write) as session:
                await session.initialize()
                return await body(session)

        try:
            return asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))
        except Exception as exc:  # the SDK's task groups wrap what the body raised in exception groups
            while len(getattr(exc, "exceptions", ())) == 1:
                exc = exc.exceptions[0]
            raise exc from None

    return run


def _error(result) -> str:
    """The message of a tool error result."""
    assert result.is_error, result
    return " ".join(block.text for block in result.content)


def _folder_digest(folder: str) -> dict:
    """{relative path: sha256} of every file under ``folder``."""
    out = {}
    for root, _dirs, files in os.walk(folder):
        for name in files:
            path = os.path.join(root, name)
            with open(path, "rb") as f:
                out[os.path.relpath(path, folder)] = hashlib.sha256(f.read()).hexdigest()
    return out


# ---------------------------------------------------------------------------- tools and answers


def test_tools_are_listed_with_their_parameters_and_answer_known_values(folder, tmp_path):
    errlog_path = tmp_path / "server.err"

    async def body(s: ClientSession):
        tools = {tool.name: tool for tool in (await s.list_tools()).tools}
        assert set(tools) == GRAPH_TOOLS
        schema = tools["search"].input_schema
        assert set(schema["properties"]) == {"text", "vector", "k", "hops", "seeds", "tenants", "labels",
                                             "where", "rels", "direction"}
        assert schema["properties"]["k"]["type"] == "integer" and schema["properties"]["k"]["minimum"] == 1
        assert set(schema["properties"]["direction"]["enum"]) == {"out", "in", "both"}
        assert set(tools["hybrid_search"].input_schema["properties"]) == {
            "text", "vector", "k", "channels", "tenants", "labels", "where", "hops", "seeds"}
        assert tools["hybrid_search"].input_schema["required"] == ["text"]
        assert tools["get_node"].input_schema["required"] == ["key"]
        assert set(tools["neighbors"].input_schema["properties"]) == {"key", "rels", "direction"}
        assert all(tools[name].description and tools[name].annotations.read_only_hint for name in GRAPH_TOOLS)

        query = _unit((3, 1.0)).tolist()
        res = await s.call_tool("search", {"vector": query, "k": 4, "seeds": 1, "hops": 2})
        hits = res.structured_content["hits"]
        assert [h["key"] for h in hits] == ["widget", "acme", "alice", "bob"]
        assert [h["hop"] for h in hits] == [0, 1, 2, 2]
        assert [h["path"] for h in hits] == [None, "'widget' <-makes- 'acme'",
                                             "'widget' <-makes- 'acme' <-works_at- 'alice'",
                                             "'widget' <-makes- 'acme' <-works_at- 'bob'"]
        assert hits[0]["text"] == "Widget A7-Pro, 99 dollars" and hits[0]["label"] == "product"
        assert np.allclose([h["score"] for h in hits], [1.0, 0.6, 0.3, 0.2], atol=0.02)
        assert res.structured_content["seeds"] == 1 and res.structured_content["visited"] == 4
        assert json.loads(res.content[0].text) == res.structured_content  # the same as JSON text
        res = await s.call_tool("search", {"vector": query, "labels": ["person"]})
        assert [h["key"] for h in res.structured_content["hits"]] == ["alice", "bob", "zed"]
        res = await s.call_tool("search", {"vector": query, "tenants": "t2"})
        assert [h["key"] for h in res.structured_content["hits"]] == ["zed"]
        res = await s.call_tool("search", {"vector": query, "where": {"year": {">=": 2020}}})
        assert [h["key"] for h in res.structured_content["hits"]] == ["widget"]

        res = await s.call_tool("hybrid_search", {"text": "A7-Pro price?", "k": 3})
        out = res.structured_content
        assert out["channels"] == ["bm25", "entity"]  # no embedder recorded: text alone
        assert out["hits"][0]["key"] == "widget" and out["hits"][0]["ranks"] == {"bm25": 1, "entity": 1}
        res = await s.call_tool("hybrid_search", {"text": "A7-Pro price?", "vector": query, "k": 4,
                                                  "channels": ["dense", "graph"], "seeds": 1})
        out = res.structured_content
        assert out["channels"] == ["dense", "graph"] and out["hits"][0]["key"] == "widget"
        paths = {h["key"]: h["path"] for h in out["hits"]}
        assert paths["widget"] is None and paths["acme"] == "'widget' <-makes- 'acme'"
        assert paths["alice"] == "'widget' <-makes- 'acme' <-works_at- 'alice'"

        res = await s.call_tool("get_node", {"key": "widget"})
        assert res.structured_content == {
            "key": "widget", "label": "product", "tenant": "", "ts_us": 1_714_521_600_000_000,
            "time": "2024-05-01T00:00:00+00:00", "text": "Widget A7-Pro, 99 dollars", "props": {"year": 2024},
            "aliases": ["A7-Pro"]}
        res = await s.call_tool("get_node", {"key": "42"})  # a str naming the int key
        assert res.structured_content["key"] == 42 and res.structured_content["text"] == "order 42"
        assert res.structured_content["time"] is None

        res = await s.call_tool("neighbors", {"key": "acme", "direction": "in"})
        assert res.structured_content["edges"] == [
            {"src": "alice", "rel": "works_at", "dst": "acme", "weight": 1.0},
            {"src": "bob", "rel": "works_at", "dst": "acme", "weight": 0.5}]
        res = await s.call_tool("neighbors", {"key": "acme"})
        assert [(e["src"], e["dst"]) for e in res.structured_content["edges"]] == [("acme", "widget")]
        res = await s.call_tool("neighbors", {"key": "acme", "direction": "both", "rels": ["makes"]})
        assert [e["dst"] for e in res.structured_content["edges"]] == ["widget"]

        stats = (await s.call_tool("stats", {})).structured_content
        assert (stats["nodes"], stats["edges"], stats["dim"]) == (6, 3, 8)
        assert stats["read_only"] is False and stats["memory_store"] is False and stats["embedder"] is None

    with open(errlog_path, "w") as errlog:
        _session(folder, errlog=errlog)(body)
    log = errlog_path.read_text()
    assert f"serving {folder} (6 nodes) on stdio" in log
    assert f"stopped; {folder} closed" in log  # the graph was closed when the client went away


def test_bad_calls_are_tool_errors_with_a_message_and_the_server_keeps_answering(folder):
    async def body(s: ClientSession):
        message = _error(await s.call_tool("get_node", {}))
        assert "key" in message and "Field required" in message
        message = _error(await s.call_tool("search", {"vector": [1.0] * 8, "k": "ten"}))
        assert "k" in message and "valid integer" in message
        message = _error(await s.call_tool("search", {"vector": ["a"] * 8}))
        assert "vector" in message and "valid number" in message
        message = _error(await s.call_tool("search", {"vector": [1.0] * 8, "k": 5000}))
        assert "k" in message and "less than or equal to 1000" in message
        assert "'nobody' is not in the graph" in _error(await s.call_tool("get_node", {"key": "nobody"}))
        assert "'nobody' is not in the graph" in _error(await s.call_tool("neighbors", {"key": "nobody"}))
        assert "dim 3" in _error(await s.call_tool("search", {"vector": [1.0, 2.0, 3.0]}))
        assert "records no embedder" in _error(await s.call_tool("search", {"text": "widget"}))
        assert "exactly one" in _error(await s.call_tool("search", {}))
        message = _error(await s.call_tool("search", {"vector": [1.0] * 8, "where": {"price": 3}}))
        assert "price" in message and "year" in message  # names the declared filterable property
        assert "direction" in _error(await s.call_tool("neighbors", {"key": "acme", "direction": "up"}))
        assert "channels" in _error(await s.call_tool("hybrid_search", {"text": "x", "channels": ["sparse"]}))
        assert "nope" in _error(await s.call_tool("nope", {}))
        assert "zero" in _error(await s.call_tool("search", {"vector": [0.0] * 8}))  # no direction under cos
        # still serving, with the same answers
        res = await s.call_tool("get_node", {"key": "alice"})
        assert not res.is_error and res.structured_content["text"] == "Alice, engineer"
        res = await s.call_tool("search", {"vector": _unit((3, 1.0)).tolist(), "k": 1})
        assert [h["key"] for h in res.structured_content["hits"]] == ["widget"]

    _session(folder)(body)


def test_read_only_offers_no_write_tool_and_leaves_the_folder_unchanged(folder):
    before = _folder_digest(folder)

    async def body(s: ClientSession):
        assert {tool.name for tool in (await s.list_tools()).tools} == GRAPH_TOOLS
        res = await s.call_tool("hybrid_search", {"text": "A7-Pro", "k": 2})  # builds BM25 in memory only
        assert res.structured_content["hits"][0]["key"] == "widget"
        res = await s.call_tool("search", {"vector": _unit((3, 1.0)).tolist(), "k": 1})
        assert res.structured_content["hits"][0]["key"] == "widget"
        assert (await s.call_tool("stats", {})).structured_content["read_only"] is True

    _session(folder, "--read-only")(body)
    assert _folder_digest(folder) == before


def test_raw_json_rpc_lines_over_a_pipe_and_from_a_file(folder, tmp_path):
    """stdin a pipe (as MCP clients start the server): read by the event loop, every line of the
    output a JSON-RPC response; stdin a regular file: the SDK's own stdio transport answers."""
    initialize = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    requests = [initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"}]
    requests += [{"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                  "params": {"name": "get_node", "arguments": {"key": "acme"}}},
                 {"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                  "params": {"name": "get_node", "arguments": {"key": 7}}}]
    command = [sys.executable, "-m", "vecgraph", "mcp", folder, "--read-only"]
    proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env=_env())
    watchdog = threading.Timer(TIMEOUT_S, proc.kill)
    watchdog.start()
    try:
        proc.stdin.write("".join(json.dumps(request) + "\n" for request in requests))
        proc.stdin.flush()
        responses: dict = {}
        while len(responses) < 3:  # a client closes stdin once it has its answers
            line = proc.stdout.readline()
            assert line, proc.stderr.read()
            response = json.loads(line)  # nothing but JSON-RPC on stdout
            responses[response["id"]] = response
        proc.stdin.close()
        assert proc.wait() == 0 and proc.stdout.read() == "" and "closed" in proc.stderr.read()
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert responses[1]["result"]["serverInfo"]["name"] == "vecgraph"
    assert responses[2]["result"]["isError"] is False
    assert responses[2]["result"]["structuredContent"]["text"] == "ACME Corp"
    assert responses[3]["result"]["isError"] is True
    assert "key 7 is not in the graph" in responses[3]["result"]["content"][0]["text"]
    # From a file, the end of the file ends the session at once (the SDK cancels what is still
    # running then); initialize is answered before the next line is read.
    (tmp_path / "requests.jsonl").write_text(json.dumps(initialize) + "\n")
    with open(tmp_path / "requests.jsonl") as stdin:
        done = subprocess.run(command, stdin=stdin, capture_output=True, text=True, env=_env(),
                              timeout=TIMEOUT_S, check=False)
    assert done.returncode == 0 and "closed" in done.stderr, done.stderr
    assert json.loads(done.stdout)["result"]["serverInfo"]["name"] == "vecgraph"


# ---------------------------------------------------------------------------- calls, arguments, keys

# A 4-d embedder in a module of its own (tmp_path/gate_embedder.py): every text embeds as node 1's
# vector, and the text "wait" blocks in the embedder until the file "go" exists beside the module
# (writing "entered" first), failing after 20 s without it.
GATE_MODULE = '''
import os
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))


class GateEmbedder:
    name = "test-gate-4"
    dim = 4

    def __call__(self, texts):
        if "wait" in texts:
            open(os.path.join(HERE, "entered"), "w").close()
            deadline = time.monotonic() + 20
            while not os.path.exists(os.path.join(HERE, "go")):
                if time.monotonic() > deadline:
                    raise RuntimeError("the gate was not opened")
                time.sleep(0.005)
        out = np.zeros((len(texts), 4), np.float32)
        out[:, 0] = 1.0
        return out
'''
MAY_1 = datetime(2024, 5, 1, tzinfo=timezone.utc)


@pytest.fixture()
def keyed(tmp_path, monkeypatch) -> str:
    """Keys 1, 2, "3", "x" (one-hot vectors) with a timestamp property `when`, recording the gate
    embedder (by its spec gate_embedder:GateEmbedder) from tmp_path."""
    (tmp_path / "gate_embedder.py").write_text(GATE_MODULE)
    monkeypatch.syspath_prepend(str(tmp_path))
    path = str(tmp_path / "keys.vg")
    with vg.Graph.open(path, dim=4, filterable={"when": "timestamp"}) as g:
        g.use_embedder(embedders.load("gate_embedder:GateEmbedder"))
        g.add_nodes([1, 2, "3", "x"], np.eye(4, dtype=np.float32), texts=["one", "two", "three", "ex"],
                    props=[{"when": MAY_1}, {"when": datetime(2024, 6, 1, 12, tzinfo=timezone.utc)}, None,
                           {"when": datetime(2023, 1, 1, tzinfo=timezone.utc)}])
        g.checkpoint()
    return path


def _wait_for(path: Path) -> None:
    deadline = time.monotonic() + TIMEOUT_S
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} did not appear"
        time.sleep(0.005)


def test_calls_run_off_the_event_loop_and_arguments_are_checked_by_name_and_type(keyed, tmp_path):
    async def body(s: ClientSession):
        tools = (await s.list_tools()).tools
        assert all(tool.input_schema["additionalProperties"] is False for tool in tools)

        # a text search waiting in its embedder does not hold up another call
        search = asyncio.ensure_future(s.call_tool("search", {"text": "wait", "k": 1, "hops": 0}))
        await asyncio.to_thread(_wait_for, tmp_path / "entered")
        res = await s.call_tool("get_node", {"key": "x"})
        assert res.structured_content["text"] == "ex" and not search.done()
        (tmp_path / "go").touch()
        res = await search
        assert [h["key"] for h in res.structured_content["hits"]] == [1], res

        # unknown argument names are refused by name, with the valid ones
        message = _error(await s.call_tool("search", {"text": "one", "tenant": "t1"}))
        assert "unknown argument 'tenant'" in message and "tenants" in message and "where" in message
        message = _error(await s.call_tool("get_node", {"key": 1, "vector": True, "depth": 2}))
        assert "unknown arguments 'vector', 'depth'; get_node takes key" in message
        assert "stats takes no arguments" in _error(await s.call_tool("stats", {"verbose": True}))

        # keys: a str key of the graph, else the int a canonical decimal str spells; an int, else its str
        found = {}
        for key in ("x", "3", "1", "-0", "01", "١", "²", "1.0", "99999999999999999999", 1, 3, 4, 2**70):
            res = await s.call_tool("get_node", {"key": key})
            found[key] = _error(res) if res.is_error else res.structured_content["key"]
        assert {k: v for k, v in found.items() if not isinstance(v, str) or v in ("x", "3")} == {
            "x": "x", "3": "3", "1": 1, 1: 1, 3: "3"}
        for key in ("-0", "01", "١", "²", "1.0", "99999999999999999999", 4, 2**70):
            assert found[key].endswith(f"key {key!r} is not in the graph"), found[key]
        res = await s.call_tool("neighbors", {"key": 3})
        assert not res.is_error and res.structured_content["key"] == "3"
        assert "key '01' is not in the graph" in _error(await s.call_tool("neighbors", {"key": "01"}))

        # ints are JSON integers (a bool is not 1), numbers are numbers, str arguments are bounded
        for args in ({"k": True}, {"hops": False}, {"k": 2.0}):
            message = _error(await s.call_tool("search", {"vector": [1.0, 0, 0, 0], **args}))
            assert next(iter(args)) in message and "valid integer" in message
        assert "valid number" in _error(await s.call_tool("search", {"vector": [True, 0, 0, 0]}))
        assert "valid string" in _error(await s.call_tool("get_node", {"key": True}))
        message = _error(await s.call_tool("search", {"text": "x" * 100_001}))
        assert "text" in message and "at most 100000 characters" in message
        assert "at most 100000" in _error(await s.call_tool("hybrid_search", {"text": "x" * 100_001}))

        # where on a timestamp property: ISO 8601 (without a zone: UTC) or int microseconds
        async def where(condition, tool="search"):
            args = {"vector": [0.5] * 4, "k": 4, "hops": 0, "seeds": 4, "where": {"when": condition}}
            if tool == "hybrid_search":
                args = {"text": "one two three ex", "k": 4, "channels": ["bm25"], "where": {"when": condition}}
            res = await s.call_tool(tool, args)
            return _error(res) if res.is_error else sorted((h["key"] for h in res.structured_content["hits"]), key=str)

        assert await where({">=": "2024-05-01T00:00:00Z"}) == [1, 2]
        assert await where({">=": "2024-05-01T02:00:00+02:00", "<": "2024-06-01T12:00:00"}) == [1]
        assert await where("2024-05-01T00:00:00") == [1]  # naive: UTC
        assert await where(["2024-06-01T12:00:00Z", "2023-01-01"]) == [2, "x"]  # a date: its midnight UTC
        assert await where({"<": "2024-05-01"}, "hybrid_search") == ["x"]
        assert await where({">=": 1_714_521_600_000_000}) == [1, 2]
        message = await where({">=": "soon"})
        assert "where['when']['>=']" in message and "ISO 8601" in message and "'soon'" in message

    _session(keyed, "--read-only", path=str(tmp_path))(body)


# ---------------------------------------------------------------------------- a recorded embedder that fails


class _RemoteNamed:
    """Named as an OpenAI-compatible endpoint's embedder (what a graph built with one records)."""

    name = "openai/test-model"
    dim = 4

    def __call__(self, texts):
        return np.ones((len(texts), 4), np.float32)


class _OtherEmbedder(_RemoteNamed):
    name = "test-other-4"


def test_a_recorded_embedder_that_does_not_load_leaves_text_to_bm25_and_entity(keyed, tmp_path):
    (tmp_path / "gate_embedder.py").write_text('raise RuntimeError("boom")\n')  # now fails at import
    errlog_path = tmp_path / "server.err"

    async def body(s: ClientSession):
        message = _error(await s.call_tool("search", {"text": "one"}))
        assert "did not load when the server started" in message and "RuntimeError: boom" in message
        res = await s.call_tool("search", {"vector": [1.0, 0, 0, 0], "k": 1, "hops": 0})
        assert [h["key"] for h in res.structured_content["hits"]] == [1]
        res = await s.call_tool("hybrid_search", {"text": "two", "k": 2})
        assert res.structured_content["channels"] == ["bm25", "entity"]
        assert [h["key"] for h in res.structured_content["hits"]] == [2]
        res = await s.call_tool("hybrid_search", {"text": "two", "channels": ["bm25", "dense"]})
        assert res.structured_content["channels"] == ["bm25"]
        message = _error(await s.call_tool("hybrid_search", {"text": "two", "channels": ["dense"]}))
        assert "RuntimeError: boom" in message and "pass vector" in message
        stats = (await s.call_tool("stats", {})).structured_content
        assert stats["query_embedder"] is None and "RuntimeError: boom" in stats["query_embedder_error"]
        assert stats["embedder"]["name"] == "test-gate-4"

    with open(errlog_path, "w") as errlog:
        _session(keyed, "--read-only", errlog=errlog, path=str(tmp_path))(body)
    lines = errlog_path.read_text().splitlines()
    notes = [line for line in lines if "no dense channel" in line]
    assert len(notes) == 1 and "'test-gate-4' cannot be loaded here: RuntimeError: boom" in notes[0], lines
    assert "--embedder SPEC" in notes[0] and not any("Warning" in line for line in lines), lines


def test_open_folder_falls_back_on_a_syntax_error_and_loads_a_remote_embedder_without_a_request(
        tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "broken_embedder.py").write_text("from gate_embedder import GateEmbedder\n")
    (tmp_path / "gate_embedder.py").write_text(GATE_MODULE)
    path = str(tmp_path / "broken.vg")
    with vg.Graph.open(path, dim=4) as g:
        g.use_embedder(embedders.load("broken_embedder:GateEmbedder"))
    monkeypatch.delitem(sys.modules, "broken_embedder")
    (tmp_path / "broken_embedder.py").write_text("x = (\n")
    graph, memory, embedder, why = open_folder(path, read_only=True)
    graph.close()
    assert memory is None and embedder is None
    assert "broken_embedder" in why and "SyntaxError" in why and "\n" not in why
    with pytest.raises(vg.InvalidArgumentError, match="built with embedder 'test-gate-4', got 'test-other-4'"):
        open_folder(path, read_only=True, embedder=_OtherEmbedder())  # a given embedder must be the recorded one

    path = str(tmp_path / "remote.vg")
    with vg.Graph.open(path, dim=4) as g:
        g.use_embedder(_RemoteNamed())
    with socket.socket() as sock:  # a port nothing listens on: a request would fail
        sock.bind(("127.0.0.1", 0))
        monkeypatch.setenv("VECGRAPH_EMBEDDINGS_BASE_URL", f"http://127.0.0.1:{sock.getsockname()[1]}/v1")
    graph, _, embedder, why = open_folder(path, read_only=True)
    graph.close()
    assert why is None and (embedder.name, embedder.dim) == ("openai/test-model", 4)


# ---------------------------------------------------------------------------- stopping


def _start(folder: str, path: str, *lines: dict) -> subprocess.Popen:
    """``vecgraph mcp folder`` over pipes, initialized, with ``lines`` sent."""
    initialize = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    proc = subprocess.Popen([sys.executable, "-m", "vecgraph", "mcp", folder, "--read-only"], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=_env(path))
    requests = [initialize, {"jsonrpc": "2.0", "method": "notifications/initialized"}, *lines]
    proc.stdin.write("".join(json.dumps(request) + "\n" for request in requests))
    proc.stdin.flush()
    return proc


def test_a_signal_stops_the_server_after_the_running_call_and_prints_only_the_stop(keyed, tmp_path):
    wait = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "search", "arguments": {"text": "wait", "k": 1}}}
    for signum in (signal.SIGTERM, signal.SIGINT):
        for name in ("entered", "go"):
            (tmp_path / name).unlink(missing_ok=True)
        proc = _start(keyed, str(tmp_path), wait)
        try:
            _wait_for(tmp_path / "entered")  # the search is in its embedder
            proc.send_signal(signum)
            (tmp_path / "go").touch()
            assert proc.wait(timeout=TIMEOUT_S) == 130
            out, err = proc.communicate()
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        lines = err.splitlines()
        assert lines[-1] == f"vecgraph mcp: stopped; {keyed} closed" and len(lines) == 2, err
        assert json.loads(out.splitlines()[0])["id"] == 0  # the initialize answer


def test_closing_the_servers_stdout_ends_the_session_quietly(keyed, tmp_path):
    proc = _start(keyed, str(tmp_path))
    proc.stdout.close()  # before the initialize answer is written
    try:
        assert proc.wait(timeout=TIMEOUT_S) == 0  # stdin still open
        err = proc.stderr.read()
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        proc.stdin.close()
    lines = err.splitlines()
    assert lines[-1] == f"vecgraph mcp: stopped; {keyed} closed" and len(lines) == 2, err


# ---------------------------------------------------------------------------- memory store


@pytest.fixture()
def store(tmp_path) -> tuple:
    path = str(tmp_path / "agent.vg")
    with vg.Memory.open(path, embedder=FAKE_EMBEDDER) as mem:
        lang = mem.remember("zhang", "order-service is written in Go", kind="project",
                            at="2026-03-01T09:00:00Z")
        pin = mem.remember("omar", "my locker code is 4921 at the gym", kind="fact")
    return path, lang, pin


def test_a_memory_store_exposes_remember_recall_card_forget(store):
    path, lang, pin = store

    async def body(s: ClientSession):
        tools = {tool.name: tool for tool in (await s.list_tools()).tools}
        assert set(tools) == GRAPH_TOOLS | MEMORY_TOOLS
        assert tools["forget"].annotations.destructive_hint is True
        assert set(tools["remember"].input_schema["required"]) == {"user", "text"}
        res = await s.call_tool("remember", {"user": "zhang", "text": "order-service is now in Rust",
                                             "kind": "project", "supersedes": lang})
        rust = res.structured_content["id"]
        assert re.fullmatch(r"m-[0-9a-f]{16}", rust)
        res = await s.call_tool("recall", {"user": "zhang", "query": "which language is order-service in?"})
        memories = res.structured_content["memories"]
        assert [m["id"] for m in memories] == [rust] and memories[0]["supersedes"] == lang
        assert res.structured_content["context"].startswith(f"[{rust}] (project, user, ")
        res = await s.call_tool("recall", {"user": "zhang", "query": "order-service language",
                                           "include_superseded": True})
        assert [m["id"] for m in res.structured_content["memories"]] == [rust, lang]
        card = (await s.call_tool("card", {"user": "zhang"})).structured_content
        assert card["user"] == "zhang" and [entry["id"] for entry in card["projects"]] == [rust]
        assert "not a memory of user 'zhang'" in _error(await s.call_tool(
            "remember", {"user": "zhang", "text": "x", "supersedes": pin}))
        res = await s.call_tool("remember", {"user": "zhang", "text": "x", "at": "soon"})
        assert "ISO 8601" in _error(res)
        for confirm in (False, "true", 1):  # nothing but the boolean true erases
            refused = await s.call_tool("forget", {"user": "omar", "confirm": confirm})
            assert refused.is_error
        assert (await s.call_tool("recall", {"user": "omar", "query": "locker code"})).structured_content["memories"]
        receipt = (await s.call_tool("forget", {"user": "omar", "confirm": True})).structured_content
        assert receipt["verified"] is True and receipt["memories"] == 1 and receipt["found"] == []
        res = await s.call_tool("recall", {"user": "omar", "query": "locker code"})
        assert res.structured_content["memories"] == []
        # the text search of the graph tools embeds with the store's recorded embedder
        res = await s.call_tool("search", {"text": "order-service Rust", "k": 1, "labels": ["project"]})
        assert [h["key"] for h in res.structured_content["hits"]] == [rust]
        assert (await s.call_tool("stats", {})).structured_content["memory_store"] is True
        return rust

    rust = _session(path)(body)
    with vg.Memory.open(path, embedder=FAKE_EMBEDDER, read_only=True) as mem:  # what the server wrote stayed
        assert [hit.id for hit in mem.recall("zhang", "order-service language")] == [rust]
        assert mem.graph.keys(tenants=["omar"]) == []


def test_a_read_only_memory_store_offers_recall_and_card_only(store):
    path, lang, _ = store
    before = _folder_digest(path)

    async def body(s: ClientSession):
        assert {tool.name for tool in (await s.list_tools()).tools} == GRAPH_TOOLS | {"recall", "card"}
        res = await s.call_tool("recall", {"user": "zhang", "query": "which language is order-service in?"})
        assert [m["id"] for m in res.structured_content["memories"]] == [lang]
        card = (await s.call_tool("card", {"user": "zhang"})).structured_content
        assert [entry["id"] for entry in card["projects"]] == [lang]

    _session(path, "--read-only")(body)
    assert _folder_digest(path) == before


# ---------------------------------------------------------------------------- HTTP and the CLI


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_streamable_http_answers_a_search(folder, tmp_path):
    port = _free_port()
    log_path = tmp_path / "server.err"
    with open(log_path, "w") as errlog:
        command = [sys.executable, "-m", "vecgraph", "mcp", folder, "--http", f"127.0.0.1:{port}"]
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=errlog,
                                env=_env())
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert proc.poll() is None, log_path.read_text()
                assert time.monotonic() < deadline, "the server did not listen within 60 s"
                time.sleep(0.05)

        async def main():
            async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write), \
                    ClientSession(read, write) as s:
                await s.initialize()
                assert {tool.name for tool in (await s.list_tools()).tools} == GRAPH_TOOLS
                res = await s.call_tool("search", {"vector": _unit((3, 1.0)).tolist(), "k": 2, "seeds": 1})
                assert [h["key"] for h in res.structured_content["hits"]] == ["widget", "acme"]
                res = await s.call_tool("get_node", {"key": "nobody"})
                assert "'nobody' is not in the graph" in _error(res)

        asyncio.run(asyncio.wait_for(main(), TIMEOUT_S))
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 130  # stopped by the signal, through the shutdown path
        log = log_path.read_text()
        assert f"on http://127.0.0.1:{port}/mcp" in log and log.endswith(f"stopped; {folder} closed\n"), log
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_http_addresses_are_parsed_or_refused_by_name():
    assert parse_http("127.0.0.1:8765") == ("127.0.0.1", 8765)
    assert parse_http("[::1]:80") == ("::1", 80)
    for bad in ("localhost", "127.0.0.1:", ":8765", "127.0.0.1:70000", "127.0.0.1:0", "127.0.0.1:http"):
        with pytest.raises(vg.InvalidArgumentError, match=f"expected HOST:PORT .*got {re.escape(repr(bad))}"):
            parse_http(bad)


def test_the_command_refuses_what_it_cannot_serve(folder, tmp_path):
    assert "no vecgraph graph" in failed(1, "mcp", str(tmp_path / "absent.vg"))
    assert not (tmp_path / "absent.vg").exists()  # never created
    assert "argument --http: expected HOST:PORT" in failed(2, "mcp", folder, "--http", "localhost")
    message = failed(2, "mcp", folder, "--embedder", FAKE_EMBEDDER, path=TESTS_DIR)
    assert "argument --embedder" in message and "64-d" in message and "dim 8" in message


# ---------------------------------------------------------------------------- README


def _readme_block(heading: str) -> str:
    text = README.read_text(encoding="utf-8")
    section = text[text.index(heading):]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_example_runs(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    # the `vecgraph` command of this interpreter first on PATH, as after `pip install`
    monkeypatch.setenv("PATH", os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    exec(compile(_readme_block("## Example"), "README.md (Example)", "exec"), {})  # noqa: S102  (makes memory.vg)
    capsys.readouterr()
    exec(compile(_readme_block("### MCP server"), "README.md (MCP)", "exec"), {})  # noqa: S102  (as a user runs it)
    lines = capsys.readouterr().out.splitlines()
    assert set(eval(lines[0])) == GRAPH_TOOLS
    assert "'key': 'widget'" in lines[1] and "'bm25': 1" in lines[1]
    assert "'src': 'alice', 'rel': 'works_at'" in lines[2] and "'src': 'bob'" in lines[2]
    assert lines[3].startswith("True") and "'nobody' is not in the graph" in lines[3]
