"""The simulated OpenAI-compatible HTTP server: the starlette app answering ``/v1/models``,
``/v1/chat/completions`` and ``/v1/responses`` (plain and SSE) from a ``Scenario``; ``SimState``
records every request; ``SimServer`` runs uvicorn on a loopback port in a thread for tests, and
``serve_forever`` serves the CLI. Both APIs share one pipeline (model, window, quota, faults,
reply, pacing, cuts); the wire formats live in ``chat.py`` and ``responses.py`` (a Responses
request is read back into a Chat Completions body, so every scenario serves both APIs)."""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import itertools
import json
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from orchestrator.sim import chat, responses
from orchestrator.sim.cache import PrefixCache
from orchestrator.sim.chat import Frame, Parsed
from orchestrator.sim.scenario import (
    QUOTA_FAULT,
    ChatRequestView,
    FaultSpec,
    ModelBehavior,
    Reply,
    Scenario,
    count_completion_tokens,
    count_prompt_tokens,
)


@dataclass
class RecordedRequest:
    """One request as the server saw it; ``chat`` is its body read as Chat Completions."""

    seq: int
    model: str
    body: dict[str, Any]
    headers: dict[str, str]
    started: float
    api: str = "chat"
    finished: float | None = None
    status: int | None = None
    prompt_tokens: int = 0
    chat: dict[str, Any] = field(default_factory=dict)
    cached_tokens: int = 0
    deltas: int = 0  # the output pieces the reply had to stream
    deltas_sent: int = 0  # and those sent before it ended or the client left

    @property
    def messages(self) -> list[dict[str, Any]]:
        """The conversation, in Chat Completions messages whichever API carried it."""
        return list(self.chat.get("messages") or [])


@dataclass
class SimState:
    """The scenario in force plus everything the server has seen; safe across threads."""

    scenario: Scenario
    requests: list[RecordedRequest] = field(default_factory=list)
    in_flight: dict[str, int] = field(default_factory=dict)
    max_in_flight: dict[str, int] = field(default_factory=dict)
    used_tokens: dict[str, int] = field(default_factory=dict)
    cache: PrefixCache = field(default_factory=PrefixCache)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def begin(self, model: str, body: dict[str, Any], headers: dict[str, str],
              api: str = "chat") -> RecordedRequest:
        headers = {k.lower(): v for k, v in headers.items() if k.lower() != "authorization"}
        with self._lock:
            rec = RecordedRequest(len(self.requests) + 1, model, body, headers, time.monotonic(),
                                  api)
            self.requests.append(rec)
            now = self.in_flight.get(model, 0) + 1
            self.in_flight[model] = now
            self.max_in_flight[model] = max(self.max_in_flight.get(model, 0), now)
            return rec

    def finish(self, rec: RecordedRequest, status: int) -> None:
        with self._lock:
            if rec.finished is not None:
                return
            rec.finished = time.monotonic()
            rec.status = status
            self.in_flight[rec.model] = self.in_flight.get(rec.model, 1) - 1

    def nth(self, rec: RecordedRequest) -> int:
        """How many requests this model had before ``rec`` (drives ``ModelBehavior.first``)."""
        with self._lock:
            return sum(1 for r in self.requests if r.model == rec.model and r.seq < rec.seq)

    def charge(self, model: str, tokens: int) -> None:
        with self._lock:
            self.used_tokens[model] = self.used_tokens.get(model, 0) + tokens

    def requests_for(self, model: str) -> list[RecordedRequest]:
        with self._lock:
            return [r for r in self.requests if r.model == model]

    def overlapped(self, model: str) -> bool:
        """Whether a request of ``model`` started before an earlier one had finished."""
        spans = sorted((r.started, r.finished or float("inf")) for r in self.requests_for(model))
        ends = itertools.accumulate((end for _, end in spans), max)  # the latest end so far
        return any(start < end for (start, _), end in zip(spans[1:], ends, strict=False))

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self.used_tokens.clear()
            self.cache.clear()
            self.max_in_flight.clear()
            self.max_in_flight.update({m: n for m, n in self.in_flight.items() if n > 0})


