"""Run telemetry: typed events, a JSON-lines event log, per-call records and the time split.

Each run gets its own structlog logger writing to ``workspaces/<run-id>/events.jsonl``; nothing
is configured globally, so embedding the library never changes the host's logging. Values that
look like secrets from the environment are redacted before anything is written. When
OpenTelemetry is set up, the same events become spans (``tracing.py``).
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, Literal

import structlog

from .state import CallRecord, RoleLoss
from .tracing import span_hook

EventKind = Literal[
    "run_started",
    "run_resumed",
    "worktree_restored",
    "role_started",
    "role_finished",
    "call_finished",
    "call_replayed",
    "call_failed",
    "tool_called",
    "explorer_finished",
    "fork",
    "test_result",
    "localized",
    "review",
    "warning",
    "role_lost",
    "run_finished",
    "progress",
]

SECRET_MARKERS = ("API_KEY", "TOKEN", "SECRET", "PASSWORD")


@dataclass(frozen=True)
class Event:
    """One thing that happened in a run, for progress displays and bots."""

    kind: EventKind
    run_id: str
    t: float
    role: str | None = None
    session: str | None = None
    data: Mapping[str, Any] = field(default_factory=dict)


Listener = Callable[[Event], None]


def secret_values(env: Mapping[str, str]) -> tuple[str, ...]:
    return tuple(
        v for k, v in env.items() if len(v) >= 8 and any(m in k.upper() for m in SECRET_MARKERS)
    )


def _redactor(secrets: tuple[str, ...]):
    def redact(_logger: Any, _name: str, event: dict[str, Any]) -> dict[str, Any]:
        if not secrets:
            return event
        return {k: _scrub(v, secrets) for k, v in event.items()}

    return redact


def _scrub(value: Any, secrets: tuple[str, ...]) -> Any:
    if isinstance(value, str):
        for s in secrets:
            value = value.replace(s, "***")
        return value
    if isinstance(value, dict):
        return {k: _scrub(v, secrets) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_scrub(v, secrets) for v in value]
    return value


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
        self.intervals: dict[str, list[tuple[float, float]]] = defaultdict(list)
        self.counters: dict[str, int] = defaultdict(int)
        self.losses: list[RoleLoss] = []
        self.started = time.monotonic()
        self._file: IO[str] | None = None
        self._log = None
        self._spans = span_hook(run_id, env or {}, secret_values(env or {}))
        if log_path is not None:
            log_path.parent.mkdir(parents=True, exist_ok=True)
            self._file = log_path.open("a", encoding="utf-8")
            self._log = structlog.wrap_logger(
                structlog.WriteLogger(self._file),
                processors=[
                    structlog.processors.TimeStamper(fmt="iso", utc=True),
                    _redactor(secret_values(env or {})),
                    structlog.processors.JSONRenderer(default=str),
                ],
            ).bind(run_id=run_id)

    def emit(
        self, kind: EventKind, /, *, role: str | None = None, session: str | None = None, **data: Any
    ) -> None:
        event = Event(kind, self.run_id, time.monotonic() - self.started, role, session, data)
        if kind != "progress":  # streaming ticks are for live displays, not the record
            self.events.append(event)
            if self._log is not None:
                self._log.info(kind, role=role, session=session, **data)
                self._file.flush()  # type: ignore[union-attr]
            if self._spans is not None:
                self._spans.event(event)
        for listener in self.listeners:
            listener(event)

    def call(
        self, record: CallRecord, busy: tuple[float, float], *,
        messages: list[dict[str, Any]] | None = None, reply: str | None = None,
    ) -> None:
        """One model call; ``messages`` and ``reply`` reach only spans that were asked to keep them."""
        if record.replayed:  # already counted by the process that paid for it
            self.emit("call_replayed", role=record.role, session=record.session)
            return
        self.calls.append(record)
        self.intervals["model"].append(busy)
        if self._spans is not None:
            self._spans.call(record, busy, messages=messages, reply=reply)
        data = record.model_dump(exclude={"role", "session"})
        self.emit("call_finished", role=record.role, session=record.session, **data)

    def lose(self, loss: RoleLoss) -> None:
        """Record a role session lost to an error while the run goes on (a warning)."""
        self.losses.append(loss)
        self.emit("role_lost", role=loss.role, session=loss.session, code=loss.code,
                  message=loss.message)

    @contextmanager
    def busy(self, kind: str) -> Iterator[None]:
        """Time a stretch of work of one kind ("model", "tool") for the time split."""
        start = time.monotonic()
        try:
            yield
        finally:
            self.intervals[kind].append((start, time.monotonic()))

    def load_history(self, path: Path) -> int:
        """Take in the calls, counters and lost roles an earlier process of this run recorded."""
        if not path.exists():
            return 0
        fields = set(CallRecord.model_fields)
        n = 0
        for line in path.read_text(encoding="utf-8").splitlines():
            try:
                entry = json.loads(line)
            except ValueError:
                continue  # a line cut short by a crash
            if entry.get("event") == "call_finished":
                self.calls.append(CallRecord.model_validate(
                    {k: v for k, v in entry.items() if k in fields}))
                n += 1
            elif entry.get("event") == "warning" and entry.get("kind") == "policy_violation":
                self.counters["policy_violations"] += 1
            elif entry.get("event") == "role_lost":
                self.losses.append(RoleLoss(role=str(entry.get("role")), session=entry.get("session"),
                                            code=str(entry.get("code")), message=str(entry.get("message"))))
        return n

    def count(self, name: str, n: int = 1) -> None:
        self.counters[name] += n

    def time_split(self, end: float | None = None) -> dict[str, float]:
        """Wall time split into model, tool and orchestration time, counting overlaps once."""
        end = end or time.monotonic()
        wall = end - self.started
        model = _union(self.intervals["model"])
        both = _union(self.intervals["model"] + self.intervals["tool"])
        return {
            "wall_s": wall,
            "model_s": model,
            "tool_s": both - model,
            "orchestration_s": max(0.0, wall - both),
        }

    def per_role(self) -> dict[str, dict[str, Any]]:
        out: dict[str, dict[str, Any]] = {}
        for rec in self.calls:
            row = out.setdefault(
                rec.role,
                {"calls": 0, "models": [], "tiers": [], "prompt_tokens": 0, "cached_tokens": 0,
                 "output_tokens": 0, "reasoning_tokens": 0, "cost_usd": 0.0, "model_s": 0.0,
                 "_gen_s": 0.0},
            )
            row["calls"] += 1
            for key, value in (("models", rec.served_model or rec.requested_model),
                               ("tiers", rec.served_tier or rec.requested_tier or "-")):
                if value not in row[key]:
                    row[key].append(value)
            row["prompt_tokens"] += rec.prompt_tokens
            row["cached_tokens"] += rec.cached_tokens
            row["output_tokens"] += rec.output_tokens
            row["reasoning_tokens"] += rec.reasoning_tokens
            row["cost_usd"] += rec.cost_usd
            row["model_s"] += rec.duration_s
            row["_gen_s"] += max(0.0, rec.duration_s - (rec.ttft_s or 0.0))
        for row in out.values():
            gen = row.pop("_gen_s")  # tokens/s counts generation, after the first token
            row["tokens_per_s"] = row["output_tokens"] / gen if gen > 0 else None
        return out

    def close(self) -> None:
        if self._spans is not None:
            self._spans.close()
            self._spans = None
        if self._file is not None:
            self._file.close()
            self._file = None


def _union(intervals: list[tuple[float, float]]) -> float:
    total, cur_start, cur_end = 0.0, None, None
    for start, end in sorted(intervals):
        if cur_end is None or start > cur_end:
            if cur_end is not None:
                total += cur_end - cur_start  # type: ignore[operator]
            cur_start, cur_end = start, end
        else:
            cur_end = max(cur_end, end)
    if cur_end is not None:
        total += cur_end - cur_start  # type: ignore[operator]
    return total
