"""Tools through JSON content for models without native tool calls, and the tool errors a
confused model gets back: pure parsing and schemas first, then whole planner and explorer
sessions against the sim, then the last turns of any session offering only ``submit``."""

from __future__ import annotations

import itertools
import json

import pytest
from conftest import run_env, scenario_with, sim_roles
from routing_kit import PLAN, call, planner_session, pool_for

from orchestrator import api
from orchestrator.config.definitions import load_agents
from orchestrator.config.prompts import text
from orchestrator.models.listing import Listings
from orchestrator.models.toolmode import (
    JsonToolsClient,
    evidence,
    flat_schema,
    parse_tool_call,
    response_format_for,
    rewrite_history,
    tool_call_schema,
    tool_instruction,
)
from orchestrator.record.telemetry import Telemetry
from orchestrator.session.loop import Session
from orchestrator.session.messages import submit_schema
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply
from orchestrator.state import Findings, Plan
from orchestrator.tools.base import Toolbox
from orchestrator.tools.explorer import explorer_tools

# every simulator test runs on both wire APIs; the pools it makes are closed after it
pytestmark = [pytest.mark.both_apis, pytest.mark.usefixtures("pools_closed")]

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
    assert "Submit your result now" in seen[3].last_user_text()
    assert "Call only: submit." in seen[3].last_user_text()
    # the system prompt (tool list included) stays the same, so a prompt cache keeps it
    assert len({s.system_text() for s in seen}) == 1


async def test_a_native_model_looping_on_one_call_is_offered_only_submit_too(fresh_sim,
                                                                            sample_repo):
    # until 2026-12-07 only JSON tools had this: a native model repeated the call to max_turns
    seen: list[ChatRequestView] = []

    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        if req.tool_names == ["submit"]:
            return call("submit", **PLAN)
        return call("search", pattern="median")

    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(respond=respond)}))
    pool, _ = pool_for(fresh_sim)
    outcome, session, _ = await planner_session(pool, sample_repo)  # max_turns=8
    assert outcome.payload.goal == "g" and outcome.turns == 4
    assert [len(r.tool_names) > 1 for r in seen] == [True, True, True, False]
    assert seen[3].last_user_text() == text("toolmode", "loop_note")
    # the note goes with that call only: the session's own history does not keep it
    assert text("toolmode", "loop_note") not in json.dumps(session.messages)


