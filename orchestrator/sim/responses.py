"""The simulator's Responses API wire (``/v1/responses``): a request's input items read back
into a Chat Completions body (so every scenario and behaviour serves both APIs alike), and one
reply as a ``response`` object or its stream of typed events.

Reasoning is simulated statelessly, as OpenAI does with ``store=false``: a model with
``reasoning_tokens`` returns a reasoning item whose ``encrypted_content`` (when the request
``include``s it) names the model and the tokens it stands for. Sent back, such an item counts
towards the prompt, and one written by another model is refused, as OpenAI refuses it.
"""

from __future__ import annotations

import base64
import binascii
import json
import time
import uuid
from collections.abc import Sequence
from typing import Any

from orchestrator.sim.chat import (
    ARGS_CHUNK_CHARS,
    CONTENT_CHUNK_CHARS,
    Frame,
    Parsed,
    pieces,
    sse,
)
from orchestrator.sim.scenario import FaultSpec, Reply

ENCRYPTED = "reasoning.encrypted_content"
_ROLES = ("user", "system", "developer", "assistant")


def _bad(message: str, param: str | None = "input", code: str | None = None) -> FaultSpec:
    return FaultSpec(status=400, message=message, type="invalid_request_error", param=param,
                     code=code)


def seal(model: str, tokens: int) -> str:
    """The simulated ``encrypted_content`` of a reasoning item."""
    raw = json.dumps({"model": model, "tokens": tokens, "nonce": uuid.uuid4().hex[:8]})
    return base64.urlsafe_b64encode(raw.encode()).decode()


def unseal(token: Any) -> dict[str, Any] | None:
    try:
        data = json.loads(base64.urlsafe_b64decode(str(token).encode()))
    except (binascii.Error, ValueError):
        return None
    return data if isinstance(data, dict) else None


def _text(content: Any) -> str | None:
    if isinstance(content, str):
        return content
    if isinstance(content, list) and all(isinstance(p, dict) for p in content):
        return "".join(str(p.get("text", "")) for p in content
                       if p.get("type") in ("input_text", "output_text", "text"))
    return None


class _Reader:
    """Input items -> chat messages, checking what OpenAI checks."""

    def __init__(self, model: str) -> None:
        self.model = model
        self.messages: list[dict[str, Any]] = []
        self.calls: set[str] = set()
        self.reasoning = 0
        self.open_turn = False  # the last message is an assistant turn that calls may join

    def item(self, i: int, item: Any) -> FaultSpec | None:
        if not isinstance(item, dict):
            return _bad(f"Invalid type for 'input[{i}]': expected an object.")
        kind = item.get("type", "message")
        handler = {"message": self._message, "function_call": self._call,
                   "function_call_output": self._output, "reasoning": self._reasoning}.get(kind)
        if handler is None:
            return _bad(f"Invalid value: '{kind}'. Supported values are: 'message', "
                        "'function_call', 'function_call_output' and 'reasoning'.",
                        f"input[{i}].type")
        return handler(i, item)

    def _message(self, i: int, item: dict[str, Any]) -> FaultSpec | None:
        role, text = item.get("role"), _text(item.get("content"))
        if role not in _ROLES or text is None:
            return _bad(f"Invalid message at 'input[{i}]': it needs a role ({', '.join(_ROLES)}) "
                        "and a string or a list of text parts as content.", f"input[{i}]")
        self.messages.append({"role": role, "content": text})
        self.open_turn = role == "assistant"
        return None

    def _call(self, i: int, item: dict[str, Any]) -> FaultSpec | None:
        call_id, name, args = item.get("call_id"), item.get("name"), item.get("arguments")
        if not all(isinstance(v, str) and v for v in (call_id, name)) or not isinstance(args, str):
            return _bad(f"Missing required parameter: 'input[{i}].call_id', 'name' or "
                        "'arguments'.", f"input[{i}]")
        call = {"id": call_id, "type": "function",
                "function": {"name": name, "arguments": args}}
        if not self.open_turn:
            self.messages.append({"role": "assistant", "content": None})
            self.open_turn = True
        self.messages[-1].setdefault("tool_calls", []).append(call)
        self.calls.add(str(call_id))
        return None

    def _output(self, i: int, item: dict[str, Any]) -> FaultSpec | None:
        call_id, text = item.get("call_id"), _text(item.get("output"))
        if call_id not in self.calls:
            return _bad(f"No tool call found for function call output with call_id {call_id}.")
        self.messages.append({"role": "tool", "tool_call_id": call_id, "content": text or ""})
        self.open_turn = False
        return None

    def _reasoning(self, i: int, item: dict[str, Any]) -> FaultSpec | None:
        sealed = unseal(item.get("encrypted_content"))
        if sealed is None or sealed.get("model") != self.model:
            return _bad(f"The encrypted content for item input[{i}] could not be verified.",
                        code="invalid_encrypted_content")
        self.reasoning += int(sealed.get("tokens") or 0)
        return None


