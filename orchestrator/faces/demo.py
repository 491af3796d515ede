"""``orchestrate demo``: the whole pipeline on a small sample repository, with simulated models.

The sample repository has a real bug and a real failing test; the simulated builder really
edits the file and the acceptance command really runs. Only the models are simulated.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

from orchestrator.api import RunResult, arun
from orchestrator.config.layers import load_roles
from orchestrator.record.telemetry import Listener
from orchestrator.sim import Scenario, SimServer
from orchestrator.sim import behaviors as _behaviors  # noqa: F401  (registers the computed replies)

DEMO_TASK = "Fix median(): it returns the wrong value for lists with an even number of items."
SIM_KEY_ENV = "ORCHESTRATE_SIM_KEY"

_STATS = '''"""Small statistics helpers."""


def mean(values):
    """Arithmetic mean of a non-empty list."""
    return sum(values) / len(values)


def median(values):
    """Middle value of a non-empty list (the mean of the two middle values for even lengths)."""
    ordered = sorted(values)
    mid = len(ordered) // 2
    if len(ordered) % 2:
        return ordered[mid]
    return ordered[mid]
'''

_TEST = '''import unittest

from stats import mean, median


class StatsTest(unittest.TestCase):
    def test_mean(self):
        self.assertEqual(mean([1, 2, 3]), 2)

    def test_median_odd(self):
        self.assertEqual(median([3, 1, 2]), 2)

    def test_median_even(self):
        self.assertEqual(median([4, 1, 3, 2]), 2.5)


if __name__ == "__main__":
    unittest.main()
'''

_README = "# sample\n\nA tiny statistics module with a failing test, for `orchestrate demo`.\n"


def scenario_path(name: str) -> Path:
    return Path(str(resources.files("orchestrator.sim").joinpath("scenarios", name)))


def demo_scenario() -> Scenario:
    return Scenario.load(scenario_path("demo.toml"))


def test_command() -> str:
    """The acceptance command, with this interpreter so it works without an activated venv."""
    return f"{sys.executable} -m unittest discover -s tests"


def make_sample_repo(path: Path) -> Path:
    """A git repository with ``stats.py`` (buggy median) and its unittest suite."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "stats.py").write_text(_STATS, encoding="utf-8")
    (path / "tests").mkdir(exist_ok=True)
    (path / "tests" / "__init__.py").write_text("", encoding="utf-8")
    (path / "tests" / "test_stats.py").write_text(_TEST, encoding="utf-8")
    (path / "README.md").write_text(_README, encoding="utf-8")
    (path / ".gitignore").write_text("__pycache__/\n", encoding="utf-8")
    ident = ["-c", "user.name=demo", "-c", "user.email=demo@localhost", "-c", "commit.gpgSign=false"]
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "initial"]):
        subprocess.run(["git", *ident, *args], cwd=path, check=True, capture_output=True)
    return path


def demo_roles_sets(base_url: str) -> list[str]:
    return [f'providers.sim.base_url="{base_url}"', f"verify.commands=[{_toml_str(test_command())}]"]


def _toml_str(s: str) -> str:
    return '"' + s.replace("\\", "\\\\").replace('"', '\\"') + '"'


async def arun_demo(
    *,
    workdir: Path | None = None,
    listeners: Sequence[Listener] = (),
    scenario: Scenario | None = None,
    env: Mapping[str, str] | None = None,
    sets: Sequence[str] = (),
) -> tuple[RunResult, Path]:
    """Run the demo; returns the result and the sample repository's path. ``sets`` are
    ``--set`` overrides of the demo's role map (``providers.sim.api="responses"``)."""
    base = Path(workdir) if workdir else Path(tempfile.mkdtemp(prefix="orchestrate-demo-"))
    repo = make_sample_repo(base / "sample")
    with SimServer(scenario or demo_scenario()) as sim:
        roles = load_roles(
            base_text=scenario_path("demo-roles.toml").read_text(encoding="utf-8"),
            sets=[*demo_roles_sets(sim.base_url), *sets],
        )
        run_env = {**(os.environ if env is None else env), SIM_KEY_ENV: "simulated-key"}
        result = await arun(DEMO_TASK, repo=repo, roles=roles, env=run_env, listeners=listeners)
    return result, repo
