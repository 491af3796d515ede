"""LangGraph wiring only, from the run's pipeline:
plan -> approve -> explore x N -> gather -> build <-> verify -> judges (review, checks) -> report.
(With ``run.first_build = "before_plan"`` and a pinned failure the plan node only localises;
a failing first attempt goes back to it for the plan; with ``run.plan_when_pinned = false`` it
never plans a pinned failure, and the attempts follow one another.)

``build_graph(pipeline)`` returns the *uncompiled* graph so that embedders choose persistence;
every agent step is ``nodes.agent_node`` for its role. Routing functions are small, pure and
typed; those that depend on the pipeline's judges are made for it (``judge_routes``).
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any, Literal, cast

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from orchestrator.config.pipeline import (
    BUILD_NODE,
    DEFAULT_PIPELINE,
    EXPLORE_NODE,
    PLAN_NODE,
    Judge,
    Pipeline,
)
from orchestrator.engine import nodes
from orchestrator.engine.nodes import NodeFn
from orchestrator.engine.runtime import RunContext
from orchestrator.state import ExploreTask, Review, RunState
from orchestrator.timing import phase

NodeAdapter = Callable[[str, NodeFn], NodeFn]
Route = Callable[[RunState], str]


def fan_out(state: RunState) -> list[Send] | Literal["gather", "report"]:
    """One explorer per plan question; straight to gather when there is none."""
    if state.plan_rejected:
        return "report"
    questions = state.plan.questions if state.plan else []
    if not questions or state.explore_skipped or state.out_of_time:  # pinned, or no time
        return "gather"
    return [
        Send(EXPLORE_NODE, ExploreTask(question=q, index=i, task=state.task, tests=state.tests))
        for i, q in enumerate(questions)
    ]


def _after_approve(state: RunState) -> Literal["build", "report"]:
    """A pipeline without explorers goes from the plan to the build."""
    return "report" if state.plan_rejected or state.out_of_time else "build"


def _after_gather(state: RunState) -> Literal["build", "report"]:
    """The findings go to the build, unless the time budget ran out before it."""
    return "report" if state.out_of_time else "build"


def _to_approval(after: Callable[[RunState], Any]) -> Callable[[RunState], Any]:
    """After the plan: the approval step when the run asks for one, else where ``after`` goes."""
    def after_plan(state: RunState) -> Any:
        return "approve" if state.approve_plan and state.plan is not None else after(state)

    return after_plan


def _repeating(state: RunState) -> bool:
    """The same failure twice in a row where another attempt is unlikely to help
    (``nodes.repeating``: not after an attempt that changed nothing, nor before a new rung)."""
    return nodes.repeating(state)


def rounds(state: RunState, judge: Judge) -> int:
    """How many times the judge has run."""
    return state.reviews if judge.kind == "review" else state.check_rounds.get(judge.role, 0)


def verdict(state: RunState, judge: Judge) -> Review | None:
    """The judge's last verdict."""
    return state.review if judge.kind == "review" else state.checks.get(judge.role)


def _next_judge(state: RunState, judges: Sequence[Judge], after: int) -> str:
    """The first judge after position ``after`` with rounds left, else the report."""
    for judge in judges[after + 1:]:
        if rounds(state, judge) < state.max_reviews:
            return judge.node
    return "report"


def judge_routes(judges: Sequence[Judge]) -> tuple[Route, list[Route]]:
    """The routes after verify and after each judge, for this pipeline's judges."""

    def after_verify(state: RunState) -> str:
        if state.verify is not None and state.verify.passed:
            return _next_judge(state, judges, -1)
        if state.attempts >= state.max_attempts or state.out_of_time or _repeating(state):
            return "report"
        return PLAN_NODE if state.plan_deferred else BUILD_NODE

    def after_judge(i: int) -> Route:
        def route(state: RunState) -> str:
            if state.out_of_time:  # the judge was stopped: its last verdict is not this one
                return "report"
            said = verdict(state, judges[i])
            if said is not None and said.verdict == "request_changes":
                return BUILD_NODE if state.attempts < state.max_attempts else "report"
            return _next_judge(state, judges, i)

        return route

    return after_verify, [after_judge(i) for i in range(len(judges))]


after_verify, (after_review,) = judge_routes(DEFAULT_PIPELINE.judges)


