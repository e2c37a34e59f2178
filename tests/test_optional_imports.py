"""``import vecgraph`` needs none of the optional extras' libraries; the features that need one
name the extra to install when it is missing."""

from __future__ import annotations

import subprocess
import sys

BLOCKED = (
    "igraph",
    "sklearn",
    "threadpoolctl",
    "semantic_text_splitter",
    "selectolax",
    "pypdf",
    "rapidfuzz",
    "leidenalg",
    "markdown_it",
    "ray",
    "mcp",
    "langchain_core",
    "llama_index",
)

SCRIPT = f"""
import importlib.abc, sys
class Block(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path, target=None):
        if name.split(".")[0] in {BLOCKED!r}:
            raise ImportError("blocked " + name)
sys.meta_path.insert(0, Block())
import numpy as np
import vecgraph as vg
print(vg.KnowledgeBase.__name__, vg.Graph.__name__)
from vecgraph.kb import communities, raptor
for call in (lambda: communities.leiden_levels(3, np.array([0, 1]), np.array([1, 2])),
             lambda: raptor.cluster(np.eye(20, 8, dtype=np.float32), max_cluster_size=4)):
    try:
        call()
    except ImportError as exc:
        print("ImportError:", exc)
"""


def test_import_vecgraph_without_the_optional_libraries():
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    lines = out.stdout.splitlines()
    assert lines[0] == "KnowledgeBase Graph"
    assert lines[1] == 'ImportError: communities need igraph: pip install "vecgraph[kb]"'
    assert lines[2] == 'ImportError: RAPTOR trees need scikit-learn: pip install "vecgraph[kb]"'
