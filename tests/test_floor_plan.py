"""The rooms stay livable (issue 25): few modules at the top, every room says what it owns, no
module over 450 lines (the vendored explore-suite repositories aside), every public name imports.
The import graph's cycles and floors are ``test_layering.py``'s."""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import orchestrator

PKG = Path(orchestrator.__file__).parent
VENDORED = PKG / "benchmark" / "suites"


def _modules() -> list[Path]:
    return [p for p in PKG.rglob("*.py") if VENDORED not in p.parents]


def _name(path: Path) -> str:
    rel = path.relative_to(PKG.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


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
