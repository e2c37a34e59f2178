"""vecgraph.datasets.roff: man-page roff as plain text, on tricky input."""

from __future__ import annotations

import pytest

from vecgraph.datasets.roff import roff_to_text


@pytest.mark.parametrize("source, text", [
    ('.BI "int open(const char *" pathname ", int " flags );', "int open(const char *pathname, int flags);"),
    ('.B "say ""hi"" now"', 'say "hi" now'),
    (".B one two\n.I three", "one two three"),
    (".BR read (2),\n.IR buf ,\n.RB [ x ]", "read(2), buf, [x]"),
    ("\\fBbold\\fR \\f[I]it\\f[] \\f(CWcw\\fP \\f[BI]both\\fP", "bold it cw both"),
    ("a\\-b \\(em \\[aq]x\\[aq] \\e \\&.dot \\(lqq\\(rq \\*(lqs\\*(rq", "a-b \u2014 'x' \\ .dot \"q\" \"s\""),
    ("\\[u00E9]t\\[:a] \\N'34'q\\N'34' \\(bu \\[em]", "\u00e9t\u00e4 \"q\" \u2022 \u2014"),
    ("foo\\\nbar", "foobar"),
    (".B foo\\c\nbar", "foobar"),
    ("text \\\" a comment\n.\\\" a comment line\n'\\\" another\nmore", "text more"),
    ("a\\e\\\" comment", "a\\"),
    ("a\\\\\"b", 'a\\"b'),
    ("a\\ b\\~c\\0d \\s-1small\\s0 \\%hy\\:ph", "a b c d small hyph"),
    (".if t \\{\\\ntroff only\n.\\}\n.if n nroff\nafter", "nroff after"),
    (".ie t .ds x troff\n.el .ds x nroff\n\\*x", "nroff"),
    (".ds q quoted\n\\*q and \\*[q]", "quoted and quoted"),
    (".de XX\nnever\n..\nshown", "shown"),
    (".TP\n.B tag\nbody text\n.TP\nplain tag\nmore", "tag\nbody text\nplain tag\nmore"),
    (".IP \\(bu 2\nitem one\n.IP\nno tag", "\u2022 item one\nno tag"),
    ("one\n.PP\ntwo\n.sp\nthree\n\nfour", "one\ntwo\nthree\nfour"),
    (".nf\nline  1\n  line 2\n.fi\njoined\ntext", "line 1\nline 2\njoined text"),
    (".EX\nint x;\n.EE", "int x;"),
    (".UR https://x.org\nthe site\n.UE .", "the site <https://x.org>."),
    (".TS\ntab(:);\nl l.\na:b\n_\nT{\nlong\n.B cell\nT}:c\n.TE\nafter", "a b\nlong cell c\nafter"),
    (".TS\nl l\nl l.\nx\ty\n.T&\nl.\nz\n.TE", "x y\nz"),
    (".SH SEE ALSO\n.BR a (1)", "SEE ALSO\na(1)"),
    (".SH\nOLD STYLE\ntext", "OLD STYLE\ntext"),
    (".SS Sub heading\ntext", "Sub heading\ntext"),
    ('.q "TZif" ,', '"TZif",'),
    (".TH X 1\n.PD 0\n.RS\n.in +4n\nkept\n.RE", "kept"),
    ("\\&.starts with a dot", ".starts with a dot"),
])
def test_roff_to_text(source, text):
    assert roff_to_text(source) == text
