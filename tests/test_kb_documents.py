"""vecgraph.kb.documents (readers of markdown, HTML, plain text, PDF, gzip) and
vecgraph.kb.chunking (the structure-aware Chunker and the FixedChunker baseline)."""

from __future__ import annotations

import gzip
import hashlib
import io
import itertools
import pathlib
import random
import re

import pypdf
import pytest
from tokenizers import Tokenizer
from vecgraph.errors import InvalidArgumentError, NotFoundError
from vecgraph.kb.chunking import Chunk, Chunker, FixedChunker
from vecgraph.kb.documents import (
    SUPPORTED_SUFFIXES,
    Document,
    Section,
    iter_paths,
    parse_text,
    read_document,
)
from vecgraph.memory.card import _llama2_tokenizer

TOKENIZER = _llama2_tokenizer()


def count(text: str) -> int:
    return len(TOKENIZER.encode(text, add_special_tokens=False).ids)


def blake(data: bytes) -> str:
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def write(path: pathlib.Path, data: str | bytes) -> pathlib.Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    if isinstance(data, str):
        path.write_text(data, encoding="utf-8")
    else:
        path.write_bytes(data)
    return path


# ----------------------------------------------------------------------------- markdown

MARKDOWN = """---
title: "Deploy Guide"
tags: [ops]
---
Read this *first*,
then the rest.

# Install

Get the `vg` binary from [the site](http://127.0.0.1/).

## On Linux

1. Download it.
2. Unpack it:
   - into `/opt`
   - or into `~/bin`

```sh
tar xf vg.tgz
  cd vg
```

### Checks

| name | value |
|------|-------|
| port | 8080  |

## On macOS

# Use

Run   it.
"""

MARKDOWN_SECTIONS = (
    Section((), "Read this first, then the rest."),
    Section(("Install",), "Get the vg binary from the site."),
    Section(
        ("Install", "On Linux"),
        "1. Download it.\n\n2. Unpack it:\n\n- into /opt\n\n- or into ~/bin\n\ntar xf vg.tgz\n  cd vg",
    ),
    Section(("Install", "On Linux", "Checks"), "name | value\n\nport | 8080"),
    Section(("Install", "On macOS"), ""),
    Section(("Use",), "Run it."),
)


def test_markdown_sections_title_and_text(tmp_path):
    path = write(tmp_path / "guide.md", MARKDOWN)
    doc = read_document(path)
    assert doc.source == str(path)
    assert doc.format == "markdown"
    assert doc.title == "Deploy Guide"
    assert doc.sections == MARKDOWN_SECTIONS
    assert doc.content_hash == blake(MARKDOWN.encode())
    assert len(doc.content_hash) == 32
    parts = [
        "Read this first, then the rest.",
        "Install",
        "Get the vg binary from the site.",
        "On Linux",
        MARKDOWN_SECTIONS[2].text,
        "Checks",
        "name | value\n\nport | 8080",
        "On macOS",
        "Use",
        "Run it.",
    ]
    expected = "\n\n".join(parts)
    assert doc.text == expected
    assert doc.n_chars == len(expected)
    starts = [
        expected.index(marker) for marker in ("Read", "Install", "On Linux", "Checks", "On macOS", "Use")
    ]
    assert list(doc.section_starts) == starts
    assert parse_text(MARKDOWN, source=str(path)) == doc


def test_markdown_title_falls_back_to_first_h1_then_stem(tmp_path):
    doc = read_document(write(tmp_path / "a.markdown", "intro\n\n## Minor\n\ntext\n\n# Major\n\n# Later\n"))
    assert doc.title == "Major"
    assert doc.sections == (
        Section((), "intro"),
        Section(("Minor",), "text"),
        Section(("Major",), ""),
        Section(("Later",), ""),
    )
    assert read_document(write(tmp_path / "notes.MD", "## Minor\n\ntext\n")).title == "notes"
    fm = "---\nauthor: x\n---\n# Head\n\nbody\n"
    assert read_document(write(tmp_path / "b.md", fm)).title == "Head"
    assert read_document(write(tmp_path / "b.md", fm)).sections == (Section(("Head",), "body"),)


