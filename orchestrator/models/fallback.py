"""``FallbackClient``: a role's chain of models that is itself a ``ModelClient``.

Each model in the chain gets a few attempts (one HTTP request each) under a ``RetryPolicy``:
rate limits wait for the server's ``Retry-After`` and 5xx/timeouts/cut streams back off with
jitter, within a per-call time budget (tenacity does the looping). A model whose quota is spent
is marked in the ``QuotaLedger`` and skipped, by this run and the next, until its reset. Context
overflows, refusals and run-budget stops are raised unchanged. Every failed attempt, skipped
model, fallback and downgrade is reported to the routing listeners.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import random
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from tenacity import (
    AsyncRetrying,
    RetryCallState,
    retry_if_exception_type,
    stop_after_attempt,
    stop_before_delay,
    wait_random_exponential,
)

from orchestrator.errors import ModelError, ModelUnavailable
from orchestrator.models.base import Completion, ModelClient, Progress, Route, Until
from orchestrator.models.budget import Budget
from orchestrator.models.errors import (
    QuotaExhausted,
    RateLimited,
    Transient,
    next_utc_midnight,
    where,
)
from orchestrator.models.quota import Ledger, QuotaLedger, ledger_name
from orchestrator.models.routing import (
    RoutingEvent,
    RoutingKind,
    RoutingListener,
    downgrade_warnings,
)
from orchestrator.state import CallRecord
from orchestrator.timing import phase

Clock = Callable[[], datetime]


def utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class RetryPolicy:
    """How hard to try one model before going down the chain."""

    attempts: int = 3
    """HTTP requests per model per call (the first one included)."""
    base_s: float = 0.5
    """Scale of the jittered exponential backoff for 5xx, timeouts and cut streams."""
    max_wait_s: float = 8.0
    """Longest single backoff wait."""
    budget_s: float = 30.0
    """Time one model may take for one call, waits included; a longer Retry-After moves on."""


@dataclass(frozen=True)
class Routing:
    """What every chain of a pool shares: ledger, run budget, listeners, retry policy, clock."""

    ledger: Ledger = field(default_factory=QuotaLedger)
    budget: Budget | None = None
    listeners: tuple[RoutingListener, ...] = ()
    policy: RetryPolicy = RetryPolicy()
    clock: Clock = utc_now


def quota_key(route: Route) -> str:
    """The ledger's name for the model of ``route``: ``provider/model-id``."""
    return ledger_name(route.provider_name, route.model.id)


def _wait(policy: RetryPolicy) -> Callable[[RetryCallState], float]:
    backoff = wait_random_exponential(multiplier=policy.base_s, max=policy.max_wait_s)

    def wait(state: RetryCallState) -> float:
        exc = state.outcome.exception() if state.outcome else None
        hint = getattr(exc, "retry_after", None)
        return hint * random.uniform(1.0, 1.2) if hint is not None else backoff(state)

    return wait


def _estimate_tokens(messages: Sequence[Mapping[str, Any]]) -> int:
    return len(json.dumps(list(messages), default=str)) // 4 + 1


