"""`orchestrate sim` serves the simulated models for people, on loopback only."""

from __future__ import annotations

import subprocess
import sys

from conftest import run_env
from openai import OpenAI


def test_sim_command_serves_the_demo_models():
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "sim", "--port", "0"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            env=run_env())
    try:
        line = proc.stdout.readline()
        assert line.startswith("READY http://127.0.0.1:"), line + proc.stderr.read()
        client = OpenAI(base_url=line.split()[1], api_key="x", max_retries=0)
        assert "sim-planner" in {m.id for m in client.models.list()}
        reply = client.chat.completions.create(
            model="sim-reviewer", messages=[{"role": "user", "content": "review"}],
            service_tier="flex")
        assert reply.choices[0].message.tool_calls[0].function.name == "submit"
        assert reply.service_tier == "flex"
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def test_sim_refuses_a_public_address():
    proc = subprocess.run([sys.executable, "-m", "orchestrator", "sim", "--host", "0.0.0.0"],
                          capture_output=True, text=True, env=run_env(), timeout=30)
    assert proc.returncode == 2 and "loopback" in proc.stderr.lower()
