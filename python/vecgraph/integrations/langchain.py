"""LangChain integration: a vector store, a hybrid retriever and memory tools on vecgraph.

``pip install "vecgraph[langchain]"`` (langchain-core). Three pieces:

- :class:`VecgraphVectorStore`, a ``langchain_core.vectorstores.VectorStore`` over a
  :class:`vecgraph.Graph` (in memory or in a folder): each document is a node, its id the
  node key, its text the node text, its metadata the node props (stored as JSON), its vector
  the LangChain embedding of its text. Adding an id already there replaces it (upsert).
  Scores are cosine similarities (higher is better).
- :class:`VecgraphRetriever`, a ``langchain_core.retrievers.BaseRetriever`` over
  :meth:`vecgraph.Graph.hybrid_search`: dense, BM25, graph and entity channels, fused; each
  Document carries the node key, its fused score and its rank in every channel.
- :func:`memory_tools`: ``remember``, ``recall``, ``card`` and ``forget`` of a
  :class:`vecgraph.Memory` as LangChain ``StructuredTool`` objects bound to one user.

A LangChain ``Embeddings`` object becomes a vecgraph embedder through
:class:`LangChainEmbedder` (``name``, ``dim``, ``__call__``), which the store records in the
graph with :meth:`vecgraph.Graph.use_embedder`: a graph built with one model refuses another.
"""

from __future__ import annotations

import datetime
import functools
import json
import math
import numbers
import operator
import uuid
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any

import numpy as np

try:
    from langchain_core.callbacks import CallbackManagerForRetrieverRun
    from langchain_core.documents import Document
    from langchain_core.embeddings import Embeddings
    from langchain_core.retrievers import BaseRetriever
    from langchain_core.tools import StructuredTool, ToolException
    from langchain_core.vectorstores import VectorStore
    from langchain_core.vectorstores.utils import maximal_marginal_relevance
    from pydantic import ConfigDict, Field, PrivateAttr, StrictBool
except ImportError as _error:  # pragma: no cover - the message is the point
    raise ImportError('vecgraph.integrations.langchain needs langchain-core: pip install "vecgraph[langchain]" '
                      f"({_error})") from _error

from .. import embedders
from ..arguments import _json_default as _props_value
from ..arguments import _INT64_MAX, _INT64_MIN, _values_list, _where
from ..errors import (
    DimensionMismatchError,
    DuplicateKeyError,
    InvalidArgumentError,
    NotFoundError,
    _got,
    _short,
)
from ..graph import Graph
from ..hybrid import CHANNELS
from ..memory import Memory

__all__ = ["LangChainEmbedder", "VecgraphRetriever", "VecgraphVectorStore", "memory_tools", "relevance_score"]

#: The text the adapter embeds once to learn an embedding model's width when it is not given.
DIM_PROBE_TEXT = "vecgraph dimension probe"

#: The first over-fetch of a filter on props that are not filterable columns: this many times k.
POST_FILTER_FETCH_FACTOR = 4


# --------------------------------------------------------------------------- the embedder


def _model_id(embeddings: Any) -> str:
    """The model name a LangChain Embeddings object carries in the usual attribute, or ""."""
    for attribute in ("model", "model_name", "model_id"):
        value = getattr(embeddings, attribute, None)
        if isinstance(value, str) and value:
            return value
    return ""


class LangChainEmbedder:
    """A LangChain ``Embeddings`` object as a vecgraph embedder (see :mod:`vecgraph.embedders`).

    Args:
        embeddings: any object with LangChain's ``embed_documents(texts) -> list[list[float]]``
            and ``embed_query(text) -> list[float]``.
        name: the name recorded in a graph (default ``"langchain/<class>[/<model>]/<dim>"``,
            ``<model>`` from its ``model``, ``model_name`` or ``model_id`` attribute): give the
            model's own name when the class is generic, so that a graph refuses another model.
        dim: the width of its vectors; None: learned by embedding :data:`DIM_PROBE_TEXT` once.

    Calling it embeds documents (``embed_documents``); :meth:`embed_query` embeds a query
    (``embed_query``: some models embed the two differently). Both check what came back.

    Raises:
        TypeError: ``embeddings`` lacks embed_documents / embed_query; name or dim of the wrong type.
        InvalidArgumentError: an empty name, a dim < 1.
        DimensionMismatchError: the probe's vector is empty.
    """

    def __init__(self, embeddings: Any, *, name: str | None = None, dim: int | None = None) -> None:
        missing = [m for m in ("embed_documents", "embed_query") if not callable(getattr(embeddings, m, None))]
        if missing:
            raise TypeError(f"expected a LangChain Embeddings object (embed_documents and embed_query), got "
                            f"{type(embeddings).__name__}, which lacks {', '.join(missing)}")
        self.embeddings = embeddings
        if dim is None:
            dim = len(self._row(embeddings.embed_query(DIM_PROBE_TEXT), None, "embed_query"))
            if dim == 0:
                raise DimensionMismatchError(f"{type(embeddings).__name__}.embed_query returned an empty vector")
        if isinstance(dim, bool) or not isinstance(dim, (int, np.integer)):
            raise TypeError(f"dim must be an int, got {_got(dim)}")
        if dim < 1:
            raise InvalidArgumentError(f"dim must be >= 1, got {dim}")
        self.dim = int(dim)
        if name is None:
            model = _model_id(embeddings)
            name = f"langchain/{type(embeddings).__name__}" + (f"/{model}" if model else "") + f"/{self.dim}"
        if not isinstance(name, str):
            raise TypeError(f"name must be a str, got {_got(name)}")
        if not name:
            raise InvalidArgumentError("name must not be empty: a graph records it to refuse other models")
        self.name = name

    def _row(self, vector: Any, dim: int | None, method: str) -> np.ndarray:
        try:
            row = np.asarray(vector, dtype=np.float32)
        except (TypeError, ValueError) as e:
            raise TypeError(f"{type(self.embeddings).__name__}.{method} returned {_got(vector)}, expected a list "
                            "of floats") from e
        if row.ndim != 1 or (dim is not None and row.shape[0] != dim):
            raise DimensionMismatchError(f"{type(self.embeddings).__name__}.{method} returned a vector of shape "
                                         f"{row.shape}, expected ({dim},)")
        if not np.isfinite(row).all():
            raise InvalidArgumentError(f"{type(self.embeddings).__name__}.{method} returned NaN or inf")
        return row

    def __call__(self, texts: Sequence[str]) -> np.ndarray:
        """Document vectors, float32 of shape (len(texts), dim), C-contiguous.

        Raises:
            DimensionMismatchError: the model returned another number of rows or another width
                (the message names both). InvalidArgumentError: NaN or inf (naming the row).
        """
        texts = list(texts)
        if not texts:
            return np.zeros((0, self.dim), np.float32)
        rows = self.embeddings.embed_documents(texts)
        owner = f"{type(self.embeddings).__name__}.embed_documents"
        try:
            matrix = np.ascontiguousarray(np.asarray(rows, dtype=np.float32))
        except ValueError:  # rows of different lengths
            widths = sorted({len(r) for r in rows})
            raise DimensionMismatchError(f"{owner} returned vectors of widths {widths}, expected {self.dim}") from None
        if matrix.ndim != 2 or matrix.shape != (len(texts), self.dim):
            raise DimensionMismatchError(f"{owner} returned shape {matrix.shape} for {len(texts)} texts, expected "
                                         f"({len(texts)}, {self.dim}) (embedder {self.name!r})")
        finite = np.isfinite(matrix).all(axis=1)
        if not finite.all():
            row = int(np.argmin(finite))
            raise InvalidArgumentError(f"{owner} returned NaN or inf for text {row} ({texts[row][:40]!r})")
        return matrix

    def embed_query(self, text: str) -> np.ndarray:
        """The query vector of ``text``, float32 (dim,).

        Raises:
            TypeError: text not a str. DimensionMismatchError: a vector of another width.
        """
        if not isinstance(text, str):
            raise TypeError(f"a query must be a str, got {_got(text)}")
        return self._row(self.embeddings.embed_query(text), self.dim, "embed_query")

    def __repr__(self) -> str:
        return f"LangChainEmbedder(name={self.name!r}, dim={self.dim})"


