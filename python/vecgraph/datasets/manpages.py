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
import unicodedata
from collections.abc import Callable, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Optional, Union

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


# ====================================================================== roff to text

#: Special characters, ``\(xx`` and ``\[xx]``, as plain text. Quotes are ASCII; dashes, bullets
#: and symbols are the Unicode characters ``groff -Tutf8`` prints. Unknown names print nothing.
SPECIAL_CHARS = {
    "aq": "'", "dq": '"', "lq": '"', "rq": '"', "oq": "'", "cq": "'", "ga": "`", "aa": "\u00b4",
    "ha": "^", "ti": "~", "a~": "~", "a^": "^", "em": "\u2014", "en": "\u2013", "hy": "-", "mi": "-",
    "bu": "\u2022", "co": "\u00a9", "rg": "\u00ae", "tm": "\u2122", "dg": "\u2020", "dd": "\u2021",
    "de": "\u00b0", "sc": "\u00a7", "ps": "\u00b6", "mc": "\u00b5", "mu": "\u00d7", "di": "\u00f7",
    "+-": "\u00b1", "pl": "+", "eq": "=", ">=": "\u2265", "<=": "\u2264", "!=": "\u2260", "==": "\u2261",
    "~~": "\u2248", "->": "\u2192", "<-": "\u2190", "<>": "\u2194", "rA": "\u21d2", "lA": "\u21d0",
    "ua": "\u2191", "da": "\u2193", "la": "<", "ra": ">", "fm": "\u2032", "sd": "\u2033",
    "bv": "|", "ba": "|", "br": "|", "or": "|", "rs": "\\", "sl": "/", "sh": "#", "at": "@",
    "Do": "$", "ct": "\u00a2", "Po": "\u00a3", "Ye": "\u00a5", "Eu": "\u20ac", "eu": "\u20ac",
    "ul": "_", "ru": "_", "lB": "[", "rB": "]", "lC": "{", "rC": "}", "Fo": "\u00ab", "Fc": "\u00bb",
    "fo": "\u2039", "fc": "\u203a", "12": "\u00bd", "14": "\u00bc", "34": "\u00be", "if": "\u221e",
    "es": "\u2205", "sq": "\u25a1", "ss": "\u00df", "ae": "\u00e6", "AE": "\u00c6", "o/": "\u00f8",
    "O/": "\u00d8", "r!": "\u00a1", "r?": "\u00bf", "pc": "\u00b7", "md": "\u22c5", "sr": "\u221a",
    "no": "\u00ac", "AN": "\u2227", "OR": "\u2228", "tf": "\u2234", "fa": "\u2200", "te": "\u2203",
    "ts": "\u03c2", "*a": "\u03b1", "*b": "\u03b2", "*g": "\u03b3", "*d": "\u03b4", "*e": "\u03b5",
    "*l": "\u03bb", "*m": "\u03bc", "*p": "\u03c0", "*s": "\u03c3", "*t": "\u03c4", "*W": "\u03a9",
    "*D": "\u0394", "*S": "\u03a3",
}

# The accent of a composite character (\[:a], \('e, ...): its combining mark.
_ACCENTS = {"`": "\u0300", "'": "\u0301", "^": "\u0302", "~": "\u0303", ":": "\u0308", ",": "\u0327",
            "o": "\u030a", "v": "\u030c", '"': "\u030b", "-": "\u0304", ".": "\u0307"}

#: Predefined strings of the man macros (``\*R``, ``\*(lq``, ...); a page's ``.ds`` adds more.
STRINGS = {"R": "\u00ae", "Tm": "\u2122", "lq": '"', "rq": '"', "S": ""}

# One-character escapes: what they print. \c (join with the next line) is _JOIN; the others
# (\&, \:, \%, \|, \^, \/, \,, \{, \}, \a, \p, \r, \u, \d, \), \E...) print what is here.
_JOIN = "\x00"
_SIMPLE = {"-": "-", "e": "\\", "\\": "\\", "E": "\\", "~": " ", " ": " ", "0": " ", "t": " ", "`": "`",
           "'": "'", ".": ".", "c": _JOIN, "&": "", ":": "", "%": "", "|": "", "^": "", "/": "", ",": "",
           "{": "", "}": "", "a": "", "p": "", "r": "", "u": "", "d": "", ")": "", "!": "", "?": "",
           "#": "", "\n": ""}

