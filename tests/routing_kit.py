"""Helpers for the routing tests: a pool over the simulator with a backup model, quick retries,
recorded routing events, and a real planner session over a sample repository; and for the
tests that script a demo run's builder (``test_ladder.py``, ``test_protect.py``): the sample
repository's bug and fix, a run's keywords, a file at a revision.

Every pool ``pool_for`` makes is closed after its test, in the test's own event loop (the
``pools_closed`` fixture of ``conftest.py``, which the modules that use this kit ask for):
an SDK client left open would leave its aiohttp session to the garbage collector, which
prints "Unclosed client session" long after the test."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from conftest import run_env, sim_roles

from orchestrator.config.definitions import load_agents
from orchestrator.faces.demo import demo_roles_sets, scenario_path
from orchestrator.models.fallback import RetryPolicy
from orchestrator.models.pool import ClientPool
from orchestrator.models.routing import RoutingEvent
from orchestrator.record.telemetry import Telemetry
from orchestrator.session.loop import Session
from orchestrator.sim import ChatRequestView, Reply, SimServer, ToolCallSpec
from orchestrator.tools.base import Toolbox
from orchestrator.tools.explorer import explorer_tools

QUICK = RetryPolicy(attempts=3, base_s=0.01, max_wait_s=0.05, budget_s=5.0)
BACKUP = [
    'models.backup-sim.provider="sim"', 'models.backup-sim.id="sim-backup"',
    "models.backup-sim.context_window=32000", "models.backup-sim.max_output=4000",
]
OPEN: list[ClientPool] = []  # the pools made by ``pool_for``, closed after their test
PLAN = {"goal": "g", "steps": ["fix it"], "questions": [], "acceptance": []}
MESSAGES = [{"role": "system", "content": "You help."}, {"role": "user", "content": "hi"}]


def roles_with_backup(sim: SimServer, *sets: str):
    return sim_roles(sim, *BACKUP, 'planner.fallback=["backup-sim"]', *sets)


class Events(list[RoutingEvent]):
    def kinds(self) -> list[str]:
        return [e.kind for e in self]

    def warnings(self) -> list[str]:
        return [e.message for e in self if e.is_warning]


def pool_for(sim: SimServer, *sets: str, policy: RetryPolicy | None = QUICK,
             **kw) -> tuple[ClientPool, Events]:
    """A pool over ``sim`` with a backup model; ``policy=None``: the role map's retry settings."""
    events = Events()
    pool = ClientPool(roles_with_backup(sim, *sets), run_env(), listeners=[events.append],
                      policy=policy, **kw)
    OPEN.append(pool)
    return pool, events


def call(name: str, **arguments: object) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=dict(arguments))])


# --- a demo run whose builder is scripted ----------------------------------------------------

TEST_FILE = "tests/test_stats.py"  # the sample repository's failing test
BUGGY_LINE = "    return ordered[mid]\n"
RIGHT_LINE = "    return (ordered[mid - 1] + ordered[mid]) / 2\n"
BUGGY = "        return ordered[mid]\n" + BUGGY_LINE  # stats.py's median, and its fix
RIGHT = "        return ordered[mid]\n" + RIGHT_LINE


def asked_line(req: ChatRequestView) -> bool:
    """Whether ``req`` is the one-line request (``engine/oneline.py``)."""
    return "Which one of these lines is wrong?" in json.dumps(req.messages)


def median_line_number(shown: str) -> str:
    """The number the one-line request ``shown`` gives stats.py's wrong median line."""
    return re.findall(r"(\d+)\|     return ordered\[mid\]$", shown, re.M)[-1]


def copies_back_then_answers(original: str, answers: Iterator[str]
                             ) -> Callable[[ChatRequestView], Reply]:
    """A builder for the demo's median bug: asked for whole files it gives stats.py back as
    ``original``; asked for the one line it names the median's return line, corrected to the
    next of ``answers``."""
    def respond(req: ChatRequestView) -> Reply:
        if asked_line(req):
            n = median_line_number(req.messages[-1]["content"])
            return Reply(content=f"{n}: {next(answers).strip()}")
        return Reply(content=f"stats.py\n```python\n{original}```\n")
    return respond


def submit(summary: str = "fixed") -> Reply:
    return call("submit", summary=summary, files_changed=["stats.py"])


def demo_run(sim: SimServer, repo: Path, *sets: str) -> dict[str, Any]:
    """``api.arun``'s keywords for a demo run in ``repo`` against ``sim``, with ``sets``."""
    return dict(repo=repo, role_files=[scenario_path("demo-roles.toml")], env=run_env(),
                sets=[*demo_roles_sets(sim.base_url), *sets])


def show(repo: Path, rev: str) -> str:
    """``git show rev`` in ``repo``: a file at a revision (``branch:path``)."""
    return subprocess.run(["git", "show", rev], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


async def planner_session(pool: ClientPool, repo: Path, sid: str = "planner-1"):
    """A real planner session (list/search/read tools on ``repo``) through the pool's chain."""
    agent = load_agents()["planner"]
    tools = Toolbox.of(t for t in explorer_tools(repo) if t.name in agent.tools)
    telemetry = Telemetry("test-run")
    session = Session(session_id=sid, agent=agent, client=pool.for_role("planner"),
                      toolbox=tools, telemetry=telemetry, max_turns=8)
    return await session.run("Task: fix median"), session, telemetry
