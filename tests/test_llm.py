"""vecgraph.llm against a stub OpenAI-compatible /chat/completions server on 127.0.0.1 (scripted
replies and failures): the request bodies, the replies read, retries, refusals, the environment."""

from __future__ import annotations

import contextlib
import json
import threading
from http.server import BaseHTTPRequestHandler

import pytest
import vecgraph as vg
from vecgraph import remote
from vecgraph.errors import InvalidArgumentError
from vecgraph.llm import OpenAIChat, RemoteError, chat_from_env

from conftest import closed_port_url
from stub_http import send_json, served

ENV_VARS = (
    "OPENAI_BASE_URL",
    "OPENAI_API_KEY",
    "VECGRAPH_LLM_BASE_URL",
    "VECGRAPH_LLM_API_KEY",
    "VECGRAPH_LLM_MODEL",
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "all_proxy",
    "ALL_PROXY",
)

USER = [{"role": "user", "content": "Say hello"}]


def completion(model: str, content: object, usage: dict | None = None) -> dict:
    """An OpenAI chat completion holding ``content``."""
    reply: dict = {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "model": model,
        "choices": [
            {"index": 0, "message": {"role": "assistant", "content": content}, "finish_reason": "stop"}
        ],
    }
    if usage is not None:
        reply["usage"] = usage
    return reply


