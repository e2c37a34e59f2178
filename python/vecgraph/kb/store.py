"""The knowledge base: :class:`KnowledgeBase`, written against :class:`vecgraph.Graph`'s public API.

Layout of the graph a knowledge base keeps (one folder; snapshots, the WAL, ``vecgraph
stats`` and erasure by tenant cover all of it):

- a **document** is a node (label ``document``, key
  ``doc:<len(tenant)>:<tenant>:<len(source)>:<source>@<version>``,
  text: its title, ts: its date) with props ``source``, ``version``, ``date``, ``status``,
  ``title``, ``format``, ``content_hash`` and the user's ``metadata``;
- a **section** (label ``section``, key ``<document key>#s<i>``, text: its heading path) is
  ``part_of`` its document;
- a **chunk** (label ``chunk``, key ``<document key>#c<i>``) is ``part_of`` its section and
  linked to the next chunk of its document by ``next``. Its text is the contextual prefix, a
  blank line, then the chunk (so the prefix is embedded and BM25-indexed with it); props
  ``body_start`` (where the chunk starts in the text), ``prefix``, ``heading_path`` and the
  document's metadata. Chunks inherit the document's ``status``, ``source`` (filterable) and
  date (the node's ts);
- an **entity** (label ``entity``, key :func:`vecgraph.kb.extract.entity_key`, its names as
  aliases, so the entity channel of :meth:`vecgraph.Graph.hybrid_search` finds it in a
  question) is linked from each chunk that names it by ``mentions``; typed relations between
  entities are edges whose rel is the relation's type (text: its description);
- a **community** (label ``community``, filterable ``level``) holds its entities by
  ``member_of`` edges (entity → community) and lies inside its parent by ``part_of``;
- a RAPTOR **summary** (label ``summary``, filterable ``level`` >= 1) ``summarizes`` its
  children (chunks or lower summaries);
- the node ``~kb`` (label ``~kb``) records the layout's format.

Everything a search returns passes ``status`` (default ``"current"``); entities, communities
and summaries have status ``"current"``.
"""

from __future__ import annotations

import json
import math
import os
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from datetime import date, datetime, timedelta, timezone
from typing import Any

import numpy as np

from .. import storage
from ..errors import DimensionMismatchError, InvalidArgumentError, NotFoundError, _got
from . import build as _build
from . import search as _search
from .chunking import Chunker
from .documents import Document, iter_paths, parse_text, read_document
from .extract import EntityResolver, RuleExtractor, entity_key, merged_props
from .hooks import HookError, Relation, call_hook, check_extraction, check_text

__all__ = ["FILTERABLE", "LABELS", "AddReport", "KnowledgeBase", "default_contextualizer"]

FILTERABLE = {"status": "str", "source": "str", "level": "int64"}
DOCUMENT, SECTION, CHUNK, ENTITY, COMMUNITY, SUMMARY, CONFIG = (
    "document",
    "section",
    "chunk",
    "entity",
    "community",
    "summary",
    "~kb",
)
LABELS = (DOCUMENT, SECTION, CHUNK, ENTITY, COMMUNITY, SUMMARY)
PART_OF, NEXT, MENTIONS, MEMBER_OF, SUMMARIZES = "part_of", "next", "mentions", "member_of", "summarizes"
STRUCTURE_RELS = (PART_OF, NEXT, MENTIONS, MEMBER_OF, SUMMARIZES)
CONFIG_KEY = "~kb"
FORMAT = 1
CURRENT = "current"
MAX_MENTIONS_PER_CHUNK = 32


def default_contextualizer(document: Document, chunk: Any) -> str:
    """The offline contextual prefix of a chunk: the document's title and the chunk's heading
    path, ``"Title > Heading > Subheading"`` (the heading equal to the title left out)."""
    parts = [document.title] if document.title else []
    for heading in chunk.heading_path:
        if heading and (not parts or heading != parts[-1]):
            parts.append(heading)
    return " > ".join(parts)


