"""What the library API returns: typed, frozen results that print as tables or as ``--json``.

Exit statuses, for the CLI and for bots reading ``exit_code``: 0 done cleanly (or paused for a
plan approval); 1 not achieved (failed, stopped); 2 usage or configuration error (raised, never
a result); 3 done, but a role session was lost on the way (``losses``: an explorer or the
summarizer stopped by an error while the run went on without it).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, computed_field

from orchestrator.evidence.claimstats import ClaimStats
from orchestrator.record.events import Forked
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
ExitCode = Literal[0, 1, 2, 3]
EXIT_OK: ExitCode = 0
EXIT_NOT_ACHIEVED: ExitCode = 1
EXIT_USAGE: ExitCode = 2
EXIT_DEGRADED: ExitCode = 3


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
        """0 clean, 3 done with a role lost on the way, 1 not achieved (see the module doc)."""
        if self.status not in ("succeeded", "awaiting_approval"):
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
