"""The worktree's files as git sees them: staged in the run's own index, written as trees, and
compared with the run's base commit.

Every call names the user's ``.git`` as ``GIT_DIR``, the worktree as the work tree and the run's
own index file (``<run_dir>/git-index``), through ``gitsafe``: the builder's ``.git`` is never
read. A snapshot is ``git add -A`` and ``git write-tree``; the tree written last is the answer
again while ``add`` stages nothing new, and a checkout of a commit whose tree git named already
(``know``) needs no ``write-tree``. A repository the builder made inside the worktree is
dropped from the index (its gitlink would name objects we do not have). A tree's diff (stat and
patch, one git call) is asked of git once: a tree never changes. It is kept in a file beside
the index, for the tree asked last, and read or copied from there.

What a run may add is bounded (``Bounds``: ``run.max_result_mb``, ``run.max_result_files``):
before ``git add`` writes a blob into the user's object store, the files it would stage are
listed (``ls-files --others --modified``) and their sizes added up with what was staged before;
over the bound, nothing is staged and ``ResultTooLarge`` says which file and which key. When
that listing is empty (no file new, changed or gone), ``add -A`` would stage nothing and is not
run. A patch goes to its file as git writes it (``write_patch``), never whole in memory.
"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.errors import ResultTooLarge
from orchestrator.gitsafe import git

DIFF_FLAGS = ("--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all",
              "--src-prefix=a/", "--dst-prefix=b/")


_MIB = 1024 * 1024


@dataclass(frozen=True)
class Bounds:
    """What a run may add to the user's repository: bytes of new or changed files, and files."""

    max_mb: int = 50
    max_files: int = 2000


