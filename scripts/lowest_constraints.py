"""Print a pip constraints file that pins every runtime dependency of pyproject.toml (the
package's and its extras', not the test tools') to the lowest version its range allows.

    python scripts/lowest_constraints.py > lowest.txt && pip install -c lowest.txt -e '.[test]'

pip has no "lowest" resolution; this is uv's ``--resolution lowest-direct`` by hand: direct
dependencies at their lower bounds, what they depend on resolved as usual. ``.ci/run`` runs a
part of the suite on such an install, so a lower bound that no longer works fails CI.
"""

from __future__ import annotations

import re
import sys
import tomllib
from pathlib import Path

TOOLS = {"test"}  # extras of tools (pytest, ruff, mypy): pinned as they are
_REQ = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*([^;]*)(;.*)?$")


def lowest(requirement: str) -> str | None:
    """``name==lower ; marker`` for a requirement with a ``>=`` bound, else None."""
    match = _REQ.match(requirement)
    if not match:
        raise SystemExit(f"cannot read the requirement {requirement!r} in pyproject.toml")
    name, _, spec, marker = match.groups()
    bound = re.search(r">=\s*([^,\s]+)", spec)
    if not bound:
        return None
    return f"{name}=={bound.group(1)}" + (f" {marker}" if marker else "")


def main(pyproject: Path) -> int:
    project = tomllib.loads(pyproject.read_text(encoding="utf-8"))["project"]
    requirements = list(project["dependencies"])
    for extra, items in project.get("optional-dependencies", {}).items():
        if extra not in TOOLS:
            requirements += items
    pins = sorted({pin for r in requirements if (pin := lowest(r))})
    print("\n".join(pins))
    return 0


if __name__ == "__main__":
    sys.exit(main(Path(sys.argv[1]) if len(sys.argv) > 1 else
                  Path(__file__).resolve().parent.parent / "pyproject.toml"))
