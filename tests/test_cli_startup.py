"""The quick commands start at once: ``--help``, ``--version`` and ``roles`` import no engine
(LangGraph, the OpenAI SDK, GitPython, tiktoken), nor do ``runs``, ``show``, ``trust`` or a run
refused for its input. Their times are measured in ``bench/cli_startup.py``; here only what
they import is checked."""

from __future__ import annotations

import subprocess
import sys
from importlib.metadata import version

import pytest
from conftest import run_env

ENGINE = ("langgraph", "langchain_core", "openai", "git", "tiktoken", "orchestrator.api")
PROBE = f"""
import sys
from orchestrator.faces.cli import main
sys.argv = ["orchestrate", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print("ENGINE:" + ",".join(m for m in {ENGINE!r} if m in sys.modules))
"""


def _engine_after(tmp_path, *args: str) -> tuple[str, str]:
    proc = subprocess.run([sys.executable, "-c", PROBE, *args], cwd=tmp_path, env=run_env(),
                          capture_output=True, text=True, timeout=60)
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("ENGINE:"), proc.stdout + proc.stderr
    return last.removeprefix("ENGINE:"), proc.stdout


@pytest.mark.parametrize("args", [["--help"], ["--version"], ["roles"], ["roles", "--json"],
                                  ["run", "--help"]])
def test_quick_commands_import_no_engine(tmp_path, args):
    loaded, out = _engine_after(tmp_path, *args)
    assert loaded == "", f"{args} imported {loaded}"


def test_a_command_that_needs_the_engine_still_gets_it(tmp_path):
    loaded, _ = _engine_after(tmp_path, "runs")  # not a repository: fails after importing it
    assert "orchestrator.api" in loaded.split(",")


def test_version_is_the_installed_one(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "--version"], cwd=tmp_path,
                          env=run_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == f"orchestrate {version('orchestrate')}"


def test_the_library_names_load_on_first_use():
    code = ("import sys, orchestrator; assert 'orchestrator.api' not in sys.modules; "
            "orchestrator.run; assert 'orchestrator.api' in sys.modules; "
            "from orchestrator import RunResult, load_roles, ConfigError; print('ok')")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          timeout=60)
    assert proc.stdout.strip() == "ok", proc.stderr


# What only a run's model calls and checkpoints need: a command that answers from files, or a
# run refused for its input, must not load it (each costs a CLI process seconds of imports).
HEAVY = ("langgraph", "langchain_core", "langsmith", "openai", "aiohttp", "psycopg",
         "orchestrator.engine.openrun", "orchestrator.engine.drive")
LIBS_PROBE = PROBE.replace(repr(ENGINE), repr(HEAVY))


@pytest.mark.parametrize(("args", "says"), [
    (["run", "fix it"], "OPENAI_API_KEY"),  # the packaged role map, no key
    (["explore", "where?"], "OPENAI_API_KEY"),
    (["run", "fix it", "--set", "builder.model=nope"], "unknown model alias 'nope'"),
    (["run", "fix it", "--database-url", "mysql://db"], "not a PostgreSQL URL"),
    (["run", "fix it", "--roles", "missing.toml"], "missing.toml"),
    (["run", "fix it", "--untrusted-roles"], "roles.toml"),  # the repository's own, untrusted
    (["resume", "20990101-000000-abcdef"], "unknown run id"),
    (["show", "20990101-000000-abcdef"], "unknown run id"),
    (["jobs", "--database-url", "mysql://db"], "not a PostgreSQL URL"),
    (["runs"], ""),
    (["trust", "--list"], ""),
    (["quota"], ""),
])
def test_refused_input_and_file_commands_load_no_engine(sample_repo, args, says):
    """Bad input is refused (one line, exit 2) and ``runs``/``show``/``trust`` answer before
    LangGraph, the OpenAI SDK or the database driver are imported."""
    if "--untrusted-roles" in args:
        args = [a for a in args if a != "--untrusted-roles"]
        (sample_repo / "roles.toml").write_text(
            '[providers.openai]\nbase_url = "http://127.0.0.1:9/v1"\n', encoding="utf-8")
    where = [] if args[0] == "jobs" else ["--repo", str(sample_repo)]  # the fleet's: no repo
    proc = subprocess.run([sys.executable, "-c", LIBS_PROBE, *args, *where],
                          cwd=sample_repo, env=run_env(), capture_output=True, text=True,
                          timeout=60)
    last = proc.stdout.strip().splitlines()[-1]
    assert last.startswith("ENGINE:"), proc.stdout + proc.stderr
    errors = [line for line in proc.stderr.splitlines() if line.startswith("error")]
    if says:
        assert len(errors) == 1 and says in errors[0], proc.stderr
    else:
        assert errors == [], proc.stderr
    assert last.removeprefix("ENGINE:") == "", f"{args} imported {last}"


def test_a_run_that_opens_loads_the_engine(sample_repo):
    """The other side: once the checks pass, the run's engine is imported (here the model's
    endpoint refuses the connection, after LangGraph and the SDK are loaded)."""
    env = run_env(OPENAI_API_KEY="sk-test")
    nothing_there = "providers.openai.base_url=http://127.0.0.1:9/v1"
    no_waits = "run.retry_backoff_s=0"  # refused at once, three times: what loads is the point
    proc = subprocess.run([sys.executable, "-c", LIBS_PROBE, "run", "fix it", "--repo",
                           str(sample_repo), "--set", nothing_there, "--set", no_waits],
                          cwd=sample_repo, env=env, capture_output=True, text=True, timeout=120)
    last = proc.stdout.strip().splitlines()[-1]
    loaded = last.removeprefix("ENGINE:").split(",")
    assert {"langgraph", "openai", "orchestrator.engine.openrun"} <= set(loaded), proc.stderr


# A run imports LangGraph and the OpenAI SDK off the caller's event loop: 1-3 s of imports (more
# on a loaded box) on the loop stalled every other task on it - a fleet worker's heartbeat among
# them, and the worker's job was taken over as stalled before its run had started.
LOOP_PROBE = """
import sys, threading
first = {}
def hook(event, args):
    if event == "import" and args[0] in ("langgraph", "openai") and args[0] not in first:
        first[args[0]] = threading.current_thread().name
sys.addaudithook(hook)
from orchestrator.faces.cli import main
sys.argv = ["orchestrate", *sys.argv[1:]]
try:
    main()
except SystemExit as exit:
    print("EXIT:", exit.code)
print("FIRST:", first)
"""


def test_a_run_imports_the_engine_off_the_callers_loop(sim, sample_repo):
    from conftest import scenario_with

    from orchestrator.faces.demo import DEMO_TASK, scenario_path

    sim.set_scenario(scenario_with())
    proc = subprocess.run(
        [sys.executable, "-c", LOOP_PROBE, "run", DEMO_TASK, "--repo", str(sample_repo),
         "--roles", str(scenario_path("demo-roles.toml")),
         "--set", f'providers.sim.base_url="{sim.base_url}"'],
        env=run_env(), capture_output=True, text=True, timeout=120)
    assert "EXIT: 0" in proc.stdout, proc.stdout + proc.stderr
    first = proc.stdout.split("FIRST:", 1)[1].strip()
    assert "'langgraph'" in first and "'openai'" in first, first
    assert "MainThread" not in first, f"imported on the loop's thread: {first}"
