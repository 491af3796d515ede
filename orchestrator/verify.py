"""Mechanical citation checks: a claim survives only if a cited quote really is in the cited lines.

A ``FileSource`` supplies file lines (from the working tree through the path jail, or from a
commit through one long-lived ``git cat-file --batch``), numbered exactly as the ``read`` tool
numbers them. ``check_citation`` compares whitespace-normalised text; ``verify_findings`` keeps
the claims with at least one valid citation and says why the rest were dropped. Sources cache each
file's lines and normalised lines, so checking is a dictionary lookup plus a substring search.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Protocol

from .errors import ToolError, UsageError
from .gitsafe import git, git_env
from .state import Citation, Claim, Findings
from .tools.jail import Jail, open_regular
from .tools.search import decode_lines

_READ_PREFIX = re.compile(r"(?m)^[ \t]*\d+[ \t]*\|[ \t]?")  # "  12| " from the read tool
_SEARCH_PREFIX = re.compile(r"(?m)^[^\s:]+:\d+[:-][ \t]?")  # "src/a.py:12: " from search
_BATCH_HEADER = re.compile(rb"^[0-9a-f]{40,64} (\w+) (\d+)\n$")
_ELLIPSES = ("...", "…")


def normalize_ws(s: str) -> str:
    """Every run of whitespace collapsed to one space, ends stripped."""
    return " ".join(s.split())


class FileSource(Protocol):
    """Where cited files are read from; ``None`` means there is no such file."""

    def lines(self, path: str) -> list[str] | None: ...


class _File:
    """One file's lines and their normalised forms, computed once."""

    __slots__ = ("lines", "norm")

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.norm = [normalize_ws(line) for line in lines]

    def text(self, start: int, end: int) -> str:
        return " ".join(n for n in self.norm[start - 1 : end] if n)


class _CachedSource:
    """Caches loaded files; ``_load`` returns a file's bytes or None."""

    def __init__(self) -> None:
        self._files: dict[str, _File | None] = {}
        self._lock = threading.Lock()

    def lines(self, path: str) -> list[str] | None:
        f = self.file(path)
        return None if f is None else f.lines

    def file(self, path: str) -> _File | None:
        if path in self._files:
            return self._files[path]
        data = self._load(path)
        loaded = None if data is None else _File(decode_lines(data))
        with self._lock:  # two threads may load the same file; the first result wins
            return self._files.setdefault(path, loaded)

    def _load(self, path: str) -> bytes | None:
        raise NotImplementedError


class DirSource(_CachedSource):
    """Files as they are now in the directory ``root``, read through the path jail."""

    def __init__(self, root: Path):
        super().__init__()
        self.jail = Jail(root)

    def _load(self, path: str) -> bytes | None:
        try:
            resolved = self.jail.resolve(path)
            if not resolved.is_file():
                return None
            with open_regular(resolved) as fh:
                return fh.read()
        except (ToolError, OSError):
            return None


class GitCommitSource(_CachedSource):
    """Files as of ``commit`` in ``repo``, read by one long-lived ``git cat-file --batch``."""

    def __init__(self, repo: Path, commit: str):
        super().__init__()
        self.repo = Path(os.path.realpath(repo))
        self.commit = _rev_parse(self.repo, commit)
        self._proc: subprocess.Popen[bytes] | None = None
        self._io = threading.Lock()

    def _load(self, path: str) -> bytes | None:
        rel = _repo_relative(self.repo, path)
        if rel is None:
            return None
        with self._io:
            stdin, stdout = self._pipes()
            stdin.write(f"{self.commit}:{rel}\n".encode())
            stdin.flush()
            header = _BATCH_HEADER.match(stdout.readline())
            if header is None:
                return None  # "<object> missing" / "ambiguous"
            data = stdout.read(int(header.group(2)) + 1)[:-1]
        return data if header.group(1) == b"blob" else None

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        if self._proc is None or self._proc.poll() is not None:
            self._proc = subprocess.Popen(
                ["git", "-C", str(self.repo), "cat-file", "--batch"],
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
                env=git_env(),  # no secrets; cat-file runs no hooks or drivers
            )
        assert self._proc.stdin is not None and self._proc.stdout is not None
        return self._proc.stdin, self._proc.stdout

    def close(self) -> None:
        proc, self._proc = self._proc, None
        if proc is None:
            return
        proc.stdin.close()  # type: ignore[union-attr]
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        proc.stdout.close()  # type: ignore[union-attr]

    def __enter__(self) -> GitCommitSource:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_proc", None) is not None:
            self.close()


