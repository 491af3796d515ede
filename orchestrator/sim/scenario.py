"""What the simulated model server says and how: the scenario schema (models, their timing,
limits and reply sources), the read-only view of a request that computed behaviours get, the
behaviour registry, and the toy tokenizers that turn a request or a reply into token counts.
Nothing here does I/O except ``Scenario.load``; the HTTP side lives in ``server.py``."""

from __future__ import annotations

import json
import math
import re
import tomllib
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from orchestrator.errors import ConfigError

Tokenizer = Literal["chars4", "words", "bytes3"]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ToolCallSpec(_Strict):
    """One tool call in a reply; a ``str`` arguments value is sent verbatim (may be bad JSON)."""

    name: str
    arguments: dict[str, Any] | str = Field(default_factory=dict)
    id: str | None = None

    def arguments_text(self) -> str:
        if isinstance(self.arguments, str):
            return self.arguments
        return json.dumps(self.arguments)


class FaultSpec(_Strict):
    """An HTTP error the server answers instead of a completion, in OpenAI's error shape."""

    status: int
    code: str | None = None
    type: str = "api_error"
    message: str = "Simulated fault"
    param: str | None = None
    headers: dict[str, str] = Field(default_factory=dict)

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.type,
                "param": self.param,
                "code": self.code,
            }
        }


class Reply(_Strict):
    """One assistant turn (or a fault) the server sends back."""

    content: str | None = None
    tool_calls: list[ToolCallSpec] = Field(default_factory=list)
    finish_reason: str | None = None
    error: FaultSpec | None = None
    served_model: str | None = None
    served_tier: str | None = None
    delay_s: float = Field(default=0.0, ge=0, description="Extra wait before this reply.")
    cut_after: int | None = Field(
        default=None, ge=0,
        description="Streamed replies stop after this many delta chunks, with no finish_reason.",
    )
    cut: Literal["close", "end"] = Field(
        default="close",
        description="How a cut stream stops: drop the connection, or end it cleanly ([DONE] on "
        "Chat Completions, no response.completed on the Responses API).",
    )
    stream_error: FaultSpec | None = Field(
        default=None,
        description="An error reported inside a 200 stream, after cut_after deltas (else after "
        "all of them) instead of the finish: an error chunk on Chat Completions, "
        "stream_error_event on the Responses API. A non-streamed request gets it as HTTP error.",
    )
    stream_error_event: Literal["response.failed", "error"] = "response.failed"

    @property
    def effective_finish_reason(self) -> str:
        if self.finish_reason:
            return self.finish_reason
        return "tool_calls" if self.tool_calls else "stop"


ReplyFn = Callable[["ChatRequestView"], Reply]


