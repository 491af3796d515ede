"""``bench --cold`` (the default, one run at a time): before each run, every local model server
a role map uses gets one unrelated one-token request, so its prompt cache holds nothing of the
run before (in live r8 the second of two maps asking the same first prompt read it from the
cache in 0.1 s where the first took 4-8 s). Judged by what the simulator received over HTTP."""

from __future__ import annotations

import asyncio

import pytest
from conftest import sim_roles

from orchestrator.benchmark.reach import evict_prompt_caches
from orchestrator.benchmark.runner import arun_bench
from orchestrator.benchmark.suite import load_suite
from orchestrator.errors import UsageError


def test_each_local_model_gets_one_unrelated_one_token_request(fresh_sim):
    roles = sim_roles(fresh_sim, http=True)
    used = {roles.models[s.model].id for s in roles.roles.values()}
    assert asyncio.run(evict_prompt_caches(roles, {"SIM_API_KEY": "x"})) == []
    asyncio.run(evict_prompt_caches(roles, {}))
    for model in used:
        sent = fresh_sim.state.requests_for(model)
        assert len(sent) == 2, model  # once per eviction, whatever number of roles use it
        assert all(r.body["max_tokens"] == 1 for r in sent)
        systems = [r.body["messages"][0]["content"] for r in sent]
        assert systems[0] != systems[1] and all("cache eviction" in s for s in systems)
    # nothing of a task or a prompt goes out: only the eviction's own two messages
    assert all(len(r.body["messages"]) == 2 for m in used for r in fresh_sim.state.requests_for(m))


def test_public_endpoints_are_never_called_and_a_down_server_is_reported():
    from orchestrator.config.layers import load_roles
    from orchestrator.faces.demo import scenario_path

    text = scenario_path("demo-roles.toml").read_text(encoding="utf-8")
    public = load_roles(base_text=text, sets=['providers.sim.base_url="https://api.invalid/v1"'])
    assert asyncio.run(evict_prompt_caches(public, {})) == []  # not called: no error either
    down = load_roles(base_text=text, sets=['providers.sim.base_url="http://127.0.0.1:9/v1"'])
    left = asyncio.run(evict_prompt_caches(down, {}))
    assert left and all("127.0.0.1:9" in f for f in left)


def test_cold_runs_go_one_at_a_time(fresh_sim):
    roles = sim_roles(fresh_sim, http=True)
    with pytest.raises(UsageError, match="--cold needs --jobs 1"):
        asyncio.run(arun_bench(load_suite("builtin"), [("a", roles)], jobs=2, cold=True))
