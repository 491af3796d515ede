"""The package as a library sees it: the SDK through its public API only, and dists that carry
what the README promises (LICENSE, langgraph.json, the examples)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGE = ROOT / "orchestrator"


def _private_sdk_uses(path: Path) -> list[str]:
    """Every import of a private ``openai`` module or name, and every ``openai._x`` attribute."""
    tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "openai":
            parts = node.module.split(".")[1:] + [a.name for a in node.names]
            if any(p.startswith("_") for p in parts):
                found.append(f"{path.name}:{node.lineno}: from {node.module} import ...")
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("openai.") and "._" in "." + alias.name.split(".", 1)[1]:
                    found.append(f"{path.name}:{node.lineno}: import {alias.name}")
        elif isinstance(node, ast.Attribute) and node.attr.startswith("_") \
                and not node.attr.startswith("__"):
            value = node.value
            if isinstance(value, ast.Name) and value.id in ("openai", "sdk", "client"):
                found.append(f"{path.name}:{node.lineno}: {value.id}.{node.attr}")
    return found


def test_the_openai_sdk_is_used_through_its_public_api_only():
    files = [p for p in PACKAGE.rglob("*.py") if "suites" not in p.parts]
    found = [hit for path in files for hit in _private_sdk_uses(path)]
    assert not found, found
    assert "openai._" not in "".join(p.read_text(encoding="utf-8") for p in files)


def test_the_private_use_check_finds_what_it_looks_for(tmp_path):
    sample = tmp_path / "x.py"
    sample.write_text("import openai\nfrom openai._models import FinalRequestOptions\n"
                      "from openai import _base_client\nimport openai._streaming\n"
                      "def f(sdk):\n    return sdk._build_request(None)\n")
    assert len(_private_sdk_uses(sample)) == 4
