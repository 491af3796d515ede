"""Context end to end against the simulator: paging, masking before forking, forks that carry a
5 MB log scan forward, and recovery from a server's context_length_exceeded."""

from __future__ import annotations

import hashlib
import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_env, scenario_with, sim_roles

from orchestrator import api
from orchestrator.config.definitions import load_agents
from orchestrator.models.pool import ClientPool
from orchestrator.record.telemetry import Telemetry
from orchestrator.session.context import MASK_PREFIX, policy_for
from orchestrator.session.handoff import Summarizer
from orchestrator.session.loop import Session
from orchestrator.sim import (
    ChatRequestView,
    FaultSpec,
    ModelBehavior,
    Reply,
    ToolCallSpec,
    register_behavior,
)
from orchestrator.tools.base import Toolbox
from orchestrator.tools.explorer import explorer_tools
from orchestrator.tools.reading import read

pytestmark = pytest.mark.both_apis  # every simulator test runs on both wire APIs

INFO = "2024-05-01T10:{m:02d}:{s:02d} INFO worker-{w} processed request id={i} in {ms}ms\n"
ERROR = "2024-05-01T11:17:42 ERROR payment-service failed to commit txn=0xdeadbeef: conn reset"


def _git(repo: Path, *args: str) -> None:
    ident = ["-c", "user.name=t", "-c", "user.email=t@localhost", "-c", "commit.gpgSign=false"]
    subprocess.run(["git", *ident, *args], cwd=repo, check=True, capture_output=True)


def log_repo(path: Path, *, size: int, error_at: float = 0.5) -> tuple[Path, int]:
    """A committed repository holding ``app.log`` (about ``size`` bytes) with one ERROR line."""
    path.mkdir(parents=True)
    lines, used = [], 0
    while used < size:
        i = len(lines)
        line = INFO.format(m=i // 60 % 60, s=i % 60, w=i % 7, i=i, ms=i % 97)
        lines.append(line)
        used += len(line)
    at = int(len(lines) * error_at)
    lines[at] = ERROR + "\n"
    (path / "app.log").write_text("".join(lines), encoding="utf-8")
    _git(path, "init", "-q", "-b", "main")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "log")
    return path, at + 1


def _planner(question: str) -> ModelBehavior:
    plan = {"goal": "find the error", "steps": [], "questions": [question], "acceptance": []}
    return ModelBehavior(script=[Reply(tool_calls=[ToolCallSpec(name="submit", arguments=plan)])])


def _explorer_session(sim, repo: Path, *sets: str, sid: str = "explorer-1",
                      run_dir: Path | None = None, max_turns: int = 60):
    roles = sim_roles(sim, *sets)
    pool = ClientPool(roles, run_env())
    agents = load_agents()
    telemetry = Telemetry("test-run")
    summarizer = Summarizer(agent=agents["summarizer"], client=pool.for_role("summarizer"),
                            policy=policy_for(roles.roles["summarizer"],
                                              roles.model_for("summarizer")))
    session = Session(
        session_id=sid, agent=agents["explorer"], client=pool.for_role("explorer"),
        toolbox=Toolbox.of(explorer_tools(repo)), telemetry=telemetry, max_turns=max_turns,
        policy=policy_for(roles.roles["explorer"], roles.model_for("explorer")),
        summarizer=summarizer, run_dir=run_dir,
    )
    return session, telemetry, pool


def _kinds(telemetry: Telemetry, kind: str) -> list[dict]:
    return [dict(e.data, session=e.session) for e in telemetry.events if e.kind == kind]


async def test_explorer_finds_the_error_in_a_5mb_log_by_forking(fresh_sim, tmp_path):
    repo, error_line = log_repo(tmp_path / "repo", size=5 * 1024 * 1024)
    assert (repo / "app.log").stat().st_size >= 5 * 1024 * 1024
    question = ("Find the `ERROR` in `app.log` and read the 300 lines before it "
                "in windows of 10 lines.")
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": _planner(question),
        "sim-explorer": ModelBehavior(behavior="log-scan", context_window=4096),
        "sim-summarizer": ModelBehavior(behavior="handoff-carry"),
    }))
    roles = sim_roles(fresh_sim, "models.explorer-sim.context_window=4096",
                      "explorer.output_reserve=256", "explorer.max_turns=80")
    events = []
    result = await api.aexplore("What went wrong?", repo=repo, roles=roles, env=run_env(),
                                workdir=tmp_path / "explore-artefacts",
                                listeners=[events.append])
    (explorer,) = result.explorers
    assert explorer.error is None and explorer.verified == 1, explorer
    (citation,) = explorer.claims[0].citations
    assert (citation.path, citation.start_line) == ("app.log", error_line)
    assert "ERROR payment-service" in citation.quote
    forks = [e for e in events if e.kind == "fork"]
    assert forks and all(f.data["reason"] == "threshold" for f in forks)
    assert [f.data["child"] for f in forks] == [f"explorer-1.{n}" for n in range(1, len(forks) + 1)]
    assert all(f.data["tokens_after"] < f.data["tokens_before"] for f in forks)
    # each fork says how full its parent got (the session tree shows it for the parent)
    assert all(0.5 < f.data["peak_context"] < 1 for f in forks)
    saved = json.loads(Path(forks[0].data["transcript"]).read_text())
    assert saved["session"] == "explorer-1" and saved["messages"][0]["role"] == "system"
    assert all(r.status == 200 for r in fresh_sim.requests), [r.status for r in fresh_sim.requests]
    assert max(r.prompt_tokens for r in fresh_sim.state.requests_for("sim-explorer")) < 4096
    handoffs = fresh_sim.state.requests_for("sim-summarizer")
    assert len(handoffs) == len(forks)
    last = fresh_sim.state.requests_for("sim-explorer")[-1].messages
    assert "read app.log up to line" in json.dumps(last)
    reads = 300 // 10
    assert explorer.tool_calls >= reads + 1  # counted across the whole lineage
    finished = [e for e in events if e.kind == "role_finished" and e.role == "explorer"]
    assert 0 < finished[0].data["peak_context"] < 0.8


