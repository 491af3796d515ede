"""What the 2nd..kth best-of-k one-shot sample costs against the first (issue 27).

Builds the one-shot prompt of a failing task once (the demo's ``median`` bug, or ``--repo`` and
``--command``), exactly as a first build attempt does (``oneshot.messages``: the task, the
pinned files whole, the tests), then sends it ``--k`` times to the build role's model, one after
another, at the role's temperatures, the messages byte for byte the same each time. Prints per
sample: wall time, time to first token (prompt reading; the rest is generation), prompt and
cached tokens, and the 2nd..kth against the first. The target on llama.cpp: samples 2..k cost
<= 60 % of the first's wall time (the shared prefix is not read again).

    python bench/samples.py                          # the simulator (tokens only: it has no prefill)
    python bench/samples.py --roles live-routed --k 3  # a live map (its servers running)
    python bench/samples.py --roles my.toml --repo PATH --command "pytest -q" [--json out.json]

``--suite live`` does it for each task of a suite whose failure pins files (``--only NAME``,
repeatable, picks some), the servers' prompt caches emptied before each task's first sample,
each reply also written into a fresh copy of the task's repository and checked by its
acceptance commands; it prints the figures per task, then the medians over the tasks.

    python bench/samples.py --roles live-routed --k 3 --suite live --json out.json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
from pathlib import Path
from typing import Any

from demokit import demo_env, demo_roles
from first_prompt import localized, variant_messages, verdict
from simproc import simulator

from orchestrator.benchmark.reach import evict_prompt_caches
from orchestrator.benchmark.simulator import load_role_map
from orchestrator.benchmark.suite import Task, load_suite, materialize
from orchestrator.config.prompts import text
from orchestrator.engine.oneshot import messages, shown_files
from orchestrator.engine.race import temperature_of
from orchestrator.faces.demo import DEMO_TASK, demo_scenario, make_sample_repo, test_command
from orchestrator.models.pool import ClientPool
from orchestrator.sim.scenario import CacheSpec


def _prompt(repo: Path, command: str, task: str) -> list[dict[str, str]]:
    loc = localized(repo, [command])
    shown = shown_files(repo, loc)
    if shown is None:
        raise SystemExit("the failure pins no file small enough to show whole: no one-shot")
    return messages(system=text("oneshot", "system"), task=task, loc=loc, shown=shown,
                    commands=[command], first=True)


async def _samples(roles: Any, env: dict[str, str], role: str, prompt: list[dict[str, str]],
                   k: int, pool: ClientPool | None = None) -> list[dict[str, Any]]:
    own = pool is None
    pool = pool or ClientPool(roles, env)
    out = []
    try:
        for i in range(1, k + 1):
            temperature = temperature_of(roles.roles[role].temperatures, i)
            client = pool.for_role(role, temperature=temperature)
            done = await client.complete(prompt, session=f"{role}-1-c{i}")
            r = done.record
            out.append({"sample": i, "temperature": temperature, "wall_s": r.duration_s,
                        "ttft_s": r.ttft_s, "prompt_tokens": r.prompt_tokens,
                        "cached_tokens": r.cached_tokens, "output_tokens": r.output_tokens,
                        "reply": done.content or ""})
    finally:
        if own:
            await pool.aclose()
    return out


async def _suite(roles: Any, role: str, tasks: list[Task], k: int, tmp: Path
                 ) -> list[dict[str, Any]]:
    """Per task whose failure pins files: its one-shot prompt sampled ``k`` times (caches
    emptied first), each reply checked in a fresh copy of its repository."""
    env = dict(os.environ)
    pool = ClientPool(roles, env)
    out = []
    try:
        for task in tasks:
            repo = materialize(task, tmp / f"{task.name}-preflight")
            loc = await asyncio.to_thread(localized, repo, task.acceptance)
            shown = shown_files(repo, loc)
            if shown is None:
                print(f"{task.name:22} skipped: the failure pins no file", flush=True)
                continue
            prompt, names = variant_messages("plain", task, repo, loc, shown)
            await evict_prompt_caches(roles, env)
            rows = await _samples(roles, env, role, prompt, k, pool)
            for row in rows:
                changed, passed = await verdict(roles, task, row["reply"], names,
                                                tmp / f"{task.name}-{row['sample']}")
                row.update(changed=changed, passed=passed)
            summary = {"task": task.name, **_report(rows)}
            out.append(summary)
            _print(summary, task.name)
    finally:
        await pool.aclose()
    return out


def _over_tasks(tasks: list[dict[str, Any]]) -> dict[str, Any]:
    """The medians over the tasks: sample 1's and samples 2..k's reading and generation, and
    each task's samples 2..k against its sample 1."""
    def med(values: list[float]) -> float | None:
        return statistics.median(values) if values else None

    def parts(rows: list[dict[str, Any]]) -> tuple[list[float], list[float]]:
        timed = [r for r in rows if r["ttft_s"] is not None]
        return [r["ttft_s"] for r in timed], [r["wall_s"] - r["ttft_s"] for r in timed]

    firsts = [t["samples"][0] for t in tasks]
    later = [r for t in tasks for r in t["samples"][1:]]
    (read1, gen1), (read2, gen2) = parts(firsts), parts(later)
    ratios = [t["later_vs_first_wall"] for t in tasks if "later_vs_first_wall" in t]
    prompt = sum(r["prompt_tokens"] for r in later)
    return {"tasks": len(tasks), "later_vs_first_wall": med(ratios),
            "first_wall_s": med([r["wall_s"] for r in firsts]),
            "later_wall_s": med([r["wall_s"] for r in later]),
            "first_reading_s": med(read1), "first_generating_s": med(gen1),
            "later_reading_s": med(read2), "later_generating_s": med(gen2),
            "later_cached_share": sum(r["cached_tokens"] for r in later) / prompt
            if prompt else None,
            "passed_first": sum(t["samples"][0].get("passed", False) for t in tasks),
            "passed_any": sum(any(r.get("passed") for r in t["samples"]) for t in tasks)}


