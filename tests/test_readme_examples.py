"""The README's examples of the text-query, results and listing section run as written (in a
fresh folder), and print what they say they print."""

from __future__ import annotations

import contextlib
import io
import os
import re
from pathlib import Path

from vecgraph import embedders

README = Path(__file__).resolve().parent.parent / "README.md"


def readme_block(heading: str) -> str:
    """The first ```python block after the line ``heading`` of the README."""
    text = README.read_text(encoding="utf-8")
    start = text.index("\n" + heading + "\n")
    match = re.compile(r"```python\n(.*?)```", re.S).search(text, start)
    assert match is not None, heading
    return match.group(1)


def run_readme_block(heading: str, folder) -> tuple[dict, io.StringIO]:
    """Run the README's block under ``heading`` in ``folder``: (its namespace, what it printed)."""
    code = readme_block(heading)
    cwd = os.getcwd()
    os.chdir(folder)
    out = io.StringIO()
    namespace: dict = {"__name__": "readme"}
    try:
        with contextlib.redirect_stdout(out):
            exec(compile(code, "README.md", "exec"), namespace)
    finally:
        os.chdir(cwd)
    return namespace, out


def test_the_text_in_tables_out_example_runs(tmp_path):
    before = dict(embedders._REGISTERED)
    try:
        namespace, out = run_readme_block("## Text in, tables out", tmp_path)
    finally:
        embedders._REGISTERED.clear()
        embedders._REGISTERED.update(before)
    printed = out.getvalue().splitlines()
    first = eval(printed[0])  # the first hit's row
    assert set(first) == {"key", "score", "hop", "path", "label", "tenant", "text"} and first["tenant"] == "team-1"
    assert printed[1].startswith("[") and "billing" in out.getvalue()
    assert printed[-1] in ("['o']", "['b']", "['l']")
    table, members = namespace["table"], namespace["members"]
    assert table.column_names[:3] == ["key", "score", "rank_dense"]
    assert members.column_names == ["key", "text", "year"] and members.column("year").to_pylist() == [2024] * 3
    assert (tmp_path / "notes.vg" / "MANIFEST").exists()
