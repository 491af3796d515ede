"""Read-only git history for explorers: ``git log`` and ``git blame``, rendered for a model.

History is read from a trusted repository (``GitHistory.git_dir``: the user's, never a ``.git``
the builder can write) at a fixed revision, through ``gitsafe`` (no hooks, no drivers, no pager,
no secrets), with literal pathspecs and every path jailed and placed after ``--``.
"""

from __future__ import annotations

import functools
import re
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import GitError, PolicyViolation, ToolError
from orchestrator.gitsafe import git
from orchestrator.tools.base import Tool
from orchestrator.tools.jail import Jail, open_regular
from orchestrator.tools.secretfiles import DEFAULT, SecretFiles

MAX_BLAME_LINES = 400
_listing = threading.Lock()  # one listing of a tree's tracked files at a time (``_tracked``)
_HEADER = re.compile(r"^([0-9a-f]{40,64}) \d+ (\d+)")


@dataclass(frozen=True)
class GitHistory:
    """Where history comes from: ``git_dir`` (None: ``root``'s own repository) at ``rev``."""

    root: Path
    git_dir: Path | None = None
    rev: str = "HEAD"


class GitLogArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | None = Field(None, description="Only commits touching this path.")
    max_count: int = Field(20, ge=1, le=200)


class GitBlameArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="Repo-relative file path.")
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)


def git_tools(history: GitHistory, secrets: SecretFiles = DEFAULT) -> list[Tool]:
    """``git_log`` and ``git_blame`` as read-only tools over ``history``; ``blame`` shows a
    file's lines, so it refuses ``secrets`` as ``read`` does."""
    return [
        Tool("git_log", _LOG_DOC, GitLogArgs,
             lambda a: git_log(history.root, a.path, a.max_count, history=history)),
        Tool(
            "git_blame",
            _BLAME_DOC,
            GitBlameArgs,
            lambda a: git_blame(history.root, a.path, a.start_line, a.end_line, history=history,
                                secrets=secrets),
        ),
    ]


def git_log(root: Path, path: str | None = None, max_count: int = 20, *,
            history: GitHistory | None = None) -> str:
    """One line per commit, newest first: ``sha date author: subject``."""
    h = history or GitHistory(root)
    args = ["log", f"--max-count={max(1, min(max_count, 200))}", "--date=short"]
    args += ["--no-show-signature", "--format=%h %ad %an: %s", "--end-of-options", h.rev, "--"]
    rel = _jailed(root, path) if path else None
    out = _git(h, *args, *([rel] if rel else []))
    if not out.strip():
        return f"no commits touch {rel}" if rel else "no commits"
    return out.rstrip("\n")


def git_blame(root: Path, path: str, start: int, end: int, *,
              history: GitHistory | None = None, secrets: SecretFiles = DEFAULT) -> str:
    """``line| sha author: text`` for lines ``start``..``end`` of ``path`` (working tree)."""
    h = history or GitHistory(root)
    if start < 1 or end < start:
        raise ToolError(f"invalid line range {start}-{end}; need 1 <= start_line <= end_line")
    jail = Jail(root)
    file = jail.resolve(path)
    rel = jail.relative(file)
    if secrets.secret(rel):  # blame prints the lines: a secret file's are not shown
        raise PolicyViolation(secrets.refusal(rel))
    if not file.is_file():
        raise ToolError(f"no such file: {rel}")
    open_regular(file, rel).close()  # refuses FIFOs and devices before git reads the file
    last = min(end, start + MAX_BLAME_LINES - 1)
    # git < 2.41 takes --contents only against HEAD: blame in a private view whose HEAD is rev
    view = GitHistory(h.root, _view_at(h), "HEAD") if h.rev != "HEAD" else h
    out = _git(view, "blame", "--porcelain", "--no-textconv", "-L", f"{start},{last}",
               "--contents", str(file), "--", rel)
    lines = _parse_porcelain(out)
    if last < end:
        lines.append(f"(capped at {MAX_BLAME_LINES} lines; blame from line {last + 1} for more)")
    return "\n".join(lines)


