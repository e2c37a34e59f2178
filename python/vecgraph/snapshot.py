"""Portable copies of a graph, restoring a graph folder from one, and checking a folder.

* :func:`export` writes the live state of a graph as plain Parquet or Arrow IPC files that
  other tools read directly (pyarrow, DuckDB, Polars, pandas), plus the HNSW graph when it
  can be reused and a ``vecgraph.json`` description with the sha256 of every file.
* :func:`restore` builds a working graph folder from such a copy (a new database: new uuid,
  empty WAL) and opens it.
* :func:`verify` checks a graph folder: the MANIFEST, the sha256 and schema of every
  snapshot generation, every WAL record's CRC32C, and the in-memory invariants (CSR, delta,
  key map, seed index against the store) of the graph they recover.

Exported files (``<path>/``)::

    vecgraph.json        format, schema version, source uuid, LSN, dim, metric, HNSW
                         parameters, embedder, counts, and the sha256 of each file
    nodes.parquet        key, label, tenant, ts, text, props, aliases, vector_codes,
                         vector_scale, vector_sq_norm
    edges.parquet        src, dst, rel, weight, ts, text, props, vector_codes, vector_scale,
                         vector_sq_norm (the vector columns are null for edges without one)
    hnsw.usearch         the HNSW graph (USearch stream format), when it indexes exactly the
                         exported nodes in order (no deleted or upserted node since it was built)

Column types: ``key``/``src``/``dst`` are int64 when every key is an int, else strings (with a
``key_is_int`` column when both kinds occur); ``label``, ``tenant`` and ``rel`` are dictionary
encoded strings; ``ts`` is ``timestamp[us, UTC]``; ``props`` JSON text; ``aliases`` a list of
strings; ``vector_codes`` the
int8 codes (``fixed_size_list<int8>[dim]`` for nodes) and ``vector_scale`` their float32 scale,
so ``vector ≈ vector_codes * vector_scale``; ``vector_sq_norm`` is the squared norm of the
int8 codes that the l2 metric uses.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import tempfile
from typing import Any, Optional, Union

import numpy as np

from . import _core, storage
from .errors import CorruptionError, Error, InvalidArgumentError, StorageError

__all__ = ["export", "restore", "verify", "EXPORT_FORMAT_VERSION"]

EXPORT_FORMAT_VERSION = 1
ALIAS_SEPARATOR = "\x1f"  # how the engine keeps a node's alias list (one string)
DESCRIPTION = "vecgraph.json"
_FORMATS = {"parquet": ".parquet", "arrow": ".arrow"}


# ------------------------------------------------------------------------------ keys


def _decode_keys(encoded: Any) -> tuple[Any, Optional[Any]]:
    """Encoded keys (a large_binary array of b"s" + UTF-8 or b"i" + int64 LE) → (Arrow key
    column: int64 when every key is an int, else strings; key_is_int column when both occur)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = len(encoded)
    offsets = np.frombuffer(encoded.buffers()[1], dtype=np.int64)[encoded.offset : encoded.offset + n + 1]
    data = np.frombuffer(encoded.buffers()[2], dtype=np.uint8) if n and encoded.buffers()[2] else np.zeros(0, np.uint8)
    is_int = data[offsets[:-1]] == 0x69 if n else np.zeros(0, dtype=bool)
    if n == 0 or is_int.all():
        if n and not (np.diff(offsets) == 9).all():
            raise CorruptionError("an integer key is not 8 bytes")
        records = data[offsets[0] : offsets[-1]].reshape(n, 9)[:, 1:] if n else np.zeros((0, 8), np.uint8)
        return pa.array(np.ascontiguousarray(records).view("<i8").reshape(-1), type=pa.int64()), None
    if not is_int.any():
        return pc.utf8_slice_codeunits(encoded.cast(pa.large_string()), 1), None
    text = [str(struct.unpack("<q", k[1:])[0]) if k[0] == 0x69 else k[1:].decode() for k in encoded.to_pylist()]
    return pa.array(text, type=pa.large_string()), pa.array(is_int, type=pa.bool_())


