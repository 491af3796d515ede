"""Request bodies built once, checked for what they must not change: the body from pieces
encoded earlier is the one a fresh encoder writes, and it is what the SDK itself would send,
with the headers it would send (over HTTP: this is about the wire)."""

from __future__ import annotations

import json
import random

import pytest
from conftest import run_env, sim_roles
from messages_kit import FORMAT, TOOLS, history

from orchestrator.models.base import REASONING
from orchestrator.models.chat import ChatRequests
from orchestrator.models.pool import ClientPool
from orchestrator.models.responses import ResponsesRequests
from orchestrator.sim import ModelBehavior, Reply


@pytest.mark.both_apis
async def test_a_body_built_once_is_what_the_sdk_itself_sends(fresh_sim, wire_api):
    """The SDK's per-call transform of the request would change nothing in ours: the same call
    made through the SDK's typed ``create`` reaches the server as the same JSON."""
    fresh_sim.set_scenario(fresh_sim.scenario.model_copy(update={"models": {
        "sim-planner": ModelBehavior(reasoning_tokens=5, script=[Reply(content='{"a": "x"}')])}}))
    roles = sim_roles(fresh_sim, "models.planner-sim.temperature=0.2", http=True)
    pool = ClientPool(roles, run_env())
    client = pool.client("planner", "planner-sim")
    messages = history(3, source="another/model")  # reasoning of another model: never sent
    try:
        first = await client.complete(messages, session="p-1")
        reply = {"role": "assistant", "content": first.content}
        if first.reasoning:  # the Responses API's encrypted reasoning, carried back as it came
            reply[REASONING] = dict(first.reasoning)
        messages += [reply, {"role": "user", "content": "Go on."}]
        for tools, fmt in ((TOOLS, None), (None, FORMAT)):
            await client.complete(messages, session="p-1", tools=tools, response_format=fmt)
            ours = fresh_sim.requests[-1].body
            sdk = pool.sdk("sim")
            create = sdk.responses.create if wire_api == "responses" else sdk.chat.completions.create
            stream = await create(**ours)
            async for _ in stream:
                pass
            assert fresh_sim.requests[-1].body == ours
            # and with the headers the SDK sends (auth is checked by the server)
            assert fresh_sim.requests[-1].headers == fresh_sim.requests[-2].headers
            assert fresh_sim.requests[-1].api == wire_api
            carried = "enc-" not in json.dumps(ours) and "encrypted_content" in json.dumps(ours)
            assert carried == (wire_api == "responses")
    finally:
        await pool.aclose()


@pytest.mark.parametrize("requests", [ChatRequests, ResponsesRequests])
def test_reused_pieces_give_the_body_a_fresh_encoder_would(requests, sim):
    """Appends, masked outputs replaced in place, forks to a new list, equal copies: the body
    from pieces encoded earlier is always the one encoded from scratch."""
    route = ClientPool(sim_roles(sim), run_env()).route("planner", "planner-sim")
    built, rng = requests(route), random.Random(7)
    messages = history(2)
    for step in range(60):
        action = rng.choice(["append", "append", "replace", "fork", "copy"])
        if action == "append":
            messages.append({"role": "tool", "tool_call_id": f"x{step}", "content": f"out {step}"})
        elif action == "replace" and len(messages) > 3:
            i = rng.randrange(2, len(messages))
            messages[i] = {**messages[i], "content": f"[masked {step}]"}
        elif action == "fork":
            messages = [*messages[:2], {"role": "user", "content": f"handoff {step}"}]
        else:
            messages = [dict(m) for m in messages]
        tools = TOOLS if step % 2 else TOOLS[-1:]
        assert built.body(messages, tools, None) == requests(route).body(messages, tools, None)
        json.loads(built.body(messages, tools, None))
