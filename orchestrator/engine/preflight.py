"""Before any model is asked: run the acceptance commands in the run's sandbox and localise
their failures (``localize.py``), so the planner and the builder start from the failing
assertions, the lines the tracebacks point at and a symbol map, not from a search.

Called by a marked hook in ``nodes.plan`` (issue 15, phase A); the registry-built graph of
issue 14 can make it a node of its own, and its ``Localization`` can fill the explorers'
"what the failing tests already show" slot (issue 16's ``KnownTests`` with ``source="check"``).
"""

from __future__ import annotations

import asyncio
import subprocess
from collections.abc import Sequence
from pathlib import Path

from orchestrator.engine.runtime import RunContext
from orchestrator.engine.toolbox import output_mask
from orchestrator.errors import PolicyViolation, ToolError
from orchestrator.localize import failures
from orchestrator.localize.localization import Check, Localization, localize
from orchestrator.record.events import Localized, Warned
from orchestrator.tools.search import rg_binary
from orchestrator.tools.secretfiles import DEFAULT, SecretFiles
from orchestrator.tools.shell import CommandPolicy, run_command, scrubbed_env

MAX_OUTPUT = 20_000  # the tail of each command's output that is parsed
MAX_FILE = 200_000  # larger files are not read for spans or the map


async def preflight(ctx: RunContext, commands: Sequence[str], policy: CommandPolicy
                    ) -> Localization | None:
    """Run ``commands`` in the worktree (sandboxed) and localise what fails; None when there is
    nothing to run, nowhere to run it (``explore`` has no sandbox) or ``run.preflight`` is off."""
    if ctx.sandbox is None or not commands or not ctx.roles.run.preflight:
        return None
    ctx.read_rules_ahead()  # the planner quotes them: read while the commands run
    checks = []
    shown = output_mask(ctx)  # what the tests print of a secret file is not kept, nor shown
    for command in commands:
        with ctx.telemetry.busy("tool"):
            try:
                res = await run_command(command, cwd=ctx.worktree, sandbox=ctx.sandbox,
                                        timeout=ctx.roles.run.command_timeout_s,
                                        env=scrubbed_env(ctx.env), policy=policy)
            except (PolicyViolation, ToolError) as exc:
                checks.append(Check(command=command, exit_code=126, output=f"refused: {exc}"))
                continue
        checks.append(Check(command=command, exit_code=res.exit_code,
                            output=shown(res.output[-MAX_OUTPUT:])))
    ctx.ahead.start_tree(ctx.workspace)  # the first attempt's tree, while the planner works
    _explore_ahead(ctx)
    limit = ctx.roles.run.preflight_analysis_s
    with ctx.telemetry.busy("tool"):
        try:
            secrets = SecretFiles(allow=ctx.roles.policy.secret_allow)
            loc = await asyncio.wait_for(
                asyncio.to_thread(localize_worktree, ctx.worktree, checks, secrets), limit)
        except TimeoutError:  # a repository made to stall the analysis: go on without it
            reports = tuple(failures.parse(c.output, command=c.command, exit_code=c.exit_code)
                            for c in checks if c.exit_code != 0)
            loc = Localization(checks=tuple(checks), reports=reports)
            ctx.telemetry.emit(Warned(
                role="verify", category="preflight_timeout",
                message=f"the analysis of the preflight's failures took over {limit:g}s "
                        "(run.preflight_analysis_s): the planner and builder get the failing "
                        "commands' output only"))
    ctx.telemetry.emit(Localized(
        role="verify", passed=loc.passed, pinned=loc.pinned,
        commands=[c.command for c in checks], exit_codes=[c.exit_code for c in checks],
        suspects=list(loc.suspects), tests=list(loc.tests),
        failing=[t.name for r in loc.reports for t in r.failures][:10],
    ))
    return loc


def _explore_ahead(ctx: RunContext) -> None:
    """The explorers' retrieval over the worktree, listed and read while the failures are
    analysed and the planner works (``engine/ahead.py``); not when the pipeline has no
    explorers. (When the failures pin the code, explorers are skipped and it goes unused: one
    listing of the worktree, off the critical path.)"""
    if ctx.pipeline.explore is not None and ctx.roles.run.explore_candidates > 0:
        ctx.retrieval_ahead()


def localize_worktree(root: Path, checks: Sequence[Check],
                      secrets: SecretFiles = DEFAULT) -> Localization:
    """``localize`` over the files ripgrep sees under ``root`` (small text files only; no
    secret files, whose lines a traceback could point at)."""
    files = subprocess.run([rg_binary(), "--files", "--no-config"], cwd=root, capture_output=True,
                           text=True, timeout=30, check=False).stdout.split("\n")
    files = sorted(f for f in files if f and not secrets.secret(f))

    def read(path: str) -> str | None:
        file = (root / path)
        if secrets.secret(path):
            return None
        try:
            if not file.is_file() or file.stat().st_size > MAX_FILE:
                return None
            return file.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            return None

    return localize(checks, files=files, read=read, root=str(root))
