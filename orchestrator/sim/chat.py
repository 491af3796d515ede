"""The simulator's Chat Completions wire (``/v1/chat/completions``): what a valid request looks
like, and one reply as OpenAI's ``chat.completion`` object or its stream of chunks."""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from orchestrator.sim.scenario import FaultSpec, Reply

CONTENT_CHUNK_CHARS = 4
ARGS_CHUNK_CHARS = 8
# An SSE frame and its kind: "delta" (paced, counted by cuts), "end" (the finish, never sent by
# a stream cut short or failing) or "meta" (anything else).
Frame = tuple[bytes, Literal["meta", "delta", "end"]]


def pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


def sse(obj: Any, event: str | None = None) -> bytes:
    head = f"event: {event}\n" if event else ""
    return f"{head}data: {json.dumps(obj)}\n\n".encode()


DONE = b"data: [DONE]\n\n"


@dataclass(frozen=True)
class Parsed:
    """A valid request as the scenario sees it: a Chat Completions body whichever API it came
    in by, plus what only the Responses API has (reasoning carried back, whether the client
    asked for encrypted reasoning)."""

    chat: dict[str, Any]
    carried_reasoning: int = 0
    encrypted: bool = False


def parse(body: dict[str, Any]) -> Parsed | FaultSpec:
    """The request itself, once its messages are known to be well formed."""
    messages = body.get("messages")
    if not isinstance(messages, list) or not messages or not all(
            isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
        return FaultSpec(status=400, message="'messages' must be a non-empty array of message "
                         "objects", type="invalid_request_error", param="messages")
    n = body.get("n", 1)
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or not 1 <= n <= 128):
        return FaultSpec(status=400, message=f"Invalid value for 'n': {n!r}; expected an "
                         "integer from 1 to 128.", type="invalid_request_error", param="n")
    return Parsed(body)


def asked(parsed: Parsed) -> int:
    """How many replies the request asks for (Chat Completions' ``n``)."""
    return parsed.chat.get("n") or 1


def overflow(window: int, prompt: int) -> FaultSpec:
    return FaultSpec(
        status=400, message=f"This model's maximum context length is {window} tokens. However, "
        f"your messages resulted in {prompt} tokens. Please reduce the length of the messages.",
        type="invalid_request_error", code="context_length_exceeded", param="messages")


class ChatReply:
    """One reply turned into OpenAI's completion and chunk objects."""

    def __init__(self, reply: Reply, *, model: str, tier: str, prompt: int, completion: int,
                 reasoning: int, request: Parsed, cached: int = 0,
                 more: Sequence[Reply] = ()) -> None:
        body = request.chat
        self.reply, self.model, self.tier = reply, model, tier
        self.more = tuple(more)  # the further replies a request with n > 1 asked for (text)
        self.id = f"chatcmpl-sim{uuid.uuid4().hex[:20]}"
        self.created = int(time.time())
        options = body.get("stream_options") or {}
        self.include_usage = isinstance(options, dict) and bool(options.get("include_usage"))
        self.usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": reasoning, "audio_tokens": 0},
        }
        self.total_tokens = prompt + completion
        self.calls = [
            (c.id or f"call_{uuid.uuid4().hex[:24]}", c.name, c.arguments_text())
            for c in reply.tool_calls
        ]

    def _envelope(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "service_tier": self.tier, "system_fingerprint": "fp_sim"}

    def body(self) -> dict[str, Any]:
        """The non-streamed ``chat.completion``."""
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.content,
                                   "refusal": None}
        if self.calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in self.calls
            ]
        further = [{"index": i, "logprobs": None, "finish_reason": r.effective_finish_reason,
                    "message": {"role": "assistant", "content": r.content, "refusal": None}}
                   for i, r in enumerate(self.more, 1)]
        return {
            **self._envelope("chat.completion"),
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": self.reply.effective_finish_reason}, *further],
            "usage": self.usage,
        }

    def _chunk(self, delta: dict[str, Any], finish: str | None = None, index: int = 0) -> bytes:
        chunk = {
            **self._envelope("chat.completion.chunk"),
            "choices": [{"index": index, "delta": delta, "logprobs": None,
                         "finish_reason": finish}],
        }
        return sse(chunk | ({"usage": None} if self.include_usage else {}))

    def deltas(self) -> list[dict[str, Any]]:
        """The paced deltas after the role chunk: content pieces, then each call's pieces."""
        out: list[dict[str, Any]] = [
            {"content": p} for p in pieces(self.reply.content or "", CONTENT_CHUNK_CHARS)
        ]
        for index, (cid, name, args) in enumerate(self.calls):
            out.append({"tool_calls": [{"index": index, "id": cid, "type": "function",
                                        "function": {"name": name, "arguments": ""}}]})
            out.extend(
                {"tool_calls": [{"index": index, "function": {"arguments": p}}]}
                for p in pieces(args, ARGS_CHUNK_CHARS)
            )
        return out

    def frames(self) -> list[Frame]:
        """The whole stream: role chunk, deltas, finish chunk, usage chunk, ``[DONE]``."""
        out: list[Frame] = [(self._chunk({"role": "assistant", "content": "", "refusal": None}),
                             "meta")]
        out += [(self._chunk(d), "delta") for d in self.deltas()]
        for i, r in enumerate(self.more, 1):  # each further reply's text, after the first's
            out += [(self._chunk({"content": p}, index=i), "delta")
                    for p in pieces(r.content or "", CONTENT_CHUNK_CHARS)]
            out.append((self._chunk({}, r.effective_finish_reason, index=i), "meta"))
        out.append((self._chunk({}, self.reply.effective_finish_reason), "end"))
        if self.include_usage:
            out.append((sse({**self._envelope("chat.completion.chunk"), "choices": [],
                             "usage": self.usage}), "end"))
        return [*out, (DONE, "end")]

    def ended(self) -> list[bytes]:
        """A stream cut short but closed cleanly: ``[DONE]`` with no finish_reason before it."""
        return [DONE]

    def failed(self, fault: FaultSpec, event: str = "error", *, sent: int = 0) -> list[bytes]:
        """An error inside the stream: OpenAI sends the error object as a data chunk."""
        return [sse(fault.body())]
