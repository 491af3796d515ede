"""Run telemetry: typed events (``events.py``), the JSON-lines event log, per-call records,
per-role usage and the time split.

Each run writes its own ``workspaces/<run-id>/events.jsonl``, one event per line; nothing is
configured globally, so embedding the library never changes the host's logging. Values that
look like secrets from the environment are redacted before anything is written. When
OpenTelemetry is set up, the same events become spans (``tracing.py``). Where the run's wall time
goes is recorded as phases (``timing.py``) and split in ``time_split`` and ``phase_split``.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import IO, Any

from orchestrator.record.events import (
    CallFinished,
    CallReplayed,
    Event,
    EventBase,
    EventKind,
    Progress,
    RoleLost,
    Warned,
    read_events,
    stamp,
)
from orchestrator.record.tracing import span_hook
from orchestrator.state import CallRecord, RoleLoss, RoleUsage
from orchestrator.timing import Phases, activate, deactivate

__all__ = ["Event", "EventBase", "EventKind", "Listener", "Telemetry", "secret_values"]

SECRET_MARKERS = ("API_KEY", "TOKEN", "SECRET", "PASSWORD")
Listener = Callable[[Event], None]


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(
        v for k, v in env.items() if len(v) >= 8 and any(m in k.upper() for m in SECRET_MARKERS)
    )


class Telemetry:
    """Collects the events, call records and busy intervals of one run."""

    def __init__(
        self,
        run_id: str,
        *,
        log_path: Path | None = None,
        listeners: tuple[Listener, ...] = (),
        env: Mapping[str, str] | None = None,
    ) -> None:
        self.run_id = run_id
        self.listeners = list(listeners)
        self.calls: list[CallRecord] = []
        self.events: list[Event] = []
        self.phases = Phases()
        self.counters: dict[str, int] = defaultdict(int)
        self.losses: list[RoleLoss] = []
        self.started = time.monotonic()
        self._file: IO[str] | None = None
        self._secrets = secret_values(env or {})
        self._escaped = tuple(json.dumps(v, ensure_ascii=False)[1:-1] for v in self._secrets)
        self._spans = span_hook(run_id, env or {}, self._secrets)
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = log_path.open("a", encoding="utf-8")

    def emit(self, event: Event) -> None:
        """Record ``event`` and tell the listeners. Its builder gives its kind's fields, role
        and session; this fills in the run id, the time since the run started and, when it is
        written to the log, the date."""
        recorded = not isinstance(event, Progress)  # ticks are for live displays, not the record
        written = recorded and self._file is not None
        event = stamp(event, run_id=self.run_id, t=time.monotonic() - self.started,
                      at=datetime.now(UTC).isoformat() if written else None)
        if recorded:
            if written:
                self._write(event)
            self.events.append(event)
            if self._spans is not None:
                self._spans.event(event)
        for listener in self.listeners:
            listener(event)

    def _write(self, event: EventBase) -> None:
        # serialised by pydantic in one call, then each secret replaced in the JSON text in the
        # form JSON gives it (the same as scrubbing every string value, a third of the cost)
        line = event.model_dump_json(fallback=str)
        for secret in self._escaped:
            line = line.replace(secret, "***")
        self._file.write(line + "\n")  # type: ignore[union-attr]
        self._file.flush()  # type: ignore[union-attr]

    def call(
        self, record: CallRecord, busy: tuple[float, float], *,
        messages: list[dict[str, Any]] | None = None, reply: str | None = None,
    ) -> None:
        """One model call; ``messages`` and ``reply`` reach only spans that were asked to keep them."""
        if record.replayed:  # already counted by the process that paid for it
            self.emit(CallReplayed(role=record.role, session=record.session))
            return
        self.calls.append(record)  # its model time is a phase the client recorded
        if self._spans is not None:
            self._spans.call(record, busy, messages=messages, reply=reply)
        self.emit(CallFinished(**dict(record)))

    def lose(self, loss: RoleLoss) -> None:
        """Record a role session lost to an error while the run goes on (a warning)."""
        self.losses.append(loss)
        self.emit(RoleLost(role=loss.role, session=loss.session, code=loss.code,
                           message=loss.message))

    @property
    def intervals(self) -> dict[str, list[tuple[float, float]]]:
        """The run's phase intervals (``timing.py``), by phase."""
        return self.phases.intervals

    def busy(self, kind: str) -> AbstractContextManager[None]:
        """Time a stretch of work of one kind ("tool", "git", ...) for the time split."""
        return self.phases.span(kind)

    @contextmanager
    def recording(self, kind: str = "graph") -> Iterator[None]:
        """Record the phases of the enclosed work, and of what it starts, for this run; the
        enclosed stretch itself counts as ``kind`` where no other phase covers it."""
        token = activate(self.phases)
        try:
            with self.phases.span(kind):
                yield
        finally:
            deactivate(token)

    def load_history(self, path: Path) -> int:
        """Take in the calls, counters and lost roles an earlier process of this run recorded."""
        n = 0
        fields = set(CallRecord.model_fields)
        for event in read_events(path):
            if isinstance(event, CallFinished):
                self.calls.append(CallRecord.model_validate(
                    event.model_dump(include=fields)))
                n += 1
            elif isinstance(event, Warned) and event.category == "policy_violation":
                self.counters["policy_violations"] += 1
            elif isinstance(event, RoleLost):
                self.losses.append(RoleLoss(role=str(event.role), session=event.session,
                                            code=event.code, message=event.message))
        return n

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def time_split(self, end: float | None = None) -> dict[str, float]:
        """Wall time split into model, tool and orchestration time, counting overlaps once."""
        end = end or time.monotonic()
        wall = end - self.started
        model = self.phases.union("model")
        both = self.phases.union("model", "tool")
        return {
            "wall_s": wall,
            "model_s": model,
            "tool_s": both - model,
            "orchestration_s": max(0.0, wall - both),
        }

    def phase_split(self, end: float | None = None) -> dict[str, float]:
        """Wall time in seconds per phase (``timing.ORDER``, then ``other``), adding up to it."""
        return self.phases.split(self.started, end or time.monotonic())

    def per_role(self) -> dict[str, RoleUsage]:
        """Calls, models, tokens, cost and speed per role."""
        return per_role(self.calls)

    def close(self) -> None:
        if self._spans is not None:
            self._spans.close()
            self._spans = None
        if self._file is not None:
            self._file.close()
            self._file = None