def test_markdown_skipped_levels_and_raw_html(tmp_path):
    src = "# A\n\n### A3\n\nx\n\n## A2\n\ny\n\n<div><p>raw <b>bold</b></p><script>no()</script></div>\n"
    doc = parse_text(src, source="mem")
    assert doc.sections == (
        Section(("A",), ""),
        Section(("A", "A3"), "x"),
        Section(("A", "A2"), "y\n\nraw bold"),
    )
    assert doc.title == "A"
    assert doc.content_hash == blake(src.encode())


# ----------------------------------------------------------------------------- HTML

HTML = """<!DOCTYPE html>
<html><head><title>  The   Manual </title><style>p { color: red }</style>
<script>var hidden = "script text";</script></head>
<body>
<header><a href="/">Home</a> site banner</header>
<nav><ul><li>Menu one</li><li>Menu two</li></ul></nav>
<div role="navigation">Breadcrumbs here</div>
<main>
<article>
<header><h1>Manual  <em>Title</em></h1></header>
<p>First   paragraph
with a <a href="#">link</a>.</p>
<h2>Setup</h2>
<ul><li>Step one</li><li><p>Step two</p><ul><li>sub step</li></ul></li></ul>
<ol start="3"><li>third</li><li>fourth</li></ol>
<pre>  indented code
    more code</pre>
<h3>Details</h3>
<dl><dt>term</dt><dd>definition</dd></dl>
<table><tr><td>cell a</td><td>cell b</td></tr></table>
<div>loose text<noscript>enable js</noscript></div>
<h2>Usage</h2>
<p>Use it.</p>
<footer>article footer</footer>
</article>
</main>
<footer>Copyright site footer</footer>
<script>document.write("more script")</script>
</body></html>
"""


def test_html_sections_with_navigation_and_scripts_removed(tmp_path):
    path = write(tmp_path / "manual.html", HTML)
    doc = read_document(path)
    assert doc.format == "html"
    assert doc.title == "The Manual"
    assert doc.sections == (
        Section(("Manual Title",), "First paragraph with a link."),
        Section(
            ("Manual Title", "Setup"),
            "- Step one\n\n- Step two\n\n- sub step\n\n3. third\n\n4. fourth"
            "\n\n  indented code\n    more code",
        ),
        Section(("Manual Title", "Setup", "Details"), "term\n\ndefinition\n\ncell a\n\ncell b\n\nloose text"),
        Section(("Manual Title", "Usage"), "Use it.\n\narticle footer"),
    )
    for hidden in ("script", "Menu", "Breadcrumbs", "banner", "Copyright", "enable js", "color"):
        assert hidden not in doc.text
    assert doc.content_hash == blake(HTML.encode())


def test_html_title_from_h1_and_text_before_headings(tmp_path):
    page = "<p>before</p><h1>Top</h1><p>a</p><h2>Mid</h2><h4>Deep</h4><p>b</p><h2>Side</h2><p>c</p>"
    doc = read_document(write(tmp_path / "page.HTM", page))
    assert doc.title == "Top"
    assert doc.sections == (
        Section((), "before"),
        Section(("Top",), "a"),
        Section(("Top", "Mid"), ""),
        Section(("Top", "Mid", "Deep"), "b"),
        Section(("Top", "Side"), "c"),
    )
    assert read_document(write(tmp_path / "plain.html", "<p>only text</p>")).title == "plain"


