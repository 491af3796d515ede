"""The messages a session adds to its conversation besides tool results: the model's turn as
the wire carries it, the nudge when it called nothing, and the ``submit`` tool, whose call ends
a session when its payload validates (otherwise the answer says what to fix)."""

from __future__ import annotations

import json
from typing import Any

from pydantic import BaseModel, ValidationError

from orchestrator.config.prompts import text
from orchestrator.models.base import REASONING, Completion, ToolCallData
from orchestrator.tools.base import parameters

SUBMIT = "submit"


def submit_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The ``submit`` tool's declaration for a payload of ``model``."""
    params = parameters(model)
    return {
        "type": "function",
        "function": {
            "name": SUBMIT,
            "description": text("session", "submit_description", schema=model.__name__),
            "parameters": params,
        },
    }


def submission(model: type[BaseModel], arguments: str) -> tuple[str, BaseModel | None]:
    """What a ``submit`` call answers, and its payload when it validates."""
    try:
        raw = json.loads(arguments or "{}")
        return text("session", "submitted"), model.model_validate(raw)
    except json.JSONDecodeError as exc:
        return text("session", "submit_not_json", error=exc), None
    except ValidationError as exc:
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
            for e in exc.errors()[:8]
        )
        return text("session", "submit_invalid", problems=problems), None


def assistant_message(completion: Completion, calls: list[ToolCallData]) -> dict[str, Any]:
    """The model's turn as the next request carries it back."""
    message: dict[str, Any] = {"role": "assistant", "content": completion.content}
    if completion.reasoning:  # carried back to the model that wrote it (Responses API)
        message[REASONING] = dict(completion.reasoning)
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return message


def nudge(names: list[str]) -> dict[str, Any]:
    """What a model that called no tool is told: the tools it has, and to submit."""
    listed = ", ".join([*names, SUBMIT])
    return {"role": "user", "content": text("session", "nudge", names=listed, submit=SUBMIT)}
