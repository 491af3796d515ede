"""The demo's setup the benches share (``overhead.py``, ``samples.py``): its role map pointed at
a simulator, and the environment that carries the simulator's key."""

from __future__ import annotations

import os

from orchestrator.config.layers import load_roles
from orchestrator.config.schema import RoleMap
from orchestrator.faces.demo import SIM_KEY_ENV, demo_roles_sets, scenario_path


def demo_roles(base_url: str, *sets: str) -> RoleMap:
    """The demo's role map with its provider at ``base_url`` (and the demo's acceptance
    command), then ``sets``."""
    return load_roles(base_text=scenario_path("demo-roles.toml").read_text(encoding="utf-8"),
                      sets=[*demo_roles_sets(base_url), *sets])


def demo_env() -> dict[str, str]:
    """This process's environment with the simulator's key set."""
    return {**os.environ, SIM_KEY_ENV: "simulated-key"}