_ESCAPE = re.compile(
    r"""\\(?:
      \((?P<two>..)                                   # \(xx
    | \[(?P<bracket>[^\]]*)\]                         # \[name]
    | [fFmM](?:\(..|\[[^\]]*\]|.)                     # font, family, colours: dropped
    | \*(?:\((?P<str2>..)|\[(?P<strb>[^\]]*)\]|(?P<str1>.))   # strings
    | [gkn][+-]?(?:\(..|\[[^\]]*\]|.)                 # registers, marks: dropped
    | s[+-]?(?:\(\d\d|\[[^\]]*\]|'[^']*'|\d\d?)       # size: dropped
    | N(?P<nq>['"])(?P<number>\d+)(?P=nq)             # \N'34': a character by number
    | [ovz](?P<oq>['"])(?P<over>.*?)(?P=oq)           # overstrike: its characters
    | [hvwlLbxDSXZAB](?P<q>['"|]).*?(?P=q)            # movements, widths, lines, device controls: dropped
    | z(?P<zero>.)                                    # zero-width character: the character
    | (?P<one>.)                                      # \-, \e, \&, \c, ...
    | $                                               # a lone backslash at the end
    )""",
    re.VERBOSE | re.DOTALL,
)


def _special(name: str) -> str:
    if name in SPECIAL_CHARS:
        return SPECIAL_CHARS[name]
    if re.fullmatch(r"u[0-9A-Fa-f]{4,6}(?:_[0-9A-Fa-f]{4,6})*", name):
        return unicodedata.normalize("NFC", "".join(chr(int(part, 16)) for part in name[1:].split("_")))
    if re.fullmatch(r"char\d+", name):
        return chr(int(name[4:]))
    if len(name) == 2 and name[0] in _ACCENTS and name[1].isalpha():
        return unicodedata.normalize("NFC", name[1] + _ACCENTS[name[0]])
    if len(name) == 1:
        return name
    return ""


def _escapes(text: str, strings: Optional[Mapping] = None) -> str:
    """``text`` with its escapes replaced by what they print (\\c by :data:`_JOIN`)."""
    if "\\" not in text:
        return text
    strings = STRINGS if strings is None else strings

    def replace(m: re.Match) -> str:
        if m.group("two") is not None:
            return _special(m.group("two"))
        if m.group("bracket") is not None:
            return "".join(_special(name) for name in m.group("bracket").split())
        string = m.group("str2") or m.group("strb") or m.group("str1")
        if string is not None:
            return strings.get(string, "")
        if m.group("number") is not None:
            return chr(int(m.group("number")))
        if m.group("over") is not None:
            return _escapes(m.group("over"), strings)
        if m.group("zero") is not None:
            return m.group("zero")
        one = m.group("one")
        if one is not None:
            return _SIMPLE.get(one, one)
        return ""

    return _ESCAPE.sub(replace, text)


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _strip_comment(line: str) -> str:
    """The line without its ``\\"`` comment (an escaped backslash, ``\\\\"``, starts none)."""
    i = line.find("\\")
    while 0 <= i < len(line) - 1:
        if line[i + 1] == '"':
            return line[:i]
        if line[i + 1] == "#":  # groff: comment that also joins the next line
            return line[:i] + "\\"
        i = line.find("\\", i + 2)
    return line


def _logical_lines(source: str) -> list:
    """The input lines with comments removed and continued lines (ending in an unescaped
    backslash) joined; comment-only lines are gone."""
    lines: list = []
    pending = ""
    for raw in source.replace("\r\n", "\n").split("\n"):
        is_comment = raw.startswith(('.\\"', "'\\\"", '\\"', ".\\#", "'\\#", "\\#"))
        line = _strip_comment(raw)
        if is_comment and not line.rstrip("\\").strip(".' \t"):
            if not pending:
                continue
            line = ""
        line = pending + line
        trailing = len(line) - len(line.rstrip("\\"))
        if trailing % 2:
            pending = line[:-1]
            continue
        pending = ""
        lines.append(line)
    if pending:
        lines.append(pending)
    return lines


