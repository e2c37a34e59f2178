"""``vecgraph kb add|communities|tree|ask FOLDER ...``: the knowledge base (vecgraph.kb) from the shell."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["cmd_kb", "kb_parser"]


def kb_parser(
    command: Callable,
    commands: Mapping[str, Callable[[argparse.Namespace], int]],
    formatter: Any,
    examples: Callable[..., str],
    int_in: Callable,
) -> None:
    """Adds ``vecgraph kb`` with its actions (see :func:`cmd_kb`)."""
    p = command(
        "kb",
        commands["kb"],
        "GraphRAG over documents: add, communities, tree, ask",
        "Work with the knowledge base (vecgraph.KnowledgeBase) in FOLDER: documents (Markdown, HTML,\n"
        "text, PDF) as chunks with context, the entities they name, communities with summaries and a\n"
        "RAPTOR tree; ask in local, global or tree mode. Everything runs offline by default.",
        examples(
            "vecgraph kb add kb.vg manual/ notes.md faq.html",
            "vecgraph kb add kb.vg old-guide.md --version 2.0 --status deprecated",
            "vecgraph kb communities kb.vg",
            "vecgraph kb tree kb.vg",
            "vecgraph kb ask kb.vg 'which service does the billing job depend on?' --mode local",
            "vecgraph kb ask kb.vg 'what are the main topics?' --mode global --json",
        ),
    )
    actions = p.add_subparsers(dest="kb_command", required=True, metavar="ACTION")

    def action(name: str, help: str) -> argparse.ArgumentParser:
        a = actions.add_parser(name, help=help, description=help, formatter_class=formatter)
        a.add_argument("folder", metavar="FOLDER", help="knowledge base folder (created by the first add)")
        a.add_argument("--embedder", metavar="SPEC", help="embedder (default: the folder's, else wordllama)")
        a.add_argument("--tenant", default=None, help='tenant (default: the default tenant "")')
        a.add_argument("--json", action="store_true", help="print the result as JSON")
        return a

    a = action("add", "read, chunk and index documents (files or folders)")
    a.add_argument("paths", metavar="PATH", nargs="+", help="files or folders (.md, .html, .txt, .pdf, .gz)")
    a.add_argument("--version", dest="doc_version", help="the documents' version (e.g. 3.0)")
    a.add_argument("--date", help="the documents' date (ISO 8601)")
    a.add_argument("--status", default="current", help="current (default), deprecated or any word")
    a.add_argument(
        "--on-error",
        choices=("raise", "skip"),
        default="raise",
        help="a file that cannot be read: stop before writing (raise, default) or skip it",
    )
    a.add_argument("--no-progress", action="store_true", help="no progress bar")
    a = action("communities", "build the entity communities (Leiden) and their summaries")
    a.add_argument("--max-levels", type=int_in(1, 10), default=3, help="levels (default 3)")
    a.add_argument(
        "--max-cluster-size",
        type=int_in(2, 1_000_000),
        default=50,
        help="split communities larger than this at the next level (default 50)",
    )
    a = action("tree", "build the RAPTOR tree of summaries over the chunks")
    a.add_argument("--max-cluster-size", type=int_in(2, 10_000), default=10, help="cluster size (default 10)")
    a = action("ask", "retrieve the context that answers a question")
    a.add_argument("question", metavar="QUESTION", help="the question")
    a.add_argument(
        "--mode",
        choices=("local", "global", "tree", "hybrid", "dense", "bm25"),
        default="local",
        help="local (default), global (community summaries), tree (RAPTOR), or plain chunk search",
    )
    a.add_argument("-k", "--k", type=int_in(1, 1000), default=10, help="results (default 10)")
    a.add_argument(
        "--level", type=int_in(0, 10), default=0, help="community level of --mode global (default 0)"
    )
    a.add_argument(
        "--strategy",
        choices=("collapsed", "top_down", "bottom_up"),
        default="collapsed",
        help="RAPTOR strategy of --mode tree (default collapsed)",
    )
    a.add_argument("--history", action="store_true", help="also chunks of documents that are not current")
    a.add_argument(
        "--max-tokens",
        type=int_in(1, 1_000_000),
        default=2000,
        help="the context's token budget (default 2000)",
    )


def _print_json(value: Any) -> None:
    json.dump(value, sys.stdout, ensure_ascii=False, indent=1)
    sys.stdout.write("\n")


def cmd_kb(args: argparse.Namespace) -> int:
    """Runs ``vecgraph kb ACTION``."""
    import os

    from . import storage
    from .errors import NotFoundError
    from .kb import KnowledgeBase

    action = args.kb_command
    embedder = args.embedder or "auto"
    if action != "add" and not os.path.exists(os.path.join(args.folder, storage.MANIFEST)):
        raise NotFoundError(
            f"{args.folder} holds no knowledge base (vecgraph kb add {args.folder} PATH... makes one)"
        )
    read_only = action == "ask"
    with KnowledgeBase.open(args.folder, embedder=embedder, read_only=read_only) as kb:
        tenant = args.tenant
        if action == "add":
            report = kb.add_documents(
                args.paths,
                tenant=tenant or "",
                version=args.doc_version,
                date=args.date,
                status=args.status,
                on_error=args.on_error,
                progress=not args.no_progress,
            )
            out = {
                "added": report.added,
                "replaced": report.replaced,
                "unchanged": report.unchanged,
                "skipped": [list(s) for s in report.skipped],
                "chunks": report.chunks,
                "entities": report.entities,
                "mentions": report.mentions,
                "merges": len(report.merges),
                "entities_removed": report.entities_removed,
            }
            if args.json:
                _print_json(out)
            else:
                print(
                    f"added {len(report.added)}, replaced {len(report.replaced)}, unchanged "
                    f"{len(report.unchanged)} documents; {report.chunks} chunks, "
                    f"{report.entities} new entities, "
                    f"{report.mentions} mentions, {len(report.merges)} merges, "
                    f"{report.entities_removed} entities removed (no chunk names them any more)"
                )
                for path, why in report.skipped:
                    print(f"skipped {path}: {why}")
        elif action == "communities":
            creport = kb.build_communities(
                tenant=tenant, max_levels=args.max_levels, max_cluster_size=args.max_cluster_size
            )
            out = {
                "levels": creport.levels,
                "kept": creport.kept,
                "added": creport.added,
                "removed": creport.removed,
                "entities": creport.entities,
                "seconds": round(creport.seconds, 3),
            }
            if args.json:
                _print_json(out)
            else:
                print(
                    f"communities per level {creport.levels} over {creport.entities} entities: kept "
                    f"{creport.kept}, added {creport.added}, removed {creport.removed} "
                    f"({creport.seconds:.1f} s)"
                )
        elif action == "tree":
            treport = kb.build_tree(tenant=tenant, max_cluster_size=args.max_cluster_size)
            if args.json:
                _print_json(
                    {
                        "levels": treport.levels,
                        "summaries": treport.summaries,
                        "seconds": round(treport.seconds, 3),
                    }
                )
            else:
                print(
                    f"RAPTOR tree: nodes per level {treport.levels} ({treport.summaries} summaries, "
                    f"{treport.seconds:.1f} s)"
                )
        else:
            if args.mode == "local":
                result = kb.local_search(args.question, args.k, tenant=tenant, history=args.history)
            elif args.mode == "global":
                result = kb.global_search(args.question, level=args.level, k=args.k, tenant=tenant)
            elif args.mode == "tree":
                result = kb.tree_search(
                    args.question, args.k, strategy=args.strategy, tenant=tenant, history=args.history
                )
            else:
                result = kb.search(args.question, args.k, mode=args.mode, tenant=tenant, history=args.history)
            if args.json:
                _print_json(dict(result.to_dict(), context=result.to_context(args.max_tokens)))
            else:
                print(result.to_context(args.max_tokens))
    return 0
