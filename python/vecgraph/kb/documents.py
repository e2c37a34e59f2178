"""Documents for :mod:`vecgraph.kb`: files read into a title and a list of sections.

A :class:`Document` is what the knowledge base stores as a tree of graph nodes: the document,
its sections (each with the headings above it, its *heading path*), and later the chunks of
each section (:mod:`vecgraph.kb.chunking`). :func:`read_document` reads one file, picking the
reader by the file's suffix:

* Markdown (``.md``, ``.markdown``): the block token stream of markdown-it-py (CommonMark with
  tables): headings, paragraphs, list items (kept with their ``-`` or ``1.`` marker), code
  blocks and fences (kept line by line), table rows (cells joined with `` | ``) and raw HTML
  blocks (read as HTML). A ``---`` front matter block is left out of the text; its ``title:``
  line, if any, is the title, else the first level-1 heading, else the file's stem.
* HTML (``.html``, ``.htm``): the DOM of selectolax's lexbor parser. ``script``, ``style``,
  ``noscript``, ``template``, ``nav``, elements with ``role="navigation"``, and the page's own
  ``header`` and ``footer`` (those not inside an ``article``, ``aside``, ``main`` or
  ``section``, which are the page banner and footer; ARIA's *banner* and *contentinfo*
  landmarks) are left out. ``h1``–``h6`` open sections; ``p``, ``li``, ``dt``, ``dd``,
  ``td``, ``th`` and other block elements (``div``, ``blockquote``, ...) end paragraphs;
  ``pre`` is kept line by line. The title is ``<title>``, else the first ``h1``, else the stem.
* Plain text (``.txt``, ``.text``, ``.rst``, no suffix): paragraphs are separated by blank
  lines; reStructuredText section titles (a line under- or over-and-underlined with one
  punctuation character, levels in order of first use) open sections. The title is the first
  title of a ``.rst`` file, else the first non-empty line when it is at most 80 characters,
  else the stem.
* PDF (``.pdf``): the text pypdf extracts from each page. When the PDF has an outline
  (bookmarks), its entries are the headings (nested entries nest); a section runs from its
  bookmark's page (cut where the bookmark's title begins a line of that page, if it does) to
  the next bookmark. Without an outline, every page with text is a section headed
  ``("page N",)`` (from 1). The title is the PDF's ``/Title``, else the stem.
* Any of these compressed with gzip (``name.md.gz``; ``name.gz`` is plain text).

Text is decoded as UTF-8 (a byte order mark, UTF-8 or UTF-16, is honoured); HTML that is not
UTF-8 is decoded with the charset its ``<meta>`` declares. Anything else is refused rather
than guessed. Within a paragraph, runs of whitespace become one space; paragraphs are
separated by ``"\\n\\n"``.
"""

from __future__ import annotations

import codecs
import functools
import gzip
import hashlib
import io
import os
import re
import stat
import zlib
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, Union

from ..errors import InvalidArgumentError, NotFoundError, StorageError, _got

__all__ = ["SUPPORTED_SUFFIXES", "Document", "Section", "iter_paths", "parse_text", "read_document"]

SUPPORTED_SUFFIXES = (".md", ".markdown", ".html", ".htm", ".txt", ".text", ".rst", ".pdf")
"""File suffixes :func:`read_document` reads (in any letter case); each also with ``.gz``
after it (gzip), and a file without a suffix is read as plain text."""

_FORMATS = {
    ".md": "markdown",
    ".markdown": "markdown",
    ".html": "html",
    ".htm": "html",
    ".txt": "text",
    ".text": "text",
    ".rst": "rst",
    "": "text",
    ".pdf": "pdf",
}
_SNIFF = 8192  # bytes searched for NUL (binary files) and for an HTML <meta charset>
_TITLE_MAX = 80  # the longest first line of a plain-text file taken as its title
PathArg = Union[str, "os.PathLike[str]"]


@dataclass(frozen=True)
class Section:
    """One section of a :class:`Document`.

    Attributes:
        heading_path: the headings from the top of the document down to this section's own
            heading (``("Guide", "Install", "On Linux")``); ``()`` for text before any heading.
        text: the body: paragraphs separated by ``"\\n\\n"``, whitespace within a paragraph
            collapsed to single spaces, code blocks and preformatted text kept with their line
            breaks. ``""`` for a heading directly followed by another heading.
    """

    heading_path: tuple[str, ...]
    text: str