def test_html_meta_charset_is_honoured(tmp_path):
    body = (
        "<html><head><meta charset='iso-8859-1'><title>Caf\u00e9</title></head>"
        "<body><p>cr\u00e8me br\u00fbl\u00e9e</p>"
    )
    raw = body.encode("latin-1")
    doc = read_document(write(tmp_path / "latin.html", raw))
    assert doc.title == "Caf\u00e9"
    assert doc.sections == (Section((), "cr\u00e8me br\u00fbl\u00e9e"),)
    assert doc.content_hash == blake(raw)
    equiv = (
        '<meta http-equiv="Content-Type" content="text/html; charset=windows-1252"><p>\u201cquoted\u201d</p>'
    )
    doc = read_document(write(tmp_path / "cp.html", equiv.encode("cp1252")))
    assert doc.sections == (Section((), "\u201cquoted\u201d"),)


def test_utf8_and_utf16_byte_order_marks(tmp_path):
    doc = read_document(write(tmp_path / "bom.txt", "\ufeffHello\r\nworld\r\n\r\nnext".encode("utf-8")))
    assert doc.sections == (Section((), "Hello world\n\nnext"),)
    assert doc.title == "Hello"
    doc = read_document(write(tmp_path / "wide.md", "\ufeff# W\n\nwide text\n".encode("utf-16")))
    assert doc.sections == (Section(("W",), "wide text"),)


# ----------------------------------------------------------------------------- plain text and rst


def test_plain_text_paragraphs_and_title(tmp_path):
    text = "  Release Notes  \n\nThe first\tparagraph\nspans   lines.\n   \nSecond one.\n\n\n\nThird.\n"
    doc = read_document(write(tmp_path / "notes.txt", text))
    assert doc.format == "text"
    assert doc.title == "Release Notes"
    assert doc.sections == (
        Section((), "Release Notes\n\nThe first paragraph spans lines.\n\nSecond one.\n\nThird."),
    )
    long_first = "word " * 30 + "\n\nmore"
    assert read_document(write(tmp_path / "long.text", long_first)).title == "long"
    doc = read_document(write(tmp_path / "README", "Readme title\nline\n"))
    assert (doc.format, doc.title, doc.sections) == (
        "text",
        "Readme title",
        (Section((), "Readme title line"),),
    )
    assert parse_text("a\n\n\nb", source="x", format="text").sections == (Section((), "a\n\nb"),)


def test_rst_titles_make_sections(tmp_path):
    rst = (
        "=========\n Project\n=========\n\nIntro text\nwraps.\n\nInstall\n-------\n\nRun pip.\n\n"
        "Linux\n~~~~~\n\nUse apt.\n\n----\n\nAfter a transition.\n\nUsage\n-------\n\nCall it.\n"
    )
    doc = read_document(write(tmp_path / "index.rst", rst))
    assert doc.format == "text"
    assert doc.title == "Project"
    assert doc.sections == (
        Section(("Project",), "Intro text wraps."),
        Section(("Project", "Install"), "Run pip."),
        Section(("Project", "Install", "Linux"), "Use apt.\n\nAfter a transition."),
        Section(("Project", "Usage"), "Call it."),
    )


# ----------------------------------------------------------------------------- PDF


def pdf_bytes(pages: list[list[str]]) -> bytes:
    """A minimal PDF written by hand: one Helvetica text line per string, per page."""

    def escape(text: str) -> str:
        return text.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")

    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"",
        b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>",
    ]
    kids = []
    for lines in pages:
        stream = (
            "BT /F1 12 Tf 14 TL 72 720 Td " + " ".join(f"({escape(x)}) Tj T*" for x in lines) + " ET"
        ).encode()
        objects.append(
            b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] "
            b"/Resources << /Font << /F1 3 0 R >> >> /Contents %d 0 R >>" % (len(objects) + 2)
        )
        kids.append(len(objects))
        objects.append(b"<< /Length %d >>\nstream\n" % len(stream) + stream + b"\nendstream")
    objects[1] = b"<< /Type /Pages /Kids [%s] /Count %d >>" % (
        b" ".join(b"%d 0 R" % k for k in kids),
        len(kids),
    )
    out = bytearray(b"%PDF-1.4\n")
    offsets = []
    for number, body in enumerate(objects, 1):
        offsets.append(len(out))
        out += b"%d 0 obj\n" % number + body + b"\nendobj\n"
    xref = len(out)
    out += b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1)
    out += b"".join(b"%010d 00000 n \n" % offset for offset in offsets)
    out += b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    return bytes(out)


