"""A graph split over shards, each a Ray actor that owns one graph folder (see
:class:`ShardedGraph`)."""

from __future__ import annotations

import os
import threading
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np

from ..errors import DimensionMismatchError, DuplicateKeyError, InvalidArgumentError, NotFoundError
from ..results import SearchResult
from .calls import call_all, ray_module
from .columns import _check_text, _check_timeout, _per_row, _plain_keys, _rows, _split, checked_search_args
from .routing import Routing
from .shard import Shard

Key = Union[str, int]

#: Seconds a call waits for a shard (reads: including a restart after a crash) by default.
DEFAULT_TIMEOUT_S = 30.0
#: Calls a shard actor serves at once by default (threads; Ray's max_concurrency). More threads
#: gave no more throughput on 2 cores and cost memory per thread (bench/README.md).
DEFAULT_CONCURRENCY = 1


class ShardedSearchResult(SearchResult):
    """A :class:`vecgraph.SearchResult` merged from shards, plus ``shards`` (the shard of each
    hit), ``partial`` (True when a shard did not answer and ``allow_partial`` let the search go
    on) and ``missing_shards`` (those shards)."""

    __slots__ = ("shards", "partial", "missing_shards")
    shards: list
    partial: bool
    missing_shards: list

    def __reduce__(self) -> tuple:
        return (
            _sharded_result_from_state,
            (
                self.keys,
                self.scores,
                self.hops,
                self.count_seeds,
                self.count_visited,
                self.paths,
                self._node_fields(),
                self.shards,
                self.missing_shards,
            ),
        )

    def __repr__(self) -> str:
        base = super().__repr__()
        return base[:-1] + (f", partial, missing shards {self.missing_shards})" if self.partial else ")")


def _sharded_result_from_state(
    keys: list,
    scores: Any,
    hops: Any,
    count_seeds: int,
    count_visited: int,
    paths: list,
    nodes: list,
    shards: list,
    missing: list,
) -> ShardedSearchResult:
    out = ShardedSearchResult.__new__(ShardedSearchResult)
    out.keys, out.scores, out.hops, out.count_seeds, out.count_visited = (
        keys,
        scores,
        hops,
        count_seeds,
        count_visited,
    )
    out._offsets = out._edges = out._engine = None
    out._paths, out._nodes = paths, nodes
    out.shards, out.missing_shards, out.partial = shards, missing, bool(missing)
    return out


def _merged(parts: list, k: int, missing: list) -> ShardedSearchResult:
    """The best ``k`` hits of ``parts`` = [(shard, SearchResult)], by score (ties: shard, then
    the shard's own order)."""
    rows = []
    for shard, result in parts:
        for i in range(len(result.keys)):
            rows.append((-float(result.scores[i]), shard, i, result))
    rows.sort(key=lambda row: row[:3])
    rows = rows[:k]
    out = ShardedSearchResult.__new__(ShardedSearchResult)
    out.keys = [row[3].keys[row[2]] for row in rows]
    out.scores = np.array([row[3].scores[row[2]] for row in rows], np.float32)
    out.hops = np.array([row[3].hops[row[2]] for row in rows], np.int32)
    out.count_seeds = sum(int(r.count_seeds) for _, r in parts)
    out.count_visited = sum(int(r.count_visited) for _, r in parts)
    out._offsets = out._edges = out._engine = None
    out._paths = [row[3].paths[row[2]] for row in rows]
    out._nodes = [row[3]._node_fields()[row[2]] for row in rows]
    out.shards = [row[1] for row in rows]
    out.missing_shards = list(missing)
    out.partial = bool(missing)
    return out


