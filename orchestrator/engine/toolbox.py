"""The tools a role gets: what its agent file asks for, built over the run's worktree, sandbox
and command policy (its kind has allowed them already, ``config/kinds.py``).

Reads and searches see the worktree, history the user's (trusted) repository at the run's base
commit; edits are refused on the failing tests the preflight found (``protected_tests``);
commands run in the run's sandbox under the policy.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.config.kinds import EDIT_TOOLS, RUN_TOOL
from orchestrator.engine.ahead import Watches
from orchestrator.engine.runtime import RunContext
from orchestrator.state import Role, RunState
from orchestrator.tools.base import Tool, Toolbox, WriteWatch
from orchestrator.tools.edit import edit_tools
from orchestrator.tools.explorer import MAX_BYTES, explorer_tools
from orchestrator.tools.gitread import GitHistory
from orchestrator.tools.secretfiles import SecretFiles, mask
from orchestrator.tools.secretvalues import known_secrets
from orchestrator.tools.shell import DEFAULT_DENY, CommandPolicy, scrubbed_env, shell_tool

CHARS_PER_TOKEN = 3.5
TOOL_SHARE = 0.12  # of the role model's window: what one read or search may return
MIN_TOOL_BYTES = 2_500


def policy_of(ctx: RunContext) -> CommandPolicy:
    """The built-in deny list plus the role map's own; ``allow`` patterns win over both."""
    settings = ctx.roles.policy
    return CommandPolicy(allow=list(settings.allow), deny=[*DEFAULT_DENY, *settings.deny])


def protected_tests(ctx: RunContext, state: RunState) -> frozenset[str]:
    """The failing tests the preflight found: they define the task, so builders may not edit
    them (``run.protect_tests``); verify puts back what a command changed in them."""
    loc = state.localization
    if loc is None or loc.passed or not ctx.roles.run.protect_tests:
        return frozenset()
    return frozenset(loc.tests)


def toolbox_for(ctx: RunContext, role: Role, protected: frozenset[str] = frozenset(),
                watch: WriteWatch | None = None) -> Toolbox:
    """The tools the role's agent file asks for; ``watch`` sees the writing ones run."""
    wanted = set(ctx.agents[role].tools)
    window = ctx.roles.model_for(role).context_window
    cap = int(min(MAX_BYTES, max(MIN_TOOL_BYTES, window * TOOL_SHARE * CHARS_PER_TOKEN)))
    secrets = SecretFiles(allow=ctx.roles.policy.secret_allow)
    available: list[Tool] = list(explorer_tools(ctx.worktree, history=_history(ctx),
                                                max_bytes=cap, secrets=secrets))
    if wanted & set(EDIT_TOOLS):
        available += edit_tools(ctx.worktree, edit_format=ctx.roles.model_for(role).edits,
                                protected=protected, secrets=secrets)
    if RUN_TOOL in wanted and ctx.sandbox is not None:
        available.append(
            shell_tool(
                ctx.worktree,
                sandbox=ctx.sandbox,
                policy=policy_of(ctx),
                timeout=ctx.roles.run.command_timeout_s,
                output_cap=30_000,
                env=scrubbed_env(ctx.env),
            )
        )
    # the run counts every session's writing tools (``Ahead.first_tree``); a build its own too
    told = Watches(ctx.ahead, watch) if watch is not None else ctx.ahead
    return Toolbox.of((t for t in available if t.name in wanted), told, output_mask(ctx))


def output_mask(ctx: RunContext) -> Callable[[str], str]:
    """What a command's or tool's output goes through before a model sees it: key-shaped values,
    and the contents of the worktree's secret files (which the shell, and a test the builder
    wrote, can print in any encoding ``secretvalues`` knows)."""
    known = known_secrets(ctx.worktree, SecretFiles(allow=ctx.roles.policy.secret_allow))
    if not known:
        return mask

    def masking(text: str) -> str:
        return known.mask(mask(text))

    return masking


def _history(ctx: RunContext) -> GitHistory:
    """git_log/git_blame read the user's (trusted) repository, never a builder-writable .git."""
    if ctx.workspace is None:
        return GitHistory(root=ctx.worktree)
    return GitHistory(root=ctx.worktree, git_dir=ctx.workspace.git_dir, rev=ctx.base_commit)