PAGES = [
    ["Introduction", "Graphs hold (many) nodes."],
    [],
    ["2 Details", "Edges link nodes.", "Methods", "We walk the graph."],
]


def test_pdf_without_outline_has_one_section_per_page(tmp_path):
    raw = pdf_bytes(PAGES)
    assert pypdf.PdfReader(io.BytesIO(raw)).pages[0].extract_text().startswith("Introduction")
    doc = read_document(write(tmp_path / "paper.pdf", raw))
    assert doc.format == "pdf"
    assert doc.title == "paper"
    assert doc.content_hash == blake(raw)
    assert doc.sections == (
        Section(("page 1",), "Introduction Graphs hold (many) nodes."),
        Section(("page 3",), "2 Details Edges link nodes. Methods We walk the graph."),
    )


def test_pdf_outline_gives_nested_headings(tmp_path):
    pages = [["Preface text."], *PAGES, ["Closing words."]]
    writer = pypdf.PdfWriter(clone_from=pypdf.PdfReader(io.BytesIO(pdf_bytes(pages))))
    intro = writer.add_outline_item(title="Introduction", page_number=1)
    details = writer.add_outline_item(title="Details", page_number=3, parent=intro)
    writer.add_outline_item(title="Methods", page_number=3, parent=details)
    writer.add_outline_item(title="Appendix", page_number=3)  # not in the text: starts at the page's end
    writer.add_outline_item(title="Epilogue", page_number=4)  # not in the text: starts at the page's top
    writer.add_metadata({"/Title": "A  Handmade Paper"})
    buffer = io.BytesIO()
    writer.write(buffer)
    doc = read_document(write(tmp_path / "outlined.pdf", buffer.getvalue()))
    assert doc.title == "A Handmade Paper"
    assert doc.sections == (
        Section((), "Preface text."),
        Section(("Introduction",), "Graphs hold (many) nodes."),
        Section(("Introduction", "Details"), "Edges link nodes."),
        Section(("Introduction", "Details", "Methods"), "We walk the graph."),
        Section(("Appendix",), ""),
        Section(("Epilogue",), "Closing words."),
    )


def test_gzip_of_each_format(tmp_path):
    raw = MARKDOWN.encode()
    doc = read_document(write(tmp_path / "guide.md.gz", gzip.compress(raw)))
    assert (doc.format, doc.title, doc.sections) == ("markdown", "Deploy Guide", MARKDOWN_SECTIONS)
    assert doc.content_hash == blake(raw)
    doc = read_document(write(tmp_path / "page.html.GZ", gzip.compress(b"<h1>T</h1><p>x</p>")))
    assert (doc.format, doc.sections) == ("html", (Section(("T",), "x"),))
    doc = read_document(write(tmp_path / "log.gz", gzip.compress(b"plain\n\ntext")))
    assert (doc.format, doc.title, doc.sections) == ("text", "plain", (Section((), "plain\n\ntext"),))
    doc = read_document(write(tmp_path / "paper.pdf.gz", gzip.compress(pdf_bytes(PAGES))))
    assert (doc.format, doc.title, len(doc.sections)) == ("pdf", "paper", 2)


# ----------------------------------------------------------------------------- errors


def test_missing_file_and_folder(tmp_path):
    missing = tmp_path / "nope.md"
    with pytest.raises(NotFoundError, match=re.escape(f"no such document: {missing}")):
        read_document(missing)
    with pytest.raises(InvalidArgumentError, match=re.escape(f"{tmp_path} is a folder") + ".*iter_paths"):
        read_document(tmp_path)
    with pytest.raises(TypeError, match="path must be a str or os.PathLike, got int 3"):
        read_document(3)


