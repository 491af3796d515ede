"""What routing reports: ``RoutingEvent`` (failed attempts, skipped models, fallbacks and
downgrade warnings) for listeners, the pure checks that decide what counts as a downgrade, and
``telemetry_listener`` that turns events into the run's ``call_failed`` and ``warning`` events."""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from orchestrator.record.events import CallFailed, Warned
from orchestrator.state import CallRecord

if TYPE_CHECKING:
    from orchestrator.record.telemetry import Telemetry

RoutingKind = Literal["attempt_failed", "skipped", "fallback", "downgrade"]
_DATED = re.compile(r"-(\d{4}-\d{2}-\d{2}|\d{4}|\d{8})$")
_ANY_TIER = {None, "auto"}


@dataclass(frozen=True)
class RoutingEvent:
    """One routing fact: ``record`` is set for attempts (failed or served), None for skips."""

    kind: RoutingKind
    role: str
    message: str
    record: CallRecord | None = None

    @property
    def is_warning(self) -> bool:
        return self.kind != "attempt_failed"


RoutingListener = Callable[[RoutingEvent], None]


def same_model(requested: str, served: str | None) -> bool:
    """A served id equal to the request or the request plus a date suffix is the same model;
    a server that echoes no model (None) is "unknown", not a downgrade."""
    if served is None or served == requested:
        return True
    return served.startswith(requested) and bool(_DATED.fullmatch(served[len(requested):]))


def same_tier(requested: str | None, served: str | None) -> bool:
    """No tier echo (llama.cpp) is unknown; a request for none or ``auto`` accepts any tier."""
    return served is None or requested in _ANY_TIER or served == requested


def downgrade_warnings(record: CallRecord) -> list[str]:
    """Warnings for a served model or tier that differs from what was requested."""
    out = []
    where = f"{record.role} ({record.session})"
    if not same_model(record.requested_model, record.served_model):
        out.append(f"{where}: requested model {record.requested_model} but "
                   f"{record.served_model} served the call")
    if not same_tier(record.requested_tier, record.served_tier):
        out.append(f"{where}: requested service tier {record.requested_tier} but served "
                   f"{record.served_tier} on {record.served_model or record.requested_model}")
    return out


def telemetry_listener(telemetry: Telemetry) -> RoutingListener:
    """Failed attempts become ``call_failed`` events; everything else a ``warning``."""

    def listen(event: RoutingEvent) -> None:
        rec = event.record
        session = rec.session if rec is not None else None
        if event.kind == "attempt_failed" and rec is not None:
            telemetry.emit(CallFailed(**{**dict(rec), "role": event.role}))
        else:
            telemetry.emit(Warned(role=event.role, session=session, category=event.kind,
                                  message=event.message))

    return listen
