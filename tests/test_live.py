"""Opt-in live checks against a real small model (Qwen2.5-Coder-0.5B via llama.cpp) in ``json``
tool mode. Skipped unless ``ORCHESTRATE_LIVE=1``; uses ``ORCHESTRATE_LIVE_URL`` if set, else
starts ``../shared/live-model/serve.py`` on 127.0.0.1 (run ``setup.sh 0.5b`` first). Slow."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from conftest import run_env

from orchestrator import api
from orchestrator.config import load_roles
from orchestrator.demo import make_sample_repo, scenario_path
from orchestrator.models.client import ClientPool
from orchestrator.state import Plan

pytestmark = [
    pytest.mark.live,
    pytest.mark.skipif(os.environ.get("ORCHESTRATE_LIVE") != "1",
                       reason="live model tests are opt-in: set ORCHESTRATE_LIVE=1"),
]
KIT = Path(os.environ.get("ORCHESTRATE_LIVE_KIT", "/work/shared/live-model"))
HOME = Path(os.environ.get("LIVE_HOME", Path.home() / ".cache" / "orchestrate-live"))
MODEL_FILE = HOME / "models" / "qwen2.5-coder-0.5b-instruct.gguf"
ALIASES = ("planner-sim", "explorer-sim", "builder-sim", "reviewer-sim", "summarizer-sim")


@pytest.fixture(scope="module")
def live_url():
    url = os.environ.get("ORCHESTRATE_LIVE_URL")
    if url:
        yield url
        return
    if not MODEL_FILE.is_file():
        pytest.skip(f"no model at {MODEL_FILE}: run `bash {KIT}/setup.sh 0.5b`")
    proc = subprocess.Popen(
        [str(HOME / "venv" / "bin" / "python"), str(KIT / "serve.py"), str(MODEL_FILE),
         "--port", "8089", "--alias", "qwen05", "--ctx", "8192"],
        stdout=subprocess.PIPE, text=True)
    try:
        for line in proc.stdout:  # type: ignore[union-attr]
            if line.startswith("READY"):
                yield line.split()[1].rstrip("/") + "/v1"
                break
        else:
            pytest.fail("the live model server did not start")
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def live_roles(url: str):
    sets = [f'providers.sim.base_url="{url}"', 'explorer.parallel=1', 'explorer.max_turns=8',
            'planner.max_turns=10']
    for alias in ALIASES:
        sets += [f'models.{alias}.id="qwen05"', f'models.{alias}.tools="json"',
                 f'models.{alias}.structured="json_schema"', f"models.{alias}.max_output=400"]
    text = scenario_path("demo-roles.toml").read_text(encoding="utf-8")
    return load_roles(base_text=text, sets=sets)


async def test_live_planner_submits_a_valid_plan(live_url, tmp_path):
    from routing_kit import planner_session

    pool = ClientPool(live_roles(live_url), run_env())
    try:
        outcome, _, telemetry = await planner_session(pool, make_sample_repo(tmp_path / "repo"))
    finally:
        await pool.aclose()
    assert isinstance(outcome.payload, Plan) and outcome.payload.goal
    assert all(c.served_tier is None for c in telemetry.calls)  # llama.cpp echoes no tier


async def test_live_explore_returns_a_verified_finding(live_url, tmp_path):
    result = await api.aexplore("Where is the function `median` defined?",
                                repo=make_sample_repo(tmp_path / "repo"),
                                roles=live_roles(live_url), env=run_env())
    assert sum(e.verified for e in result.explorers) >= 1, result.explorers
