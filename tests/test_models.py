"""One contract for every ``ModelClient`` (the real adapter, the fallback chain, the JSON-tools
wrapper) against the simulator, and how each HTTP fault is classified: one request each. Every
test runs over HTTP and with the simulator in-process (``sim://``, what session tests use):
both must keep the contract."""

from __future__ import annotations

import pytest
from conftest import scenario_with
from routing_kit import MESSAGES, pool_for

from orchestrator.errors import ContextOverflow, ModelError
from orchestrator.models.base import Completion, ModelClient
from orchestrator.models.errors import ModelRefused, QuotaExhausted, RateLimited, Transient
from orchestrator.models.fallback import FallbackClient
from orchestrator.models.routing import same_model, same_tier
from orchestrator.models.toolmode import JsonToolsClient
from orchestrator.sim import FaultSpec, ModelBehavior, Reply

# every simulator test runs on both wire APIs, over HTTP and in-process; the pools it makes
# are closed after it
pytestmark = [pytest.mark.both_apis, pytest.mark.both_reaches,
              pytest.mark.usefixtures("pools_closed")]

FACTORIES = {
    "openai": lambda pool: pool.client("planner", "planner-sim"),
    "fallback": lambda pool: pool.for_role("planner"),
    "json-tools": lambda pool: JsonToolsClient(pool.client("planner", "planner-sim")),
    "nested": lambda pool: FallbackClient(pool.for_role("planner"), pool.client("planner", "backup-sim")),
}


@pytest.fixture(params=sorted(FACTORIES))
def client_of(request):
    return FACTORIES[request.param]


async def test_contract_a_reply_with_its_record(fresh_sim, client_of):
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(
        script=[Reply(content="hello there")])}))
    pool, _ = pool_for(fresh_sim)
    client: ModelClient = client_of(pool)
    assert client.route.role == "planner" and client.route.model.id == "sim-planner"
    pieces: list[int] = []
    done = await client.complete(MESSAGES, session="s-1", progress=pieces.append)
    assert isinstance(done, Completion) and done.content == "hello there"
    assert done.finish_reason == "stop" and not done.tool_calls
    rec = done.record
    assert (rec.role, rec.session, rec.requested_model, rec.served_model) == (
        "planner", "s-1", "sim-planner", "sim-planner")
    assert rec.requested_tier == "default" and rec.effort == "high" and rec.fallback_step == 0
    assert rec.prompt_tokens > 0 and rec.output_tokens > 0 and rec.cost_usd > 0
    assert pieces and len(fresh_sim.state.requests_for("sim-planner")) == 1


async def test_contract_a_refusal_is_a_model_error_after_one_request(fresh_sim, client_of):
    refused = Reply(error=FaultSpec(status=401, type="invalid_request_error", message="bad key"))
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(script=[refused])}))
    pool, _ = pool_for(fresh_sim)
    with pytest.raises(ModelError, match="role planner"):
        await client_of(pool).complete(MESSAGES, session="s-1")
    assert len(fresh_sim.state.requests_for("sim-planner")) == 1


@pytest.mark.parametrize("fault,kind", [
    (FaultSpec(status=429, code="insufficient_quota", type="insufficient_quota"), QuotaExhausted),
    (FaultSpec(status=429, code="rate_limit_exceeded", headers={"retry-after": "3"}), RateLimited),
    (FaultSpec(status=500, type="server_error"), Transient),
    (FaultSpec(status=502, type="server_error"), Transient),
    (FaultSpec(status=400, code="context_length_exceeded", type="invalid_request_error"),
     ContextOverflow),
    (FaultSpec(status=400, code=None, type="exceed_context_size_error",
               message="request (3030 tokens) exceeds the available context size (1024 tokens)"),
     ContextOverflow),
    (FaultSpec(status=403, type="permission_error"), ModelRefused),
    (FaultSpec(status=404, code="model_not_found"), ModelRefused),
    (FaultSpec(status=422, type="invalid_request_error"), ModelRefused),
])
async def test_each_fault_is_classified_after_exactly_one_request(fresh_sim, fault, kind):
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(
        script=[Reply(error=fault)])}))
    pool, _ = pool_for(fresh_sim)
    with pytest.raises(kind) as err:
        await pool.client("planner", "planner-sim").complete(MESSAGES, session="s-1")
    assert len(fresh_sim.state.requests_for("sim-planner")) == 1
    if kind is RateLimited:
        assert err.value.retry_after == 3
    if kind is QuotaExhausted:
        assert err.value.reset_at is not None


async def test_the_sims_own_quota_answers_in_openais_shape(fresh_sim):
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(
        quota_tokens=1, quota_headers={"x-ratelimit-reset-tokens": "1h0m0s"},
        script=[Reply(content="once")])}))
    pool, _ = pool_for(fresh_sim)
    client = pool.client("planner", "planner-sim")
    assert (await client.complete(MESSAGES, session="s")).content == "once"
    with pytest.raises(QuotaExhausted, match="quota exhausted until") as err:
        await client.complete(MESSAGES, session="s")
    assert err.value.reset_at is not None


def test_dated_ids_and_missing_echoes_are_not_downgrades():
    assert same_model("gpt-5.1", "gpt-5.1-2025-11-13") and same_model("gpt-5.1", None)
    assert not same_model("gpt-5.1", "gpt-5.1-mini") and not same_model("gpt-5.1", "gpt-4o")
    assert same_tier("priority", None) and same_tier(None, "default")
    assert same_tier("auto", "flex") and not same_tier("priority", "default")


async def test_a_sim_url_reaches_only_a_simulator_served_in_this_process(sim):
    """``sim://`` is the simulator in this process: the one served answers; one nobody serves is a one-line configuration error saying what to use."""
    from orchestrator.config.schema import Provider
    from orchestrator.errors import ConfigError
    from orchestrator.models.client import provider_sdk

    served = provider_sdk(Provider(base_url=sim.local_url, api_key_env="K"), "k")
    try:
        assert [m.id for m in (await served.models.list()).data] == sim.scenario.model_ids()
    finally:
        await served.close()
    with pytest.raises(ConfigError, match="use the http:// URL") as err:
        provider_sdk(Provider(base_url="sim://nobody/v1", api_key_env="K"), "k")
    assert "\n" not in str(err.value)