def _adapter(embedding: Any, name: str | None) -> LangChainEmbedder:
    if isinstance(embedding, LangChainEmbedder):
        if name is not None and name != embedding.name:
            raise InvalidArgumentError(f"embedder_name {name!r} differs from the LangChainEmbedder's name "
                                       f"{embedding.name!r}")
        return embedding
    return LangChainEmbedder(embedding, name=name)


# --------------------------------------------------------------------------- filters

_OPERATORS: dict = {"==": operator.eq, ">": operator.gt, ">=": operator.ge, "<": operator.lt, "<=": operator.le}
_INT64 = (_INT64_MIN, _INT64_MAX)


def _equal(a: Any, b: Any) -> bool:
    # True == 1 in Python; a filter on a number does not match a bool, as vecgraph's where does not.
    return isinstance(a, bool) == isinstance(b, bool) and a == b


def _condition_holds(value: Any, condition: dict) -> bool:
    """``condition`` (``{op: operand}`` from :func:`_post_condition`) holds for a prop
    ``value`` as vecgraph's ``where`` reads it: equality, membership, ranges of numbers; a
    missing value or None never passes."""
    if value is None:
        return False
    for op, operand in condition.items():
        if op == "in":
            if not any(_equal(value, item) for item in operand):
                return False
        elif op == "==":
            if not _equal(value, operand):
                return False
        elif isinstance(value, bool) or not isinstance(value, numbers.Real) or not _OPERATORS[op](value, operand):
            return False  # a range holds for numbers only (a str or a bool prop never passes one)
    return True


def _check_filter(filter: Any) -> dict:
    if filter is None:
        return {}
    if not isinstance(filter, dict):
        raise TypeError(f"filter must be a dict {{metadata key: value}} of conditions that all hold, got {_got(filter)}")
    for key, condition in filter.items():
        if not isinstance(key, str):
            raise TypeError(f"filter keys must be metadata names (str), got {_got(key)}")
        if isinstance(condition, dict):
            unknown = [op for op in condition if op not in _OPERATORS and op != "in"]
            if unknown or not condition:
                raise InvalidArgumentError(f"filter[{key!r}]: operators are ==, in, >, >=, <, <=; got {condition!r}")
            if "in" in condition and (isinstance(condition["in"], (str, bytes)) or
                                      not isinstance(condition["in"], Iterable)):
                raise TypeError(f"filter[{key!r}]['in'] must be a list of values, got {_got(condition['in'])}")
        elif condition is None:
            raise InvalidArgumentError(f"filter[{key!r}] is None, which no document matches (a missing value never "
                                       "passes a filter)")
    return dict(filter)


