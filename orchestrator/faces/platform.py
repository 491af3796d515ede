"""The graph served on LangGraph's platform (``langgraph.json``): the real run graph, node by node.

Studio shows plan, approve (a real ``interrupt`` it can answer), the explorer fan-out, gather,
build, verify, review and report with their state, checkpointed by the platform's own
checkpointer. The graph comes from the same ``build_graph`` the CLI runs; only each node is
adapted. The live parts a node needs (model clients, the worktree, telemetry, the call journal)
cannot cross the platform's JSON boundary, so the adapter rebuilds them from JSON-able config —
the run's LangGraph *context* (repository, role files, overrides) and its thread id — and keeps
them per thread in this process while the graph runs. A rebuilt run carries on like
``orchestrate resume``: model calls that finished before are answered from the run's journal.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from langgraph.config import get_config
from langgraph.errors import GraphInterrupt
from langgraph.runtime import Runtime
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.config.layers import resolve_setup
from orchestrator.config.pipeline import DEFAULT_PIPELINE, Pipeline, pipeline_of
from orchestrator.engine.graph import NodeFn, build_graph
from orchestrator.engine.lifecycle import open_run
from orchestrator.engine.openrun import OpenRun
from orchestrator.engine.options import RunOptions
from orchestrator.errors import OrchestrateError, UsageError
from orchestrator.record.telemetry import Event
from orchestrator.record.tracing import configure_from_env
from orchestrator.state import RunState
from orchestrator.workspace.repo import repo_root

RUN_PREFIX = "lg-"  # run ids of platform threads: lg-<thread id>
FINISHED = ("succeeded", "failed")


class PlatformRunError(OrchestrateError, RuntimeError):
    """A run on the platform failed; the message is the run's own error.

    A ``RuntimeError`` too, because the platform shows only such built-in errors' messages.
    """

    code = "platform_run"


class PlatformConfig(BaseModel):
    """The run's LangGraph context: where and with which role map, as plain data."""

    model_config = ConfigDict(extra="forbid")

    repo: str = Field("", description="Path of a git repository on the server's machine "
                                      "(default: the server's working directory).")
    role_files: list[str] = Field(default_factory=list, description="Extra role map files.")
    sets: list[str] = Field(default_factory=list,
                            description="Role map overrides, as --set, e.g. explorer.parallel=4.")
    team: str | None = Field(None, description="A [teams.NAME] overlay of the role map.")
    include_dirty: bool = Field(False, description="Start from the uncommitted changes too.")


class PlatformInput(BaseModel):
    """What a platform client sends to start a run."""

    task: str = Field(description="What should be done, in plain words.")
    approve_plan: bool = Field(False, description="Pause after planning for a human's approval.")


class PlatformState(RunState):
    """The run's state plus the platform run's id and, at the end, its ``RunResult`` as JSON."""

    run_id: str = ""
    result: dict[str, Any] | None = None


class PlatformOutput(BaseModel):
    """What a finished platform run returns."""

    run_id: str = ""
    status: str = "running"
    reason: str = ""
    result: dict[str, Any] | None = None


def event_json(event: Event) -> dict[str, Any]:
    """A telemetry event as the plain data of a ``custom`` stream chunk (the same JSON as a
    line of ``events.jsonl``)."""
    return event.model_dump(mode="json")


class _Stream:
    """Forwards the run's events to the current platform run's stream, once there is one."""

    def __init__(self) -> None:
        self.writer: Callable[[Any], None] | None = None
        self._waiting: list[dict[str, Any]] = []

    def __call__(self, event: Event) -> None:
        if event.kind == "progress":
            return
        if self.writer is None:
            self._waiting.append(event_json(event))
        else:
            self.writer(event_json(event))

    def attach(self, writer: Callable[[Any], None]) -> None:
        self.writer = writer
        for chunk in self._waiting:
            writer(chunk)
        self._waiting.clear()


@dataclass
class _Live:
    """One thread's open run in this process."""

    run: OpenRun
    stream: _Stream
    gate: asyncio.Semaphore
    resumed: bool


def run_id_for(thread_id: str) -> str:
    """The run of a platform thread, the same after a server restart."""
    return RUN_PREFIX + thread_id


def _refuse_a_second_task(config: PlatformConfig, run_id: str) -> None:
    """A thread runs one task: its run, once finished, is not started again."""
    top = repo_root(config.repo or None)
    status = _json(top / "workspaces" / run_id / "report.json").get("status")
    if status in FINISHED:
        raise UsageError(f"this thread already ran a task (run {run_id}, {status}); "
                         "start a new thread for a new task")


def _json(path: Path) -> dict[str, Any]:
    try:
        return dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError):
        return {}


