"""The model client's transport: a request sent through the SDK's public ``post`` over our
aiohttp transport fails as the SDK's own ``post`` does over its default transport (HTTP errors,
a refused connection, a hang-up, a silent server, a stream cut midway)."""

from __future__ import annotations

import socket
import threading

import openai
import pytest
from conftest import JsonHandler


class _Refusing(JsonHandler):
    """Answers every POST with the status its path names, an OpenAI-style error body."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        status = int(self.path.rstrip("/").rsplit("/", 1)[-1])
        self.reply(status, {"error": {"message": f"refused with {status}", "type": "x",
                                      "code": "c"}})


async def test_a_request_sent_once_built_fails_as_the_sdk_would(tmp_path):
    """``client.post`` (the SDK's public ``post``, over our aiohttp transport) raises what the
    SDK's ``post`` raises over its default transport, type and message: HTTP errors, a refused
    connection, a server that hangs up, a server that never answers."""
    from http.server import ThreadingHTTPServer

    from orchestrator.models.client import _OPTIONS, _http_client, post

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # accepts, never answers
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()  # nothing listens there

    async def both(base_url: str, path: str) -> tuple[BaseException, BaseException]:
        ours = openai.AsyncOpenAI(api_key="sk-test-key", base_url=base_url, max_retries=0,
                                  timeout=0.5, http_client=_http_client())
        sdk = openai.AsyncOpenAI(api_key="sk-test-key", base_url=base_url, max_retries=0,
                                 timeout=0.5)
        errors = []
        try:
            for send in (lambda: post(ours, path, b"{}"),
                         lambda: sdk.post(path, cast_to=object, content=b"{}", options=_OPTIONS,
                                          stream=True, stream_cls=openai.AsyncStream[object])):
                with pytest.raises(openai.APIError) as caught:
                    await send()
                errors.append(caught.value)
        finally:
            await ours.close()
            await sdk.close()
        return errors[0], errors[1]

    hangup = _hanging_up(b"")  # reads the request, closes without a word

    try:
        cases = [(f"http://127.0.0.1:{server.server_address[1]}/v1", f"/status/{status}")
                 for status in (400, 401, 403, 404, 429, 500, 503)]
        cases += [(f"http://127.0.0.1:{closed_port}/v1", "/chat/completions"),
                  (f"http://127.0.0.1:{hangup.getsockname()[1]}/v1", "/chat/completions"),
                  (f"http://127.0.0.1:{silent.getsockname()[1]}/v1", "/chat/completions")]
        kinds = []
        for base_url, path in cases:
            ours, sdks = await both(base_url, path)
            assert type(ours) is type(sdks) and str(ours) == str(sdks), (path, ours, sdks)
            assert getattr(ours, "body", None) == getattr(sdks, "body", None)
            kinds.append(type(ours).__name__)
        assert kinds[:5] == ["BadRequestError", "AuthenticationError", "PermissionDeniedError",
                             "NotFoundError", "RateLimitError"]
        # refused, hung up: a connection error, not "Request timed out."; silent: a timeout
        assert kinds[-3:] == ["APIConnectionError", "APIConnectionError", "APITimeoutError"]
    finally:
        server.shutdown()
        silent.close()
        hangup.close()


def _read_request(conn: socket.socket) -> bytes | None:
    """One HTTP request read whole from ``conn``: its body, or None when the client closed
    the connection first."""
    data = b""
    while b"\r\n\r\n" not in data:
        chunk = conn.recv(65536)
        if not chunk:
            return None
        data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next((line.split(b":")[1] for line in head.split(b"\r\n")
                       if line.lower().startswith(b"content-length")), b"0"))
    while len(body) < length:
        body += conn.recv(65536)
    return body


def _listening() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()
    return listener


def _ours(server: socket.socket) -> openai.AsyncOpenAI:
    """An SDK client over our transport to ``server``, no SDK retries."""
    from orchestrator.models.client import _http_client

    return openai.AsyncOpenAI(api_key="sk-test-key", max_retries=0, timeout=5,
                              base_url=f"http://127.0.0.1:{server.getsockname()[1]}/v1",
                              http_client=_http_client())


async def _call(sdk: openai.AsyncOpenAI, n: int) -> None:
    """Posts ``{"n": n}`` and checks the one streamed event comes back whole."""
    from orchestrator.models.client import post

    stream = await post(sdk, "/chat/completions", b'{"n": %d}' % n)
    assert [event async for event in stream] == [{"choices": []}]


def _hanging_up(sent: bytes, requests: list[bytes] | None = None) -> socket.socket:
    """A server that reads each request whole, sends ``sent`` and closes the connection (as
    llama.cpp's server does after a streamed reply, saying keep-alive); ``requests`` gets each
    request's body."""
    listener = _listening()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the test closed the listener
            with conn:
                body = _read_request(conn)
                if body is None:
                    continue
                if requests is not None:
                    requests.append(body)
                conn.sendall(sent)

    threading.Thread(target=serve, daemon=True).start()
    return listener


async def test_a_stream_cut_off_midway_is_a_connection_error_as_over_the_sdks_transport():
    """A server that stops after one streamed event (its body promised more): iterating the
    stream fails with ``APIConnectionError`` over our transport as over the SDK's default,
    which ``classify`` makes a transient error, retried and then failed over."""
    from orchestrator.models.client import _http_client, post

    cut = _hanging_up(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      b"Content-Length: 4000\r\n\r\ndata: {\"choices\": []}\n\n")
    base_url = f"http://127.0.0.1:{cut.getsockname()[1]}/v1"
    failures = []
    try:
        for http_client in (_http_client(), None):
            sdk = openai.AsyncOpenAI(api_key="sk-test-key", base_url=base_url, max_retries=0,
                                     timeout=2, http_client=http_client)
            try:
                stream = await post(sdk, "/chat/completions", b"{}")
                events = []
                with pytest.raises(openai.APIConnectionError) as caught:
                    async for event in stream:
                        events.append(event)
                assert events == [{"choices": []}]
                failures.append(caught.value)
            finally:
                await sdk.close()
    finally:
        cut.close()
    ours, sdks = failures
    assert type(ours) is type(sdks) is openai.APIConnectionError


async def test_a_call_right_after_a_stream_the_server_hung_up_on_is_sent_again_once():
    """A server that closes the connection after each streamed reply, saying keep-alive (as
    llama.cpp's does): back-to-back calls over our transport all succeed, each reaching the
    server once. Without the resend every second call failed with "Connection error." (aiohttp
    wrote it to the closing connection, or wrote it and was reset). The SDK's default transport
    is not held to this: it checks a pooled connection before reusing it, and still failed one
    run in about sixty here (the server's close landing just after the check)."""

    events = b'data: {"choices": []}\n\ndata: [DONE]\n\n'
    reply = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
             b"Transfer-Encoding: chunked\r\nConnection: keep-alive\r\n\r\n"
             + f"{len(events):x}\r\n".encode() + events + b"\r\n0\r\n\r\n")
    for _ in range(5):
        requests: list[bytes] = []
        server = _hanging_up(reply, requests)
        sdk = _ours(server)
        try:
            for n in range(6):
                await _call(sdk, n)
        finally:
            await sdk.close()
            server.close()
        assert requests == [b'{"n": %d}' % n for n in range(6)]


def _scripted(reply: bytes, ends: list[str], answered: list[bytes]) -> socket.socket:
    """A keep-alive server that answers each request with ``reply`` and keeps the connection,
    except where ``ends`` (one word a request, in order, "answer" once they run out) says the
    connection ends instead, the request read but unanswered: "reset" (a TCP reset) or "close"
    (an orderly close). ``answered`` gets each answered request's body."""
    import struct

    listener = _listening()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return
            with conn:
                while (body := _read_request(conn)) is not None:
                    end = ends.pop(0) if ends else "answer"
                    if end == "reset":
                        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                        struct.pack("ii", 1, 0))
                        break
                    if end == "close":
                        break
                    answered.append(body)
                    conn.sendall(reply)

    threading.Thread(target=serve, daemon=True).start()
    return listener


@pytest.mark.parametrize("end", ["reset", "close"])
async def test_a_request_whose_connection_ends_before_any_reply_is_sent_once_more(end):
    """A pooled connection the server ends (reset or closed) after reading a request and before
    any byte of a reply: our transport sends the request once more, on a new connection, and the
    call succeeds; a request ended so twice in a row fails as a connection error, sent twice
    and no more. (Without the resend the first case failed with "Connection error.".)"""

    events = b'data: {"choices": []}\n\ndata: [DONE]\n\n'
    reply = (b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
             b"Content-Length: " + str(len(events)).encode() + b"\r\n\r\n" + events)
    answered: list[bytes] = []
    ends = ["answer", end, "answer", "answer", end, end]  # a word a request as received
    server = _scripted(reply, ends, answered)
    sdk = _ours(server)
    try:
        for n in range(3):
            await _call(sdk, n)
        with pytest.raises(openai.APIConnectionError):
            await _call(sdk, 3)
        assert ends == []  # the fourth call was sent twice, not a third time
        await _call(sdk, 4)
    finally:
        await sdk.close()
        server.close()
    assert answered == [b'{"n": 0}', b'{"n": 1}', b'{"n": 2}', b'{"n": 4}']
