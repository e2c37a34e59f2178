"""The Debian FAQ and the Debian Reference as Markdown documents, with a known-item question set.

An evaluation data set for knowledge-base retrieval (documents -> chunks -> search), built from
two Debian packages installed on this machine (nothing is shipped with vecgraph): ``debian-faq``
(``/usr/share/doc/debian/FAQ/*.en.html``) and ``debian-reference-en``
(``/usr/share/debian-reference/*.en.html``), both DocBook XSL HTML, read with selectolax's lexbor
parser. No cache: the whole build takes about a second.

Documents (:class:`KBDocument`, Markdown), the same collection in every split:

- One per FAQ chapter (a page whose body holds ``div.chapter``; the book's title page is
  skipped), named ``faq-<file stem>`` (``faq-basic-defs``): ``# <chapter title as the page heads
  it>`` ("Chapter 1. Definitions and overview"), then each section (``div.section``, nested ones
  too: ``h2`` -> ``##``, ``h3`` -> ``###``, ``h4`` -> ``####``) in order. A section whose title is
  a question (holds a ``?``) is headed ``Answer <number>`` (``## Answer 1.2``), so the document
  never carries the question; any other section keeps its title (``### 8.1.1. dpkg``). Cross
  references to FAQ sections keep their label only (``Section 12.1``, not its quoted title).
- One per Debian Reference chapter, appendix and preface (``div.chapter``, ``div.appendix``,
  ``div.preface``: ``ch01`` ... ``ch12``, ``apa``, ``pr01``; the index page is skipped), named
  ``reference-<file stem>``, with its real headings (``#`` for the chapter, then one more ``#``
  per section level) and cross references as written.

Conversion (both): paragraphs, itemized and ordered lists (nested, indented), variable lists (a
list item per term, the term in bold), program listings (``pre``) as fenced code blocks verbatim,
tables as pipe tables under their bold title, admonitions (note, tip, caution, warning) as block
quotes headed by their bold kind, ``code``/``command`` as code spans, emphasis and bold as ``*`` and
``**``. Links keep their text, not their target; footnotes are inlined in parentheses where
their marker stands. Navigation headers and footers, tables of contents, lists of tables, images
and index anchors are dropped. Text that Markdown would read as markup (a leading ``#``, ``>``,
``-``, ``1.``; ``*``, backticks, backslashes, ``<tag``) is escaped.

Questions (:class:`Question`): one per FAQ section whose title is a question, ``qid``
``faq-<number>``, ``text`` the title without its number, ``heading`` its ``Answer <number>``
heading. Its answer is :func:`section_text` of that heading: the section's own text up to the
next heading of any level (its sub-sections are questions of their own). Kept when the answer has
at least :data:`MIN_ANSWER_WORDS` words (:func:`count_words`) and the question's :func:`normalise`\\ d
text occurs in no document of the collection (neither in its own answer nor anywhere else: the
question must not be findable verbatim); both kinds of drop are counted.

Split: :func:`split_of`, the parity of the BLAKE2b (8-byte digest, big-endian) of the qid:
``"dev"`` for even, ``"test"`` for odd; ``"all"`` keeps every question.

Counts from ``debian-faq`` 11.1 and ``debian-reference-en`` 2.100 (Debian 12), ``python -m
vecgraph.datasets.debian_docs`` prints them for this machine:

- 16 FAQ chapters, 148 sections: 123 with a question title, 25 with another (``8.1.1. dpkg``,
  ``16.1. Authors``). 4 answers run under 15 words (3.1.13, 5.11, 10.5, 11.3); no answer repeats
  its question; 1 question is quoted by the Reference (6.2.1 "Which other codenames have been used
  in the past?", in ``ch02``): 118 questions, 66 dev and 52 test. Answers run 23 to 500 words
  (median 115).
- 14 Reference documents (12 chapters, the appendix, the preface). 97,606 words in all: the FAQ
  21,361, the Reference 76,245.

>>> from vecgraph.datasets import debian_docs
>>> data = debian_docs.load("test")                    # doctest: +SKIP
>>> len(data.documents), len(data.questions)           # doctest: +SKIP
(30, 52)
"""

