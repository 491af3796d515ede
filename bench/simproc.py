"""The simulator for benches: in a child process (the default), or in a thread of ours.

A model server is never inside the orchestrator's process, so the benches run the simulator in a
child process: its CPU time is then not counted as ours, and it does not compete with our event
loop for the interpreter lock. ``thread`` mode is the in-process ``SimServer`` the tests use.
"""

from __future__ import annotations

import multiprocessing
from multiprocessing.connection import Connection
from typing import Any

from orchestrator.sim import Scenario, SimServer, serve_forever


def _serve(scenario: Scenario, conn: Connection) -> None:
    serve_forever(scenario, host="127.0.0.1", port=0, ready=conn.send)


class SimProcess:
    """``with SimProcess(scenario) as sim: sim.base_url`` — the sim in a forked child."""

    def __init__(self, scenario: Scenario) -> None:
        self.scenario = scenario
        self.base_url = ""
        self._proc: Any = None

    def __enter__(self) -> SimProcess:
        ctx = multiprocessing.get_context("fork")
        ours, theirs = ctx.Pipe()
        self._proc = ctx.Process(target=_serve, args=(self.scenario, theirs), daemon=True)
        self._proc.start()
        if not ours.poll(30):
            self._proc.kill()
            raise RuntimeError("the simulator did not start within 30 s")
        self.base_url = ours.recv()
        return self

    def __exit__(self, *exc: object) -> None:
        self._proc.terminate()
        self._proc.join(10)


def simulator(scenario: Scenario, mode: str) -> SimProcess | SimServer:
    """A context manager serving ``scenario``: ``process`` (a child) or ``thread`` (ours)."""
    if mode == "thread":
        return SimServer(scenario)
    return SimProcess(scenario)

