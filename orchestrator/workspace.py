"""Per-run git worktrees: where agents work so the user's checkout is never touched.

A run lives in ``<repo>/workspaces/<run_id>/``: the run's artefacts (events, report, patch) and a
``worktree/`` checked out on branch ``orchestrate/<run_id>`` from the user's HEAD. This module owns
creating, committing in, diffing, listing and removing those worktrees. It never modifies the
user's files, index, current branch or stash; its only write to the user's repository outside the
worktree machinery is appending ``/workspaces/`` and ``/.orchestrate/`` to ``.git/info/exclude``.
Every git call runs with hooks disabled, a fixed identity and optional locks off.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import secrets
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import UsageError

EXCLUDE_LINES = ("/workspaces/", "/.orchestrate/")
DIRTY_COMMIT_MESSAGE = "orchestrate: include uncommitted changes"
_NAME, _EMAIL = "orchestrate", "orchestrate@localhost"
_META = "workspace.json"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")
# Variables that would point git at another repository or index than the one we name.
_GIT_LOCATION_VARS = (
    "GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_COMMON_DIR",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_NAMESPACE", "GIT_PREFIX",
)
_CONFIG = (
    "-c", "core.hooksPath=/dev/null", "-c", "commit.gpgSign=false", "-c", f"user.name={_NAME}",
    "-c", f"user.email={_EMAIL}", "-c", "core.quotePath=false",
)


class GitError(RuntimeError):
    """A git command failed unexpectedly; carries git's own message."""


def new_run_id() -> str:
    """A sortable, collision-resistant id such as ``20261130-053944-ab12cd`` (UTC)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass(frozen=True)
class Workspace:
    """One run's worktree and artefact directory inside the user's repository."""

    repo: Path
    run_id: str
    run_dir: Path
    worktree: Path
    branch: str
    base_commit: str
    # The commit agents started from: base_commit, or the commit holding the user's dirty state.
    start_commit: str = ""
    dirty: bool = False
    included_dirty: bool = False

    @classmethod
    def create(cls, repo: Path, run_id: str, *, include_dirty: bool = False) -> Workspace:
        """Make ``workspaces/<run_id>/worktree`` on a new branch at the user's HEAD."""
        top = _toplevel(repo)
        _check_run_id(run_id)
        base = _head(top)
        run_dir = top / "workspaces" / run_id
        worktree = run_dir / "worktree"
        branch = f"orchestrate/{run_id}"
        if _ref_exists(top, branch) or worktree.exists():
            raise UsageError(f"run {run_id} already exists in {top}")
        _ensure_excluded(top)
        dirty = bool(_dirty_paths(top))
        run_dir.mkdir(parents=True, exist_ok=True)
        _add_worktree(top, worktree, branch, base)
        start = base
        if include_dirty and dirty:
            _copy_dirty_state(top, worktree)
            start = _commit(worktree, DIRTY_COMMIT_MESSAGE) or base
        ws = cls(top, run_id, run_dir, worktree, branch, base, start, dirty, start != base)
        ws._save()
        return ws

    @classmethod
    def open(cls, repo: Path, run_id: str, *, reattach: bool = True) -> Workspace:
        """Re-open an existing run; with ``reattach`` a removed worktree is checked out again."""
        top = _toplevel(repo)
        _check_run_id(run_id)
        ws = _load(top, run_id)
        if ws is None:
            raise UsageError(f"unknown run id {run_id} in {top} (see `orchestrate list`)")
        if reattach and not (ws.worktree / ".git").exists():
            if not _ref_exists(top, ws.branch):
                raise UsageError(f"run {run_id}: branch {ws.branch} no longer exists")
            _git(top, "worktree", "prune")
            if ws.worktree.exists():
                shutil.rmtree(ws.worktree)
            _retry_on_lock(lambda: _git(top, "worktree", "add", str(ws.worktree), ws.branch))
        return ws

    def commit(self, message: str) -> str | None:
        """Stage everything in the worktree and commit; None when there was nothing to commit."""
        return _commit(self.worktree, message)

    def diff_stat(self) -> str:
        """``git diff --stat`` of all work (committed or not) against ``base_commit``."""
        return self._diff("--stat").decode("utf-8", "replace")

    def patch(self) -> str:
        """A binary-safe unified diff of all work against ``base_commit``, for ``git apply``."""
        return self._diff("--binary", "--full-index").decode("utf-8", "surrogateescape")

    def changed_files(self) -> list[str]:
        """Paths (relative to the repository) that differ from ``base_commit``."""
        out = self._diff("--name-only", "-z").decode("utf-8", "surrogateescape")
        return [p for p in out.split("\0") if p]

    def write_patch(self) -> Path:
        """Write ``patch.diff`` into the run directory and return its path."""
        path = self.run_dir / "patch.diff"
        path.write_bytes(self._diff("--binary", "--full-index"))
        return path

    def remove(self, keep_branch: bool = True) -> None:
        """Delete the worktree (even if dirty); the artefacts and, by default, the branch stay."""
        if (self.worktree / ".git").exists():
            result = _git(
                self.repo, "worktree", "remove", "--force", str(self.worktree), check=False
            )
            if result.returncode != 0 and self.worktree.exists():
                shutil.rmtree(self.worktree)
        elif self.worktree.exists():
            shutil.rmtree(self.worktree)
        _git(self.repo, "worktree", "prune")
        if not keep_branch and _ref_exists(self.repo, self.branch):
            _git(self.repo, "branch", "-D", self.branch)

    def _diff(self, *flags: str) -> bytes:
        # A throwaway index so untracked files show up without touching the worktree's index,
        # which a builder's own git commands may be using at the same time.
        index = Path(_git(self.worktree, "rev-parse", "--git-path", "index").stdout.strip())
        if not index.is_absolute():
            index = self.worktree / index
        with tempfile.TemporaryDirectory(prefix="orchestrate-idx-") as tmp:
            tmp_index = Path(tmp) / "index"
            if index.exists():
                shutil.copyfile(index, tmp_index)
            env = {"GIT_INDEX_FILE": str(tmp_index)}
            _git(self.worktree, "add", "-A", env=env)
            return _git(
                self.worktree, "diff", "--cached", "--no-color", "--no-ext-diff", "--no-textconv",
                "--src-prefix=a/", "--dst-prefix=b/", *flags, self.base_commit, "--",
                env=env, text=False,
            ).stdout

    def _save(self) -> None:
        meta = {
            "run_id": self.run_id, "branch": self.branch, "base_commit": self.base_commit,
            "start_commit": self.start_commit, "dirty": self.dirty,
            "included_dirty": self.included_dirty,
        }
        (self.run_dir / _META).write_text(json.dumps(meta, indent=2) + "\n")