from __future__ import annotations

import argparse
import dataclasses
import hashlib
import json
import os
import re
import sys
import unicodedata
from collections.abc import Sequence
from pathlib import Path
from typing import Union

from ..errors import InvalidArgumentError, NotFoundError, _got

__all__ = [
    "MIN_ANSWER_WORDS",
    "SPLITS",
    "DebianDocs",
    "KBDocument",
    "Question",
    "build",
    "count_words",
    "faq_chapter",
    "load",
    "main",
    "normalise",
    "reference_chapter",
    "section_text",
    "source_files",
    "split_of",
]

NAME = "debian_docs"
FAQ_PACKAGE = "debian-faq"
REFERENCE_PACKAGE = "debian-reference-en"
DEFAULT_FAQ_DIR = Path("/usr/share/doc/debian/FAQ")
DEFAULT_REFERENCE_DIR = Path("/usr/share/debian-reference")

#: A question is kept when its answer has at least this many words.
MIN_ANSWER_WORDS = 15

SPLITS = ("all", "dev", "test")

PathLike = Union[str, "os.PathLike[str]"]

_BLOCK_TAGS = frozenset(
    ["p", "div", "pre", "ul", "ol", "dl", "table", "blockquote", "hr", "h1", "h2", "h3", "h4", "h5", "h6"]
)
_SELF_CLOSED = re.compile(r"<([A-Za-z][\w-]*)(\s[^<>]*?)?\s*/>")
_VOID = frozenset(
    [
        "area",
        "base",
        "br",
        "col",
        "embed",
        "hr",
        "img",
        "input",
        "link",
        "meta",
        "param",
        "source",
        "track",
        "wbr",
    ]
)
_BLOCK_SELECTOR = ", ".join(sorted(_BLOCK_TAGS))
_SKIP_CLASSES = frozenset(
    [
        "navheader",
        "navfooter",
        "toc",
        "list-of-tables",
        "list-of-figures",
        "list-of-examples",
        "footnotes",
        "titlepage",
    ]
)
_ADMONITIONS = ("note", "tip", "caution", "warning", "important")
_CODE_TAGS = frozenset({"code", "tt", "kbd", "samp"})
_CODE_CLASSES = frozenset({"command"})
_NUMBERED = re.compile(r"(\d+(?:\.\d+)*)\.?\s+(.+)", re.DOTALL)
_LABEL = re.compile(r"(Chapter|Preface|Appendix)\s*([0-9A-Z]*)")
_HEADING_LINE = re.compile(r" {0,3}(#{1,6})(?:[ \t]+(.*?))?[ \t]*$")
_FENCE = re.compile(r"\s*(`{3,}|~{3,})")
_LEADING_MARKER = re.compile(r"(#|>|[-+](?=\s|$)|\d+(?=[.)](?:\s|$))|~~~|[=-]+\s*$|_{3,}\s*$)")
_TOKEN = re.compile(r"[^\W_]+")
_MARKUP = re.compile(r"[*_`\\]")


# ====================================================================== records


@dataclasses.dataclass(frozen=True)
class KBDocument:
    """One document of the collection.

    Attributes:
        name: a file-name-safe name, unique in the collection (``"faq-basic-defs"``,
            ``"reference-ch01"``); :meth:`DebianDocs.write` writes ``<name>.md``.
        text: the whole document, Markdown, ending with one newline.
        format: ``"markdown"``.
    """

    name: str
    text: str
    format: str = "markdown"