def _encode_keys(column: Any, is_int: Optional[Any], what: str) -> Any:
    """The inverse of :func:`_decode_keys`: a large_binary array of encoded keys."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pat

    if isinstance(column, pa.ChunkedArray):
        column = column.combine_chunks()
    if column.null_count:
        raise CorruptionError(f"{what}: the key column holds nulls")
    n = len(column)
    if pat.is_integer(column.type):
        records = np.empty((n, 9), dtype=np.uint8)
        records[:, 0] = 0x69
        records[:, 1:] = column.to_numpy(zero_copy_only=False).astype("<i8").view(np.uint8).reshape(n, 8)
        offsets = np.arange(0, 9 * (n + 1), 9, dtype=np.int64)
        return pa.Array.from_buffers(pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(records)])
    if not (pat.is_string(column.type) or pat.is_large_string(column.type)):
        raise CorruptionError(f"{what}: the key column has type {column.type}, expected int64 or string")
    if is_int is None:
        return pc.binary_join_element_wise(pa.scalar(b"s", pa.large_binary()), column.cast(pa.large_binary()),
                                           pa.scalar(b"", pa.large_binary()))
    flags = is_int.to_numpy(zero_copy_only=False)
    try:
        keys = [b"i" + struct.pack("<q", int(t)) if f else b"s" + t.encode() for t, f in zip(column.to_pylist(), flags)]
    except (ValueError, struct.error) as e:
        raise CorruptionError(f"{what}: a key marked key_is_int is not an int64 ({e})") from None
    return pa.array(keys, type=pa.large_binary())


def _empty_to_null(column: Any) -> Any:
    """props without a value are null in an export (JSON text otherwise)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pc.if_else(pc.equal(pc.binary_length(column), 0), pa.scalar(None, column.type), column)


def _split_aliases(joined: Any) -> Any:
    """The engine's alias strings (a list joined by U+001F) → a list<large_string> column."""
    import pyarrow as pa
    import pyarrow.compute as pc

    parts = pc.split_pattern(joined, ALIAS_SEPARATOR)
    return pc.if_else(pc.equal(pc.binary_length(joined), 0), pa.scalar([], type=parts.type), parts)


