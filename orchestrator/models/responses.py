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

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .base import REASONING, Route, Streamed, ToolCallData, Usage, Wire
from .errors import Transient, stream_error, where

if TYPE_CHECKING:
    from openai import AsyncOpenAI

ENCRYPTED = "reasoning.encrypted_content"


def request(route: Route, messages: Sequence[Mapping[str, Any]],
            tools: Sequence[Mapping[str, Any]] | None,
            response_format: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``responses.create`` arguments of one streamed, stateless call."""
    model = route.model
    kwargs: dict[str, Any] = {
        "model": model.id,
        "input": to_input(messages, route.source),
        "stream": True,
        "store": False,
        "max_output_tokens": model.max_output,
    }
    if model.temperature is not None:
        kwargs["temperature"] = model.temperature
    if tools:
        kwargs["tools"] = [function_tool(t) for t in tools]
    if response_format:
        if route.provider.responses_format == "response_format":
            kwargs["extra_body"] = {"response_format": dict(response_format)}
        else:
            kwargs["text"] = {"format": text_format(response_format)}
    if route.service_tier:
        kwargs["service_tier"] = route.service_tier
    if route.effort:
        kwargs["reasoning"] = {"effort": route.effort}
        kwargs["include"] = [ENCRYPTED]
    return kwargs


def to_input(messages: Sequence[Mapping[str, Any]], source: str) -> list[dict[str, Any]]:
    """Chat-shaped messages as Responses input items; reasoning only for the model that wrote it."""
    items: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role == "assistant":
            items.extend(_carried(m.get(REASONING), source))
            text = _text(m.get("content"))
            if text:
                items.append({"type": "message", "role": "assistant",
                              "content": [{"type": "output_text", "text": text}]})
            for call in m.get("tool_calls") or ():
                fn = call.get("function") or {}
                items.append({"type": "function_call", "call_id": str(call.get("id", "")),
                              "name": fn.get("name") or "", "arguments": fn.get("arguments") or ""})
        elif role == "tool":
            items.append({"type": "function_call_output", "call_id": str(m.get("tool_call_id", "")),
                          "output": _text(m.get("content"))})
        else:
            items.append({"type": "message", "role": role, "content": _text(m.get("content"))})
    return items


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


async def open_stream(sdk: AsyncOpenAI, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
    return await sdk.responses.create(**kwargs)


@dataclass
class ResponsesFold:
    """Folds Responses stream events. Tolerant of servers that send fewer fields than OpenAI
    (llama.cpp sends no ``output_index`` or ``sequence_number``): deltas are matched to their
    item by ``item_id``, else by ``output_index``."""

    route: Route
    content: list[str] = field(default_factory=list)
    calls: dict[str, dict[str, str]] = field(default_factory=dict)
    reasoning: list[dict[str, Any]] = field(default_factory=list)
    by_index: dict[int, str] = field(default_factory=dict)
    finish: str | None = None
    usage: Any = None
    served_model: str | None = None
    served_tier: str | None = None
    first_token: float | None = None
    pieces: int = 0

    def add(self, event: Any, now: float) -> bool:
        kind = getattr(event, "type", None)
        if kind == "response.output_text.delta":
            self.content.append(getattr(event, "delta", "") or "")
            return self._piece(now)
        if kind == "response.function_call_arguments.delta":
            self._slot(event)["arguments"] += getattr(event, "delta", "") or ""
            return self._piece(now)
        if kind == "response.function_call_arguments.done":
            if isinstance(getattr(event, "arguments", None), str):
                self._slot(event)["arguments"] = event.arguments
        elif kind in ("response.output_item.added", "response.output_item.done"):
            self._item(event, done=kind.endswith("done"))
        elif kind in ("response.created", "response.in_progress", "response.queued"):
            self._served(getattr(event, "response", None))
        elif kind == "response.completed":
            self._end(event.response, "stop")
        elif kind == "response.incomplete":
            details = getattr(event.response, "incomplete_details", None)
            reason = getattr(details, "reason", None)
            self._end(event.response, "length" if reason == "max_output_tokens" else "content_filter")
        elif kind == "response.failed":
            error = getattr(event.response, "error", None)
            raise stream_error(self.route, getattr(error, "code", None),
                               getattr(error, "message", None) or "the response failed")
        elif kind == "error":
            raise stream_error(self.route, getattr(event, "code", None),
                               getattr(event, "message", None) or "error event in the stream")
        return False

    def _piece(self, now: float) -> bool:
        self.pieces += 1
        if self.first_token is None:
            self.first_token = now
        return True

    def _key(self, event: Any, item: Any = None) -> str:
        index = getattr(event, "output_index", None)
        key = getattr(item, "id", None) or getattr(event, "item_id", None)
        if key is None and isinstance(index, int):
            key = self.by_index.get(index, f"#{index}")
        key = key or f"#{len(self.calls)}"
        if isinstance(index, int):
            self.by_index.setdefault(index, key)
        return key

    def _slot(self, event: Any, item: Any = None) -> dict[str, str]:
        return self.calls.setdefault(self._key(event, item),
                                     {"call_id": "", "name": "", "arguments": ""})

    def _item(self, event: Any, *, done: bool) -> None:
        item = getattr(event, "item", None)
        kind = getattr(item, "type", None)
        if kind == "function_call":
            slot = self._slot(event, item)
            slot["call_id"] = getattr(item, "call_id", None) or slot["call_id"]
            slot["name"] = getattr(item, "name", None) or slot["name"]
            if done or getattr(item, "arguments", None):
                slot["arguments"] = getattr(item, "arguments", None) or slot["arguments"]
        elif kind == "reasoning" and done:
            self._reasoned(item)
        elif kind == "message" and done and not self.content:
            self.content.extend(_message_text(item))  # a server that sent no deltas

    def _reasoned(self, item: Any) -> None:
        data = item.to_dict() if hasattr(item, "to_dict") else dict(item)
        kept = {k: v for k, v in data.items() if k not in ("id", "status")}
        if kept.get("encrypted_content") or kept.get("content"):  # else nothing to carry
            self.reasoning.append(kept)

    def _served(self, response: Any) -> None:
        self.served_model = getattr(response, "model", None) or self.served_model
        self.served_tier = getattr(response, "service_tier", None) or self.served_tier

    def _end(self, response: Any, finish: str) -> None:
        self._served(response)
        self.usage = getattr(response, "usage", None)
        if not (self.content or self.calls or self.reasoning):  # a server that sent no items
            for index, item in enumerate(getattr(response, "output", None) or ()):
                self._item(_Done(item, index), done=True)
        self.finish = "tool_calls" if finish == "stop" and self.calls else finish

    def result(self) -> Streamed:
        if self.finish is None:
            raise Transient(f"{where(self.route)}: the stream ended without response.completed "
                            f"after {self.pieces} pieces")
        calls = tuple(ToolCallData(c["call_id"] or f"call_{i}", c["name"], c["arguments"])
                      for i, c in enumerate(self.calls.values()))
        return Streamed("".join(self.content) or None, calls, self.finish, _usage(self.usage),
                        self.served_model, self.served_tier, tuple(self.reasoning))


@dataclass(frozen=True)
class _Done:
    """An output item of a final response, seen as if its ``output_item.done`` had arrived."""

    item: Any
    output_index: int


def _message_text(item: Any) -> list[str]:
    return [getattr(part, "text", "") or "" for part in getattr(item, "content", None) or ()
            if getattr(part, "type", None) == "output_text"]


def _usage(u: Any) -> Usage:
    return Usage(
        prompt=getattr(u, "input_tokens", 0) or 0,
        cached=getattr(getattr(u, "input_tokens_details", None), "cached_tokens", 0) or 0,
        output=getattr(u, "output_tokens", 0) or 0,
        reasoning=getattr(getattr(u, "output_tokens_details", None), "reasoning_tokens", 0) or 0,
    )


WIRE = Wire("responses", request, open_stream, ResponsesFold)
