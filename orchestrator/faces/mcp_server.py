"""``orchestrate mcp``: explore, run, show and runs as Model Context Protocol tools.

Built on the official ``mcp`` SDK's ``MCPServer`` and served over stdio, or over streamable
HTTP on 127.0.0.1 only. Every tool takes and returns typed values, so clients see input and
output schemas. A run reports its events (roles starting, explorers finishing, tests, review) as
MCP progress notifications, and stops cleanly when the client cancels the call: the run is
recorded as stopped, its branch kept, and ``orchestrate resume`` can continue it.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from orchestrator import api
from orchestrator.errors import OrchestrateError, UsageError
from orchestrator.record import events as ev
from orchestrator.record.telemetry import Event, Listener
from orchestrator.results import ExploreResult, RunResult

HOST = "127.0.0.1"
PATCH_CAP = 200_000  # characters of the patch returned inline; the file has all of it
T = TypeVar("T")

RepoArg = Annotated[str | None, Field(
    description="Path of the git repository (default: the one the server was started for).")]


# --- what the tools return -----------------------------------------------------------------------


class Finding(BaseModel):
    """One verified claim, with the citations that checked out."""

    claim: str
    citations: list[str] = Field(description="path:start-end, each checked against the file")
    question: str = Field(description="The sub-question whose explorer found it.")


class ExploreOutput(BaseModel):
    """The verified answer to a question about a repository."""

    question: str
    repo: str
    answer: str = Field(description="The findings' digest, citations included.")
    sub_questions: list[str]
    findings: list[Finding]
    submitted: int = Field(description="Claims the explorers submitted.")
    verified: int = Field(description="Claims kept: at least one citation matched the file.")
    dropped: int = Field(description="Claims dropped because no citation checked out.")
    errors: list[str] = Field(description="Explorers that failed, and why.")
    cost_usd: float


class RunOutput(BaseModel):
    """What a run produced; its branch holds the commit, the patch is inline (capped)."""

    run_id: str
    status: str = Field(description="succeeded | failed | stopped | awaiting_approval")
    reason: str
    branch: str
    commit: str | None
    base_commit: str
    diff_stat: str
    patch: str
    patch_truncated: bool
    tests_passed: bool | None
    attempts: int
    cost_usd: float
    run_dir: str


class RunSummary(BaseModel):
    """One run as `orchestrate runs` lists it."""

    run_id: str
    state: str
    branch: str
    task: str
    cost_usd: float
    age: str
    has_worktree: bool


class RunsOutput(BaseModel):
    runs: list[RunSummary]


class ShowOutput(BaseModel):
    """Everything recorded about one run."""

    run_id: str
    state: str
    task: str
    reason: str
    branch: str
    commit: str | None
    cost_usd: float
    per_role: dict[str, dict[str, Any]]
    sessions: list[dict[str, Any]]
    calls: int


def explore_output(result: ExploreResult) -> ExploreOutput:
    """An ``ExploreResult`` as the explore tool returns it."""
    findings = [
        Finding(claim=c.text, question=e.question,
                citations=[f"{x.path}:{x.start_line}-{x.end_line}" for x in c.citations])
        for e in result.explorers for c in e.claims
    ]
    return ExploreOutput(
        question=result.question, repo=result.repo, answer=result.digest,
        sub_questions=result.sub_questions, findings=findings,
        submitted=sum(e.submitted for e in result.explorers),
        verified=sum(e.verified for e in result.explorers),
        dropped=sum(e.dropped for e in result.explorers),
        errors=[f"{e.question}: {e.error}" for e in result.failures],
        cost_usd=result.cost_usd,
    )


def run_output(result: RunResult) -> RunOutput:
    """A ``RunResult`` as the run tool returns it, with the patch read from the run's files."""
    patch = _read(Path(result.run_dir) / "patch.diff") if result.run_dir else ""
    return RunOutput(
        run_id=result.run_id, status=result.status, reason=result.reason, branch=result.branch,
        commit=result.commit, base_commit=result.base_commit, diff_stat=result.diff_stat,
        patch=patch[:PATCH_CAP], patch_truncated=len(patch) > PATCH_CAP,
        tests_passed=result.tests.passed if result.tests else None, attempts=result.attempts,
        cost_usd=result.cost_usd, run_dir=result.run_dir,
    )


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def progress_message(event: Event) -> str | None:
    """One line for a progress notification, or None for events too small to report."""
    who = event.role or ""
    match event:
        case ev.RunResumed():
            return f"run {event.run_id} resumed"
        case ev.RunStarted():
            return f"run {event.run_id} started on {event.branch}"
        case ev.RoleStarted():
            return f"{who} {event.session} started on {event.model} ({event.tier})"
        case ev.RoleFinished():
            return (f"{who} {event.session} done: {event.turns} turns, "
                    f"{event.tool_calls} tool calls")
        case ev.ToolCalled():
            return f"{who} {event.session}: {event.tool}"
        case ev.ExplorerFinished():
            return (f"explorer {event.session}: {event.verified} claims verified, "
                    f"{event.dropped} dropped" + (f" ({event.error})" if event.error else ""))
        case ev.Forked():
            return f"{who} {event.session} forked into {event.child} ({event.reason})"
        case ev.TestResult():
            return "acceptance " + ("passed" if event.passed else "failed")
        case ev.Verdict():
            return f"review by {who}: {event.verdict}"
        case ev.Warned():
            return f"warning: {event.message}"
        case ev.RunFinished():
            return f"run {event.status}: {event.reason}"
    return None


