"""The Linux man-pages (Debian ``manpages`` and ``manpages-dev``) as a graph with a known-item query set.

A development data set, built from the Debian packages installed on this machine (nothing is
shipped with vecgraph): :func:`load` reads the English pages the two packages installed under
``/usr/share/man/man{1..8}`` (the files ``dpkg -L manpages manpages-dev`` lists), or every page
under a ``root`` folder, and caches the tables as Parquet in ``~/.cache/vecgraph/datasets/manpages``.

Tables (pyarrow):

- ``nodes``: ``key``, ``label``, ``text``, ``aliases`` (list<str>). One row per real page (a file
  that is no redirection, see below). ``key`` is ``name(section)`` from the file name
  (``open.2.gz``: ``open(2)``, ``sigval.3type.gz``: ``sigval(3type)``); ``label`` is the section
  as the file name writes it (``"2"``, ``"3"``, ``"3const"``, ``"3type"``, ...). ``text`` is the
  DESCRIPTION section as plain text (:func:`roff_to_text`: one line per paragraph, tag, heading or
  no-fill line), cut to at most :data:`MAX_TEXT` characters at a space. A page without
  DESCRIPTION takes its first section after NAME that is none of SYNOPSIS, LIBRARY, CONFORMING TO,
  STANDARDS, VERSIONS, HISTORY, ... (:data:`NOT_PROSE`); a page with no such section either is
  dropped. ``aliases``: the names of the NAME line before ``\\-`` (``open, openat, creat``), then
  the names of the redirections to the page, each once, in that order.
- ``edges``: ``src``, ``dst``, ``rel`` (always ``"see_also"``). One per distinct (page, page) pair
  of a reference ``name(section)`` in the page's SEE ALSO section (``.BR open (2)``,
  ``\\fBopen\\fP(2)``, plain ``open(2)``: any form, read from the rendered text) whose target is a
  node, directly or through a redirection. References to pages outside the corpus and to the page
  itself are dropped.
- ``queries``: ``qid``, ``text``, ``relevant``, ``exclude`` (always empty), ``split``. Known-item
  search: the text is the one-line NAME summary after ``\\-`` ("open and possibly create a file"),
  the relevant node is the page. Pages whose summaries are the very same text (after whitespace
  collapsing) make one query, whose qid is the first of their keys in sorted order and whose
  relevant nodes are all of them (that page first, then the others sorted).

Redirections are files that only hold ``.so manX/other.X`` and, since Debian turns most ``.so``
pages into symbolic links, symbolic links: each becomes an alias of the page it points to
(followed through chains of redirections), and a ``name(section)`` a SEE ALSO reference may use.

Split: :func:`split_of`, the first bit of the sha256 of the qid: ``"heldout"`` for 1, ``"dev"``
for 0, so the halves are random, stable and of about equal size.

Counts from ``manpages`` 6.03-2 and ``manpages-dev`` 6.03-2 (Debian 12), ``python -m
vecgraph.datasets.manpages`` prints them for this machine:

- 2,546 files: 1,446 redirections (1,433 symbolic links, 13 ``.so`` pages; none dangling) and
  1,100 pages, all kept as the 1,100 nodes. Every page has a DESCRIPTION but ``rpc(3)`` and
  ``xdr(3)``, which take their "SYNOPSIS AND DESCRIPTION" section; 346 texts are cut at 2,000
  characters.
- 5,119 edges from 6,076 SEE ALSO references. Dropped: 744 references to pages that are not in
  these two packages (``mount(8)`` 15 times, ``mknod(1)`` 13, ``date(1)`` 11, ``keyctl(1)`` 10,
  ...: other packages' pages, absent from the corpus), 213 that name a page the page already
  links to through another of its names, none to the page itself. 16 references ``name(3)``
  resolve to ``name(3type)`` (``timespec(3)``): a reference to a plain numeric section also
  reaches the one page of that name whose section is that number with a suffix, as ``man 3
  timespec`` does.
- 1,050 queries: 541 dev, 509 heldout. 40 summaries are shared by 90 pages (``"create a child
  process"``: ``clone(2)``, ``fork(2)``), so 1,100 pages give 1,050 queries; every page has a
  summary.

>>> from vecgraph.datasets import manpages
>>> t = manpages.load("heldout")            # doctest: +SKIP
>>> t["nodes"].num_rows, t["edges"].num_rows, t["queries"].num_rows   # doctest: +SKIP
(1100, 5119, 509)
"""

