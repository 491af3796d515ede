"""The Responses API through the real SDK to the simulator: what a request carries, encrypted
reasoning carried in the session's own history (and only to the model that wrote it), fallback
chains that switch API mid-session and mid-run, and errors that name the setting to change."""

from __future__ import annotations

import pytest
from conftest import cli, run_env, scenario_with, sim_roles
from routing_kit import MESSAGES, PLAN, call, pool_for

from orchestrator import api
from orchestrator.config.definitions import load_agents
from orchestrator.errors import ContextOverflow
from orchestrator.faces.demo import DEMO_TASK, demo_scenario, scenario_path
from orchestrator.models.errors import (
    ModelMisconfigured,
    ModelRefused,
    QuotaExhausted,
    RateLimited,
    Transient,
)
from orchestrator.models.journal import CallJournal, JournaledClient
from orchestrator.record.telemetry import Telemetry
from orchestrator.session.loop import Session
from orchestrator.sim import FaultSpec, ModelBehavior, Reply
from orchestrator.state import Plan
from orchestrator.tools.base import Toolbox
from orchestrator.tools.explorer import explorer_tools

pytestmark = pytest.mark.usefixtures("pools_closed")  # pool_for's pools closed after each test

RESPONSES = 'providers.sim.api="responses"'
OK = Reply(content="fine")
QUOTA = Reply(error=FaultSpec(status=429, code="insufficient_quota", type="insufficient_quota",
                              message="You exceeded your current quota."))
SCHEMA = {"type": "json_schema", "json_schema": {"name": "answer", "schema": {
    "type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}}}
TOOL = {"type": "function", "function": {"name": "read", "description": "Read a file.",
                                         "parameters": {"type": "object", "properties": {}}}}


def _models(sim, **behaviours: ModelBehavior) -> None:
    sim.set_scenario(scenario_with(**{"sim-backup": ModelBehavior(script=[Reply(content="backup")]),
                                      **behaviours}))


async def test_a_request_is_stateless_and_carries_what_the_role_asks(fresh_sim):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[OK])})
    pool, _ = pool_for(fresh_sim, RESPONSES)
    done = await pool.client("planner", "planner-sim").complete(
        MESSAGES, session="s", tools=[TOOL], response_format=SCHEMA)
    (rec,) = fresh_sim.state.requests_for("sim-planner")
    body = rec.body
    assert rec.api == "responses" and done.record.api == "responses" and done.content == "fine"
    assert body["store"] is False and "previous_response_id" not in body
    assert body["reasoning"] == {"effort": "high"}
    assert body["include"] == ["reasoning.encrypted_content"]
    assert body["service_tier"] == "default" and body["max_output_tokens"] == 4000
    assert body["tools"] == [{"type": "function", "name": "read", "description": "Read a file.",
                              "parameters": {"type": "object", "properties": {}}, "strict": False}]
    assert body["text"] == {"format": {"type": "json_schema", "name": "answer",
                                       "schema": SCHEMA["json_schema"]["schema"]}}
    assert body["input"] == [{"type": "message", "role": m["role"], "content": m["content"]}
                             for m in MESSAGES]


async def test_a_server_that_reads_only_response_format_gets_it(fresh_sim):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[OK])})
    pool, _ = pool_for(fresh_sim, RESPONSES, 'providers.sim.responses_format="response_format"')
    await pool.client("planner", "planner-sim").complete(MESSAGES, session="s",
                                                         response_format=SCHEMA)
    body = fresh_sim.state.requests_for("sim-planner")[0].body
    assert body["response_format"] == SCHEMA and "text" not in body


async def _planner(pool, repo, events: list, client=None) -> tuple[Session, Telemetry]:
    agent = load_agents()["planner"]
    telemetry = Telemetry("test-run", listeners=(events.append,))
    session = Session(session_id="planner-1", agent=agent,
                      client=client or pool.for_role("planner"),
                      toolbox=Toolbox.of(t for t in explorer_tools(repo) if t.name in agent.tools),
                      telemetry=telemetry, max_turns=8)
    outcome = await session.run("Task: fix median")
    assert isinstance(outcome.payload, Plan) and outcome.payload.goal == "g"
    return session, telemetry