def _rev_parse(repo: Path, commit: str) -> str:
    proc = git("rev-parse", "--verify", "--quiet", f"{commit}^{{commit}}", cwd=repo, check=False)
    if proc.returncode:
        raise UsageError(f"unknown commit {commit!r} in {repo}")
    return str(proc.stdout).strip()


def _repo_relative(repo: Path, path: str) -> str | None:
    if "\n" in path or "\0" in path:
        return None
    if os.path.isabs(path):
        path = os.path.relpath(os.path.realpath(path), repo)
    rel = posixpath.normpath(path.replace(os.sep, "/"))
    if rel in (".", "..") or rel.startswith("../") or rel.startswith("/"):
        return None
    return rel


# --- checks ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Verified:
    """The claims that survived, with counts and the reasons for everything dropped."""

    claims: list[Claim]
    submitted: int
    verified: int
    dropped: int
    reasons: list[str]


def check_citation(src: FileSource, c: Citation) -> str | None:
    """None if the quote is in ``c.path`` lines ``start_line``..``end_line``, else why not."""
    f = src.file(c.path) if isinstance(src, _CachedSource) else _wrap(src.lines(c.path))
    if f is None:
        return f"no such file: {c.path}"
    if c.start_line > c.end_line:
        return "start_line > end_line"
    if c.start_line < 1 or c.end_line > len(f.lines):
        return f"lines {c.start_line}-{c.end_line} outside file ({len(f.lines)} lines)"
    haystack = f.text(c.start_line, c.end_line)
    empty = True
    for q in _quote_forms(c.quote):
        if q and q in haystack:
            return None
        empty = empty and not q
    where = f"{c.path}:{c.start_line}-{c.end_line}"
    return f"empty quote for {where}" if empty else f"quote not found in {where}"


def verify_findings(src: FileSource, findings: Findings, *, tool_calls: int) -> Verified:
    """Keep each claim's valid citations and the claims left with at least one."""
    submitted = len(findings.claims)
    if tool_calls == 0:
        return Verified([], submitted, 0, submitted, ["explorer made no tool call"])
    kept: list[Claim] = []
    reasons: list[str] = []
    for i, claim in enumerate(findings.claims, 1):
        valid = []
        for c in claim.citations:
            why = check_citation(src, c)
            if why is None:
                valid.append(c)
            else:
                reasons.append(f"claim {i}: {why}")
        if not valid:
            reasons.append(f"claim {i} dropped: {'no valid' if claim.citations else 'no'} citation")
        elif len(valid) < len(claim.citations):
            kept.append(claim.model_copy(update={"citations": valid}))
        else:
            kept.append(claim)
    return Verified(kept, submitted, len(kept), submitted - len(kept), reasons)


def _wrap(lines: list[str] | None) -> _File | None:
    return None if lines is None else _File(lines)


def _quote_forms(quote: str) -> Iterator[str]:
    yield _strip_ellipses(normalize_ws(quote))
    # Models often paste tool output with its numbering; strip it and try again.
    for prefix in (_READ_PREFIX, _SEARCH_PREFIX):
        stripped = prefix.sub("", quote)
        if stripped != quote:
            yield _strip_ellipses(normalize_ws(stripped))


def _strip_ellipses(s: str) -> str:
    while True:
        before = s
        for e in _ELLIPSES:
            s = s.removeprefix(e).removesuffix(e).strip()
        if s == before:
            return s