class LiveRuns:
    """The runs this process has open, one per thread; a thread's run is rebuilt on a miss."""

    def __init__(self, pipeline: Pipeline = DEFAULT_PIPELINE) -> None:
        self.pipeline = pipeline  # what the served graph was built for
        self._open: dict[str, _Live] = {}
        self._building: dict[str, asyncio.Lock] = {}

    async def acquire(self, thread_id: str, config: PlatformConfig, task: str,
                      approve_plan: bool, *, starting: bool) -> _Live:
        lock = self._building.setdefault(thread_id, asyncio.Lock())
        async with lock:
            live = self._open.get(thread_id)
            if live is None:
                live = await self._reopen(thread_id, config, task, approve_plan,
                                          starting=starting)
                self._open[thread_id] = live
            return live

    async def _reopen(self, thread_id: str, config: PlatformConfig, task: str,
                      approve_plan: bool, *, starting: bool) -> _Live:
        """The thread's run, made by its first node or re-opened (after a pause, a restart)
        as ``orchestrate resume`` does, through ``lifecycle.open_run`` like every run."""
        run_id = run_id_for(thread_id)
        if starting:
            await asyncio.to_thread(_refuse_a_second_task, config, run_id)
        stream = _Stream()
        options = RunOptions(repo=Path(config.repo) if config.repo else None,
                             role_files=tuple(Path(f) for f in config.role_files),
                             sets=tuple(config.sets), team=config.team,
                             include_dirty=config.include_dirty, approve_plan=approve_plan,
                             listeners=(stream,))
        run = await open_run("node", options, task, run_id=run_id, served=self.pipeline)
        roles, explore = run.ctx.roles, run.ctx.pipeline.explore
        parallel = roles.roles[explore].parallel if explore else 1
        return _Live(run, stream, asyncio.Semaphore(parallel), run.resumed)

    async def release(self, thread_id: str, *, final: RunState | None = None,
                      pending: bool = False, error: BaseException | None = None) -> Any:
        """Finish (``final``) or stop (``error``) a thread's run, then close it."""
        live = self._open.pop(thread_id, None)
        if live is None:
            return None
        result = None
        try:
            if final is not None:
                result = await live.run.finish(final, pending)
            elif error is not None:
                await asyncio.to_thread(live.run.stop, error)
        finally:
            await live.run.aclose()
        return result

    def adapt(self, name: str, node: NodeFn) -> NodeFn:
        """``node`` with its live ``RunContext`` rebuilt from the platform run's config."""

        async def platform_node(state: Any, runtime: Runtime[Any]) -> dict[str, Any]:
            try:
                return await run_node(state, runtime)
            except PlatformRunError:
                raise
            except OrchestrateError as exc:
                raise PlatformRunError(f"{type(exc).__name__}: {exc}") from exc

        async def run_node(state: Any, runtime: Runtime[Any]) -> dict[str, Any]:
            thread_id = _thread_id(runtime)
            config = _config(runtime.context)
            task = state["task"] if isinstance(state, dict) else state.task  # explore: a Send
            approve_plan = bool(getattr(state, "approve_plan", False))
            live = await self.acquire(thread_id, config, task, approve_plan,
                                      starting=name == "plan")
            live.stream.attach(runtime.stream_writer)
            inner = runtime.override(context=live.run.ctx)
            try:
                if name == "explore":
                    async with live.gate:  # the role map's explorer.parallel, in this process
                        with live.run.telemetry.recording("node"):
                            update = await node(state, inner)
                else:
                    with live.run.telemetry.recording("node"):
                        update = await node(state, inner)
            except GraphInterrupt:  # the plan awaits a human: report that, free the run
                await self.release(thread_id, final=RunState.model_validate(_values(state)),
                                   pending=True)
                raise
            except BaseException as exc:
                await self.release(thread_id, error=exc)
                raise
            return await self._after(name, thread_id, live, state, update)

        platform_node.__name__ = name
        return platform_node

    async def _after(self, name: str, thread_id: str, live: _Live, state: Any,
                     update: dict[str, Any]) -> dict[str, Any]:
        if name == "plan":
            roles = live.run.ctx.roles.run
            return {**update, "run_id": live.run.ctx.run_id, "max_attempts": roles.max_attempts,
                    "max_reviews": roles.max_reviews}
        if name == "report":
            final = RunState.model_validate({**_values(state), **update})
            result = await self.release(thread_id, final=final)
            return {**update, "result": result.model_dump(mode="json")}
        return update


def _values(state: Any) -> dict[str, Any]:
    """The ``RunState`` fields of the platform state."""
    data = state.model_dump() if isinstance(state, BaseModel) else dict(state)
    return {k: v for k, v in data.items() if k in RunState.model_fields}


def _thread_id(runtime: Runtime[Any]) -> str:
    info = runtime.execution_info
    thread_id = info.thread_id if info is not None else None
    thread_id = thread_id or get_config().get("configurable", {}).get("thread_id")
    if not thread_id:
        raise UsageError("the platform graph runs on a thread: compile it with a checkpointer "
                         "and pass configurable.thread_id")
    return str(thread_id)


def _config(context: Any) -> PlatformConfig:
    if context is None:
        return PlatformConfig()
    if isinstance(context, PlatformConfig):
        return context
    return PlatformConfig.model_validate(context)


def served_pipeline(env: Mapping[str, str]) -> Pipeline:
    """The pipeline of the server's working directory (its repository's role map and agents),
    or the packaged one outside a repository."""
    try:
        top = repo_root(None)
    except UsageError:
        top = None
    # only the pipeline is read here, never a provider or a policy: each run resolves (and
    # trust-checks) its own role map
    role_map, registry, _ = resolve_setup(top, None, env=env, trust_repo_config=True)
    return pipeline_of(role_map, registry)


def build_platform_graph(pipeline: Pipeline = DEFAULT_PIPELINE) -> Any:
    """The uncompiled platform graph: ``build_graph`` for ``pipeline``, every node adapted."""
    live = LiveRuns(pipeline)
    return build_graph(pipeline, adapt=live.adapt, state_schema=PlatformState,
                       context_schema=PlatformConfig, input_schema=PlatformInput,
                       output_schema=PlatformOutput)


def make_graph() -> Any:
    """The compiled platform graph for the server's repository; the platform brings its own
    checkpointer."""
    configure_from_env(os.environ)  # OTLP spans when the standard variables ask for them
    return build_platform_graph(served_pipeline(os.environ)).compile(name="orchestrate")
