"""The model client's transport: a request sent through the SDK's public ``post`` over our
aiohttp transport fails as the SDK's own ``post`` does over its default transport (HTTP errors,
a refused connection, a hang-up, a silent server, a stream cut midway)."""

from __future__ import annotations

import socket
import threading

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

    import openai

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


def _hanging_up(sent: bytes) -> socket.socket:
    """A server that reads each request, sends ``sent`` and closes the connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the test closed the listener
            with conn:
                conn.recv(65536)
                conn.sendall(sent)

    threading.Thread(target=serve, daemon=True).start()
    return listener


async def test_a_stream_cut_off_midway_is_a_connection_error_as_over_the_sdks_transport():
    """A server that stops after one streamed event (its body promised more): iterating the
    stream fails with ``APIConnectionError`` over our transport as over the SDK's default,
    which ``classify`` makes a transient error, retried and then failed over."""
    import openai

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
