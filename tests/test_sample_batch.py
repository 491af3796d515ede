"""Samples asked several to a call (``[roles.<build>] sample_batch``, Chat Completions' ``n``):
the samples after the first that share a prompt and a temperature come from one call, whose
further replies are each checked in a worktree of their own, in order. Whole runs against the
simulator (the real SDK over HTTP), judged by the run branch's file, the requests the
simulator recorded and the samples the attempt log keeps; then the wire's fold and the
journal on their own."""

from __future__ import annotations

import json

from conftest import scenario_with
from routing_kit import BUGGY_LINE, RIGHT_LINE, asked_line, demo_run, median_line_number, show

from orchestrator import api
from orchestrator.config.schema import ModelSpec, Provider
from orchestrator.faces.demo import DEMO_TASK
from orchestrator.models.base import Choice, Completion, Route
from orchestrator.models.chat import ChatFold, ChatRequests
from orchestrator.models.journal import _from_json, _reply_json
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply
from orchestrator.state import CallRecord

SETS = ("builder.one_shot=true", "builder.one_line=true", "builder.line_samples=4",
        "builder.temperatures=[0.0, 0.3, 0.9, 0.6]")


def _builder(original: str, right_at: int, lines: list[str]):
    """The demo's one-shot gives stats.py back; the one-line request's ``right_at``-th reply
    (1-based, counted over every reply the simulator gives, several per call included)
    corrects the median line, every other one says what is wrong and names no line (a reply
    that names one is asked once more for it: ``test_oneline``)."""

    def respond(req: ChatRequestView) -> Reply:
        if not asked_line(req):
            return Reply(content=f"stats.py\n```python\n{original}```\n")
        n = median_line_number(req.messages[-1]["content"])
        lines.append(n)
        if len(lines) != right_at:
            return Reply(content="The median of an even count is the mean of the middle two.")
        return Reply(content=f"{n}: {RIGHT_LINE.strip()}")

    return respond


async def _run(sim, repo, right_at: int, *sets: str):
    """A demo run whose ``right_at``-th one-line reply is the fix, with ``sample_batch = 2``
    and ``sets``: its result, the file as it was and the line numbers the replies gave."""
    original = (repo / "stats.py").read_text(encoding="utf-8")
    lines: list[str] = []
    sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        respond=_builder(original, right_at, lines))}))
    result = await api.arun(DEMO_TASK, **demo_run(sim, repo, *SETS, "builder.sample_batch=2",
                                                  *sets))
    assert result.status == "succeeded", result.reason
    return result, original, lines


def _line_requests(sim) -> list:
    return [r for r in sim.state.requests_for("sim-builder")
            if asked_line(ChatRequestView.from_body(r.chat))]


async def test_samples_two_and_three_come_from_one_call_and_the_third_passes(fresh_sim,
                                                                            sample_repo):
    """``sample_batch = 2``: sample 1 is asked alone (at the attempt's temperature); samples 2
    and 3 (both at the role's highest) are one request with n = 2, the same messages byte for
    byte; the second of its replies is the fix, the run passes on it and sample 4 is never
    asked. The call's time is shared by its two samples, its tokens are on the one that
    asked it."""
    result, original, lines = await _run(fresh_sim, sample_repo, 3)
    head, _, tail = original.rpartition(BUGGY_LINE)
    assert show(sample_repo, f"{result.branch}:stats.py") == head + RIGHT_LINE + tail
    asked = _line_requests(fresh_sim)
    assert [(r.body.get("n"), r.body.get("temperature")) for r in asked] == [(None, 0.3),
                                                                             (2, 0.9)]
    assert json.dumps(asked[0].body["messages"]) == json.dumps(asked[1].body["messages"])
    assert len(lines) == 3  # sample 4 was never asked
    samples = result.attempt_log[1].samples
    assert [(s.index, s.batch, s.changed, s.passed) for s in samples] == [
        (1, 1, False, False), (2, 2, False, False), (3, 2, True, True)]
    assert samples[1].call_s == samples[2].call_s > 0
    assert samples[1].output_tokens > 0 and samples[2].output_tokens == 0
    assert samples[1].prompt_tokens > 0 and samples[2].prompt_tokens == 0


async def test_a_first_reply_that_passes_leaves_the_one_it_holds_unchecked(fresh_sim,
                                                                          sample_repo):
    """The batch's first reply is the fix: the run passes on sample 2 and the reply held for
    sample 3 is never checked (no worktree, no sample of its own)."""
    result, _, lines = await _run(fresh_sim, sample_repo, 2)
    assert len(_line_requests(fresh_sim)) == 2 and len(lines) == 3
    samples = result.attempt_log[1].samples
    assert [(s.index, s.batch, s.passed) for s in samples] == [(1, 1, False), (2, 2, True)]


async def test_over_the_responses_api_the_samples_are_asked_one_by_one(fresh_sim, sample_repo):
    """The Responses API has no ``n``: the same role map asks sample after sample there, and
    the run still passes on sample 3."""
    result, _, _ = await _run(fresh_sim, sample_repo, 3, "models.builder-sim.api=responses")
    asked = _line_requests(fresh_sim)
    assert [r.api for r in asked] == ["responses"] * 3
    assert all("n" not in r.body for r in asked)
    samples = result.attempt_log[1].samples
    assert [(s.index, s.batch, s.passed) for s in samples] == [(1, 1, False), (2, 1, False),
                                                                (3, 1, True)]