def test_binary_and_undecodable_files_are_refused(tmp_path):
    nul = write(tmp_path / "blob.txt", b"text\x00\x01\x02")
    with pytest.raises(
        InvalidArgumentError, match=re.escape(f"{nul} is not a text document: ") + ".*NUL byte"
    ):
        read_document(nul)
    latin = write(tmp_path / "latin.txt", "caf\u00e9 au lait".encode("latin-1"))
    with pytest.raises(
        InvalidArgumentError,
        match=re.escape(f"{latin} is not a text document: ")
        + r"it is not valid UTF-8 \(byte 0xE9 at offset 3\)",
    ):
        read_document(latin)
    page = write(tmp_path / "latin.html", "<p>caf\u00e9</p>".encode("latin-1"))
    with pytest.raises(InvalidArgumentError, match=re.escape(str(page)) + ".*declares no <meta> charset"):
        read_document(page)
    wrong = write(tmp_path / "wrong.html", b"<meta charset=utf-16be><p>caf\xe9\xff</p>")
    with pytest.raises(InvalidArgumentError, match=re.escape(str(wrong)) + ".*nor valid utf-16be"):
        read_document(wrong)
    unknown = write(tmp_path / "unknown.htm", b"<meta charset=klingon><p>caf\xe9</p>")
    with pytest.raises(
        InvalidArgumentError, match=re.escape(str(unknown)) + ".*charset 'klingon' is unknown"
    ):
        read_document(unknown)
    binary_md = write(tmp_path / "image.md", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    with pytest.raises(InvalidArgumentError, match=re.escape(f"{binary_md} is not a text document")):
        read_document(binary_md)


def test_unreadable_pdf_and_gzip(tmp_path):
    bad = write(tmp_path / "broken.pdf", b"%PDF-1.4\nthis is not really a pdf\n")
    with pytest.raises(InvalidArgumentError, match=re.escape(f"{bad} is not a readable PDF: ")) as info:
        read_document(bad)
    assert "Error" in str(info.value)  # pypdf's exception class and message are quoted
    blank = pypdf.PdfWriter()
    blank.add_blank_page(width=200, height=200)
    buffer = io.BytesIO()
    blank.write(buffer)
    empty = write(tmp_path / "blank.pdf", buffer.getvalue())
    with pytest.raises(InvalidArgumentError, match=re.escape(f"{empty} holds no text")):
        read_document(empty)
    gz = write(tmp_path / "bad.md.gz", b"not gzip at all")
    with pytest.raises(InvalidArgumentError, match=re.escape(f"{gz} is not a readable gzip file")):
        read_document(gz)


def test_unsupported_suffix_and_empty_documents(tmp_path):
    docx = write(tmp_path / "report.docx", "x")
    with pytest.raises(
        InvalidArgumentError,
        match=re.escape(f"{docx}: unsupported suffix '.docx'; supported: ") + ".*\\.md.*\\.html.*\\.pdf",
    ):
        read_document(docx)
    tar = write(tmp_path / "bundle.tar.gz", gzip.compress(b"x"))
    with pytest.raises(InvalidArgumentError, match="unsupported suffix '.tar'"):
        read_document(tar)
    for name, content in [
        ("blank.txt", " \n\t\n\n"),
        ("only.md", "---\ntitle: T\n---\n\n<!-- c -->\n"),
        ("script.html", "<html><script>x()</script><nav>menu</nav></html>"),
        ("zero.md", ""),
    ]:
        path = write(tmp_path / name, content)
        with pytest.raises(InvalidArgumentError, match=re.escape(f"{path} holds no text")):
            read_document(path)


def test_parse_text_arguments():
    doc = parse_text("<h1>T</h1><p>x</p>", source="web/page.html", format="html", title="Given")
    assert (doc.title, doc.source, doc.format) == ("Given", "web/page.html", "html")
    assert doc.content_hash == blake(b"<h1>T</h1><p>x</p>")
    assert parse_text("## Sub\n\nx", source="dir/name.md").title == "name"
    with pytest.raises(
        InvalidArgumentError, match="format must be 'markdown', 'html' or 'text', got str 'pdf'"
    ):
        parse_text("x", source="a", format="pdf")
    with pytest.raises(TypeError, match="text must be a str, got bytes"):
        parse_text(b"x", source="a")
    with pytest.raises(TypeError, match="title must be a str or None, got int 3"):
        parse_text("x", source="a", title=3)
    with pytest.raises(InvalidArgumentError, match="^memo holds no text$"):
        parse_text("  \n ", source="memo", format="text")


# ----------------------------------------------------------------------------- iter_paths


def test_iter_paths_expands_folders(tmp_path):
    root = tmp_path / "docs"
    for name in [
        "b.md",
        "a.txt",
        "c.html.gz",
        "sub/z.pdf",
        "sub/deeper/y.rst",
        "image.png",
        "README",
        ".hidden.md",
        ".git/config.md",
        "sub/.cache/x.md",
        "Upper.MD",
    ]:
        write(root / name, "x")
    top = [str(root / name) for name in ["Upper.MD", "a.txt", "b.md", "c.html.gz"]]
    below = [str(root / "sub" / "deeper" / "y.rst"), str(root / "sub" / "z.pdf")]
    assert iter_paths(root) == top + below
    assert iter_paths(str(root), recursive=False) == top
    extra = write(tmp_path / "extra.md", "x")
    got = iter_paths([extra, root / "b.md", root, str(extra), tmp_path / "docs" / ".." / "docs" / "a.txt"])
    assert got == [str(extra), str(root / "b.md"), *[p for p in top + below if not p.endswith("b.md")]]
    assert iter_paths((root / "README",)) == [str(root / "README")]  # named directly: plain text
    assert all(pathlib.Path(p).suffix.lower() in SUPPORTED_SUFFIXES + (".gz",) for p in iter_paths(root))


def test_iter_paths_errors(tmp_path):
    with pytest.raises(NotFoundError, match=re.escape(f"no such file or folder: {tmp_path / 'gone'}")):
        iter_paths([tmp_path, tmp_path / "gone"])
    bad = write(tmp_path / "x.doc", "x")
    with pytest.raises(InvalidArgumentError, match=re.escape(f"{bad}: unsupported suffix '.doc'")):
        iter_paths(bad)
    with pytest.raises(TypeError, match="each path must be a str or os.PathLike, got int 5"):
        iter_paths([tmp_path, 5])
    with pytest.raises(TypeError, match="recursive must be a bool"):
        iter_paths(tmp_path, recursive=1)
    with pytest.raises(TypeError, match="paths must be a path or an iterable of paths, got int 7"):
        iter_paths(7)
    assert iter_paths([]) == []


# ----------------------------------------------------------------------------- Chunker

WORDS = ["graph", "vector", "index", "search", "node", "edge", "memory", "token", "chunk", "query", "answer"]


def sentences(n: int, seed: int) -> list[str]:
    rng = random.Random(seed)
    return [
        f"Sentence {i} links the {rng.choice(WORDS)} to the {rng.choice(WORDS)} and more." for i in range(n)
    ]


def long_document() -> Document:
    one_paragraph = " ".join(sentences(80, 1))
    paragraphs = "\n\n".join(" ".join(sentences(5, seed)) for seed in range(2, 14))
    text = (
        f"Preface line.\n\n# Long\n\n{one_paragraph}\n\n## Empty\n\n## Many paragraphs\n\n{paragraphs}\n\n"
        "## Code\n\n```\nfor x in range(3):\n    print(x)\n```\n\n# Tiny\n\nJust one line.\n"
    )
    return parse_text(text, source="long.md")


def locate(section_text: str, chunks: list[Chunk]) -> list[tuple[int, int]]:
    """Where each chunk sits in its section's text, found left to right (a slow reference)."""
    spans, start = [], 0
    for chunk in chunks:
        at = section_text.find(chunk.text, start)
        assert at >= 0, chunk
        spans.append((at, at + len(chunk.text)))
        start = at + 1
    return spans


def test_chunker_respects_budget_sections_and_covers_every_word():
    doc = long_document()
    chunker = Chunker(64, 16)
    chunks = chunker(doc)
    assert [c.index for c in chunks] == list(range(len(chunks)))
    assert len(chunks) > 20
    for chunk in chunks:
        assert chunk.text and chunk.text == chunk.text.strip()
        assert chunk.tokens == count(chunk.text) <= 64
        assert chunk.heading_path == doc.sections[chunk.section].heading_path
        assert chunk.text in doc.sections[chunk.section].text  # never crosses a section
    assert [c.section for c in chunks] == sorted(c.section for c in chunks)
    empty = [i for i, s in enumerate(doc.sections) if not s.text]
    assert empty and not any(c.section in empty for c in chunks)
    for number, section in enumerate(doc.sections):
        mine = [c for c in chunks if c.section == number]
        spans = locate(section.text, mine)
        if not section.text:
            continue
        assert spans[0][0] == 0 and spans[-1][1] == len(section.text)
        for (_, end), (start, _) in itertools.pairwise(spans):
            assert start <= end or not section.text[end:start].strip()  # no word is left out
        pieces = [spans[0]] + [
            (max(start, end), stop) for (_, end), (start, stop) in itertools.pairwise(spans)
        ]
        assert " ".join(section.text[a:b] for a, b in pieces).split() == section.text.split()
    long_spans = locate(doc.sections[1].text, [c for c in chunks if c.section == 1])
    assert len(long_spans) > 5
    for (_, end), (start, _) in itertools.pairwise(long_spans):
        assert start < end  # consecutive chunks of one long paragraph overlap
    code = [c for c in chunks if c.heading_path == ("Long", "Code")]
    assert [c.text for c in code] == ["for x in range(3):\n    print(x)"]
    assert chunks[0].text == "Preface line." and chunks[0].heading_path == ()
    assert chunks[-1].text == "Just one line." and chunks[-1].heading_path == ("Tiny",)


def test_chunker_without_overlap_partitions_the_words():
    doc = long_document()
    chunks = Chunker(40, 0)(doc)
    for number, section in enumerate(doc.sections):
        words = [w for c in chunks if c.section == number for w in c.text.split()]
        assert words == section.text.split()
    assert max(c.tokens for c in chunks) <= 40


def test_chunker_splits_chinese_at_sentence_ends():
    text = (
        "自然语言处理是人工智能的一个分支。它研究人与计算机之间的通信！你知道吗？图数据库保存节点和边。"
        "向量检索找到相似的文本。知识图谱连接实体与关系！这些方法可以一起使用吗？当然可以。"
    )
    doc = parse_text(text, source="zh.txt", format="text")
    chunks = Chunker(24, 0)(doc)
    assert len(chunks) >= 4
    assert "".join(c.text for c in chunks) == text
    for chunk in chunks:
        assert chunk.tokens <= 24
        assert chunk.text[-1] in "。！？", chunk.text
    sentence_ends = {m.end() for m in re.finditer("[。！？]", text)}
    position = 0
    for chunk in chunks:
        position += len(chunk.text)
        assert position in sentence_ends


def test_chunker_arguments_and_names():
    assert Chunker().name == "structure-512/64"
    assert FixedChunker().name == "fixed-256/32"
    chunker = Chunker(100, 10)
    assert (chunker.max_tokens, chunker.overlap_tokens, chunker.name) == (100, 10, "structure-100/10")
    assert chunker.count_tokens("order-service is written in Go 1.22") == 12
    for bad, error, message in [
        ((64.0, 8), TypeError, "max_tokens must be an int, got float 64.0"),
        ((True, 0), TypeError, "max_tokens must be an int, got bool True"),
        ((64, "8"), TypeError, "overlap_tokens must be an int, got str '8'"),
        ((0, 0), InvalidArgumentError, "max_tokens must be at least 1, got 0"),
        (
            (64, 64),
            InvalidArgumentError,
            r"overlap_tokens must be at least 0 and less than max_tokens \(64\), got 64",
        ),
        ((64, -1), InvalidArgumentError, "overlap_tokens must be at least 0 and less than max_tokens"),
    ]:
        for cls in (Chunker, FixedChunker):
            with pytest.raises(error, match=f"{cls.__name__}: {message}"):
                cls(*bad)
    with pytest.raises(TypeError, match="tokenizer must be a tokenizers.Tokenizer or None, got str"):
        Chunker(tokenizer="llama")
    with pytest.raises(TypeError, match="expected a vecgraph.kb.documents.Document, got str"):
        Chunker()("some text")
    with pytest.raises(TypeError, match="count_tokens: text must be a str"):
        Chunker().count_tokens(None)


def test_chunker_copies_a_truncating_tokenizer():
    tokenizer = Tokenizer.from_str(TOKENIZER.to_str())
    tokenizer.enable_truncation(8)
    chunker = Chunker(48, 8, tokenizer=tokenizer)
    chunks = chunker(long_document())
    assert max(c.tokens for c in chunks) > 8
    assert all(c.tokens == count(c.text) <= 48 for c in chunks)
    assert tokenizer.truncation is not None and chunker.tokenizer.truncation is None


# ----------------------------------------------------------------------------- FixedChunker


def reference_windows(doc: Document, max_tokens: int, overlap: int) -> list[tuple[str, int, int]]:
    """Tokenize the whole text, cut every max_tokens - overlap tokens, decode each window;
    the section is the last one whose headings or body start at or before the window's text."""
    ids = TOKENIZER.encode(doc.text, add_special_tokens=False).ids
    starts, at = [], 0
    for section in doc.sections:  # found by searching, not by the offsets Document computes
        first = section.heading_path[-1] if section.heading_path else section.text
        at = doc.text.index(first, at)
        starts.append(at)
    out = []
    for first in range(0, len(ids), max_tokens - overlap):
        window = ids[first : first + max_tokens]
        text = TOKENIZER.decode(window).strip()
        begin = len(TOKENIZER.decode(ids[:first]))
        while doc.text[begin].isspace():
            begin += 1
        section = max(i for i, s in enumerate(starts) if s <= begin)
        out.append((text, len(window), section))
        if first + max_tokens >= len(ids):
            break
    return out


@pytest.mark.parametrize(("max_tokens", "overlap"), [(50, 10), (64, 0), (33, 32)])
def test_fixed_chunker_matches_the_slow_reference(max_tokens, overlap):
    doc = parse_text(MARKDOWN.replace("Run   it.", " ".join(sentences(40, 5))), source="guide.md")
    chunks = FixedChunker(max_tokens, overlap)(doc)
    expected = reference_windows(doc, max_tokens, overlap)
    assert [(c.text, c.tokens, c.section) for c in chunks] == expected
    assert [c.heading_path for c in chunks] == [doc.sections[s].heading_path for _, _, s in expected]
    assert [c.index for c in chunks] == list(range(len(chunks)))
    n = count(doc.text)
    step = max_tokens - overlap
    assert len(chunks) == max(0, -(-(n - max_tokens) // step)) + 1


def test_fixed_chunker_keeps_characters_split_over_byte_tokens_whole():
    doc = parse_text("Rare glyphs \U0001d518\U0001d51e\u9f98 " * 20, source="rare.txt", format="text")
    chunks = FixedChunker(7, 2)(doc)
    assert len(chunks) > 10
    for chunk in chunks:
        assert "\ufffd" not in chunk.text and chunk.text in doc.text and chunk.tokens <= 7
    assert any(
        "\ufffd" in TOKENIZER.decode(w)
        for w in (
            TOKENIZER.encode(doc.text, add_special_tokens=False).ids[i : i + 7] for i in range(0, 100, 5)
        )
    )
