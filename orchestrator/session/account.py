"""What one session tells the run: that it started (on which model, for what), each model call
(its usage and timing, live ticks while it streams, the share of the window it filled), each
tool it ran, and that it finished, with its counts.

The tool loop (``loop.py``) and the one-shot build (``engine/oneshot.py``) both speak through
an ``Account``, so their sessions read the same in the events, the live display, the journal's
time split and the report.
"""

from __future__ import annotations

import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from orchestrator.config.kinds import Kind
from orchestrator.models.base import Completion, ModelClient, Route, cost_usd
from orchestrator.record.events import (
    Progress,
    Purpose,
    RoleFinished,
    RoleStarted,
    ToolCalled,
    Warned,
)
from orchestrator.record.telemetry import Telemetry
from orchestrator.tools.base import ToolOutcome

PROGRESS_EVERY_S = 0.1  # a streaming tick at most this often per call: a live display's pace


@dataclass
class SessionOutcome:
    """What a finished session produced; counts cover the whole lineage of forks."""

    session: str
    payload: BaseModel
    tool_calls: int
    turns: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    forks: int = 0
    peak_context: float = 0.0
    lineage: tuple[str, ...] = ()


@dataclass
class Account:
    """One session's telemetry and counts. A fork goes on in the same account under the id of
    the child (``forked``): the counts and the peak cover the whole lineage."""

    telemetry: Telemetry
    role: str
    session: str
    kind: Kind  # what the role is (its agent file's kind)
    tool_calls: int = 0
    turns: int = 0
    forks: int = 0
    masked: int = 0
    paged: int = 0
    peak: float = 0.0  # the lineage's largest share of a window
    session_peak: float = 0.0  # this session's, since its last fork
    root: str = field(init=False)
    lineage: list[str] = field(init=False)

    def __post_init__(self) -> None:
        self.root, self.lineage = self.session, [self.session]

    def started(self, route: Route, *, window: int, parent: str | None = None,
                purpose: Purpose = "task") -> None:
        self.telemetry.emit(RoleStarted(
            role=self.role, session=self.session, model=route.model.id,
            provider=route.provider_name, tier=route.tier, effort=route.effort, parent=parent,
            purpose=purpose, window=window, role_kind=self.kind,
        ))

    def forked(self) -> str:
        """The next child's id, now this account's session; the parent's is returned."""
        parent, self.session = self.session, f"{self.root}.{self.forks}"
        self.lineage.append(self.session)
        self.session_peak = 0.0
        return parent

    async def call(self, client: ModelClient, messages: list[dict[str, Any]], *,
                   window: int, estimate: int = 0,
                   tools: Sequence[Mapping[str, Any]] | None = None,
                   ready: Completion | None = None) -> Completion:
        """One model call: timed as the run's ``call`` phase, ticked while it streams, then
        recorded with its usage and the share of ``window`` its prompt and reply filled
        (``estimate``: the prompt's tokens as far as we know, when the server does not say).
        ``ready``: the reply of this very request, asked ahead (``Ahead.first_build``)."""
        started = time.monotonic()
        with self.telemetry.busy("call"):
            completion = ready if ready is not None else await client.complete(
                messages, session=self.session, tools=tools, progress=self._ticker(started))
        record = completion.record
        if record.stopped and not record.prompt_tokens:
            # the server sent no usage, but read (and bills) the prompt: the session's estimate
            # stands for it, an upper bound (it counts the tool schemas and pads for the window)
            record = record.model_copy(update={"prompt_tokens": estimate, "cost_usd": cost_usd(
                client.route.model, estimate, 0, record.output_tokens)})
        self.telemetry.call(record, (started, time.monotonic()), messages=messages,
                            reply=completion.content)
        used = (record.prompt_tokens or estimate) + record.output_tokens
        fraction = used / window
        self.peak = max(self.peak, fraction)
        self.session_peak = max(self.session_peak, fraction)
        self.telemetry.emit(Progress(role=self.role, session=self.session, context=fraction,
                                     estimate=estimate, prompt_tokens=record.prompt_tokens))
        return completion

    def _ticker(self, started: float) -> Any:
        due = started  # when the next streaming tick may go out

        def progress(pieces: int) -> None:
            # a tick per streamed piece would cost one event per token on the one event loop
            # all sessions share (20 explorers at 1,200 tokens/s: 24,000 a second); the first
            # piece still shows at once, then ten ticks a second at most
            nonlocal due
            now = time.monotonic()
            if now < due or not self.telemetry.listeners:
                return
            due = now + PROGRESS_EVERY_S
            self.telemetry.emit(Progress(role=self.role, session=self.session, pieces=pieces,
                                         elapsed=now - started))

        return progress

    def tool_ran(self, name: str, outcome: ToolOutcome, started: float) -> None:
        """A tool call ended (a refused one is also counted as a policy violation)."""
        if outcome.policy_violation:
            self.telemetry.count("policy_violations")
            self.telemetry.emit(Warned(role=self.role, session=self.session,
                                       category="policy_violation",
                                       message=f"policy violation: {name}: {outcome.text}"))
        self.telemetry.emit(ToolCalled(role=self.role, session=self.session, tool=name,
                                       ok=outcome.ok, chars=len(outcome.text),
                                       duration_s=round(time.monotonic() - started, 4)))

    def finished(self, payload: BaseModel, messages: list[dict[str, Any]]) -> SessionOutcome:
        """The session submitted ``payload``: say so, with the lineage's counts."""
        self.telemetry.emit(RoleFinished(
            role=self.role, session=self.session, turns=self.turns,
            tool_calls=self.tool_calls, peak_context=round(self.session_peak, 4),
            lineage_peak_context=round(self.peak, 4), forks=self.forks, masked=self.masked,
            paged=self.paged, root=self.root,
        ))
        return SessionOutcome(self.session, payload, self.tool_calls, self.turns, messages,
                              self.forks, self.peak, tuple(self.lineage))
