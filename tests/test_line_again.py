"""A one-line reply that changes nothing is told so once (``builder.line_again``,
``oneline.again``): which line it gave back as it reads (``given_back``), what it is told, and
whole runs on xp-payslip-rounding against the simulator where the builder gives the line back
until it is told so."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from routing_kit import asked_line
from test_leads import CALLER_FOUND, CENTS, UNPINNED, _copied
from test_oneshot import _explore_task_one_shot

from orchestrator.engine.oneline import again, given_back
from orchestrator.localize.localization import Span
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply

CODE = ("import math\n\n\n"
        "def slow_requests(requests, threshold_ms=5000):\n"
        '    """Slowest first."""\n'
        "    slow = [r for r in requests if r.duration_ms > threshold_ms]\n"
        "    return sorted(slow, key=lambda r: -r.duration_ms)\n")
SPAN = Span(path="latency.py", start=4, end=7, focus=4, text=tuple(CODE.splitlines()[3:7]),
            why="test")
WHY = "no line of latency.py 4-7 was given a new text (answer 'N: corrected line')"


@pytest.mark.parametrize(("reply", "line"), [
    ("It sorts wrongly.\n4: def slow_requests(requests, threshold_ms=5000):", 4),
    # the 1.5B miscounts: its number is off, its text is line 4's (live r60, xp-logstat-slow)
    ("It is wrong.\n```\n6| def slow_requests(requests, threshold_ms=5000):\n```", 4),
    ("The filter `slow = [r for r in requests if r.duration_ms > threshold_ms]` is right.", 6),
    ("```python\n    return sorted(slow, key=lambda r: -r.duration_ms)\n```", 7),
    ("The test should be changed instead.", None),
    ("4: def slow_requests(requests, threshold_ms=500):", None),  # a correction: a change
    ("99: def slow_requests(requests, threshold_ms=5000):", 4),
    ("```\nimport math\n```", None),  # a line of the file, not of the code shown
])
def test_the_line_a_reply_gives_back_as_it_reads(reply, line):
    assert given_back(CODE, SPAN, reply) == line


def test_what_a_reply_that_changed_nothing_is_told():
    said, note = again(CODE, SPAN,
                       "Looks wrong.\n4: def slow_requests(requests, threshold_ms=5000):", WHY)
    assert note == "line 4 given back as it reads"
    assert said.startswith("Line 4 already reads so: given back as it is, it changes nothing")
    assert said.rstrip().endswith("<number>: <the corrected line>")
    other, note = again(CODE, SPAN, "The test should be changed instead.", WHY)
    assert note == WHY
    assert other.startswith(f"That changed nothing: {WHY}. Give the wrong line corrected")


def _builder(fix: str):
    """xp-payslip-rounding's builder: asked for a line it gives a shown line back as it is;
    told so, it corrects ``to_cents`` when that is the code shown, else gives it back again.
    Whole files come back as they are (never asked here)."""
    def respond(req: ChatRequestView) -> Reply:
        assert asked_line(req), "only one-line requests are asked here"
        shown = req.messages[1]["content"]
        told = len(req.messages) == 4 and "already reads so" in req.messages[-1]["content"]
        m = CENTS.search(shown)
        if told and m:
            return Reply(content=f"Half a cent must round up.\n{m.group(1)}: {fix}")
        return _copied(shown)
    return respond


SETS = ["builder.one_line=true", "builder.line_samples=1", "builder.tool_loop=false",
        "builder.temperatures=[0.0, 0.6]", "run.explore_when_pinned=false",
        "run.max_attempts=1"]


async def test_a_line_given_back_is_told_so_once_and_the_second_reply_passes(fresh_sim,
                                                                              tmp_path):
    """Every one-line reply gives a shown line back; with ``line_again`` each is told so in
    the same conversation (the prompt and the reply byte for byte the prefix), and at
    ``to_cents`` the second reply corrects it and passes. Each place is one sample, not two."""
    task = next(t for t in UNPINNED if t.name == "xp-payslip-rounding")
    fix = task.sim.new.strip()
    _, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, task.name, "Where is `run_payroll` defined?", CALLER_FOUND,
        builder=ModelBehavior(respond=_builder(fix)),
        sets=[*SETS, "builder.line_again=true"])
    assert result.status == "succeeded", result.reason
    line = result.attempt_log[-1]
    assert line.strategy == "one_line" and line.passed
    assert [s.place for s in line.samples][-1] == "payroll/money/amounts.py:17-19"
    assert line.samples[-1].passed and not any(s.passed for s in line.samples[:-1])
    asked = [ChatRequestView.from_body(r.body).messages
             for r in fresh_sim.state.requests_for("sim-builder")]
    firsts = [m for m in asked if len(m) == 2]
    seconds = [m for m in asked if len(m) == 4]
    assert len(firsts) == len(seconds) == len(line.samples)  # each sample asked twice
    for second in seconds:
        assert second[:2] in firsts  # the first request, byte for byte, then its reply
        assert second[2]["role"] == "assistant" and "This looks right." in second[2]["content"]
        assert re.match(r"Line \d+ already reads so", second[3]["content"])
    last = seconds[-1][3]["content"]
    n = CENTS.search(seconds[-1][1]["content"])
    assert n is not None and last.startswith(f"Line {n.group(1)} already reads so")
    events = [json.loads(x) for x in (Path(result.run_dir) / "events.jsonl").read_text(
        encoding="utf-8").splitlines()]
    told = [e for e in events if e["kind"] == "warning" and "asked once more" in e["message"]]
    assert len(told) == len(line.samples)
    assert all(re.search(r"changed nothing \(line \d+ given back as it reads\)", e["message"])
               for e in told)
    # a sample's record is both calls': the second's reply tokens on top of the first's
    finished = [e for e in events if e["kind"] == "sample_finished"]
    assert len(finished) == len(line.samples)
    assert all(s.prompt_tokens > 0 and s.cached_tokens >= 0 for s in line.samples)


async def test_without_line_again_nothing_is_asked_twice_and_the_run_fails(fresh_sim,
                                                                           tmp_path):
    """The same builder, ``line_again`` off (the default): every one-line request is asked
    once, every reply gives its line back, and the one attempt fails as it did before."""
    task = next(t for t in UNPINNED if t.name == "xp-payslip-rounding")
    _, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, task.name, "Where is `run_payroll` defined?", CALLER_FOUND,
        builder=ModelBehavior(respond=_builder(task.sim.new.strip())), sets=SETS)
    assert result.status != "succeeded"
    asked = [ChatRequestView.from_body(r.body).messages
             for r in fresh_sim.state.requests_for("sim-builder")]
    assert asked and all(len(m) == 2 for m in asked)
    assert not any(a.changed for a in result.attempt_log)