class ModelBehavior(_Strict):
    """How one model id behaves: timing, limits, overrides and exactly one reply source."""

    delay_s: float = Field(default=0.0, ge=0)
    tokens_per_second: float = Field(default=0.0, ge=0)
    context_window: int | None = Field(default=None, gt=0)
    served_tier: str | None = None
    served_model: str | None = None
    first: list[Reply] = Field(
        default_factory=list,
        description="Replies to this model's first N requests (counted by the server, retries "
        "included) before its reply source takes over: rate-limit bursts, N-times-then-ok faults.",
    )
    quota_tokens: int | None = Field(
        default=None, ge=0,
        description="Tokens (prompt + completion) the model serves; later requests get a 429 "
        "insufficient_quota.",
    )
    quota_headers: dict[str, str] = Field(
        default_factory=dict, description="Headers sent with the insufficient_quota 429."
    )
    reasoning_tokens: int = Field(
        default=0, ge=0,
        description="Tokens each reply reasons for: reported in the usage (and billed as "
        "output); on the Responses API also a reasoning item, encrypted when asked for.",
    )
    apis: tuple[Literal["chat", "responses"], ...] = Field(
        default=("chat", "responses"),
        description="The wire APIs the model answers; the other gets OpenAI's 400 for a model "
        "asked through the wrong API.",
    )
    script: list[Reply] | None = None
    behavior: str | None = None
    respond: ReplyFn | None = Field(default=None, exclude=True)

    @field_validator("script", "first", mode="before")
    @classmethod
    def _plain_strings_are_content(cls, value: Any) -> Any:
        # Lets scenario files write `script = ["hi", "bye"]` for content-only turns.
        if isinstance(value, list):
            return [{"content": v} if isinstance(v, str) else v for v in value]
        return value

    @model_validator(mode="after")
    def _exactly_one_source(self) -> ModelBehavior:
        sources = [n for n in ("script", "behavior", "respond") if getattr(self, n) is not None]
        if len(sources) != 1:
            raise ValueError(
                "set exactly one of script, behavior, respond"
                + (f" (got {', '.join(sources)})" if sources else "")
            )
        if self.script is not None and not self.script:
            raise ValueError("script must hold at least one reply")
        if self.behavior is not None and self.behavior not in BEHAVIORS:
            known = ", ".join(sorted(BEHAVIORS)) or "none"
            raise ValueError(f"unknown behavior {self.behavior!r} (registered: {known})")
        return self

    def reply_for(self, req: ChatRequestView, nth: int = 0) -> Reply:
        """The reply to the model's ``nth`` request (0-based, counted by the server)."""
        if nth < len(self.first):
            return self.first[nth]
        if self.script is not None:
            return self.script[min(req.assistant_turns, len(self.script) - 1)]
        if self.behavior is not None:
            return BEHAVIORS[self.behavior](req)
        assert self.respond is not None
        return self.respond(req)


QUOTA_FAULT = FaultSpec(
    status=429,
    code="insufficient_quota",
    type="insufficient_quota",
    message="You exceeded your current quota, please check your plan and billing details.",
)


class CacheSpec(_Strict):
    """When a repeated prompt prefix counts as cached (``cache.py``); OpenAI's rule by default."""

    enabled: bool = True
    min_tokens: int = Field(1024, ge=0, description="Shorter prompts are never cached.")
    block: int = Field(128, ge=1, description="Cached tokens come in multiples of this.")


class Scenario(_Strict):
    """The whole simulated world: model ids (``"*"`` = default), the server's tokenizer and
    its prompt cache."""

    models: dict[str, ModelBehavior] = Field(default_factory=dict)
    tokenizer: Tokenizer = "chars4"
    cache: CacheSpec = Field(default_factory=CacheSpec)

    def behavior_for(self, model: str) -> ModelBehavior | None:
        return self.models.get(model) or self.models.get("*")

    def model_ids(self) -> list[str]:
        return [m for m in self.models if m != "*"]

    @classmethod
    def load(cls, path: str | Path) -> Scenario:
        path = Path(path)
        try:
            raw = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read scenario: {exc.strerror or exc}") from exc
        try:
            if path.suffix.lower() == ".toml":
                data = tomllib.loads(raw.decode("utf-8"))
            elif path.suffix.lower() == ".json":
                data = json.loads(raw)
            else:
                raise ConfigError(f"{path}: scenario must be a .toml or .json file")
        except (tomllib.TOMLDecodeError, json.JSONDecodeError, UnicodeDecodeError) as exc:
            raise ConfigError(f"{path}: not valid {path.suffix[1:].upper()}: {exc}") from exc
        try:
            return cls.model_validate(data)
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in err['loc']) or '(top level)'}: {err['msg']}"
                for err in exc.errors()
            )
            raise ConfigError(f"{path}: invalid scenario: {problems}") from exc


# --- the request as behaviours see it -------------------------------------------------------