from __future__ import annotations

import argparse
import dataclasses
import gzip
import hashlib
import json
import os
import re
import shutil
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Optional, Union

from .roff import _collapse, _is_request, _logical_lines, _Renderer, _request, roff_to_text, roff_to_text_with

__all__ = [
    "MAX_TEXT",
    "NOT_PROSE",
    "Page",
    "roff_to_text",
    "parse_page",
    "source_files",
    "read_sources",
    "build_tables",
    "split_of",
    "fingerprint",
    "build",
    "load",
    "main",
]

NAME = "manpages"
PACKAGES = ("manpages", "manpages-dev")
INSTALL_HINT = "apt-get install manpages manpages-dev"
DEFAULT_ROOT = Path("/usr/share/man")
DPKG_INFO = Path("/var/lib/dpkg/info")

#: Node texts are cut to at most this many characters (at the last space before the limit).
MAX_TEXT = 2_000

#: Sections that are not a page's prose: a page without DESCRIPTION takes its first section after
#: NAME that is not one of these.
NOT_PROSE = frozenset({
    "NAME", "SYNOPSIS", "LIBRARY", "C SYNOPSIS", "CONFORMING TO", "STANDARDS", "VERSIONS", "HISTORY",
    "SEE ALSO", "COLOPHON", "AUTHORS", "AUTHOR", "COPYRIGHT", "ATTRIBUTES", "RETURN VALUE", "ERRORS",
})

#: Bump when the parsing changes: it is part of the cache's fingerprint.
BUILD_VERSION = "manpages-1"

TABLES = ("nodes", "edges", "queries")
COUNTS_FILE = "counts.json"

PathLike = Union[str, "os.PathLike[str]"]

_PAGE_FILE = re.compile(r"^(?P<name>.+)\.(?P<section>[1-9][a-z0-9]*)(?:\.gz)?$")


# ====================================================================== pages


@dataclasses.dataclass(frozen=True)
class Page:
    """One parsed man page.

    Attributes:
        names: the names of the NAME line before ``\\-``.
        summary: the NAME line after ``\\-``, whitespace collapsed ("" when there is no ``\\-``).
        text: the DESCRIPTION (or fallback) section as plain text, uncut ("" when none).
        text_section: the heading of the section ``text`` comes from ("" when none).
        see_also: the ``(name, section)`` references of the SEE ALSO section, in order.
        redirect: for a ``.so`` page, the ``manX/other.X`` it points to, else None.
    """

    names: tuple
    summary: str
    text: str
    text_section: str
    see_also: tuple
    redirect: Optional[str] = None


_REFERENCE = re.compile(r"(?<![\w.+:@-])([A-Za-z0-9_][\w.+:@-]*?)\s?\(([0-9][a-z0-9]*)\)")


def _so_target(source: str) -> Optional[str]:
    """The file of ``.so file`` when it is the page's first request (a redirection)."""
    for line in _logical_lines(source):
        if not line.strip() or line.strip() in (".", "'"):
            continue
        if _is_request(line):
            name, raw = _request(line)
            return raw.strip() if name == "so" else None
        return None
    return None


