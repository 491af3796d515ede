"""Tools through JSON content for models without native tool calls, and the tool errors a
confused model gets back: pure parsing first, then whole planner sessions against the sim."""

from __future__ import annotations

import json

import pytest
from conftest import scenario_with
from routing_kit import PLAN, call, planner_session, pool_for

from orchestrator.models.toolmode import (
    JsonToolsClient,
    parse_tool_call,
    response_format_for,
    rewrite_history,
    tool_call_schema,
)
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply

TOOLS = [
    {"type": "function", "function": {"name": "read", "description": "Read a file.",
     "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                    "required": ["path"]}}},
    {"type": "function", "function": {"name": "submit", "description": "Submit.",
     "parameters": {"type": "object", "properties": {"goal": {"type": "string"}}}}},
]


def test_the_schema_is_an_any_of_with_each_tools_own_arguments():
    schema = tool_call_schema(TOOLS)
    [read, submit] = schema["anyOf"]
    assert read["properties"]["tool"] == {"const": "read"}
    assert read["properties"]["arguments"]["required"] == ["path"]
    assert submit["required"] == ["tool", "arguments"] and not submit["additionalProperties"]
    assert response_format_for(TOOLS, "json_schema")["json_schema"]["schema"] == schema
    assert response_format_for(TOOLS, "json_object") == {"type": "json_object"}
    assert response_format_for(TOOLS, "prompt") is None


@pytest.mark.parametrize("content", [
    '{"tool": "read", "arguments": {"path": "a.py"}}',
    '```json\n{"name": "read", "arguments": {"path": "a.py"}}\n```',
    'Sure! {"name": "read", "parameters": {"path": "a.py"}} hope that helps',
    '{"name": "read", "arguments": "{\\"path\\": \\"a.py\\"}"}',
])
def test_tool_calls_are_read_from_json_content_in_the_shapes_models_write(content):
    found = parse_tool_call(content)
    assert found is not None and found.name == "read"
    assert json.loads(found.arguments) == {"path": "a.py"}


@pytest.mark.parametrize("content", [None, "", "I will read the file now.", '{"path": "a"}',
                                     '{"tool": "read", "arguments": '])
def test_unparseable_content_is_not_a_tool_call(content):
    assert parse_tool_call(content) is None


def test_history_is_rewritten_without_tool_messages():
    messages = [
        {"role": "system", "content": "sys"}, {"role": "user", "content": "task"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "c1", "type": "function",
             "function": {"name": "read", "arguments": '{"path": "a.py"}'}}]},
        {"role": "tool", "tool_call_id": "c1", "content": "1: x = 1"},
    ]
    out = rewrite_history(messages, "USE JSON")
    assert out[0]["content"] == "sys\n\nUSE JSON"
    assert json.loads(out[2]["content"]) == {"tool": "read", "arguments": {"path": "a.py"}}
    assert out[3] == {"role": "user", "content": "Result of read:\n1: x = 1"}
    assert all("tool_calls" not in m and m["role"] != "tool" for m in out)
    assert messages[0]["content"] == "sys"  # the session's history is left alone


def _json_planner(seen: list[ChatRequestView], replies: list[str]) -> ModelBehavior:
    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        return Reply(content=replies[min(req.assistant_turns, len(replies) - 1)])

    return ModelBehavior(respond=respond)


@pytest.mark.parametrize("structured", ["json_schema", "json_object", "prompt"])
async def test_a_json_tools_model_runs_a_whole_session(fresh_sim, sample_repo, structured):
    seen: list[ChatRequestView] = []
    replies = [json.dumps({"tool": "read", "arguments": {"path": "stats.py"}}),
               "```json\n" + json.dumps({"name": "submit", "arguments": PLAN}) + "\n```"]
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": _json_planner(seen, replies)}))
    pool, _ = pool_for(fresh_sim, 'models.planner-sim.tools="json"',
                       f'models.planner-sim.structured="{structured}"')
    assert isinstance(pool.for_role("planner").clients[0], JsonToolsClient)
    outcome, session, _ = await planner_session(pool, sample_repo)
    assert outcome.payload.goal == "g" and outcome.tool_calls == 1
    assert all(not r.tools for r in seen)
    kinds = {(r.response_format or {}).get("type") for r in seen}
    assert kinds == {"json_schema" if structured == "json_schema" else
                     "json_object" if structured == "json_object" else None}
    assert "Result of read:" in seen[1].last_user_text() and "median" in seen[1].last_user_text()
    assert '"submit"' in seen[0].system_text() or "- submit:" in seen[0].system_text()
    tool_results = [m for m in session.messages if m["role"] == "tool"]
    assert tool_results and "def median" in tool_results[0]["content"]


async def test_malformed_json_content_is_nudged_and_then_accepted(fresh_sim, sample_repo):
    seen: list[ChatRequestView] = []
    replies = ['{"tool": "read", "arguments": {"path": ', json.dumps({"tool": "submit",
                                                                       "arguments": PLAN})]
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": _json_planner(seen, replies)}))
    pool, _ = pool_for(fresh_sim, 'models.planner-sim.tools="json"')
    outcome, session, _ = await planner_session(pool, sample_repo)
    assert outcome.payload.goal == "g" and outcome.turns == 2
    assert "Call one of the tools" in seen[1].last_user_text()


async def test_unknown_tools_and_bad_arguments_get_tool_errors_listing_what_is_valid(
        fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(script=[
        call("stats.py"),
        Reply(tool_calls=[{"name": "read", "arguments": '{"path": '}]),
        call("read", start=3),
        call("submit", goal="g"),
        call("submit", **PLAN),
    ])}))
    pool, _ = pool_for(fresh_sim)
    outcome, session, _ = await planner_session(pool, sample_repo)
    results = [m["content"] for m in session.messages if m["role"] == "tool"]
    assert results[0].startswith("error: unknown tool 'stats.py'; valid tools: list, read")
    assert "search" in results[0]
    assert results[1].startswith("error: invalid arguments for read")
    assert results[2].startswith("error: invalid arguments for read") and "path" in results[2]
    assert results[3].startswith("error: invalid submission") and "steps" in results[3]
    assert outcome.payload.goal == "g" and outcome.turns == 5


async def test_a_model_looping_on_one_call_is_offered_only_submit(fresh_sim, sample_repo):
    seen: list[ChatRequestView] = []
    same = json.dumps({"tool": "search", "arguments": {"pattern": "median"}})
    replies = [same, same, same, json.dumps({"tool": "submit", "arguments": PLAN})]
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": _json_planner(seen, replies)}))
    pool, _ = pool_for(fresh_sim, 'models.planner-sim.tools="json"')
    outcome, _, _ = await planner_session(pool, sample_repo)
    assert outcome.payload.goal == "g"
    branches = [r.response_format["json_schema"]["schema"]["anyOf"] for r in seen]
    assert len(branches[2]) > 1
    assert [b["properties"]["tool"]["const"] for b in branches[3]] == ["submit"]
    assert "Submit your result now" in seen[3].system_text()
