"""Runs after the fact: which exist, which are still going, cleaning up, applying one.

A running run holds an exclusive lock on ``workspaces/<run-id>/run.lock``; a process that dies
(Ctrl-C, ``kill -9``) releases it, so ``clean`` can tell finished runs from live ones without a
daemon. ``apply`` is the only code that ever touches the user's branch, and only when asked.
"""

from __future__ import annotations

import fcntl
import json
import os
import shlex
import subprocess
import time
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from orchestrator.errors import UsageError
from orchestrator.evidence.claimstats import ClaimStats, merge
from orchestrator.gitsafe import git
from orchestrator.record.events import CallFinished, read_events
from orchestrator.workspace.autorun import allowed, runs_by_itself, unsafe_path
from orchestrator.workspace.repo import top_of
from orchestrator.workspace.worktree import Workspace, list_workspaces

if TYPE_CHECKING:
    from orchestrator.session.tree import SessionNode

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
    claims: dict = field(default_factory=dict)  # explorer model -> claim counts (ClaimStats)
    # each build attempt's strategy, "(unchanged)" when it changed nothing; "+" marks the pass
    attempts: tuple[str, ...] = ()

    @property
    def age(self) -> str:
        seconds = max(0.0, time.time() - self.created)
        for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
            if seconds >= size:
                return f"{seconds / size:.0f}{unit}"
        return f"{seconds:.0f}s"

    def summary(self) -> dict[str, Any]:
        """The run as ``orchestrate runs --json`` and the MCP ``runs`` tool give it."""
        return {**vars(self), "age": self.age}


def claims_by_model(runs: Iterable[RunInfo]) -> dict[str, ClaimStats]:
    """The explorer claim counts of ``runs``, summed per model (``orchestrate runs``)."""
    return merge({m: ClaimStats.model_validate(c) for m, c in r.claims.items()} for r in runs)


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
            claims=dict(report.get("claims_by_model") or {}),
            attempts=_attempts(report),
        ))
    return runs


def _attempts(report: dict) -> tuple[str, ...]:
    """``one_shot(unchanged)``, ``tool_loop+``, ``one_line+mutant`` (passed by a mechanical
    edit): what each build attempt of a run was."""
    out = []
    for a in report.get("attempt_log") or []:
        if isinstance(a, dict):
            mechanical = any(isinstance(s, dict) and s.get("passed") and s.get("mutant")
                             for s in a.get("samples") or [])
            out.append(str(a.get("strategy", "?")) + ("" if a.get("changed", True) else
                                                       "(unchanged)")
                       + ("+" if a.get("passed") else "") + ("mutant" if mechanical else ""))
    return tuple(out)


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


def _git(repo: Path, *args: str, check: bool = False,
         user_identity: bool = True) -> subprocess.CompletedProcess[str]:
    """git in the user's own checkout: their config and filters, but no hooks, no secrets."""
    return git(*args, cwd=repo, check=check, drivers=True, user_identity=user_identity)


@dataclass(frozen=True)
class Risky:
    """One change ``apply`` refuses unless the user allows its path by name."""

    path: str
    reason: str

    def __str__(self) -> str:
        return f"{self.path} ({self.reason})"


def risky_changes(repo: Path, branch: str, *, ci: bool = False) -> list[Risky]:
    """What the run branch would bring in that runs or steers a program by itself.

    Files git or a hook manager obeys (``workspace/autorun.py``: ``.gitattributes``,
    ``.gitmodules``, ``.lfsconfig``, husky, lefthook, overcommit and pre-commit files, ``.envrc``,
    CI workflows with ``ci``), files under a ``core.hooksPath`` inside the repository, submodule
    links, and symlinks pointing outside it.
    """
    raw = _git(repo, "diff", "--raw", "-z", "--no-renames", "--no-ext-diff", "--no-textconv",
               f"HEAD...{branch}", "--", check=True).stdout
    fields = raw.split("\0")
    hooks = _hooks_dir(repo)
    found: list[Risky] = []
    for i in range(0, len(fields) - 1, 2):
        meta, path = fields[i], fields[i + 1]
        if not meta.startswith(":") or not path:
            continue
        _old_mode, new_mode, _old, new_sha, status = meta[1:].split(" ")[:5]
        if status.startswith("D"):
            continue
        reason = unsafe_path(path) or runs_by_itself(path, hooks_dir=hooks, ci=ci)
        if reason:
            found.append(Risky(path, reason))
        elif new_mode == "160000":
            found.append(Risky(path, "a submodule link"))
        elif new_mode == "120000":
            target = _git(repo, "cat-file", "blob", new_sha, check=True).stdout
            if os.path.isabs(target) or not _inside(path, target):
                found.append(Risky(path, f"a symlink to {target!r}, outside the repository"))
            elif _into_git_dir(path, target):
                found.append(Risky(path, f"a symlink to {target!r}, into .git"))
    return found


def _refusal(branch: str, run_id: str, risky: list[Risky]) -> str:
    shown = "; ".join(map(str, risky[:8])) + (f"; +{len(risky) - 8} more" if len(risky) > 8 else "")
    names = " ".join(f"--allow {shlex.quote(r.path)}" for r in risky[:8])
    return (f"{branch} changes files that run or steer programs by themselves: {shown}. Review "
            f"them (git diff HEAD...{branch}), then allow each by name: `orchestrate apply "
            f"{run_id} {names}`, or merge by hand (nothing was changed)")


