"""The simulated model server, driven over real HTTP with the real openai SDK."""

from __future__ import annotations

import asyncio
import json
import time
import urllib.error
import urllib.request

import openai
import pytest
from openai import AsyncOpenAI, OpenAI

from orchestrator.errors import ConfigError
from orchestrator.sim import (
    ChatRequestView,
    FaultSpec,
    ModelBehavior,
    Reply,
    Scenario,
    SimServer,
    ToolCallSpec,
    count_prompt_tokens,
    count_text_tokens,
    register_behavior,
    serve_forever,
)

USER = [{"role": "user", "content": "hello there"}]


@pytest.fixture(scope="module")
def server():
    with SimServer(Scenario(models={"*": ModelBehavior(behavior="echo")})) as sim:
        yield sim


@pytest.fixture
def serve(server):
    """Swap the shared server's scenario and forget earlier requests."""

    def _serve(**models: ModelBehavior) -> SimServer:
        server.set_scenario(Scenario(models=models))
        server.state.clear()
        return server

    return _serve


def sync_client(sim: SimServer) -> OpenAI:
    return OpenAI(base_url=sim.base_url, api_key="sim", max_retries=0)


def async_client(sim: SimServer) -> AsyncOpenAI:
    return AsyncOpenAI(base_url=sim.base_url, api_key="sim", max_retries=0)


def test_lists_models_without_the_default_entry(serve):
    sim = serve(a=ModelBehavior(behavior="echo"), b=ModelBehavior(behavior="echo"),
                **{"*": ModelBehavior(behavior="echo")})
    assert [m.id for m in sync_client(sim).models.list()] == ["a", "b"]


def test_non_streamed_content_and_usage(serve):
    sim = serve(m=ModelBehavior(script=["hi from the sim"]))
    r = sync_client(sim).chat.completions.create(model="m", messages=USER)
    assert r.choices[0].message.content == "hi from the sim"
    assert r.choices[0].finish_reason == "stop"
    assert r.model == "m" and r.service_tier == "default"
    assert r.usage.completion_tokens == count_text_tokens("hi from the sim")
    assert r.usage.prompt_tokens == sim.requests[0].prompt_tokens > 0
    assert r.usage.prompt_tokens_details.cached_tokens == 0


async def test_streamed_content_reassembles(serve):
    text = "The quick brown fox jumps over the lazy dog."
    sim = serve(m=ModelBehavior(script=[text]))
    stream = await async_client(sim).chat.completions.create(model="m", messages=USER,
                                                             stream=True)
    pieces, finish = [], None
    async for chunk in stream:
        if chunk.choices:
            pieces.append(chunk.choices[0].delta.content or "")
            finish = chunk.choices[0].finish_reason or finish
    assert "".join(pieces) == text
    assert len([p for p in pieces if p]) > 3
    assert finish == "stop"


async def test_streamed_tool_calls_reassemble_with_usage(serve):
    calls = [ToolCallSpec(name="read_file", arguments={"path": "src/app/main.py", "lines": 40},
                          id="call_1"),
             ToolCallSpec(name="grep", arguments={"pattern": "def main"})]
    sim = serve(m=ModelBehavior(script=[Reply(tool_calls=calls)]))
    stream = await async_client(sim).chat.completions.create(
        model="m", messages=USER, stream=True, stream_options={"include_usage": True})
    got: dict[int, dict] = {}
    usage, finish = None, None
    async for chunk in stream:
        usage = chunk.usage or usage
        for choice in chunk.choices:
            finish = choice.finish_reason or finish
            for tc in choice.delta.tool_calls or []:
                slot = got.setdefault(tc.index, {"id": None, "name": "", "args": ""})
                slot["id"] = tc.id or slot["id"]
                if tc.function:
                    slot["name"] += tc.function.name or ""
                    slot["args"] += tc.function.arguments or ""
    assert finish == "tool_calls"
    assert got[0]["id"] == "call_1" and got[0]["name"] == "read_file"
    assert json.loads(got[0]["args"]) == {"path": "src/app/main.py", "lines": 40}
    assert got[1]["name"] == "grep" and got[1]["id"].startswith("call_")
    assert json.loads(got[1]["args"]) == {"pattern": "def main"}
    assert usage is not None and usage.completion_tokens > 0
    assert usage.total_tokens == usage.prompt_tokens + usage.completion_tokens


