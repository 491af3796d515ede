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
"""

from __future__ import annotations

import dataclasses
import fcntl
import functools
import json
import os
import re
import secrets
import shutil
import stat
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from orchestrator.errors import UsageError
from orchestrator.gitsafe import GitError, common_dir, git
from orchestrator.gitsafe import toplevel as _git_toplevel

__all__ = ["DIRTY_COMMIT_MESSAGE", "GitError", "PreparedCommit", "Workspace", "list_workspaces",
           "new_run_id"]

# run state only: a team commits .orchestrate/agents/; older runs kept their SQLite files in
# .orchestrate/ itself
EXCLUDE_LINES = ("/workspaces/", "/.orchestrate/state/", "/.orchestrate/*.sqlite*",
                 "/.orchestrate/*.lock")
_OLD_EXCLUDE = "/.orchestrate/"  # what versions before 0.2 wrote: it hid the agents too
DIRTY_COMMIT_MESSAGE = "orchestrate: include uncommitted changes"
_META = "workspace.json"
_INDEX = "git-index"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")


def new_run_id() -> str:
    """A sortable, collision-resistant id such as ``20261130-053944-ab12cd`` (UTC)."""
    return time.strftime("%Y%m%d-%H%M%S", time.gmtime()) + "-" + secrets.token_hex(3)


@dataclass(frozen=True)
class PreparedCommit:
    """A commit object of the run branch's next commit, made but not yet on the branch."""

    tree: str
    message: str
    sha: str
    parent: str

    def fits(self, message: str, tree: str) -> bool:
        return (message, tree) == (self.message, self.tree)


