"""`orchestrate bench`: real runs of the built-in suite against the simulator (real git, real
tests), the comparison maths on its own, the report's files, and the built-in tasks themselves."""

from __future__ import annotations

import csv
import io
import json
import os
import statistics
from pathlib import Path

import pytest
from conftest import faster, run_env
from rich.console import Console

from orchestrator.benchmark import (
    SIM_MAPS,
    BenchSimulator,
    RunRecord,
    apply_fix,
    bench_main,
    builtin_suite,
    compare_pair,
    load_suite,
    materialize,
    print_report,
    run_bench,
)
from orchestrator.benchmark.behaviors import builder_for, find_task, hashes_odd, register_behaviors
from orchestrator.benchmark.compare import spread, task_times
from orchestrator.benchmark.simulator import packaged_scenario
from orchestrator.benchmark.spec import check_acceptance
from orchestrator.benchmark.suite import sim_tasks
from orchestrator.config.schema import SandboxSettings
from orchestrator.errors import ConfigError
from orchestrator.sim import FaultSpec, ModelBehavior, Reply, Scenario

# Two tasks whose names hash odd (the fast builder fails them) and two that hash even.
SUBSET = ["js-range", "py-clamp", "py-slugify", "sh-count-lines"]


def quick(factor: float = 3.0) -> Scenario:
    """The bench scenario with every model ``factor`` times faster (same ratios)."""
    register_behaviors()  # the scenario names them
    return faster(Scenario.load(packaged_scenario("bench-sim.toml")), factor)


@pytest.fixture(scope="module")
def suite():
    return builtin_suite().select(SUBSET)


def _bench(suite, out: Path, *, jobs: int, repeat: int = 2, factor: float = 3.0):
    with BenchSimulator(suite, quick(factor)) as sim:
        maps = [sim.role_map(name) for name in SIM_MAPS]
        report = run_bench(suite, maps, repeat=repeat, jobs=jobs, out_dir=out,
                           env=sim.env(run_env()))
        return report, list(sim.server.requests)


@pytest.fixture(scope="module")
def bench2(suite, tmp_path_factory):
    """The subset under both simulated maps, two repeats, two runs at a time."""
    out = tmp_path_factory.mktemp("bench")
    report, requests = _bench(suite, out, jobs=2)
    return report, out, requests


def test_faster_map_fails_more_and_speedup_is_measured_at_equal_accuracy(bench2):
    report, _, _ = bench2
    careful, fast = report.summary("bench-careful"), report.summary("bench-fast")
    assert careful.pass_rate == 1.0 and careful.errors == 0
    odd = {t for t in SUBSET if hashes_odd(t)}
    assert odd and fast.pass_rate == 0.5
    assert {r.task for r in report.records if r.role_map == "bench-fast" and not r.passed} == odd
    pair = report.comparisons[0]
    assert (pair.a, pair.b) == ("bench-fast", "bench-careful")  # the faster map first
    assert set(pair.both_solved) == set(SUBSET) - odd
    walls = {(r.role_map, r.task): [] for r in report.records}
    for r in report.records:
        if r.passed:
            walls[(r.role_map, r.task)].append(r.wall_s)
    expected = statistics.median(statistics.median(walls[("bench-careful", t)])
                                 / statistics.median(walls[("bench-fast", t)])
                                 for t in pair.both_solved)
    assert pair.speedup == pytest.approx(expected) and pair.speedup > 1
    assert pair.speedup_by_repeat.n == 2 and pair.speedup_by_repeat.low <= pair.speedup_by_repeat.high
    assert pair.pass_rate_a == 0.5 and pair.pass_rate_b == 1.0
    assert pair.pass_at_budget_a is not None and pair.pass_at_budget_a <= 0.5