# --- the server ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class ServerSettings:
    """What every tool call starts from; a call's own ``repo`` argument overrides the repo."""

    repo: Path | None = None
    role_files: tuple[str, ...] = ()
    sets: tuple[str, ...] = ()
    team: str | None = None
    env: Mapping[str, str] | None = None  # None: the server process's environment at call time

    @classmethod
    def checked(cls, repo: Path | None, *, role_files: Sequence[str | os.PathLike[str]] = (),
                sets: Sequence[str] = (), team: str | None = None) -> ServerSettings:
        """Settings whose role map resolves (and is trusted) now, not at the first call."""
        api.resolve_roles(repo, None, role_files, sets, team, env=os.environ)
        return cls(repo=repo, role_files=tuple(str(Path(f).resolve()) for f in role_files),
                   sets=tuple(sets), team=team)

    def repo_for(self, repo: str | None) -> Path:
        return api.repo_root(repo or self.repo)

    def options(self, repo: str | None, listener: Listener) -> api.RunOptions:
        """What a run or an explore of this call is given (its own arguments come on top)."""
        env = dict(os.environ if self.env is None else self.env)
        return api.RunOptions(repo=self.repo_for(repo),
                              role_files=tuple(Path(f) for f in self.role_files),
                              sets=self.sets, team=self.team, env=env, listeners=(listener,))


async def _with_progress(ctx: Context, start: Callable[[Listener], Awaitable[T]]) -> T:
    """Run ``start(listener)``, sending its events as progress; cancelling the call stops it."""
    queue: asyncio.Queue[Event] = asyncio.Queue()
    task = asyncio.ensure_future(start(queue.put_nowait))
    sent = 0
    try:
        while True:
            getter = asyncio.ensure_future(queue.get())
            await asyncio.wait({task, getter}, return_when=asyncio.FIRST_COMPLETED)
            events = [getter.result()] if getter.done() else []
            getter.cancel()
            if task.done():
                events += [queue.get_nowait() for _ in range(queue.qsize())]
            for event in events:
                message = progress_message(event)
                if message:
                    sent += 1  # progress must increase; a run's length is not known up front
                    await ctx.report_progress(sent, None, message)
            if task.done():
                return task.result()
    finally:
        if not task.done():
            task.cancel(msg="cancelled by the MCP client")
            with anyio.CancelScope(shield=True):  # let the run record itself as stopped
                await asyncio.wait({task})


def _tool_error(exc: OrchestrateError) -> ToolError:
    return ToolError(f"{type(exc).__name__}: {exc}")


def _result(summary: str, output: BaseModel, *, ok: bool) -> CallToolResult:
    """Structured output plus its JSON as text; ``is_error`` when the work was not done."""
    data = output.model_dump(mode="json")
    return CallToolResult(
        content=[TextContent(type="text", text=summary),
                 TextContent(type="text", text=json.dumps(data, indent=1))],
        structured_content=data, is_error=not ok,
    )