async def test_encrypted_reasoning_goes_back_with_the_history_and_counts_in_the_ledger(
        fresh_sim, sample_repo):
    steps = [call("read", path="stats.py"), call("search", pattern="median"),
             call("submit", **PLAN)]
    _models(fresh_sim, **{"sim-planner": ModelBehavior(reasoning_tokens=400, script=steps)})
    pool, _ = pool_for(fresh_sim, RESPONSES)
    events: list = []
    session, telemetry = await _planner(pool, sample_repo, events)
    carried = [[i for i in r.body["input"] if i["type"] == "reasoning"]
               for r in fresh_sim.state.requests_for("sim-planner")]
    assert [len(c) for c in carried] == [0, 1, 2]
    assert carried[2][0] == carried[1][0] and all("id" not in i for i in carried[2])
    assert [c.reasoning_tokens for c in telemetry.calls] == [400, 400, 400]
    assert all(c.output_tokens > 400 for c in telemetry.calls)
    assert telemetry.per_role()["planner"].reasoning_tokens == 1200
    # the server counts carried reasoning in the prompt, and so does the ledger's estimate
    ticks = [e.data for e in events if e.kind == "progress" and "estimate" in e.data]
    for tick in ticks[1:]:
        assert abs(tick["estimate"] - tick["prompt_tokens"]) <= 0.05 * tick["prompt_tokens"], ticks


async def test_the_call_journal_replays_reasoning_so_a_rerun_session_pays_nothing(
        fresh_sim, sample_repo, tmp_path):
    steps = [call("read", path="stats.py"), call("search", pattern="median"),
             call("submit", **PLAN)]
    _models(fresh_sim, **{"sim-planner": ModelBehavior(reasoning_tokens=100, script=steps)})
    journal = CallJournal(tmp_path / "journal.sqlite")
    pool, _ = pool_for(fresh_sim, RESPONSES)
    first, _ = await _planner(pool, sample_repo, [],
                              JournaledClient(pool.for_role("planner"), journal))
    paid = len(fresh_sim.requests)
    events: list = []
    again, telemetry = await _planner(pool, sample_repo, events,
                                      JournaledClient(pool.for_role("planner"), journal))
    assert len(fresh_sim.requests) == paid == 3 and journal.replayed == 3
    assert again.messages == first.messages and "_reasoning" in again.messages[2]
    assert [e.kind for e in events].count("call_replayed") == 3 and not telemetry.calls
    journal.close()


async def test_reasoning_never_reaches_another_model_and_a_chain_may_switch_api(
        fresh_sim, sample_repo):
    """Responses primary, Chat Completions fallback, switching in the middle of a session."""
    steps = [call("read", path="stats.py"), call("submit", **PLAN)]
    _models(fresh_sim, **{
        "sim-planner": ModelBehavior(reasoning_tokens=50, first=[steps[0]], script=[QUOTA],
                                     apis=("responses",)),
        "sim-backup": ModelBehavior(script=steps, apis=("chat",)),
    })
    pool, events = pool_for(fresh_sim, RESPONSES, 'models.backup-sim.api="chat"')
    session, telemetry = await _planner(pool, sample_repo, [])
    assert [(c.api, c.served_model) for c in telemetry.calls] == [
        ("responses", "sim-planner"), ("chat", "sim-backup")]
    (backup,) = fresh_sim.state.requests_for("sim-backup")
    assert backup.api == "chat" and "_reasoning" not in str(backup.body)
    assert any(m.get("tool_calls") for m in backup.messages)  # the history came along
    assert "_reasoning" in session.messages[2]  # still kept for the model that wrote it


async def test_a_responses_fallback_gets_the_history_without_the_others_reasoning(
        fresh_sim, sample_repo):
    steps = [call("read", path="stats.py"), call("submit", **PLAN)]
    _models(fresh_sim, **{
        "sim-planner": ModelBehavior(reasoning_tokens=50, first=[steps[0]], script=[QUOTA]),
        "sim-backup": ModelBehavior(reasoning_tokens=20, script=steps),
    })
    pool, _ = pool_for(fresh_sim, RESPONSES)
    await _planner(pool, sample_repo, [])
    (backup,) = fresh_sim.state.requests_for("sim-backup")
    assert backup.status == 200  # the sim refuses reasoning another model wrote
    assert not [i for i in backup.body["input"] if i["type"] == "reasoning"]


async def test_a_run_whose_builder_falls_back_from_responses_to_chat_succeeds(
        fresh_sim, sample_repo, tmp_path):
    builder = demo_scenario().models["sim-builder"]
    first = builder.script[0]  # type: ignore[index]
    fresh_sim.set_scenario(scenario_with(**{
        "sim-builder": builder.model_copy(update={"first": [first, QUOTA], "apis": ("responses",),
                                                  "reasoning_tokens": 30}),
        "sim-backup": builder.model_copy(update={"apis": ("chat",)}),
    }))
    roles = sim_roles(fresh_sim, RESPONSES, *[
        'models.backup-sim.provider="sim"', 'models.backup-sim.id="sim-backup"',
        'models.backup-sim.api="chat"', "models.backup-sim.context_window=32000",
        "models.backup-sim.max_output=4000", 'builder.fallback=["backup-sim"]'])
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=roles, env=run_env(),
                            quota_path=tmp_path / "quota.sqlite")  # not the shared ledger
    assert result.status == "succeeded", result.reason
    assert result.per_role["builder"].models == ["sim-builder", "sim-backup"]
    assert {r.api for r in fresh_sim.requests if r.model != "sim-backup"} == {"responses"}
    assert {r.api for r in fresh_sim.state.requests_for("sim-backup")} == {"chat"}
    assert any("served by fallback backup-sim" in w for w in result.warnings)