def test_printed_comparison_puts_pass_rates_next_to_every_speedup(bench2):
    report, _, _ = bench2
    console = Console(record=True, width=200)
    print_report(report, console)
    text = console.export_text()
    lines = [line for line in text.splitlines() if "bench-fast vs bench-careful" in line]
    assert lines == ["bench-fast vs bench-careful: pass rate bench-fast 50%, bench-careful 100%"]
    block = text.split(lines[0], 1)[1].splitlines()[1:7]
    assert "at equal accuracy bench-fast is" in block[0] and "2 task(s) both solved" in block[0]
    # each simulated builder passes at its first call: the split names them, and no rest
    assert block[1].strip() == "of those, 2 passed at both maps' first build call"
    assert block[2].strip().startswith("their summed time, bench-careful over bench-fast: ")
    assert block[3].strip().startswith("to the same pass rate (50%, the lower one): bench-fast "
                                       "within ")
    assert "pass rate within" in block[4]
    assert block[5].strip().startswith("raw speed-up, all runs incl. failures (not accuracy-matched)")
    assert "bench-careful: builtin, 2 repeat(s)" in text and "js-range" in text


def test_records_carry_time_split_tokens_cost_and_citations(bench2):
    report, _, _ = bench2
    for r in report.records:
        assert r.outcome in ("passed", "failed") and r.error is None
        assert r.model_s > 0 and r.wall_s >= r.model_s
        assert r.model_s + r.tool_s + r.orchestration_s == pytest.approx(r.wall_s, rel=0.05)
        assert {"planner", "explorer", "builder"} <= set(r.tokens)
        assert ("reviewer" in r.tokens) == r.passed  # failing runs never reach the review
        assert r.cost_usd == pytest.approx(sum(r.cost.values()))
        assert r.fallbacks == 0 and r.forks == 0
    careful, fast = report.summary("bench-careful"), report.summary("bench-fast")
    assert careful.citations_verified > 0 and careful.citations_dropped == 0
    assert fast.citations_dropped > 0  # the fast explorers invent a file
    assert fast.cost_per_pass is not None and careful.cost_usd.median > fast.cost_usd.median


