"""Routing that survives: each error class against the simulator over real HTTP, counted there."""

from __future__ import annotations

import pytest
from conftest import scenario_with
from routing_kit import MESSAGES, PLAN, QUICK, call, planner_session, pool_for

from orchestrator.errors import BudgetExhausted, ContextOverflow, ModelUnavailable
from orchestrator.models.budget import Budget
from orchestrator.models.errors import ModelRefused
from orchestrator.models.fallback import FallbackClient, RetryPolicy, demote
from orchestrator.sim import FaultSpec, ModelBehavior, Reply

# every simulator test runs on both wire APIs; the pools it makes are closed after it
pytestmark = [pytest.mark.both_apis, pytest.mark.usefixtures("pools_closed")]

OK = Reply(content="fine")
QUOTA = Reply(error=FaultSpec(status=429, code="insufficient_quota", type="insufficient_quota",
                              message="You exceeded your current quota."))


def _limit(ms: int) -> Reply:
    return Reply(error=FaultSpec(status=429, code="rate_limit_exceeded", type="requests",
                                 message="Rate limit reached", headers={"retry-after-ms": str(ms)}))


def _models(sim, **behaviours: ModelBehavior) -> None:
    sim.set_scenario(scenario_with(**{"sim-backup": ModelBehavior(script=[Reply(content="backup")]),
                                      **behaviours}))


def _count(sim, model: str) -> int:
    return len(sim.state.requests_for(model))


async def _complete(pool, role="planner"):
    return await pool.for_role(role).complete(MESSAGES, session=f"{role}-1")


async def test_quota_exhaustion_is_one_request_then_the_fallback(fresh_sim):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(first=[QUOTA], script=[OK])})
    pool, events = pool_for(fresh_sim)
    done = await _complete(pool)
    assert done.content == "backup"
    assert _count(fresh_sim, "sim-planner") == 1  # no SDK retries of insufficient_quota
    assert done.record.fallback_step == 1 and done.record.served_model == "sim-backup"
    failed = [e.record for e in events if e.kind == "attempt_failed"]
    assert len(failed) == 1 and failed[0].error.startswith("insufficient_quota")
    assert failed[0].requested_model == "sim-planner" and failed[0].fallback_step == 0
    assert any("served by fallback backup-sim" in w for w in events.warnings())
    again = await _complete(pool)  # the ledger remembers: the primary is not asked again
    assert again.content == "backup" and _count(fresh_sim, "sim-planner") == 1
    assert "skipped" in events.kinds()


async def test_rate_limit_burst_waits_for_retry_after_then_succeeds(fresh_sim):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(first=[_limit(80), _limit(80)],
                                                       script=[OK])})
    pool, events = pool_for(fresh_sim)
    done = await _complete(pool)
    tries = fresh_sim.state.requests_for("sim-planner")
    assert all(b.started - a.finished >= 0.08 for a, b in zip(tries, tries[1:], strict=False))
    assert done.content == "fine" and done.record.fallback_step == 0
    assert _count(fresh_sim, "sim-planner") == 3 and _count(fresh_sim, "sim-backup") == 0
    assert events.kinds() == ["attempt_failed", "attempt_failed"]
    assert all(e.record.error.startswith("rate_limited") for e in events)


async def test_retry_after_beyond_the_call_budget_goes_down_the_chain(fresh_sim):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(first=[_limit(60_000)], script=[OK])})
    pool, _ = pool_for(fresh_sim, policy=RetryPolicy(attempts=3, base_s=0.01, budget_s=2.0))
    done = await _complete(pool)
    assert done.content == "backup" and _count(fresh_sim, "sim-planner") == 1
    # the chain went on at once: the backup was asked before the primary's 60 s wait was out
    (primary,), (backup,) = (fresh_sim.state.requests_for(m) for m in ("sim-planner", "sim-backup"))
    assert backup.started - primary.finished < 60


