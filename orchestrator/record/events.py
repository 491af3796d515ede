"""What happens in a run, as typed events: one frozen model per kind, a discriminated union.

The same models are what listeners receive, what ``events.jsonl`` holds (one JSON object per
line, ``kind`` first), what ``orchestrate run --json --events`` streams and the platform's
``custom`` chunks carry, and what ``runs``, ``show`` and the session tree read back.
Their JSON Schema, for bot authors, is ``eventschema.py``'s (``orchestrate schema events``). Logs of
older runs (``"event": KIND`` lines) read back through ``parse_event`` too.

Whoever emits an event builds its model (``telemetry.emit(RoleFinished(role=..., turns=...))``);
the telemetry fills in what it owns, the run id, the time and the date (``stamp``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from orchestrator.config.kinds import Kind
from orchestrator.state import CallRecord, CandidateStatus

_BASE = frozenset({"kind", "run_id", "t", "at", "role", "session"})
_STAMPED = frozenset({"run_id", "t", "at"})  # the telemetry's to fill in
Purpose = Literal["task", "fork", "handoff", "one_shot"]


class EventBase(BaseModel):
    """What every event has: its run, when, and the role and session it concerns."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    kind: str
    run_id: str = ""  # the emitting telemetry's; every written event has one (``event_schema``)
    t: float = Field(0.0, description="Seconds since the run (this process of it) started.")
    at: str | None = Field(None, description="UTC time, ISO 8601, as written to events.jsonl.")
    role: str | None = Field(None, description="The role (planner, a check role, verify, human).")
    session: str | None = Field(None, description="The agent session, e.g. explorer-2 or "
                                "builder-1.1 (a fork).")

    @property
    def data(self) -> dict[str, Any]:
        """The kind's own fields that were given (for code written against the old dicts)."""
        return self.model_dump(exclude=set(_BASE), exclude_unset=True)


class RunStarted(EventBase):
    """A run began (``mode`` explore: a question, no worktree)."""

    kind: Literal["run_started"] = "run_started"
    repo: str
    mode: Literal["run", "explore"] = "run"
    branch: str | None = None
    base_commit: str | None = None
    dirty: bool = False
    included_dirty: bool = False
    sandbox: str | None = Field(None, description="Where builder and verify commands run.")


class RunResumed(RunStarted):
    """A stopped run continued (``orchestrate resume``, a plan approval, the platform)."""

    kind: Literal["run_resumed"] = "run_resumed"  # type: ignore[assignment]


class WorktreeRestored(EventBase):
    """The worktree was put back to what the last checkpoint recorded."""

    kind: Literal["worktree_restored"] = "worktree_restored"
    tree: str


class RoleStarted(EventBase):
    """An agent session started (a fork and a handoff writer are sessions too)."""

    kind: Literal["role_started"] = "role_started"
    model: str
    provider: str
    tier: str | None = None
    effort: str | None = None
    parent: str | None = None
    purpose: Purpose = "task"
    window: int
    role_kind: Kind | None = Field(None, description="What the role is (plan, explore, build, "
                                   "review, check, summarize): its agent file's kind.")


class RoleFinished(EventBase):
    """An agent session submitted its result."""

    kind: Literal["role_finished"] = "role_finished"
    turns: int
    tool_calls: int
    peak_context: float
    lineage_peak_context: float
    forks: int
    masked: int
    paged: int
    root: str


class _Call(CallRecord, EventBase):
    role: str | None = None  # type: ignore[assignment]
    session: str | None = None  # type: ignore[assignment]


class CallFinished(_Call):
    """One model call: requested and served model and tier, tokens, timing, cost."""

    kind: Literal["call_finished"] = "call_finished"


class CallFailed(_Call):
    """A model call that failed (the fallback chain may have gone on)."""

    kind: Literal["call_failed"] = "call_failed"


class CallReplayed(EventBase):
    """A call answered from the run's journal on resume: not paid again."""

    kind: Literal["call_replayed"] = "call_replayed"


class ToolCalled(EventBase):
    kind: Literal["tool_called"] = "tool_called"
    tool: str
    ok: bool
    chars: int
    duration_s: float


class ExplorerFinished(EventBase):
    """One explorer's claims after the mechanical citation check."""

    kind: Literal["explorer_finished"] = "explorer_finished"
    question: str
    model: str = Field("", description="The model that served its last call.")
    submitted: int
    verified: int
    adds_nothing: int = Field(0, description="Verified, but only citing tests already known.")
    dropped: int
    error: str | None = None
    drops: list[str] = Field(default_factory=list, description="Each dropped claim's kind.")
    candidates: list[str] = Field(default_factory=list, description="The windows of code "
                                  "(path:start-end) it was shown before its first call.")
    wall_s: float | None = Field(None, description="Its time, from the candidates to the "
                                 "verified result.")
    refused: int = Field(0, description="Submissions refused for citing places it was never "
                         "shown.")


