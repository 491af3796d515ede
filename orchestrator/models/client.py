"""Model access: one ``AsyncOpenAI`` per provider, one ``ModelClient`` per role and model.

A client streams every call (usage included) over the wire API its route names (Chat
Completions or the Responses API: ``chat.py``, ``responses.py``), passes the role's
``service_tier`` and reasoning effort, and returns the reply together with a ``CallRecord``:
requested and served model and tier, tokens (cached and reasoning included), time to first
token, tokens/s and cost. SDK retries are off (``max_retries=0``): one client attempt is one
HTTP request, and what to do about an error is decided from its class (``errors.py``) by the
role's ``FallbackClient`` (``fallback.py``).
"""

from __future__ import annotations

import functools
import os
import ssl
import time
import weakref
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any, cast

import aiohttp
import httpx2
import openai
from openai import AsyncOpenAI
from openai._httpx2 import request_exceptions, timeout_exceptions
from openai._models import FinalRequestOptions

from orchestrator import timing
from orchestrator.config.schema import RoleMap
from orchestrator.errors import MissingCredentials
from orchestrator.models import chat, responses
from orchestrator.models.base import (
    Completion,
    ModelClient,
    Progress,
    Route,
    Streamed,
    ToolCallData,
    Wire,
    cost_usd,
)
from orchestrator.models.errors import Transient, classify, is_context_overflow, where
from orchestrator.state import CallRecord, Role

__all__ = ["ClientPool", "Completion", "ModelClient", "OpenAIModelClient", "Progress", "Route",
           "ToolCallData", "classify", "cost_usd", "is_context_overflow"]

WIRES: dict[str, Wire] = {"chat": chat.WIRE, "responses": responses.WIRE}
Event = Mapping[str, Any]  # a streamed event's JSON
_OPTIONS: openai.RequestOptions = {"security": {"bearer_auth": True}}  # as the SDK's create()


