"""The simulator reached in-process: ``sim://<name>/v1`` base URLs, no socket, thread or uvicorn.

``serve_local(state)`` gives a ``SimState`` a ``sim://`` URL; the model client (``provider_sdk``)
hands such a provider's ``openai`` SDK client a ``LocalTransport`` to the same starlette app
``SimServer`` serves over HTTP. The SDK's own code still builds every request and parses every
reply (status errors, SSE streams), the app still records each request in ``state.requests``;
what is skipped is the loopback socket, HTTP/1.1 framing and a second thread. The transport
streams (a reply's pieces arrive as the app sends them), applies the SDK's read timeout, and a
body the app gives up on halfway reaches the SDK as a dropped connection, as over HTTP. For
what is about the wire itself (sockets, a peer that hangs up, headers as HTTP carries them)
tests keep ``SimServer``."""

from __future__ import annotations

import asyncio
import itertools
import weakref
from collections.abc import AsyncIterator, MutableMapping
from typing import Any

import httpx2

from orchestrator.sim.server import SimState, build_app

SCHEME = "sim"
_served: dict[str, tuple[weakref.ref[SimState], Any]] = {}  # name -> the state, its app
_names = itertools.count(1)


def serve_local(state: SimState) -> str:
    """A ``sim://`` base URL that reaches ``state``'s app in this process (while it lives)."""
    for name, (ref, _) in _served.items():
        if ref() is state:
            return f"{SCHEME}://{name}/v1"
    name = f"sim-{next(_names)}"
    _served[name] = (weakref.ref(state), build_app(state))
    weakref.finalize(state, _served.pop, name, None)
    return f"{SCHEME}://{name}/v1"


def transport(url: str) -> LocalTransport:
    """The transport to the simulator ``url`` names; ``LookupError`` when none is served."""
    name = url.removeprefix(f"{SCHEME}://").split("/", 1)[0]
    ref, app = _served.get(name, (None, None))
    if ref is None or ref() is None:
        raise LookupError(f"no simulator is served in this process at {url}: sim:// URLs reach "
                          "one started in the same process (sim.local.serve_local); "
                          "use the http:// URL of a running `orchestrate sim` instead")
    return LocalTransport(app)


Message = MutableMapping[str, Any]


class LocalTransport(httpx2.AsyncBaseTransport):
    """An httpx transport that calls an ASGI app on the caller's event loop, streaming."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        body = await request.aread()
        read_timeout = (request.extensions.get("timeout") or {}).get("read")
        exchange = _Exchange(body)
        scope = {
            "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1",
            "method": request.method, "scheme": "http", "root_path": "",
            "path": request.url.path, "raw_path": request.url.raw_path.split(b"?")[0],
            "query_string": request.url.query,
            "headers": [(k.lower(), v) for k, v in request.headers.raw],
            "server": (request.url.host, request.url.port or 80),
            "client": ("127.0.0.1", 0),
        }
        exchange.task = asyncio.get_running_loop().create_task(exchange.run(self.app, scope))
        try:
            status, headers = await asyncio.wait_for(asyncio.shield(exchange.started),
                                                     read_timeout)
        except TimeoutError:
            await exchange.aclose()
            raise httpx2.ReadTimeout("timed out waiting for the simulator", request=request) from None
        return httpx2.Response(status, headers=headers, stream=_Body(exchange, read_timeout),
                               request=request)


class _Exchange:
    """One request's run of the app: its start, its body pieces, the client hanging up."""

    def __init__(self, body: bytes) -> None:
        loop = asyncio.get_running_loop()
        self.body: bytes | None = body
        self.started: asyncio.Future[tuple[int, list[tuple[bytes, bytes]]]] = loop.create_future()
        self.pieces: asyncio.Queue[bytes | BaseException | None] = asyncio.Queue()
        self.gone = asyncio.Event()
        self.task: asyncio.Task[None] | None = None

    async def receive(self) -> Message:
        if self.body is not None:
            body, self.body = self.body, None
            return {"type": "http.request", "body": body, "more_body": False}
        await self.gone.wait()
        return {"type": "http.disconnect"}

    async def send(self, message: Message) -> None:
        if message["type"] == "http.response.start" and not self.started.done():
            self.started.set_result((message["status"], list(message.get("headers", []))))
        elif message["type"] == "http.response.body":
            if message.get("body"):
                self.pieces.put_nowait(message["body"])
            if not message.get("more_body", False):
                self.pieces.put_nowait(None)

    async def run(self, app: Any, scope: Message) -> None:
        try:
            await app(scope, self.receive, self.send)
        except Exception as exc:  # what a server does when its app fails
            if not self.started.done():  # nothing sent yet: a 500
                self.started.set_result((500, [(b"content-type", b"text/plain")]))
                self.pieces.put_nowait(b"Internal Server Error")
                self.pieces.put_nowait(None)
            else:  # halfway through a body: the connection drops
                self.pieces.put_nowait(exc)
        finally:
            if not self.started.done():
                self.started.set_result((500, []))
            self.pieces.put_nowait(None)

    async def aclose(self) -> None:
        self.gone.set()
        if self.task is not None and not self.task.done():
            try:
                await asyncio.wait_for(asyncio.shield(self.task), 1.0)
            except TimeoutError:
                self.task.cancel()


class _Body(httpx2.AsyncByteStream):
    def __init__(self, exchange: _Exchange, read_timeout: float | None) -> None:
        self.exchange, self.read_timeout = exchange, read_timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        while True:
            try:
                piece = await asyncio.wait_for(self.exchange.pieces.get(), self.read_timeout)
            except TimeoutError:
                raise httpx2.ReadTimeout("timed out reading from the simulator") from None
            if piece is None:
                return
            if isinstance(piece, BaseException):
                raise httpx2.RemoteProtocolError(
                    "peer closed connection without sending complete message body") from piece
            yield piece

    async def aclose(self) -> None:
        await self.exchange.aclose()