class RunIndex:
    """The run's own index over one worktree, and the trees and diffs made through it."""

    def __init__(self, git_dir: Path, worktree: Path, path: Path, base_commit: str, *,
                 start: Callable[[], str], origin: str = "",
                 bounds: Bounds | None = None) -> None:
        self.git_dir, self.worktree, self.path = git_dir, worktree, path
        self.base_commit = base_commit
        self._start = start  # what a missing index is read from: the run branch's tip
        self._tree: str | None = None  # the tree written last, while nothing was staged since
        self._checked = False  # checked for nested repositories in this process
        self._stats: dict[str, str] = {}
        # the bound counts from ``origin`` (the run's start commit: the user's dirty state is
        # theirs); ``_sizes``: path -> bytes of what is staged beyond it, None until counted
        self.origin, self.bounds = origin or base_commit, bounds
        self._sizes: dict[str, int] | None = None
        self._trees: dict[str, str] = {}  # commit -> its tree, as git named it elsewhere
        self._diffing = threading.Lock()  # the diff file: made, read and copied one at a time
        self._diff: tuple[str, str, int] | None = None  # (tree, stat, offset of its patch)

    def git(self, *args: str, text: bool = True,
            check: bool = True) -> subprocess.CompletedProcess[Any]:
        return git(*args, git_dir=self.git_dir, work_tree=self.worktree, index=self.path,
                   text=text, check=check)

    def checkout(self, commit: str, tree: str | None = None) -> None:
        """Write ``tree`` (default: ``commit``'s files) into the worktree through a fresh index."""
        self.path.unlink(missing_ok=True)
        self.git("read-tree", "--reset", "-u", tree or commit)
        self._checked = True  # a fresh index, from a commit or our snapshot
        self._tree = tree or self._trees.get(commit)
        # nothing staged beyond the commit, if that is where the bound counts from
        self._sizes = {} if tree is None and commit == self.origin else None

    def know(self, commit: str, tree: str) -> None:
        """``commit``'s tree is ``tree`` (git said so in a call made anyway): a checkout of it is
        named without ``write-tree``, and that tree is the base commit's files unchanged."""
        self._trees[commit] = tree

    def count_from(self, origin: str, bounds: Bounds | None) -> None:
        """Bound what is added beyond ``origin`` by ``bounds``; the index holds ``origin``'s
        files now (the run's start), so nothing is counted yet."""
        self.origin, self.bounds, self._sizes = origin, bounds, {}

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
        if self.bounds is not None and not self._check_bounds(self.bounds) and not changed \
                and self._checked:
            return False  # no file new, changed or gone: ``add -A`` would stage nothing
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

    def _check_bounds(self, bounds: Bounds) -> bool:
        """Refuse (``ResultTooLarge``) before staging when the files ``add -A`` would stage,
        with what is staged already, are over ``bounds``; nothing is written then. True if
        any file is new, changed or gone (``add -A`` has something to stage)."""
        if self._sizes is None:  # first in this process: what the index holds beyond origin
            held = self.git("diff", "--cached", "--no-renames", "--name-only", "-z",
                            self.origin, "--").stdout
            self._sizes = dict(self._sized(held))
        listed = self.git("ls-files", "-z", "--others", "--modified", "--exclude-standard").stdout
        sizes = {**self._sizes, **dict(self._sized(listed))}
        sizes = {p: n for p, n in sizes.items() if n >= 0}
        total = sum(sizes.values())
        if total > bounds.max_mb * _MIB or len(sizes) > bounds.max_files:
            big, size = max(sizes.items(), key=lambda kv: kv[1])
            key, limit = (("run.max_result_files", f"{bounds.max_files} files")
                          if len(sizes) > bounds.max_files
                          else ("run.max_result_mb", f"{bounds.max_mb} MiB"))
            raise ResultTooLarge(
                f"the run's result would add {total / _MIB:.1f} MiB in {len(sizes)} files, "
                f"over {key} ({limit}; largest: {big}, {size / _MIB:.1f} MiB); nothing of it "
                f"was committed: remove the files from the worktree or raise {key} in the "
                "role map's [run]")
        self._sizes = sizes
        return bool(listed)

    def _sized(self, listed: str) -> list[tuple[str, int]]:
        """(path, bytes) for each path of a ``-z`` listing: -1 for one that is gone."""
        out = []
        for rel in listed.split("\0"):
            if not rel or rel.endswith("/"):  # a nested repository: never staged
                continue
            try:
                st = os.lstat(self.worktree / rel)
            except OSError:
                out.append((rel, -1))
                continue
            out.append((rel, st.st_size if not stat.S_ISDIR(st.st_mode) else 0))
        return out

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

    def tree_stat(self, tree: str) -> str:
        """``git diff --stat`` of ``tree`` against the base commit (asked of git once)."""
        with self._diffing:
            return self._tree_diff(tree)[1]

    def changes(self, tree: str) -> bool:
        """Whether ``tree`` holds other files than the base commit."""
        if tree == self._trees.get(self.base_commit):
            return False
        return bool(self.tree_stat(tree))

    def tree_patch(self, tree: str) -> bytes:
        """The binary-safe unified diff of ``tree`` against the base commit (asked of git once)."""
        with self._diffing:
            _, _, offset = self._tree_diff(tree)
            with open(self._diff_path, "rb") as source:
                source.seek(offset)
                return source.read()

    def write_patch(self, out: Path, tree: str | None = None) -> None:
        """Write the binary-safe unified diff of the worktree (or of ``tree``) against the base
        commit into ``out`` as git makes it: never whole in memory."""
        tmp = out.with_name(out.name + ".part")
        if tree:
            with self._diffing:
                _, _, offset = self._tree_diff(tree)
                with open(self._diff_path, "rb") as source, open(tmp, "wb") as sink:
                    source.seek(offset)
                    shutil.copyfileobj(source, sink)
            os.replace(tmp, out)
            return
        self.stage()
        with open(tmp, "wb") as sink:
            git("diff", *DIFF_FLAGS, "--binary", "--full-index", "--cached", self.base_commit,
                "--", git_dir=self.git_dir, work_tree=self.worktree, index=self.path,
                stdout=sink)
        os.replace(tmp, out)

    @property
    def _diff_path(self) -> Path:
        return self.path.with_name(self.path.name + ".diff")

    def _tree_diff(self, tree: str) -> tuple[str, str, int]:
        """(tree, stat, offset of the patch in the diff file) of ``tree``, made by one git call
        into the diff file unless it holds that tree's already; under ``_diffing``."""
        if self._diff is not None and self._diff[0] == tree and self._diff_path.exists():
            return self._diff
        self._diff = None
        tmp = self._diff_path.with_name(self._diff_path.name + ".part")
        with open(tmp, "wb") as sink:
            git("diff", *DIFF_FLAGS, "--stat", "--patch", "--binary", "--full-index",
                self.base_commit, tree, "--", git_dir=self.git_dir, work_tree=self.worktree,
                index=self.path, stdout=sink)
        os.replace(tmp, self._diff_path)
        summary, offset = _stat_part(self._diff_path)
        self._diff = (tree, summary, offset)
        return self._diff

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


def _stat_part(path: Path, chunk: int = 1 << 16) -> tuple[str, int]:
    """The ``--stat`` text at the head of a ``--stat --patch`` diff file, and where its patch
    begins (the first ``diff --git`` after the blank line that ends the stat)."""
    sep = b"\n\ndiff --git "
    head = b""
    with open(path, "rb") as source:
        while block := source.read(chunk):
            start = max(0, len(head) - len(sep))
            head += block
            at = head.find(sep, start)
            if at >= 0:
                return head[:at + 1].decode("utf-8", "replace"), at + 2
    return head.decode("utf-8", "replace"), len(head)  # no patch: nothing, or a stat alone
