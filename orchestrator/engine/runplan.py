"""What a run is, worked out before anything of it is opened: ``prepare`` reads the role map
and the pipeline (or a saved run's), and checks what would fail later while nothing is made
(the quota ledger opens, every role has its key, commands can be sandboxed).

Nothing here imports LangGraph or the OpenAI SDK, so a run refused for bad input (a missing
key, a bad role map, an untrusted repository's file, a database URL that is not one) is refused
before they are loaded; ``openrun`` (imported by ``lifecycle.open_run`` once these checks pass)
opens the rest.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.config.definitions import Registry
from orchestrator.config.layers import resolve_overrides, resolve_setup
from orchestrator.config.pipeline import Pipeline, pipeline_of
from orchestrator.config.schema import RoleMap
from orchestrator.engine.options import Mode, RunOptions
from orchestrator.engine.runfiles import RUN_FILE, read_run_file, run_registry
from orchestrator.errors import ConfigError, UsageError
from orchestrator.models.keys import check_credentials
from orchestrator.models.quota import QuotaLedger, WriteBehindLedger
from orchestrator.models.quota_pg import build_ledger
from orchestrator.sandbox import require_sandbox
from orchestrator.workspace.repo import Probed, find_repo, probe
from orchestrator.workspace.worktree import Bounds, Workspace, new_run_id

_EMPTY = {"run": "the task is empty: say what should be done, e.g. 'fix the failing test'",
          "explore": "the question is empty"}


@dataclass
class Plan:
    """What a run is, worked out before anything of it is opened."""

    mode: Mode
    task: str  # the question, for explore
    top: Path
    env: dict[str, str]
    run_id: str
    role_map: RoleMap
    registry: Registry
    pipeline: Pipeline
    database_url: str | None
    needs: tuple[str, ...]  # the roles whose providers' keys must be set
    ws: Workspace | None = None  # re-opened here; a new run's is made by ``_make``
    resumed: bool = False
    run_dir: Path = field(default_factory=Path)
    ignored: tuple[str, ...] = ()  # what an untrusted repository was not let do
    probed: Probed | None = None  # the repository as a new run found it (its HEAD, its tree)


def prepare(mode: Mode, options: RunOptions, subject: str, run_id: str | None,
             served: Pipeline | None) -> tuple[Plan, WriteBehindLedger]:
    """The run's plan and its quota ledger, opened, once every key and the sandbox are
    checked: what would fail later fails here, while nothing of the run is made."""
    plan = _resolve(mode, options, subject, run_id, served)
    if options.quota_path:
        ledger = WriteBehindLedger(QuotaLedger(options.quota_path))
    else:
        ledger = WriteBehindLedger(build_ledger(plan.database_url, plan.env))
    try:
        check_credentials(plan.role_map, plan.env, plan.needs)
        if mode != "explore":
            require_sandbox(plan.role_map.sandbox)
    except BaseException:
        ledger.close()
        raise
    return plan, ledger


def _resolve(mode: Mode, options: RunOptions, subject: str, run_id: str | None,
             served: Pipeline | None) -> Plan:
    if mode in _EMPTY and not subject.strip():
        raise UsageError(_EMPTY[mode])
    top, probed = find_repo(options.repo)
    saved = run_id is not None and (top / "workspaces" / run_id / RUN_FILE).exists()
    if mode == "resume" or (mode == "node" and saved):
        plan = _reopened(mode, options, top, str(run_id))
    else:
        plan = _fresh(mode, options, top, subject, run_id, probed)
    if served is not None and plan.pipeline != served:
        raise ConfigError(
            f"this run's pipeline is {plan.pipeline.describe()}, but the served graph runs "
            f"{served.describe()} (built from the server's repository); start `langgraph dev` "
            "in the repository whose roles the runs use")
    return plan


def _reopened(mode: Mode, options: RunOptions, top: Path, run_id: str) -> Plan:
    """A run that exists: its task, role map and agents as it saved them. ``resume`` rebuilds
    the worktree from the checkpoint before the graph goes on, so it is not checked out here."""
    ws = Workspace.open(top, run_id, reattach=mode == "node")
    task, role_map = read_run_file(ws.run_dir)
    ws = ws.bounded(Bounds(role_map.run.max_result_mb, role_map.run.max_result_files))
    registry = run_registry(ws)
    pipeline = pipeline_of(role_map, registry)
    env = options.run_env()
    return Plan(mode, task, top, env, run_id, role_map, registry, pipeline,
                 options.database(env), pipeline.roles(), ws=ws, resumed=True,
                 run_dir=ws.run_dir)


def _fresh(mode: Mode, options: RunOptions, top: Path, subject: str,
           run_id: str | None, probed: Probed | None) -> Plan:
    """A new run: the role map from its layers (or the one given) and the pipeline it gives."""
    if mode != "explore" and probed is None:  # no commit: refused before any file is made
        probed = probe(top)
    env = options.run_env()
    role_map, registry, ignored = resolve_setup(
        top, options.roles, options.role_files, options.sets, options.team, env=env,
        trust_repo_config=options.trust_repo_config, agent_files=options.agent_files)
    if mode != "explore":
        pipeline = pipeline_of(role_map, registry)
        return Plan(mode, subject, top, env, run_id or new_run_id(), role_map, registry,
                     pipeline, options.database(env), pipeline.roles(), ignored=ignored,
                     probed=probed)
    pipeline = pipeline_of(role_map, registry, need_build=False)
    if pipeline.explore is None:
        raise ConfigError(f"[pipeline] steps: explore needs an explore role "
                          f"(the pipeline is {pipeline.describe()})")
    if options.parallel:
        role_map = resolve_overrides(role_map, [f"{pipeline.explore}.parallel={options.parallel}"])
    needs = pipeline.roles(explore_only=True) if options.split else (pipeline.explore,)
    # an explore run keeps its quota in the user's ledger file, never a database's
    return Plan(mode, subject, top, env, new_run_id(), role_map, registry, pipeline, None,
                 needs, ignored=ignored)
