"""Where a map's one-line samples were asked, against each task's reference fix: did the run's
samples reach the lines the fix changes, and what did they write there?

A one-line request names its place (``Sample.place``, ``path:start-end``); a suite task's
``[sim]`` table holds the reference fix (never in a prompt). Together they split a failure
that the time budget ended into two kinds a map is tuned for apart: the samples never asked
at the fix's lines (finding the place failed: the explorers' place and the task's leads) or
they did and every line written there was wrong (the builder failed at the right place).
Over five live draws of the explore-needed tasks (r42-r62, ``bench/suite_figures.py
--as-repeats --tasks 'xp-*'``) the routed map's 25 failed runs all asked at the fix (a median
3 samples there) and 14 of its 92 samples there passed, where 19 of solo's 27 failed runs
never asked there (its explorers took the time). Pure functions of the run records and the
suite's files.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence

from pydantic import BaseModel, ConfigDict, Field, computed_field

from orchestrator.benchmark.records import RunRecord, drawn
from orchestrator.benchmark.suite import Suite
from orchestrator.state import Sample

FixLines = tuple[str, int, int]  # path, first and last line the reference fix replaces
NAMED = 6  # failed runs that never reached the fix, named in the printed line at most


class FixReach(BaseModel):
    """One role map's one-line samples, against the tasks' reference fixes."""

    model_config = ConfigDict(frozen=True)

    role_map: str
    runs: int = Field(0, description="Runs on a task with a reference fix that asked at least "
                      "one one-line sample.")
    samples: int = 0
    at_fix: int = Field(0, description="Samples whose place holds a line the fix changes.")
    passed_at_fix: int = 0
    passed_elsewhere: int = 0
    failed: int = Field(0, description="Of the runs, those that did not pass.")
    failed_at_fix_median: float | None = Field(None, description="Samples at the fix per "
                                               "failed run that reached it (median).")
    never: tuple[str, ...] = Field((), description="The failed runs (task#repeat) that never "
                                   "asked at the fix.")
    by_task: dict[str, tuple[int, int]] = Field(
        default_factory=dict, description="Task -> (samples at the fix, of those passed): "
        "where the builder cannot write the line even at the right place.")
    visits: dict[str, tuple[int, int]] = Field(
        default_factory=dict, description="'first at T' or 'again at T' -> (samples at the "
        "fix, of those passed): a place's first sample in its attempt or a repeat, by "
        "temperature ('the model's' when none was set).")

    @computed_field  # type: ignore[prop-decorator]
    @property
    def failed_reached(self) -> int:
        """Failed runs that asked at the fix at least once."""
        return self.failed - len(self.never)


def fix_lines(suite: Suite) -> dict[str, FixLines]:
    """Task name -> the lines its reference fix replaces, for each task whose ``[sim].old`` is
    found once in its file (a task without one is left out)."""
    out: dict[str, FixLines] = {}
    for task in suite.tasks:
        if task.sim is None:
            continue
        try:
            text = (task.repo / task.sim.path).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if text.count(task.sim.old) != 1:
            continue
        first = text[:text.index(task.sim.old)].count("\n") + 1
        out[task.name] = (task.sim.path, first, first + task.sim.old.rstrip("\n").count("\n"))
    return out


def at_fix(place: str, fix: FixLines) -> bool:
    """Whether a sample's ``path:start-end`` holds a line of ``fix``."""
    path, _, lines = place.removeprefix("./").rpartition(":")
    start, _, end = lines.partition("-")
    if path != fix[0] or not start.isdigit() or not (end or start).isdigit():
        return False
    return int(start) <= fix[2] and fix[1] <= int(end or start)


