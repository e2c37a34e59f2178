"""vecgraph.datasets.manpages and vecgraph.datasets.jargon on small fixture trees (no Debian
package needed): parsed pages and nodes, aliases, edges, queries and
counts, the split, the cache, and the error when the package is missing."""

from __future__ import annotations

import base64
import gzip
import hashlib
import os

import pytest

from vecgraph.datasets import jargon, manpages
from vecgraph.datasets.manpages import parse_page


def expected_split(qid: str) -> str:
    return "heldout" if hashlib.sha256(qid.encode("utf-8")).digest()[0] >= 128 else "dev"


def rows(table) -> list:
    return table.to_pylist()


def test_parse_page_name_and_sections():
    page = parse_page(
        ".TH X 3\n.SH NAME\nfoo, bar_baz, qux\\-x \\- do \\fIthings\\fP\n"
        ".SH SYNOPSIS\n.B foo\n.SH DESCRIPTION\nDoes things.\n"
        ".SH SEE ALSO\n.BR one (1),\n"
        "\\fBtwo\\fP(3const), three(8), \\fIfour\\fR (5), ld.so(8), float.h(0p)\n")
    assert page.names == ("foo", "bar_baz", "qux-x")
    assert page.summary == "do things"
    assert (page.text, page.text_section) == ("Does things.", "DESCRIPTION")
    assert page.see_also == (("one", "1"), ("two", "3const"), ("three", "8"), ("four", "5"), ("ld.so", "8"),
                             ("float.h", "0p"))
    assert page.redirect is None
    assert parse_page('.\\" Link\n.so man2/open.2\n').redirect == "man2/open.2"
    assert parse_page(".SH NAME\nx \\- y\n.so man2/open.2\n").redirect is None


# ====================================================================== man page fixtures

PAGES = {
    "man2/open.2": """.\\" Copyright (C) 1992 Someone
.\\"
.TH OPEN 2 2023-02-05 "Linux man-pages 6.03"
.SH NAME
open, openat, creat \\- open and possibly create a file
.SH SYNOPSIS
.nf
.B #include <fcntl.h>
.BI "int open(const char *" pathname ", int " flags );
.fi
.SH DESCRIPTION
The
.BR open ()
system call opens the file specified by
.IR pathname .
A file descriptor is a \\fIsmall\\fP, nonnegative integer\\(emsee
.BR close (2).
.TP
.B O_CREAT
Create it.
.SH "SEE ALSO"
.BR close (2),
\\fBread\\fP(2),
.BR creat (2),
.BR bash (1),
close(2),
.BR timespec (3)
""",
    "man2/creat.2": ".so man2/open.2\n.\\\" Link for the old name of this page\n",
    "man2/close.2": """.TH CLOSE 2
.SH NAME
close \\- close a file descriptor
.SH DESCRIPTION
.BR close ()
closes a file descriptor, so that it no longer refers to any file.
.PP
See
.UR https://example.org/close
the notes
.UE .
.SH SEE ALSO
.BR open (2),
.BR openat (2)
""",
    "man2/read.2": """.SH NAME
read \\- read from a file descriptor
.SH DESCRIPTION
.nf
ssize_t read(int fd);
  indented line
.fi
Reads \\e data.
.SH SEE ALSO
.BR readx (2)
""",
    "man2/readx.2": ".SH NAME\nreadx \\- read from a file descriptor\n.SH DESCRIPTION\nReads more.\n",
    "man3/timespec.3type": """.SH NAME
timespec \\- time in seconds and nanoseconds
.SH LIBRARY
Standard C library
.SH DESCRIPTION
Describes times in seconds and nanoseconds.
.TS
tab(:);
l l.
tv_sec:seconds
tv_nsec:nanoseconds
.TE
""",
    "man7/nodesc.7": """.SH NAME
nodesc \\- a page without a description
.SH SYNOPSIS
.B nodesc
.SH OVERVIEW
This page has an overview instead.
""",
    "man5/empty.5": ".SH NAME\nempty \\- nothing to say\n.SH SYNOPSIS\n.B empty\n",
    "man3/gone.3": ".so man3/nothere.3\n",
}
LINKS = {"man2/openat.2.gz": "open.2.gz", "man2/open64.2.gz": "../man2/open.2.gz"}