def _error(fault: FaultSpec) -> JSONResponse:
    return JSONResponse(fault.body(), status_code=fault.status, headers=fault.headers)


class _Pacer:
    """Spreads ``total`` seconds over ``steps`` sleeps against a fixed schedule (no drift)."""

    def __init__(self, total: float, steps: int) -> None:
        self.total, self.steps, self.done = total, max(steps, 1), 0
        self.start = time.monotonic()

    async def step(self) -> None:
        if self.total <= 0:
            return
        self.done += 1
        wait = self.start + self.total * self.done / self.steps - time.monotonic()
        if wait > 0:
            await asyncio.sleep(wait)


class _StreamCut(Exception):
    """Raised inside a streaming body so the server drops the connection mid-response."""


class _WireReply(Protocol):
    total_tokens: int

    def body(self) -> dict[str, Any]: ...
    def frames(self) -> list[Frame]: ...
    def ended(self) -> list[bytes]: ...
    def failed(self, fault: FaultSpec, event: str, *, sent: int) -> list[bytes]: ...


@dataclass(frozen=True)
class _Wire:
    """One API the sim answers: how it reads a request, says "too long", builds a reply."""

    name: str
    parse: Callable[[dict[str, Any]], Parsed | FaultSpec]
    overflow: Callable[[int, int], FaultSpec]
    reply: Callable[..., _WireReply]


WIRES = {
    "chat": _Wire("chat", chat.parse, chat.overflow, chat.ChatReply),
    "responses": _Wire("responses", responses.parse, responses.overflow, responses.ResponsesReply),
}
_WRONG_API = {
    "chat": "This model is only supported in v1/responses and not in v1/chat/completions.",
    "responses": "This model is only supported in v1/chat/completions and not in v1/responses.",
}


def build_app(sim: SimState) -> Starlette:
    """The ASGI app; it reads ``sim.scenario`` per request, so scenarios can be swapped live."""
    app = _SimApp(sim)
    return Starlette(routes=[
        Route("/v1/models", app.list_models, methods=["GET"]),
        Route("/v1/chat/completions", app.endpoint(WIRES["chat"]), methods=["POST"]),
        Route("/v1/responses", app.endpoint(WIRES["responses"]), methods=["POST"]),
    ])


