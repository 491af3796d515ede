"""Every git command the orchestrator runs, hardened against the repositories it runs on.

git reads configuration on every call, and several keys make it run a program: hooks,
``core.fsmonitor``, filter and textconv drivers, ``diff.external``, ``core.pager``,
``core.sshCommand``, credential helpers, ``gpg.program``. A builder can write such keys into any
repository whose ``.git`` it can reach, so the rules here are:

- our calls never read a builder-writable ``.git``: on a builder's worktree they name the user's
  repository (``git_dir``) and our own index file, and the worktree is only a work tree;
- every call overrides the program-running keys on the command line (``-c`` wins over every config
  file), neutralises every filter/diff/merge driver the trusted config defines, and runs with an
  environment built from an allow-list (no API keys, no ``GIT_*`` from the caller).
"""

from __future__ import annotations

import functools
import os
import subprocess
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import IO, Any

from orchestrator.errors import GitError
from orchestrator.timing import phase

__all__ = ["GitError", "common_dir", "git", "git_env", "toplevel"]

IDENTITY = ("orchestrate", "orchestrate@localhost")
# Keys that make git run a program or talk to the network, set to something inert.
_HARDENED: tuple[str, ...] = (
    "core.hooksPath=/dev/null",
    "core.fsmonitor=false",
    "core.pager=cat",
    "core.editor=false",
    "core.askPass=",
    "core.sshCommand=false",
    "core.gitProxy=",
    "core.alternateRefsCommand=",
    "credential.helper=",
    "diff.external=",
    "sequence.editor=false",
    "commit.gpgSign=false",
    "tag.gpgSign=false",
    "log.showSignature=false",
    "gpg.program=false",
    "protocol.allow=never",
    "protocol.file.allow=always",
    "core.quotePath=false",
)
# Subcommands that never read a work tree's file nor write an index (writing one re-reads the
# files whose stat data is racy, through their filters): no need to find the drivers.
_NO_DRIVERS = frozenset({"init", "update-ref", "rev-parse", "show-ref", "commit-tree"})
_OUR_IDENTITY = (f"user.name={IDENTITY[0]}", f"user.email={IDENTITY[1]}")
# What a git child may inherit from our environment; everything else is dropped.
_ENV_KEEP = ("PATH", "HOME", "USER", "LOGNAME", "TMPDIR", "TZ", "XDG_CONFIG_HOME", "SYSTEMROOT")


def git_env(extra: Mapping[str, str] | None = None, *, identity: bool = True) -> dict[str, str]:
    """The environment of every git child: allow-listed variables plus inert settings."""
    env = {k: os.environ[k] for k in _ENV_KEEP if k in os.environ}
    env.update(
        LC_ALL="C", GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", GIT_PAGER="cat",
        GIT_EDITOR="false", GIT_NO_REPLACE_OBJECTS="1",
    )
    if identity:
        env.update(GIT_AUTHOR_NAME=IDENTITY[0], GIT_AUTHOR_EMAIL=IDENTITY[1],
                   GIT_COMMITTER_NAME=IDENTITY[0], GIT_COMMITTER_EMAIL=IDENTITY[1])
    env.update(extra or {})
    return env


