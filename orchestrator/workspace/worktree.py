"""Per-run workspaces: where the builder works, sharing nothing writable with the user's repository.

A run lives in ``<repo>/workspaces/<run_id>/``: the run's artefacts (events, report, patch), our own
index file, and ``worktree/`` — a checkout of the user's HEAD that is a repository of its own
(``worktree/.git`` is a directory, with the user's object store borrowed read-only through
``objects/info/alternates``). The builder may do anything to that ``.git`` (hooks, config,
``gc``); none of it reaches the user's repository, and none of it is ever read by us: every git
call we make on the worktree names the user's repository as ``GIT_DIR``, the worktree as the work
tree and our own index, through ``gitsafe`` (hooks, fsmonitor, drivers and pagers disabled, no
secrets in the environment). The run's result is the branch ``orchestrate/<run_id>`` in the user's
repository, written with plumbing (``write-tree``, ``commit-tree``, ``update-ref``), and
``patch.diff``. This module never modifies the user's files, index, current branch or stash; its
other write to the user's repository is keeping ``.git/info/exclude`` listing the run state
(``/workspaces/`` and ``/.orchestrate/state/``); ``.orchestrate/agents/`` stays committable.

This module owns a worktree's life, from making it to removing it. Its files as trees and diffs
go through the run's own index (``tree.py``), the result onto the run branch (``commits.py``);
what a run reads of the user's checkout, and the exclude lines, are ``repo.py``'s.
"""

from __future__ import annotations

import dataclasses
import functools
import json
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

from orchestrator.errors import UsageError
from orchestrator.gitsafe import GitError, common_dir, git
from orchestrator.workspace.commits import PreparedCommit, RunBranch
from orchestrator.workspace.repo import (
    Probed,
    copy_dirty_state,
    dirty_paths,
    ensure_excluded,
    object_stores,
    probe,
    top_of,
)
from orchestrator.workspace.tree import Bounds, RunIndex

__all__ = ["DIRTY_COMMIT_MESSAGE", "Bounds", "GitError", "PreparedCommit", "Workspace",
           "list_workspaces", "new_run_id"]

