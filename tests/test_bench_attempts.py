"""The bench's attempts report (``benchmark/attempts.py``): the pass rate within 30/60/120/300 s,
the median time to a verified pass, attempts per pass and the strategy that produced it, every
failure classified, and the cost of the 2nd..kth best-of-k sample against the first. Pure
functions of run records, and the packaged live maps' time budget."""

from __future__ import annotations

import io

import pytest
from rich.console import Console

from orchestrator.benchmark import load_role_map
from orchestrator.benchmark.attempts import attempts_table, sample_lines, summarize_attempts
from orchestrator.benchmark.records import RunRecord, classify, csv_row
from orchestrator.state import Attempt, Sample


def _attempt(n: int, strategy: str, *, changed: bool = True, passed: bool = False,
             samples: tuple[Sample, ...] = ()) -> Attempt:
    return Attempt(n=n, strategy=strategy, changed=changed, passed=passed, duration_s=1.0,
                   samples=list(samples))


def _rec(task: str, wall: float, log: tuple[Attempt, ...], *, passed: bool,
         reason: str = "") -> RunRecord:
    failure = classify(passed=passed, status="succeeded" if passed else "failed", reason=reason,
                       checked=True, attempts=log)
    return RunRecord(task=task, role_map="m", repeat=0, outcome="passed" if passed else "failed",
                     status="succeeded" if passed else "failed", reason=reason, wall_s=wall,
                     attempts=len(log), attempt_log=log, failure=failure)


def _sample(index: int, call_s: float, ttft_s: float, cached: int, passed: bool) -> Sample:
    return Sample(index=index, call_s=call_s, ttft_s=ttft_s, prompt_tokens=1000,
                  cached_tokens=cached, changed=True, passed=passed)


RECORDS = [
    _rec("a", 25, (_attempt(1, "one_shot", passed=True),), passed=True),
    _rec("b", 90, (_attempt(1, "one_shot", changed=False), _attempt(2, "one_shot_fact",
                   changed=False), _attempt(3, "tool_loop", passed=True)), passed=True),
    _rec("c", 50, (_attempt(1, "one_shot", passed=True, samples=(
        _sample(1, 10.0, 6.0, 0, False), _sample(2, 4.0, 0.5, 896, False),
        _sample(3, 5.0, 0.5, 896, True))),), passed=True),
    _rec("d", 300, (_attempt(1, "one_shot", changed=False), _attempt(2, "tool_loop")),
         passed=False, reason="the time budget of 300 s (run.time_budget_s) ran out"),
    _rec("e", 80, (_attempt(1, "one_shot", changed=False),), passed=False,
         reason="acceptance still failing after 1 attempt(s)"),
    _rec("f", 80, (_attempt(1, "tool_loop"), _attempt(2, "tool_loop")), passed=False,
         reason="acceptance still failing after 2 attempt(s) (the same failure repeated, so "
                "the loop stopped early)"),
]


def test_the_curve_a_user_picks_a_map_by():
    s = summarize_attempts("m", RECORDS)
    assert (s.runs, s.passed) == (6, 3)
    assert s.median_pass_s == 50
    assert s.within == {30: pytest.approx(1 / 6), 60: pytest.approx(2 / 6),
                        120: pytest.approx(3 / 6), 300: pytest.approx(3 / 6)}
    assert s.attempts_per_pass.median == 1 and s.attempts_per_pass.high == 3
    assert s.passed_by == {"one_shot": 2, "tool_loop": 1}
    assert s.unchanged == 4 and sum(s.tried.values()) == 10
    assert s.failures == {"out_of_time": 1, "nothing_changed": 1, "same_failure": 1}


def test_later_samples_are_costed_against_the_first():
    c = summarize_attempts("m", RECORDS).samples
    assert c.attempts == 1
    assert c.first_s.median == 10.0 and c.later_s.median == 4.5
    assert c.later_vs_first.median == pytest.approx(0.45)
    assert (c.first_ttft_s.median, c.later_ttft_s.median) == (6.0, 0.5)
    assert c.later_cached_share == pytest.approx(896 / 1000)
    assert c.cold_attempts == 1 and c.cold_later_vs_first.median == pytest.approx(0.45)
    (line,) = [x for x in sample_lines([summarize_attempts("m", RECORDS)]) if "best-of-k" in x]
    assert "0.45× the first; 0.45× over the 1 whose sample 1 read its prompt cold" in line
    assert "90%" in line


