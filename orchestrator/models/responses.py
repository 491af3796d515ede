"""The Responses API wire (``/v1/responses``): the session's history as input items, and the
fold of the server-sent events into one reply.

Requests are stateless: ``store=false``, never ``previous_response_id``. The whole history goes
every time, as input items: system and user turns as messages, assistant text as an
``output_text`` message, tool calls as ``function_call`` items and tool results as
``function_call_output`` items joined by ``call_id``. When the role asks for reasoning the
request includes ``reasoning.encrypted_content``, and the encrypted reasoning items of each reply
go back, in place, to the model that wrote them; so checkpoints, forks, the call journal and a
fallback to another model (or to Chat Completions) work exactly as without them.

Structured output goes in ``text.format``, or, for servers that read only the chat-style field
(llama.cpp), in ``response_format`` (``providers.NAME.responses_format``). Errors inside the
stream (``response.failed``, ``error``) are classified like HTTP errors.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.models import repair
from orchestrator.models.base import REASONING, Route, Streamed, ToolCallData, Usage, Wire
from orchestrator.models.encode import Encoded, body, dumps, dumps_masked
from orchestrator.models.errors import Transient, stream_error, where

ENCRYPTED = "reasoning.encrypted_content"


class ResponsesRequests:
    """Builds one route's ``/responses`` bodies, each message's input items encoded once."""

    def __init__(self, route: Route) -> None:
        self.route = route
        source = route.source
        self._items = Encoded(lambda m: b",".join(dumps_masked(i)
                                                  for i in input_items(m, source)))
        self._tools = Encoded(lambda t: dumps(function_tool(t)))

    def body(self, messages: Sequence[Mapping[str, Any]],
             tools: Sequence[Mapping[str, Any]] | None,
             response_format: Mapping[str, Any] | None) -> bytes:
        """The JSON body of one streamed, stateless call."""
        route, model = self.route, self.route.model
        # a message with no items encodes as b"", which ``joined`` leaves out
        lists: dict[str, bytes | bytearray] = {"input": self._items.joined(messages)}
        rest: dict[str, Any] = {
            "model": model.id,
            "stream": True,
            "store": False,
            "max_output_tokens": model.max_output,
        }
        if model.temperature is not None:
            rest["temperature"] = model.temperature
        if tools:
            lists["tools"] = self._tools.joined(tools)
        if response_format:
            if route.provider.responses_format == "response_format":
                rest["response_format"] = dict(response_format)
            else:
                rest["text"] = {"format": text_format(response_format)}
        if route.service_tier:
            rest["service_tier"] = route.service_tier
        if route.effort:
            rest["reasoning"] = {"effort": route.effort}
            rest["include"] = [ENCRYPTED]
        return body(lists, rest)


def to_input(messages: Sequence[Mapping[str, Any]], source: str) -> list[dict[str, Any]]:
    """Chat-shaped messages as Responses input items; reasoning only for the model that wrote it."""
    return [item for m in messages for item in input_items(m, source)]


def input_items(m: Mapping[str, Any], source: str) -> list[dict[str, Any]]:
    """One chat-shaped message as the Responses input items it becomes."""
    role = m.get("role")
    if role == "assistant":
        items = _carried(m.get(REASONING), source)
        text = _text(m.get("content"))
        if text:
            items.append({"type": "message", "role": "assistant",
                          "content": [{"type": "output_text", "text": text}]})
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            items.append({"type": "function_call", "call_id": str(call.get("id", "")),
                          "name": fn.get("name") or "", "arguments": fn.get("arguments") or ""})
        return items
    if role == "tool":
        return [{"type": "function_call_output", "call_id": str(m.get("tool_call_id", "")),
                 "output": _text(m.get("content"))}]
    return [{"type": "message", "role": role, "content": _text(m.get("content"))}]


def _carried(reasoning: Any, source: str) -> list[dict[str, Any]]:
    if not isinstance(reasoning, Mapping) or reasoning.get("source") != source:
        return []
    return [dict(item) for item in reasoning.get("items") or ()]


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(p.get("text", "") for p in content if isinstance(p, Mapping))
    return ""


def function_tool(tool: Mapping[str, Any]) -> dict[str, Any]:
    """A Chat Completions tool as a Responses function tool (flat, and not strict unless asked:
    the Responses API otherwise makes every function strict)."""
    fn = tool["function"]
    return {"type": "function", "name": fn["name"], "description": fn.get("description") or "",
            "parameters": fn.get("parameters") or {"type": "object", "properties": {}},
            "strict": bool(fn.get("strict", False))}


def text_format(response_format: Mapping[str, Any]) -> dict[str, Any]:
    """A Chat Completions ``response_format`` as the Responses API's ``text.format``."""
    kind = response_format.get("type")
    if kind == "json_schema":
        spec = response_format.get("json_schema") or {}
        out = {"type": "json_schema", "name": spec.get("name") or "output",
               "schema": spec.get("schema") or {}}
        out.update({k: spec[k] for k in ("strict", "description") if k in spec})
        return out
    return {"type": kind or "text"}


