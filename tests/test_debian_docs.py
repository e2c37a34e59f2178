"""vecgraph.datasets.debian_docs: the Debian FAQ and Debian Reference as Markdown documents with
known-item questions. A synthetic FAQ and Reference in DocBook XSL HTML pin the converter's
output exactly (bench/check_debian_docs.py checks the installed ``debian-faq`` and
``debian-reference-en`` packages: they are Debian packages, not installed by the test extra)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest
from markdown_it import MarkdownIt
from selectolax.lexbor import LexborHTMLParser
from vecgraph.datasets import debian_docs
from vecgraph.datasets.debian_docs import KBDocument, Question, count_words, normalise, section_text, split_of
from vecgraph.errors import InvalidArgumentError, NotFoundError

# ====================================================================== synthetic DocBook pages

HEAD = (
    '<?xml version="1.0" encoding="UTF-8" standalone="no"?>\n<!DOCTYPE html PUBLIC "-//W3C//DTD XHTML 1.0 '
    'Transitional//EN" "x.dtd"><html><head><meta http-equiv="Content-Type" '
    'content="text/html; charset=UTF-8" /><title>{title}</title></head><body>'
    '<div class="navheader"><table width="100%" summary="Navigation header"><tr><th colspan="3" '
    'align="center">{title}</th></tr><tr><td width="20%" align="left"><a accesskey="p" href="index.en.html">'
    '<img src="images/prev.png" alt="Prev" /></a> </td></tr></table><hr /></div>'
)
FOOT = (
    '<div class="navfooter"><hr /><table width="100%" summary="Navigation footer"><tr><td align="left">'
    '<a accesskey="h" href="index.en.html"><img src="images/home.png" alt="Home" /></a></td>'
    '<td align="right">Chapter 2. Next</td></tr></table></div></body></html>'
)


def page(title: str, body: str) -> str:
    return HEAD.format(title=title) + body + FOOT


def section(level: int, anchor: str, title: str, body: str) -> str:
    return (
        f'<div class="section"><div class="titlepage"><div><div><h{level} class="title"><a id="{anchor}"></a>'
        f"{title}</h{level}></div></div></div>{body}</div>"
    )


FAQ_INDEX = page(
    "The Widget FAQ",
    '<div class="book"><div class="titlepage"><div><div><h1 class="title">'
    '<a id="index"></a>The Widget FAQ</h1></div></div></div><div class="toc"><dl class="toc"><dt>'
    '<span class="chapter"><a href="basics.en.html">1. Basics</a></span></dt></dl></div></div>',
)

FAQ_BASICS = page(
    "Chapter 1. Basics",
    (
        '<div class="chapter"><div class="titlepage"><div><div><h1 class="title"><a id="basics"></a>'
        "Chapter\xa01.\xa0Basics</h1></div></div></div>"
        '<div class="toc"><p><strong>Table of Contents</strong></p><dl class="toc"><dt><span class="section">'
        '<a href="basics.en.html#what">1.1. What is a widget?</a></span></dt></dl></div>'
        "<p>\nIntro   text.\n</p>"
        + section(
            2,
            "what",
            "1.1.\xa0What is a widget?",
            (
                '<p>\nA widget is a <span class="emphasis"><em>small</em></span> thing made of <code '
                'class="literal">parts'
                '</code>\nand sold by the dozen<a href="#ftn.f1" class="footnote" id="f1"><sup '
                'class="footnote">[1]'
                "</sup></a>.  It has\nthree properties that matter to most users of the system.\n</p>"
                '<div class="itemizedlist"><ul class="itemizedlist" type="disc"><li '
                'class="listitem"><p>size</p></li>'
                '<li class="listitem"><p>colour</p><pre class="screen"># widget --paint '
                "red\n</pre></li></ul></div>"
                + section(
                    3,
                    "paint",
                    "1.1.1.\xa0Can I paint a widget?",
                    (
                        '<p>Yes, you can paint it with any colour you like, see <a class="xref" '
                        'href="basics.en.html#what" '
                        'title="1.1.\xa0What is a widget?">Section\xa01.1, \u201cWhat is a '
                        "widget?\u201d</a> for the "
                        "colours that are sold.</p>"
                    ),
                )
            ),
        )
        + section(
            2,
            "tools",
            "1.2.\xa0Tools",
            (
                '<div class="variablelist"><dl class="variablelist"><dt><span '
                'class="term">hammer</span></dt><dd><p>\n'
                "for nails and for other things that need a firm knock now and "
                'then\n</p></dd><dt><span class="term">'
                '<span class="strong"><strong>saw:</strong></span></span></dt><dd><p>cuts</p></dd></dl></div>'
            ),
        )
        + section(2, "short", "1.3.\xa0Is it short?", "<p>Yes, it is.</p>")
        + section(
            2,
            "why",
            "1.4.\xa0Why ask why?",
            (
                "<p>People often ask: why ask why? The answer is that asking is how anyone learns "
                "anything at all.</p>"
            ),
        )
        + section(
            2,
            "where",
            "1.5.\xa0Where are widgets sold?",
            (
                '<p>In every hardware shop of the land, and by mail order from the <a class="ulink" '
                'href="#guild" target="_top">widget guild</a> too.</p>'
            ),
        )
        + '<div class="footnotes"><br /><hr style="width:100; text-align:left;margin-left: 0" /><div '
        'id="ftn.f1" '
        'class="footnote"><p><a href="#f1" class="para"><sup class="para">[1] </sup></a>Or by '
        "the\ngross.</p></div>"
        "</div></div>"
    ),
)

FAQ_BASICS_MD = """\
# Chapter 1. Basics

