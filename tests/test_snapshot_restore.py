"""A run's worktree restored from a tree it did not make (a fleet resume reads the checkpoint's
tree from objects fetched from the team's origin, ``faces/fleet_share.adopt``): whatever the
tree holds — a link out with a same-named directory behind it, a ``.git`` entry, a ``..`` entry,
a gitlink — the restore refuses or contains it; nothing outside the run's worktree changes.

And ``adopt`` itself: a run's mirrored files whose names climb out of the run's folder are not
written there."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from test_apply_crafted import _git

from orchestrator.errors import OrchestrateError
from orchestrator.faces.fleet_share import SNAPSHOTS, RunFiles, adopt
from orchestrator.workspace.worktree import Workspace

pytest_plugins = ["pg"]


def _mktree(repo: Path, rows: list[tuple[str, str, str]]) -> str:
    """A tree of (mode, name, content-or-subtree-sha) rows, names and duplicates unchecked."""
    lines = []
    for mode, name, value in rows:
        if mode == "040000" or mode == "160000":
            kind, sha = ("tree" if mode == "040000" else "commit"), value
        else:
            kind, sha = "blob", _git(repo, "hash-object", "-w", "--stdin", stdin=value)
        lines.append(f"{mode} {kind} {sha}\t{name}")
    return _git(repo, "mktree", "--missing", stdin="".join(line + "\n" for line in lines))


def _outside(*roots: Path) -> dict[str, str]:
    found = {}
    for root in roots:
        for path in sorted(root.rglob("*")):
            if "workspaces" in path.parts or "objects" in path.parts:
                continue  # the run's own folder; objects a snapshot writes by design
            rel = str(path)
            found[rel] = ("link:" + os.readlink(path) if path.is_symlink() else
                          hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file()
                          else "dir")
    return found


def _trees(repo: Path, sentinel: Path) -> dict[str, str]:
    pwn = _mktree(repo, [("100644", "pwned", "x\n")])
    git_dir = _mktree(repo, [("100644", "config", f"[core]\n\tfsmonitor = touch {sentinel}/p\n")])
    head = _git(repo, "rev-parse", "HEAD")
    return {
        "link out, then a directory of the same name": _mktree(repo, [
            ("120000", "out", str(sentinel)), ("040000", "out", pwn)]),
        "a directory, then a link of the same name": _mktree(repo, [
            ("040000", "out", pwn), ("120000", "out", str(sentinel))]),
        "a link up and out": _mktree(repo, [("120000", "up", "../../../../sentinel")]),
        "a .git directory": _mktree(repo, [("040000", ".git", git_dir)]),
        "a .git directory below": _mktree(repo, [
            ("040000", "sub", _mktree(repo, [("040000", ".git", git_dir)]))]),
        "a dot-dot directory": _mktree(repo, [("040000", "..", pwn)]),
        "a gitlink": _mktree(repo, [("160000", "vendor", head), ("100644", ".gitmodules",
                                    '[submodule "v"]\n\tpath = vendor\n\turl = ../x\n')]),
    }


@pytest.mark.parametrize("name", [
    "link out, then a directory of the same name", "a directory, then a link of the same name",
    "a link up and out", "a .git directory", "a .git directory below", "a dot-dot directory",
    "a gitlink"])
def test_restoring_a_crafted_tree_changes_nothing_outside_the_worktree(
        sample_repo: Path, tmp_path: Path, name: str) -> None:
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("the user's\n")
    ws = Workspace.create(sample_repo, "r1")
    tree = _trees(sample_repo, sentinel)[name]
    before = _outside(sample_repo, sentinel)
    try:
        ws.restore(tree)
    except OrchestrateError as exc:  # refused: with a reason, not a traceback
        assert str(exc).strip()
    assert _outside(sample_repo, sentinel) == before
    assert not (sentinel / "pwned").exists() and not (sentinel / "p").exists()
    own = ws.worktree / ".git" / "config"
    assert "fsmonitor" not in (own.read_text() if own.is_file() else "")
    # what our own git calls read next: the worktree's files as a tree, a diff
    try:
        ws.snapshot()
        ws.diff_stat()
    except OrchestrateError as exc:
        assert str(exc).strip()
    assert _outside(sample_repo, sentinel) == before
    assert not (sentinel / "pwned").exists() and not (sentinel / "p").exists()


def test_adopting_a_run_writes_only_its_files_and_a_branch_grown_from_its_start(
        pg_url: str, sample_repo: Path, tmp_path: Path) -> None:
    # what another machine finds: the run's mirrored files (one named to climb out of the
    # run's folder) and a snapshot ref on the origin whose parent someone else made
    origin, clone = tmp_path / "origin.git", tmp_path / "clone"
    subprocess.run(["git", "clone", "-q", "--bare", str(sample_repo), str(origin)], check=True)
    subprocess.run(["git", "clone", "-q", str(origin), str(clone)], check=True)
    start = _git(clone, "rev-parse", "HEAD")
    run_id = "20261202-120000-feedface"
    files = RunFiles(pg_url)
    try:
        for name, content in (("run.json", "{}"), ("agents.json", "{}"),
                              ("workspace.json", f'{{"base_commit": "{start}"}}'),
                              ("../../escaped.txt", "x"), (str(tmp_path / "abs.txt"), "x")):
            files.put(run_id, name, content)
    finally:
        files.close()
    hooks = _mktree(origin, [("100755", "pre-commit", "touch /tmp/pwned\n")])
    alien = _git(origin, "commit-tree", _mktree(origin, [("040000", ".husky", hooks)]),
                 "-m", "not the run's")
    snap = _git(origin, "commit-tree", f"{start}^{{tree}}", "-p", alien, "-m", "snapshot")
    _git(origin, "update-ref", f"{SNAPSHOTS}/{run_id}", snap)
    before = _outside(tmp_path / "origin.git", sample_repo)
    outside = {p for p in tmp_path.rglob("*") if "workspaces" not in p.parts}

    assert adopt(pg_url, clone, run_id, str(origin))
    assert sorted(p.name for p in (clone / "workspaces" / run_id).iterdir()) == [
        "agents.json", "run.json", "workspace.json"]
    assert _git(clone, "rev-parse", f"refs/heads/orchestrate/{run_id}") == start
    assert _outside(tmp_path / "origin.git", sample_repo) == before
    new = {p for p in tmp_path.rglob("*") if "workspaces" not in p.parts} - outside
    assert all(p.is_relative_to(clone / ".git") for p in new), sorted(map(str, new))
    assert not adopt(pg_url, clone, "../../x", str(origin))
