"""A session's context policy and masking: how much of the window it may fill before it makes
room, and what stands in for an old tool output masked to make it.

Past the policy's limit a session first masks old tool outputs (the original kept as an
artefact, a one-line stub in its place); if that is not enough it forks (``loop.py``). A
server's ``context_length_exceeded`` says what its window is (``parse_overflow``). Everything
here is pure; the session decides when to act.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from orchestrator.config.prompts import text
from orchestrator.config.schema import ModelSpec, RoleSpec
from orchestrator.errors import ConfigError

# --- policy -------------------------------------------------------------------------------------

PAGE_CAP = 8_000


@dataclass(frozen=True)
class ContextPolicy:
    """How much of a window a session may fill before it masks or forks (server tokens)."""

    window: int
    fork_at: float = 0.8
    max_output: int = 4_000
    reserve_cfg: int | None = None
    keep_verbatim: int = 3
    max_forks: int = 8

    @property
    def reserve(self) -> int:
        return self.reserve_cfg or min(self.max_output, self.window // 4)

    @property
    def limit(self) -> int:
        """The largest prompt that still leaves room for the reply below ``fork_at``."""
        return int(self.fork_at * self.window) - self.reserve

    @property
    def page_cap(self) -> int:
        return min(PAGE_CAP, self.window // 4)

    def over(self, estimate: int) -> bool:
        return estimate > self.limit

    def shrunk(self, window: int) -> ContextPolicy:
        """The same policy for a smaller window the server turned out to have."""
        return replace(self, window=min(self.window, window))


def policy_for(spec: RoleSpec, model: ModelSpec) -> ContextPolicy:
    window = min(model.context_window, spec.context_window_cap or model.context_window)
    return ContextPolicy(window=window, fork_at=spec.context_fork_at, max_output=model.max_output,
                         reserve_cfg=spec.output_reserve)


_LIMIT = re.compile(r"(?:maximum context length is|context size \()\s*(\d+)", re.I)
_USED = (re.compile(r"(\d+) in the messages", re.I), re.compile(r"resulted in (\d+) tokens", re.I))


def parse_overflow(message: str) -> tuple[int | None, int | None]:
    """(prompt tokens the server counted, its window) from an overflow message, when it says."""
    used = next((m for m in (p.search(message) for p in _USED) if m), None)
    limit = _LIMIT.search(message)
    return (int(used.group(1)) if used else None), (int(limit.group(1)) if limit else None)


# --- masking ------------------------------------------------------------------------------------

MASK_MIN_TOKENS = 48  # below this a stub saves nothing
MASK_PREFIX = "[masked: "


def calls_by_id(messages: Sequence[Mapping[str, Any]]) -> dict[str, tuple[str, str]]:
    """tool_call_id -> (tool name, arguments JSON) over the assistant messages."""
    out: dict[str, tuple[str, str]] = {}
    for m in messages:
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            out[str(call.get("id", ""))] = (fn.get("name") or "?", fn.get("arguments") or "")
    return out


def describe_call(name: str, arguments: str, limit: int = 100) -> str:
    """``read(path=app.log, start_line=1)``: a tool call in one short line."""
    try:
        args = json.loads(arguments or "{}")
    except json.JSONDecodeError:
        args = None
    if isinstance(args, dict):
        inner = ", ".join(f"{k}={v}" for k, v in args.items())
    else:
        inner = " ".join(str(arguments).split())
    text = f"{name}({inner})"
    return text if len(text) <= limit else text[: limit - 2] + "…)"


def mask_stub(call: str, tokens: int, handle: str) -> str:
    """What stands in for a masked tool output (``agents/prompts/session.md``: ``masked``)."""
    stub = text("session", "masked", call=call, tokens=f"{tokens:,}", handle=handle)
    if not stub.startswith(MASK_PREFIX):  # masked outputs are recognised by this prefix
        raise ConfigError(f"agents/prompts/session.md: masked must start with {MASK_PREFIX!r}")
    return stub


def mask_old_outputs(
    messages: Sequence[Mapping[str, Any]],
    *,
    sizes: Sequence[int],
    keep: int,
    store: Callable[[str], str],
) -> list[tuple[int, dict[str, Any]]]:
    """Stubs for every tool output but the last ``keep``: ``(index, new message)`` pairs.

    ``sizes`` are the messages' sizes in server tokens; ``store`` keeps an original and returns
    its handle. Outputs already masked, or too small for a stub to save anything, stay.
    """
    tools = [i for i, m in enumerate(messages) if m.get("role") == "tool"]
    old = tools[: max(0, len(tools) - keep)]
    calls = calls_by_id(messages)
    out = []
    for i in old:
        content = messages[i].get("content")
        if not isinstance(content, str) or content.startswith(MASK_PREFIX):
            continue
        if sizes[i] < MASK_MIN_TOKENS:
            continue
        name, args = calls.get(str(messages[i].get("tool_call_id", "")), ("tool", ""))
        stub = mask_stub(describe_call(name, args), sizes[i], store(content))
        out.append((i, {**messages[i], "content": stub}))
    return out
