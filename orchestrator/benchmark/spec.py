"""One run of the bench and the check that decides it, shared by the orchestrated runs
(``runner.py``) and the single-prompt baseline (``single.py``): a ``RunSpec`` says which task,
under which role map, which repeat; ``check_acceptance`` runs the task's acceptance commands,
sandboxed, on the code a run left behind.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from orchestrator.benchmark.suite import Task
from orchestrator.config.schema import RoleMap, SandboxSettings
from orchestrator.sandbox import build_sandbox
from orchestrator.tools.shell import CommandPolicy, run_command


@dataclass(frozen=True)
class RunSpec:
    """One run to do: which task, under which role map, which repeat (0-based)."""

    task: Task
    map_name: str
    roles: RoleMap
    repeat: int


async def check_acceptance(task: Task, worktree: Path, env: Mapping[str, str] | None,
                           timeout: float, *, sandbox: SandboxSettings,
                           objects: Path) -> bool:
    """Run the task's acceptance commands in ``worktree`` (sandboxed: the builder wrote the
    code they run); True when all exit 0."""
    if not worktree.is_dir():
        return False
    run_env = os.environ if env is None else env
    box = build_sandbox(sandbox, worktree=worktree, read_only=[objects], env=run_env)
    try:
        for command in task.acceptance:
            result = await run_command(command, cwd=worktree, sandbox=box, timeout=timeout,
                                       env=run_env, policy=CommandPolicy(deny=[]))
            if result.timed_out or result.exit_code != 0:
                return False
        return True
    finally:
        box.close()