def test_string_arguments_are_sent_verbatim(serve):
    sim = serve(m=ModelBehavior(script=[Reply(tool_calls=[ToolCallSpec(name="f",
                                                                       arguments="{not json")])]))
    r = sync_client(sim).chat.completions.create(model="m", messages=USER)
    assert r.choices[0].message.tool_calls[0].function.arguments == "{not json"
    assert r.choices[0].finish_reason == "tool_calls"


def test_script_advances_with_assistant_turns_and_repeats_last(serve):
    sim = serve(m=ModelBehavior(script=["first", "second"]))
    client = sync_client(sim)
    messages = list(USER)
    seen = []
    for _ in range(3):
        content = client.chat.completions.create(model="m", messages=messages)
        seen.append(content.choices[0].message.content)
        messages += [{"role": "assistant", "content": seen[-1]},
                     {"role": "user", "content": "go on"}]
    assert seen == ["first", "second", "second"]


def test_behavior_computed_from_request(serve):
    @register_behavior("test-count-tools")
    def count_tools(req: ChatRequestView) -> Reply:
        results = req.tool_results()
        if not results:
            return Reply(tool_calls=[ToolCallSpec(name=req.tool_names[0], arguments={}, id="c1")])
        call_id, name, content = results[0]
        return Reply(content=f"{req.system_text()}|{call_id}|{name}|{content}|"
                     f"{req.assistant_turns}|{req.last_user_text()}")

    sim = serve(m=ModelBehavior(behavior="test-count-tools"))
    client = sync_client(sim)
    tools = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]
    messages = [{"role": "system", "content": "sys"}, *USER]
    first = client.chat.completions.create(model="m", messages=messages, tools=tools)
    call = first.choices[0].message.tool_calls[0]
    messages += [first.choices[0].message.model_dump(exclude_none=True),
                 {"role": "tool", "tool_call_id": call.id, "content": "a.py b.py"}]
    second = client.chat.completions.create(model="m", messages=messages, tools=tools)
    assert second.choices[0].message.content == "sys|c1|ls|a.py b.py|1|hello there"


def test_service_tier_echo_and_overrides(serve):
    sim = serve(plain=ModelBehavior(behavior="echo"),
                flexed=ModelBehavior(behavior="echo", served_tier="flex", served_model="big-2"))
    client = sync_client(sim)
    assert client.chat.completions.create(model="plain", messages=USER,
                                          service_tier="priority").service_tier == "priority"
    r = client.chat.completions.create(model="flexed", messages=USER, service_tier="priority")
    assert (r.service_tier, r.model) == ("flex", "big-2")


def test_requests_are_recorded_without_authorization(serve):
    sim = serve(m=ModelBehavior(behavior="echo"))
    sync_client(sim).chat.completions.create(model="m", messages=USER, reasoning_effort="low",
                                             service_tier="flex")
    (rec,) = sim.state.requests_for("m")
    assert rec.body["reasoning_effort"] == "low" and rec.body["service_tier"] == "flex"
    assert rec.status == 200 and rec.finished >= rec.started and rec.seq == 1
    assert "authorization" not in rec.headers and rec.headers["user-agent"].startswith("OpenAI")


def test_context_window_overflow(serve):
    sim = serve(m=ModelBehavior(behavior="echo", context_window=10))
    with pytest.raises(openai.BadRequestError) as err:
        sync_client(sim).chat.completions.create(
            model="m", messages=[{"role": "user", "content": "x" * 400}])
    assert err.value.code == "context_length_exceeded"
    assert "maximum context length is 10 tokens" in err.value.message
    assert sim.requests[0].status == 400


