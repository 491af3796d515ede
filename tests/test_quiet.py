"""Quiet by default: the packaged role map's fallbacks, tiers and efforts belong to its own
models. A map that names its own provider and models (a local server, no tiers) runs with none
of them: no warning about a fallback it never named, no tier its provider never offered."""

from __future__ import annotations

import pytest
from conftest import run_env, scenario_with

from orchestrator import api
from orchestrator.config.layers import resolve
from orchestrator.faces.demo import DEMO_TASK

LOCAL = """\
[providers.local]
base_url = "{base_url}"
api_key_env = "ORCHESTRATE_SIM_KEY"

[models.planner-local]
provider = "local"
id = "sim-planner"
context_window = 32000
max_output = 4000

[models.explorer-local]
provider = "local"
id = "sim-explorer"
context_window = 16000
max_output = 2000

[models.builder-local]
provider = "local"
id = "sim-builder"
context_window = 32000
max_output = 4000

[models.reviewer-local]
provider = "local"
id = "sim-reviewer"
context_window = 32000
max_output = 4000

[models.summarizer-local]
provider = "local"
id = "sim-summarizer"
context_window = 16000
max_output = 2000

[roles.planner]
model = "planner-local"

[roles.explorer]
model = "explorer-local"

[roles.builder]
model = "builder-local"

[roles.reviewer]
model = "reviewer-local"

[roles.summarizer]
model = "summarizer-local"

[run]
explore_when_pinned = true
"""


def _local_map(tmp_path, base_url: str = "http://127.0.0.1:9/v1"):
    path = tmp_path / "local-roles.toml"
    path.write_text(LOCAL.format(base_url=base_url), encoding="utf-8")
    return path


def test_a_map_with_its_own_models_inherits_no_packaged_fallback_tier_or_effort(tmp_path):
    found = resolve(files=[_local_map(tmp_path)])
    for name, spec in found.roles.roles.items():
        if name in ("planner", "explorer", "builder", "reviewer", "summarizer"):
            assert spec.fallback == () and spec.tier == "standard", (name, spec)
            assert found.source(("roles", name, "fallback")) != "packaged roles.toml"
            assert found.source(("roles", name, "tier")) != "packaged roles.toml"
    # the packaged models keep their defaults: a map that only moves the builder's tier
    packaged = resolve(sets=["roles.builder.tier=priority"]).roles.roles
    assert packaged["explorer"].tier == "ultrafast" and packaged["explorer"].fallback == ("luna",)
    assert packaged["builder"].fallback == ("sol",)


def test_what_the_map_itself_sets_stays(tmp_path):
    path = _local_map(tmp_path)
    path.write_text(path.read_text() + '\n[providers.local.tiers]\nstandard = "default"\n'
                    'priority = "priority"\n', encoding="utf-8")
    found = resolve(files=[path], sets=['roles.builder.fallback=["planner-local"]',
                                        "roles.builder.effort=high"]).roles.roles
    assert found["builder"].fallback == ("planner-local",) and found["builder"].effort == "high"
    # a packaged model named again by the map keeps the packaged role defaults for it
    again = resolve(files=[path], sets=['roles.explorer.model="spark"']).roles.roles
    assert again["explorer"].tier == "ultrafast" and again["explorer"].fallback == ("luna",)


@pytest.mark.both_apis
async def test_a_self_contained_local_map_runs_with_no_warning(fresh_sim, sample_repo, tmp_path):
    fresh_sim.set_scenario(scenario_with())
    path = _local_map(tmp_path, fresh_sim.base_url)
    api_set = f'providers.local.api="{fresh_sim.wire_api}"'
    events = []
    result = await api.arun(DEMO_TASK, repo=sample_repo, role_files=[path], sets=[api_set],
                            env=run_env(), listeners=[events.append])
    assert result.status == "succeeded", result.reason
    assert {"explorer_finished", "call_finished"} <= {e.kind for e in events}
    warnings = [e for e in events if e.kind == "warning"]
    assert warnings == [] and result.warnings == []
    served = {r.body.get("service_tier") for r in fresh_sim.state.requests}
    assert served == {None}  # no tier sent to a provider that offers none
