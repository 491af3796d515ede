"""The benchmark's report: the typed ``BenchReport``, its files (``bench.json``, ``runs.csv`` with
one row per (task, role map, repeat), ``bench.png``) and its printed form: a table per role map,
a summary across maps, and for each pair the speed-up at equal accuracy printed next to both
pass rates, so a speed figure never appears without the accuracy it was measured at.
"""

from __future__ import annotations

import csv
import os
import platform
import statistics
import time
from collections.abc import Sequence
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.table import Table

from orchestrator.benchmark.attempts import (
    AttemptsSummary,
    attempts_table,
    sample_lines,
    summarize_attempts,
)
from orchestrator.benchmark.compare import MapSummary, PairComparison, Spread, compare_all
from orchestrator.benchmark.fixplace import FixReach, fix_lines, reach_lines, summarize_reach
from orchestrator.benchmark.records import RunRecord, csv_row
from orchestrator.benchmark.suite import Suite

JSON_FILE, CSV_FILE, PNG_FILE = "bench.json", "runs.csv", "bench.png"


class BenchReport(BaseModel):
    """Everything one ``orchestrate bench`` measured."""

    model_config = ConfigDict(frozen=True)

    suite: str
    tasks: tuple[str, ...]
    role_maps: tuple[str, ...]
    repeat: int
    jobs: int
    started: float
    machine: dict[str, str]
    records: tuple[RunRecord, ...]
    summaries: tuple[MapSummary, ...]
    comparisons: tuple[PairComparison, ...]
    attempts: tuple[AttemptsSummary, ...] = ()
    # where each map's one-line samples were asked against the tasks' reference fixes
    reach: tuple[FixReach, ...] = ()
    files: dict[str, str] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()
    repos: str | None = None

    def summary(self, role_map: str) -> MapSummary:
        return next(s for s in self.summaries if s.role_map == role_map)

    def outcomes(self) -> dict[tuple[str, str, int], str]:
        """(task, role map, repeat) -> outcome: what ``--jobs`` must not change."""
        return {(r.task, r.role_map, r.repeat): r.outcome for r in self.records}


def machine() -> dict[str, str]:
    return {"platform": platform.platform(), "python": platform.python_version(),
            "cpus": str(os.cpu_count() or "?"), "processor": platform.machine()}


def build_report(suite: Suite, order: Sequence[str], records: Sequence[RunRecord], *,
                 repeat: int, jobs: int, started: float, repos: str | None = None) -> BenchReport:
    rank = {t.name: i for i, t in enumerate(suite.tasks)}
    maps = {n: i for i, n in enumerate(order)}
    ordered = sorted(records, key=lambda r: (rank[r.task], maps[r.role_map], r.repeat))
    summaries, pairs = compare_all(ordered, order)
    return BenchReport(suite=suite.name, tasks=tuple(rank), role_maps=tuple(order),
                       repeat=repeat, jobs=jobs, started=started, machine=machine(),
                       records=tuple(ordered), summaries=summaries, comparisons=pairs,
                       attempts=tuple(summarize_attempts(name, [r for r in ordered
                                                               if r.role_map == name])
                                      for name in order),
                       reach=reaches(suite, order, ordered), repos=repos)


def reaches(suite: Suite, order: Sequence[str], records: Sequence[RunRecord]
            ) -> tuple[FixReach, ...]:
    """Per map, its one-line samples against the ``suite``'s reference fixes (``fixplace``);
    none when no record asked one on a task with a fix."""
    fixes = fix_lines(suite)
    out = tuple(summarize_reach(name, [r for r in records if r.role_map == name], fixes)
                for name in order)
    return out if any(r.samples for r in out) else ()


def write_csv(report: BenchReport, path: Path) -> Path:
    rows = [csv_row(r) for r in report.records]
    with path.open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["task"])
        writer.writeheader()
        writer.writerows(rows)
    return path


