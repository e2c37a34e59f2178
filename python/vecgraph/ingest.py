"""Bulk ingestion of nodes and edges from Arrow, Parquet, Arrow IPC, JSONL, CSV, pandas and
networkx, in bounded memory, with row-level validation and a rejects file.

>>> import numpy as np, pyarrow as pa, vecgraph as vg
>>> g = vg.Graph(dim=4)
>>> table = pa.table({"id": ["a", "b"], "vector": [[1, 0, 0, 0], [0, 1, 0, 0]], "label": ["x", "y"]})
>>> print(vg.ingest.nodes(g, table, progress=False))  # doctest: +ELLIPSIS
2 of 2 rows accepted, 0 rejected, in 1 batch (... s, ... rows/s)
>>> _ = vg.ingest.edges(g, pa.table({"source": ["a"], "target": ["b"], "type": ["knows"]}), progress=False)
>>> g.neighbors("a")
[Edge(src='a', rel='knows', dst='b', weight=1.0)]

How it works: the source is read in batches of ``batch_rows`` rows (row ``i`` of the source is
in batch ``i // batch_rows``); each batch is converted to columns and checked row by row with
vectorised NumPy checks; only then is it written with one :meth:`Graph.add_nodes` (or
``upsert_nodes`` / ``add_edges``) call. A batch that fails validation is never written, so it
leaves no trace in the graph or its write-ahead log. Memory stays bounded by a batch, whatever
the size of the source: Parquet is decoded 8,192 rows at a time through a 1 MB read buffer,
Arrow IPC batch by batch (memory-mapped), CSV block by block (pyarrow's streaming reader) and
JSONL ``batch_rows`` lines at a time. At 384-d, a batch of 65,536 rows holds 100 MB of float32
vectors.

Rows are numbered from 0 over the whole source (for JSONL: over the non-blank lines; for CSV
and TSV: over the records after the header, blank lines aside; a record is one line unless a
quoted value in it holds line breaks). A CSV record with more or fewer fields than the header
is a bad row that keeps its number; its reason names its line in the file (see :func:`nodes`).

The readers of each kind of source are in :mod:`vecgraph.ingest_readers`, the column mapping
and the row checks in :mod:`vecgraph.ingest_checks`, the batch loop and its plans in
:mod:`vecgraph.ingest_plan`.
"""

from __future__ import annotations

import os
import time
from typing import Any, Optional, Union

import numpy as np

from .embedders import check_embedder
from .errors import DimensionMismatchError, InvalidArgumentError
from .ingest_checks import _EDGE_DEFAULTS, _NODE_DEFAULTS, _resolve
from .ingest_plan import (
    IngestError,
    IngestReport,
    _deferred_indexing,
    _EdgePlan,
    _NodePlan,
    _options,
    _Rejects,
    _rejects_path,
    _run,
    _run_plan,
)
from .ingest_readers import Source, _configure, _ListSource, _open_source

__all__ = ["nodes", "edges", "from_networkx", "IngestReport", "IngestError"]

# Their public home is this module (tracebacks and pickles name vecgraph.ingest).
IngestReport.__module__ = IngestError.__module__ = __name__


# ====================================================================== arguments


def _same_file(a: str, b: str) -> bool:
    """Whether paths ``a`` and ``b`` name the same file: the same path once symbolic links and
    ``..`` are resolved, or, when both exist, the same inode (a hard link)."""
    if os.path.realpath(a) == os.path.realpath(b):
        return True
    try:
        return os.path.samefile(a, b)
    except OSError:
        return False


