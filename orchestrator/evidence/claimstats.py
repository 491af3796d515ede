"""How truthful each explorer model was: claims submitted, verified, adding nothing, and dropped
by reason, counted per model from explorer results.

Pure. The run report, ``orchestrate runs``, the quota ledger's history behind
``orchestrate quota`` and the explore bench all count the same way, so a model that invents
paths or cites lines that do not back its claims shows itself over time.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from pydantic import BaseModel, ConfigDict

from orchestrator.state import DROP_KINDS, ExplorerResult

UNKNOWN_MODEL = "(no call)"
COUNTS = ("submitted", "verified", "adds_nothing", "dropped", *DROP_KINDS)


class ClaimStats(BaseModel):
    """Claim counts for one model (or one explorer); the drop kinds add up to ``dropped``.

    ``path``: the file or lines do not exist (hallucinated); ``quote``: the quote is not in the
    cited lines; ``trivial``: the quote says nothing by itself; ``unrelated``: it shares no name
    with its claim; ``uncited``: no citation; ``unchecked``: the explorer made no tool call.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    explorers: int = 0
    failed: int = 0
    submitted: int = 0
    verified: int = 0
    adds_nothing: int = 0
    dropped: int = 0
    path: int = 0
    quote: int = 0
    trivial: int = 0
    unrelated: int = 0
    uncited: int = 0
    unchecked: int = 0

    @property
    def unsupported(self) -> int:
        """Claims dropped although their file existed: misquoted, trivial or unrelated quotes."""
        return self.quote + self.trivial + self.unrelated

    def rate(self, count: int) -> float | None:
        """``count`` as a share of the claims submitted (None when there were none)."""
        return count / self.submitted if self.submitted else None

    def __add__(self, other: ClaimStats) -> ClaimStats:
        return ClaimStats(**{k: getattr(self, k) + getattr(other, k)
                             for k in ClaimStats.model_fields})

    def summary(self) -> str:
        """``14 claims: 1 verified, 13 dropped (path 6, quote 2, trivial 3, unrelated 2)``."""
        kinds = ", ".join(f"{k} {getattr(self, k)}" for k in DROP_KINDS if getattr(self, k))
        text = f"{self.submitted} claims: {self.verified} verified"
        if self.adds_nothing:
            text += f", {self.adds_nothing} adding nothing"
        text += f", {self.dropped} dropped" + (f" ({kinds})" if kinds else "")
        return text + (f"; {self.failed} explorer(s) failed" if self.failed else "")


def of_result(result: ExplorerResult) -> ClaimStats:
    """One explorer's counts."""
    kinds = {k: int(result.drops.get(k, 0)) for k in DROP_KINDS}
    return ClaimStats(explorers=1, failed=int(result.error is not None),
                      submitted=result.submitted, verified=result.verified,
                      adds_nothing=result.adds_nothing, dropped=result.dropped, **kinds)


def by_model(results: Iterable[ExplorerResult]) -> dict[str, ClaimStats]:
    """Counts per model that served the explorers, in order of first appearance."""
    out: dict[str, ClaimStats] = {}
    for result in results:
        model = result.model or UNKNOWN_MODEL
        out[model] = out.get(model, ClaimStats()) + of_result(result)
    return out


def merge(tables: Iterable[Mapping[str, ClaimStats]]) -> dict[str, ClaimStats]:
    """Per-model counts added up over several runs."""
    out: dict[str, ClaimStats] = {}
    for table in tables:
        for model, stats in table.items():
            out[model] = out.get(model, ClaimStats()) + stats
    return out
