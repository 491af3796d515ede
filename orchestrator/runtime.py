"""What every node receives through LangGraph's runtime context: the run's injected parts.

Nodes never build clients, workspaces or loggers themselves; the API assembles a ``RunContext``
once per run and LangGraph hands it to each node. Nothing here is checkpointed.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from .config import RoleMap
from .definitions import AgentDef
from .models.client import ClientPool
from .state import Role
from .telemetry import Telemetry

if TYPE_CHECKING:
    from .workspace import Workspace


@dataclass
class RunContext:
    """The parts of one run that nodes use."""

    run_id: str
    roles: RoleMap
    agents: dict[Role, AgentDef]
    pool: ClientPool
    telemetry: Telemetry
    repo: Path
    worktree: Path
    run_dir: Path
    base_commit: str
    env: Mapping[str, str]
    workspace: Workspace | None = None  # None for `explore`, which has no worktree
