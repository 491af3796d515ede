"""Model access: one ``AsyncOpenAI`` per provider, one ``ModelClient`` per role and model.

A client streams every call (usage included), passes the role's ``service_tier`` and
``reasoning_effort``, and returns the reply together with a ``CallRecord``: requested and
served model and tier, tokens, time to first token, tokens/s and cost. SDK retries are off
(``max_retries=0``): one client attempt is one HTTP request, and what to do about an error is
decided from its class (``errors.py``) by the role's ``FallbackClient`` (``fallback.py``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import openai
from openai import AsyncOpenAI

from ..config import ModelSpec, Provider, RoleMap
from ..errors import MissingCredentials
from ..state import CallRecord, Role
from .errors import Transient, classify, is_context_overflow, where

__all__ = ["ClientPool", "Completion", "ModelClient", "OpenAIModelClient", "Route",
           "ToolCallData", "classify", "cost_usd", "is_context_overflow"]

Progress = Callable[[int], None]  # called with the output tokens streamed so far


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


@dataclass(frozen=True)
class ToolCallData:
    id: str
    name: str
    arguments: str


@dataclass(frozen=True)
class Completion:
    """A finished model reply."""

    content: str | None
    tool_calls: tuple[ToolCallData, ...]
    finish_reason: str | None
    record: CallRecord


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
    ) -> Completion: ...


def cost_usd(model: ModelSpec, prompt: int, cached: int, output: int) -> float:
    p = model.price
    return ((prompt - cached) * p.input + cached * p.cached_input + output * p.output) / 1e6


@dataclass
class _Stream:
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

    def tool_calls(self) -> tuple[ToolCallData, ...]:
        return tuple(
            ToolCallData(c["id"] or f"call_{i}", c["name"], c["arguments"])
            for i, c in sorted(self.calls.items())
        )


class OpenAIModelClient:
    """A ``ModelClient`` for one route over an OpenAI-compatible endpoint."""

    def __init__(self, sdk: AsyncOpenAI, route: Route) -> None:
        self.sdk = sdk
        self.route = route

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> Completion:
        r = self.route
        kwargs: dict[str, Any] = {
            "model": r.model.id,
            "messages": list(messages),
            "stream": True,
            "stream_options": {"include_usage": True},
            "max_completion_tokens": r.model.max_output,
            **({"temperature": r.model.temperature} if r.model.temperature is not None else {}),
        }
        if tools:
            kwargs["tools"] = list(tools)
        if response_format:
            kwargs["response_format"] = dict(response_format)
        if r.service_tier:
            kwargs["service_tier"] = r.service_tier
        if r.effort:
            kwargs["reasoning_effort"] = r.effort
        started = time.monotonic()
        acc = _Stream()
        try:
            stream = await self.sdk.chat.completions.create(**kwargs)
            async for chunk in stream:
                if acc.add(chunk, time.monotonic()) and progress is not None:
                    progress(acc.pieces)
        except openai.APIError as exc:
            raise classify(exc, r) from exc
        if acc.finish is None:
            raise Transient(f"{where(r)}: the stream ended without a finish_reason "
                            f"after {acc.pieces} pieces")
        return Completion(
            content="".join(acc.content) or None,
            tool_calls=acc.tool_calls(),
            finish_reason=acc.finish,
            record=self._record(acc, session, started, time.monotonic()),
        )

    def _record(self, acc: _Stream, session: str, started: float, ended: float) -> CallRecord:
        r = self.route
        u = acc.usage
        prompt = getattr(u, "prompt_tokens", 0) or 0
        output = getattr(u, "completion_tokens", 0) or 0
        details = getattr(u, "prompt_tokens_details", None)
        cached = getattr(details, "cached_tokens", 0) or 0
        reasoning = getattr(getattr(u, "completion_tokens_details", None), "reasoning_tokens", 0)
        ttft = None if acc.first_token is None else acc.first_token - started
        gen_time = ended - (acc.first_token or started)
        return CallRecord(
            role=r.role,
            session=session,
            requested_model=r.model.id,
            served_model=acc.served_model,
            requested_tier=r.service_tier,
            served_tier=acc.served_tier,
            effort=r.effort,
            fallback_step=r.step,
            prompt_tokens=prompt,
            cached_tokens=cached,
            output_tokens=output,
            reasoning_tokens=reasoning or 0,
            ttft_s=ttft,
            duration_s=ended - started,
            tokens_per_s=(output / gen_time) if output and gen_time > 0 else None,
            cost_usd=cost_usd(r.model, prompt, cached, output),
        )


class ClientPool:
    """Builds one SDK client per provider and one fallback chain per role session on demand.

    ``ledger`` (a ``QuotaLedger``; in memory when None), ``budget`` (a run ``Budget``),
    ``listeners`` (called with every ``RoutingEvent``) and ``policy`` (a ``RetryPolicy``) are
    shared by every chain the pool builds.
    """

    def __init__(
        self,
        roles: RoleMap,
        env: Mapping[str, str],
        *,
        ledger: Any = None,
        budget: Any = None,
        listeners: Sequence[Callable[[Any], None]] = (),
        policy: Any = None,
    ) -> None:
        from .fallback import RetryPolicy, Routing
        from .quota import QuotaLedger

        self.roles = roles
        self.env = env
        self.routing = Routing(
            ledger=ledger if ledger is not None else QuotaLedger(),
            budget=budget,
            listeners=tuple(listeners),
            policy=policy if policy is not None else RetryPolicy(),
        )
        self._sdks: dict[str, AsyncOpenAI] = {}
        self._unkeyed: set[tuple[str, str]] = set()

    def route(self, role: Role, alias: str, step: int = 0) -> Route:
        spec = self.roles.roles[role]
        model = self.roles.models[alias]
        provider = self.roles.providers[model.provider]
        return Route(
            role=role,
            alias=alias,
            model=model,
            provider_name=model.provider,
            provider=provider,
            tier=spec.tier,
            service_tier=provider.tiers.get(spec.tier),
            effort=spec.effort,
            step=step,
        )

    def check_credentials(self, roles: Sequence[Role]) -> None:
        """Fail early, before any work, when a needed provider has no key."""
        for role in roles:
            provider_name = self.roles.model_for(role).provider
            env_var = self.roles.providers[provider_name].api_key_env
            if not self.env.get(env_var):
                raise MissingCredentials(
                    f"role {role} uses provider {provider_name!r}, whose API key is not set: "
                    f"export {env_var}=... (or try `orchestrate demo`, which needs no key)"
                )

    def sdk(self, provider_name: str) -> AsyncOpenAI:
        if provider_name not in self._sdks:
            provider = self.roles.providers[provider_name]
            key = self.env.get(provider.api_key_env)
            if not key:
                raise MissingCredentials(
                    f"provider {provider_name!r}: export {provider.api_key_env}=... "
                    "(or try `orchestrate demo`, which needs no key)"
                )
            self._sdks[provider_name] = AsyncOpenAI(
                api_key=key, base_url=provider.base_url, max_retries=0, timeout=provider.timeout_s
            )
        return self._sdks[provider_name]

    def client(self, role: Role, alias: str, step: int = 0) -> OpenAIModelClient:
        route = self.route(role, alias, step)
        return OpenAIModelClient(self.sdk(route.provider_name), route)

    def member(self, role: Role, alias: str, step: int = 0) -> ModelClient:
        """One link of a chain: the model's client, speaking JSON tools if the model needs it."""
        from .toolmode import JsonToolsClient

        client = self.client(role, alias, step)
        model = client.route.model
        if model.tools != "json":
            return client
        return JsonToolsClient(client, model.structured, optional=model.tool_args == "all")

    def for_role(self, role: Role) -> ModelClient:
        """A fresh ``FallbackClient`` over ``roles.chain(role)`` (one per session)."""
        from .fallback import FallbackClient

        aliases = self.roles.chain(role)
        usable = [a for i, a in enumerate(aliases) if i == 0 or self._has_key(role, a)]
        chain = [self.member(role, alias, aliases.index(alias)) for alias in usable]
        return FallbackClient(*chain, routing=self.routing)

    def _has_key(self, role: Role, alias: str) -> bool:
        """Fallbacks whose provider has no key are left out of the chain, with a warning."""
        from .routing import RoutingEvent

        provider_name = self.roles.models[alias].provider
        env_var = self.roles.providers[provider_name].api_key_env
        if self.env.get(env_var):
            return True
        if (role, alias) not in self._unkeyed:
            self._unkeyed.add((role, alias))
            event = RoutingEvent("skipped", role, f"role {role}: fallback {alias} left out of "
                                 f"the chain: provider {provider_name!r} has no key (${env_var})")
            for listener in self.routing.listeners:
                listener(event)
        return False

    async def aclose(self) -> None:
        for sdk in self._sdks.values():
            await sdk.close()
        self._sdks.clear()