def _name_line(raw: list, strings: Mapping) -> tuple:
    """(names, summary) of the raw lines of the NAME section."""
    text = "\n".join(raw)
    separator = re.search(r"(?:^|\s)\\-(?:\s|$)", text) or re.search(r"\\-", text)
    if separator:
        left, right = text[:separator.start()], text[separator.end():]
    else:
        left, sep, right = text.partition(" - ")
        if not sep:
            left, right = text, ""

    def plain(part: str) -> str:
        return _collapse(roff_to_text_with(part.strip(), strings))

    names = tuple(n for n in (_collapse(x) for x in plain(left).split(",")) if n)
    return names, plain(right)


def parse_page(source: str) -> Page:
    """Parse a man page's roff into its names, summary, prose text and SEE ALSO references."""
    so = _so_target(source)
    if so is not None:
        return Page((), "", "", "", (), so)
    renderer = _Renderer()
    sections = renderer.run(_logical_lines(source))
    by_heading: dict = {}
    for section in sections:
        by_heading.setdefault(section.heading, section)
    names, summary = (), ""
    if "NAME" in by_heading:
        names, summary = _name_line(by_heading["NAME"].raw, renderer.strings)
    text, text_section = "", ""
    if "DESCRIPTION" in by_heading and by_heading["DESCRIPTION"].lines:
        text, text_section = "\n".join(by_heading["DESCRIPTION"].lines), "DESCRIPTION"
    else:
        for section in sections:
            if section.heading and section.heading not in NOT_PROSE and section.lines:
                text, text_section = "\n".join(section.lines), section.heading
                break
    see_also: list = []
    if "SEE ALSO" in by_heading:
        for name, section in _REFERENCE.findall(" ".join(by_heading["SEE ALSO"].lines)):
            see_also.append((name, section))
    return Page(names, summary, text, text_section, tuple(see_also))


def _cut(text: str, limit: int = MAX_TEXT) -> str:
    if len(text) <= limit:
        return text
    cut = text[:limit + 1]
    at = max(cut.rfind(" "), cut.rfind("\n"))
    return (cut[:at] if at > 0 else text[:limit]).rstrip()


# ====================================================================== files


def _page_key(file_name: str) -> Optional[tuple]:
    """(name, section) of a man page file name, or None."""
    m = _PAGE_FILE.match(file_name)
    return (m.group("name"), m.group("section")) if m else None


def source_files(root: Optional[PathLike] = None) -> list:
    """The man page files, sorted: those the ``manpages`` and ``manpages-dev`` packages
    installed (from dpkg's file lists), or every ``man*/<name>.<section>[.gz]`` under ``root``.

    Raises FileNotFoundError naming the missing path when the packages (or their files) are not
    there.
    """
    if root is not None:
        folder = Path(root)
        if not folder.is_dir():
            raise FileNotFoundError(f"{folder}: no such man page folder ({INSTALL_HINT})")
        files = sorted(p for p in folder.glob("man[1-9]*/*") if _page_key(p.name)
                       and (p.is_file() or p.is_symlink()))
        if not files:
            raise FileNotFoundError(f"{folder}/man*/: no man pages there ({INSTALL_HINT})")
        return files
    files = []
    for package in PACKAGES:
        listing = DPKG_INFO / f"{package}.list"
        if not listing.is_file():
            raise FileNotFoundError(f"{listing} is missing: the {package} package is not installed "
                                    f"({INSTALL_HINT})")
        for line in listing.read_text(encoding="utf-8").splitlines():
            path = Path(line.strip())
            if (path.parent.parent == DEFAULT_ROOT and re.fullmatch(r"man[1-9]", path.parent.name)
                    and _page_key(path.name)):
                files.append(path)
    missing = [p for p in files if not os.path.lexists(p)]
    if missing or not files:
        what = missing[0] if missing else DEFAULT_ROOT / "man2" / "open.2.gz"
        more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
        raise FileNotFoundError(f"{what} is missing{more}: reinstall the packages with {INSTALL_HINT} "
                                "(and check that dpkg does not exclude /usr/share/man)")
    return sorted(set(files))


