"""A one-line request for several corrections (``[roles.<build>] line_alternatives``): which
edits a reply makes (``oneline.alternatives``, on the live 1.5B's reply shapes), the request's
wording and reply cap, then whole runs against the simulator (the real SDK over HTTP) judged by
the run branch's file, the requests the simulator recorded, the samples the attempt log keeps
and the events; and the bench's figures per request (``state.drawn``)."""

from __future__ import annotations

import pytest
from conftest import scenario_with
from routing_kit import BUGGY_LINE, RIGHT_LINE, asked_line, demo_run, median_line_number, show

from orchestrator import api
from orchestrator.benchmark.compare import passed_at_first_call
from orchestrator.benchmark.records import RunRecord, drawn
from orchestrator.engine import oneline
from orchestrator.engine.leadlines import line_messages
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.localize.localization import Span
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply
from orchestrator.state import Attempt, Sample

CODE = ("def median(xs):\n"
        "    ordered = sorted(xs)\n"
        "    mid = len(ordered) // 2\n"
        "    return ordered[mid]\n")
SPAN = Span(path="stats.py", start=1, end=4, focus=4, text=tuple(CODE.splitlines()), why="found")
FIX = "    return (ordered[mid - 1] + ordered[mid]) / 2"


def _edits(reply: str, limit: int = 4) -> list[str]:
    """The line 4 each piece ``alternatives`` returns makes."""
    out = []
    for piece in oneline.alternatives(CODE, SPAN, reply, limit):
        new, _ = oneline.line_edit(CODE, SPAN, piece)
        assert new is not None
        out.append(new.splitlines()[3])
    return out


def test_each_listed_correction_is_an_edit_of_its_own_the_reply_read_whole_first():
    # live shape (r-p1, sh-pipeline-status): a list, each item a fenced numbered line
    reply = ("The median of an even count is the mean of the middle two. Three corrections:\n\n"
             "1. **Take the lower middle**:\n   ```python\n   4|     return ordered[mid - 1]\n"
             "   ```\n\n2. **Average the middle two**:\n   ```python\n"
             f"   4| {FIX.strip()}\n   ```\n\n3. Sort in reverse:\n"
             "   `return sorted(xs, reverse=True)[mid]`\n")
    assert _edits(reply) == ["    return ordered[mid - 1]", FIX,
                             "    return sorted(xs, reverse=True)[mid]"]


def test_numbered_lines_alone_are_corrections_and_the_request_s_brackets_are_read():
    # as asked, "<number>: <the corrected line>", one per line; live the 1.5B kept the brackets
    reply = ("The even case is wrong.\n4: return ordered[mid + 1]\n"
             f"<4>: {FIX.strip()}\n4: return ordered[mid + 1]\n")
    assert _edits(reply) == ["    return ordered[mid + 1]", FIX]  # the same edit once


def test_copies_and_edits_made_before_are_left_out_and_the_limit_holds():
    reply = ("1. `return ordered[mid]`\n2. `return ordered[mid - 1]`\n"
             "3. `return ordered[mid - 1]`\n4. `return ordered[-mid]`\n5. `return xs[mid]`\n")
    # read whole, the reply gives the first new line; then each item; the copy changes nothing
    assert _edits(reply, limit=2) == ["    return ordered[mid - 1]", "    return ordered[-mid]"]
    assert oneline.alternatives(CODE, SPAN, "I cannot tell.", 4) == []
    assert oneline.alternatives(CODE, SPAN, "4: return ordered[mid]", 4) == []


def test_the_request_asks_for_that_many_corrections_and_leaves_room_for_them():
    one = line_messages("fix median", "", "AssertionError", SPAN)[1]["content"]
    three = line_messages("fix median", "", "AssertionError", SPAN, alternatives=3)[1]["content"]
    assert "on the last line" in one and "different corrections" not in one
    assert "give three different corrections" in three and "on the last line" not in three
    assert three.split("Which one of")[0] == one.split("Which one of")[0]  # the same prefix
    base = oneline.reply_cap(256, SPAN)
    assert oneline.reply_cap(256, SPAN, 3) == base + 2 * oneline.ALTERNATIVE_TOKENS
    assert oneline.reply_cap(None, SPAN, 3) is None