def test_injected_quota_fault(serve):
    fault = FaultSpec(status=429, code="insufficient_quota", type="insufficient_quota",
                      message="You exceeded your current quota", headers={"retry-after": "1"})
    sim = serve(m=ModelBehavior(script=[Reply(error=fault)]))
    with pytest.raises(openai.RateLimitError) as err:
        sync_client(sim).chat.completions.create(model="m", messages=USER)
    assert err.value.code == "insufficient_quota"
    assert err.value.response.headers["retry-after"] == "1"
    assert len(sim.requests) == 1


def test_unknown_model_is_404(serve):
    sim = serve(m=ModelBehavior(behavior="echo"))
    with pytest.raises(openai.NotFoundError) as err:
        sync_client(sim).chat.completions.create(model="nope", messages=USER)
    assert err.value.code == "model_not_found"


def test_malformed_body_is_400_in_openai_shape(serve):
    sim = serve(m=ModelBehavior(behavior="echo"))
    req = urllib.request.Request(f"{sim.base_url}/chat/completions", data=b"{oops",
                                 headers={"content-type": "application/json"})
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen(req, timeout=5)
    assert err.value.code == 400
    body = json.loads(err.value.read())
    assert set(body["error"]) == {"message", "type", "param", "code"}


async def test_parallel_streams_overlap(serve):
    sim = serve(slow=ModelBehavior(behavior="echo", delay_s=0.5))
    client = async_client(sim)

    async def one(i: int) -> str:
        stream = await client.chat.completions.create(
            model="slow", messages=[{"role": "user", "content": f"n{i}"}], stream=True)
        return "".join([c.choices[0].delta.content or "" async for c in stream if c.choices])

    out = await asyncio.gather(*(one(i) for i in range(20)))
    assert out == [f"n{i}" for i in range(20)]
    assert sim.state.max_in_flight["slow"] >= 10
    assert sim.state.overlapped("slow")
    assert sim.state.in_flight["slow"] == 0


@pytest.mark.parametrize("stream", [False, True])
def test_tokens_per_second_pacing(serve, stream):
    sim = serve(m=ModelBehavior(script=["abcd" * 100], tokens_per_second=1000))
    client = sync_client(sim)
    t0 = time.monotonic()
    if stream:
        for _ in client.chat.completions.create(model="m", messages=USER, stream=True):
            pass
    else:
        r = client.chat.completions.create(model="m", messages=USER)
        assert r.usage.completion_tokens == 100
    assert 0.08 <= time.monotonic() - t0 < 1.0


def test_sequential_requests_do_not_overlap(serve):
    sim = serve(m=ModelBehavior(behavior="echo"))
    client = sync_client(sim)
    for _ in range(3):
        client.chat.completions.create(model="m", messages=USER)
    assert not sim.state.overlapped("m") and sim.state.max_in_flight["m"] == 1


SCENARIO_TOML = """
tokenizer = "words"

[models."fast"]
delay_s = 0.01
context_window = 8000
served_tier = "flex"
script = ["plain text turn"]

[models."tools"]
[[models."tools".script]]
tool_calls = [{ name = "read_file", arguments = { path = "README.md" } }]
[[models."tools".script]]
error = { status = 429, code = "insufficient_quota", type = "insufficient_quota", message = "q" }

[models."*"]
behavior = "echo"
"""


def test_load_toml_and_json_round_trip(tmp_path):
    toml_path = tmp_path / "s.toml"
    toml_path.write_text(SCENARIO_TOML)
    scenario = Scenario.load(toml_path)
    assert scenario.tokenizer == "words"
    assert scenario.models["fast"].script[0].content == "plain text turn"
    assert scenario.models["tools"].script[1].error.status == 429
    assert scenario.model_ids() == ["fast", "tools"]
    json_path = tmp_path / "s.json"
    json_path.write_text(scenario.model_dump_json())
    assert Scenario.load(json_path) == scenario


