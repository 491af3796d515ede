"""Running an explore suite: every question under every role map, ``repeat`` times.

The suite's repository is copied once into a fresh git repository (explorers only read). Each
question goes to ``orchestrator.api.aexplore`` without the planner (``split=False``), so one
explorer answers it as asked and its model alone is measured. A question counts as answered
when a verified claim's supporting quote lies in one of the suite's answer ranges; the quote's
own lines are located inside the citation, so citing a whole file does not count. A run that
raises is recorded as an error and the suite goes on.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from orchestrator.api import aexplore
from orchestrator.benchmark.explore_report import (
    ExploreRecord,
    ExploreReport,
    build_report,
    write_outputs,
)
from orchestrator.benchmark.explore_suite import ExploreSuite, Question
from orchestrator.config.layers import resolve_setup
from orchestrator.config.pipeline import pipeline_of
from orchestrator.config.schema import RoleMap
from orchestrator.errors import ConfigError, UsageError
from orchestrator.evidence.claimstats import ClaimStats, of_result
from orchestrator.evidence.verify import DirSource, locate_quote
from orchestrator.results import ExploreResult
from orchestrator.state import RoleUsage

RoleMaps = Sequence[tuple[str, RoleMap]]
Progress = Callable[[ExploreRecord], None]


def in_range(question: Question, src: DirSource, result: ExploreResult) -> str:
    """The first verified citation whose quote lies in an answer range ("" when none does)."""
    for explorer in result.explorers:
        for claim in explorer.claims:
            for c in claim.citations:
                where = locate_quote(src, c)
                if where and any(a.overlaps(c.path, *where) for a in question.answers):
                    return f"{c.path.removeprefix('./')}:{where[0]}-{where[1]}"
    return ""


def explore_role(roles: RoleMap, repo: Path, env: Mapping[str, str] | None = None) -> str:
    """The role map's explore role as a run in ``repo`` finds it: by its kind, not its name."""
    role_map, registry, _ = resolve_setup(repo, roles, env=os.environ if env is None else env)
    role = pipeline_of(role_map, registry, need_build=False).explore
    if role is None:
        raise ConfigError("[pipeline] steps: the explore bench needs an explore role")
    return role


def _record(question: Question, map_name: str, roles: RoleMap, role: str, repeat: int,
            result: ExploreResult, src: DirSource, wall_s: float) -> ExploreRecord:
    explorers = result.explorers
    claims = ClaimStats()
    for e in explorers:
        claims = claims + of_result(e)
    usage = result.per_role.get(role) or RoleUsage()
    model = next((e.model for e in explorers if e.model), "") or roles.model_for(role).id
    errors = "; ".join(e.error for e in explorers if e.error)
    hit = in_range(question, src, result)
    candidates = tuple(c for e in explorers for c in e.candidates)
    verified_at = [e.wall_s for e in explorers if e.verified]
    return ExploreRecord(
        question=question.id, role_map=map_name, repeat=repeat, model=model,
        outcome="answered" if hit else ("error" if errors and not claims.verified else "unanswered"),
        answered_by=hit, claims=claims, wall_s=result.time_split.get("wall_s", wall_s),
        first_verified_s=min(verified_at) if verified_at else None,
        tool_calls=sum(e.tool_calls for e in explorers), candidates=candidates,
        candidate_hit=_held(question, candidates) if candidates else None,
        run_dir=str(result.run_dir or ""),
        tokens=usage.prompt_tokens + usage.output_tokens,
        calls=usage.calls, cost_usd=result.cost_usd, error=errors or None,
        answer=" ".join(e.answer for e in explorers)[:500],
        cited=tuple(f"{c.path}:{c.start_line}-{c.end_line}" for e in explorers for cl in e.claims
                    for c in cl.citations),
        reasons=tuple(r for e in explorers for r in e.drop_reasons)[:10],
        verdicts=tuple(v for e in explorers for v in e.verdicts),
    )


def _held(question: Question, candidates: tuple[str, ...]) -> bool:
    """Whether a candidate window (``path:start-end``) holds an answer range."""
    for where in candidates:
        path, _, lines = where.rpartition(":")
        start, _, end = lines.partition("-")
        if start.isdigit() and end.isdigit() and any(
                a.overlaps(path, int(start), int(end)) for a in question.answers):
            return True
    return False


async def ask_one(question: Question, map_name: str, roles: RoleMap, repeat: int, repo: Path,
                  *, env: Mapping[str, str] | None = None) -> ExploreRecord:
    """One question under one role map; never raises for the run's own failures."""
    t0 = time.monotonic()
    role = None
    try:
        role = await asyncio.to_thread(explore_role, roles, repo, env)
        result = await aexplore(question.question, repo=repo, roles=roles, env=env, split=False)
    except Exception as exc:  # a crashed run is a result of the benchmark, not its end
        message = f"{type(exc).__name__}: {exc}".strip()[:2000]
        return ExploreRecord(question=question.id, role_map=map_name, repeat=repeat,
                             model=roles.model_for(role).id if role else "", outcome="error",
                             error=message, wall_s=time.monotonic() - t0)
    return await asyncio.to_thread(_record, question, map_name, roles, role, repeat, result,
                                   DirSource(repo), time.monotonic() - t0)


async def arun_explore_bench(
    suite: ExploreSuite,
    role_maps: RoleMaps,
    *,
    repeat: int = 1,
    jobs: int = 1,
    out_dir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    progress: Progress | None = None,
    keep: bool = False,
) -> ExploreReport:
    """Ask every question under each ``(name, RoleMap)``; write JSON and CSV to ``out_dir``;
    with ``keep`` the repository and every run's record stay under ``out_dir/runs``."""
    names = [n for n, _ in role_maps]
    if not names or len(set(names)) != len(names):
        raise UsageError(f"role maps need distinct names (got {names}): rename a file")
    if repeat < 1 or jobs < 1:
        raise UsageError("--repeat and --jobs must be at least 1")
    if keep and out_dir is None:
        raise UsageError("--keep needs --out: the runs are kept under OUT/runs")
    workdir = (Path(out_dir) / "runs" / time.strftime("%Y%m%d-%H%M%S")
               if keep and out_dir is not None
               else Path(tempfile.mkdtemp(prefix="orchestrate-explore-bench-")))
    workdir.mkdir(parents=True, exist_ok=True)
    gate = asyncio.Semaphore(jobs)
    started = time.time()

    async def one(question: Question, name: str, roles: RoleMap, rep: int) -> ExploreRecord:
        async with gate:
            rec = await ask_one(question, name, roles, rep, repo, env=env)
        if progress is not None:
            progress(rec)
        return rec

    try:
        repo = await asyncio.to_thread(suite.materialize, workdir / suite.name)
        records = await asyncio.gather(*(one(q, name, roles, rep) for rep in range(repeat)
                                         for q in suite.questions for name, roles in role_maps))
    finally:
        if not keep:
            await asyncio.to_thread(shutil.rmtree, workdir, True)
    report = build_report(suite, names, records, repeat=repeat, jobs=jobs, started=started)
    return write_outputs(report, Path(out_dir)) if out_dir is not None else report