def _inside_folder(path: str, folder: str) -> bool:
    """Whether ``path`` is ``folder`` or lies inside it, once symbolic links and ``..`` are resolved."""
    path, folder = os.path.realpath(path), os.path.realpath(folder)
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _check_rejects_path(rejects: Optional[str], source: Source, graph: Any = None) -> None:
    """Refuses a rejects file that is the source file itself: opening it for writing would
    empty the input (or, for JSONL, make the source read its own rejects); and one inside the
    graph's folder, whose files (MANIFEST, WAL segments) it would empty and then remove."""
    if rejects is None:
        return
    folder = getattr(graph, "path", None)
    if isinstance(folder, str) and _inside_folder(rejects, folder):
        raise InvalidArgumentError(f"the rejects file {rejects} is inside the graph folder {folder}: writing "
                                   "the rejects there would destroy the graph's files; name a rejects file "
                                   "elsewhere")
    if not isinstance(source, (str, os.PathLike)):
        return
    path = os.fspath(source)
    if isinstance(path, str) and _same_file(rejects, path):
        raise InvalidArgumentError(f"the rejects file {rejects} is the source file {path}: writing the rejects "
                                   "there would destroy the input; name another rejects file")


def _check_graph(graph: Any) -> None:
    from .graph import Graph

    if not isinstance(graph, Graph):
        kind = type(graph)
        got = "None" if graph is None else (kind.__qualname__ if kind.__module__ == "builtins"
                                            else f"{kind.__module__}.{kind.__qualname__}")
        raise TypeError(f"graph must be a vecgraph.Graph, got {got}")


def _key_type(key_type: Any) -> str:
    if key_type not in ("str", "int"):
        raise InvalidArgumentError(f"key_type must be 'str' or 'int', got {key_type!r}")
    return key_type


def _check_embedder_fits(graph: Any, embedder: Any) -> None:
    """Refuses an embedder of another dim than the graph's, or another one than the graph
    recorded; records nothing (the plans record it once a batch it embedded is written)."""
    if graph.embedder is not None:
        graph.use_embedder(embedder)  # checks it against the record; records nothing new
    elif int(embedder.dim) != graph.dim:
        raise DimensionMismatchError(f"embedder {embedder.name!r} makes {int(embedder.dim)}-d vectors, "
                                     f"the graph's dim is {graph.dim}")


def _vector_arg(vector: Any) -> tuple:
    """(column name or None, NumPy array or None) from the vector= argument."""
    if vector is None or isinstance(vector, str):
        return vector, None
    array = np.asarray(vector)
    if array.ndim != 2:
        raise ValueError(f"vector= must be a column name or a 2-d array (rows, dim), got shape {array.shape}")
    if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
        raise TypeError(f"vector= array must be numeric, got dtype {array.dtype}")
    return None, array


# ====================================================================== nodes


