"""OpenTelemetry spans: run -> role -> session -> model call / tool call, from a real run against
the simulator, read back with the SDK's in-memory exporter; and OTLP export set up by the
standard environment variables, received by a collector on 127.0.0.1."""

from __future__ import annotations

import json
import subprocess
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from conftest import cli_process as cli
from conftest import run_env, sim_roles

from orchestrator import api
from orchestrator.errors import UsageError
from orchestrator.faces.demo import DEMO_TASK, demo_roles_sets, scenario_path
from orchestrator.record.telemetry import Telemetry
from orchestrator.record.tracing import CAPTURE_ENV, configure_from_env, traced_by

pytest.importorskip("opentelemetry.sdk", reason="the otel extra is not installed")
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)
from opentelemetry.trace import NoOpTracerProvider, StatusCode  # noqa: E402

CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages", "gen_ai.system_instructions")


@pytest.fixture
def exporter():
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with traced_by(provider):
        yield memory
    provider.shutdown()


async def test_a_run_becomes_run_role_session_call_and_tool_spans(exporter, fresh_sim, sample_repo):
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    assert result.status == "succeeded", result.reason
    spans = exporter.get_finished_spans()
    by_id = {s.context.span_id: s for s in spans}

    def parent_of(span):
        return by_id[span.parent.span_id] if span.parent else None

    [root] = [s for s in spans if s.name == "orchestrate.run"]
    assert root.parent is None
    assert root.attributes["orchestrate.run.id"] == result.run_id
    assert root.attributes["orchestrate.run.status"] == "succeeded"
    assert root.status.status_code != StatusCode.ERROR

    roles = [s for s in spans if s.name.startswith("invoke_agent ")]
    assert {s.attributes["gen_ai.agent.name"] for s in roles} == {
        "planner", "explorer", "builder", "reviewer"}
    assert all(parent_of(s) is root for s in roles)
    explorers = sorted((s for s in roles if s.attributes["gen_ai.agent.name"] == "explorer"),
                       key=lambda s: s.attributes["gen_ai.agent.id"])
    assert [s.attributes["orchestrate.claims.verified"] for s in explorers] == [
        e.verified for e in result.explorers]

    sessions = [s for s in spans if s.name.startswith("session ")]
    assert sessions and all(parent_of(s) in roles for s in sessions)
    chats = [s for s in spans if s.name.startswith("chat ")]
    tools = [s for s in spans if s.name.startswith("execute_tool ")]
    assert chats and all(parent_of(s) in sessions for s in chats)
    assert tools and all(parent_of(s) in sessions for s in tools)
    assert {"read", "replace", "run"} <= {s.attributes["gen_ai.tool.name"] for s in tools}

    # the GenAI attributes: the same tokens the run report counts, the tier each role asked for
    per_role = result.per_role
    assert sum(s.attributes["gen_ai.usage.input_tokens"] for s in chats) == sum(
        r.prompt_tokens for r in per_role.values())
    assert sum(s.attributes["gen_ai.usage.output_tokens"] for s in chats) == sum(
        r.output_tokens for r in per_role.values())
    planner = next(s for s in chats if s.attributes["orchestrate.role"] == "planner")
    assert planner.attributes["gen_ai.operation.name"] == "chat"
    assert planner.attributes["gen_ai.request.model"] == "sim-planner"
    assert planner.attributes["gen_ai.response.model"] == "sim-planner"
    assert planner.attributes["gen_ai.provider.name"] == "sim"
    assert planner.attributes["openai.request.service_tier"] == "default"
    assert planner.attributes["orchestrate.tier"] == "standard"
    explorer_chat = next(s for s in chats if s.attributes["orchestrate.role"] == "explorer")
    assert explorer_chat.attributes["orchestrate.tier"] == "ultrafast"
    assert explorer_chat.attributes["openai.request.service_tier"] == "priority"
    assert all(s.end_time >= s.start_time for s in spans)

    # no prompt text unless asked
    for span in spans:
        assert not set(CONTENT_KEYS) & set(span.attributes or {})
        assert not any(DEMO_TASK in str(v) for v in (span.attributes or {}).values())


