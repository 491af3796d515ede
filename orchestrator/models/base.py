"""The values every model client shares, whichever wire API it speaks.

``Route`` says where one role's call goes (model, provider, tier, effort, and through them the
wire API); ``Completion`` is a finished reply; ``ModelClient`` is the protocol the session, the
fallback chain, the JSON-tools wrapper and the journal all implement. A ``Wire`` is one API's
request builder and stream folder (``chat.py``, ``responses.py``): the client drives either the
same way, and everything above it sees the same ``Completion``. A message passed to a client is
never changed in place afterwards (a new one replaces it): clients encode each message once.

Reasoning state travels in the session's own history, never on a server: a reply's encrypted
reasoning items come back in ``Completion.reasoning`` and the session keeps them on the
assistant message under ``REASONING``. Only the model that wrote them can read them, so they are
sent back only to that model (``Route.source``), and only over the Responses API.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from orchestrator.config.schema import Api, ModelSpec, Provider
from orchestrator.state import CallRecord, Role

Progress = Callable[[int], None]  # called with the output pieces streamed so far
# makes, for each stream (a retry gets a new one), a check called with the reply's text so far
# after each streamed piece: how many of its characters to keep when the reply should stop there,
# else None (``repeats.RepeatedItem``)
Until = Callable[[], Callable[[str], int | None]]
REASONING = "_reasoning"  # assistant-message key: {"source", "items", "tokens"}; never sent as is


@dataclass(frozen=True)
class Route:
    """Where one role's call goes: the model alias, its provider, the tier and effort."""

    role: Role
    alias: str
    model: ModelSpec
    provider_name: str
    provider: Provider
    tier: str
    service_tier: str | None
    effort: str | None
    step: int = 0  # position in the role's fallback chain
    # replies asked of one call (the Chat Completions ``n``: samples that share one reading of
    # the prompt); the Responses API has no such field and answers one
    choices: int = 1

    @property
    def api(self) -> Api:
        """The wire API: the model's own setting, else its provider's."""
        return self.model.api or self.provider.api

    @property
    def source(self) -> str:
        """``provider/model-id``: who can read the reasoning items this route writes."""
        return f"{self.provider_name}/{self.model.id}"


@dataclass(frozen=True)
class ToolCallData:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Choice:
    """One more reply of a call that asked for several (``Route.choices``): text only."""

    content: str | None
    finish_reason: str | None


@dataclass(frozen=True)
class Completion:
    """A finished model reply; ``reasoning`` is what the session carries to the next turn;
    ``more`` the call's other replies when it asked for several (their tokens are in
    ``record``, which is the whole call's)."""

    content: str | None
    tool_calls: tuple[ToolCallData, ...]
    finish_reason: str | None
    record: CallRecord
    reasoning: Mapping[str, Any] | None = None
    more: tuple[Choice, ...] = ()


class ModelClient(Protocol):
    """Anything that completes a chat for a role: a real client or a fallback chain of them."""

    @property
    def route(self) -> Route: ...

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
        until: Until | None = None,
    ) -> Completion: ...


@dataclass(frozen=True)
class Usage:
    """Token counts as the server reported them, in one shape for both APIs."""

    prompt: int = 0
    cached: int = 0
    output: int = 0  # reasoning included, as both APIs bill it
    reasoning: int = 0


@dataclass
class Streamed:
    """What one wire's stream folded into, before it becomes a ``Completion``."""

    content: str | None
    tool_calls: tuple[ToolCallData, ...]
    finish: str
    usage: Usage
    served_model: str | None
    served_tier: str | None
    reasoning_items: tuple[Mapping[str, Any], ...] = ()
    more: tuple[Choice, ...] = ()


class Fold(Protocol):
    """Folds one wire's stream events, in order, into a ``Streamed`` reply."""

    pieces: int
    first_token: float | None
    served_model: str | None
    served_tier: str | None

    def add(self, event: Mapping[str, Any], now: float) -> bool:
        """Take one event (its JSON); True when it carried output. Raises a ``ModelError`` for
        an error the server reported inside the stream."""
        ...

    def result(self) -> Streamed:
        """The reply; raises ``Transient`` when the stream ended before it finished."""
        ...

    def text(self) -> str:
        """The reply's text so far (what a client's ``until`` check reads)."""
        ...

    def calls(self) -> tuple[ToolCallData, ...]:
        """The native tool calls so far, in the order they streamed, their arguments as sent."""
        ...


class Requests(Protocol):
    """Builds one route's request bodies (JSON bytes), encoding each message once."""

    def body(self, messages: Sequence[Mapping[str, Any]],
             tools: Sequence[Mapping[str, Any]] | None,
             response_format: Mapping[str, Any] | None) -> bytes: ...


@dataclass(frozen=True)
class Wire:
    """One wire API: where to post, how to build a route's requests, how to fold the events."""

    name: Api
    path: str
    requests: Callable[[Route], Requests]
    fold: Callable[[Route], Fold]


def cost_usd(model: ModelSpec, prompt: int, cached: int, output: int) -> float:
    p = model.price
    return ((prompt - cached) * p.input + cached * p.cached_input + output * p.output) / 1e6