@dataclass(frozen=True)
class Workspace:
    """One run's worktree and artefact directory inside the user's repository."""

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
    # what git said about this run, kept for the run's length: the branch tip after our own
    # commit, and the diff of a tree (a tree never changes) — each asked of git once
    _memo: dict[Any, Any] = field(default_factory=dict, compare=False, repr=False)

    @functools.cached_property
    def git_dir(self) -> Path:
        """The user's (shared) ``.git``: trusted, never writable by the builder."""
        return common_dir(self.repo)

    @property
    def objects_dirs(self) -> list[Path]:
        """The object stores the builder's repository borrows (read-only in the sandbox)."""
        return _object_stores(self.git_dir / "objects")

    @classmethod
    def create(cls, repo: Path, run_id: str, *, include_dirty: bool = False) -> Workspace:
        """Make ``workspaces/<run_id>/worktree`` on a new branch at the user's HEAD."""
        _check_run_id(run_id)
        top, git_dir, base = _probe(Path(repo).expanduser())
        run_dir = top / "workspaces" / run_id
        worktree = run_dir / "worktree"
        branch = f"orchestrate/{run_id}"
        if worktree.exists():
            raise UsageError(f"run {run_id} already exists in {top}")
        _ensure_excluded(top, git_dir)
        dirty = bool(_dirty_paths(top))
        # "" as the old value: create the branch, never move one that exists or appeared
        # meanwhile (git refuses: that is the check that the run is new)
        made = git("update-ref", f"refs/heads/{branch}", base, "", cwd=top, check=False)
        if made.returncode != 0:
            raise UsageError(f"run {run_id} already exists in {top}: "
                             f"{made.stderr.strip() or f'branch {branch} exists'}")
        ws = cls(top, run_id, run_dir, worktree, branch, base, base, dirty, False)
        ws.__dict__["git_dir"] = git_dir  # the cached property, already asked of git
        ws._memo["tip"] = base
        try:
            run_dir.mkdir(parents=True, exist_ok=True)
            ws._checkout(base)
            if include_dirty and dirty:
                _copy_dirty_state(top, worktree, ws)
                start = ws.commit(DIRTY_COMMIT_MESSAGE) or base
                if start != base:
                    memo = ws._memo
                    ws = cls(top, run_id, run_dir, worktree, branch, base, start, dirty, True)
                    ws._memo.update(memo)
                    ws._point_builder_repo(start)
        except BaseException:
            git("update-ref", "-d", f"refs/heads/{branch}", cwd=top, check=False)
            _rmtree(run_dir)
            raise
        ws._save()
        return ws

    @classmethod
    def open(cls, repo: Path, run_id: str, *, reattach: bool = True) -> Workspace:
        """Re-open an existing run; with ``reattach`` a removed worktree is checked out again."""
        top = _toplevel(repo)
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

    def tip(self) -> str | None:
        """The commit the run branch points at, or None if the branch is gone."""
        if "tip" in self._memo:
            return str(self._memo["tip"])
        out = git("rev-parse", "--verify", "-q", f"refs/heads/{self.branch}^{{commit}}",
                  cwd=self.repo, check=False).stdout.strip()
        return out or None

    def commit(self, message: str, tree: str | None = None,
               prepared: PreparedCommit | None = None) -> str | None:
        """Record the worktree's files (or ``tree``, a snapshot of them) as a commit on the run
        branch; None if nothing changed. ``prepared`` is a commit object made ahead for the
        same files and message (``prepare_commit``): then only the branch moves.

        The builder's own ``.git`` (its commits, stashes, config) plays no part: what counts is
        the files in the worktree, staged through our index with the user's trusted config.
        """
        tree = tree or self.snapshot()
        # a prepared commit moves the branch only if the branch is still where it was made for
        if prepared is None or not prepared.fits(message, tree) or not self._move(prepared):
            made = self.prepare_commit(message, tree)
            if made is None:
                return None
            self._move(made, check=True)
            prepared = made
        return prepared.sha

    def _move(self, made: PreparedCommit, *, check: bool = False) -> bool:
        """Put the run branch on ``made`` if it is still on ``made.parent`` (compare and swap)."""
        moved = git("update-ref", f"refs/heads/{self.branch}", made.sha, made.parent,
                    cwd=self.repo, check=check).returncode == 0
        if moved:
            self._memo["tip"] = made.sha
        return moved

    def prepare_commit(self, message: str, tree: str) -> PreparedCommit | None:
        """The commit of ``tree`` on the run branch, written to the object store but not yet
        on the branch (``commit`` puts it there); None if the branch already holds these
        files. A commit object nothing points at is harmless: git's gc drops it."""
        ref = f"refs/heads/{self.branch}"
        if self._memo.get("tip") == self.base_commit and self._tree_diff(tree)[1]:
            parent = self.base_commit  # where this process put the branch; the files differ
        else:
            heads = git("rev-parse", f"{ref}^{{commit}}", f"{ref}^{{tree}}", cwd=self.repo,
                        check=False).stdout.split()
            if len(heads) != 2:
                raise GitError(f"branch {self.branch} is gone; the run's result cannot be "
                               "recorded")
            parent, parent_tree = heads
            if parent_tree == tree:
                return None
        sha = git("commit-tree", tree, "-p", parent, cwd=self.repo,
                  input=message.encode("utf-8")).stdout.strip()
        return PreparedCommit(tree=tree, message=message, sha=sha, parent=parent)

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

    def diff_size(self) -> tuple[int, int]:
        """Files changed and lines added plus removed against ``base_commit`` (binary: 0)."""
        out = self._diff("--numstat", "-z").decode("utf-8", "surrogateescape")
        files, lines = 0, 0
        for entry in out.split("\0"):
            parts = entry.split("\t")
            if len(parts) >= 2:
                files += 1
                lines += sum(int(p) for p in parts[:2] if p.isdigit())
        return files, lines

    def snapshot(self) -> str:
        """The tree object of the worktree's files right now (written to the user's objects)."""
        if not self._stage() and "index_tree" in self._memo:
            return str(self._memo["index_tree"])  # nothing was staged since it was written
        tree = self._git("write-tree").stdout.strip()
        self._memo["index_tree"] = tree
        return tree

    def diff_stat(self, tree: str | None = None) -> str:
        """``git diff --stat`` of all work (committed or not), or of ``tree`` (a snapshot),
        against ``base_commit``."""
        if tree:
            return self._tree_diff(tree)[0]
        return self._diff("--stat").decode("utf-8", "replace")

    def patch(self, tree: str | None = None) -> str:
        """A binary-safe unified diff of all work (or of ``tree``, a snapshot) against
        ``base_commit``, for ``git apply``."""
        raw = self._tree_diff(tree)[1] if tree else self._diff("--binary", "--full-index")
        return raw.decode("utf-8", "surrogateescape")

    def changed_files(self) -> list[str]:
        """Paths (relative to the repository) that differ from ``base_commit``."""
        out = self._diff("--name-only", "-z").decode("utf-8", "surrogateescape")
        return [p for p in out.split("\0") if p]

    def write_patch(self, tree: str | None = None) -> Path:
        """Write ``patch.diff`` (of all work, or of ``tree``) into the run directory."""
        path = self.run_dir / "patch.diff"
        path.write_bytes(self._tree_diff(tree)[1] if tree else self._diff("--binary",
                                                                           "--full-index"))
        return path

    def remove(self, keep_branch: bool = True) -> None:
        """Delete the worktree (whatever the builder did to it); artefacts and branch stay."""
        legacy = (self.worktree / ".git").is_file()  # a `git worktree` from an older version
        if self.worktree.exists() or self.worktree.is_symlink():
            _rmtree(self.worktree)
        if legacy:
            git("worktree", "prune", cwd=self.repo, check=False)
        (self.run_dir / _INDEX).unlink(missing_ok=True)
        if not keep_branch and _ref_exists(self.repo, self.branch):
            git("update-ref", "-d", f"refs/heads/{self.branch}", cwd=self.repo)

    # --- internals -------------------------------------------------------------------------

    def _git(self, *args: str, text: bool = True, check: bool = True):  # noqa: ANN202
        return git(*args, git_dir=self.git_dir, work_tree=self.worktree,
                   index=self.run_dir / _INDEX, text=text, check=check)

    def _stage(self) -> bool:
        """Stage the worktree's files in our index; True if that changed the index."""
        changed = not (self.run_dir / _INDEX).exists()
        if changed:
            self._git("read-tree", self.tip() or self.start_commit or self.base_commit)
        # --verbose names each path it adds or removes: nothing named, nothing changed
        added = self._git("add", "-A", "--ignore-errors", "--verbose")
        changed = changed or bool(added.stdout.strip())
        # git says when it adds a repository it found inside the tree; the index itself is
        # checked once per process too (one left from a process that died mid-stage)
        if "embedded git repository" in added.stderr or not self._memo.get("index_checked"):
            changed = self._drop_nested_repos() or changed
            self._memo["index_checked"] = True
        if changed:
            self._memo.pop("index_tree", None)
        return changed

    def _drop_nested_repos(self) -> bool:
        """A repository the builder made inside the worktree is not part of the result; True if
        one was dropped from the index."""
        staged = self._git("ls-files", "-s", "-z").stdout
        links = [e.split("\t", 1)[1] for e in staged.split("\0")
                 if e.startswith("160000 ") and "\t" in e]
        if not links:
            return False
        known = self._git("ls-tree", "-r", "-z", "--name-only", self.base_commit).stdout
        new = [p for p in links if p not in set(known.split("\0"))]
        if new:
            self._git("rm", "-q", "--cached", "-r", "-f", "--", *new)
        return bool(new)

    def _diff(self, *flags: str) -> bytes:
        self._stage()
        return self._git("diff", "--cached", *_DIFF_FLAGS, *flags, self.base_commit, "--",
                         text=False).stdout

    def _tree_diff(self, tree: str) -> tuple[str, bytes]:
        """(stat, binary patch) of ``tree`` against ``base_commit``, in one git call."""
        key = ("diff", tree)
        if key not in self._memo:
            out = self._git("diff", *_DIFF_FLAGS, "--stat", "--patch", "--binary", "--full-index",
                            self.base_commit, tree, "--", text=False).stdout
            summary, sep, patch = out.partition(b"\n\ndiff --git ")
            self._memo[key] = (summary.decode("utf-8", "replace") + ("\n" if sep else ""),
                               b"diff --git " + patch if sep else b"")
        return self._memo[key]

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
        (self.run_dir / _INDEX).unlink(missing_ok=True)
        self._git("read-tree", "--reset", "-u", tree or commit)
        self._memo["index_checked"] = True  # a fresh index, from a commit or our snapshot
        if tree:
            self._memo["index_tree"] = tree
        else:
            self._memo.pop("index_tree", None)
        self._point_builder_repo(commit, same_tree=tree is None)

    def _point_builder_repo(self, commit: str, *, same_tree: bool = True) -> None:
        """Set the builder repository's branch (and index) to ``commit``.

        Only done before any builder command has run: afterwards that ``.git`` is untrusted.
        """
        own = self.worktree / ".git"
        git("update-ref", f"refs/heads/{self.branch}", commit, git_dir=own)
        if same_tree:  # our index matches the files and the commit: reuse its stat data
            shutil.copyfile(self.run_dir / _INDEX, own / "index")
        else:
            git("read-tree", commit, git_dir=own, work_tree=self.worktree)

    def _save(self) -> None:
        meta = {
            "run_id": self.run_id, "branch": self.branch, "base_commit": self.base_commit,
            "start_commit": self.start_commit, "dirty": self.dirty,
            "included_dirty": self.included_dirty,
        }
        (self.run_dir / _META).write_text(json.dumps(meta, indent=2) + "\n")


