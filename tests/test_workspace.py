"""Workspace: per-run worktrees that never disturb the user's checkout (real git, tmp repos)."""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from orchestrator.errors import UsageError
from orchestrator.workspace.worktree import (
    DIRTY_COMMIT_MESSAGE,
    Workspace,
    list_workspaces,
    new_run_id,
)

_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
    # The test's own `git status` must not refresh the index it is comparing.
    "GIT_OPTIONAL_LOCKS": "0",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=_ENV, check=True, capture_output=True, text=True
    ).stdout


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    (path / "app.py").write_text("print('hello')\n")
    (path / "lib").mkdir()
    (path / "lib" / "util.py").write_text("X = 1\n")
    (path / ".gitignore").write_text("*.log\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def snapshot(repo: Path) -> dict[str, object]:
    """Everything of the user's checkout that the module must leave alone."""
    files = {}
    for p in sorted(repo.rglob("*")):
        rel = p.relative_to(repo)
        if rel.parts[0] in (".git", "workspaces") or not p.is_file():
            continue
        files[str(rel)] = hashlib.sha256(p.read_bytes()).hexdigest()
    return {
        "index": hashlib.sha256((repo / ".git" / "index").read_bytes()).hexdigest(),
        "files": files,
        "status": git(repo, "status", "--porcelain", "--untracked-files=all"),
        "branch": git(repo, "symbolic-ref", "HEAD"),
        "head": git(repo, "rev-parse", "HEAD"),
        "stash": git(repo, "stash", "list"),
    }


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    return make_repo(tmp_path / "repo")


def dirty(repo: Path) -> None:
    (repo / "app.py").write_text("print('edited')\n")
    (repo / "notes.txt").write_text("untracked\n")
    (repo / "debug.log").write_text("ignored\n")
    (repo / "lib" / "staged.py").write_text("Y = 2\n")
    git(repo, "add", "lib/staged.py")


def test_run_ids_sort_and_differ() -> None:
    ids = [new_run_id() for _ in range(50)]
    assert len(set(ids)) == 50
    assert all(len(i.split("-")) == 3 for i in ids)


def test_create_commit_remove_leave_user_checkout_identical(repo: Path) -> None:
    dirty(repo)
    before = snapshot(repo)
    ws = Workspace.create(repo, "r1")
    assert ws.run_dir == repo.resolve() / "workspaces" / "r1"
    assert ws.worktree == ws.run_dir / "worktree"
    assert ws.branch == "orchestrate/r1"
    assert ws.dirty and not ws.included_dirty
    assert git(ws.worktree, "symbolic-ref", "HEAD").strip() == "refs/heads/orchestrate/r1"
    assert git(ws.worktree, "rev-parse", "HEAD").strip() == ws.base_commit == before["head"].strip()
    assert (ws.worktree / "app.py").read_text() == "print('hello')\n"
    assert not (ws.worktree / "notes.txt").exists()
    assert snapshot(repo) == before

    (ws.worktree / "app.py").write_text("print('agent')\n")
    (ws.worktree / "new.py").write_text("NEW = True\n")
    sha = ws.commit("agent work")
    # the result is the branch in the user's repository; the builder's own HEAD stays put
    assert sha and git(repo, "rev-parse", "orchestrate/r1").strip() == sha
    assert git(ws.worktree, "rev-parse", "HEAD").strip() == ws.base_commit
    assert (ws.worktree / ".git").is_dir()  # a repository of its own, not a linked worktree
    assert "r1" not in git(repo, "worktree", "list")
    author = git(repo, "log", "-1", "--format=%an <%ae>|%cn <%ce>", sha).strip()
    assert author == "orchestrate <orchestrate@localhost>|orchestrate <orchestrate@localhost>"
    assert snapshot(repo) == before

    ws.write_patch()
    ws.remove()
    assert not ws.worktree.exists()
    assert (ws.run_dir / "patch.diff").is_file()
    assert git(repo, "rev-parse", "orchestrate/r1").strip() == sha
    assert "r1" not in git(repo, "worktree", "list")
    assert snapshot(repo) == before


def test_exclude_lines_added_once(repo: Path) -> None:
    Workspace.create(repo, "a")
    Workspace.create(repo, "b")
    lines = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert lines.count("/workspaces/") == 1
    assert lines.count("/.orchestrate/state/") == 1 and "/.orchestrate/" not in lines
    assert git(repo, "status", "--porcelain") == ""


def test_include_dirty_commits_user_changes_without_touching_them(repo: Path) -> None:
    dirty(repo)
    (repo / "lib" / "util.py").unlink()
    before = snapshot(repo)
    ws = Workspace.create(repo, "d1", include_dirty=True)
    assert ws.dirty and ws.included_dirty
    assert ws.start_commit != ws.base_commit
    assert git(ws.worktree, "log", "-1", "--format=%s").strip() == DIRTY_COMMIT_MESSAGE
    assert git(ws.worktree, "rev-parse", "HEAD^").strip() == ws.base_commit
    assert (ws.worktree / "app.py").read_text() == "print('edited')\n"
    assert (ws.worktree / "notes.txt").read_text() == "untracked\n"
    assert (ws.worktree / "lib" / "staged.py").read_text() == "Y = 2\n"
    assert not (ws.worktree / "lib" / "util.py").exists()
    assert not (ws.worktree / "debug.log").exists()
    assert git(ws.worktree, "status", "--porcelain") == ""
    assert snapshot(repo) == before
    assert Workspace.open(repo, "d1") == ws


def test_include_dirty_on_clean_checkout_adds_no_commit(repo: Path) -> None:
    ws = Workspace.create(repo, "c1", include_dirty=True)
    assert not ws.dirty and not ws.included_dirty
    assert ws.start_commit == ws.base_commit


def test_commit_returns_none_when_nothing_changed(repo: Path) -> None:
    ws = Workspace.create(repo, "n1")
    assert ws.commit("nothing") is None
    assert ws.patch() == "" and ws.changed_files() == []


def test_patch_applies_on_fresh_checkout_of_base(repo: Path, tmp_path: Path) -> None:
    ws = Workspace.create(repo, "p1")
    (ws.worktree / "app.py").write_text("print('committed')\n")
    ws.commit("step 1")
    (ws.worktree / "lib" / "util.py").write_text("X = 2\n")  # uncommitted edit
    (ws.worktree / "fresh.txt").write_text("untracked new file\n")  # uncommitted, untracked
    (ws.worktree / "blob.bin").write_bytes(bytes(range(256)) * 4)
    patch = ws.patch()
    assert patch.endswith("\n")
    assert sorted(ws.changed_files()) == ["app.py", "blob.bin", "fresh.txt", "lib/util.py"]
    assert "4 files changed" in ws.diff_stat()
    assert git(ws.worktree, "status", "--porcelain").count("??") == 2  # index left alone
    path = ws.write_patch()
    assert path == ws.run_dir / "patch.diff"

    fresh = tmp_path / "fresh"
    git(tmp_path, "clone", "-q", str(repo), str(fresh))
    git(fresh, "checkout", "-q", ws.base_commit)
    git(fresh, "apply", "--check", str(path))
    git(fresh, "apply", str(path))
    assert (fresh / "lib" / "util.py").read_text() == "X = 2\n"
    assert (fresh / "blob.bin").read_bytes() == bytes(range(256)) * 4


def test_concurrent_creates_both_succeed(repo: Path) -> None:
    results: dict[str, object] = {}

    def create(run_id: str) -> None:
        try:
            results[run_id] = Workspace.create(repo, run_id)
        except Exception as exc:  # noqa: BLE001 - reported by the assertion below
            results[run_id] = exc

    ids = [f"c{i}" for i in range(4)]
    threads = [threading.Thread(target=create, args=(i,)) for i in ids]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(isinstance(results[i], Workspace) for i in ids), results
    assert [ws.run_id for ws in list_workspaces(repo)] == ids
    lines = (repo / ".git" / "info" / "exclude").read_text().splitlines()
    assert lines.count("/workspaces/") == 1


def test_concurrent_creates_in_separate_processes(repo: Path) -> None:
    code = (
        "import sys; from orchestrator.workspace.worktree import Workspace; "
        "Workspace.create(sys.argv[1], sys.argv[2])"
    )
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", code, str(repo), f"proc{i}"], stderr=subprocess.PIPE
        )
        for i in range(3)
    ]
    errors = [p.communicate()[1] for p in procs]
    assert [p.returncode for p in procs] == [0, 0, 0], errors


