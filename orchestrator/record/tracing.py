"""OpenTelemetry spans for a run, built from its telemetry: run -> role -> session -> call / tool.

Optional twice over: without the ``otel`` extra, or with no tracer provider configured, nothing is
built and a run pays nothing. ``Telemetry`` feeds a ``SpanHook`` the events it already has, so no
other module knows about tracing. Spans carry the GenAI semantic-convention attributes (model,
tokens, service tier) and never prompt or reply text unless
``OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true`` asks for it (secrets still redacted).

An embedding application's own tracer provider is used as it is; the CLI installs one from the
SDK's standard variables (``OTEL_TRACES_EXPORTER`` = console, otlp or none;
``OTEL_EXPORTER_OTLP_*``), see ``configure_from_env``. Model calls are ``CLIENT`` spans.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Any

from orchestrator.errors import UsageError

if TYPE_CHECKING:  # the CLI imports this module as it starts: no event models built for it
    from orchestrator.record.events import Event
    from orchestrator.state import CallRecord

CAPTURE_ENV = "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"
ENDPOINT_VARS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
SERVICE_NAME = "orchestrate"
_PROVIDER: ContextVar[Any] = ContextVar("orchestrate_tracer_provider", default=None)


@contextmanager
def traced_by(provider: Any) -> Iterator[None]:
    """Trace the runs started inside this block with ``provider`` instead of the global one."""
    token = _PROVIDER.set(provider)
    try:
        yield
    finally:
        _PROVIDER.reset(token)


def span_hook(
    run_id: str, env: Mapping[str, str], secrets: Sequence[str] = ()
) -> SpanHook | None:
    """A hook that turns one run's telemetry into spans, or None when nothing would record them."""
    try:
        from opentelemetry import trace
    except ImportError:
        return None
    provider = _PROVIDER.get() or trace.get_tracer_provider()
    tracer = provider.get_tracer("orchestrate")
    root = tracer.start_span("orchestrate.run", attributes={"orchestrate.run.id": run_id})
    if not root.is_recording():  # no SDK configured: skip the work for every event
        root.end()
        return None
    capture = env.get(CAPTURE_ENV, "").strip().lower() == "true"
    return SpanHook(tracer, root, capture=capture, secrets=tuple(secrets))


def configure_from_env(env: Mapping[str, str], warn: Callable[[str], None] | None = None) -> bool:
    """Install a tracer provider as the SDK's standard variables ask, when no one else did.

    ``OTEL_TRACES_EXPORTER`` (comma-separated) names the exporters the SDK registers
    (``opentelemetry_traces_exporter`` entry points): ``console`` prints each span as JSON on
    stdout as it ends, ``otlp`` sends over OTLP (``OTEL_EXPORTER_OTLP_*``: endpoint, protocol,
    headers, timeout, compression, read by the exporter itself), ``none`` turns tracing off. An
    exporter that is not installed is named once through ``warn`` and skipped. Unset, spans go
    over OTLP only when an endpoint variable names where. Nothing happens with
    ``OTEL_SDK_DISABLED=true`` or when the process already has an SDK tracer provider (an
    embedding application's). True when one was installed.
    """
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return False
    names = [n.strip().lower() for n in env.get("OTEL_TRACES_EXPORTER", "").split(",")
             if n.strip()]
    if not names:
        if not any(env.get(name) for name in ENDPOINT_VARS):
            return False  # no collector named: none is assumed on localhost
        names = ["otlp"]
    names = [n for n in dict.fromkeys(names) if n != "none"]
    if not names:
        return False
    try:
        from opentelemetry import trace
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor, SimpleSpanProcessor
    except ImportError:
        raise UsageError(
            "OpenTelemetry is asked for (OTEL_TRACES_EXPORTER or OTEL_EXPORTER_OTLP_ENDPOINT) but "
            "its SDK is not installed: pip install 'orchestrate[otel]' (or unset the variable)"
        ) from None
    if isinstance(trace.get_tracer_provider(), TracerProvider):
        return False
    exporters = {name: exporter for name in names
                 if (exporter := _exporter(name, env, warn or _warn)) is not None}
    if not exporters:
        return False
    named = "OTEL_SERVICE_NAME" in env or "service.name=" in env.get("OTEL_RESOURCE_ATTRIBUTES", "")
    provider = TracerProvider(resource=Resource.create({} if named else {"service.name": SERVICE_NAME}))
    for name, exporter in exporters.items():  # the console's spans as they end, in order
        provider.add_span_processor(SimpleSpanProcessor(exporter) if name == "console"
                                    else BatchSpanProcessor(exporter))
    trace.set_tracer_provider(provider)
    return True


