"""What the build attempts bought, per role map: the curve a user picks a map by (pass rate
within 30, 60, 120 and 300 s, median time to a verified pass), how many attempts each pass
needed and which strategy of the ladder produced it, every failure classified, and what the
2nd..kth best-of-k one-shot sample cost against the first (call time, prompt reading, cached
tokens). Pure functions of the run records; ``attempts_table`` and ``sample_lines`` print them.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict
from rich.table import Table

from orchestrator.benchmark.compare import Spread, spread
from orchestrator.benchmark.records import RunRecord, drawn
from orchestrator.state import Sample

BUDGETS_S: tuple[int, ...] = (30, 60, 120, 300)


class PlaceCost(BaseModel):
    """Samples 2..k asked at one kind of place against their attempt's sample 1: at its place
    with the request it asked (the very same prompt), at its place asking for another number
    of corrections (the same code, another question at the end: ``line_alternatives``), or at
    another place (the one-line request cycling over places: a prompt of its own past the
    shared task and failure)."""

    model_config = ConfigDict(frozen=True)

    samples: int = 0
    vs_first: Spread = Spread(median=None)  # per sample: its call time over its sample 1's
    ttft_s: Spread = Spread(median=None)  # prompt reading
    gen_s: Spread = Spread(median=None)  # the rest of the call: generation


class SampleCost(BaseModel):
    """Best-of-k samples: sample 1 against samples 2..k of the same attempts."""

    model_config = ConfigDict(frozen=True)

    attempts: int = 0  # attempts that asked more than one sample
    first_s: Spread = Spread(median=None)
    later_s: Spread = Spread(median=None)
    later_vs_first: Spread = Spread(median=None)  # per attempt: median later / first call time
    first_ttft_s: Spread = Spread(median=None)  # prompt reading
    later_ttft_s: Spread = Spread(median=None)
    later_cached_share: float | None = None  # cached / prompt tokens over samples 2..k
    # the attempts whose sample 1 read its prompt cold (under half of it cached): a later
    # attempt's sample 1 often asks a prompt an earlier one read, and is then cheap itself
    cold_attempts: int = 0
    cold_later_vs_first: Spread = Spread(median=None)
    # every sample of the runs, and those that read again a prompt their run had already asked
    # (same place, same size) past its cached prefix: a one-slot server keeps only the last
    # prompt, so cycling over places re-reads each place's own lines
    asked: int = 0
    asked_call_s: float = 0.0
    reread: int = 0
    reread_ttft_s: float = 0.0
    # samples whose reply named a file or a line, gave no text for it and was asked once more
    # for it in its session: how many, what that second turn took, what it bought
    again: int = 0
    again_s: Spread = Spread(median=None)
    again_changed: int = 0
    again_passed: int = 0
    # later_vs_first with each sample's second turn left out: what its prompt's first call cost
    one_turn_vs_first: Spread = Spread(median=None)
    # samples 2..k apart by where they asked, reading and generation apart
    first_gen_s: Spread = Spread(median=None)
    same_place: PlaceCost = PlaceCost()  # sample 1's very prompt
    listed_place: PlaceCost = PlaceCost()  # sample 1's place, another number of corrections
    other_place: PlaceCost = PlaceCost()
    # one-line requests for several corrections (line_alternatives): how many, how many passed
    # (by any of their edits), and the further edits checked with no call of their own
    listed: int = 0
    listed_passed: int = 0
    further: int = 0
    further_passed: int = 0
    # mechanical edits of the lines failed one-line samples chose (mutants): how many were
    # checked, in how many runs, how many passed and what their checks took
    mutants: int = 0
    mutant_runs: int = 0
    mutants_passed: int = 0
    mutant_check_s: Spread = Spread(median=None)


class AttemptsSummary(BaseModel):
    """One role map's attempts over the suite."""

    model_config = ConfigDict(frozen=True)

    role_map: str
    runs: int
    passed: int
    pass_rate: float
    median_pass_s: float | None
    within: dict[int, float]  # budget (s) -> share of runs that passed within it
    attempts_per_pass: Spread
    passed_by: dict[str, int]  # strategy -> passes it produced
    tried: dict[str, int]  # strategy -> attempts that used it
    unchanged: int  # attempts that changed nothing
    failures: dict[str, int]  # failure class -> runs
    samples: SampleCost


def summarize_attempts(role_map: str, records: Sequence[RunRecord]) -> AttemptsSummary:
    passing = [r for r in records if r.passed]
    n = len(records)
    attempts = [a for r in records for a in r.attempt_log]
    return AttemptsSummary(
        role_map=role_map, runs=n, passed=len(passing),
        pass_rate=len(passing) / n if n else 0.0,
        median_pass_s=statistics.median(r.wall_s for r in passing) if passing else None,
        within={b: (sum(r.wall_s <= b for r in passing) / n if n else 0.0) for b in BUDGETS_S},
        attempts_per_pass=spread(len(r.attempt_log) or r.attempts for r in passing),
        passed_by=dict(Counter(r.strategy or "unknown" for r in passing)),
        tried=dict(Counter(a.strategy for a in attempts)),
        unchanged=sum(not a.changed for a in attempts),
        failures=dict(Counter(r.failure or "other" for r in records if not r.passed)),
        samples=sample_cost(records),
    )