DIRTY_COMMIT_MESSAGE = "orchestrate: include uncommitted changes"
_META = "workspace.json"
_INDEX = "git-index"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def new_run_id() -> str:
    """A sortable, collision-resistant id such as ``20261130-053944-ab12cd34`` (UTC): 32 random
    bits, so a fleet starting many runs in one second does not draw one id twice (24 bits did
    once in 50, in CI)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(4)


@dataclass(frozen=True)
class Workspace:
    """One run's worktree and artefact directory inside the user's repository.

    Its files as trees and diffs go through the run's own index (``files``, ``tree.py``); the
    result goes on the run branch (``result``, ``commits.py``). Each workspace object has its
    own of both: what git said is remembered for the run's length, never shared with another
    worktree (a racing candidate's)."""

    repo: Path
    run_id: str
    run_dir: Path
    worktree: Path
    branch: str
    base_commit: str
    # The commit agents started from: base_commit, or the commit holding the user's dirty state.
    start_commit: str = ""
    dirty: bool = False
    included_dirty: bool = False
    # what the run may add beyond its start commit (``tree.Bounds``); None: unbounded
    bounds: Bounds | None = None

    @functools.cached_property
    def git_dir(self) -> Path:
        """The user's (shared) ``.git``: trusted, never writable by the builder."""
        return common_dir(self.repo)

    @functools.cached_property
    def files(self) -> RunIndex:
        """The worktree's files through the run's own index: snapshots and diffs."""
        return RunIndex(self.git_dir, self.worktree, self.run_dir / _INDEX, self.base_commit,
                        start=lambda: self.tip() or self.start_commit or self.base_commit,
                        origin=self.start_commit, bounds=self.bounds)

    @functools.cached_property
    def result(self) -> RunBranch:
        """The run branch ``orchestrate/<run_id>`` in the user's repository."""
        return RunBranch(self.repo, self.branch, self.base_commit)

    @property
    def objects_dirs(self) -> list[Path]:
        """The object stores the builder's repository borrows (read-only in the sandbox)."""
        return object_stores(self.git_dir / "objects")

    @classmethod
    def create(cls, repo: Path, run_id: str, *, include_dirty: bool = False,
               bounds: Bounds | None = None, probed: Probed | None = None) -> Workspace:
        """Make ``workspaces/<run_id>/worktree`` on a new branch at the user's HEAD; ``bounds``
        holds what the run may add beyond it (the user's dirty state, included, is theirs).
        ``probed`` is ``repo.probe``'s word on the repository, when it was asked already."""
        _check_run_id(run_id)
        top, git_dir, base, base_tree = probed or probe(Path(repo).expanduser())
        run_dir = top / "workspaces" / run_id
        worktree = run_dir / "worktree"
        if worktree.exists():
            raise UsageError(f"run {run_id} already exists in {top}")
        ensure_excluded(top, git_dir)
        dirty = bool(dirty_paths(top))
        ws = cls(top, run_id, run_dir, worktree, f"orchestrate/{run_id}", base, base, dirty, False)
        ws.__dict__["git_dir"] = git_dir  # the cached property, already asked of git
        if base_tree:
            ws.files.know(base, base_tree)
        refused = ws.result.create(base)
        if refused is not None:
            raise UsageError(f"run {run_id} already exists in {top}: {refused}")
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            ws._checkout(base)
            if include_dirty and dirty:
                copy_dirty_state(top, worktree, git_dir)
                start = ws.commit(DIRTY_COMMIT_MESSAGE) or base
                if start != base:
                    ws = ws._started_at(start)
                    ws._point_builder_repo(start)
        except BaseException:
            ws.result.delete(check=False)
            _rmtree(run_dir)
            raise
        ws._save()
        ws.files.count_from(ws.start_commit, bounds)  # the index holds the start commit's files
        return dataclasses.replace(ws, bounds=bounds)._same_parts(ws)

    def _started_at(self, start: str) -> Workspace:
        """This run, starting from ``start`` (the commit of the user's dirty state), with the
        same branch and index: nothing git said is asked again."""
        return dataclasses.replace(self, start_commit=start, included_dirty=True)._same_parts(self)

    def _same_parts(self, other: Workspace) -> Workspace:
        """This workspace with ``other``'s git dir, index and branch, as that one knows them."""
        for name in ("git_dir", "files", "result"):
            if name in other.__dict__:
                self.__dict__[name] = other.__dict__[name]
        return self

    def bounded(self, bounds: Bounds | None) -> Workspace:
        """This run with ``bounds`` on what it may add (its branch as this one knows it)."""
        if bounds == self.bounds:
            return self
        moved = dataclasses.replace(self, bounds=bounds)
        for name in ("git_dir", "result"):
            if name in self.__dict__:
                moved.__dict__[name] = self.__dict__[name]
        return moved

    @classmethod
    def open(cls, repo: Path, run_id: str, *, reattach: bool = True) -> Workspace:
        """Re-open an existing run; with ``reattach`` a removed worktree is checked out again."""
        top = top_of(repo)
        _check_run_id(run_id)
        ws = _load(top, run_id)
        if ws is None:
            raise UsageError(f"unknown run id {run_id} in {top} (see `orchestrate runs`)")
        if git("ls-files", "-z", "--", f"workspaces/{run_id}", cwd=top).stdout:
            # our runs are never tracked (workspaces/ is excluded): this one came with the
            # repository, and its run.json (role map, provider URLs) is the repository's word
            raise UsageError(
                f"run {run_id}: its files are committed in the repository, so it is not a run "
                "of yours; it cannot be resumed, shown or applied (remove workspaces/ from git)"
            )
        if reattach and not (ws.worktree / ".git").exists():
            tip = ws.tip()
            if tip is None:
                raise UsageError(f"run {run_id}: branch {ws.branch} no longer exists")
            if ws.worktree.exists():
                _rmtree(ws.worktree)
            ws._checkout(tip)
        return ws

    # --- the result (``commits.py``) -----------------------------------------------------------

    def tip(self) -> str | None:
        """The commit the run branch points at, or None if the branch is gone."""
        return self.result.tip()

    def commit(self, message: str, tree: str | None = None,
               prepared: PreparedCommit | None = None) -> str | None:
        """Record the worktree's files (or ``tree``, a snapshot of them) as a commit on the run
        branch; None if nothing changed. ``prepared`` is a commit object made ahead for the
        same files and message (``prepare_commit``): then only the branch moves.

        The builder's own ``.git`` (its commits, stashes, config) plays no part: what counts is
        the files in the worktree, staged through our index with the user's trusted config.
        """
        return self.result.commit(message, tree or self.snapshot(), prepared,
                                  changes=self.files.changes)

    def prepare_commit(self, message: str, tree: str) -> PreparedCommit | None:
        """The commit of ``tree`` on the run branch, written to the object store but not yet
        on the branch (``commit`` puts it there); None if the branch already holds these
        files. A commit object nothing points at is harmless: git's gc drops it."""
        return self.result.prepare(message, tree, changes=self.files.changes)

    # --- the worktree's files (``tree.py``) ----------------------------------------------------

    def snapshot(self) -> str:
        """The tree object of the worktree's files right now (written to the user's objects)."""
        return self.files.snapshot()

    def diff_size(self) -> tuple[int, int]:
        """Files changed and lines added plus removed against ``base_commit`` (binary: 0)."""
        return self.files.diff_size()

    def diff_stat(self, tree: str | None = None) -> str:
        """``git diff --stat`` of all work (committed or not), or of ``tree`` (a snapshot),
        against ``base_commit``."""
        if tree:
            return self.files.tree_stat(tree)
        return self.files.diff("--stat").decode("utf-8", "replace")

    def changed_between(self, before: str, after: str) -> list[str]:
        """Paths that differ between two snapshots of the worktree (``snapshot``)."""
        return self.files.paths_between(before, after)

    def changed_files(self) -> list[str]:
        """Paths (relative to the repository) that differ from ``base_commit``."""
        return self.files.changed_files()

    def patch(self, tree: str | None = None) -> str:
        """A binary-safe unified diff of all work (or of ``tree``, a snapshot) against
        ``base_commit``, for ``git apply`` (``write_patch`` for one of any size)."""
        if tree:
            return self.files.tree_patch(tree).decode("utf-8", "surrogateescape")
        out = self.run_dir / f".patch-{secrets.token_hex(4)}"
        try:
            self.files.write_patch(out, tree)
            return out.read_bytes().decode("utf-8", "surrogateescape")
        finally:
            out.unlink(missing_ok=True)

    def write_patch(self, tree: str | None = None) -> Path:
        """Write ``patch.diff`` (of all work, or of ``tree``) into the run directory."""
        path = self.run_dir / "patch.diff"
        self.files.write_patch(path, tree)
        return path

    # --- the worktree's life -------------------------------------------------------------------

    def restore(self, tree: str | None = None) -> None:
        """Make the worktree hold exactly ``tree`` again (default: the start commit's files).

        Used when a run resumes: the worktree is rebuilt from scratch — files, and a fresh
        repository of the builder's own at the start commit — so what the builder did after
        the checkpoint (edits, its .git, ignored files, stray processes' writes) is gone.
        """
        head = self.start_commit or self.base_commit
        if self.worktree.exists() or self.worktree.is_symlink():
            _rmtree(self.worktree)
        self._checkout(head, tree=tree)

    def candidate(self, name: str, tree: str | None = None) -> Workspace:
        """A worktree of its own for a racing candidate build (``race.py``), holding ``tree``
        (default: the start commit's files), at ``<run_dir>/candidates/<name>/worktree`` with
        its own index. A fresh one replaces what a cut run left there. Its ``commit`` must
        never be called: only the run's own workspace writes the run branch."""
        run_dir = self.run_dir / "candidates" / name
        if run_dir.exists():
            _rmtree(run_dir)
        run_dir.mkdir(parents=True)
        ws = dataclasses.replace(self, run_dir=run_dir, worktree=run_dir / "worktree")
        ws.__dict__["git_dir"] = self.git_dir
        ws._checkout(self.start_commit or self.base_commit, tree=tree)
        return ws

    def _start_blob(self, path: str) -> bytes | None:
        start = self.start_commit or self.base_commit
        blob = git("cat-file", "blob", f"{start}:{path}", cwd=self.repo, text=False, check=False)
        return blob.stdout if blob.returncode == 0 else None

    def put_back(self, paths: list[str],
                 read: Callable[[str], bytes | None] | None = None) -> list[str]:
        """Make each repository path hold its start-commit content again (the failing tests a
        builder's command changed); returns the ones that differed. Never writes through a
        link: a symlink or non-directory the builder put on the way is removed first.
        ``read`` gives a file's bytes at the start commit (the run's open reader of it, so no
        git process per file); by default git is asked."""
        read = read or self._start_blob
        changed = []
        for path in paths:
            parts = PurePosixPath(path).parts
            if not parts or PurePosixPath(path).is_absolute() or ".." in parts or ".git" in parts:
                continue  # only repository paths, never outside the worktree or into its .git
            data = read(path)
            if data is None:
                continue
            cur = self.worktree
            for part in parts[:-1]:
                cur = cur / part
                if cur.is_symlink() or (cur.exists() and not cur.is_dir()):
                    cur.unlink()
                cur.mkdir(exist_ok=True)
            target = cur / parts[-1]
            if target.is_file() and not target.is_symlink() and target.read_bytes() == data:
                continue
            if target.is_dir() and not target.is_symlink():
                _rmtree(target)
            tmp = target.with_name(f".{target.name}.{secrets.token_hex(4)}.orchestrate")
            tmp.write_bytes(data)
            os.replace(tmp, target)
            changed.append(path)
        return changed

    def remove(self, keep_branch: bool = True) -> None:
        """Delete the worktree (whatever the builder did to it); artefacts and branch stay."""
        legacy = (self.worktree / ".git").is_file()  # a `git worktree` from an older version
        if self.worktree.exists() or self.worktree.is_symlink():
            _rmtree(self.worktree)
        if legacy:
            git("worktree", "prune", cwd=self.repo, check=False)
        self.files.forget()
        if not keep_branch and self.result.exists():
            self.result.delete()

    def _checkout(self, commit: str, tree: str | None = None) -> None:
        """Make ``worktree`` a fresh repository of its own at ``commit``, holding ``tree``'s files.

        Its object store borrows the user's through alternates; the files are written through
        our index with the user's config (drivers disabled: LFS files stay pointers).
        """
        self.worktree.mkdir(parents=True)
        git("init", "-q", "--template=", f"--initial-branch={self.branch}", str(self.worktree),
            cwd=self.run_dir)
        info = self.worktree / ".git" / "objects" / "info"
        info.mkdir(parents=True, exist_ok=True)
        (info / "alternates").write_text(str(self.git_dir / "objects") + "\n", encoding="utf-8")
        self.files.checkout(commit, tree)
        self._point_builder_repo(commit, same_tree=tree is None)

    def _point_builder_repo(self, commit: str, *, same_tree: bool = True) -> None:
        """Set the builder repository's branch (and index) to ``commit``.

        Only done before any builder command has run: afterwards that ``.git`` is untrusted.
        """
        own = self.worktree / ".git"
        git("update-ref", f"refs/heads/{self.branch}", commit, git_dir=own)
        if same_tree:  # our index matches the files and the commit: reuse its stat data
            shutil.copyfile(self.files.path, own / "index")
        else:
            git("read-tree", commit, git_dir=own, work_tree=self.worktree)

    def _save(self) -> None:
        meta = {
            "run_id": self.run_id, "branch": self.branch, "base_commit": self.base_commit,
            "start_commit": self.start_commit, "dirty": self.dirty,
            "included_dirty": self.included_dirty,
        }
        (self.run_dir / _META).write_text(json.dumps(meta, indent=2) + "\n")


def create_record_dir(repo: Path, run_id: str, kind: str) -> Path:
    """``workspaces/<run_id>/`` for a run that only reads the checkout (``explore``): its
    artefacts and no worktree or branch; listed with the other runs."""
    top = top_of(repo)
    _check_run_id(run_id)
    run_dir = top / "workspaces" / run_id
    if run_dir.exists():
        raise UsageError(f"run {run_id} already exists in {top}")
    ensure_excluded(top)
    head = git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=top, check=False)
    run_dir.mkdir(parents=True)
    meta = {"run_id": run_id, "branch": "", "base_commit": head.stdout.strip(), "kind": kind}
    (run_dir / _META).write_text(json.dumps(meta, indent=2) + "\n")
    return run_dir


