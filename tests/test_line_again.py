"""A one-line reply that picks a line and gives it no new text is asked once more, in its
session, for that line (``oneline.named_line``, ``oneshot.ask``). Which line a reply picked, on
strings (the live 1.5B's own replies), then whole runs against the simulator (the real SDK over
HTTP), judged by the run branch's file, the requests the simulator recorded, the events and the
samples the attempt log keeps."""

from __future__ import annotations

import json

import pytest
from conftest import scenario_with
from routing_kit import BUGGY_LINE, RIGHT_LINE, asked_line, demo_run, median_line_number, show

from orchestrator import api
from orchestrator.benchmark import load_suite
from orchestrator.engine.oneline import named_line
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.localize.localization import Span
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply

# xp-loyalty-tier's tier table and `tier_for`, as the live suite ships them (the fix is line 14)
TIERS = (next(t for t in load_suite("live").tasks if t.name == "xp-loyalty-tier").repo
         / "loyalty/program/tiers.py").read_text(encoding="utf-8")
SPAN = Span(path="loyalty/program/tiers.py", start=3, end=16, focus=14,
            text=tuple(TIERS.splitlines()[2:16]), why="found")


@pytest.mark.parametrize(("reply", "line"), [
    # live, r72 (xp-loyalty-tier, builder-1-c4): the bug's very line, named, and no new text
    ("The line that is wrong is line 14 in the `tier_for` function. The test expects the tier "
     "to be 'Gold' when the lifetime points are 1000, but the function returns 'Silver' "
     "instead.", 14),
    # the line given back numbered as it is: a copy picks it
    ("The comparison leaves out the threshold itself.\n14:         if lifetime_points > needed:",
     14),
    ("```python\n  14|         if lifetime_points > needed:\n```", 14),
    # a piece of code quoted that one line of the code holds
    ("The check `lifetime_points > needed` leaves out 1000 itself.", 14),
    ("The table is wrong: `(\"Gold\", 1000),` should start the tier at 1000.", 5),
    # a line number outside the code shown is not a line of it; the next clue is
    ("Line 40 of the tests expects Gold; `lifetime_points > needed` is the cause.", 14),
])
def test_the_line_a_reply_picked_is_the_one_it_names_copies_or_quotes(reply, line):
    assert named_line(TIERS, SPAN, reply) == line


@pytest.mark.parametrize("reply", [
    # live, r72 (builder-2-c3): right, but it names a function, not a line: its def is no pick
    "The `tier_for` function incorrectly returns `'Silver'` when the lifetime points are "
    "exactly 1000. To fix this, change the `tier_for` function to return `'Gold'`.",
    "I cannot tell which line is wrong.",
    "",
    # every line reprinted as it is: no one line was picked
    "\n".join(f"{n}: {t}" for n, t in enumerate(TIERS.splitlines()[2:16], 3)),
    # a quote two lines hold
    "Look at `return`.",
    "The bug is on line 2.",  # outside the code shown
])
def test_a_reply_that_picks_no_one_line_of_the_code_names_none(reply):
    assert named_line(TIERS, SPAN, reply) is None


def _named_then(answer: str, seen: list[ChatRequestView], *, cut: bool = False):
    """A demo builder: whole files come back unchanged; asked for the one line it names the
    median's line by number and gives no text (with ``cut``, on one line that runs on to its
    cap); asked once more it answers ``answer`` (with ``{n}`` the line's number)."""
    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        if not asked_line(req):
            return Reply(content="I see no bug in stats.py.")
        last = req.messages[-1]["content"]
        if "You named line" in last:
            return Reply(content=answer.format(n=last.split()[3]))
        n = median_line_number(last)
        said = (f"The line that is wrong is line {n}: it returns the upper middle value when "
                "the count is even.")
        if cut:  # live (r74, py-config-merge): the reason looped until the 256-token cap
            return Reply(content=said + " The test fails because" * 40, finish_reason="length")
        return Reply(content=said)
    return respond


