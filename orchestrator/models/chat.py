"""The Chat Completions wire (``/v1/chat/completions``): the request and the stream fold.

The session's history is already in this API's message shape; the only thing taken out is the
reasoning the Responses API carries (``REASONING``), which no Chat Completions server reads.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .base import REASONING, Route, Streamed, ToolCallData, Usage, Wire
from .errors import Transient, where

if TYPE_CHECKING:
    from openai import AsyncOpenAI


def request(route: Route, messages: Sequence[Mapping[str, Any]],
            tools: Sequence[Mapping[str, Any]] | None,
            response_format: Mapping[str, Any] | None) -> dict[str, Any]:
    """The ``chat.completions.create`` arguments of one streamed call."""
    model = route.model
    kwargs: dict[str, Any] = {
        "model": model.id,
        "messages": [_plain(m) for m in messages],
        "stream": True,
        "stream_options": {"include_usage": True},
        "max_completion_tokens": model.max_output,
    }
    if model.temperature is not None:
        kwargs["temperature"] = model.temperature
    if tools:
        kwargs["tools"] = list(tools)
    if response_format:
        kwargs["response_format"] = dict(response_format)
    if route.service_tier:
        kwargs["service_tier"] = route.service_tier
    if route.effort:
        kwargs["reasoning_effort"] = route.effort
    return kwargs


def _plain(message: Mapping[str, Any]) -> Mapping[str, Any]:
    if REASONING not in message:
        return message
    return {k: v for k, v in message.items() if k != REASONING}


async def open_stream(sdk: AsyncOpenAI, kwargs: dict[str, Any]) -> AsyncIterator[Any]:
    return await sdk.chat.completions.create(**kwargs)


@dataclass
class ChatFold:
    """Folds ``chat.completion.chunk`` objects; the last one carries the usage."""

    route: Route
    content: list[str] = field(default_factory=list)
    calls: dict[int, dict[str, Any]] = field(default_factory=dict)
    finish: str | None = None
    usage: Any = None
    served_model: str | None = None
    served_tier: str | None = None
    first_token: float | None = None
    pieces: int = 0

    def add(self, chunk: Any, now: float) -> bool:
        """Fold one chunk in; True when it carried output (for time to first token)."""
        self.served_model = chunk.model or self.served_model
        self.served_tier = getattr(chunk, "service_tier", None) or self.served_tier
        if chunk.usage:
            self.usage = chunk.usage
        if not chunk.choices:
            return False
        choice = chunk.choices[0]
        self.finish = choice.finish_reason or self.finish
        delta = choice.delta
        out = False
        if delta.content:
            self.content.append(delta.content)
            out = True
        for tc in delta.tool_calls or ():
            slot = self.calls.setdefault(tc.index, {"id": "", "name": "", "arguments": ""})
            slot["id"] = tc.id or slot["id"]
            if tc.function is not None:
                slot["name"] += tc.function.name or ""
                slot["arguments"] += tc.function.arguments or ""
            out = True
        if out:
            self.pieces += 1
            if self.first_token is None:
                self.first_token = now
        return out

    def result(self) -> Streamed:
        if self.finish is None:
            raise Transient(f"{where(self.route)}: the stream ended without a finish_reason "
                            f"after {self.pieces} pieces")
        calls = tuple(ToolCallData(c["id"] or f"call_{i}", c["name"], c["arguments"])
                      for i, c in sorted(self.calls.items()))
        return Streamed("".join(self.content) or None, calls, self.finish, _usage(self.usage),
                        self.served_model, self.served_tier)


def _usage(u: Any) -> Usage:
    details = getattr(u, "prompt_tokens_details", None)
    out_details = getattr(u, "completion_tokens_details", None)
    return Usage(
        prompt=getattr(u, "prompt_tokens", 0) or 0,
        cached=getattr(details, "cached_tokens", 0) or 0,
        output=getattr(u, "completion_tokens", 0) or 0,
        reasoning=getattr(out_details, "reasoning_tokens", 0) or 0,
    )


WIRE = Wire("chat", request, open_stream, ChatFold)