def test_csv_has_one_row_per_run_and_json_and_png_are_written(bench2):
    report, out, _ = bench2
    rows = list(csv.DictReader((out / "runs.csv").open(encoding="utf-8")))
    assert len(rows) == len(SUBSET) * len(SIM_MAPS) * 2
    assert len({(r["task"], r["role_map"], r["repeat"]) for r in rows}) == len(rows)
    assert {"outcome", "wall_s", "model_s", "tool_s", "orchestration_s", "tokens_builder",
            "cost_builder", "fallbacks", "citations_verified", "citations_dropped"} <= set(rows[0])
    data = json.loads((out / "bench.json").read_text(encoding="utf-8"))
    assert data["comparisons"][0]["a"] == "bench-fast" and len(data["records"]) == len(rows)
    pytest.importorskip("matplotlib", reason="the PNG needs the optional 'plot' extra")
    assert (out / "bench.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_reference_fixes_never_reach_a_prompt(bench2, suite):
    _, _, requests = bench2
    fixes = [t.sim.new for t in suite.tasks]
    planning = [r for r in requests if "planner" in r.model or "explorer" in r.model]
    first_turns = [r for r in requests if "builder" in r.model
                   and not any(m.get("role") == "assistant" for m in r.body["messages"])]
    assert planning and first_turns
    for rec in planning + first_turns:
        body = json.dumps(rec.body)
        assert not any(json.dumps(fix)[1:-1] in body for fix in fixes), rec.model
        assert "[sim]" not in body and "task.toml" not in body


def test_jobs_do_not_change_the_results(bench2, suite, tmp_path):
    parallel, _, _ = bench2
    # the models 10x faster, not 3x: the outcomes are the scripted models', not their speed's
    serial, _ = _bench(suite, tmp_path, jobs=1, factor=10.0)
    assert serial.outcomes() == parallel.outcomes()
    assert len(serial.outcomes()) == len(SUBSET) * len(SIM_MAPS) * 2


def test_a_crashing_run_is_recorded_and_the_suite_goes_on(tmp_path):
    suite = builtin_suite().select(["py-chunks", "py-slugify", "sh-count-lines"])
    careful = builder_for(sim_tasks(suite))
    fault = Reply(error=FaultSpec(status=500, message="simulated outage", type="server_error"))

    def flaky(req):  # the builder's provider is down for one task only
        task = find_task(sim_tasks(suite), req)
        return fault if task is not None and task.name == "py-slugify" else careful(req)

    scenario = quick(10)
    scenario = scenario.model_copy(update={"models": {
        **scenario.models, "sim-bench-flaky": ModelBehavior(respond=flaky)}})
    with BenchSimulator(suite, scenario) as sim:
        maps = [sim.role_map("bench-careful", 'models.builder-careful.id="sim-bench-flaky"')]
        report = run_bench(suite, maps, out_dir=tmp_path, env=sim.env(run_env()))
    by_task = {r.task: r for r in report.records}
    assert [r.task for r in report.records] == ["py-chunks", "py-slugify", "sh-count-lines"]
    assert by_task["py-chunks"].passed and by_task["sh-count-lines"].passed
    crashed = by_task["py-slugify"]
    assert crashed.outcome == "error" and crashed.status == "error"
    assert "ModelUnavailable" in crashed.error or "500" in crashed.error, crashed.error
    assert report.summary("bench-careful").errors == 1
    rows = list(csv.DictReader((tmp_path / "runs.csv").open(encoding="utf-8")))
    assert [r["outcome"] for r in rows] == ["passed", "error", "passed"]


def test_bench_main_prints_json(tmp_path):
    buf = io.StringIO()
    code = bench_main("builtin", sim=True, tasks=["sh-count-lines"], out=tmp_path / "o",
                      as_json=True, env=run_env(), console=Console(file=buf, width=200))
    assert code == 0
    data = json.loads(buf.getvalue())
    assert data["role_maps"] == list(SIM_MAPS) and len(data["records"]) == 2
    assert (tmp_path / "o" / "runs.csv").is_file()


# --- the comparison maths on its own ---------------------------------------------------------


def _rec(task: str, role_map: str, repeat: int, passed: bool, wall: float) -> RunRecord:
    return RunRecord(task=task, role_map=role_map, repeat=repeat,
                     outcome="passed" if passed else "failed",
                     status="succeeded" if passed else "failed", wall_s=wall)


def test_speedup_uses_only_tasks_both_solved_and_budget_counts_passes_in_time():
    slow = [_rec("t1", "slow", 0, True, 10), _rec("t2", "slow", 0, True, 20),
            _rec("t3", "slow", 0, True, 30)]
    fast = [_rec("t1", "fast", 0, True, 2), _rec("t2", "fast", 0, True, 5),
            _rec("t3", "fast", 0, False, 1)]  # a fast failure must not flatter the speed-up
    pair = compare_pair("fast", fast, "slow", slow)
    assert pair.both_solved == ("t1", "t2")
    assert pair.speedup == pytest.approx(statistics.median([10 / 2, 20 / 5]))
    assert pair.raw_speedup == pytest.approx(20 / 2)  # labelled raw: includes the failure
    assert pair.budget_s == 20  # the slower map's median time on its solved tasks
    assert pair.pass_at_budget_a == pytest.approx(2 / 3)
    assert pair.pass_at_budget_b == pytest.approx(2 / 3)
    assert (pair.pass_rate_a, pair.pass_rate_b) == (pytest.approx(2 / 3), 1.0)


def test_a_task_is_solved_by_a_majority_of_repeats_and_timed_on_passing_ones():
    runs = [_rec("t", "m", 0, True, 4), _rec("t", "m", 1, False, 1), _rec("t", "m", 2, True, 6),
            _rec("u", "m", 0, True, 3), _rec("u", "m", 1, False, 1), _rec("u", "m", 2, False, 1)]
    assert task_times(runs) == {"t": 5}


def test_speedup_spread_is_over_repeats():
    a = [_rec("t", "a", r, True, w) for r, w in enumerate([1, 2, 4])]
    b = [_rec("t", "b", r, True, 4) for r in range(3)]
    pair = compare_pair("a", a, "b", b)
    assert pair.speedup == pytest.approx(2.0)
    s = pair.speedup_by_repeat
    assert (s.low, s.median, s.high, s.n) == (1.0, 2.0, 4.0, 3)


def test_the_speedup_is_split_at_the_tasks_both_maps_passed_at_their_first_build_call():
    """Where both maps ask one builder the same first call and it passes, the two runs are the
    same run: the comparison names those tasks and gives the median over the others apart."""
    from orchestrator.benchmark.report import comparison_lines
    from orchestrator.state import Attempt, Sample

    def run(task: str, role_map: str, wall: float, attempts: int, samples: int = 0,
            repeat: int = 0) -> RunRecord:
        log = tuple(Attempt(n=n, strategy="one_shot", duration_s=wall / attempts,
                            passed=n == attempts,
                            samples=[Sample(index=k + 1) for k in range(samples)])
                    for n in range(1, attempts + 1))
        return _rec(task, role_map, repeat, True, wall).model_copy(
            update={"attempt_log": log, "attempts": attempts})
    a = [run("one", "a", 12, 1), run("sampled", "a", 30, 1, samples=3),
         run("later", "a", 40, 2), run("mixed", "a", 10, 1), run("mixed", "a", 50, 3, repeat=1)]
    b = [run("one", "b", 12.6, 1), run("sampled", "b", 45, 1, samples=1),
         run("later", "b", 80, 2), run("mixed", "b", 10, 1), run("mixed", "b", 10, 1, repeat=1)]
    pair = compare_pair("a", a, "b", b)
    # one sample of one attempt is a first call; a second sample, or attempt, is not, in any
    # passing repeat
    assert pair.first_call_both == ("one",)
    assert pair.speedup_rest == pytest.approx(statistics.median([45 / 30, 80 / 40, 10 / 30]))
    said = "\n".join(comparison_lines(pair))
    assert "of those, 1 passed at both maps' first build call; over the other 3: 1.50×" in said
    # the batch of the four tasks both solved: b's median times summed over a's
    total = (12.6 + 45 + 80 + 10) / (12 + 30 + 40 + 30)
    assert pair.speedup_total == pytest.approx(total)
    assert f"their summed time, b over a: {total:.2f}× (the batch of them" in said
    none = compare_pair("a", a[2:3], "b", b[2:3])
    assert none.first_call_both == () and "first build call" not in "\n".join(
        comparison_lines(none))


def test_equal_accuracy_off_the_curve_is_the_budget_each_map_needs_for_the_lower_pass_rate():
    from orchestrator.benchmark.compare import budget_for
    from orchestrator.benchmark.report import comparison_lines

    # a passes 4 of 5 (10, 12, 30, 90 s), b 3 of 5 (11, 40, 280 s): at b's 60 %, a needs
    # its 3rd fastest pass (30 s), b its slowest (280 s)
    a = [_rec(f"t{i}", "a", 0, w is not None, w or 300.0)
         for i, w in enumerate([10.0, 12.0, 30.0, 90.0, None])]
    b = [_rec(f"t{i}", "b", 0, w is not None, w or 300.0)
         for i, w in enumerate([11.0, 40.0, None, 280.0, None])]
    pair = compare_pair("a", a, "b", b)
    assert pair.matched_rate == pytest.approx(0.6)
    assert (pair.matched_budget_a, pair.matched_budget_b) == (30.0, 280.0)
    assert "to the same pass rate (60%, the lower one): a within 30.00s a task, b within " \
           "280.00s (9.33×)" in "\n".join(comparison_lines(pair))
    assert budget_for(a, 0.0) is None and budget_for(b, 0.8) is None  # 4 of 5: b never does
    # two repeats of one task: the rate counts runs, so half of them is the faster pass
    assert budget_for([_rec("t", "a", r, True, w) for r, w in enumerate([5.0, 9.0])], 0.5) == 5.0
    nothing = compare_pair("a", a, "b", [_rec("t0", "b", 0, False, 300.0)])
    assert nothing.matched_rate is None and "same pass rate" not in "\n".join(
        comparison_lines(nothing))


def test_spread_of_nothing_and_of_one_value():
    assert spread([]).median is None
    one = spread([3.0])
    assert (one.low, one.q1, one.median, one.q3, one.high) == (3.0,) * 5


# --- the suite itself -----------------------------------------------------------------------


@pytest.mark.parametrize("task", builtin_suite().tasks, ids=lambda t: t.name)
async def test_builtin_task_fails_before_and_passes_after_its_reference_fix(task, tmp_path):
    repo = materialize(task, tmp_path / "repo")

    async def passes() -> bool:  # in the sandbox, as the bench checks a builder's work
        return await check_acceptance(task, repo, os.environ, 60, sandbox=SandboxSettings(),
                                      objects=repo / ".git" / "objects")

    assert not await passes(), "the task must start failing"
    apply_fix(task, repo)
    assert await passes(), "the reference fix must pass"


def test_builtin_suite_spans_languages_and_hides_the_fix_from_the_repo():
    suite = builtin_suite()
    assert 8 <= len(suite.tasks) <= 10
    assert {t.language for t in suite.tasks} == {"python", "javascript", "shell"}
    assert any(hashes_odd(t.name) for t in suite.tasks)
    assert any(not hashes_odd(t.name) for t in suite.tasks)
    for t in suite.tasks:
        assert t.sim is not None and not (t.repo / "task.toml").exists()


def test_a_task_may_name_its_repo_by_path_and_errors_name_the_file(tmp_path):
    code = tmp_path / "code"
    code.mkdir()
    (code / "ok.sh").write_text("exit 0\n")
    (tmp_path / "suite" / "one").mkdir(parents=True)
    (tmp_path / "suite" / "one" / "task.toml").write_text(
        f'instruction = "do it"\nacceptance = ["bash ok.sh"]\nrepo = "{code}"\n')
    suite = load_suite(tmp_path / "suite")
    assert suite.tasks[0].repo == code and suite.tasks[0].sim is None
    (tmp_path / "suite" / "two").mkdir()
    (tmp_path / "suite" / "two" / "task.toml").write_text('instruction = "x"\nacceptance = []\n')
    with pytest.raises(ConfigError, match=r"two/task.toml"):
        load_suite(tmp_path / "suite")
    with pytest.raises(ConfigError, match="unknown task"):
        builtin_suite().select(["nope"])


def test_packaged_role_maps_load_by_name():
    from orchestrator.benchmark import load_role_map

    for name in ("bench-careful", "bench-fast", "live-split", "live-solo", "live-routed"):
        stem, roles = load_role_map(name)
        assert stem == name and all(not spec.fallback for spec in roles.roles.values())
    _, split = load_role_map("live-split")
    assert split.model_for("explorer").id == "qwen05" and split.model_for("builder").id == "qwen15"
    assert {m.tools for m in split.models.values() if m.provider.startswith("local")} == {"json"}
    _, routed = load_role_map("live-routed")
    assert routed.model_for("planner").id == "qwen05" and routed.model_for("builder").id == "qwen15"
    assert routed.model_for("builder").edits == "replace"
    name, single = load_role_map("single:live-solo")
    assert name == "single:live-solo" and single.model_for("builder").id == "qwen15"


# --- the baseline without orchestration, and kept runs ---------------------------------------


CODER = "---\nname: coder\nkind: build\ndescription: The team's builder.\n---\nYou build.\n"


def test_the_baseline_asks_the_build_role_whatever_its_name(tmp_path):
    from orchestrator.benchmark import load_role_map
    from orchestrator.benchmark.single import build_role

    (tmp_path / ".orchestrate" / "agents").mkdir(parents=True)
    (tmp_path / ".orchestrate" / "agents" / "coder.md").write_text(CODER, encoding="utf-8")
    _, roles = load_role_map("single:bench-careful", sets=[
        'pipeline.steps=["planner", "explorer", "coder", "reviewer"]',
        'roles.coder.model="builder-careful"'])
    env = {"XDG_CONFIG_HOME": str(tmp_path / "config")}
    assert build_role(roles, tmp_path, env) == "coder"
    _, packaged = load_role_map("single:bench-careful")
    assert build_role(packaged, tmp_path, env) == "builder"



def test_single_prompt_baseline_and_kept_runs(tmp_path):
    """``single:MAP`` asks MAP's builder model once with the repository's files, writes the
    whole files it sends back and lets the same acceptance commands decide; --keep leaves each
    run's repository (and, for orchestrated runs, its workspace) under OUT/runs."""
    suite = builtin_suite().select(["py-clamp", "js-range"])
    with BenchSimulator(suite, quick()) as sim:
        maps = [sim.role_map("bench-careful"), sim.role_map("single:bench-careful"),
                sim.role_map("single:bench-fast")]
        report = run_bench(suite, maps, out_dir=tmp_path, env=sim.env(run_env()),
                           keep_repos=True)
        singles = [r for r in sim.server.requests if not r.body.get("tools")]
    by = {(r.role_map, r.task): r for r in report.records}
    careful_single = by[("single:bench-careful", "py-clamp")]
    assert careful_single.passed and careful_single.calls == 1 and careful_single.attempts == 1
    assert careful_single.reason == "changed clamp.py"
    assert careful_single.tokens["builder"] > 0
    # the hasty builder sends odd-hashed tasks back unchanged: the acceptance check fails them
    for task in ("py-clamp", "js-range"):
        assert by[("single:bench-fast", task)].passed is not hashes_odd(task)
    assert len(singles) == 4 and all("```" in json.dumps(r.body) for r in singles)
    fixes = [json.dumps(t.sim.new)[1:-1] for t in suite.tasks]
    assert all(fix not in json.dumps(r.body) for r in singles for fix in fixes)
    runs = Path(report.repos or "")
    assert runs.parent == tmp_path / "runs" and runs.is_dir()
    for rec in report.records:
        assert Path(rec.workdir).parent == runs and (Path(rec.workdir) / ".git").is_dir()
    orchestrated = by[("bench-careful", "py-clamp")]
    assert list((Path(orchestrated.workdir) / "workspaces").glob("*/events.jsonl"))


# --- the live suite: small real-world bugs for real models ------------------------------------


@pytest.mark.parametrize("task", load_suite("live").tasks, ids=lambda t: t.name)
async def test_live_task_fails_before_and_passes_after_its_reference_fix(task, tmp_path):
    repo = materialize(task, tmp_path / "repo")

    async def passes() -> bool:
        return await check_acceptance(task, repo, os.environ, 60, sandbox=SandboxSettings(),
                                      objects=repo / ".git" / "objects")

    assert not await passes(), "the task must start failing"
    apply_fix(task, repo)
    assert await passes(), "the reference fix must pass"


def test_live_suite_is_a_dozen_multi_file_bugs_in_three_languages():
    suite = load_suite("live")
    assert len(suite.tasks) >= 12
    assert {t.language for t in suite.tasks} == {"python", "javascript", "shell"}
    for t in suite.tasks:
        files = [p for p in t.repo.rglob("*") if p.is_file()]
        assert len(files) >= 3, t.name  # the bug, code around it, the tests
        assert t.sim is not None and t.sim.new not in t.instruction