class _SimApp:
    """The sim's request handlers: parse, check, answer (plain or streamed), record."""

    def __init__(self, sim: SimState) -> None:
        self.sim = sim

    async def list_models(self, request: Request) -> Response:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "sim"}
                for m in self.sim.scenario.model_ids()]
        return JSONResponse({"object": "list", "data": data})

    def endpoint(self, wire: _Wire) -> Callable[[Request], Awaitable[Response]]:
        sim = self.sim
        async def handle(request: Request) -> Response:
            headers = dict(request.headers)
            try:
                body = json.loads(await request.body())
            except (json.JSONDecodeError, UnicodeDecodeError):
                body = None
            model = body.get("model") if isinstance(body, dict) else None
            rec = sim.begin(model if isinstance(model, str) else "",
                            body if isinstance(body, dict) else {}, headers, wire.name)
            response: Response | None = None
            try:
                response = await self._answer(wire, rec, body)
                return response
            finally:
                # A streamed response finishes when its generator ends, not here.
                if not isinstance(response, StreamingResponse):
                    sim.finish(rec, response.status_code if response is not None else 500)

        return handle

    @staticmethod
    def _refusal(wire: _Wire, rec: RecordedRequest, body: Any,
                 behavior: ModelBehavior | None) -> FaultSpec | None:
        """What is wrong with the request before the model is asked, if anything."""
        if not isinstance(body, dict):
            return FaultSpec(status=400, type="invalid_request_error",
                             message="We could not parse the JSON body of your request.")
        if not isinstance(body.get("model"), str) or not body["model"]:
            return FaultSpec(status=400, message="you must provide a model parameter",
                             type="invalid_request_error", param="model")
        if behavior is None:
            return FaultSpec(status=404, message=f"The model `{rec.model}` does not exist "
                             "or you do not have access to it.", param="model",
                             type="invalid_request_error", code="model_not_found")
        if wire.name not in behavior.apis:
            return FaultSpec(status=400, message=_WRONG_API[wire.name], param="model",
                             type="invalid_request_error")
        return None

    async def _answer(self, wire: _Wire, rec: RecordedRequest, body: Any) -> Response:
        sim = self.sim
        scenario = sim.scenario
        behavior = (scenario.behavior_for(rec.model)
                    if isinstance(body, dict) and isinstance(body.get("model"), str) else None)
        refused = self._refusal(wire, rec, body, behavior)
        if refused is not None or behavior is None:  # the second only for the type checker
            return _error(refused or FaultSpec(status=400, message="bad request"))
        parsed = wire.parse(body)
        if isinstance(parsed, FaultSpec):
            return _error(parsed)
        rec.chat = parsed.chat
        rec.prompt_tokens = (count_prompt_tokens(parsed.chat, scenario.tokenizer)
                             + parsed.carried_reasoning)
        rec.cached_tokens = sim.cache.lookup(rec.model, parsed.chat, scenario.cache,
                                             scenario.tokenizer, rec.prompt_tokens)
        if behavior.delay_s:
            await asyncio.sleep(behavior.delay_s)
        limit = self._limit(wire, rec, behavior)
        if limit is not None:
            return _error(limit)
        try:  # n > 1 (Chat Completions): the behaviour answers again for each further reply
            view, nth = ChatRequestView.from_body(parsed.chat), sim.nth(rec)
            reply, *more = [behavior.reply_for(view, nth) for _ in range(chat.asked(parsed))]
        except Exception as exc:  # a broken behaviour should look like a server fault
            return _error(FaultSpec(status=500, type="server_error",
                                    message=f"sim behaviour failed: {type(exc).__name__}: {exc}"))
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.error is not None:
            return _error(reply.error)
        return await self._complete(wire, rec, parsed, behavior, [reply, *more], scenario)

    def _limit(self, wire: _Wire, rec: RecordedRequest,
               behavior: ModelBehavior) -> FaultSpec | None:
        """The context window or the quota, when the request is past either."""
        window = behavior.context_window
        if window is not None and rec.prompt_tokens > window:
            return wire.overflow(window, rec.prompt_tokens)
        quota = behavior.quota_tokens
        if quota is not None and self.sim.used_tokens.get(rec.model, 0) >= quota:
            return QUOTA_FAULT.model_copy(update={"headers": behavior.quota_headers})
        return None

    async def _complete(self, wire: _Wire, rec: RecordedRequest, parsed: Parsed,
                        behavior: ModelBehavior, replies: list[Reply], scenario: Scenario
                        ) -> Response:
        reasoning, (reply, *more) = behavior.reasoning_tokens, replies
        completion = wire.reply(
            reply, more=more,
            model=reply.served_model or behavior.served_model or rec.model,
            tier=reply.served_tier or behavior.served_tier or parsed.chat.get("service_tier")
            or "default",
            prompt=rec.prompt_tokens,
            completion=sum(count_completion_tokens(r, scenario.tokenizer) for r in replies)
            + reasoning,
            reasoning=reasoning,
            request=parsed,
            cached=rec.cached_tokens,
        )
        self.sim.charge(rec.model, completion.total_tokens)
        pace = ((completion.total_tokens - rec.prompt_tokens) / behavior.tokens_per_second
                if behavior.tokens_per_second > 0 else 0.0)
        if not parsed.chat.get("stream"):
            if reply.stream_error is not None:
                return _error(reply.stream_error)
            if pace:
                await asyncio.sleep(pace)
            return JSONResponse(completion.body())
        return StreamingResponse(self._stream(rec, completion, reply, pace),
                                 media_type="text/event-stream")

    async def _stream(self, rec: RecordedRequest, completion: _WireReply, reply: Reply,
                      pace: float) -> AsyncIterator[bytes]:
        try:
            frames = completion.frames()
            rec.deltas = sum(kind == "delta" for _, kind in frames)
            pacer = _Pacer(pace, rec.deltas)
            short = reply.cut_after is not None or reply.stream_error is not None
            limit = reply.cut_after if reply.cut_after is not None else len(frames)
            frames_sent = 0
            for data, kind in frames:
                if short and (kind == "end" or (kind == "delta" and rec.deltas_sent >= limit)):
                    break
                if kind == "delta":
                    rec.deltas_sent += 1
                    await pacer.step()
                frames_sent += 1
                yield data
            if reply.stream_error is not None:
                for data in completion.failed(reply.stream_error, reply.stream_error_event,
                                              sent=frames_sent):
                    yield data
            elif reply.cut_after is not None:
                if reply.cut == "close":
                    raise _StreamCut(f"sim: stream cut after {reply.cut_after} deltas")
                for data in completion.ended():
                    yield data
        finally:
            self.sim.finish(rec, 200)