# a prompt asked again with more than this many tokens not served from the cache was read again
# (a wholly cached prompt still evaluates its last token)
REREAD_TOKENS = 16


def sample_cost(records: Sequence[RunRecord]) -> SampleCost:
    """What samples 2..k cost against sample 1, over the attempts that asked several, and
    what the runs' samples spent reading again prompts their run had already asked."""
    every = [x for r in records for a in r.attempt_log for x in drawn(a.samples)]
    again = [x for r in records for x in _read_again(r)]
    turned = [x for x in every if x.again_s > 0]
    listed = [x for x in every if x.corrections > 1]
    further = [x for r in records for a in r.attempt_log for x in a.samples if x.alternative]
    edits = [[x for a in r.attempt_log for x in a.samples if x.mutant] for r in records]
    seen = SampleCost(listed=len(listed), listed_passed=sum(x.passed for x in listed),
                      further=len(further), further_passed=sum(x.passed for x in further),
                      mutants=sum(map(len, edits)), mutant_runs=sum(map(bool, edits)),
                      mutants_passed=sum(x.passed for e in edits for x in e),
                      mutant_check_s=spread(x.checks_s for e in edits for x in e),
                      asked=len(every), asked_call_s=sum(x.call_s for x in every),
                      reread=len(again), reread_ttft_s=sum(x.ttft_s or 0.0 for x in again),
                      again=len(turned), again_s=spread(x.again_s for x in turned),
                      again_changed=sum(x.changed for x in turned),
                      again_passed=sum(x.passed for x in turned))
    sampled = [s for r in records for a in r.attempt_log if len(s := drawn(a.samples)) > 1]
    if not sampled:
        return seen
    firsts = [s[0] for s in sampled]
    laters = [x for s in sampled for x in s[1:]]
    timed = [s for s in sampled if s[0].call_s > 0]
    cold = [s for s in timed if 2 * s[0].cached_tokens < s[0].prompt_tokens]
    prompt = sum(x.prompt_tokens for x in laters)
    return seen.model_copy(update=dict(
        first_gen_s=spread(_gen(x) for x in firsts if x.ttft_s is not None),
        same_place=_place_cost(timed, "prompt"), listed_place=_place_cost(timed, "list"),
        other_place=_place_cost(timed, "other"),
        cold_attempts=len(cold), cold_later_vs_first=spread(map(_later_vs_first, cold)),
        attempts=len(sampled), first_s=spread(x.call_s for x in firsts),
        later_s=spread(x.call_s for x in laters),
        later_vs_first=spread(map(_later_vs_first, timed)),
        one_turn_vs_first=spread(_later_vs_first(s, one_turn=True) for s in timed),
        first_ttft_s=spread(x.ttft_s for x in firsts if x.ttft_s is not None),
        later_ttft_s=spread(x.ttft_s for x in laters if x.ttft_s is not None),
        later_cached_share=sum(x.cached_tokens for x in laters) / prompt if prompt else None))


def _gen(sample: Sample) -> float:
    """The first call's generation: its call time past the first token, without the second
    turn a reply that named a line or file and gave no text for it was asked (``again_s``,
    counted apart)."""
    return max(0.0, sample.call_s - sample.again_s - (sample.ttft_s or 0.0))


def _where(sample: Sample, first: Sample) -> str:
    """Where ``sample`` asked against its attempt's ``first``: its very prompt (``prompt``),
    its place with another number of corrections (``list``), or another place (``other``)."""
    if sample.place != first.place:
        return "other"
    return "prompt" if sample.corrections == first.corrections else "list"


def _place_cost(sampled: Sequence[Sequence[Sample]], where: str) -> PlaceCost:
    """Samples 2..k of ``sampled`` that asked ``where`` (``_where``) against their sample 1."""
    pairs = [(x, s[0]) for s in sampled for x in s[1:] if _where(x, s[0]) == where]
    return PlaceCost(samples=len(pairs), vs_first=spread(x.call_s / f.call_s for x, f in pairs),
                     ttft_s=spread(x.ttft_s for x, _ in pairs if x.ttft_s is not None),
                     gen_s=spread(_gen(x) for x, _ in pairs if x.ttft_s is not None))


def _read_again(record: RunRecord) -> list[Sample]:
    """The run's samples that asked a prompt it had asked before (same place, same size) and
    were not served it from the cache."""
    asked: set[tuple[str, int]] = set()
    again = []
    for x in (x for a in record.attempt_log for x in drawn(a.samples)):
        key = (x.place, x.prompt_tokens)
        if key in asked and x.prompt_tokens - x.cached_tokens > REREAD_TOKENS:
            again.append(x)
        asked.add(key)
    return again


