"""Telemetry: the time split counts overlaps once; a resumed run takes in its history."""

from __future__ import annotations

import json

from orchestrator.record.events import Progress, Warned, parse_event
from orchestrator.record.eventschema import event_schema
from orchestrator.record.telemetry import Telemetry, _union
from orchestrator.state import CallRecord


def test_union_counts_overlapping_intervals_once():
    assert _union([(0, 2), (1, 3), (5, 6)]) == 4
    assert _union([]) == 0


def test_history_brings_back_calls_and_policy_violations(tmp_path):
    log = tmp_path / "events.jsonl"
    first = Telemetry("r1", log_path=log, env={"OPENAI_API_KEY": "sk-secret-123456"})
    first.call(CallRecord(role="builder", session="builder-1", requested_model="m",
                          prompt_tokens=10, output_tokens=2, cost_usd=0.5), (0.0, 1.0))
    first.emit(Warned(role="builder", category="policy_violation", message="refused: git push"))
    first.emit(Warned(role="builder", category="fallback", message="policy violation? no"))
    first.emit(Warned(message="leaked sk-secret-123456"))
    first.close()
    assert "sk-secret-123456" not in log.read_text()
    assert json.loads(log.read_text().splitlines()[-1])["message"] == "leaked ***"

    second = Telemetry("r1", log_path=log)
    assert second.load_history(log) == 1
    assert second.counters["policy_violations"] == 1
    assert second.per_role()["builder"].cost_usd == 0.5
    second.close()


def test_emit_fills_in_what_the_telemetry_owns(tmp_path):
    log = tmp_path / "events.jsonl"
    seen = []
    telemetry = Telemetry("r9", log_path=log, listeners=(seen.append,))
    event = Warned(message="hello")
    telemetry.emit(event)
    when = event.t
    telemetry.emit(Progress(pieces=3))
    telemetry.emit(event)  # once more: what the listeners got first does not change
    telemetry.close()
    first, tick, again = seen
    assert first is event and first.run_id == "r9" and first.at and first.t == when
    assert again is not first and again.run_id == "r9" and again.at
    assert tick.run_id == "r9" and tick.at is None  # ticks are not written
    written = [json.loads(line) for line in log.read_text().splitlines()]
    assert [(w["kind"], w["run_id"]) for w in written] == [("warning", "r9")] * 2
    assert parse_event(written[0]) == first
    assert parse_event({k: v for k, v in written[0].items() if k != "run_id"}) is None
    specs = [s for s in event_schema()["$defs"].values() if "run_id" in s.get("properties", {})]
    assert specs and all("run_id" in s["required"] for s in specs)