@dataclass(frozen=True)
class Document:
    """A document read by :func:`read_document` or :func:`parse_text`.

    Attributes:
        source: the path as it was given, or the name passed to :func:`parse_text`.
        title: the document's title (see the module docs for where each format finds it).
        sections: the sections in document order; never empty.
        format: ``"markdown"``, ``"html"``, ``"text"`` or ``"pdf"``.
        content_hash: BLAKE2b-128 (hex, 32 characters) of the document's bytes: the file's
            bytes (after gzip decompression, so ``a.md`` and ``a.md.gz`` hash alike), or the
            UTF-8 of the string given to :func:`parse_text`.
    """

    source: str
    title: str
    sections: tuple[Section, ...]
    format: str
    content_hash: str

    @functools.cached_property
    def _layout(self) -> tuple[str, tuple[int, ...]]:
        parts: list[str] = []
        starts: list[int] = []
        offset, previous = 0, ()
        for section in self.sections:
            path = section.heading_path
            common = 0
            while common < min(len(path), len(previous)) and path[common] == previous[common]:
                common += 1
            new = list(path[min(common, len(path) - 1) :]) if path else []
            if section.text:
                new.append(section.text)
            starts.append(offset + (2 if parts and new else 0))
            for part in new:
                offset += len(part) + (2 if parts else 0)
                parts.append(part)
            previous = path
        return "\n\n".join(parts), tuple(starts)

    @property
    def text(self) -> str:
        """The whole text: each section's headings (those not already above the section
        before it) and its body, in order, separated by ``"\\n\\n"``."""
        return self._layout[0]

    @property
    def section_starts(self) -> tuple[int, ...]:
        """For each section, the offset in :attr:`text` (characters) where its headings, or
        its body when it has no new heading, begin."""
        return self._layout[1]

    @property
    def n_chars(self) -> int:
        """``len(self.text)``."""
        return len(self._layout[0])


def read_document(path: PathArg) -> Document:
    """Reads one file into a :class:`Document`; the reader is chosen by the file's suffix
    (see :data:`SUPPORTED_SUFFIXES` and the module docs).

    Args:
        path: the file (str or os.PathLike).

    Returns:
        The :class:`Document`, whose ``source`` is ``path`` as given.

    Raises:
        TypeError: ``path`` is not a str or os.PathLike.
        NotFoundError: there is no such file.
        InvalidArgumentError: ``path`` is a folder (:func:`iter_paths` lists its documents);
            its suffix is not supported; it is not a text document (NUL bytes in its first
            8 KiB, or not UTF-8, nor the charset an HTML page declares); it is a PDF or gzip
            file that cannot be read (the message quotes pypdf's or gzip's error); or it holds
            no text. Every message names the file.
        StorageError: the operating system refused to read it.
    """
    source = _path_str(path, "path")
    try:
        mode = os.stat(source).st_mode
    except FileNotFoundError:
        raise NotFoundError(f"no such document: {source}") from None
    except OSError as exc:
        raise StorageError(f"cannot read {source}: {exc}") from exc
    if stat.S_ISDIR(mode):
        raise InvalidArgumentError(
            f"{source} is a folder, not a document; "
            "vecgraph.kb.documents.iter_paths lists the documents in it"
        )
    kind, compressed, stem = _kind_of(source)
    try:
        with open(source, "rb") as file:
            data = file.read()
    except OSError as exc:
        raise StorageError(f"cannot read {source}: {exc}") from exc
    if compressed:
        try:
            data = gzip.decompress(data)
        except (OSError, EOFError, zlib.error) as exc:
            raise InvalidArgumentError(f"{source} is not a readable gzip file: {exc}") from None
    content_hash = hashlib.blake2b(data, digest_size=16).hexdigest()
    if kind == "pdf":
        return _read_pdf(data, source, stem, content_hash)
    text = _decode(data, source, html=kind == "html")
    return _parse(text, source, kind, None, stem, content_hash)