Intro text.

## Answer 1.1

A widget is a *small* thing made of `parts` and sold by the dozen (Or by the gross.). It has three \
properties that matter to most users of the system.

- size

- colour

  ```
  # widget --paint red
  ```

### Answer 1.1.1

Yes, you can paint it with any colour you like, see Section 1.1 for the colours that are sold.

## 1.2. Tools

- **hammer**

  for nails and for other things that need a firm knock now and then

- **saw:**

  cuts

## Answer 1.3

Yes, it is.

## Answer 1.4

People often ask: why ask why? The answer is that asking is how anyone learns anything at all.

## Answer 1.5

In every hardware shop of the land, and by mail order from the widget guild too.
"""

REF_INDEX = page(
    "Widget Reference",
    '<div class="book"><div class="titlepage"><h1 class="title">Widget '
    'Reference</h1></div><div class="list-of-tables"><p>List of Tables</p></div></div>',
)

REF_PREFACE = page(
    "Preface",
    '<div class="preface"><div class="titlepage"><div><div><h1 class="title">'
    '<a id="pre"/>Preface</h1></div></div></div><p>Read me first.</p></div>',
)

REF_CH01 = page(
    "Chapter 1. Widgets",
    (
        '<div class="chapter"><div class="titlepage"><div><div><h1 class="title"><a '
        'id="w"/>Chapter\xa01.\xa0Widgets'
        "</h1></div></div></div>"
        '<div class="toc"><dl class="toc"><dt><span class="section"><a href="#s">1.1. Widget '
        "shops</a></span></dt>"
        "</dl></div>"
        '<div class="section"><div class="titlepage"><div><div><h2 class="title"><a '
        'id="s"/>1.1.\xa0Widget shops'
        "</h2></div></div></div>"
        '<p>The FAQ answers \u201cWhere are widgets sold?\u201d in detail; see <a class="xref" href="#s" '
        'title="1.1. Widget shops">Section\xa01.1, \u201cWidget shops\u201d</a>.</p>'
        '<p># is the root prompt, and 2*3 is <code class="literal">a`b</code> &lt;b&gt; too.</p>'
        '<div class="note" style="margin-left: 0.5in;"><table border="0" summary="Note"><tr><td rowspan="2" '
        'align="center" valign="top"><img alt="[Note]" src="images/note.png" /></td><th '
        'align="left">Note</th>'
        '</tr><tr><td align="left" valign="top"><p>Shops close on <span '
        'class="strong"><strong>Sunday</strong>'
        "</span>.</p></td></tr></table></div>"
        '<div class="table"><a id="t1"/><p class="title"><strong>Table\xa01.1.\xa0List of shops</strong></p>'
        '<div class="table-contents"><table class="table" summary="List of shops" '
        'border="1"><colgroup><col />'
        "<col /></colgroup><thead><tr><th> shop </th><th> note </th></tr></thead><tbody><tr><td><a "
        'class="ulink" '
        'href="#acme"><code class="literal">acme</code></a></td><td>a | b</td></tr></tbody>'
        '</table></div></div><br class="table-break" />'
        '<div class="orderedlist"><ol class="orderedlist" type="1"><li class="listitem"><p>first</p></li>'
        '<li class="listitem"><p>second</p></li></ol></div>'
        '<div class="section"><div class="titlepage"><div><div><h3 class="title"><a '
        'id="stock">1.1.1.\xa0Stock</h3>'
        '</div></div></div>\n<p>Kept in boxes.</p>\n<div class="itemizedlist">\n<ul class="itemizedlist">\n'
        '<li class="listitem"><p>big</p></li>\n<li class="listitem"><p>small</p></li>\n</ul></div></div>'
        "</div></div>"
    ),
)

REF_CH01_MD = """\
# Chapter 1. Widgets