def read_sources(files: Iterable[PathLike]) -> dict:
    """file name -> ``("link", target)`` for a symbolic link, else ``("file", bytes)`` (as
    stored, maybe gzipped)."""
    sources = {}
    for path in files:
        path = Path(path)
        if path.is_symlink():
            sources[path.name] = ("link", os.readlink(path))
        else:
            sources[path.name] = ("file", path.read_bytes())
    return sources


def _text_of(data: bytes) -> str:
    if data[:2] == b"\x1f\x8b":
        data = gzip.decompress(data)
    return data.decode("utf-8", errors="replace")


# ====================================================================== tables


def split_of(qid: str) -> str:
    """``"heldout"`` when the first bit of the sha256 of the qid (UTF-8) is 1, else ``"dev"``."""
    return "heldout" if hashlib.sha256(qid.encode("utf-8")).digest()[0] & 0x80 else "dev"


def _tables(nodes: dict, edges: dict, queries: dict) -> dict:
    import pyarrow as pa

    string, strings = pa.string(), pa.list_(pa.string())
    return {
        "nodes": pa.table({
            "key": pa.array(nodes["key"], string),
            "label": pa.array(nodes["label"], string),
            "text": pa.array(nodes["text"], string),
            "aliases": pa.array(nodes["aliases"], strings),
        }),
        "edges": pa.table({
            "src": pa.array(edges["src"], string),
            "dst": pa.array(edges["dst"], string),
            "rel": pa.array(edges["rel"], string),
        }),
        "queries": pa.table({
            "qid": pa.array(queries["qid"], string),
            "text": pa.array(queries["text"], string),
            "relevant": pa.array(queries["relevant"], strings),
            "exclude": pa.array(queries["exclude"], strings),
            "split": pa.array([split_of(q) for q in queries["qid"]], string),
        }),
    }