def test_open_reattaches_removed_worktree(repo: Path) -> None:
    ws = Workspace.create(repo, "o1")
    (ws.worktree / "x.txt").write_text("x\n")
    sha = ws.commit("x")
    ws.remove()
    again = Workspace.open(repo, "o1")
    assert again.base_commit == ws.base_commit
    assert git(again.worktree, "rev-parse", "HEAD").strip() == sha
    assert (again.worktree / "x.txt").read_text() == "x\n"
    with pytest.raises(UsageError, match="unknown run id"):
        Workspace.open(repo, "nope")


def test_create_from_subdirectory_and_from_a_linked_worktree(repo: Path, tmp_path: Path) -> None:
    ws = Workspace.create(repo / "lib", "sub1")
    assert ws.repo == repo.resolve()
    linked = tmp_path / "linked"
    git(repo, "worktree", "add", "-q", "-b", "feature", str(linked))
    ws2 = Workspace.create(linked, "l1")
    assert ws2.run_dir == linked.resolve() / "workspaces" / "l1"
    assert git(linked, "status", "--porcelain") == ""
    assert not (linked / ".git").is_dir()  # exclude went into the common git dir
    assert (repo / ".git" / "info" / "exclude").read_text().count("/workspaces/") == 1


def test_remove_can_drop_branch(repo: Path) -> None:
    ws = Workspace.create(repo, "g1")
    (ws.worktree / "dirty.txt").write_text("uncommitted\n")
    ws.remove(keep_branch=False)
    assert not ws.worktree.exists()
    assert "orchestrate/g1" not in git(repo, "branch", "--list")


