"""The build's strategy ladder (issue 27), against the simulator: a reply that changes nothing
(or only the failing tests) climbs to the next strategy instead of stopping the loop; a
planner's diagnosis reaches the builder only when its line exists and reads what it quotes;
best-of-k one-shot samples stop at the first that passes and send byte-identical prompts; the
time budget ends a run as failed, saying so. Judged by the run branch's files, the requests
the simulator recorded, report.json and the events."""

from __future__ import annotations

import json
import subprocess
import time
from pathlib import Path

from conftest import scenario_with
from routing_kit import (
    BUGGY,
    BUGGY_LINE,
    RIGHT,
    RIGHT_LINE,
    TEST_FILE,
    call,
    demo_run,
    show,
    submit,
)

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply
from orchestrator.sim.scenario import CacheSpec

FACT = "`median([4, 1, 3, 2])` returned `3`, the test expects `2.5`"
SUBMIT = submit("fixed")


def _fixed(repo: Path) -> str:
    head, _, _ = (repo / "stats.py").read_text(encoding="utf-8").rpartition(BUGGY_LINE)
    return head + RIGHT_LINE


def _builder(sim) -> list[ChatRequestView]:
    return [ChatRequestView.from_body(r.body) for r in sim.state.requests_for("sim-builder")]


def _report(result) -> dict:
    return json.loads((Path(result.run_dir) / "report.json").read_text(encoding="utf-8"))


async def test_an_unchanged_one_shot_climbs_to_the_facts_then_the_tool_loop(fresh_sim,
                                                                            sample_repo):
    """Both one-shots give stats.py back unchanged (the live models' commonest failure): the
    same failure twice no longer stops the loop, the second one-shot is told the assertion's
    values and the function to change, and the tool loop runs and fixes it."""
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")
    loop = [call("replace", path="stats.py", old=BUGGY, new=RIGHT), SUBMIT]

    def respond(req: ChatRequestView) -> Reply:
        if not req.body.get("tools"):
            return Reply(content=f"stats.py\n```python\n{original}```\n")
        return loop[min(req.assistant_turns, len(loop) - 1)]

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_shot_attempts=2",
        "builder.temperatures=[0.0, 0.6]", "run.max_attempts=3"))
    assert result.status == "succeeded", result.reason
    assert RIGHT_LINE in show(sample_repo, f"{result.branch}:stats.py")
    log = [(a.strategy, a.changed, a.passed) for a in result.attempt_log]
    assert log == [("one_shot", False, False), ("one_shot_fact", False, False),
                   ("tool_loop", True, True)]
    sent = _builder(fresh_sim)
    first, second = json.dumps(sent[0].messages), json.dumps(sent[1].messages)
    assert FACT not in first
    assert FACT in second  # the failure restated as a fact
    assert "stats.py lines 9-15" in second  # the one function around the failing line
    assert sent[2].body.get("tools")  # then the tool loop
    said = [(e.strategy, e.changed, e.passed) for e in events if e.kind == "attempt_finished"]
    assert said == log
    saved = _report(result)["attempt_log"]
    assert [a["strategy"] for a in saved] == ["one_shot", "one_shot_fact", "tool_loop"]
    (listed,) = [r for r in api.runs(repo=sample_repo) if r.run_id == result.run_id]
    assert listed.attempts == ("one_shot(unchanged)", "one_shot_fact(unchanged)", "tool_loop+")


async def test_changing_only_the_failing_tests_is_not_a_failed_fix(fresh_sim, sample_repo):
    """Two tool-loop attempts only rewrite the failing test through the shell (put back before
    verify, so the failure repeats exactly): the loop goes on and the third attempt fixes it."""
    state = {"attempt": 0}

    def by_attempt(req: ChatRequestView) -> Reply:
        if req.assistant_turns == 0:
            state["attempt"] += 1
        turns = ([call("run", command=f"sed -i 's/2.5)/2)/' {TEST_FILE}"), SUBMIT]
                 if state["attempt"] < 3 else
                 [call("replace", path="stats.py", old=BUGGY, new=RIGHT), SUBMIT])
        return turns[min(req.assistant_turns, len(turns) - 1)]

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=by_attempt)}))
    result = await api.arun(DEMO_TASK, **demo_run(fresh_sim, sample_repo, "run.max_attempts=3"))
    assert result.status == "succeeded", result.reason
    assert [(a.changed, a.passed) for a in result.attempt_log] == [(False, False),
                                                                   (False, False), (True, True)]
    assert show(sample_repo, f"{result.branch}:{TEST_FILE}") == \
        show(sample_repo, f"HEAD:{TEST_FILE}")