def _is_request(line: str) -> bool:
    return line.startswith((".", "'"))


def _request(line: str) -> tuple:
    """(name, raw arguments) of a request line: ``.BR open (2)`` -> ("BR", "open (2)")."""
    body = line[1:].lstrip(" \t")
    m = re.match(r"(\S*)[ \t]*(.*)$", body, re.DOTALL)
    return m.group(1), m.group(2)


def _split_args(raw: str) -> list:
    """The arguments of a request: space-separated, ``"..."`` quoted (``""`` is a quote inside
    quotes), escapes kept as written (``\\ `` does not separate)."""
    args = []
    i, n = 0, len(raw)
    while i < n:
        while i < n and raw[i] in " \t":
            i += 1
        if i >= n:
            break
        buf = []
        if raw[i] == '"':
            i += 1
            while i < n:
                if raw[i] == '"':
                    if i + 1 < n and raw[i + 1] == '"':
                        buf.append('"')
                        i += 2
                        continue
                    i += 1
                    break
                if raw[i] == "\\" and i + 1 < n:
                    buf.append(raw[i:i + 2])
                    i += 2
                    continue
                buf.append(raw[i])
                i += 1
        else:
            while i < n and raw[i] not in " \t":
                if raw[i] == "\\" and i + 1 < n:
                    buf.append(raw[i:i + 2])
                    i += 2
                    continue
                buf.append(raw[i])
                i += 1
        args.append("".join(buf))
    return args


def _tbl_cell_lines(cell: str) -> list:
    cell = cell.strip()
    if not cell or cell in ("_", "=", "\\_", "\\=", "\\^", "^"):
        return []
    if _is_request(cell):
        cell = "\\&" + cell
    return [cell]


def _detbl(lines: list) -> list:
    """Turn each tbl block (``.TS`` ... ``.TE``) into plain roff: per row a break, then its
    cells as text lines (``T{`` ... ``T}`` blocks as they are), rules and spans dropped."""
    out: list = []
    i, n = 0, len(lines)

    def skip_format(i: int) -> int:
        while i < n and not _is_request(lines[i]) and not lines[i].rstrip().endswith("."):
            i += 1
        return i + 1 if i < n and not _is_request(lines[i]) else i

    while i < n:
        line = lines[i]
        if not (_is_request(line) and _request(line)[0] == "TS"):
            out.append(line)
            i += 1
            continue
        i += 1
        tab = "\t"
        if i < n and lines[i].rstrip().endswith(";"):
            m = re.search(r"\btab\s*\((.)\)", lines[i])
            if m:
                tab = m.group(1)
            i += 1
        i = skip_format(i)
        out.append(".br")
        while i < n:
            line = lines[i]
            if _is_request(line):
                name = _request(line)[0]
                i += 1
                if name == "TE":
                    break
                if name == "T&":
                    i = skip_format(i)
                else:
                    out.append(line)
                continue
            i += 1
            if line.strip() in ("_", "=", ""):
                continue
            cells = line.split(tab)
            while cells:
                cell = cells.pop(0)
                if cell.strip() == "T{":
                    while i < n and not lines[i].startswith("T}"):
                        out.append(lines[i])
                        i += 1
                    if i < n:
                        rest = lines[i][2:]
                        i += 1
                        cells = rest.split(tab)[1:] + cells if rest.startswith(tab) else cells
                else:
                    out.extend(_tbl_cell_lines(cell))
            out.append(".br")
        out.append(".br")
    return out


@dataclasses.dataclass
class _Section:
    heading: str
    raw: list = dataclasses.field(default_factory=list)  # the logical lines, as written
    lines: list = dataclasses.field(default_factory=list)  # the rendered lines


_FONT_JOINED = {"BR", "BI", "IB", "IR", "RB", "RI"}
_FONT_SPACED = {"B", "I", "SM", "SB"}
_BREAKS = {"PP", "LP", "P", "sp", "br", "HP", "bp", "in", "ti", "RE", "ce", "YS", "TE"}
_SKIP_TO_DOTS = {"de", "de1", "am", "ig", "ds1"}