def _post_condition(key: str, condition: Any) -> dict:
    """A condition on a key that is not a filterable column, as ``{op: operand}`` ("in": a
    list), checked as ``where`` checks one on a declared key (see VecgraphVectorStore's
    docstring); datetimes, dates and NumPy scalars as the props store them."""
    given = condition if isinstance(condition, dict) else {"in": condition} if _values_list(condition) else \
        {"==": condition}
    out: dict = {}
    kinds: dict = {}  # kind -> one value of it, for the message
    for op, operand in given.items():
        items = []
        for value in (list(operand) if op == "in" else [operand]):
            if isinstance(value, (datetime.date, np.generic)):
                value = _props_value(value)  # datetimes: microseconds since the epoch; NaT: None
            kind = "bool" if isinstance(value, bool) else "str" if isinstance(value, str) else \
                "int" if isinstance(value, numbers.Integral) else "float" if isinstance(value, numbers.Real) else None
            if kind is None:
                raise InvalidArgumentError(f"filter[{key!r}][{op!r}]: values are str, numbers, bools, datetimes or "
                                           f"dates; got {type(value).__name__} {_short(value, 60)}")
            if kind == "int" and not _INT64[0] <= int(value) <= _INT64[1]:
                raise InvalidArgumentError(f"filter[{key!r}][{op!r}] must fit int64 ([-2**63, 2**63 - 1]), got {value}")
            if kind in ("bool", "str") and op not in ("==", "in"):
                raise InvalidArgumentError(f"filter[{key!r}][{op!r}]: a range takes a number or a datetime, got "
                                           f"{type(value).__name__} {_short(value, 60)} (as where= refuses it; "
                                           "compare str and bool values with == or in)")
            kinds.setdefault(kind, value)
            items.append(value)
        out[op] = items if op == "in" else items[0]
    types = {"int": "number", "float": "number"}
    mixed = sorted({types.get(kind, kind): value for kind, value in kinds.items()}.items())
    if len(mixed) > 1:
        (first, one), (second, other) = mixed[:2]
        raise InvalidArgumentError(f"filter[{key!r}] compares a {first} ({_short(one, 40)}) and a {second} "
                                   f"({_short(other, 40)}) with the same metadata value: where= refuses it (a "
                                   "property holds one type)")
    if kinds and "bool" not in kinds:
        column = "str" if "str" in kinds else "float64" if "float" in kinds else "int64"
        try:  # where's own checks and messages: NaN, inf, int64 bounds, Unicode
            _where({key: out}, {key: column})
        except InvalidArgumentError as e:
            raise InvalidArgumentError(str(e).replace("where[", "filter[", 1)) from None
    return out


def relevance_score(score: float, metric: str = "cos") -> float:
    """A search score on LangChain's relevance scale [0, 1] (1: most similar).

    ``"cos"`` and ``"ip"``: the similarity clipped to [0, 1] (a cosine below 0 is as
    irrelevant as 0; int8 rounding can push a cosine a hair above 1). ``"l2"``, whose score
    is minus the squared distance: ``1 - distance / sqrt(2)``, clipped, LangChain's rule for
    unit vectors (``VectorStore._euclidean_relevance_score_fn``).
    """
    if metric == "l2":
        value = 1.0 - math.sqrt(max(0.0, -score)) / math.sqrt(2.0)
    else:
        value = score
    return min(1.0, max(0.0, float(value)))


# --------------------------------------------------------------------------- the vector store


