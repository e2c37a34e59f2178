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

Both send ``Authorization: Bearer <api_key>`` when a key is set, wait at most ``timeout_s``
seconds for the connection and for each read of a reply, and retry what may pass (HTTP 408,
429 and 5xx, timeouts, refused or dropped connections) up to ``max_retries`` times, waiting
``backoff_s * 2**attempt`` seconds (at most ``max_backoff_s``) or what the reply's
``Retry-After`` header asks (exponential backoff as in RFC 9110's Retry-After, section 10.2.3).
Nothing else is retried. Failures raise :class:`RemoteError`, whose message names the URL, the
model and what went wrong; a vector of another length raises
:class:`~vecgraph.errors.DimensionMismatchError`. The API key never appears in a message or repr.
"""

from __future__ import annotations

import base64
import binascii
import email.utils
import http.client
import json
import math
import os
import socket
import time
import urllib.error
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


def _env(*names: str) -> str | None:
    """The value of the first of ``names`` that is set and not empty."""
    for name in names:
        value = os.environ.get(name)
        if value:
            return value
    return None


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
        if not isinstance(model, str):
            raise TypeError(f"model must be a str, got {type(model).__name__}")
        if not model:
            raise InvalidArgumentError("model must not be empty: the endpoint needs a model name")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise InvalidArgumentError(f"base_url must be an http:// or https:// URL, got {base_url!r}")
        if api_key is not None and not isinstance(api_key, str):
            raise TypeError(f"api_key must be a str or None, got {type(api_key).__name__}")
        self.model = model
        self.base_url = base_url.rstrip("/")
        self._api_key = api_key or None
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
            request = urllib.request.Request(url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                    raw = reply.read()
                    status = reply.status
                break
            except urllib.error.HTTPError as e:
                status = e.code
                try:
                    detail = _excerpt(e.read())
                except (OSError, http.client.HTTPException):
                    detail = "(no body)"
                problem = f"HTTP {status} {e.reason}: {detail}"
                if status not in RETRY_STATUSES:
                    raise RemoteError(f"{where}: {problem}{self._hint(status)}", url=url,
                                      status=status) from None
                retry_after = _retry_after_s(e.headers.get("Retry-After") if e.headers else None)
            except urllib.error.URLError as e:  # no reply: the connection failed
                reason = e.reason
                if isinstance(reason, (TimeoutError, socket.timeout)):
                    problem = f"no connection within timeout_s={self.timeout_s:g} s"
                elif isinstance(reason, OSError):
                    problem = f"cannot connect: {reason.strerror or reason}"
                else:  # not a network failure (an unknown URL type, ...): another try cannot help
                    raise RemoteError(f"{where}: {reason}", url=url) from None
            except (TimeoutError, socket.timeout):
                problem = f"no reply within timeout_s={self.timeout_s:g} s"
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
            raise RemoteError(f"{where}: HTTP {status} reply is not JSON: {_excerpt(raw, 100)}",
                              url=url, status=status) from None

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
        api_key: sent as ``Authorization: Bearer <api_key>``. When None: the first set of
            ``VECGRAPH_EMBEDDINGS_API_KEY`` and ``OPENAI_API_KEY``, else none is sent (local
            servers need none).
        batch_size: texts per request (>= 1; OpenAI takes up to 2,048, text-embeddings-inference
            32 unless configured); a call of n texts makes ceil(n / batch_size) requests, in order.
        timeout_s, max_retries, backoff_s, max_backoff_s: see :mod:`vecgraph.remote`.

    ``name`` is ``"openai/<model>"``, recorded by a graph with ``dim``
    (``vecgraph.embedders.load("openai/<model>")`` makes this embedder again). Calls return
    float32 arrays of shape (len(texts), dim), row i the embedding of ``texts[i]`` whatever
    order the reply lists them in (its ``index`` fields; base64-encoded float32 embeddings are
    decoded too).

    Raises:
        RemoteError: the probe request failed (see :mod:`vecgraph.remote`).
        InvalidArgumentError: an empty model, a URL that is not http(s), a dim or batch_size
            < 1, or a negative or non-finite timeout or backoff.
        TypeError: an argument of the wrong type.
    """

    _key_vars = ("VECGRAPH_EMBEDDINGS_API_KEY", "OPENAI_API_KEY")

    def __init__(self, model: str, dim: int | None = None, base_url: str | None = None,
                 api_key: str | None = None, *, batch_size: int = 32,
                 timeout_s: float = 30.0, max_retries: int = 4, backoff_s: float = 0.5,
                 max_backoff_s: float = 30.0) -> None:
        if base_url is None:
            base_url = _env("VECGRAPH_EMBEDDINGS_BASE_URL", "OPENAI_BASE_URL") or DEFAULT_OPENAI_BASE_URL
        if api_key is None:
            api_key = _env(*self._key_vars)
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
        if not dim_text.strip().isdigit() or int(dim_text) < 1:
            raise InvalidArgumentError(f"VECGRAPH_EMBEDDINGS_DIM must be an integer >= 1, got {dim_text!r}")
        dim = int(dim_text)
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
        InvalidArgumentError: no base URL, an empty model, bad numbers (as :class:`OpenAIEmbedder`).
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
        if api_key is None:
            api_key = _env(*self._key_vars)
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