def summarize_reach(role_map: str, records: Sequence[RunRecord],
                    fixes: Mapping[str, FixLines]) -> FixReach:
    """Where ``records``' one-line samples were asked against their tasks' fixes."""
    runs = samples = hit = passed_hit = passed_all = failed = 0
    per_failed: list[int] = []
    never: list[str] = []
    by_task: dict[str, tuple[int, int]] = {}
    visits: dict[str, tuple[int, int]] = {}
    for rec in records:
        fix = fixes.get(rec.task)
        asked = [s for a in rec.attempt_log for s in drawn(a.samples) if s.place]
        if fix is None or not asked:
            continue
        keyed = _visits(rec, fix)
        there = [s for _, s in keyed]
        for key, sample in keyed:
            n, ok = visits.get(key, (0, 0))
            visits[key] = (n + 1, ok + sample.passed)
        won = sum(s.passed for s in there)
        runs, samples, hit, passed_hit = runs + 1, samples + len(asked), hit + len(there), \
            passed_hit + won
        passed_all += sum(s.passed for s in asked)
        task_asked, task_won = by_task.get(rec.task, (0, 0))
        by_task[rec.task] = (task_asked + len(there), task_won + won)
        if rec.passed:
            continue
        failed += 1
        if there:
            per_failed.append(len(there))
        else:
            never.append(f"{rec.task}#{rec.repeat + 1}")
    return FixReach(role_map=role_map, runs=runs, samples=samples, at_fix=hit,
                    passed_at_fix=passed_hit, passed_elsewhere=passed_all - passed_hit,
                    failed=failed, never=tuple(never), by_task=by_task, visits=visits,
                    failed_at_fix_median=statistics.median(per_failed) if per_failed else None)


def _visits(rec: RunRecord, fix: FixLines) -> list[tuple[str, Sample]]:
    """Each of ``rec``'s samples at the fix, in order, keyed by whether its place was asked
    before in its attempt and by its temperature."""
    out: list[tuple[str, Sample]] = []
    for attempt in rec.attempt_log:
        seen: set[str] = set()
        for s in drawn(attempt.samples):
            if not s.place:
                continue
            if at_fix(s.place, fix):
                heat = "the model's" if s.temperature is None else f"{s.temperature:g}"
                out.append((f"{'again' if s.place in seen else 'first'} at {heat}", s))
            seen.add(s.place)
    return out


def reach_lines(reaches: Sequence[FixReach]) -> list[str]:
    """One or two lines per map that asked one-line samples on tasks with a reference fix."""
    lines: list[str] = []
    for r in reaches:
        if not r.samples:
            continue
        lines.append(
            f"{r.role_map}: one-line samples at the reference fix's lines: {r.at_fix} of "
            f"{r.samples} ({100 * r.at_fix / r.samples:.0f} %) over {r.runs} run(s); "
            f"{r.passed_at_fix} of those passed, {r.passed_elsewhere} of the "
            f"{r.samples - r.at_fix} elsewhere")
        if r.failed:
            median = "" if r.failed_at_fix_median is None else \
                f" ({r.failed_at_fix_median:g} sample(s) there, median)"
            said = f"{r.role_map}: of its {r.failed} failed run(s) {r.failed_reached} asked at " \
                f"the fix{median}" + (": the line written there was wrong" if r.failed_reached
                                      else "")
            if r.never:
                named = ", ".join(r.never[:NAMED]) + (
                    f" and {len(r.never) - NAMED} more" if len(r.never) > NAMED else "")
                said += f"; {len(r.never)} never asked there ({named})"
            lines.append(said)
        held = [(t, n, ok) for t, (n, ok) in r.by_task.items() if n]
        if held:
            lines.append(f"{r.role_map}: at the fix, passed of asked, by task: " + ", ".join(
                f"{t} {ok}/{n}" for t, n, ok in sorted(held, key=lambda x: (x[2] / x[1], x[0]))))
        if r.visits:
            lines.append(f"{r.role_map}: at the fix, passed of asked, by visit in its attempt: "
                         + ", ".join(f"{k} {ok}/{n}" for k, (n, ok) in sorted(
                             r.visits.items(), key=lambda x: (x[0].startswith('again'), x[0]))))
    return lines
