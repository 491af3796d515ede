"""A reply that repeats an item of a JSON list is stopped at the repeat (``models/repeats.py``):
the scan on its own, then a whole explorer session in JSON tool mode over the simulator, whose
stream the client leaves early while the server still has most of the loop to send, and the same
loop inside a native tool call's arguments."""

from __future__ import annotations

import json

import pytest
from conftest import cli, run_env, scenario_with, sim_roles
from routing_kit import pool_for

from orchestrator import api
from orchestrator.config.definitions import load_agents
from orchestrator.config.schema import ModelSpec, Provider
from orchestrator.models import repair
from orchestrator.models.base import Route
from orchestrator.models.chat import ChatFold
from orchestrator.models.client import _arguments, _stopped_calls
from orchestrator.models.repeats import RepeatedItem
from orchestrator.record.telemetry import Telemetry
from orchestrator.session.loop import Session
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply, ToolCallSpec
from orchestrator.tools.base import Toolbox
from orchestrator.tools.explorer import explorer_tools

CITE = {"path": "stats.py", "start_line": 1, "end_line": 15, "quote": ""}
CLAIM = {"text": 'median [the "middle"] is here, {odd} \\ case', "citations": [CITE]}
OTHER = {"text": "mean is here too", "citations": [{**CITE, "start_line": 2}]}


def _submit(claims: list[object]) -> str:
    return json.dumps({"tool": "submit", "arguments": {"answer": "stats.py", "claims": claims}})


def _scan(text: str) -> tuple[int | None, int]:
    """Feed ``text`` as a stream would (a few characters at a time): the cut and where the
    stream stood when the scan asked for it."""
    check = RepeatedItem()
    for end in range(3, len(text) + 3, 3):
        cut = check(text[:end])
        if cut is not None:
            return cut, min(end, len(text))
    return None, len(text)


def test_a_repeated_claim_is_cut_before_it_and_what_is_kept_parses():
    text = _submit([CLAIM, CLAIM, CLAIM, CLAIM])
    cut, read = _scan(text)
    assert cut is not None and read < len(text) * 0.6  # stopped as the 2nd copy closed
    assert repair.loads(text[:cut]) == json.loads(_submit([CLAIM]))


def test_a_repeat_of_any_earlier_item_counts_and_distinct_items_do_not():
    text = _submit([CLAIM, OTHER, CLAIM])
    cut, _ = _scan(text)
    assert repair.loads(text[:cut]) == json.loads(_submit([CLAIM, OTHER]))
    assert _scan(_submit([CLAIM, OTHER]))[0] is None


@pytest.mark.parametrize("text", [
    json.dumps({"lines": ["x = 1", "x = 1"], "n": [2, 2]}),  # repeated scalars can be data
    json.dumps({"a": {"k": 1}, "b": {"k": 1}}),  # the same object under two keys is no list
    json.dumps([{"q": "[{}]"}, {"q": "[{} ]"}]),  # brackets inside strings are text
    json.dumps([[1, 2], [2, 1]]),
])
def test_what_is_not_a_repeated_container_item_is_left_alone(text):
    assert _scan(text)[0] is None


def test_the_same_object_written_with_other_spacing_is_a_repeat():
    text = '[{"a": 1, "b": [1, 2]},\n  {"a":1,"b":[1,2]}]'
    cut, _ = _scan(text)
    assert text[:cut] == '[{"a": 1, "b": [1, 2]}'


def test_nested_lists_are_checked_each_on_its_own():
    item = {"text": "t", "citations": [CITE, CITE]}  # a citation repeated inside one claim
    text = _submit([item])
    cut, _ = _scan(text)
    assert repair.loads(text[:cut])["arguments"]["claims"] == [{"text": "t", "citations": [CITE]}]


# --- a whole session: the client leaves the stream at the repeat -----------------------------


async def _explore(sim, repo, *, native: bool = False):
    """One explorer session over ``sim`` (JSON tool mode unless ``native``): its outcome and its
    telemetry."""
    pool, _ = pool_for(sim, *(() if native else ('models.explorer-sim.tools="json"',)))
    agent = load_agents()["explorer"]
    telemetry = Telemetry("t")
    session = Session(session_id="explorer-1", agent=agent, client=pool.for_role("explorer"),
                      toolbox=Toolbox.of(t for t in explorer_tools(repo) if t.name in agent.tools),
                      telemetry=telemetry, max_turns=4)
    return await session.run("Question: where is median defined?"), telemetry


@pytest.mark.both_apis
@pytest.mark.both_reaches
@pytest.mark.usefixtures("pools_closed")
async def test_an_explorer_looping_on_a_claim_is_stopped_there_and_its_claim_kept(fresh_sim,
                                                                                  sample_repo):
    looped = _submit([CLAIM] * 4)
    seen: list[ChatRequestView] = []

    def respond(req: ChatRequestView) -> Reply:
        seen.append(req)
        return Reply(content=looped)

    # paced so the whole loop would take ~1.5 s: the client's early exit shows in what was sent
    tps = len(looped) / 4 / 1.5
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": ModelBehavior(
        respond=respond, tokens_per_second=tps)}))
    outcome, telemetry = await _explore(fresh_sim, sample_repo)

    assert len(seen) == 1  # one call: the kept claim was a whole submission
    claims = outcome.payload.claims
    assert [c.text for c in claims] == [CLAIM["text"]]
    rec = fresh_sim.requests[-1]
    assert 0 < rec.deltas_sent < rec.deltas * 0.7  # the server stopped sending the loop
    [call] = telemetry.calls
    assert call.stopped == "repeat" and 0 < call.output_tokens < rec.deltas
    assert call.prompt_tokens > 100  # no usage came: the session's estimate of its prompt
    assert call.cost_usd == pytest.approx((call.prompt_tokens * 0.25 + call.output_tokens * 2.0)
                                          / 1e6)  # explorer-sim's price, prompt included