def _planner_with(diagnosis: dict) -> ModelBehavior:
    return ModelBehavior(script=[call(
        "submit", goal="median() averages the two middle values for even lengths",
        steps=["Fix the even branch of median"], questions=[], files_to_touch=["stats.py"],
        acceptance=[], diagnosis=diagnosis)])


async def _diagnosed_run(sim, repo: Path, diagnosis: dict) -> tuple[object, list, str]:
    """The first one-shot gives stats.py back unchanged, the second fixes it: the prompt of
    the second (the first is asked plainly, with no failure and no planner's reading)."""
    bodies = [(repo / "stats.py").read_text(encoding="utf-8"), _fixed(repo)]

    def respond(req: ChatRequestView) -> Reply:
        again = "The attempt before:" in json.dumps(req.messages)
        return Reply(content=f"stats.py\n```python\n{bodies[again]}```\n")

    sim.set_scenario(scenario_with(**{"sim-planner": _planner_with(diagnosis),
                                      "sim-builder": ModelBehavior(respond=respond)}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        sim, repo, "builder.one_shot=true", "builder.one_shot_attempts=2"))
    first, second = (json.dumps(r.messages) for r in _builder(sim)[:2])
    assert "Where it goes wrong" not in first
    return result, events, second


async def test_a_diagnosis_whose_line_does_not_exist_is_dropped(fresh_sim, sample_repo):
    result, events, prompt = await _diagnosed_run(fresh_sim, sample_repo, {
        "path": "stats.py", "line": 99, "quote": "return ordered[mid]",
        "should": "return the mean of the two middle values"})
    assert result.status == "succeeded", result.reason
    checked = [e for e in events if e.kind == "diagnosis_checked"]
    assert len(checked) == 1 and not checked[0].kept and "no line 99" in checked[0].reason
    assert "Where it goes wrong" not in prompt and "line 99" not in prompt


async def test_a_misquoted_diagnosis_is_dropped_and_a_true_one_reaches_the_builder(
        fresh_sim, sample_repo):
    should = "return the mean of ordered[mid - 1] and ordered[mid]"
    result, events, prompt = await _diagnosed_run(fresh_sim, sample_repo, {
        "path": "stats.py", "line": 15, "quote": "return sorted(values)[0]", "should": should})
    checked = [e for e in events if e.kind == "diagnosis_checked"]
    assert not checked[0].kept and "reads" in checked[0].reason
    assert should not in prompt
    fresh_sim.state.clear()
    result, events, prompt = await _diagnosed_run(fresh_sim, sample_repo, {
        "path": "./stats.py", "line": 15, "quote": "    return ordered[mid]", "should": should})
    assert result.status == "succeeded", result.reason
    checked = [e for e in events if e.kind == "diagnosis_checked"]
    assert checked[0].kept and checked[0].reason == ""
    assert "stats.py line 15" in prompt and should in prompt
    assert [a.diagnosis for a in result.attempt_log] == [False, True]