def build_tables(sources: Mapping) -> tuple:
    """The nodes, edges and queries tables of the man page files in ``sources`` (file name ->
    ``("link", target)`` or ``("file", bytes)``, as :func:`read_sources` makes), and the counts
    of what was kept and dropped."""
    pages: dict = {}  # key -> Page
    labels: dict = {}
    redirects: dict = {}  # key -> key it points to
    counts = {"files": len(sources), "symlinks": 0, "so_pages": 0, "unreadable": 0}
    for file_name in sorted(sources):
        name, section = _page_key(file_name) or (None, None)
        if name is None:
            counts["unreadable"] += 1
            continue
        key = f"{name}({section})"
        kind, value = sources[file_name]
        if kind == "link":
            counts["symlinks"] += 1
            target = _page_key(Path(value).name)
            if target:
                redirects[key] = "{}({})".format(*target)
            continue
        page = parse_page(_text_of(value))
        if page.redirect is not None:
            counts["so_pages"] += 1
            target = _page_key(Path(page.redirect).name)
            if target:
                redirects[key] = "{}({})".format(*target)
            continue
        pages[key] = page
        labels[key] = section

    # name(3) also names name(3type), name(3const), ... when there is exactly one such page (as
    # "man 3 name" finds it).
    by_family: dict = {}
    for key in list(pages) + list(redirects):
        name, section = key[:-1].rsplit("(", 1)
        if not section.isdigit():
            by_family.setdefault(f"{name}({section[0]})", []).append(key)

    def resolve(key: str, family: bool = False) -> Optional[str]:
        if family and key not in pages and key not in redirects and len(by_family.get(key, ())) == 1:
            key = by_family[key][0]
            counts["see_also_by_section_family"] += 1
        seen = set()
        while key not in pages:
            if key in seen or key not in redirects:
                return None
            seen.add(key)
            key = redirects[key]
        return key

    redirected_to: dict = {}  # page key -> names of redirections, in file order
    counts["dangling_redirections"] = 0
    for key in sorted(redirects):
        target = resolve(key)
        if target is None:
            counts["dangling_redirections"] += 1
        else:
            redirected_to.setdefault(target, []).append(key.rsplit("(", 1)[0])

    nodes: dict = {"key": [], "label": [], "text": [], "aliases": []}
    kept = []
    counts.update(pages=len(pages), dropped_no_text=0, text_from_other_section=0, text_cut=0)
    for key in sorted(pages):
        page = pages[key]
        if not page.text:
            counts["dropped_no_text"] += 1
            continue
        if page.text_section != "DESCRIPTION":
            counts["text_from_other_section"] += 1
        text = _cut(page.text)
        counts["text_cut"] += text != page.text
        aliases = list(dict.fromkeys(list(page.names) + redirected_to.get(key, [])))
        nodes["key"].append(key)
        nodes["label"].append(labels[key])
        nodes["text"].append(text)
        nodes["aliases"].append(aliases)
        kept.append(key)
    node_set = set(kept)
    counts["nodes"] = len(kept)

    edges: dict = {"src": [], "dst": [], "rel": []}
    seen_edges: set = set()
    counts.update(see_also_references=0, see_also_by_section_family=0, see_also_self=0, see_also_unresolved=0,
                  see_also_duplicate=0)
    unresolved: dict = {}
    for key in kept:
        for name, section in pages[key].see_also:
            counts["see_also_references"] += 1
            ref = f"{name}({section})"
            target = resolve(ref, family=True)
            if target is None or target not in node_set:
                counts["see_also_unresolved"] += 1
                unresolved[ref] = unresolved.get(ref, 0) + 1
            elif target == key:
                counts["see_also_self"] += 1
            elif (key, target) in seen_edges:
                counts["see_also_duplicate"] += 1
            else:
                seen_edges.add((key, target))
                edges["src"].append(key)
                edges["dst"].append(target)
                edges["rel"].append("see_also")
    counts["edges"] = len(edges["src"])
    counts["see_also_unresolved_top"] = dict(sorted(unresolved.items(), key=lambda kv: (-kv[1], kv[0]))[:10])

    by_summary: dict = {}
    counts["no_summary"] = 0
    for key in kept:
        summary = pages[key].summary
        if summary:
            by_summary.setdefault(summary, []).append(key)
        else:
            counts["no_summary"] += 1
    queries: dict = {"qid": [], "text": [], "relevant": [], "exclude": []}
    for summary, keys in sorted(by_summary.items(), key=lambda kv: kv[1][0]):
        queries["qid"].append(keys[0])
        queries["text"].append(summary)
        queries["relevant"].append(list(keys))
        queries["exclude"].append([])
    shared = [keys for keys in by_summary.values() if len(keys) > 1]
    counts.update(shared_summaries=len(shared), pages_with_shared_summary=sum(map(len, shared)))
    tables = _tables(nodes, edges, queries)
    splits = tables["queries"].column("split").to_pylist()
    counts.update(queries=len(splits), queries_dev=splits.count("dev"),
                  queries_heldout=splits.count("heldout"))
    return tables, counts


# ====================================================================== cache


def fingerprint(sources: Mapping, version: str = BUILD_VERSION) -> str:
    """The sha256 of the sources (their names, link targets and bytes) and of the parser version."""
    digest = hashlib.sha256(version.encode("utf-8") + b"\n")
    for file_name in sorted(sources):
        kind, value = sources[file_name]
        data = value.encode("utf-8") if isinstance(value, str) else value
        digest.update(f"{file_name}\0{kind}\0{hashlib.sha256(data).hexdigest()}\n".encode("utf-8"))
    return digest.hexdigest()


def default_cache_dir() -> Path:
    """``~/.cache/vecgraph/datasets``."""
    return Path.home() / ".cache" / "vecgraph" / "datasets"


