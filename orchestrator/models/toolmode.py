"""Tools for models without native tool calls: ``JsonToolsClient`` asks for one
``{"tool": NAME, "arguments": {...}}`` object instead and turns it back into a tool call.

How the object is requested follows the model's ``structured`` setting: ``json_schema`` sends a
schema that is an ``anyOf`` over the tools (servers enforce it by grammar), ``json_object``
asks for any JSON object, ``prompt`` relies on an instruction listing the tools. The history is
rewritten without ``tool_calls`` or ``tool`` messages, which such servers' chat templates often
reject. Fenced JSON and ``{"name": ..., "arguments": ...}`` are accepted; anything unparseable is
returned as content, so the session nudges the model as it would any chatty reply. Small models
loop on the same call; after ``repeats`` identical calls in a row only ``submit`` is offered.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

from .client import Completion, ModelClient, Progress, Route, ToolCallData

Structured = Literal["json_schema", "json_object", "prompt"]
_FENCE = re.compile(r"```(?:json)?\s*(.*?)```", re.S)
FINAL_TOOL = "submit"
_LOOP_NOTE = "You repeated the same call without progress. Submit your result now."


def tool_call_schema(tools: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """One JSON schema for "call exactly one of these tools": an anyOf, one branch per tool."""
    branches = []
    for tool in tools:
        fn = tool["function"]
        params = dict(fn.get("parameters") or {"type": "object", "properties": {}})
        branches.append({
            "type": "object",
            "properties": {"tool": {"const": fn["name"]}, "arguments": params},
            "required": ["tool", "arguments"],
            "additionalProperties": False,
        })
    return {"anyOf": branches}


def response_format_for(tools: Sequence[Mapping[str, Any]], structured: Structured
                        ) -> dict[str, Any] | None:
    if structured == "json_schema":
        return {"type": "json_schema",
                "json_schema": {"name": "tool_call", "schema": tool_call_schema(tools)}}
    if structured == "json_object":
        return {"type": "json_object"}
    return None


def tool_instruction(tools: Sequence[Mapping[str, Any]], structured: Structured) -> str:
    """The system-prompt addendum that lists the tools; schemas only when nothing enforces them."""
    lines = ['Answer every turn with exactly one JSON object and nothing else: '
             '{"tool": "<tool name>", "arguments": {...}}. The tools:']
    for tool in tools:
        fn = tool["function"]
        line = f"- {fn['name']}: {fn.get('description', '').strip()}"
        if structured != "json_schema":
            line += f" Arguments schema: {json.dumps(fn.get('parameters') or {})}"
        lines.append(line)
    return "\n".join(lines)


def rewrite_history(messages: Sequence[Mapping[str, Any]], instruction: str
                    ) -> list[dict[str, Any]]:
    """Tool calls become the JSON the model would have written; tool results become user turns."""
    out: list[dict[str, Any]] = []
    names: dict[str, str] = {}
    for m in messages:
        role = m.get("role")
        if role == "assistant" and m.get("tool_calls"):
            calls = [c["function"] for c in m["tool_calls"]]
            names.update({c["id"]: c["function"]["name"] for c in m["tool_calls"]})
            text = "\n".join(json.dumps({"tool": c["name"], "arguments": _loads(c["arguments"])})
                             for c in calls)
            out.append({"role": "assistant", "content": text})
        elif role == "tool":
            name = names.get(str(m.get("tool_call_id")), "tool")
            out.append({"role": "user", "content": f"Result of {name}:\n{m.get('content') or ''}"})
        else:
            out.append(dict(m))
    if out and out[0].get("role") == "system":
        out[0]["content"] = f"{out[0].get('content') or ''}\n\n{instruction}"
    else:
        out.insert(0, {"role": "system", "content": instruction})
    return out


def looping(messages: Sequence[Mapping[str, Any]], repeats: int) -> bool:
    """True when the last ``repeats`` assistant turns made the very same tool call."""
    calls = [json.dumps([c["function"] for c in m["tool_calls"]], sort_keys=True)
             for m in messages if m.get("role") == "assistant" and m.get("tool_calls")]
    return len(calls) >= repeats and len(set(calls[-repeats:])) == 1


def _loads(text: Any) -> Any:
    if not isinstance(text, str):
        return text
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return text


def parse_tool_call(content: str | None) -> ToolCallData | None:
    """The tool call in ``content`` (bare or fenced JSON, ``tool``/``name`` keys), or None."""
    if not content:
        return None
    candidates = [m.group(1).strip() for m in _FENCE.finditer(content)]
    stripped = content.strip()
    candidates.append(stripped)
    start, end = stripped.find("{"), stripped.rfind("}")
    if 0 <= start < end:
        candidates.append(stripped[start:end + 1])
    for text in candidates:
        obj = _loads(text)
        call = _as_call(obj)
        if call is not None:
            return call
    return None


def _as_call(obj: Any) -> ToolCallData | None:
    if not isinstance(obj, Mapping):
        return None
    name = obj.get("tool") or obj.get("name")
    if not isinstance(name, str) or not name:
        return None
    args = obj.get("arguments", obj.get("parameters", {}))
    if isinstance(args, str):
        parsed = _loads(args)
        args = parsed if isinstance(parsed, Mapping) else args
    text = args if isinstance(args, str) else json.dumps(args)
    return ToolCallData("json_call_0", name, text)


class JsonToolsClient:
    """A ``ModelClient`` that gives ``inner`` tools through JSON content instead of ``tools``."""

    def __init__(self, inner: ModelClient, structured: Structured = "json_schema", *,
                 repeats: int = 3) -> None:
        self.inner = inner
        self.structured = structured
        self.repeats = repeats
        self._calls = 0

    @property
    def route(self) -> Route:
        return self.inner.route

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> Completion:
        if not tools:
            return await self.inner.complete(messages, session=session,
                                             response_format=response_format, progress=progress)
        instruction = tool_instruction(tools, self.structured)
        final = [t for t in tools if t["function"]["name"] == FINAL_TOOL]
        if final and looping(messages, self.repeats):
            tools, instruction = final, f"{tool_instruction(final, self.structured)}\n{_LOOP_NOTE}"
        completion = await self.inner.complete(
            rewrite_history(messages, instruction),
            session=session,
            response_format=response_format_for(tools, self.structured),
            progress=progress,
        )
        call = parse_tool_call(completion.content)
        if call is None or completion.tool_calls:
            return completion
        self._calls += 1
        call = ToolCallData(f"json_call_{self._calls}", call.name, call.arguments)
        return Completion(content=None, tool_calls=(call,), finish_reason="tool_calls",
                          record=completion.record)