class ShardedGraph:
    """A graph split over ``shards`` folders under one prefix, each owned by a Ray actor.

    Nodes are placed by the routing table (:mod:`vecgraph.distributed.routing`): ``shard_by=
    "tenant"`` keeps every node of a tenant on one shard (agent memory per user: a query for
    one tenant goes to one shard), ``"key"`` hashes the key, ``"label"`` places each label (a
    node type, a domain) on a shard, and a function ``(key, label, tenant) -> domain`` places
    each domain it returns. An edge joins two nodes of one shard; one between shards is refused.

    Searches: a query whose filters name the shards that hold its nodes (``tenants`` under
    ``"tenant"``, ``labels`` under ``"label"``, ``domains`` under ``"label"`` or a function) goes
    to those shards only; the others fan out to every shard in parallel (one Ray call each) and
    the shards' hits are merged by score. Every shard scores with the same metric and int8
    codes, so:

    - a query routed to one shard answers what one graph holding all the nodes answers (each
      node's walk stays in its shard, as its edges do);
    - a fan-out of ``hops=0`` returns the global top k; under ``exact=True`` the same keys and
      scores as one graph with the same nodes;
    - a fan-out of ``hops >= 1`` takes two rounds: the shards' best ``seeds`` seeds, of which the
      best ``seeds`` overall are kept, then a walk from each on the shard that owns it. Under
      ``exact=True`` this is one graph's search whenever no shard reaches ``max_visited``
      (each shard has that budget for its own walks; one graph shares it between them).

    Failures: Ray restarts a shard actor that dies (``max_restarts``); it reopens its folder and
    replays its WAL, so a write acknowledged under ``sync="always"`` is kept. A read that reaches
    a dead shard is sent again until ``timeout_s``; then it raises
    :class:`vecgraph.ShardUnavailableError` naming the shard, or with ``allow_partial=True``
    returns what the others found, marked ``partial``. A write is never sent twice.

    Writes: a batch is checked whole here as one graph checks it (types, shapes, values; errors
    name the caller's rows), and its keys against every shard that could hold them, before any
    shard writes, so a rejected batch writes nothing; a shard that dies during the write leaves
    the others' parts written (there is no transaction across shards). One write batch at a time
    per ShardedGraph; each shard actor serves ``concurrency`` calls at once.

    Ties: equal scores on different shards come in shard order (one graph orders them by
    insertion).

    Storage: ``prefix`` is a folder every Ray node can open (local disk on one machine, a shared
    file system such as NFS on a cluster). Object stores (S3) are not file systems a WAL can
    append to and fsync, and are not supported.
    """

    def __init__(
        self, routing: Routing, actors: list, timeout_s: float, options: dict, max_restarts: int = -1
    ) -> None:
        self._routing = routing
        self._restarts = max_restarts != 0
        self._actors = actors
        self._timeout_s = timeout_s
        self._options = options
        self._lock = threading.Lock()  # one write batch at a time (check, then write)
        self._closed = False
        try:
            first = self._call(self._all(), "ping", {s: () for s in self._all()})[0][0]  # every shard opened
        except BaseException:
            for actor in actors:  # the shards that did open close with their actors
                ray_module().kill(actor, no_restart=True)
            self._closed = True
            raise
        self.dim: int = int(first["dim"])
        self.metric: str = first["metric"]
        self._embedder: Optional[dict] = first["embedder"]
        self._filterable: dict = first["filterable"]
        self._query_embedder: Any = None

    # ------------------------------------------------------------------ create / open / close

    @classmethod
    def create(
        cls,
        prefix: Union[str, os.PathLike],
        shards: int,
        dim: int,
        metric: str = "cos",
        *,
        shard_by: Union[str, Callable[[Key, str, str], str]] = "tenant",
        placement: Optional[dict] = None,
        sync: str = "always",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_restarts: int = -1,
        num_cpus: float = 0.0,
        concurrency: int = DEFAULT_CONCURRENCY,
        **graph_options: Any,
    ) -> "ShardedGraph":
        """Create ``shards`` graph folders under ``prefix`` (which must not hold a sharded graph
        yet), the routing table beside them, and one Ray actor per shard. Without a Ray
        connection (``ray.init``) first, Ray starts a local one with its defaults (every CPU).
        A create that fails (a shard that cannot open its folder, a bad option) removes what it
        made.

        Args:
            prefix: a folder path (created if missing).
            shards: shard count (1..4096). dim, metric: as :meth:`vecgraph.Graph.open`.
            shard_by: ``"tenant"`` (default), ``"key"``, ``"label"``, or a function
                ``(key, label, tenant) -> str`` naming a node's domain (a module-level function:
                :meth:`open` checks it is the same one by its qualified name).
            placement: ``{domain: shard}`` for ``"label"`` or a function's domains; other
                domains go to the shard their hash names. Either way a domain's shard is
                recorded in the routing table the first time it is used and never changes.
            sync: the shards' WAL fsync policy (``"always"``: a write returns once it is on
                disk on its shard).
            timeout_s: how long a call waits for a shard, a restart included.
            max_restarts: Ray's restarts of a shard actor that dies (-1: no limit).
            num_cpus: CPUs Ray reserves for each actor (0: shards share the machine with the
                caller; a shard still runs on its own process).
            concurrency: calls a shard serves at once, in threads of its process (Ray's
                ``max_concurrency``): searches release the GIL and run in parallel; writes
                take the graph's writer lock in turn.
            graph_options: passed to :meth:`vecgraph.Graph.open` for every shard (filterable,
                connectivity, ...).

        Raises:
            FileExistsError: ``prefix`` already holds a sharded graph.
            InvalidArgumentError / TypeError: a bad shard count, mode or placement.
            ImportError: Ray is not installed (``pip install "vecgraph[ray]"``).
        """
        import shutil

        ray_module()
        prefix = os.fspath(prefix)
        if os.path.exists(os.path.join(prefix, "routing.json")):
            raise FileExistsError(f"{prefix} already holds a sharded graph: open it with ShardedGraph.open")
        existed = os.path.isdir(prefix)
        if existed and any(name.startswith("shard-") for name in os.listdir(prefix)):
            raise FileExistsError(
                f"{prefix} holds shard folders but no routing table: it is not a sharded graph "
                "this call may create (choose an empty folder)"
            )
        options = dict(graph_options, dim=dim, metric=metric, sync=sync)
        routing = Routing.create(prefix, shards, shard_by, placement)
        try:
            graph = cls._start(routing, options, timeout_s, max_restarts, num_cpus, concurrency)
        except BaseException:  # nothing of a graph that did not start stays behind
            for folder in routing.folders():
                shutil.rmtree(folder, ignore_errors=True)
            if not existed:
                shutil.rmtree(prefix, ignore_errors=True)
            raise
        try:
            routing._write()  # last: a prefix with a routing table holds shards that opened
        except BaseException:
            graph.close()
            raise
        return graph

    @classmethod
    def open(
        cls,
        prefix: Union[str, os.PathLike],
        *,
        shard_by: Optional[Callable] = None,
        sync: str = "always",
        timeout_s: float = DEFAULT_TIMEOUT_S,
        max_restarts: int = -1,
        num_cpus: float = 0.0,
        concurrency: int = DEFAULT_CONCURRENCY,
        **graph_options: Any,
    ) -> "ShardedGraph":
        """Reattach to the shard folders under ``prefix``: one new actor per shard, each
        reopening its folder (WAL recovery). ``shard_by``: the domain function the graph was
        created with (only for a graph routed by one). Other arguments as :meth:`create`.

        Raises:
            FileNotFoundError: no routing table under ``prefix``.
            CorruptionError: a damaged routing table, or a shard folder it names is missing.
            InvalidArgumentError: another domain function than the recorded one.
        """
        ray_module()
        prefix = os.fspath(prefix)
        routing = Routing.open(prefix, shard_by)
        return cls._start(
            routing, dict(graph_options, sync=sync), timeout_s, max_restarts, num_cpus, concurrency
        )

    @classmethod
    def _start(
        cls,
        routing: Routing,
        options: dict,
        timeout_s: Any,
        max_restarts: Any,
        num_cpus: Any,
        concurrency: Any,
    ) -> "ShardedGraph":
        from ..arguments import _count, _real

        timeout_s = _check_timeout(timeout_s)
        if _count(max_restarts, "max_restarts") < -1:
            raise InvalidArgumentError(f"max_restarts must be >= -1 (-1: no limit), got {max_restarts}")
        if not _real(num_cpus, "num_cpus") >= 0:
            raise InvalidArgumentError(f"num_cpus must be >= 0, got {num_cpus}")
        if _count(concurrency, "concurrency") < 1:
            raise InvalidArgumentError(f"concurrency must be >= 1, got {concurrency}")
        ray = ray_module()
        if not ray.is_initialized():
            ray.init()
        actor_class = ray.remote(Shard).options(
            max_restarts=max_restarts, max_task_retries=0, num_cpus=num_cpus, max_concurrency=concurrency
        )
        actors = [actor_class.remote(i, folder, options) for i, folder in enumerate(routing.folders())]
        return cls(routing, actors, timeout_s, options, max_restarts)

    def close(self) -> None:
        """Close every shard's graph (its WAL synced) and end the actors (a shard whose actor is
        gone for good is skipped). Idempotent."""
        if self._closed:
            return
        ray = ray_module()
        try:  # a shard that is gone for good has nothing left to close
            self._call(self._all(), "close", {i: () for i in self._all()}, allow_partial=True)
        finally:
            for actor in self._actors:
                ray.kill(actor, no_restart=True)
            self._closed = True

    def __enter__(self) -> "ShardedGraph":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else f"{len(self._actors)} shards"
        return f"ShardedGraph({self._routing.prefix!r}, {state}, shard_by={self._routing.mode!r})"

    # ------------------------------------------------------------------ plumbing

    @property
    def shards(self) -> int:
        return len(self._actors)

    @property
    def shard_by(self) -> str:
        return self._routing.mode

    def _call(
        self,
        shards: list,
        method: Union[str, dict],
        args: dict,
        *,
        read: bool = True,
        allow_partial: bool = False,
        timeout_s: Optional[float] = None,
    ) -> tuple[dict, list]:
        if self._closed and method != "close":
            from ..errors import ReadOnlyError

            raise ReadOnlyError("the sharded graph is closed")
        if timeout_s is not None:
            timeout_s = _check_timeout(timeout_s)
        return call_all(
            self._actors,
            shards,
            method,
            args,
            timeout_s=self._timeout_s if timeout_s is None else timeout_s,
            read=read,
            allow_partial=allow_partial,
            restarts=self._restarts,
        )

    # ------------------------------------------------------------------ embedders

    @property
    def embedder(self) -> Optional[dict]:
        """The embedder the shards record (``{"name", "dim"[, "spec"]}``), or None."""
        return self._embedder

    def use_embedder(self, embedder: Any) -> None:
        """Record ``embedder`` on every shard (as :meth:`vecgraph.Graph.use_embedder`: later
        calls accept only the same name and dim), and embed this handle's text queries with it.

        Raises:
            DimensionMismatchError, InvalidArgumentError, TypeError: as :meth:`vecgraph.Graph.use_embedder`.
        """
        from ..embedders import check_embedder, spec_of

        embedder = check_embedder(embedder)
        name, dim = embedder.name, int(embedder.dim)
        if dim != self.dim:
            raise DimensionMismatchError(
                f"embedder {name!r} makes {dim}-d vectors, the graph's dim is {self.dim}"
            )
        if self._embedder is not None and self._embedder["name"] != name:
            raise InvalidArgumentError(
                f"the graph was built with embedder {self._embedder['name']!r}; refusing "
                f"embedder {name!r}: its vectors are not comparable"
            )
        spec = spec_of(embedder)
        self._call(self._all(), "record_embedder", {s: (name, dim, spec) for s in self._all()}, read=False)
        self._embedder = {
            "name": name,
            "dim": dim,
            **({"spec": spec} if spec is not None and spec != name else {}),
        }
        self._query_embedder = embedder

    def query_embedder(self) -> Any:
        """The embedder text queries are embedded with (see :meth:`vecgraph.Graph.query_embedder`)."""
        from ..embedders import query_embedder

        return query_embedder(self)  # type: ignore[arg-type]

    def _text_vector(self, text: str, embedder: Any) -> np.ndarray:
        from ..embedders import embed_query

        return embed_query(self, text, embedder if embedder is not None else self.query_embedder())  # type: ignore[arg-type]

    def _all(self) -> list:
        return list(range(len(self._actors)))

    def _locate(self, keys: list) -> dict:
        """{(type, key): shard} of the ``keys`` that are nodes (one call to every shard, or none
        under ``shard_by="key"``, where the key names its shard)."""
        if self._routing.mode == "key":
            placed = self._routing.assign(keys, [], [])[0]
            held, _ = self._call(
                sorted(set(placed)),
                "holds",
                {s: ([k for k, p in zip(keys, placed) if p == s],) for s in set(placed)},
            )
            out = {}
            for shard, flags in held.items():
                for key, ok in zip([k for k, p in zip(keys, placed) if p == shard], flags):
                    if ok:
                        out[(type(key), key)] = shard
            return out
        held, _ = self._call(self._all(), "holds", {s: (keys,) for s in self._all()})
        out = {}
        for shard in sorted(held):
            for key, ok in zip(keys, held[shard]):
                if ok:
                    out.setdefault((type(key), key), shard)
        return out

    # ------------------------------------------------------------------ writes

    def add_nodes(
        self,
        keys: Sequence[Key],
        vectors: Any,
        *,
        labels: Union[str, Sequence[str], None] = None,
        texts: Optional[Sequence[str]] = None,
        tenants: Union[str, Sequence[str], None] = None,
        ts: Any = None,
        props: Optional[Sequence[Optional[dict]]] = None,
    ) -> None:
        """Add a batch of nodes, each to the shard the routing table names (arguments and errors
        as :meth:`vecgraph.Graph.add_nodes`). All or nothing: the batch is checked on every
        shard it touches, and no key may be on any shard already, before one shard writes.

        Raises:
            DuplicateKeyError: a key on any shard already, or twice in the batch.
            DimensionMismatchError: vectors not of shape (n, dim).
            ShardUnavailableError: a shard died during the write (see the class docstring).
            The errors of :meth:`vecgraph.Graph.add_nodes`, raised as the shard raised them.
        """
        keys, matrix, label_rows, tenant_rows, columns = self._node_batch(
            keys, vectors, labels, texts, tenants, ts, props
        )
        with self._lock:
            placed, domains = self._routing.assign(keys, label_rows, tenant_rows) if keys else ([], {})
            parts = _split(placed, columns, lambda rows, part: ([keys[r] for r in rows], matrix[rows], part))
            args = {shard: made for shard, (_, made) in parts.items()}
            others = [s for s in self._all() if s not in parts] if self._routing.mode != "key" else []
            if len(parts) > 1 or others:
                checks = {s: args[s] for s in parts}
                checks.update({s: (keys,) for s in others})
                checked_parts, _ = self._call_mixed(checks, others)
                for shard in others:
                    for key, held in zip(keys, checked_parts[shard]):
                        if held:
                            raise DuplicateKeyError(f"key {key!r} is already in the graph (on shard {shard})")
            self._routing.record(domains)  # new domains reach the table before their nodes reach a shard
            self._call(sorted(parts), "add_nodes", args, read=False)

    def upsert_nodes(
        self,
        keys: Sequence[Key],
        vectors: Any,
        *,
        labels: Union[str, Sequence[str], None] = None,
        texts: Optional[Sequence[str]] = None,
        tenants: Union[str, Sequence[str], None] = None,
        ts: Any = None,
        props: Optional[Sequence[Optional[dict]]] = None,
    ) -> None:
        """Add new keys and replace existing ones, as :meth:`vecgraph.Graph.upsert_nodes` (a node
        already in the graph keeps its tenant unless ``tenants`` is given). A key already on a
        shard is replaced there; a new key goes where the routing table places it. All or
        nothing, checked as :meth:`add_nodes` checks. Retrying a write that failed with
        :class:`ShardUnavailableError` as an upsert is safe (the same batch again).

        Raises:
            InvalidArgumentError: a key whose new tenant (``shard_by="tenant"``), label
                (``"label"``) or domain would place it on another shard than the one that holds
                it (delete it and add it again).
            DuplicateKeyError: a key twice in the batch.
            The errors of :meth:`add_nodes` otherwise.
        """
        keys, matrix, label_rows, tenant_rows, columns = self._node_batch(
            keys, vectors, labels, texts, tenants, ts, props
        )
        if labels is None:
            columns["labels"] = None
        if tenants is None:
            columns["tenants"] = None  # the nodes already there keep theirs
        with self._lock:
            where = self._locate(keys) if keys else {}
            placed, domains = self._routing.assign(keys, label_rows, tenant_rows) if keys else ([], {})
            mode = self._routing.mode
            moves = (
                (mode == "tenant" and tenants is not None)
                or (mode == "label" and labels is not None)
                or (mode == "domain" and (labels is not None or tenants is not None))
            )
            for i, key in enumerate(keys):
                held = where.get((type(key), key))
                if held is None:
                    continue
                if moves and placed[i] != held:
                    raise InvalidArgumentError(
                        f"keys[{i}] {key!r} is on shard {held}, and its new {'tenant' if mode == 'tenant' else mode} "
                        f"would place it on shard {placed[i]}: a node does not move between shards (delete it "
                        "and add it again)"
                    )
                placed[i] = held
            if domains:  # only the domains of new keys are placed
                fresh = {
                    self._routing.domain_of(key, label_rows[i], tenant_rows[i])
                    for i, key in enumerate(keys)
                    if (type(key), key) not in where
                }
                domains = {d: s for d, s in domains.items() if d in fresh}
            parts = _split(placed, columns, lambda rows, part: ([keys[r] for r in rows], matrix[rows], part))
            args = {shard: made for shard, (_, made) in parts.items()}
            if len(parts) > 1:
                self._call(sorted(parts), "check_nodes", {s: (*args[s], True) for s in parts})
            self._routing.record(domains)
            self._call(sorted(parts), "upsert_nodes", args, read=False)

    def _node_batch(
        self, keys: Any, vectors: Any, labels: Any, texts: Any, tenants: Any, ts: Any, props: Any
    ) -> tuple:
        """``(keys, vectors, labels per row, tenants per row, columns)`` of a node batch, checked
        whole here as one graph checks it (rows named as the caller gave them), so that no shard
        writes its part of a batch another shard would refuse."""
        from ..arguments import _node_columns, quantize

        keys = _plain_keys(keys)
        n = len(keys)
        if isinstance(texts, str):
            raise TypeError("texts must be a list of n texts, got a str")
        matrix = _node_columns(keys, vectors, labels, texts, tenants, ts, props, self._filterable, True)[1]
        if matrix.shape != (n, self.dim):
            raise DimensionMismatchError(
                f"vectors must have shape ({n}, {self.dim}) for {n} keys, got {matrix.shape}"
            )
        if n:
            quantize(matrix, self.metric)  # NaN, inf, an all-zero row under cos: the core's checks
        seen: dict = {}
        for i, key in enumerate(keys):
            if (type(key), key) in seen:
                raise DuplicateKeyError(
                    f"key {key!r} is in the batch twice (rows {seen[(type(key), key)]} and {i})"
                )
            seen[(type(key), key)] = i
        label_rows = _rows(labels, n, "labels") or [""] * n
        tenant_rows = _rows(tenants, n, "tenants") or [""] * n
        text_rows = _rows(texts, n, "texts")
        for name, rows in (
            ("keys", keys),
            ("labels", label_rows),
            ("tenants", tenant_rows),
            ("texts", text_rows or []),
        ):
            _check_text(rows, name)
        columns = {
            "labels": label_rows,
            "tenants": tenant_rows,
            "texts": text_rows,
            "ts": _per_row(ts, n, "ts"),
            "props": None if props is None else list(props),
        }
        return keys, matrix, label_rows, tenant_rows, columns

    def _call_mixed(self, args: dict, holds: list) -> tuple[dict, list]:
        """check_nodes on the shards that write, holds on the ``holds`` ones, in one round."""
        methods = {s: ("holds" if s in holds else "check_nodes") for s in args}
        return self._call(sorted(args), methods, args)

    def add_edges(
        self,
        src: Sequence[Key],
        dst: Sequence[Key],
        *,
        rels: Union[str, Sequence[str], None] = None,
        weights: Any = None,
        ts: Any = None,
        texts: Optional[Sequence[str]] = None,
        props: Optional[Sequence[Optional[dict]]] = None,
        vectors: Any = None,
    ) -> None:
        """Add a batch of edges (arguments as :meth:`vecgraph.Graph.add_edges`), each to the
        shard that holds both its ends. All or nothing.

        Raises:
            NotFoundError: an end that is no node on any shard.
            InvalidArgumentError: an edge whose ends are on different shards (nothing is written).
            The errors of :meth:`vecgraph.Graph.add_edges`, raised as the shard raised them.
        """
        from ..arguments import _edge_columns, quantize

        src, dst = _plain_keys(src, "src"), _plain_keys(dst, "dst")
        n = len(src)
        if len(dst) != n:
            raise ValueError(f"src has {n} keys and dst {len(dst)}")
        if isinstance(texts, str):
            raise TypeError("texts must be a list of n texts, got a str")
        # Checked here as one graph checks them, so no shard writes part of a batch another refuses.
        checked = _edge_columns(src, dst, rels, weights, ts, texts, props, vectors)
        if isinstance(checked[3], np.ndarray) and not np.isfinite(checked[3]).all():
            row = int(np.flatnonzero(~np.isfinite(checked[3]))[0])
            raise InvalidArgumentError(f"weights[{row}] must be finite, got {checked[3][row]}")
        if checked[3] is not None and not isinstance(checked[3], np.ndarray) and not np.isfinite(checked[3]):
            raise InvalidArgumentError(f"weights must be finite, got {weights}")
        if checked[7] is not None:
            if checked[7].shape != (n, self.dim):
                raise DimensionMismatchError(
                    f"edge vectors must have shape ({n}, {self.dim}), got {checked[7].shape}"
                )
            if n:
                quantize(checked[7], self.metric)
        _check_text(_rows(rels, n, "rels") or [], "rels")
        _check_text(_rows(texts, n, "texts") or [], "texts")
        with self._lock:
            where = self._locate(list({(type(k), k): k for k in src + dst}.values()))
            placed = []
            for i, (a, b) in enumerate(zip(src, dst)):
                for end, key in (("src", a), ("dst", b)):
                    if (type(key), key) not in where:
                        raise NotFoundError(f"edge {i}: {end} {key!r} is not a node of this graph")
                sa, sb = where[(type(a), a)], where[(type(b), b)]
                if sa != sb:
                    raise InvalidArgumentError(
                        f"edge {i}: {a!r} is on shard {sa} and {b!r} on shard {sb}; an edge joins nodes of one shard "
                        f"(this graph routes by {self._routing.mode!r}): route linked nodes together, by tenant "
                        "(shard_by='tenant', every node of a tenant on one shard) or by a domain that holds both"
                    )
                placed.append(sa)
            columns = {
                "rels": _rows(rels, n, "rels"),
                "weights": _per_row(weights, n, "weights"),
                "ts": _per_row(ts, n, "ts"),
                "texts": _rows(texts, n, "texts"),
                "props": None if props is None else list(props),
                "vectors": None if vectors is None else np.asarray(vectors, np.float32),
            }
            parts = _split(
                placed, columns, lambda rows, part: ([src[r] for r in rows], [dst[r] for r in rows], part)
            )
            args = {shard: made for shard, (_, made) in parts.items()}
            self._call(sorted(parts), "add_edges", args, read=False)

    def delete_nodes(self, keys: Sequence[Key], *, missing_ok: bool = False) -> int:
        """Delete nodes (and their edges) wherever they are; the count deleted.

        Raises:
            NotFoundError: a key on no shard (unless ``missing_ok``); nothing is deleted.
        """
        keys = _plain_keys(keys)
        with self._lock:
            where = self._locate(keys)
            if not missing_ok:
                for key in keys:
                    if (type(key), key) not in where:
                        raise NotFoundError(f"key {key!r} is not a node of this graph")
            parts: dict = {}
            for key in keys:
                if (type(key), key) in where:
                    parts.setdefault(where[(type(key), key)], []).append(key)
            done, _ = self._call(
                sorted(parts), "delete_nodes", {s: (ks, True) for s, ks in parts.items()}, read=False
            )
            return sum(done.values())

    # ------------------------------------------------------------------ reads

    def shard_of(self, key: Key) -> int:
        """The shard that holds node ``key``.

        Raises:
            NotFoundError: no shard holds it. TypeError: a key that is not a str or an int.
        """
        key = _plain_keys([key], "key")[0]
        where = self._locate([key])
        if (type(key), key) not in where:
            raise NotFoundError(f"key {key!r} is not a node of this graph")
        return where[(type(key), key)]

    def get_node(self, key: Key, *, vector: bool = True) -> dict:
        """:meth:`vecgraph.Graph.get_node` on the shard that holds ``key``."""
        key = _plain_keys([key], "key")[0]
        shard = self.shard_of(key)
        return self._call([shard], "get_node", {shard: (key, vector)})[0][shard]

    def neighbors(self, key: Key, rels: Optional[Sequence[str]] = None, direction: str = "out") -> list:
        """:meth:`vecgraph.Graph.neighbors` on the shard that holds ``key``."""
        from ..results import Edge

        key = _plain_keys([key], "key")[0]
        shard = self.shard_of(key)
        return [Edge(*e) for e in self._call([shard], "neighbors", {shard: (key, rels, direction)})[0][shard]]

    def __contains__(self, key: object) -> bool:
        if isinstance(key, bool) or not isinstance(key, (str, int, np.integer)):
            return False
        key = _plain_keys([key], "key")[0]
        return (type(key), key) in self._locate([key])

    def delete_tenant(self, tenant: str, *, allow_default_tenant: bool = False) -> int:
        """Delete every node of ``tenant`` (and their edges) on the shards that can hold it (one
        under ``shard_by="tenant"``); the count deleted. See :meth:`vecgraph.Graph.delete_tenant`."""
        if not isinstance(tenant, str):
            raise TypeError(f"tenant must be a str, got {type(tenant).__name__}")
        targets = self._targets([tenant], None, None)
        with self._lock:
            done, _ = self._call(
                targets, "delete_tenant", {s: (tenant, allow_default_tenant) for s in targets}, read=False
            )
        return sum(done.values())

    def verify(self) -> list:
        """Every shard's :meth:`vecgraph.Graph.verify` problems, each prefixed with its shard."""
        found, _ = self._call(self._all(), "verify", {s: () for s in self._all()})
        return [f"shard {s}: {problem}" for s in self._all() for problem in found[s]]

    def __len__(self) -> int:
        pings, _ = self._call(self._all(), "ping", {s: () for s in self._all()})
        return sum(p["nodes"] for p in pings.values())

    def stats(self) -> dict:
        """``{"shards": [per-shard stats (vecgraph.Graph.stats plus shard, path, pid, nodes,
        edges, calls)], "nodes": total, "edges": total, "shard_by": mode}``."""
        found, _ = self._call(self._all(), "stats", {s: () for s in self._all()})
        per = [found[s] for s in self._all()]
        return {
            "shards": per,
            "nodes": sum(p["nodes"] for p in per),
            "edges": sum(p["edges"] for p in per),
            "shard_by": self._routing.mode,
            "prefix": self._routing.prefix,
        }

    def checkpoint(self) -> list:
        """:meth:`vecgraph.Graph.checkpoint` on every shard, in parallel; their reports in shard order."""
        done, _ = self._call(self._all(), "checkpoint", {s: () for s in self._all()}, read=False)
        return [done[s] for s in self._all()]

    def sync(self) -> None:
        """fsync every shard's WAL (for ``sync`` policies other than "always")."""
        self._call(self._all(), "sync", {s: () for s in self._all()}, read=False)

    def export(
        self, path: Union[str, os.PathLike], format: str = "parquet", *, overwrite: bool = False
    ) -> list:
        """Export every shard as a snapshot (:func:`vecgraph.snapshot.export`) into
        ``path/shard-NNNN``; their reports in shard order."""
        path = os.fspath(path)
        done, _ = self._call(
            self._all(),
            "export",
            {s: (os.path.join(path, f"shard-{s:04d}"), format, overwrite) for s in self._all()},
            read=False,
        )
        return [done[s] for s in self._all()]

    def counters(self) -> list:
        """Calls each shard has served since its process started: ``[{"search", "hybrid", "write"}]``."""
        found, _ = self._call(self._all(), "counters", {s: () for s in self._all()})
        return [found[s] for s in self._all()]

    def pids(self) -> list:
        """The process id of each shard's actor."""
        found, _ = self._call(self._all(), "ping", {s: () for s in self._all()})
        return [found[s]["pid"] for s in self._all()]

    def search(
        self,
        query: Any,
        k: int = 10,
        *,
        seeds: int = 8,
        hops: int = 2,
        max_visited: int = 2000,
        rels: Optional[Sequence[str]] = None,
        direction: str = "both",
        labels: Optional[Sequence[str]] = None,
        tenants: Optional[Sequence[str]] = None,
        ts_min: Optional[int] = None,
        ts_max: Optional[int] = None,
        max_fanout: int = 256,
        hop_decay: float = 1.0,
        exact: bool = False,
        ef: Optional[int] = None,
        where: Optional[dict] = None,
        since: Any = None,
        until: Any = None,
        exclude_keys: Optional[Sequence[Key]] = None,
        domains: Optional[Sequence[str]] = None,
        allow_partial: bool = False,
        timeout_s: Optional[float] = None,
        embedder: Any = None,
    ) -> ShardedSearchResult:
        """Graph-guided vector search over the shards (arguments as :meth:`vecgraph.Graph.search`;
        the semantics across shards are in the class docstring).

        Args:
            query: (dim,) vector, or a str embedded with ``embedder`` (default: the recorded one,
                :meth:`query_embedder`) here, once.
            domains: route to the shards of these domains (graphs routed by label or a domain
                function); tenants route a graph routed by tenant, labels one routed by label.
            allow_partial: return what the answering shards found when one does not answer in
                time, with ``partial=True`` and ``missing_shards``, instead of raising.
            timeout_s: this call's wait for each shard (default: the graph's).

        Returns:
            :class:`ShardedSearchResult`: keys, scores, hops, paths as one graph's, plus
            ``shards``, ``partial`` and ``missing_shards``.

        Raises:
            ShardUnavailableError: a shard did not answer in time (without ``allow_partial``).
            The errors of :meth:`vecgraph.Graph.search`, raised as the shards raised them.
        """
        from ..arguments import _exclude_keys, _float_array

        # Checked here, once, before any shard is called (the shards check them again).
        k, seeds, hops = checked_search_args(k, seeds, hops, max_visited, max_fanout, direction, rels, labels,
                                             tenants, ts_min, ts_max, hop_decay, exact, ef, since, until)[:3]
        vector = (
            self._text_vector(query, embedder) if isinstance(query, str) else _float_array(query, "query", 1)
        )
        if vector.shape != (self.dim,):
            raise DimensionMismatchError(f"query must have shape ({self.dim},), got {vector.shape}")
        p = {
            "k": k,
            "seeds": seeds,
            "hops": hops,
            "max_visited": max_visited,
            "rels": rels,
            "direction": direction,
            "labels": labels,
            "tenants": tenants,
            "ts_min": ts_min,
            "ts_max": ts_max,
            "max_fanout": max_fanout,
            "hop_decay": hop_decay,
            "exact": exact,
            "ef": ef,
            "where": where,
            "since": since,
            "until": until,
            "exclude_keys": _exclude_keys(exclude_keys),
        }
        targets = self._targets(tenants, labels, domains)
        if not targets:
            return _merged([], k, [])
        opts = {"allow_partial": allow_partial, "timeout_s": timeout_s}
        if len(targets) == 1 or hops == 0:
            # hops 0: the hits are the seeds, the best `seeds` overall (each shard sends its own best)
            found, missing = self._call(targets, "search", {s: (vector, p) for s in targets}, **opts)
            return _merged(sorted(found.items()), k if hops else min(k, seeds), missing)
        # Fan-out with hops >= 1: the best seeds overall, then each walked on its own shard.
        found, missing = self._call(targets, "seeds", {s: (vector, p) for s in targets}, **opts)
        ranked = sorted(
            (
                (-float(score), shard, i, key)
                for shard, (keys, scores) in found.items()
                for i, (key, score) in enumerate(zip(keys, scores))
            )
        )[: int(seeds)]
        starts: dict = {}
        for _, shard, _, key in ranked:
            starts.setdefault(shard, []).append(key)
        walked, more = self._call(
            sorted(starts), "expand", {s: (vector, p, starts[s]) for s in starts}, **opts
        )
        return _merged(sorted(walked.items()), k, sorted(set(missing) | set(more)))

    def _targets(self, tenants: Any, labels: Any, domains: Any) -> list:
        routed = self._routing.shards_for(tenants, labels, domains)
        return self._all() if routed is None else routed

    from .hybrid import hybrid_search  # noqa: E402  (a method: the coordinator of a sharded hybrid search)


__all__ = ["ShardedGraph", "ShardedSearchResult"]