def list_workspaces(repo: Path) -> list[Workspace]:
    """Every run recorded under ``<repo>/workspaces``, oldest first."""
    top = top_of(repo)
    root = top / "workspaces"
    if not root.is_dir():
        return []
    found = (_load(top, p.name) for p in sorted(root.iterdir()) if (p / _META).is_file())
    return [ws for ws in found if ws is not None]


def _load(top: Path, run_id: str) -> Workspace | None:
    run_dir = top / "workspaces" / run_id
    try:
        meta = json.loads((run_dir / _META).read_text())
    except (OSError, ValueError):
        return None
    base = meta["base_commit"]
    return Workspace(
        top, run_id, run_dir, run_dir / "worktree", meta.get("branch", f"orchestrate/{run_id}"),
        base, meta.get("start_commit") or base, bool(meta.get("dirty")),
        bool(meta.get("included_dirty")),
    )


def _check_run_id(run_id: str) -> None:
    if not _RUN_ID.match(run_id) or ".." in run_id or run_id.endswith(".lock"):
        raise UsageError(f"invalid run id {run_id!r}: use letters, digits, '.', '_' and '-'")


def _rmtree(path: Path) -> None:
    """Remove a tree the builder shaped: unreadable directories and read-only files included."""

    def retry(func, target, _exc):  # noqa: ANN001, ANN202
        try:
            parent = os.path.dirname(target)
            os.chmod(parent, stat.S_IRWXU)
            if os.path.isdir(target) and not os.path.islink(target):
                os.chmod(target, stat.S_IRWXU)
            func(target)
        except OSError:
            pass

    if path.is_symlink() or path.is_file():
        path.unlink()
        return
    shutil.rmtree(path, onerror=retry)
    if path.exists():
        shutil.rmtree(path, ignore_errors=True)