def _union(intervals: list[tuple[float, float]]) -> float:
    """Seconds covered by ``intervals``, overlaps counted once."""
    phases = Phases()
    phases.intervals["x"] = list(intervals)
    return phases.union("x")


def per_role(calls: list[CallRecord]) -> dict[str, RoleUsage]:
    """``calls`` summed up per role; tokens/s counts generation time, after the first token."""
    rows: dict[str, dict[str, Any]] = {}
    for rec in calls:
        row = rows.setdefault(rec.role, {"calls": 0, "models": [], "tiers": [], "model_s": 0.0,
                                         "gen_s": 0.0, **dict.fromkeys(_SUMMED, 0)})
        row["calls"] += 1
        for key, value in (("models", rec.served_model or rec.requested_model),
                           ("tiers", rec.served_tier or rec.requested_tier or "-")):
            if value not in row[key]:
                row[key].append(value)
        for key in _SUMMED:
            row[key] += getattr(rec, key)
        row["model_s"] += rec.duration_s
        row["gen_s"] += max(0.0, rec.duration_s - (rec.ttft_s or 0.0))
    out = {}
    for role, row in rows.items():
        gen = row.pop("gen_s")
        out[role] = RoleUsage(**row, tokens_per_s=row["output_tokens"] / gen if gen > 0 else None)
    return out


_SUMMED = ("prompt_tokens", "cached_tokens", "output_tokens", "reasoning_tokens", "cost_usd")
