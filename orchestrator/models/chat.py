"""The Chat Completions wire (``/v1/chat/completions``): the request and the stream fold.

The session's history is already in this API's message shape; the only thing taken out is the
reasoning the Responses API carries (``REASONING``), which no Chat Completions server reads.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from orchestrator.models import repair
from orchestrator.models.base import (
    REASONING,
    Choice,
    Route,
    Streamed,
    ToolCallData,
    Usage,
    Wire,
)
from orchestrator.models.encode import Encoded, body, dumps, dumps_masked
from orchestrator.models.errors import Transient, where


class ChatRequests:
    """Builds one route's ``/chat/completions`` bodies, each message encoded once."""

    def __init__(self, route: Route) -> None:
        self.route = route
        self._messages = Encoded(lambda m: dumps_masked(_plain(m)))
        self._tools = Encoded(dumps)

    def body(self, messages: Sequence[Mapping[str, Any]],
             tools: Sequence[Mapping[str, Any]] | None,
             response_format: Mapping[str, Any] | None) -> bytes:
        """The JSON body of one streamed call."""
        route, model = self.route, self.route.model
        lists = {"messages": self._messages.joined(messages)}
        rest: dict[str, Any] = {
            "model": model.id,
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_completion_tokens": model.max_output,
        }
        if model.temperature is not None:
            rest["temperature"] = model.temperature
        if route.choices > 1:
            rest["n"] = route.choices
        if tools:
            lists["tools"] = self._tools.joined(tools)
        if response_format:
            rest["response_format"] = dict(response_format)
        if route.service_tier:
            rest["service_tier"] = route.service_tier
        if route.effort:
            rest["reasoning_effort"] = route.effort
        return body(lists, rest)


def _plain(message: Mapping[str, Any]) -> Mapping[str, Any]:
    if REASONING not in message:
        return message
    return {k: v for k, v in message.items() if k != REASONING}


@dataclass
class ChatFold:
    """Folds ``chat.completion.chunk`` events (their JSON); the last one carries the usage."""

    route: Route
    content: list[str] = field(default_factory=list)
    slots: dict[int, dict[str, Any]] = field(default_factory=dict)  # tool calls, by index
    finish: str | None = None
    usage: Mapping[str, Any] | None = None
    served_model: str | None = None
    served_tier: str | None = None
    first_token: float | None = None
    pieces: int = 0
    # the other replies of a call that asked for several (``n``), by their index
    other_text: dict[int, list[str]] = field(default_factory=dict)
    other_finish: dict[int, str] = field(default_factory=dict)

    def add(self, chunk: Mapping[str, Any], now: float) -> bool:
        """Fold one chunk (its JSON) in; True when it carried output (for time to first token)."""
        self.served_model = chunk.get("model") or self.served_model
        self.served_tier = chunk.get("service_tier") or self.served_tier
        if chunk.get("usage"):
            self.usage = chunk["usage"]
        out = False
        for choice in chunk.get("choices") or ():
            out = self._choice(choice) or out
        if out:
            self.pieces += 1
            if self.first_token is None:
                self.first_token = now
        return out

    def _choice(self, choice: Mapping[str, Any]) -> bool:
        index = choice.get("index") or 0
        delta = choice.get("delta") or {}
        if index:  # another reply of the same call: its text and finish, no tool calls
            if choice.get("finish_reason"):
                self.other_finish[index] = choice["finish_reason"]
            if delta.get("content"):
                self.other_text.setdefault(index, []).append(delta["content"])
                return True
            return False
        self.finish = choice.get("finish_reason") or self.finish
        out = False
        if delta.get("content"):
            self.content.append(delta["content"])
            out = True
        for tc in delta.get("tool_calls") or ():
            slot = self.slots.setdefault(tc.get("index") or 0,
                                         {"id": "", "name": "", "arguments": ""})
            slot["id"] = tc.get("id") or slot["id"]
            fn = tc.get("function")
            if fn:
                slot["name"] += fn.get("name") or ""
                slot["arguments"] += fn.get("arguments") or ""
            out = True
        return out

    def result(self) -> Streamed:
        if self.finish is None:
            raise Transient(f"{where(self.route)}: the stream ended without a finish_reason "
                            f"after {self.pieces} pieces")
        calls = tuple(replace(c, arguments=repair.arguments(c.arguments)) for c in self.calls())
        # another reply cut off without its finish is left out: it ended mid-answer
        more = tuple(Choice("".join(self.other_text.get(i, ())) or None, finish)
                     for i, finish in sorted(self.other_finish.items()))
        return Streamed("".join(self.content) or None, calls, self.finish, _usage(self.usage),
                        self.served_model, self.served_tier, more=more)

    def text(self) -> str:
        return "".join(self.content)

    def calls(self) -> tuple[ToolCallData, ...]:
        return tuple(ToolCallData(c["id"] or f"call_{i}", c["name"], c["arguments"])
                     for i, c in sorted(self.slots.items()))


def _usage(u: Mapping[str, Any] | None) -> Usage:
    u = u or {}
    return Usage(
        prompt=u.get("prompt_tokens") or 0,
        cached=(u.get("prompt_tokens_details") or {}).get("cached_tokens") or 0,
        output=u.get("completion_tokens") or 0,
        reasoning=(u.get("completion_tokens_details") or {}).get("reasoning_tokens") or 0,
    )


WIRE = Wire("chat", "/chat/completions", ChatRequests, ChatFold)
