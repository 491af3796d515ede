"""The bench against the simulator: the ``bench-sim.toml`` scenario bound to a suite's tasks,
a ``BenchSimulator`` that serves it on 127.0.0.1, and role-map loading that points a map's
``sim`` provider at it. Role maps are named by their file's stem; ``bench-careful`` and
``bench-fast`` name the packaged simulated maps.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path

from orchestrator.benchmark.behaviors import bind_tasks, register_behaviors
from orchestrator.benchmark.single import SINGLE
from orchestrator.benchmark.suite import Suite, sim_tasks
from orchestrator.config.layers import load_roles
from orchestrator.config.schema import RoleMap
from orchestrator.errors import ConfigError
from orchestrator.sim import Scenario, SimServer

SIM_KEY_ENV = "ORCHESTRATE_SIM_KEY"
SIM_MAPS = ("bench-careful", "bench-fast")
SCENARIO = "bench-sim.toml"
MAPS = Path(__file__).resolve().parent / "maps"


def packaged_scenario(name: str) -> Path:
    return Path(str(resources.files("orchestrator.sim").joinpath("scenarios", name)))


def bench_scenario(suite: Suite | None, base: Scenario | None = None) -> Scenario:
    """The bench scenario (or ``base``) answering for ``suite``'s tasks (none for an explore
    suite, whose simulated explorers need no reference fixes)."""
    tasks = sim_tasks(suite) if suite is not None else ()
    if base is None:
        register_behaviors()  # the scenario names them
        base = Scenario.load(packaged_scenario(SCENARIO))
    return bind_tasks(base, tasks)


def role_map_path(name: str | os.PathLike[str]) -> Path:
    """A role-map file: an existing path, else a packaged map by name (``bench-fast``,
    ``bench-careful``, ``live-split``, ``live-solo``)."""
    path = Path(name)
    if path.is_file():
        return path
    stem = path.stem if path.suffix in ("", ".toml") else str(name)
    for candidate in (packaged_scenario(f"{stem}.toml"), MAPS / f"{stem}.toml"):
        if candidate.is_file() and (stem.startswith("bench-") or candidate.parent == MAPS):
            return candidate
    raise ConfigError(f"{name}: no such role map file (packaged maps: {', '.join(packaged_maps())})")


def packaged_maps() -> list[str]:
    return [*SIM_MAPS, *sorted(p.stem for p in MAPS.glob("*.toml"))]


def load_role_map(name: str | os.PathLike[str], *, sets: Sequence[str] = (),
                  sim_url: str | None = None) -> tuple[str, RoleMap]:
    """``(stem, RoleMap)``: the file layered over the packaged defaults like ``--roles``, with
    ``providers.sim.base_url`` set to ``sim_url`` when given."""
    single = str(name).startswith(SINGLE)
    path = role_map_path(str(name)[len(SINGLE):] if single else name)
    extra = [f'providers.sim.base_url="{sim_url}"'] if sim_url else []
    return (SINGLE if single else "") + path.stem, load_roles(files=[path], sets=[*extra, *sets])


class BenchSimulator:
    """``with BenchSimulator(suite) as sim:`` a simulator for the suite on a loopback port
    (``suite=None`` for an explore suite)."""

    def __init__(self, suite: Suite | None, scenario: Scenario | None = None) -> None:
        self.server = SimServer(bench_scenario(suite, scenario))

    @property
    def base_url(self) -> str:
        return self.server.base_url

    def role_map(self, name: str | os.PathLike[str], *sets: str) -> tuple[str, RoleMap]:
        return load_role_map(name, sets=sets, sim_url=self.base_url)

    def env(self, base: Mapping[str, str] | None = None) -> dict[str, str]:
        """``base`` (default: this process's environment) plus the simulator's dummy key."""
        return {**(os.environ if base is None else base), SIM_KEY_ENV: "simulated-key"}

    def __enter__(self) -> BenchSimulator:
        self.server.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.stop()

    async def __aenter__(self) -> BenchSimulator:
        await self.server.__aenter__()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.server.__aexit__(*exc)