## 1.1. Widget shops

The FAQ answers “Where are widgets sold?” in detail; see Section 1.1, “Widget shops”.

\\# is the root prompt, and 2\\*3 is `` a`b `` \\<b> too.

> **Note**
>
> Shops close on **Sunday**.

**Table 1.1. List of shops**

| shop | note |
| --- | --- |
| `acme` | a \\| b |

1. first
2. second

### 1.1.1. Stock

Kept in boxes.

- big
- small
"""


def expected_split(qid: str) -> str:
    value = int.from_bytes(hashlib.blake2b(qid.encode("utf-8"), digest_size=8).digest(), "big")
    return "test" if value & 1 else "dev"


def markdown_headings(text: str) -> list:
    """(level, text) of each heading, as markdown-it-py's CommonMark parser (with tables) reads them."""
    tokens = MarkdownIt("commonmark").enable("table").parse(text)
    return [
        (int(token.tag[1]), tokens[i + 1].content)
        for i, token in enumerate(tokens)
        if token.type == "heading_open"
    ]


@pytest.fixture
def synthetic(tmp_path):
    faq, reference = tmp_path / "faq", tmp_path / "reference"
    faq.mkdir()
    reference.mkdir()
    (faq / "index.en.html").write_text(FAQ_INDEX, encoding="utf-8")
    (faq / "basics.en.html").write_text(FAQ_BASICS, encoding="utf-8")
    (faq / "basics.html").write_text("<p>not an English page: not read</p>", encoding="utf-8")
    (reference / "index.en.html").write_text(REF_INDEX, encoding="utf-8")
    (reference / "ch01.en.html").write_text(REF_CH01, encoding="utf-8")
    (reference / "pr01.en.html").write_text(REF_PREFACE, encoding="utf-8")
    return faq, reference


def test_synthetic_faq_chapter():
    document, sections, others = debian_docs.faq_chapter(FAQ_BASICS, "faq-basics")
    assert document == KBDocument("faq-basics", FAQ_BASICS_MD, "markdown")
    assert sections == [
        ("1.1", "What is a widget?", "Answer 1.1"),
        ("1.1.1", "Can I paint a widget?", "Answer 1.1.1"),
        ("1.3", "Is it short?", "Answer 1.3"),
        ("1.4", "Why ask why?", "Answer 1.4"),
        ("1.5", "Where are widgets sold?", "Answer 1.5"),
    ]
    assert others == 1
    assert debian_docs.faq_chapter(FAQ_INDEX, "faq-index") is None
    assert markdown_headings(document.text) == [
        (1, "Chapter 1. Basics"),
        (2, "Answer 1.1"),
        (3, "Answer 1.1.1"),
        (2, "1.2. Tools"),
        (2, "Answer 1.3"),
        (2, "Answer 1.4"),
        (2, "Answer 1.5"),
    ]
    assert section_text(document.text, "Answer 1.1.1") == (
        "Yes, you can paint it with any colour you like, see Section 1.1 for the colours that are sold."
    )
    # The code block's "# widget" line is no heading: Answer 1.1 runs to Answer 1.1.1.
    assert section_text(document.text, "Answer 1.1").endswith("  ```\n  # widget --paint red\n  ```")


