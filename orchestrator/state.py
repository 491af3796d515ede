"""Values that cross modules: what agents submit, what the graph carries, what a run reports.

Everything here is a frozen pydantic model so that it checkpoints, serialises to ``--json`` and
cannot be mutated behind a node's back.
"""

from __future__ import annotations

import operator
from typing import Annotated, Any, Literal, TypedDict, cast

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    ValidatorFunctionWrapHandler,
    field_validator,
)

from orchestrator.config.definitions import AgentDef
from orchestrator.config.kinds import ROLES, Role  # noqa: F401 (re-exported: kinds.py is light to load)
from orchestrator.config.prompts import text
from orchestrator.localize.localization import Localization


class Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


# --- what agents submit -------------------------------------------------------------------------


class Diagnosis(Frozen):
    """The one line you believe wrong, and what it should do instead (left out when unsure)."""

    # it reaches the builder only when the line exists and reads what is quoted
    # (localize/diagnosis.py)

    path: str = Field(description="Repository-relative path of the file with the wrong line.")
    line: int = Field(description="1-based number of the line believed wrong.")
    quote: str = Field(description="That line's text, copied exactly.")
    should: str = Field(description="What the line should do instead, in one sentence.")


class Plan(Frozen):
    """The planner's breakdown of a task."""

    goal: str = Field(description="One sentence: what done looks like.")
    steps: list[str] = Field(description="Ordered steps for the builder.")
    questions: list[str] = Field(
        default_factory=list,
        description="Independent questions for read-only explorers to answer from the code.",
    )
    files_to_touch: list[str] = Field(default_factory=list, description="Paths likely to change.")
    acceptance: list[str] = Field(
        default_factory=list,
        description="Shell commands that must exit 0 when the task is done (e.g. the test command).",
    )
    diagnosis: Diagnosis | None = Field(
        None, description="When the failure shows it: the one line you believe wrong (path, "
        "line number, its exact text) and what it should do instead.")

    @field_validator("diagnosis", mode="wrap")
    @classmethod
    def _optional_diagnosis(cls, value: Any, handler: ValidatorFunctionWrapHandler
                            ) -> Diagnosis | None:
        """A malformed diagnosis is left out, never the reason a plan is refused: it is an
        extra a small planner may get wrong, and it is checked before anyone reads it."""
        try:
            return cast("Diagnosis | None", handler(value))
        except ValidationError:
            return None


class Citation(Frozen):
    """A verbatim quote from ``path`` lines ``start_line``..``end_line`` (1-based, inclusive)."""

    path: str = Field(description="Repository-relative path of the file.")
    start_line: int = Field(description="First cited line, 1-based.")
    end_line: int = Field(description="Last cited line, inclusive.")
    quote: str = Field(description="Text copied verbatim from those lines.")


class Claim(Frozen):
    """One statement about the code, backed by citations."""

    text: str = Field(description="The finding, in one or two sentences.")
    citations: list[Citation] = Field(description="Where in the code this is shown.")


class Findings(Frozen):
    """What an explorer submits."""

    answer: str = Field(description="Short answer to the question.")
    claims: list[Claim] = Field(default_factory=list, description="Claims with citations.")


class BuildReport(Frozen):
    """What the builder submits when it believes the change is done."""

    summary: str = Field(description="What was changed and why.")
    files_changed: list[str] = Field(default_factory=list)


class Review(Frozen):
    """What a judge (the reviewer, a check role) submits."""

    verdict: Literal["approve", "request_changes"]
    comments: list[str] = Field(default_factory=list, description="Concrete, actionable points.")


# --- what the run records -----------------------------------------------------------------------


class CallRecord(Frozen):
    """One model call: who asked for what, who served it, what it cost."""

    role: str
    session: str
    requested_model: str
    served_model: str | None = None
    requested_tier: str | None = None
    served_tier: str | None = None
    effort: str | None = None
    api: str | None = None  # the wire API that served it: "responses" or "chat"
    fallback_step: int = 0
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    ttft_s: float | None = None
    duration_s: float = 0.0
    tokens_per_s: float | None = None
    cost_usd: float = 0.0
    error: str | None = None
    replayed: bool = False  # answered from the run's journal on resume: not paid again
    # why the client stopped the stream before the server finished: "repeat" (the reply began
    # an item it had already written; ``models/repeats.py``). The server then sent no usage:
    # the output tokens are the pieces read, the prompt tokens (and the cost) the session's own
    # estimate, an upper bound
    stopped: str | None = None