def _join_aliases(lists: Any) -> Any:
    """The inverse of :func:`_split_aliases` (a null list: no aliases)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lists = lists.combine_chunks() if isinstance(lists, pa.ChunkedArray) else lists
    lists = lists.cast(pa.list_(pa.large_string()))
    return pc.binary_join(lists, pa.scalar(ALIAS_SEPARATOR, pa.large_string())).fill_null("")


# ------------------------------------------------------------------------------ export


def _rows(codes: np.ndarray, scale: np.ndarray, sq_norm: np.ndarray, dim: int) -> np.ndarray:
    return storage._columns_to_rows(scale, sq_norm, codes, dim)


def export(graph: Any, path: Union[str, os.PathLike], format: str = "parquet", *, overwrite: bool = False) -> dict:
    """Write a portable copy of ``graph``'s live state to the folder ``path``.

    Writes wait while the state is copied out (as for a checkpoint); the files are then
    written with no lock held. Deleted nodes and edges are left out. See the module docstring
    for the files and their columns.

    Args:
        graph: a :class:`vecgraph.Graph` (in memory or opened from a folder).
        path: the folder to create.
        format: "parquet" (zstd-compressed, for other tools) or "arrow" (Arrow IPC files,
            uncompressed, memory-mappable).
        overwrite: replace an existing export at ``path``.

    Returns:
        {"path", "format", "nodes", "edges", "lsn", "hnsw": bool, "files": {name: sha256}}.

    Raises:
        InvalidArgumentError: an unknown format; ``path`` exists (without ``overwrite``) or is
            not a vecgraph export; ``path`` is inside the graph's own folder.
        StorageError: the files could not be written.
    """
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    from .graph import Graph

    if not isinstance(graph, Graph):
        raise InvalidArgumentError(f"export needs a vecgraph.Graph, got {type(graph).__name__}")
    if not isinstance(format, str) or format not in _FORMATS:
        raise InvalidArgumentError(f"format must be 'parquet' or 'arrow', got {format!r}")
    if not isinstance(overwrite, (bool, np.bool_)):
        raise TypeError(f"overwrite must be True or False, got {type(overwrite).__name__}")
    folder = os.path.abspath(os.fspath(path))
    from .ingest import _inside_folder

    if graph.path is not None and _inside_folder(folder, graph.path):
        raise InvalidArgumentError(f"the export folder {folder} is inside the graph folder {graph.path}: its files "
                                   "would be mixed with the graph's own (and copied, checked and removed with "
                                   "them); name a folder elsewhere")
    if os.path.exists(folder):
        if not overwrite:
            raise InvalidArgumentError(f"{folder} exists; pass overwrite=True to replace it")
        if not os.path.isdir(folder):
            raise InvalidArgumentError(f"{folder} is a file, not a vecgraph export; refusing to overwrite it")
        if os.listdir(folder) and not os.path.isfile(os.path.join(folder, DESCRIPTION)):
            raise InvalidArgumentError(f"{folder} is not a vecgraph export; refusing to overwrite it")
    parent = os.path.dirname(folder)
    try:
        os.makedirs(parent, exist_ok=True)
        tmp = tempfile.mkdtemp(prefix=os.path.basename(folder) + ".", suffix=".tmp", dir=parent)
    except OSError as e:
        raise StorageError(f"cannot create {folder}: {e}") from e
    try:
        state = graph._engine.export_state(os.path.join(tmp, storage.HNSW_FILE))
        dim, metric = graph.dim, graph.metric
        manifest = getattr(graph, "_manifest", None) or {}
        hnsw = dict(manifest.get("hnsw") or graph._hnsw)
        description = {
            "format": "vecgraph-export",
            "format_version": EXPORT_FORMAT_VERSION,
            "schema_version": storage.SNAPSHOT_SCHEMA_VERSION,
            "source_uuid": manifest.get("uuid"),
            "lsn": int(state["lsn"]),
            "dim": dim,
            "metric": metric,
            "hnsw": hnsw,
            "embedder": graph.embedder,
            "filterable": graph.filterable,
            "table_format": format,
            "nodes": len(state["ts"]),
            "edges": len(state["edge_src"]),
        }
        metadata = {b"vecgraph.export": json.dumps({k: v for k, v in description.items()}).encode()}
        keys, key_is_int = _decode_keys(storage.strings_array(state["keys"], pa.large_binary()))
        scale, sq_norm, codes = storage._rows_to_columns(state["rows"], dim)
        node_columns = {
            "key": keys,
            "label": storage.dictionary_array(state["labels"]),
            "tenant": storage.dictionary_array(state["tenants"]),
            "ts": pa.array(np.asarray(state["ts"], np.int64), type=pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "text": storage.strings_array(state["texts"], pa.large_string()),
            "props": _empty_to_null(storage.strings_array(state["props"], pa.large_string())),
            "aliases": _split_aliases(storage.strings_array(state["aliases"], pa.large_string())),
            "vector_codes": pa.FixedSizeListArray.from_arrays(pa.array(codes.reshape(-1), type=pa.int8()), dim),
            "vector_scale": pa.array(scale, type=pa.float32()),
            "vector_sq_norm": pa.array(sq_norm, type=pa.float32()),
        }
        if key_is_int is not None:
            node_columns["key_is_int"] = key_is_int
        nodes = pa.table(node_columns).replace_schema_metadata(metadata)

        src_pos = pa.array(np.asarray(state["edge_src"], dtype=np.int64))
        dst_pos = pa.array(np.asarray(state["edge_dst"], dtype=np.int64))
        has_vector, e_scale, e_sq_norm, edge_codes = storage.edge_vector_columns(state, dim)
        edge_columns = {
            "src": keys.take(src_pos),
            "dst": keys.take(dst_pos),
            "rel": storage.dictionary_array(state["edge_rels"]),
            "weight": pa.array(state["edge_weights"], type=pa.float32()),
            "ts": pa.array(np.asarray(state["edge_ts"], np.int64), type=pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "text": storage.strings_array(state["edge_texts"], pa.large_string()),
            "props": _empty_to_null(storage.strings_array(state["edge_props"], pa.large_string())),
            "vector_codes": edge_codes,
            "vector_scale": pa.array(e_scale, type=pa.float32(), mask=~has_vector),
            "vector_sq_norm": pa.array(e_sq_norm, type=pa.float32(), mask=~has_vector),
        }
        if key_is_int is not None:
            edge_columns["src_is_int"] = key_is_int.take(src_pos)
            edge_columns["dst_is_int"] = key_is_int.take(dst_pos)
        edges = pa.table(edge_columns).replace_schema_metadata(metadata)

        files = {}
        suffix = _FORMATS[format]
        for name, table in (("nodes" + suffix, nodes), ("edges" + suffix, edges)):
            out = os.path.join(tmp, name)
            if format == "parquet":
                pq.write_table(table, out, compression="zstd", row_group_size=1 << 17)
            else:
                with pa.OSFile(out, "wb") as sink, ipc.new_file(sink, table.schema) as writer:
                    writer.write_table(table, max_chunksize=1 << 16)
            files[name] = storage._sha256(out)
        if state.get("hnsw_saved"):
            files[storage.HNSW_FILE] = storage._sha256(os.path.join(tmp, storage.HNSW_FILE))
        description["files"] = files
        with open(os.path.join(tmp, DESCRIPTION), "w") as f:
            json.dump(description, f, indent=1, sort_keys=True)
            f.flush()
            os.fsync(f.fileno())
        for name in os.listdir(tmp):
            with open(os.path.join(tmp, name), "rb") as f:
                os.fsync(f.fileno())
        storage.fsync_dir(tmp)
        if os.path.exists(folder):
            shutil.rmtree(folder)
        os.replace(tmp, folder)
        storage.fsync_dir(parent)
    except OSError as e:
        shutil.rmtree(tmp, ignore_errors=True)
        raise StorageError(f"export to {folder} failed: {e}") from e
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return {"path": folder, "format": format, "nodes": description["nodes"], "edges": description["edges"],
            "lsn": description["lsn"], "hnsw": storage.HNSW_FILE in files, "files": files}


# ------------------------------------------------------------------------------ restore


def _read_description(folder: str) -> dict:
    path = os.path.join(folder, DESCRIPTION)
    if not os.path.isdir(folder):
        raise InvalidArgumentError(f"{folder} is not a folder; restore reads the folder written by vecgraph.snapshot.export")
    try:
        with open(path, "rb") as f:
            description = json.loads(f.read())
    except FileNotFoundError:
        raise InvalidArgumentError(f"{folder} has no {DESCRIPTION}; it is not a vecgraph export") from None
    except (OSError, ValueError) as e:
        raise CorruptionError(f"{path} is not readable JSON: {e}") from None
    problem = ""
    if not isinstance(description, dict) or description.get("format") != "vecgraph-export":
        problem = "not a vecgraph export description"
    elif description.get("format_version") != EXPORT_FORMAT_VERSION:
        problem = f"export format version {description.get('format_version')!r}; this vecgraph reads {EXPORT_FORMAT_VERSION}"
    elif description.get("table_format") not in _FORMATS:
        problem = f"table_format {description.get('table_format')!r}"
    elif type(description.get("dim")) is not int or not 1 <= description["dim"] <= 65536:
        problem = f"dim {description.get('dim')!r}"
    elif description.get("metric") not in ("cos", "ip", "l2"):
        problem = f"metric {description.get('metric')!r}"
    elif not isinstance(description.get("files"), dict):
        problem = "no files"
    if problem:
        raise CorruptionError(f"{path}: {problem}")
    return description


def _read_table(path: str, table_format: str, expected_sha256: Optional[str]) -> Any:
    import pyarrow as pa
    import pyarrow.ipc as ipc
    import pyarrow.parquet as pq

    if not os.path.isfile(path):
        raise CorruptionError(f"export file {path} is missing")
    if expected_sha256 is None or storage._sha256(path) != expected_sha256:
        raise CorruptionError(f"export file {path} fails its checksum (sha256 in {DESCRIPTION})")
    try:
        if table_format == "parquet":
            return pq.read_table(path, memory_map=True)
        with pa.memory_map(path, "r") as source:
            return ipc.open_file(source).read_all()
    except (pa.ArrowException, OSError) as e:
        raise CorruptionError(f"export file {path} is not readable: {e}") from None


def restore(src: Union[str, os.PathLike], into: Union[str, os.PathLike], *, overwrite: bool = False,
            **open_kwargs: Any) -> Any:
    """Build a graph folder at ``into`` from an export at ``src`` and open it.

    The restored graph is a new database (a new uuid and an empty WAL) holding the exported
    nodes and edges, with the same keys, quantized vectors, HNSW parameters and embedder, so
    searches return the same results as on the exported graph. The HNSW graph is taken from
    the export's ``hnsw.usearch`` when it has one (no rebuild), else built in one parallel pass.

    Args:
        src: a folder written by :func:`export`.
        into: the graph folder to create (it must not exist, unless ``overwrite``).
        overwrite: replace an existing graph folder at ``into`` (it must not be open). The new
            folder is built beside it and swapped in once it opens: if any step fails (bad
            ``open_kwargs`` included), ``into`` is left as it was.
        open_kwargs: passed to :meth:`vecgraph.Graph.open` (sync, threads, ...).

    Returns:
        The open :class:`vecgraph.Graph` (close it, or use it as a context manager).

    Raises:
        InvalidArgumentError: ``src`` is not an export, or ``into`` exists.
        CorruptionError: a file fails its sha256, is unreadable, or holds invalid data.
        StorageError: ``into`` cannot be written or is open elsewhere.
        TypeError: an unknown or wrongly typed ``open_kwargs`` entry (as from ``Graph.open``).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    from .graph import Graph

    source = os.path.abspath(os.fspath(src))
    target = os.path.abspath(os.fspath(into))
    description = _read_description(source)
    if not isinstance(overwrite, (bool, np.bool_)):
        raise TypeError(f"overwrite must be True or False, got {type(overwrite).__name__}")
    if os.path.exists(target):
        if not overwrite:
            raise InvalidArgumentError(f"{target} exists; pass overwrite=True to replace it")
        if not os.path.isdir(target):
            raise InvalidArgumentError(f"{target} is a file, not a vecgraph graph folder; refusing to overwrite it")
        if os.listdir(target) and not os.path.isfile(os.path.join(target, storage.MANIFEST)):
            raise InvalidArgumentError(f"{target} is not a vecgraph graph folder; refusing to overwrite it")
    dim, metric, files = description["dim"], description["metric"], description["files"]
    suffix = _FORMATS[description["table_format"]]
    nodes = _read_table(os.path.join(source, "nodes" + suffix), description["table_format"], files.get("nodes" + suffix))
    edges = _read_table(os.path.join(source, "edges" + suffix), description["table_format"], files.get("edges" + suffix))
    where = f"export {source}"
    for name, table in (("nodes" + suffix, nodes), ("edges" + suffix, edges)):
        try:
            embedded = json.loads((table.schema.metadata or {}).get(b"vecgraph.export", b"{}"))
        except ValueError:
            embedded = {}
        for field in ("dim", "metric", "nodes", "edges", "source_uuid", "lsn"):
            if embedded.get(field) != description.get(field):
                raise CorruptionError(f"{where}: {DESCRIPTION} says {field} {description.get(field)!r}, the schema "
                                      f"metadata of {name} says {embedded.get(field)!r}")
    try:
        def flags(table: Any, name: str) -> Optional[Any]:
            return table.column(name).combine_chunks() if name in table.column_names else None

        keys = _encode_keys(nodes.column("key"), flags(nodes, "key_is_int"), where + " nodes")
        n = len(keys)
        codes = (nodes.column("vector_codes").combine_chunks().flatten().to_numpy(zero_copy_only=False).reshape(n, dim)
                 if n else np.zeros((0, dim), np.int8))
        state: dict = {
            "lsn": 0,
            "keys": keys,
            "labels": nodes.column("label"),
            "tenants": nodes.column("tenant"),
            "ts": nodes.column("ts").cast(pa.int64()).to_numpy(),
            "texts": nodes.column("text"),
            "props": nodes.column("props").fill_null(""),
            "aliases": (_join_aliases(nodes.column("aliases")) if "aliases" in nodes.column_names
                        else pa.nulls(n, pa.large_string()).fill_null("")),
            "rows": _rows(codes, nodes.column("vector_scale").to_numpy(), nodes.column("vector_sq_norm").to_numpy(), dim),
        }
        del codes
        positions = []
        for end in ("src", "dst"):
            encoded = _encode_keys(edges.column(end), flags(edges, end + "_is_int"), where + " edges")
            found = pc.index_in(encoded, value_set=keys)  # a hash lookup per edge end, in C++
            if found.null_count:
                missing = encoded.filter(found.is_null())[0].as_py()
                raise CorruptionError(f"{where}: an edge's {end} {missing[1:]!r} is not a node")
            positions.append(found.to_numpy(zero_copy_only=False).astype(np.uint32))
        state["edge_src"], state["edge_dst"] = positions
        codes_column = edges.column("vector_codes").combine_chunks()
        has_vector = ~np.asarray(codes_column.is_null().to_numpy(zero_copy_only=False), dtype=bool)
        values = codes_column.flatten().to_numpy(zero_copy_only=False)
        if values.size != int(has_vector.sum()) * dim:
            raise CorruptionError(f"{where}: edge vector_codes are not all of length {dim}")
        state.update(
            edge_rels=edges.column("rel"),
            edge_weights=edges.column("weight").to_numpy(),
            edge_ts=edges.column("ts").cast(pa.int64()).to_numpy(),
            edge_texts=edges.column("text"),
            edge_props=edges.column("props").fill_null(""),
            edge_has_vector=has_vector.astype(np.uint8),
            edge_rows=_rows(values.reshape(-1, dim),
                            edges.column("vector_scale").filter(pa.array(has_vector)).to_numpy(zero_copy_only=False),
                            edges.column("vector_sq_norm").filter(pa.array(has_vector)).to_numpy(zero_copy_only=False),
                            dim),
        )
    except (KeyError, ValueError, TypeError, pa.ArrowException) as e:
        raise CorruptionError(f"{where} does not have the expected columns or shapes: {e}") from None

    # The folder is built beside ``into`` and renamed into place; a graph it replaces is moved
    # aside until the new one opens, so a failure at any step (bad open arguments included)
    # leaves ``into`` as it was.
    parent = os.path.dirname(target)
    made_parent = None  # the topmost folder this call creates above ``into``, removed on failure
    ancestor = parent
    while not os.path.exists(ancestor):
        made_parent, ancestor = ancestor, os.path.dirname(ancestor)
    building = replaced = None  # the new folder while it is built; the old graph, moved aside
    moved_in = False
    try:
        os.makedirs(parent, exist_ok=True)
        building = tempfile.mkdtemp(prefix=os.path.basename(target) + ".restoring-", dir=parent)
        manifest = storage.new_manifest(dim, metric, description.get("hnsw") or dict(storage.DEFAULT_HNSW))
        embedder = description.get("embedder")
        if embedder:
            manifest["embedder"] = embedder
        manifest["filterable"] = description.get("filterable") or {}
        tmp = storage.begin_snapshot(building, manifest)
        hnsw_file = os.path.join(source, storage.HNSW_FILE)
        if storage.HNSW_FILE in files and (not os.path.isfile(hnsw_file) or storage._sha256(hnsw_file) != files[storage.HNSW_FILE]):
            import warnings

            warnings.warn(f"{hnsw_file} is missing or fails its checksum (sha256 in {DESCRIPTION}); the HNSW "
                          "index is rebuilt, so approximate (non-exact) results may differ from the exported graph's",
                          RuntimeWarning, stacklevel=2)
        elif storage.HNSW_FILE in files:
            shutil.copyfile(hnsw_file, os.path.join(tmp, storage.HNSW_FILE))
            with open(os.path.join(tmp, storage.HNSW_FILE), "rb") as f:
                os.fsync(f.fileno())
            state["hnsw_saved"] = True
        committed = storage.write_snapshot(building, manifest, state, tmp)
        if state.get("hnsw_saved") and committed["files"][storage.HNSW_FILE] != files[storage.HNSW_FILE]:
            committed["files"].pop(storage.HNSW_FILE)  # damaged in the export: rebuilt on open
        storage.write_manifest(building, committed)
        if os.path.exists(target):
            storage.probe_lock(target)  # refuse to replace a graph that is open; changes nothing
            replaced = tempfile.mkdtemp(prefix=os.path.basename(target) + ".replaced-", dir=parent)
            os.rename(target, os.path.join(replaced, "graph"))
        os.rename(building, target)
        moved_in = True
        graph = Graph.open(target, **open_kwargs)
    except BaseException as e:
        if moved_in or building is not None:
            shutil.rmtree(target if moved_in else building, ignore_errors=True)
        if replaced is not None:
            if os.path.exists(os.path.join(replaced, "graph")):
                os.rename(os.path.join(replaced, "graph"), target)
            shutil.rmtree(replaced, ignore_errors=True)
        if made_parent:
            shutil.rmtree(made_parent, ignore_errors=True)
        if isinstance(e, OSError) and not isinstance(e, Error):
            raise StorageError(f"cannot restore into {target}: {e}") from e
        raise
    if replaced is not None:
        shutil.rmtree(replaced, ignore_errors=True)
    return graph


