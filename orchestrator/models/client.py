"""One model's client: an ``OpenAIModelClient`` per route, over a provider's ``AsyncOpenAI``.

A client streams every call (usage included) over the wire API its route names (Chat
Completions or the Responses API: ``chat.py``, ``responses.py``), passes the role's
``service_tier`` and reasoning effort, and returns the reply together with a ``CallRecord``:
requested and served model and tier, tokens (cached and reasoning included), time to first
token, tokens/s and cost. SDK retries are off (``max_retries=0``): one client attempt is one
HTTP request, and what to do about an error is decided from its class (``errors.py``) by the
role's ``FallbackClient`` (``fallback.py``). ``pool.py`` builds the clients and their chains.
Native tool calls whose arguments repeat an item of a list are stopped at the repeat, as a JSON
tools reply is (``repeats.RepeatedItem``, ``loops.py``).
"""

from __future__ import annotations

import functools
import os
import ssl
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import replace
from typing import Any, cast

import aiohttp
import httpx2
import openai
from openai import AsyncOpenAI

from orchestrator import timing
from orchestrator.config.schema import Provider
from orchestrator.errors import ConfigError
from orchestrator.models import chat, repair, responses
from orchestrator.models.base import (
    Completion,
    Fold,
    Progress,
    Route,
    Streamed,
    Until,
    Usage,
    Wire,
    cost_usd,
)
from orchestrator.models.errors import Transient, classify, where
from orchestrator.models.repeats import RepeatedItem
from orchestrator.state import CallRecord

__all__ = ["OpenAIModelClient", "provider_sdk"]

WIRES: dict[str, Wire] = {"chat": chat.WIRE, "responses": responses.WIRE}
Event = Mapping[str, Any]  # a streamed event's JSON
_OPTIONS: openai.RequestOptions = {"security": {"bearer_auth": True}}  # as the SDK's create()


@functools.cache
def _tls(cafile: str | None, capath: str | None) -> ssl.SSLContext:
    """The TLS settings every provider client shares: loading the CA store takes tens of ms,
    once per process instead of once per client (per run)."""
    return httpx2.create_ssl_context()


def provider_sdk(provider: Provider, key: str) -> AsyncOpenAI:
    """A provider's SDK client: its endpoint, key and timeout, no SDK retries (one client attempt
    is one HTTP request), the shared transport (``_http_client``); a ``sim://`` endpoint is the
    simulator served in this process (``sim/local.py``), reached without a socket."""
    url = provider.base_url or ""
    http = _local_client(url) if url.startswith("sim://") else _http_client()
    return AsyncOpenAI(api_key=key, base_url=provider.base_url, max_retries=0,
                       timeout=provider.timeout_s, http_client=http)