def parse_text(text: str, *, source: str, format: str = "markdown", title: str | None = None) -> Document:
    """Parses a document held in memory.

    Args:
        text: the document.
        source: its name (``Document.source``; its stem is the title of last resort).
        format: ``"markdown"``, ``"html"`` or ``"text"``; read as :func:`read_document` reads
            ``.md``, ``.html`` and ``.txt`` files.
        title: the title; None finds it as :func:`read_document` does.

    Returns:
        The :class:`Document`; ``content_hash`` hashes the UTF-8 of ``text``.

    Raises:
        TypeError: ``text``, ``source``, ``format`` or ``title`` is not a str (``title``: or None).
        InvalidArgumentError: ``format`` is another value, or ``text`` holds no text (the
            message names ``source``).
    """
    for name, value in (("text", text), ("source", source), ("format", format)):
        if not isinstance(value, str):
            raise TypeError(f"parse_text: {name} must be a str, got {_got(value)}")
    if title is not None and not isinstance(title, str):
        raise TypeError(f"parse_text: title must be a str or None, got {_got(title)}")
    if format not in ("markdown", "html", "text"):
        raise InvalidArgumentError(
            f"parse_text: format must be 'markdown', 'html' or 'text', got {_got(format)}"
        )
    content_hash = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=16).hexdigest()
    stem = os.path.basename(source)
    stem = stem[:-3] if stem.lower().endswith(".gz") else stem
    stem = os.path.splitext(stem)[0] or stem
    return _parse(text, source, format, title, stem, content_hash)


def iter_paths(paths: PathArg | Iterable[PathArg], *, recursive: bool = True) -> list[str]:
    """The documents to read among ``paths``, folders expanded.

    A folder gives the files in it whose suffix is supported (see :data:`SUPPORTED_SUFFIXES`,
    also with ``.gz``; files without a suffix are not taken from folders), skipping hidden files
    and folders (names starting with ``.``), in sorted order of their path below the folder,
    and with ``recursive`` those in its sub-folders. A file named directly is kept as given.

    Args:
        paths: a path (str or os.PathLike) or an iterable of them.
        recursive: descend into sub-folders.

    Returns:
        The paths as str, in the order given (folders' files in sorted order), each file once
        (a file reached twice, by another spelling or through a symlink, keeps its first place).

    Raises:
        TypeError: ``paths`` or one of its items is not a str or os.PathLike, or ``recursive`` is
            not a bool.
        NotFoundError: a path does not exist (the message names it).
        InvalidArgumentError: a file named directly has an unsupported suffix.
        StorageError: a folder cannot be listed.
    """
    if not isinstance(recursive, bool):
        raise TypeError(f"iter_paths: recursive must be a bool, got {_got(recursive)}")
    if isinstance(paths, (str, os.PathLike)):
        items: list = [paths]
    elif isinstance(paths, Iterable) and not isinstance(paths, (bytes, dict)):
        items = list(paths)
    else:
        raise TypeError(f"iter_paths: paths must be a path or an iterable of paths, got {_got(paths)}")
    found: list[str] = []
    seen: set[str] = set()
    for item in items:
        path = _path_str(item, "iter_paths: each path")
        if not os.path.exists(path):
            raise NotFoundError(f"no such file or folder: {path}")
        if os.path.isdir(path):
            files = _folder_files(path, recursive)
        else:
            _kind_of(path)
            if not os.path.isfile(path):
                raise InvalidArgumentError(f"{path} is not a regular file (a pipe, socket or device)")
            files = [path]
        for file in files:
            key = os.path.normcase(os.path.realpath(file))
            if key not in seen:
                seen.add(key)
                found.append(file)
    return found


# ----------------------------------------------------------------------------- paths and bytes


def _path_str(path: Any, what: str) -> str:
    if isinstance(path, os.PathLike):
        path = os.fspath(path)
    if not isinstance(path, str):
        raise TypeError(f"{what} must be a str or os.PathLike, got {_got(path)}")
    return path


def _kind_of(path: str) -> tuple[str, bool, str]:
    """(reader kind, gzip-compressed, stem) of a file by its name."""
    name = os.path.basename(path)
    compressed = name.lower().endswith(".gz")
    inner = name[:-3] if compressed else name
    stem, suffix = os.path.splitext(inner)
    kind = _FORMATS.get(suffix.lower())
    if kind is None:
        supported = ", ".join(SUPPORTED_SUFFIXES)
        raise InvalidArgumentError(
            f"{path}: unsupported suffix {suffix!r}; supported: {supported} "
            "(each also gzip-compressed, as name.md.gz), or no suffix for plain text"
        )
    return kind, compressed, stem or inner