class Forked(EventBase):
    """A session ran out of room and a child session continues from a handoff."""

    kind: Literal["fork"] = "fork"
    child: str
    reason: str
    tokens_before: int
    tokens_after: int
    window: int
    peak_context: float
    transcript: str
    summarizer: str | None = None
    tool_calls: int


class TestResult(EventBase):
    """The acceptance commands ran after a build."""

    __test__ = False  # not a pytest class
    kind: Literal["test_result"] = "test_result"
    passed: bool
    attempt: int
    commands: list[str]
    exit_codes: list[int]


class Localized(EventBase):
    """The acceptance commands ran before any model call; what their failures point at."""

    kind: Literal["localized"] = "localized"
    passed: bool
    pinned: bool = Field(description="The failure already names the code to change.")
    commands: list[str]
    exit_codes: list[int]
    suspects: list[str] = Field(default_factory=list, description="Files the failures point at.")
    tests: list[str] = Field(default_factory=list)
    failing: list[str] = Field(default_factory=list)


class ExploreSkipped(EventBase):
    """No explorer ran: the preflight's failures already name the code to change
    (``run.explore_when_pinned = true`` runs them anyway)."""

    kind: Literal["explore_skipped"] = "explore_skipped"
    reason: str
    suspects: list[str] = Field(default_factory=list)
    questions: list[str] = Field(default_factory=list, description="The plan's questions, "
                                 "not asked.")


class PlanDeferred(EventBase):
    """The planner was not asked before the first build attempt: the failing tests pin the code
    and the first one-shot's prompt needs no plan (``run.first_build = "before_plan"``). It
    plans if that attempt fails."""

    kind: Literal["plan_deferred"] = "plan_deferred"
    reason: str
    suspects: list[str] = Field(default_factory=list)


class PlanFromTask(EventBase):
    """No planner: the failure pins no code, the explorers are asked ``questions``, the names
    the task quotes (``run.unpinned_questions = "task"``); or it pins the code, no question is
    asked and the attempts go on from the failure (``run.plan_when_pinned = false``)."""

    kind: Literal["plan_from_task"] = "plan_from_task"
    reason: str
    questions: list[str] = Field(default_factory=list)


class CandidateFinished(EventBase):
    """One candidate build of a race ended: its acceptance commands passed or failed, its
    session failed, or another candidate won first and it was cancelled."""

    kind: Literal["candidate_finished"] = "candidate_finished"
    index: int
    status: CandidateStatus
    temperature: float | None = None
    duration_s: float
    files_changed: int = 0
    diff_lines: int = 0
    error: str | None = None


class RaceFinished(EventBase):
    """A race of candidate builds ended; ``kept`` is the candidate whose files became the
    build (``winner`` is None when none passed)."""

    kind: Literal["race_finished"] = "race_finished"
    round: int
    pick: Literal["first", "smallest"]
    winner: int | None = None
    kept: int
    candidates: int
    duration_s: float


class SampleFinished(EventBase):
    """One best-of-k one-shot sample was checked in its own worktree (``samples.py``)."""

    kind: Literal["sample_finished"] = "sample_finished"
    attempt: int
    index: int
    temperature: float | None = None
    call_s: float = Field(description="The model call's wall time (its share: see batch).")
    ttft_s: float | None = Field(None, description="Its time to first token (prompt reading).")
    batch: int = Field(1, description="Replies its call answered (sample_batch).")
    checks_s: float = 0.0
    wall_s: float = 0.0
    prompt_tokens: int = 0
    cached_tokens: int = Field(0, description="Prompt tokens served from the server's cache.")
    output_tokens: int = 0
    changed: bool = False
    passed: bool = False
    place: str = Field("", description="A one-line request's code (path:start-end).")
    again_s: float = Field(0.0, description="A second turn's time (asked once more for the "
                           "file or line its reply named), part of call_s.")
    corrections: int = Field(1, description="Corrections its one-line request asked for.")
    alternative: int = Field(0, description="A further correction of the sample before's "
                             "reply, its place among the reply's edits; 0: a call of its own.")
    mutant: str = Field("", description="A mechanical edit's operator (no model wrote it); "
                        "\"\": a model's reply.")
    error: str | None = None


class AttemptFinished(EventBase):
    """A build attempt was judged by verify: its strategy (the ladder's rung), whether it
    changed anything besides the failing tests, and whether the commands passed."""

    kind: Literal["attempt_finished"] = "attempt_finished"
    attempt: int
    strategy: str
    model_step: int = 0
    changed: bool
    passed: bool
    duration_s: float
    samples: int = 0


class DiagnosisChecked(EventBase):
    """The plan's diagnosis (the line it believes wrong) was checked against the file: kept for
    the builder, or dropped with the reason."""

    kind: Literal["diagnosis_checked"] = "diagnosis_checked"
    kept: bool
    path: str
    line: int
    reason: str = ""


class Verdict(EventBase):
    """A judge's verdict: the reviewer's, a check role's, or a human's on the plan."""

    kind: Literal["review"] = "review"
    verdict: Literal["approve", "request_changes", "reject"]
    comments: list[str] = Field(default_factory=list)