def _cached_build(name: str, digest: str, make: Callable[[], tuple],
                  cache: Union[bool, PathLike, None]) -> tuple:
    """(tables, counts) from the cache folder ``<cache>/<name>/<digest>/`` when it is complete,
    else from ``make()``, then written there (older fingerprints of ``name`` are removed)."""
    import pyarrow.parquet as pq

    if cache is False or cache is None:
        return make()
    base = (default_cache_dir() if cache is True else Path(cache)) / name
    folder = base / digest
    files = [folder / f"{table}.parquet" for table in TABLES] + [folder / COUNTS_FILE]
    if all(f.is_file() for f in files):
        try:
            tables = {table: pq.read_table(folder / f"{table}.parquet") for table in TABLES}
            counts = json.loads((folder / COUNTS_FILE).read_text(encoding="utf-8"))
            return tables, counts
        except (OSError, ValueError):
            pass  # a damaged cache: rebuild it
    tables, counts = make()
    try:
        base.mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix=f".{digest[:12]}-", dir=base))
        try:
            for table in TABLES:
                pq.write_table(tables[table], staging / f"{table}.parquet", compression="zstd")
            (staging / COUNTS_FILE).write_text(json.dumps(counts, indent=2) + "\n", encoding="utf-8")
            shutil.rmtree(folder, ignore_errors=True)
            os.replace(staging, folder)
        finally:
            shutil.rmtree(staging, ignore_errors=True)
        for old in base.iterdir():
            if old.is_dir() and old.name != digest and not old.name.startswith("."):
                shutil.rmtree(old, ignore_errors=True)
    except OSError:
        pass  # a read-only home: the tables are still good
    return tables, counts


def _check_split(split: Optional[str]) -> None:
    if split not in ("heldout", "dev", None):
        raise ValueError(f"split must be 'heldout', 'dev' or None, got {split!r}")


def _select(tables: dict, split: Optional[str]) -> dict:
    """The tables with only the queries of ``split`` (checked before anything is built)."""
    import pyarrow.compute as pc

    tables = dict(tables)
    if split is not None:
        queries = tables["queries"]
        tables["queries"] = queries.filter(pc.equal(queries.column("split"), split))
    return tables


def build(root: Optional[PathLike] = None, cache: Union[bool, PathLike, None] = True) -> tuple:
    """(tables, counts): all queries, and the counts of what was kept and dropped."""
    sources = read_sources(source_files(root))
    return _cached_build(NAME, fingerprint(sources), lambda: build_tables(sources), cache)


def load(split: Optional[str] = "heldout", root: Optional[PathLike] = None,
         cache: Union[bool, PathLike, None] = True) -> dict:
    """The nodes, edges and queries tables: ``{"nodes": ..., "edges": ..., "queries": ...}``.

    Args:
        split: the queries to keep: ``"heldout"`` (default), ``"dev"``, or None for all.
        root: a folder of man pages (``man1/`` ... ``man8/``), all read; default: the pages of
            the installed ``manpages`` and ``manpages-dev`` packages.
        cache: True for ``~/.cache/vecgraph/datasets/manpages/<fingerprint>/``, a folder to use
            instead of ``~/.cache/vecgraph/datasets``, or False to build without caching.

    Raises FileNotFoundError, naming the missing path, when the packages are not installed.
    """
    _check_split(split)
    tables, _ = build(root, cache)
    return _select(tables, split)


def main(argv: Optional[Sequence[str]] = None, module=None) -> int:
    module = module or sys.modules[__name__]
    parser = argparse.ArgumentParser(
        prog=f"python -m vecgraph.datasets.{module.NAME}",
        description=f"Build (or read from the cache) the {module.NAME} tables and print their counts.")
    parser.add_argument("--root", default=None, help="source folder (default: the installed package)")
    parser.add_argument("--no-cache", action="store_true", help="build without reading or writing the cache")
    args = parser.parse_args(argv)
    start = time.perf_counter()
    try:
        tables, counts = module.build(args.root, cache=not args.no_cache)
    except (OSError, ValueError) as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    counts = dict(counts, seconds=round(time.perf_counter() - start, 3))
    print(json.dumps(counts, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
