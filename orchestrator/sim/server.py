"""The simulated OpenAI-compatible HTTP server: the starlette app that answers
``/v1/models`` and ``/v1/chat/completions`` (plain and SSE-streamed) from a ``Scenario``, the
``SimState`` that records every request and tracks concurrency, ``SimServer`` which runs
uvicorn on a loopback port in its own thread for tests, and ``serve_forever`` for the CLI."""

from __future__ import annotations

import asyncio
import ipaddress
import json
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from orchestrator.sim.cache import PrefixCache
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

CONTENT_CHUNK_CHARS = 4
ARGS_CHUNK_CHARS = 8


@dataclass
class RecordedRequest:
    seq: int
    model: str
    body: dict[str, Any]
    headers: dict[str, str]
    started: float
    finished: float | None = None
    status: int | None = None
    prompt_tokens: int = 0
    cached_tokens: int = 0


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

    def begin(self, model: str, body: dict[str, Any], headers: dict[str, str]) -> RecordedRequest:
        headers = {k.lower(): v for k, v in headers.items() if k.lower() != "authorization"}
        with self._lock:
            rec = RecordedRequest(len(self.requests) + 1, model, body, headers, time.monotonic())
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
        spans = sorted(
            (r.started, r.finished if r.finished is not None else float("inf"))
            for r in self.requests_for(model)
        )
        latest_end = float("-inf")
        for start, end in spans:
            if start < latest_end:
                return True
            latest_end = max(latest_end, end)
        return False

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()
            self.used_tokens.clear()
            self.cache.clear()
            self.max_in_flight.clear()
            self.max_in_flight.update({m: n for m, n in self.in_flight.items() if n > 0})


def _error(status: int, message: str, type_: str, code: str | None, param: str | None = None,
           headers: dict[str, str] | None = None) -> JSONResponse:
    fault = FaultSpec(status=status, message=message, type=type_, code=code, param=param,
                      headers=headers or {})
    return JSONResponse(fault.body(), status_code=fault.status, headers=fault.headers)


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)]


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


class _Completion:
    """One reply turned into OpenAI's completion/chunk objects."""

    def __init__(self, reply: Reply, model: str, tier: str, prompt: int, completion: int,
                 cached: int = 0) -> None:
        self.reply, self.model, self.tier = reply, model, tier
        self.id = f"chatcmpl-sim{uuid.uuid4().hex[:20]}"
        self.created = int(time.time())
        self.usage: dict[str, Any] = {
            "prompt_tokens": prompt,
            "completion_tokens": completion,
            "total_tokens": prompt + completion,
            "prompt_tokens_details": {"cached_tokens": cached, "audio_tokens": 0},
            "completion_tokens_details": {"reasoning_tokens": 0, "audio_tokens": 0},
        }
        self.calls = [
            (c.id or f"call_{uuid.uuid4().hex[:24]}", c.name, c.arguments_text())
            for c in reply.tool_calls
        ]

    def _envelope(self, obj: str) -> dict[str, Any]:
        return {"id": self.id, "object": obj, "created": self.created, "model": self.model,
                "service_tier": self.tier, "system_fingerprint": "fp_sim"}

    def message(self) -> dict[str, Any]:
        message: dict[str, Any] = {"role": "assistant", "content": self.reply.content,
                                   "refusal": None}
        if self.calls:
            message["tool_calls"] = [
                {"id": cid, "type": "function", "function": {"name": name, "arguments": args}}
                for cid, name, args in self.calls
            ]
        return {
            **self._envelope("chat.completion"),
            "choices": [{"index": 0, "message": message, "logprobs": None,
                         "finish_reason": self.reply.effective_finish_reason}],
            "usage": self.usage,
        }

    def chunk(self, delta: dict[str, Any], finish: str | None = None) -> dict[str, Any]:
        return {
            **self._envelope("chat.completion.chunk"),
            "choices": [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish}],
        }

    def deltas(self) -> list[dict[str, Any]]:
        """The paced deltas after the role chunk: content pieces, then each call's pieces."""
        out: list[dict[str, Any]] = [
            {"content": p} for p in _pieces(self.reply.content or "", CONTENT_CHUNK_CHARS)
        ]
        for index, (cid, name, args) in enumerate(self.calls):
            out.append({"tool_calls": [{"index": index, "id": cid, "type": "function",
                                        "function": {"name": name, "arguments": ""}}]})
            out.extend(
                {"tool_calls": [{"index": index, "function": {"arguments": p}}]}
                for p in _pieces(args, ARGS_CHUNK_CHARS)
            )
        return out


class _StreamCut(Exception):
    """Raised inside a streaming body so the server drops the connection mid-response."""


def _sse(obj: Any) -> bytes:
    return f"data: {json.dumps(obj)}\n\n".encode()


