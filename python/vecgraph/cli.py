"""The ``vecgraph`` command (also ``python -m vecgraph``).

Subcommands:
  ingest      load nodes and edges from Parquet, Arrow IPC, CSV or JSONL files into a graph folder
  query       graph-guided search from a text (through the graph's embedder) or a .npy vector file
  stats       counts, configuration and memory of a graph folder
  checkpoint  write an Arrow snapshot and drop the write-ahead log it covers
  compact     fold the edge delta into the CSR, then checkpoint
  export      write a portable copy (Parquet or Arrow IPC) other tools can read
  restore     build a graph folder from an exported copy
  verify      check checksums, the CSR and the seed index of a graph folder
  repair      rebuild a graph folder's lost or damaged MANIFEST from its snapshots and WAL
  demo        build a clustered synthetic graph, run graph-guided searches, and print what they
              found, how fast, and how close the HNSW path is to the exact one
  wordnet     build (or reopen) a WordNet 3.0 graph, answer its held-out questions through every
              channel, and print quality, latency and example answers with their paths
  eval        run your own judged queries (JSONL) through each retrieval channel and print
              recall@k, MRR@k, nDCG@k, latency and wins / losses against the best channel
  info        version, kernel ISA and the ISAs this CPU can run
  kb          GraphRAG over documents: add files, build communities and a RAPTOR tree, ask (local,
              global, tree)
  mcp         serve a graph folder's searches to agents over the Model Context Protocol (stdio or HTTP)

Errors go to stderr as ``vecgraph <subcommand>: error: <message>``; the exit code is 1 for a
failure while running, 2 for a usage error (a bad option value, options that exclude each other,
or a --dim, --metric or --embedder the graph folder does not match), 130 when interrupted.
``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np

from . import __version__, active_isa, available_isas, storage
from .errors import Error
from . import cli_parser
from .formatting import (
    _hit_record,
    _n,
    _print_checkpoint,
    _print_hits,
    _print_hybrid_hits,
    _print_json,
    _print_report,
    _print_stats,
    _queries,
    _snippet,
    _walk,
)
from .hybrid import _MAX_HYBRID_K


class CommandError(Exception):
    """A subcommand that cannot do its job; printed as ``vecgraph <subcommand>: error: ...`` (exit 1)."""


def _progress(total: int, desc: str, unit: str):
    from tqdm import tqdm

    return tqdm(total=total, desc=desc, unit=unit, unit_scale=True, disable=not sys.stderr.isatty())


def _is_graph(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, storage.MANIFEST))


def _require_graph(folder: str) -> None:
    if not _is_graph(folder):
        if os.path.isdir(folder) and storage.graph_remnants(folder):
            raise storage.missing_manifest(folder, storage.graph_remnants(folder))
        why = "" if not os.path.isdir(folder) else f" (the folder has no {storage.MANIFEST})"
        raise CommandError(f"no vecgraph graph at {folder}{why}")


def _open_graph(folder: str, **options: Any):
    """Open an existing graph folder; never creates one."""
    from .graph import Graph

    _require_graph(folder)
    return Graph.open(folder, **options)


# ---------------------------------------------------------------- ingest


def _load_embedder(spec: str, parser: Optional[argparse.ArgumentParser] = None):
    """The embedder ``spec`` names; with ``parser`` (a spec from --embedder), a spec of neither
    form is a usage error."""
    from . import embedders
    from .errors import InvalidArgumentError

    try:
        return embedders.load(spec)
    except InvalidArgumentError as exc:
        if parser is None:
            raise
        parser.error(f"argument --embedder: {exc}")
    except (ImportError, AttributeError, TypeError) as exc:
        raise CommandError(f"cannot load embedder {spec!r}: {exc}") from exc


def _check_embedder_arg(args: argparse.Namespace, embedder, dim: int, recorded: Optional[dict]) -> None:
    """A usage error when the --embedder given does not fit the graph in args.folder: another
    dim than its ``dim``, or another embedder than the one it ``recorded``."""
    if int(embedder.dim) != dim:
        args.parser.error(f"argument --embedder: expected an embedder of the graph's dim {dim}, got "
                          f"{embedder.name!r}, which makes {int(embedder.dim)}-d vectors")
    if recorded is not None and recorded["name"] != embedder.name:
        args.parser.error(f"argument --embedder: expected the embedder the graph at {args.folder} was built "
                          f"with, {recorded['name']!r} (or no --embedder), got {embedder.name!r}, whose "
                          "vectors are not comparable")


def _rejects_paths(args: argparse.Namespace, sources: list) -> list:
    """One rejects file per input: --rejects itself for one input, numbered beside it for several."""
    if args.rejects is None:
        return [None] * len(sources)
    if len(sources) == 1:
        return [args.rejects]
    stem, ext = os.path.splitext(args.rejects)
    return [f"{stem}.{i}{ext}" for i in range(1, len(sources) + 1)]


def _check_rejects_paths(args: argparse.Namespace, sources: list, rejects: list) -> None:
    """A usage error when a rejects file (given, numbered, or the default one beside an input)
    would be written over an input file, or inside the graph folder: opening it for writing
    would destroy that input or the graph's files."""
    from .ingest import _inside_folder, _same_file

    if args.on_error != "skip":
        return
    written = [r if r is not None else s + ".rejects.jsonl" for s, r in zip(sources, rejects)]
    flag = "--rejects" if args.rejects is not None else "the default rejects file"
    for reject in written:
        if _inside_folder(reject, args.folder):
            args.parser.error(f"{flag} {reject} is inside the graph folder {args.folder}: writing the "
                              "rejects there would destroy the graph's files; name a --rejects file "
                              "elsewhere")
        for source in sources:
            if _same_file(reject, source):
                args.parser.error(f"{flag} {reject} is the input file {source}: writing the rejects there "
                                  "would destroy it; name another --rejects file")


