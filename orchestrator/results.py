"""What the library API returns: typed, frozen results that print as tables or as ``--json``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from .sandbox import SandboxInfo
from .state import ExplorerResult, Plan, VerifyResult

RunStatus = Literal["succeeded", "failed", "awaiting_approval", "stopped"]


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
    review: dict[str, Any] | None = None
    explorers: list[ExplorerResult] = Field(default_factory=list)
    per_role: dict[str, dict[str, Any]] = Field(default_factory=dict)
    time_split: dict[str, float] = Field(default_factory=dict)
    cost_usd: float = 0.0
    policy_violations: int = 0
    warnings: list[str] = Field(default_factory=list)
    forks: list[dict[str, Any]] = Field(default_factory=list)
    run_dir: str = ""
    included_dirty: bool = False
    dirty: bool = False
    sandbox: SandboxInfo | None = None  # where builder and verify commands ran
    replayed_calls: int = 0  # answered from the run's journal on resume, not paid again
    # paid calls at a (session, turn) that had completed before with another request: an
    # exact resume keeps this at 0
    paid_calls_repeated: int = 0

    @property
    def exit_code(self) -> int:
        return 0 if self.status in ("succeeded", "awaiting_approval") else 1

    @property
    def verified_findings(self) -> list[Any]:
        return [claim for e in self.explorers for claim in e.claims]


class ExploreResult(BaseModel):
    """The verified answer to a question about a repository."""

    model_config = ConfigDict(frozen=True)

    question: str
    repo: str
    sub_questions: list[str]
    explorers: list[ExplorerResult]
    digest: str
    per_role: dict[str, dict[str, Any]] = Field(default_factory=dict)
    time_split: dict[str, float] = Field(default_factory=dict)
    cost_usd: float = 0.0

    @property
    def failures(self) -> list[ExplorerResult]:
        return [e for e in self.explorers if e.error]
