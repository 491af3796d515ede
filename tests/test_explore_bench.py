"""`orchestrate bench` on explore suites: questions with answer ranges, explorer models compared
by questions answered with a supporting citation in range, claims dropped and why, time, tokens."""

from __future__ import annotations

import asyncio
import csv
import json
from pathlib import Path

import pytest
from conftest import cli, run_env

from orchestrator.benchmark import (
    BenchSimulator,
    arun_explore_bench,
    builtin_explore_path,
    load_explore_suite,
)
from orchestrator.benchmark.explore_suite import is_explore_suite
from orchestrator.errors import ConfigError

SHOP = {
    "shop/pricing.py": ('"""Prices."""\n\nTAX_RATE = 0.2\n\n\ndef with_tax(price):\n'
                        '    return price * (1 + TAX_RATE)\n'),
    "shop/cart.py": ('"""A cart."""\n\nfrom shop.pricing import with_tax\n\n\nclass Cart:\n'
                     '    def total(self):\n        return with_tax(sum(self.items))\n'),
}
SUITE = """
name = "shop"
repo = "repo"
source = "written for this test"
license = "MIT"

[[questions]]
id = "tax"
question = "What is `TAX_RATE` set to?"
answers = [{ path = "shop/pricing.py", lines = [3, 3] }]

[[questions]]
id = "cart"
question = "Where is the class `Cart` defined?"
answers = [{ path = "shop/cart.py", lines = [6, 8] }]

[[questions]]
id = "total"
question = "What does `total` return?"
answers = [{ path = "shop/cart.py", lines = [7, 8] }]
"""


def make_suite(root: Path, text: str = SUITE) -> Path:
    for name, body in SHOP.items():
        (root / "repo" / name).parent.mkdir(parents=True, exist_ok=True)
        (root / "repo" / name).write_text(body, encoding="utf-8")
    (root / "explore.toml").write_text(text, encoding="utf-8")
    return root


def test_the_builtin_suite_is_real_code_with_its_license_and_checked_answers():
    suite = load_explore_suite("builtin-explore")
    assert is_explore_suite("builtin-explore") and suite.name == "click"
    assert 5 <= len(suite.questions) <= 8 and "click 8.5.1" in suite.source
    assert "BSD-3-Clause" in suite.license and (suite.repo / "LICENSE.txt").is_file()
    assert (builtin_explore_path() / "repo" / "VENDORED.md").is_file()
    for q in suite.questions:
        for a in q.answers:
            assert (suite.repo / a.path).is_file()
    with pytest.raises(ConfigError, match="unknown question"):
        suite.select(["nope"])


@pytest.mark.parametrize(("edit", "message"), [
    ('lines = [3, 3]', 'lines = [3, 99]', ),
    ('path = "shop/pricing.py", lines = [3, 3]', 'path = "shop/nope.py", lines = [3, 3]'),
    ('id = "cart"', 'id = "tax"'),
    ('lines = [3, 3]', 'lines = [4, 3]'),
])
def test_a_broken_suite_is_one_clear_error_naming_its_file(tmp_path, edit, message):
    root = make_suite(tmp_path, SUITE.replace(edit, message, 1))
    with pytest.raises(ConfigError, match="explore.toml"):
        load_explore_suite(root)


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    root = make_suite(tmp_path_factory.mktemp("suite"))
    suite = load_explore_suite(root)
    out = tmp_path_factory.mktemp("out")

    async def go():
        async with BenchSimulator(None) as sim:
            maps = [sim.role_map("bench-careful"), sim.role_map("bench-fast")]
            return await arun_explore_bench(suite, maps, repeat=2, out_dir=out,
                                            env=sim.env(run_env()))

    return asyncio.run(go())


def test_careful_and_fast_explorers_are_compared_by_truthfulness(report):
    careful, fast = report.summaries
    assert (careful.role_map, careful.model) == ("bench-careful", "sim-bench-explorer")
    assert (fast.role_map, fast.model) == ("bench-fast", "sim-bench-explorer-fast")
    # both find the same real lines; the fast one also invents a file for every question
    assert careful.asked == fast.asked == 6 and careful.answered == fast.answered == 6
    assert (careful.claims.submitted, careful.claims.verified, careful.claims.dropped) == (6, 6, 0)
    assert (fast.claims.submitted, fast.claims.verified, fast.claims.path) == (12, 6, 6)
    assert careful.tokens_per_question > 0 and careful.wall_s.median is not None
    tax = next(r for r in report.records if r.question == "tax" and r.role_map == "bench-careful")
    assert tax.answered_by == "shop/pricing.py:3-3" and tax.cited == ("shop/pricing.py:3-3",)
    fast_tax = next(r for r in report.records if r.question == "tax" and r.role_map == "bench-fast")
    assert any("no such file: src/imaginary.py" in reason for reason in fast_tax.reasons)
    assert [v.status for v in fast_tax.verdicts] == ["dropped", "verified"]