def write_outputs(report: BenchReport, out_dir: Path) -> BenchReport:
    """Write CSV, PNG (when matplotlib is installed) and JSON; the report names its files."""
    from orchestrator.benchmark.plot import write_png

    out_dir.mkdir(parents=True, exist_ok=True)
    files = {"csv": str(write_csv(report, out_dir / CSV_FILE))}
    png, note = write_png(report, out_dir / PNG_FILE)
    if png is not None:
        files["png"] = str(png)
    files["json"] = str(out_dir / JSON_FILE)
    report = report.model_copy(update={"files": files, "notes": report.notes + ((note,) if note else ())})
    (out_dir / JSON_FILE).write_text(report.model_dump_json(indent=2), encoding="utf-8")
    return report


# --- printing ------------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _secs(x: float | None) -> str:
    return "-" if x is None else f"{x:.2f}s"


def _range(s: Spread, fmt=_secs) -> str:
    if s.median is None:
        return "-"
    if fmt(s.low) == fmt(s.high):
        return fmt(s.median)
    return f"{fmt(s.median)} ({fmt(s.low)}–{fmt(s.high)})"


def _per_repeat(s: Spread) -> str:
    """`` (per repeat 25%–100%)`` when the repeats differ, else nothing."""
    if s.median is None or _pct(s.low) == _pct(s.high):
        return ""
    return f" (per repeat {_pct(s.low)}–{_pct(s.high)})"


def _times(s: Spread) -> str:
    return _range(s, lambda x: "-" if x is None else f"{x:.2f}×")


def short_reason(rec: RunRecord) -> str:
    """Why a run did not pass, in a few words."""
    if rec.passed:
        return ""
    if rec.error:
        return rec.error.split(":", 1)[0] + ": " + rec.error.split(":", 1)[-1].strip()[:40]
    if rec.status == "succeeded":
        return "bench check failed"
    if rec.failure and rec.failure != "other":  # records.classify
        return f"{rec.status}: {rec.failure.replace('_', ' ')}"
    return f"{rec.status}: tests fail" if "acceptance" in rec.reason else rec.status


def map_table(report: BenchReport, role_map: str) -> Table:
    """One row per task: passes, median wall time and its split, tokens, cost, what failed."""
    table = Table(title=f"{role_map}: {report.suite}, {report.repeat} repeat(s)",
                  title_justify="left")
    for col in ("task", "pass", "wall", "model", "tools", "orch", "tokens", "cost $", "fb",
                "cit v/d", "why not"):
        table.add_column(col, justify="left" if col in ("task", "why not") else "right",
                         no_wrap=col != "why not")
    for task in report.tasks:
        runs = [r for r in report.records if r.role_map == role_map and r.task == task]
        if runs:
            table.add_row(*_task_row(task, runs))
    return table


