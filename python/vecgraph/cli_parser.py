"""The ``vecgraph`` command's argument parser: its subcommands, options, help texts and
examples, and the argparse types that check option values. :mod:`vecgraph.cli` runs what it
parses."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping

from . import __version__
from .hybrid import _MAX_HYBRID_K


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


class _HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Keeps the line breaks of descriptions and example epilogs."""

    def __init__(self, prog: str) -> None:
        super().__init__(prog, max_help_position=32)


def _examples(*lines: str) -> str:
    return "examples:\n" + "\n".join(f"  {line}" for line in lines)


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


def build_parser(commands: Mapping[str, Callable[[argparse.Namespace], int]]) -> argparse.ArgumentParser:
    """The ``vecgraph`` parser; ``commands`` gives the function each subcommand runs (by name)."""
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
        "ingest", commands["ingest"], "load nodes and edges from files into a graph folder",
        "Load nodes and edges from Parquet, Arrow IPC, CSV or JSONL files into the graph in FOLDER,\n"
        "creating it (with --dim or the embedder's dim) when it does not exist. Rows stream in batches;\n"
        "each batch is applied whole or not at all. A bad row (missing key, wrong dim, NaN, an edge to\n"
        "a missing node, a CSV line of too few or too many fields) stops the command, or with\n"
        "--on-error skip is written to the rejects file.\n"
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
    g.add_argument("--ts-column", metavar="NAME",
                   help="node timestamp: int64 microseconds since the epoch, an ISO 8601 date or timestamp "
                        "(UTC unless it names an offset), or an Arrow timestamp or date column")
    g.add_argument("--props-column", metavar="NAME", help="node props: a struct or JSON object")
    g = p.add_argument_group("edge columns (default: the usual names, when present)")
    g.add_argument("--src-column", metavar="NAME", help="source node key (default: src or source)")
    g.add_argument("--dst-column", metavar="NAME", help="destination node key (default: dst or target)")
    g.add_argument("--rel-column", metavar="NAME", help="relation type (default: rel or type)")
    g.add_argument("--weight-column", metavar="NAME", help="edge weight (default 1)")
    g.add_argument("--edge-ts-column", metavar="NAME", help="edge timestamp (the forms --ts-column takes)")
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
    g.add_argument("--metric", choices=("cos", "ip", "l2"), type=_metric_name,
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
        "query", commands["query"], "search a graph by text or by vector",
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
        "stats", commands["stats"], "counts, configuration and memory of a graph",
        "Counts (nodes, edges, labels, tenants, rels, deleted), configuration (dim, metric, HNSW),\n"
        "memory per structure, the snapshot, the embedder and the bytes on disk.",
        _examples("vecgraph stats memory.vg", "vecgraph stats memory.vg --json | jq .nodes"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")
    p.add_argument("--json", action="store_true", help="print one JSON object")

    p = command(
        "checkpoint", commands["checkpoint"], "write a snapshot and drop the log it covers",
        "Write the graph's state as an Arrow snapshot, commit it in the MANIFEST, and drop the\n"
        "write-ahead log segments it makes unnecessary (opening the graph then loads the snapshot\n"
        "instead of replaying the log).",
        _examples("vecgraph checkpoint memory.vg"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")

    p = command(
        "compact", commands["compact"], "fold the edge delta into the CSR, then checkpoint",
        "Fold the edges added or deleted since the last compaction into a new CSR, then checkpoint.",
        _examples("vecgraph compact memory.vg"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")

    p = command(
        "export", commands["export"], "write a portable copy (Parquet or Arrow IPC)",
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
        "restore", commands["restore"], "build a graph folder from an exported copy",
        "Build a working graph folder FOLDER from SNAPSHOT_DIR, a copy written by `vecgraph export`.",
        _examples("vecgraph restore memory-export memory.vg",
                  "vecgraph restore memory-export memory.vg --overwrite"))
    p.add_argument("snapshot", metavar="SNAPSHOT_DIR", help="exported copy to restore")
    p.add_argument("folder", metavar="FOLDER", help="graph folder to create")
    p.add_argument("--overwrite", action="store_true", help="replace FOLDER if it already holds a graph")

    p = command(
        "verify", commands["verify"], "check a graph folder; exit code 1 on any problem",
        "Check the graph in FOLDER: every checksum (MANIFEST, snapshot files, write-ahead log), the\n"
        "CSR invariants, and that the seed index agrees with the vector store. Prints each problem\n"
        "found; the exit code is 0 when there is none, 1 otherwise.",
        _examples("vecgraph verify memory.vg", "vecgraph verify memory.vg --json",
                  "vecgraph verify agent.vg --absent-tenant omar --text 'my PIN is 4921'"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")
    p.add_argument("--json", action="store_true", help='print {"folder", "ok", "problems"} as JSON')
    p.add_argument("--absent-tenant", action="append", default=[], metavar="USER",
                   help="also check that nothing of tenant USER is left: no node of it, and no file of the folder "
                        "holding its bytes (UTF-8) anywhere; repeat for several")
    p.add_argument("--text", action="append", default=[], metavar="TEXT",
                   help="with --absent-tenant: texts or keys of that tenant's that no file may hold either; repeat")

    p = command(
        "repair", commands["repair"], "rebuild a lost or damaged MANIFEST from the snapshots and the WAL",
        "Rebuild the MANIFEST of the graph in FOLDER from the newest snapshot whose checksums and uuid\n"
        "agree with the WAL segments, after recovering the graph in memory from it and the WAL. Changes\n"
        "nothing (exit code 1, saying what is missing) unless the result is proven complete, or --force\n"
        "is given (it prints what may be lost). A folder whose MANIFEST is intact is left alone.",
        _examples("vecgraph repair memory.vg", "vecgraph repair memory.vg --force",
                  "vecgraph repair fresh.vg --dim 384 --metric cos --force"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder")
    p.add_argument("--force", action="store_true",
                   help="repair even when completeness cannot be proven (no WAL_TAIL, a snapshot of an earlier "
                        "version without its description); prints what may be lost")
    p.add_argument("--dim", type=_int_in(1, 65536), default=None,
                   help="the graph's dimension, needed only when the folder holds no snapshot")
    p.add_argument("--metric", choices=("cos", "ip", "l2"), type=_metric_name, default=None,
                   help="the graph's metric, needed only when the folder holds no snapshot")
    p.add_argument("--json", action="store_true", help="print the report as JSON")

    p = command(
        "demo", commands["demo"], "build a synthetic graph and run graph-guided searches",
        "Build a clustered synthetic graph in memory, run graph-guided searches, and print their\n"
        "latency, recall against exact seeds, and example results with their paths.",
        _examples("vecgraph demo", "vecgraph demo --nodes 10000 --dim 64 --queries 100"))
    p.add_argument("--nodes", type=_int_in(100, 10_000_000), default=100_000,
                   help="number of nodes, 100 to 10,000,000 (default 100,000)")
    p.add_argument("--dim", type=_int_in(2, 4096), default=384, help="vector dimension (default 384)")
    p.add_argument("--queries", type=_int_in(1, 100_000), default=500, help="number of queries (default 500)")
    p.add_argument("--seed", type=_int_in(0, 2**32 - 1), default=0, help="random seed (default 0)")

    p = command(
        "wordnet", commands["wordnet"], "build a WordNet graph and evaluate every retrieval channel on it",
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
        "eval", commands["eval"], "evaluate retrieval on your own judged queries",
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

    _memory_parser(command, commands)
    if "kb" in commands:
        from .cli_kb import kb_parser

        kb_parser(command, commands, _HelpFormatter, _examples, _int_in)

    p = command(
        "mcp", commands["mcp"], "serve a graph's searches to agents over the Model Context Protocol",
        "Serve the graph in FOLDER to MCP clients (agents, desktop assistants, IDEs) with the tools\n"
        "search, hybrid_search, get_node, neighbors and stats, and for a memory store (vecgraph.Memory)\n"
        "remember, recall, card and forget. Over stdio by default (the client starts this command);\n"
        "--http HOST:PORT serves streamable HTTP at http://HOST:PORT/mcp instead (no authentication:\n"
        "keep it on a loopback address). The folder is opened once and closed when the server stops.\n"
        "Needs the MCP Python SDK (pip install \"vecgraph[mcp]\").",
        _examples("vecgraph mcp memory.vg",
                  "vecgraph mcp docs.vg --read-only --embedder wordllama",
                  "vecgraph mcp agent.vg --http 127.0.0.1:8765"))
    p.add_argument("folder", metavar="FOLDER", help="graph folder (never created here)")
    p.add_argument("--http", metavar="HOST:PORT", help="serve streamable HTTP on HOST:PORT instead of stdio")
    p.add_argument("--read-only", action="store_true",
                   help="open the folder read-only (beside other readers, while no process holds it for "
                        "writing); no tool writes")
    p.add_argument("--embedder", metavar="SPEC",
                   help="embedder for text queries, which must be the one the graph recorded (default: "
                        "that one; without one, or when it does not load here, text is searched by "
                        "hybrid_search's BM25 and entity channels)")

    command("info", commands["info"], "version and SIMD kernels in use",
            "Print the version, the int8 kernel set in use and the ones this CPU can run.",
            _examples("vecgraph info", "VECGRAPH_FORCE_ISA=serial vecgraph info"))
    return parser


def _memory_parser(command, commands: Mapping[str, Callable[[argparse.Namespace], int]]) -> None:
    """``vecgraph memory remember|recall|card|forget|expire FOLDER ...`` (vecgraph.Memory)."""
    p = command(
        "memory", commands["memory"], "agent memory: remember, recall, card, forget, expire",
        "Work with the memory store (vecgraph.Memory) in FOLDER: per-user memories with versions,\n"
        "expiry and provenance, an overview card per user, and verified erasure. FOLDER is created by\n"
        "the first `remember`; the embedder is the one the folder recorded (default wordllama).",
        _examples("vecgraph memory remember agent.vg --user zhang 'order-service is written in Go' --kind project",
                  "vecgraph memory recall agent.vg --user zhang 'which language is order-service in?' -k 5",
                  "vecgraph memory card agent.vg --user zhang",
                  "vecgraph memory forget agent.vg --user omar",
                  "vecgraph memory expire agent.vg --now 2027-01-01"))
    actions = p.add_subparsers(dest="memory_command", required=True, metavar="ACTION")

    def action(name: str, help: str) -> argparse.ArgumentParser:
        a = actions.add_parser(name, help=help, description=help, formatter_class=_HelpFormatter)
        a.add_argument("folder", metavar="FOLDER", help="memory store folder")
        a.add_argument("--embedder", metavar="SPEC", help="embedder (default: the folder's, else wordllama)")
        a.add_argument("--json", action="store_true", help="print the result as JSON")
        return a

    a = action("remember", "store one memory of a user; prints its id")
    a.add_argument("--user", required=True, help="user id")
    a.add_argument("text", metavar="TEXT", help="what to remember")
    a.add_argument("--kind", default="fact", help="kind (default fact)")
    a.add_argument("--source", default="user", choices=("user", "tool", "document", "model"),
                   help="provenance (default user; model: an inference)")
    a.add_argument("--session", help="session id")
    a.add_argument("--at", help="when it was said or happened (ISO 8601; default now)")
    a.add_argument("--supersedes", metavar="ID", help="the id of the memory this one replaces")
    a = action("recall", "the memories of a user that best answer a question")
    a.add_argument("--user", required=True, help="user id")
    a.add_argument("query", metavar="QUERY", help="the question")
    a.add_argument("-k", "--k", type=_int_in(1, 1000), default=5, help="memories wanted (default 5)")
    a.add_argument("--now", help="judge validity and expiry at this time (ISO 8601; default now)")
    a.add_argument("--since", help="only memories from this time on (ISO 8601)")
    a.add_argument("--until", help="only memories up to this time (ISO 8601)")
    a.add_argument("--kinds", type=_name_list("--kinds", "kind"), action="extend", help="only these kinds (a,b)")
    a.add_argument("--include-superseded", action="store_true", help="also versions that were replaced")
    a.add_argument("--include-inferred", action="store_true", help="also inferences (source model)")
    a = action("card", "the overview card of a user (JSON)")
    a.add_argument("--user", required=True, help="user id")
    a.add_argument("--refresh", action="store_true", help="build it again from the current memories")
    a = action("forget", "erase a user and verify that no file of the folder holds their data")
    a.add_argument("--user", required=True, help="user id")
    a = action("expire", "delete the memories whose TTL has run out")
    a.add_argument("--now", help="the time expiry is judged at (ISO 8601; default now)")
    a.add_argument("--purge", action="store_true", help="also rewrite the folder's history so no file keeps them")


def _metric_name(value: str) -> str:
    """--metric's value, "cosine" taken as "cos" (as vecgraph.Graph takes it)."""
    return "cos" if value == "cosine" else value
