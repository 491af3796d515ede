"""The client pool of a run: one SDK client per provider, one fallback chain per role session.

A chain (``fallback.FallbackClient``) holds one client per model of the role's chain in the role
map (``client.OpenAIModelClient``, wrapped in ``toolmode.JsonToolsClient`` for a model without
native tool calls, in ``loops.NativeToolsClient`` for one with them); every chain of a pool
shares its ``Routing``: the quota ledger, the run's budget, the listeners and the retry policy.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from openai import AsyncOpenAI

from orchestrator.config.schema import RoleMap
from orchestrator.errors import MissingCredentials
from orchestrator.models.base import ModelClient, Route
from orchestrator.models.budget import Budget
from orchestrator.models.client import OpenAIModelClient, provider_sdk
from orchestrator.models.fallback import FallbackClient, RetryPolicy, Routing
from orchestrator.models.keys import check_credentials
from orchestrator.models.loops import NativeToolsClient
from orchestrator.models.quota import Ledger, QuotaLedger
from orchestrator.models.routing import RoutingEvent, RoutingListener
from orchestrator.models.toolmode import JsonToolsClient
from orchestrator.state import Role

__all__ = ["ClientPool"]


class ClientPool:
    """Builds one SDK client per provider and one fallback chain per role session on demand.

    ``ledger`` (a quota ``Ledger``; an in-memory one when None), ``budget`` (a run ``Budget``),
    ``listeners`` (called with every ``RoutingEvent``) and ``policy`` (a ``RetryPolicy``; by
    default the role map's ``[run]`` model_attempts and retry waits) are shared by every chain
    the pool builds.
    """

    def __init__(
        self,
        roles: RoleMap,
        env: Mapping[str, str],
        *,
        ledger: Ledger | None = None,
        budget: Budget | None = None,
        listeners: Sequence[RoutingListener] = (),
        policy: RetryPolicy | None = None,
    ) -> None:
        self.roles = roles
        self.env = env
        self.routing = Routing(
            ledger=ledger if ledger is not None else QuotaLedger(),
            budget=budget,
            listeners=tuple(listeners),
            policy=policy if policy is not None else RetryPolicy(
                attempts=roles.run.model_attempts, base_s=roles.run.retry_backoff_s,
                max_wait_s=roles.run.retry_max_wait_s),
        )
        self._sdks: dict[str, AsyncOpenAI] = {}
        self._unkeyed: set[tuple[str, str]] = set()

    def route(self, role: Role, alias: str, step: int = 0, *,
              temperature: float | None = None, max_output: int | None = None,
              choices: int = 1) -> Route:
        spec = self.roles.roles[role]
        model = self.roles.models[alias]
        if temperature is not None:  # a racing candidate's own sampling (agentstep's race)
            model = model.model_copy(update={"temperature": temperature})
        if max_output is not None and max_output < model.max_output:  # a short reply's cap
            model = model.model_copy(update={"max_output": max_output})
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
            choices=choices,  # the chat wire asks for them (n); the Responses wire cannot
        )

    def check_credentials(self, roles: Sequence[Role]) -> None:
        """Fail early, before any work, when a needed provider has no key."""
        check_credentials(self.roles, self.env, roles)

    def sdk(self, provider_name: str) -> AsyncOpenAI:
        if provider_name not in self._sdks:
            provider = self.roles.providers[provider_name]
            key = self.env.get(provider.api_key_env)
            if not key:
                raise MissingCredentials(
                    f"provider {provider_name!r}: export {provider.api_key_env}=... "
                    "(or try `orchestrate demo`, which needs no key)"
                )
            self._sdks[provider_name] = provider_sdk(provider, key)
        return self._sdks[provider_name]

    def client(self, role: Role, alias: str, step: int = 0, *,
               temperature: float | None = None, max_output: int | None = None,
               choices: int = 1) -> OpenAIModelClient:
        route = self.route(role, alias, step, temperature=temperature, max_output=max_output,
                           choices=choices)
        return OpenAIModelClient(self.sdk(route.provider_name), route)

    def member(self, role: Role, alias: str, step: int = 0, *,
               temperature: float | None = None, max_output: int | None = None,
               choices: int = 1) -> ModelClient:
        """One link of a chain: the model's client, speaking JSON tools if the model needs it."""
        client = self.client(role, alias, step, temperature=temperature, max_output=max_output,
                             choices=choices)
        model = client.route.model
        if model.tools != "json":
            return NativeToolsClient(client)
        return JsonToolsClient(client, model.structured, optional=model.tool_args == "all")

    def for_role(self, role: Role, *, temperature: float | None = None, start: int = 0,
                 max_output: int | None = None, choices: int = 1) -> ModelClient:
        """A fresh ``FallbackClient`` over ``roles.chain(role)`` (one per session), from its
        model at ``start`` on (a build's ``next_model`` rung); ``temperature`` overrides every
        chain model's (a racing candidate's or a sample's sampling), ``max_output`` lowers
        each one's reply cap (the one-line request's, ``builder.line_max_output``), ``choices``
        asks each call for that many replies (``builder.sample_batch``; chat models only)."""
        aliases = self.roles.chain(role)
        usable = [a for i, a in enumerate(aliases)
                  if i == start or (i > start and self._has_key(role, a))]
        chain = [self.member(role, alias, aliases.index(alias), temperature=temperature,
                             max_output=max_output, choices=choices) for alias in usable]
        return FallbackClient(*chain, routing=self.routing)

    def _has_key(self, role: Role, alias: str) -> bool:
        """Fallbacks whose provider has no key are left out of the chain, with a warning."""
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