def _remove_created(folder: str, top: str, before: Optional[set]) -> None:
    """Undo a graph this command created: remove ``top`` (the first folder of the path that
    did not exist), or, in a folder that existed, the entries that were not there before."""
    if before is None:
        shutil.rmtree(top, ignore_errors=True)
        return
    for name in set(os.listdir(folder)) - before:
        path = os.path.join(folder, name)
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            with contextlib.suppress(OSError):
                os.remove(path)


# Column arguments of vecgraph.ingest and the flags that set them, to name flags in its messages.
_NODE_FLAGS = {"key": "key_column", "vector": "vector_column", "label": "label_column", "tenant": "tenant_column",
               "ts": "ts_column", "text": "text_column", "props": "props_column"}
_EDGE_FLAGS = {"src": "src_column", "dst": "dst_column", "rel": "rel_column", "weight": "weight_column",
               "ts": "edge_ts_column", "text": "edge_text_column", "props": "edge_props_column",
               "vector": "edge_vector_column"}


@contextlib.contextmanager
def _ingest_errors(args: argparse.Namespace, source: str, flags: dict) -> Iterator[None]:
    """Ingestion errors in the command's terms: the file, the flags, and what earlier batches left."""
    from .ingest import IngestError

    try:
        yield
    except (Error, ValueError, TypeError) as exc:
        message = str(exc).replace('pass on_error="skip"', "pass --on-error skip").replace(
            "pass upsert=True", "pass --upsert").replace('with key_type="int"', "with --key-type int").replace(
            '(key_type="int")', "(--key-type int)")
        message = message.replace("; or pass vector= a NumPy array, or embedder=", "; or pass --embedder")
        for param, dest in flags.items():
            flag = "--" + dest.replace("_", "-")
            message = message.replace(f"name it with {param}=", f"name it with {flag}")
            value = getattr(args, dest)
            if value is not None:
                message = message.replace(f"{param}={value!r}:", f"{flag} {value}:")
        if isinstance(exc, IngestError) and exc.report.rows_accepted:
            message += f" {_n(exc.report.rows_accepted, 'row')} of earlier batches stay in the graph."
        raise CommandError(f"{source}: {message}") from exc