def nodes(
    graph: Any,
    source: Source,
    *,
    key: Optional[str] = None,
    vector: Any = None,
    label: Optional[str] = None,
    tenant: Optional[str] = None,
    ts: Optional[str] = None,
    text: Optional[str] = None,
    props: Optional[str] = None,
    embedder: Any = None,
    upsert: bool = False,
    key_type: str = "str",
    batch_rows: int = 65_536,
    on_error: str = "raise",
    rejects: Union[str, os.PathLike, None] = None,
    progress: Optional[bool] = None,
) -> IngestReport:
    """Add the nodes of ``source`` to ``graph``, batch by batch.

    Args:
        graph: a :class:`vecgraph.Graph` (in memory or a folder).
        source: a file path (``.parquet``; ``.arrow`` / ``.feather`` / ``.ipc``: Arrow IPC file or
            stream; ``.jsonl`` / ``.ndjson``; ``.csv``), a ``pyarrow.Table``, ``RecordBatch``,
            ``RecordBatchReader`` or iterable of record batches, or a ``pandas.DataFrame``.
        key: the key column (default ``"key"``, else ``"id"``): str or int keys, unique.
        vector: the vector column (default ``"vector"``): a fixed-size list or list of dim
            numbers per row (in CSV: a string ``"[0.1, 0.2, ...]"``), converted to float32; or a
            NumPy array (rows, dim) aligned with the source rows.
        label, text: string columns (defaults ``"label"``, ``"text"``; null or absent: "").
        tenant: the tenant column (default ``"tenant"``). A source without one puts every row
            in the default tenant "". A source with one needs a tenant on every row: a missing
            one (null, NaN or None in pandas, an empty CSV field, a JSONL record with null or
            without the field) makes the row bad instead of putting it in the default tenant;
            an empty str "" (not null) names the default tenant, which a CSV cannot spell (it
            reads an empty field as null). A JSONL source has the column when ``tenant=``
            names it or one of its first 1,000 records holds the field.
        ts: int64 microseconds since the epoch, or an Arrow timestamp/date column, or text
            (as CSV is read): an integer or an ISO 8601 date or timestamp, UTC unless it names
            an offset (default ``"ts"``; null or absent: 0). A value none of these is a bad row.
        props: a struct or map column, JSON-object strings, or dicts (default ``"props"``).
        embedder: computes the vectors from the text column instead (see
            :mod:`vecgraph.embedders`). A graph that recorded another embedder (or whose dim
            differs) refuses it before anything is read; it is recorded in the graph with
            :meth:`Graph.use_embedder` once the first batch embedded with it is written, so an
            ingest that writes nothing records nothing. A vector column is not read then.
        upsert: replace nodes whose key is already in the graph (:meth:`Graph.upsert_nodes`)
            instead of rejecting those rows.
        key_type: how the key column of a CSV / TSV file is read, whose fields are text:
            ``"str"`` (default) keeps each key as written (``007``, ``1e3`` and ``+5`` stay
            those strings); ``"int"`` parses them as int64 integers (optional sign, decimal
            digits; any other text is a bad row). Sources that carry types (Parquet, Arrow,
            JSONL, pandas) keep their keys' types whatever key_type says.
        batch_rows: rows per batch; memory use grows with it.
        on_error: what a bad row does. ``"raise"``: its whole batch is rejected with
            :class:`IngestError` naming the source row and column, and nothing of that batch is
            written; batches before it stay written (``error.report`` says how many rows).
            ``"skip"``: bad rows are dropped, the rest of the batch is written, and each bad row
            is written to the rejects file.
        rejects: the rejects file (JSON Lines: ``{"kind", "row", "column", "reason", "key"}``
            per bad row); default ``<source>.rejects.jsonl`` next to a file source; required with
            ``on_error="skip"`` for other sources. Written only with "skip", and kept only when
            a row was rejected: a file at that path is emptied when the ingestion starts and
            removed when it ends without a bad row (a regular file only: not /dev/null), so a
            run without bad rows leaves no rejects file. It may not be the source file itself,
            nor inside the graph's folder (InvalidArgumentError).
        progress: show a tqdm progress bar on stderr (rows, rows/s, ETA when the row count is
            known). None: only when stderr is a terminal.

    A row is bad when its key is missing (null) or is not a str / int64; (without ``upsert``)
    its key repeats an earlier row or is already in the graph (with ``upsert`` the last good
    row of a key wins, in one batch as across batches); its vector is missing, has a length other than the
    graph's dim, holds NaN or inf, or is all zeros under metric "cos"; its text is empty while
    an embedder computes the vectors; its tenant is missing (see ``tenant``); its ts, label,
    tenant or props have the wrong type or are not JSON; its props give a filterable property
    of the graph (see :class:`Graph`) a value of another type than the one declared (a str for
    an int64, say; null is no value); in a CSV / TSV file, its record has more or fewer fields
    than the header. Such a record keeps its row number (the rows after it keep theirs, and a
    vector= array stays aligned), its column is None, its key null, and its reason names its
    line in the file, 1-based and counted as a text editor numbers them (the header, blank
    lines and the line breaks inside quoted values count; ``\\r\\n``, ``\\n`` and ``\\r`` each
    end a line): ``"line 404: expected 4 fields as in the header, got 3: ['p005', 'p006',
    'knows']"``, or ``"lines 7-9: ..."`` for a record whose quoted value spans lines.

    The nodes are added inside :meth:`Graph.deferred_indexing`: they are logged and applied
    batch by batch, and enter the HNSW seed index in one parallel pass when this call ends
    (also when it raises). With precomputed 384-d vectors from Parquet, everything but that
    pass runs at about 100,000 rows/s on 2 cores (``bench/bench_ingest.py``); JSONL is parsed
    with the json module, row by row, and is several times slower.

    A file without any row (0 bytes, blank lines only, a CSV header alone, a Parquet file of
    no rows) gives a report of 0 rows.

    Returns:
        :class:`IngestReport`.

    Raises:
        IngestError (an InvalidArgumentError): a bad row with on_error="raise".
        InvalidArgumentError: a required column is missing (the message lists the columns the
            source has), a column of the wrong Arrow type, an unreadable file, a rejects file
            that is the source file, another embedder than the one the graph recorded.
        DimensionMismatchError: a vector= array or an embedder of the wrong dim.
        TypeError: arguments of the wrong type (graph not a :class:`vecgraph.Graph`);
            FileNotFoundError: no such file.
    """
    start = time.perf_counter()
    options, key_type, vector_column, array, embedder = _check_args(
        graph, source, vector, embedder, key_type, batch_rows, on_error, progress, rejects)
    upsert = bool(upsert)
    src = _open_source(source, options.batch_rows)
    try:
        required = ("key",) + (("vector",) if array is None and embedder is None else ()) + \
            (("text",) if embedder is not None else ())
        given = {"key": key, "vector": vector_column, "label": label, "tenant": tenant, "ts": ts, "text": text,
                 "props": props}
        defaults = dict(_NODE_DEFAULTS)
        if array is not None or embedder is not None:
            defaults.pop("vector")
        try:
            columns = _resolve(src, given, defaults, required)
        except InvalidArgumentError as e:
            if "vector" in required and "no vector column" in str(e):
                raise InvalidArgumentError(f"{e}; or pass vector= a NumPy array, or embedder=") from None
            raise
        _configure(src, columns)
        if embedder is not None:
            _check_embedder_fits(graph, embedder)
        path = _rejects_path(options, src)
        _check_rejects_path(path, source, graph)
    except BaseException:
        src.close()
        raise
    # A column the source has (or that tenant= names) makes a row without a tenant bad; JSONL
    # has the fields of its first 1,000 records.
    tenant_required = columns["tenant"] is not None and (tenant is not None or columns["tenant"] in src.names)
    plan = _NodePlan(graph, columns, array, embedder, upsert, src.text_keys and key_type == "int", tenant_required)
    with _deferred_indexing(graph):
        return _run_plan(graph, src, "node", plan, options, path, array, columns, start)


