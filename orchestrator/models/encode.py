"""Request bodies from pieces encoded once, so a request costs its new messages, not its history.

A session's history only grows: a message or two per turn, and now and then an old tool output
replaced by a stub (a new message object in its place, never an edit in place). Each message is
turned into its wire JSON the first time it is sent; every later request joins the pieces it
already has. Pieces are kept per message object (by identity, holding the object so that its id
cannot be reused), which is why a message must not be changed in place once it was sent.

The JSON is what the ``openai`` SDK itself would send: compact, UTF-8, no NaN.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Generic, TypeVar

from orchestrator.tools.secretfiles import mask

T = TypeVar("T")


def dumps(value: Any) -> bytes:
    """Compact JSON bytes, as the SDK encodes request bodies."""
    return json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False).encode("utf-8")


def dumps_masked(value: Any) -> bytes:
    """``dumps`` of a message, with key-shaped values masked: whatever a prompt was built from
    (tool output, test output, quoted source), a key never goes to the provider."""
    return mask(json.dumps(value, ensure_ascii=False, separators=(",", ":"),
                           allow_nan=False)).encode("utf-8")


class Pieces(Generic[T]):
    """Something derived from each message (its JSON, its digest), computed once per message."""

    def __init__(self, make: Callable[[Mapping[str, Any]], T]) -> None:
        self._make = make
        self._by_id: dict[int, tuple[Mapping[str, Any], T]] = {}
        self._last: list[Mapping[str, Any]] = []  # the messages of the last call, and
        self._last_pieces: list[T] = []  # their pieces

    def of(self, messages: Sequence[Mapping[str, Any]]) -> list[T]:
        return self._update(messages)[0]

    def _update(self, messages: Sequence[Mapping[str, Any]]) -> tuple[list[T], int]:
        """The pieces of ``messages``, and how many of them the last call's already were."""
        n = len(self._last)
        # The usual case, at C speed: the last call's messages, then new ones. (List equality
        # compares items by identity first; an equal copy would encode the same anyway.)
        if len(messages) >= n and _as_list(messages[:n]) == self._last:
            out = self._last_pieces
            out.extend(self.one(m) for m in messages[n:])
            kept = n
        else:
            out = [self.one(m) for m in messages]
            kept = 0
            if len(self._by_id) > 2 * len(messages) + 64:  # replaced or forked-away messages
                keep = {id(m) for m in messages}
                self._by_id = {k: v for k, v in self._by_id.items() if k in keep}
        self._last, self._last_pieces = list(messages), out
        return out, kept

    def one(self, message: Mapping[str, Any]) -> T:
        hit = self._by_id.get(id(message))
        if hit is not None and hit[0] is message:
            return hit[1]
        piece = self._make(message)
        self._by_id[id(message)] = (message, piece)
        return piece


class Encoded(Pieces[bytes]):
    """Each message's wire JSON, and the history's joined into one buffer that grows with it."""

    def __init__(self, make: Callable[[Mapping[str, Any]], bytes]) -> None:
        super().__init__(make)
        self._buffer = bytearray()
        self._covers = 0  # how many of the last call's pieces the buffer holds

    def joined(self, messages: Sequence[Mapping[str, Any]]) -> bytearray:
        """The pieces of ``messages`` joined with commas, empty ones left out. Only the new
        messages are added to the last call's buffer, so a request copies its history once
        (into the body), in C, instead of joining and copying it again piece by piece: the
        cost of a turn stays flat as the session grows. The buffer is the next call's: copy it
        (``body`` does) before calling again."""
        pieces, kept = self._update(messages)
        if kept and kept == self._covers:
            new = [p for p in pieces[kept:] if p]
            if new:
                if self._buffer:
                    self._buffer += b","
                self._buffer += b",".join(new)
        else:
            self._buffer = bytearray(b",".join(p for p in pieces if p))
        self._covers = len(pieces)
        return self._buffer


def _as_list(items: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return items if isinstance(items, list) else list(items)


def body(lists: Mapping[str, bytes | bytearray], rest: Mapping[str, Any]) -> bytes:
    """A JSON object from arrays given as their items' JSON joined with commas (``lists``) and
    plain fields (``rest``), made in one copy."""
    parts: list[bytes | bytearray] = []
    for key, items in lists.items():
        parts += [b',"' if parts else b'{"', key.encode(), b'":[', items, b"]"]
    tail = dumps(dict(rest))[1:-1]
    if tail:
        parts += [b"," if parts else b"{", tail]
    parts.append(b"}" if parts else b"{}")
    return b"".join(parts)
