"""The worktree's files as git sees them: staged in the run's own index, written as trees, and
compared with the run's base commit.

Every call names the user's ``.git`` as ``GIT_DIR``, the worktree as the work tree and the run's
own index file (``<run_dir>/git-index``), through ``gitsafe``: the builder's ``.git`` is never
read. A snapshot is ``git add -A`` and ``git write-tree``; the tree written last is the answer
again while ``add`` stages nothing new. A repository the builder made inside the worktree is
dropped from the index (its gitlink would name objects we do not have). A tree's diff is asked
of git once: a tree never changes.
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

from orchestrator.gitsafe import git

DIFF_FLAGS = ("--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all",
              "--src-prefix=a/", "--dst-prefix=b/")


class RunIndex:
    """The run's own index over one worktree, and the trees and diffs made through it."""

    def __init__(self, git_dir: Path, worktree: Path, path: Path, base_commit: str, *,
                 start: Callable[[], str]) -> None:
        self.git_dir, self.worktree, self.path = git_dir, worktree, path
        self.base_commit = base_commit
        self._start = start  # what a missing index is read from: the run branch's tip
        self._tree: str | None = None  # the tree written last, while nothing was staged since
        self._checked = False  # checked for nested repositories in this process
        self._diffs: dict[str, tuple[str, bytes]] = {}

    def git(self, *args: str, text: bool = True,
            check: bool = True) -> subprocess.CompletedProcess[Any]:
        return git(*args, git_dir=self.git_dir, work_tree=self.worktree, index=self.path,
                   text=text, check=check)

    def checkout(self, commit: str, tree: str | None = None) -> None:
        """Write ``tree`` (default: ``commit``'s files) into the worktree through a fresh index."""
        self.path.unlink(missing_ok=True)
        self.git("read-tree", "--reset", "-u", tree or commit)
        self._checked = True  # a fresh index, from a commit or our snapshot
        self._tree = tree or None

    def forget(self) -> None:
        """Delete the index file (its worktree was removed)."""
        self.path.unlink(missing_ok=True)
        self._tree = None

    def snapshot(self) -> str:
        """The tree object of the worktree's files right now (written to the user's objects)."""
        if not self.stage() and self._tree is not None:
            return self._tree  # nothing was staged since it was written
        self._tree = self.git("write-tree").stdout.strip()
        return self._tree

    def stage(self) -> bool:
        """Stage the worktree's files in our index; True if that changed the index."""
        changed = not self.path.exists()
        if changed:
            self.git("read-tree", self._start())
        # --verbose names each path it adds or removes: nothing named, nothing changed
        added = self.git("add", "-A", "--ignore-errors", "--verbose")
        changed = changed or bool(added.stdout.strip())
        # git says when it adds a repository it found inside the tree; the index itself is
        # checked once per process too (one left from a process that died mid-stage)
        if "embedded git repository" in added.stderr or not self._checked:
            changed = self._drop_nested_repos() or changed
            self._checked = True
        if changed:
            self._tree = None
        return changed

    def _drop_nested_repos(self) -> bool:
        """A repository the builder made inside the worktree is not part of the result; True if
        one was dropped from the index."""
        staged = self.git("ls-files", "-s", "-z").stdout
        links = [e.split("\t", 1)[1] for e in staged.split("\0")
                 if e.startswith("160000 ") and "\t" in e]
        if not links:
            return False
        known = self.git("ls-tree", "-r", "-z", "--name-only", self.base_commit).stdout
        new = [p for p in links if p not in set(known.split("\0"))]
        if new:
            self.git("rm", "-q", "--cached", "-r", "-f", "--", *new)
        return bool(new)

    def diff(self, *flags: str) -> bytes:
        """``git diff`` of the worktree's files, staged now, against the base commit."""
        self.stage()
        return self.git("diff", "--cached", *DIFF_FLAGS, *flags, self.base_commit, "--",
                        text=False).stdout

    def tree_diff(self, tree: str) -> tuple[str, bytes]:
        """(stat, binary patch) of ``tree`` against the base commit, in one git call."""
        if tree not in self._diffs:
            out = self.git("diff", *DIFF_FLAGS, "--stat", "--patch", "--binary", "--full-index",
                           self.base_commit, tree, "--", text=False).stdout
            summary, sep, patch = out.partition(b"\n\ndiff --git ")
            self._diffs[tree] = (summary.decode("utf-8", "replace") + ("\n" if sep else ""),
                                 b"diff --git " + patch if sep else b"")
        return self._diffs[tree]

    def changes(self, tree: str) -> bool:
        """Whether ``tree`` holds other files than the base commit."""
        return bool(self.tree_diff(tree)[1])

    def patch(self, tree: str | None = None) -> bytes:
        """A binary-safe unified diff of the worktree (or of ``tree``) against the base commit."""
        return self.tree_diff(tree)[1] if tree else self.diff("--binary", "--full-index")

    def diff_size(self) -> tuple[int, int]:
        """Files changed and lines added plus removed against the base commit (binary: 0)."""
        out = self.diff("--numstat", "-z").decode("utf-8", "surrogateescape")
        files, lines = 0, 0
        for entry in out.split("\0"):
            parts = entry.split("\t")
            if len(parts) >= 2:
                files += 1
                lines += sum(int(p) for p in parts[:2] if p.isdigit())
        return files, lines

    def paths_between(self, before: str, after: str) -> list[str]:
        """Paths that differ between two trees (snapshots)."""
        if before == after:
            return []
        out = self.git("diff", "--name-only", "-z", before, after, "--", text=False).stdout
        return [p for p in out.decode("utf-8", "surrogateescape").split("\0") if p]

    def changed_files(self) -> list[str]:
        """Paths (relative to the repository) that differ from the base commit."""
        out = self.diff("--name-only", "-z").decode("utf-8", "surrogateescape")
        return [p for p in out.split("\0") if p]
