"""JSON that small models write, repaired before it costs a turn: tool calls in content and
native tool-call arguments with trailing commas, single quotes, Python literals, raw newlines,
prose around them or cut off by the output limit."""

from __future__ import annotations

import json

import pytest
from routing_kit import pool_for

from orchestrator.config.definitions import load_agents
from orchestrator.models import repair
from orchestrator.models.toolmode import parse_tool_calls
from orchestrator.record.telemetry import Telemetry
from orchestrator.session.loop import Session
from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec
from orchestrator.tools.base import Toolbox
from orchestrator.tools.explorer import explorer_tools

pytestmark = pytest.mark.usefixtures("pools_closed")  # pool_for's pools closed after each test

SHAPES = {
    "trailing commas": '{"tool": "search", "arguments": {"pattern": "median",},}',
    "single quotes": "{'tool': 'search', 'arguments': {'pattern': 'median'}}",
    "python literals": '{"tool": "search", "arguments": {"pattern": "median", '
                       '"ignore_case": True, "glob": None}}',
    "raw newline": '{"tool": "search", "arguments": {"pattern": "a\nmedian"}}',
    "cut off": '{"tool": "search", "arguments": {"pattern": "median"',
    "prose around": 'Let me search.\n{"tool": "search", "arguments": {"pattern": "median"}}\nOK',
}


@pytest.mark.parametrize("shape", list(SHAPES))
def test_each_spoilt_shape_is_read_as_the_call_meant(shape):
    text = SHAPES[shape]
    if shape != "prose around":
        with pytest.raises(json.JSONDecodeError):
            json.loads(text)  # not valid as written: the repair is what reads it
    [call] = parse_tool_calls(text)
    assert call.name == "search"
    args = json.loads(call.arguments)
    assert "median" in args["pattern"]
    if shape == "python literals":
        assert args["ignore_case"] is True and args["glob"] is None


@pytest.mark.parametrize("text", ["", "   ", "I think the answer is in the parser module.",
                                  "42", '"just a string"', "[1, 2",
                                  '{"tool": "read", "arguments": {"path": ',  # a key, no value
                                  '{"tool": "read", "arguments": {"path": "src/a.',  # cut string
                                  '{"tool": "read", "arguments": {"path": "a.py", "start_line"'])
def test_what_is_no_object_or_was_cut_inside_a_value_is_left_for_the_session(text):
    """A value the model never finished is not invented: the session nudges it instead."""
    assert parse_tool_calls(text) == []
    assert repair.arguments(text) == text


def test_valid_arguments_pass_unchanged_and_spoilt_ones_become_valid_json():
    valid = '{"path": "a.py",  "start_line": 3}'
    assert repair.arguments(valid) is valid
    fixed = repair.arguments("{'path': 'a.py', 'start_line': 3,}")
    assert json.loads(fixed) == {"path": "a.py", "start_line": 3}


@pytest.mark.both_apis
@pytest.mark.parametrize("shape", ["trailing commas", "single quotes", "python literals",
                                   "cut off"])
async def test_a_native_tool_call_with_spoilt_arguments_runs_first_time(fresh_sim, sample_repo,
                                                                        shape):
    """The server sends the arguments verbatim; the session runs the tool at once (no error
    turn) and the next request carries valid JSON back to the model."""
    args = {"trailing commas": '{"pattern": "median",}', "single quotes": "{'pattern': 'median'}",
            "python literals": '{"pattern": "median", "ignore_case": True, "glob": None}',
            "cut off": '{"pattern": "median", "ignore_case": false'}[shape]
    findings = {"answer": "in stats.py", "claims": []}
    fresh_sim.set_scenario(fresh_sim.scenario.model_copy(update={"models": {
        **fresh_sim.scenario.models,
        "sim-explorer": ModelBehavior(script=[
            Reply(tool_calls=[ToolCallSpec(name="search", arguments=args)]),
            Reply(tool_calls=[ToolCallSpec(name="submit", arguments=findings)]),
        ]),
    }}))
    pool, _ = pool_for(fresh_sim)
    agent = load_agents()["explorer"]
    session = Session(session_id="explorer-1", agent=agent, client=pool.for_role("explorer"),
                      toolbox=Toolbox.of(explorer_tools(sample_repo)),
                      telemetry=Telemetry("t"), max_turns=4)
    outcome = await session.run("Where is median?")
    assert outcome.turns == 2 and outcome.tool_calls == 1
    result = next(m for m in session.messages if m.get("role") == "tool")["content"]
    assert "stats.py" in result and not result.startswith("error")
    second = fresh_sim.state.requests_for("sim-explorer")[1].body
    assert "median" in json.dumps(second)


def test_a_value_is_what_the_text_holds_else_the_text_itself():
    assert repair.value('{"a": 1,}') == {"a": 1}  # repaired
    assert repair.value("not json") == "not json"
    assert repair.value({"a": 1}) == {"a": 1}  # already a value