def test_a_later_attempts_warm_first_sample_is_left_out_of_the_cold_figure():
    """A later attempt whose sample 1 asks a prompt the server already read (live r33: once
    later attempts spread over the places, their sample 1 took 5.9 s against attempt 1's
    17.0 s) makes samples 2..k look as dear as the first; the cold figure leaves it out."""
    warm = _rec("g", 200, (
        _attempt(1, "one_line", samples=(_sample(1, 10.0, 6.0, 0, False),
                                         _sample(2, 5.0, 0.5, 900, False))),
        _attempt(2, "one_line", samples=(_sample(1, 5.0, 0.5, 900, False),
                                         _sample(2, 5.0, 0.5, 900, False)))), passed=False,
        reason="the time budget of 300 s (run.time_budget_s) ran out")
    c = summarize_attempts("m", [warm]).samples
    assert c.attempts == 2 and c.later_vs_first.median == pytest.approx(0.75)
    assert c.cold_attempts == 1 and c.cold_later_vs_first.median == pytest.approx(0.5)


def _at(place: str, prompt: int, cached: int, ttft: float) -> Sample:
    return Sample(index=1, call_s=ttft + 4.0, ttft_s=ttft, prompt_tokens=prompt,
                  cached_tokens=cached, place=place)


def test_a_prompt_the_run_asked_before_and_read_again_is_counted_with_its_reading_time():
    """A one-slot server keeps only the last prompt: cycling over places reads each place's
    own lines again (live r34: 90 of the routed map's 145 samples, 273 s of prompt reading).
    A prompt asked again and served from the cache is not counted, nor is one first asked in
    another run."""
    run = _rec("h", 300, (
        _attempt(1, "one_line", samples=(_at("a.py:1-9", 900, 0, 12.0),
                                         _at("b.py:3-7", 700, 480, 6.0),
                                         _at("a.py:1-9", 900, 480, 9.0))),
        _attempt(2, "one_line", samples=(_at("a.py:1-9", 900, 899, 0.1),
                                         _at("b.py:3-7", 700, 480, 5.0),
                                         _at("c.py:1-2", 650, 480, 4.0)))), passed=False,
        reason="the time budget of 300 s (run.time_budget_s) ran out")
    other = _rec("i", 30, (_attempt(1, "one_line", passed=True, samples=(
        _at("c.py:1-2", 650, 0, 8.0),)),), passed=True)
    c = summarize_attempts("m", [run, other]).samples
    assert (c.asked, c.reread) == (7, 2)
    assert c.reread_ttft_s == pytest.approx(14.0)
    assert c.asked_call_s == pytest.approx(44.1 + 7 * 4.0)
    lines = sample_lines([summarize_attempts("m", [run, other])])
    assert "m: 2 of 7 samples read again a prompt their run had asked before: 14s" in lines[0]


def _placed(index: int, place: str, ttft: float, gen: float, corrections: int = 1) -> Sample:
    return Sample(index=index, call_s=ttft + gen, ttft_s=ttft, prompt_tokens=800,
                  cached_tokens=0 if ttft > 1 else 799, place=place, corrections=corrections)


def test_samples_at_the_first_ones_place_and_elsewhere_are_costed_apart():
    """The one-line request cycles over places (live r37, routed: 44 of samples 2..k asked
    sample 1's very prompt, 92 another place's), and a place asked again asks for a list of
    corrections (the same code, another question at its end); each kind is costed against
    its attempt's sample 1, prompt reading and generation apart, so the figure says whether a
    later sample read a prompt or only generated, and a longer list is not taken for the
    same prompt sampled again."""
    run = _rec("j", 300, (
        _attempt(1, "one_line", samples=(_placed(1, "a.py:1-9", 6.0, 6.0),
                                         _placed(2, "a.py:1-9", 0.1, 5.9),
                                         _placed(3, "b.py:2-4", 2.0, 7.0),
                                         _placed(4, "a.py:1-9", 2.5, 6.5),
                                         _placed(5, "a.py:1-9", 1.0, 9.0, corrections=3))),),
        passed=False, reason="the time budget of 300 s (run.time_budget_s) ran out")
    c = summarize_attempts("m", [run]).samples
    assert c.first_gen_s.median == pytest.approx(6.0)
    assert (c.same_place.samples, c.listed_place.samples, c.other_place.samples) == (2, 1, 1)
    assert c.listed_place.vs_first.median == pytest.approx(10.0 / 12.0)
    assert (c.listed_place.ttft_s.median, c.listed_place.gen_s.median) == (1.0, 9.0)
    assert c.same_place.vs_first.median == pytest.approx((0.5 + 0.75) / 2)
    assert c.same_place.ttft_s.median == pytest.approx(1.3)
    assert c.same_place.gen_s.median == pytest.approx(6.2)
    assert c.other_place.vs_first.median == pytest.approx(0.75)
    assert (c.other_place.ttft_s.median, c.other_place.gen_s.median) == (2.0, 7.0)
    (line,) = [x for x in sample_lines([summarize_attempts("m", [run])]) if "generates" in x]
    assert line == ("m: sample 1 reads 6.00s and generates 6.00s; samples 2..k asking sample "
                    "1's very prompt: 2, 0.62× the first, reading 1.30s, generating 6.20s; "
                    "asking a list at its place: 1, 0.83× the first, reading 1.00s, "
                    "generating 9.00s; at another place: 1, 0.75× the first, reading 2.00s, "
                    "generating 7.00s")


