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
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import subprocess
import tempfile
from pathlib import Path
from typing import Any

from demokit import demo_env, demo_roles
from simproc import simulator

from orchestrator.benchmark.simulator import load_role_map
from orchestrator.config.prompts import text
from orchestrator.engine.oneshot import messages, shown_files
from orchestrator.engine.preflight import localize_worktree
from orchestrator.engine.race import temperature_of
from orchestrator.faces.demo import DEMO_TASK, demo_scenario, make_sample_repo, test_command
from orchestrator.localize.localization import Check
from orchestrator.models.pool import ClientPool
from orchestrator.sim.scenario import CacheSpec


def _prompt(repo: Path, command: str, task: str) -> list[dict[str, str]]:
    done = subprocess.run(command, shell=True, cwd=repo, capture_output=True, text=True,
                          check=False, timeout=600)
    loc = localize_worktree(repo, [Check(command=command, exit_code=done.returncode,
                                         output=(done.stdout + done.stderr)[-8000:])])
    shown = shown_files(repo, loc)
    if shown is None:
        raise SystemExit("the failure pins no file small enough to show whole: no one-shot")
    return messages(system=text("oneshot", "system"), task=task, loc=loc, shown=shown,
                    commands=[command], first=True)


async def _samples(roles: Any, env: dict[str, str], role: str, prompt: list[dict[str, str]],
                   k: int) -> list[dict[str, Any]]:
    pool = ClientPool(roles, env)
    out = []
    try:
        for i in range(1, k + 1):
            temperature = temperature_of(roles.roles[role].temperatures, i)
            client = pool.for_role(role, temperature=temperature)
            done = await client.complete(prompt, session=f"{role}-1-c{i}")
            r = done.record
            out.append({"sample": i, "temperature": temperature, "wall_s": r.duration_s,
                        "ttft_s": r.ttft_s, "prompt_tokens": r.prompt_tokens,
                        "cached_tokens": r.cached_tokens, "output_tokens": r.output_tokens})
    finally:
        await pool.aclose()
    return out


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


def _print(summary: dict[str, Any]) -> None:
    print(f"{'sample':>6} {'temp':>5} {'wall s':>8} {'read s':>8} {'gen s':>8} {'prompt':>7} "
          f"{'cached':>7} {'output':>7}")
    for r in summary["samples"]:
        ttft = r["ttft_s"]
        gen = r["wall_s"] - ttft if ttft is not None else None
        print(f"{r['sample']:>6} {r['temperature'] if r['temperature'] is not None else '-':>5} "
              f"{r['wall_s']:>8.2f} {ttft if ttft is not None else float('nan'):>8.2f} "
              f"{gen if gen is not None else float('nan'):>8.2f} {r['prompt_tokens']:>7} "
              f"{r['cached_tokens']:>7} {r['output_tokens']:>7}")
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
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
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
