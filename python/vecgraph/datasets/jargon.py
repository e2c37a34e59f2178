"""The Jargon File 4.4.7 (Debian ``dict-jargon``) as a graph of entries and their cross references.

A development data set, built from the Debian package installed on this machine (nothing is
shipped with vecgraph): :func:`load` reads the dictd database ``/usr/share/dictd/jargon.index``
(``headword \\t base64 offset \\t base64 length``) and ``jargon.dict.dz`` (dictzip, which is
gzip), or the same two files in a ``root`` folder, and caches the tables as Parquet in
``~/.cache/vecgraph/datasets/jargon``.

Tables (pyarrow):

- ``nodes``: ``key``, ``label``, ``text``, ``aliases`` (list<str>, always empty). One row per
  entry of the index, the dictd meta entries (``00-database-*``) skipped. ``key`` is the headword
  as the index writes it (lower case: ``"/dev/null"``, ``"404 compliant"``, ``"hack"``); when two
  entries share it (only ``op``: "OP" and "op"), an entry whose own headword line differs from it
  takes that line (``"OP"``). ``label`` is ``"entry"``. ``text`` is the whole entry (headword
  line, pronunciation and part of speech, definition), whitespace collapsed (non-breaking spaces
  too), the braces of its cross references removed (see below), not cut.
- ``edges``: ``src``, ``dst``, ``rel`` (always ``"see_also"``). One per distinct (entry, entry)
  pair of a cross reference ``{Target}`` that resolves to another entry.
- ``queries``: ``qid``, ``text``, ``relevant``, ``exclude``, ``split``. One per entry with at least
  one resolved cross reference to another entry: the qid is its key, the text is its node text,
  the relevant nodes are the distinct entries it links to (in order of first mention), and
  ``exclude`` is ``[its key]``: leave-one-out, the evaluation removes the entry itself from the
  results and from walks.

Cross references: each innermost ``{...}`` of an entry. Its text resolves to the entry whose
headword (index headword or headword line) is the same after collapsing whitespace and
case-folding; else the same with all whitespace removed (a reference broken across lines after
a slash, ``{TCP/\\n IP}``); else the entry ``X, the`` for ``X`` (``{Utah Teapot}``). When several
entries match (``{op}`` would), the one whose headword line is the text as written wins, else the
first in the index. A resolved reference loses its braces; so does an unresolved one that reads as
a term (letters, digits, spaces and ``. , ' / & + * ? : -``, not ending with a space, not glued
to a letter or digit outside the braces: ``{ID10T}``), and it counts as a dropped,
unresolvable link. Every other pair of braces is literal text (C code such as
``main() {for(;;)fork();}``, globs such as ``foo{baz,qux}``) and is kept.

Split: :func:`split_of`, the first bit of the sha256 of the qid: ``"heldout"`` for 1, ``"dev"``
for 0.

Counts from ``dict-jargon`` 4.4.7-3.1 (Debian 12), ``python -m vecgraph.datasets.jargon`` prints
them for this machine:

- 2,314 index lines, 7 meta entries skipped: 2,307 nodes. Texts run up to 10,892 characters
  (median about 400) and are not cut.
- 5,418 brace pairs: 5,383 references that resolve, 7 unresolvable term-like references dropped
  (``{ID10T}`` 3 times, ``{Microshift, Macroshaft, Microsuck}``, ``{Windoze, WinDOS}``, ``{into,
  towards}``, ``{overclocking}``) and 28 literal pairs kept (code, globs). Of the 5,383, 41 name
  their own entry and 227 repeat a target the entry already links to: 5,115 edges.
- 1,924 queries (entries with at least one link): 944 dev, 980 heldout.

The published figure for this package, 2,307 entries and 5,112 see-also links, is what the first
resolution rule alone gives (distinct pairs, self-links left out); the two other rules add 3:
``{TCP/ IP}`` (in "internet") to "tcp/ip", and ``{Utah Teapot}`` (in "stanford bunny", "lenna")
to "utah teapot, the".

>>> from vecgraph.datasets import jargon
>>> t = jargon.load("heldout")                   # doctest: +SKIP
>>> t["nodes"].num_rows, t["edges"].num_rows     # doctest: +SKIP
(2307, 5115)
"""

from __future__ import annotations

import gzip
import re
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Optional, Union

from . import manpages
from .manpages import PathLike, split_of

__all__ = [
    "decode_base64",
    "read_index",
    "read_entries",
    "normalise",
    "resolver",
    "cross_references",
    "build_tables",
    "split_of",
    "source_files",
    "build",
    "load",
    "main",
]

