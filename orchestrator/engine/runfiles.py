"""What a run keeps on disk and what it returns: ``run.json`` and ``agents.json`` (what resume
rebuilds a run from), ``report.json`` (what ``runs`` and ``show`` read), and the ``RunResult``
or ``ExploreResult`` built from the final state and the run's telemetry.

``lifecycle.OpenRun`` writes these as a run opens and ends; nothing here holds anything open.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.config.definitions import Registry, load_registry
from orchestrator.config.schema import RoleMap
from orchestrator.engine.runtime import RunContext
from orchestrator.errors import ConfigError, OrchestrateError, UsageError
from orchestrator.evidence.claimstats import UNKNOWN_MODEL, by_model, of_result
from orchestrator.record.events import Forked, RunFinished, Warned
from orchestrator.record.telemetry import Telemetry
from orchestrator.results import EXIT_USAGE, ExploreResult, RunResult, RunStatus
from orchestrator.state import ExplorerResult, RunState
from orchestrator.workspace.worktree import Workspace

if TYPE_CHECKING:  # the run's, handed in: the SDK is not needed to read or write a run's files
    from orchestrator.models.journal import CallJournal
    from orchestrator.models.pool import ClientPool

RUN_FILE = "run.json"
AGENTS_FILE = "agents.json"  # the run's agent definitions, so a resume sends the same prompts
COMMANDS_FILE = "commands.jsonl"  # commands running now, found and killed on resume


def write_run_file(ws: Workspace, task: str, role_map: RoleMap, *, approve_plan: bool,
                   registry: Registry) -> None:
    """What ``resume`` needs to rebuild a run: its task, its resolved role map and its agents."""
    (ws.run_dir / RUN_FILE).write_text(json.dumps({
        "task": task, "created": time.time(), "approve_plan": approve_plan,
        "roles": role_map.model_dump(mode="json"),
    }, indent=2), encoding="utf-8")
    (ws.run_dir / AGENTS_FILE).write_text(json.dumps(registry.snapshot(), indent=1),
                                          encoding="utf-8")


def run_registry(ws: Workspace) -> Registry:
    """The agent definitions a run started with (runs from before they were kept: the
    repository's as they are now)."""
    try:
        saved = json.loads((ws.run_dir / AGENTS_FILE).read_text(encoding="utf-8"))
    except FileNotFoundError:
        return load_registry(ws.repo)
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{ws.run_dir / AGENTS_FILE}: cannot read the run's agents ({exc})"
                          ) from None
    return Registry.from_snapshot(saved)


def write_explore_file(run_dir: Path, question: str, role_map: RoleMap) -> None:
    """``run.json`` of an ``explore`` run: listed with the runs, never resumed."""
    (run_dir / RUN_FILE).write_text(json.dumps({
        "kind": "explore", "task": question, "created": time.time(),
        "roles": role_map.model_dump(mode="json"),
    }, indent=2), encoding="utf-8")