def _task_row(task: str, runs: Sequence[RunRecord]) -> list[str]:
    def med(field: str) -> str:
        return _secs(statistics.median(getattr(r, field) for r in runs))

    n = len(runs)
    return [
        task, f"{sum(r.passed for r in runs)}/{n}", med("wall_s"), med("model_s"), med("tool_s"),
        med("orchestration_s"), str(sum(sum(r.tokens.values()) for r in runs) // n),
        f"{sum(r.cost_usd for r in runs) / n:.4f}", str(sum(r.fallbacks for r in runs)),
        f"{sum(r.citations_verified for r in runs)}/{sum(r.citations_dropped for r in runs)}",
        "; ".join(sorted({short_reason(r) for r in runs} - {""})),
    ]


def summary_table(report: BenchReport) -> Table:
    """One row per map: the pass rate (range over repeats) before any time or cost."""
    table = Table(title="Role maps (ranges over repeats)", title_justify="left")
    for col in ("role map", "pass rate", "errors", "wall passed", "wall all", "$/run", "$/pass",
                "tokens", "forks/fb", "cit v/d"):
        table.add_column(col, justify="left" if col == "role map" else "right")
    for s in report.summaries:
        table.add_row(
            s.role_map, f"{s.passed}/{s.runs} {_range(s.pass_rate_by_repeat, _pct)}",
            str(s.errors), _secs(s.wall_s_passed.median), _secs(s.wall_s.median),
            "-" if s.cost_usd.median is None else f"{s.cost_usd.median:.4f}",
            "-" if s.cost_per_pass is None else f"{s.cost_per_pass:.4f}",
            str(sum(s.tokens.values())), f"{s.forks}/{s.fallbacks}",
            f"{s.citations_verified}/{s.citations_dropped}",
        )
    return table


def comparison_lines(c: PairComparison) -> list[str]:
    """The pair in words; every speed figure sits next to the pass rates it holds at."""
    lines = [f"{c.a} vs {c.b}: pass rate {c.a} {_pct(c.pass_rate_a)}, {c.b} {_pct(c.pass_rate_b)}"]
    if c.speedup is None:
        lines.append("  speed-up at equal accuracy: none (no task solved by both)")
    else:
        lines.append(
            f"  at equal accuracy {c.a} is {c.speedup:.2f}× as fast as {c.b}: median over the "
            f"{len(c.both_solved)} task(s) both solved (per repeat {_times(c.speedup_by_repeat)}; "
            f"per task {_times(c.speedup_by_task)})")
        if c.first_call_both:
            rest = len(c.both_solved) - len(c.first_call_both)
            lines.append(
                f"  of those, {len(c.first_call_both)} passed at both maps' first build call"
                + (f"; over the other {rest}: {c.speedup_rest:.2f}×"
                   if rest and c.speedup_rest is not None else ""))
        if c.speedup_total is not None:
            lines.append(f"  their summed time, {c.b} over {c.a}: {c.speedup_total:.2f}× (the "
                         "batch of them, not the typical task)")
    if (c.matched_rate is not None and c.matched_budget_a is not None
            and c.matched_budget_b is not None):
        lines.append(
            f"  to the same pass rate ({_pct(c.matched_rate)}, the lower one): {c.a} within "
            f"{c.matched_budget_a:.2f}s a task, {c.b} within {c.matched_budget_b:.2f}s"
            + (f" ({c.matched_budget_b / c.matched_budget_a:.2f}×)"
               if c.matched_budget_a > 0 else ""))
    if c.budget_s is not None:
        lines.append(
            f"  pass rate within {c.budget_s:.2f}s (the slower map's median time on solved tasks): "
            f"{c.a} {_pct(c.pass_at_budget_a)}{_per_repeat(c.pass_at_budget_a_by_repeat)}, "
            f"{c.b} {_pct(c.pass_at_budget_b)}{_per_repeat(c.pass_at_budget_b_by_repeat)}")
    if c.raw_speedup is not None:
        lines.append(f"  raw speed-up, all runs incl. failures (not accuracy-matched): "
                     f"{c.raw_speedup:.2f}×")
    return lines


def print_report(report: BenchReport, console: Console | None = None) -> None:
    """The per-map tables, the summary, the pairwise comparisons, and where the files are."""
    console = console or Console()
    for name in report.role_maps:
        console.print(map_table(report, name))
    console.print(summary_table(report))
    if report.attempts:
        console.print(attempts_table(report.attempts))
        for line in sample_lines(report.attempts):
            console.print(line, highlight=False, markup=False)
    for line in reach_lines(report.reach):
        console.print(line, highlight=False, markup=False)
    for c in report.comparisons:
        for line in comparison_lines(c):
            console.print(line, highlight=False, markup=False)
    for note in report.notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    m = report.machine
    console.print(f"machine: {m['platform']}, {m['cpus']} CPU(s), Python {m['python']}; "
                  f"jobs={report.jobs}; started {time.strftime('%Y-%m-%d %H:%M', time.localtime(report.started))}",
                  highlight=False, markup=False)
    for kind, path in report.files.items():
        console.print(f"{kind}: {path}", highlight=False, markup=False)
    if report.repos:
        console.print(f"runs kept: {report.repos}", highlight=False, markup=False)