DropKind = Literal["path", "quote", "trivial", "unrelated", "uncited", "unchecked"]
DROP_KINDS: tuple[DropKind, ...] = ("path", "quote", "trivial", "unrelated", "uncited", "unchecked")


class CitationVerdict(Frozen):
    """What the verifier found for one citation: ``kind`` is None when it supports its claim."""

    path: str
    start_line: int
    end_line: int
    kind: DropKind | None = None
    reason: str = ""


class ClaimVerdict(Frozen):
    """One submitted claim after verification, with the reason when it did not count.

    ``verified``: a citation exists, is informative and shares a name with the claim;
    ``adds_nothing``: verified, but it only cites test files the builder already has;
    ``dropped``: no citation supports it (``kind`` says how the best one failed).
    """

    index: int
    text: str
    status: Literal["verified", "adds_nothing", "dropped"]
    kind: DropKind | None = None
    reason: str = ""
    citations: list[CitationVerdict] = Field(default_factory=list)


class RoleUsage(Frozen):
    """One role's model calls in a run: how many, on which models and tiers, tokens, cost."""

    calls: int = 0
    models: list[str] = Field(default_factory=list, description="Served models, first seen first.")
    tiers: list[str] = Field(default_factory=list, description="Served service tiers.")
    prompt_tokens: int = 0
    cached_tokens: int = 0
    output_tokens: int = 0
    reasoning_tokens: int = 0
    cost_usd: float = 0.0
    model_s: float = 0.0
    tokens_per_s: float | None = Field(None, description="Output tokens per second of generation.")


class ExplorerResult(Frozen):
    """One explorer's outcome after verification."""

    question: str
    index: int
    claims: list[Claim] = Field(default_factory=list)  # verified claims that add something
    answer: str = ""
    submitted: int = 0
    verified: int = 0
    adds_nothing: int = 0
    dropped: int = 0
    tool_calls: int = 0
    error: str | None = None
    drop_reasons: list[str] = Field(default_factory=list)
    drops: dict[str, int] = Field(default_factory=dict)  # drop kind -> claims (all of them)
    verdicts: list[ClaimVerdict] = Field(default_factory=list)  # the first 100 claims
    model: str = ""  # the model that served the explorer's last call ("" when none did)
    wall_s: float = 0.0  # from its start (candidates included) to its verified result
    candidates: list[str] = Field(default_factory=list)  # the windows it was shown first


class AssertLine(Frozen):
    """One assertion line of a test file."""

    path: str
    line: int
    text: str


class KnownTests(Frozen):
    """What the run knows about its tests before exploring.

    Explorers are told, so they look for the code under test rather than the tests; the builder
    gets it at the top of the digest; claims citing only these files add nothing. ``source`` is
    ``"plan"`` when derived from the plan's acceptance commands and files (nothing run), or
    ``"check"`` when the acceptance commands ran before exploring (the preflight's
    ``localization``): ``report`` then holds their failures and ``suspects`` the code they point
    at.
    """

    source: Literal["plan", "check"] = "plan"
    commands: list[str] = Field(default_factory=list)
    files: list[str] = Field(default_factory=list)
    lines: list[AssertLine] = Field(default_factory=list)
    report: str = ""
    suspects: list[str] = Field(default_factory=list)  # non-test files the failure points at

    def covers(self, path: str) -> bool:
        """True when ``path`` is one of the known test files."""
        return path.removeprefix("./") in self.files


class ExploreTask(TypedDict):
    """What the graph sends each explorer: its question, its index, the run's task and what
    the run already knows about its tests."""

    question: str
    index: int
    task: str
    tests: KnownTests | None


class RoleLoss(Frozen):
    """A role session an error stopped while the run went on without it (a warning, exit 3)."""

    role: str
    session: str | None = None
    code: str = Field(description="What stopped it: model_unavailable, timeout, session_failed, ...")
    message: str = Field(description="One line naming the role, model and provider.")