class VecgraphVectorStore(VectorStore):
    """A LangChain vector store over a :class:`vecgraph.Graph`.

    Each document is a node: id = key (a str; generated with ``uuid4`` when none is given),
    page_content = the node text (also indexed by BM25 for :class:`VecgraphRetriever`),
    metadata = the node props, stored as JSON (a dict of JSON values; it comes back as JSON
    reads it: tuples as lists, datetimes as int microseconds since the epoch), the vector =
    the embedding of the text. Adding a document whose id is already there replaces its text,
    metadata and vector (edges and aliases of the node stay).

    Scores: :meth:`similarity_search_with_score` gives the cosine similarity of the query's
    vector and the document's (on the graph's int8 codes, see :func:`vecgraph.quantize`),
    higher is better, in [-1, 1] (for a graph of metric "ip": the inner product; "l2": minus
    the squared distance). :meth:`similarity_search_with_relevance_scores` maps them to
    [0, 1] with :func:`relevance_score`.

    Filters: ``filter={"key": value, ...}`` keeps documents whose metadata holds every
    condition: a value (equality), a list (membership) or ``{">=": 2020, "<": 2024}``
    (ranges), as vecgraph's ``where``. Keys declared filterable when the graph was created
    (``filterable={"year": int}``, see :class:`vecgraph.Graph`) are applied inside the search
    (``where=``: the seed search returns k admitted documents however few pass); other keys
    are checked on the props of the nearest documents after the search, which fetches
    ``4 k`` of them (``fetch_k``), then 4 times more until k pass, ending with an exact scan
    of every node (each round's seeds and max_visited: the documents fetched, at most every
    node), which ``exact=True`` runs at once: the results of an exact filtered search. Such a
    condition is checked as ``where`` checks one, so a filter means the same either way:
    values are str, numbers, datetimes or dates (as microseconds since the epoch, as props
    store them) and, for ``==`` and ``in``, bools (matching bools only); NaN, inf, an int
    outside int64, a range on a str or bool, a str compared with a number raise
    InvalidArgumentError, with ``where``'s messages where it has one.

    Ids are graph-wide keys, whatever the tenant: stores of two tenants on one graph cannot hold
    the same id (the second refuses to overwrite the first's node: InvalidArgumentError).
    LangChain's ``index()`` derives ids from the content alone, so tenant stores indexing the
    same text collide: give each tenant's ids a tenant prefix (``index(..., key_encoder=lambda
    doc: f"{tenant}:" + hashlib.sha256(doc.page_content.encode()).hexdigest())``), or use one
    graph per tenant.

    Args:
        graph: the graph (``vecgraph.Graph(dim)`` or ``vecgraph.Graph.open(path, dim)``).
        embedding: a LangChain ``Embeddings``, or a :class:`LangChainEmbedder` wrapping one.
            Its width must be the graph's dim; it is recorded in the graph
            (:meth:`vecgraph.Graph.use_embedder`), or checked against the one recorded.
        tenant: None (default: documents go to the default tenant "" unless already in
            another, and searches see every node) or a tenant name: documents are written to
            it, and searches, :meth:`get_by_ids` and :meth:`delete` see only its nodes.
        label: None (no label, every label seen) or a label given to the documents written
            and required of the documents read.
        embedder_name: the name recorded for the embedding (see :class:`LangChainEmbedder`).

    Raises:
        TypeError: graph not a vecgraph.Graph; embedding not an Embeddings.
        DimensionMismatchError: the embedding's width is not the graph's dim (nothing is
            written or recorded).
        InvalidArgumentError: the graph records another embedder.
    """

    def __init__(self, graph: Graph, embedding: Any, *, tenant: str | None = None, label: str | None = None,
                 embedder_name: str | None = None) -> None:
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a vecgraph.Graph, got {_got(graph)}")
        for name, value in (("tenant", tenant), ("label", label)):
            if value is not None and not isinstance(value, str):
                raise TypeError(f"{name} must be a str or None, got {_got(value)}")
        embedder = _adapter(embedding, embedder_name)
        if embedder.dim != graph.dim:
            recorded = graph.embedder
            built = f" (built with embedder {recorded['name']!r})" if recorded else ""
            raise DimensionMismatchError(f"the embeddings {type(embedder.embeddings).__name__} make {embedder.dim}-d "
                                         f"vectors, the graph's dim is {graph.dim}{built}")
        if not (graph.read_only and graph.embedder is None):
            graph.use_embedder(embedder)  # records it, or refuses it when another is recorded
        self._graph = graph
        self._embedder = embedder
        self._tenant = tenant
        self._label = label

    # ----------------------------------------------------------------- making one

    @classmethod
    def from_texts(cls, texts: list[str], embedding: Embeddings, metadatas: Sequence[dict | None] | None = None,
                   *, ids: Sequence[str | None] | None = None, path: Any = None, metric: str = "cos",
                   filterable: dict | None = None, tenant: str | None = None, label: str | None = None,
                   embedder_name: str | None = None, graph_options: dict | None = None,
                   **kwargs: Any) -> VecgraphVectorStore:
        """A store holding ``texts``, on a new graph of the embedding's width: in memory, or in
        the folder ``path`` (created, or opened when it holds a graph: the texts are added).

        Args:
            texts, metadatas, ids: as :meth:`add_texts`.
            embedding: a LangChain ``Embeddings`` (or :class:`LangChainEmbedder`).
            path: None (in memory) or a folder for :meth:`vecgraph.Graph.open`.
            metric, filterable: of a new graph (see :class:`vecgraph.Graph`).
            tenant, label, embedder_name: as for the constructor.
            graph_options: other arguments of ``Graph`` / ``Graph.open`` (``sync``, ...).

        Raises:
            As :meth:`add_texts` and the constructor, before the graph is made; TypeError:
            an unknown keyword argument.
        """
        if kwargs:
            raise TypeError(f"VecgraphVectorStore.from_texts got unexpected keyword arguments {sorted(kwargs)}")
        texts, props, keys = _columns(texts, metadatas, ids)
        embedder = _adapter(embedding, embedder_name)
        vectors = embedder(texts)  # checked before any graph exists
        options = dict(graph_options or {})
        if filterable is not None:
            options["filterable"] = filterable
        if path is None:
            graph = Graph(embedder.dim, metric, **options)
        else:
            graph = Graph.open(path, embedder.dim, metric, **options)
        try:
            store = cls(graph, embedder, tenant=tenant, label=label)
            store._write(texts, props, keys, vectors)
        except BaseException:
            if path is not None:
                graph.close()
            raise
        return store

    @classmethod
    def open(cls, path: Any, embedding: Any, *, tenant: str | None = None, label: str | None = None,
             embedder_name: str | None = None, **graph_options: Any) -> VecgraphVectorStore:
        """The store of the graph folder ``path`` (created when missing, with the embedding's
        width and metric "cos"; recovered when it exists: see :meth:`vecgraph.Graph.open`,
        whose keyword arguments ``graph_options`` are).

        Raises:
            DimensionMismatchError: the folder's graph has another dim than the embedding.
            InvalidArgumentError: the folder records another embedder. And as :meth:`vecgraph.Graph.open`.
        """
        embedder = _adapter(embedding, embedder_name)
        graph = Graph.open(path, embedder.dim, **graph_options)
        try:
            return cls(graph, embedder, tenant=tenant, label=label)
        except BaseException:
            graph.close()
            raise

    @property
    def graph(self) -> Graph:
        """The vecgraph.Graph the documents live in."""
        return self._graph

    @property
    def embedder(self) -> LangChainEmbedder:
        """The embedding as the vecgraph embedder the graph records."""
        return self._embedder

    @property
    def embeddings(self) -> Embeddings:
        return self._embedder.embeddings

    def close(self) -> None:
        """Close the graph (a folder graph syncs its WAL and releases its lock)."""
        self._graph.close()

    # ----------------------------------------------------------------- writes

    def add_texts(self, texts: Iterable[str], metadatas: Sequence[dict | None] | None = None, *,
                  ids: Sequence[str | None] | None = None, batch_size: int | None = None,
                  **kwargs: Any) -> list[str]:
        """Embed ``texts`` and write them as nodes; an id already in the graph is replaced.

        Args:
            texts: the texts (str).
            metadatas: None, or one dict (or None) per text, JSON-serializable.
            ids: None, or one id (str, or None for a generated one) per text.
            batch_size: None (one write: all or nothing) or the number of texts per write
                (each batch is all or nothing; earlier batches stay when a later one fails).

        Returns:
            The ids, in the order of ``texts``.

        Raises:
            ValueError: metadatas or ids of another length than texts.
            TypeError: a text, id or metadata of the wrong type; an unknown keyword argument.
            DuplicateKeyError: an id given twice.
            InvalidArgumentError: metadata that is not JSON, or gives a filterable property a
                value of another type; an id of a node outside the store's tenant or label.
            DimensionMismatchError: the embedding returned vectors of another width.
            Nothing is written when any of these is raised.
        """
        if kwargs:
            raise TypeError(f"add_texts got unexpected keyword arguments {sorted(kwargs)}")
        texts, props, keys = _columns(texts, metadatas, ids)
        if batch_size is not None and (isinstance(batch_size, bool) or not isinstance(batch_size, int)
                                       or batch_size < 1):
            raise InvalidArgumentError(f"batch_size must be None or an int >= 1, got {_got(batch_size)}")
        step = batch_size or max(1, len(texts))
        for start in range(0, len(texts), step):
            end = start + step
            self._write(texts[start:end], props[start:end], keys[start:end], None)
        return keys

    def add_documents(self, documents: list[Document], **kwargs: Any) -> list[str]:
        """Write ``documents`` (their ``id``, or ``ids=[...]`` given here, which takes
        precedence; an id None is generated). The documents are not changed.

        Arguments and errors as :meth:`add_texts`.
        """
        ids = kwargs.pop("ids", None)
        if ids is None and any(doc.id for doc in documents):
            ids = [doc.id for doc in documents]
        return self.add_texts([doc.page_content for doc in documents], [doc.metadata for doc in documents],
                              ids=ids, **kwargs)

    def _write(self, texts: list, props: list, keys: list, vectors: np.ndarray | None) -> None:
        if not texts:
            return
        self._check_ids_in_scope(keys)
        if vectors is None:
            vectors = self._embedder(texts)
        self._graph.upsert_nodes(keys, vectors, texts=texts, props=props, labels=self._label,
                                 tenants=self._tenant)

    def _check_ids_in_scope(self, keys: list) -> None:
        """InvalidArgumentError when an id to write is a node outside the store's tenant or
        label: the write would replace it and move it into them."""
        if self._tenant is None and self._label is None:
            return
        for key in keys:
            if key in self._graph:
                try:
                    node = self._graph.get_node(key, vector=False)
                except NotFoundError:  # deleted meanwhile
                    continue
                if not self._in_scope(node):
                    raise InvalidArgumentError(
                        f"id {key!r} is a node of tenant {node['tenant']!r} and label {node['label']!r}, outside "
                        f"this store's (tenant {self._tenant!r}, label {self._label!r}): refusing to overwrite it. "
                        "Ids are graph-wide keys, whatever the tenant: give each tenant's ids a tenant prefix "
                        "(LangChain's index() derives ids from the content alone: pass it key_encoder= adding "
                        "one), or use one graph per tenant")

    def delete(self, ids: list[str] | None = None, **kwargs: Any) -> bool | None:
        """Delete the documents ``ids`` (ids not in the store are ignored; with a tenant or a
        label, nodes outside them are not this store's and are left alone), or with
        ``ids=None`` every document of the store: its tenant's and label's nodes, or every
        node of the graph when it has neither.

        Returns:
            True.

        Raises:
            TypeError: ids not a list of str; an unknown keyword argument.
        """
        if kwargs:
            raise TypeError(f"delete got unexpected keyword arguments {sorted(kwargs)}")
        if ids is None:
            keys = self._graph.keys(tenants=self._tenants(), labels=self._labels())
        elif self._tenant is None and self._label is None:
            keys = _ids(ids)
        else:  # only the store's own nodes
            keys = [node["key"] for node in self._nodes(_ids(ids))]
        if keys:
            self._graph.delete_nodes(keys, missing_ok=True)
        return True

    # ----------------------------------------------------------------- reads

    def _tenants(self) -> list | None:
        return None if self._tenant is None else [self._tenant]

    def _labels(self) -> list | None:
        return None if self._label is None else [self._label]

    def _in_scope(self, node: dict) -> bool:
        return ((self._tenant is None or node["tenant"] == self._tenant)
                and (self._label is None or node["label"] == self._label))

    def _nodes(self, keys: Iterable[Any]) -> Iterator[dict]:
        """The nodes of ``keys`` that exist and are in the store's tenant and label, once each."""
        seen: set = set()
        for key in keys:
            if (type(key), key) in seen:
                continue
            seen.add((type(key), key))
            try:
                node = self._graph.get_node(key, vector=False)
            except NotFoundError:
                continue
            if self._in_scope(node):
                yield node

    def get_by_ids(self, ids: Sequence[str], /) -> list[Document]:
        """The documents of ``ids`` in the order given, each once; ids not in the store are
        left out (no error).

        Raises:
            TypeError: ids not a list of str.
        """
        return [_document(node) for node in self._nodes(_ids(ids))]

    def similarity_search(self, query: str, k: int = 4, **kwargs: Any) -> list[Document]:
        """The ``k`` documents nearest to the query's embedding, best first (see
        :meth:`similarity_search_with_score` for the arguments)."""
        return [doc for doc, _ in self.similarity_search_with_score(query, k, **kwargs)]

    def similarity_search_with_score(self, query: str, k: int = 4, **kwargs: Any) -> list[tuple[Document, float]]:
        """The ``k`` documents nearest to the query's embedding, best first, each with its
        cosine similarity to the query (higher is better; see the class docstring).

        Args:
            query: the query text, embedded with the embedding's ``embed_query``.
            k: documents wanted (>= 1); fewer when fewer pass the filter.
            filter: None or ``{metadata key: condition}`` (see the class docstring).
            fetch_k: how many nearest documents a filter on non-filterable keys reads first
                (default 4 k).
            exact: True for an exact scan instead of HNSW (with a filter on non-filterable
                keys: a scan of every node, then the filter). ef: HNSW beam width.

        Raises:
            TypeError / InvalidArgumentError: bad k, filter (see the class docstring) or
                options; unknown keyword arguments.
            DimensionMismatchError: the embedding returned a vector of another width.
        """
        return self._search(self._embedder.embed_query(query), k, **kwargs)

    def similarity_search_by_vector(self, embedding: list[float], k: int = 4, **kwargs: Any) -> list[Document]:
        """:meth:`similarity_search` for a query vector (a list of dim floats)."""
        return [doc for doc, _ in self._search(embedding, k, **kwargs)]

    def similarity_search_with_score_by_vector(self, embedding: list[float], k: int = 4,
                                               **kwargs: Any) -> list[tuple[Document, float]]:
        """:meth:`similarity_search_with_score` for a query vector (a list of dim floats)."""
        return self._search(embedding, k, **kwargs)

    def _select_relevance_score_fn(self) -> Callable[[float], float]:
        metric = self._graph.metric
        return lambda score: relevance_score(score, metric)

    def _search(self, vector: Any, k: int, **kwargs: Any) -> list[tuple[Document, float]]:
        return [(_document(node), score) for node, score in self._hits(vector, k, **kwargs)]

    def _hits(self, vector: Any, k: int, *, filter: dict | None = None, fetch_k: int | None = None,
              exact: bool = False, ef: int | None = None) -> list[tuple[dict, float]]:
        """(node, score) of the ``k`` nearest nodes of the store that pass ``filter``, best first."""
        if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
            raise TypeError(f"k must be an int >= 1, got {_got(k)}")
        if k < 1:
            raise InvalidArgumentError(f"k must be >= 1, got {k}")
        conditions = _check_filter(filter)
        filterable = self._graph.filterable
        where = {key: c for key, c in conditions.items() if key in filterable} or None
        post = {key: _post_condition(key, c) for key, c in conditions.items() if key not in filterable}
        if fetch_k is None:
            fetch = k * POST_FILTER_FETCH_FACTOR if post else k
        elif isinstance(fetch_k, bool) or not isinstance(fetch_k, int) or fetch_k < 1:
            raise InvalidArgumentError(f"fetch_k must be an int >= 1, got {_got(fetch_k)}")
        else:
            fetch = max(fetch_k, k)
        if not isinstance(exact, bool):
            raise TypeError(f"exact must be a bool, got {_got(exact)}")
        query = np.asarray(vector, dtype=np.float32) if not isinstance(vector, np.ndarray) else vector
        while True:
            # Each round reads at most every node, as seeds (hops=0: the seeds are the result)
            # and as max_visited (else 2000, which would cut them).
            if (total := len(self._graph)) == 0:
                return []
            n = total if post and exact else min(fetch, total)
            scan = exact or (bool(post) and n >= total)
            result = self._graph.search(query, n, seeds=n, hops=0, max_visited=n, tenants=self._tenants(),
                                        labels=self._labels(), where=where, exact=scan, ef=ef)
            found = []
            for hit in result:
                node = next(self._nodes([hit.key]), None)  # None: deleted since the search
                if node is not None and all(_condition_holds((node["props"] or {}).get(key), condition)
                                            for key, condition in post.items()):
                    found.append((node, float(hit.score)))
                    if len(found) == k:
                        return found
            if not post or scan:
                return found
            fetch = n * POST_FILTER_FETCH_FACTOR

    def max_marginal_relevance_search(self, query: str, k: int = 4, fetch_k: int = 20, lambda_mult: float = 0.5,
                                      **kwargs: Any) -> list[Document]:
        """``k`` documents chosen by maximal marginal relevance (Carbonell & Goldstein, SIGIR
        1998) among the ``fetch_k`` nearest: each next one maximises ``lambda_mult *
        sim(query, d) - (1 - lambda_mult) * max sim(d, chosen)``, over the stored (int8,
        dequantized) vectors. ``filter`` as for :meth:`similarity_search_with_score`."""
        return self.max_marginal_relevance_search_by_vector(self._embedder.embed_query(query).tolist(), k, fetch_k,
                                                            lambda_mult, **kwargs)

    def max_marginal_relevance_search_by_vector(self, embedding: list[float], k: int = 4, fetch_k: int = 20,
                                                lambda_mult: float = 0.5, **kwargs: Any) -> list[Document]:
        """:meth:`max_marginal_relevance_search` for a query vector."""
        candidates = self._hits(embedding, max(fetch_k, k), **kwargs)
        if not candidates:
            return []
        vectors = []
        for node, _ in candidates:
            try:
                vectors.append(self._graph.get_node(node["key"], vector=True)["vector"])
            except NotFoundError:  # deleted since the search: never chosen
                vectors.append(np.zeros(self._graph.dim, np.float32))
        chosen = maximal_marginal_relevance(np.asarray(embedding, dtype=np.float32), vectors, lambda_mult=lambda_mult,
                                            k=k)
        return [_document(candidates[i][0]) for i in chosen]