def test_synthetic_reference_chapter():
    assert debian_docs.reference_chapter(REF_CH01, "reference-ch01") == KBDocument(
        "reference-ch01", REF_CH01_MD
    )
    assert debian_docs.reference_chapter(REF_INDEX, "reference-index") is None
    assert (
        debian_docs.reference_chapter(REF_PREFACE, "reference-pr01").text == "# Preface\n\nRead me first.\n"
    )
    # The HTML-style <a id="stock"> left open in the 1.1.1 heading: the HTML parser wraps the
    # paragraph and list after it in that anchor; they are converted as if it had been closed.
    wrapper = LexborHTMLParser(REF_CH01).css_first("div.section div.section > a#stock")
    assert wrapper is not None and wrapper.css_first("ul") is not None
    document = debian_docs.reference_chapter(REF_CH01, "reference-ch01")
    assert section_text(document.text, "1.1.1. Stock") == "Kept in boxes.\n\n- big\n- small"
    # XHTML's self-closed <a id="t1"/> is an empty anchor, not one left open; <br/> stays void.
    tree = debian_docs._parse('<div><a id="t1"/><p>t</p><br class="x"/><span/>u</div>')
    assert tree.body.html == '<body><div><a id="t1"></a><p>t</p><br class="x"><span></span>u</div></body>'
    # List items and terms a parser left inside a wrapper of the list are its items all the same.
    wrapped = (
        '<div class="preface"><div class="titlepage"><h1 class="title">Preface</h1></div><ul><a id="x"><li>'
        '<p>one</p></li><li>two</li></a></ul><dl><a id="y"><dt>t</dt><dd>d</dd></a></dl></div>'
    )
    assert LexborHTMLParser(wrapped).css_first("ul > a > li") is not None
    assert debian_docs.reference_chapter(wrapped, "p").text == "# Preface\n\n- one\n- two\n\n- **t**\n\n  d\n"


def test_synthetic_load(synthetic):
    faq, reference = synthetic
    data = debian_docs.load(faq_dir=faq, reference_dir=reference)
    assert [d.name for d in data.documents] == ["faq-basics", "reference-pr01", "reference-ch01"]
    assert data.documents[0].text == FAQ_BASICS_MD and data.documents[2].text == REF_CH01_MD
    # 1.3 answers in 3 words; 1.4 repeats its question in its answer; "Where are widgets sold?"
    # is quoted by the Reference: none of the three is kept.
    assert data.questions == [
        Question("faq-1.1", "What is a widget?", "faq-basics", "Answer 1.1", 35),
        Question("faq-1.1.1", "Can I paint a widget?", "faq-basics", "Answer 1.1.1", 19),
    ]
    assert data.counts == {
        "faq_chapters": 1,
        "faq_question_sections": 5,
        "faq_other_sections": 1,
        "questions_short_answer": 1,
        "questions_dropped_in_answer": 1,
        "questions_dropped_elsewhere": 1,
        "questions_dropped": ["faq-1.4", "faq-1.5"],
        "questions": 2,
        "questions_dev": [expected_split(q) for q in ("faq-1.1", "faq-1.1.1")].count("dev"),
        "questions_test": [expected_split(q) for q in ("faq-1.1", "faq-1.1.1")].count("test"),
        "reference_chapters": 2,
        "documents": 3,
        "faq_words": 125,
        "reference_words": 60,
        "words": 185,
    }
    assert data.counts["faq_words"] == count_words(FAQ_BASICS_MD)
    assert data.counts["reference_words"] == count_words(REF_CH01_MD) + count_words(
        "# Preface\n\nRead me first."
    )
    for split in ("dev", "test"):
        part = debian_docs.load(split, faq_dir=faq, reference_dir=reference)
        assert part.documents == data.documents and part.counts == data.counts
        assert part.questions == [q for q in data.questions if expected_split(q.qid) == split]


