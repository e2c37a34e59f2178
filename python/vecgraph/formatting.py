"""What the command line prints: names and texts made safe for a terminal, the path of a hit,
counts and sizes in words, aligned tables, and the tables and lines of the ``vecgraph``
subcommands (:mod:`vecgraph.cli`) and of the WordNet job (:mod:`vecgraph.wordnet_demo`).

>>> _n(2000, "node")
'2,000 nodes'
>>> _columns([("rank", "key"), ("1", "a7-pro")], (True, False))
[['rank', 'key   '], ['   1', 'a7-pro']]
"""

from __future__ import annotations

import json
import unicodedata
from collections.abc import Sequence
from typing import Any

# ------------------------------------------------------------------------------------------ text


def _printable(text: str) -> str:
    """``text`` for a terminal: each control or format character (ESC, a newline, a tab, a
    zero-width space, a right-to-left override, ...) as its Python escape, so that names cannot
    move the cursor, rewrite the screen or reorder a line. Spaces of every kind and the
    zero-width joiner of emoji sequences are shown as they are."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() or c == "\u200d" or unicodedata.category(c) == "Zs" else repr(c)[1:-1]
                   for c in text)


def _walk(hit, name=repr) -> str:
    """The path of a hit as walked from its seed: ``seed -rel-> a <-rel- hit`` (arrows as stored),
    each node shown by ``name(key)``."""
    if not hit.path:
        return "(seed)"
    node, parts = hit.key, []
    for edge in reversed(hit.path):
        if edge.dst == node:
            parts.append(f"-{edge.rel}-> {name(node)}")
            node = edge.src
        else:
            parts.append(f"<-{edge.rel}- {name(node)}")
            node = edge.dst
    return " ".join([name(node)] + parts[::-1])


def _short(text: str, width: int) -> str:
    text = " ".join((text or "").split())
    return text if len(text) <= width else text[: width - 1] + "…"


def _snippet(graph, key, width: int = 60) -> str:
    return _short(graph.get_node(key, vector=False).get("text"), width)


def _n(count: int, word: str) -> str:
    """``1 node``, ``2,000 nodes``, ``3 memories``."""
    if count == 1:
        return f"{count:,} {word}"
    if word.endswith("y") and word[-2:-1] not in ("a", "e", "o", "u"):
        return f"{count:,} {word[:-1]}ies"
    return f"{count:,} {word}s"


def _queries(count: int) -> str:
    return f"{count:,} quer{'y' if count == 1 else 'ies'}"


def _human_bytes(count: int) -> str:
    size = float(count)
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{count} B"


# ------------------------------------------------------------------------------------------ tables


def _columns(rows: list, right: Sequence[bool]) -> list:
    """The cells of ``rows`` (tuples of str, the header first), each of the first ``len(right)``
    columns padded to its widest cell: right-aligned where ``right`` is True, left-aligned
    elsewhere. Cells past those columns stay as they are."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(right))]
    return [[c.rjust(w) if r else c.ljust(w) for c, w, r in zip(row, widths, right)] + list(row[len(right):])
            for row in rows]


def _print_json(value: Any) -> None:
    print(json.dumps(value, ensure_ascii=False))


def _hit_record(rank: int, hit, node: dict) -> dict:
    """One hit of a graph-guided search for the table and --json: ``node`` is its get_node()
    (label, and the start of its text)."""
    return {"rank": rank, "key": hit.key, "score": hit.score, "hops": hit.hop, "walk": _walk(hit),
            "path": [{"src": e.src, "rel": e.rel, "dst": e.dst, "weight": e.weight} for e in hit.path],
            "label": node.get("label", ""), "text": _short(node.get("text"), 60)}


def _print_hits(records: list) -> None:
    """The hits of a graph-guided search (records of :func:`_hit_record`) as a table."""
    header = ("rank", "key", "score", "hops", "path", "label", "text")
    rows = [(str(r["rank"]), _printable(str(r["key"])), f"{r['score']:.4f}", str(r["hops"]), _printable(r["walk"]),
             _printable(r["label"]), _printable(r["text"])) for r in records]
    for cells in _columns([header, *rows], (True, False, True, True, False, False)):
        print("  ".join(cells).rstrip())


def _print_hybrid_hits(records: list, channels: Sequence[str]) -> None:
    """The hits of a hybrid search (rank, key, score, ranks, walk and text of each) as a table,
    with the rank of each hit in each of ``channels``."""
    header = ("rank", "key", "rrf", "channels", "text")
    rows = [(str(r["rank"]), _printable(str(r["key"])), f"{r['score']:.4f}",
             " ".join(f"{c[0]}{r['ranks'][c] if r['ranks'][c] is not None else '-'}" for c in channels),
             _printable(r["text"])) for r in records]
    for cells in _columns([header, *rows], (True, False, True, False)):
        print("  ".join(cells).rstrip())


def _print_stats(stats: dict) -> None:
    """A graph's stats, one per line: yes / no / - for flags and absent values, thousands
    separators (and a size in KiB, MiB or GiB for ``*_bytes``) for ints."""
    width = max(map(len, stats))
    for name, value in stats.items():
        if isinstance(value, bool) or value is None:
            text = {True: "yes", False: "no", None: "-"}[value]
        elif isinstance(value, int):
            text = f"{value:,}" + (f" ({_human_bytes(value)})" if name.endswith("_bytes") else "")
        elif isinstance(value, dict):
            text = ", ".join(f"{k}={v}" for k, v in value.items())
        else:
            text = str(value)
        print(f"{name.ljust(width)}  {text}")


def _print_report(kind: str, source: str, report) -> None:
    rate = f", {report.rows_read / report.seconds:,.0f} rows/s" if report.seconds > 0 else ""
    batches = f"{report.batches:,} batch" + ("" if report.batches == 1 else "es")
    print(f"{kind} {source}: {_n(report.rows_read, 'row')} read, {report.rows_accepted:,} accepted, "
          f"{report.rows_rejected:,} rejected ({batches}, {report.seconds:.2f} s{rate})")
    if report.rows_rejected and report.rejects_path:
        print(f"  rejected rows written to {report.rejects_path}")


def _print_checkpoint(info: dict) -> None:
    print(f"checkpoint: {_n(info['nodes'], 'node')}, {_n(info['edges'], 'edge')} at LSN {info['lsn']:,} "
          f"in {info['snapshot']}")
