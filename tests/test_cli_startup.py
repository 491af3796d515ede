"""The quick commands start at once: ``--help``, ``--version`` and ``roles`` import no engine
(LangGraph, the OpenAI SDK, GitPython, tiktoken). Their times are measured in
``bench/cli_startup.py``; here only what they import is checked."""

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
