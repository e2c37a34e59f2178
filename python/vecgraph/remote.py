"""Embedders and rerankers behind HTTP endpoints: OpenAI-compatible ``/embeddings`` and the
common ``/rerank`` shape, over the standard library's ``urllib`` (no dependency).

- :class:`OpenAIEmbedder`: ``POST {base_url}/embeddings`` with ``{"model": ..., "input": [...]}``,
  reply ``{"data": [{"index": i, "embedding": [...]}, ...]}``: OpenAI's API and the servers
  that copy it (vLLM, llama.cpp's server, Ollama, LM Studio, text-embeddings-inference's
  OpenAI route, LiteLLM, ...). :func:`openai_from_env` builds one from environment variables,
  for ``vecgraph.embedders.load("vecgraph.remote:openai_from_env")`` and ``--embedder``.
- :class:`HTTPReranker`: ``POST {base_url}/rerank`` with ``{"model", "query", "documents",
  "top_n"}``, reply ``{"results": [{"index": i, "relevance_score": s}, ...]}`` (Cohere, Jina,
  vLLM, Infinity, llama.cpp's server) or ``[{"index": i, "score": s}, ...]``
  (text-embeddings-inference, which reads the texts from ``"texts"``: ``documents_field="texts"``).

Both send ``Authorization: Bearer <api_key>`` when a key is set (surrounding whitespace
stripped; a key holding a control character or a character outside latin-1 cannot be sent in a
header and is refused at construction). ``timeout_s`` is the deadline of each attempt as a
whole: connecting, then the reply's status line, headers and body must all be done within
``timeout_s`` seconds of the attempt's start (name resolution aside), however slowly a server
trickles its bytes. Attempts that may pass (HTTP 408, 429 and 5xx, timeouts, refused or dropped
connections) are retried up to ``max_retries`` times, waiting ``backoff_s * 2**attempt`` seconds
(at most ``max_backoff_s``) or what the reply's ``Retry-After`` header asks (exponential backoff
as in RFC 9110's Retry-After, section 10.2.3); so one call lasts at most about
``(max_retries + 1) * timeout_s`` plus the waits. Nothing else is retried. Redirects (HTTP 3xx)
are not followed, as following them would send the key to another address and turn the POST
into a GET: set ``base_url`` to the final endpoint. Failures raise :class:`RemoteError`, whose
message names the URL, the model and what went wrong; a vector of another length raises
:class:`~vecgraph.errors.DimensionMismatchError`. The API key never appears in a message or repr.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import functools
import http.client
import io
import json
import math
import os
import re
import socket
import ssl
import time
import unicodedata
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timezone
from typing import Any

import numpy as np

from .embedders import check_output
from .errors import DimensionMismatchError, Error, InvalidArgumentError

__all__ = ["DEFAULT_OPENAI_BASE_URL", "HTTPReranker", "OpenAIEmbedder", "RemoteError", "openai_from_env"]

#: The base URL of :class:`OpenAIEmbedder` when neither an argument nor the environment gives one.
DEFAULT_OPENAI_BASE_URL = "https://api.openai.com/v1"

#: HTTP statuses worth another attempt: request timeout, rate limit, server errors.
RETRY_STATUSES = frozenset({408, 429}) | frozenset(range(500, 600))

_sleep = time.sleep  # how retries wait (tests replace it to see the delays)


class RemoteError(Error):
    """An embedding or reranking endpoint that could not be reached (refused, timed out, failed
    with HTTP 5xx after every retry) or refused the request (HTTP 4xx), or whose reply is not
    what its API promises (not JSON, missing fields, another number of rows).

    Attributes:
        url: the URL that was posted to.
        status: the last HTTP status, or None when no reply came.
    """

    def __init__(self, message: str, *, url: str = "", status: int | None = None) -> None:
        super().__init__(message)
        self.url = url
        self.status = status


def _env_named(*names: str) -> tuple[str | None, str]:
    """``(value, name)`` of the first of ``names`` set to more than whitespace, else ``(None, "")``."""
    for name in names:
        value = os.environ.get(name)
        if value and value.strip():
            return value, name
    return None, ""


def _env(*names: str) -> str | None:
    """The value of the first of ``names`` set to more than whitespace."""
    return _env_named(*names)[0]


def _check_key(api_key: Any, source: str) -> str | None:
    """``api_key`` without surrounding whitespace (None for none or an empty one), refused when
    an HTTP header cannot carry it; messages name ``source`` and the key's length, never the key.

    Raises:
        TypeError: not a str.
        InvalidArgumentError: a control character or a character outside latin-1 in it.
    """
    if api_key is None:
        return None
    if not isinstance(api_key, str):
        raise TypeError(f"api_key must be a str or None, got {type(api_key).__name__}")
    key = api_key.strip()
    for position, char in enumerate(key):
        code = ord(char)
        if code > 0xFF or unicodedata.category(char) == "Cc":
            kind = "a control character" if code <= 0xFF else "a character outside latin-1"
            raise InvalidArgumentError(
                f"the API key from {source} ({len(key)} characters once surrounding whitespace is "
                f"stripped) holds {kind} (U+{code:04X}) at position {position}, which an HTTP header "
                "cannot carry: expected the key alone, printable latin-1 characters (check how it was "
                "copied)")
    return key or None


def _check_base_url(base_url: Any) -> str:
    """``base_url`` without surrounding whitespace and trailing slashes, checked: an http or
    https URL with a host, a port (if any) in 1..65535, no credentials, query or fragment.

    Raises:
        InvalidArgumentError: anything else (a URL holding credentials is not repeated).
    """
    if not isinstance(base_url, str) or not base_url.strip().lower().startswith(("http://", "https://")):
        raise InvalidArgumentError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
    url = base_url.strip()
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError as e:  # e.g. an unclosed IPv6 bracket
        raise InvalidArgumentError(f"base_url {url!r} is not a URL ({e})") from None
    if "@" in parts.netloc:
        raise InvalidArgumentError("base_url must not hold a user name or password (the part before '@'; "
                                   "not repeated here): pass the key as api_key= or its environment variable")
    if re.search(r"[\x00-\x20\x7f-\x9f]", url):
        raise InvalidArgumentError(f"base_url must not contain whitespace or control characters, got {url!r}")
    if not parts.hostname:
        raise InvalidArgumentError(f"base_url has no host: expected e.g. 'http://127.0.0.1:8000/v1', got {url!r}")
    try:
        port = parts.port
    except ValueError:
        port = -1
    if port is not None and not 1 <= port <= 65535:
        given = parts.netloc.rpartition(":")[2]
        raise InvalidArgumentError(f"base_url's port must be an integer in 1..65535, got {given!r} "
                                   f"(in {url!r})")
    if parts.query or parts.fragment or url.endswith(("?", "#")):
        raise InvalidArgumentError(f"base_url must not have a query or fragment (a path is appended to it), "
                                   f"got {url!r}")
    return url.rstrip("/")


class _DeadlineReader(io.RawIOBase):
    """A reply's socket reader whose reads end by ``deadline`` (a ``time.monotonic()`` value):
    before each read the socket's timeout is set to the time left, so a server trickling bytes
    cannot stretch an attempt past it."""

    def __init__(self, raw: Any, sock: socket.socket, deadline: float) -> None:
        super().__init__()
        self._raw, self._sock, self._deadline = raw, sock, deadline

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> Any:
        left = self._deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("the attempt's deadline has passed")
        self._sock.settimeout(left)
        return self._raw.readinto(buffer)

    def close(self) -> None:
        if not self.closed:
            self._raw.close()
        super().close()


class _DeadlineResponse(http.client.HTTPResponse):
    """An HTTP response read through a :class:`_DeadlineReader` (status line, headers, body)."""

    def __init__(self, sock: Any, debuglevel: int = 0, method: str | None = None, url: str | None = None,
                 *, deadline: float) -> None:
        super().__init__(sock, debuglevel, method, url)
        self.fp = io.BufferedReader(_DeadlineReader(self.fp.detach(), sock, deadline))


class _DeadlineMixin:
    """For urllib's HTTP(S) handlers: connections whose responses end by ``deadline``."""

    deadline: float

    def do_open(self, http_class: Any, req: Any, **http_conn_args: Any) -> Any:
        deadline = self.deadline

        def connection(host: str, **kwargs: Any) -> Any:
            conn = http_class(host, **kwargs)
            conn.response_class = functools.partial(_DeadlineResponse, deadline=deadline)
            return conn

        return super().do_open(connection, req, **http_conn_args)  # type: ignore[misc]