@functools.cache
def _tls(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    """The TLS settings every provider client shares: loading the CA store takes tens of ms,
    once per process instead of once per client (per run)."""
    return httpx2.create_ssl_context()


def _http_client() -> httpx2.AsyncClient:
    """The SDK's HTTP client with its aiohttp transport (``openai[aiohttp]``, the SDK's own
    choice "for improved concurrency performance"), the shared TLS context and our request hook.

    Every streamed piece passes through the transport, on the one event loop all sessions
    share. The default transport (httpcore over anyio and h11) costs about a third more CPU a
    call, and part of that grows with the connections open: each request and each response
    closed checks every idle connection, asking the socket for its peer each time. Twenty
    explorers (``bench/explorers.py``): 15-17 ms CPU each instead of 21-23, and the swarm
    1.10-1.14x one explorer instead of 1.16-1.20x. The cost is ~0.15 s more to import the
    engine (``import openai`` then imports aiohttp); the CLI's own commands import neither.
    Errors arrive as the SDK's types, the same as over its default transport (``_Exact``)."""
    tls = _tls(os.environ.get("SSL_CERT_FILE"), os.environ.get("SSL_CERT_DIR"))
    return _AioClient(verify=tls, event_hooks={"request": [timing.on_request]})


class _AioClient(openai.DefaultAioHttpClient):
    """``openai.DefaultAioHttpClient`` (the SDK's defaults) with every transport it makes,
    proxied ones included, wrapped in ``_Exact``."""

    def _init_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return _Exact(super()._init_transport(*args, **kwargs))

    def _init_proxy_transport(self, *args: Any, **kwargs: Any) -> httpx2.AsyncBaseTransport:
        return _Exact(super()._init_proxy_transport(*args, **kwargs))


class _Exact(httpx2.AsyncBaseTransport):
    """The aiohttp transport with its failures named as the default transport names them.

    Its table turns every ``aiohttp.ClientConnectionError`` into ``httpx.ConnectTimeout``, so a
    refused connection (a local server that is not running) or a server that hung up would
    reach the user as "Request timed out." (``openai.APITimeoutError``); here they are a
    connection error again (``openai.APIConnectionError``), and real timeouts stay timeouts."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        with _renamed():
            response = await self.inner.handle_async_request(request)
        if isinstance(response.stream, httpx2.AsyncByteStream):
            response.stream = _ExactStream(response.stream)
        return response

    async def aclose(self) -> None:
        await self.inner.aclose()


class _ExactStream(httpx2.AsyncByteStream):
    def __init__(self, inner: httpx2.AsyncByteStream) -> None:
        self.inner = inner

    async def __aiter__(self) -> AsyncIterator[bytes]:
        with _renamed():
            async for chunk in self.inner:
                yield chunk

    async def aclose(self) -> None:
        with _renamed():
            await self.inner.aclose()


@contextmanager
def _renamed() -> Iterator[None]:
    try:
        yield
    except httpx2.ConnectTimeout as exc:
        cause = exc.__cause__
        if not isinstance(cause, aiohttp.ClientConnectionError) or isinstance(cause, TimeoutError):
            raise
        kind: type[httpx2.TransportError] = (
            httpx2.ConnectError if isinstance(cause, aiohttp.ClientConnectorError)
            else httpx2.RemoteProtocolError if isinstance(cause, aiohttp.ServerDisconnectedError)
            else httpx2.ReadError)
        raise kind(str(cause)) from cause


class _Post:
    """Posts a finished JSON body to one path of one SDK client and streams the reply, as the
    SDK's ``post(..., stream=True)`` does: the SDK builds the request's URL, headers (auth,
    platform, read timeout) and timeouts once, and each call goes out through its own
    ``_send_request`` (auth retry, provider hooks included); a failure becomes the exception
    the SDK would raise, made by its own code. Left out is the SDK's per-call work around that
    (copying the options twice, merging the headers and parsing the URL again: ~0.5 ms a call
    on a 2-core box, a tenth of a demo turn's orchestration; ``bench/overhead.py``).
    ``tests/test_overhead.py`` checks that the server sees the same request either way."""

    def __init__(self, sdk: AsyncOpenAI, path: str) -> None:
        # no reference to ``sdk`` is kept: it is the key this is cached under (``_posts``)
        template = sdk._build_request(
            FinalRequestOptions.construct(method="post", url=path, content=b"", **_OPTIONS))
        self.url = template.url
        self.headers = [(k, v) for k, v in template.headers.raw if k.lower() != b"content-length"]
        self.extensions = template.extensions

    async def send(self, sdk: AsyncOpenAI, content: bytes) -> openai.AsyncStream[object]:
        request = httpx2.Request("POST", self.url, headers=self.headers, content=content,
                                 extensions=dict(self.extensions))
        try:
            response = await sdk._send_request(request, stream=True)
        except openai.OpenAIError:
            raise
        except timeout_exceptions() as exc:
            raise openai.APITimeoutError(request=request) from exc
        except request_exceptions() as exc:
            raise openai.APIConnectionError(request=request) from exc
        if not response.is_success:
            try:
                await response.aread()
            finally:
                await response.aclose()
            raise sdk._make_status_error_from_response(response) from None
        return openai.AsyncStream(cast_to=object, response=response, client=sdk)


_posts: weakref.WeakKeyDictionary[AsyncOpenAI, dict[str, _Post]] = weakref.WeakKeyDictionary()


def _poster(sdk: AsyncOpenAI, path: str) -> _Post:
    """The ``_Post`` of ``sdk`` for ``path``, made once per SDK client."""
    by_path = _posts.setdefault(sdk, {})
    if path not in by_path:
        by_path[path] = _Post(sdk, path)
    return by_path[path]


class OpenAIModelClient:
    """A ``ModelClient`` for one route over an OpenAI-compatible endpoint, on either wire API."""

    def __init__(self, sdk: AsyncOpenAI, route: Route) -> None:
        self.sdk = sdk
        self.route = route
        self._wire = WIRES[route.api]
        self._requests = self._wire.requests(route)

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
    ) -> Completion:
        r, wire = self.route, self._wire
        building = time.monotonic()
        with timing.exchange(building) as sent:
            content = self._requests.body(messages, tools, response_format)
            acc = wire.fold(r)
            try:
                # The body is final JSON: posted as it is, without the SDK's per-call walk of
                # every message or rebuilding of headers, and events arrive as their JSON (no
                # model object per chunk). HTTP errors still come as the SDK's own exception
                # types, made by its own code (``_Post``).
                stream = await _poster(self.sdk, wire.path).send(self.sdk, content)
                async with stream:
                    async for event in stream:
                        if acc.add(cast(Event, event), time.monotonic()) and progress:
                            progress(acc.pieces)
            except openai.APIError as exc:
                raise classify(exc, r) from exc
            except (ValueError, AttributeError, TypeError) as exc:  # an event that is not JSON
                raise Transient(f"{where(r)}: malformed stream event ({exc})") from exc
        started = sent[0] if sent else building  # the call's time is the server's and the wire's
        reply = acc.result()
        reasoning = None
        if reply.reasoning_items:
            reasoning = {"source": r.source, "items": list(reply.reasoning_items),
                         "tokens": reply.usage.reasoning}
        return Completion(
            content=reply.content,
            tool_calls=reply.tool_calls,
            finish_reason=reply.finish,
            record=self._record(reply, acc.first_token, session, started, time.monotonic()),
            reasoning=reasoning,
        )

    def _record(self, reply: Streamed, first_token: float | None, session: str, started: float,
                ended: float) -> CallRecord:
        r, u = self.route, reply.usage
        ttft = None if first_token is None else first_token - started
        gen_time = ended - (first_token or started)
        return CallRecord(
            role=r.role,
            session=session,
            requested_model=r.model.id,
            served_model=reply.served_model,
            requested_tier=r.service_tier,
            served_tier=reply.served_tier,
            effort=r.effort,
            api=r.api,
            fallback_step=r.step,
            prompt_tokens=u.prompt,
            cached_tokens=u.cached,
            output_tokens=u.output,
            reasoning_tokens=u.reasoning,
            ttft_s=ttft,
            duration_s=ended - started,
            tokens_per_s=(u.output / gen_time) if u.output and gen_time > 0 else None,
            cost_usd=cost_usd(r.model, u.prompt, u.cached, u.output),
        )


def check_credentials(role_map: RoleMap, env: Mapping[str, str], roles: Sequence[Role]) -> None:
    """Fail early, before any work (and before a pool exists), when a provider that ``roles``
    need has no key in ``env``."""
    for role in roles:
        provider_name = role_map.model_for(role).provider
        env_var = role_map.providers[provider_name].api_key_env
        if not env.get(env_var):
            raise MissingCredentials(
                f"role {role} uses provider {provider_name!r}, whose API key is not set: "
                f"export {env_var}=... (or try `orchestrate demo`, which needs no key)"
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
        from orchestrator.models.fallback import RetryPolicy, Routing
        from orchestrator.models.quota import QuotaLedger

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

    def route(self, role: Role, alias: str, step: int = 0, *,
              temperature: float | None = None) -> Route:
        spec = self.roles.roles[role]
        model = self.roles.models[alias]
        if temperature is not None:  # a racing candidate's own sampling (agentstep's race)
            model = model.model_copy(update={"temperature": temperature})
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
            self._sdks[provider_name] = AsyncOpenAI(
                api_key=key, base_url=provider.base_url, max_retries=0, timeout=provider.timeout_s,
                http_client=_http_client(),
            )
        return self._sdks[provider_name]

    def client(self, role: Role, alias: str, step: int = 0, *,
               temperature: float | None = None) -> OpenAIModelClient:
        route = self.route(role, alias, step, temperature=temperature)
        return OpenAIModelClient(self.sdk(route.provider_name), route)

    def member(self, role: Role, alias: str, step: int = 0, *,
               temperature: float | None = None) -> ModelClient:
        """One link of a chain: the model's client, speaking JSON tools if the model needs it."""
        from orchestrator.models.toolmode import JsonToolsClient

        client = self.client(role, alias, step, temperature=temperature)
        model = client.route.model
        if model.tools != "json":
            return client
        return JsonToolsClient(client, model.structured, optional=model.tool_args == "all")

    def for_role(self, role: Role, *, temperature: float | None = None) -> ModelClient:
        """A fresh ``FallbackClient`` over ``roles.chain(role)`` (one per session);
        ``temperature`` overrides every chain model's (a racing candidate's sampling)."""
        from orchestrator.models.fallback import FallbackClient

        aliases = self.roles.chain(role)
        usable = [a for i, a in enumerate(aliases) if i == 0 or self._has_key(role, a)]
        chain = [self.member(role, alias, aliases.index(alias), temperature=temperature)
                 for alias in usable]
        return FallbackClient(*chain, routing=self.routing)

    def _has_key(self, role: Role, alias: str) -> bool:
        """Fallbacks whose provider has no key are left out of the chain, with a warning."""
        from orchestrator.models.routing import RoutingEvent

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
