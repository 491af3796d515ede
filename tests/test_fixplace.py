"""Where a map's one-line samples were asked against each task's reference fix
(``benchmark/fixplace.py``): the fix's lines from the suite's files, a sample's place against
them, the per-map figures, the printed lines, and ``bench/suite_figures.py`` over bench.json
files written here."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from rich.console import Console

from orchestrator.benchmark import load_suite
from orchestrator.benchmark.fixplace import (
    NAMED,
    FixReach,
    at_fix,
    fix_lines,
    reach_lines,
    summarize_reach,
)
from orchestrator.benchmark.records import RunRecord
from orchestrator.benchmark.report import BenchReport, build_report, print_report
from orchestrator.state import Attempt, Sample

ROOT = Path(__file__).resolve().parents[1]
FIX = ("shipquote/units/conversions.py", 17, 17)  # xp-parcel-weight's `return value / ...`


def _task(root: Path, name: str, body: str, old: str, *, sim: bool = True) -> None:
    d = root / name
    (d / "repo").mkdir(parents=True)
    (d / "repo" / "m.py").write_text(body, encoding="utf-8")
    table = f"\n[sim]\npath = \"m.py\"\nold = {json.dumps(old)}\nnew = \"x = 1\"\n" if sim else ""
    (d / "task.toml").write_text(
        f'instruction = "fix m"\nacceptance = ["true"]\n{table}', encoding="utf-8")


def test_the_fix_lines_come_from_the_suites_files():
    fixes = fix_lines(load_suite("live"))
    assert fixes["xp-parcel-weight"] == FIX
    assert fixes["xp-loyalty-tier"] == ("loyalty/program/tiers.py", 14, 14)
    assert set(fixes) == {t.name for t in load_suite("live").tasks}  # every live task has one


def test_a_fix_over_lines_a_missing_one_and_a_task_without_one(tmp_path):
    _task(tmp_path, "a-multi", "a = 0\ndef f():\n    return 1\n    # end\n",
          "def f():\n    return 1\n")
    _task(tmp_path, "b-gone", "a = 0\n", "not in the file")
    _task(tmp_path, "c-none", "a = 0\n", "", sim=False)
    assert fix_lines(load_suite(tmp_path)) == {"a-multi": ("m.py", 2, 3)}


@pytest.mark.parametrize(("place", "hit"), [
    ("shipquote/units/conversions.py:15-17", True),
    ("./shipquote/units/conversions.py:17-30", True),
    ("shipquote/units/conversions.py:17", True),
    ("shipquote/units/conversions.py:18-25", False),
    ("shipquote/units/conversions.py:1-16", False),
    ("shipquote/cli.py:9-22", False),
    ("shipquote/units/conversions.py", False),
    ("shipquote/units/conversions.py:a-b", False),
    ("", False),
])
def test_a_samples_place_against_the_fix(place, hit):
    assert at_fix(place, FIX) is hit


def _sample(place: str, passed: bool = False, changed: bool = True) -> Sample:
    return Sample(index=1, place=place, passed=passed, changed=changed)


def _rec(task: str, places: list[tuple[str, bool]], *, passed: bool, repeat: int = 0,
         role_map: str = "m") -> RunRecord:
    samples = [_sample(p, ok) for p, ok in places]
    log = (Attempt(n=1, strategy="one_line", passed=passed, samples=samples),) if samples else ()
    return RunRecord(task=task, role_map=role_map, repeat=repeat,
                     outcome="passed" if passed else "failed",
                     status="succeeded" if passed else "failed", attempt_log=log)


AT, CLI = "shipquote/units/conversions.py:15-17", "shipquote/cli.py:9-22"
FIXES = {"xp-parcel-weight": FIX, "xp-loyalty-tier": ("loyalty/program/tiers.py", 14, 14)}
RECORDS = [
    _rec("xp-parcel-weight", [(CLI, False), (AT, True)], passed=True),  # passed at the fix
    _rec("xp-parcel-weight", [(AT, False), (CLI, False), (AT, False), (AT, False)],
         passed=False, repeat=1),  # reached it three times, wrong each time
    _rec("xp-loyalty-tier", [("loyalty/cli.py:9-24", False)], passed=False),  # never there
    _rec("xp-loyalty-tier", [], passed=False, repeat=1),  # no one-line sample: not counted
    _rec("unknown-task", [(AT, True)], passed=True),  # no reference fix: not counted
]


def test_the_figures_of_one_map():
    r = summarize_reach("m", RECORDS, FIXES)
    assert (r.runs, r.samples, r.at_fix, r.passed_at_fix, r.passed_elsewhere) == (3, 7, 4, 1, 0)
    assert (r.failed, r.failed_reached, r.failed_at_fix_median) == (2, 1, 3)
    assert r.never == ("xp-loyalty-tier#1",)
    assert r.by_task == {"xp-parcel-weight": (4, 1), "xp-loyalty-tier": (0, 0)}
    lines = reach_lines([r])
    assert lines[0] == ("m: one-line samples at the reference fix's lines: 4 of 7 (57 %) over "
                        "3 run(s); 1 of those passed, 0 of the 3 elsewhere")
    assert lines[1] == ("m: of its 2 failed run(s) 1 asked at the fix (3 sample(s) there, "
                        "median): the line written there was wrong; 1 never asked there "
                        "(xp-loyalty-tier#1)")
    # a task never asked at the fix is not listed; the hardest at the right place come first
    assert lines[2] == "m: at the fix, passed of asked, by task: xp-parcel-weight 1/4"
    assert r.visits == {"first at the model's": (2, 1), "again at the model's": (2, 0)}
    assert lines[3] == ("m: at the fix, passed of asked, by visit in its attempt: first at the "
                        "model's 1/2, again at the model's 0/2")
    more = summarize_reach("m", [*RECORDS, _rec("xp-loyalty-tier", [(
        "loyalty/program/tiers.py:11-16", False)], passed=False, repeat=2)], FIXES)
    assert reach_lines([more])[2].endswith("by task: xp-loyalty-tier 0/1, xp-parcel-weight 1/4")


def test_samples_at_the_fix_by_first_visit_or_again_and_temperature():
    """A place's first sample in its attempt apart from its repeats, by temperature: the
    figure that moved the first visit of each place to the attempt's own temperature."""
    def run(*samples: tuple[str, float, bool], attempt: int = 1) -> Attempt:
        return Attempt(n=attempt, strategy="one_line", samples=[
            Sample(index=i, place=p, temperature=t, passed=ok, changed=True)
            for i, (p, t, ok) in enumerate(samples, 1)])
    rec = RunRecord(task="xp-parcel-weight", role_map="m", repeat=0, outcome="passed",
                    status="succeeded", attempt_log=(
                        run((AT, 0.0, False), (CLI, 0.0, False), (AT, 0.8, False)),
                        run((CLI, 0.8, False), (AT, 0.8, True), attempt=2)))
    r = summarize_reach("m", [rec], FIXES)
    assert r.visits == {"first at 0": (1, 0), "again at 0.8": (1, 0), "first at 0.8": (1, 1)}
    assert reach_lines([r])[-1].endswith(
        "by visit in its attempt: first at 0 0/1, first at 0.8 1/1, again at 0.8 0/1")
    assert FixReach.model_validate_json(r.model_dump_json()).visits == r.visits