NAME = "jargon"
INSTALL_HINT = "apt-get install dict-jargon"
DEFAULT_ROOT = Path("/usr/share/dictd")
INDEX_FILE = "jargon.index"
DICT_FILE = "jargon.dict.dz"
META_PREFIX = "00-database-"

#: Bump when the parsing changes: it is part of the cache's fingerprint.
BUILD_VERSION = "jargon-1"

_BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_BASE64_VALUE = {c: i for i, c in enumerate(_BASE64)}

_BRACES = re.compile(r"\{([^{}]*)\}")
_TERM = re.compile(r"[^\W_][\w .,'/&+*?:-]*", re.UNICODE)


def decode_base64(text: str) -> int:
    """A dictd index number: base64 digits, most significant first (``"B"`` is 1, ``"BA"`` 64)."""
    value = 0
    for char in text:
        if char not in _BASE64_VALUE:
            raise ValueError(f"{text!r} is not a dictd base64 number")
        value = value * 64 + _BASE64_VALUE[char]
    return value


def read_index(text: str) -> list:
    """The ``(headword, offset, length)`` of each line of a dictd index, in order."""
    rows = []
    for number, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            continue
        parts = line.split("\t")
        if len(parts) < 3:
            raise ValueError(f"line {number} of the index is not 'headword<TAB>offset<TAB>length': {line!r}")
        rows.append((parts[0], decode_base64(parts[1]), decode_base64(parts[2])))
    return rows


def read_entries(index: bytes, data: bytes) -> list:
    """The ``(headword, entry text)`` of each index line but the meta entries, in index order;
    ``data`` is the dictionary, gzipped (dictzip) or not."""
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    entries = []
    for headword, offset, length in read_index(index.decode("utf-8")):
        if headword.startswith(META_PREFIX):
            continue
        if offset + length > len(data):
            raise ValueError(f"the index entry {headword!r} runs past the end of the dictionary")
        entries.append((headword, data[offset:offset + length].decode("utf-8")))
    return entries


def normalise(text: str) -> str:
    """Whitespace collapsed (non-breaking spaces too) and case-folded."""
    return " ".join(text.split()).casefold()


def _headword_line(text: str) -> str:
    return " ".join(text.strip().split("\n", 1)[0].split())


def _keys(entries: Sequence) -> list:
    """The node keys: the index headwords; when several entries share one, those whose
    headword line differs take that line (then a ``#n`` suffix, should that still collide)."""
    count: dict = {}
    for headword, _ in entries:
        count[headword] = count.get(headword, 0) + 1
    keys, used = [], set()
    for headword, text in entries:
        key = headword
        if count[headword] > 1:
            line = _headword_line(text)
            if line and line != headword and line not in count:
                key = line
        base, n = key, 2
        while key in used:
            key, n = f"{base}#{n}", n + 1
        used.add(key)
        keys.append(key)
    return keys


def resolver(keys: Sequence, entries: Sequence):
    """A function: reference text -> key of the entry it names, or None (the rules of the
    module docstring)."""
    exact: dict = {}
    spaceless: dict = {}
    inverted: dict = {}
    lines = {}
    for key, (headword, text) in zip(keys, entries):
        line = _headword_line(text)
        lines[key] = line
        for name in dict.fromkeys((headword, line)):
            n = normalise(name)
            exact.setdefault(n, []).append(key)
            spaceless.setdefault(n.replace(" ", ""), []).append(key)
            if n.endswith(", the"):
                inverted.setdefault(n[:-len(", the")], []).append(key)

    def resolve(reference: str) -> Optional[str]:
        n = normalise(reference)
        found = exact.get(n) or spaceless.get(n.replace(" ", "")) or inverted.get(n)
        if not found:
            return None
        found = list(dict.fromkeys(found))
        written = " ".join(reference.split())
        return next((key for key in found if lines[key] == written), found[0])

    return resolve


def _is_term(match: re.Match, text: str) -> bool:
    inner = match.group(1)
    if not inner.strip() or inner[-1].isspace():
        return False
    before = text[match.start() - 1] if match.start() > 0 else " "
    after = text[match.end()] if match.end() < len(text) else " "
    return (_TERM.fullmatch(" ".join(inner.split())) is not None
            and not before.isalnum() and not after.isalnum())


def cross_references(text: str, resolve) -> tuple:
    """(text with reference braces removed, whitespace collapsed; the resolved targets in order,
    repeats kept; the unresolvable term-like references; the number of literal brace pairs)."""
    targets: list = []
    unresolved: list = []
    literal = 0

    def replace(match: re.Match) -> str:
        nonlocal literal
        target = resolve(match.group(1))
        if target is not None:
            targets.append(target)
            return match.group(1)
        if _is_term(match, text):
            unresolved.append(" ".join(match.group(1).split()))
            return match.group(1)
        literal += 1
        return match.group(0)

    plain = _BRACES.sub(replace, text)
    return " ".join(plain.split()), targets, unresolved, literal


