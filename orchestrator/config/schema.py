"""The role map's schema: frozen, strict pydantic models, and the checks a merged map passes.

``validate`` turns the merged layers (``layers.py`` reads and merges them) into a ``RoleMap``
once. Every leaf of the merged map remembers which layer set it, so an error names the file,
the key path and what is allowed; the cross-references (a role's models, a model's provider,
tiers, efforts) are checked here too.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    model_validator,
)

from orchestrator.config.blame import describe, source_of
from orchestrator.config.kinds import ROLE_NAME, Role
from orchestrator.errors import ConfigError

Tier = Literal["standard", "priority", "flex", "ultrafast"]
Effort = Literal["none", "minimal", "low", "medium", "high", "xhigh"]
Api = Literal["responses", "chat"]
EditFormat = Literal["any", "replace", "lines", "patch", "whole"]
_EFFORT_ALIASES = {"light": "low", "max": "xhigh"}
SECTIONS = (
    "providers", "models", "roles", "teams", "run", "verify", "policy", "quota", "sandbox",
    "pipeline", "fleet",
)
DEFAULT_STEPS = ("planner", "explorer", "builder", "reviewer")


def _effort_alias(v: Any) -> Any:
    return _EFFORT_ALIASES.get(v, v) if isinstance(v, str) else v


class _Strict(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid", strict=True)


def _standard_tier() -> dict[Tier, str | None]:
    return {"standard": None}


class Provider(_Strict):
    """An OpenAI-compatible endpoint and how our tier names map onto its ``service_tier``."""

    base_url: str | None = Field(None, description="None means the provider's public endpoint.")
    api_key_env: str = Field(description="Environment variable that holds the API key.")
    tiers: dict[Tier, str | None] = Field(
        default_factory=_standard_tier,
        description="Our tier -> the provider's service_tier value (None: send none).",
    )
    timeout_s: float = 600.0
    api: Api = Field(
        "chat", description="The wire API its models speak: the Responses API (/v1/responses; "
        "OpenAI's codex models speak only this) or Chat Completions (/v1/chat/completions).")
    responses_format: Literal["text.format", "response_format"] = Field(
        "text.format", description="Responses API only: where structured output is asked for. "
        "llama.cpp's /v1/responses ignores text.format and reads the chat-style response_format.")


class Price(_Strict):
    """USD per million tokens."""

    input: float = 0.0
    cached_input: float = 0.0
    output: float = 0.0


class ModelSpec(_Strict):
    """A model alias: where it lives, how big its window is, what it costs, how it takes tools."""

    provider: str
    id: str
    api: Api | None = Field(None, description="Overrides the provider's api for this model.")
    context_window: int = Field(gt=0)
    max_output: int = Field(gt=0)
    price: Price = Price()
    tools: Literal["native", "json"] = "native"
    structured: Literal["json_schema", "json_object", "prompt"] = "json_schema"
    tool_args: Literal["required", "all"] = Field(
        "required", description="json tool mode: offer only required tool arguments (small "
        "models fill optional ones with inventions) or all of them.")
    temperature: float | None = Field(None, ge=0, le=2, description="None: the server's default.")
    quota_tokens_per_day: int | None = None
    efforts: tuple[Effort, ...] | None = Field(
        None, description="The reasoning efforts the model accepts (None: any); a role whose "
        "chain reaches this model with another effort is a configuration error.")
    edits: EditFormat = Field(
        "any", description="How this model edits files as a builder: replace (text), lines "
        "(line ranges), patch (unified diff), whole (whole files) or any (all of them).")


class RoleSpec(_Strict):
    """How one role runs: model, tier, effort, parallelism, fallback chain, context policy."""

    model: str
    tier: Tier = "standard"
    effort: Annotated[Effort | None, BeforeValidator(_effort_alias)] = None
    parallel: int = Field(1, ge=1, le=32, description="Explore roles: explorers at once. Build "
                          "roles: candidate builds that race in their own worktrees (k).")
    temperatures: tuple[Annotated[float, Field(ge=0, le=2)], ...] = Field(
        (), description="Build roles: racing candidate i (parallel > 1), or else build attempt "
        "i, samples at temperatures[i % len] (1-based), so a retry is not a replay; empty: the "
        "model's temperature.")
    pick: Literal["first", "smallest"] = Field(
        "first", description="Build roles racing: the first candidate whose acceptance commands "
        "pass wins and the rest are cancelled, or wait for all and take the smallest passing "
        "change.")
    one_shot: bool = Field(
        False, description="Build roles: the first attempt asks the model once, without tools, "
        "for the whole new text of the files the preflight's failures point at (shown whole with "
        "the failing tests); verify decides, and later attempts use the tool loop. Needs pinned "
        "code (else the tool loop runs from the start); not with parallel > 1.")
    one_shot_attempts: int = Field(
        1, ge=1, le=20, description="Build roles with one_shot: how many attempts, from the "
        "first, ask once for whole files; a later one is shown the files as the attempt before "
        "left them, the failure verify saw and what that attempt did (sample it at a "
        "temperature of its own, see temperatures). The attempts after these use the tool loop.")
    one_line: bool = Field(
        False, description="Build roles with one_shot: the attempt after the first one-shot "
        "asks only which line is wrong, and its corrected text, in the code the explorers found "
        "or else the function the failure points at (shown numbered); a small model that gives "
        "whole files back unchanged has to pick a line. Then the one_shot_attempts go on.")
    unpinned_lines_only: bool = Field(
        False, description="Build roles with one_line: on an explore-needed task (the failure "
        "pins no code, the explore step left places) every attempt is the one-line request over "
        "those places, new draws at the role's highest temperature after the first: no "
        "whole-file rungs (live, r21-r25, they passed 1 of 46 attempts there; the line 11 of 53).")
    samples: int = Field(
        1, ge=1, le=16, description="Build roles with one_shot: best-of-k. Each one-shot attempt "
        "asks up to k times with the same prompt (only the sampling differs, temperatures[i]), "
        "each answer checked by the acceptance commands in a worktree of its own; the first "
        "that passes is kept.")
    line_samples: int = Field(
        1, ge=1, le=16, description="Build roles with one_line: the one-line request is asked "
        "up to k times with the same prompt, the first at the attempt's temperature and the "
        "rest at the role's highest (each place's first sample at the attempt's), each "
        "answer checked in a worktree of its own; the first "
        "that passes is kept. A line is a few tokens and its prompt is short and cached: a "
        "further sample costs seconds where a whole-file one-shot costs tens.")
    line_alternatives: int = Field(
        1, ge=1, le=5, description="Build roles with one_line: a place the one-line request "
        "asks again (its second sample on, line_samples) asks for this many different "
        "corrections in one reply, and each edit the reply makes (read whole, then each "
        "listed correction, then each numbered line alone; up to this many and one more) is "
        "checked in a worktree of its own, in order, until one passes: a further correction "
        "costs its few tokens and a check, not a call. Its first sample still asks for one "
        "line (live, greedy, one line passed 6 of 7 easy tasks where three passed 4; at the "
        "fix of seven hard ones three passed 3 of 7 where one passed none: "
        "bench/line_samples.py --variant alternatives).")
    mutants: int = Field(
        0, ge=0, le=32, description="Build roles with one_line and line_samples: when a "
        "one-line sample fails (its further corrections too), up to this many mechanical "
        "edits of each line it changed or named (a boundary, * and /, + and -, a +1/-1 "
        "dropped, an integer one more or less or a number the task states, a name one more or "
        "less, two names swapped) are checked like samples, with no call. Each line once a "
        "run; a passing edit is reported as written by no model. 0: none (bench/mutants.py).")
    mutant_lines: int = Field(
        0, ge=0, le=40, description="With mutants: a place asked at of at most this many lines "
        "has every line edited, the chosen ones first. 0: only the lines a sample chose.")
    sample_batch: int = Field(
        1, ge=1, le=8, description="Build roles with samples or line_samples: the samples after "
        "the first that share a prompt and a temperature are asked this many to a call (Chat "
        "Completions' n): the prompt is read once and, on llama.cpp, they are decoded together "
        "(give its server at least this many slots, --parallel). Each reply is still checked in "
        "a worktree of its own, in order, and the first that passes is kept. Over the "
        "Responses API, which answers one reply a call, they are asked one by one.")
    line_max_output: int | None = Field(
        None, gt=0, description="Build roles with one_line: the one-line reply's token cap "
        "(under the model's max_output; a reply cut there loses its unfinished last line), "
        "raised for long code to room for a reason and the code reprinted whole "
        "(engine/oneline.py: reply_cap). None: the model's max_output. Mind reasoning models, "
        "whose reasoning counts.")
    tool_loop: bool = Field(
        True, description="Build roles with one_shot: false drops the tool loop from the "
        "strategy ladder. After the one-shot rungs (and the next models) the attempts then "
        "cycle the sampled requests (the one line, then whole files with the failure as facts) "
        "at the role's highest temperature until the time budget or max_attempts ends (an "
        "attempt with no code to show, nothing pinned or found, still drives the tools): for a "
        "small model that fixes in one reply or not at all (live, the 1.5B's tool loop passed "
        "1 of 446 attempts, its one-shots 87 of 397), time buys new draws instead.")
    fallback: tuple[str, ...] = ()
    max_turns: int = Field(30, ge=1, le=500)
    context_fork_at: float = Field(0.8, gt=0.1, le=0.98)
    context_window_cap: int | None = Field(None, gt=0)
    output_reserve: int | None = Field(None, gt=0)

    @model_validator(mode="after")
    def _ladder_has_a_strategy(self) -> RoleSpec:
        if not self.tool_loop and not self.one_shot:
            raise ValueError("tool_loop = false needs one_shot = true: without the tool loop "
                             "and the one-shot the build has no strategy left; set "
                             "one_shot = true or drop tool_loop = false")
        if self.unpinned_lines_only and not (self.one_shot and self.one_line):
            raise ValueError("unpinned_lines_only = true needs one_shot = true and one_line "
                             "= true (set both, or drop unpinned_lines_only)")
        return self


class RunSettings(_Strict):
    max_attempts: int = Field(3, ge=1, le=20)
    time_budget_s: float | None = Field(
        None, gt=0, description="Wall time a run may take, from its start, spent across the "
        "build strategies (one-shot, the failure as facts, the tool loop, the next model); the "
        "step under way (a build, the planner, an explorer, a judge) is stopped 2 s before it (a "
        "tenth of a smaller budget), so the run's finish falls within it, and the run fails, "
        "saying where the time went (a stopped judge leaves a verified build a success, its "
        "verdict missing). None: only max_attempts bounds the builds.")
    max_reviews: int = Field(1, ge=0, le=5)
    model_attempts: int = Field(
        3, ge=1, le=10, description="HTTP requests per model per call (the first included) "
        "for 5xx, timeouts, refused connections and cut streams, before the fallback chain's "
        "next model.")
    retry_backoff_s: float = Field(
        0.5, ge=0, description="Scale of the jittered exponential wait between those attempts "
        "(a 429's Retry-After is waited as the server says).")
    retry_max_wait_s: float = Field(8.0, ge=0, description="Longest single wait between them.")
    command_timeout_s: float = Field(300.0, gt=0)
    explorer_timeout_s: float = Field(600.0, gt=0, description="A slower explorer is recorded as failed.")
    digest_tokens_per_explorer: int = Field(1500, ge=100)
    digest_tokens_total: int = Field(8000, ge=100)
    protect_tests: bool = Field(
        True, description="Builders may not edit the failing tests the preflight found (they "
        "define the task); a command that changes them has its changes put back before verify.")
    explore_candidates: int = Field(
        4, ge=0, le=12, description="Candidate windows of code an explorer is shown before its "
        "first call (found by searching for its question's names); 0: none, it searches alone.")
    explore_answer_first: bool = Field(
        True, description="An explorer shown candidates answers from them first (only submit "
        "is offered); when no claim of that answer verifies, it is told why and its tools "
        "open.")
    explore_when_pinned: bool = Field(
        False, description="Run the explorers even when the preflight's failures already name "
        "the code to change (by default they are skipped then).")
    first_build: Literal["after_plan", "with_plan", "before_plan"] = Field(
        "after_plan", description="When failing tests pin the code and the build role "
        "one-shots, its first prompt needs no plan. 'after_plan': the planner goes first "
        "(as without a pin); 'with_plan': the first one-shot is asked while the planner works "
        "and used when its prompt is the same (pays off where the two models do not share "
        "cores); 'before_plan': the first one-shot is asked and checked before the planner, "
        "which plans only if the tests still fail.")
    unpinned_questions: Literal["planner", "task"] = Field(
        "planner", description="Who asks the explorers' questions when the preflight's failure "
        "pins no code: 'planner', the plan role; 'task': nobody is asked, the explorers are "
        "asked about the names the task quotes or spells (what a planner's unusable questions "
        "fall back to) and the build sees no plan. Needs verify.commands; a task whose tests "
        "pass, or that has none, is planned as before.")
    plan_when_pinned: bool = Field(
        True, description="Ask the plan role when the preflight's failures already name the "
        "code to change; false: no planner, the build goes on from the failure alone (the "
        "plan's steps reach only the tool loop and the judges, its questions only explorers a "
        "pinned run skips, its diagnosis only the later one-shots). Needs verify.commands; a "
        "human approving the plan, or run.explore_when_pinned, still has it asked.")
    plan_tools_when_pinned: bool = Field(
        True, description="Give the plan role its reading tools even when the preflight's "
        "failures already name the code to change; false: it plans from the failure it is "
        "shown, in one call (a small planner otherwise re-reads what it was given).")
    preflight: bool = Field(True, description="Run the acceptance commands before any model "
                            "call and give the planner and builder their localised failures.")
    preflight_analysis_s: float = Field(
        30.0, gt=0, description="Time the analysis of the preflight's failures may take (what "
        "the tracebacks point at, the symbol map); past it the run goes on with the failures "
        "alone.")
    max_result_mb: int = Field(
        50, ge=1, description="MiB of new or changed files a run may add to the repository; "
        "over it the result is refused before anything is written to the object store.")
    max_result_files: int = Field(
        2000, ge=1, description="New or changed files a run may add to the repository.")
    repo_rules_tokens: int = Field(
        2000, ge=0, description="Cap on the repository's AGENTS.md / CLAUDE.md quoted to the "
        "planner and the builder (0: none).")


class VerifySettings(_Strict):
    commands: tuple[str, ...] = Field((), description="Acceptance commands; these win over the plan's.")


class PolicySettings(_Strict):
    """Command policy for the builder: regexes matched against each command it runs."""

    allow: tuple[str, ...] = Field((), description="Patterns that are always allowed.")
    deny: tuple[str, ...] = Field((), description="Patterns refused on top of the built-in list.")
    secret_allow: tuple[str, ...] = Field(
        (), description="Repository paths (globs such as 'config/dev.env') that tools may read "
        "although they look like secret files (.env, *.pem, *.key, credentials...).")


class SandboxSettings(_Strict):
    """The OS sandbox around every builder and verify command (see ``orchestrator/sandbox.py``).

    A repository's own ``roles.toml`` may set these only once the user trusts it (``trust``).
    """

    mode: Literal["auto", "bwrap", "none"] = Field(
        "auto", description="auto/bwrap: bubblewrap, refusing to run commands where it cannot "
        "start; none: no sandbox at all (a loud warning on every run).")
    file_size_mb: int = Field(256, ge=1, description="Largest file a command may write.")
    memory_mb: int = Field(4096, ge=64, description="Data segment limit per process.")
    cpu_s: int = Field(600, ge=1, description="CPU seconds per process.")
    processes: int = Field(256, ge=8, description="Processes and threads a command may run.")
    process_cgroup: bool = Field(
        True, description="As root (where the process rlimit does not bind), cap processes with "
        "a pids cgroup; it costs ~10 ms per command on cgroup v1. false: no cap as root.")
    tmp_mb: int = Field(
        1024, ge=16, description="RAM-backed scratch in all (the private /tmp, home, /run, /var, "
        "/dev/shm together), at most half of memory_mb, which it counts against.")
    worktree_mb: int = Field(
        2048, ge=1, description="How much the commands may make the worktree grow (measured "
        "after each command); past it the command fails.")
    read_only: tuple[str, ...] = Field(
        (), description="Extra paths the commands may read (a toolchain, a cache); ~ expands.")
    hidden: tuple[str, ...] = Field(
        (), description="Extra paths hidden from commands, on top of the built-in secret list.")


def _role_name(name: str) -> str:
    if not ROLE_NAME.match(name):
        raise ValueError(f"{name!r} is not a role name (lower case letters, digits, '-', '_')")
    return name


RoleName = Annotated[str, AfterValidator(_role_name)]


class PipelineSettings(_Strict):
    """Which roles run, in order. Each role's kind (its agent file) decides its step."""

    steps: tuple[RoleName, ...] = Field(
        DEFAULT_STEPS, description="Role names: one plan, at most one explore, one build, then "
        "any judges (review, check) in the order they run.")
    summarizer: RoleName = Field("summarizer", description="The role that writes handoffs.")

    @property
    def roles(self) -> tuple[str, ...]:
        """Every role a run may call: the steps and the summarizer."""
        return (*self.steps, self.summarizer)