def _print_over(over: dict[str, Any], k: int) -> None:
    def s(v: float | None) -> str:
        return "-" if v is None else f"{v:.2f}s"

    print(f"\nover {over['tasks']} task(s): sample 1 {s(over['first_wall_s'])} (reading "
          f"{s(over['first_reading_s'])}, generating {s(over['first_generating_s'])}); samples "
          f"2..{k} {s(over['later_wall_s'])} (reading {s(over['later_reading_s'])}, generating "
          f"{s(over['later_generating_s'])}), medians")
    if over["later_vs_first_wall"] is not None:
        print(f"samples 2..k / sample 1, wall time, median over the tasks: "
              f"{over['later_vs_first_wall']:.2f} (target <= 0.60 on llama.cpp)")
    if over["later_cached_share"] is not None:
        print(f"cached share of samples 2..k's prompt tokens: {over['later_cached_share']:.0%}")
    print(f"passed: sample 1 {over['passed_first']}/{over['tasks']}, any of {k} "
          f"{over['passed_any']}/{over['tasks']}; load average {os.getloadavg()[0]:.1f}")


def _report(rows: list[dict[str, Any]]) -> dict[str, Any]:
    first, later = rows[0], rows[1:]
    summary: dict[str, Any] = {"samples": rows}
    if later and first["wall_s"]:
        summary["later_vs_first_wall"] = statistics.median(r["wall_s"] for r in later) / \
            first["wall_s"]
        ttfts = [r["ttft_s"] for r in later if r["ttft_s"] is not None]
        if ttfts and first["ttft_s"]:
            summary["later_vs_first_prompt_reading"] = statistics.median(ttfts) / first["ttft_s"]
        prompt = sum(r["prompt_tokens"] for r in later)
        summary["later_cached_share"] = (sum(r["cached_tokens"] for r in later) / prompt
                                         if prompt else None)
    return summary


