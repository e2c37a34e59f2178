"""A chat model behind an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint, over
the standard library's ``urllib`` (no dependency): OpenAI's API and the servers that copy it
(vLLM, llama.cpp's server, Ollama, LM Studio, LiteLLM, ...).

:class:`OpenAIChat` sends ``{"model", "messages", "temperature", "max_tokens"?,
"response_format"?}`` and returns the reply's ``choices[0].message.content``. It shares its
transport with :mod:`vecgraph.remote`: the ``Authorization: Bearer <api_key>`` header, the
deadline ``timeout_s`` of each attempt, retries with exponential backoff on HTTP 408, 429 and
5xx, timeouts and dropped connections (``Retry-After`` honoured), no redirects followed, and
:class:`~vecgraph.remote.RemoteError` naming the URL, the model and what went wrong, never the
key. :func:`chat_from_env` builds one from environment variables.

Nothing here runs unless a user configures a chat model: vecgraph's knowledge-base layer has an
offline default for every step a chat model can do (see :mod:`vecgraph.kb.llm_hooks`).
"""

from __future__ import annotations

import math
import re
import threading
from typing import Any, Protocol

from .errors import InvalidArgumentError
from .remote import DEFAULT_OPENAI_BASE_URL, RemoteError, _Client, _count, _env

__all__ = ["ROLES", "Chat", "OpenAIChat", "RemoteError", "chat_from_env", "check_messages"]

#: The roles a message may have.
ROLES = ("system", "user", "assistant")

_SCHEMA_NAME = re.compile(r"[A-Za-z0-9_-]{1,64}")


class Chat(Protocol):
    """What the knowledge base's chat-model hooks call: :class:`OpenAIChat`, or any callable
    ``(messages, *, json_schema=None, max_tokens=None) -> str`` (a test double, another client)."""

    def __call__(
        self, messages: list[dict], *, json_schema: dict | None = None, max_tokens: int | None = None
    ) -> str: ...


def check_messages(messages: Any) -> list[dict]:
    """``messages`` checked: a non-empty list of ``{"role": r, "content": c}`` dicts, ``r`` one of
    :data:`ROLES`, ``c`` a str; returned as a list of new dicts (the caller's are not kept).

    Raises:
        TypeError: not a list or tuple; an item that is not a dict; a role or content that is not
            a str (the item's index named).
        InvalidArgumentError: no messages; an item missing ``role`` or ``content``, or holding
            another key; an unknown role.
    """
    if not isinstance(messages, (list, tuple)):
        raise TypeError(
            f"messages must be a list of {{'role': ..., 'content': ...}} dicts, got {type(messages).__name__}"
        )
    if not messages:
        raise InvalidArgumentError("messages must hold at least one message, got an empty list")
    checked = []
    for index, item in enumerate(messages):
        if not isinstance(item, dict):
            raise TypeError(
                f"messages[{index}] must be a dict {{'role': ..., 'content': ...}}, got {type(item).__name__}"
            )
        missing = [key for key in ("role", "content") if key not in item]
        extra = sorted(str(key) for key in item if key not in ("role", "content"))
        if missing or extra:
            what = f"lacks {missing}" if missing else f"holds other keys {extra}"
            raise InvalidArgumentError(
                f"messages[{index}] {what}: expected exactly the keys 'role' and 'content'"
            )
        role, content = item["role"], item["content"]
        if not isinstance(role, str):
            raise TypeError(f"messages[{index}]['role'] must be a str, got {type(role).__name__}")
        if role not in ROLES:
            raise InvalidArgumentError(
                f"messages[{index}]['role'] must be one of {list(ROLES)}, got {role!r}"
            )
        if not isinstance(content, str):
            raise TypeError(f"messages[{index}]['content'] must be a str, got {type(content).__name__}")
        checked.append({"role": role, "content": content})
    return checked


def _max_tokens(value: Any, label: str) -> int | None:
    return None if value is None else _count(value, label, 1)