def _cmd_ingest(args: argparse.Namespace) -> int:
    if not args.nodes and not args.edges:
        args.parser.error("nothing to ingest: give --nodes FILE and/or --edges FILE")
    if args.rejects is not None and args.on_error != "skip":
        args.parser.error("--rejects needs --on-error skip")
    # Column flags of a kind of file that is not given would be ignored: a usage error instead.
    for given, kind, flags in ((args.nodes, "--nodes", dict(_NODE_FLAGS, upsert="upsert")),
                               (args.edges, "--edges", _EDGE_FLAGS)):
        stray = [f"--{attr.replace('_', '-')}" for attr in flags.values() if getattr(args, attr)]
        if not given and stray:
            args.parser.error(f"{', '.join(stray)} {'applies' if len(stray) == 1 else 'apply'} to {kind} "
                              f"files; give {kind} FILE or drop {'it' if len(stray) == 1 else 'them'}")
    if args.embedder and args.vector_column:
        args.parser.error("--vector-column and --embedder exclude each other: "
                          "the embedder computes node vectors from the text column")
    node_sources, edge_sources = args.nodes or [], args.edges or []
    rejects = _rejects_paths(args, node_sources + edge_sources)
    _check_rejects_paths(args, node_sources + edge_sources, rejects)
    from . import ingest
    from .graph import Graph

    embedder = _load_embedder(args.embedder, args.parser) if args.embedder else None
    folder = args.folder
    fresh = not _is_graph(folder)  # the command creates the graph: undone if it takes no row
    if fresh and embedder is not None and args.dim is not None and args.dim != int(embedder.dim):
        args.parser.error(f"argument --dim: expected the dim of --embedder {args.embedder}, "
                          f"{int(embedder.dim)} (or no --dim), got {args.dim}")
    if not fresh:
        # --dim and --metric set up a new graph; an existing one must agree with them
        manifest = storage.read_manifest(folder) or {}
        if args.dim is not None and manifest.get("dim") not in (None, args.dim):
            args.parser.error(f"argument --dim: expected the dim of the graph at {folder}, {manifest['dim']} "
                              f"(or no --dim), got {args.dim}")
        if args.metric is not None and manifest.get("metric") not in (None, args.metric):
            args.parser.error(f"argument --metric: expected the metric of the graph at {folder}, "
                              f"{manifest['metric']} (or no --metric), got {args.metric}")
        if embedder is not None and "dim" in manifest:
            _check_embedder_arg(args, embedder, manifest["dim"], manifest.get("embedder"))
    before: Optional[set] = None  # entries of an existing folder the graph is created in
    top = os.path.abspath(folder)  # the first folder of the path that does not exist yet
    while not os.path.exists(os.path.dirname(top)) and os.path.dirname(top) != top:
        top = os.path.dirname(top)
    if fresh and os.path.exists(folder):
        if not os.path.isdir(folder):
            raise CommandError(f"{folder} is a file, not a graph folder")
        before = set(os.listdir(folder))
        others = sorted(before - {storage.LOCK, storage.MANIFEST + ".tmp"})
        if storage.graph_remnants(folder):
            raise storage.missing_manifest(folder, storage.graph_remnants(folder))
        if others:
            raise CommandError(f"{folder} is not empty and has no {storage.MANIFEST} ({', '.join(others[:5])}"
                               f"{', ...' if len(others) > 5 else ''}); refusing to create a graph over other files")
    if fresh and args.dim is None and embedder is None:
        raise CommandError(f"{folder} holds no graph yet; pass --dim (or --embedder) to create one")
    dim = args.dim
    if dim is None and embedder is not None and fresh:
        dim = embedder.dim
    graph = None
    try:
        graph = Graph.open(folder, dim=dim, metric=args.metric, sync=args.sync)
        with graph:
            common = {"batch_rows": args.batch_rows, "on_error": args.on_error, "key_type": args.key_type}
            for source, reject in zip(node_sources, rejects):
                with _ingest_errors(args, source, _NODE_FLAGS):
                    report = ingest.nodes(
                        graph, source, key=args.key_column, vector=args.vector_column, label=args.label_column,
                        tenant=args.tenant_column, ts=args.ts_column, text=args.text_column,
                        props=args.props_column, embedder=embedder, upsert=args.upsert, rejects=reject, **common)
                _print_report("nodes", source, report)
            for source, reject in zip(edge_sources, rejects[len(node_sources):]):
                with _ingest_errors(args, source, _EDGE_FLAGS):
                    report = ingest.edges(
                        graph, source, src=args.src_column, dst=args.dst_column, rel=args.rel_column,
                        weight=args.weight_column, ts=args.edge_ts_column, text=args.edge_text_column,
                        props=args.edge_props_column, vector=args.edge_vector_column,
                        embedder=embedder if args.edge_text_column and not args.edge_vector_column else None,
                        rejects=reject, **common)
                _print_report("edges", source, report)
            if args.checkpoint:
                graph.wait_for_indexing()  # so that the snapshot carries the HNSW graph
                _print_checkpoint(graph.checkpoint())
            print(f"{folder}: {_n(len(graph), 'node')}, {_n(graph.count_edges, 'edge')}")
    except BaseException:
        # A graph this command created and that took no row is removed, so a retry starts clean:
        # a folder that did not exist is removed, an existing empty one is left empty.
        # When opening failed, a graph another process made there meanwhile is not touched.
        if fresh and (len(graph) == 0 and graph.count_edges == 0 if graph is not None else not _is_graph(folder)):
            if graph is not None:
                graph.close()
            _remove_created(folder, top, before)
        raise
    return 0


# ---------------------------------------------------------------- query


