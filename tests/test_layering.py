"""The floor plan: imports inside the package go one way.

Every module under ``orchestrator/`` is parsed, not imported, and every import it names counts:
at the top, inside a function, under ``TYPE_CHECKING`` (a deferred import hides a cycle, it does
not break it). Two graphs must have no cycle: the modules, and the packages (each subpackage is
one node, each module at the top is its own). Between packages an import goes down ``FLOORS``,
never up and never sideways. ``orchestrator/benchmark/suites`` is test data, not the package.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "orchestrator"
SKIP = ("benchmark", "suites")

# Bottom first. A package imports only from the floors below its own.
FLOORS: tuple[tuple[str, ...], ...] = (
    ("errors", "timing", "data"),
    ("gitsafe", "config", "sim"),  # the simulator is a stand-in server: it knows no engine
    ("sandbox", "workspace"),
    ("tools",),
    ("localize",),  # failures and questions turned into places: retrieval searches with tools
    ("state",),
    ("record",),
    ("models", "evidence"),
    ("session", "results"),
    ("runs",),
    ("engine",),
    ("api",),
    ("benchmark",),
    ("faces",),
    ("orchestrator", "__main__"),  # the package's own __init__ (lazy public names), python -m
)

Graph = dict[str, dict[str, int]]  # module -> imported module -> line of the first such import


def modules(root: Path = PACKAGE) -> dict[str, Path]:
    """Dotted name -> file, for every module of the package at ``root``."""
    found = {}
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts[: len(SKIP)] == SKIP:
            continue
        if parts[-1] == "__init__":
            parts = parts[:-1]
        found[".".join((root.name, *parts))] = path
    return found


def _nearest(name: str, known: Mapping[str, Path]) -> str | None:
    """``name`` or the closest module above it (``pkg.mod.Class`` -> ``pkg.mod``)."""
    while name and name not in known:
        name = name.rpartition(".")[0]
    return name or None


def imports(name: str, path: Path, known: Mapping[str, Path]) -> Iterator[tuple[str, int]]:
    """``(module, line)`` for every import of a module of the package, wherever it is written."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, *([base] if base else [])])
            targets = [f"{base}.{a.name}" for a in node.names]  # a submodule, or a name in base
        else:
            continue
        for target in targets:
            found = _nearest(target, known)
            if found is not None and found != name:
                yield found, node.lineno


def module_graph(root: Path = PACKAGE) -> Graph:
    known = modules(root)
    graph: Graph = {}
    for name, path in known.items():
        edges = graph.setdefault(name, {})
        for target, line in imports(name, path, known):
            edges.setdefault(target, line)
    return graph


def package_of(module: str) -> str:
    """``orchestrator.config.schema`` -> ``config``; a module at the top is its own package."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def package_graph(graph: Graph) -> dict[str, dict[str, str]]:
    """Package -> imported package -> one import that makes the edge (``a.b:12 -> c.d``)."""
    packages: dict[str, dict[str, str]] = {}
    for module, edges in graph.items():
        here = packages.setdefault(package_of(module), {})
        for target, line in edges.items():
            there = package_of(target)
            packages.setdefault(there, {})
            if there != package_of(module):
                here.setdefault(there, f"{module}:{line} -> {target}")
    return packages


def cycles(graph: Mapping[str, Mapping[str, object]]) -> list[list[str]]:
    """The strongly connected components with more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, {}):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def _explain(component: list[str], graph: Mapping[str, Mapping[str, object]]) -> str:
    inside = [f"  {a} -> {b} ({where})" for a in component for b, where in graph[a].items()
              if b in component]
    return " <-> ".join(component) + "\n" + "\n".join(inside)


def test_no_module_imports_another_that_imports_it_back():
    graph = module_graph()
    found = cycles(graph)
    assert not found, f"{len(found)} import cycle(s) between modules (module -> module (line)):\n" \
        + "\n".join(_explain(c, graph) for c in found)


def test_no_package_imports_another_that_imports_it_back():
    graph = package_graph(module_graph())
    found = cycles(graph)
    assert not found, f"{len(found)} import cycle(s) between packages:\n" \
        + "\n".join(_explain(c, graph) for c in found)


def test_imports_go_down_the_floors():
    floor = {package: n for n, packages in enumerate(FLOORS) for package in packages}
    graph = package_graph(module_graph())
    unplaced = sorted(set(graph) - set(floor))
    assert not unplaced, f"packages on no floor (add them to FLOORS): {unplaced}"
    upward = [f"{a} (floor {floor[a]}) -> {b} (floor {floor[b]}): {where}"
              for a, edges in graph.items() for b, where in edges.items() if floor[b] >= floor[a]]
    assert not upward, "imports that do not go down the floors:\n" + "\n".join(upward)


@pytest.mark.parametrize("back", [
    "import top.high.a\n",
    "def later():\n    from top.high import a\n",
    "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    from top.high.a import thing\n",
    "from ..high import a\n",
])
def test_a_hidden_import_is_an_import(tmp_path, back):
    """The checker itself: an import back inside a function, under ``TYPE_CHECKING`` or relative
    closes the cycle ``top.high.a -> top.low.b -> top.high.a`` as much as a plain one."""
    root = tmp_path / "top"
    for rel, text in {"__init__.py": "", "high/__init__.py": "", "high/a.py": "import top.low.b\n",
                      "low/__init__.py": "", "low/b.py": "x = 1\n"}.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text, encoding="utf-8")
    assert cycles(module_graph(root)) == []
    assert cycles(package_graph(module_graph(root))) == []
    (root / "low/b.py").write_text(back, encoding="utf-8")
    assert cycles(module_graph(root)) == [["top.high.a", "top.low.b"]]
    assert cycles(package_graph(module_graph(root))) == [["high", "low"]]
