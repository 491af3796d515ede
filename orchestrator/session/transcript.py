"""What the summariser sees of a session: its conversation as compact blocks, newest kept.

A fork's handoff (``loop.py``) is written from this transcript, cut to the summariser's window.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.session.context import calls_by_id, describe_call


def render_transcript(
    messages: Sequence[Mapping[str, Any]],
    *,
    budget: int,
    count: Callable[[str], int],
    skip: str | None = None,
    per_message_chars: int = 1_500,
) -> str:
    """The conversation after the system prompt, one compact block per message, newest kept.

    Each block is cut to ``per_message_chars`` (head and tail); when the blocks together exceed
    ``budget`` local tokens, the opening block (the task or the previous handoff) and as many of
    the latest as fit are kept, with a note saying how many in between were left out.
    """
    calls = calls_by_id(messages)
    blocks = [_block(m, calls, per_message_chars) for m in messages
              if m.get("role") != "system" and not (skip and m.get("content") == skip)]
    blocks = [b for b in blocks if b]
    if not blocks:
        return "(empty)"
    sizes = [count(b) + 1 for b in blocks]
    if sum(sizes) <= budget:
        return "\n".join(blocks)
    first, used = blocks[0], sizes[0]
    tail: list[str] = []
    for block, size in zip(reversed(blocks[1:]), reversed(sizes[1:]), strict=True):
        if used + size > budget:
            break
        tail.append(block)
        used += size
    if used > budget:  # the opening block alone is too big
        first = _cut(first, max(200, budget * 2))
    dropped = len(blocks) - 1 - len(tail)
    note = [f"(… {dropped} earlier messages omitted …)"] if dropped else []
    return "\n".join([first, *note, *reversed(tail)])


def _block(m: Mapping[str, Any], calls: Mapping[str, tuple[str, str]], cut: int) -> str:
    role = m.get("role")
    raw = m.get("content")
    content = raw if isinstance(raw, str) else ""
    if role == "tool":
        name, _ = calls.get(str(m.get("tool_call_id", "")), ("tool", ""))
        return f"TOOL {name}: {_cut(content, cut)}"
    if role == "assistant":
        parts = [f"ASSISTANT: {_cut(content, cut)}"] if content else []
        for call in m.get("tool_calls") or ():
            fn = call.get("function") or {}
            call = describe_call(fn.get("name", "?"), fn.get("arguments", ""), 300)
            parts.append(f"ASSISTANT called {call}")
        return "\n".join(parts)
    return f"{str(role).upper()}: {_cut(content, cut)}" if content else ""


def _cut(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    half = limit // 2
    return f"{text[:half]}\n… ({len(text) - 2 * half} chars cut) …\n{text[-half:]}"