_DIFF_FLAGS = ("--no-color", "--no-ext-diff", "--no-textconv", "--ignore-submodules=all",
               "--src-prefix=a/", "--dst-prefix=b/")


def create_record_dir(repo: Path, run_id: str, kind: str) -> Path:
    """``workspaces/<run_id>/`` for a run that only reads the checkout (``explore``): its
    artefacts and no worktree or branch; listed with the other runs."""
    top = _toplevel(repo)
    _check_run_id(run_id)
    run_dir = top / "workspaces" / run_id
    if run_dir.exists():
        raise UsageError(f"run {run_id} already exists in {top}")
    _ensure_excluded(top)
    head = git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=top, check=False)
    run_dir.mkdir(parents=True)
    meta = {"run_id": run_id, "branch": "", "base_commit": head.stdout.strip(), "kind": kind}
    (run_dir / _META).write_text(json.dumps(meta, indent=2) + "\n")
    return run_dir


def list_workspaces(repo: Path) -> list[Workspace]:
    """Every run recorded under ``<repo>/workspaces``, oldest first."""
    top = _toplevel(repo)
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


def _object_stores(objects: Path, depth: int = 0) -> list[Path]:
    """``objects`` and, recursively, the stores its ``info/alternates`` names."""
    found = [objects.resolve()]
    try:
        lines = (objects / "info" / "alternates").read_text(encoding="utf-8").splitlines()
    except OSError:
        return found
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#") or depth > 4:
            continue
        alt = Path(line) if os.path.isabs(line) else objects / line
        if alt.is_dir():
            found += _object_stores(alt, depth + 1)
    return found