class FleetSettings(_Strict):
    """How a fleet worker treats a run (``orchestrate worker``, ``faces/fleet.py``)."""

    push: bool = Field(
        False, description="Push the run's branch to the job's origin as "
        "refs/heads/orchestrate/<run-id> (with the remote's own git credentials).")
    job_may_set: tuple[str, ...] = Field(
        (), description="On a worker, the protected settings a queued job may set, e.g. "
        "providers.*.base_url, sandbox, trust_repo_config (only the worker owner's own "
        "roles.toml is read for this).")


class RoleMap(_Strict):
    """The resolved role map of one run."""

    providers: dict[str, Provider]
    models: dict[str, ModelSpec]
    roles: dict[RoleName, RoleSpec]
    pipeline: PipelineSettings = PipelineSettings()
    run: RunSettings = RunSettings()
    verify: VerifySettings = VerifySettings()
    policy: PolicySettings = PolicySettings()
    sandbox: SandboxSettings = SandboxSettings()
    fleet: FleetSettings = FleetSettings()
    teams: dict[str, dict[str, Any]] = Field(default_factory=dict)
    team: str | None = None

    def model_for(self, role: Role) -> ModelSpec:
        return self.models[self.roles[role].model]

    def chain(self, role: Role) -> list[str]:
        """The role's model aliases in the order they are tried."""
        spec = self.roles[role]
        return [spec.model, *[m for m in spec.fallback if m != spec.model]]


