"""Runs after the fact: which exist, which are still going, cleaning up, applying one.

A running run holds an exclusive lock on ``workspaces/<run-id>/run.lock``; a process that dies
(Ctrl-C, ``kill -9``) releases it, so ``clean`` can tell finished runs from live ones without a
daemon. ``apply`` is the only code that ever touches the user's branch, and only when asked.
"""

from __future__ import annotations

import fcntl
import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .errors import UsageError
from .workspace import Workspace, list_workspaces

LOCK_NAME = "run.lock"


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Held for the whole life of a run."""
    run_dir.mkdir(parents=True, exist_ok=True)
    with (run_dir / LOCK_NAME).open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        handle.write(str(os.getpid()))
        handle.flush()
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def is_running(run_dir: Path) -> bool:
    path = run_dir / LOCK_NAME
    if not path.exists():
        return False
    with path.open("r") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return True
        fcntl.flock(handle, fcntl.LOCK_UN)
        return False


@dataclass(frozen=True)
class RunInfo:
    """One run as `orchestrate runs` lists it."""

    run_id: str
    branch: str
    state: str  # running | succeeded | failed | stopped
    task: str
    cost_usd: float
    has_worktree: bool
    run_dir: str
    created: float  # seconds since the epoch

    @property
    def age(self) -> str:
        seconds = max(0.0, time.time() - self.created)
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if seconds >= size:
                return f"{seconds / size:.0f}{unit}"
        return f"{seconds:.0f}s"


def list_runs(repo: Path) -> list[RunInfo]:
    runs = []
    for ws in list_workspaces(repo):
        report, meta = _report(ws.run_dir), _meta(ws.run_dir)
        state = "running" if is_running(ws.run_dir) else report.get("status", "stopped")
        runs.append(RunInfo(
            run_id=ws.run_id, branch=ws.branch, state=state,
            task=report.get("task") or meta.get("task", ""),
            cost_usd=float(report.get("cost_usd", 0.0)),
            has_worktree=(ws.worktree / ".git").exists(), run_dir=str(ws.run_dir),
            created=float(meta.get("created") or ws.run_dir.stat().st_mtime),
        ))
    return runs


def _report(run_dir: Path) -> dict:
    return _json(run_dir / "report.json")


def _meta(run_dir: Path) -> dict:
    return _json(run_dir / "run.json")


def _json(path: Path) -> dict:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}


def clean(repo: Path) -> list[str]:
    """Remove the worktrees of runs that are not running; keep branches and artefacts."""
    removed = []
    for ws in list_workspaces(repo):
        if is_running(ws.run_dir) or not ws.worktree.exists():
            continue
        ws.remove(keep_branch=True)
        removed.append(ws.run_id)
    return removed


def _git(repo: Path, *args: str, check: bool = False) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "GIT_TERMINAL_PROMPT": "0", "LC_ALL": "C"}
    return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, env=env,
                          check=check, stdin=subprocess.DEVNULL)


def apply(repo: Path, run_id: str) -> str:
    """Merge the run's branch into the user's current branch; refuse on dirt or conflicts."""
    ws = Workspace.open(repo, run_id, reattach=False)
    if is_running(ws.run_dir):
        raise UsageError(f"run {run_id} is still running; wait for it to finish")
    if _git(ws.repo, "status", "--porcelain", "--untracked-files=no").stdout.strip():
        raise UsageError(
            "your checkout has uncommitted changes to tracked files; commit or stash them, "
            f"then run `orchestrate apply {run_id}` again (nothing was changed)"
        )
    current = _git(ws.repo, "symbolic-ref", "--short", "-q", "HEAD").stdout.strip()
    if not current:
        raise UsageError("HEAD is detached; check out the branch to merge into first")
    ahead = _git(ws.repo, "rev-list", "--count", f"HEAD..{ws.branch}").stdout.strip()
    if ahead in ("", "0"):
        raise UsageError(f"{ws.branch} has nothing that {current} does not already have")
    ident = [] if _git(ws.repo, "config", "user.email").stdout.strip() else [
        "-c", "user.name=orchestrate", "-c", "user.email=orchestrate@localhost"]
    merge = _git(ws.repo, *ident, "merge", "--no-ff", "--no-edit", "-m",
                 f"Merge {ws.branch} (orchestrate run {run_id})", ws.branch)
    if merge.returncode != 0:
        conflicts = _git(ws.repo, "diff", "--name-only", "--diff-filter=U").stdout.split()
        _git(ws.repo, "merge", "--abort")
        where = f" in {', '.join(conflicts)}" if conflicts else ""
        detail = "" if conflicts else f": {merge.stderr.strip() or merge.stdout.strip()}"
        raise UsageError(
            f"merging {ws.branch} into {current} conflicts{where}{detail}; nothing was changed "
            f"(merge it by hand: git merge {ws.branch})"
        )
    return _git(ws.repo, "rev-parse", "HEAD", check=True).stdout.strip()


@dataclass(frozen=True)
class RunDetails:
    """Everything recorded about one run: its report (if it ended), sessions and calls."""

    run_id: str
    state: str
    report: dict
    sessions: list
    calls: list[dict]
    events: int


def run_details(repo: Path, run_id: str) -> RunDetails:
    from .context import session_tree

    ws = Workspace.open(repo, run_id, reattach=False)
    events = []
    log = ws.run_dir / "events.jsonl"
    for line in log.read_text(encoding="utf-8").splitlines() if log.exists() else ():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    report = _report(ws.run_dir)
    state = "running" if is_running(ws.run_dir) else report.get("status", "stopped")
    calls = [e for e in events if e.get("event") == "call_finished"]
    return RunDetails(run_id, state, report, session_tree(events), calls, len(events))
