"""The memory store: :class:`Memory`, written against :class:`vecgraph.Graph`'s public API.

Layout of the graph a store keeps (one folder; the engine's filters do the work):

- a **memory** is a node: key ``m-<16 hex>`` (its id), label = its kind, tenant = the user,
  ts = ``at`` (when it was said or happened, microseconds), text, a vector of the text, and
  props: ``source``, ``session``, ``recorded_at``, ``mentions`` (entity names), the version
  links ``supersedes`` / ``superseded_by``, ``origin`` / ``confirmed_at`` for a confirmed
  inference, and five filterable columns the engine keeps typed and checks inside every
  channel (seed index, traversal, BM25, entity): ``source`` (str), ``valid_to`` (when it was
  superseded; 2**63-1 while current), ``expires_at`` (``at`` + its kind's TTL; 2**63-1 for
  never), ``span_start`` = ``span_end`` = ``at``;
- an **entity** is a node per user and name (key ``ent:<len(user)>:<user>:<name>``, label
  ``~entity``, the name as its alias, no text, a random unit vector seeded by its key: a hub
  for walks, not an answer), linked from each memory that mentions it by a ``mentions``
  edge; its filterable columns admit every recall (``source`` "entity", ``span_start`` /
  ``span_end`` at the int64 ends), so that a walk passes through it from one memory to
  another: the graph channel's multi-session association;
- a newer version links to the one it replaces by a ``supersedes`` edge;
- a user's **card** is a node ``card:<user>`` (label ``~card``, its JSON as text, no
  ``source``: no recall admits it); the **TTL policy** is the node ``~memory-policy`` and a
  pending erasure the node ``~memory-erasure`` (both of tenant ``""``).

Everything of a user is in their tenant, so :meth:`Memory.forget` is one ``delete_tenant``
plus a rewrite of the folder's history (:meth:`vecgraph.Graph.checkpoint` with
``keep_history=False``).
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import re
import secrets
import threading
import time
import warnings
from datetime import datetime, timedelta, timezone
from typing import Any, Callable, Iterable, Optional, Sequence

import numpy as np

from .. import storage
from ..entities import normalize_name
from ..errors import DimensionMismatchError, InvalidArgumentError, NotFoundError, _got
from ..rerankers import check_reranker, rerank
from .card import default_summarizer, default_token_counter
from .entities import default_extractor
from .erasure import ErasureReceipt, scan_folder
from .results import MemoryHit, Recall
from .values import (_MAX_US, _US, OPEN, SOURCES, _entity_key, _kind, _kinds, _props, _source, _text, _ttl_us, _user,
                     from_us, to_us)

_INT64_MIN = -(2**63)
FACT_SOURCES = ("user", "tool", "document")  # what recall and the card admit by default
ENTITY_LABEL, CARD_LABEL, POLICY_LABEL, ERASURE_LABEL = "~entity", "~card", "~policy", "~erasure"
POLICY_KEY, ERASURE_KEY = "~memory-policy", "~memory-erasure"
MENTIONS, SUPERSEDES = "mentions", "supersedes"
FILTERABLE = {"source": "str", "valid_to": "timestamp", "expires_at": "timestamp", "span_start": "timestamp",
              "span_end": "timestamp"}
RECALL_CHANNELS = ("dense", "bm25", "graph")

# The fusion weights of recall (convex fusion, see vecgraph.hybrid), chosen on the dev half of
# bench/data/memory_dialogues.json (bench/bench_memory_quality.py): level-1 recall in the top 5
# 46/53 with the graph's defaults (vecgraph.hybrid.DEFAULT_WEIGHTS["convex"]: bm25 1, graph
# 0.25), 49/53 with bm25 0.5 and graph 0.1 (a common word matched by BM25 weighs less, and so
# do memories reached only through a shared entity), level-2 association unchanged (12/12).
RECALL_WEIGHTS = {"dense": 1.0, "bm25": 0.5, "graph": 0.1, "entity": 4.0}
_MEMORY_ID = re.compile(r"m-[0-9a-f]{16}\Z")


def _random_unit_rows(keys: list, dim: int) -> np.ndarray:
    """(len(keys), dim) float32 unit vectors drawn from a generator seeded by each key."""
    out = np.empty((len(keys), dim), np.float32)
    for i, key in enumerate(keys):
        seed = int.from_bytes(hashlib.blake2b(key.encode("utf-8"), digest_size=8).digest(), "little")
        row = np.random.default_rng(seed).standard_normal(dim)
        out[i] = row / np.linalg.norm(row)
    return out


def _newer_first(hits: list) -> list:
    """``hits`` with each superseded memory moved to just after the newest version of its chain
    that is also among them (the current version first); the others keep their order."""
    by_id = {hit.id: hit for hit in hits}

    def newest(hit: MemoryHit) -> MemoryHit:
        seen = {hit.id}
        while hit.superseded_by in by_id and hit.superseded_by not in seen:
            hit = by_id[hit.superseded_by]
            seen.add(hit.id)
        return hit

    heads = {hit.id: newest(hit).id for hit in hits}
    out: list = []
    for hit in hits:
        if heads[hit.id] != hit.id:
            continue  # placed after its newest version below
        out.append(hit)
        older = [h for h in hits if h.id != hit.id and heads[h.id] == hit.id]
        out.extend(sorted(older, key=lambda h: h.at, reverse=True))
    return out


class Memory:
    """Long-term memory for agents: per-user memories with versions, expiry and provenance,
    an overview card per user, recall fusing the dense, BM25 and graph channels (the graph
    channel walking from the entities a question names), and verified erasure.

    Open one with :meth:`open`; see :mod:`vecgraph.memory` and :mod:`vecgraph.memory.store`
    for the layout. Methods are thread-safe (writes are serialised by a lock; recalls run
    beside them and see every write that returned).
    """

    def __init__(self, graph: Any, embedder: Any, *, ttl: dict, strict_kinds: bool, card_tokens: int,
                 summarizer: Callable, extract_entities: Callable, count_tokens: Callable,
                 sync_each_call: bool = False) -> None:
        self.graph = graph
        self._sync_each_call = sync_each_call
        self.embedder = embedder
        self._ttl = ttl
        self.strict_kinds = strict_kinds
        self.card_tokens = card_tokens
        self.summarizer = summarizer
        self.extract_entities = extract_entities
        self.count_tokens = count_tokens
        self._lock = threading.RLock()
        self._neutral = None  # a unit vector for the nodes no search ranks (policy, erasure marker)
        #: Called with the name of each step of forget() as it ends (crash tests set it).
        self._after_step: Optional[Callable[[str], None]] = None

    # -------------------------------------------------------------- opening

    @classmethod
    def open(
        cls,
        path: Optional[str],
        *,
        embedder: Any = "auto",
        ttl: Optional[dict] = None,
        strict_kinds: bool = False,
        card_tokens: int = 2000,
        summarizer: Optional[Callable] = None,
        extract_entities: Optional[Callable] = None,
        count_tokens: Optional[Callable[[str], int]] = None,
        sync: str = "always",
        read_only: bool = False,
    ) -> "Memory":
        """Open the memory store in folder ``path``, creating it or recovering it (a crash
        during :meth:`forget` is finished here: see there). ``path=None``: in memory.

        Args:
            path: a folder (str or path), or None.
            embedder: "auto" (the default: the embedder an existing store records, loaded by
                name as :meth:`vecgraph.Graph.query_embedder` loads it; "wordllama" for a new
                store), "wordllama" (offline, 256-d), a spec for
                :func:`vecgraph.embedders.load`, or an embedder object (``name``, ``dim``,
                ``__call__(texts) -> (n, dim)``); recorded in the folder, and checked on reopen.
                None opens an existing folder without one: everything but :meth:`remember`,
                :meth:`infer` and :meth:`recall` works (forget, expire, cards, history).
            ttl: {kind: timedelta, seconds or None (never)}: how long memories of each kind
                stay recallable after their ``at``. Merged into the policy the folder holds
                (None: keep it). Kinds not named never expire (with ``strict_kinds`` they are
                refused).
            strict_kinds: refuse kinds the policy does not name (kept in the folder: once a store
                is strict, it stays strict).
            card_tokens: the card's budget in tokens (int >= 100; an empty card takes about 85).
            summarizer: builds a card, see :func:`vecgraph.memory.default_summarizer`.
            extract_entities: ``(text) -> list[str]`` of the names a memory mentions (default
                :func:`vecgraph.memory.default_extractor`; an LLM call plugs in here).
            count_tokens: ``(str) -> int`` (default: the Llama 2 tokenizer wordllama ships).
            sync: the WAL's fsync policy (see :meth:`vecgraph.Graph.open`). With "always"
                (the default) every call that writes returns once its writes are durable, with
                one fsync for all of them (the graph itself runs with "off", and the store syncs
                it at the end of each call: a write made directly to ``mem.graph`` is durable
                at the next call of the store, ``mem.graph.sync()`` or ``close()``).
            read_only: open the folder to read (see :meth:`vecgraph.Graph.open`: many readers
                at once, while no process holds it open for writing): recall, cards (built,
                not stored), history; writes raise ReadOnlyError, ``ttl`` must be None.

        Raises:
            InvalidArgumentError: a negative or zero TTL, a bad kind, card_tokens < 100.
            TypeError: arguments of the wrong type. And as :meth:`vecgraph.Graph.open`.
        """
        from .. import embedders as embedder_module
        from ..graph import Graph

        if not isinstance(read_only, bool):
            raise TypeError(f"read_only must be a bool, got {_got(read_only)}")
        recorded_embedder = False  # "auto" on a folder that holds a store: its embedder, after the open
        if isinstance(embedder, str) and embedder == "auto":
            recorded_embedder = path is not None and os.path.exists(os.path.join(os.fspath(path), storage.MANIFEST))
            embedder = None if recorded_embedder else "wordllama"
        if embedder is None:
            if path is None:
                raise InvalidArgumentError("an in-memory store needs an embedder (embedder=None opens a folder)")
        else:
            if isinstance(embedder, str):
                embedder = embedder_module.load(embedder)
            embedder = embedder_module.check_embedder(embedder)
        policy_in = {}
        if ttl is not None:
            if not isinstance(ttl, dict):
                raise TypeError(f"ttl must be a dict {{kind: timedelta or None}}, got {_got(ttl)}")
            policy_in = {_kind(kind): _ttl_us(value, kind) for kind, value in ttl.items()}
            if read_only:
                raise InvalidArgumentError("ttl= changes the folder's TTL policy: open the store read-write")
        if isinstance(card_tokens, bool) or not isinstance(card_tokens, int):
            raise TypeError(f"card_tokens must be an int, got {_got(card_tokens)}")
        if card_tokens < 100:
            raise InvalidArgumentError(f"card_tokens must be >= 100 (an empty card takes about 85), got {card_tokens}")
        if not isinstance(strict_kinds, bool):
            raise TypeError(f"strict_kinds must be a bool, got {_got(strict_kinds)}")
        for name, hook in (("summarizer", summarizer), ("extract_entities", extract_entities),
                           ("count_tokens", count_tokens)):
            if hook is not None and not callable(hook):
                raise TypeError(f"{name} must be callable, got {_got(hook)}")
        dim = None if embedder is None else int(embedder.dim)
        if path is None:
            graph = Graph(dim, "cos", filterable=FILTERABLE)
        else:
            try:
                if embedder is None and not os.path.exists(os.path.join(os.fspath(path), storage.MANIFEST)):
                    raise InvalidArgumentError(f"{path} holds no memory store; creating one needs an embedder")
                graph = Graph.open(path, dim, None if dim is None else "cos", filterable=FILTERABLE,
                                   sync="off" if sync == "always" else sync, read_only=read_only)
            except InvalidArgumentError as exc:
                if "filterable" not in str(exc):
                    raise
                raise InvalidArgumentError(f"{path} holds a vecgraph graph that is not a memory store (a memory "
                                           f"store is created by Memory.open in a new folder): {exc}") from exc
            except DimensionMismatchError as exc:
                raise DimensionMismatchError(f"{exc}; a memory store keeps the vectors of the embedder it "
                                             f"was created with (embedder {embedder.name!r} makes {dim}-d vectors), "
                                             "or the folder is not a memory store") from exc
            missing = {n: t for n, t in FILTERABLE.items() if graph.filterable.get(n) != t}
            if missing:
                graph.close()
                raise InvalidArgumentError(
                    f"{path} holds a graph that is not a memory store (it lacks the filterable properties "
                    f"{', '.join(missing)})")
        try:
            if recorded_embedder and graph.embedder is not None:
                try:
                    embedder = graph.query_embedder()
                except InvalidArgumentError as exc:
                    raise InvalidArgumentError(f"{exc}; or pass Memory.open(..., embedder=) the store's embedder, or "
                                               "embedder=None to open it without one") from None
            if embedder is not None and not (graph.read_only and graph.embedder is None):
                graph.use_embedder(embedder)  # records it, or checks it against the folder's
            store = cls(graph, embedder, ttl={}, strict_kinds=strict_kinds, card_tokens=card_tokens,
                        summarizer=summarizer or default_summarizer,
                        extract_entities=extract_entities or default_extractor,
                        count_tokens=count_tokens or default_token_counter,
                        sync_each_call=sync == "always" and path is not None and not read_only)
            store._load_policy(policy_in, strict_kinds)
            store._finish_erasure()
        except BaseException:
            graph.close()
            raise
        return store

    def close(self) -> None:
        """Close the graph (syncing the WAL)."""
        self.graph.close()

    def __enter__(self) -> "Memory":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        name = None if self.embedder is None else self.embedder.name
        return f"Memory({self.graph.path!r}, embedder={name!r}, nodes={len(self.graph)})"

    # -------------------------------------------------------------- policy

    def _durable(self) -> None:
        """Under sync="always": one fsync for every write the call made (see :meth:`open`)."""
        if self._sync_each_call:
            self.graph.sync()

    def _neutral_vector(self) -> np.ndarray:
        if self._neutral is None:
            self._neutral = np.full((1, self.graph.dim), 1.0 / math.sqrt(self.graph.dim), np.float32)
        return self._neutral

    def _put_system(self, key: str, label: str, props: dict) -> None:
        self.graph.upsert_nodes([key], self._neutral_vector(), labels=label, texts=[""], props=[props])

    def _load_policy(self, policy_in: dict, strict: bool) -> None:
        stored = {"ttl_us": {}, "strict_kinds": False}
        if POLICY_KEY in self.graph:
            stored = _props(self.graph.get_node(POLICY_KEY, vector=False))
        ttl = dict(stored["ttl_us"])
        changed = {kind: us for kind, us in policy_in.items() if ttl.get(kind, "absent") != us}
        ttl.update(policy_in)
        strict = bool(strict or stored.get("strict_kinds"))
        self._ttl = ttl
        self.strict_kinds = strict
        if changed or strict != stored.get("strict_kinds") or POLICY_KEY not in self.graph:
            if not self.graph.read_only:
                self._put_system(POLICY_KEY, POLICY_LABEL, {"ttl_us": ttl, "strict_kinds": strict})
                for kind in changed:
                    self._restamp_expiry(kind)
                self._durable()

    @property
    def ttl(self) -> dict:
        """The TTL policy: {kind: timedelta or None (never)}."""
        return {kind: None if us is None else timedelta(microseconds=us) for kind, us in self._ttl.items()}

    def set_ttl(self, kind: str, ttl: Any) -> int:
        """Change the TTL of ``kind`` (a timedelta, seconds, or None: never), durably. Memories
        of that kind already stored take the new expiry at once (their ``expires_at`` columns
        are rewritten in one batch).

        Returns:
            The number of memories of ``kind`` whose expiry was computed again.

        Raises:
            InvalidArgumentError: a TTL <= 0, a reserved kind. TypeError: wrong types.
        """
        kind = _kind(kind)
        us = _ttl_us(ttl, kind)
        with self._lock:
            self._ttl[kind] = us
            self._put_system(POLICY_KEY, POLICY_LABEL, {"ttl_us": self._ttl, "strict_kinds": self.strict_kinds})
            count = self._restamp_expiry(kind)
            self._durable()
            return count

    def _expiry(self, kind: str, at_us: int) -> int:
        us = self._ttl.get(kind)
        return OPEN if us is None or at_us + us > _MAX_US else at_us + us

    def _restamp_expiry(self, kind: str) -> int:
        keys = self.graph.keys(labels=[kind], where={"source": list(SOURCES)})
        if not keys:
            return 0
        nodes = [self.graph.get_node(key, vector=False) for key in keys]
        props = []
        for node in nodes:
            p = _props(node)
            p["expires_at"] = self._expiry(kind, node["ts"])
            props.append(p)
        self.graph.update_nodes(keys, props=props)
        return len(keys)

    # -------------------------------------------------------------- writing

    def _embed(self, texts: list) -> np.ndarray:
        from ..embedders import embed

        if self.embedder is None:
            raise InvalidArgumentError("this store was opened without an embedder (embedder=None): remember and "
                                       "recall need one")
        return embed(self.embedder, texts)

    def _memory_node(self, memory_id: str, what: str = "memory") -> dict:
        if not isinstance(memory_id, str):
            raise TypeError(f"{what} must be a memory id (str), got {_got(memory_id)}")
        if not _MEMORY_ID.match(memory_id) or memory_id not in self.graph:
            raise NotFoundError(f"{what} {memory_id!r} is not a memory of this store")
        return self.graph.get_node(memory_id, vector=False)

    def remember(
        self,
        user: str,
        text: str,
        *,
        kind: str = "fact",
        source: str = "user",
        session: Optional[str] = None,
        at: Any = None,
        supersedes: Optional[str] = None,
        entities: Optional[Sequence[str]] = None,
    ) -> str:
        """Store one memory of ``user``; it is recallable by the next call.

        Args:
            user: the user id (non-empty str; the graph's tenant).
            text: what to remember (non-empty after stripping whitespace).
            kind: its kind (the policy's TTL applies; e.g. "profile", "preference",
                "project", "fact").
            source: "user" (said by the user), "tool", "document", or "model" (an inference:
                see :meth:`infer`).
            session: the session it came from (str or None).
            at: when it was said or happened (datetime, naive = UTC; date; ISO 8601 str; int
                microseconds); default now.
            supersedes: the id of the memory this one replaces: that one's validity interval
                closes at ``at`` and it leaves recall (kept for :meth:`history`), linked by a
                ``supersedes`` edge. It must be the user's and current.
            entities: the names it mentions (default: ``extract_entities(text)``); each
                becomes (or links to) an entity node of the user. The kind is always one.

        Returns:
            The memory's id (str, ``m-`` and 16 hex digits).

        Raises:
            TypeError: user, text, kind or session of the wrong type.
            InvalidArgumentError: empty text, an unknown source, a reserved kind, an unknown
                kind with ``strict_kinds``, an unparseable ``at``, superseding a memory already
                superseded or from after ``at``.
            NotFoundError: ``supersedes`` names no memory of this user.
            ReadOnlyError, StorageError: as :meth:`vecgraph.Graph.add_nodes`.
        Nothing is written when an error is raised before the writes (every check above).
        """
        user = _user(user)
        text = _text(text)
        kind = _kind(kind)
        source = _source(source)
        if self.strict_kinds and kind not in self._ttl:
            raise InvalidArgumentError(f"kind {kind!r} is not in the TTL policy (strict_kinds): known kinds are "
                                       f"{', '.join(map(repr, sorted(self._ttl))) or 'none'}")
        if session is not None and not isinstance(session, str):
            raise TypeError(f"session must be a str or None, got {_got(session)}")
        now_us = to_us(datetime.now(timezone.utc), "now")
        at_us = now_us if at is None else to_us(at, "at")
        if at_us > now_us + 60 * _US:
            warnings.warn(f"at ({from_us(at_us).isoformat()}) is in the future: recall leaves this memory out until "
                          "then (a naive datetime is read as UTC; datetime.now() is local time, "
                          "datetime.now(timezone.utc) is not)", RuntimeWarning, stacklevel=2)
        if entities is None:
            names = self.extract_entities(text)
            if not isinstance(names, (list, tuple)) or not all(isinstance(n, str) for n in names):
                raise TypeError(f"extract_entities must return a list of str, returned {_got(names)}")
        else:
            if isinstance(entities, str) or not all(isinstance(n, str) for n in entities):
                raise TypeError(f"entities must be a list of str, got {_got(entities)}")
            names = list(entities)
        with self._lock:
            old = None
            if supersedes is not None:
                old = self._memory_node(supersedes, "supersedes")
                if old["tenant"] != user:
                    raise NotFoundError(f"supersedes {supersedes!r} is not a memory of user {user!r}")
                old_props = _props(old)
                if old_props.get("superseded_by"):
                    raise InvalidArgumentError(f"memory {supersedes!r} is already superseded by "
                                               f"{old_props['superseded_by']!r}; supersede that one")
                if at_us < old["ts"]:
                    raise InvalidArgumentError(f"at ({from_us(at_us).isoformat()}) is before the memory it "
                                               f"supersedes ({from_us(old['ts']).isoformat()})")
            entity_keys: dict = {}
            for name in list(names) + [kind]:
                name = name.strip()
                normal = normalize_name(name)
                if normal and normal not in entity_keys:
                    entity_keys[normal] = (_entity_key(user, normal), name)
            new_entities = [(key, name) for key, name in entity_keys.values() if key not in self.graph]
            memory_id = "m-" + secrets.token_hex(8)
            # Entity nodes are hubs for the graph channel's walks, not answers: their vectors are
            # random (near-orthogonal to every text's), so the dense channel does not rank them
            # among memories, and the HNSW index gets no run of identical vectors.
            vectors = np.concatenate([self._embed([text]), _random_unit_rows([key for key, _ in new_entities],
                                                                            self.graph.dim)])
            props = {"source": source, "session": session, "recorded_at": now_us,
                     "mentions": [name for _, name in entity_keys.values()],
                     "valid_to": OPEN, "expires_at": self._expiry(kind, at_us), "span_start": at_us, "span_end": at_us}
            if old is not None:
                props["supersedes"] = supersedes
            entity_props = {"source": "entity", "valid_to": OPEN, "expires_at": OPEN, "span_start": _INT64_MIN,
                            "span_end": OPEN}
            keys = [memory_id] + [key for key, _ in new_entities]
            labels = [kind] + [ENTITY_LABEL] * len(new_entities)
            stamps = [at_us] + [0] * len(new_entities)
            texts = [text] + [""] * len(new_entities)
            rows = [props] + [dict(entity_props, name=name) for _, name in new_entities]
            if old is not None:
                # The new memory, its new entities and the old memory's closed interval are one
                # logged write (an upsert of all of them): after a crash either the new version
                # is there and the old one closed, or neither changed. The old node keeps its
                # int8 vector (quantizing its dequantized vector gives the same codes).
                old_props.update(valid_to=at_us, superseded_by=memory_id)
                keys.append(supersedes)
                vectors = np.concatenate([vectors, self.graph.get_node(supersedes)["vector"][None, :]])
                labels.append(old["label"])
                stamps.append(old["ts"])
                texts.append(old["text"])
                rows.append(old_props)
            write = self.graph.add_nodes if old is None else self.graph.upsert_nodes
            write(keys, vectors, labels=labels, tenants=user, ts=stamps, texts=texts, props=rows)
            # Then the entities' names and the edges (a crash before them leaves the memory
            # without its mentions edges: found by dense and BM25, not through its entities).
            for key, name in new_entities:
                self.graph.add_aliases(key, [name])
            src = [memory_id] * len(entity_keys)
            dst = [key for key, _ in entity_keys.values()]
            rels = [MENTIONS] * len(entity_keys)
            if old is not None:
                src.append(memory_id)
                dst.append(supersedes)
                rels.append(SUPERSEDES)
            if src:
                self.graph.add_edges(src, dst, rels=rels, ts=at_us)
            self._durable()
        return memory_id

    def infer(self, user: str, text: str, **kwargs: Any) -> str:
        """:meth:`remember` with ``source="model"``: a model's guess, not a fact. Recall leaves it
        out unless ``include_inferred=True``; the card never holds it; :meth:`confirm` makes it
        a fact."""
        if "source" in kwargs:
            raise TypeError("infer() sets source='model'; use remember() for another source")
        return self.remember(user, text, source="model", **kwargs)

    def confirm(self, memory_id: str, *, source: str = "user") -> MemoryHit:
        """Promote an inference to a fact (the user confirmed it). Its provenance stays:
        ``origin`` becomes "model" and ``confirmed_at`` the time of confirmation.

        Raises:
            NotFoundError: no such memory. InvalidArgumentError: it is not an inference
                (``source`` is not "model"), or ``source`` is "model".
        """
        source = _source(source)
        if source == "model":
            raise InvalidArgumentError("confirm() makes an inference a fact: source must be 'user', 'tool' or 'document'")
        with self._lock:
            node = self._memory_node(memory_id, "memory_id")
            props = _props(node)
            if props.get("source") != "model":
                raise InvalidArgumentError(f"memory {memory_id!r} is not an inference (its source is "
                                           f"{props.get('source')!r}); only source='model' memories are confirmed")
            props.update(source=source, origin="model", confirmed_at=to_us(datetime.now(timezone.utc), "now"))
            self.graph.update_nodes([memory_id], props=[props])
            self._durable()
            return MemoryHit(self.graph.get_node(memory_id, vector=False))

    # -------------------------------------------------------------- reading

    def _now_us(self, now: Any) -> int:
        return to_us(datetime.now(timezone.utc) if now is None else now, "now")

    def _conditions(self, now_us: int, *, since: Any, until: Any, include_superseded: bool,
                    include_inferred: bool, with_entities: bool) -> dict:
        sources = list(SOURCES if include_inferred else FACT_SOURCES)
        if with_entities:
            sources.append("entity")
        where: dict = {"source": sources, "expires_at": {">": now_us}}
        if not include_superseded:
            where["valid_to"] = {">": now_us}
        until_us = None if until is None else to_us(until, "until")
        since_us = None if since is None else to_us(since, "since")
        if since_us is not None and until_us is not None and since_us > until_us:
            raise InvalidArgumentError(f"since ({from_us(since_us).isoformat()}) is after until "
                                       f"({from_us(until_us).isoformat()}): an empty window")
        where["span_start"] = {"<=": now_us if until_us is None else min(now_us, until_us)}
        if since_us is not None:
            where["span_end"] = {">=": since_us}
        return where

    def recall(
        self,
        user: str,
        query: str,
        k: int = 5,
        *,
        now: Any = None,
        since: Any = None,
        until: Any = None,
        kinds: Optional[Sequence[str]] = None,
        include_superseded: bool = False,
        include_inferred: bool = False,
        channels: Sequence[str] = ("dense", "bm25", "graph"),
        weights: Optional[dict] = None,
        reranker: Optional[Callable[[str, list], Any]] = None,
        rerank_depth: Optional[int] = None,
    ) -> Recall:
        """The ``k`` memories of ``user`` that best answer ``query``.

        One :meth:`vecgraph.Graph.hybrid_search` within the user's tenant: dense (the query's
        embedding against each memory's), bm25 (the query's words), and graph (walks of up to 2
        hops over ``mentions`` edges from the entities the query names and from the nearest
        memories: what was said about the same thing in other sessions), fused by the graph's
        default fusion. Validity, expiry, provenance and the time window are conditions on the
        engine's filterable columns, applied inside every channel, so up to ``k`` admitted
        memories come back however many are filtered out.

        Args:
            user: the user id. query: the question (non-empty str). k: memories wanted (1..1000).
            now: the time validity and expiry are judged at (default: now): a memory counts if
                ``at <= now``, it was not superseded by ``now`` and ``at + ttl > now``.
            since, until: only memories whose ``at`` is in [since, until] (both included).
            kinds: only these kinds (None: all).
            include_superseded: also versions replaced by ``now`` (still not expired ones), each
                right after the newest version of its chain that is returned too.
            include_inferred: also inferences (``source="model"``).
            channels: a subset of :data:`RECALL_CHANNELS` ("dense", "bm25", "graph"; the
                entity channel feeds the graph channel's walks).
            weights: {channel: weight} for the fusion (default :data:`RECALL_WEIGHTS`; see
                :meth:`vecgraph.Graph.hybrid_search`).
            reranker: ``(query, texts) -> scores`` (see :meth:`vecgraph.Graph.hybrid_search`),
                called once on the texts of the fused top ``rerank_depth`` memories; they are
                reordered by its scores (ties: fused order), each scored by it.
            rerank_depth: memories the reranker sees (>= k; default max(k, 20)).

        Returns:
            :class:`Recall`: :class:`MemoryHit` items, best first, with ``to_context()``.

        Raises:
            TypeError / InvalidArgumentError: bad arguments (an unparseable time, k out of range).
        """
        user = _user(user)
        query = _text(query, "query")
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"k must be an int, got {_got(k)}")
        k = int(k)
        if not 1 <= k <= 1000:
            raise InvalidArgumentError(f"k must be in [1, 1000], got {k}")
        for name, flag in (("include_superseded", include_superseded), ("include_inferred", include_inferred)):
            if not isinstance(flag, bool):
                raise TypeError(f"{name} must be a bool, got {_got(flag)}")
        if isinstance(channels, str) or not isinstance(channels, Iterable):
            raise TypeError(f"channels must be a list of channel names, got {_got(channels)}")
        channels = tuple(channels)
        unknown = [c for c in channels if c not in RECALL_CHANNELS]
        if unknown or not channels:
            raise InvalidArgumentError(f"channels must be names from {RECALL_CHANNELS} (the entity channel ranks entity "
                                       f"nodes, not memories: it feeds the graph channel's walks), got {list(channels)!r}")
        depth = k
        if reranker is not None:
            reranker = check_reranker(reranker)
            depth = max(k, 20) if rerank_depth is None else rerank_depth
            if isinstance(depth, bool) or not isinstance(depth, (int, np.integer)) or not k <= depth <= 1000:
                raise InvalidArgumentError(f"rerank_depth must be an int in [k, 1000] (k = {k}), got {rerank_depth!r}")
            depth = int(depth)
        elif rerank_depth is not None:
            raise InvalidArgumentError("rerank_depth is the reranker's depth: pass reranker= with it")
        labels = None if kinds is None else _kinds(kinds) + [ENTITY_LABEL]
        where = self._conditions(self._now_us(now), since=since, until=until, include_superseded=include_superseded,
                                 include_inferred=include_inferred, with_entities=True)
        vector = self._embed([query])[0]
        # Entity nodes pass the filters (walks go through them) and so can fill places of the
        # fused list: it is asked again, four times longer, until it holds k memories or ends.
        want = depth + 10
        while True:
            result = self.graph.hybrid_search(query, vector, k=want, channels=channels, tenants=[user],
                                              labels=labels, where=where, entity_keys=False, hops=2,
                                              weights=RECALL_WEIGHTS if weights is None else weights)
            hits = []
            for hit in result.hits:
                if isinstance(hit.key, str) and hit.key.startswith("m-"):
                    node = self._node_or_none(hit.key)
                    if node is not None:  # None: deleted since the search (a forget, an expire)
                        hits.append(MemoryHit(node, hit.score, hit.ranks))
                        if len(hits) == depth:
                            break
            if len(hits) == depth or len(result.hits) < want or want >= 4000:
                if reranker is not None and hits:
                    order, scores = rerank(query, range(len(hits)), [h.text for h in hits], reranker, len(hits))
                    for i, score in zip(order, scores):
                        hits[i].score, hits[i].ranks = float(score), dict(hits[i].ranks, fused=i + 1)
                    hits = [hits[i] for i in order[:k]]
                return Recall(_newer_first(hits) if include_superseded else hits, self.count_tokens)
            want *= 4

    def _node_or_none(self, key: str) -> Optional[dict]:
        try:
            return self.graph.get_node(key, vector=False)
        except NotFoundError:
            return None

    def recall_memory(self, user: str, query: str, time_range: Any = None) -> list:
        """Search a user's long-term memory for what answers a question (a tool for an agent).

        Args:
            user: the id of the user whose memories to search.
            query: the question, in natural language.
            time_range: optional {"since": ISO 8601, "until": ISO 8601} (either may be left
                out), or [since, until]: only memories said or done in that window.

        Returns:
            Up to 5 memories, best first, each {"id", "text", "kind", "source", "at"} (at: ISO 8601).
        """
        since = until = None
        if time_range is not None:
            if isinstance(time_range, dict):
                unknown = set(time_range) - {"since", "until"}
                if unknown:
                    raise InvalidArgumentError(f"time_range takes 'since' and 'until', got {sorted(unknown)}")
                since, until = time_range.get("since"), time_range.get("until")
            elif isinstance(time_range, (list, tuple)) and len(time_range) == 2:
                since, until = time_range
            else:
                raise TypeError(f"time_range must be {{'since': ..., 'until': ...}} or [since, until], got "
                                f"{_got(time_range)}")
        hits = self.recall(user, query, 5, since=since, until=until)
        return [{"id": h.id, "text": h.text, "kind": h.kind, "source": h.source, "at": h.at.isoformat()}
                for h in hits]

    def memories(self, user: str, *, now: Any = None, include_superseded: bool = False,
                 include_inferred: bool = False, kinds: Optional[Sequence[str]] = None) -> list:
        """Every memory of ``user`` that recall could return at ``now`` (same conditions), in
        the order they were stored (a list of :class:`MemoryHit`, score 0)."""
        user = _user(user)
        where = self._conditions(self._now_us(now), since=None, until=None, include_superseded=include_superseded,
                                 include_inferred=include_inferred, with_entities=False)
        labels = None if kinds is None else _kinds(kinds)
        nodes = (self._node_or_none(key) for key in self.graph.keys(tenants=[user], labels=labels, where=where))
        return [MemoryHit(node) for node in nodes if node is not None]  # None: deleted meanwhile

    def history(self, memory_id: str) -> list:
        """The version chain ``memory_id`` belongs to, oldest first (a list of
        :class:`MemoryHit` with ``at``, ``recorded_at``, ``valid_to``, ``source``).

        Raises:
            NotFoundError: no such memory (or it was deleted by expiry or erasure).
        """
        node = self._memory_node(memory_id, "memory_id")
        first = node
        seen = {node["key"]}
        while True:
            previous = _props(first).get("supersedes")
            if not previous or previous in seen or previous not in self.graph:
                break
            seen.add(previous)
            first = self.graph.get_node(previous, vector=False)
        chain = [MemoryHit(first)]
        while chain[-1].superseded_by and chain[-1].superseded_by in self.graph and len(chain) <= len(seen) + 10_000:
            chain.append(MemoryHit(self.graph.get_node(chain[-1].superseded_by, vector=False)))
        return chain

    # -------------------------------------------------------------- layer 1: the card

    def card(self, user: str, *, refresh: bool = False, now: Any = None) -> dict:
        """The user's overview card (layer 1): a JSON-ready dict of at most ``card_tokens``
        tokens, built by the summarizer from the current, confirmed, unexpired memories (see
        :func:`vecgraph.memory.default_summarizer` for its fields). The stored card is returned
        as it is; ``refresh=True`` (or no card yet) builds and stores a new one. A user with no
        memory gets the empty card, which is not stored.

        Raises:
            TypeError / InvalidArgumentError: a bad user.
        """
        user = _user(user)
        key = f"card:{user}"
        if not refresh and key in self.graph:
            return json.loads(self.graph.get_node(key, vector=False)["text"])
        return self._refresh_card(user, now)

    def end_session(self, user: str, session: Optional[str] = None, *, now: Any = None) -> dict:
        """End a session: refresh and store the user's card from their current memories.
        Returns the new card."""
        user = _user(user)
        if session is not None and not isinstance(session, str):
            raise TypeError(f"session must be a str or None, got {_got(session)}")
        return self._refresh_card(user, now)

    def _refresh_card(self, user: str, now: Any) -> dict:
        now_us = self._now_us(now)
        memories = self.memories(user, now=now_us)
        counts: dict = {}
        own_names = []
        for m in memories:
            # A memory's names, its kind's aside (every memory of a kind shares that one).
            own = {normalize_name(n) for n in m.mentions} - {normalize_name(m.kind)}
            own_names.append(own)
            for name in own:
                counts[name] = counts.get(name, 0) + 1
        for m, own in zip(memories, own_names):
            m.score = float(sum(counts[n] - 1 for n in own))  # how often the others mention its names
        card = self.summarizer(user, memories, max_tokens=self.card_tokens,
                               count_tokens=self.count_tokens, now=from_us(now_us))
        if not isinstance(card, dict):
            raise TypeError(f"summarizer must return a dict, returned {_got(card)}")
        text = json.dumps(card, ensure_ascii=False)
        tokens = self.count_tokens(text)
        if tokens > self.card_tokens:
            raise InvalidArgumentError(f"the summarizer's card has {tokens} tokens, more than card_tokens="
                                       f"{self.card_tokens}")
        with self._lock:
            key = f"card:{user}"
            if self.graph.read_only:
                return card  # built, not stored
            if key not in self.graph and not self.graph.keys(tenants=[user], where={"source": list(SOURCES)}):
                return card  # no memory (an unknown user, or one forgotten meanwhile): nothing is stored
            self.graph.upsert_nodes([key], self._neutral_vector(), labels=CARD_LABEL, tenants=user,
                                    ts=now_us, texts=[text], props=[{"card": True}])
            self._durable()
        return card

    # -------------------------------------------------------------- expiry and erasure

    def expire(self, now: Any = None) -> list:
        """Delete every memory whose TTL has run out at ``now`` (``at + ttl <= now``), with
        the entities no remaining memory mentions. Expired memories already left recall at
        ``now``; this removes them from the graph (the WAL and snapshot files still hold their
        bytes until :meth:`purge_expired` or a later :meth:`forget` rewrites the folder). A
        stored card of a user who lost memories is rebuilt at ``now``, so that it no longer
        quotes them.

        Returns:
            The deleted memories (list of :class:`MemoryHit`).
        """
        now_us = self._now_us(now)
        with self._lock:
            keys = self.graph.keys(where={"expires_at": {"<=": now_us}, "source": list(SOURCES)})
            nodes = [self.graph.get_node(key, vector=False) for key in keys]
            gone = [MemoryHit(node) for node in nodes]
            if keys:
                entities = {key for m_key in keys for key in self._entities_of(m_key)}
                self.graph.delete_nodes(keys)
                orphans = [key for key in entities if not self.graph.neighbors(key, rels=[MENTIONS], direction="in")]
                if orphans:
                    self.graph.delete_nodes(orphans)
                for user in sorted({node["tenant"] for node in nodes}):
                    if f"card:{user}" in self.graph:
                        self._refresh_card(user, now_us)
                self._durable()
            return gone

    def _entities_of(self, memory_key: str) -> list:
        return [edge.dst for edge in self.graph.neighbors(memory_key, rels=[MENTIONS], direction="out")]

    def purge_expired(self, now: Any = None) -> dict:
        """:meth:`expire`, then rewrite the folder's history (as :meth:`forget` does) so that no
        file still holds an expired memory, whether this call or an earlier :meth:`expire`
        deleted it. The rewrite runs on every call (in a folder store).

        Returns:
            {"expired": [ids deleted by this call], "files_removed": [relative paths]}.
        """
        gone = self.expire(now)
        removed: list = []
        if self.graph.path is not None:
            with self._lock:
                removed = self.graph.checkpoint(keep_history=False)["removed"]
        return {"expired": [m.id for m in gone], "files_removed": removed}

    def _step(self, name: str) -> None:
        if self._after_step is not None:
            self._after_step(name)

    def forget(self, user: str) -> ErasureReceipt:
        """Erase everything of ``user``: memories, entities, edges, aliases, BM25 documents and
        card, then every trace in the folder, and verify it.

        Steps: (1) a durable marker node says an erasure is pending; (2) one logged
        ``delete_tenant`` removes the user's nodes and their edges (atomic: after a crash the
        user is either all there or all gone); (3) a checkpoint with ``keep_history=False``
        writes a new snapshot generation, deletes every older one and every WAL segment before
        it, and rebuilds the BM25 index so that no old segment file is left (the HNSW file is
        not written while the index holds deleted nodes: the next open rebuilds it); (4) the
        marker is cleared; (5) every file of the folder is scanned for the bytes of every deleted
        key and of the key forms only the user's nodes have (``ent:<len>:<user>:``,
        ``card:<user>``): each WAL record and snapshot row that holds a node's text holds its key
        too; texts themselves are not looked for, since another user may have written the same
        words. ``receipt.verified`` says none was found. The user id's own bytes are looked for
        as well and listed in ``receipt.id_found``: empty after the erasure of a distinctive id,
        while a short or common one ("7", "al") also occurs in other data (other users' ids
        and texts, the format's own bytes). A crash after (1) is finished by the next
        :meth:`open`, which repeats (3) and (4). A user with no live node whose id or keys the
        folder's history still holds (memories :meth:`expire` deleted) gets steps (1), (3)-(5).

        What this cannot reach (backups, filesystem and SSD blocks, other processes' memory)
        is listed in :mod:`vecgraph.memory.erasure`.

        Returns:
            :class:`ErasureReceipt`; for a user the folder holds nothing of, an empty one (no
            error; ``verified`` True after the scan in a folder store).

        Raises:
            TypeError / InvalidArgumentError: a bad user id. ReadOnlyError, StorageError: as
            for writes.
        """
        user = _user(user)
        started = time.perf_counter()
        receipt = ErasureReceipt(user)
        path = self.graph.path
        # Definite leftovers: the deleted keys, and the key forms only this user's nodes have
        # (entities and card: ones that expire() deleted are found by these too).
        own = [f"ent:{len(user)}:{user}:", f"card:{user}"]
        with self._lock:
            keys = self.graph.keys(tenants=[user])
            if not keys:
                # Nothing live, but the folder's history may still hold the user (memories that
                # expire() deleted): it is rewritten when a scan finds the user there.
                if path is None or not scan_folder(path, own + [user], limit=1):
                    receipt.verified = path is not None
                    receipt.seconds = time.perf_counter() - started
                    return receipt
            needles = own + [str(key) for key in keys]
            receipt.entities = len(self.graph.keys(tenants=[user], labels=[ENTITY_LABEL]))
            receipt.cards = len(self.graph.keys(tenants=[user], labels=[CARD_LABEL]))
            receipt.memories = len(keys) - receipt.entities - receipt.cards
            if path is not None:
                self._put_system(ERASURE_KEY, ERASURE_LABEL, {"pending": True})
                self.graph.sync()  # the marker is durable before anything is deleted
                self._step("marked")
            receipt.nodes = self.graph.delete_tenant(user) if keys else 0
            self.graph.sync()
            self._step("deleted")
            if path is not None:
                result = self.graph.checkpoint(keep_history=False)
                self._step("rewritten")
                receipt.files_removed = result["removed"]
                snapshot = result["snapshot"]
                receipt.files_written = sorted(os.path.relpath(os.path.join(snapshot, name), path)
                                               for name in os.listdir(snapshot))
                self._put_system(ERASURE_KEY, ERASURE_LABEL, {"pending": False})
                self.graph.sync()
                receipt.found = scan_folder(path, needles)
                receipt.id_found = scan_folder(path, [user])
                receipt.verified = not receipt.found
        receipt.seconds = time.perf_counter() - started
        return receipt

    def _finish_erasure(self) -> None:
        """On open: an erasure that a crash interrupted after its marker is finished."""
        if self.graph.path is None or self.graph.read_only or ERASURE_KEY not in self.graph:
            return
        if _props(self.graph.get_node(ERASURE_KEY, vector=False)).get("pending"):
            self.graph.checkpoint(keep_history=False)
            self._put_system(ERASURE_KEY, ERASURE_LABEL, {"pending": False})
            self.graph.sync()

    def users(self) -> list:
        """The ids of the users with at least one memory (sorted)."""
        keys = self.graph.keys(where={"source": list(SOURCES)})
        return sorted({self.graph.get_node(key, vector=False)["tenant"] for key in keys})


# The JSON schema of recall_memory's arguments (the shape agent frameworks take for a tool).
Memory.recall_memory.json_schema = {  # type: ignore[attr-defined]
    "name": "recall_memory",
    "description": "Search a user's long-term memory for what answers a question.",
    "parameters": {
        "type": "object",
        "properties": {
            "user": {"type": "string", "description": "the id of the user whose memories to search"},
            "query": {"type": "string", "description": "the question, in natural language"},
            "time_range": {
                "type": "object",
                "description": "only memories said or done in this window (ISO 8601 times)",
                "properties": {"since": {"type": "string", "format": "date-time"},
                               "until": {"type": "string", "format": "date-time"}},
                "additionalProperties": False,
            },
        },
        "required": ["user", "query"],
        "additionalProperties": False,
    },
}