class _Renderer:
    """A small nroff interpreter for the man macros: renders logical lines into sections of
    plain-text lines."""

    def __init__(self, strings: Optional[Mapping] = None):
        self.strings = dict(STRINGS if strings is None else strings)
        self.sections = [_Section("")]
        self.fill = True
        self.chunks: list = []
        self.tag_pending = False
        self.heading_pending = False
        self.url: Optional[str] = None
        self.last_ie = True

    # ------------------------------------------------------------- output

    def _add(self, text: str) -> None:
        if self.heading_pending:
            self.heading_pending = False
            self.flush()
            self.sections.append(_Section(_collapse(text.replace(_JOIN, "")).upper()))
            return
        if self.chunks and self.chunks[-1].endswith(_JOIN):
            self.chunks[-1] = self.chunks[-1][:-1] + text
        else:
            self.chunks.append(text)
        if self.tag_pending and not text.endswith(_JOIN):
            self.tag_pending = False
            self.flush()
        elif not self.fill and not text.endswith(_JOIN):
            self.flush()

    def flush(self) -> None:
        text = _collapse(" ".join(self.chunks).replace(_JOIN, ""))
        self.chunks = []
        if text:
            self.sections[-1].lines.append(text)

    def render(self, text: str) -> str:
        return _escapes(text, self.strings)

    # ------------------------------------------------------------- input

    def run(self, lines: list) -> list:
        lines = _detbl(lines)
        i = 0
        while i < len(lines):
            line = lines[i]
            i += 1
            self.sections[-1].raw.append(line)
            i = self._line(line, lines, i)
        self.flush()
        return self.sections

    def _line(self, line: str, lines: list, i: int) -> int:
        if not _is_request(line):
            if not line.strip():
                if self.fill:
                    self.flush()
                return i
            if self.fill and line[0] in " \t":
                self.flush()
            self._add(self.render(line))
            return i
        name, raw = _request(line)
        return self._request(name, raw, lines, i)

    def _skip_block(self, body: str, lines: list, i: int) -> int:
        depth = body.count("\\{") - body.count("\\}")
        while depth > 0 and i < len(lines):
            depth += lines[i].count("\\{") - lines[i].count("\\}")
            i += 1
        return i

    def _condition(self, raw: str) -> tuple:
        """(value, body) of an ``.if``/``.ie`` condition, as nroff (groff) would see it."""
        s = raw.lstrip()
        negate = s.startswith("!")
        if negate:
            s = s[1:]
        m = re.match(r"([ntoe])(?=\s|\\\{|$)", s)
        if m:
            value, body = m.group(1) in "no", s[1:]
        elif re.match(r"\\n(?:\(\.g|\[\.g\])", s):
            value, body = True, s[5:] if s.startswith("\\n(") else s[6:]
        elif re.match(r"[cdmrF]\s", s):  # glyph, string, colour, register, font exists
            parts = s.split(None, 2)
            value, body = True, parts[2] if len(parts) > 2 else ""
        elif s[:1] and not s[0].isalnum() and s[0] not in "\\(+-":
            delim = s[0]
            parts = s[1:].split(delim, 2)
            if len(parts) == 3:
                value, body = self.render(parts[0]) == self.render(parts[1]), parts[2]
            else:
                value, body = False, ""
        else:
            token, _, body = s.partition(" ")
            try:
                value = float(token) > 0
            except ValueError:
                value = False
        return value != negate, body.lstrip()

    def _conditional(self, value: bool, body: str, lines: list, i: int) -> int:
        block = body.startswith("\\{")
        if not value:
            return self._skip_block(body, lines, i) if "\\{" in body else i
        if block:
            body = body[2:].lstrip()
        if body:
            i = self._line(body, lines, i)
        return i

    def _request(self, name: str, raw: str, lines: list, i: int) -> int:
        if name in _FONT_JOINED:
            self._add("".join(self.render(a) for a in _split_args(raw)))
        elif name in _FONT_SPACED:
            args = _split_args(raw)
            if args:
                self._add(" ".join(self.render(a) for a in args))
        elif name in ("TP", "TQ"):
            self.flush()
            self.tag_pending = True
        elif name == "IP":
            self.flush()
            args = _split_args(raw)
            if args and self.render(args[0]).strip():
                self._add(self.render(args[0]))
        elif name == "SH":
            self.flush()
            self.tag_pending = False
            args = _split_args(raw)
            if args:
                self.sections.append(_Section(_collapse(" ".join(self.render(a) for a in args)).upper()))
            else:
                self.heading_pending = True
        elif name == "SS":
            self.flush()
            args = _split_args(raw)
            if args:
                self._add(" ".join(self.render(a) for a in args))
                self.flush()
            else:
                self.tag_pending = True
        elif name in ("nf", "EX"):
            self.flush()
            self.fill = False
        elif name in ("fi", "EE"):
            self.flush()
            self.fill = True
        elif name in _BREAKS:
            self.flush()
        elif name in ("UR", "MT"):
            args = _split_args(raw)
            self.url = self.render(args[0]) if args else ""
        elif name in ("UE", "ME"):
            trailing = "".join(self.render(a) for a in _split_args(raw))
            if self.url:
                self._add(f"<{self.url}>{trailing}")
            elif trailing:
                self._add(_JOIN + trailing if self.chunks else trailing)
            self.url = None
        elif name == "SY":
            self.flush()
            self._add(" ".join(self.render(a) for a in _split_args(raw)))
        elif name == "OP":
            self._add("[" + " ".join(self.render(a) for a in _split_args(raw)) + "]")
        elif name == "q":  # tzfile(5), zic(8): .q text trailing -> "text"trailing
            args = [self.render(a) for a in _split_args(raw)]
            if args:
                self._add(f'"{args[0]}"' + "".join(args[1:]))
        elif name in ("ds", "as"):
            key, _, value = raw.partition(" ")
            value = self.render(value.lstrip().removeprefix('"'))
            self.strings[key] = (self.strings.get(key, "") if name == "as" else "") + value
        elif name in _SKIP_TO_DOTS:
            while i < len(lines) and _request(lines[i])[0] != "." and lines[i].strip() != "..":
                i += 1
            i += 1
        elif name == "EQ":
            while i < len(lines) and not (_is_request(lines[i]) and _request(lines[i])[0] == "EN"):
                i += 1
            i += 1
        elif name in ("if", "ie"):
            value, body = self._condition(raw)
            if name == "ie":
                self.last_ie = value
            i = self._conditional(value, body, lines, i)
        elif name == "el":
            i = self._conditional(not self.last_ie, raw.lstrip(), lines, i)
        # Everything else (.TH, .RS, .PD, .ad, .nh, .hy, .ft, .ta, .ne, .nr, .so, .INDENT, ...)
        # prints nothing and breaks nothing here.
        return i