def _history(*calls: tuple[str, dict, str]) -> list[dict]:
    out: list[dict] = []
    for i, (name, args, result) in enumerate(calls):
        out.append({"role": "assistant", "content": None, "tool_calls": [
            {"id": f"c{i}", "type": "function",
             "function": {"name": name, "arguments": json.dumps(args)}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": result})
    return out


def test_a_builders_edits_that_read_alike_are_a_loop_only_to_the_wide_rule():
    from orchestrator.models.loops import stalled

    cycle = _history(("write_file", {"path": "a.py", "content": "x = 1\n"}, "wrote a.py (1 lines)"),
                     ("run", {"command": "pytest"}, "FAILED test_a"),
                     ("write_file", {"path": "a.py", "content": "x = 2\n"}, "wrote a.py (1 lines)"),
                     ("run", {"command": "pytest"}, "FAILED test_a"))
    assert stalled(cycle, 3) and not stalled(cycle, 3, exact=True)
    again = _history(*[("run", {"command": "pytest"}, "FAILED test_a")] * 3)
    assert stalled(again, 3, exact=True)
    # the same call answered differently (the tests changed under it) is news
    changed = _history(("run", {"command": "pytest"}, "FAILED test_a"),
                       ("run", {"command": "pytest"}, "FAILED test_b"),
                       ("run", {"command": "pytest"}, "FAILED test_a"))
    assert not stalled(changed, 3, exact=True)


async def test_a_native_model_searching_anew_keeps_its_tools(fresh_sim, sample_repo):
    seen: list[ChatRequestView] = []
    replies = [call("search", pattern="median"), call("search", pattern="mean"),
               call("read", path="stats.py"), call("submit", **PLAN)]

    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        return replies[min(req.assistant_turns, 3)]

    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(respond=respond)}))
    pool, _ = pool_for(fresh_sim)
    outcome, _, _ = await planner_session(pool, sample_repo)
    assert outcome.payload.goal == "g" and all(len(r.tool_names) > 1 for r in seen)


# --- schemas a small model can fill ---------------------------------------------------------------

FINDINGS, PLAN_TOOL = submit_schema(Findings), submit_schema(Plan)


def _arguments(schema: dict, tool: str) -> dict:
    [branch] = [b for b in schema["anyOf"] if b["properties"]["tool"]["const"] == tool]
    return branch["properties"]["arguments"]


def test_submit_is_flat_with_every_field_required_and_lists_and_strings_capped():
    args = _arguments(tool_call_schema([FINDINGS]), "submit")
    assert "$defs" not in json.dumps(args) and "$ref" not in json.dumps(args)
    assert args["required"] == ["answer", "claims"]  # claims has a default, yet must be written
    claim = args["properties"]["claims"]["items"]
    citation = claim["properties"]["citations"]["items"]
    assert citation["required"] == ["path", "start_line", "end_line", "quote"]
    assert args["properties"]["claims"]["maxItems"] == 4
    # prose is two sentences (live, the 0.5B looped inside it until its output ran out); code
    # and quotes keep room
    assert args["properties"]["answer"]["maxLength"] == 280
    assert claim["properties"]["text"]["maxLength"] == 280
    assert citation["properties"]["quote"]["maxLength"] == 600
    plan = _arguments(tool_call_schema([PLAN_TOOL]), "submit")
    assert plan["required"] == ["goal", "steps", "questions", "files_to_touch", "acceptance",
                                "diagnosis"]
    # the diagnosis (issue 27) may be null: a planner that cannot see the line says so
    assert {"type": "null"} in plan["properties"]["diagnosis"]["anyOf"]


def test_other_tools_take_only_their_required_arguments_unless_optional_ones_are_asked_for():
    tools = [t.schema() for t in explorer_tools(".")]
    lean = tool_call_schema(tools, optional=False)
    assert list(_arguments(lean, "search")["properties"]) == ["pattern"]
    assert _arguments(lean, "list")["properties"] == {}
    assert "glob" in _arguments(tool_call_schema(tools), "search")["properties"]
    text = tool_instruction([*tools, FINDINGS], "json_schema", optional=False)
    assert "- search(pattern):" in text and "- read(path):" in text and "- list():" in text
    assert '"claims": [{"text": "<The finding' in text  # submit shown as a skeleton


def test_flat_schema_inlines_refs_and_can_require_everything():
    schema = {"$defs": {"P": {"title": "P", "type": "object",
                              "properties": {"a": {"type": "string"}}}},
              "type": "object", "properties": {"p": {"$ref": "#/$defs/P"}}}
    assert flat_schema(schema, require_all=True) == {
        "type": "object", "required": ["p"],
        "properties": {"p": {"type": "object", "properties": {"a": {"type": "string"}},
                             "required": ["a"]}}}


def test_evidence_is_the_places_tool_results_and_candidates_showed():
    """A read is one place (its lines, quote empty: copied at submit), a search match one line
    with its text; the most recent first, then the candidate windows in their rank order."""
    messages = [
        {"role": "user", "content": "Question\n[W1] stats.py:9-15 (function median)\n"
                                    "   9| def median(values):\n   …\n  15|     return x"},
        {"role": "tool", "tool_call_id": "1",
         "content": "stats.py (lines 8-10 of 15):\n   8| \n   9| def median(values):\n  10|     x = 1"},
        {"role": "tool", "tool_call_id": "2",
         "content": "1 match in 1 file:\ntests/t.py:3: from stats import median\ntests/t.py-4- ctx"},
        {"role": "user", "content": "a.py:1: not a tool result"},
    ]
    assert evidence(messages) == [
        {"path": "tests/t.py", "start_line": 3, "end_line": 3, "quote": "from stats import median"},
        {"path": "stats.py", "start_line": 9, "end_line": 10, "quote": ""},
        {"path": "stats.py", "start_line": 9, "end_line": 15, "quote": ""},
    ]


# --- whole sessions in json mode --------------------------------------------------------------


async def _explorer_session(pool, repo, max_turns: int = 8):
    agent = load_agents()["explorer"]
    tools = Toolbox.of(t for t in explorer_tools(repo) if t.name in agent.tools)
    session = Session(session_id="explorer-1", agent=agent, client=pool.for_role("explorer"),
                      toolbox=tools, telemetry=Telemetry("t"), max_turns=max_turns)
    return await session.run("Question: where is median defined?"), session


def _json_model(seen: list[ChatRequestView], replies: list[str | Reply]) -> ModelBehavior:
    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        reply = replies[min(req.assistant_turns, len(replies) - 1)]
        return reply if isinstance(reply, Reply) else Reply(content=reply)

    return ModelBehavior(respond=respond)


def _submit(**arguments: object) -> str:
    return json.dumps({"tool": "submit", "arguments": arguments})


async def test_citations_in_json_mode_are_limited_to_places_the_tools_showed(fresh_sim,
                                                                             sample_repo):
    seen: list[ChatRequestView] = []
    cite = {"path": "stats.py", "start_line": 1, "end_line": 15, "quote": ""}
    replies = [json.dumps({"tool": "read", "arguments": {"path": "stats.py"}}),
               _submit(answer="stats.py", claims=[{"text": "defined here", "citations": [cite]}])]
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": _json_model(seen, replies)}))
    pool, _ = pool_for(fresh_sim, 'models.explorer-sim.tools="json"')
    outcome, _ = await _explorer_session(pool, sample_repo)
    assert outcome.payload.claims[0].citations[0].path == "stats.py"
    before = _arguments(seen[0].response_format["json_schema"]["schema"], "submit")
    after = _arguments(seen[1].response_format["json_schema"]["schema"], "submit")
    citations = after["properties"]["claims"]["items"]["properties"]["citations"]
    assert citations["items"]["enum"] == [cite] and citations["minItems"] == 1  # the one read
    assert "enum" not in json.dumps(before)  # nothing read yet: nothing to narrow to
    assert "one of the places you were shown" in seen[1].last_user_text()
    assert seen[1].system_text() == seen[0].system_text()
    assert "read_artifact" not in seen[1].system_text()  # no artifact named: not offered


def _text(message: dict) -> str:
    content = message.get("content")
    if isinstance(content, list):  # the Responses API's parts
        return "".join(str(part.get("text", "")) for part in content)
    return str(content or "")


async def test_tools_opened_by_a_refused_answer_are_listed_where_they_opened(fresh_sim,
                                                                              sample_repo):
    """Answer first, the first turn lists only submit. When that answer is refused, the search
    tools are listed after the refusal, not in the system prompt: each request begins with the
    whole of the one before (but for its closing notes), so a server's prompt cache reads only
    the new turn. Live, listing them in the system prompt made llama.cpp read ~1,600 tokens
    again, 8-23 s on the kit, for each refused explorer answer."""
    seen: list[ChatRequestView] = []
    unbacked = {"text": "the test suite class is StatsTest", "citations": [
        {"path": "W1", "start_line": 9, "end_line": 15, "quote": ""}]}
    backed = {"text": "StatsTest is the test class", "citations": [
        {"path": "tests/test_stats.py", "start_line": 6, "end_line": 6, "quote": ""}]}
    replies = [_submit(answer="x", claims=[unbacked]),
               json.dumps({"tool": "search", "arguments": {"pattern": "class StatsTest"}}),
               _submit(answer="tests/test_stats.py", claims=[backed])]
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": _json_model(seen, replies)}))
    roles = sim_roles(fresh_sim, 'models.explorer-sim.tools="json"')
    result = await api.aexplore("Where is `median` tested?", repo=sample_repo, roles=roles,
                                env=run_env(), split=False)
    [e] = result.explorers
    assert e.verified == 1 and e.tool_calls == 1 and len(seen) == 3
    assert len({r.system_text() for r in seen}) == 1
    assert "- submit:" in seen[0].system_text() and "- search(" not in seen[0].system_text()
    more = text("toolmode", "more_tools")
    assert more not in json.dumps(seen[0].messages)
    for before, after in itertools.pairwise(seen):
        n = len(before.messages)
        assert after.messages[:n - 1] == before.messages[:n - 1]
        assert _text(before.messages[-1]).startswith(_text(after.messages[n - 1]))
    refusal = _text(seen[2].messages[len(seen[1].messages) - 1])
    assert "none of your claims is backed" in refusal
    assert refusal.index(more) < refusal.index("- search(")  # listed after the refusal ...
    assert "Call only" not in refusal  # ... without the note that narrowed that turn's tools


def test_a_listing_goes_back_to_the_system_prompt_once_the_history_before_it_changes():
    listings = Listings()
    [read, submit] = TOOLS
    history = [{"role": "system", "content": "s"}, {"role": "user", "content": "q"}]
    assert listings.update("e-1", [submit], history).tools() == [submit]
    history += [{"role": "assistant", "content": "a"}, {"role": "user", "content": "refused"}]
    listing = listings.update("e-1", [read], history)
    assert listing.first == [submit] and [(g.at, g.tools) for g in listing.later] == [(3, (read,))]
    assert listings.update("e-1", [read, submit], [*history, {"role": "user", "content": "n"}]
                           ).later  # the history only grew: the listing stays where it was
    masked = [*history[:3], {"role": "user", "content": "[masked]"}]  # or a fork's new session
    listing = listings.update("e-1", [read, submit], masked)
    assert listing.first == [submit, read] and not listing.later
    assert listings.update("e-2", [read], history).first == [read]  # sessions apart


async def test_calls_that_find_nothing_new_lead_to_submit_only(fresh_sim, sample_repo):
    seen: list[ChatRequestView] = []
    misses = [json.dumps({"tool": "search", "arguments": {"pattern": f"zzz{i}"}})
              for i in range(3)]
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": _json_model(
        seen, [*misses, _submit(**PLAN)])}))
    pool, _ = pool_for(fresh_sim, 'models.planner-sim.tools="json"')
    outcome, _, _ = await planner_session(pool, sample_repo)
    assert outcome.payload.goal == "g"
    offered = [[b["properties"]["tool"]["const"]
                for b in r.response_format["json_schema"]["schema"]["anyOf"]] for r in seen]
    assert len(offered[2]) > 1 and offered[3] == ["submit"]  # same "no matches" result twice