SCOUT = """\
---
name: scout
kind: explore
description: The team's explore role under its own name.
---
You are a scout: answer one question about the repository with checked citations.
"""


async def test_a_renamed_explore_role_still_gets_its_claim_counts(exporter, fresh_sim,
                                                                  sample_repo):
    agents = sample_repo / ".orchestrate" / "agents"
    agents.mkdir(parents=True)
    (agents / "scout.md").write_text(SCOUT, encoding="utf-8")
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "add", "."],
                   cwd=sample_repo, check=True)
    subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-q", "-m",
                    "scout"], cwd=sample_repo, check=True)
    roles = sim_roles(fresh_sim, 'pipeline.steps=["planner", "scout", "builder", "reviewer"]',
                      'roles.scout.model="explorer-sim"', 'roles.scout.tier="ultrafast"')
    events = []
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=roles, env=run_env(),
                            listeners=[events.append])
    assert result.status == "succeeded", result.reason
    assert result.explorers and {e.role_kind for e in events if e.kind == "role_started"
                                 and e.role == "scout"} == {"explore"}
    roles = [s for s in exporter.get_finished_spans() if s.name.startswith("invoke_agent ")]
    assert {s.attributes["gen_ai.agent.name"] for s in roles} == {
        "planner", "scout", "builder", "reviewer"}
    scouts = sorted((s for s in roles if s.attributes["gen_ai.agent.name"] == "scout"),
                    key=lambda s: s.attributes["gen_ai.agent.id"])
    assert [s.attributes["gen_ai.agent.id"] for s in scouts] == [
        f"scout-{i + 1}" for i in range(len(result.explorers))]
    assert [s.attributes["orchestrate.claims.verified"] for s in scouts] == [
        e.verified for e in result.explorers]
    assert all(s.status.status_code != StatusCode.ERROR for s in scouts)


async def test_message_content_is_kept_only_when_asked_and_secrets_are_redacted(
        exporter, fresh_sim, sample_repo):
    secret = "sk-not-a-real-key-0123456789"
    env = run_env(**{CAPTURE_ENV: "true", "ANOTHER_API_KEY": secret})
    question = f"Where is `def median` defined? (ticket {secret})"
    await api.aexplore(question, repo=sample_repo, roles=sim_roles(fresh_sim), env=env)
    chats = [s for s in exporter.get_finished_spans() if s.name.startswith("chat ")]
    planner = next(s for s in chats if s.attributes["orchestrate.role"] == "planner")
    assert "Where is `def median` defined?" in planner.attributes["gen_ai.input.messages"]
    assert planner.attributes["gen_ai.system_instructions"].startswith('[{"type": "text"')
    assert '"role": "assistant"' in planner.attributes["gen_ai.output.messages"]
    every_value = " ".join(str(v) for s in exporter.get_finished_spans()
                           for v in (s.attributes or {}).values())
    assert secret not in every_value and "(ticket ***)" in every_value


def test_without_a_recording_provider_nothing_is_built():
    with traced_by(NoOpTracerProvider()):
        telemetry = Telemetry("no-spans")
    assert telemetry._spans is None  # the per-event cost is one attribute check
    telemetry.close()


def test_configure_from_env_needs_an_endpoint_and_a_known_protocol():
    assert configure_from_env({}) is False
    assert configure_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                               "OTEL_SDK_DISABLED": "true"}) is False
    assert configure_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                               "OTEL_TRACES_EXPORTER": "none"}) is False
    with pytest.raises(UsageError, match="http/protobuf"):
        configure_from_env({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:9",
                            "OTEL_EXPORTER_OTLP_PROTOCOL": "http/json"})


def test_an_exporter_that_is_not_installed_is_named_once_and_skipped():
    said: list[str] = []
    for _ in range(2):
        assert configure_from_env({"OTEL_TRACES_EXPORTER": "zipkin-nowhere"}, said.append) is False
    assert len(said) == 1 and "zipkin-nowhere" in said[0] and "console" in said[0]