def build_tables(entries: Sequence) -> tuple:
    """The nodes, edges and queries tables of ``(headword, text)`` entries (as
    :func:`read_entries` returns them), and the counts of what was kept and dropped."""
    entries = list(entries)
    keys = _keys(entries)
    resolve = resolver(keys, entries)
    nodes: dict = {"key": [], "label": [], "text": [], "aliases": []}
    edges: dict = {"src": [], "dst": [], "rel": []}
    queries: dict = {"qid": [], "text": [], "relevant": [], "exclude": []}
    counts = {"entries": len(entries), "nodes": 0, "braces": 0, "references_resolved": 0,
              "references_self": 0, "references_repeated": 0, "references_unresolvable": 0,
              "literal_braces": 0}
    unresolvable: dict = {}
    for key, (_, raw) in zip(keys, entries):
        text, targets, unresolved, literal = cross_references(raw, resolve)
        counts["braces"] += len(targets) + len(unresolved) + literal
        counts["references_resolved"] += len(targets)
        counts["references_unresolvable"] += len(unresolved)
        counts["literal_braces"] += literal
        for name in unresolved:
            unresolvable[name] = unresolvable.get(name, 0) + 1
        nodes["key"].append(key)
        nodes["label"].append("entry")
        nodes["text"].append(text)
        nodes["aliases"].append([])
        linked: list = []
        for target in targets:
            if target == key:
                counts["references_self"] += 1
            elif target in linked:
                counts["references_repeated"] += 1
            else:
                linked.append(target)
        for target in linked:
            edges["src"].append(key)
            edges["dst"].append(target)
            edges["rel"].append("see_also")
        if linked:
            queries["qid"].append(key)
            queries["text"].append(text)
            queries["relevant"].append(linked)
            queries["exclude"].append([key])
    counts["nodes"] = len(nodes["key"])
    counts["edges"] = len(edges["src"])
    counts["unresolvable_top"] = dict(sorted(unresolvable.items(), key=lambda kv: (-kv[1], kv[0]))[:10])
    tables = manpages._tables(nodes, edges, queries)
    splits = tables["queries"].column("split").to_pylist()
    counts.update(queries=len(splits), queries_dev=splits.count("dev"),
                  queries_heldout=splits.count("heldout"))
    return tables, counts


def source_files(root: Optional[PathLike] = None) -> tuple:
    """(index, dictionary) paths in ``root`` (default ``/usr/share/dictd``); raises
    FileNotFoundError naming the missing file."""
    folder = Path(root) if root is not None else DEFAULT_ROOT
    files = (folder / INDEX_FILE, folder / DICT_FILE)
    for path in files:
        if not path.is_file():
            raise FileNotFoundError(f"{path} is missing: the dict-jargon package is not installed "
                                    f"({INSTALL_HINT})")
    return files


def _sources(root: Optional[PathLike]) -> dict:
    index, data = source_files(root)
    return {INDEX_FILE: ("file", index.read_bytes()), DICT_FILE: ("file", data.read_bytes())}


def build(root: Optional[PathLike] = None, cache: Union[bool, PathLike, None] = True) -> tuple:
    """(tables, counts): all queries, and the counts of what was kept and dropped."""
    sources = _sources(root)

    def make() -> tuple:
        return build_tables(read_entries(sources[INDEX_FILE][1], sources[DICT_FILE][1]))

    return manpages._cached_build(NAME, manpages.fingerprint(sources, BUILD_VERSION), make, cache)


def load(split: Optional[str] = "heldout", root: Optional[PathLike] = None,
         cache: Union[bool, PathLike, None] = True) -> dict:
    """The nodes, edges and queries tables: ``{"nodes": ..., "edges": ..., "queries": ...}``.

    Args:
        split: the queries to keep: ``"heldout"`` (default), ``"dev"``, or None for all.
        root: a folder holding ``jargon.index`` and ``jargon.dict.dz`` (default
            ``/usr/share/dictd``).
        cache: True for ``~/.cache/vecgraph/datasets/jargon/<fingerprint>/``, a folder to use
            instead of ``~/.cache/vecgraph/datasets``, or False to build without caching.

    Raises FileNotFoundError, naming the missing file, when the package is not installed.
    """
    manpages._check_split(split)
    tables, _ = build(root, cache)
    return manpages._select(tables, split)


def main(argv: Optional[Sequence[str]] = None) -> int:
    return manpages.main(argv, sys.modules[__name__])


if __name__ == "__main__":
    sys.exit(main())