def list_workspaces(repo: Path) -> list[Workspace]:
    """Every run recorded under ``<repo>/workspaces``, oldest first."""
    top = _toplevel(repo)
    root = top / "workspaces"
    if not root.is_dir():
        return []
    found = (_load(top, p.name) for p in sorted(root.iterdir()) if (p / _META).is_file())
    return [ws for ws in found if ws is not None]


def _load(top: Path, run_id: str) -> Workspace | None:
    run_dir = top / "workspaces" / run_id
    try:
        meta = json.loads((run_dir / _META).read_text())
    except (OSError, ValueError):
        return None
    base = meta["base_commit"]
    return Workspace(
        top, run_id, run_dir, run_dir / "worktree", meta.get("branch", f"orchestrate/{run_id}"),
        base, meta.get("start_commit") or base, bool(meta.get("dirty")),
        bool(meta.get("included_dirty")),
    )


def _git(
    cwd: Path, *args: str, check: bool = True, env: dict[str, str] | None = None,
    text: bool = True, input: bytes | None = None,
) -> subprocess.CompletedProcess[Any]:
    full_env = {k: v for k, v in os.environ.items() if k not in _GIT_LOCATION_VARS}
    full_env.update(
        GIT_TERMINAL_PROMPT="0", GIT_OPTIONAL_LOCKS="0", LC_ALL="C",
        GIT_AUTHOR_NAME=_NAME, GIT_AUTHOR_EMAIL=_EMAIL,
        GIT_COMMITTER_NAME=_NAME, GIT_COMMITTER_EMAIL=_EMAIL,
    )
    full_env.update(env or {})
    result: subprocess.CompletedProcess[Any] = subprocess.run(
        ["git", *_CONFIG, *args], cwd=cwd, env=full_env, input=input,
        stdin=None if input is not None else subprocess.DEVNULL, capture_output=True,
    )
    if text:
        result.stdout = result.stdout.decode("utf-8", "surrogateescape")
    stderr = result.stderr.decode("utf-8", "replace")
    result.stderr = stderr
    if check and result.returncode != 0:
        raise GitError(f"git {' '.join(args[:3])} failed: {stderr.strip()}")
    return result