def _console_spans(text: str) -> list[dict]:
    """The spans the SDK's console exporter printed (each a JSON object), among other output."""
    decoder, spans, at = json.JSONDecoder(), [], 0
    while (at := text.find("{", at)) != -1:
        try:
            value, end = decoder.raw_decode(text, at)
        except ValueError:
            at += 1
            continue
        if isinstance(value, dict) and "context" in value and "kind" in value:
            spans.append(value)
        at = end
    return spans


def test_the_console_exporter_prints_the_runs_spans_with_model_calls_as_clients(sim,
                                                                               sample_repo):
    sets = [arg for s in demo_roles_sets(sim.base_url) for arg in ("--set", s)]
    env = run_env(OTEL_TRACES_EXPORTER="console")
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
                 "OTEL_SDK_DISABLED"):
        env.pop(name, None)
    proc = cli("explore", "Where is `def median` defined?", "--repo", str(sample_repo),
               "--roles", str(scenario_path("demo-roles.toml")), *sets, env=env)
    assert proc.returncode == 0, proc.stderr
    spans = _console_spans(proc.stdout)
    names = {s["name"] for s in spans}
    assert {"orchestrate.run", "invoke_agent explorer", "chat sim-explorer"} <= names, names
    calls = [s for s in spans if s["name"].startswith("chat ")]
    assert calls and {s["kind"] for s in calls} == {"SpanKind.CLIENT"}
    for span in calls:
        attrs = span["attributes"]
        assert attrs["gen_ai.system"] == "openai" and attrs["gen_ai.operation.name"] == "chat"
        assert attrs["gen_ai.request.model"].startswith("sim-")
        assert attrs["gen_ai.usage.input_tokens"] > 0 and attrs["gen_ai.usage.output_tokens"] > 0
    assert {s["kind"] for s in spans if not s["name"].startswith("chat ")} == {"SpanKind.INTERNAL"}
    # none turns it off
    env["OTEL_TRACES_EXPORTER"] = "none"
    quiet = cli("explore", "Where is `def median` defined?", "--repo", str(sample_repo),
                "--roles", str(scenario_path("demo-roles.toml")), *sets, env=env)
    assert quiet.returncode == 0 and _console_spans(quiet.stdout) == []


class _Collector(BaseHTTPRequestHandler):
    """An OTLP/HTTP trace receiver: keeps every request body posted to /v1/traces."""

    bodies: list[bytes] = []

    def do_POST(self):  # noqa: N802 (http.server's naming)
        body = self.rfile.read(int(self.headers["Content-Length"]))
        if self.path == "/v1/traces":
            type(self).bodies.append(body)
        self.send_response(200)
        self.send_header("Content-Type", "application/x-protobuf")
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args):
        pass


def test_the_cli_exports_spans_over_otlp_from_the_standard_variables(sim, sample_repo):
    from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
        ExportTraceServiceRequest,
    )

    _Collector.bodies = []
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Collector)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        sets = [arg for s in demo_roles_sets(sim.base_url) for arg in ("--set", s)]
        env = run_env(OTEL_EXPORTER_OTLP_ENDPOINT=f"http://127.0.0.1:{server.server_port}",
                      NO_PROXY="127.0.0.1,localhost", no_proxy="127.0.0.1,localhost")
        env.pop("OTEL_SERVICE_NAME", None)
        proc = cli("explore", "Where is `def median` defined?", "--repo", str(sample_repo),
                   "--roles", str(scenario_path("demo-roles.toml")), *sets, "--json", env=env)
        assert proc.returncode == 0, proc.stderr
    finally:
        server.shutdown()
        server.server_close()
    assert _Collector.bodies, "no spans reached the collector"
    names, services = set(), set()
    for body in _Collector.bodies:
        request = ExportTraceServiceRequest.FromString(body)
        for resource_spans in request.resource_spans:
            services |= {a.value.string_value for a in resource_spans.resource.attributes
                         if a.key == "service.name"}
            names |= {s.name for scope in resource_spans.scope_spans for s in scope.spans}
    assert services == {"orchestrate"}
    assert {"orchestrate.run", "invoke_agent planner", "invoke_agent explorer",
            "chat sim-explorer"} <= names
