"""What the library API returns: typed, frozen results that print as tables or as ``--json``.

Exit statuses, for the CLI and for bots reading ``exit_code``: 0 done cleanly; 1 not achieved
(failed, stopped); 2 usage or configuration error (raised, never a result); 3 done, but a role
session was lost on the way (``losses``: an explorer or the summarizer stopped by an error while
the run went on without it); 4 paused: the plan awaits approval (``resume --approve``).

``ResultLine`` and ``ErrorLine`` are the last line ``--events`` prints (and ``ErrorLine`` the one
object ``--json`` prints when a command ends without a result); ``stream_schema`` describes every
line ``--events`` can print.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from orchestrator.errors import OrchestrateError
from orchestrator.evidence.claimstats import ClaimStats
from orchestrator.record.events import Forked
from orchestrator.record.eventschema import event_schema
from orchestrator.sandbox import SandboxInfo
from orchestrator.state import (
    Attempt,
    Claim,
    ExplorerResult,
    KnownTests,
    Plan,
    Race,
    Review,
    RoleLoss,
    RoleUsage,
    VerifyResult,
)

RunStatus = Literal["succeeded", "failed", "awaiting_approval", "stopped"]
ExitCode = Literal[0, 1, 2, 3, 4]
EXIT_OK: ExitCode = 0
EXIT_NOT_ACHIEVED: ExitCode = 1
EXIT_USAGE: ExitCode = 2
EXIT_DEGRADED: ExitCode = 3
EXIT_AWAITING_APPROVAL: ExitCode = 4
EXIT_INTERRUPTED = 130  # Ctrl-C / SIGINT, as a shell reports it


class RunResult(BaseModel):
    """What a run produced, for people (the CLI's summary) and bots (``--json``)."""

    model_config = ConfigDict(frozen=True)

    run_id: str
    task: str
    status: RunStatus
    reason: str
    repo: str
    branch: str
    commit: str | None
    base_commit: str
    diff_stat: str
    tests: VerifyResult | None
    attempts: int
    plan: Plan | None = None
    review: Review | None = None
    checks: dict[str, Review] = Field(
        default_factory=dict, description="Each check role's last verdict, by role.")
    explorers: list[ExplorerResult] = Field(default_factory=list)
    explore_skipped: bool = Field(False, description="No explorer ran: the failing tests "
                                  "already pointed at the code (run.explore_when_pinned).")
    plan_skipped: bool = Field(False, description="The planner was never asked: the first "
                               "one-shot, asked before it (run.first_build = 'before_plan'), "
                               "ended the build.")
    plan_from_task: bool = Field(False, description="The planner was never asked: the failure "
                                 "pinned no code and the explorers were asked about the names "
                                 "the task quotes (run.unpinned_questions = 'task').")
    plan_unasked: bool = Field(False, description="The planner was never asked: the failing "
                               "tests pinned the code and the build went on from the failure "
                               "(run.plan_when_pinned = false).")
    attempt_log: list[Attempt] = Field(
        default_factory=list, description="One per build attempt: its strategy (the ladder's "
        "rung), whether it changed anything besides the failing tests, verify's word, its wall "
        "time and, for best-of-k one-shots, each sample's time and cached tokens.")
    races: list[Race] = Field(default_factory=list, description="Builds whose candidates raced "
                              "(a build role with parallel > 1), one per build attempt.")
    claims_by_model: dict[str, ClaimStats] = Field(default_factory=dict)
    known_tests: KnownTests | None = None
    per_role: dict[str, RoleUsage] = Field(default_factory=dict)
    time_split: dict[str, float] = Field(default_factory=dict)
    cost_usd: float = 0.0
    policy_violations: int = 0
    warnings: list[str] = Field(default_factory=list)
    forks: list[Forked] = Field(default_factory=list)
    run_dir: str = ""
    included_dirty: bool = False
    dirty: bool = False
    sandbox: SandboxInfo | None = None  # where builder and verify commands ran
    replayed_calls: int = 0  # answered from the run's journal on resume, not paid again
    # paid calls at a (session, turn) that had completed before with another request: an
    # exact resume keeps this at 0
    paid_calls_repeated: int = 0
    losses: list[RoleLoss] = Field(default_factory=list)

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exit_code(self) -> ExitCode:
        """0 clean, 3 done with a role lost on the way, 4 paused for a plan approval, 1 not
        achieved (see the module doc)."""
        if self.status == "awaiting_approval":
            return EXIT_AWAITING_APPROVAL
        if self.status != "succeeded":
            return EXIT_NOT_ACHIEVED
        return EXIT_DEGRADED if self.losses else EXIT_OK

    @property
    def verified_findings(self) -> list[Claim]:
        return [claim for e in self.explorers for claim in e.claims]


class ExploreResult(BaseModel):
    """The verified answer to a question about a repository."""

    model_config = ConfigDict(frozen=True)

    question: str
    repo: str
    sub_questions: list[str]
    explorers: list[ExplorerResult]
    digest: str
    claims_by_model: dict[str, ClaimStats] = Field(default_factory=dict)
    per_role: dict[str, RoleUsage] = Field(default_factory=dict)
    time_split: dict[str, float] = Field(default_factory=dict)
    cost_usd: float = 0.0
    run_id: str = ""
    run_dir: str = Field("", description="workspaces/<run-id>: events, partial results, report")
    losses: list[RoleLoss] = Field(default_factory=list)
    warnings: list[str] = Field(default_factory=list)

    @property
    def failures(self) -> list[ExplorerResult]:
        return [e for e in self.explorers if e.error]

    @computed_field  # type: ignore[prop-decorator]
    @property
    def exit_code(self) -> ExitCode:
        """1 no verified finding at all, 3 answered with an explorer lost, else 0."""
        if not any(e.claims for e in self.explorers):
            return EXIT_NOT_ACHIEVED
        return EXIT_DEGRADED if self.losses else EXIT_OK


class ResultLine(BaseModel):
    """The last line of ``run --events`` / ``resume --events``: the run's result."""

    kind: Literal["result"] = "result"
    result: RunResult


class ErrorLine(BaseModel):
    """What ``--json`` and ``--events`` print when a command ends without a result: a usage or
    configuration error, an unreachable model, an interruption. ``run_id`` names the run to
    ``resume`` or ``show`` when one was opened."""

    kind: Literal["error"] = "error"
    code: str = Field(description="The error's class: usage, config, missing_credentials, "
                      "model_unavailable, sandbox_unavailable, interrupted, internal, ...")
    message: str = Field(description="One line: what is wrong and what to do.")
    exit_code: int = Field(description="The process's exit status (see the README's table).")
    run_id: str | None = None

    @classmethod
    def of(cls, exc: BaseException, *, run_id: str | None = None) -> ErrorLine:
        """The line for ``exc``: ours carry their code and exit status; Ctrl-C is
        ``interrupted`` (130); anything else is ``internal`` (1), a bug to report."""
        message = " ".join(str(exc).split()) or type(exc).__name__
        if isinstance(exc, OrchestrateError):
            return cls(code=exc.code, message=message, exit_code=exc.exit_code, run_id=run_id)
        if isinstance(exc, KeyboardInterrupt):
            return cls(code="interrupted", exit_code=EXIT_INTERRUPTED, run_id=run_id,
                       message="interrupted; the checkout is untouched"
                       + (f" (orchestrate resume {run_id} continues the run)" if run_id else ""))
        return cls(code="internal", message=f"{type(exc).__name__}: {message}",
                   exit_code=EXIT_NOT_ACHIEVED, run_id=run_id)


def stream_schema() -> dict[str, Any]:
    """The JSON Schema of any line ``--events`` prints: an event, the ``result`` line that
    ends a run, or the ``error`` line that ends one without a result."""
    return event_schema(extra=(ResultLine, ErrorLine))
