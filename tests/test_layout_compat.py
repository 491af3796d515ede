"""A run checkpointed before the package was grouped by concern still resumes after it.

``fixtures/old-layout-run.tar.gz`` is a real run of the flat layout (commit c677c03): the demo's
repository, its ``.orchestrate/state`` and its workspace, paused at plan approval with the
preflight's localisation in the checkpoint (types that then lived in ``orchestrator.localize``
and ``orchestrator.testreport``). It was made with ``api.run(..., approve_plan=True)`` against
the simulator, the verify command ``python3 -m unittest -q``, under a directory made by
``mkdtemp(prefix="orchestrate-layout-")`` in /tmp. Its SQLite files hold that directory's path;
the test unpacks it under a path of the same length, so a byte-for-byte replacement keeps the
files valid.
"""

from __future__ import annotations

import json
import logging
import tarfile
import tempfile
from pathlib import Path

import pytest
from conftest import run_env, sim_scenario

from orchestrator import api
from orchestrator.localize.localization import Localization
from orchestrator.localize.testreport import FailureReport
from orchestrator.record.store import serializer
from orchestrator.sim import SimServer

FIXTURES = Path(__file__).resolve().parent / "fixtures"


def _unpack(into: Path, old_base: str) -> Path:
    new_base = str(into)
    assert len(new_base) == len(old_base), "the new base must be as long as the old one"
    with tarfile.open(FIXTURES / "old-layout-run.tar.gz") as tar:
        tar.extractall(into, filter="fully_trusted")
    repo = into / "repo"
    for path in [*repo.rglob("*.sqlite"), *repo.rglob("alternates"), *repo.rglob("*.json"),
                 *repo.rglob("*.jsonl")]:
        data = path.read_bytes()
        if old_base.encode() in data:
            path.write_bytes(data.replace(old_base.encode(), new_base.encode()))
    return repo


@pytest.fixture
def old_run():
    meta = json.loads((FIXTURES / "old-layout-run.json").read_text())
    into = Path(tempfile.mkdtemp(prefix="orchestrate-layout-", dir="/tmp"))
    try:
        yield meta, _unpack(into, meta["base"])
    finally:
        import shutil

        shutil.rmtree(into, ignore_errors=True)


def _latest_state(repo: Path) -> dict:
    import sqlite3

    db = sqlite3.connect(repo / ".orchestrate" / "state" / "checkpoints.sqlite")
    row = db.execute("SELECT type, checkpoint FROM checkpoints ORDER BY checkpoint_id DESC"
                     " LIMIT 1").fetchone()
    db.close()
    return serializer().loads_typed((row[0], row[1]))


def test_old_checkpoint_loads_the_moved_types(old_run, caplog):
    _, repo = old_run
    raw = (repo / ".orchestrate" / "state" / "checkpoints.sqlite").read_bytes()
    assert b"orchestrator.localize" in raw  # where the flat layout kept Localization
    with caplog.at_level(logging.WARNING):
        checkpoint = _latest_state(repo)
    assert not [r for r in caplog.records if "checkpoint" in r.getMessage().lower()
                or "deserializ" in r.getMessage().lower()]
    values = checkpoint["channel_values"]
    localization = values["localization"]
    assert isinstance(localization, Localization)
    assert localization.reports, "the fixture's preflight saw the failing test"
    assert all(isinstance(r, FailureReport) for r in localization.reports)
    assert localization.suspects == ("stats.py",)


def test_old_run_resumes_to_a_fix(old_run):
    meta, repo = old_run
    run_dir = repo / "workspaces" / meta["run_id"]
    with SimServer(sim_scenario()) as sim:
        run_json = run_dir / "run.json"
        text = run_json.read_text().replace(meta["base_url"], sim.base_url)
        run_json.write_text(text)
        result = api.resume(meta["run_id"], repo=repo, env=run_env(), approve=True)
        assert result.status == "succeeded", result.reason
        assert len(sim.state.requests_for("sim-planner")) == 0, "the plan was not made again"
        assert sim.state.requests_for("sim-builder")
    assert "stats.py" in (run_dir / "patch.diff").read_text()
