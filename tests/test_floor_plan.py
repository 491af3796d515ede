"""The package's floor plan holds: rooms (subpackages and the few top modules) import each other
without a cycle, deferred imports inside functions included; few modules at the top; every room
says what it owns; no module over 450 lines (the vendored explore-suite repositories aside)."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import orchestrator

PKG = Path(orchestrator.__file__).parent
VENDORED = PKG / "benchmark" / "suites"


def _modules() -> list[Path]:
    return [p for p in PKG.rglob("*.py") if VENDORED not in p.parents]


def _room(module: str) -> str:
    """``orchestrator.engine.graph`` -> ``engine``; ``orchestrator.api`` -> ``api``."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


def _name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(path: Path) -> set[str]:
    """Every orchestrator module this file imports, at the top or inside a function."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    here = _name(path).split(".")
    package = here if path.name == "__init__.py" else here[:-1]
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("orchestrator")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package[: len(package) - node.level + 1]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target.startswith("orchestrator"):
                found.add(target)
    return found


def _room_graph() -> dict[str, set[str]]:
    graph: dict[str, set[str]] = {}
    for path in _modules():
        src = _name(path)
        if src == "orchestrator":
            continue  # the package's front door re-exports every room by design
        room = _room(src)
        graph.setdefault(room, set())
        for target in _imports(path):
            if target == "orchestrator":
                continue
            other = _room(target)
            if other != room:
                graph[room].add(other)
    return graph


def _cycle(graph: dict[str, set[str]]) -> list[str] | None:
    state: dict[str, int] = {}
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = 1
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == 1:
                return stack[stack.index(nxt):] + [nxt]
            if nxt not in state and (found := visit(nxt)):
                return found
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state and (found := visit(node)):
            return found
    return None


def test_the_rooms_import_each_other_without_a_cycle():
    graph = _room_graph()
    assert len(graph) > 10, graph  # the walk saw the package
    assert _cycle(graph) is None, " -> ".join(_cycle(graph) or [])


def test_a_cycle_is_seen_by_the_check():
    assert _cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}}) == ["a", "b", "c", "a"]
    assert _cycle({"a": {"b"}, "b": set()}) is None


def test_few_modules_at_the_top_and_every_room_says_what_it_owns():
    top = [p for p in PKG.glob("*.py") if p.name != "__init__.py"]
    assert len(top) <= 14, sorted(p.name for p in top)
    for init in PKG.glob("*/__init__.py"):
        doc = ast.get_docstring(ast.parse(init.read_text(encoding="utf-8")))
        assert doc and len(doc) > 20, f"{init.parent.name}/__init__.py says nothing of what it owns"


def test_no_module_over_450_lines():
    long = {str(p.relative_to(PKG)): n for p in _modules()
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > 450}
    assert not long, long


def test_every_public_name_still_imports():
    for name in orchestrator.__all__:
        assert getattr(orchestrator, name) is not None, name
    for path in PKG.glob("*/__init__.py"):
        importlib.import_module(_name(path))
