"""The run's time budget (``run.time_budget_s``), which bounds every model call of the run.

A build attempt under way is stopped when it runs out (``building.attempt``); so are the
planner's session, each explorer's and each judge's (``bounded``): a step the budget stops
leaves ``out_of_time`` in the state, and the run goes straight to its report, which fails it
and says where the time went. All of them stop ``finish_reserve`` before the budget, so the
run's finish (the tree read, the commit, the patch, the report) falls within it too. Without
this a slow planner and explorers overran a 300 s budget to 552 s in the live r49 suite (the
planner took 268 s on two cores another job shared, the explorers 284 s more), where only the
builds had been bounded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar

from orchestrator.engine.runtime import RunContext

T = TypeVar("T")

FINISH_RESERVE_S = 2.0
"""Seconds kept back from a time budget for the run's finish once a step is stopped. In the
r21 live suite, 19 runs stopped by the budget finished 0.03-0.93 s after it (a stopped stream
closed, the tree read, the commit and the patch written): 2 s is twice the worst."""


class OutOfTime(Exception):
    """The run's time budget stopped a step (``bounded``)."""


def finish_reserve(budget: float) -> float:
    """What ``time_left`` keeps back of ``budget`` for the run's finish: ``FINISH_RESERVE_S``,
    or a tenth of a budget too small to spare it."""
    return min(FINISH_RESERVE_S, budget / 10)


def time_left(ctx: RunContext) -> float | None:
    """Seconds the run's steps may still take of ``run.time_budget_s`` (None: no budget): the
    budget from the run's start, less the finish's reserve (``finish_reserve``)."""
    budget = ctx.roles.run.time_budget_s
    if budget is None:
        return None
    return budget - finish_reserve(budget) - (time.monotonic() - ctx.telemetry.started)


def ran_out(ctx: RunContext) -> str:
    """What a stopped step's event and the run's reason begin with."""
    return f"the time budget of {ctx.roles.run.time_budget_s:g} s (run.time_budget_s) ran out"


def spent(ctx: RunContext) -> bool:
    """Whether the budget has run out (never, without one)."""
    left = time_left(ctx)
    return left is not None and left <= 0


async def bounded(ctx: RunContext, work: Callable[[], Awaitable[T]]) -> T:
    """``work()``, stopped when the run's time budget runs out (``OutOfTime``); not started
    when it has. A timeout of the work's own (a model call's) is raised as it is."""
    left = time_left(ctx)
    if left is None:
        return await work()
    if left <= 0:
        raise OutOfTime
    timeout = asyncio.timeout(left)
    try:
        async with timeout:
            return await work()
    except TimeoutError:
        if timeout.expired():
            raise OutOfTime from None
        raise
