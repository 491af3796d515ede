"""Processes of sandboxed commands: a pids cgroup where we are root, and a dead run's leftovers.

``RLIMIT_NPROC`` does not bind uid 0, so as root each sandbox gets a cgroup-v1 ``pids`` group
(one per sandbox, made on first use). Running commands are recorded in a ledger so that a
resumed run can find and kill what an interrupted one left behind.
"""

from __future__ import annotations

import contextlib
import functools
import json
import os
import signal
import threading
import time
import uuid
from pathlib import Path

CGROUPS: dict[str, PidsCgroup] = {}
CGROUP_LOCK = threading.Lock()


class PidsCgroup:
    """A cgroup-v1 ``pids`` group for a run's commands, where we are root (the rlimit is not)."""

    ROOT = Path("/sys/fs/cgroup/pids")

    def __init__(self, path: Path) -> None:
        self.path = path
        self._seen = self._max_events()

    @classmethod
    def available(cls) -> bool:
        return _pids_cgroup_writable(str(cls.ROOT))

    @classmethod
    def create(cls, limit: int) -> PidsCgroup | None:
        if not cls.available():
            return None
        cls._sweep()
        path = cls.ROOT / f"orchestrate-{os.getpid()}-{uuid.uuid4().hex[:8]}"
        try:
            path.mkdir()
            (path / "pids.max").write_text(str(limit))
        except OSError:
            return None
        return cls(path)

    def wrap(self, argv: list[str]) -> list[str]:
        """``argv`` started from inside the group, so every descendant is counted."""
        script = 'echo $$ > "$0/cgroup.procs" && exec "$@"'
        return ["/bin/sh", "-c", script, str(self.path), *argv]

    def hit(self) -> bool:
        """Whether a fork failed at the limit since the last call."""
        now = self._max_events()
        hit, self._seen = now > self._seen, now
        return hit

    def _max_events(self) -> int:
        try:
            events = (self.path / "pids.events").read_text().split()
        except OSError:
            return 0
        return int(events[1]) if len(events) >= 2 and events[0] == "max" else 0

    def kill_all(self, *, remove: bool = True) -> int:
        """SIGKILL every process in the group (leftovers of a command or a dead run)."""
        killed = 0
        for _ in range(20):
            try:
                pids = [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
            except OSError:
                break
            if not pids:
                break
            for pid in pids:
                with contextlib.suppress(OSError):
                    os.kill(pid, signal.SIGKILL)
                    killed += 1
            time.sleep(0.02)
        if remove:
            self.remove()
        return killed

    def remove(self) -> None:
        for _ in range(100):
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:  # a dying process still listed; the namespace is being torn down
                time.sleep(0.01)

    @classmethod
    def _sweep(cls) -> None:
        """Remove groups left by processes that died (``kill -9``) before removing theirs."""
        for path in cls.ROOT.glob("orchestrate-*"):
            owner = path.name.split("-")[1]
            if owner.isdigit() and not os.path.exists(f"/proc/{owner}"):
                with contextlib.suppress(OSError):
                    path.rmdir()


@functools.cache
def _pids_cgroup_writable(root: str) -> bool:
    return os.geteuid() == 0 and os.path.isfile(os.path.join(root, "cgroup.procs")) \
        and os.access(root, os.W_OK)


def kill_leftovers(ledger: Path) -> int:
    """Kill every command a dead run left running (its process group and its cgroup).

    Under bubblewrap nothing survives the orchestrator (``--die-with-parent``, PID namespace);
    this is for ``mode = "none"``, where only the recorded process group — and, as root, the
    run's pids cgroup, which also holds ``setsid`` escapees — can find them.
    """
    try:
        lines = ledger.read_text(encoding="utf-8").splitlines()
    except OSError:
        return 0
    live: dict[int, dict] = {}
    for line in lines:
        try:
            entry = json.loads(line)
        except ValueError:
            continue
        if entry.get("done"):
            live.pop(entry["pid"], None)
        else:
            live[entry["pid"]] = entry
    killed = 0
    for pid, entry in live.items():
        if entry.get("start") is not None and start_time(pid) == entry["start"]:
            with contextlib.suppress(OSError):
                os.killpg(pid, signal.SIGKILL)  # started with a session of its own: pgid == pid
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
            killed += 1
        group = entry.get("cgroup")
        if group and os.path.isdir(group):
            killed += PidsCgroup(Path(group)).kill_all()
    ledger.unlink(missing_ok=True)
    return killed


def start_time(pid: int) -> int | None:
    """The kernel's start time of ``pid`` (so a recycled pid is never mistaken for ours)."""
    try:
        stat_line = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return int(stat_line.rsplit(")", 1)[1].split()[19])