def _lists(seen: list[ChatRequestView], right_at: int):
    """A demo builder: whole files come back unchanged; the one-line request is answered with
    three corrections of the median's line, the right one at ``right_at`` (0: none)."""
    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        if not asked_line(req):
            return Reply(content="I see no bug in stats.py.")
        n = median_line_number(req.messages[-1]["content"])
        wrong = ["    return ordered[mid - 1]", "    return ordered[mid + 1]",
                 "    return ordered[0]"]
        if right_at:
            wrong[right_at - 1] = RIGHT_LINE.rstrip("\n")
        items = "\n".join(f"{i}. `{n}: {line.strip()}`" for i, line in enumerate(wrong, 1))
        return Reply(content=f"The even case takes one middle value.\n{items}\n")
    return respond


async def test_a_place_asked_again_asks_for_a_list_and_a_further_correction_is_kept(
        fresh_sim, sample_repo):
    """The place's first sample asks for one line (the reply read whole writes its first
    correction, wrong); its second asks, on the same prefix, for three: that reply's first
    correction is wrong again, its second right, checked in a worktree of its own with no
    call (``alternative == 2``) and kept."""
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")
    seen: list[ChatRequestView] = []
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_lists(seen, right_at=2))}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "builder.line_samples=2", "builder.line_alternatives=3"))
    assert result.status == "succeeded", result.reason
    head, _, tail = original.rpartition(BUGGY_LINE)
    assert show(sample_repo, f"{result.branch}:stats.py") == head + RIGHT_LINE + tail
    one, listed = (r.messages[-1]["content"] for r in seen if asked_line(r))
    assert "on the last line" in one and "give three different corrections" in listed
    assert one.split("Which one of")[0] == listed.split("Which one of")[0]  # a cached prefix
    attempt = result.attempt_log[1]
    assert attempt.strategy == "one_line" and attempt.passed
    assert [(s.corrections, s.alternative, s.changed, s.passed) for s in attempt.samples] == [
        (1, 0, True, False), (3, 0, True, False), (3, 2, True, True)]
    further = attempt.samples[2]
    assert further.call_s == 0 and further.output_tokens == 0 and further.ttft_s is None
    finished = [e for e in events if e.kind == "sample_finished" and e.attempt == 2]
    assert [(e.index, e.corrections, e.alternative, e.passed) for e in finished] == [
        (1, 1, 0, False), (2, 3, 0, False), (3, 3, 2, True)]
    calls = [e for e in events if e.kind == "call_finished" and e.session.startswith("builder-2")]
    assert len(calls) == 2  # a call a draw: the further correction asked nothing


async def test_one_correction_a_request_reads_only_the_first_and_fails(fresh_sim, sample_repo):
    """The same replies without ``line_alternatives``: every request asks for one line, the
    reply read whole writes its first correction, which is wrong, and the run fails (the
    correction that would pass is never checked)."""
    seen: list[ChatRequestView] = []
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_lists(seen, right_at=2))}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "builder.line_samples=2", "run.max_attempts=2"))
    assert result.status == "failed"
    assert [(s.corrections, s.alternative) for s in result.attempt_log[1].samples] == [
        (1, 0), (1, 0)]
    assert not any("different corrections" in r.messages[-1]["content"] for r in seen)


async def test_no_correction_right_checks_each_once_then_the_next_draw(fresh_sim, sample_repo):
    seen: list[ChatRequestView] = []
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_lists(seen, right_at=0))}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_line=true",
        "builder.line_samples=3", "builder.line_alternatives=3", "run.max_attempts=2"))
    assert result.status == "failed"
    samples = result.attempt_log[1].samples
    # one line, then twice a list of three: each list's three edits checked, once each
    assert [(s.index, s.alternative) for s in samples] == [(1, 0), (2, 0), (4, 2), (5, 3),
                                                           (3, 0), (6, 2), (7, 3)]
    assert sum(asked_line(r) for r in seen) == 3  # one request a draw