def test_explore_bench_files(report):
    rows = list(csv.DictReader(open(report.files["csv"], encoding="utf-8")))
    assert len(rows) == 12 and {"question", "role_map", "outcome", "verified", "path"} <= set(rows[0])
    saved = json.loads(Path(report.files["json"]).read_text())
    assert saved["kind"] == "explore" and saved["questions"] == ["tax", "cart", "total"]


def test_cli_bench_runs_the_builtin_explore_suite_with_simulated_models(tmp_path):
    proc = cli("bench", "builtin-explore", "--sim", "--task", "intrange-clamp", "--json",
               "--out", str(tmp_path / "out"), env=run_env())
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["suite"] == "click" and data["questions"] == ["intrange-clamp"]
    assert {r["role_map"] for r in data["records"]} == {"bench-careful", "bench-fast"}
    careful = next(r for r in data["records"] if r["role_map"] == "bench-careful")
    # the simulated explorer cites the class line, which is not where the answer is
    assert careful["cited"] == ["src/click/types.py:744-744"] and careful["outcome"] == "unanswered"
    printed = cli("bench", "builtin-explore", "--sim", "--task", "intrange-clamp", "--out",
                  str(tmp_path / "out2"), env=run_env())
    assert "Explorer models" in printed.stdout and "bad path" in printed.stdout


def test_each_record_says_what_the_explorer_was_shown_and_when_it_first_verified(report):
    for rec in report.records:
        assert rec.candidates and rec.candidate_hit is not None
        assert rec.first_verified_s is not None and 0 < rec.first_verified_s <= rec.wall_s + 1
    careful = report.summaries[0]
    assert careful.shown == 6 and careful.first_verified_s.median is not None
    assert 0 <= careful.candidate_hits <= 6


def test_keep_leaves_the_repository_and_every_run_under_out(tmp_path):
    root = make_suite(tmp_path / "suite")
    suite = load_explore_suite(root).select(["tax"])
    out = tmp_path / "out"

    async def go():
        async with BenchSimulator(None) as sim:
            return await arun_explore_bench(suite, [sim.role_map("bench-careful")], out_dir=out,
                                            env=sim.env(run_env()), keep=True)

    kept = asyncio.run(go())
    [rec] = kept.records
    run_dir = Path(rec.run_dir)
    assert run_dir.is_dir() and run_dir.is_relative_to(out / "runs")
    assert (run_dir / "events.jsonl").is_file() and (run_dir / "explorers.jsonl").is_file()

SCOUT = """\
---
name: scout
kind: explore
description: The team's explore role under its own name.
---
You are a scout: answer one question about the repository with checked citations.
"""


def test_an_explore_role_under_another_name_is_the_one_measured(tmp_path):
    suite = load_explore_suite(make_suite(tmp_path / "suite"))
    agents = tmp_path / "config" / "orchestrate" / "agents"
    agents.mkdir(parents=True)
    (agents / "scout.md").write_text(SCOUT, encoding="utf-8")

    async def go():
        async with BenchSimulator(None) as sim:
            scout = sim.role_map("bench-careful", 'pipeline.steps=["planner", "scout"]',
                                 'roles.scout.model="explorer-careful"')
            env = sim.env(run_env(XDG_CONFIG_HOME=str(tmp_path / "config")))
            return await arun_explore_bench(suite, [scout], env=env)

    report = asyncio.run(go())
    (summary,) = report.summaries
    assert (summary.model, summary.asked, summary.answered) == ("sim-bench-explorer", 3, 3)
    assert all(r.calls > 0 and r.tokens > 0 for r in report.records)


@pytest.mark.parametrize("name", ["builtin-explore", "requests-explore", "log-explore"])
def test_each_packaged_explore_suite_loads_by_name(name, tmp_path, monkeypatch):
    """`orchestrate bench requests-explore` finds the packaged suite from any directory; a
    directory of that name in the working directory is a suite of the user's own and wins."""
    from orchestrator.benchmark.explore_suite import load_explore_suite

    monkeypatch.chdir(tmp_path)
    suite = load_explore_suite(name)
    assert is_explore_suite(name) and suite.path.name == name and suite.questions
    own = tmp_path / name
    own.mkdir()
    (own / "explore.toml").write_text("broken = [", encoding="utf-8")
    with pytest.raises(ConfigError, match=f"^{name}/explore.toml: cannot read"):
        load_explore_suite(name)
