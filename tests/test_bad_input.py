"""Bad input everywhere is one line and exit 2: database URLs (unreachable, wrong password,
wrong scheme, malformed), and every command a message tells the user to run exists."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest
from conftest import cli, run_env, sim_roles

from orchestrator import api
from orchestrator.errors import DatabaseUnavailable, UsageError
from orchestrator.faces.cli import app
from orchestrator.record.registry import PostgresRegistry
from orchestrator.record.store import open_checkpointer

pytest_plugins = ["pg"]
ROOT = Path(__file__).resolve().parent.parent


def _closed_port() -> int:
    from pg import free_port

    return free_port()  # bound and released: nothing listens there


def _one_error_line(proc) -> str:
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    return lines[0]


@pytest.fixture
def closed_url() -> str:
    return f"postgresql://orchestrate:hunter2-secret@127.0.0.1:{_closed_port()}/db"


def test_unreachable_postgres_is_one_line_for_every_command(closed_url, sample_repo, sim):
    pytest.importorskip("psycopg")
    roles = ["--roles", str(ROOT / "orchestrator/sim/scenarios/demo-roles.toml"),
             "--set", f'providers.sim.base_url="{sim.base_url}"']
    env = run_env(ORCHESTRATE_DATABASE_URL=closed_url)
    for args in (["run", "fix it", "--repo", str(sample_repo), *roles],
                 ["quota", "--repo", str(sample_repo), *roles], ["jobs"],
                 ["submit", "fix it", "--repo", str(sample_repo)]):
        line = _one_error_line(cli(*args, env=env))
        assert "cannot connect to the database" in line and "Connection refused" in line, args
        assert "hunter2-secret" not in line and "orchestrate:***@127.0.0.1" in line
    assert not sim.state.requests_for("sim-planner")


async def test_unreachable_postgres_in_the_library_is_a_config_error(closed_url, tmp_path,
                                                                     sample_repo, fresh_sim):
    pytest.importorskip("psycopg")
    with pytest.raises(DatabaseUnavailable, match="cannot connect to the database") as info:
        async with open_checkpointer(tmp_path, closed_url):
            pass
    assert info.value.exit_code == 2 and "hunter2" not in str(info.value)
    with pytest.raises(DatabaseUnavailable):
        PostgresRegistry(closed_url)
    with pytest.raises(DatabaseUnavailable):
        await api.arun("fix it", repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env(),
                       database_url=closed_url)
    assert not list(sample_repo.glob("workspaces/*"))


def test_wrong_password_is_one_line_without_the_password(pg_password_user, sample_repo):
    user, password, port = pg_password_user
    url = f"postgresql://{user}:wrong-{password}@127.0.0.1:{port}/postgres"
    line = _one_error_line(cli("quota", "--repo", str(sample_repo), "--database-url", url))
    assert "password authentication failed" in line and password not in line
    line = _one_error_line(cli("jobs", "--database-url", url))
    assert "password authentication failed" in line
    import psycopg

    good = f"postgresql://{user}:{password}@127.0.0.1:{port}/postgres"
    psycopg.connect(good).close()  # the right password works: the test checks the refusal
    with pytest.raises(DatabaseUnavailable, match="permission denied for schema public"):
        PostgresRegistry(good)  # and a role without rights is one line too


def test_malformed_url_is_one_line_without_the_password(sample_repo):
    url = "postgresql://u:s3cret-pw@[::1/db"
    line = _one_error_line(cli("run", "fix it", "--repo", str(sample_repo), "--database-url", url,
                               env=run_env(OPENAI_API_KEY="sk-x")))
    assert "cannot connect to the database" in line and "s3cret-pw" not in line


@pytest.mark.parametrize("url", ["mysql://u:s3cret-pw@127.0.0.1/db", "sqlite:///tmp/x.db"])
async def test_wrong_scheme_is_a_usage_error(url, sample_repo, fresh_sim):
    with pytest.raises(UsageError, match="not a PostgreSQL URL") as info:
        await api.arun("fix it", repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env(),
                       database_url=url)
    assert info.value.exit_code == 2 and "s3cret-pw" not in str(info.value)
    with pytest.raises(UsageError, match="not a PostgreSQL URL"):
        PostgresRegistry(url)


def test_every_command_a_message_names_exists():
    """`orchestrate X` in any message or docstring of the package names a real command."""
    commands = {c.name or c.callback.__name__ for c in app.registered_commands}  # type: ignore[union-attr]
    named: dict[str, set[str]] = {}
    for path in (ROOT / "orchestrator").rglob("*.py"):
        for word in re.findall(r"`orchestrate ([a-z][a-z-]*)", path.read_text(encoding="utf-8")):
            named.setdefault(word, set()).add(path.name)
    assert named, "the scan found no command names"
    missing = {w: sorted(files) for w, files in named.items() if w not in commands}
    assert not missing, f"messages name commands that do not exist: {missing}"


def test_unknown_run_id_points_at_a_real_command(sample_repo):
    line = _one_error_line(cli("show", "20990101-000000-abcdef", "--repo", str(sample_repo)))
    assert "unknown run id" in line and "`orchestrate runs`" in line


async def test_context_ledger_bench_reproduces_its_figures():
    """bench/context_ledger.py measures something on a fresh checkout (a short session here)."""
    spec = importlib.util.spec_from_file_location("bench_context_ledger",
                                                  ROOT / "bench" / "context_ledger.py")
    assert spec is not None and spec.loader is not None
    bench = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = bench
    spec.loader.exec_module(bench)
    bench.TURNS = 12
    errors = await bench.estimate_errors("chars4")
    assert len(errors) >= 10
    assert sorted(errors)[len(errors) // 2] <= 0.02 and max(errors) <= 0.1
