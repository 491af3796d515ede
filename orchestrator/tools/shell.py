"""The command tool: run a shell command in the run's sandbox, with limits and no network.

``run_command`` starts ``bash -c`` inside the ``Sandbox`` (``orchestrator/sandbox.py``: bubblewrap,
read-only system, the worktree the only writable place, no network, its own PID namespace,
rlimits) in its own session with stdin closed and a scrubbed environment (no API keys or tokens).
Output is read incrementally and only a head and a tail are kept, so memory stays bounded; on
timeout the sandbox is killed, and every process in it dies with it. ``CommandPolicy`` refuses
commands matching deny patterns (push, remote, curl, ssh, sudo, ...) before anything runs: a
courtesy that explains refusals early. The sandbox is the wall.
"""

from __future__ import annotations

import asyncio
import fnmatch
import functools
import os
import re
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, field_validator

from orchestrator.errors import PolicyViolation, ToolError
from orchestrator.sandbox import Sandbox
from orchestrator.sandbox.quota import WorktreeQuota
from orchestrator.tools.base import Tool


def _program(name: str) -> str:
    # A command word: not part of a longer name (libcurl, curl-config) nor a directory (curl/).
    return rf"(?<![\w.-]){name}(?![\w./-])"


_GIT = r"(?<![\w.-])git(?:\s+(?:-[cC]\s+\S+|--?[\w-]+(?:=\S+)?))*\s+"
# Friendly rule names for the default patterns, used in refusal messages.
_DEFAULT_RULES: dict[str, str] = {
    _GIT + r"push\b": "git push",
    _GIT + r"remote\b": "git remote",
    **{_program(p): p for p in (
        "curl", "wget", "ssh", "scp", "sftp", "rsync", "nc", "ncat", "netcat", "socat", "telnet",
        "ftp", "sudo", "su", "doas", "pkexec",
    )},
}
DEFAULT_DENY: tuple[str, ...] = tuple(_DEFAULT_RULES)

_SECRET_PATTERNS = (
    "*_API_KEY", "*API_KEY*", "*_TOKEN", "*_TOKEN_*", "*_SECRET*", "*SECRET_KEY*", "*PASSWORD*",
    "*PASSWD*", "*_CREDENTIALS", "*_PRIVATE_KEY*", "*_ACCESS_KEY*", "AWS_*", "AZURE_*",
    "GOOGLE_APPLICATION_CREDENTIALS", "GH_*", "GITHUB_TOKEN", "OPENAI_*", "ANTHROPIC_*",
    "SSH_AUTH_SOCK",
)
# Would point the command's git at another repository than the workspace.
_GIT_LOCATION_VARS = {"GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR"}
_KILL_GRACE_S = 1.0
_QUOTA_POLL_S = 0.5  # how often a running command's worktree is measured (at most)
_CHUNK = 65536