MAN_NODES = [
    {"key": "close(2)", "label": "2", "aliases": ["close"],
     "text": "close() closes a file descriptor, so that it no longer refers to any file.\n"
             "See the notes <https://example.org/close>."},
    {"key": "nodesc(7)", "label": "7", "aliases": ["nodesc"], "text": "This page has an overview instead."},
    {"key": "open(2)", "label": "2", "aliases": ["open", "openat", "creat", "open64"],
     "text": "The open() system call opens the file specified by pathname. A file descriptor is a small, "
             "nonnegative integer\u2014see close(2).\nO_CREAT\nCreate it."},
    {"key": "read(2)", "label": "2", "aliases": ["read"],
     "text": "ssize_t read(int fd);\nindented line\nReads \\ data."},
    {"key": "readx(2)", "label": "2", "aliases": ["readx"], "text": "Reads more."},
    {"key": "timespec(3type)", "label": "3type", "aliases": ["timespec"],
     "text": "Describes times in seconds and nanoseconds.\ntv_sec seconds\ntv_nsec nanoseconds"},
]
MAN_EDGES = [
    {"src": "close(2)", "dst": "open(2)", "rel": "see_also"},
    {"src": "open(2)", "dst": "close(2)", "rel": "see_also"},
    {"src": "open(2)", "dst": "read(2)", "rel": "see_also"},
    {"src": "open(2)", "dst": "timespec(3type)", "rel": "see_also"},
    {"src": "read(2)", "dst": "readx(2)", "rel": "see_also"},
]
MAN_QUERIES = [
    ("close(2)", "close a file descriptor", ["close(2)"]),
    ("nodesc(7)", "a page without a description", ["nodesc(7)"]),
    ("open(2)", "open and possibly create a file", ["open(2)"]),
    ("read(2)", "read from a file descriptor", ["read(2)", "readx(2)"]),
    ("timespec(3type)", "time in seconds and nanoseconds", ["timespec(3type)"]),
]


@pytest.fixture
def man_root(tmp_path):
    root = tmp_path / "man"
    for name, text in PAGES.items():
        path = root / f"{name}.gz"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(gzip.compress(text.encode("utf-8"), mtime=0))
    for name, target in LINKS.items():
        os.symlink(target, root / name)
    return root


def test_manpages_tables(man_root):
    tables, counts = manpages.build(man_root, cache=False)
    assert rows(tables["nodes"].select(["key", "label", "text", "aliases"])) == MAN_NODES
    assert rows(tables["edges"]) == MAN_EDGES
    assert rows(tables["queries"]) == [
        {"qid": qid, "text": text, "relevant": relevant, "exclude": [], "split": expected_split(qid)}
        for qid, text, relevant in MAN_QUERIES]
    assert str(tables["nodes"].schema.field("aliases").type) == "list<item: string>"
    assert {k: v for k, v in counts.items() if k != "see_also_unresolved_top"} == {
        "files": 11, "symlinks": 2, "so_pages": 2, "unreadable": 0, "dangling_redirections": 1,
        "pages": 7, "dropped_no_text": 1, "text_from_other_section": 1, "text_cut": 0, "nodes": 6,
        "see_also_references": 9, "see_also_by_section_family": 1, "see_also_self": 1,
        "see_also_unresolved": 1, "see_also_duplicate": 2,
        "edges": 5, "no_summary": 0, "shared_summaries": 1, "pages_with_shared_summary": 2,
        "queries": 5, "queries_dev": sum(expected_split(q[0]) == "dev" for q in MAN_QUERIES),
        "queries_heldout": sum(expected_split(q[0]) == "heldout" for q in MAN_QUERIES),
    }
    assert counts["see_also_unresolved_top"] == {"bash(1)": 1}


def test_manpages_load_splits(man_root):
    every = manpages.load(None, root=man_root, cache=False)
    dev = manpages.load("dev", root=man_root, cache=False)
    heldout = manpages.load("heldout", root=man_root, cache=False)
    assert set(dev["queries"].column("split").to_pylist()) <= {"dev"}
    assert set(heldout["queries"].column("split").to_pylist()) <= {"heldout"}
    assert sorted(dev["queries"].column("qid").to_pylist() + heldout["queries"].column("qid").to_pylist()) \
        == every["queries"].column("qid").to_pylist()
    assert dev["nodes"].equals(every["nodes"]) and heldout["edges"].equals(every["edges"])
    with pytest.raises(ValueError):
        manpages.load("test", root=man_root, cache=False)


def test_text_cut(tmp_path):
    root = tmp_path / "man"
    (root / "man1").mkdir(parents=True)
    words = " ".join(f"w{i:03d}" for i in range(600))  # 2,399 characters
    (root / "man1" / "long.1").write_text(f".SH NAME\nlong \\- long\n.SH DESCRIPTION\n{words}\n")
    tables, counts = manpages.build(root, cache=False)
    text = tables["nodes"].column("text")[0].as_py()
    assert len(text) == 1999 and text == words[:1999] and counts["text_cut"] == 1


def test_split_halves():
    qids = [f"q{i}" for i in range(4000)]
    splits = [manpages.split_of(q) for q in qids]
    assert splits == [expected_split(q) for q in qids]
    assert 1900 < splits.count("heldout") < 2100
    assert jargon.split_of is manpages.split_of