@dataclass
class ResponsesFold:
    """Folds Responses stream events (their JSON). Tolerant of servers that send fewer fields
    than OpenAI (llama.cpp sends no ``output_index`` or ``sequence_number``): deltas are matched
    to their item by ``item_id``, else by ``output_index``."""

    route: Route
    content: list[str] = field(default_factory=list)
    slots: dict[str, dict[str, str]] = field(default_factory=dict)  # tool calls, by item
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    by_index: dict[int, str] = field(default_factory=dict)
    finish: str | None = None
    usage: Mapping[str, Any] | None = None
    served_model: str | None = None
    served_tier: str | None = None
    first_token: float | None = None
    pieces: int = 0

    def add(self, event: Mapping[str, Any], now: float) -> bool:
        kind = event.get("type")
        if kind == "response.output_text.delta":
            self.content.append(event.get("delta") or "")
            return self._piece(now)
        if kind == "response.function_call_arguments.delta":
            self._slot(event)["arguments"] += event.get("delta") or ""
            return self._piece(now)
        if kind == "response.function_call_arguments.done":
            if isinstance(event.get("arguments"), str):
                self._slot(event)["arguments"] = event["arguments"]
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._item(event, done=kind.endswith("done"))
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            self._served(event.get("response"))
        elif kind == "response.completed":
            self._end(event.get("response") or {}, "stop")
        elif kind == "response.incomplete":
            response = event.get("response") or {}
            reason = (response.get("incomplete_details") or {}).get("reason")
            self._end(response, "length" if reason == "max_output_tokens" else "content_filter")
        elif kind == "response.failed":
            error = (event.get("response") or {}).get("error") or {}
            raise stream_error(self.route, error.get("code"),
                               error.get("message") or "the response failed")
        elif kind == "error":
            raise stream_error(self.route, event.get("code"),
                               event.get("message") or "error event in the stream")
        return False

    def _piece(self, now: float) -> bool:
        self.pieces += 1
        if self.first_token is None:
            self.first_token = now
        return True

    def _key(self, event: Mapping[str, Any], item: Mapping[str, Any] | None = None) -> str:
        index = event.get("output_index")
        key = (item or {}).get("id") or event.get("item_id")
        if key is None and isinstance(index, int):
            key = self.by_index.get(index, f"#{index}")
        key = key or f"#{len(self.slots)}"
        if isinstance(index, int):
            self.by_index.setdefault(index, key)
        return str(key)

    def _slot(self, event: Mapping[str, Any], item: Mapping[str, Any] | None = None
              ) -> dict[str, str]:
        return self.slots.setdefault(self._key(event, item),
                                     {"call_id": "", "name": "", "arguments": ""})

    def _item(self, event: Mapping[str, Any], *, done: bool) -> None:
        item = event.get("item") or {}
        kind = item.get("type")
        if kind == "function_call":
            slot = self._slot(event, item)
            slot["call_id"] = item.get("call_id") or slot["call_id"]
            slot["name"] = item.get("name") or slot["name"]
            if done or item.get("arguments"):
                slot["arguments"] = item.get("arguments") or slot["arguments"]
        elif kind == "reasoning" and done:
            self._reasoned(item)
        elif kind == "message" and done and not self.content:
            self.content.extend(_message_text(item))  # a server that sent no deltas

    def _reasoned(self, item: Mapping[str, Any]) -> None:
        kept = {k: v for k, v in item.items() if k not in ("id", "status")}
        if kept.get("encrypted_content") or kept.get("content"):  # else nothing to carry
            self.reasoning.append(kept)

    def _served(self, response: Mapping[str, Any] | None) -> None:
        response = response or {}
        self.served_model = response.get("model") or self.served_model
        self.served_tier = response.get("service_tier") or self.served_tier

    def _end(self, response: Mapping[str, Any], finish: str) -> None:
        self._served(response)
        self.usage = response.get("usage")
        if not (self.content or self.slots or self.reasoning):  # a server that sent no items
            for index, item in enumerate(response.get("output") or ()):
                self._item({"item": item, "output_index": index}, done=True)
        self.finish = "tool_calls" if finish == "stop" and self.slots else finish

    def result(self) -> Streamed:
        if self.finish is None:
            raise Transient(f"{where(self.route)}: the stream ended without response.completed "
                            f"after {self.pieces} pieces")
        calls = tuple(replace(c, arguments=repair.arguments(c.arguments)) for c in self.calls())
        return Streamed("".join(self.content) or None, calls, self.finish, _usage(self.usage),
                        self.served_model, self.served_tier, tuple(self.reasoning))

    def text(self) -> str:
        return "".join(self.content)

    def calls(self) -> tuple[ToolCallData, ...]:
        return tuple(ToolCallData(c["call_id"] or f"call_{i}", c["name"], c["arguments"])
                     for i, c in enumerate(self.slots.values()))


def _message_text(item: Mapping[str, Any]) -> list[str]:
    return [part.get("text") or "" for part in item.get("content") or ()
            if part.get("type") == "output_text"]


def _usage(u: Mapping[str, Any] | None) -> Usage:
    u = u or {}
    return Usage(
        prompt=u.get("input_tokens") or 0,
        cached=(u.get("input_tokens_details") or {}).get("cached_tokens") or 0,
        output=u.get("output_tokens") or 0,
        reasoning=(u.get("output_tokens_details") or {}).get("reasoning_tokens") or 0,
    )


WIRE = Wire("responses", "/responses", ResponsesRequests, ResponsesFold)