@dataclasses.dataclass(frozen=True)
class Question:
    """One known-item question: find the section that answers it.

    Attributes:
        qid: ``"faq-<number>"`` (``"faq-1.2"``).
        text: the FAQ section title without its number ("What is Debian GNU/Linux?").
        document: the :attr:`KBDocument.name` of its chapter (``"faq-basic-defs"``).
        heading: the Markdown heading text of its answer, ``"Answer <number>"``.
        answer_words: :func:`count_words` of the answer (:func:`section_text` under ``heading``).
    """

    qid: str
    text: str
    document: str
    heading: str
    answer_words: int


@dataclasses.dataclass
class DebianDocs:
    """The data set: the documents, the questions of one split and the build's counts.

    Attributes:
        documents: every FAQ chapter, then every Reference chapter (book order each).
        questions: the questions of the split, in document order.
        counts: what was read, kept and dropped (``faq_chapters``, ``questions``,
            ``questions_dropped``, ``words``, ...); the same in every split.
    """

    documents: list
    questions: list
    counts: dict

    def write(self, folder: PathLike) -> list:
        """Write each document as ``<folder>/<name>.md`` (UTF-8; the folder and its parents are
        made when missing; files of the same names are replaced, others left alone).

        Returns the paths written (str), in document order. Raises TypeError when ``folder`` is
        no path, and OSError when the files cannot be written.
        """
        if not isinstance(folder, (str, os.PathLike)):
            raise TypeError(f"folder must be a str or os.PathLike, got {_got(folder)}")
        base = Path(folder)
        base.mkdir(parents=True, exist_ok=True)
        paths = []
        for document in self.documents:
            path = base / f"{document.name}.md"
            path.write_text(document.text, encoding="utf-8", newline="\n")
            paths.append(str(path))
        return paths


# ====================================================================== text helpers


def normalise(text: str) -> str:
    """``text`` for containment checks: NFKC, case-folded, the Markdown emphasis, code and escape
    characters ``* _ ` \\`` removed (so ``Alt-F*n*`` reads as ``Alt-Fn``), then its runs of letters
    and digits joined by single spaces (any other character separates them)."""
    text = _MARKUP.sub("", unicodedata.normalize("NFKC", text).casefold())
    return " ".join(_TOKEN.findall(text))


def count_words(text: str) -> int:
    """The number of whitespace-separated tokens of ``text`` holding a letter or a digit (so
    Markdown markers such as ``-``, ``|`` or a code fence are not words)."""
    return sum(1 for token in text.split() if any(char.isalnum() for char in token))


def split_of(qid: str) -> str:
    """``"dev"`` when the BLAKE2b digest (8 bytes, read big-endian) of the UTF-8 ``qid`` is even,
    else ``"test"``: stable halves of about equal size."""
    digest = hashlib.blake2b(qid.encode("utf-8"), digest_size=8).digest()
    return "dev" if int.from_bytes(digest, "big") % 2 == 0 else "test"


def _headings(markdown: str) -> list:
    """(line index, level, text) of each ATX heading line outside fenced code blocks."""
    found = []
    fence = ""
    for index, line in enumerate(markdown.split("\n")):
        match = _FENCE.match(line)
        if fence:
            if (
                match
                and match.group(1)[0] == fence[0]
                and len(match.group(1)) >= len(fence)
                and not line.strip()[len(match.group(1)) :].strip()
            ):
                fence = ""
            continue
        if match:
            fence = match.group(1)
            continue
        heading = _HEADING_LINE.match(line)
        if heading:
            found.append((index, len(heading.group(1)), heading.group(2) or ""))
    return found


def section_text(markdown: str, heading: str) -> str:
    """The text under the first heading whose text is ``heading`` (any level), up to the next
    heading of any level, stripped; fenced code blocks are skipped when looking for headings.

    Raises NotFoundError when no heading has that text.
    """
    lines = markdown.split("\n")
    headings = _headings(markdown)
    for position, (index, _, text) in enumerate(headings):
        if text == heading:
            end = headings[position + 1][0] if position + 1 < len(headings) else len(lines)
            return "\n".join(lines[index + 1 : end]).strip()
    raise NotFoundError(f"no heading {heading!r} in the document")


