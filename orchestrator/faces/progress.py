"""The live progress table: one row per agent session (role, model, tier, tokens/s, context
gauge) on stderr, redrawn as the run's events arrive, and one line per event worth keeping
where the output is not a terminal."""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from orchestrator.faces.render import gauge, visible

if TYPE_CHECKING:
    from orchestrator.record.telemetry import Event


@dataclass
class _Row:
    role: str
    model: str = ""
    tier: str = ""
    effort: str = ""
    state: str = "starting"
    calls: int = 0
    tokens: int = 0
    tps: float | None = None
    context: float = 0.0
    started: float = 0.0


# events that move a session's row in the live table
_SESSION_EVENTS = frozenset({"role_started", "call_finished", "progress", "tool_called",
                             "role_finished", "explorer_finished"})


class Progress:
    """A live table of agent sessions (role, model, tier, tokens/s, context gauge) on stderr."""

    def __init__(self, console: Console, *, enabled: bool = True) -> None:
        self.console = console
        self.enabled = enabled
        self.rows: dict[str, _Row] = {}
        self.notes: list[str] = []
        self._live: Live | None = None
        self._interactive = console.is_terminal

    def __enter__(self) -> Progress:
        if self.enabled and self._interactive:
            self._live = Live(self._render(), console=self.console, refresh_per_second=8,
                              transient=False)
            self._live.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._live is not None:
            self._live.update(self._render())
            self._live.__exit__(*exc)
            self._live = None

    def pause(self) -> None:
        """Stop redrawing (while the user answers a prompt)."""
        if self._live is not None:
            self._live.stop()

    def resume(self) -> None:
        if self._live is not None:
            self._live.start()

    def on_event(self, event: Event) -> None:
        if not self.enabled:
            return
        line = self._apply(event)
        if self._live is not None:
            self._live.update(self._render())
        elif line:
            self.console.print(line, highlight=False, markup=False)

    def _apply(self, e: Event) -> str | None:
        sid = e.session or e.role or "-"
        if e.kind in _SESSION_EVENTS:
            return self._track(e, sid)
        return self._note(e, sid)

    def _track(self, e: Event, sid: str) -> str | None:
        """A session's row follows its events; a start and an end print a line too."""
        d = e.data
        if e.kind == "role_started":
            self.rows[sid] = _Row(role=str(e.role), model=str(d.get("model")), tier=str(d.get("tier")),
                                  effort=str(d.get("effort") or "-"), state="thinking",
                                  started=time.monotonic())
            return f"▶ {sid:<14} {d.get('model')} · tier {d.get('tier')} · effort {d.get('effort') or '-'}"
        row = self.rows.get(sid)
        if e.kind == "explorer_finished":
            if row is not None:
                row.state = "failed" if d.get("error") else "done"
            if d.get("error"):
                return f"✘ {sid:<14} failed: {d.get('error')}"
            extra = f", {d.get('adds_nothing')} adding nothing" if d.get("adds_nothing") else ""
            return f"  {sid:<14} claims verified {d.get('verified')}/{d.get('submitted')}{extra}"
        if row is None:
            return None
        if e.kind == "call_finished":
            row.calls += 1
            row.tokens += int(d.get("output_tokens") or 0)
            row.tps = d.get("tokens_per_s") or row.tps
            row.model = str(d.get("served_model") or row.model)
        elif e.kind == "progress":
            if "context" in d:
                row.context = float(d["context"])
            else:
                row.state = "streaming"
        elif e.kind == "tool_called":
            row.state = f"tool {d.get('tool')}"
        elif e.kind == "role_finished":
            row.state = "done"
            tps = f" · {row.tps:.0f} tok/s" if row.tps else ""
            return f"✔ {sid:<14} {row.calls} calls · {row.tokens} tokens out{tps}"
        return None

    def _note(self, e: Event, sid: str) -> str | None:
        """A line for the run's own events; warnings, losses and tests stay under the table."""
        d = e.data
        if e.kind == "localized":
            if d.get("passed"):
                return "● before any change: the acceptance commands already pass"
            where = ", ".join(d.get("suspects") or []) or "no source file"
            return f"● before any change: {len(d.get('failing') or [])} failing; points at {where}"
        if e.kind == "test_result":
            status = "pass" if d.get("passed") else "FAIL"
            self.notes.append(f"acceptance (attempt {d.get('attempt')}): {status}")
            return f"● acceptance attempt {d.get('attempt')}: {status}"
        if e.kind in ("run_started", "run_resumed") and d.get("sandbox"):
            return f"■ sandbox: {d.get('sandbox')}"
        if e.kind == "warning":
            self.notes.append(f"warning: {d.get('message')}")
            return f"! {d.get('message')}"
        if e.kind == "role_lost":
            self.notes.append(f"lost: {d.get('message')}")
            return f"! lost: {d.get('message')}"
        if e.kind == "fork":
            return f"⑂ {sid} forked: {d.get('reason')}"
        return None

    def _render(self) -> Group:
        table = Table(title="agents", expand=False, show_edge=False, pad_edge=False)
        for col in ("session", "model", "tier", "effort", "state", "calls", "tok out", "tok/s", "context"):
            table.add_column(col, justify="right" if col in {"calls", "tok out", "tok/s"} else "left")
        for sid, r in self.rows.items():
            table.add_row(sid, r.model, r.tier, r.effort, r.state, str(r.calls), str(r.tokens),
                          f"{r.tps:.0f}" if r.tps else "-", gauge(r.context))
        notes = Text(visible("\n".join(self.notes[-4:])))
        return Group(table, notes)
