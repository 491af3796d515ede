"""Files the package ships: agent definitions, prompt texts and the default role map.

An installed wheel carries them in ``orchestrator/_agents/``; an editable install reads them from
the source tree (``agents/`` and the top-level ``roles.toml``).
"""

from __future__ import annotations

from importlib import resources
from importlib.abc import Traversable
from pathlib import Path

_SOURCE = Path(__file__).resolve().parents[2]
DEFAULT_ROLES = "roles.toml"


def packaged_file(name: str) -> Traversable | Path:
    """A file shipped in the package's agents folder (``roles.toml`` included)."""
    packaged = resources.files("orchestrator").joinpath("_agents", name)
    if packaged.is_file():
        return packaged
    if name == DEFAULT_ROLES:
        return _SOURCE / DEFAULT_ROLES  # editable install: kept at the top level
    return _SOURCE / "agents" / name


def packaged_agents() -> list[Traversable | Path]:
    """The packaged agent definitions (``agents/*.md``), by name."""
    folder: Traversable | Path = resources.files("orchestrator").joinpath("_agents")
    if not folder.is_dir():
        folder = _SOURCE / "agents"
    return sorted((f for f in folder.iterdir() if f.name.endswith(".md") and f.is_file()),
                  key=lambda f: f.name)
