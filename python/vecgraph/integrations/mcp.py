"""An MCP server over one graph folder: ``vecgraph mcp FOLDER`` gives an agent (any Model Context
Protocol client: a desktop assistant, an IDE, an agent framework) the graph's searches as tools.

Built on the official MCP Python SDK (``mcp`` >= 2, its ``MCPServer``): each tool is a typed
function, from which the SDK makes the tool's JSON schema and checks the arguments of every call.
Every tool is a plain (sync) function, which the SDK runs in a worker thread: embedding and
searching never block the event loop, so one long call does not hold up the other clients.
Argument names a tool does not take are refused (its schema says ``additionalProperties:
false``), ints are JSON integers (``true`` is not 1), and a str argument holds at most
:data:`MAX_TEXT_CHARS` characters.

Tools:
    search, hybrid_search, get_node, neighbors, stats; and when the folder holds a memory store
    (:class:`vecgraph.Memory`: a graph declaring the store's filterable properties) also
    remember, recall, card and forget. With ``read_only`` the folder is opened read-only and no
    tool writes: remember and forget are not offered (card builds without storing). When it
    holds a knowledge base (:class:`vecgraph.KnowledgeBase`, found the same way) also the
    read-only kb_search, kb_local_search, kb_global_search and kb_tree_search, each returning
    the search's result as plain data and as a ``context`` for a prompt within a token budget.

Transports:
    stdio (the default: the client starts ``vecgraph mcp FOLDER`` as a subprocess and speaks
    JSON-RPC over its stdin and stdout, one message a line; closing stdin, or the server's
    stdout, ends the session), or streamable HTTP on ``host:port`` (endpoint ``/mcp``; it has no
    authentication, so bind it to a loopback address such as 127.0.0.1).

Text queries are embedded by the embedder given (``--embedder SPEC``, which must be the one the
graph recorded) or else the recorded one (:meth:`vecgraph.Graph.query_embedder`). When the graph
records none, or the recorded one does not load here (its package missing, its module failing),
the server still starts (saying why on stderr): ``search`` then needs a vector,
``hybrid_search`` answers text by its BM25 and entity channels and the kb tools fail naming why
(:meth:`vecgraph.KnowledgeBase.open` needs its embedder).

Errors (vecgraph's, bad or unknown arguments, a key not in the graph) come back as MCP tool
errors (a result with ``isError`` and the message); the server keeps serving. The folder is
opened once, when the server starts, and closed when it stops (stdin or stdout closed, Ctrl-C or
SIGTERM: the calls running then finish first).

>>> from vecgraph.integrations import mcp as vg_mcp                            # doctest: +SKIP
>>> vg_mcp.serve("memory.vg", http=("127.0.0.1", 8765), read_only=True)      # doctest: +SKIP
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import os
import re
import signal
import stat
import sys
import threading
import warnings
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from datetime import datetime, timedelta, timezone
from typing import Annotated, Any, Literal, get_args

import numpy as np

from .. import __version__, embedders, storage
from ..arguments import _INT64_MAX, _INT64_MIN
from ..errors import DimensionMismatchError, Error, InvalidArgumentError, NotFoundError
from ..formatting import _walk
from ..kb.store import FILTERABLE as KB_FILTERABLE
from ..memory.store import FILTERABLE as MEMORY_FILTERABLE

try:
    import anyio
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools import Tool
    from mcp.server.stdio import stdio_server
    from mcp.types import ToolAnnotations
    from pydantic import Field, StrictBool
except ImportError as _exc:  # pragma: no cover - exercised only without the SDK
    raise ImportError(f"vecgraph.integrations.mcp needs the MCP Python SDK (mcp >= 2): "
                      f'pip install "vecgraph[mcp]" ({_exc})') from _exc

__all__ = ["MAX_K", "MAX_TEXT_CHARS", "MAX_TOKENS", "VecgraphTools", "build_server", "open_folder",
           "parse_http", "serve"]

#: The most results one tool call returns (an agent's context is the limit, not the engine).
MAX_K = 1000
#: The most characters of one str argument (a query, a memory, a key, a name).
MAX_TEXT_CHARS = 100_000
#: The largest token budget of a kb tool's ``context``.
MAX_TOKENS = 100_000

_CANONICAL_INT = re.compile(r"-?[1-9][0-9]*|0")  # ASCII decimal, no sign on 0, no leading zeros

# ------------------------------------------------------------------ argument types (the schemas)

Str = Annotated[str, Field(max_length=MAX_TEXT_CHARS)]

# Ints are strict: a JSON bool (or float, or str) is refused, not read as 1.

Key = Str | Annotated[int, Field(strict=True)]
KeyArg = Annotated[Key, Field(description="a node key (str or int, as the graph stores it)")]
TextArg = Annotated[Str | None, Field(description="query text, embedded with the graph's embedder")]
VectorArg = Annotated[list[Annotated[float, Field(strict=True)]] | None, Field(
    description="query vector of the graph's dim (float numbers), instead of text")]
KArg = Annotated[int, Field(strict=True, ge=1, le=MAX_K, description=f"results wanted (1 to {MAX_K:,})")]
HopsArg = Annotated[int, Field(strict=True, ge=0, le=10, description="levels of edges walked from the seeds (0: none)")]
SeedsArg = Annotated[int, Field(strict=True, ge=1, le=MAX_K, description="seed nodes found by vector similarity")]
NamesArg = Str | list[Str] | None
TenantsArg = Annotated[NamesArg, Field(description='only nodes of these tenants (null: all; "": default)')]
LabelsArg = Annotated[NamesArg, Field(description='only nodes with these labels (null: all; "": default)')]
RelsArg = Annotated[NamesArg, Field(description="relation types to follow (null: all)")]
DirectionArg = Annotated[Literal["out", "in", "both"], Field(
    description="edge direction: out (from the node), in (to it) or both")]
WhereArg = Annotated[dict[str, Any] | None, Field(description=(
    'conditions on the filterable properties the graph declares (all must hold): {"status": "current"} '
    '(equality), {"status": ["a", "b"]} (membership), {"year": {">=": 2020, "<": 2024}} (range); a '
    'timestamp property takes ISO 8601 times ("2024-05-01T12:00:00Z"; without a zone: UTC) or int '
    'microseconds since the epoch'))]
Channel = Literal["dense", "bm25", "graph", "entity"]
ChannelsArg = Annotated[list[Channel] | None, Field(
    description="channels to run and fuse (null: every channel the input allows)")]
UserArg = Annotated[Str, Field(description="the user id (the memories' tenant)")]
MemoryTextArg = Annotated[Str, Field(description="what to remember")]
KindArg = Annotated[Str, Field(description="its kind, e.g. profile, preference, project, fact")]
SourceArg = Annotated[Literal["user", "tool", "document", "model"], Field(
    description="who said it: user, tool, document, or model (an inference)")]
SessionArg = Annotated[Str | None, Field(description="the session it came from")]
AtArg = Annotated[Str | None, Field(description="when it was said or happened (ISO 8601; default now)")]
SupersedesArg = Annotated[Str | None, Field(description="the id of the user's memory this one replaces")]
QuestionArg = Annotated[Str, Field(description="the question, in natural language")]
RecallKArg = Annotated[int, Field(strict=True, ge=1, le=MAX_K, description="memories wanted")]
SinceArg = Annotated[Str | None, Field(description="only memories from this time on (ISO 8601)")]
UntilArg = Annotated[Str | None, Field(description="only memories up to this time (ISO 8601)")]
KindsArg = Annotated[list[Str] | None, Field(description="only these kinds (null: all)")]
SupersededArg = Annotated[bool, Field(description="also versions that a newer memory replaced")]
RefreshArg = Annotated[bool, Field(description="build it again from the current memories")]
ConfirmArg = Annotated[StrictBool, Field(description="true, to erase: the erasure cannot be undone")]
ModeArg = Annotated[Literal["hybrid", "dense", "bm25"], Field(description=(
    "hybrid (dense and BM25, fused), dense (nearest chunk vectors) or bm25 (BM25 over chunk texts)"))]
TenantArg = Annotated[Str | None, Field(description='only this tenant (null: every tenant; "": the default)')]
HistoryArg = Annotated[StrictBool, Field(
    description='also chunks of documents whose status is not "current"')]
BudgetArg = Annotated[int, Field(strict=True, ge=1, le=MAX_TOKENS, description=(
    f"token budget of `context` (Llama 2 tokens, 1 to {MAX_TOKENS:,})"))]
EntitiesArg = Annotated[int, Field(strict=True, ge=0, le=MAX_K, description="entities wanted (0 to 1,000)")]
KBHopsArg = Annotated[int, Field(strict=True, ge=0, le=3, description="levels of edges walked (0 to 3)")]
CommunitiesArg = Annotated[int, Field(strict=True, ge=0, le=MAX_K,
                                      description="communities wanted (0 to 1,000)")]
LevelArg = Annotated[int, Field(strict=True, ge=0, le=_INT64_MAX,
                                description="community level (0: the coarsest)")]
StrategyArg = Annotated[Literal["collapsed", "top_down", "bottom_up"], Field(description=(
    "collapsed (chunks and summaries of every level in one search), top_down (from the tree's top "
    "level down to the chunks) or bottom_up (the chunks, and the summaries above them when they score low)"))]

# Results are plain JSON objects (``dict[str, Any]``; each tool's description names their fields).
# A detailed output schema would make the SDK's client check every result against it with
# jsonschema: about 1 ms for ten search hits, several times the search itself.

# ------------------------------------------------------------------ helpers


def _plain(value: Any) -> Any:
    """``value`` with NumPy scalars and arrays, tuples, sets and datetimes made JSON values."""
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, datetime):
        return value.isoformat()
    return value


def _time(us: int) -> str | None:
    """ISO 8601 UTC of a node's ts (microseconds since the epoch); None for 0, the ts of a node
    written without one."""
    if not us:
        return None
    try:
        return (datetime(1970, 1, 1, tzinfo=timezone.utc) + timedelta(microseconds=int(us))).isoformat()
    except OverflowError:
        return None


def _message(exc: BaseException) -> str:
    if isinstance(exc, KeyError) and not isinstance(exc, Error) and exc.args:
        return str(exc.args[0])
    return str(exc) or type(exc).__name__


@contextmanager
def _tool_errors() -> Iterator[None]:
    """Expected failures (vecgraph's errors, bad values, files) as a ToolError carrying their
    message, which the SDK returns to the client as a tool result with ``isError``."""
    try:
        yield
    except ToolError:
        raise
    except (Error, TypeError, ValueError, KeyError, OSError, ImportError) as exc:
        raise ToolError(_message(exc)) from exc


class _Warnings:
    """The warnings each thread raises while it runs a kb call, for that call's result. The warnings
    module's filters and ``showwarning`` are process-wide and ``catch_warnings`` is not thread-safe,
    so concurrent calls share one capture: the first sets it up, the last undoes it."""

    lock = threading.Lock()
    users = 0
    saved: Any = None
    local = threading.local()

    @classmethod
    def _show(cls, show: Callable, message: Any, *args: Any, **kwargs: Any) -> None:
        caught = getattr(cls.local, "caught", None)
        if caught is None:  # another thread's warning
            show(message, *args, **kwargs)
        elif str(message) not in caught:
            caught.append(str(message))

    @classmethod
    @contextmanager
    def caught(cls) -> Iterator[list]:
        """The messages (str) of the warnings raised in this thread meanwhile, each once."""
        with cls.lock:
            if cls.users == 0:
                cls.saved = warnings.catch_warnings()
                cls.saved.__enter__()
                warnings.simplefilter("always")  # shown at each call (and never raised)
                warnings.showwarning = functools.partial(cls._show, warnings.showwarning)
            cls.users += 1
        cls.local.caught = caught = []
        try:
            yield caught
        finally:
            cls.local.caught = None
            with cls.lock:
                cls.users -= 1
                if cls.users == 0:
                    cls.saved.__exit__(None, None, None)


def _doc(method: Any) -> str:
    return inspect.cleandoc(method.__doc__ or "")


def _iso_time(text: str, where: str) -> datetime:
    """An ISO 8601 time as an aware datetime (without a zone: UTC)."""
    try:
        # "Z" as UTC (Python 3.10's fromisoformat does not read it)
        moment = datetime.fromisoformat(text[:-1] + "+00:00" if text[-1:] in ("Z", "z") else text)
    except ValueError:
        raise InvalidArgumentError(f"{where} must be an ISO 8601 time such as '2024-05-01T12:00:00Z' (without a "
                                   f"zone: UTC) or int microseconds since the epoch, got {text!r}") from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=timezone.utc)


def _times(condition: Any, where: str) -> Any:
    """A where condition on a timestamp property with its ISO 8601 strings as datetimes."""
    if isinstance(condition, str):
        return _iso_time(condition, where)
    if isinstance(condition, dict):
        return {op: _times(operand, f"{where}[{op!r}]") for op, operand in condition.items()}
    if isinstance(condition, list):
        return [_times(value, where) for value in condition]
    return condition


class VecgraphTools:
    """The tools over one open graph (and the memory store or knowledge base it holds, if any).

    Each tool is a sync function (the SDK runs it in a worker thread); the graph, the memory
    store and the knowledge base are thread-safe for these calls.

    Args:
        graph: an open :class:`vecgraph.Graph`.
        memory: the :class:`vecgraph.Memory` whose graph ``graph`` is, or None.
        kb: the :class:`vecgraph.KnowledgeBase` whose graph ``graph`` is, or None (the kb tools
            then fail, naming ``embedder_error`` when given).
        embedder: embeds query texts (checked against the graph's recorded embedder at each
            call), or None: ``search`` then needs a vector and ``hybrid_search`` runs the BM25
            and entity channels on text alone.
        embedder_error: why the graph's recorded embedder did not load (with ``embedder``
            None), given in the tool errors of text searches; None when it did, or none is
            recorded.
    """

    def __init__(self, graph: Any, *, memory: Any = None, kb: Any = None, embedder: Any = None,
                 embedder_error: str | None = None) -> None:
        self.graph = graph
        self.memory = memory
        self.kb = kb
        self.embedder = embedder
        self.embedder_error = None if embedder is not None else embedder_error

    # -------------------------------------------------------------- shared

    def _key(self, key: Any) -> Any:
        """The graph's key that ``key`` names: a str that is a key of the graph is that key; else
        a str in canonical ASCII decimal form (``-?[1-9][0-9]*|0``, in int64) names the int key;
        an int is the int key, else its str when that is a key of the graph.

        Raises:
            NotFoundError: no key of the graph (``key ... is not in the graph``).
        """
        graph = self.graph
        if isinstance(key, str):
            if key in graph:
                return key
            if _CANONICAL_INT.fullmatch(key):
                number = int(key)
                if _INT64_MIN <= number <= _INT64_MAX and number in graph:
                    return number
        else:
            if _INT64_MIN <= key <= _INT64_MAX and key in graph:
                return key
            if str(key) in graph:
                return str(key)
        raise NotFoundError(f"key {key!r} is not in the graph")

    def _node(self, key: Any) -> dict | None:
        try:
            return self.graph.get_node(key, vector=False)
        except KeyError:  # deleted since the search found it
            return None

    def _no_embedder(self, what: str) -> InvalidArgumentError:
        """The error of a text query without an embedder."""
        if self.embedder_error is not None:
            return InvalidArgumentError(
                f"{what} needs the graph's embedder, which did not load when the server started: "
                f"{self.embedder_error}")
        return InvalidArgumentError(f"the graph at {self.graph.path} records no embedder to turn text into a vector")

    def _query(self, text: str | None, vector: list | None) -> np.ndarray:
        if (text is None or text == "") == (vector is None):
            raise InvalidArgumentError("give either text or vector (exactly one)")
        if vector is not None:
            return np.asarray(vector, dtype=np.float32)
        if self.embedder is None:
            error = self._no_embedder("a text search")
            raise InvalidArgumentError(f"{error}: pass vector (a list of the graph's dim floats), or use "
                                       "hybrid_search, whose BM25 and entity channels take text alone")
        return self.graph.embed_query(text, self.embedder)

    def _where(self, where: dict | None) -> dict | None:
        """``where`` with the ISO 8601 strings given for timestamp properties as datetimes."""
        if not where:
            return where
        kinds = self.graph.filterable
        return {name: _times(condition, f"where[{name!r}]") if kinds.get(name) == "timestamp" else condition
                for name, condition in where.items()}

    # -------------------------------------------------------------- graph tools

    def search(self, text: TextArg = None, vector: VectorArg = None, k: KArg = 10, hops: HopsArg = 2,
               seeds: SeedsArg = 8, rels: RelsArg = None, direction: DirectionArg = "both",
               tenants: TenantsArg = None, labels: LabelsArg = None, where: WhereArg = None,
               ) -> dict[str, Any]:
        """Graph-guided search: the `seeds` nodes most similar to the query (text, embedded with the
        graph's embedder, or a vector), a breadth-first walk of up to `hops` levels over their edges,
        and every node reached scored against the query; returns the best `k`, best first. Each hit
        gives key, score (cosine similarity for cos graphs; higher is better), hop (0 for a seed), the
        path from its seed as text ('seed' -rel-> 'a' <-rel- 'hit', arrows as the edges are stored;
        null for a seed), label and text. Filters (tenants, labels, where) apply to every node
        reached. Use hybrid_search to match words and names as well."""
        with _tool_errors():
            result = self.graph.search(self._query(text, vector), k, seeds=seeds, hops=hops, rels=rels,
                                       direction=direction, tenants=tenants, labels=labels,
                                       where=self._where(where))
            hits = []
            for hit in result:
                node = self._node(hit.key) or {}
                hits.append({"key": hit.key, "score": float(hit.score), "hop": int(hit.hop),
                             "path": _walk(hit) if hit.path else None, "label": node.get("label"),
                             "text": node.get("text")})
            return {"hits": hits, "seeds": int(result.count_seeds), "visited": int(result.count_visited)}

    def hybrid_search(self, text: Annotated[Str, Field(description="the query text")],
                      vector: VectorArg = None, k: KArg = 10, channels: ChannelsArg = None,
                      tenants: TenantsArg = None, labels: LabelsArg = None, where: WhereArg = None,
                      hops: HopsArg = 2, seeds: SeedsArg = 8) -> dict[str, Any]:
        """Hybrid retrieval: runs the dense channel (nearest vectors), BM25 over node texts, the
        entity channel (nodes whose key or alias the text names) and the graph channel (nodes
        linked to those matches and to the `seeds` nearest nodes, up to `hops` edges away), and
        fuses their ranked lists (convex combination of normalised scores). Without a query vector
        or an embedder only bm25 and entity run. Each hit gives key, fused score, its rank in each
        channel that ran (null where that channel did not return it), the path that reached it as
        text (null unless the graph channel walked to it), label and text; `channels` lists the
        channels that ran."""
        with _tool_errors():
            embedder = self.embedder if vector is None else None
            query = None if vector is None else np.asarray(vector, dtype=np.float32)
            if query is None and self.embedder_error is not None:
                # text alone and the recorded embedder did not load: the channels that take text
                # (not loading it again at each call, as the graph would when asked for dense)
                wanted = list(get_args(Channel)) if channels is None else channels
                channels = [c for c in wanted if c in ("bm25", "entity")]
                if not channels:
                    raise InvalidArgumentError(f"{self._no_embedder(f'the channels {wanted}')}: pass vector, "
                                               "or ask for bm25 or entity")
            kwargs: dict = {} if channels is None else {"channels": channels}
            res = self.graph.hybrid_search(text, query, k, embedder=embedder, tenants=tenants, labels=labels,
                                           where=self._where(where), hops=hops, seeds=seeds, **kwargs)
            hits = []
            for hit in res:
                node = self._node(hit.key) or {}
                hits.append({"key": hit.key, "score": float(hit.score),
                             "ranks": {c: None if r is None else int(r) for c, r in hit.ranks.items()},
                             "path": _walk(hit) if hit.path else None, "label": node.get("label"),
                             "text": node.get("text")})
            return {"hits": hits, "channels": list(res.channels)}

    def get_node(self, key: KeyArg) -> dict[str, Any]:
        """One node's fields: key, label, tenant, ts_us (its time in microseconds since the epoch; 0 when
        none was given) and time (the same as ISO 8601 UTC, null for 0), text, props (its properties)
        and aliases (the names the entity channel knows it by). A str key that the graph does not hold
        but that spells an int in decimal ("42") names the int key, and an int the str key of its
        digits. Fails for a key not in the graph."""
        with _tool_errors():
            node = self.graph.get_node(self._key(key), vector=False)
            return {"key": node["key"], "label": node["label"], "tenant": node["tenant"],
                    "ts_us": int(node["ts"]), "time": _time(node["ts"]), "text": node["text"],
                    "props": _plain(node["props"]), "aliases": list(node["aliases"])}

    def neighbors(self, key: KeyArg, rels: RelsArg = None, direction: DirectionArg = "out",
                  ) -> dict[str, Any]:
        """The edges at a node, in traversal order (weight descending, then insertion order): each as
        src, rel (relation type), dst and weight. direction: out (edges from the node, the default),
        in (edges to it) or both; rels keeps only these relation types. Keys are read as by
        get_node. Fails for a key not in the graph."""
        with _tool_errors():
            key = self._key(key)
            edges = [{"src": e.src, "rel": e.rel, "dst": e.dst, "weight": float(e.weight)}
                     for e in self.graph.neighbors(key, rels, direction)]
            return {"key": key, "direction": direction, "edges": edges}

    def stats(self) -> dict[str, Any]:
        """The graph's counts (nodes, edges, labels, tenants, rels, deleted nodes and edges),
        configuration (dim, metric, HNSW parameters), memory per structure in bytes, its folder,
        whether it is open read-only, its embedder, the one text queries are embedded with (null:
        none, and query_embedder_error says why when the graph records one), whether it is a
        memory store, and knowledge_base: a knowledge base's nodes per label (null for another
        graph, or a knowledge base that did not open)."""
        with _tool_errors():
            stats = _plain(self.graph.stats())
            stats.update(path=self.graph.path, read_only=self.graph.read_only, embedder=self.graph.embedder,
                         query_embedder=None if self.embedder is None else self.embedder.name,
                         query_embedder_error=self.embedder_error, memory_store=self.memory is not None,
                         knowledge_base=None if self.kb is None else _plain(self.kb.stats()))
            return stats

    # -------------------------------------------------------------- memory tools

    def remember(self, user: UserArg, text: MemoryTextArg, kind: KindArg = "fact", source: SourceArg = "user",
                 session: SessionArg = None, at: AtArg = None, supersedes: SupersedesArg = None,
                 ) -> dict[str, str]:
        """Store one memory of a user (durable when the call returns); returns its id. A memory that
        corrects an earlier one names it in `supersedes`: the old one leaves recall and stays in its
        history."""
        with _tool_errors():
            if self.memory.embedder is None and self.embedder_error is not None:
                raise self._no_embedder("remember")
            return {"id": self.memory.remember(user, text, kind=kind, source=source, session=session, at=at,
                                               supersedes=supersedes)}

    def recall(self, user: UserArg, query: QuestionArg, k: RecallKArg = 5, since: SinceArg = None,
               until: UntilArg = None, kinds: KindsArg = None, include_superseded: SupersededArg = False,
               ) -> dict[str, Any]:
        """The memories of a user that best answer a question, best first (dense, BM25 and graph
        channels over the user's current, unexpired memories): each with id, text, kind, source, at
        (ISO 8601), score and version links; `context` holds them as cited lines for a prompt."""
        with _tool_errors():
            if self.memory.embedder is None and self.embedder_error is not None:
                raise self._no_embedder("recall")
            hits = self.memory.recall(user, query, k, since=since, until=until, kinds=kinds,
                                      include_superseded=include_superseded)
            return {"memories": [_plain(hit.to_dict()) for hit in hits], "context": hits.to_context()}

    def card(self, user: UserArg, refresh: RefreshArg = False) -> dict[str, Any]:
        """A user's overview card: their profile, preferences, projects and facts within the store's
        token budget, each entry with the id and time of its memory (built from the current memories
        on first use or with `refresh`, and stored unless the server is read-only)."""
        with _tool_errors():
            return _plain(self.memory.card(user, refresh=refresh))

    def forget(self, user: UserArg, confirm: ConfirmArg) -> dict[str, Any]:
        """Erase everything of a user (memories, entities, card), rewrite the folder's history so
        that no file keeps it, and verify that by scanning every file; returns the receipt
        (counts, files removed and written, `verified`, and any place a trace was found). Cannot be
        undone: runs only with `confirm` true (the boolean)."""
        with _tool_errors():
            if confirm is not True:
                raise InvalidArgumentError(f"forget erases every memory of user {user!r} for good: call it "
                                           "with confirm true to do so")
            return _plain(self.memory.forget(user).to_dict())

    # -------------------------------------------------------------- knowledge-base tools

    def _kb_call(self, tool: str, max_tokens: int, question: str, **kwargs: Any) -> dict[str, Any]:
        """``kb.<search>(question, **kwargs)`` as a kb tool returns it (``tool`` is ``kb_<search>``):
        :meth:`KBResult.to_dict`, its ``context`` within ``max_tokens``, and ``warnings`` (the
        messages of the warnings raised, such as communities older than the documents) if any."""
        with _tool_errors():
            if self.kb is None:
                if self.embedder_error is not None:
                    raise self._no_embedder(tool)
                raise InvalidArgumentError(f"{tool} needs the knowledge base of the graph at "
                                           f"{self.graph.path}, which the server was not given")
            with _Warnings.caught() as caught:
                result = getattr(self.kb, tool[3:])(question, **kwargs)
                out = _plain(result.to_dict())
                out["context"] = result.to_context(max_tokens=max_tokens)
            if caught:
                out["warnings"] = caught
            return out

    def kb_search(self, question: QuestionArg, k: KArg = 10, mode: ModeArg = "hybrid",
                  tenant: TenantArg = None, history: HistoryArg = False, max_tokens: BudgetArg = 2000,
                  ) -> dict[str, Any]:
        """The k document chunks best for a question: hybrid (dense and BM25, fused), dense or bm25.
        Returns question, mode, chunks (best first: key, score, text, prefix, source, version, date,
        status, title, heading_path), empty entities, relations, communities and summaries; `context`:
        the chunks as cited sources ([n] [source version | date | status] Title > Heading, then the
        text) within max_tokens; and `warnings` if the knowledge base raised any. Chunks of current
        documents only, unless history."""
        return self._kb_call("kb_search", max_tokens, question, k=k, mode=mode, tenant=tenant,
                             history=history)

    def kb_local_search(self, question: QuestionArg, k: KArg = 10, entities: EntitiesArg = 10,
                        hops: KBHopsArg = 2, communities: CommunitiesArg = 3, tenant: TenantArg = None,
                        history: HistoryArg = False, max_tokens: BudgetArg = 2000) -> dict[str, Any]:
        """GraphRAG local search: the k chunks that answer a question, the entities it names and those
        around them (walks of up to `hops` edges), their relations and their communities. Returns
        question, mode "local", chunks (as kb_search gives them), entities (key, name, type,
        description, score), relations (source, target, type, description, weight), communities
        (key, level, title, summary, score, size), empty summaries; `context`: all of it for a prompt
        within max_tokens; and `warnings` if any."""
        return self._kb_call("kb_local_search", max_tokens, question, k=k, entities=entities, hops=hops,
                             communities=communities, tenant=tenant, history=history)

    def kb_global_search(self, question: QuestionArg, level: LevelArg = 0, k: KArg = 5,
                         tenant: TenantArg = None, max_tokens: BudgetArg = 2000) -> dict[str, Any]:
        """GraphRAG global search, for questions about the whole collection: the k community summaries
        of a level (0: the coarsest) best for the question. Returns question, mode "global",
        communities (key, level, title, summary, score, size), the other lists empty; `context`: the
        summaries for a prompt within max_tokens; and `warnings` if any (e.g. documents changed since
        the communities were built). Fails for a level the knowledge base has not built."""
        return self._kb_call("kb_global_search", max_tokens, question, level=level, k=k, tenant=tenant)

    def kb_tree_search(self, question: QuestionArg, k: KArg = 10, strategy: StrategyArg = "collapsed",
                       tenant: TenantArg = None, history: HistoryArg = False, max_tokens: BudgetArg = 2000,
                       ) -> dict[str, Any]:
        """RAPTOR search over the knowledge base's summary tree. Returns question, mode "tree",
        chunks (as kb_search gives them), summaries (key, level, text, score), the other lists empty;
        `context`: them for a prompt within max_tokens; and `warnings` if any (e.g. documents changed
        since the tree was built). top_down fails when no tree was built."""
        return self._kb_call("kb_tree_search", max_tokens, question, k=k, strategy=strategy, tenant=tenant,
                             history=history)


# ------------------------------------------------------------------ the server


class _Server(MCPServer):
    """An MCPServer that refuses argument names a tool does not take: the SDK's argument models
    ignore them, which would turn a misspelt filter (``tenant`` for ``tenants``) into no filter."""

    parameters: dict[str, list[str]]  # {tool name: its argument names}

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        valid = self.parameters.get(name)
        unknown = [] if valid is None else [arg for arg in arguments if arg not in valid]
        if unknown:
            raise ToolError(f"Error executing tool {name}: unknown argument{'s' if len(unknown) > 1 else ''} "
                            f"{', '.join(repr(arg) for arg in unknown)}; {name} takes "
                            f"{', '.join(valid) if valid else 'no arguments'}")
        return await super().call_tool(name, arguments, context)


def build_server(graph: Any, *, memory: Any = None, kb: Any = None, embedder: Any = None,
                 embedder_error: str | None = None, name: str = "vecgraph") -> MCPServer:
    """An :class:`mcp.server.mcpserver.MCPServer` with the tools over ``graph`` (see the module).

    Args:
        graph: an open :class:`vecgraph.Graph` (``memory.graph`` for a memory store, ``kb.graph``
            for a knowledge base).
        memory: the :class:`vecgraph.Memory` holding ``graph``, or None: no memory tools.
        kb: the :class:`vecgraph.KnowledgeBase` holding ``graph``, or None: the kb tools are
            offered only when ``graph`` declares a knowledge base's filterable properties (its
            embedder did not load, see :func:`open_folder`), and fail naming ``embedder_error``.
        embedder: embeds query texts, or None (see :class:`VecgraphTools`).
        embedder_error: why the graph's recorded embedder did not load, or None.
        name: the server's name in the MCP handshake.

    Returns:
        The server, not yet running (``run_stdio_async``, ``run_streamable_http_async`` or
        ``streamable_http_app`` serve it). It does not close ``graph``.
    """
    tools = VecgraphTools(graph, memory=memory, kb=kb, embedder=embedder, embedder_error=embedder_error)
    is_kb = memory is None and (kb is not None or _declares(graph.filterable, KB_FILTERABLE))
    kind = "memory store" if memory is not None else "knowledge base" if is_kb else "graph"
    if embedder is not None:
        about_text = f"Text queries are embedded with {embedder.name}. "
    else:
        why = "its embedder did not load here" if tools.embedder_error is not None else "No embedder"
        about_text = f"{why}: search takes a vector; hybrid_search answers text by BM25 and entity names. "
    instructions = (
        f"A vecgraph {kind} ({len(graph):,} nodes, {graph.count_edges:,} edges, dim {graph.dim}"
        f"{', read-only' if graph.read_only else ''}). " + about_text
        + ("recall answers questions from a user's memories; card gives a user's overview. "
           if memory is not None else "")
        + ("kb_search, kb_local_search (entities and relations), kb_global_search (community summaries) and "
           "kb_tree_search (RAPTOR) answer questions from its documents. " if is_kb else ""))
    reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    chosen: list[tuple[Callable, ToolAnnotations]] = [
        (method, reads) for method in (tools.search, tools.hybrid_search, tools.get_node, tools.neighbors,
                                       tools.stats)]
    if memory is not None:
        if not graph.read_only:
            chosen.append((tools.remember, ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                           idempotent_hint=False, open_world_hint=False)))
        chosen.append((tools.recall, reads))
        chosen.append((tools.card, reads if graph.read_only else ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=True, open_world_hint=False)))
        if not graph.read_only:
            chosen.append((tools.forget, ToolAnnotations(read_only_hint=False, destructive_hint=True,
                                                         idempotent_hint=True, open_world_hint=False)))
    if is_kb:
        chosen += [(method, reads) for method in (tools.kb_search, tools.kb_local_search,
                                                  tools.kb_global_search, tools.kb_tree_search)]
    made = []
    for method, hints in chosen:
        tool = Tool.from_function(method, name=method.__name__, description=_doc(method), annotations=hints)
        tool.parameters["additionalProperties"] = False  # the schema says what call_tool refuses
        made.append(tool)
    server = _Server(name, instructions=instructions, version=__version__, log_level="WARNING", tools=made)
    server.parameters = {tool.name: list(tool.parameters.get("properties", {})) for tool in made}
    return server


def _declares(declared: dict | None, filterable: dict) -> bool:
    """Whether a graph declaring the filterable properties ``declared`` (its MANIFEST's) is a
    memory store's or a knowledge base's: it declares those that :meth:`vecgraph.Memory.open`
    or :meth:`vecgraph.KnowledgeBase.open` creates and checks (``filterable``: their FILTERABLE)."""
    declared = declared or {}
    return all(declared.get(name) == kind for name, kind in filterable.items())


def _load_embedder(manifest: dict, folder: str, embedder: Any) -> Any:
    """``embedder`` (a spec for :func:`vecgraph.embedders.load` or an embedder object), checked
    against the folder's dim and recorded embedder.

    Raises:
        DimensionMismatchError: another dim. InvalidArgumentError: another name than the recorded
        one, or a spec of no known form. EmbedderUnavailableError and as :func:`embedders.load`.
    """
    recorded = manifest.get("embedder")
    if isinstance(embedder, str):
        embedder = embedders.load(embedder)
    embedder = embedders.check_embedder(embedder)
    if int(embedder.dim) != manifest.get("dim"):
        raise DimensionMismatchError(f"embedder {embedder.name!r} makes {int(embedder.dim)}-d vectors, "
                                     f"the graph at {folder} has dim {manifest.get('dim')}")
    if recorded and recorded.get("name") != embedder.name:
        raise InvalidArgumentError(f"the graph at {folder} was built with embedder "
                                   f"{recorded.get('name')!r}, got {embedder.name!r}, whose vectors are "
                                   "not comparable")
    return embedder


def _manifest(folder: str) -> dict:
    """The MANIFEST of the graph in ``folder``; FileNotFoundError when there is none."""
    manifest = storage.read_manifest(folder)
    if manifest is None:
        remnants = storage.graph_remnants(folder) if os.path.isdir(folder) else []
        if remnants:
            raise storage.missing_manifest(folder, remnants)
        why = f" (the folder has no {storage.MANIFEST})" if os.path.isdir(folder) else ""
        raise FileNotFoundError(f"no vecgraph graph at {folder}{why}")
    return manifest


def open_folder(folder: str, *, read_only: bool = False, embedder: Any = None) -> tuple:
    """Open the graph (or memory store, or knowledge base) in ``folder`` for the server.

    Args:
        folder: an existing graph folder (never created here).
        read_only: open it read-only (``Graph.open(read_only=True)``: a shared lock, beside
            other readers, while no process holds it for writing).
        embedder: a spec for :func:`vecgraph.embedders.load` or an embedder object, which must be
            the one the folder recorded (None: the recorded one, loaded by
            :meth:`vecgraph.Graph.query_embedder`).

    Returns:
        (graph, store, embedder or None, embedder_error or None): ``store`` is the
        :class:`vecgraph.Memory` of a memory store, the :class:`vecgraph.KnowledgeBase` of a
        knowledge base, or None; close it (or ``graph`` when it is None). With ``embedder`` None
        and a recorded embedder that does not load here, the folder still opens: the embedder is
        None and ``embedder_error`` (one line) says why and how to make it load; a knowledge base
        then opens as its graph alone (``store`` None), as :meth:`vecgraph.KnowledgeBase.open`
        needs the embedder.

    Raises:
        FileNotFoundError: the folder holds no graph. CorruptionError: a MANIFEST that is lost
        or unreadable. InvalidArgumentError / DimensionMismatchError: an ``embedder`` that does
        not fit the graph. And as :meth:`vecgraph.Graph.open` and :meth:`vecgraph.KnowledgeBase.open`.
    """
    from ..graph import Graph
    from ..kb import KnowledgeBase
    from ..memory import Memory

    folder = os.fspath(folder)
    manifest = _manifest(folder)
    given = None if embedder is None else _load_embedder(manifest, folder, embedder)
    memory = failed = None
    if _declares(manifest.get("filterable"), MEMORY_FILTERABLE):
        memory = Memory.open(folder, embedder=given, read_only=read_only)
    elif _declares(manifest.get("filterable"), KB_FILTERABLE):
        try:
            kb = KnowledgeBase.open(folder, embedder="auto" if given is None else given, read_only=read_only)
        except Exception as exc:  # its recorded embedder may fail to load in any way
            if given is not None or not manifest.get("embedder"):
                raise
            failed = exc  # the graph alone, if that was the embedder (seen below), else raised
        else:
            return kb.graph, kb, kb.embedder, None
    graph = memory.graph if memory is not None else Graph.open(folder, read_only=read_only)
    if given is not None or graph.embedder is None:
        return graph, memory, given, None
    try:
        loaded = graph.query_embedder()
    except Exception as exc:  # noqa: BLE001 - any failure of the embedder's own code, at its import too
        why = str(exc) if isinstance(exc, Error) else f"{type(exc).__name__}: {exc}"
        return graph, memory, None, " ".join(why.split())
    if failed is not None:
        graph.close()
        raise failed
    if memory is not None:
        memory.embedder = loaded  # as Memory.open(embedder="auto") would have loaded it
    return graph, memory, loaded, None


def parse_http(text: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:PORT`` for IPv6) as (host, port).

    Raises:
        InvalidArgumentError: another form, or a port outside 1 to 65535.
    """
    host, sep, port = text.rpartition(":")
    host = host[1:-1] if host.startswith("[") and host.endswith("]") else host
    if not sep or not host or not port.isdigit() or not 1 <= int(port) <= 65535:
        raise InvalidArgumentError(
            f"expected HOST:PORT with a port in [1, 65535], such as 127.0.0.1:8765, got {text!r}")
    return host, int(port)


class _LineReader:
    """Lines of a pipe read by the event loop, as the SDK's stdio transport iterates its stdin."""

    def __init__(self, reader: asyncio.StreamReader) -> None:
        self._reader = reader

    def __aiter__(self) -> _LineReader:
        return self

    async def __anext__(self) -> str:
        line = await self._reader.readline()
        if not line:
            raise StopAsyncIteration
        return line.decode("utf-8", "replace")


class _PipeWriter:
    """The SDK's stdout writes, each message written to ``fd`` whole at its flush."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._parts: list = []

    async def write(self, text: str) -> None:
        self._parts.append(text.encode("utf-8"))

    async def flush(self) -> None:
        data = memoryview(b"".join(self._parts))
        self._parts.clear()
        while data:
            data = data[os.write(self._fd, data):]


def _output_closed(exc: BaseException) -> bool:
    """Whether ``exc`` (an exception group of the SDK's tasks, or not) holds nothing but the
    errors of writing to a stdout that the client closed."""
    if isinstance(exc, (BrokenPipeError, ConnectionResetError)):
        return True
    inner = getattr(exc, "exceptions", None)
    return bool(inner) and all(_output_closed(e) for e in inner)


async def _run_stdio(server: MCPServer) -> None:
    """Serve ``server`` over this process's stdin and stdout, until stdin ends or the client
    closes stdout.

    When stdin is a pipe, a socket or a terminal (as when an MCP client starts the server), its
    lines are read by the event loop instead of by a worker thread per line (the SDK's own stdio
    transport): what the server adds to a search measured 1.04-1.13 ms at p50 instead of
    1.39-1.84 ms on a 2-core VM (bench/bench_mcp.py), and a stop (a signal) need not wait for a
    line to come. As the SDK does, file descriptors 0 and 1 point at the null device and at
    stderr meanwhile, so that stray reads and prints miss the protocol's stream. Otherwise (a
    regular file, the null device, Windows) the SDK's transport runs.
    """
    lowlevel = getattr(server, "_lowlevel_server", None)  # MCPServer's protocol server (SDK 2.x)
    try:
        mode = os.fstat(0).st_mode
        terminal = os.isatty(0)
    except OSError:
        mode, terminal = 0, False
    try:
        if lowlevel is None or sys.platform == "win32" or not (
                stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or terminal):
            await server.run_stdio_async()
        else:
            await _run_stdio_pipes(lowlevel)
    except BaseException as exc:
        if not _output_closed(exc):
            raise
        # the client closed the server's stdout: the session is over, as when it closes stdin


async def _run_stdio_pipes(lowlevel: Any) -> None:
    saved = os.dup(0), os.dup(1)
    was_blocking = os.get_blocking(0)
    read_fd, write_fd = os.dup(0), os.dup(1)
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    os.dup2(2, 1)
    transport = None
    try:
        reader = asyncio.StreamReader(limit=1 << 30)  # a message is one line, however long
        transport, _ = await asyncio.get_running_loop().connect_read_pipe(
            lambda: asyncio.StreamReaderProtocol(reader), os.fdopen(read_fd, "rb", buffering=0))
        async with stdio_server(stdin=_LineReader(reader), stdout=_PipeWriter(write_fd)) as (read, write):
            await lowlevel.run(read, write, lowlevel.create_initialization_options())
    finally:
        if transport is not None:
            transport.close()  # closes read_fd
        else:
            os.close(read_fd)
        sys.stdout.flush()  # what was printed meanwhile goes to stderr, not to the client
        os.set_blocking(saved[0], was_blocking)  # the event loop made it non-blocking (a terminal shares it)
        for fd, copy in enumerate(saved):
            os.dup2(copy, fd)
            os.close(copy)
        os.close(write_fd)


class _Stopper:
    """SIGINT and SIGTERM while the server runs: the first one cancels the serving task (from the
    event loop, so the calls still running finish and the transport closes in order); another
    one, while that stop is still under way, raises KeyboardInterrupt."""

    def __init__(self) -> None:
        self.signum: int | None = None
        self._target: tuple[asyncio.AbstractEventLoop, anyio.CancelScope] | None = None

    def handle(self, signum: int, frame: Any) -> None:
        if self.signum is not None and self._target is not None:
            raise KeyboardInterrupt
        self.signum = signum
        if self._target is not None:
            loop, scope = self._target
            loop.call_soon_threadsafe(scope.cancel)  # safe in a signal handler (asyncio.Runner does it)

    async def run(self, serving: Callable[[], Awaitable[None]]) -> None:
        """Run ``serving()`` until it returns or a signal comes."""
        with anyio.CancelScope() as scope:
            self._target = asyncio.get_running_loop(), scope
            try:
                if self.signum is not None:  # came before the loop ran
                    scope.cancel()
                await serving()
            finally:
                self._target = None


def serve(folder: str, *, http: tuple[str, int] | None = None, read_only: bool = False,
          embedder: Any = None) -> int | None:
    """Open ``folder`` and serve it until the client goes away (stdio: stdin or stdout closed) or
    the process is interrupted (Ctrl-C, SIGTERM: the calls running then finish first); then close
    it. Prints what it serves, a line saying why text queries get no dense channel (and the kb
    tools fail) when the recorded embedder does not load, and the stop, on stderr.

    Args:
        folder: the graph folder (see :func:`open_folder`).
        http: (host, port): serve streamable HTTP at ``http://host:port/mcp``; None: stdio.
        read_only: open read-only and offer no tool that writes.
        embedder: the query embedder, a spec or an object (None: the folder's recorded one).

    Returns:
        The number of the signal that stopped the server, or None.

    Raises:
        As :func:`open_folder`; OSError when the port cannot be bound.
    """
    from ..kb import KnowledgeBase

    graph, store, query_embedder, embedder_error = open_folder(folder, read_only=read_only, embedder=embedder)
    kb = store if isinstance(store, KnowledgeBase) else None
    memory = None if kb is not None else store
    stopper = _Stopper()
    # Until the folder is closed a signal only asks the server to stop (uvicorn, serving HTTP,
    # handles both itself meanwhile and raises them again once it has stopped).
    previous = {sig: signal.signal(sig, stopper.handle) for sig in (signal.SIGINT, signal.SIGTERM)}
    try:
        try:
            server = build_server(graph, memory=memory, kb=kb, embedder=query_embedder,
                                  embedder_error=embedder_error)
            where = "stdio" if http is None else f"http://{http[0]}:{http[1]}/mcp"
            names = [tool.name for tool in anyio.run(server.list_tools)]
            mode = ", read-only" if read_only else ""
            print(f"vecgraph mcp: serving {graph.path} ({len(graph):,} nodes{mode}) on {where}; tools: "
                  f"{', '.join(names)}", file=sys.stderr, flush=True)
            if embedder_error is not None:
                kb_off = ", and the kb tools fail" if "kb_search" in names else ""
                print(f"vecgraph mcp: text queries get no dense channel (search takes a vector, "
                      f"hybrid_search runs bm25 and entity){kb_off}: {embedder_error}; "
                      "or pass --embedder SPEC", file=sys.stderr, flush=True)
            if http is None:
                anyio.run(stopper.run, functools.partial(_run_stdio, server))
            else:
                anyio.run(stopper.run, functools.partial(server.run_streamable_http_async, host=http[0],
                                                         port=http[1]))
        finally:
            (store if store is not None else graph).close()
            print(f"vecgraph mcp: stopped; {graph.path} closed", file=sys.stderr, flush=True)
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)
    return stopper.signum


def run_command(args: Any) -> int:
    """``vecgraph mcp`` (argparse namespace: folder, http, read_only, embedder, parser): 0 when the
    client went away, 130 when a signal stopped the server."""
    http = None
    if args.http is not None:
        try:
            http = parse_http(args.http)
        except InvalidArgumentError as exc:
            args.parser.error(f"argument --http: {exc}")
    embedder = None
    if args.embedder is not None:  # a spec of neither form, or one the graph does not match: usage errors
        try:
            embedder = _load_embedder(_manifest(args.folder), args.folder, args.embedder)
        except (InvalidArgumentError, DimensionMismatchError) as exc:
            args.parser.error(f"argument --embedder: {exc}")
    try:
        stopped_by = serve(args.folder, http=http, read_only=args.read_only, embedder=embedder)
    except KeyboardInterrupt:  # a second signal while the first one's stop was under way
        if args.debug:
            raise
        # The folder is closed, but a worker thread may still wait (for a line of stdin, a call's
        # embedder), and the interpreter would wait for it at exit: end the process here.
        os._exit(130)
    return 0 if stopped_by is None else 130