class ChatStub:
    """The server's state: what came (path, headers, JSON body) and what to answer next.

    ``script`` holds actions answered first, in order: ``("content", text)`` a completion of
    ``text``; ``("json", value)`` that JSON; ``("raw", bytes)``; ``("status", code, headers, body)``;
    ``("sleep", seconds)`` answers after the client gave up. Without one the reply is
    ``"echo: <last message's content>"`` with usage counting words.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: list = []
        self.script: list = []
        self.url = ""

    def bodies(self) -> list:
        with self.lock:
            return [body for _, _, body in self.requests]

    def headers(self) -> list:
        with self.lock:
            return [headers for _, headers, _ in self.requests]

    def wait_for(self, count: int) -> int:
        """The number of requests once ``count`` have come (or 5 s have passed)."""
        for _ in range(500):
            with self.lock:
                if len(self.requests) >= count:
                    break
            threading.Event().wait(0.01)
        with self.lock:
            return len(self.requests)

    def answer(self, body: dict, action: tuple) -> tuple:
        """(status, headers, payload bytes)."""
        kind = action[0]
        if kind == "status":
            return action[1], action[2], action[3]
        if kind == "raw":
            return 200, {}, action[1]
        if kind == "json":
            return 200, {}, json.dumps(action[1]).encode()
        if kind == "content":
            return 200, {}, json.dumps(completion(body["model"], action[1])).encode()
        content = "echo: " + body["messages"][-1]["content"]
        usage = {
            "prompt_tokens": sum(len(m["content"].split()) for m in body["messages"]),
            "completion_tokens": len(content.split()),
            "total_tokens": 0,
        }
        return 200, {}, json.dumps(completion(body["model"], content, usage)).encode()


def _handler(stub: ChatStub) -> type:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
            with stub.lock:
                stub.requests.append((self.path, dict(self.headers), body))
                action = stub.script.pop(0) if stub.script else ("ok",)
            if action[0] == "sleep":
                threading.Event().wait(action[1])
            if self.path != "/v1/chat/completions":
                status, headers, payload = 404, {}, b'{"error": {"message": "no such route"}}'
            else:
                status, headers, payload = stub.answer(body, action)
            send_json(self, status, headers, payload)

        def log_message(self, *args: object) -> None:
            pass

    return Handler


@contextlib.contextmanager
def serving():
    """A ChatStub served on 127.0.0.1 (a port of its own) while the block runs; its ``url`` ends
    in ``/v1``."""
    state = ChatStub()
    with served(state, _handler(state)):
        yield state


def clear_env(monkeypatch) -> None:
    for name in ENV_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture()
def stub(monkeypatch):
    clear_env(monkeypatch)
    with serving() as state:
        yield state



# ------------------------------------------------------------------ requests and replies


def test_the_request_body_and_the_reply_content(stub):
    chat = OpenAIChat("gpt-test", base_url=stub.url, api_key="sk-secret-9", temperature=0.2, max_tokens=50)
    messages = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Say hello"}]
    assert chat(messages) == "echo: Say hello"
    assert stub.bodies() == [
        {"model": "gpt-test", "messages": messages, "temperature": 0.2, "max_tokens": 50}
    ]
    path, headers, _ = stub.requests[0]
    assert path == "/v1/chat/completions"
    assert headers["Authorization"] == "Bearer sk-secret-9" and headers["Content-Type"] == "application/json"
    chat(USER, max_tokens=7)  # the call's cap overrides the instance's
    assert stub.bodies()[1]["max_tokens"] == 7
    OpenAIChat("m", base_url=stub.url)(USER)  # no cap, no key: neither is sent
    assert stub.bodies()[2] == {"model": "m", "messages": USER, "temperature": 0.0}
    assert "Authorization" not in stub.headers()[2]


def test_json_schema_is_sent_as_a_strict_response_format(stub):
    chat = OpenAIChat("m", base_url=stub.url)
    schema = {
        "title": "answer_v2",
        "type": "object",
        "properties": {"a": {"type": "string"}},
        "required": ["a"],
        "additionalProperties": False,
    }
    stub.script.append(("content", '{"a": "x"}'))
    assert chat(USER, json_schema=schema) == '{"a": "x"}'
    assert stub.bodies()[0]["response_format"] == {
        "type": "json_schema",
        "json_schema": {"name": "answer_v2", "schema": schema, "strict": True},
    }
    for title in (None, "two words", "x" * 65):  # no title, or one the API would refuse as a name
        untitled = {"type": "object"} if title is None else {"title": title, "type": "object"}
        chat(USER, json_schema=untitled)
        assert stub.bodies()[-1]["response_format"]["json_schema"]["name"] == "reply"
    with pytest.raises(TypeError, match="json_schema must be a dict"):
        chat(USER, json_schema="{}")
    assert len(stub.requests) == 4


def test_calls_and_token_usage_are_counted(stub):
    chat = OpenAIChat("m", base_url=stub.url)
    chat([{"role": "user", "content": "one two three"}])  # usage: 3 prompt words, "echo: one two three" 4
    chat([{"role": "system", "content": "a b"}, {"role": "user", "content": "c"}])  # 3 and 2
    assert chat.calls == 2 and chat.usage == {"prompt_tokens": 6, "completion_tokens": 6}
    stub.script.append(("content", "no usage here"))
    assert chat(USER) == "no usage here"
    assert chat.calls == 3 and chat.usage == {"prompt_tokens": 6, "completion_tokens": 6}


def test_an_empty_content_is_returned_as_it_is(stub):
    stub.script.append(("content", ""))
    assert OpenAIChat("m", base_url=stub.url)(USER) == ""


@pytest.mark.parametrize(
    ("reply", "words"),
    [
        ({"object": "error", "detail": "x"}, "the reply has no 'choices' (got keys ['detail', 'object'])"),
        ({"choices": []}, "the reply has no 'choices' (got an empty 'choices' list)"),
        ([1, 2], "the reply has no 'choices' (got list)"),
        ({"choices": [{"text": "legacy"}]}, "choices[0] has no 'message' object (got {'text': 'legacy'})"),
        (completion("m", None), "choices[0].message has content NoneType, expected a str"),
        ({"choices": [{"message": {"role": "assistant"}}]}, "choices[0].message has no 'content'"),
        (
            {"choices": [{"message": {"content": None, "refusal": "I can't help with that."}}]},
            'the model refused: "I can\'t help with that."',
        ),
    ],
)
def test_replies_without_a_content_str_raise_saying_what_came(stub, reply, words):
    stub.script.append(("json", reply))
    with pytest.raises(RemoteError) as e:
        OpenAIChat("m", base_url=stub.url)(USER)
    assert f"POST {stub.url}/chat/completions (model 'm'): " in str(e.value)
    assert words in str(e.value) and e.value.status == 200 and len(stub.requests) == 1


def test_a_reply_that_is_not_json(stub):
    stub.script.append(("raw", b"<html>gateway</html>"))
    with pytest.raises(RemoteError, match="HTTP 200 reply is not JSON: '<html>gateway</html>'"):
        OpenAIChat("m", base_url=stub.url)(USER)


# ------------------------------------------------------------------ retries and refusals


def test_500_then_success_is_retried_with_backoff(stub, waits):
    stub.script += [("status", 500, {}, b'{"error": {"message": "busy"}}')] * 2
    chat = OpenAIChat("m", base_url=stub.url, backoff_s=0.01, max_retries=3)
    assert chat(USER) == "echo: Say hello"
    assert waits == [0.01, 0.02] and len(stub.requests) == 3 and chat.calls == 1
    assert stub.bodies()[0] == stub.bodies()[2]  # the same request again


def test_retry_after_is_honoured(stub, waits):
    stub.script.append(("status", 429, {"Retry-After": "0.5"}, b'{"error": "slow down"}'))
    assert OpenAIChat("m", base_url=stub.url, backoff_s=0.01)(USER) == "echo: Say hello"
    assert waits == [0.5] and len(stub.requests) == 2


def test_a_server_slower_than_timeout_s_is_retried_a_bounded_number_of_times(stub, waits):
    stub.script += [("sleep", 2.0)] * 3
    chat = OpenAIChat("m", base_url=stub.url, timeout_s=0.2, max_retries=2, backoff_s=0.01)
    with pytest.raises(RemoteError) as e:
        chat(USER)
    message = str(e.value)
    assert f"POST {stub.url}/chat/completions (model 'm'): no reply within timeout_s=0.2 s" in message
    assert "gave up after 3 attempts" in message and "max_retries=2" in message
    assert e.value.status is None and waits == [0.01, 0.02] and chat.calls == 0
    assert stub.wait_for(3) == 3
    chat.timeout_s = 30.0  # the next reply is taken
    assert chat(USER) == "echo: Say hello" and stub.wait_for(4) == 4


def test_400_is_not_retried_and_carries_the_servers_words(stub, waits):
    stub.script.append(("status", 400, {}, b'{"error": {"message": "max_tokens is too large"}}'))
    with pytest.raises(RemoteError) as e:
        OpenAIChat("m", base_url=stub.url, max_retries=3)(USER)
    assert "HTTP 400 Bad Request: 'max_tokens is too large'" in str(e.value)
    assert e.value.status == 400 and len(stub.requests) == 1 and waits == []
    assert isinstance(e.value, vg.Error)


def test_the_key_is_never_in_errors_or_repr(stub, waits):
    echo = json.dumps({"error": {"message": "Incorrect API key provided: sk-LEAK-77"}}).encode()
    stub.script.append(("status", 401, {}, echo))
    chat = OpenAIChat("m", base_url=stub.url, api_key="sk-LEAK-77")
    with pytest.raises(RemoteError) as e:
        chat(USER)
    assert "sk-LEAK-77" not in str(e.value) and "Incorrect API key provided: <api_key>" in str(e.value)
    assert "VECGRAPH_LLM_API_KEY or OPENAI_API_KEY" in str(e.value) and waits == []
    stub.script.append(("json", {"choices": [{"message": {"content": None, "refusal": "no sk-LEAK-77"}}]}))
    with pytest.raises(RemoteError) as e:
        chat(USER)
    assert "sk-LEAK-77" not in str(e.value) and "no <api_key>" in str(e.value)
    assert repr(chat) == f"OpenAIChat(model='m', base_url='{stub.url}')"
    with pytest.raises(InvalidArgumentError) as e:
        OpenAIChat("m", base_url=stub.url, api_key="sk-\nLEAK")
    assert "LEAK" not in str(e.value) and "the api_key argument" in str(e.value)


def test_a_refused_connection_is_retried_then_reported(waits):
    url = closed_port_url()
    with pytest.raises(RemoteError) as e:
        OpenAIChat("m", base_url=url, max_retries=1, backoff_s=0.01)(USER)
    assert f"POST {url}/chat/completions (model 'm'): cannot connect:" in str(e.value)
    assert "gave up after 2 attempts" in str(e.value) and waits == [0.01]


# ------------------------------------------------------------------ arguments


@pytest.mark.parametrize(
    ("messages", "error", "words"),
    [
        ("hello", TypeError, "messages must be a list of {'role': ..., 'content': ...} dicts, got str"),
        ([], InvalidArgumentError, "messages must hold at least one message, got an empty list"),
        (
            [USER[0], ("user", "x")],
            TypeError,
            "messages[1] must be a dict {'role': ..., 'content': ...}, got tuple",
        ),
        (
            [{"role": "robot", "content": "x"}],
            InvalidArgumentError,
            "messages[0]['role'] must be one of ['system', 'user', 'assistant'], got 'robot'",
        ),
        ([{"role": "user", "content": 5}], TypeError, "messages[0]['content'] must be a str, got int"),
        ([{"role": 1, "content": "x"}], TypeError, "messages[0]['role'] must be a str, got int"),
        ([{"content": "x"}], InvalidArgumentError, "messages[0] lacks ['role']"),
        (
            [{"role": "user", "content": "x", "name": "ada"}],
            InvalidArgumentError,
            "messages[0] holds other keys ['name']: expected exactly the keys 'role' and 'content'",
        ),
    ],
)
def test_messages_are_checked_before_any_request(stub, messages, error, words):
    with pytest.raises(error) as e:
        OpenAIChat("m", base_url=stub.url)(messages)
    assert words in str(e.value) and stub.requests == []


def test_constructor_arguments_are_checked(stub):
    with pytest.raises(InvalidArgumentError, match=r"temperature must be finite and >= 0, got -1"):
        OpenAIChat("m", base_url=stub.url, temperature=-1)
    with pytest.raises(InvalidArgumentError, match="temperature must be finite and >= 0, got nan"):
        OpenAIChat("m", base_url=stub.url, temperature=float("nan"))
    with pytest.raises(TypeError, match="temperature must be a number, got str"):
        OpenAIChat("m", base_url=stub.url, temperature="0")
    with pytest.raises(InvalidArgumentError, match="max_tokens must be >= 1, got 0"):
        OpenAIChat("m", base_url=stub.url, max_tokens=0)
    with pytest.raises(InvalidArgumentError, match="max_tokens must be >= 1, got 0"):
        OpenAIChat("m", base_url=stub.url)(USER, max_tokens=0)
    with pytest.raises(InvalidArgumentError, match="model must not be empty"):
        OpenAIChat("", base_url=stub.url)
    with pytest.raises(InvalidArgumentError, match="base_url must be an http:// or https:// URL"):
        OpenAIChat("m", base_url="ftp://host")
    assert stub.requests == []


# ------------------------------------------------------------------ environment


def test_base_url_and_key_from_the_environment_vecgraph_variables_first(stub, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", closed_port_url())
    monkeypatch.setenv("VECGRAPH_LLM_BASE_URL", stub.url)
    monkeypatch.setenv("OPENAI_API_KEY", "openai-key")
    chat = OpenAIChat("m")
    chat(USER)
    assert chat.base_url == stub.url and stub.headers()[-1]["Authorization"] == "Bearer openai-key"
    monkeypatch.setenv("VECGRAPH_LLM_API_KEY", "vecgraph-key")
    OpenAIChat("m")(USER)
    assert stub.headers()[-1]["Authorization"] == "Bearer vecgraph-key"
    monkeypatch.delenv("VECGRAPH_LLM_BASE_URL")
    monkeypatch.setenv("OPENAI_BASE_URL", stub.url + "/")
    assert OpenAIChat("m").base_url == stub.url
    monkeypatch.delenv("OPENAI_BASE_URL")
    assert OpenAIChat("m").base_url == remote.DEFAULT_OPENAI_BASE_URL  # no request made
    assert len(stub.requests) == 2


def test_chat_from_env_needs_the_model_variable(stub, monkeypatch):
    with pytest.raises(InvalidArgumentError, match="set VECGRAPH_LLM_MODEL to the chat model's name"):
        chat_from_env()
    monkeypatch.setenv("VECGRAPH_LLM_MODEL", "   ")
    with pytest.raises(InvalidArgumentError, match="VECGRAPH_LLM_MODEL"):
        chat_from_env()
    monkeypatch.setenv("VECGRAPH_LLM_MODEL", " local-model ")
    monkeypatch.setenv("VECGRAPH_LLM_BASE_URL", stub.url)
    monkeypatch.setenv("VECGRAPH_LLM_API_KEY", "k-1")
    chat = chat_from_env()
    assert stub.requests == []  # building makes no request
    assert chat(USER) == "echo: Say hello"
    assert stub.bodies()[0]["model"] == "local-model" and stub.headers()[0]["Authorization"] == "Bearer k-1"
    assert chat.model == chat.name == "local-model"