def test_usage_errors(tmp_path: Path, repo: Path) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    with pytest.raises(UsageError, match="not a git repository: .*pass --repo"):
        Workspace.create(plain, "x")
    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    with pytest.raises(UsageError, match="repository has no commits yet"):
        Workspace.create(empty, "x")
    with pytest.raises(UsageError, match="invalid run id"):
        Workspace.create(repo, "../evil")
    Workspace.create(repo, "dup")
    with pytest.raises(UsageError, match="already exists"):
        Workspace.create(repo, "dup")


def test_a_commit_prepared_ahead_is_used_only_where_it_fits(repo: Path) -> None:
    """``prepare_commit`` writes the commit object only; ``commit`` then moves the branch to it
    when it was made for the same files and message and the branch has not moved since, and
    otherwise makes the commit as it would have without it."""
    ws = Workspace.create(repo, "pc1")
    (ws.worktree / "app.py").write_text("print('one')\n")
    tree = ws.snapshot()
    ahead = ws.prepare_commit("first", tree)
    assert ahead is not None
    assert git(repo, "rev-parse", f"refs/heads/{ws.branch}").strip() == ws.base_commit
    assert ws.commit("first", tree, ahead) == ahead.sha
    assert git(repo, "rev-parse", f"refs/heads/{ws.branch}").strip() == ahead.sha

    (ws.worktree / "app.py").write_text("print('two')\n")
    second = ws.snapshot()
    stale = ws.prepare_commit("second", second)
    assert stale is not None
    # another message, another tree: not used
    made = ws.commit("second, reworded", second, stale)
    assert made is not None and made != stale.sha
    assert git(repo, "log", "-1", "--format=%s", made).strip() == "second, reworded"
    # the branch moved on since it was made (its parent is no longer the tip): not used either
    (ws.worktree / "app.py").write_text("print('three')\n")
    third = ws.snapshot()
    early = ws.prepare_commit("third", third)
    assert early is not None and early.parent == made
    (ws.worktree / "lib" / "util.py").write_text("X = 2\n")
    moved = ws.commit("moved", ws.snapshot())
    late = ws.commit("third", third, early)
    assert late is not None and late != early.sha
    assert git(repo, "rev-parse", f"{late}^").strip() == moved
    assert git(repo, "show", f"{late}:app.py") == "print('three')\n"
    # nothing changed since the last commit: nothing to prepare, nothing committed
    assert ws.prepare_commit("again", third) is None and ws.commit("again", third) is None


def test_each_candidate_worktree_keeps_its_own_last_tree(repo: Path) -> None:
    """A racing candidate that wrote nothing gives the tree it holds, never the one another
    candidate wrote last (each workspace object remembers what git said of its own index)."""
    ws = Workspace.create(repo, "cand")
    start = ws.snapshot()
    first, second = ws.candidate("1-c1", start), ws.candidate("1-c2", start)
    (second.worktree / "app.py").write_text("print('second')\n")
    changed = second.snapshot()
    assert changed != start
    assert first.snapshot() == start
    assert ws.snapshot() == start


def _every_byte(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() if p.is_file() else b"<dir>"
            for p in sorted(root.rglob("*"))}


def test_a_run_in_an_empty_repository_leaves_it_byte_identical(tmp_path: Path) -> None:
    from conftest import cli

    from orchestrator.faces.demo import scenario_path

    empty = tmp_path / "empty"
    empty.mkdir()
    git(empty, "init", "-q")
    before = _every_byte(empty)
    proc = cli("run", "fix it", "--repo", str(empty), "--roles",
               str(scenario_path("demo-roles.toml")), "--set",
               'providers.sim.base_url="http://127.0.0.1:9/v1"')
    assert proc.returncode == 2 and "Traceback" not in proc.stderr, proc.stderr
    assert "no commits" in proc.stderr
    assert _every_byte(empty) == before
