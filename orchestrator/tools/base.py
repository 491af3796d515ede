"""The tool contract shared by every agent: a name, a pydantic argument model, a function.

A tool function takes the validated argument model and returns text for the model. It raises
``ToolError`` (or ``PolicyViolation``) for anything the model should read and correct; any other
exception is a bug and propagates. Sync functions run in a worker thread so that parallel
explorers never block the event loop. What a tool returns has its key-like values masked
(``secretfiles.mask``; a toolbox over a worktree also masks its secret files' contents,
``secretvalues``) before a model sees it.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import json
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from pydantic import BaseModel, ValidationError

from orchestrator.errors import PolicyViolation, ToolError
from orchestrator.tools.secretfiles import mask

ToolFn = Callable[[Any], str] | Callable[[Any], Awaitable[str]]


@dataclass(frozen=True)
class Tool:
    """One capability offered to a model."""

    name: str
    description: str
    args: type[BaseModel]
    fn: ToolFn
    read_only: bool = True

    def schema(self) -> dict[str, Any]:
        """The OpenAI function-tool declaration."""
        params = parameters(self.args)
        return {
            "type": "function",
            "function": {"name": self.name, "description": self.description, "parameters": params},
        }


@functools.cache
def parameters(model: type[BaseModel]) -> dict[str, Any]:
    """``model``'s JSON schema as function parameters (no title), built once per model since
    pydantic takes about a millisecond to make one. Shared: read it, never change it."""
    params = model.model_json_schema()
    params.pop("title", None)
    return params


@dataclass(frozen=True)
class ToolOutcome:
    """What one tool call produced: text for the model and whether it was an error."""

    name: str
    text: str
    ok: bool = True
    policy_violation: bool = False


class WriteWatch(Protocol):
    """Told when a tool that may write (``read_only=False``) starts and when it has ended."""

    def started(self) -> None: ...

    def finished(self) -> None: ...


@dataclass
class Toolbox:
    """The tools of one session, looked up by name; ``watch`` sees the writing ones run."""

    tools: dict[str, Tool] = field(default_factory=dict)
    watch: WriteWatch | None = None
    masking: Callable[[str], str] = mask  # what every result goes through before a model sees it

    @classmethod
    def of(cls, tools: Iterable[Tool], watch: WriteWatch | None = None,
           masking: Callable[[str], str] = mask) -> Toolbox:
        return cls({t.name: t for t in tools}, watch, masking)

    def schemas(self) -> list[dict[str, Any]]:
        return [t.schema() for t in self.tools.values()]

    def names(self) -> list[str]:
        return sorted(self.tools)

    async def call(self, name: str, arguments: str | dict[str, Any]) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None:
            valid = ", ".join(self.names())
            return ToolOutcome(name, f"error: unknown tool {name!r}; valid tools: {valid}", ok=False)
        try:
            raw = json.loads(arguments or "{}") if isinstance(arguments, str) else arguments
            args = tool.args.model_validate(raw)
        except (json.JSONDecodeError, ValidationError) as exc:
            return ToolOutcome(name, f"error: invalid arguments for {name}: {_brief(exc)}", ok=False)
        watch = None if tool.read_only else self.watch
        if watch is not None:
            watch.started()
        try:
            if inspect.iscoroutinefunction(tool.fn):
                text = await tool.fn(args)
            else:
                text = await asyncio.to_thread(tool.fn, args)
        except PolicyViolation as exc:
            return ToolOutcome(name, self.masking(f"refused: {exc}"), ok=False,
                               policy_violation=True)
        except ToolError as exc:
            return ToolOutcome(name, self.masking(f"error: {exc}"), ok=False)
        except OSError as exc:  # e.g. a 300-character invented file name: the model's to fix
            return ToolOutcome(name, self.masking(f"error: {str(exc)[:300]}"), ok=False)
        finally:
            if watch is not None:
                watch.finished()
        return ToolOutcome(name, self.masking(text))  # a key a file or a command printed stays here


def _brief(exc: Exception) -> str:
    if isinstance(exc, ValidationError):
        return "; ".join(
            f"{'.'.join(str(p) for p in e['loc']) or 'arguments'}: {e['msg']}" for e in exc.errors()
        )
    return str(exc)