class FallbackClient:
    """Tries ``primary`` then each fallback; ``route`` is the route currently serving."""

    def __init__(self, primary: ModelClient, *fallbacks: ModelClient,
                 routing: Routing | None = None) -> None:
        self.clients = (primary, *fallbacks)
        self.routing = routing or Routing()
        self._start = 0
        self._current = self._first_available()
        self._told: set[tuple[str, int]] = set()

    @property
    def route(self) -> Route:
        return dataclasses.replace(self.clients[self._current].route, step=self._current)

    def demote(self, reason: str) -> bool:
        """Serve the rest of this session from the next model in the chain (e.g. after
        repeated invalid submissions); False when there is none left."""
        if self._current + 1 >= len(self.clients):
            return False
        self._start = self._current + 1
        self._current = self._first_available()
        r = self.route
        self._tell("fallback", r.role, f"role {r.role}: switching to {r.alias} ({r.model.id}): "
                   f"{reason}", once=False)
        return True

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
        until: Until | None = None,
    ) -> Completion:
        call = {"messages": messages, "session": session, "tools": tools,
                "response_format": response_format, "progress": progress,
                "until": until}
        reasons: list[str] = []
        for step in range(self._start, len(self.clients)):
            client = self.clients[step]
            skip = self._unavailable(client.route)
            if skip is not None:
                self._tell("skipped", client.route.role, skip, key=(quota_key(client.route), step))
                reasons.append(skip)
                continue
            try:
                completion = await self._attempts(client, step, call)
            except ModelUnavailable as exc:
                self._give_up(client.route, step, exc)
                reasons.append(str(exc))
                continue
            self._current = step
            return self._served(completion, step)
        role = self.clients[0].route.role
        raise ModelUnavailable(f"role {role}: no model in the chain could serve the call: "
                               + " | ".join(reasons))

    def _first_available(self) -> int:
        for step in range(self._start, len(self.clients)):
            if self._unavailable(self.clients[step].route) is None:
                return step
        return self._start

    def _unavailable(self, route: Route) -> str | None:
        with phase("quota"):
            return self._why_unavailable(route)

    def _why_unavailable(self, route: Route) -> str | None:
        now = self.routing.clock()
        key = quota_key(route)
        until = self.routing.ledger.exhausted_until(key, now)
        if until is not None:
            return f"{where(route)}: skipped, quota exhausted until {until:%Y-%m-%d %H:%M} UTC"
        cap = route.model.quota_tokens_per_day
        if cap is not None and self.routing.ledger.used_today(key, now) >= cap:
            return (f"{where(route)}: skipped, its daily quota of {cap:,} tokens is used "
                    f"(quota_tokens_per_day)")
        return None

    def _give_up(self, route: Route, step: int, exc: ModelUnavailable) -> None:
        if isinstance(exc, QuotaExhausted):
            until = exc.reset_at or next_utc_midnight(self.routing.clock())
            self.routing.ledger.mark_exhausted(quota_key(route), until, str(exc))
            if step == self._start:
                self._start = min(step + 1, len(self.clients) - 1)

    async def _attempts(self, client: ModelClient, step: int, call: dict[str, Any]) -> Completion:
        p = self.routing.policy
        retrying = AsyncRetrying(
            retry=retry_if_exception_type((RateLimited, Transient)),
            stop=stop_after_attempt(p.attempts) | stop_before_delay(p.budget_s),
            wait=_wait(p),
            reraise=True,
        )
        return await retrying(self._once, client, step, call)

    async def _once(self, client: ModelClient, step: int, call: dict[str, Any]) -> Completion:
        routing, route = self.routing, client.route
        if routing.budget is not None:
            routing.budget.check()
        key, now = quota_key(route), routing.clock()
        cap = route.model.quota_tokens_per_day
        reserved, fits = 0, True
        if cap is not None:  # an atomic statement in the shared ledger: off the event loop
            with phase("quota"):
                reserved = _estimate_tokens(call["messages"])
                fits = await asyncio.to_thread(routing.ledger.reserve, key, reserved, cap, now)
        if not fits:
            raise QuotaExhausted(f"{where(route)}: daily quota of {cap:,} tokens would be "
                                 "exceeded (quota_tokens_per_day)", reset_at=next_utc_midnight(now))
        started = time.monotonic()
        try:
            completion = await client.complete(**call)
        except ModelError as exc:
            with phase("quota"):
                routing.ledger.settle(key, reserved, 0, 0.0, now)
            self._failed(route, step, call["session"], exc, time.monotonic() - started)
            raise
        rec = completion.record
        with phase("quota"):
            routing.ledger.settle(key, reserved, rec.prompt_tokens + rec.output_tokens,
                                  rec.cost_usd, now)
        if routing.budget is not None:
            routing.budget.charge(rec)
        return completion

    def _failed(self, route: Route, step: int, session: str, exc: ModelError,
                duration: float) -> None:
        record = CallRecord(
            role=route.role, session=session, requested_model=route.model.id,
            requested_tier=route.service_tier, effort=route.effort, api=route.api,
            fallback_step=step,
            duration_s=duration, error=f"{exc.code}: {exc}",
        )
        self._emit(RoutingEvent("attempt_failed", route.role, str(exc), record))

    def _served(self, completion: Completion, step: int) -> Completion:
        record = completion.record.model_copy(update={"fallback_step": step})
        route = self.clients[step].route
        if step > 0:
            primary = self.clients[0].route
            self._tell("fallback", route.role,
                       f"role {route.role}: served by fallback {route.alias} ({route.model.id}) "
                       f"instead of {primary.alias} ({primary.model.id})", key=("fallback", step))
        for warning in downgrade_warnings(record):
            self._emit(RoutingEvent("downgrade", route.role, warning, record))
        return dataclasses.replace(completion, record=record)

    def _tell(self, kind: RoutingKind, role: str, message: str, *,
              key: tuple[str, int] | None = None, once: bool = True) -> None:
        if once and key is not None:
            if key in self._told:
                return
            self._told.add(key)
        self._emit(RoutingEvent(kind, role, message))

    def _emit(self, event: RoutingEvent) -> None:
        for listener in self.routing.listeners:
            listener(event)


def demote(client: ModelClient, reason: str) -> bool:
    """Move ``client`` to its next fallback if it is a chain; False otherwise or at the end."""
    step = getattr(client, "demote", None)
    return bool(step(reason)) if callable(step) else False