def _collapse(text: str) -> str:
    return " ".join(text.replace("\xa0", " ").split())


def _escape(text: str) -> str:
    text = text.replace("\\", "\\\\").replace("`", "\\`").replace("*", "\\*")
    return re.sub(r"<(?=[A-Za-z/!?])", r"\\<", text)


def _paragraph(text: str) -> str:
    """A one-line paragraph whose start Markdown would read as a heading, quote, list item,
    fence or underline, escaped."""
    match = _LEADING_MARKER.match(text)
    if not match:
        return text
    if match.group(1)[0].isdigit():
        end = match.end()
        return text[:end] + "\\" + text[end:]
    return "\\" + text


def _code_span(text: str) -> str:
    text = _collapse(text)
    if not text:
        return ""
    longest = max((len(run) for run in re.findall(r"`+", text)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if longest or text[0] == "`" or text[-1] == "`" else ""
    return f"{ticks}{pad}{text}{pad}{ticks}"


def _fenced(text: str) -> str:
    text = text.replace("\xa0", " ").strip("\n").rstrip()
    longest = max((len(run) for run in re.findall(r"^\s*(`{3,})", text, re.MULTILINE)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}\n{text}\n{fence}"


def _indent(text: str, prefix: str) -> str:
    return "\n".join(prefix + line if line else line for line in text.split("\n"))


def _members(node, tags: tuple):
    """The children of a list with a tag in ``tags``, also those the HTML parser put inside a
    wrapper (an ``<a id="x">`` left open in the source is repeated inside ``ul``, ``dl``)."""
    for child in node.iter():
        if child.tag in tags:
            yield child
        elif child.tag not in ("ul", "ol", "dl", "table"):
            yield from _members(child, tags)


def _classes(node) -> set:
    return set((node.attributes.get("class") or "").split())


# ====================================================================== HTML -> Markdown


class _Converter:
    """DocBook XSL HTML of one chapter -> Markdown (the rules of the module docstring)."""

    def __init__(self, tree, faq: bool) -> None:
        self.faq = faq
        self.footnotes = {}
        for note in tree.css("div.footnote"):
            if note.attributes.get("id"):
                self.footnotes[note.attributes["id"]] = note
        self.sections: list = []  # (number, title, heading) of the FAQ question sections
        self.other_sections = 0

    # ------------------------------------------------------------ inline

    def inline(self, node) -> str:
        return "".join(self._inline_node(child) for child in node.iter(include_text=True))

    def _inline_node(self, node) -> str:
        tag = node.tag
        if tag == "-text":
            return _escape(node.text_content or "")
        if not node.is_element_node:
            return ""
        classes = _classes(node)
        if tag in ("img", "script", "style") or classes & {"indexterm"}:
            return ""
        if tag == "br":
            return " "
        if tag in _CODE_TAGS or classes & _CODE_CLASSES:
            return _code_span(node.text(deep=True))
        if tag in ("em", "i"):
            inner = _collapse(self.inline(node))
            return f"*{inner}*" if inner else ""
        if tag in ("strong", "b"):
            inner = _collapse(self.inline(node))
            return f"**{inner}**" if inner else ""
        if tag == "a":
            if "footnote" in classes:
                note = self.footnotes.get((node.attributes.get("href") or "").lstrip("#"))
                return f" ({self._footnote(note)})" if note is not None else ""
            if "para" in classes:
                return ""
            if "xref" in classes and self.faq:
                text = _collapse(node.text(deep=True))
                return _escape(text.split(",", 1)[0])
        if tag in _BLOCK_TAGS or tag in ("li", "dt", "dd", "tr", "td", "th"):
            return " " + self.inline(node) + " "
        return self.inline(node)

    def _footnote(self, note) -> str:
        return _collapse(" ".join(self.inline(part) for part in note.iter() if part.is_element_node))

    # ------------------------------------------------------------ blocks

    def blocks(self, node) -> list:
        """The Markdown blocks of the children of ``node``, inline runs grouped into paragraphs."""
        out: list = []
        run: list = []

        def flush() -> None:
            text = _collapse("".join(run))
            if text:
                out.append(_paragraph(text))
            run.clear()

        for child in node.iter(include_text=True):
            if child.is_element_node and child.tag in _BLOCK_TAGS:
                flush()
                out.extend(self.block(child))
            elif child.is_element_node and child.tag == "a" and child.css_first(_BLOCK_SELECTOR) is not None:
                # An anchor the HTML parser wrapped around blocks (``<a id="x">`` left open).
                flush()
                out.extend(self.blocks(child))
            else:
                run.append(self._inline_node(child))
        flush()
        return out

    def block(self, node) -> list:
        tag = node.tag
        classes = _classes(node)
        if classes & _SKIP_CLASSES or tag in ("hr", "h1", "h2", "h3", "h4", "h5", "h6"):
            return []
        if tag == "div":
            if classes & {"section", "sect1", "sect2", "sect3", "simplesect"}:
                return self.section(node)
            if classes & set(_ADMONITIONS):
                return self.admonition(node, classes)
            return self.blocks(node)
        if tag == "p":
            if "title" in classes:
                text = _collapse(node.text(deep=True))
                return [_paragraph(f"**{_escape(text)}**")] if text else []
            return self.blocks(node)
        if tag == "pre":
            text = node.text(deep=True)
            return [_fenced(text)] if text.strip() else []
        if tag in ("ul", "ol"):
            return self.listing(node, ordered=tag == "ol")
        if tag == "dl":
            return self.definitions(node)
        if tag == "table":
            return self.table(node)
        if tag == "blockquote":
            inner = "\n\n".join(self.blocks(node))
            return [_indent(inner, "> ").replace("\n\n", "\n>\n")] if inner else []
        return self.blocks(node)

    def listing(self, node, ordered: bool) -> list:
        items = []
        start = int(node.attributes.get("start") or 1) if ordered else 1
        for child in _members(node, ("li",)):
            if child.tag == "li":
                marker = f"{start + len(items)}. " if ordered else "- "
                items.append((marker, self.blocks(child)))
        return self._list(items)

    @staticmethod
    def _list(items: list) -> list:
        """One Markdown list of ``(marker, blocks)`` items: continuation lines indented by the
        marker's width; items apart by a blank line when one holds several blocks."""
        if not items:
            return []
        texts = []
        for marker, blocks in items:
            body = _indent("\n\n".join(blocks), " " * len(marker)).lstrip(" ") if blocks else ""
            texts.append((marker + body).rstrip())
        loose = any(len(blocks) > 1 for _, blocks in items)
        return [("\n\n" if loose else "\n").join(texts)]

    def definitions(self, node) -> list:
        items = []
        term = None
        for child in _members(node, ("dt", "dd")):
            if child.tag == "dt":
                if term is not None:
                    items.append(("- ", [term]))
                term = _collapse(self.inline(child))
                if term and not term.startswith("**"):
                    term = f"**{term}**"
            elif child.tag == "dd":
                items.append(("- ", ([term] if term else []) + self.blocks(child)))
                term = None
        if term is not None:
            items.append(("- ", [term]))
        return self._list(items)

    def admonition(self, node, classes: set) -> list:
        kind = next(name for name in _ADMONITIONS if name in classes)
        title = kind.capitalize()
        table = node.css_first("table")
        if table is not None:
            head = table.css_first("th")
            if head is not None and _collapse(head.text(deep=True)):
                title = _collapse(head.text(deep=True))
            cells = [cell for cell in table.css("td") if cell.css_first("img") is None]
            body = [block for cell in cells for block in self.blocks(cell)]
        else:
            body = [
                block
                for child in node.iter()
                if child.tag not in ("h1", "h2", "h3", "h4", "h5", "h6")
                for block in self.block(child)
            ]
        inner = "\n\n".join([f"**{_escape(title)}**"] + body)
        return ["\n".join("> " + line if line else ">" for line in inner.split("\n"))]

    def table(self, node) -> list:
        rows = []
        header = None
        for row in node.css("tr"):
            cells = [child for child in row.iter() if child.tag in ("td", "th")]
            texts = [_collapse(self.inline(cell)).replace("|", "\\|") for cell in cells]
            if header is None and row.parent is not None and row.parent.tag == "thead":
                header = texts
            else:
                rows.append(texts)
        if header is None:
            if not rows:
                return []
            header, rows = rows[0], rows[1:]
        width = max(len(header), *(len(row) for row in rows)) if rows else len(header)
        lines = []
        for texts in [header, ["---"] * width] + rows:
            texts = texts + [""] * (width - len(texts))
            lines.append("| " + " | ".join(texts) + " |")
        return ["\n".join(lines)]

    # ------------------------------------------------------------ sections

    def heading_of(self, node):
        """(level, title) of the ``h1``..``h4`` title of a chapter or section, or None."""
        page = next((child for child in node.iter() if "titlepage" in _classes(child)), None)
        if page is None:
            return None
        for level in (1, 2, 3, 4, 5, 6):
            title = page.css_first(f"h{level}")
            if title is not None:
                return level, _collapse(title.text(deep=True))
        return None

    def section(self, node) -> list:
        found = self.heading_of(node)
        head = ["#" * found[0] + " " + self.section_heading(found[1])] if found else []
        return head + self.blocks(node)

    def section_heading(self, title: str) -> str:
        if not self.faq:
            return _escape(title)
        match = _NUMBERED.fullmatch(title)
        if match and "?" in match.group(2):
            heading = f"Answer {match.group(1)}"
            self.sections.append((match.group(1), match.group(2), heading))
            return heading
        self.other_sections += 1
        return _escape(title)

    def chapter(self, root) -> str:
        found = self.heading_of(root)
        head = [f"# {_escape(found[1])}"] if found and found[1] else []
        return "\n\n".join(head + self.blocks(root)).strip() + "\n"


def _chapter_root(tree):
    for kind in ("chapter", "appendix", "preface"):
        node = tree.css_first(f"div.{kind}")
        if node is not None:
            return node
    return None


def _parse(html: str):
    from selectolax.lexbor import LexborHTMLParser

    if not isinstance(html, str):
        raise TypeError(f"html must be a str, got {_got(html)}")
    return LexborHTMLParser(_SELF_CLOSED.sub(_expand, html))


def _expand(match: re.Match) -> str:
    """``<a id="x"/>`` -> ``<a id="x"></a>``: XHTML's self-closed elements, which an HTML parser
    would read as start tags left open (void elements such as ``<br/>`` stay as they are)."""
    tag = match.group(1)
    if tag.lower() in _VOID:
        return match.group(0)
    return f"<{tag}{match.group(2) or ''}></{tag}>"


def faq_chapter(html: str, name: str) -> tuple | None:
    """One FAQ page: ``(document, sections, other_sections)``, or None when the page holds no
    ``div.chapter`` (the book's title page).

    ``sections`` lists the ``(number, question text, heading)`` of each section whose title is a
    question, in order; ``other_sections`` counts the sections with another title. Raises
    TypeError when ``html`` is no str.
    """
    tree = _parse(html)
    root = tree.css_first("div.chapter")
    if root is None:
        return None
    converter = _Converter(tree, faq=True)
    return KBDocument(name, converter.chapter(root)), converter.sections, converter.other_sections


def reference_chapter(html: str, name: str) -> KBDocument | None:
    """One Debian Reference page as a document, or None when it holds no chapter, appendix or
    preface (the index page). Raises TypeError when ``html`` is no str."""
    tree = _parse(html)
    root = _chapter_root(tree)
    if root is None:
        return None
    return KBDocument(name, _Converter(tree, faq=False).chapter(root))


# ====================================================================== build


def _folder(value: PathLike | None, default: Path, what: str, package: str) -> Path:
    if value is not None and not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"{what} must be a str, os.PathLike or None, got {_got(value)}")
    folder = Path(value) if value is not None else default
    if not folder.is_dir():
        raise FileNotFoundError(
            f"{folder}: no such folder: the {package} package is not installed (apt-get install {package})"
        )
    return folder


def source_files(faq_dir: PathLike | None = None, reference_dir: PathLike | None = None) -> tuple:
    """(FAQ pages, Reference pages): the sorted ``*.en.html`` paths of the two folders (defaults
    ``/usr/share/doc/debian/FAQ`` and ``/usr/share/debian-reference``).

    Raises TypeError when a folder is no path, FileNotFoundError naming the folder and the apt
    package when a folder is missing or holds no ``*.en.html`` page.
    """
    out = []
    for value, default, what, package in (
        (faq_dir, DEFAULT_FAQ_DIR, "faq_dir", FAQ_PACKAGE),
        (reference_dir, DEFAULT_REFERENCE_DIR, "reference_dir", REFERENCE_PACKAGE),
    ):
        folder = _folder(value, default, what, package)
        pages = sorted(folder.glob("*.en.html"))
        if not pages:
            raise FileNotFoundError(
                f"{folder}: no *.en.html pages there: reinstall the {package} "
                f"package (apt-get install {package})"
            )
        out.append(pages)
    return tuple(out)


def _book_order(document: KBDocument) -> tuple:
    first = document.text.split("\n", 1)[0]
    match = _LABEL.search(first)
    if not match:
        return (3, 0, document.name)
    rank = {"Preface": 0, "Chapter": 1, "Appendix": 2}[match.group(1)]
    label = match.group(2)
    number = int(label) if label.isdigit() else sum(ord(char) for char in label)
    return (rank, number, document.name)


def _stem(path: Path) -> str:
    return path.name[: -len(".en.html")]


def build(faq_dir: PathLike | None = None, reference_dir: PathLike | None = None) -> DebianDocs:
    """Every document and every kept question (the ``"all"`` split), with the counts.

    Raises what :func:`source_files` raises, and FileNotFoundError when the FAQ folder holds no
    chapter page.
    """
    faq_pages, reference_pages = source_files(faq_dir, reference_dir)
    faq_documents, candidates, other_sections = [], {}, 0
    for path in faq_pages:
        parsed = faq_chapter(path.read_text(encoding="utf-8"), f"faq-{_stem(path)}")
        if parsed is None:
            continue
        document, sections, others = parsed
        faq_documents.append(document)
        candidates[document.name] = sections
        other_sections += others
    if not faq_documents:
        raise FileNotFoundError(
            f"{faq_pages[0].parent}: no FAQ chapter page there: reinstall the "
            f"{FAQ_PACKAGE} package (apt-get install {FAQ_PACKAGE})"
        )
    faq_documents.sort(key=_book_order)
    reference_documents = []
    for path in reference_pages:
        document = reference_chapter(path.read_text(encoding="utf-8"), f"reference-{_stem(path)}")
        if document is not None:
            reference_documents.append(document)
    reference_documents.sort(key=_book_order)
    documents = faq_documents + reference_documents

    normalised = [f" {normalise(document.text)} " for document in documents]
    questions = []
    short = dropped_own = dropped_elsewhere = 0
    dropped_qids = []
    for document in faq_documents:
        for number, text, heading in candidates[document.name]:
            words = count_words(section_text(document.text, heading))
            if words < MIN_ANSWER_WORDS:
                short += 1
                continue
            key = f" {normalise(text)} "
            if key in f" {normalise(section_text(document.text, heading))} ":
                dropped_own += 1
                dropped_qids.append(f"faq-{number}")
                continue
            if any(key in text_ for text_ in normalised):
                dropped_elsewhere += 1
                dropped_qids.append(f"faq-{number}")
                continue
            questions.append(Question(f"faq-{number}", text, document.name, heading, words))
    splits = [split_of(question.qid) for question in questions]
    faq_words = sum(count_words(document.text) for document in faq_documents)
    reference_words = sum(count_words(document.text) for document in reference_documents)
    counts = {
        "faq_chapters": len(faq_documents),
        "faq_question_sections": sum(len(sections) for sections in candidates.values()),
        "faq_other_sections": other_sections,
        "questions_short_answer": short,
        "questions_dropped_in_answer": dropped_own,
        "questions_dropped_elsewhere": dropped_elsewhere,
        "questions_dropped": dropped_qids,
        "questions": len(questions),
        "questions_dev": splits.count("dev"),
        "questions_test": splits.count("test"),
        "reference_chapters": len(reference_documents),
        "documents": len(documents),
        "faq_words": faq_words,
        "reference_words": reference_words,
        "words": faq_words + reference_words,
    }
    return DebianDocs(documents, questions, counts)


def _check_split(split: object) -> None:
    if not isinstance(split, str):
        raise TypeError(f"split must be a str, one of {', '.join(SPLITS)}; got {_got(split)}")
    if split not in SPLITS:
        raise InvalidArgumentError(f"split must be one of {', '.join(SPLITS)}; got {_got(split)}")


def load(
    split: str = "all", *, faq_dir: PathLike | None = None, reference_dir: PathLike | None = None
) -> DebianDocs:
    """The documents and the questions of one split.

    Args:
        split: ``"all"`` (default), ``"dev"`` or ``"test"`` (:func:`split_of` of the qid). The
            documents are the same collection in every split.
        faq_dir: the folder of the FAQ's ``*.en.html`` pages (default
            ``/usr/share/doc/debian/FAQ``).
        reference_dir: the folder of the Reference's ``*.en.html`` pages (default
            ``/usr/share/debian-reference``).

    Returns a :class:`DebianDocs`.

    Raises TypeError when ``split`` is no str or a folder no path, InvalidArgumentError for
    another split name (both before reading anything), FileNotFoundError naming the folder and
    the apt package (``debian-faq``, ``debian-reference-en``) when a folder is missing or empty.
    """
    _check_split(split)
    data = build(faq_dir, reference_dir)
    if split != "all":
        data.questions = [question for question in data.questions if split_of(question.qid) == split]
    return data


def main(argv: Sequence[str] | None = None) -> int:
    """``python -m vecgraph.datasets.debian_docs [--faq-dir D] [--reference-dir D] [--write D]``:
    print the counts (JSON); with ``--write``, also write the documents there. Returns the exit
    status (1 when a package is missing)."""
    parser = argparse.ArgumentParser(
        prog=f"python -m vecgraph.datasets.{NAME}",
        description="Build the Debian FAQ and Reference documents and questions and print their counts.",
    )
    parser.add_argument("--faq-dir", default=None, help="FAQ pages folder (default: the installed package)")
    parser.add_argument("--reference-dir", default=None, help="Reference pages folder (default: installed)")
    parser.add_argument("--write", default=None, help="write the documents as <name>.md into this folder")
    args = parser.parse_args(argv)
    try:
        data = build(args.faq_dir, args.reference_dir)
        if args.write:
            data.write(args.write)
    except OSError as error:
        print(f"error: {error}", file=sys.stderr)
        return 1
    print(json.dumps(data.counts, indent=2, ensure_ascii=False))
    return 0


if __name__ == "__main__":
    sys.exit(main())
