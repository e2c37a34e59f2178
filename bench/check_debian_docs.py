"""The installed ``debian-faq`` 11.1 and ``debian-reference-en`` 2.100 packages through
vecgraph.datasets.debian_docs: the counts, a known question, the absence of question text from
every document, the splits, and the converter's coverage and Markdown structure (against
markdown-it-py's parser). Needs ``apt-get install debian-faq debian-reference-en``:

    python -m pytest bench/check_debian_docs.py -q -p no:cacheprovider -o python_files='check_*.py' -o python_functions='test_*'
"""

from __future__ import annotations

import collections
import os
import sys

import pytest
from markdown_it import MarkdownIt
from selectolax.lexbor import LexborHTMLParser
from vecgraph.datasets import debian_docs
from vecgraph.datasets.debian_docs import Question, count_words, normalise, section_text

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, "tests"))
from test_debian_docs import expected_split, markdown_headings  # noqa: E402 (the converter tests' own)


# ====================================================================== the installed packages


@pytest.fixture(scope="module")
def installed():
    return debian_docs.load()


FAQ_NAMES = [
    "faq-basic-defs",
    "faq-getting-debian",
    "faq-choosing",
    "faq-compatibility",
    "faq-software",
    "faq-ftparchives",
    "faq-pkg-basics",
    "faq-pkgtools",
    "faq-uptodate",
    "faq-kernel",
    "faq-customizing",
    "faq-support",
    "faq-contributing",
    "faq-redistributing",
    "faq-nextrelease",
    "faq-faqinfo",
]
REFERENCE_NAMES = ["reference-pr01"] + [f"reference-ch{n:02d}" for n in range(1, 13)] + ["reference-apa"]


def test_installed_counts(installed):
    assert [d.name for d in installed.documents] == FAQ_NAMES + REFERENCE_NAMES
    assert all(d.format == "markdown" and d.text.endswith("\n") for d in installed.documents)
    assert installed.counts == {
        "faq_chapters": 16,
        "faq_question_sections": 123,
        "faq_other_sections": 25,
        "questions_short_answer": 4,
        "questions_dropped_in_answer": 0,
        "questions_dropped_elsewhere": 1,
        "questions_dropped": ["faq-6.2.1"],
        "questions": 118,
        "questions_dev": 66,
        "questions_test": 52,
        "reference_chapters": 14,
        "documents": 30,
        "faq_words": 21361,
        "reference_words": 76245,
        "words": 97606,
    }
    assert len(installed.questions) == 118
    assert installed.counts["words"] == sum(count_words(d.text) for d in installed.documents)


def test_installed_known_question(installed):
    question = next(q for q in installed.questions if q.qid == "faq-1.2")
    assert question == Question("faq-1.2", "What is Debian GNU/Linux?", "faq-basic-defs", "Answer 1.2", 500)
    text = {d.name: d.text for d in installed.documents}["faq-basic-defs"]
    assert text.startswith("# Chapter 1. Definitions and overview\n\n## Answer 1.1\n\n")
    answer = section_text(text, "Answer 1.2")
    assert answer.startswith(
        "Debian GNU/Linux is a particular *distribution* of the Linux operating system, "
        "and numerous packages that run on it.\n\nDebian GNU/Linux is:\n\n- **full featured**:"
    )
    assert answer.endswith("See Section 14.3 for more information.")
    assert "\n## Answer 1.2\n" in text and "What is Debian GNU/Linux?" not in text
    # Its sub-question neighbour and a dropped one.
    qids = [q.qid for q in installed.questions]
    assert "faq-3.1.1" in qids and "faq-6.2.1" not in qids and "faq-3.1.13" not in qids


def test_installed_questions_absent_from_documents(installed):
    documents = {d.name: f" {normalise(d.text)} " for d in installed.documents}
    for question in installed.questions:
        key = f" {normalise(question.text)} "
        assert len(key) > 10
        assert not any(key in text for text in documents.values()), question.qid
    # The check finds what it looks for: the dropped faq-6.2.1 is quoted by the Reference.
    assert " which other codenames have been used in the past " in documents["reference-ch02"]


def test_installed_answers_and_headings(installed):
    documents = {d.name: d.text for d in installed.documents}
    for question in installed.questions:
        text = documents[question.document]
        assert question.qid == f"faq-{question.heading.removeprefix('Answer ')}"
        level = question.heading.count(".") + 1
        assert markdown_headings(text).count((level, question.heading)) == 1, question.qid
        answer = section_text(text, question.heading)
        assert question.answer_words == count_words(answer) >= debian_docs.MIN_ANSWER_WORDS
        assert not question.text[0].isdigit() and "\xa0" not in question.text


def test_installed_markdown_structure(installed):
    # Every heading markdown-it reads is one the converter wrote (no "# root prompt" line of a
    # program listing, no paragraph read as a heading), and section_text splits at the same lines.
    for document in installed.documents:
        mine = [(level, text) for _, level, text in debian_docs._headings(document.text)]
        assert markdown_headings(document.text) == mine, document.name
    # The Reference's 170 tables are all pipe tables markdown-it reads as tables.
    parser = MarkdownIt("commonmark").enable("table")
    tables = sum(token.type == "table_open" for d in installed.documents for token in parser.parse(d.text))
    assert tables == 170


def test_installed_coverage(installed):
    # Every paragraph, table cell, list item and program listing of the pages' HTML is in its
    # document (normalised), footnotes included; in the FAQ, cross references keep their label.
    documents = {d.name: f" {normalise(d.text)} " for d in installed.documents}
    checked = collections.Counter()
    for name in FAQ_NAMES + REFERENCE_NAMES:
        kind, stem = name.split("-", 1)
        folder = debian_docs.DEFAULT_FAQ_DIR if kind == "faq" else debian_docs.DEFAULT_REFERENCE_DIR
        tree = LexborHTMLParser((folder / f"{stem}.en.html").read_text(encoding="utf-8"))
        for node in tree.css("div.toc, div.navheader, div.navfooter, a.para"):
            node.decompose()
        for node in tree.css("a.footnote"):  # the footnote's text stands there: check either side
            node.replace_with(" footnotemark ")
        if kind == "faq":
            for node in tree.css("a.xref"):
                node.replace_with(node.text(deep=True).split(",")[0])
        for node in tree.css("p, td, th, li, pre"):
            if any(inner.mem_id != node.mem_id for inner in node.css("p, td, li, pre")):
                continue  # checked through its inner blocks
            for key in normalise(node.text(deep=True)).split("footnotemark"):
                if key.strip():
                    checked[kind] += 1
                    assert f" {key.strip()} " in documents[name], (name, key[:80])
    assert checked == {"faq": 772, "reference": 9359}  # the blocks checked, so none was missed


def test_installed_splits_and_determinism(installed):
    dev, test = debian_docs.load("dev"), debian_docs.load("test")
    all_qids = [q.qid for q in installed.questions]
    dev_qids, test_qids = [q.qid for q in dev.questions], [q.qid for q in test.questions]
    assert set(dev_qids).isdisjoint(test_qids)
    assert sorted(dev_qids + test_qids) == sorted(all_qids) and len(set(all_qids)) == len(all_qids) == 118
    assert (len(dev_qids), len(test_qids)) == (66, 52)
    assert dev_qids == [q for q in all_qids if expected_split(q) == "dev"]
    assert dev.documents == test.documents == installed.documents
    assert debian_docs.load() == installed
    names = collections.Counter(d.name for d in installed.documents)
    assert max(names.values()) == 1
