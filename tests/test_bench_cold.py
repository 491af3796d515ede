"""``bench --cold`` (the default, one run at a time): before each run, every local model server
a role map uses gets one unrelated one-token request, so its prompt cache holds nothing of the
run before (in live r8 the second of two maps asking the same first prompt read it from the
cache in 0.1 s where the first took 4-8 s). Judged by what the simulator received over HTTP."""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
from conftest import sim_roles

from orchestrator.benchmark.reach import evict_prompt_caches
from orchestrator.benchmark.runner import arun_bench
from orchestrator.benchmark.suite import load_suite
from orchestrator.errors import UsageError


class _Slots(ThreadingHTTPServer):
    """A server that keeps prompts as llama.cpp's server does: ``slots`` slots, each holding
    the last prompt it read; a request names its slot (``id_slot``) or goes to the slot whose
    prompt shares the longest start with its own (the least recently used when none shares a
    tenth of it: llama.cpp's ``slot_prompt_similarity``), and is told how much of its prompt that slot had (``cached_tokens``, a character a
    token). ``GET /props`` says how many slots there are, unless ``props`` is off."""

    def __init__(self, slots: int, props: bool = True) -> None:
        super().__init__(("127.0.0.1", 0), _SlotHandler)
        self.held = [""] * slots
        self.used = [0] * slots
        self.props = props
        self.bodies: list[dict[str, Any]] = []
        self.lock = threading.Lock()

    def read(self, body: dict[str, Any]) -> int:
        prompt = json.dumps(body["messages"])
        with self.lock:
            self.bodies.append(body)
            shared = [len(_common(prompt, held)) for held in self.held]
            slot = body.get("id_slot", -1)
            if slot < 0:
                slot = max(range(len(self.held)), key=lambda i: shared[i])
                if shared[slot] <= 0.1 * len(prompt):
                    slot = min(range(len(self.held)), key=lambda i: self.used[i])
            self.held[slot] = prompt
            self.used[slot] = len(self.bodies)
            return shared[slot]


def _common(a: str, b: str) -> str:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return a[:n]


class _SlotHandler(BaseHTTPRequestHandler):
    server: _Slots

    def log_message(self, *args: Any) -> None:
        pass

    def _send(self, status: int, payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self) -> None:
        if self.path == "/props" and self.server.props:
            self._send(200, {"total_slots": len(self.server.held), "build_info": "test"})
        else:
            self._send(404, {"error": {"code": 404, "message": "File Not Found"}})

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        cached = self.server.read(body)
        self._send(200, {
            "id": "c", "object": "chat.completion", "created": 0, "model": body["model"],
            "choices": [{"index": 0, "finish_reason": "stop",
                         "message": {"role": "assistant", "content": "ok"}}],
            "usage": {"prompt_tokens": len(json.dumps(body["messages"])), "completion_tokens": 1,
                      "total_tokens": 1, "prompt_tokens_details": {"cached_tokens": cached}}})


@pytest.fixture
def slots(request) -> Iterator[_Slots]:
    server = _Slots(*getattr(request, "param", (3,)))
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield server
    finally:
        server.shutdown()
        server.server_close()


def _served_by(server: _Slots):
    from orchestrator.config.layers import load_roles
    from orchestrator.faces.demo import scenario_path

    port = server.server_address[1]
    return load_roles(base_text=scenario_path("demo-roles.toml").read_text(encoding="utf-8"),
                      sets=[f'providers.sim.base_url="http://127.0.0.1:{port}/v1"'])


def _cached(server: _Slots, prompt: str) -> int:
    sdk = openai.OpenAI(base_url=f"http://127.0.0.1:{server.server_address[1]}/v1",
                        api_key="x", max_retries=0, timeout=5)
    reply = sdk.chat.completions.create(model="m", max_tokens=1,
                                        messages=[{"role": "user", "content": prompt}])
    assert reply.usage and reply.usage.prompt_tokens_details
    return reply.usage.prompt_tokens_details.cached_tokens or 0


def test_every_slot_of_a_server_that_keeps_several_prompts_is_emptied(slots):
    a, b = "fix the bug in page() " * 20, "give only the wrong line " * 20
    assert _cached(slots, a) < 40 and _cached(slots, b) < 40  # the messages' JSON alone
    assert _cached(slots, a) > len(a) and _cached(slots, b) > len(b)  # both kept, a slot each
    assert asyncio.run(evict_prompt_caches(_served_by(slots), {"SIM_API_KEY": "x"})) == []
    assert _cached(slots, a) < 40 and _cached(slots, b) < 40  # neither survives the eviction
    evictions = [body for body in slots.bodies if "id_slot" in body]
    models = {body["model"] for body in evictions}
    # one request per slot and model, each one token and unrelated to any prompt
    assert sorted(body["id_slot"] for body in evictions) == sorted(list(range(3)) * len(models))
    assert all(body["max_tokens"] == 1 and "cache eviction" in body["messages"][0]["content"]
               for body in evictions)


@pytest.mark.parametrize("slots", [(2, False)], indirect=True)
def test_a_server_that_does_not_say_its_slots_gets_one_request_without_naming_one(slots):
    assert asyncio.run(evict_prompt_caches(_served_by(slots), {"SIM_API_KEY": "x"})) == []
    models = {s.model for s in _served_by(slots).roles.values()}
    assert len(slots.bodies) == len(models)
    assert not any("id_slot" in body for body in slots.bodies)


def test_each_local_model_gets_one_unrelated_one_token_request(fresh_sim):
    roles = sim_roles(fresh_sim, http=True)
    used = {roles.models[s.model].id for s in roles.roles.values()}
    assert asyncio.run(evict_prompt_caches(roles, {"SIM_API_KEY": "x"})) == []
    asyncio.run(evict_prompt_caches(roles, {}))
    for model in used:
        sent = fresh_sim.state.requests_for(model)
        assert len(sent) == 2, model  # once per eviction, whatever number of roles use it
        assert all(r.body["max_tokens"] == 1 for r in sent)
        systems = [r.body["messages"][0]["content"] for r in sent]
        assert systems[0] != systems[1] and all("cache eviction" in s for s in systems)
    # nothing of a task or a prompt goes out: only the eviction's own two messages
    assert all(len(r.body["messages"]) == 2 for m in used for r in fresh_sim.state.requests_for(m))


def test_public_endpoints_are_never_called_and_a_down_server_is_reported():
    from orchestrator.config.layers import load_roles
    from orchestrator.faces.demo import scenario_path

    text = scenario_path("demo-roles.toml").read_text(encoding="utf-8")
    public = load_roles(base_text=text, sets=['providers.sim.base_url="https://api.invalid/v1"'])
    assert asyncio.run(evict_prompt_caches(public, {})) == []  # not called: no error either
    down = load_roles(base_text=text, sets=['providers.sim.base_url="http://127.0.0.1:9/v1"'])
    left = asyncio.run(evict_prompt_caches(down, {}))
    assert left and all("127.0.0.1:9" in f for f in left)


def test_cold_runs_go_one_at_a_time(fresh_sim):
    roles = sim_roles(fresh_sim, http=True)
    with pytest.raises(UsageError, match="--cold needs --jobs 1"):
        asyncio.run(arun_bench(load_suite("builtin"), [("a", roles)], jobs=2, cold=True))
