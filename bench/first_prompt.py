"""Which first one-shot prompt a build model fixes most with (issue 27): each variant sent once
per task at the role's first temperature, the reply written into a fresh copy of the task's
repository through the edit tools and checked by the task's acceptance commands (sandboxed).

Variants, all built by the engine's own functions from the preflight's localisation:
  plain    the first one-shot as it is asked now: task, commands, pinned files, tests
  failure  the same with what the commands print (the later one-shots' template)
  facts    the same with the failure restated as facts (the assertion's values) only
  single   the bench's one-model-asked-once prompt (every file of the repository)
  reversed plain with the pinned files in the opposite order (the 1.5B tends to rewrite the
           first file shown; the preflight lists the test's caller before what it calls)

Prints one line per task and variant (changed files, passed, seconds, prompt characters) and
the passes per variant side by side. Tasks whose failure pins no file are skipped (no one-shot).

    python bench/first_prompt.py --roles live-routed                 # the live suite
    python bench/first_prompt.py --roles live-routed --variants plain,failure --task py-paging
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from orchestrator.benchmark.simulator import load_role_map
from orchestrator.benchmark.single import render_prompt, repo_files
from orchestrator.benchmark.spec import check_acceptance
from orchestrator.benchmark.suite import Task, load_suite, materialize
from orchestrator.config.prompts import text
from orchestrator.config.schema import RoleMap
from orchestrator.engine.oneshot import Shown, messages, shown_files
from orchestrator.engine.preflight import localize_worktree
from orchestrator.engine.race import temperature_of
from orchestrator.engine.replyfiles import parse_files, relabelled
from orchestrator.localize import facts
from orchestrator.localize.localization import Check, Localization
from orchestrator.models.pool import ClientPool
from orchestrator.tools.base import Toolbox
from orchestrator.tools.edit import edit_tools

VARIANTS = ("plain", "failure", "facts", "single", "reversed")


def localized(repo: Path, commands: Sequence[str]) -> Localization:
    """The preflight's localisation of ``repo``: ``commands`` run in it, their failures read."""
    checks = []
    for command in commands:
        done = subprocess.run(command, shell=True, cwd=repo, capture_output=True, text=True,
                              check=False, timeout=600)
        checks.append(Check(command=command, exit_code=done.returncode,
                            output=(done.stdout + done.stderr)[-8000:]))
    return localize_worktree(repo, checks)


def variant_messages(variant: str, task: Task, repo: Path, loc: Localization, shown: Shown
            ) -> tuple[list[dict[str, str]], dict[str, str]]:
    """The variant's messages and the files a reply may name, with their shown texts."""
    if variant == "single":
        files = repo_files(repo)
        return render_prompt(task.instruction, task.acceptance, files), files
    if variant == "reversed":
        shown = Shown(dict(reversed(shown.sources.items())), shown.tests)
    said = facts.facts(loc.reports)
    failure = {"failure": None, "facts": text("oneshot", "facts", facts="\n".join(
        f"- {f}" for f in said)) if said else text("pipeline", "none")}
    built = messages(system=text("oneshot", "system"), task=task.instruction, loc=loc,
                     shown=shown, commands=task.acceptance,
                     first=variant in ("plain", "reversed"), failure=failure.get(variant))
    return built, {**shown.sources, **shown.tests}


async def verdict(roles: RoleMap, task: Task, reply: str, names: dict[str, str], dest: Path,
                  *, relabel: bool = True) -> tuple[list[str], bool]:
    """The files a whole-file ``reply`` changes, written into a fresh copy of the task's
    repository at ``dest`` through the edit tools, and whether its acceptance commands then
    pass (sandboxed). ``relabel``: a block under the wrong name is read as the engine reads a
    one-shot's."""
    repo = materialize(task, dest)
    before = {n: (repo / n).read_text(encoding="utf-8") for n in names if (repo / n).is_file()}
    read = parse_files(reply, names)
    if relabel:
        read, _ = relabelled(read, names)
    changed = {p: b for p, b in read.items() if b != before.get(p)}
    tools = Toolbox.of(edit_tools(repo, edit_format="whole"))
    for path, body in changed.items():
        await tools.call("write_file", {"path": path, "content": body})
    passed = bool(changed) and await check_acceptance(
        task, repo, dict(os.environ), roles.run.command_timeout_s, sandbox=roles.sandbox,
        objects=repo / ".git" / "objects")
    return sorted(changed), passed


