"""LangGraph wiring only: plan -> approve -> explore x N -> gather -> build <-> verify -> review -> report.

``build_graph()`` returns the *uncompiled* graph so that embedders choose persistence;
routing functions are small, pure and typed.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, Literal, cast

from langgraph.graph import END, START, StateGraph
from langgraph.types import Send

from . import nodes
from .runtime import RunContext
from .state import ExploreTask, RunState

# The explorer node takes a Send payload (a TypedDict), which LangGraph's overloads cannot express.
_EXPLORE = cast(Any, nodes.explore)


def fan_out(state: RunState) -> list[Send] | Literal["gather", "report"]:
    """One explorer per plan question; straight to gather when there is none."""
    if state.plan_rejected:
        return "report"
    questions = state.plan.questions if state.plan else []
    if not questions:
        return "gather"
    return [
        Send("explore", ExploreTask(question=q, index=i, task=state.task, tests=state.tests))
        for i, q in enumerate(questions)
    ]


def after_verify(state: RunState) -> Literal["build", "review", "report"]:
    if state.verify is not None and state.verify.passed:
        return "review" if state.reviews < state.max_reviews else "report"
    if state.attempts >= state.max_attempts or _repeating(state):
        return "report"
    return "build"


def _repeating(state: RunState) -> bool:
    """The same failure twice in a row: another attempt is unlikely to help."""
    return len(state.failures) >= 2 and state.failures[-1] == state.failures[-2]


def after_review(state: RunState) -> Literal["build", "report"]:
    if state.review is not None and state.review.verdict == "request_changes":
        return "build" if state.attempts < state.max_attempts else "report"
    return "report"


NodeFn = Callable[..., Awaitable[dict[str, Any]]]
NodeAdapter = Callable[[str, NodeFn], NodeFn]
RUN_NODES: tuple[tuple[str, NodeFn], ...] = (
    ("plan", nodes.plan), ("approve", nodes.approve), ("explore", _EXPLORE),
    ("gather", nodes.gather), ("build", nodes.build), ("verify", nodes.verify),
    ("review", nodes.review), ("report", nodes.report),
)


def build_graph(
    *,
    adapt: NodeAdapter | None = None,
    state_schema: type[RunState] = RunState,
    context_schema: type[Any] = RunContext,
    input_schema: type[Any] | None = None,
    output_schema: type[Any] | None = None,
) -> StateGraph[Any, Any, Any, Any]:
    """The run's graph. ``adapt(name, node)`` may wrap each node, and the schemas may be
    widened: the platform graph rebuilds every node's live context that way (``platform.py``)."""
    g = StateGraph(state_schema, context_schema=context_schema, input_schema=input_schema,
                   output_schema=output_schema)
    for name, node in RUN_NODES:
        g.add_node(name, adapt(name, node) if adapt else node)
    g.add_edge(START, "plan")
    g.add_edge("plan", "approve")
    g.add_conditional_edges("approve", fan_out, ["explore", "gather", "report"])
    g.add_edge("explore", "gather")
    g.add_edge("gather", "build")
    g.add_edge("build", "verify")
    g.add_conditional_edges("verify", after_verify)
    g.add_conditional_edges("review", after_review)
    g.add_edge("report", END)
    return g


def build_explore_graph(*, split: bool = True) -> StateGraph[RunState, RunContext, RunState, RunState]:
    """The question split and the swarm only: plan -> explore x N -> gather. Without ``split``
    the input state's plan already holds the questions and no planner runs."""
    g = StateGraph(RunState, context_schema=RunContext)
    if split:
        g.add_node("plan", nodes.plan)
    g.add_node("explore", _EXPLORE)
    g.add_node("gather", nodes.gather)
    if split:
        g.add_edge(START, "plan")
    g.add_conditional_edges("plan" if split else START, fan_out, ["explore", "gather"])
    g.add_edge("explore", "gather")
    g.add_edge("gather", END)
    return g
