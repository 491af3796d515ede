"""Git asked less without the result changing: worktree snapshots reuse a tree only while
nothing new is staged, and the citation reader's long-lived git process checks a commit only
when asked and ends with the run."""

from __future__ import annotations

import os
import subprocess
import threading

import pytest

from orchestrator.evidence.verify import GitCommitSource
from orchestrator.workspace.worktree import Workspace


def test_a_repository_made_inside_the_worktree_stays_out_of_every_snapshot(sample_repo):
    ws = Workspace.create(sample_repo, "run-nested")
    first = ws.snapshot()
    sub = ws.worktree / "sub"
    sub.mkdir()
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@x"]
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run([*git, *args], cwd=sub, check=True, capture_output=True)
    (ws.worktree / "new.txt").write_text("new\n")
    second = ws.snapshot()
    listed = subprocess.run(["git", "ls-tree", "-r", second], cwd=sample_repo, check=True,
                            capture_output=True, text=True).stdout
    assert "new.txt" in listed and "sub" not in listed and "160000" not in listed
    assert second != first and ws.snapshot() == second  # and the next snapshot agrees
    stat, patch = ws.diff_stat(second), ws.patch(second)
    assert stat == ws.diff_stat() and patch == ws.patch()  # the tree's diff is the worktree's
    assert "new.txt" in stat and "+new" in patch
    commit = ws.commit("work", second)
    assert commit and ws.tip() == commit and ws.commit("again", second) is None
    reopened = Workspace.open(sample_repo, "run-nested")
    assert reopened.tip() == commit and reopened.snapshot() == second


def test_a_snapshot_with_nothing_staged_since_the_last_is_that_tree(sample_repo):
    """The tree written last is reused only while ``git add`` stages nothing new; every change
    (edit, delete, mode, new file, an edit reverted), also one staged by a diff in between,
    gives the tree git itself writes."""
    ws = Workspace.create(sample_repo, "run-memo")
    first = ws.snapshot()
    target = ws.worktree / "stats.py"

    def written() -> str:  # the tree of the worktree, from a fresh index of git's own
        env = {"GIT_INDEX_FILE": str(ws.run_dir / "check-index"), "GIT_WORK_TREE": str(ws.worktree),
               "GIT_DIR": str(sample_repo / ".git")}
        for args in (["read-tree", "--empty"], ["add", "-A"], ["write-tree"]):
            out = subprocess.run(["git", *args], env={**os.environ, **env},
                                 cwd=ws.worktree, check=True, capture_output=True, text=True)
        return out.stdout.strip()

    assert ws.snapshot() == first == written()
    original = target.read_text()
    target.write_text(original + "# more\n")
    assert ws.diff_stat()  # stages the edit before the next snapshot
    edited = ws.snapshot()
    assert edited != first and edited == written()
    target.write_text(original)
    assert ws.snapshot() == first  # reverted: staged again, not the tree kept from before
    target.chmod(0o755)
    assert ws.snapshot() == written() != first
    (ws.worktree / "new.txt").write_text("x\n")
    (ws.worktree / "tests" / "test_stats.py").unlink()
    last = ws.snapshot()
    assert last == written() and ws.snapshot() == last
    ws.restore(edited)
    assert ws.snapshot() == edited == written()


def test_the_citation_reader_checks_a_commit_only_when_asked_to(sample_repo):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=sample_repo, check=True,
                          capture_output=True, text=True).stdout.strip()
    with GitCommitSource(sample_repo, head, resolved=True) as src:
        assert src.lines("stats.py") and src.lines("missing.py") is None
    with GitCommitSource(sample_repo, "HEAD") as src:
        assert src.commit == head
    bad = GitCommitSource(sample_repo, "no-such-rev")
    with pytest.raises(Exception, match="unknown commit"):
        bad.lines("stats.py")


def test_closing_the_commit_reader_waits_for_a_read_in_flight_and_ends_its_git(sample_repo):
    """A read on another thread (the line counts) that is starting its git process when the
    run closes the reader: the close waits for it and ends that process, so none outlives the
    run."""
    src = GitCommitSource(sample_repo, "HEAD")
    with src._io:  # the read in flight holds the reader
        closer = threading.Thread(target=src.close)
        closer.start()
        closer.join(0.3)
        assert closer.is_alive()  # close waits for it
        stdin, _ = src._pipes()  # ... which starts its git process now
        proc = src._proc
    closer.join(10)
    assert not closer.is_alive() and src._proc is None
    assert proc is not None and proc.wait(5) is not None and stdin.closed