def _require_loopback(host: str) -> None:
    try:
        loopback = host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        loopback = False
    if not loopback:
        raise ValueError(f"the sim server only binds loopback addresses (127.0.0.1, ::1); "
                         f"refusing host {host!r}")


def _uvicorn(app: Starlette, host: str, port: int) -> uvicorn.Server:
    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            lifespan="off", timeout_graceful_shutdown=1)
    return uvicorn.Server(config)


def _bound_port(server: uvicorn.Server) -> int:
    return server.servers[0].sockets[0].getsockname()[1]


class SimServer:
    """Runs the sim on 127.0.0.1 in a background thread with its own event loop."""

    def __init__(self, scenario: Scenario, port: int = 0) -> None:
        self.state = SimState(scenario)
        self._requested_port = port
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def requests(self) -> list[RecordedRequest]:
        return self.state.requests

    @property
    def scenario(self) -> Scenario:
        return self.state.scenario

    def set_scenario(self, scenario: Scenario) -> None:
        self.state.scenario = scenario

    def start(self, timeout: float = 10.0) -> SimServer:
        if self._thread is not None:
            return self
        self._server = _uvicorn(build_app(self.state), "127.0.0.1", self._requested_port)
        self._thread = threading.Thread(target=self._server.run, name="sim-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError("sim server failed to start")
            time.sleep(0.005)
        self.port = _bound_port(self._server)
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=5)
        self._server = self._thread = None

    def __enter__(self) -> SimServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    async def __aenter__(self) -> SimServer:
        return await asyncio.to_thread(self.start)

    async def __aexit__(self, *exc: object) -> None:
        await asyncio.to_thread(self.stop)


def serve_forever(scenario: Scenario, host: str = "127.0.0.1", port: int = 8787,
                  ready: Callable[[str], None] | None = None) -> None:
    """Blocks serving ``scenario``; announces ``READY <base_url>`` (or calls ``ready``)."""
    _require_loopback(host)
    server = _uvicorn(build_app(SimState(scenario)), host, port)

    async def announce() -> None:
        while not server.started:
            if server.should_exit:
                return
            await asyncio.sleep(0.01)
        shown = f"[{host}]" if ":" in host else host
        url = f"http://{shown}:{_bound_port(server)}/v1"
        if ready is not None:
            ready(url)
        else:
            print(f"READY {url}", flush=True)

    async def main() -> None:
        watcher = asyncio.create_task(announce())
        try:
            await server.serve()
        finally:
            watcher.cancel()

    # uvicorn already shut down gracefully and re-raised the signal; Ctrl-C is a normal stop
    with contextlib.suppress(KeyboardInterrupt):
        asyncio.run(main())
