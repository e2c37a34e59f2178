"""LlamaIndex on vecgraph: a vector store, a hybrid retriever and an embedding model.

``pip install "vecgraph[llama-index]"`` (llama-index-core).

* :class:`VecgraphVectorStore`: a ``BasePydanticVectorStore`` on a :class:`vecgraph.Graph`,
  in memory or in a graph folder. Each LlamaIndex node is a graph node: its id the key, its
  embedding the vector, its text (``get_content(metadata_mode=NONE)``) the text that the BM25
  channel indexes, and its metadata the props (LlamaIndex's ``node_to_metadata_dict``: the
  metadata keys at the top level, the rest of the node as JSON). Chunks that LlamaIndex links
  (``NEXT`` / ``PREVIOUS``, ``PARENT`` / ``CHILD``) are linked by ``next`` and ``parent`` edges,
  which the graph channel of :meth:`vecgraph.Graph.hybrid_search` walks.
* :class:`VecgraphRetriever`: a ``BaseRetriever`` over :meth:`vecgraph.Graph.hybrid_search`
  (dense, BM25, graph and entity channels, fused), returning ``NodeWithScore``.
* :class:`VecgraphEmbedding`: a vecgraph embedder (:mod:`vecgraph.embedders`, e.g. the offline
  ``"wordllama"``) as a LlamaIndex ``BaseEmbedding``.

Metadata filters (``MetadataFilters``): a filter on a property declared ``filterable`` when the
graph was created (``==``, ``in`` and ranges, under an AND condition, with a value of the
property's type) goes into vecgraph's ``where=``, evaluated inside the search; every other
filter (``!=``, ``nin``, ``text_match``, ``contains``, ``any``, ``all``, ``is_empty``, an OR or
NOT condition, nested filters, a key not declared) is applied after the search to the
metadata, which asks the search for more results (max(4k, k + 32), then 4 times as many each
round, the last round an exact search over the whole graph: every round's ``seeds`` and
``max_visited`` are raised to the results asked for, capped at the graph's size) until ``k``
pass or none is left; the hybrid and text modes and :class:`VecgraphRetriever` look at no more
than the best 100,000 candidates (``hybrid_search``'s largest ``k``).
Both give LlamaIndex's own semantics
(``llama_index.core.vector_stores.utils.build_metadata_filter_fn``): a node without the key
passes only ``!=`` and ``nin``; values Python cannot compare (a str against a number) do not
match, where LlamaIndex's in-memory store raises TypeError. A number outside int64 on an int
property (which holds int64 values only) is decided without the engine: ``year >= 2**70`` admits
no node, ``year < 2**70`` every node that has ``year``.
"""

from __future__ import annotations

import math
import os
import shutil
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

try:
    from llama_index.core.base.embeddings.base import BaseEmbedding
    from llama_index.core.bridge.pydantic import PrivateAttr
    from llama_index.core.callbacks.base import CallbackManager
    from llama_index.core.retrievers import BaseRetriever
    from llama_index.core.schema import (
        BaseNode,
        MetadataMode,
        NodeRelationship,
        NodeWithScore,
        QueryBundle,
        TextNode,
    )
    from llama_index.core.vector_stores.types import (
        BasePydanticVectorStore,
        FilterCondition,
        FilterOperator,
        MetadataFilter,
        MetadataFilters,
        VectorStoreQuery,
        VectorStoreQueryMode,
        VectorStoreQueryResult,
    )
    from llama_index.core.vector_stores.utils import metadata_dict_to_node, node_to_metadata_dict
    from pydantic_core import to_json  # a dependency of pydantic, which llama-index-core requires
    from typing_extensions import Self  # a dependency of llama-index-core
except ImportError as _error:  # pragma: no cover - exercised only without the extra
    raise ImportError('vecgraph.integrations.llama_index needs llama-index-core: pip install "vecgraph[llama-index]"'
                      f" ({_error})") from _error


from .. import embedders
from ..arguments import _INT64_MAX, _INT64_MIN, _filterable, _node_columns
from ..errors import DimensionMismatchError, EmbedderUnavailableError, InvalidArgumentError, _got
from ..graph import Graph, quantize
from ..hybrid import CHANNELS

__all__ = [
    "HYBRID_CHANNELS",
    "REF_DOC_ID",
    "RELATIONSHIP_RELS",
    "VecgraphEmbedding",
    "VecgraphRetriever",
    "VecgraphVectorStore",
    "split_filters",
]

#: The props key holding a node's document id (LlamaIndex's ``ref_doc_id``), declared filterable
#: (str) in every graph the store creates, so that ``delete(ref_doc_id)`` and ``doc_ids`` read a
#: typed column instead of every node's props.
REF_DOC_ID = "ref_doc_id"

#: The edges :meth:`VecgraphVectorStore.add` makes from LlamaIndex node relationships:
#: ``(relationship, rel, forward)``; forward: node --rel--> related node, else the reverse.
RELATIONSHIP_RELS = ((NodeRelationship.NEXT, "next", True), (NodeRelationship.PREVIOUS, "next", False),
                     (NodeRelationship.PARENT, "parent", True), (NodeRelationship.CHILD, "parent", False))

#: The channels of ``VectorStoreQueryMode.HYBRID`` queries: LlamaIndex's hybrid is dense + sparse.
HYBRID_CHANNELS = ("dense", "bm25")

_MAX_FETCH = 100_000  # hybrid_search's largest k: the deepest a post-filtered query looks
_OVERFETCH = 4  # each round of a post-filtered query asks for 4x the previous round
_PUSHED = {FilterOperator.EQ: "==", FilterOperator.IN: "in", FilterOperator.GT: ">", FilterOperator.GTE: ">=",
           FilterOperator.LT: "<", FilterOperator.LTE: "<="}
_INT64 = (_INT64_MIN, _INT64_MAX)
_HIDDEN_PROPS = ("_node_content", "_node_type")  # props that are the node itself, not its metadata
_ALL, _NONE = object(), object()  # a filter every node with the key passes / no node passes


# ------------------------------------------------------------------------------------ filters

