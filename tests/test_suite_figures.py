"""``bench/suite_figures.py``: whole-suite figures from bench runs made in parts. Two real
``orchestrate bench --sim`` runs (the simulated bench models over the built-in suite's real
repositories and tests) on different tasks and maps, merged: a later part's record replaces an
earlier one's, a map that did not run a task is not counted as failing it, and ``--common``
keeps only the tasks every map ran."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "suite_figures.py"
merged = runpy.run_path(str(SCRIPT))["merged"]  # the script's own function, loaded once


@pytest.fixture(scope="module")
def parts(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    root = tmp_path_factory.mktemp("parts")
    one = cli("bench", "builtin", "--sim", "--task", "sh-count-lines", "--task", "py-clamp",
              "--out", str(root / "one"), "--json", cwd=root)
    assert one.returncode == 0, one.stderr[-2000:]
    two = cli("bench", "builtin", "--sim", "--roles", "bench-fast", "--task", "py-clamp",
              "--task", "js-range", "--out", str(root / "two"), "--json", cwd=root)
    assert two.returncode == 0, two.stderr[-2000:]
    return root / "one" / "bench.json", root / "two" / "bench.json"


def _figures(*paths: Path, common: bool = False) -> dict:
    report, _ = merged(list(paths), common=common)
    return json.loads(report.model_dump_json())


def test_parts_merge_into_one_report(parts):
    one, two = parts
    first, second = json.loads(one.read_text()), json.loads(two.read_text())
    report = _figures(one, two)
    assert report["tasks"][:2] == first["tasks"] and report["tasks"][2] == "js-range"
    assert report["role_maps"] == ["bench-careful", "bench-fast"]
    runs = {(r["task"], r["role_map"]): r for r in report["records"]}
    assert len(runs) == 5  # careful: 2 tasks; fast: 3 (py-clamp from the later part)
    later = next(r for r in second["records"] if r["task"] == "py-clamp")
    earlier = next(r for r in first["records"]
                   if (r["task"], r["role_map"]) == ("py-clamp", "bench-fast"))
    assert runs["py-clamp", "bench-fast"]["run_id"] == later["run_id"] != earlier["run_id"]
    by_map = {s["role_map"]: s for s in report["attempts"]}
    assert by_map["bench-careful"]["runs"] == 2 and by_map["bench-fast"]["runs"] == 3
    assert any("ran different tasks" in n for n in report["notes"])
    assert sum(n.startswith("part ") for n in report["notes"]) == 2


def test_common_keeps_the_tasks_every_map_ran(parts):
    report = _figures(*parts, common=True)
    _, source = merged(list(parts), common=True)
    assert {task for task, _, _ in source} == {"py-clamp", "sh-count-lines"}
    assert sorted(report["tasks"]) == ["py-clamp", "sh-count-lines"]
    assert {r["task"] for r in report["records"]} == {"sh-count-lines", "py-clamp"}
    assert any("every role map ran" in n for n in report["notes"])


def test_printed_figures_and_a_bad_file(parts, tmp_path):
    printed = subprocess.run([sys.executable, str(SCRIPT), *map(str, parts)],
                             capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0, printed.stderr[-2000:]
    assert "median pass" in printed.stdout and "≤60s" in printed.stdout
    assert "at equal accuracy" in printed.stdout
    bad = tmp_path / "bench.json"
    bad.write_text("{not json", encoding="utf-8")
    refused = subprocess.run([sys.executable, str(SCRIPT), str(bad)], capture_output=True,
                             text=True, timeout=120)
    assert refused.returncode == 1
    assert "not a readable bench.json" in refused.stderr and "Traceback" not in refused.stderr


def test_a_map_filter_keeps_its_runs_and_refuses_an_unknown_map(parts):
    report, _ = merged(list(parts), maps=("bench-careful",))
    assert report.role_maps == ("bench-careful",)
    assert {r.role_map for r in report.records} == {"bench-careful"}
    assert "js-range" not in report.tasks  # only bench-fast ran it
    with pytest.raises(SystemExit, match="no run of live-routed"):
        merged(list(parts), maps=("live-routed",))


def test_as_repeats_keeps_a_later_run_as_the_next_repeat(parts):
    """Runs of the same tasks pooled: each task and map holds every run (the next repeat
    number, its run id unchanged), and each map's figures count them all; without the flag
    the later run replaces the earlier."""
    one, two = parts
    report, source = merged([one, two, one], as_repeats=True)
    held: dict[tuple[str, str], list[tuple[int, str]]] = {}
    for r in report.records:
        held.setdefault((r.task, r.role_map), []).append((r.repeat, r.run_id))
    first = {(r["task"], r["role_map"]): r["run_id"]
             for r in json.loads(one.read_text())["records"]}
    later = {(r["task"], r["role_map"]): r["run_id"]
             for r in json.loads(two.read_text())["records"]}
    careful = first["sh-count-lines", "bench-careful"]
    assert held["sh-count-lines", "bench-careful"] == [(0, careful), (1, careful)]
    assert held["py-clamp", "bench-fast"] == [  # one, two, then one again
        (0, first["py-clamp", "bench-fast"]), (1, later["py-clamp", "bench-fast"]),
        (2, first["py-clamp", "bench-fast"])]
    assert held["js-range", "bench-fast"] == [(0, later["js-range", "bench-fast"])]
    assert report.repeat == 3 and len(source) == len(report.records) == 10
    by_map = {s.role_map: s for s in report.attempts}
    assert by_map["bench-careful"].runs == 4 and by_map["bench-fast"].runs == 6
    replaced, _ = merged([one, two, one])
    assert len(replaced.records) == 5


def test_same_counts_one_maps_runs_as_anothers(parts):
    """``--same bench-fast=bench-careful``: the later part's bench-fast runs join bench-careful
    (py-clamp replacing the earlier record, js-range added); the CLI refuses a pair without
    its '='."""
    one, two = parts
    report, source = merged([one, two], same={"bench-fast": "bench-careful"})
    assert report.role_maps == ("bench-careful",)
    later = {r["task"]: r["run_id"] for r in json.loads(two.read_text())["records"]}
    runs = {r.task: r for r in report.records}
    assert set(runs) == {"sh-count-lines", "py-clamp", "js-range"}
    assert runs["py-clamp"].run_id == later["py-clamp"] and runs["js-range"].role_map == \
        "bench-careful"
    assert source["js-range", "bench-careful", 0] == two
    refused = subprocess.run([sys.executable, str(SCRIPT), "--same", "bench-fast", str(one)],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 2 and "give it as MAP=AS" in refused.stderr