def _parse_porcelain(out: str) -> list[str]:
    authors: dict[str, str] = {}
    rows: list[str] = []
    sha, line_no = "", 0
    for line in out.split("\n"):  # not splitlines(): source lines may hold \f, \x1c, ...
        if line.startswith("\t"):
            rows.append(f"{line_no:>4}| {sha[:8]} {authors.get(sha, '?')}: {line[1:]}")
        elif header := _HEADER.match(line):
            sha, line_no = header.group(1), int(header.group(2))
        elif line.startswith("author ") and sha:
            authors.setdefault(sha, line[len("author ") :])
    return rows


def is_ignored(h: GitHistory, rel: str) -> bool:
    """Whether git ignores the repository path ``rel`` of ``h``'s tree (its ``.gitignore`` files
    and the trusted repository's excludes); False where there is no repository. A tracked file
    is never ignored: those are known from one listing, so reading them costs no git call."""
    if rel in _tracked(h.root, h.git_dir):
        return False
    try:
        proc = git("check-ignore", "-q", "--", rel, cwd=h.root, git_dir=h.git_dir,
                   work_tree=h.root if h.git_dir is not None else None, timeout=20, check=False)
    except GitError:
        return False
    return proc.returncode == 0


def _tracked(root: Path, git_dir: Path | None) -> frozenset[str]:
    """The files the (trusted) index tracks, listed once per tree (parallel explorers wait
    for the one listing)."""
    with _listing:
        return _tracked_files(root, git_dir)


@functools.lru_cache(maxsize=16)
def _tracked_files(root: Path, git_dir: Path | None) -> frozenset[str]:
    try:
        proc = git("ls-files", "-z", cwd=root, git_dir=git_dir,
                   work_tree=root if git_dir is not None else None, timeout=20, check=False)
    except GitError:
        return frozenset()
    return frozenset(proc.stdout.split("\0")) if proc.returncode == 0 else frozenset()


def _jailed(root: Path, path: str) -> str:
    jail = Jail(root)
    return jail.relative(jail.resolve(path))


def _view_at(h: GitHistory) -> Path:
    """A private, empty repository borrowing ``h``'s objects, its HEAD detached at ``h.rev``."""
    source = h.git_dir or Path(str(_git(h, "rev-parse", "--absolute-git-dir")).strip())
    sha = str(_git(h, "rev-parse", "--verify", "--end-of-options", f"{h.rev}^{{commit}}")).strip()
    return _view(str(source), sha)


@functools.lru_cache(maxsize=32)
def _view(source: str, sha: str) -> Path:
    # not bare: in a bare repository blame takes HEAD as a final commit and refuses --contents
    path = Path(tempfile.mkdtemp(prefix="orchestrate-history-")) / "git"
    git("init", "-q", "--template=", "--separate-git-dir", str(path),
        str(path.parent / "tree"), cwd=path.parent)
    (path / "objects" / "info").mkdir(parents=True, exist_ok=True)
    (path / "objects" / "info" / "alternates").write_text(f"{source}/objects\n")
    (path / "HEAD").write_text(sha + "\n")
    return path


def _git(h: GitHistory, *args: str, timeout: float = 20) -> str:
    try:
        proc = git("--literal-pathspecs", *args, cwd=h.root, git_dir=h.git_dir,
                   work_tree=h.root if h.git_dir is not None else None, timeout=timeout,
                   check=False)
    except GitError as exc:
        raise ToolError(f"{exc}; narrow the path") from None
    if proc.returncode:
        message = proc.stderr.strip().splitlines()[-3:]
        raise ToolError(f"git {args[0]} failed: " + " ".join(message))
    return str(proc.stdout)


_LOG_DOC = "Recent commits, one per line: short sha, date, author, subject; optionally for a path."
_BLAME_DOC = "Last change of each line in start_line..end_line of path: 'line| sha author: text'."