def test_manpages_cache(man_root, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    first = manpages.load(None, root=man_root, cache=cache)
    folders = list((cache / "manpages").iterdir())
    assert len(folders) == 1 and len(folders[0].name) == 64
    assert sorted(p.name for p in folders[0].iterdir()) == ["counts.json", "edges.parquet", "nodes.parquet",
                                                           "queries.parquet"]

    def fail(sources):
        raise AssertionError("rebuilt although cached")

    monkeypatch.setattr(manpages, "build_tables", fail)
    cached = manpages.load(None, root=man_root, cache=cache)
    assert all(cached[name].equals(first[name]) for name in manpages.TABLES)
    monkeypatch.undo()

    page = man_root / "man2" / "readx.2.gz"
    page.write_bytes(gzip.compress(b".SH NAME\nreadx \\- read more\n.SH DESCRIPTION\nChanged.\n"))
    changed = manpages.load(None, root=man_root, cache=cache)
    assert changed["queries"].num_rows == 6
    now = list((cache / "manpages").iterdir())
    assert len(now) == 1 and now[0].name != folders[0].name


def test_manpages_missing(tmp_path, monkeypatch):
    with pytest.raises(FileNotFoundError, match=r"nowhere.*apt-get install manpages manpages-dev"):
        manpages.load(root=tmp_path / "nowhere", cache=False)
    (tmp_path / "empty").mkdir()
    with pytest.raises(FileNotFoundError, match=r"empty/man\*/.*apt-get install manpages manpages-dev"):
        manpages.load(root=tmp_path / "empty", cache=False)

    info, man = tmp_path / "info", tmp_path / "usr-man"
    info.mkdir()
    monkeypatch.setattr(manpages, "DPKG_INFO", info)
    monkeypatch.setattr(manpages, "DEFAULT_ROOT", man)
    with pytest.raises(FileNotFoundError, match=r"info/manpages\.list is missing.*apt-get install manpages"):
        manpages.load(cache=False)
    (man / "man2").mkdir(parents=True)
    page = b".SH NAME\nhere \\- present\n.SH DESCRIPTION\nYes.\n"
    (man / "man2" / "here.2.gz").write_bytes(gzip.compress(page))
    (info / "manpages.list").write_text(f"/.\n{man}\n{man}/man2\n{man}/man2/here.2.gz\n/usr/share/doc/x.gz\n")
    (info / "manpages-dev.list").write_text(f"{man}/man2/gone.2.gz\n")
    with pytest.raises(FileNotFoundError, match=r"man2/gone\.2\.gz is missing.*apt-get install manpages"):
        manpages.load(cache=False)
    (info / "manpages-dev.list").write_text("")
    assert manpages.load(None, cache=False)["nodes"].column("key").to_pylist() == ["here(2)"]


# ====================================================================== jargon fixtures

JARGON_ENTRIES = [  # (index headword, entry text), in index order after the meta entries
    ("hack", "hack\n n.\n\n    Work {kluge}-ish; see {Foo\n    Bar} and {hack} itself and {kluge} "
             "again.\n\n"),
    ("kluge", "kluge\n n.\n\n    A clever {hack}. Code: main() {for(;;);} and foo{a,b}. See {ID10T}.\n\n"),
    ("foo bar", "foo bar\n\n\n    Metasyntactic\u00a0words. Its\n    { and } are braces.\n\n"),
    ("op", "OP\n //\n\n    Original poster; see {op}.\n\n"),
    ("op", "op\n /op/\n\n    Operator; compare {OP}.\n\n"),
    ("tcp/ip", "TCP/IP\n\n\n    Protocols. Compare {Utah Teapot}.\n\n"),
    ("utah teapot, the", "Utah teapot, The\n n.\n\n    A model; see {TCP/\n    IP}.\n\n"),
]
META = [("00-database-short", "00-database-short\n     Test jargon\n"),
        ("00-database-url", "00-database-url\n     http://example.org/\n")]


def b64(number: int) -> str:
    digits = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
    out = digits[number % 64]
    while number >= 64:
        number //= 64
        out = digits[number % 64] + out
    return out


@pytest.fixture
def jargon_root(tmp_path):
    root = tmp_path / "dictd"
    root.mkdir()
    data, index = b"", []
    for headword, text in META + JARGON_ENTRIES:
        raw = text.encode("utf-8")
        index.append(f"{headword}\t{b64(len(data))}\t{b64(len(raw))}")
        data += raw
    (root / "jargon.index").write_text("\n".join(index) + "\n", encoding="utf-8")
    (root / "jargon.dict.dz").write_bytes(gzip.compress(data, mtime=0))
    return root


def test_base64():
    numbers = [jargon.decode_base64(s) for s in ("A", "B", "BA", "Ph", "CBcG", "//")]
    assert numbers == [0, 1, 64, 993, 530182, 4095]
    assert all(jargon.decode_base64(b64(n)) == n for n in (0, 63, 64, 4096, 10**6))
    assert base64.b64encode(b"\x00\x00\x01").decode() == "AAAB"  # the same alphabet
    with pytest.raises(ValueError):
        jargon.decode_base64("a=")


def test_jargon_tables(jargon_root):
    tables, counts = jargon.build(jargon_root, cache=False)
    assert rows(tables["nodes"]) == [
        {"key": "hack", "label": "entry", "aliases": [],
         "text": "hack n. Work kluge-ish; see Foo Bar and hack itself and kluge again."},
        {"key": "kluge", "label": "entry", "aliases": [],
         "text": "kluge n. A clever hack. Code: main() {for(;;);} and foo{a,b}. See ID10T."},
        {"key": "foo bar", "label": "entry", "aliases": [],
         "text": "foo bar Metasyntactic words. Its { and } are braces."},
        {"key": "OP", "label": "entry", "aliases": [], "text": "OP // Original poster; see op."},
        {"key": "op", "label": "entry", "aliases": [], "text": "op /op/ Operator; compare OP."},
        {"key": "tcp/ip", "label": "entry", "aliases": [], "text": "TCP/IP Protocols. Compare Utah Teapot."},
        {"key": "utah teapot, the", "label": "entry", "aliases": [],
         "text": "Utah teapot, The n. A model; see TCP/ IP."},
    ]
    assert [(e["src"], e["dst"], e["rel"]) for e in rows(tables["edges"])] == [
        ("hack", "kluge", "see_also"), ("hack", "foo bar", "see_also"), ("kluge", "hack", "see_also"),
        ("OP", "op", "see_also"), ("op", "OP", "see_also"), ("tcp/ip", "utah teapot, the", "see_also"),
        ("utah teapot, the", "tcp/ip", "see_also")]
    text = {n["key"]: n["text"] for n in rows(tables["nodes"])}
    relevant = {"hack": ["kluge", "foo bar"], "kluge": ["hack"], "OP": ["op"], "op": ["OP"],
                "tcp/ip": ["utah teapot, the"], "utah teapot, the": ["tcp/ip"]}
    assert rows(tables["queries"]) == [
        {"qid": key, "text": text[key], "relevant": targets, "exclude": [key], "split": expected_split(key)}
        for key, targets in relevant.items()]
    assert {k: v for k, v in counts.items() if k not in ("queries_dev", "queries_heldout")} == {
        "entries": 7, "nodes": 7, "braces": 13, "references_resolved": 9, "references_self": 1,
        "references_repeated": 1, "references_unresolvable": 1, "literal_braces": 3, "edges": 7,
        "unresolvable_top": {"ID10T": 1}, "queries": 6}
    assert counts["queries_dev"] + counts["queries_heldout"] == 6


def test_jargon_load_and_cache(jargon_root, tmp_path, monkeypatch):
    cache = tmp_path / "cache"
    heldout = jargon.load("heldout", root=jargon_root, cache=cache)
    dev = jargon.load("dev", root=jargon_root, cache=cache)
    assert heldout["nodes"].num_rows == dev["nodes"].num_rows == 7
    assert heldout["queries"].num_rows + dev["queries"].num_rows == 6
    assert len(list((cache / "jargon").iterdir())) == 1
    monkeypatch.setattr(jargon, "build_tables", lambda entries: pytest.fail("rebuilt although cached"))
    assert jargon.load(None, root=jargon_root, cache=cache)["queries"].num_rows == 6


def test_jargon_missing(tmp_path, jargon_root):
    with pytest.raises(FileNotFoundError, match=r"jargon\.index is missing.*apt-get install dict-jargon"):
        jargon.load(root=tmp_path / "nowhere", cache=False)
    (jargon_root / "jargon.dict.dz").unlink()
    with pytest.raises(FileNotFoundError, match=r"jargon\.dict\.dz is missing.*apt-get install dict-jargon"):
        jargon.load(root=jargon_root, cache=False)


def test_jargon_cross_references():
    entries = [("a b", "A B\n\n    x\n"), ("c", "c\n\n    y\n")]
    resolve = jargon.resolver(jargon._keys(entries), entries)
    found = [resolve(r) for r in ("a b", "A\n   B", "AB", "c", "C", "d", "")]
    assert found == ["a b", "a b", "a b", "c", "c", None, None]
    text, targets, unresolved, literal = jargon.cross_references(
        "see {A B}, {nothing here}, x{y}, {y}z, {1,6)}, {}, { c}, {d }", resolve)
    assert text == "see A B, nothing here, x{y}, {y}z, {1,6)}, {}, c, {d }"
    assert (targets, unresolved, literal) == (["a b", "c"], ["nothing here"], 5)
