"""A model that calls the same tool again, or keeps getting a result it has seen, is going round
in a loop; a turn limit would end it, but every turn until then is paid for. Once ``repeats - 1``
calls in a row brought nothing new, only ``submit`` is offered, with a note saying why (for
that call only: the session's history does not keep it).

``toolmode.JsonToolsClient`` applies the rule to a model that writes its calls as JSON,
``NativeToolsClient`` to a model with native tool calls, counting there only the same call
answered the same way (until 2026-12-07 only the first had it: a native model could repeat a
call up to the session's turn limit). A native call whose arguments repeat an item of a list
is stopped by the client as it streams (``client.OpenAIModelClient.complete``,
``repeats.RepeatedItem``).
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any

from orchestrator.config.prompts import text
from orchestrator.models import repair
from orchestrator.models.base import Completion, ModelClient, Progress, Route, Until

FINAL_TOOL = "submit"


def with_notes(messages: Sequence[Mapping[str, Any]], notes: Sequence[str]
               ) -> Sequence[Mapping[str, Any]]:
    """``notes`` at the very end of the conversation, after everything a cache could keep."""
    if not notes:
        return messages
    text = "\n".join(notes)
    if messages and messages[-1].get("role") == "user":
        last = dict(messages[-1])
        last["content"] = f"{last.get('content') or ''}\n\n{text}"
        return [*messages[:-1], last]
    return [*messages, {"role": "user", "content": text}]


def stalled(messages: Sequence[Mapping[str, Any]], repeats: int, *, exact: bool = False) -> bool:
    """True when the last ``repeats - 1`` tool calls each brought nothing new: a call made
    before, or a result seen before. Three identical calls in a row are the simplest case.
    ``exact``: only a call made before that got the very result it got then counts (a
    builder's different edits can read alike, "wrote a.py (12 lines)", and so can the same
    tests run after each: neither is a loop)."""
    results = {str(m.get("tool_call_id")): str(m.get("content") or "")
               for m in messages if m.get("role") == "tool"}
    seen_calls: dict[str, set[str | None]] = {}
    seen_results: set[str] = set()
    stale = 0
    for m in messages:
        if m.get("role") != "assistant" or not m.get("tool_calls"):
            continue
        for c in m["tool_calls"]:
            fn = c["function"]
            key = json.dumps([fn["name"], repair.value(fn["arguments"])], sort_keys=True)
            result = results.get(str(c.get("id")))
            if exact:
                old = result is not None and result in seen_calls.get(key, ())
            else:
                old = key in seen_calls or (result is not None and result in seen_results)
            stale = stale + 1 if old else 0
            seen_calls.setdefault(key, set()).add(result)
            if result is not None:
                seen_results.add(result)
    return stale >= max(1, repeats - 1)


def narrowed(tools: Sequence[Mapping[str, Any]], messages: Sequence[Mapping[str, Any]],
             repeats: int, *, exact: bool = False) -> tuple[list[Mapping[str, Any]], list[str]]:
    """The tools to offer now and the notes that say why: only ``submit`` once the calls have
    stalled (``stalled``; and ``submit`` is one of several), else all of them and no note."""
    final = [t for t in tools if t["function"]["name"] == FINAL_TOOL]
    if final and len(final) < len(tools) and stalled(messages, repeats, exact=exact):
        return final, [text("toolmode", "loop_note")]
    return list(tools), []


class NativeToolsClient:
    """A ``ModelClient`` for a model with native tool calls: ``inner`` as it is, except that a
    session whose calls have stalled is offered only ``submit`` (``narrowed``). Only the same
    call getting the same result counts here (``exact``): the builders of the big models that
    call tools natively run their edit-and-test cycles through this client, whose results read
    alike; the small JSON-tools models repeat themselves with variations, and get the wider
    rule."""

    def __init__(self, inner: ModelClient, *, repeats: int = 3) -> None:
        self.inner = inner
        self.repeats = repeats

    @property
    def route(self) -> Route:
        return self.inner.route

    async def complete(
        self,
        messages: Sequence[Mapping[str, Any]],
        *,
        session: str,
        tools: Sequence[Mapping[str, Any]] | None = None,
        response_format: Mapping[str, Any] | None = None,
        progress: Progress | None = None,
        until: Until | None = None,
    ) -> Completion:
        if tools:
            tools, notes = narrowed(tools, messages, self.repeats, exact=True)
            messages = with_notes(messages, notes)
        return await self.inner.complete(messages, session=session, tools=tools,
                                         response_format=response_format, progress=progress,
                                         until=until)
