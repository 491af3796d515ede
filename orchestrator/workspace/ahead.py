"""The worktree's tree, taken while the builder's model writes its next reply.

A build ends with a snapshot of the worktree (``Workspace.snapshot``: ``git add -A`` and
``git write-tree`` into the run's own index, ~5 ms of git on a 2-core box), which the checkpoint
records and verify checks. Between the builder's tool calls nothing writes to the worktree (a
command's processes die with it: the sandbox's PID namespace ends), so the snapshot the
submission needs can be taken while the model is still writing it: after every tool that may
write, one is started on a thread; when the build ends, it is the answer if no writing tool has
started since, else a new one is taken. Snapshots run one at a time, since they share the index;
one taken while a tool wrote is never used (the index's stat data makes the next one re-read
whatever changed). (With ``[sandbox] mode = "none"`` a process a command left running could
still write; verify snapshots the worktree again after its own commands, so what is committed
is what was checked.)
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class TreeAhead:
    """A ``WriteWatch`` (``tools/base.py``) that keeps a snapshot of the worktree ahead."""

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


async def _settled(task: asyncio.Task[str]) -> None:
    """Wait for ``task`` without raising its error (a later snapshot raises its own)."""
    await asyncio.wait([task])
    if not task.cancelled():
        task.exception()  # retrieved: not logged as "never retrieved"
