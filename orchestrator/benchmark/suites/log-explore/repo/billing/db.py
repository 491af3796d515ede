"""The database pool: a fixed number of connections, handed out with a timeout."""

import queue


class PoolTimeout(Exception):
    pass


class Pool:
    def __init__(self, size: int, timeout_ms: int) -> None:
        self.size = size
        self.timeout_ms = timeout_ms
        self._free: queue.Queue = queue.Queue()
        for i in range(size):
            self._free.put(i)

    def acquire(self) -> int:
        try:
            return self._free.get(timeout=self.timeout_ms / 1000)
        except queue.Empty:
            raise PoolTimeout(
                f"timeout acquiring connection from pool after {self.timeout_ms}ms"
            ) from None

    def release(self, conn: int) -> None:
        self._free.put(conn)