def _sample(index: int, *, alternative: int = 0, passed: bool = False) -> Sample:
    return Sample(index=index, call_s=0.0 if alternative else 5.0, changed=True, passed=passed,
                  alternative=alternative)


def test_figures_per_request_fold_a_reply_s_corrections_into_it():
    samples = [_sample(1), _sample(3, alternative=2, passed=True)]
    assert [(s.index, s.passed) for s in drawn(samples)] == [(1, True)]
    record = RunRecord(role_map="m", task="t", repeat=0, outcome="passed", status="succeeded",
                       wall_s=9.0,
                       attempt_log=[Attempt(n=1, strategy="one_line", samples=samples)])
    assert passed_at_first_call(record)  # one request, passed by its second correction
    later = record.model_copy(update={"attempt_log": [Attempt(
        n=1, strategy="one_line", samples=[_sample(1), _sample(2, passed=True)])]})
    assert not passed_at_first_call(later)


@pytest.mark.parametrize("limit", [1, 2])
def test_the_limit_counts_the_reply_read_whole(limit):
    reply = "1. `4: return ordered[0]`\n2. `4: return ordered[1]`\n3. `4: return ordered[2]`\n"
    assert len(oneline.alternatives(CODE, SPAN, reply, limit)) == limit


def test_each_place_asks_for_one_line_first_then_for_the_list_greedy_once():
    from orchestrator.engine.building import first_visits
    from orchestrator.engine.leadlines import listed_again
    from orchestrator.engine.oneshot import Prompt, Shown

    def place(n: int) -> Prompt:
        span = SPAN.model_copy(update={"start": n, "end": n + 3})
        return Prompt(line_messages("fix median", "", "AssertionError", span), Shown({}, {}),
                      line=span)
    p, lead1, lead2 = place(1), place(10), place(20)
    asked = listed_again([p, lead1, p, lead2, p], 3)
    assert [a.alternatives for a in asked] == [1, 1, 3, 1, 3]
    assert asked[2] is asked[4]  # one list prompt per place: a visit again is at the highest
    assert first_visits(asked, (0.0, 0.8), 1) == (0.0, 0.0, 0.0, 0.0, 0.8)
    assert listed_again([p, p], 1) == [p, p]  # line_alternatives = 1: as before


def test_the_bench_counts_the_lists_and_their_further_corrections():
    from orchestrator.benchmark.attempts import sample_lines, summarize_attempts
    samples = [_sample(1), Sample(index=2, call_s=4.0, changed=True, corrections=3),
               Sample(index=4, changed=True, passed=True, corrections=3, alternative=2)]
    record = RunRecord(role_map="m", task="t", repeat=0, outcome="passed", status="succeeded",
                       wall_s=9.0, attempt_log=[Attempt(n=1, strategy="one_line",
                                                        samples=samples)])
    summary = summarize_attempts("m", [record])
    c = summary.samples
    assert (c.asked, c.listed, c.listed_passed, c.further, c.further_passed) == (2, 1, 1, 1, 1)
    assert c.later_s.median == 4.0  # the further correction is no sample of its own
    assert any("1 of 2 samples asked for several corrections and 1 passed; 1 further" in line
               for line in sample_lines([summary]))


def _greedy_lists():
    """A demo builder whose list of corrections holds the right one only when asked greedy
    (its first item wrong, its second right); at any other temperature, and asked for one
    line, every correction is wrong."""
    greedy, other = _lists([], right_at=2), _lists([], right_at=0)

    def respond(req: ChatRequestView) -> Reply:
        listed = "different corrections" in req.messages[-1]["content"]
        return greedy(req) if listed and req.body.get("temperature") == 0.0 else other(req)
    return respond