def _ids(ids: Any) -> list:
    if isinstance(ids, (str, bytes)) or not isinstance(ids, Iterable):
        raise TypeError(f"ids must be a list of str, got {_got(ids)}")
    ids = list(ids)
    for i, key in enumerate(ids):
        if not isinstance(key, str):
            raise TypeError(f"ids[{i}] must be a str, got {_got(key)}")
    return ids


def _columns(texts: Any, metadatas: Any, ids: Any) -> tuple[list, list, list]:
    """(texts, props, keys) checked; generated ids for the ids missing."""
    if isinstance(texts, (str, bytes)) or not isinstance(texts, Iterable):
        raise TypeError(f"texts must be a list of str, got {_got(texts)}")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"texts[{i}] must be a str, got {_got(text)}")
    n = len(texts)
    if metadatas is None:
        props: list = [None] * n
    else:
        metadatas = list(metadatas)
        if len(metadatas) != n:
            raise ValueError(f"metadatas has {len(metadatas)} items, texts has {n} (one metadata dict per text)")
        props = []
        for i, metadata in enumerate(metadatas):
            if metadata is not None and not isinstance(metadata, dict):
                raise TypeError(f"metadatas[{i}] must be a dict or None, got {_got(metadata)}")
            try:
                json.dumps(metadata, allow_nan=False, default=_json_default)
            except (TypeError, ValueError) as e:
                raise InvalidArgumentError(f"metadatas[{i}] is not JSON-serializable: {e}") from e
            props.append(dict(metadata) if metadata else None)
    if ids is None:
        keys = [str(uuid.uuid4()) for _ in range(n)]
    else:
        ids = list(ids)
        if len(ids) != n:
            raise ValueError(f"ids has {len(ids)} items, texts has {n} (one id, or None, per text)")
        keys = []
        for i, key in enumerate(ids):
            if key is not None and not isinstance(key, str):
                raise TypeError(f"ids[{i}] must be a str or None, got {_got(key)}")
            keys.append(key if key else str(uuid.uuid4()))
        seen: set = set()
        for key in keys:
            if key in seen:
                raise DuplicateKeyError(f"id {key!r} is given twice in one call (one document per id)")
            seen.add(key)
    return texts, props, keys