def _check_args(graph: Any, source: Source, vector: Any, embedder: Any, key_type: str, batch_rows: int,
                on_error: str, progress: Optional[bool], rejects: Any) -> tuple:
    """The arguments nodes() and edges() share, checked: (options, key_type, vector column
    name or None, vector array or None, embedder or None)."""
    _check_graph(graph)
    options = _options(batch_rows, on_error, progress, rejects)
    key_type = _key_type(key_type)
    vector_column, array = _vector_arg(vector)
    if embedder is not None:
        embedder = check_embedder(embedder)
        if vector is not None:
            raise TypeError("pass vector= or embedder=, not both: the embedder computes the vectors from the text")
    _check_rejects_path(options.rejects, source, graph)
    return options, key_type, vector_column, array, embedder


# ====================================================================== edges


def edges(
    graph: Any,
    source: Source,
    *,
    src: Optional[str] = None,
    dst: Optional[str] = None,
    rel: Optional[str] = None,
    weight: Optional[str] = None,
    ts: Optional[str] = None,
    text: Optional[str] = None,
    props: Optional[str] = None,
    vector: Any = None,
    embedder: Any = None,
    key_type: str = "str",
    batch_rows: int = 65_536,
    on_error: str = "raise",
    rejects: Union[str, os.PathLike, None] = None,
    progress: Optional[bool] = None,
) -> IngestReport:
    """Add the edges of ``source`` to ``graph``, batch by batch; their endpoints must already
    be nodes of the graph.

    Args:
        graph, source, batch_rows, on_error, rejects, progress: as :func:`nodes` (rejects
            records carry ``src`` and ``dst`` instead of ``key``).
        src, dst: endpoint key columns (defaults ``"src"`` / ``"source"``, ``"dst"`` / ``"target"``).
        key_type: how the src and dst columns of a CSV / TSV file are read, as for
            :func:`nodes`: ``"str"`` (default) or ``"int"`` (to reach int-keyed nodes).
        rel: relation type column (default ``"rel"``, else ``"type"``; absent or null: "").
        weight: float weights (default ``"weight"``; absent or null: 1.0; in a pandas
            DataFrame NaN is null, as pandas uses it; elsewhere a NaN weight is a bad row), or
            text (as CSV is read) holding numbers: a cell that is not a number is a bad row.
        ts, text, props: as for :func:`nodes`.
        vector: optional edge vectors: a column (null rows: an edge without a vector) or a
            NumPy array (rows, dim) aligned with the source rows.
        embedder: computes edge vectors from the text column (every row then needs a text);
            checked, and recorded once a batch is written, as for :func:`nodes`.

    A row is bad when src or dst is missing or is not a node of the graph (dangling), its weight
    is NaN or inf, its vector has the wrong length or holds NaN / inf (or is all zeros under
    "cos"), a column has the wrong type, or (CSV / TSV) its record has more or fewer fields
    than the header: its reason then names its line, as for :func:`nodes`.

    Each batch is written with one :meth:`Graph.add_edges` call, except a batch in which only
    some edges have vectors: it is written in one call per run of rows with / without vectors,
    in source order.

    Returns / Raises: as :func:`nodes` (dangling edges are bad rows, never NotFoundError).
    """
    start = time.perf_counter()
    options, key_type, vector_column, array, embedder = _check_args(
        graph, source, vector, embedder, key_type, batch_rows, on_error, progress, rejects)
    src_source = _open_source(source, options.batch_rows)
    try:
        given = {"src": src, "dst": dst, "rel": rel, "weight": weight, "ts": ts, "text": text, "props": props,
                 "vector": vector_column}
        defaults = dict(_EDGE_DEFAULTS)
        if array is not None or embedder is not None:
            defaults.pop("vector")
        required = ("src", "dst") + (("text",) if embedder is not None else ())
        columns = _resolve(src_source, given, defaults, required)
        columns.setdefault("vector", None)
        _configure(src_source, columns)
        if embedder is not None:
            _check_embedder_fits(graph, embedder)
        path = _rejects_path(options, src_source)
        _check_rejects_path(path, source, graph)
    except BaseException:
        src_source.close()
        raise
    plan = _EdgePlan(graph, columns, array, embedder, src_source.text_keys, key_type == "int")
    return _run_plan(graph, src_source, "edge", plan, options, path, array, columns, start)