def _query_vectors(args: argparse.Namespace, graph) -> np.ndarray:
    """The (n, dim) float32 queries: rows of the --vector file, or the embedded TEXT."""
    if args.vector is not None:
        try:
            with open(args.vector, "rb") as f:
                magic = f.read(6)
            if magic != b"\x93NUMPY":  # np.load would call any other file pickled data
                raise CommandError(f"{args.vector} is not a NumPy .npy file (it does not start with the .npy "
                                   f"magic bytes; write one with numpy.save)")
            array = np.load(args.vector, allow_pickle=False)
        except OSError as exc:
            raise CommandError(f"cannot read --vector {args.vector}: {exc.strerror or exc}") from None
        except (ValueError, EOFError) as exc:  # EOFError: a truncated file
            raise CommandError(f"{args.vector} is not a NumPy .npy file of numbers: {exc}") from None
        if not isinstance(array, np.ndarray) or array.ndim not in (1, 2) or array.size == 0:
            shape = getattr(array, "shape", None)
            raise CommandError(f"{args.vector} must hold a (dim,) or (n, dim) array, got shape {shape}")
        if not (np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)):
            raise CommandError(f"{args.vector} must hold real numbers (float32), got dtype {array.dtype}")
        matrix = np.atleast_2d(array)
        if matrix.shape[1] != graph.dim:
            raise CommandError(f"{args.vector} holds vectors of dim {matrix.shape[1]}, "
                               f"the graph at {args.folder} has dim {graph.dim}")
        with np.errstate(over="ignore"):  # beyond float32: inf, refused by the search by name
            return np.ascontiguousarray(matrix, dtype=np.float32)
    recorded = graph.embedder
    if args.embedder is not None:
        embedder = _load_embedder(args.embedder, args.parser)
        _check_embedder_arg(args, embedder, graph.dim, recorded)
    elif recorded is not None:
        spec = recorded.get("spec") or recorded["name"]
        try:
            embedder = _load_embedder(spec)
        except (CommandError, Error) as exc:
            raise CommandError(f"the graph at {args.folder} was built with embedder {recorded['name']!r}, which "
                               f"cannot be loaded by {spec!r} ({exc}); pass --embedder SPEC") from exc
    else:
        raise CommandError(f"the graph at {args.folder} records no embedder to turn text into a vector; "
                           "pass --embedder SPEC, or a query vector with --vector FILE.npy")
    return graph.embed_query([args.text], embedder)


def _cmd_hybrid_query(args: argparse.Namespace, graph) -> int:
    vector = None  # the dense channel's query: the --vector file's one row, or TEXT embedded
    if args.vector is not None or args.embedder is not None or graph.embedder is not None:
        queries = _query_vectors(args, graph)
        if len(queries) != 1:
            args.parser.error(f"argument --vector: with --hybrid, expected one query vector (a (dim,) array "
                              f"or one row), got {args.vector} holding {len(queries)} rows")
        vector = queries[0]
    res = graph.hybrid_search(args.text, vector=vector, k=args.k, seeds=args.seeds, hops=args.hops,
                              max_visited=args.max_visited, rels=args.rels, labels=args.labels,
                              tenants=args.tenants, direction=args.direction)
    records = [{"rank": rank, "key": hit.key, "score": hit.score, "ranks": hit.ranks, "walk": _walk(hit),
                "text": _snippet(graph, hit.key)} for rank, hit in enumerate(res, 1)]
    if args.json:
        _print_json(records)
        return 0
    _print_hybrid_hits(records, res.channels)
    print(f"({_n(len(records), 'result')}; channels {', '.join(res.channels)}; "
          "ranks per channel as d(ense) b(m25) g(raph) e(ntity))")
    return 0


def _cmd_query(args: argparse.Namespace) -> int:
    if args.hybrid and args.text is None:
        args.parser.error("--hybrid needs TEXT (and takes --vector FILE.npy for the dense channel)")
    if args.hybrid and args.k > _MAX_HYBRID_K:
        args.parser.error(f"argument -k: with --hybrid, expected an integer in [1, {_MAX_HYBRID_K:,}], "
                          f"got {args.k:,}")
    if args.vector is not None and args.embedder is not None:
        args.parser.error("--embedder and --vector exclude each other: --embedder turns TEXT into the query "
                          "vector, --vector gives the query vector itself")
    if args.hybrid and args.exact:
        args.parser.error("--exact and --hybrid exclude each other: --exact makes the graph-guided search "
                          "(without --hybrid) find its seeds by a brute-force scan; the channels of --hybrid "
                          "have no exact mode")
    if not args.hybrid and (args.text is None) == (args.vector is None):
        args.parser.error("give either TEXT or --vector FILE.npy (exactly one; both only with --hybrid)")
    if args.text is not None and not args.text.strip():
        args.parser.error("TEXT is empty; a query needs some text to embed")
    with _open_graph(args.folder, read_only=True) as graph:
        for kind, names in (("rels", args.rels), ("labels", args.labels), ("tenants", args.tenants)):
            for name in graph.unknown_names(kind, names) if names else []:
                print(f"vecgraph query: warning: {kind[:-1]} {name!r} is not in the graph; the --{kind} filter "
                      "matches nothing through it", file=sys.stderr)
        if args.hybrid:
            return _cmd_hybrid_query(args, graph)
        queries = _query_vectors(args, graph)
        params = {"k": args.k, "seeds": args.seeds, "hops": args.hops, "max_visited": args.max_visited,
                  "rels": args.rels, "labels": args.labels, "tenants": args.tenants, "direction": args.direction,
                  "exact": args.exact}
        if len(queries) == 1:
            results = [graph.search(queries[0], **params)]
        else:
            results = graph.search_batch(queries, **params)
        for i, result in enumerate(results):
            records = [_hit_record(rank, hit, graph.get_node(hit.key, vector=False))
                       for rank, hit in enumerate(result, 1)]
            if args.json:
                _print_json(records)
                continue
            if len(results) > 1:
                print(f"{'' if i == 0 else chr(10)}query {i + 1} of {len(results)}")
            if records:
                _print_hits(records)
            print(f"({_n(len(records), 'result')}; {_n(result.count_seeds, 'seed')}, "
                  f"{_n(result.count_visited, 'node')} visited)")
    return 0