@pytest.mark.parametrize("speaks,asked", [("responses", "chat"), ("chat", "responses")])
async def test_the_wrong_api_is_one_line_naming_the_setting_after_one_request(fresh_sim, speaks,
                                                                             asked):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(apis=(speaks,), script=[OK])})
    pool, _ = pool_for(fresh_sim, f'providers.sim.api="{asked}"')
    with pytest.raises(ModelMisconfigured) as err:
        await pool.for_role("planner").complete(MESSAGES, session="s")
    message = str(err.value)
    assert "\n" not in message and "sim-planner" in message and err.value.exit_code == 2
    assert f'set api = "{speaks}" on models.planner-sim' in message
    assert len(fresh_sim.state.requests_for("sim-planner")) == 1
    assert not fresh_sim.state.requests_for("sim-backup")


def test_the_cli_says_it_in_one_line_with_exit_code_2(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(
        apis=("responses",), script=[OK])}))
    proc = cli("run", DEMO_TASK, "--repo", str(sample_repo), "--roles",
               str(scenario_path("demo-roles.toml")),
               "--set", f'providers.sim.base_url="{fresh_sim.base_url}"')
    assert proc.returncode == 2, proc.stderr
    (line,) = [x for x in proc.stderr.splitlines() if x.startswith("error:")]
    assert "Responses API" in line and 'set api = "responses" on models.planner-sim' in line
    assert "Traceback" not in proc.stderr


async def test_a_server_without_the_endpoint_names_the_api_setting(fresh_sim):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[OK])})
    elsewhere = fresh_sim.base_url.removesuffix("/v1") + "/v0"
    pool, _ = pool_for(fresh_sim, RESPONSES, f'providers.sim.base_url="{elsewhere}"')
    with pytest.raises(ModelMisconfigured, match=r'no /v1/responses .*set api = "chat"'):
        await pool.for_role("planner").complete(MESSAGES, session="s")


@pytest.mark.both_apis
@pytest.mark.parametrize("param,key", [("reasoning.effort", "roles.planner.effort"),
                                       ("service_tier", "roles.planner.tier")])
async def test_an_effort_or_tier_the_model_refuses_names_the_key(fresh_sim, param, key):
    refused = Reply(error=FaultSpec(status=400, type="invalid_request_error", param=param,
                                    code="unsupported_value", message="Unsupported value."))
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[refused])})
    pool, _ = pool_for(fresh_sim)
    with pytest.raises(ModelMisconfigured, match=key):
        await pool.for_role("planner").complete(MESSAGES, session="s")
    assert len(fresh_sim.state.requests_for("sim-planner")) == 1


@pytest.mark.parametrize("wire_api,event", [("chat", "error"), ("responses", "response.failed"),
                                            ("responses", "error")])
@pytest.mark.parametrize("fault,kind", [
    (FaultSpec(status=500, code="server_error", message="The server had an error."), Transient),
    (FaultSpec(status=429, code="insufficient_quota",
               message="You exceeded your current quota."), QuotaExhausted),
    (FaultSpec(status=429, code="rate_limit_exceeded",
               message="Rate limit reached. Please try again in 20ms."), RateLimited),
    (FaultSpec(status=400, code="context_length_exceeded", message="Your input exceeds the "
               "context window of this model. Please adjust your input and try again."),
     ContextOverflow),
    (FaultSpec(status=400, code="invalid_prompt", message="Invalid prompt."), ModelRefused),
])
async def test_an_error_inside_the_stream_is_classified_like_an_http_error(fresh_sim, wire_api,
                                                                          event, fault, kind):
    broken = Reply(content="some partial output", cut_after=2, stream_error=fault,
                   stream_error_event=event)
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[broken])})
    pool, _ = pool_for(fresh_sim)
    with pytest.raises(kind) as err:
        await pool.client("planner", "planner-sim").complete(MESSAGES, session="s")
    assert "sim-planner" in str(err.value)
    if kind is RateLimited:
        assert err.value.retry_after == pytest.approx(0.02)
    assert len(fresh_sim.state.requests_for("sim-planner")) == 1
