"""What the explore bench measures, and its printed form.

One ``ExploreRecord`` per (question, role map, repeat): whether a verified claim cites a line
range the suite gives for the answer, the claims submitted, verified and dropped (and why),
wall time and tokens. ``summarize`` groups them per role map and explorer model, so a team can
choose its explorer model by measured truthfulness next to its speed. Files: ``explore.json``
and ``explore.csv`` (one row per record).
"""

from __future__ import annotations

import csv
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field
from rich.console import Console
from rich.table import Table

from orchestrator.benchmark.compare import Spread, spread
from orchestrator.benchmark.report import machine
from orchestrator.evidence.claimstats import ClaimStats
from orchestrator.state import DROP_KINDS, ClaimVerdict

JSON_FILE, CSV_FILE = "explore.json", "explore.csv"
ANSWERED = ("answered: a verified claim whose supporting quote lies in a line range the suite "
            "gives for the answer")


class ExploreRecord(BaseModel):
    """One question asked once under one role map."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    question: str
    role_map: str
    repeat: int
    model: str = Field("", description="The explorer model that served (else the configured one).")
    outcome: Literal["answered", "unanswered", "error"]
    answered_by: str = ""
    claims: ClaimStats = Field(default_factory=ClaimStats)
    wall_s: float = 0.0
    first_verified_s: float | None = Field(
        None, description="From the start to the first explorer whose claims verified.")
    tool_calls: int = 0
    candidates: tuple[str, ...] = Field((), description="The windows the explorers were shown.")
    candidate_hit: bool | None = Field(
        None, description="A candidate window held an answer range (None: none was shown).")
    run_dir: str = Field("", description="The run's record (kept with --keep).")
    tokens: int = Field(0, description="Explorer prompt + output tokens.")
    calls: int = 0
    cost_usd: float = 0.0
    error: str | None = None
    answer: str = ""
    cited: tuple[str, ...] = ()
    reasons: tuple[str, ...] = ()
    verdicts: tuple[ClaimVerdict, ...] = Field((), description="Every claim's verdict and why.")

    @property
    def answered(self) -> bool:
        return self.outcome == "answered"


class ExploreSummary(BaseModel):
    """One explorer model under one role map, over the suite's questions and repeats."""

    model_config = ConfigDict(frozen=True)

    role_map: str
    model: str
    asked: int
    answered: int
    errors: int
    answered_by_repeat: Spread
    claims: ClaimStats
    wall_s: Spread
    first_verified_s: Spread
    candidate_hits: int = 0
    shown: int = Field(0, description="Questions whose explorers were shown candidates.")
    tokens_per_question: float
    cost_usd: float


class ExploreReport(BaseModel):
    """Everything one explore bench measured."""

    model_config = ConfigDict(frozen=True)

    kind: Literal["explore"] = "explore"
    suite: str
    source: str = ""
    license: str = ""
    questions: tuple[str, ...]
    role_maps: tuple[str, ...]
    repeat: int
    jobs: int
    started: float
    machine: dict[str, str]
    records: tuple[ExploreRecord, ...]
    summaries: tuple[ExploreSummary, ...]
    files: dict[str, str] = Field(default_factory=dict)
    notes: tuple[str, ...] = ()


def summarize(records: Sequence[ExploreRecord], role_map: str, model: str) -> ExploreSummary:
    mine = [r for r in records if r.role_map == role_map and r.model == model]
    total = ClaimStats()
    for r in mine:
        total = total + r.claims
    by_repeat: dict[int, list[ExploreRecord]] = {}
    for r in mine:
        by_repeat.setdefault(r.repeat, []).append(r)
    return ExploreSummary(
        role_map=role_map, model=model, asked=len(mine), answered=sum(r.answered for r in mine),
        errors=sum(r.outcome == "error" for r in mine),
        answered_by_repeat=spread(sum(r.answered for r in rs) / len(rs) for rs in by_repeat.values()),
        claims=total, wall_s=spread(r.wall_s for r in mine),
        first_verified_s=spread(r.first_verified_s for r in mine if r.first_verified_s is not None),
        candidate_hits=sum(bool(r.candidate_hit) for r in mine),
        shown=sum(r.candidate_hit is not None for r in mine),
        tokens_per_question=statistics.fmean(r.tokens for r in mine) if mine else 0.0,
        cost_usd=sum(r.cost_usd for r in mine),
    )


def build_report(suite: Any, order: Sequence[str], records: Sequence[ExploreRecord], *,
                 repeat: int, jobs: int, started: float) -> ExploreReport:
    rank = {q.id: i for i, q in enumerate(suite.questions)}
    maps = {n: i for i, n in enumerate(order)}
    ordered = sorted(records, key=lambda r: (maps[r.role_map], rank[r.question], r.repeat))
    pairs = list(dict.fromkeys((r.role_map, r.model) for r in ordered))
    return ExploreReport(
        suite=suite.name, source=suite.source, license=suite.license, questions=tuple(rank),
        role_maps=tuple(order), repeat=repeat, jobs=jobs, started=started, machine=machine(),
        records=tuple(ordered), summaries=tuple(summarize(ordered, m, model) for m, model in pairs))