# ---------------------------------------------------------------- maintenance


def _cmd_stats(args: argparse.Namespace) -> int:
    with _open_graph(args.folder, read_only=True) as graph:
        stats = graph.stats()
        manifest = storage.read_manifest(graph.path) or {}
        stats.update(path=graph.path, uuid=manifest.get("uuid"), snapshot=manifest.get("snapshot"),
                     snapshot_lsn=manifest.get("snapshot_lsn"), embedder=manifest.get("embedder"),
                     disk_bytes=storage.folder_bytes(graph.path))
        # What the folder is, not how stats opened it (read-only, to look): whether this user
        # may write to it.
        stats["read_only"] = not os.access(graph.path, os.W_OK)
    if args.json:
        _print_json(stats)
        return 0
    _print_stats(stats)
    return 0


def _cmd_checkpoint(args: argparse.Namespace) -> int:
    with _open_graph(args.folder) as graph:
        graph.wait_for_indexing()  # so that the snapshot carries the HNSW graph
        _print_checkpoint(graph.checkpoint())
    return 0


def _cmd_compact(args: argparse.Namespace) -> int:
    with _open_graph(args.folder) as graph:
        before = graph.stats()
        t0 = time.perf_counter()
        graph.compact()
        after = graph.stats()
        print(f"compacted {args.folder} in {time.perf_counter() - t0:.2f} s: "
              f"{_n(before['delta_edges'], 'delta edge')} folded, {_n(before['deleted_edges'], 'deleted edge')} "
              f"dropped, {_n(after['edges'], 'edge')} in the CSR")
        graph.wait_for_indexing()
        _print_checkpoint(graph.checkpoint())
    return 0


def _refuse_existing(path: str, overwrite: bool) -> None:
    if os.path.exists(path) and not overwrite:
        raise CommandError(f"{path} exists; pass --overwrite to replace it")


def _cmd_export(args: argparse.Namespace) -> int:
    _require_graph(args.folder)
    _refuse_existing(args.out, args.overwrite)
    from . import snapshot

    with _open_graph(args.folder, read_only=True) as graph:
        info = snapshot.export(graph, args.out, format=args.format, overwrite=args.overwrite)
    print(f"exported {_n(info['nodes'], 'node')}, {_n(info['edges'], 'edge')} to {info['path']} ({info['format']})")
    for name in info.get("files", {}):
        print(f"  {name}")
    return 0


def _cmd_restore(args: argparse.Namespace) -> int:
    if not os.path.exists(args.snapshot):
        raise CommandError(f"no snapshot at {args.snapshot}")
    _refuse_existing(args.folder, args.overwrite)
    from . import snapshot

    t0 = time.perf_counter()
    graph = snapshot.restore(args.snapshot, args.folder, overwrite=args.overwrite)
    with graph:
        print(f"restored {_n(len(graph), 'node')}, {_n(graph.count_edges, 'edge')} from {args.snapshot} "
              f"into {graph.path} in {time.perf_counter() - t0:.2f} s")
    return 0


def _cmd_verify(args: argparse.Namespace) -> int:
    from . import snapshot

    if args.text and not args.absent_tenant:
        raise CommandError("--text is checked together with --absent-tenant USER")
    lost = os.path.isdir(args.folder) and not _is_graph(args.folder) and storage.graph_remnants(args.folder)
    if not lost:
        _require_graph(args.folder)
    problems = list(snapshot.verify(args.folder))  # a lost MANIFEST: that one problem
    if not lost:
        problems += _absence_problems(args.folder, args.absent_tenant, args.text)
    if args.json:
        _print_json({"folder": args.folder, "ok": not problems, "problems": problems})
    else:
        for problem in problems:
            print(problem)
        if not problems:
            print(f"{args.folder}: no problems found")
    if problems:
        print(f"vecgraph verify: error: {args.folder}: {_n(len(problems), 'problem')}", file=sys.stderr)
        return 1
    return 0