def git(
    *args: str,
    cwd: Path | None = None,
    git_dir: Path | None = None,
    work_tree: Path | None = None,
    index: Path | None = None,
    input: bytes | None = None,
    check: bool = True,
    text: bool = True,
    timeout: float | None = 300,
    network: bool = False,
    drivers: bool = False,
    user_identity: bool = False,
    stdout: IO[bytes] | None = None,
) -> subprocess.CompletedProcess[Any]:
    """Run ``git args`` hardened; ``git_dir``/``work_tree``/``index`` pin what git looks at.

    With ``git_dir`` the command never reads a ``.git`` found from ``cwd`` or ``work_tree``.
    Drivers defined in the trusted config (``git_dir``, else ``cwd``'s repository) are disabled
    unless ``drivers`` (only for the user's own checkout, e.g. ``apply``). ``network`` allows
    remote protocols for a clone the user asked for; ``user_identity`` commits as the user.
    ``stdout`` (a file open for writing) takes git's output as it comes, never held in memory.
    """
    extra: dict[str, str] = {}
    if git_dir is not None:
        extra["GIT_DIR"] = str(git_dir)
    if work_tree is not None:
        extra["GIT_WORK_TREE"] = str(work_tree)
    if index is not None:
        extra["GIT_INDEX_FILE"] = str(index)
    flags = [f for kv in _hardened(network) for f in ("-c", kv)]
    if not user_identity:
        flags += [f for kv in _OUR_IDENTITY for f in ("-c", kv)]
    trusted = git_dir or cwd
    if trusted is not None and not drivers and (not args or args[0] not in _NO_DRIVERS):
        flags += [f for kv in _driver_overrides(str(trusted), bool(git_dir)) for f in ("-c", kv)]
    try:
        with phase("git"):
            proc = subprocess.run(
                ["git", "--no-pager", *flags, *args], cwd=cwd or work_tree,
                env=git_env(extra, identity=not user_identity),
                input=input, stdin=None if input is not None else subprocess.DEVNULL,
                stdout=stdout if stdout is not None else subprocess.PIPE,
                stderr=subprocess.PIPE, timeout=timeout, check=False,
            )
    except FileNotFoundError:
        raise GitError("git was not found on PATH; install git") from None
    except subprocess.TimeoutExpired:
        raise GitError(f"git {args[0] if args else ''} timed out after {timeout}s") from None
    stderr = proc.stderr.decode("utf-8", "replace")
    result: subprocess.CompletedProcess[Any] = subprocess.CompletedProcess(
        proc.args, proc.returncode,
        proc.stdout.decode("utf-8", "surrogateescape") if text and proc.stdout is not None
        else proc.stdout, stderr,
    )
    if check and proc.returncode != 0:
        shown = " ".join(a for a in args[:3])
        raise GitError(f"git {shown} failed: {stderr.strip() or f'exit {proc.returncode}'}")
    return result


def toplevel(path: Path) -> Path | None:
    """The work tree root of the repository containing ``path``, or None."""
    proc = git("rev-parse", "--show-toplevel", cwd=path, check=False)
    out = proc.stdout.strip()
    return Path(out).resolve() if proc.returncode == 0 and out else None


def common_dir(top: Path) -> Path:
    """The repository's shared ``.git`` directory (the main one, for a linked worktree)."""
    out = git("rev-parse", "--git-common-dir", cwd=top).stdout.strip()
    path = Path(out)
    return (path if path.is_absolute() else top / path).resolve()


def _hardened(network: bool) -> Sequence[str]:
    if network:  # a clone the user asked for: their transports and credential helpers work
        return [kv for kv in _HARDENED
                if not kv.startswith(("protocol.", "core.sshCommand", "credential.", "core.askPass"))]
    return _HARDENED


@functools.lru_cache(maxsize=64)
def _driver_overrides(trusted: str, is_git_dir: bool) -> tuple[str, ...]:
    """``-c`` values that disable every filter, diff and merge driver the config defines.

    ``.gitattributes`` in a work tree can route any file through any driver named in config
    (an LFS filter, a textconv); the builder writes those attributes, so we run none of them.
    """
    env = git_env({"GIT_DIR": trusted} if is_git_dir else None)
    try:
        proc = subprocess.run(
            ["git", "config", "--name-only", "--get-regexp", r"^(filter|diff|merge)\."],
            cwd=None if is_git_dir else trusted, env=env, capture_output=True,
            stdin=subprocess.DEVNULL, timeout=30, check=False,
        )
    except (OSError, subprocess.SubprocessError):
        return ()
    names: set[tuple[str, str]] = set()
    for line in proc.stdout.decode("utf-8", "replace").splitlines():
        section, _, rest = line.partition(".")
        name = rest.rpartition(".")[0]
        if name:
            names.add((section.lower(), name))
    keys = {"filter": ("clean", "smudge", "process"), "diff": ("textconv", "command"),
            "merge": ("driver",)}
    out = [f"{section}.{name}.{key}=" for section, name in sorted(names)
           for key in keys.get(section, ())]
    out += [f"filter.{name}.required=false" for section, name in sorted(names)
            if section == "filter"]
    return tuple(out)
