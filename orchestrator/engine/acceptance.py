"""The acceptance commands, run in a worktree's sandbox: what ``verify`` and a racing candidate
build are judged by. A builder's claim ("the tests pass") never counts; these exit codes do."""

from __future__ import annotations

from collections.abc import Sequence

from orchestrator.engine.runtime import RunContext
from orchestrator.errors import ToolError
from orchestrator.state import CheckResult
from orchestrator.tools.shell import CommandPolicy, run_command, scrubbed_env

OUTPUT_TAIL = 8000  # the end of each command's output that is kept


async def run_checks(ctx: RunContext, commands: Sequence[str], policy: CommandPolicy
                     ) -> list[CheckResult]:
    """Run each command in ``ctx.worktree`` inside ``ctx.sandbox``, one after another; a command
    the policy or the sandbox refuses is a failed check (exit 126), never skipped."""
    if ctx.sandbox is None:
        raise ToolError("acceptance commands need the run's sandbox; none was set up")
    checks: list[CheckResult] = []
    for command in commands:
        with ctx.telemetry.busy("tool"):
            try:
                res = await run_command(
                    command, cwd=ctx.worktree, sandbox=ctx.sandbox,
                    timeout=ctx.roles.run.command_timeout_s, env=scrubbed_env(ctx.env),
                    policy=policy,
                )
            except ToolError as exc:  # refused by the policy, or the sandbox could not start it
                checks.append(CheckResult(command=command, exit_code=126,
                                          output=f"refused: {exc}", duration_s=0.0))
                continue
        output = res.output[-OUTPUT_TAIL:]
        if res.limit_note:
            output = f"{res.limit_note}\n{output}"
        checks.append(CheckResult(command=command, exit_code=res.exit_code, output=output,
                                  duration_s=res.duration_s))
    return checks