def build_app(sim: SimState) -> Starlette:
    """The ASGI app; it reads ``sim.scenario`` per request, so scenarios can be swapped live."""

    async def list_models(request: Request) -> Response:
        data = [{"id": m, "object": "model", "created": 0, "owned_by": "sim"}
                for m in sim.scenario.model_ids()]
        return JSONResponse({"object": "list", "data": data})

    async def chat_completions(request: Request) -> Response:
        headers = dict(request.headers)
        try:
            body = json.loads(await request.body())
        except (json.JSONDecodeError, UnicodeDecodeError):
            body = None
        model = body.get("model") if isinstance(body, dict) else None
        rec = sim.begin(model if isinstance(model, str) else "",
                        body if isinstance(body, dict) else {}, headers)
        response: Response | None = None
        try:
            response = await _answer(rec, body)
            return response
        finally:
            # A streamed response finishes when its generator ends, not here.
            if not isinstance(response, StreamingResponse):
                sim.finish(rec, response.status_code if response is not None else 500)

    async def _answer(rec: RecordedRequest, body: Any) -> Response:
        if not isinstance(body, dict):
            return _error(400, "We could not parse the JSON body of your request.",
                          "invalid_request_error", None)
        if not isinstance(body.get("model"), str) or not body["model"]:
            return _error(400, "you must provide a model parameter", "invalid_request_error",
                          None, "model")
        messages = body.get("messages")
        if not isinstance(messages, list) or not messages or not all(
                isinstance(m, dict) and isinstance(m.get("role"), str) for m in messages):
            return _error(400, "'messages' must be a non-empty array of message objects",
                          "invalid_request_error", None, "messages")
        scenario = sim.scenario
        behavior = scenario.behavior_for(rec.model)
        if behavior is None:
            return _error(404, f"The model `{rec.model}` does not exist or you do not have "
                          "access to it.", "invalid_request_error", "model_not_found", "model")
        rec.prompt_tokens = count_prompt_tokens(body, scenario.tokenizer)
        rec.cached_tokens = sim.cache.lookup(rec.model, body, scenario.cache, scenario.tokenizer,
                                             rec.prompt_tokens)
        if behavior.delay_s:
            await asyncio.sleep(behavior.delay_s)
        window = behavior.context_window
        if window is not None and rec.prompt_tokens > window:
            return _error(
                400, f"This model's maximum context length is {window} tokens. However, your "
                f"messages resulted in {rec.prompt_tokens} tokens. Please reduce the length "
                "of the messages.", "invalid_request_error", "context_length_exceeded",
                "messages")
        quota = behavior.quota_tokens
        if quota is not None and sim.used_tokens.get(rec.model, 0) >= quota:
            q = QUOTA_FAULT
            return _error(q.status, q.message, q.type, q.code, None, behavior.quota_headers)
        view = ChatRequestView.from_body(body)
        try:
            reply = behavior.reply_for(view, sim.nth(rec))
        except Exception as exc:  # a broken behaviour should look like a server fault
            return _error(500, f"sim behaviour failed: {type(exc).__name__}: {exc}",
                          "server_error", None)
        if reply.delay_s:
            await asyncio.sleep(reply.delay_s)
        if reply.error is not None:
            e = reply.error
            return _error(e.status, e.message, e.type, e.code, e.param, e.headers)
        return await _complete(rec, body, behavior, reply, scenario)

    async def _complete(rec: RecordedRequest, body: dict[str, Any], behavior: ModelBehavior,
                  reply: Reply, scenario: Scenario) -> Response:
        completion = _Completion(
            reply,
            model=reply.served_model or behavior.served_model or rec.model,
            tier=reply.served_tier or behavior.served_tier or body.get("service_tier")
            or "default",
            prompt=rec.prompt_tokens,
            completion=count_completion_tokens(reply, scenario.tokenizer),
            cached=rec.cached_tokens,
        )
        sim.charge(rec.model, completion.usage["total_tokens"])
        pace = (completion.usage["completion_tokens"] / behavior.tokens_per_second
                if behavior.tokens_per_second > 0 else 0.0)
        if not body.get("stream"):
            if pace:
                await asyncio.sleep(pace)
            return JSONResponse(completion.message())
        options = body.get("stream_options") or {}
        usage = isinstance(options, dict) and bool(options.get("include_usage"))
        return StreamingResponse(_stream(rec, completion, pace, usage),
                                 media_type="text/event-stream")

    async def _stream(rec: RecordedRequest, completion: _Completion, pace: float,
                      include_usage: bool) -> AsyncIterator[bytes]:
        try:
            deltas = completion.deltas()
            pacer = _Pacer(pace, len(deltas))
            first = completion.chunk({"role": "assistant", "content": "", "refusal": None})
            yield _sse(first | ({"usage": None} if include_usage else {}))
            cut = completion.reply.cut_after
            for n, delta in enumerate(deltas):
                if cut is not None and n >= cut:
                    break
                await pacer.step()
                chunk = completion.chunk(delta)
                yield _sse(chunk | ({"usage": None} if include_usage else {}))
            if cut is not None:
                if completion.reply.cut == "close":
                    raise _StreamCut(f"sim: stream cut after {cut} chunks")
                yield b"data: [DONE]\n\n"
                return
            final = completion.chunk({}, completion.reply.effective_finish_reason)
            yield _sse(final | ({"usage": None} if include_usage else {}))
            if include_usage:
                yield _sse({**completion._envelope("chat.completion.chunk"), "choices": [],
                            "usage": completion.usage})
            yield b"data: [DONE]\n\n"
        finally:
            sim.finish(rec, 200)

    return Starlette(routes=[
        Route("/v1/models", list_models, methods=["GET"]),
        Route("/v1/chat/completions", chat_completions, methods=["POST"]),
    ])


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

    try:
        asyncio.run(main())
    except KeyboardInterrupt:
        # uvicorn already shut down gracefully and re-raised the signal; Ctrl-C is a normal stop.
        pass