async def test_best_of_k_stops_at_the_first_passing_sample_with_one_prompt(fresh_sim,
                                                                          sample_repo):
    """samples = 3: sample 1 gives the file back unchanged, sample 2 fixes it, sample 3 is never
    asked. Both requests carry the same messages byte for byte (only the temperature differs),
    so the server's prompt cache serves the second."""
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")
    replies = [f"stats.py\n```python\n{original}```\n",
               f"stats.py\n```python\n{_fixed(sample_repo)}```\n",
               f"stats.py\n```python\n{_fixed(sample_repo)}```\n"]
    asked: list[int] = []

    def respond(req: ChatRequestView) -> Reply:
        asked.append(1)
        return Reply(content=replies[len(asked) - 1])

    scenario = scenario_with(**{"sim-builder": ModelBehavior(respond=respond)})
    fresh_sim.set_scenario(scenario.model_copy(update={"cache": CacheSpec(min_tokens=0,
                                                                          block=1)}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.samples=3",
        "builder.temperatures=[0.2, 0.5, 0.8]"))
    assert result.status == "succeeded", result.reason
    assert result.attempts == 1
    assert show(sample_repo, f"{result.branch}:stats.py") == _fixed(sample_repo)
    recorded = fresh_sim.state.requests_for("sim-builder")
    assert len(recorded) == 2  # stopped at the first pass
    bodies = [r.body for r in recorded]
    assert json.dumps(bodies[0]["messages"]) == json.dumps(bodies[1]["messages"])
    assert [b.get("temperature") for b in bodies] == [0.2, 0.5]
    samples = result.attempt_log[0].samples
    assert [(s.index, s.changed, s.passed) for s in samples] == [(1, False, False),
                                                                 (2, True, True)]
    assert samples[0].cached_tokens == 0 < samples[1].cached_tokens
    assert samples[1].cached_tokens == recorded[1].cached_tokens
    said = [e for e in events if e.kind == "sample_finished"]
    assert [(e.index, e.passed) for e in said] == [(1, False), (2, True)]


async def test_the_time_budget_ends_the_run_failed_and_says_so(fresh_sim, sample_repo):
    """A builder that would answer after 60 s, a budget of 4 s: the attempt under way is
    stopped, verify does not run on it, and the run fails with the budget as its reason."""
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        script=[Reply(content="thinking", delay_s=60.0)])}))
    started = time.monotonic()
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "run.time_budget_s=4",
        "run.max_attempts=5"))
    assert result.status == "failed"
    assert "time budget of 4 s" in result.reason and "run.time_budget_s" in result.reason
    assert result.attempts == 1 and result.attempt_log[0].passed is False
    assert time.monotonic() - started < 50  # the 60 s reply was not waited for
    # the build stopped at 3.6 s (a tenth kept back): the whole run, its finish included,
    # ended within the budget, not just its builds
    stopped = next(e for e in events if e.kind == "attempt_finished")
    finished = next(e for e in events if e.kind == "run_finished")
    assert 3.5 <= stopped.t < finished.t <= 4.0, (stopped.t, finished.t)
    assert show(sample_repo, f"{result.branch}:stats.py") == show(sample_repo, "HEAD:stats.py")


async def test_after_the_tool_loop_the_next_model_of_the_chain_builds(fresh_sim, sample_repo):
    """The builder's model only submits (changes nothing); attempt 2 is the next rung: the
    role's fallback model (here the reviewer's simulated model) runs the tool loop and fixes."""
    loop = [call("replace", path="stats.py", old=BUGGY, new=RIGHT), SUBMIT]

    def fallback(req: ChatRequestView) -> Reply:
        names = {t["function"]["name"] for t in req.body.get("tools") or []}
        if "replace" not in names:  # the reviewer's own session
            return call("submit", verdict="approve", comments=[])
        return loop[min(req.assistant_turns, len(loop) - 1)]

    fresh_sim.set_scenario(scenario_with(**{
        "sim-builder": ModelBehavior(script=[SUBMIT]),
        "sim-reviewer": ModelBehavior(respond=fallback)}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, 'builder.fallback=["reviewer-sim"]', "run.max_attempts=2"))
    assert result.status == "succeeded", result.reason
    assert [(a.strategy, a.model_step, a.changed) for a in result.attempt_log] == [
        ("tool_loop", 0, False), ("next_model", 1, True)]
    assert RIGHT_LINE in show(sample_repo, f"{result.branch}:stats.py")
    assert len(fresh_sim.state.requests_for("sim-builder")) == 1


MEDIAN_FIXED = '''def median(values):
    """Middle value of a non-empty list (the mean of the two middle values for even lengths)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return (ordered[mid - 1] + ordered[mid]) / 2
'''