def test_write(synthetic, tmp_path):
    faq, reference = synthetic
    data = debian_docs.load(faq_dir=faq, reference_dir=reference)
    out = tmp_path / "out" / "docs"
    paths = data.write(out)
    assert paths == [str(out / f"{name}.md") for name in ("faq-basics", "reference-pr01", "reference-ch01")]
    assert [Path(p).read_bytes().decode("utf-8") for p in paths] == [d.text for d in data.documents]
    assert sorted(p.name for p in out.iterdir()) == [
        "faq-basics.md",
        "reference-ch01.md",
        "reference-pr01.md",
    ]
    with pytest.raises(TypeError, match="folder must be a str or os.PathLike, got int 3"):
        data.write(3)


def test_main(synthetic, tmp_path, capsys):
    faq, reference = synthetic
    assert (
        debian_docs.main(
            ["--faq-dir", str(faq), "--reference-dir", str(reference), "--write", str(tmp_path / "md")]
        )
        == 0
    )
    counts = json.loads(capsys.readouterr().out)
    assert (counts["questions"], counts["documents"]) == (2, 3)
    assert sorted(p.name for p in (tmp_path / "md").iterdir()) == [
        "faq-basics.md",
        "reference-ch01.md",
        "reference-pr01.md",
    ]
    assert debian_docs.main(["--faq-dir", str(tmp_path / "nowhere")]) == 1
    assert "apt-get install debian-faq" in capsys.readouterr().err


def test_missing_folders(synthetic, tmp_path):
    faq, reference = synthetic
    with pytest.raises(
        FileNotFoundError,
        match=r"nowhere: no such folder: the debian-faq package is not "
        r"installed \(apt-get install debian-faq\)",
    ):
        debian_docs.load(faq_dir=tmp_path / "nowhere", reference_dir=reference)
    with pytest.raises(
        FileNotFoundError, match=r"gone: no such folder: .*apt-get install debian-reference-en"
    ):
        debian_docs.load(faq_dir=faq, reference_dir=str(tmp_path / "gone"))
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(
        FileNotFoundError, match=r"empty: no \*\.en\.html pages there.*apt-get install debian-faq"
    ):
        debian_docs.load(faq_dir=empty, reference_dir=reference)
    index_only = tmp_path / "index_only"
    index_only.mkdir()
    (index_only / "index.en.html").write_text(FAQ_INDEX, encoding="utf-8")
    with pytest.raises(
        FileNotFoundError, match=r"index_only: no FAQ chapter page there.*apt-get install debian-faq"
    ):
        debian_docs.load(faq_dir=index_only, reference_dir=reference)


def test_arguments(synthetic):
    faq, reference = synthetic
    with pytest.raises(InvalidArgumentError, match=r"split must be one of all, dev, test; got str 'heldout'"):
        debian_docs.load("heldout", faq_dir=faq, reference_dir=reference)
    with pytest.raises(TypeError, match=r"split must be a str, one of all, dev, test; got None"):
        debian_docs.load(None, faq_dir=faq, reference_dir=reference)
    with pytest.raises(TypeError, match=r"faq_dir must be a str, os.PathLike or None, got int 5"):
        debian_docs.load(faq_dir=5, reference_dir=reference)
    with pytest.raises(TypeError, match=r"html must be a str, got bytes"):
        debian_docs.faq_chapter(b"<p/>", "x")


def test_text_helpers():
    assert (
        normalise("What is \u201cDebian\u201d GNU/Linux?\xa0It's\n  FINE_too")
        == "what is debian gnu linux it s finetoo"
    )
    assert normalise("\uff21\uff22") == "ab"  # NFKC: full-width letters
    assert count_words("- **full featured**: Debian | --- | 59100\n```\nx") == 5
    text = "# T\n\n## A\n\none\n\n```\n## not a heading\n```\n\n   ### B\ntwo\n#### C"
    assert section_text(text, "A") == "one\n\n```\n## not a heading\n```"
    assert section_text(text, "B") == "two"
    assert section_text(text, "C") == ""
    with pytest.raises(NotFoundError, match="no heading 'not a heading' in the document"):
        section_text(text, "not a heading")


def test_split_of():
    qids = [f"faq-{a}.{b}" for a in range(1, 17) for b in range(1, 20)]
    assert [split_of(q) for q in qids] == [expected_split(q) for q in qids]
    assert 0.35 < [split_of(q) for q in qids].count("dev") / len(qids) < 0.65