def _date_us(value: Any, source: str) -> tuple[int, str]:
    """``(microseconds since the epoch, ISO date text)`` of a document's date (None: 0, "")."""
    if value is None:
        return 0, ""
    if isinstance(value, str):
        try:
            value = datetime.fromisoformat(value)
        except ValueError:
            raise InvalidArgumentError(
                f"date of {source!r} must be an ISO date (2024-01-31), got {value!r}"
            ) from None
    if isinstance(value, datetime):
        moment = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
    elif isinstance(value, date):
        moment = datetime(value.year, value.month, value.day, tzinfo=timezone.utc)
    else:
        raise TypeError(f"date of {source!r} must be a date, datetime or ISO str, got {_got(value)}")
    moment = moment.astimezone(timezone.utc)
    us = (moment - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(microseconds=1)
    text = moment.date().isoformat() if moment.time() == datetime.min.time() else moment.isoformat()
    return us, text


def _metadata_str(value: Any, name: str, source: str) -> str:
    if value is None:
        return ""
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return str(value)
    if not isinstance(value, str):
        raise TypeError(f"{name} of {source!r} must be a str, got {_got(value)}")
    return value


@dataclass
class AddReport:
    """What :meth:`KnowledgeBase.add_documents` did.

    Attributes:
        added / replaced / unchanged: the sources written new, written over an older copy
            (another content hash or metadata), and left as they were.
        skipped: ``(path, reason)`` of the inputs refused under ``on_error="skip"``.
        chunks: chunks written. entities: entities created. mentions: ``mentions`` edges
            written. relations: relation edges written. merges: names resolved into an
            existing entity under another spelling (:class:`vecgraph.kb.extract.Merge`).
        extractor_failures: ``(chunk key, reason)`` of the chunks whose extraction the
            extractor hook gave up on (its ``failures``), skipped.
        entities_removed: entities deleted because no chunk mentions them any more (every
            chunk that did was replaced).
    """

    added: list = field(default_factory=list)
    replaced: list = field(default_factory=list)
    unchanged: list = field(default_factory=list)
    skipped: list = field(default_factory=list)
    chunks: int = 0
    entities: int = 0
    mentions: int = 0
    relations: int = 0
    merges: list = field(default_factory=list)
    extractor_failures: list = field(default_factory=list)
    entities_removed: int = 0


@dataclass
class _Prepared:
    """A document read, chunked, contextualised and extracted: everything but the writes."""

    document: Document
    key: str
    tenant: str
    meta: dict
    ts: int
    chunks: list
    prefixes: list
    extractions: list  # per chunk: Extraction or None (the extractor gave up)
    replaces: bool


class KnowledgeBase:
    """Documents → sections → chunks → entities → communities, and RAPTOR trees, in one graph
    folder (layout: see the module). Open with :meth:`open`.

    Retrieval: :meth:`search` (chunks: dense, BM25 or hybrid), :meth:`local_search`
    (entities the question names and their neighbourhood), :meth:`global_search` (community
    summaries, Edge et al. 2024) and :meth:`tree_search` (RAPTOR, Sarthi et al. 2024).
    """

    def __init__(
        self,
        graph: Any,
        embedder: Any,
        *,
        chunker: Any,
        contextualizer: Callable,
        extractor: Callable,
        summarizer: Callable | None,
        resolver: EntityResolver,
        count_tokens: Callable[[str], int],
        sync_each_call: bool,
    ) -> None:
        self.graph = graph
        self.embedder = embedder
        self.chunker = chunker
        self.contextualizer = contextualizer
        self.extractor = extractor
        self.summarizer = summarizer
        self.resolver = resolver
        self.count_tokens = count_tokens
        self._sync_each_call = sync_each_call
        self._names_loaded = False
        self._history: bool | None = None  # whether any document was ever not current
        self._config: dict | None = None  # the ~kb node's props, read once (written by _set_config)
        self._names: Any = None  # vecgraph.entities.EntityIndex of the entities' names

    search = _search.search
    local_search = _search.local_search
    global_search = _search.global_search
    tree_search = _search.tree_search
    build_communities = _build.build_communities
    build_tree = _build.build_tree
    tree_levels = _build.tree_levels

    # ------------------------------------------------------------------ open / close

    @classmethod
    def open(
        cls,
        path: Any = None,
        *,
        embedder: Any = "auto",
        chunker: Any = None,
        contextualizer: Callable | None = None,
        extractor: Callable | None = None,
        summarizer: Callable | None = None,
        resolver: EntityResolver | None = None,
        count_tokens: Callable[[str], int] | None = None,
        sync: str = "always",
        read_only: bool = False,
    ) -> KnowledgeBase:
        """Open the knowledge base in folder ``path`` (created if new); None: in memory.

        Args:
            path: a folder (str or path), or None.
            embedder: "auto" (the embedder the folder records; "wordllama" for a new one), a
                spec for :func:`vecgraph.embedders.load` ("wordllama", "minilm", ...), or an
                embedder object (``name``, ``dim``, ``__call__(texts) -> (n, dim)`` float32).
            chunker: ``(Document) -> list[Chunk]`` (default
                :class:`vecgraph.kb.chunking.Chunker`: sections, then paragraphs and
                sentences, 512 Llama 2 tokens with 64 of overlap).
            contextualizer: ``(Document, Chunk) -> str``, the prefix embedded and indexed with
                a chunk (Anthropic, "Introducing Contextual Retrieval", 2024). Default
                :func:`default_contextualizer` (title and heading path);
                :class:`vecgraph.kb.llm_hooks.LLMContextualizer` asks a model.
            extractor: ``(str) -> Extraction | list[str] | dict | None`` (default
                :class:`vecgraph.kb.extract.RuleExtractor`);
                :class:`vecgraph.kb.llm_hooks.LLMExtractor` asks a model. None from the hook:
                the chunk is skipped and reported.
            summarizer: ``(title: str, texts: list[str]) -> str`` for community and RAPTOR
                summaries (default: extractive, :mod:`vecgraph.kb.summaries`).
            resolver: entity resolution (default :class:`vecgraph.kb.extract.EntityResolver`).
            count_tokens: ``(str) -> int`` (default: the Llama 2 tokenizer wordllama ships).
            sync: the WAL's fsync policy; "always" (default) makes every call's writes durable
                with one fsync when it returns.
            read_only: open to read (searches only).

        Raises:
            InvalidArgumentError: the folder holds a graph that is not a knowledge base.
            TypeError: a hook that is not callable. And as :meth:`vecgraph.Graph.open`.
        """
        from .. import embedders as embedder_module
        from ..graph import Graph
        from ..memory.card import default_token_counter

        for name, hook in (
            ("contextualizer", contextualizer),
            ("extractor", extractor),
            ("summarizer", summarizer),
            ("count_tokens", count_tokens),
            ("chunker", chunker),
        ):
            if hook is not None and not callable(hook):
                raise TypeError(f"{name} must be callable, got {_got(hook)}")
        exists = path is not None and os.path.exists(os.path.join(os.fspath(path), storage.MANIFEST))
        recorded = isinstance(embedder, str) and embedder == "auto" and exists
        if isinstance(embedder, str) and embedder == "auto":
            embedder = None if recorded else "wordllama"
        if isinstance(embedder, str):
            embedder = embedder_module.load(embedder)
        if embedder is not None:
            embedder = embedder_module.check_embedder(embedder)
        dim = None if embedder is None else int(embedder.dim)
        if path is None:
            graph = Graph(dim, "cos", filterable=FILTERABLE)
        else:
            try:
                graph = Graph.open(
                    path,
                    dim,
                    None if dim is None else "cos",
                    filterable=FILTERABLE,
                    sync="off" if sync == "always" else sync,
                    read_only=read_only,
                )
            except (InvalidArgumentError, DimensionMismatchError) as exc:
                raise type(exc)(
                    f"{path} is not a knowledge base made with this embedder "
                    f"(KnowledgeBase.open makes one in a new folder): {exc}"
                ) from exc
            if any(graph.filterable.get(n) != t for n, t in FILTERABLE.items()):
                graph.close()
                raise InvalidArgumentError(
                    f"{path} holds a graph that is not a knowledge base (it lacks the "
                    f"filterable properties {sorted(FILTERABLE)})"
                )
        try:
            if recorded:
                embedder = graph.query_embedder()
            if not (graph.read_only and graph.embedder is None):
                graph.use_embedder(embedder)
            kb = cls(
                graph,
                embedder,
                chunker=chunker or Chunker(),
                contextualizer=contextualizer or default_contextualizer,
                extractor=extractor or RuleExtractor(),
                summarizer=summarizer,
                resolver=resolver or EntityResolver(),
                count_tokens=count_tokens or default_token_counter,
                sync_each_call=sync == "always" and path is not None and not read_only,
            )
            if CONFIG_KEY not in graph:
                if len(graph) and not read_only:
                    raise InvalidArgumentError(f"{path} holds a graph that is not a knowledge base")
                if not read_only:
                    graph.add_nodes(
                        [CONFIG_KEY], kb._unit(1), labels=CONFIG, texts=[""], props=[{"format": FORMAT}]
                    )
                    kb._durable()
        except BaseException:
            graph.close()
            raise
        return kb

    def close(self) -> None:
        """Close the graph (syncing the WAL)."""
        self.graph.close()

    def __enter__(self) -> KnowledgeBase:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return (
            f"KnowledgeBase({self.graph.path!r}, embedder={getattr(self.embedder, 'name', None)!r}, "
            f"nodes={len(self.graph)})"
        )

    def _durable(self) -> None:
        if self._sync_each_call:
            self.graph.sync()

    def _unit(self, n: int) -> np.ndarray:
        return np.full((n, self.graph.dim), 1.0 / math.sqrt(self.graph.dim), np.float32)

    def config(self) -> dict:
        """The knowledge base's own record (node ``~kb``): format, tree levels, what is stale.

        Read from the graph once per handle; the knowledge base's own writes keep it current."""
        if self._config is None:
            self._config = dict(self.graph.get_node(CONFIG_KEY, vector=False)["props"] or {})
        return dict(self._config)

    def has_history(self) -> bool:
        """Whether any document was ever written with, or set to, a status other than
        "current" (until then searches need no status filter)."""
        if self._history is None:
            self._history = bool(self.config().get("history"))
        return self._history

    def _note_status(self, status: str) -> None:
        if status != CURRENT and not self.has_history():
            self._set_config(history=True)
            self._history = True

    def _set_config(self, **values: Any) -> None:
        config = dict(self.config(), **values)
        self._config = None  # read again after a write that failed part way
        self.graph.update_nodes([CONFIG_KEY], props=[config])
        self._config = config

    def _changed(self) -> None:
        """Documents changed: communities and the RAPTOR tree built before no longer cover them."""
        config = self.config()
        built = {
            name: True
            for name in ("communities_stale", "tree_stale")
            if config.get(name.replace("_stale", "_built")) and not config.get(name)
        }
        if built:
            self._set_config(**built)

    def _warn_stale(self, what: str) -> None:
        if self.config().get(f"{what}_stale"):
            rebuild = "build_communities()" if what == "communities" else "build_tree()"
            warnings.warn(
                f"documents were added or changed since the {what.replace('_', ' ')} were built: "
                f"run {rebuild} to cover them",
                RuntimeWarning,
                stacklevel=3,
            )

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """``(len(texts), dim)`` float32 vectors of ``texts`` by the knowledge base's embedder
        (an empty text gets the neutral unit vector)."""
        if not texts:
            return np.zeros((0, self.graph.dim), np.float32)
        out = self._unit(len(texts))
        rows = [i for i, t in enumerate(texts) if t.strip()]
        if rows:
            vectors = np.asarray(self.embedder([texts[i] for i in rows]), dtype=np.float32)
            norms = np.linalg.norm(vectors, axis=1, keepdims=True)
            ok = (norms[:, 0] > 0) & np.isfinite(norms[:, 0])
            out[np.asarray(rows)[ok]] = vectors[ok] / norms[ok]
        return out

    # ------------------------------------------------------------------ entities' names

    def _load_names(self) -> None:
        """The resolver's and the matcher's names of every entity, read once per handle."""
        if self._names_loaded:
            return
        from ..entities import EntityIndex

        self._names = EntityIndex()
        keys = self.graph.keys(labels=[ENTITY])
        for key in keys:
            node = self.graph.get_node(key, vector=False)
            names = node["aliases"]
            self.resolver.add(node["tenant"], key, names)
            self._names.add(key, names, tenant=node["tenant"])
        self._names_loaded = True

    def merge_log(self, tenant: str | None = None) -> list[dict]:
        """Every merge of a name into an existing entity (entity resolution), oldest first per
        entity: dicts with ``name``, ``into``, ``reason`` ("alias" or "fuzzy"), ``score``
        (0-100) and ``tenant``."""
        out = []
        for key in self.graph.keys(labels=[ENTITY], tenants=None if tenant is None else [tenant]):
            out.extend((self.graph.get_node(key, vector=False)["props"] or {}).get("merged", []))
        return out

    # ------------------------------------------------------------------ documents

    def add_text(
        self,
        text: str,
        *,
        source: str,
        format: str = "markdown",
        title: str | None = None,
        tenant: str = "",
        version: Any = None,
        date: Any = None,
        status: str = CURRENT,
        metadata: dict | None = None,
    ) -> AddReport:
        """:meth:`add_documents` for one document given as a str (``format``: "markdown",
        "html" or "text"; ``source`` names it; the other arguments as there)."""
        if not isinstance(source, str) or not source:
            raise TypeError(f"source must be a non-empty str, got {_got(source)}")
        return self.add_documents(
            [parse_text(text, source=source, format=format, title=title)],
            tenant=tenant,
            version=version,
            date=date,
            status=status,
            metadata=metadata,
            progress=False,
        )

    def add_documents(
        self,
        inputs: Any,
        *,
        tenant: str = "",
        version: Any = None,
        date: Any = None,
        status: str = CURRENT,
        metadata: dict | None = None,
        on_error: str = "raise",
        progress: bool = True,
    ) -> AddReport:
        """Read, chunk, contextualise, extract and write documents.

        Args:
            inputs: a path (file or folder: its supported files, recursively), a
                :class:`vecgraph.kb.documents.Document`, or a list of them.
            tenant: the tenant every node of these documents is written in (entities are
                resolved within it, never across tenants).
            version, date, status: the documents' metadata for conflicts: a version label
                (str; ``"3.0"``), a date (date, datetime or ISO str; the chunks' ts), and a
                status (``"current"``, ``"deprecated"`` or any str). Searches return
                ``"current"`` chunks unless ``history=True``. Two versions of one source are
                two documents; re-adding a source and version whose content or metadata
                changed replaces it (its old chunks and their edges are deleted).
            metadata: a JSON dict kept on each document and its chunks (props ``metadata``).
            on_error: "raise" (default: a file that cannot be read raises before anything is
                written) or "skip" (go on with the others; the report lists what was skipped).
            progress: a tqdm progress bar on stderr.

        Returns:
            :class:`AddReport`.

        Raises:
            NotFoundError: a path that does not exist (named).
            InvalidArgumentError: a file that cannot be parsed, is binary or empty (named);
                a hook that raises or returns the wrong shape (:class:`vecgraph.kb.hooks.HookError`,
                naming the hook and what came); bad metadata. Nothing of the batch is written.
            ReadOnlyError: the knowledge base was opened read-only.
        """
        if on_error not in ("raise", "skip"):
            raise InvalidArgumentError(f"on_error must be 'raise' or 'skip', got {on_error!r}")
        if not isinstance(tenant, str):
            raise TypeError(f"tenant must be a str, got {_got(tenant)}")
        if status is None or not isinstance(status, str) or not status:
            raise TypeError(f"status must be a non-empty str, got {_got(status)}")
        if metadata is not None:
            if not isinstance(metadata, dict):
                raise TypeError(f"metadata must be a dict or None, got {_got(metadata)}")
            try:  # kept as JSON reads it back, so that an unchanged document compares equal
                metadata = json.loads(json.dumps(metadata, allow_nan=False))
            except (TypeError, ValueError) as exc:
                raise InvalidArgumentError(
                    f"metadata must be JSON (str keys; str, number, bool, None, list, "
                    f"dict values), got {metadata!r}: {exc}"
                ) from None
        _metadata_str(version, "version", "these documents")
        _date_us(date, "these documents")
        if self.graph.read_only:
            from ..errors import ReadOnlyError

            raise ReadOnlyError(f"{self.graph.path} was opened read-only: add_documents writes")
        items = inputs if isinstance(inputs, (list, tuple)) else [inputs]
        paths: list = []
        for item in items:
            if isinstance(item, Document):
                paths.append(item)
            elif isinstance(item, (str, os.PathLike)):
                try:
                    paths.extend(iter_paths(item))
                except (NotFoundError, InvalidArgumentError) as exc:
                    if on_error == "raise":
                        raise
                    report_skip = (os.fspath(item), str(exc))
                    paths.append(report_skip)
            else:
                raise TypeError(f"inputs must be paths or Documents, got {_got(item)}")
        report = AddReport()
        self._load_names()
        prepared: list[_Prepared] = []
        bar = _progress(len(paths), "reading", progress)
        try:
            for item in paths:
                bar.update(1)
                if isinstance(item, tuple):
                    report.skipped.append(item)
                    continue
                try:
                    if isinstance(item, Document):
                        document = item
                    else:
                        document = replace(read_document(item), source=_source_name(item))
                    one = self._prepare(document, tenant, version, date, status, metadata, report)
                    if one is not None and any(p.key == one.key for p in prepared):
                        report.unchanged.append(document.source)  # given twice: once is enough
                        continue
                except (NotFoundError, InvalidArgumentError, UnicodeError) as exc:
                    if on_error == "raise" or isinstance(exc, HookError):
                        raise
                    report.skipped.append((getattr(item, "source", item), str(exc)))
                    continue
                if one is not None:
                    prepared.append(one)
        finally:
            bar.close()
        if prepared:
            self._note_status(status)
            self._write(prepared, report, progress)
        self._durable()
        return report

    def _prepare(
        self,
        document: Document,
        tenant: str,
        version: Any,
        date_value: Any,
        status: str,
        metadata: dict | None,
        report: AddReport,
    ) -> _Prepared | None:
        source = document.source
        version = _metadata_str(version, "version", source)
        ts, date_text = _date_us(date_value, source)
        key = f"doc:{len(tenant)}:{tenant}:{len(source)}:{source}@{version}"
        meta = {
            "source": source,
            "version": version,
            "date": date_text,
            "status": status,
            "title": document.title,
            "format": document.format,
            "content_hash": document.content_hash,
            "metadata": metadata,
        }
        replaces = key in self.graph
        if replaces:
            old = self.graph.get_node(key, vector=False)["props"] or {}
            if old.get("complete") and all(old.get(name) == value for name, value in meta.items()):
                report.unchanged.append(source)
                return None
        chunks = _checked_chunks(call_hook(self.chunker, "chunker", document), document)
        prefixes = [
            check_text(
                call_hook(self.contextualizer, "contextualizer", document, chunk),
                "contextualizer",
                "a str (the chunk's prefix)",
            )
            for chunk in chunks
        ]
        extractions = []
        for chunk in chunks:
            value = call_hook(self.extractor, "extractor", chunk.text)
            extractions.append(None if value is None else check_extraction(value, "extractor"))
        return _Prepared(document, key, tenant, meta, ts, chunks, prefixes, extractions, replaces)

    def _write(self, prepared: list[_Prepared], report: AddReport, progress: bool) -> None:
        # 1. The entities: names proposed by enough chunks of the batch, or known already.
        min_mentions = int(getattr(self.extractor, "min_mentions", 1))
        proposed: dict = {}  # (tenant, normalised name) -> [count, Entity]
        from ..entities import normalize_name

        for one in prepared:
            for extraction in one.extractions:
                if extraction is None:
                    continue
                names = [(e.name, e) for e in extraction.entities]
                names += [(r.source, None) for r in extraction.relations] + [
                    (r.target, None) for r in extraction.relations
                ]
                seen = set()
                for name, entity in names:
                    norm = normalize_name(name)
                    if norm in seen:
                        continue
                    seen.add(norm)
                    slot = proposed.setdefault((one.tenant, norm), [0, entity, name])
                    slot[0] += 1
                    if slot[1] is None and entity is not None:
                        slot[1] = entity
        new_entities: dict = {}  # key -> (tenant, name, entity, [merge dicts])
        name_to_key: dict = {}  # (tenant, norm) -> key
        relation_ok = {
            (one.tenant, normalize_name(n))
            for one in prepared
            for x in one.extractions
            if x
            for r in x.relations
            for n in (r.source, r.target)
        }
        select = getattr(self.extractor, "select", None)
        selected: set | None = None
        if callable(select):  # the extractor judges its names over the whole batch
            selected = set()
            for t in {one.tenant for one in prepared}:
                texts = [c.text for one in prepared if one.tenant == t for c in one.chunks]
                offered = {
                    norm: (count, name, entity.type if entity is not None else "")
                    for (tt, norm), (count, entity, name) in proposed.items()
                    if tt == t
                }
                selected.update((t, norm) for norm in select(offered, texts))
        for (tenant, norm), (count, entity, name) in proposed.items():
            key, merge = self.resolver.resolve(tenant, name)
            if key is not None and key not in new_entities and key not in self.graph:
                key, merge = None, None  # an entity deleted since (a resolver without forget())
            if key is None:
                chosen = count >= min_mentions if selected is None else (tenant, norm) in selected
                if not chosen and (tenant, norm) not in relation_ok:
                    continue
                key = entity_key(tenant, name)
                new_entities[key] = (tenant, entity.name if entity else name, entity, [])
                self.resolver.add(tenant, key, [name])
            elif merge is not None:
                report.merges.append(merge)
                if key in new_entities:
                    new_entities[key][3].append(merge.to_dict())
            name_to_key[(tenant, norm)] = key
        for merge in report.merges:  # the merged spellings become aliases of their entity
            if merge.into not in new_entities:
                name_to_key[(merge.tenant, normalize_name(merge.name))] = merge.into
        for key, (tenant, name, _, merges) in new_entities.items():
            self._names.add(key, [name] + [m["name"] for m in merges], tenant=tenant)
        # 2. Per document: delete the old copy, write its nodes, then the edges.
        bar = _progress(len(prepared), "writing", progress)
        try:
            if new_entities:
                self._write_entities(new_entities)
            report.entities += len(new_entities)
            self._write_merges(report.merges, new_entities)
            mentioned: set = set()  # the entities the replaced chunks mentioned and no new one does
            for one in prepared:
                bar.update(1)
                self._write_document(one, name_to_key, report, mentioned)
            self._remove_orphans(mentioned, report)
        finally:
            bar.close()
        failures = getattr(self.extractor, "failures", None)
        if failures:
            report.extractor_failures.extend(failures)
        self._changed()

    def _write_entities(self, new_entities: dict) -> None:
        keys = list(new_entities)
        texts, props, tenants, alias_lists = [], [], [], []
        for key in keys:
            tenant, name, entity, merges = new_entities[key]
            kind = entity.type if entity is not None else ""
            description = entity.description if entity is not None else ""
            texts.append(f"{name}: {description}" if description else name)
            props.append(
                {"name": name, "type": kind, "description": description, "status": CURRENT, "merged": merges}
            )
            tenants.append(tenant)
            alias_lists.append([name] + [m["name"] for m in merges])
        vectors = self.embed([new_entities[k][1] for k in keys])
        self.graph.add_nodes(keys, vectors, labels=ENTITY, texts=texts, tenants=tenants, props=props)
        for key, aliases in zip(keys, alias_lists):
            self.graph.add_aliases(key, aliases)

    def _write_merges(self, merges: list, new_entities: dict) -> None:
        """Logs merges into entities that existed before this batch (props ``merged``, aliases)."""
        by_key: dict = {}
        for merge in merges:
            if merge.into not in new_entities:
                by_key.setdefault(merge.into, []).append(merge)
        for key, found in by_key.items():
            node = self.graph.get_node(key)
            props = merged_props(node["props"], [m.to_dict() for m in found])
            self.graph.update_nodes([key], props=[props])
            self.graph.add_aliases(key, [m.name for m in found])
            self._names.add(key, [m.name for m in found], tenant=node["tenant"])

    def _remove_orphans(self, mentioned: set, report: AddReport) -> None:
        """Deletes the entities of ``mentioned`` that no chunk mentions any more (with their
        relations; from the name matcher and the resolver too)."""
        g = self.graph
        orphans = sorted(
            key for key in mentioned if key in g and not g.neighbors(key, rels=[MENTIONS], direction="in")
        )
        if not orphans:
            return
        g.delete_nodes(orphans)
        self._names.forget(orphans)
        forget = getattr(self.resolver, "forget", None)
        if callable(forget):
            forget(orphans)
        report.entities_removed += len(orphans)

    def _write_document(self, one: _Prepared, name_to_key: dict, report: AddReport, mentioned: set) -> None:
        from ..entities import normalize_name

        g, doc, key, tenant = self.graph, one.document, one.key, one.tenant
        # What an earlier copy (or a write cut short by a crash) left of this document goes
        # first, its document node with it. The document node's ``complete`` is set last, after
        # every section, chunk and edge: until then, re-adding the file writes it again.
        old = [
            k
            for k in g.keys(where={"source": doc.source}, tenants=[tenant], labels=[SECTION, CHUNK])
            if isinstance(k, str) and k.startswith(key + "#")
        ]
        if one.replaces or old:
            for chunk_key in old:
                mentioned.update(edge.dst for edge in g.neighbors(chunk_key, rels=[MENTIONS]))
            g.delete_nodes([key] + old, missing_ok=True)
        (report.replaced if one.replaces else report.added).append(doc.source)
        meta = one.meta
        filt = {"status": meta["status"], "source": doc.source}
        section_ids = sorted({c.section for c in one.chunks})
        section_keys = {i: f"{key}#s{i}" for i in section_ids}
        section_texts = [" > ".join(doc.sections[i].heading_path) or doc.title for i in section_ids]
        chunk_keys = [f"{key}#c{j}" for j in range(len(one.chunks))]
        chunk_texts = [f"{p}\n\n{c.text}" if p else c.text for p, c in zip(one.prefixes, one.chunks)]
        vectors = self.embed([doc.title] + section_texts + chunk_texts)
        keys = [section_keys[i] for i in section_ids] + chunk_keys
        labels = [SECTION] * len(section_ids) + [CHUNK] * len(chunk_keys)
        texts = section_texts + chunk_texts
        props = [dict(filt, heading_path=list(doc.sections[i].heading_path), section=i) for i in section_ids]
        for j, (prefix, chunk) in enumerate(zip(one.prefixes, one.chunks)):
            props.append(
                dict(
                    filt,
                    version=meta["version"],
                    date=meta["date"],
                    title=doc.title,
                    heading_path=list(chunk.heading_path),
                    section=chunk.section,
                    index=j,
                    prefix=prefix,
                    body_start=len(prefix) + 2 if prefix else 0,
                    metadata=meta["metadata"],
                )
            )
        g.add_nodes(keys, vectors[1:], labels=labels, texts=texts, tenants=tenant, ts=one.ts, props=props)
        src, dst, rels, weights, edge_texts = [], [], [], [], []
        for i in section_ids:
            src.append(section_keys[i]), dst.append(key), rels.append(PART_OF)
        for j, chunk in enumerate(one.chunks):
            src.append(chunk_keys[j]), dst.append(section_keys[chunk.section]), rels.append(PART_OF)
            if j + 1 < len(chunk_keys):
                src.append(chunk_keys[j]), dst.append(chunk_keys[j + 1]), rels.append(NEXT)
        weights = [1.0] * len(src)
        edge_texts = [""] * len(src)
        mention_count = relation_count = 0
        described: dict = {}  # source entity -> {"<rel> <target key>": description}
        for j, (chunk, extraction) in enumerate(zip(one.chunks, one.extractions)):
            named: dict = {}
            if extraction is not None:
                for entity in extraction.entities:
                    hit = name_to_key.get((tenant, normalize_name(entity.name)))
                    if hit is not None:
                        named.setdefault(hit, None)
            for mention in self._names.mentions(chunk.text, [tenant]):
                for holder, _ in mention.holders:
                    named.setdefault(holder, None)
            for hit in list(named)[:MAX_MENTIONS_PER_CHUNK]:
                src.append(chunk_keys[j]), dst.append(hit), rels.append(MENTIONS)
                weights.append(1.0), edge_texts.append("")
                mention_count += 1
            if extraction is not None:
                for relation in extraction.relations:
                    a = name_to_key.get((tenant, normalize_name(relation.source)))
                    b = name_to_key.get((tenant, normalize_name(relation.target)))
                    if a is None or b is None or a == b:
                        continue
                    src.append(a), dst.append(b), rels.append(_rel_name(relation))
                    weights.append(float(relation.weight)), edge_texts.append(relation.description)
                    relation_count += 1
                    if relation.description:
                        described.setdefault(a, {})[f"{_rel_name(relation)} {b}"] = relation.description
        g.add_nodes(
            [key],
            vectors[:1],
            labels=DOCUMENT,
            texts=[doc.title],
            tenants=tenant,
            ts=one.ts,
            props=[dict(meta, **filt)],
        )
        g.add_edges(src, dst, rels=rels, weights=weights, texts=edge_texts)
        # an entity a new chunk mentions is no orphan: only the others are checked after the batch
        mentioned.difference_update(d for d, rel in zip(dst, rels) if rel == MENTIONS)
        for a, found in described.items():  # the descriptions, readable with the entity
            props = dict(g.get_node(a, vector=False)["props"] or {})
            props["relations"] = dict(props.get("relations") or {}, **found)
            g.update_nodes([a], props=[props])
        types = sorted({r for r in rels if r not in STRUCTURE_RELS})
        if types:  # the relation types local search walks over
            known = self.config().get("relation_types", [])
            if set(types) - set(known):
                self._set_config(relation_types=sorted(set(known) | set(types)))
        g.update_nodes([key], props=[dict(meta, complete=True, **filt)])  # the document is whole
        report.chunks += len(chunk_keys)
        report.mentions += mention_count
        report.relations += relation_count

    def set_status(self, source: str, status: str, *, version: Any = None, tenant: str = "") -> int:
        """Sets the ``status`` of a document (every version of ``source``, or one ``version``)
        and of its sections and chunks; returns the number of documents changed.

        Raises:
            NotFoundError: no document of that source (and version) in ``tenant``.
        """
        if not isinstance(status, str) or not status:
            raise TypeError(f"status must be a non-empty str, got {_got(status)}")
        if not isinstance(source, str):
            raise TypeError(f"source must be a str (a document's source), got {_got(source)}")
        docs = [
            k
            for k in self.graph.keys(labels=[DOCUMENT], tenants=[tenant], where={"source": source})
            if version is None or k.endswith("@" + _metadata_str(version, "version", source))
        ]
        if docs:
            self._note_status(status)
        if not docs:
            raise NotFoundError(
                f"no document of source {source!r}"
                f"{'' if version is None else f' version {version!r}'} in tenant {tenant!r}"
            )
        for doc in docs:
            parts = [
                k
                for k in self.graph.keys(labels=[SECTION, CHUNK], tenants=[tenant], where={"source": source})
                if k.startswith(doc + "#")
            ]
            keys = [doc] + parts
            props = []
            for k in keys:
                p = dict(self.graph.get_node(k, vector=False)["props"] or {})
                p["status"] = status
                props.append(p)
            self.graph.update_nodes(keys, props=props)
        self._changed()
        self._durable()
        return len(docs)

    def documents(self, *, tenant: str | None = None) -> list[dict]:
        """The documents' metadata (props of each document node, with its ``key``)."""
        out = []
        for key in self.graph.keys(labels=[DOCUMENT], tenants=None if tenant is None else [tenant]):
            out.append(dict(self.graph.get_node(key, vector=False)["props"] or {}, key=key))
        return out

    def stats(self) -> dict:
        """Node counts per label and the graph's edge count."""
        out = {label: len(self.graph.keys(labels=[label])) for label in LABELS}
        out["edges"] = self.graph.count_edges
        return out


def _source_name(path: Any) -> str:
    """A file's ``source``: its path normalised ("./a/../b.md" is "b.md"), relative to the
    working folder when it lies inside it, else absolute; so that one file given in two
    spellings is one document."""
    path = os.path.normpath(os.path.abspath(os.fspath(path)))
    here = os.getcwd()
    inside = os.path.commonpath([path, here]) == here if os.path.isabs(here) else False
    return os.path.relpath(path, here) if inside else path


def _checked_chunks(value: Any, document: Document) -> list:
    """The chunker hook's result checked: a list of chunks, each with a non-empty str ``text``,
    a ``section`` index into the document's sections and a ``heading_path``."""
    from .hooks import HookError

    if isinstance(value, (str, bytes)) or not isinstance(value, (list, tuple)):
        raise HookError(f"the chunker hook must return a list of Chunk, got {_got(value)}")
    if not value:
        raise InvalidArgumentError(f"{document.source} holds no text to chunk")
    for i, chunk in enumerate(value):
        text, section = getattr(chunk, "text", None), getattr(chunk, "section", None)
        if not isinstance(text, str) or not text.strip():
            raise HookError(
                f"the chunker hook returned chunks[{i}] without text (a Chunk with a non-empty "
                f"str text was expected), got {_got(chunk)}"
            )
        if (
            isinstance(section, bool)
            or not isinstance(section, int)
            or not 0 <= section < len(document.sections)
        ):
            raise HookError(
                f"the chunker hook returned chunks[{i}] with section {section!r}; expected an index "
                f"into the document's {len(document.sections)} sections"
            )
        if not isinstance(getattr(chunk, "heading_path", None), (tuple, list)):
            raise HookError(
                f"the chunker hook returned chunks[{i}] without a heading_path tuple, got {_got(chunk)}"
            )
    return list(value)


def _rel_name(relation: Relation) -> str:
    name = "_".join(relation.type.strip().casefold().split()) or "related_to"
    return "relation" if name in STRUCTURE_RELS else name


def _progress(total: int, what: str, enabled: bool) -> Any:
    if enabled:
        try:
            from tqdm.auto import tqdm

            return tqdm(total=total, desc=what, unit="doc", leave=False)
        except ImportError:
            pass
    return _NoBar()


class _NoBar:
    def update(self, n: int) -> None:
        pass

    def close(self) -> None:
        pass
