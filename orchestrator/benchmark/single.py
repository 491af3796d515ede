"""The bench's baseline without orchestration: one model, one prompt holding the task and the
repository's files, the whole changed files back, checked by the same acceptance commands.

A role map named ``single:MAP`` runs this with ``MAP``'s builder model. Nothing plans,
explores, runs tests or retries: it measures what orchestration adds over asking once.
"""

from __future__ import annotations

import asyncio
import os
import shutil
import string
import subprocess
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from orchestrator.benchmark.records import RunRecord, failed_run
from orchestrator.benchmark.spec import RunSpec, check_acceptance
from orchestrator.benchmark.suite import materialize
from orchestrator.config.layers import resolve_setup
from orchestrator.config.pipeline import pipeline_of
from orchestrator.config.schema import RoleMap
from orchestrator.engine.replyfiles import fenced, parse_files
from orchestrator.models.pool import ClientPool
from orchestrator.state import Attempt
from orchestrator.tools.base import Toolbox
from orchestrator.tools.edit import edit_tools
from orchestrator.tools.search import rg_binary

SINGLE = "single:"
MAX_PROMPT_CHARS = 40_000


def is_single(map_name: str) -> bool:
    """True for the baseline's role maps (``single:NAME``)."""
    return map_name.startswith(SINGLE)


def build_role(roles: RoleMap, repo: Path, env: Mapping[str, str]) -> str:
    """The role map's build role as a run in ``repo`` finds it: by its kind, not its name."""
    role_map, registry, _ = resolve_setup(repo, roles, env=env)
    role = pipeline_of(role_map, registry).build
    assert role is not None  # pipeline_of refuses a run's role map without one
    return role


def _template() -> tuple[str, str]:
    text = (Path(__file__).parent / "prompts" / "single.md").read_text(encoding="utf-8")
    system, _, user = text.partition("\n---\n")
    return system.strip(), user


def repo_files(repo: Path) -> dict[str, str]:
    """The repository's text files (what ripgrep would search), tests last, within the cap."""
    names = subprocess.run([rg_binary(), "--files", "--no-config"], cwd=repo, capture_output=True,
                           text=True, timeout=30, check=False).stdout.split()
    texts: dict[str, str] = {}
    used = 0
    for name in sorted(names, key=lambda n: ("test" in n.lower(), n)):
        try:
            text = (repo / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        if used + len(text) > MAX_PROMPT_CHARS:
            continue
        texts[name] = text
        used += len(text)
    return texts


def render_prompt(instruction: str, commands: tuple[str, ...], files: Mapping[str, str]
                  ) -> list[dict[str, str]]:
    system, user = _template()
    shown = "\n\n".join(fenced(path, text) for path, text in files.items())
    body = string.Template(user).substitute(
        instruction=instruction, commands="\n".join(f"  $ {c}" for c in commands), files=shown)
    return [{"role": "system", "content": system}, {"role": "user", "content": body}]


async def run_single(spec: RunSpec, dest: Path, *, env: Mapping[str, str] | None = None,
                     keep: bool = False) -> RunRecord:
    """One baseline run in a fresh copy of the task's repository; never raises for failures."""
    where: dict[str, Any] = dict(task=spec.task.name, role_map=spec.map_name, repeat=spec.repeat)
    run_env = dict(os.environ if env is None else env)
    t0 = time.monotonic()
    pool = ClientPool(spec.roles, run_env)
    try:
        repo = await asyncio.to_thread(materialize, spec.task, dest)
        files = await asyncio.to_thread(repo_files, repo)
        messages = render_prompt(spec.task.instruction, spec.task.acceptance, files)
        builder = await asyncio.to_thread(build_role, spec.roles, repo, run_env)
        completion = await pool.for_role(builder).complete(messages, session="single-1")
        changed = parse_files(completion.content or "", files)
        tools = Toolbox.of(edit_tools(repo, edit_format="whole"))
        for path, text in changed.items():
            await tools.call("write_file", {"path": path, "content": text})
        t1 = time.monotonic()
        passed = bool(changed) and await check_acceptance(
            spec.task, repo, run_env, spec.roles.run.command_timeout_s,
            sandbox=spec.roles.sandbox, objects=repo / ".git" / "objects")
    except Exception as exc:  # a crashed run is a result of the benchmark, not its end
        return failed_run(exc, **where, wall_s=time.monotonic() - t0,
                          workdir=str(dest) if keep else "")
    finally:
        await pool.aclose()
        if not keep:
            await asyncio.to_thread(shutil.rmtree, dest, True)
    rec = completion.record
    wall = time.monotonic() - t0
    reason = (f"changed {', '.join(sorted(changed))}" if changed
              else "the reply named no file of the repository")
    return RunRecord(
        **where, outcome="passed" if passed else "failed",
        status="succeeded" if passed else "failed", reason=reason, wall_s=wall,
        model_s=rec.duration_s, tool_s=time.monotonic() - t1,
        orchestration_s=max(0.0, wall - rec.duration_s - (time.monotonic() - t1)),
        attempts=1, calls=1, tokens={"builder": rec.prompt_tokens + rec.output_tokens},
        cost={"builder": rec.cost_usd}, cost_usd=rec.cost_usd,
        attempt_log=(Attempt(n=1, strategy="one_shot", changed=bool(changed), passed=passed,
                             duration_s=round(wall, 3)),),
        failure="" if passed else "attempts_used" if changed else "nothing_changed",
        workdir=str(dest) if keep else "")
