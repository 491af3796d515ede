"""A background writer: one thread that applies writes in the order they were submitted.

``submit`` hands an item over and returns at once, so the event loop never waits for a disk;
the future it returns completes when the item is applied (``asyncio.wrap_future`` awaits it
without blocking the loop). The thread takes everything queued by the time it wakes and applies
it in one go (one SQLite transaction, one sync to disk, for what many sessions wrote meanwhile).
``flush`` waits until everything submitted so far is applied; ``close`` flushes and stops the
thread. An error while applying fails the batch's futures and is raised by the next ``submit``,
``flush`` or ``close``; nothing more is applied. A submitted item cannot be cancelled: a
waiter that stops waiting (its task cancelled) leaves the item to be applied all the same.
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable
from concurrent.futures import Future
from typing import Generic, TypeVar

T = TypeVar("T")


class _Mark:
    def __init__(self, *, stop: bool = False) -> None:
        self.done = threading.Event()
        self.stop = stop


class Writer(Generic[T]):
    """Applies submitted items in batches, in order, on a thread of its own.

    The thread starts with the writer (where it is built: starting a thread waits for it, which
    an event loop should not), as a daemon, so that an interpreter that exits without ``close``
    does not hang on it.
    """

    def __init__(self, apply: Callable[[list[T]], None], *, name: str) -> None:
        self._apply = apply
        self._queue: queue.SimpleQueue[tuple[T, Future[None]] | _Mark] = queue.SimpleQueue()
        self._error: BaseException | None = None
        self._thread: threading.Thread | None = threading.Thread(target=self._run, name=name,
                                                                 daemon=True)
        self._thread.start()

    def submit(self, item: T) -> Future[None]:
        """Queue ``item``; the future completes once it is applied."""
        self._raise()
        if self._thread is None:
            raise RuntimeError("the writer is closed")
        done: Future[None] = Future()
        # running from the start: a waiter that gives up (an awaiting task cancelled) cannot
        # cancel the item, which is applied anyway (the journal must keep a reply it paid for)
        done.set_running_or_notify_cancel()
        self._queue.put((item, done))
        return done

    def flush(self) -> None:
        """Wait until every item submitted so far is applied."""
        self._wait(_Mark())

    def close(self) -> None:
        """Flush, then stop the thread."""
        self._wait(_Mark(stop=True))
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def _wait(self, mark: _Mark) -> None:
        if self._thread is not None:
            self._queue.put(mark)
            mark.done.wait()
        self._raise()

    def _apply_batch(self, batch: list[tuple[T, Future[None]]]) -> None:
        if self._error is None:
            try:
                self._apply([item for item, _ in batch])
            except BaseException as exc:  # raised on the caller's side, next time
                self._error = exc
        for _, done in batch:
            if self._error is None:
                done.set_result(None)
            else:
                done.set_exception(self._error)

    def check(self) -> None:
        """Raise the error of a write that failed, if one has (without waiting)."""
        self._raise()

    def _raise(self) -> None:
        if self._error is not None:
            raise self._error

    def _run(self) -> None:
        while True:
            batch: list[tuple[T, Future[None]]] = []
            marks: list[_Mark] = []
            entry = self._queue.get()
            while True:
                if isinstance(entry, _Mark):
                    marks.append(entry)
                else:
                    batch.append(entry)
                try:
                    entry = self._queue.get_nowait()
                except queue.Empty:
                    break
            try:
                if batch:
                    self._apply_batch(batch)
            except BaseException as exc:  # never die with waiters left waiting
                if self._error is None:
                    self._error = exc
            finally:
                for mark in marks:
                    mark.done.set()
            if any(mark.stop for mark in marks):
                return
