"""The comparison maths, as pure functions of the run records: per-map summaries and, for each
pair of role maps, the speed-up at equal accuracy and the pass rate at an equal time budget.

A map *solves* a task when at least half of its repeats passed; its time on the task is the
median wall time of the passing repeats. The speed-up of A over B is the median, over the tasks
both solved, of B's time / A's time; its spread is the range of the same figure computed per
repeat. The time budget of a pair is the slower map's median time on the tasks it solved, and
each map's pass rate within it counts the runs that passed in no more than that time. The raw
speed-up (median wall time of all runs, failures included) is kept only as a labelled aside,
and so is the total one (B's summed time over A's, on the tasks both solved). So is equal
accuracy read off the curve of pass rate within a budget: the per-task budget each map needs to
reach the lower of the two pass rates (``budget_for``).
"""

from __future__ import annotations

import math
import statistics
from collections import defaultdict
from collections.abc import Iterable, Sequence
from itertools import combinations

from pydantic import BaseModel, ConfigDict

from orchestrator.benchmark.records import RunRecord, drawn


class Spread(BaseModel):
    """A median with its range (min-max) and quartiles, over ``n`` values."""

    model_config = ConfigDict(frozen=True)

    median: float | None
    low: float | None = None
    high: float | None = None
    q1: float | None = None
    q3: float | None = None
    n: int = 0


def spread(values: Iterable[float]) -> Spread:
    vals = sorted(values)
    if not vals:
        return Spread(median=None)
    if len(vals) == 1:
        q1 = q3 = vals[0]
    else:
        q1, _, q3 = statistics.quantiles(vals, n=4, method="inclusive")
    return Spread(median=statistics.median(vals), low=vals[0], high=vals[-1], q1=q1, q3=q3,
                  n=len(vals))


class MapSummary(BaseModel):
    """One role map over the whole suite."""

    model_config = ConfigDict(frozen=True)

    role_map: str
    runs: int
    passed: int
    errors: int
    pass_rate: float
    pass_rate_by_repeat: Spread
    wall_s: Spread
    wall_s_passed: Spread
    median_wall_by_repeat: Spread
    cost_usd: Spread
    cost_per_pass: float | None
    tokens: dict[str, int]
    solved: tuple[str, ...]
    forks: int
    fallbacks: int
    citations_verified: int
    citations_dropped: int


class PairComparison(BaseModel):
    """Map ``a`` against map ``b``: speed-up of a over b (> 1: a is faster) at equal accuracy."""

    model_config = ConfigDict(frozen=True)

    a: str
    b: str
    pass_rate_a: float
    pass_rate_b: float
    both_solved: tuple[str, ...]
    speedup: float | None
    speedup_by_repeat: Spread
    speedup_by_task: Spread
    budget_s: float | None
    pass_at_budget_a: float | None
    pass_at_budget_b: float | None
    pass_at_budget_a_by_repeat: Spread
    pass_at_budget_b_by_repeat: Spread
    raw_speedup: float | None
    # the tasks both solved whose every pass, under both maps, came at the first build call (one
    # request, no second attempt or sample): where both maps ask one builder the same first
    # call, those ratios are 1 by construction, whatever the other roles cost
    first_call_both: tuple[str, ...] = ()
    speedup_rest: float | None = None  # the median ratio over the other tasks both solved
    # b's summed time over a's on the tasks both solved: the time the batch of them takes,
    # where the median ratio is the typical task's (a run of long tasks weighs more here)
    speedup_total: float | None = None
    # equal accuracy read off the pass-rate-within-a-budget curve: the lower of the two maps'
    # pass rates, and the per-task time budget each map needs to reach it (its k-th fastest
    # pass, k that rate of its runs). Not a per-task ratio: the batch's, at the same accuracy
    matched_rate: float | None = None
    matched_budget_a: float | None = None
    matched_budget_b: float | None = None


def _median(values: Sequence[float]) -> float | None:
    return statistics.median(values) if values else None


def _by(records: Iterable[RunRecord], *keys: str) -> dict[tuple, list[RunRecord]]:
    groups: dict[tuple, list[RunRecord]] = defaultdict(list)
    for r in records:
        groups[tuple(getattr(r, k) for k in keys)].append(r)
    return dict(groups)


def task_times(records: Sequence[RunRecord]) -> dict[str, float]:
    """Task -> median wall time of its passing repeats, for the tasks this map solved."""
    out = {}
    for (task,), runs in sorted(_by(records, "task").items()):
        passing = [r.wall_s for r in runs if r.passed]
        if 2 * len(passing) >= len(runs) and passing:
            out[task] = statistics.median(passing)
    return out


def pass_rate(records: Sequence[RunRecord]) -> float:
    return sum(r.passed for r in records) / len(records) if records else 0.0


def summarize(role_map: str, records: Sequence[RunRecord]) -> MapSummary:
    repeats = _by(records, "repeat")
    tokens: dict[str, int] = defaultdict(int)
    for r in records:
        for role, n in r.tokens.items():
            tokens[role] += n
    passes = sum(r.passed for r in records)
    total_cost = sum(r.cost_usd for r in records)
    return MapSummary(
        role_map=role_map, runs=len(records), passed=passes,
        errors=sum(r.outcome == "error" for r in records), pass_rate=pass_rate(records),
        pass_rate_by_repeat=spread(pass_rate(rs) for rs in repeats.values()),
        wall_s=spread(r.wall_s for r in records),
        wall_s_passed=spread(r.wall_s for r in records if r.passed),
        median_wall_by_repeat=spread(statistics.median(r.wall_s for r in rs)
                                     for rs in repeats.values()),
        cost_usd=spread(r.cost_usd for r in records),
        cost_per_pass=total_cost / passes if passes else None,
        tokens=dict(sorted(tokens.items())), solved=tuple(task_times(records)),
        forks=sum(r.forks for r in records), fallbacks=sum(r.fallbacks for r in records),
        citations_verified=sum(r.citations_verified for r in records),
        citations_dropped=sum(r.citations_dropped for r in records),
    )