# ------------------------------------------------------------------------------ verify


def verify(folder: Union[str, os.PathLike], *, limit: int = 100) -> list[str]:
    """Check a graph folder from end to end; returns the problems found (empty: sound).

    Checks the MANIFEST; for every snapshot generation it names (current and previous), each
    file's sha256, Arrow schema and metadata (uuid, dim, metric, LSN); that the WAL reaches
    back to the previous generation, and still holds the newest segment ``WAL_TAIL`` names (a
    log whose newest segments, or all of ``wal/``, are gone has lost acknowledged writes:
    reported as recovery failing, as :meth:`vecgraph.Graph.open` refuses it); every WAL
    record's CRC32C and LSN order, by recovering
    the graph in memory (nothing on disk changes; bytes at the end of the log that do not form
    a valid record are reported, as :meth:`vecgraph.Graph.open` would cut them); then the
    recovered graph's invariants (:meth:`vecgraph.Graph.verify`: CSR, delta, key map, HNSW
    against the store).

    Raises:
        InvalidArgumentError: ``folder`` holds no vecgraph graph.
        StorageError: the folder is open for writing by another Graph or process.
    """
    import warnings

    import pyarrow as pa

    from .graph import Graph

    path = os.path.abspath(os.fspath(folder))
    if not os.path.isfile(os.path.join(path, storage.MANIFEST)):
        if os.path.isdir(path) and storage.graph_remnants(path):
            return [str(storage.missing_manifest(path, storage.graph_remnants(path)))]
        raise InvalidArgumentError(f"no vecgraph graph at {path} (no MANIFEST)")
    problems: list[str] = []
    try:
        manifest = storage.read_manifest(path)
    except CorruptionError as e:
        return [str(e)]
    generations = [manifest] + ([manifest["previous"]] if manifest.get("previous") else [])
    for generation in generations:
        if not generation.get("snapshot"):
            continue
        snapshot = os.path.join(path, generation["snapshot"])
        for name, expected in sorted(generation["files"].items()):
            file = os.path.join(snapshot, name)
            if not os.path.isfile(file):
                problems.append(f"{file} is missing")
                continue
            if storage._sha256(file) != expected:
                problems.append(f"{file} fails its checksum (sha256 in MANIFEST)")
                continue
            if name.endswith(".arrow"):
                try:
                    with pa.memory_map(file, "r") as source:
                        meta = pa.ipc.open_file(source).schema.metadata or {}
                except (pa.ArrowException, OSError) as e:
                    problems.append(f"{file} is not a readable Arrow IPC file: {e}")
                    continue
                for key, want in (("uuid", manifest["uuid"]), ("dim", str(manifest["dim"])),
                                  ("metric", manifest["metric"]), ("lsn", str(generation["snapshot_lsn"])),
                                  ("schema_version", str(storage.SNAPSHOT_SCHEMA_VERSION))):
                    found = meta.get(f"vecgraph.{key}".encode(), b"").decode(errors="replace")
                    if found != want:
                        problems.append(f"{file} has {key} {found!r}, expected {want!r}")
    # The WAL must reach back to the older generation, so that falling back to it loses nothing.
    wal_dir = os.path.join(path, storage.WAL_DIR)
    firsts = sorted(int(name[: -len(".log")]) for name in (os.listdir(wal_dir) if os.path.isdir(wal_dir) else [])
                    if name.endswith(".log") and name[: -len(".log")].isdigit())
    previous = manifest.get("previous")
    if previous and previous.get("snapshot") and firsts and firsts[0] > int(previous["snapshot_lsn"]) + 1:
        problems.append(f"the WAL starts at LSN {firsts[0]}, after the previous snapshot's LSN "
                        f"{previous['snapshot_lsn']} + 1: falling back to that snapshot would lose writes")
    elif previous and previous.get("snapshot") and firsts:
        # The segments kept only for that fallback: recovery from the newest snapshot does not
        # read them, so their damage is found here (every record checked, none applied).
        try:
            _core.scan_wal(wal_dir, bytes.fromhex(manifest["uuid"]), int(previous["snapshot_lsn"]) + 1)
        except CorruptionError as e:
            problems.append(f"falling back to the previous snapshot {previous['snapshot']} would fail: {e}")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            graph = Graph.open(path, _inspect=True)  # recovers in memory; changes nothing on disk
        except CorruptionError as e:
            return (problems + [f"recovery fails: {e}"])[:limit]
    for w in caught:
        problems.append(str(w.message))
    try:
        report = graph._recovery
        if report["truncated_bytes"]:
            problems.append(f"the WAL ends with {report['truncated_bytes']} bytes that do not form a valid record "
                            f"({report['truncated_at']}): a write cut short by a crash (never acknowledged), or "
                            "damage to the last record; the next open cuts them")
        problems.extend(graph.verify(limit))
    finally:
        graph.close()
    return problems[:limit]