async def _greedy_run(sim, repo, temperatures: str):
    """A demo run with ``_greedy_lists``'s builder at ``temperatures``: two samples an
    attempt, lists of three, no tool loop, three attempts."""
    sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_greedy_lists())}))
    return await api.arun(DEMO_TASK, **demo_run(
        sim, repo, "builder.one_shot=true", "builder.one_line=true", "builder.line_samples=2",
        "builder.line_alternatives=3", f"builder.temperatures={temperatures}",
        "builder.tool_loop=false", "run.max_attempts=3"))


async def test_a_place_s_first_list_is_asked_greedy_even_when_its_attempt_samples_hotter(
        fresh_sim, sample_repo):
    """Attempt 2 (the one-line request, at temperature 0.8) asks the place once for one line
    at 0.8, then for the list: greedy, its first list there. The list's second correction is
    right, so the run passes in that attempt; before, the list was asked at 0.8 and its
    corrections were all wrong (the test below)."""
    result = await _greedy_run(fresh_sim, sample_repo, "[0.0, 0.8]")
    assert result.status == "succeeded", result.reason
    attempt = result.attempt_log[1]
    assert attempt.n == 2 and attempt.strategy == "one_line" and attempt.passed
    assert [(s.corrections, s.temperature, s.alternative, s.passed) for s in attempt.samples
            ] == [(1, 0.8, 0, False), (3, 0.0, 0, False), (3, 0.0, 2, True)]


async def test_a_list_asked_only_hot_never_finds_the_greedy_correction(fresh_sim, sample_repo):
    """The same builder with one temperature (0.8): every list is asked at 0.8 and the run
    fails, so the test above passes by the greedy list alone."""
    result = await _greedy_run(fresh_sim, sample_repo, "[0.8]")
    assert result.status == "failed"
    listed = [s for a in result.attempt_log for s in a.samples if s.corrections > 1]
    assert listed and all(s.temperature == 0.8 and not s.passed for s in listed)


def test_a_place_an_earlier_attempt_asked_asks_for_the_list_first_greedy_once():
    """Across attempts: a place an earlier attempt asked one line of asks the list on its
    first visit, greedy while no list was asked greedy there, then at the attempt's own
    temperature; a place never asked still asks one line first."""
    from orchestrator.engine.building import first_visits, interleaved
    from orchestrator.engine.leadlines import first_lists, listed_again, visited
    from orchestrator.engine.oneshot import Prompt, Shown

    def place(n: int) -> Prompt:
        span = SPAN.model_copy(update={"start": n, "end": n + 3})
        return Prompt(line_messages("fix median", "", "AssertionError", span), Shown({}, {}),
                      line=span)

    def asked_at(where: str, *, corrections: int = 1, temperature: float = 0.0) -> Sample:
        return Sample(index=1, temperature=temperature, place=where, corrections=corrections)
    p, lead = place(1), place(10)
    one_line = [Attempt(n=1, strategy="one_line", samples=[asked_at(p.place)])]
    before = visited(one_line, 0.0)
    assert before == {p.place: False}
    asked = listed_again(interleaved([p, lead], 2, 2), 3, before)
    assert [(a.place, a.alternatives) for a in asked] == [
        (lead.place, 1), (p.place, 3), (lead.place, 3)]
    greedy = first_lists(asked, before)
    assert greedy == [False, True, True]
    assert first_visits(asked, (0.8,), 2, greedy, 0.0) == (0.8, 0.0, 0.0)
    # a list was asked greedy at p: its list is asked at the attempt's own temperature now
    listed = [*one_line, Attempt(n=2, strategy="one_line", samples=[
        asked_at(p.place, corrections=3), asked_at(p.place, corrections=3, temperature=0.8)])]
    before = visited(listed, 0.0)
    assert before == {p.place: True}
    asked = listed_again([p, p], 3, before)
    assert first_lists(asked, before) == [False, False]
    assert first_visits(asked, (0.8,), 3, first_lists(asked, before), 0.0) == (0.8, 0.8)
    # a further correction is not a request: it marks no place
    further = Sample(index=3, place="elsewhere.py:1-4", corrections=3, alternative=2)
    assert visited([Attempt(n=1, strategy="one_line", samples=[further])], 0.0) == {}
