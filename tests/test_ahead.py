"""Work done ahead of the critical path (``orchestrator/engine/ahead.py``), on real
repositories. The worktree's tree taken while the builder's model writes: the tree it gives is
always the worktree's as it is when asked (a write while a snapshot was being taken included),
it takes no snapshot of its own when the one taken ahead still holds, and a run's recorded tree
is what a fresh snapshot of its worktree gives. The commit made while the judges read is used
only where it fits. The line counts started when explorers start are the commit's, and never
hold anything up."""

from __future__ import annotations

import asyncio
import subprocess
import threading
from pathlib import Path

import pytest
from conftest import run_env, sim_roles
from test_workspace import make_repo

from orchestrator import api
from orchestrator.engine.ahead import Ahead, TreeAhead, Watches
from orchestrator.evidence.sources import GitCommitSource, LineCounts
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.workspace.worktree import Bounds, Workspace


def _blob(repo: Path, tree: str, path: str) -> str:
    return subprocess.run(["git", "cat-file", "blob", f"{tree}:{path}"], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


class Counted:
    """``Workspace.snapshot`` that counts its calls; ``hold`` keeps the next one waiting inside
    until released (a snapshot still running when the next tool writes)."""

    def __init__(self, ws: Workspace) -> None:
        self.ws, self.calls = ws, 0
        self.hold: threading.Event | None = None
        self.inside = threading.Event()

    def __call__(self) -> str:
        self.calls += 1
        self.inside.set()
        if self.hold is not None:
            self.hold.wait(10)
            self.hold = None
        return self.ws.snapshot()


async def _write(ahead: TreeAhead, path: Path, text: str) -> None:
    """A writing tool, as ``Toolbox.call`` reports it."""
    ahead.started()
    try:
        await asyncio.to_thread(path.write_text, text)
    finally:
        ahead.finished()


async def test_the_tree_taken_ahead_is_used_when_nothing_wrote_since(tmp_path):
    repo = make_repo(tmp_path / "repo")
    ws = Workspace.create(repo, "a1")
    snap = Counted(ws)
    ahead = TreeAhead(snap)
    await _write(ahead, ws.worktree / "app.py", "print('one')\n")
    await _write(ahead, ws.worktree / "app.py", "print('two')\n")
    await asyncio.sleep(0)  # the model "thinks": the snapshot after the last write runs
    tree = await ahead.tree()
    assert snap.calls == 2  # one after each write; none when asked
    assert _blob(repo, tree, "app.py") == "print('two')\n"
    assert tree == ws.snapshot()  # the same as taking it now
    await ahead.settle()


async def test_the_tree_taken_after_the_preflight_starts_the_build_only_if_nothing_wrote(
        tmp_path):
    """The snapshot started after the preflight's commands is the first attempt's tree, once,
    when no session's writing tool has run since; otherwise the attempt takes its own."""
    repo = make_repo(tmp_path / "repo")
    ws = Workspace.create(repo, "first", bounds=Bounds())
    (ws.worktree / "made-by-a-test-run.txt").write_text("output\n")  # the preflight wrote
    taken: list[str] = []

    async def own() -> str:
        taken.append(await asyncio.to_thread(ws.snapshot))
        return taken[-1]

    run = Ahead()
    run.start_tree(ws)
    first = await run.first_tree(own)
    assert taken == [] and first == ws.snapshot()
    assert _blob(repo, first, "made-by-a-test-run.txt") == "output\n"
    assert await run.first_tree(own) == first and len(taken) == 1  # once: then its own
    run.start_tree(ws)
    await _write(Watches(run), ws.worktree / "app.py", "print('written')\n")
    second = await run.first_tree(own)
    assert taken[-1] == second != first and _blob(repo, second, "app.py") == "print('written')\n"


async def test_a_write_while_a_snapshot_runs_is_in_the_tree(tmp_path):
    repo = make_repo(tmp_path / "repo")
    ws = Workspace.create(repo, "a2")
    snap = Counted(ws)
    ahead = TreeAhead(snap)
    snap.hold = threading.Event()
    await _write(ahead, ws.worktree / "app.py", "print('first')\n")
    await asyncio.to_thread(snap.inside.wait, 10)  # the snapshot ahead has begun
    ahead.started()  # the next tool writes while it runs
    (ws.worktree / "app.py").write_text("print('second')\n")
    (ws.worktree / "new.py").write_text("Z = 3\n")
    snap.hold.set()
    ahead.finished()
    tree = await ahead.tree()
    assert _blob(repo, tree, "app.py") == "print('second')\n"
    assert _blob(repo, tree, "new.py") == "Z = 3\n"
    # asked while a writing tool still runs (nothing finished since it started): taken anew
    ahead.started()
    (ws.worktree / "new.py").write_text("Z = 4\n")
    assert _blob(repo, await ahead.tree(), "new.py") == "Z = 4\n"
    await ahead.settle()


async def test_a_snapshot_ahead_that_failed_is_taken_again_and_its_error_not_lost(tmp_path):
    repo = make_repo(tmp_path / "repo")
    ws = Workspace.create(repo, "a3")
    failures = []

    def flaky() -> str:
        if not failures:
            failures.append(1)
            raise RuntimeError("index.lock held")
        return ws.snapshot()

    ahead = TreeAhead(flaky)
    await _write(ahead, ws.worktree / "app.py", "print('x')\n")
    await ahead.settle()  # the failure is not raised here, nor logged as never retrieved
    assert _blob(repo, await ahead.tree(), "app.py") == "print('x')\n"

    def broken() -> str:
        raise RuntimeError("git is gone")

    ahead = TreeAhead(broken)
    await _write(ahead, ws.worktree / "app.py", "print('y')\n")
    try:
        await ahead.tree()
    except RuntimeError as exc:  # a lasting failure reaches the build
        assert "git is gone" in str(exc)
    else:
        raise AssertionError("a snapshot that cannot be taken must fail the build")


async def test_a_runs_recorded_tree_is_its_worktrees(fresh_sim, sample_repo):
    """The demo's builder edits, runs the tests and submits: the tree the checkpoint and the
    commit hold is the worktree's, byte for byte."""
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim),
                            env=run_env())
    assert result.status == "succeeded", result.reason
    ws = Workspace.open(sample_repo, result.run_id, reattach=False)
    assert (ws.worktree / "stats.py").is_file()  # the run's own worktree, as the builder left it
    committed = subprocess.run(["git", "rev-parse", f"{result.commit}^{{tree}}"],
                               cwd=sample_repo, check=True, capture_output=True,
                               text=True).stdout.strip()
    assert committed == ws.snapshot()


