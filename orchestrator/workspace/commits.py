"""The run's result in the user's repository: the branch ``orchestrate/<run_id>`` and the commits
on it, written with plumbing (``commit-tree``, ``update-ref``) through ``gitsafe``.

The branch only moves by compare-and-swap (``update-ref REF NEW OLD``): a commit made for one
tip never lands on another. So a commit can be made ahead (``prepare``, while the judges read)
and used later only if the branch is still where it was made for; otherwise it is made again.
A commit object nothing points at is harmless: git's gc drops it. The builder's own ``.git``
plays no part: what is committed is a tree of the worktree's files (``tree.py``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from orchestrator.gitsafe import GitError, git


@dataclass(frozen=True)
class PreparedCommit:
    """A commit object of the run branch's next commit, made but not yet on the branch."""

    tree: str
    message: str
    sha: str
    parent: str

    def fits(self, message: str, tree: str) -> bool:
        return (message, tree) == (self.message, self.tree)


class RunBranch:
    """``refs/heads/orchestrate/<run_id>`` in the user's repository, and where this process last
    put it (asked of git only when it does not know)."""

    def __init__(self, repo: Path, name: str, base_commit: str) -> None:
        self.repo, self.name, self.base_commit = repo, name, base_commit
        self.ref = f"refs/heads/{name}"
        self._tip: str | None = None

    def create(self, at: str) -> str | None:
        """Make the branch at ``at``; None when made, else why not. Never moves a branch that
        exists or appeared meanwhile ("" as the old value: git refuses, and that is the check
        that the run is new)."""
        made = git("update-ref", self.ref, at, "", cwd=self.repo, check=False)
        if made.returncode != 0:
            return made.stderr.strip() or f"branch {self.name} exists"
        self._tip = at
        return None

    def delete(self, *, check: bool = True) -> None:
        git("update-ref", "-d", self.ref, cwd=self.repo, check=check)
        self._tip = None

    def exists(self) -> bool:
        return git("show-ref", "--verify", "--quiet", self.ref, cwd=self.repo,
                   check=False).returncode == 0

    def tip(self) -> str | None:
        """The commit the branch points at, or None if it is gone."""
        if self._tip is not None:
            return self._tip
        out = git("rev-parse", "--verify", "-q", f"{self.ref}^{{commit}}", cwd=self.repo,
                  check=False).stdout.strip()
        return out or None

    def commit(self, message: str, tree: str, prepared: PreparedCommit | None = None, *,
               changes: Callable[[str], bool]) -> str | None:
        """Put the commit of ``tree`` on the branch; None if the branch already holds these
        files. ``prepared`` (made ahead for the same files and message) is used when the branch
        is still on its parent; ``changes`` says whether a tree differs from the base commit."""
        if prepared is None or not prepared.fits(message, tree) or not self.move(prepared):
            made = self.prepare(message, tree, changes=changes)
            if made is None:
                return None
            self.move(made, check=True)
            prepared = made
        return prepared.sha

    def prepare(self, message: str, tree: str, *,
                changes: Callable[[str], bool]) -> PreparedCommit | None:
        """The commit of ``tree`` on the branch, written to the object store but not yet on the
        branch (``commit`` or ``move`` puts it there); None if the branch already holds these
        files."""
        if self._tip == self.base_commit and changes(tree):
            parent = self.base_commit  # where this process put the branch; the files differ
        else:
            heads = git("rev-parse", f"{self.ref}^{{commit}}", f"{self.ref}^{{tree}}",
                        cwd=self.repo, check=False).stdout.split()
            if len(heads) != 2:
                raise GitError(f"branch {self.name} is gone; the run's result cannot be "
                               "recorded")
            parent, parent_tree = heads
            if parent_tree == tree:
                return None
        sha = git("commit-tree", tree, "-p", parent, cwd=self.repo,
                  input=message.encode("utf-8")).stdout.strip()
        return PreparedCommit(tree=tree, message=message, sha=sha, parent=parent)

    def move(self, made: PreparedCommit, *, check: bool = False) -> bool:
        """Put the branch on ``made`` if it is still on ``made.parent`` (compare and swap)."""
        moved = git("update-ref", self.ref, made.sha, made.parent, cwd=self.repo,
                    check=check).returncode == 0
        if moved:
            self._tip = made.sha
        return moved
