"""One agent session: the tool-calling loop that every role shares.

A session sends the system prompt and the task, runs the tools the model calls, and ends when
the model calls the typed ``submit`` tool with a payload that validates. An invalid payload goes
back to the model as the tool result, so it can correct itself. Tool calls that a model writes
into its content instead of ``tool_calls`` are accepted too.
"""

from __future__ import annotations

import json
import re
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError

from .definitions import AgentDef
from .errors import SessionFailed
from .models.client import Completion, ModelClient, ToolCallData
from .telemetry import Telemetry
from .tools.base import Toolbox

SUBMIT = "submit"
MAX_NUDGES = 3


@dataclass
class SessionOutcome:
    """What a finished session produced."""

    session: str
    payload: BaseModel
    tool_calls: int
    turns: int
    messages: list[dict[str, Any]] = field(default_factory=list)


def submit_schema(model: type[BaseModel]) -> dict[str, Any]:
    params = model.model_json_schema()
    params.pop("title", None)
    return {
        "type": "function",
        "function": {
            "name": SUBMIT,
            "description": f"Submit your final result ({model.__name__}). Ends the session.",
            "parameters": params,
        },
    }


class Session:
    """Runs one agent until it submits, with a turn limit."""

    def __init__(
        self,
        *,
        session_id: str,
        agent: AgentDef,
        client: ModelClient,
        toolbox: Toolbox,
        telemetry: Telemetry,
        max_turns: int,
    ) -> None:
        self.id = session_id
        self.agent = agent
        self.client = client
        self.toolbox = toolbox
        self.telemetry = telemetry
        self.max_turns = max_turns
        self.tool_calls = 0
        self.messages: list[dict[str, Any]] = []

    async def run(self, task: str) -> SessionOutcome:
        role = self.agent.role
        self.messages = [
            {"role": "system", "content": self.agent.system},
            {"role": "user", "content": task},
        ]
        tools = [*self.toolbox.schemas(), submit_schema(self.agent.submit)]
        route = self.client.route
        self.telemetry.emit(
            "role_started", role=role, session=self.id, model=route.model.id,
            tier=route.tier, effort=route.effort,
        )
        nudges = 0
        for turn in range(1, self.max_turns + 1):
            completion = await self._call(tools)
            calls = list(completion.tool_calls) or _calls_from_content(completion.content)
            self.messages.append(_assistant_message(completion, calls))
            if not calls:
                nudges += 1
                if nudges > MAX_NUDGES:
                    break
                self.messages.append({"role": "user", "content": _nudge(self.toolbox)})
                continue
            payload = await self._run_calls(calls)
            if payload is not None:
                self.telemetry.emit(
                    "role_finished", role=role, session=self.id, turns=turn,
                    tool_calls=self.tool_calls,
                )
                return SessionOutcome(self.id, payload, self.tool_calls, turn, self.messages)
        raise SessionFailed(
            f"{role} session {self.id} ended without a valid submission after "
            f"{min(turn, self.max_turns)} turns (max_turns={self.max_turns})"
        )

    async def _call(self, tools: list[dict[str, Any]]) -> Completion:
        started = time.monotonic()
        window = self.client.route.model.context_window

        def progress(pieces: int) -> None:
            self.telemetry.emit(
                "progress", role=self.agent.role, session=self.id, pieces=pieces,
                elapsed=time.monotonic() - started,
            )

        completion = await self.client.complete(
            self.messages, session=self.id, tools=tools, progress=progress
        )
        record = completion.record
        self.telemetry.call(record, (started, time.monotonic()))
        self.telemetry.emit(
            "progress", role=self.agent.role, session=self.id,
            context=(record.prompt_tokens + record.output_tokens) / window,
        )
        return completion

    async def _run_calls(self, calls: list[ToolCallData]) -> BaseModel | None:
        payload: BaseModel | None = None
        for call in calls:
            if call.name == SUBMIT:
                text, payload = self._submit(call.arguments)
            else:
                self.tool_calls += 1
                with self.telemetry.busy("tool"):
                    outcome = await self.toolbox.call(call.name, call.arguments)
                text = outcome.text
                if outcome.policy_violation:
                    self.telemetry.count("policy_violations")
                    self.telemetry.emit(
                        "warning", role=self.agent.role, session=self.id,
                        message=f"policy violation: {call.name}: {text}",
                    )
                self.telemetry.emit(
                    "tool_called", role=self.agent.role, session=self.id, tool=call.name,
                    ok=outcome.ok, chars=len(text),
                )
            self.messages.append({"role": "tool", "tool_call_id": call.id, "content": text})
        return payload

    def _submit(self, arguments: str) -> tuple[str, BaseModel | None]:
        try:
            raw = json.loads(arguments or "{}")
            return "submitted", self.agent.submit.model_validate(raw)
        except json.JSONDecodeError as exc:
            return f"error: submit arguments are not valid JSON ({exc}); call submit again", None
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                for e in exc.errors()[:8]
            )
            return f"error: invalid submission: {problems}. Fix these and call submit again.", None


def _assistant_message(completion: Completion, calls: list[ToolCallData]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.content}
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return message


def _nudge(toolbox: Toolbox) -> str:
    names = ", ".join([*toolbox.names(), SUBMIT])
    return f"Call one of the tools ({names}). When you are done, call {SUBMIT} with your result."


_FENCE = re.compile(r"```(?:json)?\s*(\{.*?\})\s*```", re.S)


def _calls_from_content(content: str | None) -> list[ToolCallData]:
    """Tool calls written as JSON into the content (fenced or bare), as small models do."""
    if not content:
        return []
    candidates = [m.group(1) for m in _FENCE.finditer(content)]
    stripped = content.strip()
    if stripped.startswith("{"):
        candidates.append(stripped)
    calls = []
    for i, text in enumerate(candidates):
        try:
            obj = json.loads(text)
        except json.JSONDecodeError:
            continue
        call = _as_call(obj, i)
        if call is not None:
            calls.append(call)
    return calls


def _as_call(obj: Any, i: int) -> ToolCallData | None:
    if not isinstance(obj, Mapping):
        return None
    name = obj.get("name") or obj.get("tool")
    args = obj.get("arguments", obj.get("parameters", {}))
    if not isinstance(name, str):
        return None
    arguments = args if isinstance(args, str) else json.dumps(args)
    return ToolCallData(f"content_call_{i}", name, arguments)