def _cmd_repair(args: argparse.Namespace) -> int:
    from .graph import Graph

    if not os.path.isdir(args.folder):
        raise CommandError(f"no folder at {args.folder}")
    try:
        report = Graph.repair(args.folder, force=args.force, dim=args.dim, metric=args.metric)
    except Error as e:
        if args.json:
            _print_json({"repaired": False, "error": str(e)})
        raise
    if args.json:
        _print_json(report)
    elif not report["repaired"]:
        print(f"{args.folder}: {report['reason']}")
    else:
        print(f"{args.folder}: {report['reason']}; rebuilt it from {report['snapshot'] or 'the WAL alone'} "
              f"(LSN {report['snapshot_lsn']}) and {_n(report['replayed'], 'WAL record')} after it, up to LSN "
              f"{report['last_lsn']}: {_n(report['nodes'], 'node')}, {_n(report['edges'], 'edge')}")
        for problem in report["skipped"]:
            print(f"  passed over: {problem}")
        for risk in report["may_lose"]:
            print(f"  forced; may be lost: {risk}")
    return 0


def _absence_problems(folder: str, tenants: list, texts: list) -> list:
    """What is left of ``tenants``: their live nodes, and every place a file of the folder
    holds the UTF-8 bytes of a tenant name or of one of ``texts``."""
    if not tenants:
        return []
    from .memory import scan_folder

    problems = []
    for tenant in tenants:
        if not tenant:
            raise CommandError("--absent-tenant needs a non-empty tenant name")
    with _open_graph(folder, read_only=True) as graph:
        for tenant in tenants:
            keys = graph.keys(tenants=[tenant])
            if keys:
                problems.append(f"tenant {tenant!r} still has {_n(len(keys), 'node')} (e.g. {keys[0]!r})")
    places: dict = {}
    for path, needle, offset in scan_folder(folder, list(tenants) + list(texts), limit=10_000):
        places.setdefault((path, needle), []).append(offset)
    for (path, needle), offsets in places.items():
        times = "" if len(offsets) == 1 else f" {len(offsets):,} times, first"
        problems.append(f"{path} holds {needle!r}{times} at byte {offsets[0]:,}")
    return problems


def _open_memory(args: argparse.Namespace, action: str):
    """The store in args.folder: read-only for recall and card (several readers may share it; a
    process writing to it holds the LOCK); without an embedder for forget, expire and card when
    the folder's cannot be loaded here (a store built with an embedder object)."""
    from .memory import Memory

    if action != "remember":
        _require_graph(args.folder)
    spec = args.embedder
    if spec is None and _is_graph(args.folder):
        recorded = (storage.read_manifest(args.folder) or {}).get("embedder") or {}
        spec = recorded.get("spec") or recorded.get("name")
    embedder: Any = spec or "wordllama"
    if args.embedder is None:
        try:
            embedder = _load_embedder(embedder)
        except Exception as exc:  # noqa: BLE001 - forget, expire and card embed nothing
            if action in ("remember", "recall"):
                raise CommandError(f"the store was built with embedder {embedder!r}, which cannot be loaded here "
                                   f"({exc}); pass --embedder SPEC") from exc
            embedder = None
    read_only = action == "recall" or (action == "card" and not args.refresh)
    return Memory.open(args.folder, embedder=embedder, read_only=read_only)


def _cmd_memory(args: argparse.Namespace) -> int:
    action = args.memory_command
    with _open_memory(args, action) as mem:
        if action == "remember":
            memory_id = mem.remember(args.user, args.text, kind=args.kind, source=args.source, session=args.session,
                                     at=args.at, supersedes=args.supersedes)
            _print_json({"id": memory_id}) if args.json else print(memory_id)
        elif action == "recall":
            hits = mem.recall(args.user, args.query, args.k, now=args.now, since=args.since, until=args.until,
                              kinds=args.kinds, include_superseded=args.include_superseded,
                              include_inferred=args.include_inferred)
            if args.json:
                _print_json([hit.to_dict() for hit in hits])
            else:
                for hit in hits:
                    print(f"{hit.score:8.4f}  [{hit.id}] ({hit.kind}, {hit.source}, {hit.at.date().isoformat()}) "
                          f"{hit.text}")
                if not hits:
                    print(f"no memory of {args.user!r} answers that")
        elif action == "card":
            _print_json(mem.card(args.user, refresh=args.refresh))
        elif action == "forget":
            receipt = mem.forget(args.user)
            if args.json:
                _print_json(receipt.to_dict())
            else:
                state = ("verified: no file holds their keys" if receipt.verified
                         else "NOT verified: their keys are still in the folder")
                print(f"forgot {args.user!r}: {_n(receipt.memories, 'memory')}, {_n(receipt.entities, 'entity')}, "
                      f"{_n(receipt.cards, 'card')}; {_n(len(receipt.files_removed), 'file')} removed; {state}")
                for path, needle, offset in receipt.found:
                    print(f"  {path} holds {needle!r} at byte {offset:,}")
                if receipt.id_found:
                    print(f"  the id {args.user!r} itself still occurs in {_n(len(receipt.id_found), 'place')}, e.g. "
                          f"{receipt.id_found[0][0]} at byte {receipt.id_found[0][2]:,} (a short or common id also "
                          "occurs in other data; `vecgraph verify --absent-tenant` lists them)")
            if not receipt.verified:
                return 1
        elif action == "expire":
            if args.purge:
                result = mem.purge_expired(args.now)
                expired = result["expired"]
            else:
                expired = [hit.id for hit in mem.expire(args.now)]
                result = {"expired": expired}
            _print_json(result) if args.json else print(f"expired {_n(len(expired), 'memory')}")
    return 0


