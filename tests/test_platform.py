"""LangGraph's platform: ``langgraph dev`` serves our ``langgraph.json`` on 127.0.0.1 and a task
runs through the LangGraph SDK client against the simulator, end to end."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import run_env
from pg import free_port

from orchestrator.demo import DEMO_TASK, demo_roles_sets, scenario_path
from orchestrator.platform import PlatformInput, make_graph

pytest.importorskip("langgraph_api", reason="the platform extra is not installed")
ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true",
           "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"}


@pytest.fixture(scope="module")
def platform_url(tmp_path_factory):
    cli = shutil.which("langgraph", path=str(Path(sys.executable).parent))
    if cli is None:
        pytest.skip("the langgraph CLI is not installed (pip install 'orchestrate[platform]')")
    port = free_port()
    cwd = tmp_path_factory.mktemp("langgraph-dev")  # it writes .langgraph_api/ where it runs
    log = (cwd / "server.log").open("w")
    server = subprocess.Popen(
        [cli, "dev", "--config", str(ROOT / "langgraph.json"), "--host", "127.0.0.1",
         "--port", str(port), "--no-browser", "--no-reload"],
        cwd=cwd, env={**run_env(), **OFFLINE}, stdout=log, stderr=subprocess.STDOUT,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        _wait_ready(url, server, cwd / "server.log")
        yield url
    finally:
        server.terminate()
        try:
            server.wait(15)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


def _wait_ready(url: str, server: subprocess.Popen, log: Path, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if server.poll() is not None:
            raise AssertionError(f"langgraph dev exited:\n{log.read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"{url}/ok", timeout=1) as reply:
                if reply.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise AssertionError(f"langgraph dev not ready:\n{log.read_text()[-3000:]}")


def test_the_platform_graph_takes_and_gives_plain_data():
    graph = make_graph()
    assert set(graph.get_input_jsonschema()["properties"]) == set(PlatformInput.model_fields)
    assert set(graph.get_output_jsonschema()["properties"]) == {"result"}


async def test_a_task_runs_through_the_sdk_client(platform_url, fresh_sim, sample_repo):
    from langgraph_sdk import get_client

    client = get_client(url=platform_url)
    assert [a["graph_id"] for a in await client.assistants.search()] == ["orchestrate"]
    thread = await client.threads.create()
    request = {"task": DEMO_TASK, "repo": str(sample_repo),
               "role_files": [str(scenario_path("demo-roles.toml"))],
               "sets": demo_roles_sets(fresh_sim.base_url)}
    kinds, final = [], None
    async for part in client.runs.stream(thread["thread_id"], "orchestrate", input=request,
                                         stream_mode=["custom", "values"]):
        if part.event == "custom":
            kinds.append(part.data["kind"])
        elif part.event == "values":
            final = part.data
        assert part.event != "error", part.data
    result = final["result"]
    assert result["status"] == "succeeded", result["reason"]
    assert result["branch"] == f"orchestrate/{result['run_id']}" and result["commit"]
    assert kinds[0] == "run_started" and kinds[-1] == "run_finished"
    assert fresh_sim.state.requests_for("sim-planner")  # the models really were the simulator's
    state = await client.threads.get_state(thread["thread_id"])
    assert state["values"]["result"]["run_id"] == result["run_id"]


async def test_a_bad_repository_fails_the_platform_run_with_its_reason(platform_url, tmp_path):
    from langgraph_sdk import get_client

    client = get_client(url=platform_url)
    run = await client.runs.wait(None, "orchestrate", input={"task": "x", "repo": str(tmp_path)},
                                 raise_error=False)
    assert "not a git repository" in str(run)
