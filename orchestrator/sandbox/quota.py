"""The worktree's disk quota: how much a run's commands may make the worktree grow.

Measured after each command (``Sandbox.quota``), and while one runs (``tools/shell.py``): a walk of the worktree with ``os.scandir``,
symlinks not followed, that stops as soon as the total passes the bound, so an oversized tree
costs no more to measure than a tree at the bound. The first measure, before the first command,
is the baseline (the checkout); growth past ``[sandbox] worktree_mb`` (or 100,000 more files and
directories) makes the command fail with a note saying so. A directory the walk cannot enter
(nested past ``MAX_PATH``, or unreadable) would hide what is below it, so it fails the command
too.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

_MIB = 1024 * 1024
MAX_NEW_ENTRIES = 100_000
MAX_PATH = 3072  # a path longer than this is not walked (the kernel's limit is 4096)


class Unmeasurable(Exception):
    """A directory of the worktree cannot be walked (too deep for a path, or unreadable), so
    what it holds cannot be counted: the quota treats the worktree as over it."""


def measure(root: Path, cap_bytes: int | None = None,
            cap_entries: int | None = None) -> tuple[int, int]:
    """(bytes, entries) under ``root``; stops early once past either cap (then the figures
    are only known to be over it). ``Unmeasurable`` for a directory deeper than ``MAX_PATH``
    characters or that cannot be listed: what is below it would go uncounted."""
    total = entries = 0
    stack = [str(root)]
    while stack:
        path = stack.pop()
        if len(path) > MAX_PATH:
            raise Unmeasurable(f"a directory nested too deep to measure ({len(path):,} "
                               "characters of path)")
        try:
            it = os.scandir(path)
        except FileNotFoundError:
            continue  # removed while we walked
        except OSError as exc:
            if path == str(root):
                continue
            raise Unmeasurable(f"a directory that cannot be listed ({exc.strerror})") from None
        with it:
            for entry in it:
                entries += 1
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                total += st.st_size
                if entry.is_dir(follow_symlinks=False):
                    stack.append(entry.path)
                if (cap_bytes is not None and total > cap_bytes) or \
                        (cap_entries is not None and entries > cap_entries):
                    return total, entries
    return total, entries


class WorktreeQuota:
    """How much the worktree may grow from its size before the first command."""

    def __init__(self, root: Path, max_mb: int, max_new_entries: int = MAX_NEW_ENTRIES) -> None:
        self.root, self.max_mb, self.max_new_entries = root, max_mb, max_new_entries
        self._base: tuple[int, int] | None = None
        self._lock = threading.Lock()

    def start(self) -> None:
        """Take the baseline, once (before the first command)."""
        with self._lock:
            if self._base is None:
                try:
                    self._base = measure(self.root)
                except Unmeasurable:  # the checkout itself: counted as far as it can be
                    self._base = (0, 0)

    def over(self) -> str | None:
        """A note for the model when the worktree is past its quota, else None."""
        if self._base is None:
            return None
        base_bytes, base_entries = self._base
        cap = base_bytes + self.max_mb * _MIB
        try:
            size, entries = measure(self.root, cap, base_entries + self.max_new_entries)
        except Unmeasurable as exc:
            return (f"sandbox: the command left {exc} in the worktree, so its disk use "
                    "([sandbox] worktree_mb) cannot be checked and the command counts as "
                    "failed; delete it")
        if size > cap:
            return (f"sandbox: the worktree grew past its disk quota of {self.max_mb} MiB "
                    f"([sandbox] worktree_mb), so this command counts as failed; delete the "
                    "large files it wrote (they would not be committed either)")
        if entries > base_entries + self.max_new_entries:
            return (f"sandbox: the command made more than {self.max_new_entries:,} new files "
                    "and directories in the worktree, so it counts as failed; delete them")
        return None
