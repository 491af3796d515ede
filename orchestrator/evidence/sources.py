"""Where cited files are read from, and how often each line occurs in the repository.

A ``FileSource`` supplies file lines (from the working tree through the path jail, or from a
commit through one long-lived ``git cat-file --batch``), numbered exactly as the ``read`` tool
numbers them, and can list the repository's files. Sources cache each file's lines and
normalised lines, so checking a citation is a dictionary lookup plus a substring search.
``LineCounts`` counts the short lines of the whole repository once, for the verifier's "this
line occurs everywhere" test; a run shares one between its explorers.
"""

from __future__ import annotations

import os
import posixpath
import re
import subprocess
import threading
from collections import Counter
from pathlib import Path
from typing import IO, Protocol

from orchestrator.errors import ToolError, UsageError
from orchestrator.gitsafe import git, git_env
from orchestrator.tools.jail import Jail, open_regular
from orchestrator.tools.search import decode_lines, rg_binary
from orchestrator.workspace.treediff import Unreadable, files

_BATCH_HEADER = re.compile(rb"^[0-9a-f]{40,64} (\w+) (\d+)\n$")
_OBJECT_ID = re.compile(r"^(?:[0-9a-f]{40}|[0-9a-f]{64})$")
MAX_COUNTED_LINE = 160  # longer lines are never "common"; not counting them saves memory
MAX_COUNTED_FILE = 1 << 20  # bytes; bigger files (data, bundles) are skipped when counting
MAX_COUNTED_FILES = 20_000


def normalize_ws(s: str) -> str:
    """Every run of whitespace collapsed to one space, ends stripped."""
    return " ".join(s.split())


class FileSource(Protocol):
    """Where cited files are read from; ``None`` means there is no such file."""

    def lines(self, path: str) -> list[str] | None: ...

    def paths(self) -> list[str]:
        """The repository's files (repository-relative), for counting and test discovery."""
        ...


class FileLines:
    """One file's lines and their normalised forms, computed once."""

    __slots__ = ("lines", "norm")

    def __init__(self, lines: list[str]):
        self.lines = lines
        self.norm = [normalize_ws(line) for line in lines]

    def text(self, start: int, end: int) -> str:
        return " ".join(n for n in self.norm[start - 1 : end] if n)


class CachedSource:
    """Caches loaded files; ``_load`` returns a file's bytes or None."""

    def __init__(self) -> None:
        self._files: dict[str, FileLines | None] = {}
        self._lock = threading.Lock()

    def lines(self, path: str) -> list[str] | None:
        f = self.file(path)
        return None if f is None else f.lines

    def file(self, path: str) -> FileLines | None:
        if path in self._files:
            return self._files[path]
        data = self._load(path)
        loaded = None if data is None else FileLines(decode_lines(data))
        with self._lock:  # two threads may load the same file; the first result wins
            return self._files.setdefault(path, loaded)

    def _load(self, path: str) -> bytes | None:
        raise NotImplementedError

    def paths(self) -> list[str]:
        raise NotImplementedError

    def raw(self, path: str) -> bytes | None:
        """A file's bytes without caching them (for one pass over the whole repository)."""
        return self._load(path)


class DirSource(CachedSource):
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

    def paths(self) -> list[str]:
        """What ripgrep would search here: .gitignored and hidden files left out, as for agents."""
        try:
            proc = subprocess.run([rg_binary(), "--files", "--no-config"], cwd=self.jail.root,
                                  capture_output=True, timeout=60, check=False)
        except (OSError, subprocess.TimeoutExpired):
            return []
        names = proc.stdout.decode("utf-8", "replace").splitlines()
        return sorted(n.removeprefix("./") for n in names if n)


class GitCommitSource(CachedSource):
    """Files as of ``commit`` in ``repo``, read by one long-lived ``git cat-file --batch``."""

    def __init__(self, repo: Path, commit: str, *, resolved: bool = False):
        super().__init__()
        self.repo = Path(os.path.realpath(repo))
        self._rev = commit
        # a commit id the caller already checked (``resolved``), else resolved on first use
        self._commit: str | None = commit if resolved else None
        self._proc: subprocess.Popen[bytes] | None = None
        self._io = threading.Lock()
        self._closed = False

    @property
    def commit(self) -> str:
        if self._commit is None:
            self._commit = _rev_parse(self.repo, self._rev)
        return self._commit

    def _load(self, path: str) -> bytes | None:
        rel = _repo_relative(self.repo, path)
        if rel is None:
            return None
        return self._object(f"{self.commit}:{rel}", b"blob")

    def tree(self, name: str) -> bytes | None:
        """The raw tree object ``name`` (a tree's id, e.g. a worktree snapshot) from the same
        ``cat-file`` process; None if it is not a tree. Raises OSError once the reader is
        closed."""
        if not _OBJECT_ID.match(name):
            return None
        return self._object(name, b"tree")

    def _object(self, spec: str, kind: bytes) -> bytes | None:
        with self._io:
            stdin, stdout = self._pipes()
            stdin.write(f"{spec}\n".encode())
            stdin.flush()
            header = _BATCH_HEADER.match(stdout.readline())
            if header is None:
                return None  # "<object> missing" / "ambiguous"
            data = stdout.read(int(header.group(2)) + 1)[:-1]
        return data if header.group(1) == kind else None

    def paths(self) -> list[str]:
        """The commit's files, read through the same ``cat-file`` (its tree objects); git's
        ``ls-tree`` when they cannot be read."""
        try:
            head = self._object(self.commit, b"commit")
            if head is not None and head.startswith(b"tree "):
                return sorted(files(self.tree, head[5:head.index(b"\n")].decode("ascii")))
        except (Unreadable, ValueError, OSError):
            pass
        proc = git("ls-tree", "-r", "-z", "--name-only", self.commit, cwd=self.repo, check=False)
        return sorted(p for p in str(proc.stdout).split("\0") if p)

    def _pipes(self) -> tuple[IO[bytes], IO[bytes]]:
        if self._closed:  # never a new git process once its owner is done with the reader
            raise OSError(f"the reader of {self._rev} is closed")
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
        with self._io:  # after a read in flight on another thread, before any later one
            self._closed = True
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
    proc = git("rev-parse", "--verify", "--quiet", "--end-of-options", f"{commit}^{{commit}}",
               cwd=repo, check=False)
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


class LineCounts:
    """How many times each short normalised line occurs in a repository, counted on first use.

    Thread-safe: explorers verifying at the same time share one count; the first to ask pays
    (a run starts it ahead, when its explorers start: ``engine/ahead.py``).
    """

    def __init__(self) -> None:
        self._counts: Counter[str] | None = None
        self._lock = threading.Lock()
        self.files = 0

    @property
    def counted(self) -> bool:
        """Whether the counts are made (asked without waiting for a count in progress)."""
        return self._counts is not None

    def of(self, src: FileSource) -> Counter[str]:
        """The counts, built from ``src`` the first time."""
        with self._lock:
            if self._counts is None:
                self.files = 0
                self._counts = self._count(src)
            return self._counts

    def _count(self, src: FileSource) -> Counter[str]:
        counts: Counter[str] = Counter()
        read = src.raw if isinstance(src, CachedSource) else None
        for path in src.paths()[:MAX_COUNTED_FILES]:
            if read is not None:
                data = read(path)
                if data is None or len(data) > MAX_COUNTED_FILE or b"\0" in data[:8192]:
                    continue
                lines = decode_lines(data)
            else:
                lines = src.lines(path) or []
            self.files += 1
            counts.update(n for n in map(normalize_ws, lines) if n and len(n) <= MAX_COUNTED_LINE)
        return counts
