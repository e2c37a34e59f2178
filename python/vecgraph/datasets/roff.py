"""Man-page roff as plain text: the escapes, requests and man macros a page's prose uses.

A small renderer, not a typesetter: it keeps what a reader of the page's text needs (words,
paragraphs, tags, tables as a line per row, the characters escapes stand for) and drops
layout (fonts, sizes, movements, macro definitions, eqn blocks, troff-only conditionals).
:mod:`vecgraph.datasets.manpages` parses pages with it.
"""

from __future__ import annotations

import dataclasses
import re
import unicodedata
from collections.abc import Mapping
from typing import Optional

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


def roff_to_text_with(source: str, strings: Mapping) -> str:
    out = []
    for section in _render(source, strings):
        out.extend(section.lines)
    return "\n".join(out)