class CheckResult(Frozen):
    """One acceptance command's result."""

    command: str
    exit_code: int
    output: str
    duration_s: float


class VerifyResult(Frozen):
    passed: bool
    checks: list[CheckResult] = Field(default_factory=list)


CandidateStatus = Literal["passed", "failed", "cancelled", "error"]


class Candidate(Frozen):
    """One candidate build of a race (a build role with ``parallel`` > 1)."""

    index: int = Field(description="1-based; candidate 1 is the session a single build would be.")
    session: str
    temperature: float | None = None
    status: CandidateStatus
    duration_s: float = 0.0
    files_changed: int = 0
    diff_lines: int = 0
    failing: list[str] = Field(default_factory=list, description="Commands that failed.")
    error: str | None = None


class Race(Frozen):
    """k candidate builds raced in their own worktrees; the winner's files became the build."""

    round: int = Field(description="The build attempt this race was (1 = the first build).")
    pick: Literal["first", "smallest"]
    winner: int | None = Field(None, description="The candidate whose tree was kept; None when "
                               "none passed and candidate 1's was kept for the feedback.")
    candidates: list[Candidate] = Field(default_factory=list)
    duration_s: float = 0.0


Strategy = Literal["one_shot", "one_line", "one_shot_fact", "tool_loop", "next_model", "changes",
                   "race"]


class Sample(Frozen):
    """One of a one-shot attempt's best-of-k samples, checked in a worktree of its own."""

    index: int = Field(description="1-based; sample 1 pays for reading the prompt.")
    temperature: float | None = None
    call_s: float = Field(0.0, description="The model call's wall time (its share: see batch).")
    ttft_s: float | None = Field(None, description="Time to its first token: reading the "
                                 "prompt (the rest of call_s is generation).")
    batch: int = Field(1, description="Replies its call answered (sample_batch): call_s and "
                       "ttft_s are the call's divided by this; its tokens are on the sample "
                       "that asked the call.")
    checks_s: float = Field(0.0, description="The acceptance commands' wall time.")
    prompt_tokens: int = 0
    cached_tokens: int = Field(0, description="Prompt tokens the server served from its cache.")
    output_tokens: int = 0
    changed: bool = False
    passed: bool = False
    place: str = Field("", description="A one-line request's code (path:start-end).")
    again_s: float = Field(0.0, description="A second turn's time, part of call_s: the reply "
                           "named a file or a line and gave no text for it, and was asked "
                           "once more for it in its session (0.0: no second turn).")
    corrections: int = Field(1, description="Corrections its one-line request asked for "
                             "(line_alternatives, on a place asked again); 1: one line.")
    alternative: int = Field(0, description="A further correction of the sample before's reply "
                             "(line_alternatives), checked on its own: its place among the "
                             "reply's edits (2, 3 ...); no call, time or tokens of its own. "
                             "0: a sample with its own call.")
    mutant: str = Field("", description="A mechanical edit of a line a sample chose (mutants): "
                        "its operator (boundary, arithmetic, offset, number, operand); no "
                        "model wrote it, no call of its own. \"\": a model's reply.")


class Attempt(Frozen):
    """One build attempt: which rung of the ladder it was, whether it changed anything the
    tests do not define, what verify said and how long it took."""

    n: int
    strategy: Strategy
    model_step: int = Field(0, description="Position in the role's model chain (0: its model).")
    changed: bool = True
    passed: bool | None = None
    duration_s: float = 0.0
    last_rung: bool = Field(False, description="The ladder has no other strategy after this.")
    samples: list[Sample] = Field(default_factory=list)
    diagnosis: bool = Field(False, description="A checked diagnosis was in its prompt.")


