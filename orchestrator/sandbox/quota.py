"""The worktree's disk quota: how much a run's commands may make the worktree grow.

Measured after each command (``Sandbox.quota``): a walk of the worktree with ``os.scandir``,
symlinks not followed, that stops as soon as the total passes the bound, so an oversized tree
costs no more to measure than a tree at the bound. The first measure, before the first command,
is the baseline (the checkout); growth past ``[sandbox] worktree_mb`` (or 100,000 more files and
directories) makes the command fail with a note saying so.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

_MIB = 1024 * 1024
MAX_NEW_ENTRIES = 100_000


def measure(root: Path, cap_bytes: int | None = None,
            cap_entries: int | None = None) -> tuple[int, int]:
    """(bytes, entries) under ``root``; stops early once past either cap (then the figures
    are only known to be over it)."""
    total = entries = 0
    stack = [str(root)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
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
                self._base = measure(self.root)

    def over(self) -> str | None:
        """A note for the model when the worktree is past its quota, else None."""
        if self._base is None:
            return None
        base_bytes, base_entries = self._base
        cap = base_bytes + self.max_mb * _MIB
        size, entries = measure(self.root, cap, base_entries + self.max_new_entries)
        if size > cap:
            return (f"sandbox: the worktree grew past its disk quota of {self.max_mb} MiB "
                    f"([sandbox] worktree_mb), so this command counts as failed; delete the "
                    "large files it wrote (they would not be committed either)")
        if entries > base_entries + self.max_new_entries:
            return (f"sandbox: the command made more than {self.max_new_entries:,} new files "
                    "and directories in the worktree, so it counts as failed; delete them")
        return None
