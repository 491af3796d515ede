"""The role map: layering, --set, teams, and one clear line for every bad input."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from conftest import cli

from orchestrator.config.layers import load_roles, parse_set
from orchestrator.errors import ConfigError
from orchestrator.models.pool import ClientPool


def _write(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_packaged_default_is_complete():
    roles = load_roles()
    assert set(roles.roles) == {"planner", "explorer", "builder", "reviewer", "summarizer"}
    assert roles.chain("summarizer")[0] == roles.roles["summarizer"].model
    assert roles.roles["explorer"].parallel == 8


def test_precedence_default_repo_file_team_set(tmp_path):
    repo = tmp_path / "repo"
    repo.mkdir()
    _write(repo / "roles.toml", '[roles.explorer]\nparallel = 4\neffort = "medium"\n'
                                '[teams.web.roles.builder]\nmodel = "sol"\n')
    extra = _write(tmp_path / "extra.toml", "[roles.explorer]\nparallel = 12\n")
    roles = load_roles(repo=repo)
    assert (roles.roles["explorer"].parallel, roles.roles["explorer"].effort) == (4, "medium")
    roles = load_roles(repo=repo, files=[extra])
    assert roles.roles["explorer"].parallel == 12 and roles.roles["explorer"].effort == "medium"
    roles = load_roles(repo=repo, files=[extra], team="web", sets=["explorer.parallel=20"])
    assert roles.roles["explorer"].parallel == 20 and roles.roles["builder"].model == "sol"
    assert roles.team == "web"


def test_set_parses_toml_values_and_sections():
    assert parse_set("explorer.parallel=20") == {"roles": {"explorer": {"parallel": 20}}}
    assert parse_set('models.spark.id="x"') == {"models": {"spark": {"id": "x"}}}
    assert parse_set("builder.fallback=[\"sol\"]") == {"roles": {"builder": {"fallback": ["sol"]}}}
    with pytest.raises(ConfigError, match="ROLE.KEY=VALUE"):
        parse_set("parallel")


@pytest.mark.parametrize(
    ("body", "needle"),
    [
        ("[roles.explorer]\nparalel = 4\n", "unknown key roles.explorer.paralel (allowed: "),
        ('[roles.explorer]\nparallel = "many"\n', "roles.explorer.parallel: Input should be a valid integer"),
        ('[roles.builder]\nmodel = "gpt-imaginary"\n', "roles.builder.model: unknown model alias 'gpt-imaginary'"),
        ('[roles.planner]\nfallback = ["nope"]\n', "roles.planner.fallback: unknown model alias 'nope'"),
        ('[roles.planner]\ntier = "turbo"\n', "roles.planner.tier: Input should be 'standard'"),
        ("[models.sol]\ncontext_window = -1\n", "models.sol.context_window"),
        ("[roles.planner\n", "not valid TOML"),
    ],
)
def test_bad_role_map_is_one_line_naming_file_and_key(tmp_path, body, needle):
    bad = _write(tmp_path / "bad.toml", body)
    with pytest.raises(ConfigError) as info:
        load_roles(files=[bad])
    message = str(info.value)
    assert needle in message and str(bad) in message and "\n" not in message


def test_cli_bad_role_map_exits_2_with_one_line(tmp_path):
    bad = _write(tmp_path / "roles.toml", "[roles.explorer]\nparalel = 4\n")
    proc = cli("roles", "--roles", str(bad))
    assert proc.returncode == 2
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "roles.explorer.paralel" in lines[0] and str(bad) in lines[0]
    assert "Traceback" not in proc.stderr


def test_cli_roles_json_shows_resolved_map():
    proc = cli("roles", "--json", "--set", "explorer.parallel=20", "--set", 'reviewer.effort="light"')
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    assert data["roles"]["explorer"]["parallel"] == 20
    assert data["roles"]["reviewer"]["effort"] == "low"


def test_unknown_team_names_the_known_ones(tmp_path):
    with pytest.raises(ConfigError, match="no \\[teams.qa\\]"):
        load_roles(team="qa")


def test_the_packaged_map_speaks_the_responses_api_to_openai():
    """OpenAI serves its codex models only over /v1/responses; the default map says so."""
    roles = load_roles()
    pool = ClientPool(roles, {})
    for role in roles.roles:
        for step, alias in enumerate(roles.chain(role)):
            route = pool.route(role, alias, step)
            assert route.api == "responses", (role, alias)
            efforts = route.model.efforts
            assert efforts is None or route.effort in efforts, (role, alias, route.effort)


def test_api_is_set_per_provider_and_overridden_per_model():
    roles = load_roles(sets=['providers.openai.api="chat"', 'models.spark.api="responses"'])
    pool = ClientPool(roles, {})
    assert pool.route("planner", "sol").api == "chat"
    assert pool.route("explorer", "spark").api == "responses"
    with pytest.raises(ConfigError, match=r"models\.sol\.api: Input should be 'responses' or 'chat'"):
        load_roles(sets=['models.sol.api="rest"'])


def test_an_effort_the_model_does_not_take_is_a_config_error_naming_it():
    with pytest.raises(ConfigError) as info:
        load_roles(sets=['explorer.effort="low"'])
    message = str(info.value)
    assert "roles.explorer.effort" in message and "gpt-5.1-codex-mini" in message
    assert "medium, high" in message and "models.spark.efforts" in message
    assert "--set explorer.effort" in message and "\n" not in message
    with pytest.raises(ConfigError, match="model 'sol'"):  # a fallback is checked too
        load_roles(sets=['explorer.effort="minimal"', 'explorer.model="luna"',
                         'explorer.fallback=["sol"]'])


def test_cli_roles_shows_each_models_api():
    proc = cli("roles")
    assert proc.returncode == 0, proc.stderr
    assert "api" in proc.stdout and "responses" in proc.stdout
