"""The README's Python examples type-check under mypy against vecgraph's annotations and
stubs (``py.typed``): what a user's type checker says of the code the README tells them to
write."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import vecgraph as vg

README = Path(__file__).resolve().parent.parent / "README.md"

# Names the README's fragments use without defining them, with the types a user would have.
PREAMBLE = """\
from datetime import date, datetime
from typing import Any
import numpy as np
import vecgraph as vg
g: vg.Graph
keys: list[str]
query_keys: list[str]
texts: list[str]
vectors: np.ndarray
q: np.ndarray
new_vector: np.ndarray
ranked_a: list[str]
ranked_b: list[str]
ranked_c: list[str]
G: Any
"""


def _blocks() -> list:
    """The README's ```python blocks, each ``[x, ...]`` ("more of the same") read as ``[x]``."""
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(encoding="utf-8"), re.S)
    return [re.sub(r",\s*\.\.\.\]", "]", block) for block in blocks]


def test_the_readme_has_python_examples():
    blocks = _blocks()
    assert len(blocks) >= 5 and "vg.Graph.open(" in blocks[0] and any("ts=[datetime(2024, 5, 1)]" in b for b in blocks)


def test_the_readme_examples_type_check(tmp_path):
    paths = []
    for i, block in enumerate(_blocks()):
        path = tmp_path / f"readme_{i}.py"
        path.write_text(PREAMBLE + block, encoding="utf-8")
        paths.append(str(path))
    package_root = str(Path(vg.__file__).resolve().parent.parent)
    env = dict(os.environ)
    if Path(package_root).name not in ("site-packages", "dist-packages"):
        env["MYPYPATH"] = package_root  # a source tree (an editable install): check against it
    command = [sys.executable, "-m", "mypy", "--follow-imports=silent", "--ignore-missing-imports", "--no-incremental",
               "--cache-dir", str(tmp_path / "cache"), "--python-version",
               f"{sys.version_info[0]}.{sys.version_info[1]}", *paths]
    done = subprocess.run(command, capture_output=True, text=True, env=env, timeout=600, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith(f"Success: no issues found in {len(paths)} source files")
    # mypy read vecgraph's own types (not an unresolved import taken as Any): a wrong call is caught.
    wrong = tmp_path / "wrong.py"
    wrong.write_text(PREAMBLE + 'g.add_nodes(["a"], vectors, ts=["2024-05-01"])\nreveal_type(vg.Graph.open("x.vg"))\n',
                     encoding="utf-8")
    done = subprocess.run([*command[:-len(paths)], str(wrong)], capture_output=True, text=True, env=env, timeout=600,
                          check=False)
    assert 'error: List item 0 has incompatible type "str"; expected ' in done.stdout, done.stdout
    assert 'Revealed type is "vecgraph.graph.Graph"' in done.stdout, done.stdout
