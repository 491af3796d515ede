"""What every node receives through LangGraph's runtime context: the run's injected parts.

Nodes never build clients, workspaces or loggers themselves; the API assembles a ``RunContext``
once per run and LangGraph hands it to each node. Nothing here is checkpointed.
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from .config import RoleMap
from .definitions import AgentDef
from .models.client import ClientPool
from .state import Role
from .telemetry import Telemetry


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
    workspace: object | None = None  # orchestrator.workspace.Workspace for `run`; None for `explore`
    _ids: dict[str, itertools.count] = field(default_factory=dict)

    def session_id(self, role: Role, hint: str | int | None = None) -> str:
        """A run-unique session id such as ``explorer-3``; stable when a hint is given."""
        if hint is not None:
            return f"{role}-{hint}"
        counter = self._ids.setdefault(role, itertools.count(1))
        return f"{role}-{next(counter)}"
