"""Messages and tool declarations the request-body and journal tests share: a session's history
with tool calls, unicode and reasoning carried on replies."""

from __future__ import annotations

import json

from orchestrator.models.base import REASONING

TOOLS = [{"type": "function", "function": {
    "name": name, "description": f"{name} things.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}} for name in ("read", "submit")]
FORMAT = {"type": "json_schema", "json_schema": {"name": "out", "strict": True, "schema": {
    "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
    "additionalProperties": False}}}


def history(turns: int, source: str = "sim/sim-planner") -> list[dict]:
    """A session's messages: tool calls and results, unicode, reasoning carried on replies."""
    out: list[dict] = [{"role": "system", "content": "You plan. — ünïcode ✓"},
                       {"role": "user", "content": "Fix median()"}]
    for i in range(turns):
        reply: dict = {"role": "assistant", "content": "Reading." if i % 2 else None,
                       "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {
                           "name": "read", "arguments": json.dumps({"path": f"f{i}.py"})}}]}
        if i % 3 == 0:
            reply[REASONING] = {"source": source, "tokens": 7,
                                "items": [{"type": "reasoning", "summary": [],
                                           "encrypted_content": f"enc-{i}"}]}
        out += [reply, {"role": "tool", "tool_call_id": f"call_{i}", "content": f"line {i}\n"}]
    return out