class CommandPolicy(BaseModel):
    """Regexes matched against the command text; an ``allow`` match overrides every deny."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=lambda: list(DEFAULT_DENY))

    @field_validator("allow", "deny")
    @classmethod
    def _compiles(cls, patterns: list[str]) -> list[str]:
        for pattern in patterns:
            try:
                re.compile(pattern)
            except re.error as exc:
                raise ValueError(f"invalid regex {pattern!r}: {exc}") from None
        return patterns

    def check(self, command: str) -> None:
        """Raise ``PolicyViolation`` naming the deny rule the command matches, if any."""
        if any(re.search(p, command, re.M) for p in self.allow):
            return
        for pattern in self.deny:
            if re.search(pattern, command, re.M):
                rule = _DEFAULT_RULES.get(pattern, pattern)
                raise PolicyViolation(
                    f"command matches deny rule {rule!r}: network access, pushing, changing "
                    "remotes and privilege escalation are not allowed in this workspace"
                )


def scrubbed_env(env: Mapping[str, str]) -> dict[str, str]:
    """``env`` without credentials, plus settings that keep commands non-interactive."""
    secret = _secret_name()
    kept = {k: v for k, v in env.items()
            if k not in _GIT_LOCATION_VARS and not secret(k.upper())}
    kept.update(GIT_TERMINAL_PROMPT="0", PYTHONDONTWRITEBYTECODE="1")
    return kept


@functools.cache
def _secret_name() -> Callable[[str], re.Match[str] | None]:
    """One regex for every secret pattern (matching them one by one cost milliseconds a call)."""
    return re.compile("|".join(f"(?:{fnmatch.translate(p)})" for p in _SECRET_PATTERNS)).match


@dataclass(frozen=True)
class CommandResult:
    """What a command did; ``output`` is stdout and stderr interleaved, capped head and tail."""

    command: str
    exit_code: int
    output: str
    output_bytes: int
    truncated: bool
    timed_out: bool
    duration_s: float
    sandbox: str
    limit_note: str | None = None


class _Capture:
    """Keeps the first and last bytes of a stream, counting what falls in between."""

    def __init__(self, cap: int) -> None:
        self.head_cap = cap // 2
        self.tail_cap = cap - self.head_cap
        self.head = bytearray()
        self.tail = bytearray()
        self.total = 0

    def feed(self, chunk: bytes) -> None:
        self.total += len(chunk)
        room = self.head_cap - len(self.head)
        if room > 0:
            self.head += chunk[:room]
            chunk = chunk[room:]
        if chunk:
            self.tail += chunk
            if len(self.tail) > self.tail_cap:
                del self.tail[: len(self.tail) - self.tail_cap]

    def text(self) -> tuple[str, bool]:
        omitted = self.total - len(self.head) - len(self.tail)
        if omitted <= 0:
            return (self.head + self.tail).decode("utf-8", "replace"), False
        head = self.head.decode("utf-8", "replace")
        tail = self.tail.decode("utf-8", "replace")
        return f"{head}\n... {omitted} bytes omitted ...\n{tail}", True


async def run_command(
    command: str,
    *,
    cwd: Path,
    sandbox: Sandbox,
    timeout: float = 120,
    output_cap: int = 30_000,
    env: Mapping[str, str] | None = None,
    policy: CommandPolicy | None = None,
) -> CommandResult:
    """Run ``bash -c command`` in ``sandbox`` under the policy (default ``CommandPolicy()``)."""
    (policy or CommandPolicy()).check(command)
    if not Path(cwd).is_dir():
        raise ToolError(f"working directory does not exist: {cwd}")
    started = time.monotonic()
    if sandbox.quota is not None:
        await asyncio.to_thread(sandbox.quota.start)  # the baseline, before the first command
    cgroup = await asyncio.to_thread(sandbox.process_cap)  # file I/O: off the event loop
    argv = sandbox.argv(command)
    if cgroup is not None:
        argv = cgroup.wrap(argv)
    proc = await asyncio.create_subprocess_exec(
        *argv, cwd=cwd, env=sandbox.env(scrubbed_env(os.environ if env is None else env)),
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        start_new_session=True,
    )
    await asyncio.to_thread(sandbox.track, proc.pid)
    capture = _Capture(output_cap)
    reader = asyncio.create_task(_pump(proc.stdout, capture))
    timed_out = False
    watcher = (asyncio.create_task(_stop_past_quota(proc, sandbox.quota))
               if sandbox.quota is not None else None)
    try:
        if not await _exited(proc, timeout):
            timed_out = True
            await _terminate_group(proc)
    finally:
        if watcher is not None:
            watcher.cancel()
        if proc.returncode is None:  # cancelled: never leave the command behind
            _signal_group(proc.pid, signal.SIGKILL)
    try:
        # Unsandboxed background children may still hold the pipe; give them a moment.
        await asyncio.wait_for(asyncio.shield(reader), 0.5)
    except TimeoutError:
        pass
    _signal_group(proc.pid, signal.SIGKILL)
    try:
        await asyncio.wait_for(reader, 2)
    except TimeoutError:
        pass  # something escaped the group (setsid, unsandboxed) and holds the pipe
    try:
        await asyncio.wait_for(proc.wait(), 1)  # reaped, so its transport closes with the loop
    except TimeoutError:
        pass
    await asyncio.to_thread(sandbox.track, proc.pid, done=True)
    output, truncated = capture.text()
    exit_code = proc.returncode if proc.returncode is not None else -signal.SIGKILL
    pids_hit = False
    if cgroup is not None:
        pids_hit = await asyncio.to_thread(cgroup.hit)
        if sandbox.bwrap is None:  # no PID namespace: the group still finds setsid escapees
            await asyncio.to_thread(cgroup.kill_all, remove=False)
    over = await asyncio.to_thread(sandbox.quota.over) if sandbox.quota is not None else None
    if over is not None:  # the command fails, and says why where its output is read
        exit_code = exit_code or 1
        output = f"{output.rstrip()}\n{over}\n"
    return CommandResult(
        command=command,
        exit_code=exit_code,
        output=output,
        output_bytes=capture.total,
        truncated=truncated,
        timed_out=timed_out,
        duration_s=round(time.monotonic() - started, 3),
        sandbox=sandbox.info.mechanism,
        limit_note=None if timed_out or over else sandbox.explain(exit_code, output, pids_hit),
    )


async def _pump(stream: asyncio.StreamReader | None, capture: _Capture) -> None:
    if stream is None:
        return
    while chunk := await stream.read(_CHUNK):
        capture.feed(chunk)


async def _exited(proc: asyncio.subprocess.Process, timeout: float) -> bool:
    """Whether the process exited within ``timeout``.

    Polls ``returncode`` because ``Process.wait()`` (3.11) also waits for the pipes to close,
    which a background child holding stdout would delay until the timeout.
    """
    deadline = time.monotonic() + timeout
    delay = 0.001
    while proc.returncode is None:
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(min(delay, max(deadline - time.monotonic(), 0)))
        delay = min(delay * 2, 0.1)
    return True


async def _stop_past_quota(proc: asyncio.subprocess.Process, quota: WorktreeQuota) -> None:
    """Measure the worktree while the command runs and kill it once past its disk quota, so one
    long command cannot fill the disk before the measure after it. Measured at most every
    ``_QUOTA_POLL_S``, and never more than a fifth of the time (a large tree costs more)."""
    pause = _QUOTA_POLL_S
    while True:
        await asyncio.sleep(pause)  # a short command ends first: measured once, after it
        if proc.returncode is not None:
            return
        started = time.monotonic()
        if await asyncio.to_thread(quota.over) is not None and proc.returncode is None:
            _signal_group(proc.pid, signal.SIGKILL)
            return
        pause = max(_QUOTA_POLL_S, 4 * (time.monotonic() - started))


async def _terminate_group(proc: asyncio.subprocess.Process) -> None:
    _signal_group(proc.pid, signal.SIGTERM)
    if not await _exited(proc, _KILL_GRACE_S):
        _signal_group(proc.pid, signal.SIGKILL)
        await _exited(proc, 5)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class RunArgs(BaseModel):
    command: str = Field(description="A bash command, run from the workspace root.")
    timeout_s: float | None = Field(None, gt=0, description="Seconds before the command is killed.")


def shell_tool(
    root: Path,
    *,
    sandbox: Sandbox,
    policy: CommandPolicy,
    timeout: float,
    output_cap: int,
    env: Mapping[str, str],
) -> Tool:
    """The ``run`` tool: a policed, sandboxed command in ``root``; timeouts capped at ``timeout``."""

    async def run(args: RunArgs) -> str:
        limit = min(args.timeout_s or timeout, timeout)
        result = await run_command(
            args.command, cwd=root, sandbox=sandbox, timeout=limit, output_cap=output_cap,
            env=env, policy=policy,
        )
        lines = [f"exit code {result.exit_code}"]
        if result.timed_out:
            lines.append(f"timed out after {limit:g}s")
        if result.limit_note:
            lines.append(result.limit_note)
        if result.output:
            lines.append(result.output.rstrip("\n"))
        return "\n".join(lines)

    where = ("in a sandbox: only the workspace is writable, no network, other files hidden"
             if sandbox.info.mechanism == "bwrap" else "UNSANDBOXED")
    return Tool(
        "run",
        f"Run a bash command in the workspace root ({where}; timeout {timeout:g}s, stdin "
        "closed). Returns the exit code and combined output; long output keeps head and tail.",
        RunArgs, run, read_only=False,
    )
