"""A run's spending limit: ``Budget(max_usd, max_tokens)`` is checked before every model call
and charged after it, so a run stops cleanly (and can be resumed) instead of overspending."""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.errors import BudgetExhausted
from orchestrator.state import CallRecord


@dataclass
class Budget:
    """The run's limits (None: no limit) and what has been spent so far."""

    max_usd: float | None = None
    max_tokens: int | None = None
    spent_usd: float = 0.0
    spent_tokens: int = 0

    def check(self) -> None:
        """Raise ``BudgetExhausted`` when a limit is reached; called before each call."""
        if self.max_usd is not None and self.spent_usd >= self.max_usd:
            self._stop(f"${self.spent_usd:.4f} spent of --max-usd {self.max_usd:g}")
        if self.max_tokens is not None and self.spent_tokens >= self.max_tokens:
            self._stop(f"{self.spent_tokens:,} tokens spent of --max-tokens {self.max_tokens:,}")

    def charge(self, record: CallRecord) -> None:
        """Add one finished call's cost and tokens."""
        self.spent_usd += record.cost_usd
        self.spent_tokens += record.prompt_tokens + record.output_tokens

    def _stop(self, what: str) -> None:
        raise BudgetExhausted(
            f"run budget reached: {what} (${self.spent_usd:.4f}, {self.spent_tokens:,} tokens "
            "in total); the run is checkpointed: resume it with `orchestrate resume RUN` "
            "and a higher limit"
        )
