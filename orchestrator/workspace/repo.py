"""The target repository: finding its top level (with one clear line when there is none), its
HEAD, its uncommitted state, and the lines a run keeps in its ``.git/info/exclude``.

Kept apart from the API so that quick commands (``orchestrate roles``) find the repository
without importing the engine. Nothing here writes to the user's files, index or branches; the
exclude file is the one thing of theirs a run changes (``worktree.py``).
"""

from __future__ import annotations

import fcntl
import os
import shutil
from pathlib import Path
from typing import NamedTuple

from orchestrator.errors import UsageError
from orchestrator.gitsafe import common_dir, git
from orchestrator.gitsafe import toplevel as git_toplevel
from orchestrator.workspace.tree import DIFF_FLAGS

# run state only: a team commits .orchestrate/agents/; older runs kept their SQLite files in
# .orchestrate/ itself
EXCLUDE_LINES = ("/workspaces/", "/.orchestrate/state/", "/.orchestrate/*.sqlite*",
                 "/.orchestrate/*.lock")
_OLD_EXCLUDE = "/.orchestrate/"  # what versions before 0.2 wrote: it hid the agents too


def repo_root(path: str | os.PathLike[str] | None) -> Path:
    """The top level of the git repository at or above ``path``; a clear error otherwise."""
    start_at = _start(path)
    proc = git("rev-parse", "--show-toplevel", cwd=start_at if start_at.is_dir() else start_at.parent,
               check=False)
    if proc.returncode != 0:
        raise UsageError(
            f"not a git repository: {start_at} (run inside a repository or pass --repo PATH)"
        )
    return Path(proc.stdout.strip())


def find_repo(path: str | os.PathLike[str] | None) -> tuple[Path, Probed | None]:
    """``repo_root(path)`` and, when the repository has a commit, ``probe``'s word on it: one
    git call then."""
    start_at = _start(path)
    probed = _probed(start_at if start_at.is_dir() else start_at.parent)
    return (probed.top, probed) if probed is not None else (repo_root(path), None)


def _start(path: str | os.PathLike[str] | None) -> Path:
    start_at = Path(path or ".").resolve()
    if not start_at.exists():
        raise UsageError(f"repository path does not exist: {start_at}")
    return start_at


def top_of(repo: Path) -> Path:
    """The top level of the repository at ``repo``; a clear error if there is none."""
    path = Path(repo).expanduser()
    top = git_toplevel(path) if path.is_dir() else None
    if top is None:
        raise UsageError(f"not a git repository: {path} (run inside a repository or pass --repo)")
    return top


class Probed(NamedTuple):
    """A repository as one git call saw it: top level, shared ``.git``, HEAD and its tree."""

    top: Path
    git_dir: Path
    head: str
    tree: str  # "" when not asked


def probe(path: Path) -> Probed:
    """The repository's top level, its shared ``.git``, its HEAD commit and that commit's tree,
    in one git call; a clear error if it is no repository or has no commit yet."""
    probed = _probed(path) if path.is_dir() else None
    if probed is not None:
        return probed
    top = top_of(path)  # not a repository, or no commit yet: say which
    return Probed(top, common_dir(top), head_commit(top), "")


def _probed(path: Path) -> Probed | None:
    found = git("rev-parse", "--show-toplevel", "--git-common-dir", "HEAD^{commit}",
                "HEAD^{tree}", cwd=path, check=False)
    lines = found.stdout.splitlines()
    if found.returncode != 0 or len(lines) != 4:
        return None
    common = Path(lines[1])
    return Probed(Path(lines[0]), (common if common.is_absolute() else path / common).resolve(),
                  lines[2], lines[3])


def head_commit(top: Path) -> str:
    """The repository's HEAD commit; a clear error if it has none yet."""
    result = git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=top, check=False)
    if result.returncode != 0:
        raise UsageError(f"repository has no commits yet: {top} (make a first commit)")
    return result.stdout.strip()


def ensure_excluded(top: Path, git_dir: Path | None = None) -> None:
    """Keep ``EXCLUDE_LINES`` in the repository's ``info/exclude`` (and the old line out)."""
    exclude = (git_dir or common_dir(top)) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    # flock serialises concurrent runs so neither adds a line the other just added.
    with open(exclude, "a+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.seek(0)
            current = fh.read()
            lines = current.splitlines()
            kept = [line for line in lines if line.strip() != _OLD_EXCLUDE]
            present = {line.strip() for line in kept}
            missing = [line for line in EXCLUDE_LINES if line not in present]
            if missing or len(kept) != len(lines):
                fh.seek(0)
                fh.truncate()
                fh.write("".join(f"{line}\n" for line in [*kept, *missing]))
                fh.flush()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def dirty_paths(top: Path) -> list[str]:
    """What ``git status`` lists: changed, staged and untracked paths."""
    out = git("status", "--porcelain", "-z", "--untracked-files=all", "--ignore-submodules=all",
              cwd=top).stdout
    return [p for p in out.split("\0") if p]


def copy_dirty_state(top: Path, worktree: Path, git_dir: Path) -> None:
    """Carry the checkout's uncommitted changes and untracked files into ``worktree``."""
    diff = git("diff", "HEAD", "--binary", "--full-index", *DIFF_FLAGS, cwd=top,
               text=False).stdout
    if diff:
        git("apply", "--whitespace=nowarn", "-", git_dir=git_dir, work_tree=worktree,
            cwd=worktree, input=diff)
    out = git("ls-files", "--others", "--exclude-standard", "-z", cwd=top).stdout
    for rel in (p for p in out.split("\0") if p and not p.endswith("/")):
        src, dst = top / rel, worktree / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            shutil.copy2(src, dst)


def object_stores(objects: Path, depth: int = 0) -> list[Path]:
    """``objects`` and, recursively, the stores its ``info/alternates`` names."""
    found = [objects.resolve()]
    try:
        lines = (objects / "info" / "alternates").read_text(encoding="utf-8").splitlines()
    except OSError:
        return found
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or depth > 4:
            continue
        alt = Path(line) if os.path.isabs(line) else objects / line
        if alt.is_dir():
            found += object_stores(alt, depth + 1)
    return found