async def test_masking_comes_before_forking(fresh_sim, tmp_path):
    repo, error_line = log_repo(tmp_path / "repo", size=60_000)
    fresh_sim.set_scenario(scenario_with(**{
        "sim-explorer": ModelBehavior(behavior="log-scan", context_window=8192),
        "sim-summarizer": ModelBehavior(behavior="handoff-carry"),
    }))
    session, telemetry, pool = _explorer_session(
        fresh_sim, repo, "models.explorer-sim.context_window=8192", run_dir=tmp_path / "run")
    outcome = await session.run("Question: Find the `ERROR` in `app.log` and read the 240 lines "
                                "before it in windows of 20 lines.")
    await pool.aclose()
    assert outcome.payload.claims[0].citations[0].start_line == error_line
    assert outcome.forks == 0 and not _kinds(telemetry, "fork")
    assert not fresh_sim.state.requests_for("sim-summarizer")
    assert session.masked > 0
    last = fresh_sim.state.requests_for("sim-explorer")[-1].messages
    stubs = [m["content"] for m in last
             if m["role"] == "tool" and m["content"].startswith(MASK_PREFIX)]
    assert stubs and "read(path=app.log, start_line=" in stubs[0]
    handle = stubs[0].split('read_artifact("')[1].split('"')[0]
    kept = (tmp_path / "run" / "artifacts" / f"{handle}.txt").read_text()
    assert kept.startswith("app.log (lines")
    assert outcome.peak_context < 0.8


@register_behavior("page-through")
def _page_through(req: ChatRequestView) -> Reply:
    """Reads big.txt once, then follows each page's 'next:' until the end, then submits."""
    results = req.tool_results()
    if not results:
        return Reply(tool_calls=[ToolCallSpec(name="read", arguments={"path": "big.txt"})])
    last = results[-1][2]
    if last.startswith("[paged:"):
        art = last.split('stored as artifact "')[1].split('"')[0]
        return Reply(tool_calls=[ToolCallSpec(name="read_artifact", arguments={"id": art})])
    header = last.split("\n", 1)[0]
    if "next: read_artifact(" in header:
        art, offset = header.split('next: read_artifact("')[1].split('", offset=')
        return Reply(tool_calls=[ToolCallSpec(
            name="read_artifact", arguments={"id": art, "offset": int(offset.rstrip("])"))})])
    done = {"answer": "read", "claims": []}
    return Reply(tool_calls=[ToolCallSpec(name="submit", arguments=done)])


async def test_a_large_tool_result_becomes_a_preview_and_exact_pages(fresh_sim, tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    rows = (f"row {i:05d} {hashlib.sha1(str(i).encode()).hexdigest()}\n" for i in range(390))
    (repo / "big.txt").write_text("".join(rows))
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": ModelBehavior(behavior="page-through",
                                                                          context_window=8192)}))
    session, _, pool = _explorer_session(fresh_sim, repo, "models.explorer-sim.context_window=8192",
                                         run_dir=tmp_path / "run")
    await session.run("Question: read big.txt")
    await pool.aclose()
    original = read(repo, "big.txt")
    first_seen: dict[str, str] = {}  # what the model was sent, before any masking
    for r in fresh_sim.state.requests_for("sim-explorer"):
        for m in r.messages:
            if m["role"] == "tool":
                first_seen.setdefault(m["tool_call_id"], m["content"])
    tool_texts = list(first_seen.values())
    assert tool_texts[0].startswith("[paged:") and len(tool_texts[0]) < len(original) // 3
    pages = [t.split("\n", 1)[1] for t in tool_texts[1:]]
    assert len(pages) >= 3 and "".join(pages) == original
    cap = session.policy.page_cap
    assert all(session.ledger.tokens(t) <= cap for t in tool_texts)
    assert (tmp_path / "run" / "artifacts" / "explorer-1.a1.txt").read_text() == original
    assert max(r.prompt_tokens for r in fresh_sim.requests) <= 8192


