"""Driving an open run's graph: to its end, to a pause for a plan's approval, or to a budget.

``drive_run`` runs the run graph of an ``OpenRun`` (``lifecycle.py``): a new run from its
start, a resumed one from its last checkpoint, its worktree put back first as that checkpoint
saw it, so the call journal replays exactly. ``drive_explore`` runs the explore graph, which
keeps no checkpoints. Each graph is compiled once per process and pipeline; a run copies the
run graph with its own checkpointer.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import time
from collections.abc import Mapping
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.types import Command

from orchestrator.config.pipeline import Pipeline
from orchestrator.config.schema import RoleMap
from orchestrator.engine.graph import build_explore_graph, build_graph, timed
from orchestrator.engine.openrun import OpenRun
from orchestrator.engine.options import Approver
from orchestrator.engine.runtime import RunContext
from orchestrator.errors import BudgetExhausted, UsageError
from orchestrator.record.events import WorktreeRestored
from orchestrator.state import Plan, RunState


async def drive_run(run: OpenRun, approver: Approver | None) -> tuple[RunState, bool]:
    """Run the graph to its end or to a pause; True in the result means a plan awaits approval
    (``approver``, when given, decides it instead). A spent budget stops the run cleanly at its
    last checkpoint, which ``resume`` continues."""
    ctx = run.ctx
    config: RunnableConfig = {
        "configurable": {"thread_id": ctx.run_id},
        "max_concurrency": _parallel(ctx.roles, ctx.pipeline),  # only explorers fan out
        "recursion_limit": 200,
    }
    opening = time.monotonic()
    if isinstance(run.saver, BaseException):  # opening it failed: the run records why
        raise run.saver
    app = _run_graph(ctx.pipeline).copy(update={"checkpointer": run.saver})
    ctx.telemetry.phases.add("setup", opening, time.monotonic())
    initial = run.initial_state()
    payload: Any = initial
    if initial is None:
        snapshot = await app.aget_state(config)
        if not snapshot.values:
            raise UsageError(f"run {ctx.run_id} has no checkpoint to resume from")
        await _restore_worktree(ctx, RunState.model_validate(snapshot.values))
        if snapshot.interrupts:
            payload = await _decide(approver, snapshot.values)
            if payload is None:
                return RunState.model_validate(snapshot.values), True
    while True:
        try:
            with ctx.telemetry.recording():
                out = await app.ainvoke(payload, config, context=ctx, durability="sync")
        except BudgetExhausted as exc:  # stop cleanly at the last checkpoint
            snapshot = await app.aget_state(config)
            state = RunState.model_validate(snapshot.values or initial)
            return state.model_copy(update={"reason": str(exc)}), False
        if "__interrupt__" not in out:
            return RunState.model_validate(out), False
        payload = await _decide(approver, out)
        if payload is None:
            values = {k: v for k, v in out.items() if k != "__interrupt__"}
            return RunState.model_validate(values), True


async def drive_explore(run: OpenRun, *, split: bool) -> RunState:
    """Answer the run's question with the explorer swarm; ``split=False`` skips the planner
    (one explorer answers the question as asked)."""
    ctx, question = run.ctx, run.task
    app = _explore_graph(ctx.pipeline, split)
    preset = None if split else Plan(goal=question, steps=[], questions=[question])
    with ctx.telemetry.recording():
        out = await app.ainvoke(
            RunState(task=question, mode="explore", plan=preset),
            {"max_concurrency": _parallel(ctx.roles, ctx.pipeline), "recursion_limit": 50},
            context=ctx,
        )
    return RunState.model_validate(out)


def _parallel(roles: RoleMap, pipeline: Pipeline) -> int:
    """Explorers in flight at once: the explore role's ``parallel``."""
    return roles.roles[pipeline.explore].parallel if pipeline.explore else 1


@functools.cache
def _run_graph(pipeline: Pipeline) -> Any:
    """The run graph of a pipeline, compiled once per process; each run copies it with its
    checkpointer."""
    return build_graph(pipeline, adapt=timed).compile()


@functools.cache
def _explore_graph(pipeline: Pipeline, split: bool) -> Any:
    """The explore graph, compiled once per process (it keeps no checkpoints)."""
    return build_explore_graph(pipeline, split=split, adapt=timed).compile()


async def _restore_worktree(ctx: RunContext, state: RunState) -> None:
    """Put the worktree back to what the last checkpoint saw, so the journal replays exactly."""
    ws = ctx.workspace
    if ws is None:
        return
    tree = state.worktree_tree or None
    await asyncio.to_thread(ws.restore, tree)
    ctx.telemetry.emit(WorktreeRestored(tree=tree or "start commit"))


async def _decide(approver: Approver | None, values: Mapping[str, Any]) -> Command | None:
    if approver is None:
        return None
    plan = RunState.model_validate(
        {k: v for k, v in values.items() if k != "__interrupt__"}).plan
    decision = approver(plan)  # type: ignore[arg-type]
    if inspect.isawaitable(decision):
        decision = await decision
    return Command(resume=bool(decision))