def build_server(settings: ServerSettings) -> MCPServer:
    """An ``MCPServer`` with the explore, run, show and runs tools."""
    server = MCPServer(
        "orchestrate",
        log_level="WARNING",  # the SDK configures logging; per-request HTTP lines are noise
        instructions=(
            "A coding orchestrator. `explore` answers a question about a repository with "
            "findings whose path:start-end citations were checked against the files (claims "
            "without a valid citation are dropped and counted). `run` plans, explores, edits on "
            "its own branch, runs the acceptance tests and has the change reviewed; the user's "
            "checkout is never modified. `runs` and `show` read back earlier runs."
        ),
    )

    async def explore(
        question: Annotated[str, Field(description="A question about the code.")],
        ctx: Context,
        repo: RepoArg = None,
        parallel: Annotated[int | None, Field(ge=1, le=32,
                                              description="Explorers at once.")] = None,
    ) -> Annotated[CallToolResult, ExploreOutput]:
        """Answer a question about a repository with verified, cited findings. Only reads the files."""
        try:
            result = await _with_progress(ctx, lambda listen: api.aexplore(
                question, options=settings.options(repo, listen), parallel=parallel))
        except OrchestrateError as exc:
            raise _tool_error(exc) from exc
        out = explore_output(result)
        summary = (f"{out.verified} verified finding(s), {out.dropped} claim(s) dropped for "
                   f"citations that did not check out")
        return _result(summary, out, ok=out.verified > 0)

    async def run(
        task: Annotated[str, Field(description="What should be done, in plain words.")],
        ctx: Context,
        repo: RepoArg = None,
        max_usd: Annotated[float | None, Field(ge=0, description="Stop once this much is spent.")] = None,
        max_tokens: Annotated[int | None, Field(ge=0, description="Stop after this many tokens.")] = None,
        include_dirty: Annotated[bool, Field(description="Start from the uncommitted changes too.")] = False,
    ) -> Annotated[CallToolResult, RunOutput]:
        """Plan, explore, build, test and review a task on its own branch; returns the patch."""
        try:
            result = await _with_progress(ctx, lambda listen: api.arun(
                task, options=settings.options(repo, listen), max_usd=max_usd,
                max_tokens=max_tokens, include_dirty=include_dirty))
        except OrchestrateError as exc:
            raise _tool_error(exc) from exc
        out = run_output(result)
        summary = f"run {out.run_id} {out.status}: {out.reason} (branch {out.branch})"
        return _result(summary, out, ok=result.status == "succeeded")

    def runs(repo: RepoArg = None) -> RunsOutput:
        """The runs of a repository: id, state, branch, task, cost, age."""
        try:
            found = api.runs(repo=settings.repo_for(repo))
        except OrchestrateError as exc:
            raise _tool_error(exc) from exc
        return RunsOutput(runs=[RunSummary(**r.summary()) for r in found])

    def show(
        run_id: Annotated[str, Field(description="The run to show (see the runs tool).")],
        repo: RepoArg = None,
    ) -> ShowOutput:
        """Everything recorded about one run: outcome, per role, sessions, calls."""
        try:
            d = api.show(run_id, repo=settings.repo_for(repo))
        except OrchestrateError as exc:
            raise _tool_error(exc) from exc
        report = d.report
        return ShowOutput(
            run_id=d.run_id, state=d.state, task=str(report.get("task", "")),
            reason=str(report.get("reason", "")), branch=str(report.get("branch", "")),
            commit=report.get("commit"), cost_usd=float(report.get("cost_usd", 0.0)),
            per_role=report.get("per_role", {}), calls=len(d.calls),
            sessions=[s.model_dump(mode="json") for s in d.sessions],
        )

    read_only = ToolAnnotations(read_only_hint=True, open_world_hint=False)
    server.add_tool(explore, annotations=read_only)
    server.add_tool(run, annotations=ToolAnnotations(read_only_hint=False, destructive_hint=False,
                                                     open_world_hint=False))
    server.add_tool(runs, annotations=read_only)
    server.add_tool(show, annotations=read_only)
    return server


def serve(settings: ServerSettings, transport: Literal["stdio", "http"] = "stdio",
          port: int = 8765) -> None:
    """Serve until the client goes away (stdio) or Ctrl-C (HTTP on 127.0.0.1:``port``)."""
    server = build_server(settings)
    if transport == "stdio":
        server.run("stdio")
        return
    _check_port(port)
    server.run("streamable-http", host=HOST, port=port)


def _check_port(port: int) -> None:
    with socket.socket() as s:
        try:
            s.bind((HOST, port))
        except OSError:
            raise UsageError(f"port {port} on {HOST} is in use; pass --port with a free one") from None