# ====================================================================== networkx


def from_networkx(
    graph: Any,
    G: Any,
    *,
    vector_attr: str = "vector",
    text_attr: str = "text",
    label_attr: str = "label",
    tenant_attr: str = "tenant",
    ts_attr: str = "ts",
    rel_attr: str = "rel",
    weight_attr: str = "weight",
    embedder: Any = None,
    upsert: bool = False,
    batch_rows: int = 65_536,
    on_error: str = "raise",
    rejects: Union[str, os.PathLike, None] = None,
    progress: Optional[bool] = None,
) -> tuple[IngestReport, IngestReport]:
    """Add the nodes, then the edges, of a networkx graph.

    Node ids become keys (str or int). Node attributes ``vector_attr`` (a sequence of dim
    numbers), ``text_attr``, ``label_attr``, ``tenant_attr`` and ``ts_attr`` fill those fields;
    every other attribute goes into props (which must be JSON-serializable). When any node has
    ``tenant_attr``, a node without it (or with None) is a bad row, as a null tenant is for
    :func:`nodes`; when none has it, every node goes to the default tenant "". Edge attributes
    ``rel_attr``, ``weight_attr``, ``text_attr``, ``ts_attr`` and ``vector_attr`` (an optional
    edge vector) likewise, the rest into props. An edge of an undirected graph is added once,
    in the orientation networkx reports it: search it with ``direction="both"`` (the default).
    Parallel edges of a MultiGraph are all added.

    Args:
        embedder: computes node vectors from ``text_attr`` (edges keep their own vectors, if any);
            checked, and recorded once a batch is written, as for :func:`nodes`.
        upsert, batch_rows, on_error, rejects, progress: as :func:`nodes`; with
            ``on_error="skip"``, ``rejects`` is required and gets both the node and the edge
            rows (``"kind"`` tells them apart; rows are numbered in networkx's iteration order).

    Returns:
        (report for the nodes, report for the edges).

    Raises:
        As :func:`nodes` and :func:`edges`; edges whose endpoint was rejected as a node are
        dangling.
    """
    _check_graph(graph)
    options = _options(batch_rows, on_error, progress, rejects)
    if options.on_error == "skip" and options.rejects is None:
        raise InvalidArgumentError('on_error="skip" needs rejects=<path of a JSONL file> for a networkx graph')
    if embedder is not None:
        embedder = check_embedder(embedder)
    node_fields = {"vector": vector_attr, "text": text_attr, "label": label_attr, "tenant": tenant_attr,
                   "ts": ts_attr}
    edge_fields = {"rel": rel_attr, "weight": weight_attr, "text": text_attr, "ts": ts_attr,
                   "vector": vector_attr}
    for name, attr in {**node_fields, **edge_fields}.items():
        if not isinstance(attr, str):
            raise TypeError(f"{name}_attr must be a str, got {type(attr).__name__}")

    def node_columns(chunk: list) -> dict:
        columns: dict = {"key": [node for node, _ in chunk], "props": []}
        for field, attr in node_fields.items():
            columns[field] = [data.get(attr) for _, data in chunk]
        mapped = set(node_fields.values())
        columns["props"] = [{k: v for k, v in data.items() if k not in mapped} or None for _, data in chunk]
        return columns

    def edge_columns(chunk: list) -> dict:
        columns: dict = {"src": [e[0] for e in chunk], "dst": [e[1] for e in chunk]}
        for field, attr in edge_fields.items():
            columns[field] = [e[-1].get(attr) for e in chunk]
        mapped = set(edge_fields.values())
        columns["props"] = [{k: v for k, v in e[-1].items() if k not in mapped} or None for e in chunk]
        return columns

    node_source = _ListSource(["key", "props", *node_fields], G.nodes(data=True), G.number_of_nodes(), node_columns)
    columns = {"key": "key", "vector": None if embedder is not None else "vector", "label": "label",
               "tenant": "tenant", "ts": "ts", "text": "text", "props": "props"}
    if embedder is not None:
        _check_embedder_fits(graph, embedder)
    if options.on_error == "skip":
        _check_rejects_path(options.rejects, G, graph)
    writer = _Rejects(options.rejects) if options.on_error == "skip" else None
    try:
        tenant_required = any(tenant_attr in data for _, data in G.nodes(data=True))
        plan = _NodePlan(graph, columns, None, embedder, bool(upsert), tenant_required=tenant_required)
        with _deferred_indexing(graph):
            node_report = _run(graph, node_source, "node", plan.prepare, plan.apply, options, writer, None,
                               [v for v in columns.values() if v is not None], "ingest nodes", time.perf_counter())
        edge_source = _ListSource(["src", "dst", "props", *edge_fields], G.edges(data=True), G.number_of_edges(),
                                  edge_columns)
        edge_columns_map = {"src": "src", "dst": "dst", "rel": "rel", "weight": "weight", "ts": "ts",
                            "text": "text", "props": "props", "vector": "vector"}
        edge_plan = _EdgePlan(graph, edge_columns_map, None, None)
        edge_report = _run(graph, edge_source, "edge", edge_plan.prepare, edge_plan.apply, options, writer, None,
                           list(edge_columns_map.values()), "ingest edges", time.perf_counter())
    finally:
        if writer is not None:
            writer.close()
    return node_report, edge_report