class RunState(BaseModel):
    """The graph's state. Lists with a reducer are appended to by parallel branches."""

    model_config = ConfigDict(extra="forbid")

    task: str
    mode: Literal["run", "explore"] = "run"
    plan: Plan | None = None
    # the acceptance commands' failures before any change (preflight.py), None until run
    localization: Localization | None = None
    # what explorers and the builder are told about the tests (known.py), from the above or the plan
    tests: KnownTests | None = None
    explorers: Annotated[list[ExplorerResult], operator.add] = Field(default_factory=list)
    digest: str = ""
    # where the task's words lead in the code ("path:start-end", leads.py), when the failure
    # pins none: the one-line request tries them after the explorers' place
    leads: list[str] = Field(default_factory=list)
    build: BuildReport | None = None
    attempts: int = 0
    verify: VerifyResult | None = None
    feedback: str = ""
    review: Review | None = None
    reviews: int = 0
    checks: dict[str, Review] = Field(default_factory=dict)  # each check role's last verdict
    check_rounds: dict[str, int] = Field(default_factory=dict)  # how often each check ran
    unaddressed: str = ""  # the judge whose requested changes no attempt was left to make
    status: Literal["running", "succeeded", "failed"] = "running"
    reason: str = ""
    max_attempts: int = 3
    max_reviews: int = 1
    approve_plan: bool = False
    plan_rejected: bool = False
    failures: Annotated[list[str], operator.add] = Field(default_factory=list)
    # the tree the worktree held when the last node that changes it finished: resume restores it
    worktree_tree: str = ""
    races: list[Race] = Field(default_factory=list)  # one per build that raced candidates
    explore_skipped: bool = False  # the preflight pinned the code, so no explorer ran
    attempt_log: list[Attempt] = Field(default_factory=list)  # one per build attempt
    out_of_time: bool = False  # run.time_budget_s ran out (``deadline.py``)
    out_of_time_in: str = ""  # the step it stopped: "planning", "exploring", "building", a judge
    diagnosis: Diagnosis | None = None  # the plan's diagnosis, only once it checked
    # the tree the next build attempt starts from: the start's, or the last attempt's that
    # left fewer failing tests and none new (``building.undo``); "" before the first attempt
    kept_tree: str = ""
    kept_failing: list[str] | None = None  # the failing tests of kept_tree (None: the start's)
    # what verify said of kept_tree when an attempt's tree was kept (None: the start's, the
    # preflight's): the failure a one-line request after an undone attempt is shown
    kept_verify: VerifyResult | None = None
    kept_feedback: str = ""
    # the files the first attempt started from, and how many attempts in a row built on a kept
    # partial fix without fixing more (``nodes._kept``: at ``PARTIAL_MISSES`` it is dropped)
    start_tree: str = ""
    kept_misses: int = 0
    # run.first_build = "before_plan": the planner was not asked before the first attempt; a
    # failing first attempt goes to it, and its plan to the attempts after
    plan_deferred: bool = False
    # run.unpinned_questions = "task": the planner was never asked, the task's names were
    plan_from_task: bool = False
    # run.plan_when_pinned = false: the failure pinned the code, the planner was never asked
    plan_unasked: bool = False


class Handoff(Frozen):
    """What the summarizer writes when a session forks."""

    goal: str
    facts: list[str] = Field(default_factory=list, description="Established facts with evidence.")
    files: list[str] = Field(default_factory=list, description="Files read or changed.")
    remaining: list[str] = Field(default_factory=list, description="What is left to do.")
    next_step: str = ""

    def render(self) -> str:
        """The handoff as the continuing session reads it (``agents/prompts/session.md``)."""
        lines = [text("session", "handoff_goal", goal=self.goal),
                 text("session", "handoff_facts")]
        lines += [f"- {f}" for f in self.facts] or [text("session", "handoff_no_facts")]
        if self.files:
            lines.append(text("session", "handoff_files", files=", ".join(self.files)))
        lines.append(text("session", "handoff_left"))
        lines += [f"- {r}" for r in self.remaining] or [text("session", "handoff_nothing_left")]
        if self.next_step:
            lines.append(text("session", "handoff_next", step=self.next_step))
        return "\n".join(lines)


SUBMIT_MODELS: dict[str, type[Frozen]] = {
    "Plan": Plan,
    "Findings": Findings,
    "BuildReport": BuildReport,
    "Review": Review,
    "Handoff": Handoff,
}


def submit_model(agent: AgentDef) -> type[Frozen]:
    """The model of what ``agent``'s sessions submit (its ``submit_name``)."""
    return SUBMIT_MODELS[agent.submit_name]
