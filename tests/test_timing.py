"""Where a run's wall time goes: the phase split gives each instant to one phase, and a run's
report carries the split, adding up to its wall time."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import run_env, sim_roles

from orchestrator import api
from orchestrator.timing import Phases, phase


def test_the_phase_split_gives_each_instant_to_one_phase():
    phases = Phases()
    phases.add("graph", 0.0, 10.0)
    phases.add("node", 1.0, 9.0)
    phases.add("model", 2.0, 4.0)
    phases.add("model", 3.0, 5.0)  # a parallel call: counted once
    phases.add("tool", 4.5, 6.0)
    phases.add("journal", 7.0, 7.5)
    split = phases.split(0.0, 12.0)
    assert split["model"] == 3.0 and split["tool"] == 1.0 and split["journal"] == 0.5
    assert split["node"] == 3.5 and split["graph"] == 2.0 and split["other"] == 2.0
    assert sum(split.values()) == pytest.approx(12.0)
    with phase("tool"):  # no run recording: nothing happens
        pass


@pytest.mark.both_apis
def test_a_run_reports_where_its_wall_time_went(fresh_sim, sample_repo):
    result = api.run("Fix median()", repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    assert result.status == "succeeded", result.reason
    report = json.loads((Path(result.run_dir) / "report.json").read_text())
    phases, split = report["phases_s"], result.time_split
    assert sum(phases.values()) == pytest.approx(split["wall_s"], abs=1e-3)
    assert phases["model"] == pytest.approx(split["model_s"], abs=1e-3)
    for name in ("request", "journal", "git", "graph", "node", "setup"):
        assert phases[name] > 0, name
    calls = report["calls"]  # a call's time is its own: inside the run's wall time
    assert calls and all(0 < c["duration_s"] <= split["wall_s"] for c in calls)