async def test_the_toolbox_tells_its_watch_of_writing_tools_only(tmp_path):
    """Reads and searches leave the snapshot ahead standing; a write, a failed one included,
    is seen starting and ending."""
    from orchestrator.tools.base import Toolbox
    from orchestrator.tools.edit import edit_tools
    from orchestrator.tools.explorer import explorer_tools

    repo = make_repo(tmp_path / "repo")
    seen: list[str] = []

    class Watch:
        def started(self) -> None:
            seen.append("started")

        def finished(self) -> None:
            seen.append("finished")

    box = Toolbox.of([*explorer_tools(repo), *edit_tools(repo)], Watch())
    assert (await box.call("read", {"path": "app.py"})).ok
    assert (await box.call("search", {"pattern": "hello"})).ok
    assert seen == []
    assert (await box.call("write_file", {"path": "b.py", "content": "B = 1\n"})).ok
    assert not (await box.call("replace", {"path": "b.py", "old": "nope", "new": "x"})).ok
    assert seen == ["started", "finished"] * 2


def test_line_counts_made_ahead_match_and_a_closed_reader_starts_no_git(sample_repo):
    """The line counts started on a thread when explorers start are the counts of the commit,
    and starting them never waits for a count in progress; once the run closes its reader, a
    count still going cannot start another git process (it fails, and the next ``of`` counts
    again)."""
    with GitCommitSource(sample_repo, "HEAD") as src:
        expected = LineCounts().of(src)
    ahead = Ahead()
    counts = ahead.line_counts
    with GitCommitSource(sample_repo, "HEAD") as src:
        ahead.count_lines(src)
        ahead.count_lines(src)  # once
        assert counts.of(src) == expected and counts.files == len(src.paths())

    busy_ahead = Ahead()  # asked while another count holds the counts: never waits for it
    busy = busy_ahead.line_counts
    with GitCommitSource(sample_repo, "HEAD") as src:
        busy._lock.acquire()
        caller = threading.Thread(target=busy_ahead.count_lines, args=(src,))
        caller.start()
        caller.join(2)
        returned = not caller.is_alive()
        busy._lock.release()
        caller.join(10)
        assert returned, "ahead() waited for a count in progress (it runs on the event loop)"
        assert busy.of(src) == expected

    closed = GitCommitSource(sample_repo, "HEAD")
    assert closed.lines("stats.py")
    closed.close()
    late_ahead = Ahead()
    late = late_ahead.line_counts
    late_ahead.count_lines(closed)
    for thread in threading.enumerate():
        if thread.name == "line-counts":
            thread.join(10)
    assert closed._proc is None  # no git process was started for it
    with pytest.raises(OSError, match="closed"):
        closed.raw("stats.py")
    with GitCommitSource(sample_repo, "HEAD") as src:
        assert late.of(src) == expected  # the failed count left nothing behind