_WARNED: set[str] = set()


def _warn(message: str) -> None:
    import warnings

    warnings.warn(message, RuntimeWarning, stacklevel=3)


def _exporter(name: str, env: Mapping[str, str], warn: Callable[[str], None]) -> Any:
    """A new span exporter of the name ``OTEL_TRACES_EXPORTER`` gives, found as the SDK finds
    it (its entry point); None, said once, when no installed package provides it."""
    from importlib.metadata import entry_points

    entry = name
    if name == "otlp":
        protocol = (env.get("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
                    or env.get("OTEL_EXPORTER_OTLP_PROTOCOL") or "http/protobuf").strip()
        entry = {"http/protobuf": "otlp_proto_http", "grpc": "otlp_proto_grpc"}.get(protocol, "")
        if not entry:
            raise UsageError(f"OTEL_EXPORTER_OTLP_PROTOCOL={protocol} is not supported; "
                             "use http/protobuf (the default) or grpc")
    found = entry_points(group="opentelemetry_traces_exporter", name=entry)
    if found:
        return next(iter(found)).load()()
    if entry == "otlp_proto_grpc":
        raise UsageError("OTEL_EXPORTER_OTLP_PROTOCOL=grpc needs "
                         "pip install opentelemetry-exporter-otlp-proto-grpc")
    if name not in _WARNED:
        _WARNED.add(name)
        known = sorted({"none", "otlp", *(e.name for e in entry_points(
            group="opentelemetry_traces_exporter"))})
        warn(f"OTEL_TRACES_EXPORTER={name}: no such span exporter is installed, so no spans go "
             f"there (known here: {', '.join(known)})")
    return None


# --- the spans of one run ------------------------------------------------------------------------


def _wall_ns(monotonic: float) -> int:
    """A ``time.monotonic()`` reading as epoch nanoseconds, which spans need."""
    return time.time_ns() - int((time.monotonic() - monotonic) * 1e9)


def _root_of(session: str) -> str:
    return session.split(".", 1)[0]


class SpanHook:
    """Builds the spans of one run from its events; ``close`` ends whatever is still open."""

    def __init__(self, tracer: Any, root: Any, *, capture: bool, secrets: tuple[str, ...]) -> None:
        from opentelemetry import trace
        from opentelemetry.trace import Status, StatusCode

        self._trace, self._status, self._codes = trace, Status, StatusCode
        self._tracer, self._root = tracer, root
        self._capture, self._secrets = capture, secrets
        self._roles: dict[str, Any] = {}  # root session id -> the role's span
        self._sessions: dict[str, Any] = {}  # session id -> its span
        self._routes: dict[str, dict[str, Any]] = {}  # session id -> model, provider, tier
        self._kinds: dict[str, Any] = {}  # session id -> its role's kind (plan, explore, ...)
        self._started = self._finished = False

    # --- events ---------------------------------------------------------------------------------

    def event(self, event: Event) -> None:
        handler = _HANDLERS.get(event.kind)
        if handler is not None:
            handler(self, event)

    def _run_started(self, event: Event) -> None:
        self._started = True
        data = event.data
        self._root.set_attributes(_clean({
            "orchestrate.repo": data.get("repo"), "orchestrate.branch": data.get("branch"),
            "orchestrate.base_commit": data.get("base_commit"),
            "orchestrate.resumed": event.kind == "run_resumed",
        }))

    def _run_finished(self, event: Event) -> None:
        status = str(event.data.get("status", ""))
        self._root.set_attribute("orchestrate.run.status", status)
        if status not in ("succeeded", "awaiting_approval"):
            self._root.set_status(self._status(self._codes.ERROR, self._scrub(
                str(event.data.get("reason", "")))))
        self._finished = True

    def _session_started(self, event: Event) -> None:
        sid, data = event.session or "", event.data
        role = event.role or "?"
        self._routes[sid] = {"model": data.get("model"), "provider": data.get("provider"),
                             "tier": data.get("tier"), "effort": data.get("effort")}
        self._kinds[sid] = data.get("role_kind")
        if data.get("purpose") == "handoff":
            parent = self._sessions.get(str(data.get("parent"))) or self._role(_root_of(sid), role)
        else:
            parent = self._role(_root_of(sid), role)
        self._sessions[sid] = self._tracer.start_span(
            f"session {role}", context=self._trace.set_span_in_context(parent),
            attributes=_clean({
                "orchestrate.role": role, "orchestrate.session.id": sid,
                "orchestrate.session.parent": data.get("parent"),
                "orchestrate.session.purpose": data.get("purpose"),
                "orchestrate.context_window": data.get("window"),
                "gen_ai.conversation.id": sid, "gen_ai.request.model": data.get("model"),
                "orchestrate.tier": data.get("tier"), "orchestrate.effort": data.get("effort"),
            }),
        )

    def _role(self, root: str, role: str) -> Any:
        span = self._roles.get(root)
        if span is None:
            span = self._tracer.start_span(
                f"invoke_agent {role}", context=self._trace.set_span_in_context(self._root),
                attributes={"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.name": role,
                            "gen_ai.agent.id": root, "orchestrate.role": role},
            )
            self._roles[root] = span
        return span

    def _session_finished(self, event: Event) -> None:
        data = event.data
        span = self._sessions.pop(event.session or "", None)
        if span is not None:
            span.set_attributes(_clean({
                "orchestrate.turns": data.get("turns"), "orchestrate.tool_calls": data.get("tool_calls"),
                "orchestrate.peak_context": data.get("peak_context"),
                "orchestrate.forks": data.get("forks"),
            }))
            span.end()
        if self._kinds.pop(event.session or "", None) == "explore":
            return  # explorer_finished ends the role's span, with the claim counts
        root = self._roles.pop(str(data.get("root")), None)
        if root is not None:
            root.end()

    def _forked(self, event: Event) -> None:
        self._kinds.pop(event.session or "", None)  # its child goes on under its own id
        span = self._sessions.pop(event.session or "", None)
        if span is not None:
            span.set_attributes(_clean({"orchestrate.fork.reason": event.data.get("reason"),
                                        "orchestrate.fork.child": event.data.get("child")}))
            span.end()

    def _tool(self, event: Event) -> None:
        data = event.data
        end = time.time_ns()
        start = end - int(float(data.get("duration_s") or 0.0) * 1e9)
        span = self._tracer.start_span(
            f"execute_tool {data.get('tool')}", context=self._parent(event.session),
            start_time=start, attributes=_clean({
                "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": data.get("tool"),
                "orchestrate.tool.ok": data.get("ok"), "orchestrate.tool.chars": data.get("chars"),
            }),
        )
        if data.get("ok") is False:
            span.set_status(self._status(self._codes.ERROR))
        span.end(end_time=end)

    def _failed_call(self, event: Event) -> None:
        data = dict(event.data)
        end = time.time_ns()
        start = end - int(float(data.get("duration_s") or 0.0) * 1e9)
        span = self._chat_span(event.session or "", data, start)
        error = self._scrub(str(data.get("error") or "error"))
        span.set_attribute("error.type", error.split(":", 1)[0])
        span.set_status(self._status(self._codes.ERROR, error))
        span.end(end_time=end)

    def _explorer_finished(self, event: Event) -> None:
        data = event.data
        span = self._roles.pop(event.session or "", None)
        if span is None:
            return
        span.set_attributes(_clean({
            "orchestrate.claims.submitted": data.get("submitted"),
            "orchestrate.claims.verified": data.get("verified"),
            "orchestrate.claims.dropped": data.get("dropped"),
        }))
        if data.get("error"):
            span.set_status(self._status(self._codes.ERROR, self._scrub(str(data["error"]))))
        self._end_lineage(event.session or "")
        span.end()

    def _note(self, event: Event) -> None:
        """Test results, reviews, warnings and replays: events on the nearest span."""
        attrs = {f"orchestrate.{k}": v for k, v in event.data.items()
                 if isinstance(v, str | bool | int | float)}
        attrs = {k: self._scrub(v) if isinstance(v, str) else v for k, v in attrs.items()}
        span = self._sessions.get(event.session or "") or self._root
        span.add_event(event.kind, attributes=attrs)

    # --- model calls ----------------------------------------------------------------------------

    def call(
        self, record: CallRecord, busy: tuple[float, float], *,
        messages: Sequence[Mapping[str, Any]] | None = None, reply: str | None = None,
    ) -> None:
        """One finished model call, timed by the interval the session measured."""
        data = record.model_dump()
        span = self._chat_span(record.session, data, _wall_ns(busy[0]))
        span.set_attributes(_clean({
            "gen_ai.response.model": record.served_model,
            "gen_ai.usage.input_tokens": record.prompt_tokens,
            "gen_ai.usage.output_tokens": record.output_tokens,
            "gen_ai.usage.cache_read.input_tokens": record.cached_tokens,
            "gen_ai.usage.reasoning.output_tokens": record.reasoning_tokens,
            "gen_ai.response.time_to_first_chunk": record.ttft_s,
            "openai.response.service_tier": record.served_tier,
            "orchestrate.cost_usd": record.cost_usd,
            "orchestrate.tokens_per_s": record.tokens_per_s,
            "orchestrate.stopped": record.stopped,  # the client ended the stream (a repeat)
        }))
        if self._capture and messages is not None:
            system, chat = _messages(messages)
            span.set_attribute("gen_ai.system_instructions", self._scrub(json.dumps(system)))
            span.set_attribute("gen_ai.input.messages", self._scrub(json.dumps(chat)))
            out = [{"role": "assistant", "parts": [{"type": "text", "content": reply or ""}]}]
            span.set_attribute("gen_ai.output.messages", self._scrub(json.dumps(out)))
        span.end(end_time=_wall_ns(busy[1]))

    def _chat_span(self, session: str, data: Mapping[str, Any], start: int) -> Any:
        route = self._routes.get(session, {})
        model = data.get("requested_model") or route.get("model")
        return self._tracer.start_span(  # a call to a model server: a client span
            f"chat {model}", context=self._parent(session), start_time=start,
            kind=self._trace.SpanKind.CLIENT,
            attributes=_clean({
                "gen_ai.operation.name": "chat", "gen_ai.system": "openai",  # the wire's protocol
                "gen_ai.provider.name": route.get("provider"),
                "gen_ai.request.model": model, "gen_ai.conversation.id": session,
                "openai.request.service_tier": data.get("requested_tier"),
                "orchestrate.tier": route.get("tier"), "orchestrate.effort": data.get("effort"),
                "orchestrate.fallback_step": data.get("fallback_step"),
                "orchestrate.role": data.get("role"),
            }),
        )

    def _parent(self, session: str | None) -> Any:
        span = self._sessions.get(session or "") or self._roles.get(_root_of(session or ""))
        return self._trace.set_span_in_context(span or self._root)

    # --- the end --------------------------------------------------------------------------------

    def _end_lineage(self, root: str) -> None:
        for sid in [s for s in self._sessions if _root_of(s) == root]:
            self._sessions.pop(sid).end()

    def close(self) -> None:
        """End every span still open; an unfinished run's root span says so."""
        unfinished = self._status(self._codes.ERROR, "ended before it finished")
        for span in [*self._sessions.values(), *self._roles.values()]:
            span.set_status(unfinished)
            span.end()
        self._sessions.clear()
        self._roles.clear()
        if self._started and not self._finished:
            self._root.set_status(self._status(self._codes.ERROR, "the run stopped before its end"))
        self._root.end()

    def _scrub(self, text: str) -> str:
        for secret in self._secrets:
            text = text.replace(secret, "***")
        return text


def _clean(attrs: Mapping[str, Any]) -> dict[str, Any]:
    """Span attributes without the unknown (None) values, which OpenTelemetry refuses."""
    return {k: v for k, v in attrs.items() if v is not None}


def _messages(messages: Sequence[Mapping[str, Any]]) -> tuple[list[Any], list[Any]]:
    """OpenAI chat messages in the GenAI conventions' shape: system parts, then the chat."""
    system: list[Any] = []
    chat: list[Any] = []
    for m in messages:
        text = m.get("content")
        parts: list[dict[str, Any]] = [{"type": "text", "content": text}] if text else []
        if m.get("role") == "system":
            system += parts
            continue
        for call in m.get("tool_calls") or ():
            fn = call.get("function", {})
            parts.append({"type": "tool_call", "id": call.get("id"), "name": fn.get("name"),
                          "arguments": fn.get("arguments")})
        if m.get("role") == "tool":
            parts = [{"type": "tool_call_response", "id": m.get("tool_call_id"), "response": text}]
        chat.append({"role": m.get("role"), "parts": parts})
    return system, chat


_HANDLERS: dict[str, Callable[[SpanHook, Event], None]] = {
    "run_started": SpanHook._run_started,
    "run_resumed": SpanHook._run_started,
    "run_finished": SpanHook._run_finished,
    "role_started": SpanHook._session_started,
    "role_finished": SpanHook._session_finished,
    "fork": SpanHook._forked,
    "tool_called": SpanHook._tool,
    "call_failed": SpanHook._failed_call,
    "explorer_finished": SpanHook._explorer_finished,
    "test_result": SpanHook._note,
    "localized": SpanHook._note,
    "review": SpanHook._note,
    "warning": SpanHook._note,
    "call_replayed": SpanHook._note,
}