def _text_of(content: Any) -> str:
    """Message content may be a string or a list of parts; only text parts count."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "".join(
            p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text"
        )
    return ""


@dataclass(frozen=True)
class ChatRequestView:
    """A read-only view of one chat completion request body."""

    body: dict[str, Any]
    model: str = ""
    messages: list[dict[str, Any]] = field(default_factory=list)
    tools: list[dict[str, Any]] = field(default_factory=list)
    response_format: dict[str, Any] | None = None
    service_tier: str | None = None
    reasoning_effort: str | None = None

    @classmethod
    def from_body(cls, body: dict[str, Any]) -> ChatRequestView:
        return cls(
            body=body,
            model=str(body.get("model") or ""),
            messages=list(body.get("messages") or []),
            tools=list(body.get("tools") or []),
            response_format=body.get("response_format"),
            service_tier=body.get("service_tier"),
            reasoning_effort=body.get("reasoning_effort"),
        )

    @property
    def tool_names(self) -> list[str]:
        return [t.get("function", {}).get("name", "") for t in self.tools]

    @property
    def assistant_turns(self) -> int:
        return sum(1 for m in self.messages if m.get("role") == "assistant")

    def last_user_text(self) -> str:
        for m in reversed(self.messages):
            if m.get("role") == "user":
                return _text_of(m.get("content"))
        return ""

    def system_text(self) -> str:
        roles = ("system", "developer")
        texts = [_text_of(m.get("content")) for m in self.messages if m.get("role") in roles]
        return "\n".join(texts)

    def tool_results(self) -> list[tuple[str, str | None, str]]:
        names: dict[str, str] = {}
        out: list[tuple[str, str | None, str]] = []
        for m in self.messages:
            for call in m.get("tool_calls") or []:
                names[call.get("id", "")] = call.get("function", {}).get("name", "")
            if m.get("role") == "tool":
                call_id = str(m.get("tool_call_id", ""))
                out.append((call_id, names.get(call_id), _text_of(m.get("content"))))
        return out


# ReplyFn names ChatRequestView, defined only now.
ModelBehavior.model_rebuild()
Scenario.model_rebuild()


# --- behaviour registry ---------------------------------------------------------------------

BEHAVIORS: dict[str, ReplyFn] = {}


def register_behavior(name: str) -> Callable[[ReplyFn], ReplyFn]:
    """Decorator: make ``fn(req) -> Reply`` available to scenarios as ``behavior = name``."""

    def deco(fn: ReplyFn) -> ReplyFn:
        BEHAVIORS[name] = fn
        return fn

    return deco


@register_behavior("echo")
def _echo(req: ChatRequestView) -> Reply:
    return Reply(content=req.last_user_text())


# --- tokenizers -----------------------------------------------------------------------------

_WORD_PIECES = re.compile(r"\w+|[^\w\s]")

_TOKENIZERS: dict[str, Callable[[list[str]], int]] = {
    "chars4": lambda texts: math.ceil(sum(len(t) for t in texts) / 4),
    "words": lambda texts: sum(len(_WORD_PIECES.findall(t)) for t in texts),
    # UTF-8 bytes / 3: denser than chars4 and unlike o200k, so client calibration has work to do.
    "bytes3": lambda texts: math.ceil(sum(len(t.encode("utf-8")) for t in texts) / 3),
}

PER_MESSAGE_TOKENS = 4


def count_text_tokens(text: str, tokenizer: str = "chars4") -> int:
    return _TOKENIZERS[tokenizer]([text])


def count_texts_tokens(texts: list[str], tokenizer: str = "chars4") -> int:
    return _TOKENIZERS[tokenizer](texts)


def count_prompt_tokens(body: dict[str, Any], tokenizer: str = "chars4") -> int:
    """Message contents + tool-call argument strings + tool declarations, plus 4 per message."""
    messages = [m for m in body.get("messages") or [] if isinstance(m, dict)]
    texts: list[str] = []
    for m in messages:
        texts.append(_text_of(m.get("content")))
        for call in m.get("tool_calls") or []:
            args = (call.get("function") or {}).get("arguments")
            if isinstance(args, str):
                texts.append(args)
    if body.get("tools"):
        texts.append(json.dumps(body["tools"]))
    return _TOKENIZERS[tokenizer](texts) + PER_MESSAGE_TOKENS * len(messages)


def count_completion_tokens(reply: Reply, tokenizer: str = "chars4") -> int:
    texts = [reply.content or ""] + [c.arguments_text() for c in reply.tool_calls]
    return _TOKENIZERS[tokenizer](texts)