def _cmd_mcp(args: argparse.Namespace) -> int:
    from .integrations import mcp

    return mcp.run_command(args)


def _cmd_info(args: argparse.Namespace) -> int:
    print(f"vecgraph {__version__}")
    print(f"active ISA: {active_isa()}")
    print(f"available ISAs: {', '.join(available_isas())}")
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    from .graph import Graph
    from .synthetic import clustered_graph, queries

    n, dim = args.nodes, args.dim
    print(f"vecgraph demo: {n:,} nodes, ~{5 * n:,} edges, {dim}-d, kernels: {active_isa()}")
    t0 = time.perf_counter()
    data = clustered_graph(n, dim=dim, seed=args.seed)
    print(f"  generated in {time.perf_counter() - t0:.1f} s")

    g = Graph(dim=dim, metric="cos")
    t0 = time.perf_counter()
    batch = max(1, n // 20)
    with _progress(n, "add_nodes (quantize + HNSW)", "node") as bar:
        for start in range(0, n, batch):
            stop = min(n, start + batch)
            g.add_nodes(data.keys[start:stop], data.vectors[start:stop], labels=f"cluster-{start // batch % 4}")
            bar.update(stop - start)
    t_nodes = time.perf_counter() - t0
    t0 = time.perf_counter()
    rels = [data.rel_names[i] for i in data.rel_ids]
    g.add_edges(data.src, data.dst, rels=rels, weights=data.weights)
    t_edges = time.perf_counter() - t0
    print(f"  add_nodes {t_nodes:.1f} s ({n / t_nodes:,.0f} nodes/s), add_edges {t_edges:.2f} s")

    qs = queries(data, args.queries, seed=args.seed + 1)
    params = dict(k=10, seeds=8, hops=2, max_visited=2000)
    g.search(qs[0], **params)  # builds the CSR once, warms caches
    latencies, recalls = [], []
    for q in qs:
        t0 = time.perf_counter_ns()
        fast = g.search(q, **params)
        latencies.append(time.perf_counter_ns() - t0)
        exact = g.search(q, exact=True, **params)
        recalls.append(len(set(fast.keys) & set(exact.keys)) / max(1, len(exact.keys)))
    lat_us = np.array(latencies) / 1e3
    print(f"  search (k=10, seeds=8, hops=2, max_visited=2000), {len(qs)} queries, one thread:")
    print(f"    p50 {np.percentile(lat_us, 50):.0f} µs   p99 {np.percentile(lat_us, 99):.0f} µs   "
          f"recall@10 vs exact seeds {np.mean(recalls):.3f}")
    t0 = time.perf_counter()
    g.search_batch(qs, **params)
    t_batch = time.perf_counter() - t0
    print(f"    search_batch on all cores: {len(qs) / t_batch:,.0f} queries/s")

    res = g.search(qs[0], **params)
    print("  top 5 for the first query (key, score, hop, path from its seed):")
    for hit in res[:5]:
        print(f"    {hit.key!r:>10}  {hit.score:.4f}  hop {hit.hop}  {_walk(hit)}")
    # The best hits are usually seeds; show what the walk added beyond them.
    reached = [hit for hit in res if hit.hop > 0]
    if not reached:
        reached = [hit for hit in g.search(qs[0], **{**params, "k": 50}) if hit.hop > 0][:3]
    print("  reached through the graph (not among the seeds):")
    for hit in reached[:3]:
        print(f"    {hit.key!r:>10}  {hit.score:.4f}  hop {hit.hop}  {_walk(hit)}")
    return 0


def _cmd_wordnet(args: argparse.Namespace) -> int:
    from . import wordnet_demo

    embedder = _load_embedder(args.embedder, args.parser) if args.embedder is not None else None
    wordnet_demo.run(args.folder, limit=args.limit, embedder=embedder, synsets=args.synsets,
                     rebuild=args.rebuild, as_json=args.json)
    return 0


# ---------------------------------------------------------------- eval


def _cmd_eval(args: argparse.Namespace) -> int:
    from . import evaluate

    runs = None
    if args.runs:  # (args.run is the subcommand's function)
        runs = {}
        for name, kwargs in args.runs:
            if name in runs:
                args.parser.error(f"argument --run: run {name!r} is given twice; run names must be unique")
            runs[name] = kwargs
    names = list(runs) if runs is not None else list(evaluate.default_runs())
    if args.baseline is not None and args.baseline not in names:
        args.parser.error(f"argument --baseline: expected one of the runs ({', '.join(map(repr, names))}), "
                          f"got {args.baseline!r}")
    with _open_graph(args.folder, read_only=True) as graph:
        try:
            queries = evaluate.load_queries(args.queries, dim=graph.dim)
        except OSError as exc:
            raise CommandError(f"cannot read {args.queries}: {exc.strerror or exc}") from None
        recorded = graph.embedder
        needs = sum(1 for q in queries if q.get("vector") is None and q.get("text") is not None)
        embedder = None
        if args.embedder is not None:
            embedder = _load_embedder(args.embedder, args.parser)
            _check_embedder_arg(args, embedder, graph.dim, recorded)
        elif needs and recorded is not None:
            spec = recorded.get("spec") or recorded["name"]
            try:
                embedder = _load_embedder(spec)
            except (CommandError, Error) as exc:
                raise CommandError(f"the graph at {args.folder} was built with embedder "
                                   f"{recorded['name']!r}, which cannot be loaded by {spec!r} ({exc}); "
                                   "pass --embedder SPEC") from exc
        elif needs:
            print(f"vecgraph eval: note: {_queries(needs)} without a vector, and the graph at {args.folder} "
                  "records no embedder (nor was --embedder given): they run through bm25 and entity only",
                  file=sys.stderr)
        report = evaluate.evaluate(graph, queries, k=args.k, runs=runs, embedder=embedder,
                                   baseline=args.baseline)
    if report.unknown_relevant:
        print(f"vecgraph eval: note: {_n(report.unknown_relevant, 'relevant key')} of the judgments "
              f"{'is' if report.unknown_relevant == 1 else 'are'} not in the graph (keys are compared with "
              "their type: 42 is not '42'; in JSON, grade int keys as [[42, 2]] pairs)", file=sys.stderr)
    if args.json:
        _print_json(report.to_dict())
        return 0
    print(report.table())
    notes = [f"{_queries(len(report.qids))}, k={report.k}"]
    if report.embedded:
        notes.append(f"{_n(report.embedded, 'query text')} embedded with {embedder.name} in "
                     f"{report.embed_seconds:.2f} s (not in the latencies)")
    if report.baseline is not None:
        why = " (the best single channel)" if args.baseline is None else ""
        notes.append(f"baseline {report.baseline}{why}: queries whose nDCG@{report.k} is better / worse")
    print(f"({'; '.join(notes)})")
    return 0


_COMMANDS = ("checkpoint", "compact", "demo", "eval", "export", "info", "ingest", "kb", "mcp", "memory", "query",
             "repair", "restore", "stats", "verify", "wordnet")


def _cmd_kb(args: argparse.Namespace) -> int:
    from .cli_kb import cmd_kb

    return cmd_kb(args)


def build_parser() -> argparse.ArgumentParser:
    """The ``vecgraph`` argument parser (:func:`vecgraph.cli_parser.build_parser`), each subcommand
    running this module's ``_cmd_<name>`` as it stands when the parser is built."""
    return cli_parser.build_parser({name: globals()[f"_cmd_{name}"] for name in _COMMANDS})


def _message(exc: BaseException) -> str:
    """What to print for an error: its message, or its type and message for an unexpected one."""
    if isinstance(exc, KeyError) and not isinstance(exc, Error) and exc.args:
        text = str(exc.args[0])
    else:
        text = str(exc)
    if isinstance(exc, (CommandError, Error, OSError, ValueError, KeyError, ImportError)):
        return text or type(exc).__name__
    return f"{type(exc).__name__}: {text} (--debug shows the traceback)"


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = build_parser()
    args, unknown = parser.parse_known_args(argv)  # usage errors exit here with code 2
    if unknown:
        # An option between two positionals ("query FOLDER --hybrid TEXT") makes argparse match
        # FOLDER and the optional TEXT together, leaving TEXT over: parse the subcommand's
        # arguments again with options and positionals intermixed.
        rest = list(sys.argv[1:] if argv is None else argv)
        at = next(i for i, arg in enumerate(rest) if not arg.startswith("-"))  # the subcommand
        try:
            again, unknown = args.parser.parse_known_intermixed_args(rest[at + 1:])
        except TypeError:  # a subcommand with actions of its own (memory): argparse cannot intermix
            again = None
        if again is not None:
            vars(args).update(vars(again))  # --debug before the subcommand stays
    if unknown:  # reported with the subcommand's usage, not the top-level one
        args.parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    prefix = f"vecgraph {args.command}"
    try:
        return args.run(args)
    except KeyboardInterrupt:
        if args.debug:
            raise
        print(f"\n{prefix}: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:
        # The reader went away (`vecgraph query ... | head`): stop quietly.
        try:
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        except OSError:
            pass
        return 141
    except Exception as exc:
        if args.debug:
            raise
        print(f"{prefix}: error: {_message(exc)}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