def _route(choices: int) -> Route:
    model = ModelSpec(provider="p", id="m", context_window=8192, max_output=100)
    provider = Provider(base_url="http://127.0.0.1:1/v1", api_key_env="K")
    return Route(role="builder", alias="m", model=model, provider_name="p", provider=provider,
                 tier="standard", service_tier=None, effort=None, choices=choices)


def _chunk(index: int, content: str | None = None, finish: str | None = None) -> dict:
    delta = {"content": content} if content else {}
    return {"model": "m", "choices": [{"index": index, "delta": delta,
                                       "finish_reason": finish}]}


def test_the_fold_keeps_each_further_reply_and_drops_one_cut_off():
    """Interleaved pieces of three replies: the first is the completion, the second a further
    reply; the third, which never said it finished, is left out."""
    assert json.loads(ChatRequests(_route(3)).body([{"role": "user", "content": "x"}], None,
                                                   None))["n"] == 3
    assert "n" not in json.loads(ChatRequests(_route(1)).body([{"role": "user", "content": "x"}],
                                                              None, None))
    fold = ChatFold(_route(3))
    for i, event in enumerate([_chunk(0, "12: a"), _chunk(1, "12: b"), _chunk(2, "12: c"),
                               _chunk(1, "bc", "stop"), _chunk(0, "a", "stop")]):
        fold.add(event, float(i))
    reply = fold.result()
    assert reply.content == "12: aa" and reply.finish == "stop"
    assert reply.more == (Choice("12: bbc", "stop"),)
    assert fold.first_token == 0.0 and fold.pieces == 5


def test_the_journal_keeps_a_calls_further_replies_for_a_resume():
    record = CallRecord(role="builder", session="builder-2-c2", requested_model="m",
                        output_tokens=9)
    completion = Completion(content="3: x", tool_calls=(), finish_reason="stop", record=record,
                            more=(Choice("3: y", "stop"), Choice(None, "length")))
    again = _from_json(_reply_json(completion))
    assert again.more == completion.more and again.content == "3: x"
    assert again.record.replayed


async def test_the_simulator_refuses_an_n_out_of_range(fresh_sim):
    from openai import AsyncOpenAI, BadRequestError
    fresh_sim.set_scenario(scenario_with())
    client = AsyncOpenAI(base_url=fresh_sim.base_url, api_key="k")
    try:
        await client.chat.completions.create(model="sim-builder", n=0,
                                             messages=[{"role": "user", "content": "hi"}])
        raise AssertionError("n = 0 was answered")
    except BadRequestError as exc:
        assert "'n'" in str(exc)
    finally:
        await client.close()


def test_a_call_answers_the_samples_that_share_its_prompt_and_temperature():
    """Sample 1 alone; then up to the batch of the samples ahead asked alike, places between
    them (interleaved) left to calls of their own."""
    from orchestrator.engine.samples import _answers
    p, lead = object(), object()
    temps = (0.3, 0.9, 0.9, 0.9, 0.9)  # sample 1 at 0.3, the rest at 0.9 (as _sampling)
    assert _answers([p], temps, 1, 4, 2) == [1]
    assert _answers([p], temps, 2, 4, 2) == [2, 3]
    assert _answers([p], temps, 4, 4, 2) == [4]
    assert _answers([p], temps, 2, 4, 8) == [2, 3, 4]
    assert _answers([p], temps, 2, 4, 1) == [2]
    assert _answers([p, lead, p, lead, p], temps, 3, 5, 2) == [3, 5]
    assert _answers([p], (0.3, 0.9, 0.6), 2, 3, 2) == [2]  # another temperature: alone


async def test_a_batched_reply_that_names_its_file_and_stops_is_followed_up_with_one_reply(
        fresh_sim, sample_repo):
    """Whole-file samples two to a call: sample 2's reply names stats.py and stops, so it is
    asked once more in its own session — with one reply, not two (a second reply to that
    question would be held for sample 3 in place of the call's own). Sample 3 passes on the
    call's second reply, the fix."""
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")
    head, _, tail = original.rpartition(BUGGY_LINE)
    fixed = head + RIGHT_LINE + tail
    replies = [f"stats.py\n```python\n{original}```\n",  # sample 1, alone: given back
               "```\nstats.py\n```",                   # sample 2: named and stopped
               f"stats.py\n```python\n{fixed}```\n",   # sample 3, held from the same call
               f"stats.py\n```python\n{original}```\n"]  # sample 2's follow-up: given back
    given: list[str] = []

    def respond(req: ChatRequestView) -> Reply:
        given.append(replies[len(given)])
        return Reply(content=given[-1])

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    result = await api.arun(DEMO_TASK, **demo_run(
        fresh_sim, sample_repo, "builder.one_shot=true", "builder.samples=3",
        "builder.sample_batch=2", "builder.temperatures=[0.2, 0.8, 0.8]"))
    assert result.status == "succeeded", result.reason
    assert show(sample_repo, f"{result.branch}:stats.py") == fixed
    bodies = [r.body for r in fresh_sim.state.requests_for("sim-builder")]
    assert [b.get("n") for b in bodies] == [None, 2, None]
    assert "Now write it" in bodies[2]["messages"][-1]["content"]
    assert len(given) == 4
    samples = result.attempt_log[0].samples
    assert [(s.index, s.batch, s.changed, s.passed) for s in samples] == [
        (1, 1, False, False), (2, 2, False, False), (3, 2, True, True)]