def csv_row(rec: ExploreRecord) -> dict[str, Any]:
    row = rec.model_dump(exclude={"claims", "cited", "reasons", "verdicts", "candidates"})
    row["candidates"] = " ".join(rec.candidates)
    row.update({k: getattr(rec.claims, k) for k in ("submitted", "verified", "adds_nothing",
                                                     "dropped", *DROP_KINDS)})
    row["cited"] = " ".join(rec.cited)
    return row


def write_outputs(report: ExploreReport, out_dir: Path) -> ExploreReport:
    """``explore.csv`` and ``explore.json`` in ``out_dir``; the report names its files."""
    out_dir.mkdir(parents=True, exist_ok=True)
    rows = [csv_row(r) for r in report.records]
    with (out_dir / CSV_FILE).open("w", newline="", encoding="utf-8") as fh:
        writer = csv.DictWriter(fh, fieldnames=list(rows[0]) if rows else ["question"])
        writer.writeheader()
        writer.writerows(rows)
    files = {"csv": str(out_dir / CSV_FILE), "json": str(out_dir / JSON_FILE)}
    report = report.model_copy(update={"files": files})
    (out_dir / JSON_FILE).write_text(report.model_dump_json(indent=2), encoding="utf-8")
    return report


# --- printing ------------------------------------------------------------------------------------


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def _drops(stats: ClaimStats) -> str:
    return ", ".join(f"{k} {getattr(stats, k)}" for k in DROP_KINDS if getattr(stats, k)) or "-"


def question_table(report: ExploreReport, role_map: str) -> Table:
    """One row per question: answered in how many repeats, what it cited, claims and why dropped."""
    table = Table(title=f"{role_map}: {report.suite}, {report.repeat} repeat(s)",
                  title_justify="left")
    for col in ("question", "answered", "cited in range", "claims v/s", "dropped because",
                "candidates", "tools", "wall", "tokens"):
        table.add_column(col, justify="right" if col in ("wall", "tokens", "tools") else "left")
    for qid in report.questions:
        runs = [r for r in report.records if r.role_map == role_map and r.question == qid]
        if not runs:
            continue
        total = ClaimStats()
        for r in runs:
            total = total + r.claims
        errors = "; ".join(sorted({(r.error or "")[:60] for r in runs} - {""}))
        table.add_row(
            qid, f"{sum(r.answered for r in runs)}/{len(runs)}",
            ", ".join(sorted({r.answered_by for r in runs} - {""})) or "-",
            f"{total.verified}/{total.submitted}", errors or _drops(total),
            _hits(runs), str(sum(r.tool_calls for r in runs)),
            f"{statistics.median(r.wall_s for r in runs):.1f}s",
            str(sum(r.tokens for r in runs) // len(runs)))
    return table


def _hits(runs: Sequence[ExploreRecord]) -> str:
    shown = [r for r in runs if r.candidate_hit is not None]
    return f"{sum(bool(r.candidate_hit) for r in shown)}/{len(shown)} hit" if shown else "-"


def summary_table(report: ExploreReport) -> Table:
    """One row per role map and explorer model: truthfulness first, then time and tokens."""
    table = Table(title="Explorer models", title_justify="left")
    for col in ("role map", "model", "answered", "claims", "verified", "bad path", "misquoted",
                "unsupported", "candidates hit", "wall/question", "first verified",
                "tokens/question"):
        table.add_column(col, justify="left" if col in ("role map", "model") else "right",
                         overflow="fold")
    for s in report.summaries:
        c, n = s.claims, s.claims.submitted
        table.add_row(
            s.role_map, s.model, f"{s.answered}/{s.asked}" + (f" ({s.errors} errors)" if s.errors else ""),
            str(n), f"{c.verified} {_pct(c.verified, n)}", f"{c.path} {_pct(c.path, n)}",
            f"{c.quote} {_pct(c.quote, n)}",
            f"{c.trivial + c.unrelated} {_pct(c.trivial + c.unrelated, n)}",
            f"{s.candidate_hits}/{s.shown}" if s.shown else "-",
            "-" if s.wall_s.median is None else f"{s.wall_s.median:.1f}s",
            "-" if s.first_verified_s.median is None else f"{s.first_verified_s.median:.1f}s",
            f"{s.tokens_per_question:.0f}")
    return table


def print_explore_report(report: ExploreReport, console: Console | None = None) -> None:
    console = console or Console()
    for name in report.role_maps:
        console.print(question_table(report, name))
    console.print(summary_table(report))
    console.print(ANSWERED + "; unsupported: the quote exists but is trivial or shares no name "
                  "with its claim; candidates hit: a candidate window shown before the first "
                  "call held an answer range; first verified: median time to the first "
                  "explorer whose claims verified.", highlight=False, markup=False)
    if report.source:
        console.print(f"suite code: {report.source} ({report.license})", highlight=False,
                      markup=False)
    for note in report.notes:
        console.print(f"note: {note}", highlight=False, markup=False)
    m = report.machine
    console.print(f"machine: {m['platform']}, {m['cpus']} CPU(s), Python {m['python']}; "
                  f"jobs={report.jobs}; started "
                  f"{time.strftime('%Y-%m-%d %H:%M', time.localtime(report.started))}",
                  highlight=False, markup=False)
    for kind, path in report.files.items():
        console.print(f"{kind}: {path}", highlight=False, markup=False)