def _native_submit(claims: list[object], *calls: ToolCallSpec) -> Reply:
    submit = ToolCallSpec(name="submit", arguments={"answer": "stats.py", "claims": claims})
    return Reply(tool_calls=[*calls, submit])


@pytest.mark.both_apis
@pytest.mark.usefixtures("pools_closed")
async def test_a_native_call_looping_on_a_claim_is_stopped_there_too(fresh_sim, sample_repo):
    # the same loop in a native tool call's arguments: the client reads them as they stream
    looped = _native_submit([CLAIM] * 4)
    tps = len(json.dumps([CLAIM] * 4)) / 4 / 1.5
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": ModelBehavior(
        respond=lambda req: looped, tokens_per_second=tps)}))
    outcome, telemetry = await _explore(fresh_sim, sample_repo, native=True)
    assert [c.text for c in outcome.payload.claims] == [CLAIM["text"]]
    rec = fresh_sim.requests[-1]
    assert len(fresh_sim.requests) == 1 and 0 < rec.deltas_sent < rec.deltas * 0.7
    [call] = telemetry.calls
    assert call.stopped == "repeat" and 0 < call.output_tokens < rec.deltas


def test_a_cut_in_a_later_call_keeps_the_calls_before_it_whole():
    model = ModelSpec(provider="p", id="m", context_window=8192, max_output=100)
    provider = Provider(base_url="http://127.0.0.1:1/v1", api_key_env="K")
    fold = ChatFold(Route(role="explorer", alias="m", model=model, provider_name="p",
                          provider=provider, tier="standard", service_tier=None, effort=None))
    first = json.dumps({"pattern": "median"})
    second = json.dumps({"answer": "a", "claims": [CLAIM, CLAIM]})
    for index, (name, args) in enumerate([("search", first), ("submit", second)]):
        fold.add({"choices": [{"index": 0, "delta": {"tool_calls": [
            {"index": index, "id": f"c{index}", "function": {"name": name, "arguments": ""}}]}}]},
            0.0)
        for i in range(0, len(args), 7):
            fold.add({"choices": [{"index": 0, "delta": {"tool_calls": [
                {"index": index, "function": {"arguments": args[i:i + 7]}}]}}]}, 0.0)
    check = RepeatedItem()
    cut = check(_arguments(fold))
    assert cut is not None
    reply = _stopped_calls(fold, cut)
    assert [c.name for c in reply.tool_calls] == ["search", "submit"]
    assert json.loads(reply.tool_calls[0].arguments) == {"pattern": "median"}
    assert json.loads(reply.tool_calls[1].arguments) == {"answer": "a", "claims": [CLAIM]}
    assert reply.finish == "repeat"


@pytest.mark.both_apis
@pytest.mark.usefixtures("pools_closed")
async def test_a_submission_without_a_repeat_streams_to_its_end(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": ModelBehavior(
        respond=lambda req: Reply(content=_submit([CLAIM, OTHER])))}))
    outcome, telemetry = await _explore(fresh_sim, sample_repo)
    assert len(outcome.payload.claims) == 2
    rec = fresh_sim.requests[-1]
    assert rec.deltas_sent == rec.deltas and telemetry.calls[0].stopped is None


@pytest.mark.both_apis
@pytest.mark.usefixtures("pools_closed")
async def test_a_native_submission_without_a_repeat_streams_to_its_end(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": ModelBehavior(
        respond=lambda req: _native_submit([CLAIM, OTHER]))}))
    outcome, telemetry = await _explore(fresh_sim, sample_repo, native=True)
    assert len(outcome.payload.claims) == 2
    rec = fresh_sim.requests[-1]
    assert rec.deltas_sent == rec.deltas and telemetry.calls[0].stopped is None


async def test_a_run_records_the_stopped_call_and_show_says_so(fresh_sim, sample_repo):
    plan = {"goal": "answer", "steps": [], "questions": ["Where is `def median`?"],
            "acceptance": []}
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": ModelBehavior(script=[Reply(tool_calls=[
            ToolCallSpec(name="submit", arguments=plan)])]),
        "sim-explorer": ModelBehavior(respond=lambda req: Reply(content=_submit([CLAIM] * 4)))}))
    roles = sim_roles(fresh_sim, 'models.explorer-sim.tools="json"')
    result = await api.aexplore("Where is median?", repo=sample_repo, roles=roles, env=run_env())
    assert [e.submitted for e in result.explorers] == [1]
    report = json.loads((sample_repo / "workspaces" / result.run_id / "report.json").read_text())
    assert [c["stopped"] for c in report["calls"] if c["role"] == "explorer"] == ["repeat"]
    shown = cli("show", result.run_id, "--repo", str(sample_repo))
    assert shown.returncode == 0 and "(repeat)" in shown.stdout, shown.stdout