def _ratios_by_repeat(a: Sequence[RunRecord], b: Sequence[RunRecord],
                      tasks: Sequence[str]) -> list[float]:
    """Per repeat: the median over ``tasks`` both passed in that repeat of b's time / a's time."""
    walls_a = {(r.task, r.repeat): r.wall_s for r in a if r.passed}
    walls_b = {(r.task, r.repeat): r.wall_s for r in b if r.passed}
    out = []
    for rep in sorted({r.repeat for r in a} | {r.repeat for r in b}):
        ratios = [walls_b[(t, rep)] / walls_a[(t, rep)] for t in tasks
                  if (t, rep) in walls_a and (t, rep) in walls_b and walls_a[(t, rep)] > 0]
        if ratios:
            out.append(statistics.median(ratios))
    return out


def _passed_within(records: Sequence[RunRecord], budget: float) -> float:
    return sum(r.passed and r.wall_s <= budget for r in records) / len(records) if records else 0.0


def _budget_rates(records: Sequence[RunRecord], budget: float | None) -> tuple[float | None, Spread]:
    if budget is None:
        return None, Spread(median=None)
    per_repeat = [_passed_within(rs, budget) for rs in _by(records, "repeat").values()]
    return _passed_within(records, budget), spread(per_repeat)


def budget_for(records: Sequence[RunRecord], rate: float) -> float | None:
    """The least per-task time budget within which ``rate`` of ``records`` pass (None when
    they never do): the k-th fastest passing run, k = ``rate`` of the runs, rounded up."""
    walls = sorted(r.wall_s for r in records if r.passed)
    k = math.ceil(rate * len(records) - 1e-9)
    return walls[k - 1] if 0 < k <= len(walls) else None


def passed_at_first_call(rec: RunRecord) -> bool:
    """``rec`` passed at its first build call: one attempt, one request (no second sample)."""
    log = rec.attempt_log
    return rec.passed and len(log) == 1 and len(drawn(log[0].samples)) <= 1


def first_call_tasks(records: Sequence[RunRecord]) -> set[str]:
    """The tasks whose every passing run passed at its first build call."""
    passing = [r for r in records if r.passed]
    return {r.task for r in passing} - {r.task for r in passing if not passed_at_first_call(r)}


def compare_pair(a_name: str, a: Sequence[RunRecord], b_name: str,
                 b: Sequence[RunRecord]) -> PairComparison:
    times_a, times_b = task_times(a), task_times(b)
    both = tuple(t for t in times_a if t in times_b)
    by_task = [times_b[t] / times_a[t] for t in both if times_a[t] > 0]
    first = first_call_tasks(a) & first_call_tasks(b)
    rest = [times_b[t] / times_a[t] for t in both if t not in first and times_a[t] > 0]
    solved_medians = [_median(list(times.values())) for times in (times_a, times_b)]
    budget = max((m for m in solved_medians if m is not None), default=None)
    at_a, at_a_rep = _budget_rates(a, budget)
    at_b, at_b_rep = _budget_rates(b, budget)
    raw_a, raw_b = _median([r.wall_s for r in a]), _median([r.wall_s for r in b])
    matched = min(pass_rate(a), pass_rate(b))
    return PairComparison(
        a=a_name, b=b_name, pass_rate_a=pass_rate(a), pass_rate_b=pass_rate(b),
        both_solved=both, speedup=_median(by_task),
        speedup_by_repeat=spread(_ratios_by_repeat(a, b, both)),
        speedup_by_task=spread(by_task), budget_s=budget,
        pass_at_budget_a=at_a, pass_at_budget_b=at_b,
        pass_at_budget_a_by_repeat=at_a_rep, pass_at_budget_b_by_repeat=at_b_rep,
        raw_speedup=raw_b / raw_a if raw_a and raw_b is not None else None,
        first_call_both=tuple(t for t in both if t in first), speedup_rest=_median(rest),
        speedup_total=(sum(times_b[t] for t in both) / total_a
                       if (total_a := sum(times_a[t] for t in both)) > 0 else None),
        matched_rate=matched if matched > 0 else None,
        matched_budget_a=budget_for(a, matched), matched_budget_b=budget_for(b, matched),
    )


def compare_all(records: Sequence[RunRecord], order: Sequence[str]) -> tuple[
        tuple[MapSummary, ...], tuple[PairComparison, ...]]:
    """Summaries in ``order`` and every pair of role maps, the faster one first."""
    groups = {name: [r for r in records if r.role_map == name] for name in order}
    summaries = tuple(summarize(name, groups[name]) for name in order)
    pairs = tuple(_oriented(x, groups[x], y, groups[y]) for x, y in combinations(order, 2))
    return summaries, pairs


def _oriented(x: str, xs: Sequence[RunRecord], y: str, ys: Sequence[RunRecord]) -> PairComparison:
    """The pair with the faster map (at equal accuracy) first, so speed-ups read as >= 1."""
    pair = compare_pair(x, xs, y, ys)
    if pair.speedup is not None and pair.speedup < 1:
        return compare_pair(y, ys, x, xs)
    return pair
