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
  demo        build a clustered synthetic graph, run graph-guided searches, and print what they
              found, how fast, and how close the HNSW path is to the exact one
  wordnet     build (or reopen) a WordNet 3.0 graph, answer its held-out questions through every
              channel, and print quality, latency and example answers with their paths
  eval        run your own judged queries (JSONL) through each retrieval channel and print
              recall@k, MRR@k, nDCG@k, latency and wins / losses against the best channel
  info        version, kernel ISA and the ISAs this CPU can run

Errors go to stderr as ``vecgraph <subcommand>: error: <message>``; the exit code is 1 for a
failure while running, 2 for a usage error (a bad option value, options that exclude each other,
or a --dim, --metric or --embedder the graph folder does not match), 130 when interrupted.
``--debug`` shows the traceback.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import shutil
import sys
import time
from collections.abc import Iterator, Sequence
from typing import Any, Optional

import numpy as np

from . import __version__, active_isa, available_isas, storage
from .errors import Error
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


def _int_in(low: int, high: int):
    """argparse type: an int in [low, high], named in the error."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
        if not low <= value <= high:
            raise argparse.ArgumentTypeError(f"expected an integer in [{low:,}, {high:,}], got {value:,}")
        return value

    return parse


def _name_list(flag: str, what: str):
    """argparse type for a filter flag: comma-separated names (used with action="extend", so
    the flag may repeat); ``''`` alone is the empty name, the default ``what`` of nodes and
    edges, as ``""`` is in :meth:`Graph.search`."""

    def parse(text: str) -> list:
        if text == "":
            return [""]
        names = [name.strip() for name in text.split(",")]
        if not all(names):
            raise argparse.ArgumentTypeError(
                f"expected comma-separated names, got {text!r} (an empty name in a list; the default "
                f"(empty) {what} is {flag} '' on its own, and {flag} may repeat)")
        return names

    return parse


def _is_graph(folder: str) -> bool:
    return os.path.isfile(os.path.join(folder, storage.MANIFEST))


def _require_graph(folder: str) -> None:
    if not _is_graph(folder):
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
            records = [_hit_record(rank, hit) for rank, hit in enumerate(result, 1)]
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
    _require_graph(args.folder)
    from . import snapshot

    problems = list(snapshot.verify(args.folder))
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


def _run_spec(text: str) -> tuple:
    """argparse type for --run: ``NAME=JSON``, JSON an object of hybrid_search arguments."""
    name, sep, value = text.partition("=")
    name = name.strip()
    if not sep or not name:
        raise argparse.ArgumentTypeError(
            f"expected NAME=JSON, e.g. bm25='{{\"channels\": [\"bm25\"]}}' or hybrid='{{}}', got {text!r}")
    try:
        kwargs = json.loads(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(f"run {name!r}: expected a JSON object of hybrid_search arguments "
                                         f"after '=', got {value!r} ({exc})") from None
    if not isinstance(kwargs, dict):
        raise argparse.ArgumentTypeError(f"run {name!r}: expected a JSON object of hybrid_search arguments "
                                         f"after '=', got {value!r}")
    return name, kwargs


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


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the line breaks of descriptions and example epilogs."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="vecgraph", formatter_class=_HelpFormatter,
        description="Embedded graph-vector engine: graph folders from the command line.",
        epilog=_examples(
            "vecgraph ingest memory.vg --nodes people.parquet --edges links.csv --dim 384",
            "vecgraph query memory.vg 'who makes the widget?' -k 5",
            "vecgraph stats memory.vg",
            "vecgraph SUBCOMMAND --help"))
    parser.add_argument("--version", action="version", version=f"vecgraph {__version__}")
    parser.add_argument("--debug", action="store_true", help="show the full traceback on errors")
    sub = parser.add_subparsers(dest="command", required=True, metavar="SUBCOMMAND")
    # --debug is accepted after the subcommand too; SUPPRESS keeps the global value when absent.
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--debug", action="store_true", default=argparse.SUPPRESS,
                        help="show the full traceback on errors")

    def command(name: str, run, help: str, description: str, epilog: str) -> argparse.ArgumentParser:
        p = sub.add_parser(name, help=help, description=description, epilog=epilog, parents=[common],
                           formatter_class=_HelpFormatter)
        p.set_defaults(run=run, parser=p)
        return p

    # ingest
    p = command(
        "ingest", _cmd_ingest, "load nodes and edges from files into a graph folder",
        "Load nodes and edges from Parquet, Arrow IPC, CSV or JSONL files into the graph in FOLDER,\n"
        "creating it (with --dim or the embedder's dim) when it does not exist. Rows stream in batches;\n"
        "each batch is applied whole or not at all. A bad row (missing key, wrong dim, NaN, an edge to\n"
        "a missing node) stops the command, or with --on-error skip is written to the rejects file.\n"
        "Columns default to the usual names (key/id, src/source, dst/target, rel/type, ...); the\n"
        "--*-column flags map others. Vectors come from the vector column, or from the text column\n"
        "through --embedder. The graph is checkpointed at the end unless --no-checkpoint.",
        _examples(
            "vecgraph ingest memory.vg --nodes people.parquet --dim 384",
            "vecgraph ingest memory.vg --nodes docs.jsonl --text-column body --embedder wordllama",
            "vecgraph ingest memory.vg --edges links.csv --src-column from --dst-column to --rel-column kind",
            "vecgraph ingest memory.vg --nodes a.parquet --nodes b.parquet --on-error skip --rejects bad.jsonl",
            "vecgraph ingest memory.vg --nodes people.csv --embedder mypkg.embed:MiniLM --metric ip"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder (created if missing)")
    p.add_argument("--nodes", metavar="FILE", action="append",
                   help="node file (.parquet, .arrow/.feather/.ipc, .csv, .jsonl/.ndjson); repeat for several")
    p.add_argument("--edges", metavar="FILE", action="append",
                   help="edge file, loaded after every node file; repeat for several")
    g = p.add_argument_group("node columns (default: the usual names, when present)")
    g.add_argument("--key-column", metavar="NAME", help="node key (default: key or id)")
    g.add_argument("--vector-column", metavar="NAME", help="node vector: list or fixed-size-list of numbers")
    g.add_argument("--text-column", metavar="NAME", help="node text (embedded with --embedder)")
    g.add_argument("--label-column", metavar="NAME", help="node label")
    g.add_argument("--tenant-column", metavar="NAME", help="node tenant")
    g.add_argument("--ts-column", metavar="NAME", help="node timestamp, int64 microseconds since the epoch")
    g.add_argument("--props-column", metavar="NAME", help="node props: a struct or JSON object")
    g = p.add_argument_group("edge columns (default: the usual names, when present)")
    g.add_argument("--src-column", metavar="NAME", help="source node key (default: src or source)")
    g.add_argument("--dst-column", metavar="NAME", help="destination node key (default: dst or target)")
    g.add_argument("--rel-column", metavar="NAME", help="relation type (default: rel or type)")
    g.add_argument("--weight-column", metavar="NAME", help="edge weight (default 1)")
    g.add_argument("--edge-ts-column", metavar="NAME", help="edge timestamp")
    g.add_argument("--edge-text-column", metavar="NAME",
                   help="edge text (embedded into edge vectors with --embedder when no --edge-vector-column)")
    g.add_argument("--edge-props-column", metavar="NAME", help="edge props")
    g.add_argument("--edge-vector-column", metavar="NAME", help="edge vector")
    g = p.add_argument_group("graph and loading")
    g.add_argument("--upsert", action="store_true",
                   help="replace nodes whose key is already in the graph (default: reject those rows)")
    g.add_argument("--key-type", choices=("str", "int"), default="str",
                   help="how CSV key, src and dst fields are read: str keeps them as written (007 stays "
                        "'007'), int parses them as integers (default str; Parquet, Arrow and JSONL keys "
                        "keep their own types)")
    g.add_argument("--dim", type=_int_in(1, 65_536),
                   help="vector dimension of a new graph (default: the embedder's); for an existing graph, "
                        "if given, its own")
    g.add_argument("--metric", choices=("cos", "ip", "l2"),
                   help="metric of a new graph (default cos); for an existing graph, if given, its own")
    g.add_argument("--embedder", metavar="SPEC",
                   help="embed texts into vectors: a known name (e.g. wordllama) or module:attr; "
                        "recorded in the graph, which then refuses any other")
    g.add_argument("--batch-rows", type=_int_in(1, 100_000_000), default=65_536, metavar="N",
                   help="rows per batch (default 65,536); memory stays bounded by the batch")
    g.add_argument("--on-error", choices=("raise", "skip"), default="raise",
                   help="raise: stop at the first bad row (earlier batches are kept); "
                        "skip: skip bad rows and list them in FILE.rejects.jsonl beside the input, or "
                        "--rejects (default raise)")
    g.add_argument("--rejects", metavar="PATH",
                   help="with --on-error skip: write skipped rows here (with several input files, "
                        "numbered: bad.jsonl -> bad.1.jsonl, bad.2.jsonl, ...). A rejects file is kept "
                        "only when rows were skipped: an input without bad rows leaves none (and "
                        "removes one an earlier run left at that path)")
    g.add_argument("--sync", nargs="?", const="always", default="off", choices=("always", "interval", "off"),
                   metavar="POLICY",
                   help="WAL fsync policy while loading: always (--sync alone), interval or off "
                        "(default off; the log is synced when the command ends either way)")
    g.add_argument("--checkpoint", action=argparse.BooleanOptionalAction, default=True,
                   help="write a snapshot at the end (default: yes)")

    # query
    p = command(
        "query", _cmd_query, "search a graph by text or by vector",
        "Graph-guided search of the graph in FOLDER: seed nodes by vector similarity, a breadth-first\n"
        "walk over their edges, every node reached rescored against the query. The query is TEXT,\n"
        "embedded with the graph's recorded embedder (or --embedder), or the vectors of a .npy file:\n"
        "(dim,) for one query, (n, dim) for n. Prints rank, key, score, hops and the path from the\n"
        "seed (seed -rel-> a <-rel- hit: arrows as the edges are stored), or with --json one JSON\n"
        "array of hits per query, one per line.",
        _examples(
            "vecgraph query memory.vg 'who makes the widget?'",
            "vecgraph query memory.vg --vector q.npy -k 5 --hops 1 --rels works_at,makes",
            "vecgraph query memory.vg --vector batch.npy --json --tenants user-42",
            "vecgraph query memory.vg 'acme' --labels person --direction out --exact"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")
    p.add_argument("text", metavar="TEXT", nargs="?", help="query text (needs an embedder)")
    p.add_argument("--vector", metavar="FILE.npy",
                   help="query vectors instead of TEXT: (dim,) or (n, dim); with --hybrid, beside TEXT: one vector")
    p.add_argument("-k", type=_int_in(1, 1_000_000), default=10, metavar="K",
                   help=f"results per query (default 10; at most 1,000,000, with --hybrid {_MAX_HYBRID_K:,})")
    p.add_argument("--seeds", type=_int_in(1, 1_000_000), default=8, metavar="N", help="seed nodes (default 8)")
    p.add_argument("--hops", type=_int_in(0, 1_000), default=2, metavar="N", help="levels to walk (default 2)")
    p.add_argument("--max-visited", type=_int_in(1, 2**31 - 1), default=2000, metavar="N",
                   help="cap on nodes visited (default 2,000)")
    p.add_argument("--rels", type=_name_list("--rels", "relation type"), action="extend",
                   metavar="REL[,REL...]",
                   help="relation types to follow (default: all); --rels '' is the default (empty) "
                        "relation type, of edges added without one")
    p.add_argument("--labels", type=_name_list("--labels", "label"), action="extend", metavar="LABEL[,...]",
                   help="admit only nodes with these labels (default: all); --labels '' is the default "
                        "(empty) label, of nodes added without one")
    p.add_argument("--tenants", type=_name_list("--tenants", "tenant"), action="extend",
                   metavar="TENANT[,...]",
                   help="admit only nodes of these tenants (default: all); --tenants '' is the default "
                        "(empty) tenant")
    p.add_argument("--direction", choices=("out", "in", "both"), default="both",
                   help="edge direction to walk (default both)")
    p.add_argument("--exact", action="store_true",
                   help="brute-force seeds instead of the HNSW index (not with --hybrid)")
    p.add_argument("--embedder", metavar="SPEC",
                   help="embedder for TEXT (default: the one the graph recorded; not with --vector)")
    p.add_argument("--json", action="store_true", help="one JSON array of hits per query, one per line")
    p.add_argument("--hybrid", action="store_true",
                   help="TEXT through every channel of hybrid_search (dense, BM25, graph, entity; "
                        "without an embedder or --vector: BM25 and entity), fused by RRF; shows each hit's "
                        "rank per channel. --vector FILE.npy (one vector) gives the dense channel's query")

    # stats
    p = command(
        "stats", _cmd_stats, "counts, configuration and memory of a graph",
        "Counts (nodes, edges, labels, tenants, rels, deleted), configuration (dim, metric, HNSW),\n"
        "memory per structure, the snapshot, the embedder and the bytes on disk.",
        _examples("vecgraph stats memory.vg", "vecgraph stats memory.vg --json | jq .nodes"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = command(
        "checkpoint", _cmd_checkpoint, "write a snapshot and drop the log it covers",
        "Write the graph's state as an Arrow snapshot, commit it in the MANIFEST, and drop the\n"
        "write-ahead log segments it makes unnecessary (opening the graph then loads the snapshot\n"
        "instead of replaying the log).",
        _examples("vecgraph checkpoint memory.vg"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")

    p = command(
        "compact", _cmd_compact, "fold the edge delta into the CSR, then checkpoint",
        "Fold the edges added or deleted since the last compaction into a new CSR, then checkpoint.",
        _examples("vecgraph compact memory.vg"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")

    p = command(
        "export", _cmd_export, "write a portable copy (Parquet or Arrow IPC)",
        "Write the graph in FOLDER to OUT as files other tools read (pyarrow, DuckDB, Polars):\n"
        "nodes and edges with their keys, labels, tenants, timestamps, texts, props and vectors.\n"
        "`vecgraph restore OUT NEWFOLDER` builds a graph from them again.",
        _examples("vecgraph export memory.vg memory-export",
                  "vecgraph export memory.vg memory-ipc --format arrow --overwrite"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")
    p.add_argument("out", metavar="OUT", help="output folder")
    p.add_argument("--format", choices=("parquet", "arrow"), default="parquet",
                   help="parquet or arrow (Arrow IPC) (default parquet)")
    p.add_argument("--overwrite", action="store_true", help="replace an earlier export at OUT")

    p = command(
        "restore", _cmd_restore, "build a graph folder from an exported copy",
        "Build a working graph folder FOLDER from SNAPSHOT_DIR, a copy written by `vecgraph export`.",
        _examples("vecgraph restore memory-export memory.vg",
                  "vecgraph restore memory-export memory.vg --overwrite"))
    p.add_argument("snapshot", metavar="SNAPSHOT_DIR", help="exported copy to restore")
    p.add_argument("folder", metavar="FOLDER", help="graph folder to create")
    p.add_argument("--overwrite", action="store_true", help="replace FOLDER if it already holds a graph")

    p = command(
        "verify", _cmd_verify, "check a graph folder; exit code 1 on any problem",
        "Check the graph in FOLDER: every checksum (MANIFEST, snapshot files, write-ahead log), the\n"
        "CSR invariants, and that the seed index agrees with the vector store. Prints each problem\n"
        "found; the exit code is 0 when there is none, 1 otherwise.",
        _examples("vecgraph verify memory.vg", "vecgraph verify memory.vg --json"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")
    p.add_argument("--json", action="store_true", help='print {"folder", "ok", "problems"} as JSON')

    p = command(
        "demo", _cmd_demo, "build a synthetic graph and run graph-guided searches",
        "Build a clustered synthetic graph in memory, run graph-guided searches, and print their\n"
        "latency, recall against exact seeds, and example results with their paths.",
        _examples("vecgraph demo", "vecgraph demo --nodes 10000 --dim 64 --queries 100"))
    p.add_argument("--nodes", type=_int_in(100, 10_000_000), default=100_000,
                   help="number of nodes, 100 to 10,000,000 (default 100,000)")
    p.add_argument("--dim", type=_int_in(2, 4096), default=384, help="vector dimension (default 384)")
    p.add_argument("--queries", type=_int_in(1, 100_000), default=500, help="number of queries (default 500)")
    p.add_argument("--seed", type=_int_in(0, 2**32 - 1), default=0, help="random seed (default 0)")

    p = command(
        "wordnet", _cmd_wordnet, "build a WordNet graph and evaluate every retrieval channel on it",
        "Build a graph of WordNet 3.0 in FOLDER (default ~/.cache/vecgraph/wordnet.vg): one node per\n"
        "synset (lemmas and definition, embedded with the embedder, default wordllama), its typed\n"
        "pointers as edges, its lemmas as aliases. A second run reopens the folder instead of building\n"
        "it again. Then answer the held-out questions (sense: a usage example, find its synset;\n"
        "relation: find the hypernym, whole, group or opposite of a word in a usage example) through\n"
        "each channel (dense, BM25, entity, graph-guided, hybrid) and print recall@10, MRR@10,\n"
        "nDCG@10, p50 / p99 latency, whether the quality bars hold, and example answers with paths.",
        _examples("vecgraph wordnet", "vecgraph wordnet --limit 200", "vecgraph wordnet wn.vg --json > figures.json",
                  "vecgraph query ~/.cache/vecgraph/wordnet.vg 'a small domesticated feline'"))
    p.add_argument("folder", metavar="FOLDER", nargs="?", default=None,
                   help="graph folder (default ~/.cache/vecgraph/wordnet.vg; created if missing)")
    p.add_argument("--limit", type=_int_in(1, 1_000_000), metavar="N",
                   help="evaluate only the first N held-out questions of each set (quick runs)")
    p.add_argument("--json", action="store_true", help="print every figure as one JSON object (progress on stderr)")
    p.add_argument("--embedder", metavar="SPEC",
                   help="embedder for a new graph: a known name or module:attr (default: the one the folder "
                        "was built with, else wordllama); another one than the folder's rebuilds it")
    p.add_argument("--synsets", type=_int_in(10, 1_000_000), metavar="N",
                   help="build from the first N synsets only, with the questions inside them (quick runs)")
    p.add_argument("--rebuild", action="store_true", help="build the folder again even if it holds the graph")

    p = command(
        "eval", _cmd_eval, "evaluate retrieval on your own judged queries",
        "Run each query of QUERIES (JSONL: one object per line, {\"qid\": str, \"text\": str, \"vector\":\n"
        "[numbers], \"relevant\": [keys] or {key: grade}, \"exclude\": [keys]}: qid, relevant and text or\n"
        "vector required) through each run, one hybrid_search call at a time, on the graph in FOLDER\n"
        "(opened read-only). Texts without a vector are embedded first with the graph's recorded\n"
        "embedder (or --embedder), outside the latencies. Default runs: each channel alone (dense,\n"
        "bm25, entity, graph: those the queries can feed), hybrid (every channel, the default fusion)\n"
        "and hybrid (rrf). Prints a Markdown table of recall@k, MRR@k, nDCG@k, p50 / p99 latency\n"
        "and, per run, the queries whose nDCG@k is better / worse than the baseline's (default: the\n"
        "best single channel); --json prints every figure, per query too.",
        _examples("vecgraph eval docs.vg queries.jsonl",
                  "vecgraph eval docs.vg queries.jsonl -k 5 --json > figures.json",
                  "vecgraph eval docs.vg queries.jsonl --run bm25='{\"channels\": [\"bm25\"]}' "
                  "--run hybrid='{}' --run rrf='{\"fusion\": \"rrf\"}' --baseline bm25",
                  "vecgraph eval docs.vg queries.jsonl "
                  "--run 'graph 1 hop={\"channels\": [\"graph\"], \"hops\": 1}'"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")
    p.add_argument("queries", metavar="QUERIES.jsonl", help="judged queries, one JSON object per line")
    p.add_argument("-k", "--k", type=_int_in(1, _MAX_HYBRID_K), default=10, metavar="K",
                   help=f"cutoff of the metrics and results per search (default 10, at most "
                        f"{_MAX_HYBRID_K:,})")
    p.add_argument("--embedder", metavar="SPEC",
                   help="embedder for query texts without a vector (default: the one the graph recorded)")
    p.add_argument("--run", type=_run_spec, action="append", dest="runs", metavar="NAME=JSON",
                   help="a run: its name and a JSON object of hybrid_search arguments (not text, vector, k "
                        "or exclude_keys); repeat for several; replaces the default runs")
    p.add_argument("--baseline", metavar="NAME",
                   help="the run the others are compared with query by query (default: the best single "
                        "channel)")
    p.add_argument("--json", action="store_true", help="print every figure as one JSON object")

    command("info", _cmd_info, "version and SIMD kernels in use",
            "Print the version, the int8 kernel set in use and the ones this CPU can run.",
            _examples("vecgraph info", "VECGRAPH_FORCE_ISA=serial vecgraph info"))
    return parser


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
        again, unknown = args.parser.parse_known_intermixed_args(rest[at + 1:])
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