async def test_server_errors_retry_with_backoff_then_fall_back(fresh_sim):
    down = Reply(error=FaultSpec(status=500, type="server_error", message="boom"))
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[down])})
    pool, events = pool_for(fresh_sim)
    done = await _complete(pool)
    assert done.content == "backup" and done.record.fallback_step == 1
    assert _count(fresh_sim, "sim-planner") == QUICK.attempts
    assert events.kinds().count("attempt_failed") == QUICK.attempts


async def test_the_role_maps_run_settings_set_the_attempts_and_the_waits(fresh_sim):
    """No policy given: ``[run] model_attempts`` and the retry waits of the role map are used."""
    down = Reply(error=FaultSpec(status=500, type="server_error", message="boom"))
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[down])})
    pool, events = pool_for(fresh_sim, "run.model_attempts=2", "run.retry_backoff_s=0.01",
                            "run.retry_max_wait_s=0.02", policy=None)
    assert (pool.routing.policy.attempts, pool.routing.policy.base_s,
            pool.routing.policy.max_wait_s) == (2, 0.01, 0.02)
    done = await _complete(pool)
    assert done.content == "backup" and _count(fresh_sim, "sim-planner") == 2
    assert events.kinds().count("attempt_failed") == 2


async def test_two_500s_then_ok_stays_on_the_primary(fresh_sim):
    down = Reply(error=FaultSpec(status=503, type="server_error", message="busy"))
    _models(fresh_sim, **{"sim-planner": ModelBehavior(first=[down, down], script=[OK])})
    pool, events = pool_for(fresh_sim)
    done = await _complete(pool)
    assert done.content == "fine" and _count(fresh_sim, "sim-planner") == 3
    assert not events.warnings()


@pytest.mark.parametrize("cut", ["close", "end"])
async def test_cut_stream_is_retried(fresh_sim, cut):
    broken = Reply(content="a long answer that never ends", cut_after=2, cut=cut)
    _models(fresh_sim, **{"sim-planner": ModelBehavior(first=[broken], script=[OK])})
    pool, events = pool_for(fresh_sim)
    done = await _complete(pool)
    assert done.content == "fine" and _count(fresh_sim, "sim-planner") == 2
    [failed] = [e.record for e in events if e.kind == "attempt_failed"]
    assert failed.error.startswith("transient")


async def test_all_models_down_is_model_unavailable_naming_each(fresh_sim):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[QUOTA]),
                          "sim-backup": ModelBehavior(script=[QUOTA])})
    pool, _ = pool_for(fresh_sim)
    with pytest.raises(ModelUnavailable) as err:
        await _complete(pool)
    assert "sim-planner" in str(err.value) and "sim-backup" in str(err.value)


async def test_context_overflow_is_raised_unchanged_and_never_falls_back(fresh_sim):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(context_window=5, script=[OK])})
    pool, _ = pool_for(fresh_sim)
    with pytest.raises(ContextOverflow):
        await _complete(pool)
    assert _count(fresh_sim, "sim-planner") == 1 and _count(fresh_sim, "sim-backup") == 0


@pytest.mark.parametrize("status,hint", [(401, "ORCHESTRATE_SIM_KEY"), (403, "ORCHESTRATE_SIM_KEY"),
                                         (400, "BadRequestError")])
async def test_refusals_stop_with_one_message(fresh_sim, status, hint):
    refused = Reply(error=FaultSpec(status=status, type="invalid_request_error", message="no"))
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[refused])})
    pool, _ = pool_for(fresh_sim)
    with pytest.raises(ModelRefused) as err:
        await _complete(pool)
    message = str(err.value)
    assert "role planner" in message and "sim-planner" in message and "provider sim" in message
    assert hint in message
    assert _count(fresh_sim, "sim-planner") == 1 and _count(fresh_sim, "sim-backup") == 0


async def test_unknown_model_stops_instead_of_falling_back(fresh_sim):
    _models(fresh_sim)
    pool, _ = pool_for(fresh_sim, 'models.planner-sim.id="sim-typo"')
    with pytest.raises(ModelRefused, match=r"unknown model.*models\.planner-sim\.id"):
        await _complete(pool)
    assert _count(fresh_sim, "sim-backup") == 0