def _json_default(value: Any) -> Any:
    """What vecgraph's props take beyond JSON (datetimes, dates and NumPy scalars, stored as
    microseconds since the epoch or their Python value): a stand-in, for the check only."""
    if isinstance(value, (datetime.datetime, datetime.date, np.generic)):
        return 0
    raise TypeError(f"Object of type {type(value).__name__} is not JSON serializable")


def _document(node: dict, extra: dict | None = None) -> Document:
    metadata = dict(node["props"] or {})
    if extra:
        metadata.update(extra)
    return Document(id=str(node["key"]), page_content=node["text"], metadata=metadata)


# --------------------------------------------------------------------------- the retriever


class VecgraphRetriever(BaseRetriever):
    """A LangChain retriever over :meth:`vecgraph.Graph.hybrid_search`: the dense, BM25, graph
    and entity channels, fused (convex fusion of normalised scores by default; see
    :mod:`vecgraph.hybrid`).

    Each Document: id and ``metadata["key"]`` = the node key (``id`` as a str), page_content =
    the node text, metadata = the node props plus ``"score"`` (the fused score, higher is
    better) and ``"ranks"`` ({channel: rank from 1, or None where that channel did not list
    it}); these two names and ``"key"`` take the place of props of the same name.

    Args:
        graph: a vecgraph.Graph whose nodes have texts (for bm25 and entity) and vectors.
        embedding: how the query text becomes a vector for the dense and graph channels: a
            LangChain ``Embeddings`` (or :class:`LangChainEmbedder`), a vecgraph embedder
            (``name``, ``dim``, ``__call__``), or None: the graph's
            :meth:`~vecgraph.Graph.query_embedder` (the one a :class:`VecgraphVectorStore` on
            the same graph object recorded, else the recorded one loaded by its name); with
            none recorded, only bm25 and entity run. It is checked against the recorded one
            (name and dim), not recorded.
        k: documents per query (``invoke(query, k=3)`` overrides it, as it does every field).
        channels, weights, fusion: as :meth:`vecgraph.Graph.hybrid_search`.
        tenants, labels, where: filters applied inside every channel.
        search_kwargs: any other argument of hybrid_search (hops, rels, since, depth, ...).

    Raises (at construction):
        DimensionMismatchError: an embedding of another width than the graph's dim.
        InvalidArgumentError: an embedding whose name is not the one the graph records, or a
            recorded embedder that does not load by its name (pass ``embedding=``).
        EmbedderUnavailableError: the recorded embedder's package is not installed here.
    """

    model_config = ConfigDict(arbitrary_types_allowed=True)

    graph: Any
    embedding: Any = None
    k: int = 4
    channels: Sequence[str] = CHANNELS
    weights: dict | None = None
    fusion: str = "convex"
    tenants: list[str] | None = None
    labels: list[str] | None = None
    where: dict | None = None
    search_kwargs: dict = Field(default_factory=dict)
    embedder_name: str | None = None

    _embed: Callable[[str], np.ndarray] | None = PrivateAttr(default=None)

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._embed = self._query_embedder()  # raised here, not wrapped in pydantic's ValidationError

    def _query_embedder(self) -> Callable[[str], np.ndarray] | None:
        """How a query text becomes a vector (see the class docstring), checked against the graph."""
        graph = self.graph
        if not isinstance(graph, Graph):
            raise TypeError(f"graph must be a vecgraph.Graph, got {_got(graph)}")
        recorded = graph.embedder
        embedding = self.embedding
        if embedding is None and recorded is not None:
            try:  # the one given to use_embedder on this handle, else the recorded one loaded by name
                embedding = graph.query_embedder()
            except InvalidArgumentError as e:
                raise InvalidArgumentError(f"{e}; or pass embedding= (the LangChain Embeddings or vecgraph embedder "
                                           "that built the graph)") from e
        if embedding is None:
            return None
        if isinstance(embedding, LangChainEmbedder) or (callable(getattr(embedding, "embed_documents", None))
                                                         and callable(getattr(embedding, "embed_query", None))):
            adapter = _adapter(embedding, self.embedder_name)
            if adapter.dim != graph.dim:
                raise DimensionMismatchError(f"the embeddings {type(adapter.embeddings).__name__} make {adapter.dim}-d "
                                             f"vectors, the graph's dim is {graph.dim}")
            if recorded is not None and recorded["name"] != adapter.name:
                raise InvalidArgumentError(
                    f"the graph was built with embedder {recorded['name']!r} (dim {recorded['dim']}); refusing "
                    f"{adapter.name!r}: its vectors are not comparable (pass embedder_name= if it is that model)")
            return adapter.embed_query
        vg_embedder = embedders.check_embedder(embedding)
        if int(vg_embedder.dim) != graph.dim:
            raise DimensionMismatchError(f"embedder {vg_embedder.name!r} makes {vg_embedder.dim}-d vectors, the "
                                         f"graph's dim is {graph.dim}")
        if recorded is not None and recorded["name"] != vg_embedder.name:
            raise InvalidArgumentError(f"the graph was built with embedder {recorded['name']!r}; refusing "
                                       f"embedder {vg_embedder.name!r}: its vectors are not comparable")
        return lambda text: graph.embed_query(text, vg_embedder)

    def _get_relevant_documents(self, query: str, *, run_manager: CallbackManagerForRetrieverRun,
                                **kwargs: Any) -> list[Document]:
        if not isinstance(query, str):
            raise TypeError(f"a query must be a str, got {_got(query)}")
        # the fields left at hybrid_search's defaults are not passed (each costs its checks)
        options = dict(self.search_kwargs)
        for name in ("weights", "tenants", "labels", "where"):
            value = getattr(self, name)
            if value is not None:
                options[name] = value
        if self.fusion != "convex":
            options["fusion"] = self.fusion
        if tuple(self.channels) != CHANNELS:
            options["channels"] = self.channels
        options.update(kwargs)
        k = options.pop("k", self.k)
        vector = options.pop("vector", None)
        if vector is None and query and self._embed is not None:
            vector = self._embed(query)
        graph = self.graph
        documents = []
        for hit in graph.hybrid_search(query or None, vector, k, **options).hits:
            try:
                node = graph.get_node(hit.key, vector=False)
            except NotFoundError:  # deleted since the search
                continue
            documents.append(Document(id=str(hit.key), page_content=node["text"],
                                      metadata={**(node["props"] or {}), "key": hit.key, "score": hit.score,
                                                "ranks": hit.ranks}))
        return documents