def _number(value: Any) -> bool:
    """An int (of any size) or a finite float, not a bool."""
    return isinstance(value, (int, float)) and not isinstance(value, bool) and (
        isinstance(value, int) or math.isfinite(value))


def _in_int64(value: float) -> bool:
    return -(2**63) <= value < 2**63  # exact for ints and floats alike


def _float_exact(value: Any) -> bool:
    """A number that float64 holds exactly (what the engine compares a float64 property with)."""
    try:
        return _number(value) and float(value) == value
    except OverflowError:  # an int beyond the float range
        return False


def _fits(kind: str, op: str, value: Any) -> bool:
    """Whether ``where`` on a property of ``kind`` takes ``op`` with ``value`` and means what the
    metadata comparison means (else the filter is applied after the search)."""
    values = value if op == "in" else [value]
    if op == "in" and not isinstance(value, list):
        return False
    if kind == "str":
        return op in ("==", "in") and all(isinstance(v, str) for v in values)
    if kind in ("int64", "timestamp") and op in ("==", "in") or kind == "timestamp":
        return all(type(v) is int and _INT64[0] <= v <= _INT64[1] for v in values)
    if kind == "int64":  # ranges: ints or reals, rounded inward by the engine
        return all(_number(v) and _in_int64(v) for v in values)
    return all(_float_exact(v) for v in values)  # float64


def _outside_int64(op: str, value: Any) -> Any:
    """A filter ``op value`` on an int64 property, whose values all fit int64, decided for a
    number outside int64: ``_ALL`` when every node that has the property passes, ``_NONE`` when
    none does; otherwise ``value`` (for ``in`` of ints, without the ints outside int64)."""
    if op == "in":
        if isinstance(value, list) and value and all(type(v) is int for v in value):
            kept = [v for v in value if _in_int64(v)]
            return kept if kept else _NONE
        return value
    if _number(value) and (op == ">" and value >= _INT64[1] or op == "<" and value <= _INT64[0]):
        return _NONE  # where= would admit the int64 extreme itself (its bounds are clamped into int64)
    if not _number(value) or _in_int64(value):
        return value
    if op == "==":
        return _NONE
    # every int64 is below 2**63 and above -2**63 - 1
    return _ALL if (value > 0) == (op in ("<", "<=")) else _NONE


def split_filters(filters: MetadataFilters | None, filterable: dict) -> tuple[dict | None, Callable | None]:
    """``(where, residual)``: the part of ``filters`` vecgraph's ``where=`` evaluates inside the
    search (None: none), and a predicate on a node's metadata dict for the rest (None: none).

    A filter goes into ``where`` when the condition is AND (or an OR of one filter), its key is
    a filterable property (``filterable``: ``{name: "str" | "int64" | "float64" |
    "timestamp"}``), its operator is EQ, IN, GT, GTE, LT or LTE, the property's type takes it
    (str: EQ and IN of str; int64: EQ and IN of int, ranges of numbers; float64: numbers;
    timestamp: int microseconds) and no earlier filter used the same key and operator.
    On an int64 property a number outside int64 is decided here (see :func:`_outside_int64`):
    a filter no node passes makes ``where`` admit nothing (``{key: {"in": []}}``), one every
    node with the key passes becomes ``{key: {">=": -2**63}}`` (the key present).
    """
    if filters is None or not filters.filters:
        return None, None
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.OR and len(filters.filters) == 1:
        condition = FilterCondition.AND
    if condition != FilterCondition.AND:
        return None, lambda metadata: _matches(filters, metadata)
    where: dict = {}
    rest: list = []
    present: list = []  # keys that must be there, from filters every int64 value passes
    for item in filters.filters:
        if not isinstance(item, MetadataFilter):  # nested filters
            rest.append(item)
            continue
        op, kind, value = _PUSHED.get(item.operator), filterable.get(item.key), item.value
        if op is not None and kind == "int64":
            value = _outside_int64(op, value)
            if value is _NONE:  # no node passes this filter, hence none passes the AND
                return {item.key: {"in": []}}, None
            if value is _ALL:
                present.append(item.key)
                continue
        if op is None or kind is None or op in where.get(item.key, {}) or not _fits(kind, op, value):
            rest.append(item)
            continue
        where.setdefault(item.key, {})[op] = list(value) if isinstance(value, list) else value
    for key in present:
        where.setdefault(key, {">=": _INT64[0]})
    if not rest:
        return where or None, None
    remaining = MetadataFilters(filters=rest, condition=FilterCondition.AND)

    def residual(metadata: Any) -> bool:
        return _matches(remaining, metadata)

    return where or None, residual


def _matches(filters: MetadataFilters, metadata: dict) -> bool:
    """Whether ``metadata`` passes ``filters`` (nested ones too), as LlamaIndex's
    ``build_metadata_filter_fn`` decides, with NOT: none of the filters holds."""
    found = [_matches(f, metadata) if isinstance(f, MetadataFilters) else _holds(f, metadata.get(f.key))
             for f in filters.filters]
    condition = filters.condition or FilterCondition.AND
    if condition == FilterCondition.AND:
        return all(found)
    if condition == FilterCondition.OR:
        return any(found)
    if condition == FilterCondition.NOT:
        return not any(found)
    raise InvalidArgumentError(f"unknown filter condition {condition!r}; expected and, or, not")


