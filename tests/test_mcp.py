"""`orchestrate mcp`, driven by the MCP SDK's own client over stdio (and streamable HTTP on
127.0.0.1) against the simulator: typed tools, verified explore findings, a run with progress
notifications and its patch, runs/show, and a run cancelled by the client."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import anyio
import pytest
from conftest import cli, run_env, scenario_with
from pg import free_port

from orchestrator.faces.demo import DEMO_TASK, demo_roles_sets, demo_scenario, scenario_path
from orchestrator.sim import ModelBehavior

pytest.importorskip("mcp", reason="the mcp extra is not installed")
from mcp import Client, StdioServerParameters  # noqa: E402

QUESTION = "Where is `def median` defined?"


def _server_args(sim, repo: Path) -> list[str]:
    sets = [arg for s in demo_roles_sets(sim.base_url) for arg in ("--set", s)]
    return ["-m", "orchestrator", "mcp", "--repo", str(repo),
            "--roles", str(scenario_path("demo-roles.toml")), *sets]


def _client(sim, repo: Path) -> Client:
    params = StdioServerParameters(command=sys.executable, args=_server_args(sim, repo),
                                   env=run_env())
    return Client(params, read_timeout_seconds=120)


class _Progress:
    def __init__(self) -> None:
        self.seen: list[tuple[float, str]] = []
        self.builder_started = anyio.Event()

    async def __call__(self, progress: float, total: float | None, message: str | None) -> None:
        self.seen.append((progress, message or ""))
        if (message or "").startswith("builder builder-1 started"):
            self.builder_started.set()


async def test_tools_are_listed_with_typed_input_and_output_schemas(fresh_sim, sample_repo):
    async with _client(fresh_sim, sample_repo) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
    assert set(tools) == {"explore", "run", "show", "runs"}
    explore, run = tools["explore"], tools["run"]
    assert explore.input_schema["required"] == ["question"]
    assert {"findings", "dropped", "verified"} <= set(explore.output_schema["properties"])
    assert run.input_schema["required"] == ["task"]
    assert {"status", "branch", "commit", "patch", "cost_usd"} <= set(run.output_schema["properties"])
    assert explore.annotations.read_only_hint and not run.annotations.read_only_hint
    assert {"runs"} <= set(tools["runs"].output_schema["properties"])


async def test_explore_returns_verified_citations_and_counts_the_dropped_claims(
        fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{
        "sim-explorer": ModelBehavior(behavior="explorer-fabricate")}))
    progress = _Progress()
    async with _client(fresh_sim, sample_repo) as client:
        result = await client.call_tool("explore", {"question": QUESTION},
                                        progress_callback=progress)
    assert not result.is_error, result.content
    out = result.structured_content
    assert out["verified"] >= 1 and out["dropped"] >= 1  # the invented citation did not pass
    assert out["submitted"] == out["verified"] + out["dropped"]
    cited = [c for f in out["findings"] for c in f["citations"]]
    assert cited and all(re.fullmatch(r"[\w/.]+\.py:\d+-\d+", c) for c in cited)
    assert not any("imaginary" in c for c in cited)
    assert any("dropped" in m for _, m in progress.seen)
    # explore only reads the checkout; its record goes to workspaces/<run-id>/ (git-excluded)
    (record,) = (sample_repo / "workspaces").iterdir()
    assert (record / "report.json").is_file() and not (record / "worktree").exists()


async def test_a_run_reports_progress_and_returns_branch_commit_and_patch(fresh_sim, sample_repo):
    progress = _Progress()
    async with _client(fresh_sim, sample_repo) as client:
        result = await client.call_tool("run", {"task": DEMO_TASK}, progress_callback=progress)
        out = result.structured_content
        listed = (await client.call_tool("runs", {})).structured_content["runs"]
        shown = (await client.call_tool("show", {"run_id": out["run_id"]})).structured_content
    assert not result.is_error and out["status"] == "succeeded", out["reason"]
    assert out["branch"] == f"orchestrate/{out['run_id']}" and out["commit"]
    assert out["patch"].startswith("diff --git a/stats.py") and not out["patch_truncated"]
    assert out["tests_passed"] is True and out["cost_usd"] > 0
    values = [p for p, _ in progress.seen]
    messages = [m for _, m in progress.seen]
    assert values == sorted(set(values))  # strictly increasing, as MCP asks
    assert messages[0].startswith(f"run {out['run_id']} started")
    assert progress.builder_started.is_set() and "acceptance passed" in messages
    assert "review by reviewer: approve" in messages
    assert messages[-1].startswith("run succeeded")
    assert [(r["run_id"], r["state"]) for r in listed] == [(out["run_id"], "succeeded")]
    assert shown["state"] == "succeeded" and shown["commit"] == out["commit"]
    assert {"planner", "explorer", "builder", "reviewer"} <= set(shown["per_role"])
    assert shown["calls"] > 0 and shown["sessions"]


async def test_a_cancelled_run_stops_and_is_recorded_as_stopped(fresh_sim, sample_repo):
    slow_builder = demo_scenario().models["sim-builder"].model_copy(update={"delay_s": 30})
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": slow_builder}))
    progress = _Progress()
    async with _client(fresh_sim, sample_repo) as client:
        async with anyio.create_task_group() as tg:
            async def call_run() -> None:
                await client.call_tool("run", {"task": DEMO_TASK}, progress_callback=progress)

            tg.start_soon(call_run)
            with anyio.fail_after(60):
                await progress.builder_started.wait()
            tg.cancel_scope.cancel()  # the SDK sends notifications/cancelled
        started = time.monotonic()
        runs: list[dict] = []
        while time.monotonic() - started < 30:
            runs = (await client.call_tool("runs", {})).structured_content["runs"]
            if runs and runs[0]["state"] != "running":
                break
            await anyio.sleep(0.2)
    assert [r["state"] for r in runs] == ["stopped"]
    assert time.monotonic() - started < 20, "the run went on after the cancel"
    assert len(fresh_sim.state.requests_for("sim-builder")) == 1


async def test_a_bad_repository_is_a_tool_error_with_its_reason(fresh_sim, sample_repo, tmp_path):
    async with _client(fresh_sim, sample_repo) as client:
        result = await client.call_tool("runs", {"repo": str(tmp_path)})
    assert result.is_error and "not a git repository" in result.content[0].text


async def test_streamable_http_on_loopback_serves_the_same_tools(fresh_sim, sample_repo):
    port = free_port()
    server = subprocess.Popen([sys.executable, *_server_args(fresh_sim, sample_repo), "--http",
                               "--port", str(port)], env=run_env(), stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                async with Client(f"http://127.0.0.1:{port}/mcp") as client:
                    names = {t.name for t in (await client.list_tools()).tools}
                    runs = await client.call_tool("runs", {})
                break
            except Exception:
                if server.poll() is not None or time.monotonic() > deadline:
                    raise
                await anyio.sleep(0.3)
    finally:
        server.terminate()
        server.wait(10)
    assert names == {"explore", "run", "show", "runs"}
    assert runs.structured_content == {"runs": []}


def test_the_command_refuses_a_bad_repository_in_one_line(tmp_path):
    proc = cli("mcp", "--repo", str(tmp_path))
    assert proc.returncode == 2
    assert "not a git repository" in proc.stderr and "Traceback" not in proc.stderr
