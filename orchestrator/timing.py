"""Where a run's wall time goes: named phases recorded as intervals, and a split of the wall
time among them.

A phase is a stretch of one kind of work: ``model`` (an HTTP exchange with a model server, from
the request on the wire to the end of its stream), ``tool``, ``journal``, ``quota``, ``request``
(building a request), ``git``, ``call`` (the rest of a model call on our side), ``node`` (a graph
node's own work), ``graph`` (LangGraph between nodes: scheduling, checkpoints), ``setup`` (opening
the run's journal, sandbox, checkpointer and graph) and ``finish`` (the result and its report). Code marks a
phase with ``with phase("journal"):``; the interval goes to the recorder of the run the code works
for, found in a context variable the run sets (asyncio tasks and worker threads inherit it), so
the layers below the session need no handle on the run's telemetry; with no recorder it costs a
lookup. ``Phases.split`` gives every instant of the wall time to the first phase in ``ORDER``
active then, so the parts add up to the wall time however phases overlap (parallel explorers).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar, Token

ORDER = ("model", "tool", "journal", "quota", "request", "git", "call", "node", "graph", "setup",
         "finish")
"""Phases by precedence: an instant where several are active counts for the first."""

Interval = tuple[float, float]


class Phases:
    """The wall-clock intervals (``time.monotonic``) of one run, per phase."""

    def __init__(self) -> None:
        self.intervals: dict[str, list[Interval]] = defaultdict(list)

    def add(self, kind: str, start: float, end: float) -> None:
        self.intervals[kind].append((start, end))

    @contextmanager
    def span(self, kind: str) -> Iterator[None]:
        start = time.monotonic()
        try:
            yield
        finally:
            self.intervals[kind].append((start, time.monotonic()))

    def union(self, *kinds: str) -> float:
        """Seconds during which at least one of ``kinds`` was active."""
        return _length(_merge([i for k in kinds for i in self.intervals.get(k, ())]))

    def split(self, start: float, end: float, order: Sequence[str] = ORDER) -> dict[str, float]:
        """Seconds of ``[start, end]`` per phase by precedence; ``other`` is the rest."""
        kinds = [*order, *(k for k in self.intervals if k not in order)]
        out: dict[str, float] = {}
        covered: list[Interval] = []
        for kind in kinds:
            clipped = [(max(a, start), min(b, end)) for a, b in self.intervals.get(kind, ())
                       if b > start and a < end]
            merged = _merge(covered + clipped)
            out[kind] = _length(merged) - _length(covered)
            covered = merged
        out["other"] = max(0.0, (end - start) - _length(covered))
        return out


def _merge(intervals: Iterable[Interval]) -> list[Interval]:
    merged: list[Interval] = []
    for a, b in sorted(intervals):
        if merged and a <= merged[-1][1]:
            if b > merged[-1][1]:
                merged[-1] = (merged[-1][0], b)
        else:
            merged.append((a, b))
    return merged


def _length(merged: Iterable[Interval]) -> float:
    return sum(b - a for a, b in merged)


_current: ContextVar[Phases | None] = ContextVar("orchestrate_phases", default=None)


def activate(phases: Phases) -> Token[Phases | None]:
    """Record the phases of the code that runs from here (and the tasks it starts) into ``phases``."""
    return _current.set(phases)


def deactivate(token: Token[Phases | None]) -> None:
    _current.reset(token)


@contextmanager
def phase(kind: str) -> Iterator[None]:
    """Time the enclosed work as ``kind`` for the run it belongs to, if one is recording."""
    phases = _current.get()
    if phases is None:
        yield
        return
    start = time.monotonic()
    try:
        yield
    finally:
        phases.intervals[kind].append((start, time.monotonic()))


def mark(kind: str, start: float, end: float) -> None:
    """Record an interval measured elsewhere (e.g. a model exchange) for the current run."""
    phases = _current.get()
    if phases is not None:
        phases.intervals[kind].append((start, end))


_sent: ContextVar[list[float] | None] = ContextVar("orchestrate_sent", default=None)


async def on_request(request: object) -> None:
    """An HTTP client's request hook: notes when a request goes on the wire, for ``exchange``."""
    slot = _sent.get()
    if slot is not None:
        slot.append(time.monotonic())


@contextmanager
def exchange(started: float) -> Iterator[list[float]]:
    """One model call on our side of the wire: ``request`` from ``started`` until the request is
    sent (``on_request`` notes it in the list this yields), ``model`` from then to the end of
    the reply; all ``model`` when no hook said when the request left."""
    slot: list[float] = []
    token = _sent.set(slot)
    try:
        yield slot
    finally:
        _sent.reset(token)
        phases = _current.get()
        if phases is not None:
            end = time.monotonic()
            sent = slot[0] if slot else started
            phases.add("request", started, sent)
            phases.add("model", sent, end)