# --------------------------------------------------------------------------- memory tools


def _tool_errors(function: Callable) -> Callable:
    """``function`` with vecgraph's errors about its arguments raised as ToolException, which
    a tool with ``handle_tool_error=True`` returns to the model as its result."""
    @functools.wraps(function)
    def call(*args: Any, **kwargs: Any) -> Any:
        try:
            return function(*args, **kwargs)
        except (InvalidArgumentError, NotFoundError, TypeError) as e:
            raise ToolException(str(e)) from e

    return call


def _validation_message(tool: StructuredTool) -> Callable[[Any], str]:
    """What ``tool`` returns to the model when its arguments fail the tool's schema (a missing
    argument, a value of the wrong type): every problem, and the arguments it takes."""
    def kind(schema: dict) -> str:  # the JSON type, as a model reads it ("string | null")
        return " | ".join(map(kind, schema["anyOf"])) if "anyOf" in schema else str(schema.get("type", "any"))

    usage = ", ".join(f"{name}: {kind(schema)}" + (f" = {json.dumps(schema['default'])}" if "default" in schema else "")
                      for name, schema in tool.args.items())

    def message(error: Any) -> str:
        problems = [f"{'.'.join(map(str, item.get('loc', ()))) or 'arguments'}: {item.get('msg', 'invalid')}"
                    + ("" if item.get("type") == "missing" else f" (got {_short(item.get('input'), 60)})")
                    for item in error.errors()]
        return f"invalid arguments for {tool.name}: {'; '.join(problems)}. It takes ({usage})."

    return message