def _print(summary: dict[str, Any], title: str = "") -> None:
    if title:
        print(f"\n{title}")
    print(f"{'sample':>6} {'temp':>5} {'wall s':>8} {'read s':>8} {'gen s':>8} {'prompt':>7} "
          f"{'cached':>7} {'output':>7}" + (" passed" if title else ""))
    for r in summary["samples"]:
        ttft = r["ttft_s"]
        gen = r["wall_s"] - ttft if ttft is not None else None
        print(f"{r['sample']:>6} {r['temperature'] if r['temperature'] is not None else '-':>5} "
              f"{r['wall_s']:>8.2f} {ttft if ttft is not None else float('nan'):>8.2f} "
              f"{gen if gen is not None else float('nan'):>8.2f} {r['prompt_tokens']:>7} "
              f"{r['cached_tokens']:>7} {r['output_tokens']:>7}"
              + (f" {r.get('passed')!s:>6}" if title else ""), flush=True)
    if "later_vs_first_wall" in summary:
        print(f"samples 2..k / sample 1, wall time: {summary['later_vs_first_wall']:.2f} "
              "(target <= 0.60 on llama.cpp)")
    if "later_vs_first_prompt_reading" in summary:
        print(f"samples 2..k / sample 1, prompt reading: "
              f"{summary['later_vs_first_prompt_reading']:.2f}")
    if summary.get("later_cached_share") is not None:
        print(f"cached share of samples 2..k's prompt tokens: {summary['later_cached_share']:.0%}")
    print(f"load average {os.getloadavg()[0]:.1f}")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--roles", help="a role map (packaged name or file); default: the simulator")
    ap.add_argument("--role", default="builder")
    ap.add_argument("--k", type=int, default=3)
    ap.add_argument("--repo", type=Path, help="a repository with a failing command (default: "
                    "the demo's)")
    ap.add_argument("--command", help="its acceptance command")
    ap.add_argument("--task", default=DEMO_TASK)
    ap.add_argument("--suite", help="each task of this suite whose failure pins files "
                    "(a live map only)")
    ap.add_argument("--only", action="append", default=[], metavar="NAME",
                    help="with --suite: only this task (repeatable)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    if args.suite:
        if not args.roles:
            raise SystemExit("--suite needs --roles: a live role map (the simulator's demo "
                             "scenario answers the demo task only)")
        _, roles = load_role_map(args.roles)
        suite = load_suite(args.suite)
        tasks = [t for t in suite.tasks if not args.only or t.name in args.only]
        if unknown := sorted(set(args.only) - {t.name for t in suite.tasks}):
            raise SystemExit(f"--only {', '.join(unknown)}: not in suite {args.suite}")
        with tempfile.TemporaryDirectory() as tmp:
            per_task = asyncio.run(_suite(roles, args.role, tasks, args.k, Path(tmp)))
        over = _over_tasks(per_task)
        _print_over(over, args.k)
        if args.json:
            args.json.write_text(json.dumps({"over": over, "tasks": per_task}, indent=2),
                                 encoding="utf-8")
        return
    with tempfile.TemporaryDirectory() as tmp:
        repo = args.repo or make_sample_repo(Path(tmp) / "repo")
        prompt = _prompt(repo, args.command or test_command(), args.task)
        if args.roles:
            _, roles = load_role_map(args.roles)
            rows = asyncio.run(_samples(roles, dict(os.environ), args.role, prompt, args.k))
        else:
            scenario = demo_scenario()
            scenario = scenario.model_copy(update={"cache": CacheSpec(min_tokens=0, block=1)})
            with simulator(scenario, "process") as sim:
                rows = asyncio.run(_samples(demo_roles(sim.base_url), demo_env(), args.role,
                                            prompt, args.k))
    summary = _report(rows)
    _print(summary)
    if args.json:
        args.json.write_text(json.dumps(summary, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
