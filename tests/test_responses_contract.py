"""The simulator's Responses API against the ``openai`` SDK's own typed models: every streamed
event and every final response validates, strictly, with no field the SDK does not know."""

from __future__ import annotations

import json
from typing import Any

import httpx2
import pytest
from conftest import scenario_with
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import BaseModel, TypeAdapter

from orchestrator.sim import FaultSpec, ModelBehavior, Reply, ToolCallSpec

EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
TOOLS = [{"type": "function", "name": "read", "description": "Read a file.", "strict": False,
          "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                         "required": ["path"]}}]
REQUEST = {"model": "sim-planner", "store": False, "tools": TOOLS,
           "reasoning": {"effort": "low"}, "include": ["reasoning.encrypted_content"],
           "input": [{"type": "message", "role": "user", "content": "read a.py"}]}
CALL = ToolCallSpec(name="read", arguments={"path": "a.py"}, id="call_1")
REPLIES = {
    "text": Reply(content="Here is a longer answer, in pieces."),
    "tool calls": Reply(content="Reading.", tool_calls=[CALL]),
    "cut at the output limit": Reply(content="{\"unfinished\": ", finish_reason="length"),
    "failed": Reply(content="partial", stream_error=FaultSpec(status=500, code="server_error",
                                                              message="The server had an error")),
    "error event": Reply(stream_error=FaultSpec(status=429, code="rate_limit_exceeded",
                                                message="Rate limit reached. Please try again "
                                                "in 20ms."), stream_error_event="error"),
}


def unknown_fields(obj: Any, path: str = "") -> list[str]:
    """Every key the SDK's models do not declare, anywhere in ``obj``."""
    if isinstance(obj, BaseModel):
        extra = [f"{path}.{k}" for k in (obj.model_extra or {})]
        return extra + [f for name in type(obj).model_fields
                        for f in unknown_fields(getattr(obj, name), f"{path}.{name}")]
    if isinstance(obj, list):
        return [f for i, item in enumerate(obj) for f in unknown_fields(item, f"{path}[{i}]")]
    return []


def stream(sim, body: dict[str, Any]) -> list[tuple[str, dict[str, Any]]]:
    """(event name, data) of each server-sent event, read off the wire."""
    out, name = [], ""
    with httpx2.Client(timeout=10) as http, http.stream(
            "POST", f"{sim.base_url}/responses", json={**body, "stream": True},
            headers={"Authorization": "Bearer sim"}) as r:
        assert r.status_code == 200, r.read()
        for line in r.iter_lines():
            if line.startswith("event: "):
                name = line.removeprefix("event: ")
            elif line.startswith("data: "):
                out.append((name, json.loads(line.removeprefix("data: "))))
    return out


@pytest.mark.parametrize("case", sorted(REPLIES))
def test_every_streamed_event_is_a_valid_sdk_event(fresh_sim, case):
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(
        reasoning_tokens=12, script=[REPLIES[case]])}))
    events = stream(fresh_sim, REQUEST)
    assert [data["sequence_number"] for _, data in events] == list(range(len(events)))
    for name, data in events:
        assert name == data["type"]
        event = EVENTS.validate_python(data, strict=True)
        assert not unknown_fields(event), (name, unknown_fields(event))
    kinds = [name for name, _ in events]
    assert kinds[:2] == ["response.created", "response.in_progress"]
    final = {"failed": "response.failed", "error event": "error",
             "cut at the output limit": "response.incomplete"}.get(case, "response.completed")
    assert kinds[-1] == final
    if case == "tool calls":
        assert kinds.count("response.function_call_arguments.delta") > 1
    if final in ("response.completed", "response.incomplete"):
        response = events[-1][1]["response"]
        assert response["usage"]["output_tokens_details"]["reasoning_tokens"] == 12
        assert response["output"][0]["type"] == "reasoning"
        assert response["output"][0]["encrypted_content"]


def test_the_plain_response_is_a_valid_sdk_response(fresh_sim):
    fresh_sim.set_scenario(scenario_with(**{"sim-planner": ModelBehavior(
        script=[Reply(content="Reading.", tool_calls=[CALL])])}))
    body = httpx2.post(f"{fresh_sim.base_url}/responses", json=REQUEST, timeout=10,
                       headers={"Authorization": "Bearer sim"}).json()
    response = Response.model_validate(body, strict=True)
    assert not unknown_fields(response)
    assert response.output_text == "Reading." and response.status == "completed"
    assert [item.type for item in response.output] == ["message", "function_call"]
