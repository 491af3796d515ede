"""``orchestrate bench`` in one call, for the CLI: load the suite and the role maps, start the
bench simulator when asked (``sim=True``; the packaged simulated maps are then the default),
run, print the tables and comparisons (or the report as JSON) and return the exit code. A task
suite measures time to working code; an explore suite (``explore.toml``, e.g. the built-in
``builtin-explore``) measures explorer models' truthfulness.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from rich.console import Console

from orchestrator.benchmark.explore_report import ExploreRecord, ExploreReport, print_explore_report
from orchestrator.benchmark.explore_runner import arun_explore_bench
from orchestrator.benchmark.explore_suite import is_explore_suite, load_explore_suite
from orchestrator.benchmark.reach import require_servers
from orchestrator.benchmark.report import BenchReport, print_report
from orchestrator.benchmark.runner import run_bench
from orchestrator.benchmark.simulator import SIM_MAPS, BenchSimulator, load_role_map
from orchestrator.benchmark.suite import load_suite
from orchestrator.errors import UsageError

DEFAULT_OUT = Path("bench-results")


def bench_main(
    suite: str | os.PathLike[str],
    role_files: Sequence[str | os.PathLike[str]] = (),
    *,
    repeat: int = 1,
    jobs: int = 1,
    out: str | os.PathLike[str] | None = None,
    as_json: bool = False,
    sim: bool = False,
    tasks: Sequence[str] = (),
    keep: bool = False,
    env: Mapping[str, str] | None = None,
    console: Console | None = None,
    cold: bool = True,
) -> int:
    """Run the bench and print it; 0 when every run ran (a failed run is a result), 1 when a run
    erred (it could not be run: no model answered, a configuration the harness refused). A
    local server no one answers at stops the bench before its runs (``reach``). With ``cold``
    (the default; not with the simulator, whose scripts a request would use up) each run starts
    with its local servers' prompt caches emptied when runs go one at a time."""
    console = console or Console()
    files = list(role_files) or (list(SIM_MAPS) if sim else [])
    if len(files) < 1:
        raise UsageError("name at least one role map: --roles A.toml [--roles B.toml] (or --sim)")
    if is_explore_suite(suite):
        return _explore(suite, files, repeat=repeat, jobs=jobs, out=out, as_json=as_json,
                        sim=sim, questions=tasks, env=env, console=console, keep=keep)
    loaded = load_suite(suite).select(list(tasks))
    with BenchSimulator(loaded) if sim else contextlib.nullcontext() as simulator:
        url = simulator.base_url if simulator else None
        maps = [load_role_map(f, sim_url=url) for f in files]
        if not simulator:
            require_servers(maps, os.environ if env is None else env)
        run_env = simulator.env(env) if simulator else env
        progress = None if as_json else _progress(console)
        report = run_bench(loaded, maps, repeat=repeat, jobs=jobs, env=run_env,
                           out_dir=Path(out) if out else DEFAULT_OUT, progress=progress,
                           keep_repos=keep, cold=cold and not simulator and jobs == 1)
    _emit(report, console, as_json)
    return _errored([r.outcome for r in report.records], console, quiet=as_json)


def _explore(suite: str | os.PathLike[str], files: Sequence[str | os.PathLike[str]], *,
             repeat: int, jobs: int, out: str | os.PathLike[str] | None, as_json: bool, sim: bool,
             questions: Sequence[str], env: Mapping[str, str] | None, console: Console,
             keep: bool = False) -> int:
    loaded = load_explore_suite(suite).select(list(questions))
    with BenchSimulator(None) if sim else contextlib.nullcontext() as simulator:
        url = simulator.base_url if simulator else None
        maps = [load_role_map(f, sim_url=url) for f in files]
        if not simulator:
            require_servers(maps, os.environ if env is None else env)
        run_env = simulator.env(env) if simulator else env
        report: ExploreReport = asyncio.run(arun_explore_bench(
            loaded, maps, repeat=repeat, jobs=jobs, env=run_env,
            out_dir=Path(out) if out else DEFAULT_OUT, keep=keep,
            progress=None if as_json else _explore_progress(console)))
    if as_json:
        console.print_json(report.model_dump_json())
    else:
        print_explore_report(report, console)
    return _errored([r.outcome for r in report.records], console, quiet=as_json)


def _errored(outcomes: Sequence[str], console: Console, *, quiet: bool) -> int:
    """The bench's exit status: 1 when any run erred (it says how many), else 0."""
    errors = outcomes.count("error")
    if not errors:
        return 0
    if not quiet:
        console.print(f"{errors} of {len(outcomes)} run(s) erred (see their errors above); "
                      "exit 1", highlight=False, markup=False)
    return 1


def _explore_progress(console: Console):
    def show(rec: ExploreRecord) -> None:
        mark = {"answered": "ok", "unanswered": "miss", "error": "ERROR"}[rec.outcome]
        found = {True: " candidates hit", False: " candidates missed", None: ""}[rec.candidate_hit]
        console.print(f"  {mark:5} {rec.question} [{rec.role_map} · {rec.model} #{rec.repeat + 1}] "
                      f"{rec.wall_s:.1f}s claims {rec.claims.verified}/{rec.claims.submitted}"
                      f" tools {rec.tool_calls}{found}"
                      + (f"  {rec.error[:100]}" if rec.error else ""),
                      highlight=False, markup=False)

    return show


def _progress(console: Console):
    def show(rec) -> None:
        mark = {"passed": "pass", "failed": "FAIL", "error": "ERROR"}[rec.outcome]
        console.print(f"  {mark:5} {rec.task} [{rec.role_map} #{rec.repeat + 1}] "
                      f"{rec.wall_s:.2f}s" + (f"  {rec.error[:100]}" if rec.error else ""),
                      highlight=False, markup=False)

    return show


def _emit(report: BenchReport, console: Console, as_json: bool) -> None:
    if as_json:
        console.print_json(report.model_dump_json())
    else:
        print_report(report, console)
