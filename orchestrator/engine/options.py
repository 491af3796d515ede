"""What a run is given: ``RunOptions``, one frozen model for every way into a run.

``arun``, ``aresume``, ``aexplore`` and ``start`` take these fields as keyword arguments (or a
``RunOptions`` as ``options=``); the platform graph and the fleet build one too, and
``lifecycle.open_run`` opens a run from it. Each mode takes the fields it uses and refuses the
others, as a function refuses an argument it does not have: a budget given to an ``explore``,
which has none, fails instead of being ignored.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from typing import Annotated, Any, ClassVar, Literal

from pydantic import BaseModel, BeforeValidator, ConfigDict, Field

from orchestrator.config.schema import RoleMap
from orchestrator.record.telemetry import Listener
from orchestrator.state import Plan

Mode = Literal["run", "resume", "explore", "node"]
Approver = Callable[[Plan], bool | Awaitable[bool]]
TreeHook = Callable[[str, str], Awaitable[None]]
DATABASE_ENV = "ORCHESTRATE_DATABASE_URL"


def _fspath(value: Any) -> Any:
    return os.fspath(value) if isinstance(value, os.PathLike) else value


PathArg = Annotated[Path, BeforeValidator(_fspath)]

_SETUP = frozenset({"repo", "roles", "role_files", "agent_files", "sets", "team", "env", "listeners",
                    "trust_repo_config"})
_SPEND = frozenset({"max_usd", "max_tokens", "quota_path", "database_url", "before_checkpoint"})


class RunOptions(BaseModel):
    """Where a run works, with which roles, what it reports to, what it may spend."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    # which fields each way into a run takes; ``ENTRY`` names it in a refusal
    TAKES: ClassVar[dict[Mode, frozenset[str]]] = {
        "run": _SETUP | _SPEND | {"include_dirty", "approve_plan", "approver"},
        "resume": _SPEND | {"repo", "env", "listeners", "approve", "approver"},
        "explore": _SETUP | {"parallel", "workdir", "split"},
        "node": _SETUP | {"include_dirty", "approve_plan"},
    }
    ENTRY: ClassVar[dict[Mode, str]] = {"run": "arun()", "resume": "aresume()",
                                        "explore": "aexplore()", "node": "a platform run"}

    repo: PathArg | None = Field(
        None, description="The git repository (default: the one the current directory is in).")
    roles: RoleMap | None = Field(
        None, description="A resolved role map; when given, the role map layers are not read.")
    role_files: tuple[PathArg, ...] = Field((), description="Extra role map files, in order.")
    agent_files: tuple[PathArg, ...] = Field(
        (), description="Agent definition files (.md) for this run, above the packaged, the "
                        "user's and the repository's (a fleet job carries its submitter's).")
    sets: tuple[str, ...] = Field(
        (), description="Overrides, as --set: ROLE.KEY=VALUE, e.g. explorer.parallel=20.")
    team: str | None = Field(None, description="Apply the role map's [teams.NAME] overlay.")
    env: Mapping[str, str] | None = Field(  # not in the repr: it holds the API keys
        None, repr=False,
        description="The run's environment (keys, ORCHESTRATE_*); default os.environ.")
    listeners: tuple[Listener, ...] = Field(
        (), description="Called with every event of the run, on the event loop.")
    trust_repo_config: bool = Field(
        False, description="Trust the repository's own roles.toml for this run only.")
    include_dirty: bool = Field(False, description="Start from the uncommitted changes too.")
    approve_plan: bool = Field(False, description="Pause after planning for approval.")
    approver: Approver | None = Field(
        None, description="Decides a plan that awaits approval (may be async); without one the "
                          "run ends awaiting_approval and resume continues it.")
    approve: bool | None = Field(
        None, description="resume: the answer to a pending plan approval, given up front.")
    max_usd: float | None = Field(None, description="Stop (resumably) once this much is spent.")
    max_tokens: int | None = Field(None, description="Stop (resumably) after this many tokens.")
    quota_path: PathArg | None = Field(
        None, description="The quota ledger file (default: the user's, or the database's).")
    database_url: str | None = Field(
        None, description=f"postgresql://... for shared state (default: ${DATABASE_ENV}, "
                          "else local SQLite).")
    before_checkpoint: TreeHook | None = Field(
        None, description="Awaited with (run id, worktree tree) before a checkpoint holding a "
                          "new worktree tree is written: the fleet pushes it where another "
                          "machine resuming the run fetches it.")
    parallel: int | None = Field(None, description="explore: explorers at once.")
    workdir: PathArg | None = Field(
        None, description="explore: where the record goes (default workspaces/<run-id>/).")
    split: bool = Field(
        True, description="explore: let the planner split the question (False: one explorer "
                          "answers it as asked).")

    @classmethod
    def given(cls, mode: Mode, options: RunOptions | None, kwargs: Mapping[str, Any]
              ) -> RunOptions:
        """``options`` with ``kwargs`` on top, checked against what ``mode`` takes."""
        fields = {} if options is None else {k: getattr(options, k)
                                              for k in options.model_fields_set}
        fields.update(kwargs)
        _refuse(mode, fields)
        return cls.model_validate(fields)

    def check(self, mode: Mode) -> None:
        """Refuse a field that ``mode`` does not take (a TypeError, as for an argument)."""
        _refuse(mode, self.model_fields_set)

    def run_env(self) -> dict[str, str]:
        """The run's environment: ``env``, else the process's as it is now."""
        return dict(os.environ if self.env is None else self.env)

    def database(self, env: Mapping[str, str]) -> str | None:
        """``database_url``, else ``ORCHESTRATE_DATABASE_URL`` from the run's environment."""
        return self.database_url or env.get(DATABASE_ENV) or None


def _refuse(mode: Mode, names: Iterable[str]) -> None:
    refused = sorted(set(names) - RunOptions.TAKES[mode])
    if refused:
        raise TypeError(f"{RunOptions.ENTRY[mode]} got an unexpected keyword argument "
                        f"{refused[0]!r}")
