"""Every write lands however a run ends: the quota ledger is written by a thread of its own
(``writer.py``) and the call journal on the caller's thread (its new file made on a thread as it
opens), so each way a run can end is checked on disk — a normal end, an error, Ctrl-C (SIGINT) —
for every completed call in the journal and in the ledger, every event in ``events.jsonl``, and
no writer thread left running."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import pytest
from conftest import run_env, scenario_with, sim_roles

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, scenario_path
from orchestrator.models.errors import ModelRefused
from orchestrator.sim import FaultSpec, ModelBehavior, Reply, ToolCallSpec

WRITERS = ("call-journal-open", "quota-ledger")


def _writers() -> list[threading.Thread]:
    return [t for t in threading.enumerate() if t.name in WRITERS and t.is_alive()]


def _events(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in
            (run_dir / "events.jsonl").read_text(encoding="utf-8").splitlines()]


def _completed(events: list[dict]) -> Counter[tuple[str, str]]:
    """(session, model) of every call the run paid for and got an answer to."""
    return Counter((e["session"], e["requested_model"]) for e in events
                   if e["kind"] == "call_finished" and not e.get("error"))


def _journaled(run_dir: Path) -> Counter[tuple[str, str]]:
    with sqlite3.connect(run_dir / "journal.sqlite") as db:
        replies = [json.loads(r) for (r,) in db.execute("SELECT reply FROM calls")]
        turns = db.execute("SELECT COUNT(*) FROM turns").fetchone()[0]
    assert turns == len(replies)
    return Counter((r["record"]["session"], r["record"]["requested_model"]) for r in replies)


def _ledger_calls(path: Path) -> int:
    with sqlite3.connect(path) as db:
        return int(db.execute("SELECT COALESCE(SUM(calls), 0) FROM usage").fetchone()[0])


def _check_on_disk(run_dir: Path, quota: Path, seen: list) -> Counter[tuple[str, str]]:
    events = _events(run_dir)
    done = _completed(events)
    assert done, "the run completed no call: nothing was checked"
    assert _journaled(run_dir) == done
    assert _ledger_calls(quota) == sum(done.values())
    if seen:  # what listeners were shown is what the file holds, in the same order
        assert [e["kind"] for e in events] == [e.kind for e in seen if e.kind != "progress"]
    return done


def test_a_finished_run_leaves_every_write_on_disk_and_no_writer_running(fresh_sim, sample_repo,
                                                                        tmp_path):
    before = _writers()
    seen: list = []
    quota = tmp_path / "quota.sqlite"
    result = api.run(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env(),
                     listeners=[seen.append], quota_path=quota)
    assert result.status == "succeeded", result.reason
    assert _writers() == before
    done = _check_on_disk(Path(result.run_dir), quota, seen)
    assert {role for _, role in done} >= {"sim-planner", "sim-explorer", "sim-builder"}


def test_a_run_ended_by_an_error_still_writes_what_it_paid_for(fresh_sim, sample_repo, tmp_path):
    refused = FaultSpec(status=404, type="invalid_request_error", code="model_not_found",
                        message="The model does not exist")
    fresh_sim.set_scenario(scenario_with(**{
        "sim-reviewer": ModelBehavior(script=[Reply(error=refused)])}))
    before = _writers()
    seen: list = []
    quota = tmp_path / "quota.sqlite"
    with pytest.raises(ModelRefused):
        api.run(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env(),
                listeners=[seen.append], quota_path=quota)
    assert _writers() == before
    (run_dir,) = [p for p in (sample_repo / "workspaces").iterdir() if p.is_dir()]
    done = _check_on_disk(run_dir, quota, seen)
    assert ("builder-1", "sim-builder") in done and ("reviewer-1", "sim-reviewer") not in done


def _builder_that_waits_in_a_command() -> ModelBehavior:
    """Reads, then runs a long command: interrupted while the command runs, so the second
    call's writes may still be queued."""
    def call(name: str, **args) -> Reply:
        return Reply(tool_calls=[ToolCallSpec(name=name, arguments=args)])

    return ModelBehavior(script=[call("read", path="stats.py"), call("run", command="sleep 15")])


def _builder_calls_finished(run_dir: Path) -> int:
    path = run_dir / "events.jsonl"
    if not path.exists():
        return 0
    lines = path.read_text(encoding="utf-8").splitlines()
    return sum(1 for line in lines if '"call_finished"' in line and '"builder-1"' in line)


def test_ctrl_c_writes_out_the_queues_before_the_process_ends(fresh_sim, sample_repo, tmp_path):
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": _builder_that_waits_in_a_command()}))
    state = tmp_path / "state"
    proc = subprocess.Popen(
        [sys.executable, "-m", "orchestrator", "run", DEMO_TASK, "--repo", str(sample_repo),
         "--roles", str(scenario_path("demo-roles.toml")),
         "--set", f'providers.sim.base_url="{fresh_sim.base_url}"',
         "--set", "run.command_timeout_s=60", "--json"],
        env=run_env(XDG_STATE_HOME=str(state)), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        # Ctrl-C reaches it even when pytest runs in the background (a shell's `&` ignores it)
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    workspaces = sample_repo / "workspaces"
    try:
        deadline = time.monotonic() + 90
        run_dirs: list[Path] = []
        while time.monotonic() < deadline and proc.poll() is None:
            run_dirs = [p for p in workspaces.glob("*") if p.is_dir()]
            # the builder's second call has just finished: its command starts, its writes queue
            if run_dirs and _builder_calls_finished(run_dirs[0]) >= 2:
                break
            time.sleep(0.01)
        assert run_dirs and _builder_calls_finished(run_dirs[0]) == 2, "never reached the command"
        os.kill(proc.pid, signal.SIGINT)
        assert proc.wait(timeout=30) != 0  # stopped, not a success
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    done = _check_on_disk(run_dirs[0], state / "orchestrate" / "quota.sqlite", [])
    assert done[("builder-1", "sim-builder")] == 2


def test_a_waiter_cancelled_mid_write_neither_loses_the_write_nor_stops_the_writer(tmp_path):
    """An explorer cancelled (a sibling failed) while its reply's write is queued: the reply is
    still journaled, later writes still land, and ``flush``/``close`` return (they hung when the
    cancelled future killed the writer's thread)."""
    import asyncio

    from orchestrator.record.writer import Writer

    applied: list[int] = []
    gate = threading.Event()

    def apply(batch: list[int]) -> None:
        gate.wait(5)
        applied.extend(batch)

    writer: Writer[int] = Writer(apply, name="test-writer")

    async def waiter() -> None:
        await asyncio.wrap_future(writer.submit(1))

    async def main() -> None:
        task = asyncio.create_task(waiter())
        await asyncio.sleep(0.05)       # the write is queued (or being applied), unfinished
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        second = writer.submit(2)
        gate.set()
        await asyncio.wait_for(asyncio.wrap_future(second), 5)

    asyncio.run(main())
    closer = threading.Thread(target=writer.close, daemon=True)
    closer.start()
    closer.join(5)
    assert not closer.is_alive(), "close() hung: the writer's thread died"
    assert applied == [1, 2]
    writer.check()
