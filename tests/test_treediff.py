"""Whether two trees differ outside a set of paths, read from tree objects through the run's
open ``cat-file`` (``workspace/treediff.py``): the same answer as ``git diff --name-only``
filtered by the paths, on real snapshots of a worktree (edits, deletions, a file that becomes a
directory, a mode change, a link, a change to the given paths only), with no git process; and
a tree's files as ``git ls-tree -r`` lists them (the run commit's, for the line counts)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from test_workspace import make_repo

from orchestrator.evidence.sources import GitCommitSource
from orchestrator.workspace.treediff import Unreadable, differs_outside, files
from orchestrator.workspace.worktree import Workspace


def _diff(repo: Path, before: str, after: str) -> set[str]:
    out = subprocess.run(["git", "diff", "--no-renames", "--name-only", "-z", before, after],
                         cwd=repo, check=True, capture_output=True).stdout
    return {p for p in out.decode("utf-8", "surrogateescape").split("\0") if p}


def _step(wt: Path, name: str) -> None:
    """One change to the worktree, as a builder or a command might make it."""
    if name == "edit":
        (wt / "lib" / "util.py").write_text("X = 2\n")
    elif name == "new_dir":
        (wt / "lib" / "deep" / "er").mkdir(parents=True)
        (wt / "lib" / "deep" / "er" / "a.py").write_text("A = 1\n")
        (wt / "lib" / "deep" / "b.py").write_text("B = 1\n")
    elif name == "file_to_dir":
        (wt / "app.py").unlink()
        (wt / "app.py").mkdir()
        (wt / "app.py" / "main.py").write_text("print('x')\n")
    elif name == "mode":
        os.chmod(wt / "lib" / "util.py", 0o755)
    elif name == "link":
        (wt / "lib" / "link.py").symlink_to("util.py")
    elif name == "delete_dir":
        for p in sorted((wt / "lib").rglob("*"), reverse=True):
            p.rmdir() if p.is_dir() and not p.is_symlink() else p.unlink()
        (wt / "lib").rmdir()
    elif name == "revert":
        (wt / "lib").mkdir(exist_ok=True)
        (wt / "lib" / "util.py").write_text("X = 1\n")


def test_the_tree_walk_answers_as_git_diff_does(tmp_path):
    repo = make_repo(tmp_path / "repo")
    ws = Workspace.create(repo, "treediff")
    trees = [ws.snapshot()]
    for step in ("edit", "new_dir", "file_to_dir", "mode", "link", "delete_dir", "revert"):
        _step(ws.worktree, step)
        trees.append(ws.snapshot())
    with GitCommitSource(repo, "HEAD") as reader:
        for before in trees:
            for after in trees:
                differ = _diff(repo, before, after)
                for given in (set(), differ, set(list(differ)[:1]), {"app.py"}):
                    assert differs_outside(reader.tree, before, after, given) == \
                        bool(differ - given), (before, after, differ, given)
        for tree in trees:  # a tree's files: as git ls-tree -r lists them
            listed = subprocess.run(["git", "ls-tree", "-r", "-z", "--name-only", tree], cwd=repo,
                                    check=True, capture_output=True).stdout.decode()
            assert sorted(files(reader.tree, tree)) == sorted(p for p in listed.split("\0") if p)
        with pytest.raises(Unreadable):
            differs_outside(reader.tree, trees[0], "0" * 40, set())
        assert reader.tree("HEAD") is None  # names of trees only, never a revision to parse
    with pytest.raises(OSError, match="closed"):  # the run's reader is closed: git is asked
        differs_outside(reader.tree, trees[0], trees[1], set())


def test_the_commit_reader_lists_its_files_without_ls_tree(sample_repo, monkeypatch):
    """The citation check's line counts list the run commit's files through the reader's own
    ``cat-file``: the same paths ``ls-tree`` gives, no other git process."""
    (sample_repo / "pkg" / "sub").mkdir(parents=True)
    (sample_repo / "pkg" / "sub" / "m.py").write_text("M = 1\n")
    subprocess.run(["git", "add", "-A"], cwd=sample_repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "pkg"],
                   cwd=sample_repo, check=True)
    listed = subprocess.run(["git", "ls-tree", "-r", "-z", "--name-only", "HEAD"],
                            cwd=sample_repo, check=True, capture_output=True).stdout.decode()
    with GitCommitSource(sample_repo, "HEAD") as reader:
        reader.raw("stats.py")  # its cat-file is running
        started: list[list[str]] = []
        run = subprocess.run

        def counted(argv, *args, **kwargs):
            started.append(list(argv))
            return run(argv, *args, **kwargs)

        monkeypatch.setattr(subprocess, "run", counted)
        assert reader.paths() == sorted(p for p in listed.split("\0") if p)
        monkeypatch.undo()
        assert started == []