def _local_client(url: str) -> httpx2.AsyncClient:
    """An HTTP client whose requests the in-process simulator answers (imported only then: the
    simulator's web framework is no part of a run's start-up)."""
    from orchestrator.sim import local

    try:
        transport = local.transport(url)
    except LookupError as exc:
        raise ConfigError(str(exc)) from None
    return httpx2.AsyncClient(transport=transport, event_hooks={"request": [timing.on_request]})


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
    connection error again (``openai.APIConnectionError``), and real timeouts stay timeouts.

    A request that got no reply because its pooled connection was already closed by the server
    is sent once more, on another connection (the default transport meets this less often: it
    asks the socket whether the server hung up before it reuses a connection, but the hang-up
    can land just after the check). llama.cpp's server closes the connection after a streamed
    reply without saying so, and a call made right after one (an explorer's next turn) took
    that connection before the event loop had read the server's goodbye: aiohttp either could
    not write the request ("Cannot write to closing transport"), or wrote it and read a reset
    or the connection's end before any byte of a reply. In the kept live runs r37-r41, 16 calls in 98 runs failed so, each then retried as a
    transient error. Only once: a second such end is the server's answer, and reaches the
    caller as a connection error."""

    def __init__(self, inner: httpx2.AsyncBaseTransport) -> None:
        self.inner = inner

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        try:
            with _renamed():
                response = await self.inner.handle_async_request(request)
        except (httpx2.ReadError, httpx2.RemoteProtocolError) as exc:
            if not _unanswered(exc):
                raise
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


def _unanswered(exc: BaseException) -> bool:
    """Whether ``exc`` is a connection that ended before any byte of the reply: aiohttp could
    not write the request to a connection already closing (its ``ClientConnectionResetError``),
    or wrote it to one the server had closed and read a reset or the connection's end
    (``ServerDisconnectedError``) instead of a status line. Raised while waiting for the
    reply's head, never from its body (``_ExactStream``)."""
    cause = exc.__cause__
    return isinstance(cause, aiohttp.ServerDisconnectedError) or (
        isinstance(cause, aiohttp.ClientOSError)
        and isinstance(cause.__cause__ or cause.__context__, ConnectionResetError))


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


async def post(sdk: AsyncOpenAI, path: str, content: bytes) -> openai.AsyncStream[object]:
    """Posts a finished JSON body to ``path`` and streams the reply, through the SDK's public
    ``post`` (its documented way to a path with a body of one's own): the SDK builds the URL and
    headers (auth, platform, read timeout), sends it (auth retry, provider hooks and the
    standard OpenAI instrumentations included) and raises its own error types. Events come as
    their JSON (``cast_to=object``), no model object per chunk."""
    return await sdk.post(path, cast_to=object, content=content, options=_OPTIONS, stream=True,
                          stream_cls=openai.AsyncStream[object])


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
        until: Until | None = None,
    ) -> Completion:
        r, wire = self.route, self._wire
        building = time.monotonic()
        with timing.exchange(building) as sent:
            content = self._requests.body(messages, tools, response_format)
            acc = wire.fold(r)
            keep: int | None = None
            check = until() if until else None
            # native tool calls: their arguments (all calls' in turn) end at a repeated list item
            repeats = RepeatedItem() if tools else None
            cut: int | None = None
            try:
                # The body is final JSON: posted as it is, without the SDK's per-call walk of
                # every message, and events arrive as their JSON (no model object per chunk).
                # HTTP errors come as the SDK's own exception types (``post``).
                stream = await post(self.sdk, wire.path, content)
                async with stream:
                    async for event in stream:
                        if not acc.add(cast(Event, event), time.monotonic()):
                            continue
                        if progress:
                            progress(acc.pieces)
                        # leaving the stream closes the connection: the server stops generating
                        if check and (keep := check(acc.text())) is not None:
                            break
                        if repeats and (cut := repeats(_arguments(acc))) is not None:
                            break
            except openai.APIError as exc:
                raise classify(exc, r) from exc
            except (ValueError, AttributeError, TypeError) as exc:  # an event that is not JSON
                raise Transient(f"{where(r)}: malformed stream event ({exc})") from exc
        started = sent[0] if sent else building  # the call's time is the server's and the wire's
        reply = (_stopped(acc, keep) if keep is not None
                 else _stopped_calls(acc, cut) if cut is not None else acc.result())
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
            more=reply.more,
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
            stopped=reply.finish if reply.finish == "repeat" else None,
        )


def _arguments(acc: Fold) -> str:
    return "".join(c.arguments for c in acc.calls())


def _stopped_calls(acc: Fold, keep: int) -> Streamed:
    """The reply the client stopped after ``keep`` characters of its calls' arguments (taken in
    turn): the call they end in is closed there (``repair``), the calls before it kept whole;
    finish ``"repeat"``, the output the pieces read (the server sent no usage)."""
    calls, start = [], 0
    for call in acc.calls():
        end = start + len(call.arguments)
        calls.append(replace(call, arguments=repair.arguments(call.arguments[:keep - start])))
        if keep <= end:
            break
        start = end
    return Streamed(acc.text() or None, tuple(calls), "repeat", Usage(output=acc.pieces),
                    acc.served_model, acc.served_tier)


def _stopped(acc: Fold, keep: int) -> Streamed:
    """The reply the client stopped after ``keep`` characters of its text (an ``until`` check):
    finish ``"repeat"``; the server sent no usage, so the output is the pieces read."""
    return Streamed(acc.text()[:keep] or None, (), "repeat", Usage(output=acc.pieces),
                    acc.served_model, acc.served_tier)
