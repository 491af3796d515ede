"""LangGraph's platform: the served graph is the real run graph. In process with a checkpointer,
then ``langgraph dev`` serving our ``langgraph.json`` on 127.0.0.1, driven by the LangGraph SDK
client against the simulator: the roles' nodes in the stream, a plan-approval interrupt answered
through the API, the run's events, its result."""

from __future__ import annotations

import shutil
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest
from conftest import SIM_ENV, run_env
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.types import Command
from pg import free_port

from orchestrator.engine.graph import build_graph
from orchestrator.faces.demo import DEMO_TASK, demo_roles_sets, scenario_path
from orchestrator.faces.platform import (
    PlatformConfig,
    PlatformInput,
    build_platform_graph,
    make_graph,
    run_id_for,
)

ROOT = Path(__file__).resolve().parents[1]
OFFLINE = {"LANGGRAPH_CLI_NO_ANALYTICS": "1", "LANGGRAPH_NO_VERSION_CHECK": "true",
           "LANGSMITH_TRACING": "false", "LANGCHAIN_TRACING_V2": "false"}
ROLE_NODES = ["plan", "approve", "explore", "gather", "build", "verify", "review", "report"]


def _context(sim, repo: Path) -> dict:
    return {"repo": str(repo), "role_files": [str(scenario_path("demo-roles.toml"))],
            "sets": demo_roles_sets(sim.base_url)}


# --- in process ----------------------------------------------------------------------------------


def test_the_platform_graph_is_the_cli_graph_with_plain_data_at_its_edges():
    served = make_graph()
    assert served.get_graph().draw_mermaid() == build_graph().compile().get_graph().draw_mermaid()
    assert set(served.get_input_jsonschema()["properties"]) == set(PlatformInput.model_fields)
    assert set(served.get_context_jsonschema()["properties"]) == set(PlatformConfig.model_fields)
    assert set(served.get_output_jsonschema()["properties"]) == {"run_id", "status", "reason",
                                                                  "result"}


async def test_a_rejected_plan_ends_the_run_and_the_thread_takes_no_second_task(
        fresh_sim, sample_repo, monkeypatch):
    for key, value in SIM_ENV.items():  # the graph reads the server process's environment
        monkeypatch.setenv(key, value)
    app = build_platform_graph().compile(checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "thread-reject"}}
    context = _context(fresh_sim, sample_repo)
    paused = await app.ainvoke({"task": DEMO_TASK, "approve_plan": True}, config, context=context)
    [pending] = paused["__interrupt__"]
    assert pending.value["run_id"] == run_id_for("thread-reject")
    assert pending.value["plan"]["questions"] and "true" in pending.value["question"]
    report = sample_repo / "workspaces" / run_id_for("thread-reject") / "report.json"
    assert '"status": "awaiting_approval"' in report.read_text()

    done = await app.ainvoke(Command(resume="no"), config, context=context)  # a typed "no"
    assert done["status"] == "failed" and "rejected" in done["reason"]
    assert done["result"]["status"] == "failed"
    assert not fresh_sim.state.requests_for("sim-builder")

    with pytest.raises(Exception, match="already ran a task"):
        await app.ainvoke({"task": "another task"}, config, context=context)


# --- langgraph dev (the platform extra) ----------------------------------------------------------


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
         "--port", str(port), "--no-browser", "--no-reload", "--allow-blocking"],
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


async def _stream(client, thread_id: str, **kwargs) -> tuple[list[str], list[str], list]:
    """Node names (in order), custom event kinds, and interrupts seen in one run's stream."""
    nodes, kinds, interrupts = [], [], []
    async for part in client.runs.stream(thread_id, "orchestrate",
                                         stream_mode=["updates", "custom"], **kwargs):
        assert part.event != "error", part.data
        if part.event == "updates":
            for name, value in part.data.items():
                (interrupts.extend(value) if name == "__interrupt__" else nodes.append(name))
        elif part.event == "custom":
            kinds.append(part.data["kind"])
    return nodes, kinds, interrupts


async def test_studio_sees_every_role_and_answers_the_plan_approval(platform_url, fresh_sim,
                                                                    sample_repo):
    from langgraph_sdk import get_client

    client = get_client(url=platform_url)
    assert [a["graph_id"] for a in await client.assistants.search()] == ["orchestrate"]
    thread = await client.threads.create()
    context = _context(fresh_sim, sample_repo)
    nodes, kinds, interrupts = await _stream(
        client, thread["thread_id"], input={"task": DEMO_TASK, "approve_plan": True},
        context=context)
    assert nodes == ["plan"] and len(interrupts) == 1
    assert interrupts[0]["value"]["plan"]["questions"]
    assert kinds[0] == "run_started" and "role_started" in kinds
    paused = await client.threads.get_state(thread["thread_id"])
    assert paused["next"] == ["approve"] and paused["values"]["plan"]["goal"]

    nodes, kinds, _ = await _stream(client, thread["thread_id"], command={"resume": True},
                                    context=context)
    assert set(["plan", *nodes]) == set(ROLE_NODES)
    assert nodes[0] == "approve" and nodes[-1] == "report"
    assert nodes.count("explore") == len(paused["values"]["plan"]["questions"])
    assert kinds[0] == "run_resumed" and kinds[-1] == "run_finished"
    assert fresh_sim.state.requests_for("sim-builder")  # the models really were the simulator's

    final = (await client.threads.get_state(thread["thread_id"]))["values"]
    result = final["result"]
    assert result["status"] == "succeeded", result["reason"]
    assert result["run_id"] == run_id_for(thread["thread_id"]) == final["run_id"]
    assert result["branch"] == f"orchestrate/{result['run_id']}" and result["commit"]
    assert final["verify"]["passed"] and final["review"]["verdict"] == "approve"
    assert [e["verified"] > 0 for e in final["explorers"]] == [True] * len(final["explorers"])


async def test_a_bad_repository_fails_the_platform_run_with_its_reason(platform_url, tmp_path):
    from langgraph_sdk import get_client

    client = get_client(url=platform_url)
    run = await client.runs.wait(None, "orchestrate", input={"task": "x"},
                                 context={"repo": str(tmp_path)}, raise_error=False)
    assert "not a git repository" in str(run)