def read_run_file(run_dir: Path) -> tuple[str, RoleMap]:
    """The task and role map a run started with; a usage error when there is no run.json."""
    try:
        saved = json.loads((run_dir / RUN_FILE).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        raise UsageError(f"run {run_dir.name} has no run.json; it cannot be resumed") from None
    if saved.get("kind") == "explore":
        raise UsageError(f"run {run_dir.name} is an `orchestrate explore` run: there is nothing "
                         "to resume (ask the question again)")
    return saved["task"], RoleMap.model_validate_json(json.dumps(saved["roles"]))


def is_final(exc: BaseException) -> bool:
    """A configuration error (a refused key, an unknown model): resuming would not help."""
    return isinstance(exc, OrchestrateError) and exc.exit_code == EXIT_USAGE


def write_failure(run_dir: Path, task: str, exc: BaseException, telemetry: Telemetry,
                  **extra: Any) -> None:
    """``report.json`` of a run that an error ended, so ``runs`` and ``show`` say why."""
    reason = " ".join(str(exc).split())
    telemetry.emit(RunFinished(status="failed", reason=reason))
    report = {"run_id": telemetry.run_id, "task": task, "status": "failed", "reason": reason,
              "error": getattr(exc, "code", type(exc).__name__), **extra,
              "cost_usd": sum(c.cost_usd for c in telemetry.calls),
              "per_role": {role: usage.model_dump() for role, usage in telemetry.per_role().items()},
              "exit_code": getattr(exc, "exit_code", 1),
              "losses": [loss.model_dump() for loss in telemetry.losses],
              "calls": [c.model_dump(mode="json") for c in telemetry.calls]}
    (run_dir / "report.json").write_text(json.dumps(report, indent=2), encoding="utf-8")


def run_warnings(telemetry: Telemetry) -> list[str]:
    """The run's warnings, the role sessions it lost included."""
    said = [e.message for e in telemetry.events if isinstance(e, Warned)]
    return said + [loss.message for loss in telemetry.losses]


def _head_of(ws: Workspace) -> str | None:
    sha = ws.tip()
    return sha if sha and sha != ws.base_commit else None


def _committed(final: RunState) -> str | None:
    """The tree the report node committed (a finished run), else None: the worktree as it is."""
    return final.worktree_tree or None if final.status != "running" else None


def run_result(
    ctx: RunContext, ws: Workspace, final: RunState, pending: bool, journal: CallJournal
) -> RunResult:
    """The ``RunResult`` of a run that ended (or paused, ``pending`` a plan approval)."""
    t = ctx.telemetry
    status: RunStatus
    if pending:
        status, reason = "awaiting_approval", f"the plan awaits approval: orchestrate resume {ws.run_id} --approve (or --reject)"
    elif final.status == "running":
        status, reason = "stopped", final.reason or "the run stopped before its end"
    else:
        status, reason = final.status, final.reason
    return RunResult(
        run_id=ctx.run_id, task=final.task, status=status, reason=reason, repo=str(ctx.repo),
        branch=ws.branch, commit=_head_of(ws), base_commit=ws.base_commit,
        diff_stat=ws.diff_stat(_committed(final)), tests=final.verify, attempts=final.attempts,
        plan=final.plan, review=final.review, checks=dict(final.checks), races=list(final.races),
        attempt_log=list(final.attempt_log),
        explore_skipped=final.explore_skipped, plan_skipped=final.plan_deferred,
        plan_from_task=final.plan_from_task, plan_unasked=final.plan_unasked,
        explorers=sorted(final.explorers, key=lambda r: r.index),
        claims_by_model=by_model(sorted(final.explorers, key=lambda r: r.index)),
        known_tests=final.tests,
        per_role=t.per_role(), time_split=t.time_split(),
        cost_usd=sum(c.cost_usd for c in t.calls),
        policy_violations=t.counters.get("policy_violations", 0),
        warnings=run_warnings(t), losses=list(t.losses),
        forks=[e for e in t.events if isinstance(e, Forked)],
        run_dir=str(ws.run_dir), included_dirty=ws.included_dirty, dirty=ws.dirty,
        sandbox=ctx.sandbox.info if ctx.sandbox else None, replayed_calls=journal.replayed,
        paid_calls_repeated=journal.repeated,
    )


def explore_result(ctx: RunContext, final: RunState) -> ExploreResult:
    """The ``ExploreResult`` of an ``explore`` run that ended."""
    telemetry = ctx.telemetry
    explorers = sorted(final.explorers, key=lambda r: r.index)
    return ExploreResult(
        question=final.task, repo=str(ctx.repo),
        sub_questions=list(final.plan.questions) if final.plan else [],
        explorers=explorers, digest=final.digest, claims_by_model=by_model(explorers),
        per_role=telemetry.per_role(), time_split=telemetry.time_split(),
        cost_usd=sum(c.cost_usd for c in telemetry.calls), run_id=telemetry.run_id,
        run_dir=str(ctx.run_dir), losses=list(telemetry.losses),
        warnings=run_warnings(telemetry),
    )


def record_claims(pool: ClientPool, run_id: str, explorers: Sequence[ExplorerResult], *,
                  role: str | None) -> str | None:
    """Each explorer's claim counts into the quota ledger's history, once per run and session
    (``role``, the explore role, names the sessions), so `orchestrate quota` shows each model's
    record; a resumed run replaces its rows. Returns why that failed, if it did: history is
    never worth failing a finished run for."""
    now = datetime.now(UTC)
    try:
        for e in explorers:
            pool.routing.ledger.record_claims(run_id, f"{role}-{e.index + 1}",
                                              e.model or UNKNOWN_MODEL, of_result(e).model_dump(),
                                              now)
    except Exception as exc:  # sqlite3 / psycopg errors alike
        return f"explorer claim counts were not recorded in the quota ledger: {exc}"
    return None


def report_json(result: RunResult, telemetry: Telemetry) -> str:
    """A run's ``report.json``: the result, its calls, and where its time went."""
    report = result.model_dump(mode="json")
    report["calls"] = [c.model_dump(mode="json") for c in telemetry.calls]
    turns = max(1, len(telemetry.calls))
    report["overhead_per_turn_ms"] = 1000 * result.time_split.get("orchestration_s", 0.0) / turns
    report["phases_s"] = phases_at(telemetry, result.time_split)
    return json.dumps(report, indent=2)


def explore_report(result: ExploreResult, telemetry: Telemetry) -> str:
    """The explore run's ``report.json``: the result plus what ``runs`` and ``show`` read."""
    answered = result.exit_code != 1
    reason = (f"{sum(e.verified for e in result.explorers)} verified claim(s) from "
              f"{len(result.explorers)} explorer(s)" if answered else "no verified findings")
    telemetry.emit(RunFinished(status="succeeded" if answered else "failed", reason=reason))
    report = result.model_dump(mode="json")
    report.update(kind="explore", task=result.question, branch="",
                  status="succeeded" if answered else "failed", reason=reason,
                  calls=[c.model_dump(mode="json") for c in telemetry.calls],
                  phases_s=phases_at(telemetry, result.time_split))
    return json.dumps(report, indent=2)


def phases_at(telemetry: Telemetry, split: Mapping[str, float]) -> dict[str, float]:
    """Where the wall time of ``split`` went, per phase (``timing.py``), for ``report.json``."""
    end = telemetry.started + split.get("wall_s", 0.0)
    return {k: round(v, 6) for k, v in telemetry.phase_split(end).items()}