async def test_context_length_exceeded_is_recovered_from(fresh_sim, tmp_path):
    """The role map claims 16k but the server has 6k: it refuses, the session adapts and ends."""
    repo, error_line = log_repo(tmp_path / "repo", size=60_000)
    question = ("Find the `ERROR` in `app.log` and read the 200 lines before it "
                "in windows of 10 lines.")
    scenario = scenario_with(**{
        "sim-planner": _planner(question),
        "sim-explorer": ModelBehavior(behavior="log-scan", context_window=6000),
        "sim-summarizer": ModelBehavior(behavior="handoff-carry"),
    })
    fresh_sim.set_scenario(scenario.model_copy(update={"tokenizer": "bytes3"}))
    events = []
    result = await api.aexplore("What went wrong?", repo=repo, roles=sim_roles(fresh_sim),
                                env=run_env(), listeners=[events.append])
    (explorer,) = result.explorers
    assert explorer.error is None and explorer.verified == 1, explorer
    assert explorer.claims[0].citations[0].start_line == error_line
    statuses = [r.status for r in fresh_sim.state.requests_for("sim-explorer")]
    assert 400 in statuses and statuses[-1] == 200
    assert statuses.count(400) <= 2  # it learned the window after the first refusal
    assert not any(e.kind == "warning" for e in events)


async def test_a_summarizer_lost_mid_run_is_reported_not_silent(fresh_sim, tmp_path):
    """Its quota gone and no fallback: forks get a plain handoff, and the loss is reported."""
    repo, _ = log_repo(tmp_path / "repo", size=60_000)
    question = ("Find the `ERROR` in `app.log` and read the 180 lines before it "
                "in windows of 10 lines.")
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": _planner(question),
        "sim-explorer": ModelBehavior(behavior="log-scan", context_window=4096),
        "sim-summarizer": ModelBehavior(respond=lambda _req: Reply(error=FaultSpec(
            status=429, code="insufficient_quota", type="insufficient_quota",
            message="You exceeded your current quota"))),
    }))
    # the explorer pages through the log by hand, so its session forks (no candidates shown)
    roles = sim_roles(fresh_sim, "models.explorer-sim.context_window=4096",
                      "explorer.output_reserve=256", "explorer.max_turns=80",
                      "run.explore_candidates=0")
    # a ledger of its own: the exhausted summarizer must not leak into other tests
    env = run_env(XDG_STATE_HOME=str(tmp_path / "state"))
    result = await api.aexplore("What went wrong?", repo=repo, roles=roles, env=env)
    lost = [loss for loss in result.losses if loss.role == "summarizer"]
    assert lost and all("a plain one was used" in loss.message for loss in lost)
    assert "role summarizer: model summarizer-sim" in lost[0].message
    assert lost[0].code == "model_unavailable" and result.exit_code != 0


async def test_explorer_with_an_8k_window_finds_the_error_in_a_5mb_log_by_searching(
        fresh_sim, tmp_path):
    """The log is larger than the search's old 1 MB limit: a repo-wide search now reaches it,
    says where in the file the hit is, and the explorer reads right there: no paging from line
    1, no fork, no overflow."""
    repo, error_line = log_repo(tmp_path / "repo", size=5 * 1024 * 1024, error_at=0.31)
    question = "What made the `payment-service` fail?"
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": _planner(question),
        "sim-explorer": ModelBehavior(behavior="explorer-cite", context_window=8192),
    }))
    roles = sim_roles(fresh_sim, "models.explorer-sim.context_window=8192")
    events = []
    result = await api.aexplore("Why did the payment fail?", repo=repo, roles=roles,
                                env=run_env(), workdir=tmp_path / "artefacts",
                                listeners=[events.append])
    (explorer,) = result.explorers
    assert explorer.error is None and explorer.verified == 1, explorer
    (citation,) = explorer.claims[0].citations
    assert (citation.path, citation.start_line) == ("app.log", error_line)
    assert "ERROR payment-service failed to commit" in citation.quote
    assert explorer.tool_calls == 2  # one search, one read around the hit
    calls = fresh_sim.state.requests_for("sim-explorer")
    assert max(r.prompt_tokens for r in calls) < 8192 // 2
    searched = [m["content"] for m in calls[1].messages if m["role"] == "tool"][0]
    assert f"app.log:{error_line}: " in searched and "app.log is 5.2 MB" in searched
    assert f"line {error_line} at byte " in searched
    assert not [e for e in events if e.kind == "fork"]