def _hooks_dir(repo: Path) -> str | None:
    # the user's own setting: every git call of ours sets core.hooksPath=/dev/null on its command
    # line (no hooks run), which a plain `config --get` would read back instead
    scoped = _git(repo, "config", "--show-scope", "--get-all", "core.hooksPath")
    values = [line.split("\t", 1)[1] for line in scoped.stdout.splitlines()
              if "\t" in line and not line.startswith("command\t")]
    if scoped.returncode not in (0, 1):  # git < 2.26 has no --show-scope: each file in turn
        values = [v for scope in ("--system", "--global", "--local") for v in
                  _git(repo, "config", scope, "--get", "core.hooksPath").stdout.splitlines()]
    configured = values[-1].strip() if values else ""
    if not configured or os.path.isabs(configured):
        real = os.path.realpath(configured) if configured else ""
        top = os.path.realpath(repo)
        if real.startswith(top + os.sep):
            return os.path.relpath(real, top)
        return None
    return configured.rstrip("/").removeprefix("./") or None


def _into_git_dir(link: str, target: str) -> bool:
    joined = os.path.normpath(os.path.join(os.path.dirname(link), target))
    return unsafe_path(joined) is not None


def _inside(link: str, target: str) -> bool:
    joined = os.path.normpath(os.path.join(os.path.dirname(link), target))
    return not (joined == ".." or joined.startswith("../"))


def apply(repo: Path, run_id: str, *, allow: tuple[str, ...] = (),
          allow_git_config: bool = False, guard_ci: bool | None = None) -> str:
    """Merge the run's branch into the user's current branch; refuse on dirt or conflicts.

    A branch that changes files that run by themselves (see ``risky_changes``) is refused unless
    each such path is named in ``allow`` (a path, or a directory holding it), or
    ``allow_git_config`` lets all of them through; hooks never run during the merge.
    ``guard_ci`` adds CI workflow files (default: ``git config orchestrate.guardCi``).
    """
    top, branch = _applicable(repo, run_id)
    if _git(top, "status", "--porcelain", "--untracked-files=no").stdout.strip():
        raise UsageError(
            "your checkout has uncommitted changes to tracked files; commit or stash them, "
            f"then run `orchestrate apply {run_id}` again (nothing was changed)"
        )
    current = _git(top, "symbolic-ref", "--short", "-q", "HEAD").stdout.strip()
    if not current:
        raise UsageError("HEAD is detached; check out the branch to merge into first")
    ahead = _git(top, "rev-list", "--count", f"HEAD..{branch}").stdout.strip()
    if ahead in ("", "0"):
        raise UsageError(f"{branch} has nothing that {current} does not already have")
    if guard_ci is None:
        guard_ci = _git(top, "config", "--type=bool", "--get",
                        "orchestrate.guardCi").stdout.strip() == "true"
    risky = [] if allow_git_config else [
        r for r in risky_changes(top, branch, ci=guard_ci) if not allowed(r.path, allow)]
    if risky:
        raise UsageError(_refusal(branch, run_id, risky))
    has_identity = bool(_git(top, "config", "user.email").stdout.strip())
    merge = _git(top, "merge", "--no-ff", "--no-edit", "-m",
                 f"Merge {branch} (orchestrate run {run_id})", "--", branch,
                 user_identity=has_identity)
    if merge.returncode != 0:
        conflicts = _git(top, "diff", "--name-only", "--diff-filter=U").stdout.split()
        _git(top, "merge", "--abort")
        where = f" in {', '.join(conflicts)}" if conflicts else ""
        detail = "" if conflicts else f": {merge.stderr.strip() or merge.stdout.strip()}"
        raise UsageError(
            f"merging {branch} into {current} conflicts{where}{detail}; nothing was changed "
            f"(merge it by hand: git merge {branch})"
        )
    return _git(top, "rev-parse", "HEAD", check=True).stdout.strip()


def _applicable(repo: Path, run_id: str) -> tuple[Path, str]:
    """The repository and the branch to merge: a run of this checkout's, or a fleet run's
    branch fetched from the team's origin (``orchestrate/<run-id>``, local or ``origin/``)."""
    try:
        ws = Workspace.open(repo, run_id, reattach=False)
    except UsageError:
        top = top_of(repo)
        for ref in (f"orchestrate/{run_id}", f"origin/orchestrate/{run_id}"):
            if _git(top, "rev-parse", "--verify", "-q", f"{ref}^{{commit}}").returncode == 0:
                return top, ref
        raise
    if not ws.branch:
        raise UsageError(f"run {run_id} is an `orchestrate explore` run: it changed nothing, so "
                         "there is nothing to apply")
    if is_running(ws.run_dir):
        raise UsageError(f"run {run_id} is still running; wait for it to finish")
    return ws.repo, ws.branch


@dataclass(frozen=True)
class RunDetails:
    """Everything recorded about one run: its report (if it ended), sessions and calls."""

    run_id: str
    state: str
    report: dict
    sessions: list[SessionNode]
    calls: list[CallFinished]
    events: int

    def document(self) -> dict[str, Any]:
        """As ``orchestrate show --json`` prints it."""
        return {"run_id": self.run_id, "state": self.state, "report": self.report,
                "calls": [c.model_dump(mode="json") for c in self.calls],
                "sessions": [s.model_dump(mode="json") for s in self.sessions]}


def run_details(repo: Path, run_id: str) -> RunDetails:
    """What ``orchestrate show`` prints, read back from the run's report and events."""
    from orchestrator.session.tree import session_tree

    ws = Workspace.open(repo, run_id, reattach=False)
    events = read_events(ws.run_dir / "events.jsonl")
    report = _report(ws.run_dir)
    state = "running" if is_running(ws.run_dir) else report.get("status", "stopped")
    calls = [e for e in events if isinstance(e, CallFinished)]
    return RunDetails(run_id, state, report, session_tree(events), calls, len(events))