def _tools(tools: Any) -> list[dict[str, Any]] | FaultSpec:
    out = []
    for i, tool in enumerate(tools or []):
        if not isinstance(tool, dict) or tool.get("type") != "function":
            return _bad(f"Invalid value for 'tools[{i}].type'.", f"tools[{i}].type")
        if not isinstance(tool.get("name"), str):  # e.g. a Chat Completions tool sent as is
            return _bad(f"Missing required parameter: 'tools[{i}].name'.", f"tools[{i}].name",
                        "missing_required_parameter")
        fn = {k: tool[k] for k in ("name", "description", "parameters", "strict") if k in tool}
        out.append({"type": "function", "function": fn})
    return out


def _response_format(body: dict[str, Any]) -> dict[str, Any] | None:
    fmt = ((body.get("text") or {}).get("format")) if isinstance(body.get("text"), dict) else None
    if isinstance(fmt, dict) and fmt.get("type") == "json_schema":
        spec = {k: v for k, v in fmt.items() if k != "type"}
        return {"type": "json_schema", "json_schema": spec}
    if isinstance(fmt, dict) and fmt.get("type") == "json_object":
        return {"type": "json_object"}
    chat_style = body.get("response_format")  # what llama.cpp's /v1/responses reads instead
    return chat_style if isinstance(chat_style, dict) else None


def parse(body: dict[str, Any]) -> Parsed | FaultSpec:
    """A Responses request as the Chat Completions body the scenario reads."""
    reader = _Reader(str(body.get("model")))
    if isinstance(body.get("instructions"), str):
        reader.messages.append({"role": "system", "content": body["instructions"]})
    raw = body.get("input")
    items = [{"role": "user", "content": raw}] if isinstance(raw, str) else raw
    if not isinstance(items, list) or not items:
        return _bad("'input' must be a string or a non-empty array of input items.")
    for i, item in enumerate(items):
        fault = reader.item(i, item)
        if fault is not None:
            return fault
    tools = _tools(body.get("tools"))
    if isinstance(tools, FaultSpec):
        return tools
    effort = (body.get("reasoning") or {}).get("effort") if isinstance(
        body.get("reasoning"), dict) else None
    chat = {"model": body.get("model"), "messages": reader.messages, "tools": tools,
            "response_format": _response_format(body), "service_tier": body.get("service_tier"),
            "reasoning_effort": effort, "stream": body.get("stream")}
    return Parsed({k: v for k, v in chat.items() if v not in (None, [])},
                  carried_reasoning=reader.reasoning,
                  encrypted=ENCRYPTED in (body.get("include") or ()))


def overflow(window: int, prompt: int) -> FaultSpec:
    """OpenAI's Responses API says it without numbers."""
    return _bad("Your input exceeds the context window of this model. Please adjust your input "
                "and try again.", code="context_length_exceeded")