async def test_the_facts_rung_takes_the_one_function_alone(fresh_sim, sample_repo):
    """A reply to the second one-shot may give only the function the failure points at: it is put
    into its file in place, the rest of the file untouched."""
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")

    def respond(req: ChatRequestView) -> Reply:
        if "change what is wrong there" in json.dumps(req.messages):
            return Reply(content=f"stats.py\n```python\n{MEDIAN_FIXED}```\n")
        return Reply(content=f"stats.py\n```python\n{original}```\n")

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_shot_attempts=2",
        "builder.temperatures=[0.0, 0.6]"))
    assert result.status == "succeeded", result.reason
    assert show(sample_repo, f"{result.branch}:stats.py") == _fixed(sample_repo)
    assert [a.strategy for a in result.attempt_log] == ["one_shot", "one_shot_fact"]


def test_splice_reindents_a_method_and_refuses_a_whole_file_or_a_fragment():
    from orchestrator.engine.replyfiles import splice
    from orchestrator.localize.localization import Span

    current = "import os\n\n\nclass A:\n    def f(self):\n        return 1\n\n    def g(self):\n" \
              "        return 2\n"
    span = Span(path="a.py", start=5, end=6, focus=6, text=tuple(current.splitlines()[4:6]),
                why="")
    assert splice(current, span, "def f(self):\n    return 3\n") == current.replace(
        "return 1", "return 3")
    assert splice(current, span, current.replace("return 1", "return 3")) is None  # whole file
    assert splice(current, span, "def h(self):\n    return 3\n") is None  # another function
    assert splice(current, span, "    return 3\n") is None  # not a definition


async def test_a_budget_that_runs_out_during_samples_leaves_no_sample_worktree(fresh_sim,
                                                                               sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        script=[Reply(content="thinking", delay_s=60.0)])}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.samples=2",
        "run.time_budget_s=4"))
    assert result.status == "failed" and "time budget" in result.reason
    left = list((Path(result.run_dir) / "candidates").glob("*/worktree"))
    assert left == []


async def test_an_attempt_the_budget_cuts_keeps_the_samples_it_finished(fresh_sim, sample_repo):
    """Sample 1 answers at once, sample 2 never in time: the cut attempt's record still holds
    sample 1 (live r34: a cut attempt's 7 finished samples were missing from the record, and
    from the bench's sample figures)."""
    asked: list[int] = []

    def respond(req: ChatRequestView) -> Reply:
        asked.append(1)
        return Reply(content="thinking", delay_s=0.0 if len(asked) == 1 else 60.0)

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.samples=2",
        "run.time_budget_s=8"))
    assert result.status == "failed" and "time budget" in result.reason
    cut = result.attempt_log[-1]
    assert [x.index for x in cut.samples] == [1] and not cut.samples[0].passed


MEAN_RIGHT = "    return sum(values) / len(values)\n"
MEAN_WRONG = "    return sum(values) // len(values)\n"


async def _two_one_shots(sim, repo: Path, first: str) -> tuple[object, list, list[str]]:
    """The first one-shot answers ``first`` (a whole stats.py); the second, told the attempt
    before, fixes median() in the stats.py its prompt shows: whether the first's changes are
    still in the worktree decides the run."""
    def respond(req: ChatRequestView) -> Reply:
        user = req.messages[-1]["content"]
        if "The attempt before:" not in user:
            return Reply(content=f"stats.py\n```python\n{first}```\n")
        shown = user.split("stats.py\n```\n", 1)[1].split("```", 1)[0]
        head, _, _ = shown.rpartition(BUGGY_LINE)
        return Reply(content=f"stats.py\n```python\n{head + RIGHT_LINE}```\n")

    sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        sim, repo, "builder.one_shot=true", "builder.one_shot_attempts=2", "run.max_attempts=2"))
    return result, events, [json.dumps(r.messages) for r in _builder(sim)]