def _folder_files(folder: str, recursive: bool) -> list[str]:
    def supported(name: str) -> bool:
        lower = name.lower()
        lower = lower.removesuffix(".gz")
        return os.path.splitext(lower)[1] in SUPPORTED_SUFFIXES

    def refuse(exc: OSError) -> None:
        raise StorageError(f"cannot list folder {exc.filename or folder}: {exc.strerror or exc}") from exc

    found = []
    for top, dirs, files in os.walk(folder, onerror=refuse):
        dirs[:] = [name for name in dirs if not name.startswith(".")] if recursive else []
        for name in files:
            path = os.path.join(top, name)
            if not name.startswith(".") and supported(name) and os.path.isfile(path):  # no FIFOs, sockets
                found.append((os.path.relpath(path, folder).split(os.sep), path))
    return [path for _, path in sorted(found)]


def _decode(data: bytes, source: str, *, html: bool) -> str:
    """The text of a file's bytes: UTF-8 (or UTF-16 with a byte order mark), else for HTML
    the charset its <meta> declares; anything else is refused."""
    refuse = f"{source} is not a text document: "
    if data.startswith((codecs.BOM_UTF16_LE, codecs.BOM_UTF16_BE)):
        try:
            return _newlines(data.decode("utf-16"))
        except UnicodeDecodeError as exc:
            raise InvalidArgumentError(
                refuse + f"it starts with a UTF-16 byte order mark but is not UTF-16 "
                f"({exc.reason} at byte {exc.start})"
            ) from None
    if b"\x00" in data[:_SNIFF]:
        at = data.index(b"\x00")
        raise InvalidArgumentError(refuse + f"it holds a NUL byte (at offset {at}), as binary files do")
    try:
        return _newlines(data.decode("utf-8-sig"))
    except UnicodeDecodeError as exc:
        bad = f"it is not valid UTF-8 (byte 0x{data[exc.start]:02X} at offset {exc.start})"
    if not html:
        raise InvalidArgumentError(refuse + bad)
    match = re.search(
        rb"""<meta[^>]*?charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", data[:_SNIFF], re.IGNORECASE
    )
    if match is None:
        raise InvalidArgumentError(refuse + bad + " and declares no <meta> charset")
    charset = match.group(1).decode("ascii")
    try:
        return _newlines(data.decode(charset))
    except LookupError:
        raise InvalidArgumentError(refuse + bad + f" and its <meta> charset {charset!r} is unknown") from None
    except UnicodeDecodeError as exc:
        raise InvalidArgumentError(
            refuse + bad + f", nor valid {charset} as its <meta> declares ({exc.reason} at byte {exc.start})"
        ) from None


def _newlines(text: str) -> str:
    return text.replace("\r\n", "\n").replace("\r", "\n")


# ----------------------------------------------------------------------------- building sections


def _collapse(text: str) -> str:
    return " ".join(text.split())


def _paragraphs(text: str) -> list[str]:
    """The paragraphs of plain text (blank lines between), whitespace collapsed, empty ones dropped."""
    out = []
    for block in re.split(r"\n[ \t\f\v]*\n", text):
        block = _collapse(block)
        if block:
            out.append(block)
    return out


class _Builder:
    """Collects headings and paragraphs into sections."""

    def __init__(self) -> None:
        self.sections: list[Section] = []
        self.stack: list[tuple[int, str]] = []  # (level, heading) from the top down
        self.paragraphs: list[str] = []
        self.prefix = ""  # the marker of the list item whose first paragraph is still to come
        self.first_h1: str | None = None

    def heading(self, level: int, text: str) -> None:
        text = _collapse(text)
        if not text:
            return
        self._close()
        while self.stack and self.stack[-1][0] >= level:
            self.stack.pop()
        self.stack.append((level, text))
        self.prefix = ""
        if level == 1 and self.first_h1 is None:
            self.first_h1 = text

    def paragraph(self, text: str) -> None:
        text = _collapse(text)
        if text:
            self.paragraphs.append(self.prefix + text)
            self.prefix = ""

    def preformatted(self, text: str) -> None:
        lines = _newlines(text).split("\n")
        while lines and not lines[0].strip():
            lines.pop(0)
        while lines and not lines[-1].strip():
            lines.pop()
        if lines:
            self.paragraphs.append("\n".join(line.rstrip() for line in lines))
            self.prefix = ""

    def _close(self) -> None:
        path = tuple(text for _, text in self.stack)
        if path or self.paragraphs:
            self.sections.append(Section(path, "\n\n".join(self.paragraphs)))
        self.paragraphs = []

    def finish(self) -> tuple[Section, ...]:
        self._close()
        return tuple(self.sections)


def _parse(text: str, source: str, kind: str, title: str | None, stem: str, content_hash: str) -> Document:
    builder = _Builder()
    if kind == "markdown":
        found = _parse_markdown(text, builder)
    elif kind == "html":
        found = _parse_html(text, builder)
    else:
        found = _parse_plain(text, builder, rst=kind == "rst")
    sections = builder.finish()
    if not sections:
        raise InvalidArgumentError(f"{source} holds no text")
    return Document(
        source=source,
        title=title if title is not None else (found or stem),
        sections=sections,
        format="text" if kind == "rst" else kind,
        content_hash=content_hash,
    )


# ----------------------------------------------------------------------------- markdown

_FRONT_MATTER = re.compile(r"\A---[ \t]*\n(.*?\n)?(?:---|\.\.\.)[ \t]*(?:\n|\Z)", re.DOTALL)


@functools.lru_cache(maxsize=1)
def _markdown_parser() -> Any:
    from markdown_it import MarkdownIt

    return MarkdownIt("commonmark").enable(["table", "strikethrough"])


def _front_matter(text: str) -> tuple[str, str | None]:
    """(text without its front matter, the front matter's title or None)."""
    text = text.lstrip("\ufeff")
    match = _FRONT_MATTER.match(text)
    if match is None:
        return text, None
    title = None
    line = re.search(r"^title[ \t]*:[ \t]*(.*?)[ \t]*$", match.group(1) or "", re.MULTILINE)
    if line is not None:
        value = line.group(1)
        if len(value) >= 2 and value[0] == value[-1] and value[0] in "'\"":
            value = value[1:-1]
        value = _collapse(value)
        title = value if value and value not in ("|", ">", "|-", ">-") else None
    return text[match.end() :], title


def _inline_text(token: Any) -> str:
    pieces = []
    for child in token.children or ():
        if child.type in ("text", "code_inline"):
            pieces.append(child.content)
        elif child.type in ("softbreak", "hardbreak"):
            pieces.append(" ")
        elif child.type == "image":
            pieces.append(child.content)
    return "".join(pieces)


def _parse_markdown(text: str, builder: _Builder) -> str | None:
    """Feeds markdown to ``builder``; returns the title found (front matter, else first h1)."""
    text, title = _front_matter(text)
    tokens = _markdown_parser().parse(text)
    heading: int | None = None  # the level of the heading whose inline token comes next
    row: list[str] | None = None  # the cells of the table row being read
    for token in tokens:
        kind = token.type
        if kind == "heading_open":
            heading = int(token.tag[1])
        elif kind == "inline":
            if heading is not None:
                builder.heading(heading, _inline_text(token))
                heading = None
            elif row is not None:
                row.append(_collapse(_inline_text(token)))
            else:
                builder.paragraph(_inline_text(token))
        elif kind == "list_item_open":
            builder.prefix = f"{token.info}{token.markup} " if token.info else "- "
        elif kind == "list_item_close":
            builder.prefix = ""
        elif kind in ("fence", "code_block"):
            builder.preformatted(token.content)
        elif kind == "tr_open":
            row = []
        elif kind == "tr_close":
            builder.paragraph(" | ".join(row or ()))
            row = None
        elif kind == "html_block":
            _walk_html(_html_root(token.content), builder)
    return title or builder.first_h1


# ----------------------------------------------------------------------------- HTML

_DROP = frozenset({"script", "style", "noscript", "template", "nav", "head", "title"})
_SECTIONING = frozenset({"article", "aside", "main", "section"})
_BLOCKS = frozenset(
    {
        "address",
        "article",
        "aside",
        "blockquote",
        "body",
        "caption",
        "center",
        "dd",
        "details",
        "dialog",
        "dir",
        "div",
        "dl",
        "dt",
        "fieldset",
        "figcaption",
        "figure",
        "footer",
        "form",
        "header",
        "hgroup",
        "hr",
        "html",
        "legend",
        "li",
        "main",
        "menu",
        "ol",
        "option",
        "p",
        "section",
        "summary",
        "table",
        "tbody",
        "td",
        "tfoot",
        "th",
        "thead",
        "tr",
        "ul",
    }
)
_HEADINGS = {f"h{level}": level for level in range(1, 7)}


def _html_root(html: str) -> Any:
    from selectolax.lexbor import LexborHTMLParser

    return LexborHTMLParser(html)


def _parse_html(html: str, builder: _Builder) -> str | None:
    """Feeds an HTML page to ``builder``; returns the title found (<title>, else first h1)."""
    tree = _html_root(html)
    node = tree.css_first("title")
    title = _collapse(node.text(deep=True)) if node is not None else ""
    _walk_html(tree, builder)
    return title or builder.first_h1


def _walk_html(tree: Any, builder: _Builder) -> None:
    """Feeds the body of a parsed page to ``builder``, depth first without recursion."""
    root = tree.body if tree.body is not None else tree.root
    if root is None:
        return
    inline: list[str] = []  # the text of the paragraph being read
    lists: list[int | None] = []  # per open list: None (ul) or the number of the last item (ol)

    def end_paragraph() -> None:
        if inline:
            builder.paragraph("".join(inline))
            inline.clear()

    stack: list[tuple[Any, bool, bool]] = [(root, False, False)]  # (node, leaving, inside sectioning)
    while stack:
        node, leaving, scoped = stack.pop()
        tag = node.tag
        if leaving:
            if tag in _BLOCKS:
                end_paragraph()
            if tag in ("ul", "ol", "menu", "dir") and lists:
                lists.pop()
            if tag == "li":
                builder.prefix = ""
            continue
        if tag == "-text":
            inline.append(node.text_content or "")
            continue
        if tag is None or tag.startswith("-") or tag in _DROP:
            continue
        attributes = node.attributes
        if (attributes.get("role") or "").strip().lower() == "navigation":
            continue
        if tag in ("header", "footer") and not scoped:
            continue
        if tag in _HEADINGS:
            end_paragraph()
            builder.heading(_HEADINGS[tag], node.text(deep=True))
            continue
        if tag == "pre":
            end_paragraph()
            builder.preformatted(node.text(deep=True))
            continue
        if tag == "br":
            inline.append(" ")
            continue
        if tag in _BLOCKS:
            end_paragraph()
        if tag in ("ul", "menu", "dir"):
            lists.append(None)
        elif tag == "ol":
            lists.append(_int_attribute(attributes, "start", 1) - 1)
        elif tag == "li":
            if lists and lists[-1] is not None:
                lists[-1] = _int_attribute(attributes, "value", lists[-1] + 1)
                builder.prefix = f"{lists[-1]}. "
            else:
                builder.prefix = "- "
        stack.append((node, True, scoped))
        inner = scoped or tag in _SECTIONING
        stack.extend((child, False, inner) for child in reversed(list(node.iter(include_text=True))))
    end_paragraph()


def _int_attribute(attributes: dict, name: str, default: int) -> int:
    try:
        return int((attributes.get(name) or "").strip())
    except ValueError:
        return default


# ----------------------------------------------------------------------------- plain text

_ADORNMENT = re.compile(r"([!-/:-@\[-`{-~])\1+[ \t]*\Z")


def _parse_plain(text: str, builder: _Builder, *, rst: bool) -> str | None:
    """Feeds plain text (reStructuredText titles too when ``rst``) to ``builder``; returns the title."""
    text = text.lstrip("\ufeff")
    if not rst:
        for paragraph in _paragraphs(text):
            builder.paragraph(paragraph)
    else:
        _parse_rst(text, builder)
    title = None
    if rst:
        title = next((heading for section in builder.sections for heading in section.heading_path), None)
        title = title or (builder.stack[0][1] if builder.stack else None)
    if title is None:
        first = next((_collapse(line) for line in text.split("\n") if line.strip()), "")
        title = first if 0 < len(first) <= _TITLE_MAX else None
    return title


def _parse_rst(text: str, builder: _Builder) -> None:
    lines = text.split("\n")
    styles: list[tuple[str, bool]] = []  # adornment styles (character, overlined) in order of first use
    block: list[str] = []

    def end_block() -> None:
        if block:
            builder.paragraph(" ".join(block))
            block.clear()

    def title(line: str, char: str, overlined: bool) -> None:
        end_block()
        if (char, overlined) not in styles:
            styles.append((char, overlined))
        builder.heading(styles.index((char, overlined)) + 1, line)

    i = 0
    while i < len(lines):
        line = lines[i]
        under = _ADORNMENT.match(lines[i + 1]) if i + 1 < len(lines) else None
        over = _ADORNMENT.match(line)
        if (
            over
            and not block
            and i + 2 < len(lines)
            and lines[i + 1].strip()
            and lines[i + 2].rstrip() == line.rstrip()
        ):
            title(lines[i + 1], over.group(1), True)
            i += 3
        elif (
            under
            and not block
            and line.strip()
            and not line[0].isspace()
            and len(lines[i + 1].rstrip()) >= len(line.rstrip())
        ):
            title(line, under.group(1), False)
            i += 2
        elif not line.strip() or (over and not block and len(line.strip()) >= 4):
            end_block()  # a blank line, or a transition (a lone line of punctuation)
            i += 1
        else:
            block.append(line)
            i += 1
    end_block()


# ----------------------------------------------------------------------------- PDF


def _read_pdf(data: bytes, source: str, stem: str, content_hash: str) -> Document:
    try:
        import pypdf
    except ImportError as exc:
        raise ImportError(f"reading {source} needs the pypdf package") from exc
    try:
        reader = pypdf.PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):
            raise InvalidArgumentError(f"{source} is an encrypted PDF that needs a password")
        pages = [_newlines(page.extract_text() or "") for page in reader.pages]
        outline = _pdf_outline(reader)
        metadata = reader.metadata
        title = _collapse(str(metadata.title or "")) if metadata is not None else ""
    except InvalidArgumentError:
        raise
    except Exception as exc:  # noqa: BLE001 - pypdf raises many classes on damaged files
        raise InvalidArgumentError(f"{source} is not a readable PDF: {type(exc).__name__}: {exc}") from None
    if outline:
        sections = _pdf_sections_by_outline(pages, outline)
    else:
        sections = [
            Section((f"page {number}",), "\n\n".join(_paragraphs(page)))
            for number, page in enumerate(pages, 1)
            if _paragraphs(page)
        ]
    if not any(section.text for section in sections):
        raise InvalidArgumentError(f"{source} holds no text (a PDF of scanned pages has no text layer)")
    return Document(
        source=source, title=title or stem, sections=tuple(sections), format="pdf", content_hash=content_hash
    )


def _pdf_outline(reader: Any) -> list[tuple[tuple[str, ...], int]]:
    """The outline as (heading path, 0-based page) in page order; entries without a page are left out."""
    entries = []
    path: list[str] = []
    stack: list[tuple[list, int, int]] = [(list(reader.outline), 0, 0)]  # (items, next index, depth)
    while stack:
        items, index, depth = stack.pop()
        if index >= len(items):
            continue
        stack.append((items, index + 1, depth))
        item = items[index]
        if isinstance(item, list):
            if depth < 64:
                stack.append((item, 0, depth + 1))
            continue
        title = _collapse(str(getattr(item, "title", "") or ""))
        del path[depth:]
        path.extend([""] * (depth - len(path)))
        path.append(title)
        try:
            page = reader.get_destination_page_number(item)
        except Exception:  # noqa: BLE001 - a bookmark to nowhere, or to what is not a page
            page = None
        if title and page is not None and page >= 0:
            entries.append((tuple(heading for heading in path if heading), page))
    entries.sort(key=lambda entry: entry[1])  # stable: bookmarks on one page keep outline order
    return entries


def _pdf_sections_by_outline(pages: list[str], outline: list) -> list[Section]:
    """Cuts the pages' text at the bookmarks. A bookmark's section starts where its title
    begins a line of its page (an optional section number before it); a title not found there
    starts at the top of the page when it is the page's first bookmark, else at the page's end."""
    parts: list[tuple[tuple[str, ...], list[str]]] = [((), [])]  # (heading path, pieces of text)
    following = 0
    for number, page in enumerate(pages):
        at, first = 0, True
        while following < len(outline) and outline[following][1] <= number:
            path = outline[following][0]
            pattern = r"^[ \t]*(?:[0-9IVXivx]+(?:\.[0-9]+)*\.?[ \t]+)?" + r"\s+".join(
                map(re.escape, path[-1].split())
            )
            match = re.compile(pattern, re.MULTILINE | re.IGNORECASE).search(page, at)
            if match is not None:
                parts[-1][1].append(page[at : match.start()])
                at = match.end()
            elif not first:
                parts[-1][1].append(page[at:])
                at = len(page)
            parts.append((path, []))
            first = False
            following += 1
        parts[-1][1].append(page[at:])
    sections = []
    for path, pieces in parts:
        body = "\n\n".join(_paragraphs("\n\n".join(pieces)))
        if path or body:
            sections.append(Section(path, body))
    return sections