async def test_a_line_named_without_a_new_text_is_asked_for_once_more_and_passes(
        fresh_sim, sample_repo):
    """The one-line reply names the median's line and gives it no text: the same session asks
    once more, on the cached prefix (the first request's messages as sent, then the reply),
    for that line, showing it as it reads; the answer is written and the run passes on the
    attempt's first sample, which records the second turn's time."""
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")
    seen: list[ChatRequestView] = []
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_named_then("{n}: " + RIGHT_LINE.strip(), seen))}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "builder.line_samples=3"))
    assert result.status == "succeeded", result.reason
    head, _, tail = original.rpartition(BUGGY_LINE)
    assert show(sample_repo, f"{result.branch}:stats.py") == head + RIGHT_LINE + tail
    assert [(a.strategy, a.changed) for a in result.attempt_log] == [
        ("one_shot", False), ("one_line", True)]
    first, again = [r for r in seen if asked_line(r)]
    assert again.messages[:len(first.messages)] == first.messages
    assert again.messages[len(first.messages)]["role"] == "assistant"
    asked = again.messages[-1]["content"]
    assert f"{BUGGY_LINE.strip()}" in asked and "You named line" in asked
    [sample] = result.attempt_log[1].samples
    assert sample.passed and sample.again_s > 0 and sample.call_s >= sample.again_s
    warned = [e.message for e in events if e.kind == "warning"]
    assert any("named line" in m and "asked once more for that line" in m for m in warned)
    line_sessions = {e.session for e in events if e.kind == "call_finished"
                     and e.role == "builder" and e.session.startswith("builder-2")}
    assert line_sessions == {"builder-2"}  # both turns are the first sample's session


async def test_a_reply_cut_at_its_cap_is_read_whole_for_the_line_it_named(fresh_sim,
                                                                         sample_repo):
    """A reply that names its line and then runs on, on the same line, to its token cap: its
    unfinished last line is never written into the code, but the line it named is asked for."""
    seen: list[ChatRequestView] = []
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_named_then("{n}: " + RIGHT_LINE.strip(), seen, cut=True))}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true"))
    assert result.status == "succeeded", result.reason
    assert [(a.strategy, a.changed) for a in result.attempt_log] == [
        ("one_shot", False), ("one_line", True)]
    assert sum("You named line" in r.messages[-1]["content"] for r in seen) == 1


async def test_a_line_asked_for_and_given_back_again_goes_on_to_the_next_sample(
        fresh_sim, sample_repo):
    """Asked once more, the builder gives the line back as it is: no third turn; the sample
    changed nothing and the next sample is asked (with no failure of its own, it names the
    line again, and so on: every sample asks at most twice)."""
    seen: list[ChatRequestView] = []
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_named_then("{n}: " + BUGGY_LINE.strip(), seen))}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "builder.line_samples=2", "run.max_attempts=2"))
    assert result.status == "failed"
    line_requests = [r for r in seen if asked_line(r)]
    assert len(line_requests) == 4  # two samples, two turns each
    assert sum("You named line" in r.messages[-1]["content"] for r in line_requests) == 2
    samples = result.attempt_log[1].samples
    assert [(s.changed, s.again_s > 0) for s in samples] == [(False, True), (False, True)]
    # the second sample asks the first sample's very messages: the server's cache serves them
    assert json.dumps(line_requests[0].messages) == json.dumps(line_requests[2].messages)


async def test_a_one_line_reply_that_names_no_line_is_not_asked_again(fresh_sim, sample_repo):
    seen: list[ChatRequestView] = []

    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        if not asked_line(req):
            return Reply(content="I see no bug in stats.py.")
        return Reply(content="The median of an even count is the mean of the middle two.")

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "run.max_attempts=2"))
    assert result.status == "failed"
    assert [len(r.messages) for r in seen if asked_line(r)] == [2]  # one turn: system, user
    assert not any("You named line" in json.dumps(r.messages) for r in seen)
