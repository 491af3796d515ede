"""The path jail: every path a model names is resolved here and must stay inside the repository.

``Jail`` turns a model-supplied path (repo-relative, ``./x`` or absolute) into a resolved
``Path`` under the repository root, refusing ``..`` escapes, absolute paths elsewhere, symlinks
whose target (or any intermediate component's target) leaves the root, and, for writes, anything
inside ``.git``. Read tools, edit tools and the citation verifier all go through it.
``open_regular`` opens a file for reading without ever blocking on a FIFO, and refuses anything
that is not a regular file.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import BinaryIO

from orchestrator.errors import PolicyViolation, ToolError


def is_inside(root: Path | str, path: Path | str) -> bool:
    """Whether ``path``, fully resolved (symlinks followed), is ``root`` or below it."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    return real == real_root or real.startswith(real_root.rstrip(os.sep) + os.sep)


@dataclass(frozen=True)
class Jail:
    """Resolves model-supplied paths against ``root`` and refuses anything outside it."""

    root: Path
    # repository paths no edit may write: the failing tests that define the task
    protected: frozenset[str] = frozenset()

    def __post_init__(self) -> None:
        object.__setattr__(self, "root", Path(os.path.realpath(self.root)))

    def resolve(self, path: str, *, write: bool = False) -> Path:
        """The resolved absolute path for ``path``; ``PolicyViolation`` if it leaves the root."""
        raw = str(path).strip()
        if "\0" in raw:
            raise PolicyViolation(f"path {raw!r} contains a NUL byte")
        candidate = Path(raw) if os.path.isabs(raw) else self.root / (raw or ".")
        self._check_components(raw, candidate)
        resolved = Path(os.path.realpath(candidate))
        if not is_inside(self.root, resolved):
            raise self._outside(raw)
        if write and self._in_git_dir(resolved):
            raise PolicyViolation(f"path {raw!r} is inside .git; writing there is not allowed")
        if write and self.protected and self.relative(resolved) in self.protected:
            raise ToolError(f"{self.relative(resolved)} is a failing test of this task: the tests "
                            "define what must work, so they are not changed. Change the code "
                            "they test (see the lines the failure points at).")
        return resolved

    def relative(self, p: Path | str) -> str:
        """``p`` (under the root) as a posix repo-relative string; ``"."`` for the root itself."""
        rel = os.path.relpath(os.path.realpath(p), self.root)
        if rel == os.pardir or rel.startswith(os.pardir + os.sep):
            raise self._outside(str(p))
        return PurePosixPath(Path(rel)).as_posix()

    def _check_components(self, raw: str, candidate: Path) -> None:
        # realpath of the whole path can land back inside after passing through an outside
        # symlink (``link/../x``); checking every prefix refuses that detour too.
        if not _under(candidate, self.root):
            return  # e.g. an absolute alias of the root; the final realpath check decides
        current = self.root
        for part in candidate.relative_to(self.root).parts:
            current = current / part
            if not is_inside(self.root, current):
                raise self._outside(raw)

    def _in_git_dir(self, resolved: Path) -> bool:
        rel = resolved.relative_to(self.root).parts if resolved != self.root else ()
        return any(part.lower() == ".git" for part in rel)

    @staticmethod
    def _outside(raw: str) -> PolicyViolation:
        return PolicyViolation(
            f"path {raw!r} is outside the repository; paths must be inside the repository "
            "(use a repository-relative path such as 'src/app.py')"
        )


def _under(path: Path, root: Path) -> bool:
    try:
        path.relative_to(root)
    except ValueError:
        return False
    return True


def open_regular(path: Path | str, shown: str | None = None) -> BinaryIO:
    """Open ``path`` for reading if it is a regular file; ``ToolError`` otherwise.

    ``O_NONBLOCK`` makes opening a FIFO return at once instead of waiting for a writer, and
    ``fstat`` on the opened descriptor decides, so a file swapped in between cannot fool it.
    """
    name = shown or str(path)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as exc:
        raise ToolError(f"cannot open {name}: {exc.strerror or exc}") from None
    try:
        kind = _kind(os.fstat(fd).st_mode)
        if kind != "file":
            raise ToolError(f"{name} is a {kind}, not a regular file; only regular files can be read")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _kind(mode: int) -> str:
    if stat.S_ISREG(mode):
        return "file"
    if stat.S_ISDIR(mode):
        return "directory"
    if stat.S_ISFIFO(mode):
        return "FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "device"
    return "special file"