async def test_an_attempt_that_breaks_a_passing_test_is_undone_before_the_next(
        fresh_sim, sample_repo):
    """The first one-shot breaks mean() (a new failing test) and leaves the median bug: the
    second is shown the files as they were before it, so its fix of median() passes."""
    broken = (sample_repo / "stats.py").read_text(encoding="utf-8").replace(MEAN_RIGHT,
                                                                            MEAN_WRONG)
    result, events, prompts = await _two_one_shots(fresh_sim, sample_repo, broken)
    assert result.status == "succeeded", result.reason
    assert MEAN_WRONG.strip() not in prompts[1].split("The tests, for reference")[0]
    assert "they were undone" in prompts[1]
    undone = [e for e in events if e.kind == "warning" and e.category == "attempt_undone"]
    assert len(undone) == 1 and "attempt 2 starts from the files of the start" in \
        undone[0].message
    branch = show(sample_repo, f"{result.branch}:stats.py")
    assert MEAN_RIGHT in branch and RIGHT_LINE in branch
    assert [(a.changed, a.passed) for a in result.attempt_log] == [(True, False), (True, True)]


async def test_an_attempt_that_fixes_one_failing_test_is_kept(fresh_sim, sample_repo):
    """Two tests fail at the start (mean and median); the first one-shot fixes mean() only:
    fewer failing tests and none new, so the second is shown it and its fix of median()
    passes."""
    stats = sample_repo / "stats.py"
    fixed_mean = stats.read_text(encoding="utf-8")
    stats.write_text(fixed_mean.replace(MEAN_RIGHT, "    return sum(values) / (len(values) + 1)\n"),
                     encoding="utf-8")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam",
                    "mean bug too"], cwd=sample_repo, check=True)
    result, events, prompts = await _two_one_shots(fresh_sim, sample_repo, fixed_mean)
    assert result.status == "succeeded", result.reason
    assert not [e for e in events if e.kind == "warning" and e.category == "attempt_undone"]
    assert "they were undone" not in prompts[1]
    branch = show(sample_repo, f"{result.branch}:stats.py")
    assert MEAN_RIGHT in branch and RIGHT_LINE in branch


async def test_a_kept_partial_fix_that_leads_nowhere_is_dropped(fresh_sim, sample_repo):
    """Live r39 (py-config-merge): a one-line answer set the default the failing test passes
    in, which fixed that test and broke none, so it was kept, and the eight attempts after it
    built on it (one wrote the right merge, failing only for that default). Here mean() and
    median() fail; attempt 1 fixes mean() and the builder, shown that, gives the file back;
    shown the start's files it fixes both. After ``PARTIAL_MISSES`` attempts on the partial fix
    it is dropped, said so, and the next attempt starts from the start's files and passes."""
    stats = sample_repo / "stats.py"
    wrong_mean = "    return sum(values) / (len(values) + 1)\n"
    start = stats.read_text(encoding="utf-8").replace(MEAN_RIGHT, wrong_mean)
    stats.write_text(start, encoding="utf-8")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qam",
                    "mean bug too"], cwd=sample_repo, check=True)
    partial = start.replace(wrong_mean, MEAN_RIGHT)
    head, _, _ = partial.rpartition(BUGGY_LINE)
    both = head + RIGHT_LINE
    shown_files: list[str] = []

    def respond(req: ChatRequestView) -> Reply:
        shown = req.messages[-1]["content"].split("stats.py\n```\n", 1)[1].split("```", 1)[0]
        shown_files.append(shown)
        if wrong_mean in shown:
            return Reply(content=f"stats.py\n```python\n{partial if len(shown_files) == 1 else both}```\n")
        return Reply(content=f"stats.py\n```python\n{shown}```\n")  # stuck on the partial

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.one_shot_attempts=2",
        "builder.tool_loop=false", "run.max_attempts=6"))
    assert result.status == "succeeded", result.reason
    assert [(a.changed, a.passed) for a in result.attempt_log] == [
        (True, False), (False, False), (False, False), (True, True)]
    assert [wrong_mean in f for f in shown_files] == [True, False, False, True]
    dropped = [e for e in events if e.kind == "warning" and e.category == "partial_dropped"]
    assert len(dropped) == 1 and "the last 2 attempts built on a kept partial fix" in \
        dropped[0].message
    branch = show(sample_repo, f"{result.branch}:stats.py")
    assert MEAN_RIGHT in branch and RIGHT_LINE in branch
