"""What a benchmark records: one frozen ``RunRecord`` per (task, role map, repeat), with its
outcome, time split, tokens and cost per role, forks, fallbacks and citation counts.
``RunRecord.from_result`` turns the library's ``RunResult`` into a record, ``failed_run``
records a run that raised instead of returning, and ``csv_row`` flattens one for the CSV.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.results import RunResult
from orchestrator.state import Attempt, Sample

Outcome = Literal["passed", "failed", "error"]


class RunRecord(BaseModel):
    """One run of one task under one role map."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    task: str
    role_map: str
    repeat: int
    outcome: Outcome
    status: str = Field(description="The run's own status, or 'error' if it raised.")
    reason: str = ""
    error: str | None = None
    wall_s: float = Field(0.0, description="The run's wall time from its own telemetry (the "
                          "bench's clock for a run that raised).")
    model_s: float = 0.0
    tool_s: float = 0.0
    orchestration_s: float = 0.0
    attempts: int = 0
    calls: int = 0
    tokens: dict[str, int] = Field(default_factory=dict, description="Role -> prompt + output tokens.")
    cost: dict[str, float] = Field(default_factory=dict, description="Role -> USD.")
    cost_usd: float = 0.0
    forks: int = 0
    fallbacks: int = Field(0, description="Model calls served by a fallback (fallback_step > 0).")
    citations_submitted: int = Field(0, description="Explorer claims submitted.")
    citations_verified: int = 0
    citations_adds_nothing: int = Field(0, description="Verified claims only restating the tests.")
    citations_dropped: int = 0
    attempt_log: tuple[Attempt, ...] = Field((), description="Each build attempt: its strategy, "
                                              "whether it changed anything, verify's word.")
    failure: str = Field("", description="Why it did not pass, as a class (``classify``).")
    run_id: str = ""
    workdir: str = Field("", description="The run's repository, kept with --keep (its "
                         "workspaces/ folder holds the run's events, report and patch).")

    @property
    def passed(self) -> bool:
        return self.outcome == "passed"

    @classmethod
    def from_result(cls, result: RunResult, *, task: str, role_map: str, repeat: int,
                    checked: bool, fallbacks: int, wall_s: float, workdir: str = "") -> RunRecord:
        """``checked``: the acceptance commands passed again, run by the bench on the result."""
        split = result.time_split
        roles = result.per_role
        passed = result.status == "succeeded" and checked
        return cls(
            task=task, role_map=role_map, repeat=repeat,
            outcome="passed" if passed else "failed", status=result.status,
            reason=result.reason if passed or checked else f"{result.reason} (bench check failed)",
            wall_s=split.get("wall_s", wall_s), model_s=split.get("model_s", 0.0),
            tool_s=split.get("tool_s", 0.0), orchestration_s=split.get("orchestration_s", 0.0),
            attempts=result.attempts, calls=sum(r.calls for r in roles.values()),
            tokens={r: v.prompt_tokens + v.output_tokens for r, v in roles.items()},
            cost={r: v.cost_usd for r, v in roles.items()},
            cost_usd=result.cost_usd, forks=len(result.forks), fallbacks=fallbacks,
            citations_submitted=sum(e.submitted for e in result.explorers),
            citations_verified=sum(e.verified for e in result.explorers),
            citations_adds_nothing=sum(e.adds_nothing for e in result.explorers),
            citations_dropped=sum(e.dropped for e in result.explorers),
            attempt_log=tuple(result.attempt_log),
            failure=classify(passed=passed, status=result.status, reason=result.reason,
                             checked=checked, attempts=result.attempt_log),
            run_id=result.run_id, workdir=workdir,
        )

    @property
    def strategy(self) -> str:
        """The strategy of the attempt that passed ("" when none did), ``+mutant`` when its
        passing change was a mechanical edit (no model wrote it)."""
        won = [a for a in self.attempt_log if a.passed]
        if not self.passed or not won:
            return ""
        mechanical = any(s.passed and s.mutant for s in won[-1].samples)
        return won[-1].strategy + ("+mutant" if mechanical else "")


FAILURES = ("error", "out_of_time", "nothing_changed", "same_failure", "attempts_used",
            "bench_check", "stopped", "other")


def classify(*, passed: bool, status: str, reason: str, checked: bool,
             attempts: list[Attempt] | tuple[Attempt, ...]) -> str:
    """Why a run did not pass, as one of ``FAILURES`` ("" when it passed)."""
    if passed:
        return ""
    if status == "succeeded" and not checked:
        return "bench_check"
    if status in ("stopped", "awaiting_approval"):
        return "stopped"
    if "time budget" in reason:
        return "out_of_time"
    if attempts and not any(a.changed for a in attempts):
        return "nothing_changed"
    if "same failure repeated" in reason:
        return "same_failure"
    if "acceptance still failing" in reason:
        return "attempts_used"
    return "other"


def failed_run(exc: BaseException, *, task: str, role_map: str, repeat: int,
               wall_s: float, fallbacks: int = 0, workdir: str = "") -> RunRecord:
    """A run that raised: recorded as an error, with the exception's class and message."""
    message = f"{type(exc).__name__}: {exc}".strip()
    return RunRecord(task=task, role_map=role_map, repeat=repeat, outcome="error",
                     status="error", error=message[:2000], wall_s=wall_s, fallbacks=fallbacks,
                     workdir=workdir, failure="error")


CSV_ROLES: tuple[str, ...] = ("planner", "explorer", "builder", "reviewer", "summarizer")


def csv_row(rec: RunRecord) -> dict[str, Any]:
    """The record flattened for CSV: one column per role for tokens and cost."""
    row = rec.model_dump(exclude={"tokens", "cost", "attempt_log"})
    row["strategies"] = " ".join(a.strategy + ("" if a.changed else "(unchanged)")
                                 for a in rec.attempt_log)
    row["passed_by"] = rec.strategy
    for role in CSV_ROLES:
        row[f"tokens_{role}"] = rec.tokens.get(role, 0)
        row[f"cost_{role}"] = round(rec.cost.get(role, 0.0), 6)
    return row


def drawn(samples: Sequence[Sample]) -> list[Sample]:
    """The samples of ``samples`` that made a call, each passed (or changed) when it or a
    further correction of its reply did: what a model was asked, for figures per request.
    A mechanical edit (``Sample.mutant``) is no request and no model's: left out."""
    out: list[Sample] = []
    for x in samples:
        if x.mutant:
            continue
        if not x.alternative or not out:
            out.append(x)
            continue
        last = out[-1]
        out[-1] = last.model_copy(update={"passed": last.passed or x.passed,
                                          "changed": last.changed or x.changed})
    return out