class ResponsesReply:
    """One reply as a ``response`` object and as the events that stream it."""

    def __init__(self, reply: Reply, *, model: str, tier: str, prompt: int, completion: int,
                 reasoning: int, request: Parsed, cached: int = 0,
                 more: Sequence[Reply] = ()) -> None:
        assert not more, "the Responses API has no n: a request asks one reply"
        self.reply, self.model, self.tier = reply, model, tier
        self.id = f"resp_sim{uuid.uuid4().hex[:24]}"
        self.created = int(time.time())
        self.tools = [{"type": "function", **t["function"]} for t in request.chat.get("tools", [])]
        self.usage = {
            "input_tokens": prompt, "output_tokens": completion, "total_tokens": prompt + completion,
            "input_tokens_details": {"cached_tokens": cached, "cache_write_tokens": 0},
            "output_tokens_details": {"reasoning_tokens": reasoning},
        }
        self.total_tokens = prompt + completion
        self.incomplete = reply.effective_finish_reason == "length"
        self.items: list[dict[str, Any]] = []
        if reasoning:
            item = {"id": f"rs_{uuid.uuid4().hex[:24]}", "type": "reasoning", "summary": []}
            if request.encrypted:
                item["encrypted_content"] = seal(str(request.chat.get("model")), reasoning)
            self.items.append(item)
        if reply.content:
            self.items.append({"id": f"msg_{uuid.uuid4().hex[:24]}", "type": "message",
                               "role": "assistant", "status": "completed", "content": [
                                   {"type": "output_text", "text": reply.content,
                                    "annotations": [], "logprobs": []}]})
        for c in reply.tool_calls:
            self.items.append({"id": f"fc_{uuid.uuid4().hex[:24]}", "type": "function_call",
                               "status": "completed", "name": c.name,
                               "call_id": c.id or f"call_{uuid.uuid4().hex[:24]}",
                               "arguments": c.arguments_text()})
        self.seq = 0

    def _response(self, status: str, output: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
        done = status in ("completed", "incomplete", "failed")
        return {"id": self.id, "object": "response", "created_at": self.created, "status": status,
                "model": self.model, "output": output, "parallel_tool_calls": True,
                "tool_choice": "auto", "tools": self.tools, "service_tier": self.tier,
                "usage": self.usage if done else None, "error": None,
                "incomplete_details": None, **extra}

    def body(self) -> dict[str, Any]:
        """The non-streamed ``response``."""
        if self.incomplete:
            return self._response("incomplete", self.items,
                                  incomplete_details={"reason": "max_output_tokens"})
        return self._response("completed", self.items)

    def _event(self, kind: str, **data: Any) -> bytes:
        self.seq += 1
        return sse({"type": kind, "sequence_number": self.seq - 1, **data}, kind)

    def frames(self) -> list[Frame]:
        """created, in_progress, each output item (its deltas paced), then completed."""
        out: list[Frame] = [(self._event("response.created",
                                         response=self._response("in_progress", [])), "meta"),
                            (self._event("response.in_progress",
                                         response=self._response("in_progress", [])), "meta")]
        for index, item in enumerate(self.items):
            out += self._item_frames(index, item)
        final = self.body()
        kind = "response.incomplete" if self.incomplete else "response.completed"
        return [*out, (self._event(kind, response=final), "end")]

    def _item_frames(self, index: int, item: dict[str, Any]) -> list[Frame]:
        at = {"output_index": index}
        kind = item["type"]
        if kind == "reasoning":
            return [(self._event("response.output_item.added", item=item, **at), "meta"),
                    (self._event("response.output_item.done", item=item, **at), "meta")]
        ref = {"item_id": item["id"], **at}
        if kind == "message":
            text = item["content"][0]["text"]
            part = {"type": "output_text", "text": "", "annotations": [], "logprobs": []}
            added = {**item, "status": "in_progress", "content": []}
            return [(self._event("response.output_item.added", item=added, **at), "meta"),
                    (self._event("response.content_part.added", content_index=0, part=part,
                                 **ref), "meta"),
                    *[(self._event("response.output_text.delta", content_index=0, delta=p,
                                   logprobs=[], **ref), "delta")
                      for p in pieces(text, CONTENT_CHUNK_CHARS)],
                    (self._event("response.output_text.done", content_index=0, text=text,
                                 logprobs=[], **ref), "meta"),
                    (self._event("response.content_part.done", content_index=0,
                                 part={**part, "text": text}, **ref), "meta"),
                    (self._event("response.output_item.done", item=item, **at), "meta")]
        added = {**item, "status": "in_progress", "arguments": ""}
        return [(self._event("response.output_item.added", item=added, **at), "meta"),
                *[(self._event("response.function_call_arguments.delta", delta=p, **ref), "delta")
                  for p in pieces(item["arguments"], ARGS_CHUNK_CHARS)],
                (self._event("response.function_call_arguments.done",
                             arguments=item["arguments"], **ref), "meta"),
                (self._event("response.output_item.done", item=item, **at), "meta")]

    def ended(self) -> list[bytes]:
        """A stream cut short but closed cleanly: no ``response.completed``."""
        return []

    def failed(self, fault: FaultSpec, event: str = "response.failed", *, sent: int = 0
               ) -> list[bytes]:
        """An error inside the stream, after ``sent`` events: ``response.failed`` or an
        ``error`` event."""
        self.seq = sent
        if event == "error":
            return [self._event("error", code=fault.code, message=fault.message,
                                param=fault.param)]
        error = {"code": fault.code or "server_error", "message": fault.message}
        return [self._event("response.failed", response=self._response("failed", [],
                                                                        error=error))]