KeyPath = tuple[str, ...]


def validate(data: dict[str, Any], sources: Mapping[KeyPath, str]) -> RoleMap:
    """The merged map as a ``RoleMap``; a ``ConfigError`` naming the layer that set a bad key."""
    try:
        # JSON mode keeps strict typing (no "8" -> 8) while accepting TOML arrays for tuples.
        roles = RoleMap.model_validate_json(json.dumps(data))
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(str(p) for p in err["loc"])
        raise ConfigError(describe(err, loc, sources, RoleMap)) from None
    _check_references(roles, sources)
    return roles


def _check_references(roles: RoleMap, sources: Mapping[tuple[str, ...], str]) -> None:
    aliases = ", ".join(sorted(roles.models))
    for name, model in roles.models.items():
        if model.provider not in roles.providers:
            src = source_of(("models", name, "provider"), sources)
            known = ", ".join(sorted(roles.providers))
            raise ConfigError(
                f"{src}: models.{name}.provider: unknown provider {model.provider!r} (known: {known})"
            )
    for role in roles.pipeline.roles:
        if role not in roles.roles:
            src = source_of(("pipeline", "steps"), sources)
            raise ConfigError(
                f"{src}: pipeline role {role} has no [roles.{role}]: give it a model there "
                f"(model = ALIAS) or in its agent file (model: ALIAS)")
    for role, spec in roles.roles.items():
        for i, alias in enumerate(roles.chain(role)):
            key = ("roles", role, "model") if i == 0 else ("roles", role, "fallback")
            if alias not in roles.models:
                src = source_of(key, sources)
                hint = (f"; a model: in an agent file is a default: set [roles.{role}] model in "
                        f"the role map, or add [models.{alias}]") if src.endswith(".md") else ""
                raise ConfigError(
                    f"{src}: {'.'.join(key)}: unknown model alias {alias!r} (models: {aliases})"
                    + hint)
            provider_name = roles.models[alias].provider
            _check_effort(roles, role, alias, sources)
            if spec.tier not in roles.providers[provider_name].tiers:
                src = source_of(("roles", role, "tier"), sources)
                offered = ", ".join(roles.providers[provider_name].tiers)
                raise ConfigError(
                    f"{src}: roles.{role}.tier: provider {provider_name!r} (model {alias!r}) has no "
                    f"tier {spec.tier!r} (offered: {offered}; add providers.{provider_name}.tiers.{spec.tier})"
                )


def _check_effort(roles: RoleMap, role: Role, alias: str,
                  sources: Mapping[tuple[str, ...], str]) -> None:
    """A role's effort must be one its models accept (the provider would answer 400)."""
    effort, accepted = roles.roles[role].effort, roles.models[alias].efforts
    if effort is None or accepted is None or effort in accepted:
        return
    src = source_of(("roles", role, "effort"), sources)
    raise ConfigError(
        f"{src}: roles.{role}.effort: model {alias!r} ({roles.models[alias].id}) does not accept "
        f"effort {effort!r} (it takes {', '.join(accepted)}; see models.{alias}.efforts)"
    )
