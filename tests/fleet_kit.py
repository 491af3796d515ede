"""What the fleet tests share: a ``fleet`` fixture over the test's fresh database, which starts
worker processes (each a machine of its own when asked: its own home and working directory),
makes bare origins, queues demo jobs, runs the CLI, and stops every worker it started.

Test modules load it with ``pytest_plugins = ["pg", "fleet_kit"]``.
"""

from __future__ import annotations

import asyncio
import json
import signal
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import pytest
from conftest import cli, run_env

from orchestrator.faces.demo import demo_roles_sets, make_sample_repo, scenario_path
from orchestrator.faces.fleet import submit

# the demo role map names the simulator's address and key variable: a worker takes them from a
# job only when allowed
ALLOW = ("providers.*.base_url", "providers.*.api_key_env")
WORKER = """
import asyncio, json, sys
from pathlib import Path
from orchestrator.faces.fleet_worker import WorkerConfig, run_worker
from orchestrator.faces.logs import setup_logging
setup_logging(json=True)
given = json.loads(sys.argv[1])
given["cache_dir"] = Path(given["cache_dir"])
given["allow_set"] = tuple(given["allow_set"])
asyncio.run(run_worker(WorkerConfig(**given)))
"""


@dataclass
class Worker:
    """A worker process and the file its JSON log lines go to."""

    proc: subprocess.Popen[bytes]
    log: Path
    home: Path

    def lines(self) -> list[dict[str, Any]]:
        return [json.loads(x) for x in self.log.read_text().splitlines() if x.startswith("{")]

    def text(self) -> str:
        return self.log.read_text()


@dataclass
class Fleet:
    """The test's database and folder, and the workers started on them (test modules use
    this object, not imports of this module, which pytest loads as a plugin)."""

    ALLOW: ClassVar[tuple[str, ...]] = ALLOW
    url: str
    tmp: Path
    workers: list[Worker] = field(default_factory=list)

    def worker(self, name: str, *, machine: bool = False, push: bool = False,
               allow_set: tuple[str, ...] = ALLOW, poll_s: float = 0.5) -> Worker:
        """A worker process; with ``machine``, in a directory and home of its own (its
        clones under it), as on another machine."""
        home = self.tmp / name
        (home / "home").mkdir(parents=True, exist_ok=True)
        env = run_env(HOME=str(home / "home"), XDG_CONFIG_HOME=str(home / "home" / ".config")) \
            if machine else run_env()
        # stalled after 8 s without a heartbeat (every 0.5 s): at 3 s, on a slow box with the
        # suite's four workers on two cores, a live worker's job was taken over as stalled
        given = {"database_url": self.url, "cache_dir": str(home / "cache"), "name": name,
                 "heartbeat_s": 0.5, "stalled_after_s": 8.0, "poll_s": poll_s, "push": push,
                 "allow_set": list(allow_set)}
        log = home / "worker.log"
        proc = subprocess.Popen([sys.executable, "-c", WORKER, json.dumps(given)], cwd=home,
                                env=env, stdout=subprocess.DEVNULL, stderr=log.open("w"))
        worker = Worker(proc, log, home)
        self.workers.append(worker)
        return worker

    def stop(self, *workers: Worker) -> None:
        """SIGTERM (a drain), then SIGKILL if a worker does not end in time."""
        for w in workers or tuple(self.workers):
            if w.proc.poll() is None:
                w.proc.send_signal(signal.SIGCONT)  # a stopped one cannot drain
                w.proc.send_signal(signal.SIGTERM)
        for w in workers or tuple(self.workers):
            try:
                w.proc.wait(20)
            except subprocess.TimeoutExpired:
                w.proc.kill()
                w.proc.wait()

    def origin(self, name: str = "origin") -> Path:
        """A bare origin repository holding the demo's sample project."""
        work = make_sample_repo(self.tmp / f"{name}-work")
        origin = self.tmp / f"{name}.git"
        subprocess.run(["git", "clone", "-q", "--bare", str(work), str(origin)], check=True)
        return origin

    async def submit(self, sim: Any, task: str, repo: str, **kwargs: Any) -> int:
        """Queue ``task`` with the demo's role map pointed at ``sim``."""
        sets = [*demo_roles_sets(sim.base_url), *kwargs.pop("sets", [])]
        return await submit(task, repo, database_url=self.url,
                            role_files=[str(scenario_path("demo-roles.toml"))], sets=sets,
                            **kwargs)

    @staticmethod
    async def until(check: Callable[[], Awaitable[Any]], timeout: float, what: str) -> Any:
        return await until(check, timeout, what)

    @staticmethod
    def slowed(sim: Any, model: str, delay_s: float) -> None:
        slowed(sim, model, delay_s)

    def cli(self, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
        """``orchestrate ARGS`` in ``cwd`` against the fleet's database (in this process: the
        CLI's commands, not its start, are what the fleet tests check)."""
        env = run_env(ORCHESTRATE_DATABASE_URL=self.url, HOME=str(cwd))
        return cli(*args, env=env, cwd=cwd)


async def until(check: Callable[[], Awaitable[Any]], timeout: float, what: str) -> Any:
    """``check()``'s first true value, polled; fails saying ``what`` never happened."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        found = await check()
        if found:
            return found
        await asyncio.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def slowed(sim: Any, model: str, delay_s: float) -> None:
    """The demo scenario with ``model`` answering after ``delay_s`` seconds."""
    from orchestrator.faces.demo import demo_scenario

    base = demo_scenario()
    slow = base.models[model].model_copy(update={"delay_s": delay_s})
    sim.set_scenario(base.model_copy(update={"models": {**base.models, model: slow}}))


@pytest.fixture
def fleet(pg_url: str, tmp_path: Path) -> Iterator[Fleet]:
    """The test's fleet: its workers are stopped when the test ends, whatever happened."""
    pytest.importorskip("procrastinate", reason="the fleet extra is not installed")
    found = Fleet(pg_url, tmp_path)
    try:
        yield found
    finally:
        found.stop()
