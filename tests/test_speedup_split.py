"""``bench/speedup_split.py``: the speed-up at equal accuracy split into the runs both maps passed
at their first build call and the rest, each run's time apart into building and the rest. Rows
from records made here; the command over a real ``orchestrate bench --sim`` run's bench.json."""

from __future__ import annotations

import json
import runpy
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import cli

from orchestrator.benchmark.records import RunRecord
from orchestrator.state import Attempt, Sample

SCRIPT = Path(__file__).resolve().parent.parent / "bench" / "speedup_split.py"
BENCH = str(SCRIPT.parent)


def _script() -> dict:
    sys.path.insert(0, BENCH)  # the script imports suite_figures from its own folder
    try:
        return runpy.run_path(str(SCRIPT))
    finally:
        sys.path.remove(BENCH)


def _run(task: str, role_map: str, wall: float, builds: list[tuple[float, int]],
         passed: bool = True) -> RunRecord:
    """A run of ``wall`` s whose attempts took ``builds`` (seconds, samples) in turn."""
    log = tuple(Attempt(n=i + 1, strategy="one_shot" if i == 0 else "one_line",
                        duration_s=s, passed=passed and i == len(builds) - 1,
                        samples=[Sample(index=k + 1) for k in range(n)])
                for i, (s, n) in enumerate(builds))
    return RunRecord(task=task, role_map=role_map, repeat=0,
                     outcome="passed" if passed else "failed", status="succeeded",
                     wall_s=wall, attempts=len(log), attempt_log=log)


def test_rows_split_first_call_passes_from_the_rest_and_builds_from_the_other_roles() -> None:
    s = _script()
    records = [
        # both passed at the first build call: the same run under both maps
        _run("same", "A", 12.0, [(11.5, 0)]), _run("same", "B", 12.6, [(12.1, 0)]),
        # A's planner (0.5B) between attempts took 20 s, B's took 40 s
        _run("later", "A", 50.0, [(12.0, 0), (18.0, 1)]),
        _run("later", "B", 80.0, [(12.0, 0), (28.0, 3)]),
        # A passed at its first call, B needed samples: not a first-call pair
        _run("draw", "A", 10.0, [(10.0, 1)]), _run("draw", "B", 30.0, [(10.0, 0), (20.0, 2)]),
        # B failed: not a pair at equal accuracy
        _run("lost", "A", 40.0, [(40.0, 0)]), _run("lost", "B", 300.0, [(300.0, 0)], False),
    ]
    table = {r["task"]: r for r in s["rows"](records, "A", "B")}
    assert set(table) == {"same", "later", "draw"}
    assert table["same"]["both_first_call"] and not table["later"]["both_first_call"]
    assert not table["draw"]["both_first_call"]  # A passed at its first call, B at its second
    assert table["later"]["a_build_s"] == 30.0 and table["later"]["b_build_s"] == 40.0
    assert table["later"]["ratio"] == pytest.approx(1.6)
    assert table["later"]["ceiling"] == pytest.approx(80.0 / 30.0)
    assert table["later"]["others"] == pytest.approx(2.0)  # 40 s of B's other roles over 20
    assert table["same"]["others"] is None  # half a second of localising: no ratio of it
    figures = s["summary"](list(table.values()))
    assert figures["both_passed"] == 3 and figures["both_first_call"] == 1
    assert figures["ratio_first_call"] == 1.05 and figures["ratio_rest"] == 2.3
    assert figures["others_rest"] == 2.0


@pytest.fixture(scope="module")
def sim_bench(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("split")
    done = cli("bench", "builtin", "--sim", "--task", "py-clamp", "--task", "sh-count-lines",
               "--out", str(root / "out"), "--json", cwd=root)
    assert done.returncode == 0, done.stderr[-2000:]
    return root / "out" / "bench.json"


def test_the_command_prints_and_dumps_the_split_of_a_real_bench_run(sim_bench: Path) -> None:
    report = json.loads(sim_bench.read_text())
    a, b = report["role_maps"][:2]
    dumped = subprocess.run([sys.executable, str(SCRIPT), str(sim_bench), "--json"],
                            capture_output=True, text=True, timeout=120)
    assert dumped.returncode == 0, dumped.stderr[-2000:]
    out = json.loads(dumped.stdout)
    passed = {m: {r["task"] for r in report["records"]
                  if r["role_map"] == m and r["outcome"] == "passed"} for m in (a, b)}
    assert (out["a"], out["b"]) == (a, b)
    assert {r["task"] for r in out["rows"]} == passed[a] & passed[b] != set()
    assert out["figures"]["both_passed"] == len(out["rows"])
    printed = subprocess.run([sys.executable, str(SCRIPT), str(sim_bench), "--pair", b, a],
                             capture_output=True, text=True, timeout=120)
    assert printed.returncode == 0 and f"{b} (A) against {a} (B)" in printed.stdout
    assert "ceiling" in printed.stdout
    refused = subprocess.run([sys.executable, str(SCRIPT), str(sim_bench), "--pair", a, "nope"],
                             capture_output=True, text=True, timeout=120)
    assert refused.returncode == 1 and "--pair nope: no run of it" in refused.stderr
    assert "Traceback" not in refused.stderr