def _holds(item: MetadataFilter, actual: Any) -> bool:
    op = item.operator
    value: Any = item.value  # a list for in, nin, any and all; a scalar otherwise
    if op == FilterOperator.IS_EMPTY:
        return actual is None or actual == "" or actual == []
    if actual is None:
        return op in (FilterOperator.NE, FilterOperator.NIN)
    try:
        if op == FilterOperator.EQ:
            return bool(actual == value)
        if op == FilterOperator.NE:
            return bool(actual != value)
        if op == FilterOperator.GT:
            return bool(actual > value)
        if op == FilterOperator.GTE:
            return bool(actual >= value)
        if op == FilterOperator.LT:
            return bool(actual < value)
        if op == FilterOperator.LTE:
            return bool(actual <= value)
        if op == FilterOperator.IN:
            return actual in value
        if op == FilterOperator.NIN:
            return actual not in value
        if op == FilterOperator.CONTAINS:
            return value in actual
        if op == FilterOperator.TEXT_MATCH:
            return isinstance(actual, str) and isinstance(value, str) and value in actual
        if op == FilterOperator.TEXT_MATCH_INSENSITIVE:
            return isinstance(actual, str) and isinstance(value, str) and value.lower() in actual.lower()
        if op == FilterOperator.ANY:
            return any(v in actual for v in value)
        if op == FilterOperator.ALL:
            return all(v in actual for v in value)
    except TypeError:  # values Python cannot compare: no match
        return False
    raise InvalidArgumentError(f"unknown filter operator {op!r} (key {item.key!r})")


# ------------------------------------------------------------------------------------ reads

def _metadata(props: dict | None) -> dict:
    """A node's metadata as filters see it: its props without the serialized node."""
    return {k: v for k, v in (props or {}).items() if k not in _HIDDEN_PROPS}