def run_nodes(pipeline: Pipeline) -> list[tuple[str, NodeFn]]:
    """The nodes of a run, by graph name."""
    found: list[tuple[str, NodeFn]] = [
        (PLAN_NODE, nodes.agent_node(pipeline.plan, "plan", PLAN_NODE)), ("approve", nodes.approve)]
    if pipeline.explore:
        # the explorer node takes a Send payload (a TypedDict), which LangGraph's overloads
        # cannot express
        found += [(EXPLORE_NODE, cast(Any, nodes.explore_node(pipeline.explore))),
                  ("gather", nodes.gather)]
    if pipeline.build:
        found += [(BUILD_NODE, nodes.agent_node(pipeline.build, "build", BUILD_NODE)),
                  ("verify", nodes.verify)]
    found += [(j.node, nodes.agent_node(j.role, j.kind, j.node)) for j in pipeline.judges]
    return [*found, ("report", nodes.report)]


def inline(route: Callable[[RunState], Any]) -> Callable[[RunState], Any]:
    """``route`` as a coroutine function. LangGraph runs a plain function given as a
    conditional edge on a thread pool when the graph runs async: a round trip to a worker
    thread and back for every edge taken (~0.5 ms on a busy 2-core box, against microseconds
    for the routing itself, which is pure and tiny)."""

    @functools.wraps(route)
    async def routed(state: RunState) -> Any:
        return route(state)

    return routed


def timed(name: str, node: NodeFn) -> NodeFn:
    """``node`` with its own work timed as the run's ``node`` phase (``timing.py``)."""

    @functools.wraps(node)
    async def timed_node(*args: Any, **kwargs: Any) -> dict[str, Any]:
        with phase("node"):
            return await node(*args, **kwargs)

    return timed_node


def build_graph(
    pipeline: Pipeline = DEFAULT_PIPELINE,
    *,
    adapt: NodeAdapter | None = None,
    state_schema: type[RunState] = RunState,
    context_schema: type[Any] = RunContext,
    input_schema: type[Any] | None = None,
    output_schema: type[Any] | None = None,
) -> StateGraph[Any, Any, Any, Any]:
    """The run's graph for ``pipeline``. ``adapt(name, node)`` may wrap each node, and the
    schemas may be widened: the platform graph rebuilds every node's live context that way
    (``platform.py``)."""
    g = StateGraph(state_schema, context_schema=context_schema, input_schema=input_schema,
                   output_schema=output_schema)
    for name, node in run_nodes(pipeline):
        g.add_node(name, adapt(name, node) if adapt else node)
    g.add_edge(START, PLAN_NODE)
    after = fan_out if pipeline.explore else _after_approve
    ahead = [EXPLORE_NODE, "gather", "report"] if pipeline.explore else [BUILD_NODE, "report"]
    # the approval step runs only when a human is to be asked (a step of its own costs a
    # checkpoint); a checkpoint taken before the plan was approved resumes at it all the same
    g.add_conditional_edges(PLAN_NODE, inline(_to_approval(after)), ["approve", *ahead])
    g.add_conditional_edges("approve", inline(after), ahead)
    if pipeline.explore:
        g.add_edge(EXPLORE_NODE, "gather")
        g.add_conditional_edges("gather", inline(_after_gather), [BUILD_NODE, "report"])
    g.add_edge(BUILD_NODE, "verify")
    judges = pipeline.judges
    after_verify, after_judges = judge_routes(judges)
    g.add_conditional_edges("verify", inline(after_verify),
                            [BUILD_NODE, PLAN_NODE, "report", *(j.node for j in judges)])
    for i, (judge, route) in enumerate(zip(judges, after_judges, strict=True)):
        g.add_conditional_edges(judge.node, inline(route),
                                [BUILD_NODE, "report", *(j.node for j in judges[i + 1:])])
    g.add_edge("report", END)
    return g


def build_explore_graph(
    pipeline: Pipeline = DEFAULT_PIPELINE, *, split: bool = True,
    adapt: NodeAdapter | None = None,
) -> StateGraph[RunState, RunContext, RunState, RunState]:
    """The question split and the swarm only: plan -> explore x N -> gather. Without ``split``
    the input state's plan already holds the questions and no planner runs."""
    if pipeline.explore is None:
        raise ValueError("the pipeline has no explore role")
    g = StateGraph(RunState, context_schema=RunContext)
    named: list[tuple[str, NodeFn]] = (
        [(PLAN_NODE, nodes.agent_node(pipeline.plan, "plan", PLAN_NODE))] if split else [])
    for name, node in (*named, (EXPLORE_NODE, cast(Any, nodes.explore_node(pipeline.explore))),
                       ("gather", nodes.gather)):
        g.add_node(name, adapt(name, node) if adapt else node)
    if split:
        g.add_edge(START, PLAN_NODE)
    g.add_conditional_edges(PLAN_NODE if split else START, inline(fan_out),
                            [EXPLORE_NODE, "gather"])
    g.add_edge(EXPLORE_NODE, "gather")
    g.add_edge("gather", END)
    return g
