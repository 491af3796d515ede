"""Where a streamed JSON reply starts repeating itself, so the client can stop it there.

A small model at temperature 0 can fall into a loop inside a list: the 0.5B explorer wrote the
same claim, citation and quote again until the list's cap (``toolmode.MAX_ITEMS``) closed it. In
the kept live runs r70-r76, 58 of 325 explorer submissions repeated a claim, 22 of them 3-4
times: 370-396 output tokens against 141 for the claim once, 7-15 s of generation on the kit
that bought nothing (a repeated claim verifies to the same finding). ``RepeatedItem`` reads the
reply as it streams and, at the moment an object or array closes that equals an earlier item of
the same list, answers where the reply should have ended: before that item (and its comma). The
client stops the stream there (``client.OpenAIModelClient.complete``'s ``until``), and
``repair`` closes the brackets of what was kept.

Only container items count: a repeated string or number in a list can be data, a repeated
object in a tool call's list never adds anything. The scan is incremental (each character read
once), because it is asked after every streamed piece.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any


@dataclass
class _Frame:
    kind: str  # "[" or "{"
    start: int
    item_start: int | None = None  # a list's current item, where it began
    items: list[Any] = field(default_factory=list)  # a list's finished container items


def _value(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError:
        return " ".join(text.split())  # compared as written, whitespace aside


@dataclass
class RepeatedItem:
    """Called with a reply's text so far (each call's text extends the last one's); returns
    how many characters to keep when the reply has just closed an item that repeats an earlier
    item of the same JSON list, else None."""

    _pos: int = 0
    _string: bool = False
    _escape: bool = False
    _stack: list[_Frame] = field(default_factory=list)
    cut: int | None = None

    def __call__(self, text: str) -> int | None:
        if self.cut is not None:
            return self.cut
        for i in range(self._pos, len(text)):
            self._pos = i + 1
            if self._read(text, i):
                return self.cut
        return None

    def _read(self, text: str, i: int) -> bool:
        c = text[i]
        if self._string:
            if self._escape:
                self._escape = False
            elif c == "\\":
                self._escape = True
            elif c == '"':
                self._string = False
            return False
        if c == '"':
            self._string = True
            self._begin_item(i)
        elif c in "[{":
            self._begin_item(i)
            self._stack.append(_Frame(c, i))
        elif c in "]}" and self._stack:
            return self._close(text, i)
        elif c == "," and self._stack and self._stack[-1].kind == "[":
            self._stack[-1].item_start = None
        elif not c.isspace():
            self._begin_item(i)
        return False

    def _begin_item(self, i: int) -> None:
        if self._stack and self._stack[-1].kind == "[" and self._stack[-1].item_start is None:
            self._stack[-1].item_start = i

    def _close(self, text: str, i: int) -> bool:
        frame = self._stack.pop()
        parent = self._stack[-1] if self._stack else None
        if parent is None or parent.kind != "[" or parent.item_start != frame.start:
            return False
        value = _value(text[frame.start:i + 1])
        if any(value == seen for seen in parent.items):
            self.cut = len(text[:frame.start].rstrip().removesuffix(",").rstrip())
            return True
        parent.items.append(value)
        return False