class _Nodes:
    """Nodes read from a graph once per query: the raw node dict and its LlamaIndex node."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph
        self.raw: dict = {}

    def get(self, key: Any) -> dict:
        if key not in self.raw:
            self.raw[key] = self.graph.get_node(key, vector=False)
        return self.raw[key]

    def metadata(self, key: Any) -> dict:
        return _metadata(self.get(key)["props"])

    def node(self, key: Any) -> BaseNode:
        return _to_node(key, self.get(key))


def _to_node(key: Any, raw: dict) -> BaseNode:
    """The LlamaIndex node of a graph node: rebuilt from the node JSON the store wrote, or, for a
    node written otherwise, a TextNode of its key, text and props."""
    props = raw["props"] or {}
    if "_node_content" in props:
        return metadata_dict_to_node(props, text=raw["text"])
    return TextNode(id_=str(key), text=raw["text"], metadata=dict(props))


def _collect(fetch: Callable[[int, bool], list], k: int, accept: Callable[[Any], bool] | None,
             total: int, limit: int | None = None) -> list:
    """The first ``k`` of the ranked ``(key, score)`` lists ``fetch(n, exhaustive)`` gives that
    ``accept`` admits (all, when None): asks for k, or for 4k, 16k, ... while too few pass,
    ending with ``exhaustive`` (n = every node, an exact search) when nothing smaller sufficed.
    Every round's n is at most the graph's ``total`` nodes and ``limit`` (None: no other
    limit; hybrid_search: :data:`_MAX_FETCH`)."""
    most = total if limit is None else min(total, limit)
    if accept is None:
        n = min(k, most)
        return fetch(n, n >= total)[:k]
    n = min(max(_OVERFETCH * k, k + 32), most)
    while True:
        exhaustive = n >= most
        kept = [hit for hit in fetch(n, exhaustive) if accept(hit[0])]
        if len(kept) >= k or exhaustive:
            return kept[:k]
        n = min(n * _OVERFETCH, most)


def _accept(nodes: _Nodes, residual: Callable | None, node_ids: set | None,
            doc_ids: set | None) -> Callable[[Any], bool] | None:
    if residual is None and node_ids is None and doc_ids is None:
        return None

    def accept(key: Any) -> bool:
        if node_ids is not None and str(key) not in node_ids:
            return False
        metadata = nodes.metadata(key) if residual is not None or doc_ids is not None else {}
        if doc_ids is not None and metadata.get(REF_DOC_ID) not in doc_ids:
            return False
        return residual is None or residual(metadata)
    return accept


def _hybrid_fetch(graph: Graph, text: str | None, vector: list | None, *, where: dict | None,
                  tenants: list | None, search_kwargs: dict, raw_channel: str | None = None) -> Callable:
    """``fetch(n, exhaustive)`` over :meth:`Graph.hybrid_search`: ranked ``(key, score)``, the fused
    score, or the raw score of ``raw_channel`` (for a one-channel search). Text is embedded here
    once (with ``search_kwargs``' embedder, else the graph's), not again in each round."""
    search_kwargs = dict(search_kwargs)
    embedder = search_kwargs.pop("embedder", None)
    if vector is None and text is not None and any(c in ("dense", "graph")
                                                   for c in search_kwargs.get("channels", CHANNELS)):
        if embedder is None and graph.embedder is not None:
            try:
                embedder = graph.query_embedder()
            except (InvalidArgumentError, EmbedderUnavailableError, DimensionMismatchError):
                embedder = None  # hybrid_search runs bm25 and entity alone and says why
        if embedder is not None:
            vector = graph.embed_query(text, embedder)

    def fetch(n: int, exhaustive: bool) -> list:
        kwargs = dict(search_kwargs)
        if exhaustive:
            kwargs["depth"] = max(kwargs.get("depth") or 0, n)
        # The dense channel's candidates are capped by max_visited (default 2000) as well as by
        # depth (hybrid_search's default: max(3 n, 30)): raised to the depth, capped at the graph's size.
        depth = kwargs.get("depth") or max(3 * n, 30)
        kwargs["max_visited"] = max(kwargs.get("max_visited", 2000), min(depth, _MAX_FETCH, len(graph)))
        res = graph.hybrid_search(text=text, vector=vector, k=n, where=where, tenants=tenants, **kwargs)
        if raw_channel is not None and raw_channel in res.lists:
            scores = dict(zip(res.lists[raw_channel], res.channel_scores[raw_channel]))
            return [(h.key, float(scores.get(h.key, h.score))) for h in res.hits]
        return [(h.key, float(h.score)) for h in res.hits]
    return fetch


def _query_vector(vector: Any, dim: int, what: str) -> np.ndarray:
    if vector is None:
        raise InvalidArgumentError(f"{what} needs a query embedding; got None (embed the query, or use "
                                   "mode text_search)")
    array = np.asarray(vector, dtype=np.float32)
    if array.shape != (dim,):
        raise DimensionMismatchError(f"{what}: the query embedding has shape {array.shape}, the graph's "
                                     f"vectors are ({dim},)")
    return array


# ------------------------------------------------------------------------------------ store

class VecgraphVectorStore(BasePydanticVectorStore):
    """A LlamaIndex vector store on a :class:`vecgraph.Graph` (``stores_text=True``).

    Args:
        path: a graph folder (created with its parents if missing; see
            :meth:`vecgraph.Graph.open`), or None for a graph in memory. A folder that holds a
            graph is opened at once; otherwise the graph is created at the first :meth:`add`
            with the length of its embeddings as ``dim`` (or at once when ``dim`` is given).
        graph: an open :class:`vecgraph.Graph` to use instead (not closed by :meth:`close`).
        dim: the vector length of a new graph (None: the first embeddings').
        metric: "cos" (default), "ip" or "l2" for a new graph; query similarities are the
            graph's scores (cosine, inner product, negative squared distance).
        filterable: ``{metadata key: type}`` (str, int, float or "timestamp"; see
            :class:`vecgraph.Graph`) declared on a new graph, so that filters on those keys
            run inside the search (``where=``); ``ref_doc_id`` (str) is always declared. A
            node whose metadata gives such a key a value of another type is refused. For an
            existing graph these must be among its declared properties.
        tenant: a vecgraph tenant for every node written and the only one read, deleted or
            cleared (None: new nodes go to the default tenant, a node already in the graph keeps
            its own, and reads see every tenant). Node ids are global to the graph: a store with
            a tenant refuses to write an id that is a node of another tenant.
        relationship_edges: link nodes by LlamaIndex relationships (see
            :data:`RELATIONSHIP_RELS`) when both ends are in the graph and in the same tenant
            (edges never cross tenants).
        hybrid_channels: the channels of ``mode="hybrid"`` queries (default dense and bm25).
        flat_metadata: refuse metadata values other than str, int, float and None (as
            LlamaIndex's ``node_to_metadata_dict(flat_metadata=True)``).
        open_kwargs: more arguments of :meth:`vecgraph.Graph.open` (``sync``, ...) or of
            :class:`vecgraph.Graph` for a graph in memory.

    Queries (``VectorStoreQuery``): ``query_embedding`` (float, (dim,)), ``similarity_top_k``
    (>= 1), ``filters`` (see the module docstring: ``where=`` for declared keys, otherwise a
    post-filter with over-fetch), ``node_ids`` (the dense mode scores exactly those nodes;
    other modes post-filter), ``doc_ids`` (``where=`` on ``ref_doc_id``; for both, an empty
    list or None restricts nothing, as in LlamaIndex's other stores), ``query_str``, and
    ``mode``: ``default`` (dense: the nearest node vectors, :meth:`vecgraph.Graph.search` with
    ``hops=0``), ``hybrid`` (:meth:`vecgraph.Graph.hybrid_search` over
    ``hybrid_channels``, convex fusion; ``alpha`` weighs dense by alpha and bm25 by
    1 - alpha, as in LlamaIndex; similarities: fused scores in [0, sum of weights];
    ``hybrid_top_k`` overrides ``similarity_top_k``) or ``text_search`` (BM25 only, raw BM25
    scores). Other modes raise InvalidArgumentError.

    Raises:
        InvalidArgumentError: bad arguments, ``filterable`` that the existing graph does not
            declare; ``graph`` given with ``path``.
        vecgraph errors of :meth:`vecgraph.Graph.open` for the folder.
    """

    stores_text: bool = True
    is_embedding_query: bool = True
    flat_metadata: bool = False
    relationship_edges: bool = True
    hybrid_channels: tuple = HYBRID_CHANNELS

    _graph: Any = PrivateAttr(default=None)  # Graph, or None until the first add
    _owned: bool = PrivateAttr(default=True)
    _path: Any = PrivateAttr(default=None)  # the folder, or None in memory
    _metric: str = PrivateAttr(default="cos")
    _declared: dict = PrivateAttr(default_factory=dict)  # what a new graph declares filterable
    _user_declared: dict = PrivateAttr(default_factory=dict)  # what the caller declared
    _tenant: Any = PrivateAttr(default=None)  # str or None
    _open_kwargs: dict = PrivateAttr(default_factory=dict)

    def __init__(self, path: str | os.PathLike | None = None, *, graph: Graph | None = None,
                 dim: int | None = None, metric: str = "cos", filterable: dict | None = None,
                 tenant: str | None = None, relationship_edges: bool = True,
                 hybrid_channels: Sequence[str] = HYBRID_CHANNELS, flat_metadata: bool = False,
                 **open_kwargs: Any) -> None:
        channels = tuple(hybrid_channels)
        unknown = [c for c in channels if c not in CHANNELS]
        if unknown or not channels:
            raise InvalidArgumentError(f"hybrid_channels must be names from {CHANNELS}, got {list(channels)!r}")
        super().__init__(stores_text=True)
        self.flat_metadata, self.relationship_edges, self.hybrid_channels = flat_metadata, relationship_edges, channels
        if tenant is not None and not isinstance(tenant, str):
            raise TypeError(f"tenant must be a str or None, got {_got(tenant)}")
        self._tenant = tenant
        self._metric = metric
        self._open_kwargs = dict(open_kwargs)
        declared = _filterable(filterable)
        if declared.get(REF_DOC_ID, "str") != "str":
            raise InvalidArgumentError(f"filterable[{REF_DOC_ID!r}] must be str (a document id), "
                                       f"got {declared[REF_DOC_ID]!r}")
        self._declared = {**declared, REF_DOC_ID: "str"}
        self._user_declared = declared
        if graph is not None:
            if path is not None:
                raise InvalidArgumentError("give path or graph, not both")
            if not isinstance(graph, Graph):
                raise TypeError(f"graph must be a vecgraph.Graph, got {_got(graph)}")
            self._graph, self._owned = graph, False
            self._check_declared(graph)
            return
        if path is not None:
            self._path = os.path.abspath(os.fspath(path))
            if os.path.isdir(self._path) and os.listdir(self._path):  # an existing graph: open it now
                graph = Graph.open(self._path, dim, metric if dim is not None else None, **open_kwargs)
                try:
                    self._check_declared(graph)
                except BaseException:
                    graph.close()
                    raise
                self._graph = graph
                return
        if dim is not None:
            self._graph = self._create(dim)

    @classmethod
    def class_name(cls) -> str:
        return "VecgraphVectorStore"

    def _check_declared(self, graph: Graph) -> None:
        have = graph.filterable
        wrong = {k: v for k, v in self._user_declared.items() if have.get(k) != v}
        if wrong:
            raise InvalidArgumentError(
                f"filterable {wrong} is not what the graph declares ({have or 'nothing'}); filterable properties "
                "are fixed when a graph is created")

    def _create(self, dim: int) -> Graph:
        if self._path is None:
            return Graph(dim, self._metric, filterable=self._declared, **self._open_kwargs)
        return Graph.open(self._path, dim, self._metric, filterable=self._declared, **self._open_kwargs)

    @property
    def client(self) -> Graph | None:
        """The :class:`vecgraph.Graph` (None until the first :meth:`add` of a new store)."""
        return self._graph

    @property
    def graph(self) -> Graph | None:
        """The :class:`vecgraph.Graph` (None until the first :meth:`add` of a new store)."""
        return self._graph

    @property
    def tenant(self) -> str | None:
        return self._tenant

    def _tenants(self) -> list | None:
        return None if self._tenant is None else [self._tenant]

    # -------------------------------------------------------------------------------- writes

    def add(self, nodes: Sequence[BaseNode], **add_kwargs: Any) -> list[str]:
        """Write ``nodes`` (each with an embedding), replacing nodes of the same id (upsert); a
        node id repeated in ``nodes`` keeps its last occurrence. All or nothing: a bad node
        changes nothing (and a new folder graph is not created).

        Returns:
            The id of each node of ``nodes``, in their order (a repeated id as often as it came).

        Raises:
            InvalidArgumentError: a node without an embedding, NaN or inf in one, an all-zero
                one under "cos", metadata that is not JSON (the message names the node and the
                key), or that gives a filterable key a value of another type (the message names
                the node); for a store with a tenant, an id that is a node of another tenant
                (node ids are global to the graph: the write would replace that tenant's node).
            DimensionMismatchError: an embedding whose length is not the graph's dim (or, for a
                new graph, the first node's).
            ReadOnlyError, StorageError: as for :meth:`vecgraph.Graph.add_nodes`.
        """
        nodes = list(nodes)
        batch: dict = {}
        for node in nodes:
            batch.pop(node.node_id, None)
            batch[node.node_id] = node
        if not batch:
            return []
        keys = list(batch)
        dim = self._graph.dim if self._graph is not None else None
        rows = []
        for key, node in batch.items():
            if node.embedding is None:
                raise InvalidArgumentError(f"node {key!r} has no embedding; embed the nodes first (VectorStoreIndex "
                                           "does, with its embed_model)")
            row = np.asarray(node.embedding, dtype=np.float32)
            dim = len(row) if dim is None else dim
            if row.shape != (dim,):
                raise DimensionMismatchError(f"node {key!r} has an embedding of shape {row.shape}; the graph's "
                                             f"vectors are ({dim},)")
            if not np.isfinite(row).all():
                raise InvalidArgumentError(f"node {key!r} has NaN or inf in its embedding")
            if self._metric == "cos" and self._graph is None and not row.any():
                raise InvalidArgumentError(f"node {key!r} has an all-zero embedding, which has no cosine")
            rows.append(row)
        matrix = np.stack(rows)
        texts = [node.get_content(metadata_mode=MetadataMode.NONE) for node in batch.values()]
        props = [self._props(key, node) for key, node in batch.items()]
        graph, made = self._graph, False
        if graph is not None:
            self._check_owners(graph, keys)
        else:
            # Every check the write makes, before the graph (a folder) is created.
            _node_columns(keys, matrix, None, texts, self._tenant, None, props, self._declared)
            assert dim is not None
            existed = self._path is not None and os.path.exists(self._path)
            graph, made = self._create(dim), True
        try:
            graph.upsert_nodes(keys, matrix, texts=texts, tenants=self._tenant, props=props)
        except BaseException:
            if made:
                self._discard(graph, existed)
            raise
        self._graph = graph
        if self.relationship_edges:
            self._link(graph, batch.values())
        return [node.node_id for node in nodes]

    def _props(self, key: str, node: BaseNode) -> dict:
        """The props of ``node`` (LlamaIndex's ``node_to_metadata_dict``), or InvalidArgumentError
        naming the node and the metadata key that JSON cannot hold."""
        try:
            return node_to_metadata_dict(node, remove_text=True, flat_metadata=self.flat_metadata)
        except ValueError as error:  # pydantic's PydanticSerializationError, or a metadata value not flat
            for name, value in node.metadata.items():
                try:
                    to_json(value)
                except ValueError:
                    raise InvalidArgumentError(
                        f"node {key!r}: metadata[{name!r}] is {_got(value)}, which is not JSON; metadata values "
                        "must be str, numbers, bool, None, lists or dicts of them") from None
            raise InvalidArgumentError(f"node {key!r}: its metadata cannot be stored: {error}") from None

    def _check_owners(self, graph: Graph, keys: list) -> None:
        """InvalidArgumentError when a store with a tenant would write an id that is a node of
        another tenant: node ids are global to the graph, so the upsert would replace that node
        and move it into this tenant."""
        if self._tenant is None:
            return
        for key in keys:
            if key in graph:
                owner = graph.get_node(key, vector=False)["tenant"]
                if owner != self._tenant:
                    raise InvalidArgumentError(
                        f"node id {key!r} is a node of tenant {owner!r}, not of this store's tenant "
                        f"{self._tenant!r}: node ids are global to the graph (one node per id, whatever its "
                        "tenant), so writing it would replace that tenant's node; nothing was written (give the "
                        "node an id of its own, e.g. prefixed with the tenant)")

    def _discard(self, graph: Graph, existed: bool) -> None:
        """Undo the creation of a graph whose first write failed."""
        graph.close()
        if self._path is None:
            return
        if not existed:
            shutil.rmtree(self._path, ignore_errors=True)
            return
        for entry in os.listdir(self._path):  # the folder was empty before
            full = os.path.join(self._path, entry)
            shutil.rmtree(full, ignore_errors=True) if os.path.isdir(full) else os.unlink(full)

    def _link(self, graph: Graph, nodes: Any) -> None:
        """Add the edges of the nodes' relationships whose two ends are in the graph and in the
        same tenant: a relationship to a node of another tenant gets no edge (the nodes are
        written, the relationship stays in their JSON), so that edges never cross tenants."""
        wanted = set()
        for node in nodes:
            for relationship, rel, forward in RELATIONSHIP_RELS:
                related = node.relationships.get(relationship)
                for info in related if isinstance(related, list) else [related] if related is not None else []:
                    pair = (node.node_id, info.node_id) if forward else (info.node_id, node.node_id)
                    if pair[0] != pair[1]:
                        wanted.add((pair[0], rel, pair[1]))
        stored = _Nodes(graph)
        new = [(s, r, d) for s, r, d in sorted(wanted) if s in graph and d in graph
               and stored.get(s)["tenant"] == stored.get(d)["tenant"]
               and all(e.dst != d for e in graph.neighbors(s, rels=[r], direction="out"))]
        if new:
            graph.add_edges([s for s, _, _ in new], [d for _, _, d in new], rels=[r for _, r, _ in new])

    def _document_keys(self, doc_ids: Sequence[str]) -> list:
        graph = self._graph
        if graph is None:
            return []
        if graph.filterable.get(REF_DOC_ID) == "str":
            return graph.keys(where={REF_DOC_ID: list(doc_ids)}, tenants=self._tenants())
        wanted = set(doc_ids)
        nodes = _Nodes(graph)
        return [k for k in graph.keys(tenants=self._tenants()) if nodes.metadata(k).get(REF_DOC_ID) in wanted]

    def delete(self, ref_doc_id: str, **delete_kwargs: Any) -> None:
        """Delete every node of document ``ref_doc_id`` (and their edges): the nodes whose
        ``ref_doc_id`` is it, read from the filterable column (from every node's props on a graph
        that does not declare it). A document with no node is not an error."""
        if not isinstance(ref_doc_id, str):
            raise TypeError(f"ref_doc_id must be a str, got {_got(ref_doc_id)}")
        keys = self._document_keys([ref_doc_id])
        if keys and self._graph is not None:
            self._graph.delete_nodes(keys, missing_ok=True)

    def delete_nodes(self, node_ids: list[str] | None = None, filters: MetadataFilters | None = None,
                     **delete_kwargs: Any) -> None:
        """Delete the nodes among ``node_ids`` (None: all of the store's) that pass ``filters``;
        ids not in the graph are ignored.

        Raises:
            InvalidArgumentError: neither node_ids nor filters (:meth:`clear` deletes all).
        """
        if node_ids is None and filters is None:
            raise InvalidArgumentError("delete_nodes needs node_ids or filters; clear() deletes every node")
        keys = [n.node_id for n in self.get_nodes(node_ids, filters)]
        if keys and self._graph is not None:
            self._graph.delete_nodes(keys, missing_ok=True)

    def clear(self) -> None:
        """Delete every node of the store (of its tenant, when it has one) and their edges."""
        graph = self._graph
        if graph is None or len(graph) == 0:
            return
        if self._tenant:
            graph.delete_tenant(self._tenant)
        else:
            graph.delete_nodes(graph.keys(tenants=self._tenants()), missing_ok=True)

    def get_nodes(self, node_ids: list[str] | None = None,
                  filters: MetadataFilters | None = None) -> list[BaseNode]:
        """The nodes among ``node_ids`` (in that order; None: every node of the store, in
        insertion order) that pass ``filters``, without their embeddings (the graph keeps int8
        codes: :meth:`vecgraph.Graph.get_node` gives the dequantized vector)."""
        graph = self._graph
        if graph is None:
            return []
        nodes = _Nodes(graph)
        if node_ids is not None:
            keys = [k for k in dict.fromkeys(node_ids) if k in graph
                    and (self._tenant is None or nodes.get(k)["tenant"] == self._tenant)]
            where, residual = None, (None if filters is None else (lambda m: _matches(filters, m)))
        else:
            where, residual = split_filters(filters, graph.filterable)
            keys = graph.keys(where=where, tenants=self._tenants())
        return [nodes.node(k) for k in keys if residual is None or residual(nodes.metadata(k))]

    def persist(self, persist_path: str = "", fs: Any = None) -> None:
        """Checkpoint a folder graph (:meth:`vecgraph.Graph.checkpoint`); every write is already
        in its WAL, and the folder is the store's persistence: ``persist_path`` is not used."""
        if self._graph is not None and self._graph.path is not None and not self._graph.read_only:
            self._graph.checkpoint()

    def close(self) -> None:
        """Close the graph, when the store opened it (a folder's LOCK is released)."""
        if self._graph is not None and self._owned:
            self._graph.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # -------------------------------------------------------------------------------- query

    def query(self, query: VectorStoreQuery, **kwargs: Any) -> VectorStoreQueryResult:
        """The best ``similarity_top_k`` nodes for ``query`` (see the class docstring).

        Returns:
            VectorStoreQueryResult(nodes, similarities (float), ids (str)), best first; empty
            lists before the first :meth:`add`.

        Raises:
            InvalidArgumentError: a mode other than default, hybrid and text_search; no query
                embedding in the default mode, no query_str in text_search; similarity_top_k < 1;
                alpha outside [0, 1].
            DimensionMismatchError: a query embedding whose length is not the graph's dim.
        """
        mode = getattr(query.mode, "value", query.mode)  # a VectorStoreQueryMode or its str value
        modes = (VectorStoreQueryMode.DEFAULT.value, VectorStoreQueryMode.HYBRID.value,
                 VectorStoreQueryMode.TEXT_SEARCH.value)
        if mode not in modes:
            raise InvalidArgumentError(f"query mode {mode!r} is not supported; vecgraph answers {', '.join(modes)}")
        k = query.hybrid_top_k if mode == "hybrid" and query.hybrid_top_k else query.similarity_top_k
        if isinstance(k, bool) or not isinstance(k, int) or k < 1:
            raise InvalidArgumentError(f"similarity_top_k must be an int >= 1, got {_got(k)}")
        graph = self._graph
        if graph is None or len(graph) == 0:
            return VectorStoreQueryResult(nodes=[], similarities=[], ids=[])
        nodes = _Nodes(graph)
        where, residual = split_filters(query.filters, graph.filterable)
        # An empty list restricts nothing, as in LlamaIndex's other stores: VectorStoreIndex.as_retriever
        # passes node_ids=[] (its index struct lists no node of a store that keeps text).
        doc_ids = set(query.doc_ids) if query.doc_ids else None
        if doc_ids is not None and graph.filterable.get(REF_DOC_ID) == "str" and \
                "in" not in (where or {}).get(REF_DOC_ID, {}):
            where = dict(where or {})
            where[REF_DOC_ID] = {**where.get(REF_DOC_ID, {}), "in": sorted(doc_ids)}
            doc_ids = None
        node_ids = {str(i) for i in query.node_ids} if query.node_ids else None
        if mode == "default":
            vector = _query_vector(query.query_embedding, graph.dim, "a default (dense) query")
            if node_ids is not None:
                hits = self._exact(graph, nodes, vector, query.node_ids or [], where, residual, doc_ids, k)
            else:
                def fetch(n: int, exhaustive: bool) -> list:
                    # hops=0: the seeds are the result; max_visited (default 2000) would cut them
                    res = graph.search(vector, n, seeds=n, hops=0, max_visited=n, where=where,
                                       tenants=self._tenants(), exact=exhaustive)
                    return [(h.key, float(h.score)) for h in res]
                hits = _collect(fetch, k, _accept(nodes, residual, None, doc_ids), len(graph))
        else:
            hits = self._text_query(graph, nodes, query, mode == "text_search", k, where, residual, node_ids,
                                    doc_ids)
        return VectorStoreQueryResult(nodes=[nodes.node(key) for key, _ in hits],
                                      similarities=[score for _, score in hits], ids=[str(key) for key, _ in hits])

    def _text_query(self, graph: Graph, nodes: _Nodes, query: VectorStoreQuery, bm25_only: bool, k: int,
                    where: dict | None,
                    residual: Callable | None, node_ids: set | None, doc_ids: set | None) -> list:
        text = query.query_str or None
        if bm25_only:
            if text is None:
                raise InvalidArgumentError("a text_search query needs query_str; got none")
            kwargs: dict = {"channels": ("bm25",)}
            vector = None
        else:
            kwargs = {"channels": self.hybrid_channels}
            vector = None if query.query_embedding is None else \
                _query_vector(query.query_embedding, graph.dim, "a hybrid query").tolist()
            if text is None and vector is None:
                raise InvalidArgumentError("a hybrid query needs query_str, a query embedding or both")
            if query.alpha is not None:
                alpha = query.alpha
                if not _number(alpha) or not 0.0 <= alpha <= 1.0:
                    raise InvalidArgumentError(f"alpha must be in [0, 1] (0: bm25 only, 1: dense only), got "
                                               f"{_got(alpha)}")
                kwargs["weights"] = {"dense": alpha, "bm25": 1.0 - alpha}
        fetch = _hybrid_fetch(graph, text, vector, where=where, tenants=self._tenants(), search_kwargs=kwargs,
                              raw_channel="bm25" if bm25_only else None)
        return _collect(fetch, k, _accept(nodes, residual, node_ids, doc_ids), len(graph), _MAX_FETCH)

    def _exact(self, graph: Graph, nodes: _Nodes, vector: np.ndarray, node_ids: Sequence[str], where: dict | None,
               residual: Callable | None, doc_ids: set | None, k: int) -> list:
        """The dense query restricted to ``node_ids``: every one of them scored (exact)."""
        admitted = set(graph.keys(where=where, tenants=self._tenants())) if where or self._tenant is not None \
            else None
        accept = _accept(nodes, residual, None, doc_ids)
        keys = [key for key in dict.fromkeys(str(i) for i in node_ids) if key in graph
                and (admitted is None or key in admitted) and (accept is None or accept(key))]
        if not keys:
            return []
        # Scored as the search scores: both sides int8-quantized (vecgraph.quantize), then dequantized.
        codes, scales = graph.quantized(keys)
        rows = codes.astype(np.float64) * scales[:, None]
        query_codes, query_scale = quantize(vector[None], graph.metric)
        q = query_codes[0].astype(np.float64) * query_scale[0]
        if graph.metric == "cos":
            norms = np.linalg.norm(rows, axis=1) * np.linalg.norm(q)
            scores = rows @ q / np.where(norms > 0, norms, 1.0)
        elif graph.metric == "ip":
            scores = rows @ q
        else:
            scores = -((rows - q) ** 2).sum(axis=1)
        order = sorted(range(len(keys)), key=lambda i: -scores[i])[:k]
        return [(keys[i], float(scores[i])) for i in order]


# ------------------------------------------------------------------------------------ retriever

class VecgraphRetriever(BaseRetriever):
    """A LlamaIndex retriever over :meth:`vecgraph.Graph.hybrid_search`: dense, BM25, graph and
    entity channels fused (convex fusion of normalised scores by default: Bruch, Gai & Ingber,
    ACM TOIS 2023; see :mod:`vecgraph.hybrid`).

    Args:
        source: a :class:`VecgraphVectorStore` (its graph and tenant) or a :class:`vecgraph.Graph`.
        embed_model: embeds the query for the dense and graph channels (a
            :class:`VecgraphEmbedding` is checked against the graph's recorded embedder).
            None: a query bundle's own ``embedding``, else the text channels only (bm25, entity).
        similarity_top_k: results wanted (>= 1).
        filters: ``MetadataFilters``, as for :meth:`VecgraphVectorStore.query` (``where=`` for
            declared keys, otherwise applied after the search with over-fetch).
        channels: channels of :meth:`vecgraph.Graph.hybrid_search` (default all four).
        callback_manager, verbose: as for LlamaIndex's ``BaseRetriever``.
        search_kwargs: more arguments of :meth:`vecgraph.Graph.hybrid_search` (``weights``,
            ``fusion``, ``hops``, ``rels``, ``where``, ``tenants``, ...).

    ``retrieve(query)`` returns ``NodeWithScore`` best first, the score the fused score.

    Raises:
        TypeError: a source of another type; search_kwargs that this retriever sets itself
            (text, vector, k, embedder, or ``where`` together with ``filters``).
        InvalidArgumentError: similarity_top_k < 1.
    """

    def __init__(self, source: VecgraphVectorStore | Graph, *, embed_model: BaseEmbedding | None = None,
                 similarity_top_k: int = 10, filters: MetadataFilters | None = None,
                 channels: Sequence[str] = CHANNELS, callback_manager: CallbackManager | None = None,
                 verbose: bool = False, **search_kwargs: Any) -> None:
        if not isinstance(source, (VecgraphVectorStore, Graph)):
            raise TypeError(f"source must be a VecgraphVectorStore or a vecgraph.Graph, got {_got(source)}")
        if isinstance(similarity_top_k, bool) or not isinstance(similarity_top_k, int) or similarity_top_k < 1:
            raise InvalidArgumentError(f"similarity_top_k must be an int >= 1, got {_got(similarity_top_k)}")
        taken = sorted({"text", "vector", "k", "embedder", "channels"} & set(search_kwargs))
        if taken or (filters is not None and "where" in search_kwargs):
            raise TypeError(f"VecgraphRetriever sets {', '.join(taken) or 'where (from filters)'} itself; "
                            "pass the query to retrieve() and the filters as filters=")
        self._source = source
        self._embed_model = embed_model
        self._top_k = similarity_top_k
        self._filters = filters
        self._channels = tuple(channels)
        self._search_kwargs = dict(search_kwargs)
        super().__init__(callback_manager=callback_manager, verbose=verbose)

    @property
    def graph(self) -> Graph | None:
        return self._source.graph if isinstance(self._source, VecgraphVectorStore) else self._source

    def _retrieve(self, query_bundle: QueryBundle) -> list[NodeWithScore]:
        graph = self.graph
        if graph is None or len(graph) == 0:
            return []
        text = query_bundle.query_str or None
        kwargs = dict(self._search_kwargs, channels=self._channels)
        vector: Any = query_bundle.embedding
        if vector is None and self._embed_model is not None and any(c in ("dense", "graph") for c in self._channels):
            if isinstance(self._embed_model, VecgraphEmbedding) and graph.embedder is not None and text is not None:
                kwargs["embedder"] = self._embed_model.embedder  # checked against the graph's record
            elif query_bundle.embedding_strs:
                vector = self._embed_model.get_agg_embedding_from_queries(query_bundle.embedding_strs)
        if vector is not None:
            vector = _query_vector(vector, graph.dim, "VecgraphRetriever").tolist()
        tenants = kwargs.pop("tenants", None)
        if isinstance(self._source, VecgraphVectorStore) and self._source.tenant is not None and tenants is None:
            tenants = [self._source.tenant]
        where = kwargs.pop("where", None)
        nodes = _Nodes(graph)
        residual = None
        if self._filters is not None:
            where, residual = split_filters(self._filters, graph.filterable)
        fetch = _hybrid_fetch(graph, text, vector, where=where, tenants=tenants, search_kwargs=kwargs)
        hits = _collect(fetch, self._top_k, _accept(nodes, residual, None, None), len(graph), _MAX_FETCH)
        return [NodeWithScore(node=nodes.node(key), score=score) for key, score in hits]


# ------------------------------------------------------------------------------------ embedding

class VecgraphEmbedding(BaseEmbedding):
    """A vecgraph embedder as a LlamaIndex embedding model: texts and queries embedded alike.

    Args:
        embedder: a spec for :func:`vecgraph.embedders.load` (default ``"wordllama"``: offline,
            256-d; ``pip install "vecgraph[embed]"``) or an embedder object (``name``, ``dim``,
            ``__call__(texts) -> (n, dim) float32``).
        kwargs: fields of LlamaIndex's ``BaseEmbedding`` (``embed_batch_size``, ...).

    Raises:
        vecgraph.errors.EmbedderUnavailableError (an ImportError): the embedder's package is
            missing; InvalidArgumentError / TypeError: a bad spec or object (see
            :func:`vecgraph.embedders.load`).
    """

    _embedder: Any = PrivateAttr(default=None)

    def __init__(self, embedder: Any = "wordllama", **kwargs: Any) -> None:
        loaded = embedders.load(embedder) if isinstance(embedder, str) else embedders.check_embedder(embedder)
        kwargs.setdefault("model_name", loaded.name)
        super().__init__(**kwargs)
        self._embedder = loaded

    @classmethod
    def class_name(cls) -> str:
        return "VecgraphEmbedding"

    @property
    def embedder(self) -> Any:
        """The vecgraph embedder (for :meth:`vecgraph.Graph.hybrid_search`'s ``embedder=``)."""
        return self._embedder

    @property
    def dim(self) -> int:
        return int(self._embedder.dim)

    def _embed(self, texts: list[str]) -> list[list[float]]:
        out = embedders.check_output(self._embedder, texts, self._embedder(list(texts)))
        return [[float(x) for x in row] for row in out]

    def _get_query_embedding(self, query: str) -> list[float]:
        return self._embed([query])[0]

    async def _aget_query_embedding(self, query: str) -> list[float]:
        return self._embed([query])[0]

    def _get_text_embedding(self, text: str) -> list[float]:
        return self._embed([text])[0]

    def _get_text_embeddings(self, texts: list[str]) -> list[list[float]]:
        return self._embed(texts)