@pytest.mark.parametrize("served_model,served_tier,warned", [
    ("sim-planner-2025-11-13", None, []),
    ("sim-planner", "flex", ["requested service tier default but served flex"]),
    ("sim-mini", None, ["requested model sim-planner but sim-mini served"]),
])
async def test_served_model_or_tier_that_differs_is_a_warning(fresh_sim, served_model,
                                                               served_tier, warned):
    reply = Reply(content="ok", served_model=served_model, served_tier=served_tier)
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[reply])})
    pool, events = pool_for(fresh_sim)
    done = await _complete(pool)
    assert done.record.served_model == served_model
    assert len(events.warnings()) == len(warned)
    for w, text in zip(events.warnings(), warned, strict=True):
        assert text in w


async def test_run_budget_stops_before_the_next_call(fresh_sim):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[OK])})
    budget = Budget(max_tokens=10)
    pool, _ = pool_for(fresh_sim, budget=budget)
    await _complete(pool)
    assert budget.spent_tokens > 10 and budget.spent_usd > 0
    with pytest.raises(BudgetExhausted, match=r"--max-tokens 10 .*resume"):
        await _complete(pool)
    assert _count(fresh_sim, "sim-planner") == 1


async def test_demote_moves_a_session_to_the_fallback(fresh_sim):
    _models(fresh_sim, **{"sim-planner": ModelBehavior(script=[OK])})
    pool, events = pool_for(fresh_sim)
    client = pool.for_role("planner")
    assert demote(client, "submitted invalid results twice")
    assert client.route.alias == "backup-sim" and client.route.step == 1
    done = await client.complete(MESSAGES, session="planner-1")
    assert done.content == "backup" and not demote(client, "again")
    assert any("submitted invalid results twice" in w for w in events.warnings())


async def test_a_planner_whose_primary_fails_mid_session_finishes_on_the_fallback(
        fresh_sim, sample_repo):
    down = Reply(error=FaultSpec(status=500, type="server_error", message="down"))
    steps = [call("read", path="stats.py"), call("submit", **PLAN)]
    _models(fresh_sim, **{"sim-planner": ModelBehavior(first=[steps[0]], script=[down]),
                          "sim-backup": ModelBehavior(script=steps)})
    pool, _ = pool_for(fresh_sim)
    outcome, session, telemetry = await planner_session(pool, sample_repo)
    assert outcome.payload.goal == "g"
    assert [c.fallback_step for c in telemetry.calls] == [0, 1]
    assert [c.served_model for c in telemetry.calls] == ["sim-planner", "sim-backup"]


def test_a_fallback_client_is_a_model_client_with_the_serving_route(fresh_sim):
    pool, _ = pool_for(fresh_sim)
    chain = pool.for_role("planner")
    assert isinstance(chain, FallbackClient)
    assert [c.route.alias for c in chain.clients] == ["planner-sim", "backup-sim"]
    assert chain.route.alias == "planner-sim" and chain.route.step == 0


async def test_two_invalid_submissions_hand_the_session_to_the_fallback(fresh_sim, sample_repo):
    """Structured output that holds: validation errors go back twice, then the fallback model."""
    from conftest import run_env, scenario_with, sim_roles

    from orchestrator import api
    from orchestrator.faces.demo import DEMO_TASK
    from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec

    bad = Reply(tool_calls=[ToolCallSpec(name="submit", arguments={"goal": 42})])
    from orchestrator.faces.demo import demo_scenario

    good_planner = demo_scenario().models["sim-planner"]  # the fallback model plans properly
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(script=[bad]),
                                            "sim-reviewer": good_planner}))
    roles = sim_roles(fresh_sim, 'planner.fallback=["reviewer-sim"]')
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=roles, env=run_env(),
                            approve_plan=True)
    planner_calls = fresh_sim.state.requests_for("sim-planner")
    assert len(planner_calls) == 2
    errors = [m["content"] for m in planner_calls[1].messages if m["role"] == "tool"]
    assert "invalid submission" in errors[-1] and "goal" in errors[-1]
    assert result.per_role["planner"].models == ["sim-planner", "sim-reviewer"]
    assert any("switching to reviewer-sim" in w for w in result.warnings)
