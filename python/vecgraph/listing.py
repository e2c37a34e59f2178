"""Listing nodes as a table: :meth:`vecgraph.Graph.nodes` (bound there).

A user's memories, a label's members, the nodes of a time window: the filters of
:meth:`vecgraph.Graph.search` select them, and they come back as one ``pyarrow.Table`` with
the columns asked for, in insertion order.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Optional

import numpy as np
import pyarrow as pa

from .entities import ALIAS_SEPARATOR
from .errors import InvalidArgumentError, NotFoundError
from .results import _key_array

if TYPE_CHECKING:  # the class this function is a method of (graph.py imports this module)
    from .graph import Graph

__all__ = ["NODE_COLUMNS", "DEFAULT_NODE_COLUMNS", "nodes"]

NODE_COLUMNS = ("key", "label", "tenant", "ts", "text", "props", "aliases", "vector")
"""The columns every node has; any other name given to ``columns`` is a property (from props)."""
DEFAULT_NODE_COLUMNS = ("key", "label", "tenant", "ts", "text", "props")


def _columns(columns: Any) -> tuple:
    if columns is None:
        return DEFAULT_NODE_COLUMNS
    if isinstance(columns, str) or not isinstance(columns, Sequence):
        raise TypeError(f"columns must be a list of column names, got {type(columns).__name__} {columns!r:.60}")
    names = tuple(columns)
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise TypeError(f"columns[{i}] must be a non-empty str, got {type(name).__name__} {name!r:.40}")
    if len(set(names)) != len(names):
        raise InvalidArgumentError(f"columns names a column twice: {list(names)}")
    if not names:
        raise InvalidArgumentError(f"columns is empty; choose from {', '.join(NODE_COLUMNS)} or property names")
    return names


def nodes(
    self: Graph,
    *,
    where: Optional[dict] = None,
    tenants: Optional[Sequence[str]] = None,
    labels: Optional[Sequence[str]] = None,
    since: Any = None,
    until: Any = None,
    columns: Optional[Sequence[str]] = None,
    limit: Optional[int] = None,
) -> pa.Table:
    """The live nodes that pass the filters, as a table, in insertion order (the order of
    :meth:`keys`).

    >>> import numpy as np, vecgraph as vg
    >>> g = vg.Graph(2)
    >>> g.add_nodes(["a", "b"], np.eye(2), texts=["x", "y"], tenants=["u1", "u2"], props=[{"n": 1}, None])
    >>> g.nodes(tenants=["u1"], columns=["key", "text", "n"]).to_pylist()
    [{'key': 'a', 'text': 'x', 'n': 1}]

    Args:
        where, tenants, labels, since, until: the filters of :meth:`search` (None: no
            condition).
        columns: the columns wanted, in order (default ``key, label, tenant, ts, text,
            props``): ``key`` (string; int64 when every key listed is an int; a mix gives
            strings), ``label``, ``tenant``, ``text`` (string), ``ts`` (timestamp[us, UTC]),
            ``props`` (the props as JSON text, null for none), ``aliases`` (list of string),
            ``vector`` (fixed_size_list<float32>[dim], dequantized: codes * scale, as
            :meth:`get_node` gives it); any other name is a property read from each node's
            props (its type inferred by Arrow, JSON text when the nodes give it values of
            several types; null where a node lacks it).
        limit: at most this many nodes (the first by insertion order); None: all.

    Returns:
        ``pyarrow.Table`` with one row per node (``.to_pandas()`` for a DataFrame).

    Raises:
        InvalidArgumentError / TypeError: bad filters (as :meth:`search`), a columns list that
            is empty, repeats a name or holds a non-str, a limit < 0, a column that is no node
            field and no property of any node listed (a misspelt field).
    """
    names = _columns(columns)
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise InvalidArgumentError(f"limit must be an int >= 0 or None, got {limit!r}")
    keys = self.keys(labels=labels, tenants=tenants, where=where, since=since, until=until)
    if limit is not None:
        keys = keys[:limit]
    engine = self._engine
    for _ in range(3):  # a node deleted between keys() and the reads: read again without it
        try:
            return _table(self, engine, keys, names)
        except NotFoundError:
            keys = [k for k in keys if k in self]
    return _table(self, engine, keys, names)


def _table(graph: Any, engine: Any, keys: list, names: tuple) -> pa.Table:
    need_columns = any(n in ("label", "tenant", "ts", "text") for n in names)
    texts, tenants, labels, ts = engine.text_columns(keys) if need_columns and keys else ([], [], [], [])
    records = [engine.get_node(key, False) for key in keys] if any(
        n not in ("key", "label", "tenant", "ts", "text", "vector") for n in names) else []
    props = [r["props"] or None for r in records]
    parsed: Optional[list] = None  # the props as dicts, parsed once for every property column
    arrays = []
    for name in names:
        if name == "key":
            arrays.append(_key_array(keys))
        elif name in ("label", "tenant", "text"):
            arrays.append(pa.array({"label": labels, "tenant": tenants, "text": texts}[name], pa.string()))
        elif name == "ts":
            arrays.append(pa.array(np.asarray(ts, np.int64), pa.int64()).cast(pa.timestamp("us", tz="UTC")))
        elif name == "props":
            arrays.append(pa.array(props, pa.string()))
        elif name == "aliases":
            aliases = [r["aliases"].split(ALIAS_SEPARATOR) if r["aliases"] else [] for r in records]
            arrays.append(pa.array(aliases, pa.list_(pa.string())))
        elif name == "vector":
            codes, scales = graph.quantized(keys) if keys else (np.zeros((0, graph.dim), np.int8), np.zeros(0))
            matrix = (codes.astype(np.float32) * np.asarray(scales, np.float32)[:, None]).reshape(-1)
            arrays.append(pa.FixedSizeListArray.from_arrays(pa.array(matrix, pa.float32()), graph.dim))
        else:
            if parsed is None:
                parsed = [json.loads(p) if p else None for p in props]
            if keys and not any(isinstance(p, dict) and name in p for p in parsed):
                raise InvalidArgumentError(
                    f"column {name!r} is neither a node field ({', '.join(NODE_COLUMNS)}) nor a property of any of "
                    f"the {len(keys):,} nodes listed")
            values = [p.get(name) if isinstance(p, dict) else None for p in parsed]
            try:
                arrays.append(pa.array(values))
            except (pa.ArrowInvalid, pa.ArrowTypeError):  # values of several types: as JSON text
                arrays.append(pa.array([None if v is None else json.dumps(v) for v in values], pa.string()))
    return pa.Table.from_arrays(arrays, names=list(names))