async def test_a_reply_cut_off_mid_json_is_not_left_in_the_history(fresh_sim, sample_repo):
    seen: list[ChatRequestView] = []
    cut = Reply(content='{"tool": "submit", "arguments": {"goal": "aaaa', finish_reason="length")
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": _json_model(
        seen, [cut, _submit(**PLAN)])}))
    pool, _ = pool_for(fresh_sim, 'models.planner-sim.tools="json"')
    outcome, session, _ = await planner_session(pool, sample_repo)
    assert outcome.payload.goal == "g"
    assert "cut off at the output limit" in session.messages[2]["content"]
    assert "aaaa" not in json.dumps(seen[1].messages)


# --- the last turns of any session --------------------------------------------------------------


async def test_the_last_two_turns_offer_only_submit_and_say_so(fresh_sim, sample_repo):
    seen: list[ChatRequestView] = []

    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        if req.tool_names == ["submit"]:
            return call("submit", **PLAN)
        return call("search", pattern=f"median{req.assistant_turns}")

    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(respond=respond)}))
    pool, _ = pool_for(fresh_sim)
    outcome, session, _ = await planner_session(pool, sample_repo)  # max_turns=8
    assert outcome.turns == 7 and outcome.tool_calls == 6
    assert [len(r.tool_names) > 1 for r in seen] == [True] * 6 + [False]
    note = text("session", "final_note", left=2, submit="submit")
    assert seen[6].last_user_text() == note
    assert [m["content"] for m in session.messages].count(note) == 1


async def test_short_sessions_keep_all_their_tools(fresh_sim, sample_repo):
    seen: list[ChatRequestView] = []
    replies = [call("search", pattern="median"), call("read", path="stats.py"),
               call("read", path="README.md"), call("submit", answer="in stats.py")]

    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        return replies[min(req.assistant_turns, 3)]

    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": ModelBehavior(respond=respond)}))
    pool, _ = pool_for(fresh_sim)
    outcome, _ = await _explorer_session(pool, sample_repo, max_turns=4)
    assert outcome.turns == 4 and outcome.tool_calls == 3
    assert all(len(r.tool_names) > 1 for r in seen)