class OpenAIChat(_Client):
    """A chat model behind an OpenAI-compatible ``POST {base_url}/chat/completions`` endpoint;
    a :class:`Chat`.

    Args:
        model: the model name the endpoint serves, e.g. ``"gpt-4o-mini"`` or a local model's name.
        base_url: the API's base URL (``/chat/completions`` is appended). When None: the first set
            of the environment variables ``VECGRAPH_LLM_BASE_URL`` and ``OPENAI_BASE_URL``, else
            :data:`vecgraph.remote.DEFAULT_OPENAI_BASE_URL`.
        api_key: sent as ``Authorization: Bearer <api_key>`` (surrounding whitespace stripped).
            When None: the first set of ``VECGRAPH_LLM_API_KEY`` and ``OPENAI_API_KEY``, else none
            is sent (local servers need none).
        timeout_s: the deadline of each attempt, in seconds: connecting and reading the whole
            reply (see :mod:`vecgraph.remote`); a long answer needs a generous one.
        max_retries, backoff_s, max_backoff_s: retries of an attempt that may pass, waiting
            ``backoff_s * 2**attempt`` seconds, at most ``max_backoff_s`` (see :mod:`vecgraph.remote`).
        temperature: the sampling temperature sent (finite, >= 0; 0 for replies as repeatable as
            the endpoint makes them).
        max_tokens: the default cap on a reply's tokens (>= 1), sent as ``"max_tokens"``; None
            sends none (the endpoint's own limit applies). A call's ``max_tokens`` overrides it.

    Attributes:
        calls: the number of calls answered with JSON by the endpoint (retried attempts count once).
        usage: ``{"prompt_tokens": int, "completion_tokens": int}``, summed over the replies' ``usage``
            fields (replies without one add nothing).

    Raises:
        InvalidArgumentError: an empty model; a bad base URL or API key (as
            :class:`vecgraph.remote.OpenAIEmbedder`; the key is never repeated); a negative or
            non-finite temperature, timeout or backoff; ``max_tokens`` < 1.
        TypeError: an argument of the wrong type.
    """

    _key_vars = ("VECGRAPH_LLM_API_KEY", "OPENAI_API_KEY")

    def __init__(
        self,
        model: str,
        base_url: str | None = None,
        api_key: str | None = None,
        *,
        timeout_s: float = 60.0,
        max_retries: int = 3,
        backoff_s: float = 0.5,
        max_backoff_s: float = 8.0,
        temperature: float = 0.0,
        max_tokens: int | None = None,
    ) -> None:
        if base_url is None:
            base_url = _env("VECGRAPH_LLM_BASE_URL", "OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
        self._setup(model, base_url, api_key, timeout_s, max_retries, backoff_s, max_backoff_s)
        if isinstance(temperature, bool) or not isinstance(temperature, (int, float)):
            raise TypeError(f"temperature must be a number, got {type(temperature).__name__}")
        if not math.isfinite(temperature) or temperature < 0:
            raise InvalidArgumentError(f"temperature must be finite and >= 0, got {temperature}")
        self.temperature = float(temperature)
        self.max_tokens = _max_tokens(max_tokens, "max_tokens")
        self.name = model
        self.calls = 0
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self._lock = threading.Lock()

    def __call__(
        self, messages: list[dict], *, json_schema: dict | None = None, max_tokens: int | None = None
    ) -> str:
        """The model's reply to ``messages``: one request, its ``choices[0].message.content``.

        Args:
            messages: ``[{"role": "system" | "user" | "assistant", "content": str}, ...]``, at
                least one.
            json_schema: a JSON Schema the reply must follow, sent as ``response_format =
                {"type": "json_schema", "json_schema": {"name": ..., "schema": json_schema,
                "strict": True}}`` (the name is the schema's ``title`` when it is 1..64 letters,
                digits, ``_`` or ``-``, else ``"reply"``). Strict mode wants every object's
                properties all ``required`` and ``"additionalProperties": false``. The reply is
                still a str: parse and check it (servers that ignore the field answer freely).
            max_tokens: this call's cap on the reply's tokens (>= 1); None: the instance's.

        Returns:
            The reply's text (a str, possibly empty).

        Raises:
            TypeError, InvalidArgumentError: bad messages (the item named, see
                :func:`check_messages`), a json_schema that is not a dict, max_tokens < 1.
            RemoteError: the request failed (see :mod:`vecgraph.remote`), or the reply has no
                ``choices[0].message.content`` str (the message says what came instead, or the
                model's refusal).
        """
        payload: dict = {
            "model": self.model,
            "messages": check_messages(messages),
            "temperature": self.temperature,
        }
        limit = _max_tokens(max_tokens, "max_tokens")
        limit = self.max_tokens if limit is None else limit
        if limit is not None:
            payload["max_tokens"] = limit
        if json_schema is not None:
            if not isinstance(json_schema, dict):
                raise TypeError(
                    f"json_schema must be a dict (a JSON Schema) or None, got {type(json_schema).__name__}"
                )
            title = json_schema.get("title")
            name = title if isinstance(title, str) and _SCHEMA_NAME.fullmatch(title) else "reply"
            payload["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": json_schema, "strict": True},
            }
        reply = self._post("/chat/completions", payload)
        with self._lock:
            self.calls += 1
            usage = reply.get("usage") if isinstance(reply, dict) else None
            if isinstance(usage, dict):
                for key in self.usage:
                    count = usage.get(key)
                    if isinstance(count, int) and not isinstance(count, bool) and count >= 0:
                        self.usage[key] += count
        return self._content(reply)

    def _content(self, reply: Any) -> str:
        """``choices[0].message.content`` of ``reply``, else a RemoteError saying what came."""
        choices = reply.get("choices") if isinstance(reply, dict) else None
        if not isinstance(choices, list) or not choices:
            got = f"keys {sorted(map(str, reply))[:8]}" if isinstance(reply, dict) else type(reply).__name__
            if isinstance(choices, list):
                got = "an empty 'choices' list"
            raise self._bad_reply("/chat/completions", f"the reply has no 'choices' (got {got})")
        first = choices[0]
        message = first.get("message") if isinstance(first, dict) else None
        if not isinstance(message, dict):
            raise self._bad_reply(
                "/chat/completions",
                f"choices[0] has no 'message' object (got {self._scrub(str(first))[:80]})",
            )
        content = message.get("content")
        if isinstance(content, str):
            return content
        refusal = message.get("refusal")
        if isinstance(refusal, str) and refusal:
            raise self._bad_reply("/chat/completions", f"the model refused: {self._scrub(refusal)[:200]!r}")
        got = "no 'content'" if "content" not in message else f"content {type(content).__name__}"
        raise self._bad_reply(
            "/chat/completions",
            f"choices[0].message has {got}, expected a str (message keys {sorted(map(str, message))[:8]})",
        )

    def __repr__(self) -> str:
        return f"OpenAIChat(model={self.model!r}, base_url={self.base_url!r})"


def chat_from_env() -> OpenAIChat:
    """An :class:`OpenAIChat` configured by environment variables: ``VECGRAPH_LLM_MODEL``
    (required), and the base URL and key as :class:`OpenAIChat` reads them
    (``VECGRAPH_LLM_BASE_URL`` before ``OPENAI_BASE_URL``, ``VECGRAPH_LLM_API_KEY`` before
    ``OPENAI_API_KEY``). No request is made.

    Raises:
        InvalidArgumentError: ``VECGRAPH_LLM_MODEL`` unset or blank; a bad base URL or key.
    """
    model = _env("VECGRAPH_LLM_MODEL")
    if model is None:
        raise InvalidArgumentError(
            "set VECGRAPH_LLM_MODEL to the chat model's name (and VECGRAPH_LLM_BASE_URL "
            "/ VECGRAPH_LLM_API_KEY as the endpoint needs)"
        )
    return OpenAIChat(model.strip())
