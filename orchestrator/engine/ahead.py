"""Work a run does ahead of its critical path, each piece with the check that says, when it is
used, whether it still holds: ``Ahead``, one per run (``RunContext.ahead``).

- The worktree's tree, while the builder's model writes its next reply (``trees``: a
  ``TreeAhead``). A build ends with a snapshot of the worktree (``Workspace.snapshot``: ``git
  add -A`` and ``git write-tree`` into the run's own index, ~5 ms of git on a 2-core box),
  which the checkpoint records and verify checks. Between the builder's tool calls nothing
  writes to the worktree (a command's processes die with it: the sandbox's PID namespace ends),
  so after every tool that may write a snapshot is started on a thread. The check is a write
  counter: when the build ends, that snapshot is the answer only if no writing tool has started
  since it began; else a new one is taken. Snapshots run one at a time, since they share the
  index; one taken while a tool wrote is never used (the index's stat data makes the next one
  re-read whatever changed). (With ``[sandbox] mode = "none"`` a process a command left running
  could still write; verify snapshots the worktree again after its own commands, so what is
  committed is what was checked.)
- The worktree's tree after the preflight's commands, while the planner and explorers work
  (``start_tree``): the first build attempt starts from it (``first_tree``) if no writing tool
  of any session has started since (``Ahead`` is the run's own ``WriteWatch``, told by every
  toolbox); else it takes its own. (A process a preflight command left running with
  ``[sandbox] mode = "none"`` could still write: that attempt's "changed" is then judged from
  the earlier tree; what is committed is still what verify checked.)
- The run's commit of the tree verify checks, while its commands run (``prepare_commit``;
  made again while the judges read if the commands wrote a file). The check is a
  compare-and-swap: the report (``commit``) uses it only if it was made for the same
  message and tree and the run branch is still on the commit it was made on (``update-ref`` with
  the old value, ``commits.py``); otherwise the commit is made again.
- The diff of the tree verify checks, while its commands run (``diffing``). A tree never
  changes, so its diff cannot go stale; the workspace keeps it for the judges and the report.
- The repository's line counts for the citation check, when explorers start (``count_lines``):
  counted once, off the event loop, from the run's commit, which never changes. A count that
  fails there (the reader closed at the run's end) is left to ``LineCounts.of``, which counts
  again and raises its own error.
- The explorers' retrieval over the worktree (``start_retrieval``: ripgrep's listing of its
  files, ~8 ms of process, and the small tree read into memory), after the preflight's commands
  while their failures are analysed and the planner works. The check is the run's write counter: explorers get that retriever
  (``retrieval``) only if no writing tool of any session has started since it began; else a
  new one lists and reads the worktree as it is then.

- The first one-shot build attempt's reply, while the planner works (``ask_first_build``,
  ``run.first_build = "with_plan"``): its prompt is the task, the pinned files and the tests, none of which
  the plan changes. The check is the request itself: the build uses the reply
  (``first_build``) only if it asks the very same messages at the same temperature; else the
  call ahead is cancelled and it asks its own. A run that ends before its build cancels it
  (``close``).

A failure of work done ahead is never raised where it was started, only by whoever needs the
result (which then does the work again, or raises its own error).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, TypeVar

from orchestrator.evidence.sources import FileSource, LineCounts
from orchestrator.localize.retrieve import Retriever
from orchestrator.models.base import Completion
from orchestrator.tools.base import WriteWatch
from orchestrator.workspace.commits import PreparedCommit
from orchestrator.workspace.worktree import Workspace

T = TypeVar("T")


class Ahead:
    """One run's work ahead of its critical path (see the module's docstring)."""

    def __init__(self) -> None:
        self.line_counts = LineCounts()  # shared by the run's explorers
        self._counting = threading.Lock()  # never the counts' own lock: a count holds that
        self._counted = False
        self._commit: asyncio.Task[PreparedCommit | None] | None = None
        self.writes = 0  # writing tools started (and ended) in any session of the run
        self._start: tuple[asyncio.Task[str], int] | None = None  # (snapshot, writes then)
        self._retrieval: tuple[Retriever, int] | None = None  # (loading ahead, writes then)
        # (the request's messages and temperature, its reply on the way)
        self._build: tuple[list[dict[str, str]], float | None, asyncio.Task[Completion]] | None
        self._build = None

    def started(self) -> None:  # the run's ``WriteWatch``: every toolbox tells it
        self.writes += 1

    def finished(self) -> None:
        self.writes += 1

    def start_tree(self, workspace: Workspace | None) -> None:
        """Start a snapshot of the worktree on a thread (after the preflight's commands); it
        waits for one started before (they share the index)."""
        if workspace is None:
            return
        before = self._start[0] if self._start is not None else None

        async def take() -> str:
            if before is not None:
                await _settled(before)
            return await asyncio.to_thread(workspace.snapshot)

        task = asyncio.get_running_loop().create_task(take())
        task.add_done_callback(_retrieved)  # one never used: its error is dropped
        self._start = (task, self.writes)

    async def first_tree(self, take: Callable[[], Awaitable[str]]) -> str:
        """The tree ``start_tree`` took, once, if no writing tool has started since; else
        ``take()``'s (a failed snapshot is taken again there, raising its own error)."""
        start, self._start = self._start, None
        if start is not None:
            task, writes = start
            await _settled(task)
            if writes == self.writes and not task.cancelled() and task.exception() is None:
                return task.result()
        return await take()

    def ask_first_build(self, messages: list[dict[str, str]], temperature: float | None,
                        call: Coroutine[Any, Any, Completion]) -> None:
        """Start the first one-shot's model call (``call``, for ``messages``) now."""
        task = asyncio.get_running_loop().create_task(call)
        task.add_done_callback(_retrieved)  # one never used: its error is dropped
        self._build = (messages, temperature, task)

    async def first_build(self, messages: list[dict[str, str]], temperature: float | None
                          ) -> Completion | None:
        """The reply asked ahead for exactly this request, once; None when there is none, it
        was for another request (then cancelled) or it failed (the caller asks itself)."""
        held, self._build = self._build, None
        if held is None:
            return None
        asked, at, task = held
        if asked != messages or at != temperature:
            task.cancel()
            return None
        try:
            await asyncio.wait({task})
        except asyncio.CancelledError:  # the build was stopped (the time budget): so is this
            task.cancel()
            raise
        if task.cancelled() or task.exception() is not None:
            return None  # the caller asks itself, and meets the error (if any) there
        return task.result()

    def close(self) -> None:
        """Cancel work ahead that nobody used (the first build's call of a run that ended)."""
        held, self._build = self._build, None
        if held is not None:
            held[2].cancel()

    def start_retrieval(self, retriever: Retriever) -> None:
        """Load ``retriever``'s listing and in-memory corpus off the event loop (``background``,
        after the preflight's commands); an error there is left to the retriever's own use."""
        self._retrieval = (retriever, self.writes)

        def load() -> None:
            with contextlib.suppress(Exception):
                retriever.preload()

        background(load, "retrieval")

    def retrieval(self) -> Retriever | None:
        """The retriever ``start_retrieval`` loads, once, if no writing tool has started since
        it began (its listing is the worktree's now); else None."""
        held, self._retrieval = self._retrieval, None
        if held is not None and held[1] == self.writes:
            return held[0]
        return None

    def trees(self, workspace: Workspace | None) -> TreeAhead:
        """A ``WriteWatch`` for one build session, keeping a snapshot of the worktree ahead."""
        return TreeAhead(workspace.snapshot if workspace is not None else _no_tree)

    def prepare_commit(self, workspace: Workspace | None, message: str, tree: str) -> None:
        """Start making the run's commit of ``tree`` on a thread; it replaces one made before
        (a judge's requested changes made that one stale)."""
        if workspace is None or not tree:
            return
        task = asyncio.get_running_loop().create_task(
            asyncio.to_thread(workspace.prepare_commit, message, tree))
        task.add_done_callback(_retrieved)  # one never awaited: its error is dropped
        self._commit = task

    async def commit(self, workspace: Workspace, message: str, tree: str | None) -> str | None:
        """Put the commit of ``tree`` (default: the worktree now) on the run branch: the one
        made ahead when it fits, else one made now; None if nothing changed."""
        task, self._commit = self._commit, None
        prepared = None
        if task is not None:
            await asyncio.wait([task])
            prepared = None if task.cancelled() or task.exception() else task.result()
        return await asyncio.to_thread(workspace.commit, message, tree, prepared)

    @contextlib.asynccontextmanager
    async def diffing(self, workspace: Workspace | None, tree: str) -> AsyncIterator[None]:
        """Make ``tree``'s diff (``Workspace.patch``, kept by the workspace) on a thread while
        the body runs; on leaving, wait for it without raising its error (the later reader of
        the diff raises its own)."""
        if workspace is None or not tree:
            yield
            return
        task = asyncio.create_task(asyncio.to_thread(workspace.patch, tree))
        try:
            yield
        finally:
            await asyncio.wait([task])
            _retrieved(task)

    def count_lines(self, src: FileSource) -> None:
        """Start counting the repository's lines from ``src`` off the event loop
        (``background``), once (called on the event loop: it never waits for a count in
        progress)."""
        counts = self.line_counts
        with self._counting:
            if self._counted or counts.counted:
                return
            self._counted = True

        def count() -> None:
            with contextlib.suppress(Exception):
                counts.of(src)

        background(count, "line-counts")


def ahead_of_loop(work: Callable[[], T]) -> asyncio.Future[T]:
    """Run ``work`` (bounded: the loop's end waits for it) on a worker thread of the running
    event loop (``background``); an error it raises is kept for whoever awaits the future,
    never logged as never retrieved."""
    done = asyncio.get_running_loop().run_in_executor(None, work)
    done.add_done_callback(_retrieved)
    return done


def background(work: Callable[[], None], name: str) -> None:
    """Run ``work`` (bounded: the loop's end waits for it) off the event loop, on one of its
    worker threads; a thread of its own when no loop runs. Starting a thread waits until it
    runs, and a new thread that goes straight to work holds the interpreter's lock for up to
    its switch interval (5 ms) while the loop that started it waits: 1 to 7 ms a start,
    measured, against ~20 µs to hand work to a waiting worker."""
    try:
        ahead_of_loop(work)
    except RuntimeError:  # no event loop in this thread
        threading.Thread(target=work, name=name, daemon=True).start()


class Watches:
    """Several ``WriteWatch``es told as one (the run's and a session's own)."""

    def __init__(self, *watches: WriteWatch) -> None:
        self.watches = watches

    def started(self) -> None:
        for watch in self.watches:
            watch.started()

    def finished(self) -> None:
        for watch in self.watches:
            watch.finished()


class TreeAhead:
    """A ``WriteWatch`` (``tools/base.py``) that keeps a snapshot of the worktree ahead; its
    check is a counter of the writing tools started."""

    def __init__(self, snapshot: Callable[[], str]) -> None:
        self._snapshot = snapshot
        self._writes = 0  # writing tools started so far
        self._task: asyncio.Task[str] | None = None
        self._task_after = -1  # how many writing tools had started when the task began

    def started(self) -> None:
        self._writes += 1

    def finished(self) -> None:
        before = self._task
        self._task = asyncio.get_running_loop().create_task(self._take(before))
        self._task_after = self._writes

    async def _take(self, before: asyncio.Task[str] | None) -> str:
        if before is not None:
            await _settled(before)
        return await asyncio.to_thread(self._snapshot)

    async def tree(self) -> str:
        """The worktree's tree now."""
        task = self._task
        if task is not None:
            await _settled(task)
            if self._task_after == self._writes and not task.cancelled() and not task.exception():
                return task.result()
        return await asyncio.to_thread(self._snapshot)

    async def settle(self) -> None:
        """Wait for a snapshot still being taken (before anything else uses the index)."""
        if self._task is not None:
            await _settled(self._task)


def _no_tree() -> str:
    return ""  # a run without a worktree of its own (``explore``)


async def _settled(task: asyncio.Task[str]) -> None:
    """Wait for ``task`` without raising its error (a later snapshot raises its own)."""
    await asyncio.wait([task])
    _retrieved(task)


def _retrieved(task: asyncio.Future[Any]) -> None:
    if not task.cancelled():
        task.exception()  # retrieved: not logged as "never retrieved"