async def test_the_commit_made_ahead_is_used_only_where_it_fits(tmp_path):
    """``Ahead.commit`` moves the branch to the commit made ahead when it was made for the same
    message and tree and the branch has not moved since; a later ``prepare_commit`` replaces
    an earlier one; one that failed is made again, its error not raised."""
    repo = make_repo(tmp_path / "repo")
    ws = Workspace.create(repo, "c1")
    ahead = Ahead()
    (ws.worktree / "app.py").write_text("print('one')\n")
    first = ws.snapshot()
    ahead.prepare_commit(ws, "first", first)
    (ws.worktree / "app.py").write_text("print('two')\n")
    second = ws.snapshot()
    ahead.prepare_commit(ws, "second", second)  # a judge asked for changes: this one replaces it
    made = await ahead.commit(ws, "second", second)
    assert made is not None and ws.tip() == made
    assert _blob(repo, made, "app.py") == "print('two')\n"

    (ws.worktree / "app.py").write_text("print('three')\n")
    third = ws.snapshot()
    ahead.prepare_commit(ws, "third", third)
    (ws.worktree / "new.txt").write_text("x\n")
    moved = ws.commit("moved meanwhile", ws.snapshot())  # the branch moves after it was made
    last = await ahead.commit(ws, "third", third)
    assert last is not None and last != moved and ws.tip() == last
    assert _git_line(repo, "rev-parse", f"{last}^") == moved  # made again on the new tip
    assert await ahead.commit(ws, "third", third) is None  # nothing left to commit

    broken = Ahead()
    broken.prepare_commit(ws, "gone", "0" * 40)  # not a tree: making it ahead fails
    (ws.worktree / "app.py").write_text("print('four')\n")
    four = await broken.commit(ws, "four", ws.snapshot())
    assert four is not None and _blob(repo, four, "app.py") == "print('four')\n"


def _git_line(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True,
                          text=True).stdout.strip()


def test_the_retrieval_loaded_ahead_is_used_only_while_nothing_wrote_since(tmp_path):
    """The explorers' retrieval, listed and read while the planner works, is theirs if no
    writing tool started since it began; after one, a new retrieval sees the worktree as it is
    then (a file written after the load is found)."""
    from orchestrator.localize.retrieve import Retriever

    root = make_repo(tmp_path / "repo")
    ahead = Ahead()
    loaded = Retriever(root)
    ahead.start_retrieval(loaded)
    for thread in threading.enumerate():
        if thread.name == "retrieval":
            thread.join(10)
    assert loaded._files is not None and loaded._loaded is not None  # listed and read ahead
    assert ahead.retrieval() is loaded
    assert ahead.retrieval() is None  # once

    stale = Retriever(root)
    ahead.start_retrieval(stale)
    ahead.started()  # a writing tool starts: what was listed may be gone or new
    (root / "later.py").write_text("LATER_NAME = 1\n")
    ahead.finished()
    assert ahead.retrieval() is None
    fresh = Retriever(root)
    assert "later.py" in fresh.files()
    assert any(w.path == "later.py" for w in fresh.windows("where is LATER_NAME set?"))