def test_samples_asked_once_more_for_the_line_they_named_are_counted_with_what_they_bought():
    """A sample whose reply named a line and was asked once more for it records that second
    turn's time; the bench counts them, the turn's median time and what it bought."""
    def asked(index: int, again_s: float, changed: bool, passed: bool) -> Sample:
        return Sample(index=index, call_s=9.0 + again_s, ttft_s=4.0, prompt_tokens=700,
                      cached_tokens=650, changed=changed, passed=passed, place="a.py:1-9",
                      again_s=again_s)
    run = _rec("k", 60, (_attempt(1, "one_line", passed=True, samples=(
        asked(1, 0.0, False, False), asked(2, 3.0, False, False), asked(3, 5.0, True, False),
        asked(4, 4.0, True, True))),), passed=True)
    c = summarize_attempts("m", [run]).samples
    assert (c.again, c.again_changed, c.again_passed) == (3, 2, 1)
    assert c.again_s.median == pytest.approx(4.0)
    (line,) = [x for x in sample_lines([summarize_attempts("m", [run])]) if "once more" in x]
    assert line == ("m: 3 of 4 samples named a line or file, gave it no new text and were "
                    "asked once more for it (that turn 4.00s, median): 2 then changed the "
                    "code, 1 passed")
    assert not [x for x in sample_lines([summarize_attempts("m", RECORDS)]) if "once more" in x]
    # samples 2..4 took 12, 14 and 13 s against 9 s, their prompt's first call 9 s each
    assert c.later_vs_first.median == pytest.approx(13 / 9)
    assert c.one_turn_vs_first.median == pytest.approx(1.0)
    (best,) = [x for x in sample_lines([summarize_attempts("m", [run])]) if "best-of-k" in x]
    assert "1.00× with the second turns left out" in best
    # each first call read 4 s and generated 5 s; the second turns are not generation
    assert c.same_place.gen_s.median == pytest.approx(5.0)
    (plain,) = [x for x in sample_lines([summarize_attempts("m", RECORDS)]) if "best-of-k" in x]
    assert "second turns" not in plain


def test_the_table_and_the_csv_say_which_strategy_passed():
    console = Console(file=io.StringIO(), width=200)
    console.print(attempts_table([summarize_attempts("m", RECORDS)]))
    out = console.file.getvalue()  # type: ignore[attr-defined]
    assert "one_shot 2, tool_loop 1" in out and "out_of_time 1" in out and "4/10" in out
    row = csv_row(RECORDS[1])
    assert row["passed_by"] == "tool_loop"
    assert row["strategies"] == "one_shot(unchanged) one_shot_fact(unchanged) tool_loop"


def test_a_bench_check_failure_and_an_error_are_classes_of_their_own():
    assert classify(passed=False, status="succeeded", reason="", checked=False,
                    attempts=()) == "bench_check"
    assert classify(passed=True, status="succeeded", reason="", checked=True, attempts=()) == ""


def test_the_live_maps_spend_a_time_budget_not_an_attempt_count():
    for name in ("live-routed", "live-solo", "live-split"):
        _, roles = load_role_map(name)
        assert roles.run.time_budget_s == 300 and roles.run.max_attempts > 3
