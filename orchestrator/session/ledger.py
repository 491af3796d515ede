"""A session's ledger: what its prompt costs in the server's tokens, before the server says.

The ledger anchors on the prompt size the server last reported and estimates only what was
added since, with the local counter (``tokens.py``) scaled by a ratio learned from consecutive
anchors, since the server's tokenizer may differ from ours.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from orchestrator.session.tokens import message_tokens, tools_tokens

MIN_DELTA = 8  # local tokens; smaller steps say more about rounding than about the ratio


class Ledger:
    """Per-message local counts, the last server anchor and the server/local ratio."""

    def __init__(self, count: Callable[[str], int], *, ratio: float = 1.0, decay: float = 0.8):
        self._count = count
        self._decay = decay
        self.counts: list[int] = []
        self.local = 0
        self._tools = 0
        self.ratio = ratio
        self._num = self._den = 0.0
        self._anchor: tuple[int, int] | None = None
        self._first: tuple[int, int] | None = None

    def set_tools(self, tools: Sequence[Mapping[str, Any]]) -> None:
        n = tools_tokens(self._count, tools) if tools else 0
        self.local += n - self._tools
        self._tools = n

    def append(self, message: Mapping[str, Any]) -> None:
        n = message_tokens(message, self._count)
        self.counts.append(n)
        self.local += n

    def replace(self, index: int, message: Mapping[str, Any]) -> None:
        n = message_tokens(message, self._count)
        self.local += n - self.counts[index]
        self.counts[index] = n

    def reset(self, messages: Sequence[Mapping[str, Any]]) -> None:
        """Start over with these messages (same tools and system prompt, new opening).

        The ratio is kept, and the first anchor becomes the anchor again: the new prompt is
        the first one with a different opening, so only that difference is estimated.
        """
        self.counts, self.local, self._anchor = [], self._tools, self._first
        for m in messages:
            self.append(m)

    def tokens(self, text: str) -> int:
        """Server tokens of a piece of text, as far as the calibration knows."""
        return round(self.ratio * self._count(text))

    def estimate(self) -> int:
        if self._anchor is None:
            return round(self.ratio * self.local)
        server, local = self._anchor
        return max(0, round(server + self.ratio * (self.local - local)))

    def observe(self, prompt_tokens: int) -> None:
        """The server's count for the prompt just sent: learn from it and make it the anchor."""
        if prompt_tokens <= 0:
            return
        server, local = self._anchor or (0, 0)
        d_server, d_local = prompt_tokens - server, self.local - local
        if d_local >= MIN_DELTA and d_server > 0:
            self._num = self._num * self._decay + d_server
            self._den = self._den * self._decay + d_local
            self.ratio = self._num / self._den
        self._anchor = (prompt_tokens, self.local)
        self._first = self._first or self._anchor

    def refused(self, prompt_tokens: int | None, window: int | None) -> None:
        """The server refused the prompt as too long: our estimate was too low."""
        floor = prompt_tokens or (window + 1 if window else int(self.estimate() * 1.1) + 1)
        if floor > self.estimate():
            self.observe(floor)