def _later_vs_first(samples: Sequence[Sample], *, one_turn: bool = False) -> float:
    """One attempt's samples 2..k: their median call time over sample 1's (``one_turn``: each
    without its second turn, when it was asked once more for a line or file it named)."""
    def took(x: Sample) -> float:
        return x.call_s - x.again_s if one_turn else x.call_s
    return statistics.median(took(x) for x in samples[1:]) / took(samples[0])


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.0f}%"


def _counts(counts: dict[str, int]) -> str:
    return ", ".join(f"{k} {v}" for k, v in sorted(counts.items(), key=lambda kv: -kv[1])) or "-"


def attempts_table(summaries: Sequence[AttemptsSummary]) -> Table:
    """One row per map: pass rate, median time to a pass, the within-budget curve, attempts
    per pass, the strategies that passed and how the rest failed."""
    table = Table(title="Attempts: time to a verified pass, and what bought it",
                  title_justify="left")
    cols = ("role map", "pass", "median pass", *(f"≤{b}s" for b in BUDGETS_S),
            "attempts/pass", "passed by", "unchanged", "failures")
    for col in cols:
        table.add_column(col, justify="left" if col in ("role map", "passed by", "failures")
                         else "right")
    for s in summaries:
        per = s.attempts_per_pass.median
        table.add_row(
            s.role_map, f"{s.passed}/{s.runs}",
            "-" if s.median_pass_s is None else f"{s.median_pass_s:.1f}s",
            *(_pct(s.within[b]) for b in BUDGETS_S), "-" if per is None else f"{per:g}",
            _counts(s.passed_by), f"{s.unchanged}/{sum(s.tried.values())}",
            _counts(s.failures))
    return table


def sample_lines(summaries: Sequence[AttemptsSummary]) -> list[str]:
    """For each map that sampled: the 2nd..kth sample's cost against the first."""
    lines = []
    for s in summaries:
        c = s.samples
        if c.reread:
            lines.append(
                f"{s.role_map}: {c.reread} of {c.asked} samples read again a prompt their "
                f"run had asked before: {c.reread_ttft_s:.0f}s of prompt reading, of the "
                f"samples' {c.asked_call_s:.0f}s")
        if c.again:
            lines.append(
                f"{s.role_map}: {c.again} of {c.asked} samples named a line or file, gave it "
                f"no new text and were asked once more for it (that turn {c.again_s.median:.2f}s,"
                f" median): {c.again_changed} then changed the code, {c.again_passed} passed")
        if c.listed:
            lines.append(
                f"{s.role_map}: {c.listed} of {c.asked} samples asked for several corrections "
                f"and {c.listed_passed} passed; {c.further} further corrections were checked "
                f"with no call of their own, {c.further_passed} passed")
        if c.mutants:
            lines.append(
                f"{s.role_map}: {c.mutants} mechanical edits of lines failed one-line samples "
                f"chose were checked in {c.mutant_runs} run(s) (a check "
                f"{c.mutant_check_s.median or 0:.2f}s, median), {c.mutants_passed} passed")
        if not c.attempts or c.first_s.median is None:
            continue
        ttft = ("" if c.first_ttft_s.median is None or c.later_ttft_s.median is None else
                f"; prompt reading (time to first token) {c.first_ttft_s.median:.2f}s then "
                f"{c.later_ttft_s.median:.2f}s")
        cold = ("" if c.cold_later_vs_first.median is None else
                f"; {c.cold_later_vs_first.median:.2f}× over the {c.cold_attempts} whose "
                "sample 1 read its prompt cold")
        if c.again and c.one_turn_vs_first.median is not None:
            cold += (f"; {c.one_turn_vs_first.median:.2f}× with the second turns left out, "
                     "the prompt's first call alone")
        lines.append(
            f"{s.role_map}: best-of-k over {c.attempts} attempt(s): sample 1 "
            f"{c.first_s.median:.2f}s, samples 2..k {c.later_s.median or 0:.2f}s "
            f"({c.later_vs_first.median or 0:.2f}× the first{cold}){ttft}; cached prompt "
            f"tokens in samples 2..k: {_pct(c.later_cached_share)}")
        if c.first_gen_s.median is not None and c.first_ttft_s.median is not None:
            lines.append(
                f"{s.role_map}: sample 1 reads {c.first_ttft_s.median:.2f}s and generates "
                f"{c.first_gen_s.median:.2f}s; samples 2..k "
                + "; ".join(_placed(where, p) for where, p in (
                    ("asking sample 1's very prompt", c.same_place),
                    ("asking a list at its place", c.listed_place),
                    ("at another place", c.other_place)) if p.samples))
    return lines


def _placed(where: str, p: PlaceCost) -> str:
    return (f"{where}: {p.samples}, {p.vs_first.median or 0:.2f}× the first, reading "
            f"{p.ttft_s.median or 0:.2f}s, generating {p.gen_s.median or 0:.2f}s")
