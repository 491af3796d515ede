"""Running a suite: every task under every role map, ``repeat`` times, ``jobs`` runs at a time.

Each run gets a fresh git repository copied from the task, runs through ``orchestrator.api.arun``
with the task's acceptance commands as ``verify.commands``, and is then checked again by the
bench itself (the acceptance commands on the run's final worktree), so a pass means working
code, not a run that says so. A run that raises is recorded as an error and the suite goes on.
Records come back in suite order whatever ``jobs`` is, so results are comparable across it.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import structlog
from rich.console import Console

from orchestrator.api import arun
from orchestrator.benchmark.reach import evict_prompt_caches
from orchestrator.benchmark.records import RunRecord, failed_run
from orchestrator.benchmark.report import BenchReport, build_report, print_report, write_outputs
from orchestrator.benchmark.single import is_single, run_single
from orchestrator.benchmark.spec import RunSpec, check_acceptance
from orchestrator.benchmark.suite import Suite, load_suite, materialize
from orchestrator.config.schema import RoleMap
from orchestrator.errors import UsageError
from orchestrator.record.events import CallFinished
from orchestrator.record.telemetry import Event

RoleMaps = Sequence[tuple[str, RoleMap]]
Progress = Callable[[RunRecord], None]


log = structlog.get_logger("orchestrate.bench")


def plan_runs(suite: Suite, role_maps: RoleMaps, repeat: int) -> list[RunSpec]:
    """Repeat-major, then task, then map: each task's maps run side by side."""
    return [RunSpec(task, name, roles, rep) for rep in range(repeat) for task in suite.tasks
            for name, roles in role_maps]


def _check_names(role_maps: RoleMaps, repeat: int, jobs: int) -> None:
    names = [n for n, _ in role_maps]
    if not names or len(set(names)) != len(names):
        raise UsageError(f"role maps need distinct names (got {names}): rename a file")
    if repeat < 1 or jobs < 1:
        raise UsageError("--repeat and --jobs must be at least 1")


async def arun_bench(
    suite: Suite,
    role_maps: RoleMaps,
    *,
    repeat: int = 1,
    jobs: int = 1,
    out_dir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    keep_repos: bool = False,
    progress: Progress | None = None,
    cold: bool = False,
) -> BenchReport:
    """Run the suite under each ``(name, RoleMap)``; write JSON, CSV (and PNG) to ``out_dir``.
    With ``cold`` (one run at a time) each run starts with its local servers' prompt caches
    emptied (``reach.evict_prompt_caches``): no map reads the prompt the map before it asked."""
    _check_names(role_maps, repeat, jobs)
    if cold and jobs > 1:
        raise UsageError("--cold needs --jobs 1: evicting a server's cache during another "
                         "run would slow that run (use --warm with --jobs)")
    specs = plan_runs(suite, role_maps, repeat)
    workdir = _runs_dir(out_dir, keep_repos)
    gate = asyncio.Semaphore(jobs)
    started = time.time()

    async def one(i: int, spec: RunSpec) -> RunRecord:
        name = f"{i:04d}-{spec.task.name}-{_slug(spec.map_name)}-r{spec.repeat + 1}"
        runner = run_single if is_single(spec.map_name) else run_one
        async with gate:
            if cold and (left := await evict_prompt_caches(
                    spec.roles, os.environ if env is None else env)):
                log.warning("prompt cache not evicted", run=name, servers=left)
            rec = await runner(spec, workdir / name, env=env, keep=keep_repos)
        if progress is not None:
            progress(rec)
        return rec

    try:
        records = await asyncio.gather(*(one(i, s) for i, s in enumerate(specs)))
    finally:
        if not keep_repos:
            await asyncio.to_thread(shutil.rmtree, workdir, True)
    report = build_report(suite, [n for n, _ in role_maps], records, repeat=repeat, jobs=jobs,
                          started=started, repos=str(workdir) if keep_repos else None)
    return write_outputs(report, Path(out_dir)) if out_dir is not None else report


async def run_one(spec: RunSpec, dest: Path, *, env: Mapping[str, str] | None = None,
                  keep: bool = False) -> RunRecord:
    """One run in a fresh copy of the task's repository; never raises for the run's failures."""
    fallbacks: list[int] = []

    def count_fallbacks(event: Event) -> None:
        if isinstance(event, CallFinished) and event.fallback_step > 0:
            fallbacks.append(1)

    where: dict[str, Any] = dict(task=spec.task.name, role_map=spec.map_name, repeat=spec.repeat)
    t0 = time.monotonic()
    try:
        repo = await asyncio.to_thread(materialize, spec.task, dest)
        result = await arun(spec.task.instruction, repo=repo, roles=spec.roles,
                            sets=[acceptance_set(spec.task.acceptance)], env=env,
                            listeners=[count_fallbacks])
        checked = await check_acceptance(
            spec.task, Path(result.run_dir) / "worktree", env, spec.roles.run.command_timeout_s,
            sandbox=spec.roles.sandbox, objects=Path(repo) / ".git" / "objects")
    except Exception as exc:  # a crashed run is a result of the benchmark, not its end
        return failed_run(exc, **where, wall_s=time.monotonic() - t0, fallbacks=len(fallbacks),
                          workdir=str(dest) if keep else "")
    finally:
        if not keep:
            await asyncio.to_thread(shutil.rmtree, dest, True)
    return RunRecord.from_result(result, **where, checked=checked, fallbacks=len(fallbacks),
                                 wall_s=time.monotonic() - t0, workdir=str(dest) if keep else "")


def _runs_dir(out_dir: str | Path | None, keep: bool) -> Path:
    """Where each run's repository goes: kept under ``out_dir/runs`` with ``--keep``."""
    if keep and out_dir is not None:
        runs = Path(out_dir) / "runs"
        runs.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=time.strftime("%Y%m%d-%H%M%S-"), dir=runs))
    return Path(tempfile.mkdtemp(prefix="orchestrate-bench-"))


def _slug(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "-" for c in name)


def acceptance_set(commands: Sequence[str]) -> str:
    """The ``--set`` that makes the task's commands the run's acceptance commands."""
    return "verify.commands=[" + ", ".join(json.dumps(c) for c in commands) + "]"


def run_bench(
    suite: Suite | str | Path,
    role_maps: RoleMaps,
    *,
    repeat: int = 1,
    jobs: int = 1,
    out_dir: str | Path | None = None,
    env: Mapping[str, str] | None = None,
    keep_repos: bool = False,
    progress: Progress | None = None,
    console: Console | None = None,
    cold: bool = False,
) -> BenchReport:
    """Synchronous :func:`arun_bench`; ``suite`` may be a path or ``"builtin"``. With a rich
    ``console`` the tables and the comparisons are printed as well."""
    if not isinstance(suite, Suite):
        suite = load_suite(suite)
    report = asyncio.run(arun_bench(suite, role_maps, repeat=repeat, jobs=jobs, out_dir=out_dir,
                                    env=env, keep_repos=keep_repos, progress=progress,
                                    cold=cold))
    if console is not None:
        print_report(report, console)
    return report