def test_respond_callable_is_not_serialised():
    scenario = Scenario(models={"m": ModelBehavior(respond=lambda req: Reply(content="x"))})
    assert "respond" not in json.loads(scenario.model_dump_json())["models"]["m"]


def test_load_bad_key_names_file_and_key(tmp_path):
    path = tmp_path / "bad.toml"
    path.write_text('[models.fast]\nbehavior = "echo"\ndelay_seconds = 1\n')
    with pytest.raises(ConfigError) as err:
        Scenario.load(path)
    assert "bad.toml" in str(err.value) and "models.fast.delay_seconds" in str(err.value)


def test_behavior_source_must_be_exactly_one(tmp_path):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps({"models": {"m": {"behavior": "no-such-thing"}}}))
    with pytest.raises(ConfigError, match="no-such-thing"):
        Scenario.load(path)
    with pytest.raises(ValueError):
        ModelBehavior(script=["a"], behavior="echo")


def test_tokenizers_disagree():
    text = "def add(a, b):\n    return a + b  # sums two numbers"
    assert count_text_tokens(text, "chars4") != count_text_tokens(text, "words")
    body = {"messages": [{"role": "user", "content": text}]}
    assert count_prompt_tokens(body, "chars4") != count_prompt_tokens(body, "words")
    assert count_prompt_tokens(body, "chars4") == -(-len(text) // 4) + 4


def test_serve_forever_refuses_non_loopback():
    with pytest.raises(ValueError, match="loopback"):
        serve_forever(Scenario(), host="0.0.0.0", port=0)


async def test_own_server_starts_and_stops_inside_an_event_loop():
    async with SimServer(Scenario(models={"m": ModelBehavior(script=["ok"])})) as sim:
        r = await async_client(sim).chat.completions.create(model="m", messages=USER)
        assert r.choices[0].message.content == "ok"
        assert sim.base_url == f"http://127.0.0.1:{sim.port}/v1"
        thread = sim._thread
    assert thread is not None and not thread.is_alive()


def test_a_repeated_prompt_prefix_is_reported_as_cached(server):
    """OpenAI's rule: nothing under 1,024 prompt tokens, then whole blocks of 128 of the
    leading messages (tools first) that an earlier request to the same model already sent."""
    server.set_scenario(Scenario(models={"*": ModelBehavior(script=["ok"] * 10)}))
    server.state.clear()
    client = sync_client(server)
    system = {"role": "system", "content": "You are a careful agent. " * 300}  # ~1,900 tokens
    tools = [{"type": "function", "function": {"name": "read", "parameters": {"type": "object"}}}]

    def cached(model: str, messages: list[dict]) -> tuple[int, int]:
        r = client.chat.completions.create(model=model, messages=messages, tools=tools)
        return r.usage.prompt_tokens, r.usage.prompt_tokens_details.cached_tokens

    first = cached("m", [system, {"role": "user", "content": "question one"}])
    assert first[1] == 0  # nothing seen yet
    prompt, hit = cached("m", [system, {"role": "user", "content": "question two"}])
    assert hit > 0 and hit % 128 == 0 and hit <= prompt
    assert prompt - hit < 160  # everything but the new question, rounded down to a block
    assert cached("other", [system, {"role": "user", "content": "question two"}])[1] == 0
    changed = {"role": "system", "content": "A different start. " + system["content"]}
    assert cached("m", [changed, {"role": "user", "content": "question two"}])[1] == 0
    short = [{"role": "system", "content": "tiny"}, {"role": "user", "content": "hi"}]
    cached("m", short)
    assert cached("m", short)[1] == 0  # under the 1,024-token minimum