class _DeadlineHTTPHandler(_DeadlineMixin, urllib.request.HTTPHandler):
    pass


class _DeadlineHTTPSHandler(_DeadlineMixin, urllib.request.HTTPSHandler):
    pass


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Redirects are not followed: the 3xx reply reaches the caller as an HTTPError."""

    def redirect_request(self, req: Any, fp: Any, code: int, msg: str, headers: Any, newurl: str) -> None:
        return None


def _opener(deadline: float) -> urllib.request.OpenerDirector:
    """urllib's opener (proxies from the environment as usual), without redirects, with replies
    that must end by ``deadline``."""
    http_handler, https_handler = _DeadlineHTTPHandler(), _DeadlineHTTPSHandler()
    http_handler.deadline = https_handler.deadline = deadline
    return urllib.request.build_opener(_NoRedirect, http_handler, https_handler)


def _excerpt(raw: bytes, width: int = 200) -> str:
    """A reply body for a message: an API's ``{"error": {"message": ...}}`` message if it has
    one, else the text with whitespace collapsed, cut to ``width`` characters."""
    text = raw.decode("utf-8", errors="replace")
    try:
        parsed = json.loads(text)
    except ValueError:
        parsed = None
    if isinstance(parsed, dict):
        err = parsed.get("error", parsed.get("message", parsed.get("detail")))
        if isinstance(err, dict):
            err = err.get("message", err)
        if err is not None:
            text = str(err)
    text = " ".join(text.split())
    return repr(text if len(text) <= width else text[: width - 3] + "...")


def _retry_after_s(value: str | None) -> float | None:
    """Seconds a ``Retry-After`` header asks to wait (delay-seconds or an HTTP-date), or None."""
    if not value:
        return None
    value = value.strip()
    try:
        seconds = float(value)
    except ValueError:
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError, IndexError):
            return None
        if when.tzinfo is None:
            when = when.replace(tzinfo=timezone.utc)
        seconds = (when - datetime.now(timezone.utc)).total_seconds()
    return max(0.0, seconds) if math.isfinite(seconds) else None


def _count(value: Any, label: str, least: int) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{label} must be an int, got {type(value).__name__}")
    if value < least:
        raise InvalidArgumentError(f"{label} must be >= {least}, got {value}")
    return int(value)


def _seconds(value: Any, label: str, positive: bool) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.integer, np.floating)):
        raise TypeError(f"{label} must be a number of seconds, got {type(value).__name__}")
    if not math.isfinite(value) or value < 0 or (positive and value == 0):
        raise InvalidArgumentError(f"{label} must be finite and {'>' if positive else '>='} 0, got {value}")
    return float(value)


def _texts(texts: Any) -> list[str]:
    if isinstance(texts, (str, bytes)):
        raise TypeError("texts must be a list of str, got a single str")
    texts = list(texts)
    for row, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"text {row} must be a str, got {type(text).__name__}")
    return texts


class _Client:
    """What both clients share: the endpoint, the key, and POST with retries."""

    model: str
    base_url: str
    _key_vars: tuple[str, ...]

    def _setup(self, model: Any, base_url: str | None, api_key: str | None, timeout_s: Any,
               max_retries: Any, backoff_s: Any, max_backoff_s: Any) -> None:
        """Check and keep the arguments; ``api_key`` None: read from ``_key_vars``."""
        if not isinstance(model, str):
            raise TypeError(f"model must be a str, got {type(model).__name__}")
        if not model:
            raise InvalidArgumentError("model must not be empty: the endpoint needs a model name")
        key_source = "the api_key argument"
        if api_key is None:
            api_key, name = _env_named(*self._key_vars)
            key_source = f"the environment variable {name}"
        self.base_url = _check_base_url(base_url)
        self._api_key = _check_key(api_key, key_source)
        self.model = model
        self.timeout_s = _seconds(timeout_s, "timeout_s", positive=True)
        self.max_retries = _count(max_retries, "max_retries", 0)
        self.backoff_s = _seconds(backoff_s, "backoff_s", positive=False)
        self.max_backoff_s = _seconds(max_backoff_s, "max_backoff_s", positive=False)

    def _post(self, path: str, payload: dict) -> Any:
        """POST ``payload`` as JSON to ``base_url + path``; the decoded JSON reply.

        Raises:
            RemoteError: see the module's docstring.
        """
        url = self.base_url + path
        where = f"POST {url} (model {self.model!r})"
        headers = {"Content-Type": "application/json", "Accept": "application/json", "User-Agent": "vecgraph"}
        if self._api_key:
            headers["Authorization"] = f"Bearer {self._api_key}"
        body = json.dumps(payload).encode("utf-8")
        attempts = self.max_retries + 1
        start = time.monotonic()
        status: int | None = None
        for attempt in range(attempts):
            retry_after: float | None = None
            status = None
            replied = False
            try:
                request = urllib.request.Request(url, data=body, headers=headers, method="POST")
                opener = _opener(time.monotonic() + self.timeout_s)
                with opener.open(request, timeout=self.timeout_s) as reply:
                    replied = True
                    raw = reply.read()
                    status = reply.status
                break
            except urllib.error.HTTPError as e:
                status = e.code
                if 300 <= status < 400:  # not followed: the key would go along, the POST become a GET
                    location = e.headers.get("Location") if e.headers else None
                    to = f"to {urllib.parse.urljoin(url, location)!r}" if location else "without a Location"
                    raise RemoteError(f"{where}: HTTP {status} {e.reason} redirects {to}; redirects are not "
                                      "followed (the API key would be sent there and the POST turned into a "
                                      "GET): set base_url to the final endpoint", url=url, status=status) from None
                try:
                    detail = self._scrub(_excerpt(e.read()))
                except (OSError, http.client.HTTPException):
                    detail = "(no body)"
                problem = f"HTTP {status} {e.reason}: {detail}"
                if status not in RETRY_STATUSES:
                    raise RemoteError(f"{where}: {problem}{self._hint(status)}", url=url,
                                      status=status) from None
                retry_after = _retry_after_s(e.headers.get("Retry-After") if e.headers else None)
            except urllib.error.URLError as e:  # no reply: the connection failed
                reason = e.reason
                if isinstance(reason, ssl.SSLCertVerificationError):  # another try gets the same certificate
                    raise RemoteError(f"{where}: the server's TLS certificate was not accepted: "
                                      f"{self._scrub(str(reason))}", url=url) from None
                if isinstance(reason, TimeoutError):
                    problem = f"no connection within timeout_s={self.timeout_s:g} s"
                elif isinstance(reason, OSError):
                    problem = f"cannot connect: {reason.strerror or reason}"
                else:  # not a network failure (an unknown URL type, ...): another try cannot help
                    raise RemoteError(f"{where}: {self._scrub(str(reason))}", url=url) from None
            except ssl.SSLCertVerificationError as e:
                raise RemoteError(f"{where}: the server's TLS certificate was not accepted: "
                                  f"{self._scrub(str(e))}", url=url) from None
            except TimeoutError:
                problem = (f"the reply did not end within timeout_s={self.timeout_s:g} s (the deadline of an "
                           "attempt)" if replied else f"no reply within timeout_s={self.timeout_s:g} s")
            except (http.client.InvalidURL, ValueError) as e:  # a bad URL: another try cannot help
                raise RemoteError(f"{where}: the request cannot be made: {type(e).__name__}: "
                                  f"{self._scrub(str(e))}", url=url) from None
            except (OSError, http.client.HTTPException) as e:  # reset, dropped, cut short
                problem = f"the connection failed: {type(e).__name__} {e}".rstrip()
            if attempt == attempts - 1:
                tries = f"{attempts} attempt{'s' * (attempts > 1)} in {time.monotonic() - start:.1f} s"
                raise RemoteError(f"{where}: {problem} (gave up after {tries}; "
                                  f"max_retries={self.max_retries})", url=url, status=status)
            if retry_after is not None and retry_after > self.max_backoff_s:
                raise RemoteError(f"{where}: {problem}; the server asks to wait {retry_after:g} s "
                                  f"(Retry-After), more than max_backoff_s={self.max_backoff_s:g}",
                                  url=url, status=status)
            backoff = min(self.backoff_s * 2 ** attempt, self.max_backoff_s)
            delay = retry_after if retry_after is not None else backoff
            _sleep(delay)
        try:
            return json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError):
            raise RemoteError(f"{where}: HTTP {status} reply is not JSON: {self._scrub(_excerpt(raw, 100))}",
                              url=url, status=status) from None

    def _scrub(self, text: str) -> str:
        """``text`` with the API key, if it is in it, replaced by ``<api_key>``."""
        return text.replace(self._api_key, "<api_key>") if self._api_key else text

    def _hint(self, status: int) -> str:
        if status in (401, 403):
            given = "the API key was refused" if self._api_key else "no API key was sent"
            return f" ({given}: pass api_key= or set {' or '.join(self._key_vars)})"
        if status in (404, 405):
            return (f" (is base_url {self.base_url!r} right? the path is appended to it, "
                    "e.g. http://host:8000/v1)")
        return ""

    def _bad_reply(self, path: str, what: str) -> RemoteError:
        url = self.base_url + path
        return RemoteError(f"POST {url} (model {self.model!r}): {what}", url=url, status=200)


class OpenAIEmbedder(_Client):
    """An embedder behind an OpenAI-compatible ``POST {base_url}/embeddings`` endpoint.

    Args:
        model: the model name the endpoint serves, e.g. ``"text-embedding-3-small"``.
        dim: the vectors' length; when None, found by one request embedding a short probe
            text at construction; every reply is checked against it.
        base_url: the API's base URL (``/embeddings`` is appended). When None: the first set of
            the environment variables ``VECGRAPH_EMBEDDINGS_BASE_URL`` and ``OPENAI_BASE_URL``,
            else :data:`DEFAULT_OPENAI_BASE_URL`.
        api_key: sent as ``Authorization: Bearer <api_key>`` (surrounding whitespace stripped).
            When None: the first set of ``VECGRAPH_EMBEDDINGS_API_KEY`` and ``OPENAI_API_KEY``,
            else none is sent (local servers need none).
        batch_size: texts per request (>= 1; OpenAI takes up to 2,048, text-embeddings-inference
            32 unless configured); a call of n texts makes ceil(n / batch_size) requests, in order.
        timeout_s: the deadline of each attempt, in seconds: connecting and reading the whole
            reply (see :mod:`vecgraph.remote`).
        max_retries, backoff_s, max_backoff_s: see :mod:`vecgraph.remote`.

    ``name`` is ``"openai/<model>"``, recorded by a graph with ``dim``
    (``vecgraph.embedders.load("openai/<model>")`` makes this embedder again). Calls return
    float32 arrays of shape (len(texts), dim), row i the embedding of ``texts[i]`` whatever
    order the reply lists them in (its ``index`` fields; base64-encoded float32 embeddings are
    decoded too).

    Raises:
        RemoteError: the probe request failed (see :mod:`vecgraph.remote`).
        InvalidArgumentError: an empty model; a base URL that is not http(s), has no host, a
            port that is not an integer in 1..65535, credentials, a query or whitespace; an API
            key (argument or variable) holding a control character or a character outside
            latin-1 (the message gives its length and source, never the key); a dim or
            batch_size < 1; a negative or non-finite timeout or backoff.
        TypeError: an argument of the wrong type.
    """

    _key_vars = ("VECGRAPH_EMBEDDINGS_API_KEY", "OPENAI_API_KEY")

    def __init__(self, model: str, dim: int | None = None, base_url: str | None = None,
                 api_key: str | None = None, *, batch_size: int = 32,
                 timeout_s: float = 30.0, max_retries: int = 4, backoff_s: float = 0.5,
                 max_backoff_s: float = 30.0) -> None:
        if base_url is None:
            base_url = _env("VECGRAPH_EMBEDDINGS_BASE_URL", "OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
        self._setup(model, base_url, api_key, timeout_s, max_retries, backoff_s, max_backoff_s)
        self.batch_size = _count(batch_size, "batch_size", 1)
        self.name = f"openai/{model}"
        self.dim: int = 0 if dim is None else _count(dim, "dim", 1)
        if not self.dim:
            self.dim = int(self._request(["dimension probe"]).shape[1])

    def __call__(self, texts: list[str]) -> np.ndarray:
        """float32 array of shape (len(texts), dim): ``texts`` embedded in batches of
        ``batch_size``, one request each (none for no texts).

        Raises:
            TypeError: an item that is not a str (its row named).
            RemoteError: a request failed, or a reply is not JSON, lacks ``data``, lists another
                number of embeddings than it was sent texts, repeats or skips an index, or holds
                an embedding that is not a list of numbers.
            DimensionMismatchError: an embedding of another length than ``dim``.
        """
        texts = _texts(texts)
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        out = np.concatenate([self._request(texts[i:i + self.batch_size])
                              for i in range(0, len(texts), self.batch_size)])
        return check_output(self, texts, out)

    def _request(self, texts: list[str]) -> np.ndarray:
        """One request: float32 (len(texts), d) rows in the order of ``texts``."""
        reply = self._post("/embeddings", {"model": self.model, "input": texts, "encoding_format": "float"})
        data = reply.get("data") if isinstance(reply, dict) else None
        if not isinstance(data, list):
            got = f"keys {sorted(reply)[:8]}" if isinstance(reply, dict) else type(reply).__name__
            raise self._bad_reply("/embeddings", f"the reply has no 'data' list (got {got})")
        n = len(texts)
        if len(data) != n:
            raise self._bad_reply("/embeddings", f"the reply holds {len(data)} embeddings for {n} input "
                                  "texts")
        rows: list = [None] * n
        for position, item in enumerate(data):
            if not isinstance(item, dict) or "embedding" not in item:
                raise self._bad_reply("/embeddings", f"data[{position}] has no 'embedding' "
                                      f"(got {str(item)[:60]})")
            index = item.get("index", position)
            in_range = not isinstance(index, bool) and isinstance(index, int) and 0 <= index < n
            if not in_range or rows[index] is not None:
                what = "repeats" if in_range else "is not an index among"
                raise self._bad_reply("/embeddings", f"data[{position}].index = {index!r} {what} the {n} "
                                      "inputs")
            rows[index] = self._vector(item["embedding"], index)
        dim = self.dim or len(rows[0])
        for index, row in enumerate(rows):
            if len(row) != dim:
                url = self.base_url + "/embeddings"
                raise DimensionMismatchError(
                    f"POST {url} (model {self.model!r}) returned a {len(row)}-d embedding for input {index}, "
                    f"expected {dim}-d" + (f" (dim={self.dim})" if self.dim else ", the length of input 0's"))
        if dim == 0:
            raise self._bad_reply("/embeddings", "the reply's embeddings are empty")
        return np.ascontiguousarray(np.stack(rows), dtype=np.float32)

    def _vector(self, embedding: Any, index: int) -> np.ndarray:
        if isinstance(embedding, str):  # encoding_format "base64": little-endian float32
            try:
                raw = base64.b64decode(embedding, validate=True)
                if len(raw) % 4:
                    raise ValueError("not a whole number of float32")
                return np.frombuffer(raw, dtype="<f4").astype(np.float32)
            except (binascii.Error, ValueError) as e:
                raise self._bad_reply("/embeddings", f"the embedding of input {index} is a str but not "
                                      f"base64 float32 ({e})") from None
        if not isinstance(embedding, list) or any(isinstance(v, bool) or not isinstance(v, (int, float))
                                                  for v in embedding):
            raise self._bad_reply("/embeddings", f"the embedding of input {index} is not a list of numbers "
                                  f"(got {str(embedding)[:60]})")
        return np.asarray(embedding, dtype=np.float32)

    def __repr__(self) -> str:
        return f"OpenAIEmbedder(name={self.name!r}, dim={self.dim}, base_url={self.base_url!r})"


def openai_from_env() -> OpenAIEmbedder:
    """An :class:`OpenAIEmbedder` configured by environment variables, for specs:
    ``vecgraph.embedders.load("vecgraph.remote:openai_from_env")`` (and ``vecgraph ingest
    --embedder vecgraph.remote:openai_from_env``); a graph records that spec beside the name.

    Variables: ``VECGRAPH_EMBEDDINGS_MODEL`` (required), ``VECGRAPH_EMBEDDINGS_DIM`` (optional;
    else one probe request), and the base URL and key as :class:`OpenAIEmbedder` reads them
    (``VECGRAPH_EMBEDDINGS_BASE_URL`` before ``OPENAI_BASE_URL``, ``VECGRAPH_EMBEDDINGS_API_KEY``
    before ``OPENAI_API_KEY``).

    Raises:
        InvalidArgumentError: no model set, or a DIM that is not an integer >= 1.
        RemoteError: as :class:`OpenAIEmbedder`.
    """
    model = _env("VECGRAPH_EMBEDDINGS_MODEL")
    if model is None:
        raise InvalidArgumentError("set VECGRAPH_EMBEDDINGS_MODEL to the embedding model's name (and "
                                   "VECGRAPH_EMBEDDINGS_BASE_URL / VECGRAPH_EMBEDDINGS_API_KEY as the "
                                   "endpoint needs)")
    dim_text = _env("VECGRAPH_EMBEDDINGS_DIM")
    dim = None
    if dim_text is not None:
        digits = dim_text.strip()
        if not re.fullmatch(r"[0-9]+", digits) or int(digits) < 1:
            raise InvalidArgumentError(f"VECGRAPH_EMBEDDINGS_DIM must be an integer >= 1 in ASCII digits (the "
                                       f"embeddings' length, e.g. 1536), got {dim_text!r}; unset it to probe "
                                       "the endpoint for it")
        dim = int(digits)
    return OpenAIEmbedder(model, dim=dim)


class HTTPReranker(_Client):
    """A reranker behind a ``POST {base_url}/rerank`` endpoint (see :mod:`vecgraph.remote` for
    the request and the replies read); a :class:`vecgraph.rerankers.Reranker`.

    Args:
        model: the reranking model's name, sent as ``"model"``.
        base_url: the service's base URL (``/rerank`` is appended, e.g. ``http://host:8080`` or
            ``https://host/v1``); when None, ``VECGRAPH_RERANK_BASE_URL``.
        api_key: sent as ``Authorization: Bearer <api_key>``; when None,
            ``VECGRAPH_RERANK_API_KEY``, else none is sent.
        batch_size: documents per request (>= 1); scores of separate requests are comparable
            for cross-encoders, which score each pair on its own.
        documents_field: the request field holding the texts: ``"documents"`` (default) or
            ``"texts"`` (text-embeddings-inference).
        timeout_s, max_retries, backoff_s, max_backoff_s: see :mod:`vecgraph.remote`.

    Calls return float64 scores of shape (len(texts),) aligned with ``texts`` (the reply's
    ``index`` fields, whatever order it lists them in); ``top_n`` is sent as the batch's size so
    that every text is scored.

    Raises:
        InvalidArgumentError: no base URL; an empty model, a bad base URL or API key, bad numbers
            (as :class:`OpenAIEmbedder`).
    """

    _key_vars = ("VECGRAPH_RERANK_API_KEY",)

    def __init__(self, model: str, base_url: str | None = None, api_key: str | None = None, *,
                 batch_size: int = 32, documents_field: str = "documents", timeout_s: float = 30.0,
                 max_retries: int = 4, backoff_s: float = 0.5, max_backoff_s: float = 30.0) -> None:
        if base_url is None:
            base_url = _env("VECGRAPH_RERANK_BASE_URL")
            if base_url is None:
                raise InvalidArgumentError("HTTPReranker needs base_url= or VECGRAPH_RERANK_BASE_URL "
                                           "(the URL that /rerank is appended to)")
        self._setup(model, base_url, api_key, timeout_s, max_retries, backoff_s, max_backoff_s)
        self.batch_size = _count(batch_size, "batch_size", 1)
        if documents_field not in ("documents", "texts"):
            raise InvalidArgumentError(f"documents_field must be 'documents' or 'texts', "
                                       f"got {documents_field!r}")
        self.documents_field = documents_field
        self.name = model

    def __call__(self, query: str, texts: list[str]) -> np.ndarray:
        """float64 relevance scores of shape (len(texts),), one request per ``batch_size`` texts.

        Raises:
            TypeError: a query or text that is not a str.
            RemoteError: a request failed, or a reply is not JSON, has no results, or does not
                score every text exactly once with a finite number.
        """
        if not isinstance(query, str):
            raise TypeError(f"query must be a str, got {type(query).__name__}")
        texts = _texts(texts)
        scores = np.zeros(len(texts), dtype=np.float64)
        for start in range(0, len(texts), self.batch_size):
            batch = texts[start:start + self.batch_size]
            scores[start:start + len(batch)] = self._request(query, batch)
        return scores

    def _request(self, query: str, texts: list[str]) -> np.ndarray:
        reply = self._post("/rerank", {"model": self.model, "query": query, self.documents_field: texts,
                                       "top_n": len(texts)})
        results = reply.get("results") if isinstance(reply, dict) else reply
        if not isinstance(results, list):
            got = f"keys {sorted(reply)[:8]}" if isinstance(reply, dict) else type(reply).__name__
            raise self._bad_reply("/rerank", f"the reply has no 'results' list (got {got})")
        n = len(texts)
        scores = np.full(n, np.nan)
        for position, item in enumerate(results):
            index = item.get("index") if isinstance(item, dict) else None
            if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < n:
                raise self._bad_reply("/rerank", f"results[{position}] has no index among the {n} documents "
                                      f"(got {str(item)[:60]})")
            score = item.get("relevance_score", item.get("score"))
            if isinstance(score, bool) or not isinstance(score, (int, float)) or not math.isfinite(score):
                raise self._bad_reply("/rerank", f"results[{position}] has no finite relevance_score or "
                                      f"score (got {str(item)[:60]})")
            if not np.isnan(scores[index]):
                raise self._bad_reply("/rerank", f"results[{position}] scores document {index} again")
            scores[index] = score
        missing = np.flatnonzero(np.isnan(scores))
        if len(missing):
            raise self._bad_reply("/rerank", f"the reply scores {n - len(missing)} of {n} documents "
                                  f"(missing indices {missing[:10].tolist()})")
        return scores

    def __repr__(self) -> str:
        return f"HTTPReranker(model={self.model!r}, base_url={self.base_url!r})"
