"""Read-only git history for explorers: ``git log`` and ``git blame``, rendered for a model.

Only read commands run here, as ``git -C root ...`` with a timeout, no optional locks, no pager,
literal pathspecs and every path jailed and placed after ``--``.
"""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from ..errors import ConfigError, ToolError
from .base import Tool
from .jail import Jail

MAX_BLAME_LINES = 400
_HEADER = re.compile(r"^([0-9a-f]{40,64}) \d+ (\d+)")


class GitLogArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str | None = Field(None, description="Only commits touching this path.")
    max_count: int = Field(20, ge=1, le=200)


class GitBlameArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")
    path: str = Field(description="Repo-relative file path.")
    start_line: int = Field(ge=1)
    end_line: int = Field(ge=1)


def git_tools(root: Path) -> list[Tool]:
    """``git_log`` and ``git_blame`` as read-only tools on the repository at ``root``."""
    return [
        Tool("git_log", _LOG_DOC, GitLogArgs, lambda a: git_log(root, a.path, a.max_count)),
        Tool(
            "git_blame",
            _BLAME_DOC,
            GitBlameArgs,
            lambda a: git_blame(root, a.path, a.start_line, a.end_line),
        ),
    ]


def git_log(root: Path, path: str | None = None, max_count: int = 20) -> str:
    """One line per commit, newest first: ``sha date author: subject``."""
    args = ["log", f"--max-count={max(1, min(max_count, 200))}", "--date=short"]
    args += ["--no-show-signature", "--format=%h %ad %an: %s", "--"]
    rel = _jailed(root, path) if path else None
    out = _git(root, *args, *([rel] if rel else []))
    if not out.strip():
        return f"no commits touch {rel}" if rel else "no commits"
    return out.rstrip("\n")


def git_blame(root: Path, path: str, start: int, end: int) -> str:
    """``line| sha author: text`` for lines ``start``..``end`` of ``path`` (working tree)."""
    if start < 1 or end < start:
        raise ToolError(f"invalid line range {start}-{end}; need 1 <= start_line <= end_line")
    rel = _jailed(root, path)
    if not (Jail(root).root / rel).is_file():
        raise ToolError(f"no such file: {rel}")
    last = min(end, start + MAX_BLAME_LINES - 1)
    out = _git(root, "blame", "--porcelain", "--no-textconv", "-L", f"{start},{last}", "--", rel)
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


def _jailed(root: Path, path: str) -> str:
    jail = Jail(root)
    return jail.relative(jail.resolve(path))


def _git(root: Path, *args: str, timeout: float = 20) -> str:
    env = {
        **os.environ,
        "GIT_OPTIONAL_LOCKS": "0",
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_LITERAL_PATHSPECS": "1",
        "LC_ALL": "C",
    }
    cmd = ["git", "-C", str(root), "--no-pager", *args]
    try:
        proc = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, timeout=timeout, env=env
        )
    except FileNotFoundError:
        raise ConfigError("git was not found on PATH") from None
    except subprocess.TimeoutExpired:
        raise ToolError(f"git {args[0]} timed out after {timeout:g}s; narrow the path") from None
    if proc.returncode:
        message = proc.stderr.decode("utf-8", "replace").strip().splitlines()[-3:]
        raise ToolError(f"git {args[0]} failed: " + " ".join(message))
    return proc.stdout.decode("utf-8", "replace")


_LOG_DOC = "Recent commits, one per line: short sha, date, author, subject; optionally for a path."
_BLAME_DOC = "Last change of each line in start_line..end_line of path: 'line| sha author: text'."
