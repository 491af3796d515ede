"""Where a JSON-tools session's prompt lists its tools, so that no listing moves once written.

A model without native tool calls learns its tools from text. The tools of a session's first turn
are listed in the system prompt; a tool first offered later (an explorer's search tools once its
first answer is refused, ``read_artifact`` once an artifact is named) is listed after the message
it first followed, and stays there on every later turn. Adding it to the system prompt instead
would change the prompt's first few hundred tokens, and a server's prompt cache (llama.cpp keeps
the longest shared prefix) would read the whole conversation again: live, a refused explorer's
next call took 10-15.4 s to its first token on the kit that way, 3.6-5.9 s with the listing kept
(bench/results/live-suite r45, r46).

When the history before a listing changes (a fork's fresh session, masked tool results), the
prompt is new to the cache anyway: everything offered so far is listed in the system prompt again.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

Tool = Mapping[str, Any]


def _name(tool: Tool) -> str:
    return str(tool["function"]["name"])


def _mark(message: Mapping[str, Any]) -> str:
    return json.dumps(message, sort_keys=True, default=str)


@dataclass(frozen=True)
class Later:
    """Tools first offered after message ``at`` of the session's history, which read ``mark``."""

    at: int
    mark: str
    tools: tuple[Tool, ...]


@dataclass
class Listing:
    """A session's tools: ``first`` in the system prompt, each of ``later`` after its message."""

    first: list[Tool]
    later: list[Later] = field(default_factory=list)

    def tools(self) -> list[Tool]:
        """Every tool listed, in the order first offered."""
        return [*self.first, *(t for group in self.later for t in group.tools)]

    def holds(self, messages: Sequence[Mapping[str, Any]]) -> bool:
        """True while each message a later listing follows is still there, unchanged."""
        return all(group.at < len(messages) and _mark(messages[group.at]) == group.mark
                   for group in self.later)


class Listings:
    """Each session's listing, updated with the tools offered on each turn."""

    def __init__(self) -> None:
        self._sessions: dict[str, Listing] = {}

    def update(self, session: str, tools: Sequence[Tool],
               messages: Sequence[Mapping[str, Any]]) -> Listing:
        listing = self._sessions.get(session)
        known = listing.tools() if listing else []
        names = {_name(t) for t in known}
        new = [t for t in tools if _name(t) not in names]
        if listing is None or not listing.holds(messages) or not messages:
            listing = self._sessions[session] = Listing([*known, *new])
        elif new:
            at = len(messages) - 1
            listing.later.append(Later(at, _mark(messages[at]), tuple(new)))
        return listing