def _toplevel(repo: Path) -> Path:
    path = Path(repo).expanduser()
    top = _git_toplevel(path) if path.is_dir() else None
    if top is None:
        raise UsageError(f"not a git repository: {path} (run inside a repository or pass --repo)")
    return top


def _probe(path: Path) -> tuple[Path, Path, str]:
    """The repository's top level, its shared ``.git`` and its HEAD commit, in one git call."""
    if path.is_dir():
        found = git("rev-parse", "--show-toplevel", "--git-common-dir", "HEAD^{commit}",
                    cwd=path, check=False)
        lines = found.stdout.splitlines()
        if found.returncode == 0 and len(lines) == 3:
            top = Path(lines[0])
            common = Path(lines[1])
            return top, (common if common.is_absolute() else path / common).resolve(), lines[2]
    top = _toplevel(path)  # not a repository, or no commit yet: say which
    return top, common_dir(top), _head(top)


def _head(top: Path) -> str:
    result = git("rev-parse", "--verify", "--quiet", "HEAD^{commit}", cwd=top, check=False)
    if result.returncode != 0:
        raise UsageError(f"repository has no commits yet: {top} (make a first commit)")
    return result.stdout.strip()


def _check_run_id(run_id: str) -> None:
    if not _RUN_ID.match(run_id) or ".." in run_id or run_id.endswith(".lock"):
        raise UsageError(f"invalid run id {run_id!r}: use letters, digits, '.', '_' and '-'")


def _ref_exists(top: Path, branch: str) -> bool:
    return git("show-ref", "--verify", "--quiet", f"refs/heads/{branch}", cwd=top,
               check=False).returncode == 0


def _ensure_excluded(top: Path, git_dir: Path | None = None) -> None:
    exclude = (git_dir or common_dir(top)) / "info" / "exclude"
    exclude.parent.mkdir(parents=True, exist_ok=True)
    # flock serialises concurrent runs so neither adds a line the other just added.
    with open(exclude, "a+", encoding="utf-8") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            fh.seek(0)
            current = fh.read()
            lines = current.splitlines()
            kept = [line for line in lines if line.strip() != _OLD_EXCLUDE]
            present = {line.strip() for line in kept}
            missing = [line for line in EXCLUDE_LINES if line not in present]
            if missing or len(kept) != len(lines):
                fh.seek(0)
                fh.truncate()
                fh.write("".join(f"{line}\n" for line in [*kept, *missing]))
                fh.flush()
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _dirty_paths(top: Path) -> list[str]:
    out = git("status", "--porcelain", "-z", "--untracked-files=all", "--ignore-submodules=all",
              cwd=top).stdout
    return [p for p in out.split("\0") if p]


def _copy_dirty_state(top: Path, worktree: Path, ws: Workspace) -> None:
    diff = git(
        "diff", "HEAD", "--binary", "--full-index", "--no-color", "--no-ext-diff",
        "--no-textconv", "--ignore-submodules=all", "--src-prefix=a/", "--dst-prefix=b/",
        cwd=top, text=False,
    ).stdout
    if diff:
        git("apply", "--whitespace=nowarn", "-", git_dir=ws.git_dir, work_tree=worktree,
            cwd=worktree, input=diff)
    out = git("ls-files", "--others", "--exclude-standard", "-z", cwd=top).stdout
    for rel in (p for p in out.split("\0") if p and not p.endswith("/")):
        src, dst = top / rel, worktree / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.is_symlink():
            os.symlink(os.readlink(src), dst)
        elif src.is_file():
            shutil.copy2(src, dst)


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