def memory_tools(memory: Memory, user: str, *, source: str = "user", session: str | None = None,
                 k: int = 5, name_prefix: str = "") -> list[StructuredTool]:
    """LangChain tools over ``memory`` for one user: remember, recall, card, forget.

    The user is bound here, not an argument of the tools: a model calling them reaches only
    this user's memories. Bad arguments come back to the model as the tool's result, never
    raised: those failing the tool's schema (one missing, a wrong type; the message names each
    problem and the arguments taken) and those vecgraph refuses (an empty text, an unknown id).

    Tools (named ``name_prefix`` + the name):

    - ``remember(text, kind="fact", supersedes=None)`` -> the new memory's id
      (:meth:`vecgraph.Memory.remember` with ``source`` and ``session`` given here);
    - ``recall(query, k=k)`` -> a list of ``{"id", "text", "kind", "source", "at"}``, best first
      (:meth:`vecgraph.Memory.recall`; at: ISO 8601);
    - ``card(refresh=False)`` -> the user's overview card (:meth:`vecgraph.Memory.card`);
    - ``forget(confirm)`` -> what was erased (:meth:`vecgraph.Memory.forget`, every memory of
      the user, irreversibly; only with ``confirm`` the JSON boolean true: a strict bool, so
      ``"true"``, 1 and other values that pydantic would coerce are refused and erase nothing).

    Returns:
        ``[remember, recall, card, forget]``; for a read-only memory (``memory.graph.read_only``,
        :meth:`vecgraph.Memory.open` with ``read_only=True``) ``[recall, card]`` only, the
        tools that do not write (a card is built, not stored).

    Raises:
        TypeError: memory not a vecgraph.Memory; user not a str.
        InvalidArgumentError: an empty user; k outside [1, 1000].
    """
    if not isinstance(memory, Memory):
        raise TypeError(f"memory must be a vecgraph.Memory, got {_got(memory)}")
    if not isinstance(user, str):
        raise TypeError(f"user must be a str, got {_got(user)}")
    if not user:
        raise InvalidArgumentError("user must be a non-empty str (the tools act on that user's memories)")
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= 1000:
        raise InvalidArgumentError(f"k must be an int in [1, 1000], got {_got(k)}")

    def remember(text: str, kind: str = "fact", supersedes: str | None = None) -> str:
        """Store one memory about the user (a fact, preference, project, ...) for later
        sessions. To correct an earlier memory, pass its id as supersedes. Returns the new id."""
        return memory.remember(user, text, kind=kind, source=source, session=session, supersedes=supersedes)

    def recall(query: str, k: int = k) -> list:
        """Search the user's long-term memory for what answers a question; returns the best
        memories first, each with id, text, kind, source and when it was said (at)."""
        hits = memory.recall(user, query, k)
        return [{"id": h.id, "text": h.text, "kind": h.kind, "source": h.source, "at": h.at.isoformat()}
                for h in hits]

    def card(refresh: bool = False) -> dict:
        """The user's overview card: a short summary of what is known about them.
        refresh=True rebuilds it from the current memories."""
        return memory.card(user, refresh=refresh)

    def forget(confirm: StrictBool) -> dict:
        """Erase everything remembered about the user, irreversibly (right to be forgotten).
        Only with confirm=true (a JSON boolean), after the user asked for it."""
        if confirm is not True:  # the schema admits bools only; anything else erases nothing
            return {"erased": False, "reason": "forget erases every memory of the user; call it with confirm=true "
                                               "only when the user asked for that"}
        receipt = memory.forget(user)
        return {"erased": True, "memories": receipt.memories, "entities": receipt.entities, "cards": receipt.cards,
                "nodes": receipt.nodes, "verified": receipt.verified}

    tools = []
    for function in (recall, card) if memory.graph.read_only else (remember, recall, card, forget):
        tool = StructuredTool.from_function(_tool_errors(function), name=name_prefix + function.__name__,
                                            description=" ".join((function.__doc__ or "").split()),
                                            handle_tool_error=True)
        tool.handle_validation_error = _validation_message(tool)
        tools.append(tool)
    return tools
