"""The layout ARCHITECTURE.md describes: imports between vecgraph's Python modules form no
cycle (function-level imports included), and no source file of the package or the core grows
past 1,000 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "python" / "vecgraph"
MAX_LINES = 1_000


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path, modules: set) -> set:
    """The vecgraph modules ``path`` imports, at the top or inside functions; imports under
    ``if TYPE_CHECKING:`` are left out (they never run)."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skipped = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            skipped.update(id(n) for n in ast.walk(node))
    found = set()
    for node in ast.walk(tree):
        if id(node) in skipped:
            continue
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(base + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            # `from . import x` imports the module x, or a name of the package (its __init__)
            names = [f"{base}.{alias.name}" for alias in node.names]
            found.update(n for n in names if n in modules)
            if node.module or any(n not in modules for n in names):
                found.add(base)
    return {m for m in found if m in modules and m != name}


def _graph() -> dict:
    paths = sorted(PACKAGE.rglob("*.py"))
    modules = {_module_name(p) for p in paths} | {_module_name(p) for p in PACKAGE.rglob("*.pyi")}  # + _core
    return {_module_name(p): _imports(p, modules) for p in paths}


def _cycles(graph: dict) -> list:
    """Every strongly connected component of more than one module (Tarjan's algorithm), and
    every module that imports itself."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    out: list = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_the_cycle_finder_finds_cycles():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_import_cycle_between_python_modules():
    graph = _graph()
    assert "vecgraph.graph" in graph and "vecgraph.arguments" in graph["vecgraph.graph"]
    # __init__ imports every public module; a module importing the package itself would be a cycle
    # through it, so the package is checked like any module.
    assert _cycles(graph) == []


@pytest.mark.parametrize("folder,suffixes", [
    ("python/vecgraph", (".py",)),
    ("cpp/src", (".cpp", ".hpp")),
    ("cpp/include/vecgraph", (".hpp",)),
])
def test_no_source_file_over_1000_lines(folder, suffixes):
    files = [p for p in sorted((ROOT / folder).rglob("*")) if p.suffix in suffixes]
    assert files, f"no sources under {folder}"
    long = {str(p.relative_to(ROOT)): n for p in files
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert long == {}