class Warned(EventBase):
    """Something the user should know: a downgrade, a fallback, a policy refusal, ..."""

    kind: Literal["warning"] = "warning"
    message: str
    category: str | None = Field(None, description="policy_violation, downgrade, fallback, "
                                 "skipped, ...")


class RoleLost(EventBase):
    """A role session an error stopped while the run went on without it (exit status 3)."""

    kind: Literal["role_lost"] = "role_lost"
    code: str
    message: str


class RunFinished(EventBase):
    kind: Literal["run_finished"] = "run_finished"
    status: str
    reason: str


class Progress(EventBase):
    """A live tick while a model streams (``pieces``) or after a call (``context``); never
    written to the log."""

    kind: Literal["progress"] = "progress"
    pieces: int | None = None
    elapsed: float | None = None
    context: float | None = None
    estimate: int | None = None
    prompt_tokens: int | None = None


EVENT_TYPES: tuple[type[EventBase], ...] = (
    RunStarted, RunResumed, WorktreeRestored, RoleStarted, RoleFinished, CallFinished,
    CallFailed, CallReplayed, ToolCalled, ExplorerFinished, Forked, TestResult, Localized,
    ExploreSkipped, PlanDeferred, PlanFromTask, CandidateFinished, RaceFinished, SampleFinished,
    AttemptFinished, DiagnosisChecked, Verdict, Warned, RoleLost, RunFinished, Progress,
)
BY_KIND: dict[str, type[EventBase]] = {
    str(cls.model_fields["kind"].default): cls for cls in EVENT_TYPES}
EventKind = Literal[
    "run_started", "run_resumed", "worktree_restored", "role_started", "role_finished",
    "call_finished", "call_failed", "call_replayed", "tool_called", "explorer_finished", "fork",
    "test_result", "localized", "explore_skipped", "plan_deferred", "plan_from_task",
    "candidate_finished", "race_finished", "sample_finished", "attempt_finished",
    "diagnosis_checked", "review", "warning", "role_lost", "run_finished", "progress",
]
Event = Annotated[
    RunStarted | RunResumed | WorktreeRestored | RoleStarted | RoleFinished | CallFinished
    | CallFailed | CallReplayed | ToolCalled | ExplorerFinished | Forked | TestResult | Localized
    | ExploreSkipped | PlanDeferred | PlanFromTask | CandidateFinished | RaceFinished
    | SampleFinished | AttemptFinished | DiagnosisChecked | Verdict | Warned | RoleLost
    | RunFinished | Progress,
    Field(discriminator="kind"),
]
_ADAPTER: TypeAdapter[Event] = TypeAdapter(Event)
# fields whose names changed when events became typed: (kind, old name) -> new name
_RENAMED = {("run_started", "kind"): "mode", ("warning", "kind"): "category"}


E = TypeVar("E", bound=EventBase)


def stamp(event: E, *, run_id: str, t: float, at: str | None) -> E:
    """``event`` with its run id, its time since the run started and its date: the event
    itself, filled in, when it was never emitted (no copy per event); a copy of one that was
    (an event listeners hold never changes)."""
    if event.run_id:
        return event.model_copy(update={"run_id": run_id, "t": t, "at": at})
    # a frozen model's fields live in its __dict__; nobody else holds this one yet
    fields = event.__dict__
    fields["run_id"], fields["t"], fields["at"] = run_id, t, at
    event.__pydantic_fields_set__.update(_STAMPED)
    return event


def parse_event(entry: dict[str, Any]) -> Event | None:
    """One ``events.jsonl`` object as its event; older logs' lines too; None for a kind this
    version does not know or a line it cannot read."""
    if "kind" not in entry or entry.get("kind") not in BY_KIND:
        if entry.get("event") not in BY_KIND:
            return None
        entry = _legacy(entry)
    if "run_id" not in entry:  # every event the telemetry wrote has one
        return None
    try:
        return _ADAPTER.validate_python(entry)
    except ValidationError:
        return None


def _legacy(entry: dict[str, Any]) -> dict[str, Any]:
    """A structlog line of an older run (``event``, ``timestamp``, data flat) in today's shape."""
    kind = str(entry["event"])
    known = BY_KIND[kind].model_fields
    out: dict[str, Any] = {"kind": kind, "at": entry.get("timestamp")}
    for key, value in entry.items():
        key = _RENAMED.get((kind, key), key)
        if key in known and key not in ("kind", "at"):
            out[key] = value
    return out


def read_events(path: Path) -> list[Event]:
    """Every event a run's ``events.jsonl`` holds, in order (a line cut short is skipped)."""
    if not path.exists():
        return []
    return list(_parse_lines(path.read_text(encoding="utf-8").splitlines()))


def _parse_lines(lines: Iterable[str]) -> Iterable[Event]:
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        event = parse_event(entry) if isinstance(entry, dict) else None
        if event is not None:
            yield event