def test_many_runs_that_never_reached_it_are_counted_and_a_few_named():
    recs = [_rec("xp-loyalty-tier", [(CLI, False)], passed=False, repeat=i)
            for i in range(NAMED + 3)]
    r = summarize_reach("m", recs, FIXES)
    assert (r.failed, r.failed_reached, r.failed_at_fix_median) == (NAMED + 3, 0, None)
    line = reach_lines([r])[1]
    assert f"{NAMED + 3} never asked there" in line and line.endswith("and 3 more)")
    assert f"#{NAMED} and" in line and f"#{NAMED + 1}" not in line
    assert "0 asked at the fix;" in line and "written there" not in line


def test_a_map_without_one_line_samples_prints_nothing():
    r = summarize_reach("m", [_rec("xp-parcel-weight", [], passed=False)], FIXES)
    assert r.samples == 0 and reach_lines([r]) == []


def _report(records: list[RunRecord]) -> BenchReport:
    suite = load_suite("live").select(["xp-loyalty-tier", "xp-parcel-weight"])
    return build_report(suite, ["m"], [r for r in records if r.task != "unknown-task"],
                        repeat=2, jobs=1, started=0.0)


def test_the_bench_report_holds_and_prints_them_and_an_old_report_still_loads():
    report = _report(RECORDS)
    assert [r.role_map for r in report.reach] == ["m"] and report.reach[0].at_fix == 4
    out = io.StringIO()
    print_report(report, Console(file=out, width=300))
    assert "m: one-line samples at the reference fix's lines: 4 of 7 (57 %)" in out.getvalue()
    again = BenchReport.model_validate_json(report.model_dump_json())
    assert again.reach == report.reach
    old = json.loads(report.model_dump_json())
    del old["reach"]  # a bench.json written before the figure
    assert BenchReport.model_validate(old).reach == ()
    assert _report([_rec("xp-parcel-weight", [], passed=True)]).reach == ()


def _figures(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(ROOT / "bench" / "suite_figures.py"), *args],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)


def test_suite_figures_sets_merged_files_against_the_suite_they_ran(tmp_path):
    report = _report(RECORDS)
    first, second = tmp_path / "a.json", tmp_path / "b.json"
    first.write_text(report.model_dump_json(), encoding="utf-8")
    second.write_text(report.model_dump_json(), encoding="utf-8")
    done = _figures(str(first), str(second), "--as-repeats")
    assert done.returncode == 0, done.stderr
    assert "one-line samples at the reference fix's lines: 8 of 14 (57 %) over 6 run(s)" \
        in done.stdout.replace("\n", " ")
    only = _figures(str(first), "--tasks", "xp-parcel-*")
    assert "4 of 6 (67 %) over 2 run(s)" in only.stdout.replace("\n", " ")
    assert "xp-loyalty-tier" not in only.stdout
    merged = json.loads(_figures(str(first), "--json").stdout)
    assert merged["reach"][0]["at_fix"] == 4
    bad = _figures(str(first), "--suite", str(tmp_path / "nowhere"))
    assert bad.returncode != 0 and "Traceback" not in bad.stderr
    assert "--suite:" in bad.stderr and "no such suite directory" in bad.stderr