def _render(source: str, strings: Optional[Mapping] = None) -> list:
    return _Renderer(strings).run(_logical_lines(source))


def roff_to_text(source: str) -> str:
    """Man-page roff as plain text: one line per paragraph, tag, heading or no-fill line.

    Comments, font changes and formatting requests go; ``.B``/``.I`` join their arguments with
    spaces and ``.BR``/``.IR``/``.BI``/... without; ``.TP`` puts its tag on a line of its own,
    ``.IP`` starts the paragraph with its tag; ``.nf``/``.EX`` blocks keep their lines; tbl
    tables become a line per row; macro definitions, eqn blocks and troff-only conditionals are
    dropped; ``\\-``, ``\\(em``, ``\\[aq]``, ``\\e``, ``\\*(lq``, ... print their characters.

    >>> roff_to_text('.B open\\n.BR read (2),\\n\\\\fBwrite\\\\fP(2) \\\\- a \\\\(em b')
    'open read(2), write(2) - a \\u2014 b'
    """
    out = []
    for section in _render(source):
        if section.heading:
            out.append(section.heading)
        out.extend(section.lines)
    return "\n".join(out)


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


def roff_to_text_with(source: str, strings: Mapping) -> str:
    out = []
    for section in _render(source, strings):
        out.extend(section.lines)
    return "\n".join(out)


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