async def _one(pool: ClientPool, roles: RoleMap, role: str, task: Task, variant: str,
               prompt: list[dict[str, str]], names: dict[str, str], tmp: Path
               ) -> dict[str, Any]:
    client = pool.for_role(role, temperature=temperature_of(roles.roles[role].temperatures, 1))
    started = time.monotonic()
    done = await client.complete(prompt, session=f"{role}-{task.name}-{variant}")
    changed, passed = await verdict(roles, task, done.content or "", names,
                                    tmp / f"{task.name}-{variant}", relabel=variant != "single")
    return {"task": task.name, "variant": variant, "changed": changed,
            "passed": passed, "call_s": round(done.record.duration_s, 2),
            "wall_s": round(time.monotonic() - started, 2),
            "prompt_chars": sum(len(m["content"]) for m in prompt)}


async def _run(roles: RoleMap, role: str, tasks: list[Task], variants: list[str]
               ) -> list[dict[str, Any]]:
    pool = ClientPool(roles, dict(os.environ))
    rows: list[dict[str, Any]] = []
    try:
        with tempfile.TemporaryDirectory() as tmp:
            for task in tasks:
                repo = materialize(task, Path(tmp) / f"{task.name}-preflight")
                loc = await asyncio.to_thread(localized, repo, task.acceptance)
                shown = shown_files(repo, loc)
                if shown is None:
                    print(f"{task.name:22} skipped: the failure pins no file", flush=True)
                    continue
                for variant in variants:
                    prompt, names = variant_messages(variant, task, repo, loc, shown)
                    row = await _one(pool, roles, role, task, variant, prompt, names, Path(tmp))
                    rows.append(row)
                    print(f"{task.name:22} {variant:8} changed={len(row['changed'])} "
                          f"passed={row['passed']!s:5} {row['call_s']:6.1f}s "
                          f"prompt={row['prompt_chars']}", flush=True)
    finally:
        await pool.aclose()
    return rows


def task_args(ap: argparse.ArgumentParser) -> None:
    """The options of a probe over a suite's tasks with a role map's model (``chosen``)."""
    ap.add_argument("--roles", required=True, help="a role map (packaged name or file)")
    ap.add_argument("--role", default="builder")
    ap.add_argument("--suite", default="live")
    ap.add_argument("--task", action="append", help="only these tasks (repeatable)")


def chosen(args: argparse.Namespace) -> tuple[RoleMap, list[Task]]:
    """The role map and the tasks ``task_args``' options name."""
    _, roles = load_role_map(args.roles)
    return roles, [t for t in load_suite(args.suite).tasks if not args.task or t.name in args.task]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    task_args(ap)
    ap.add_argument("--variants", default=",".join(VARIANTS))
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    variants = [v for v in args.variants.split(",") if v]
    unknown = [v for v in variants if v not in VARIANTS]
    if unknown:
        raise SystemExit(f"unknown variant(s) {', '.join(unknown)}: choose from "
                         f"{', '.join(VARIANTS)}")
    roles, tasks = chosen(args)
    rows = asyncio.run(_run(roles, args.role, tasks, variants))
    tried = len({r["task"] for r in rows})
    print("\n" + "  ".join(f"{v}: {sum(r['passed'] for r in rows if r['variant'] == v)}/{tried}"
                           for v in variants))
    print(f"load average {os.getloadavg()[0]:.1f}")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