def _toplevel(repo: Path) -> Path:
    path = Path(repo).expanduser()
    if not path.is_dir():
        raise UsageError(f"not a git repository: {path} (run inside a repository or pass --repo)")
    result = _git(path, "rev-parse", "--show-toplevel", check=False)
    if result.returncode != 0 or not result.stdout.strip():
        raise UsageError(f"not a git repository: {path} (run inside a repository or pass --repo)")
    return Path(result.stdout.strip()).resolve()


def _head(top: Path) -> str:
    result = _git(top, "rev-parse", "--verify", "--quiet", "HEAD^{commit}", check=False)
    if result.returncode != 0:
        raise UsageError(f"repository has no commits yet: {top} (make a first commit)")
    return result.stdout.strip()


def _check_run_id(run_id: str) -> None:
    if not _RUN_ID.match(run_id) or ".." in run_id or run_id.endswith(".lock"):
        raise UsageError(f"invalid run id {run_id!r}: use letters, digits, '.', '_' and '-'")


def _ref_exists(top: Path, branch: str) -> bool:
    return _git(top, "show-ref", "--verify", "--quiet", f"refs/heads/{branch}", check=False) \
        .returncode == 0


def _ensure_excluded(top: Path) -> None:
    common = Path(_git(top, "rev-parse", "--git-common-dir").stdout.strip())
    if not common.is_absolute():
        common = top / common
    exclude = common / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    # flock serialises concurrent runs so neither appends a line the other just added.
    with open(exclude, "a+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.seek(0)
            current = fh.read()
            present = {line.strip() for line in current.splitlines()}
            missing = [line for line in EXCLUDE_LINES if line not in present]
            if missing:
                prefix = "\n" if current and not current.endswith("\n") else ""
                fh.write(prefix + "".join(f"{line}\n" for line in missing))
                fh.flush()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _dirty_paths(top: Path) -> list[str]:
    out = _git(top, "status", "--porcelain", "-z", "--untracked-files=all",
               "--ignore-submodules=all").stdout
    return [p for p in out.split("\0") if p]


def _add_worktree(top: Path, worktree: Path, branch: str, base: str) -> None:
    def attempt() -> None:
        result = _git(top, "worktree", "add", "-b", branch, str(worktree), base, check=False)
        if result.returncode != 0:
            # A half-finished attempt must not block the retry. No prune here: it could race
            # with another run's worktree that is still being created.
            if worktree.exists() and not (worktree / ".git").exists():
                shutil.rmtree(worktree, ignore_errors=True)
            if _ref_exists(top, branch) and not worktree.exists():
                _git(top, "branch", "-D", branch, check=False)
            raise GitError(f"git worktree add failed: {result.stderr.strip()}")

    _retry_on_lock(attempt)


def _retry_on_lock(action: Callable[[], object], attempts: int = 20) -> None:
    for i in range(attempts):
        try:
            action()
            return
        except GitError as exc:
            # Concurrent adds collide on lock files and on half-written .git/worktrees entries.
            message = str(exc).lower()
            transient = "lock" in message or "worktrees/" in message
            if not transient or i == attempts - 1:
                raise
            time.sleep(0.05 + secrets.randbelow(100) / 1000 * (i + 1))


def _copy_dirty_state(top: Path, worktree: Path) -> None:
    diff = _git(
        top, "diff", "HEAD", "--binary", "--full-index", "--no-color", "--no-ext-diff",
        "--no-textconv", "--ignore-submodules=all", "--src-prefix=a/", "--dst-prefix=b/",
        text=False,
    ).stdout
    if diff:
        _git(worktree, "apply", "--whitespace=nowarn", "-", input=diff)
    out = _git(top, "ls-files", "--others", "--exclude-standard", "-z").stdout
    for rel in (p for p in out.split("\0") if p and not p.endswith("/")):
        src, dst = top / rel, worktree / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            shutil.copy2(src, dst)


def _commit(worktree: Path, message: str) -> str | None:
    _git(worktree, "add", "-A")
    if _git(worktree, "diff", "--cached", "--quiet", check=False).returncode == 0:
        return None
    _git(worktree, "commit", "-q", "--no-verify", "-m", message)
    return _git(worktree, "rev-parse", "HEAD").stdout.strip()
