"""Tables about explorer claims, for people: each claim's verdict with its reason (``show``, the
run summary) and each model's truthfulness (the run summary, ``runs``, ``quota``).

Works on the typed results and on the plain dicts of a ``report.json`` alike, so ``show`` can
print runs recorded by older versions too.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from rich.markup import escape
from rich.table import Table

from orchestrator.evidence.claimstats import ClaimStats

STATUS_MARK = {"verified": "✔", "adds_nothing": "≡", "dropped": "✘"}


def _get(obj: Any, key: str, default: Any = None) -> Any:
    return obj.get(key, default) if isinstance(obj, Mapping) else getattr(obj, key, default)


def _pct(part: int, whole: int) -> str:
    return f"{100 * part / whole:.0f}%" if whole else "-"


def model_table(stats: Mapping[str, ClaimStats | Mapping[str, Any]],
                title: str = "explorer claims per model") -> Table:
    """Per model: claims submitted, verified, adding nothing, and the drop rates by reason."""
    t = Table(title=title, show_edge=False)
    for col in ("model", "explorers", "claims", "verified", "adds nothing", "bad path",
                "misquoted", "unsupported", "other drops"):
        t.add_column(col, justify="left" if col == "model" else "right", overflow="fold")
    for model, raw in stats.items():
        s = raw if isinstance(raw, ClaimStats) else ClaimStats.model_validate(raw)
        n = s.submitted
        t.add_row(escape(model), str(s.explorers) + (f" ({s.failed} failed)" if s.failed else ""),
                  str(n), f"{s.verified} {_pct(s.verified, n)}",
                  f"{s.adds_nothing} {_pct(s.adds_nothing, n)}", f"{s.path} {_pct(s.path, n)}",
                  f"{s.quote} {_pct(s.quote, n)}",
                  f"{s.trivial + s.unrelated} {_pct(s.trivial + s.unrelated, n)}",
                  str(s.uncited + s.unchecked))
    return t


def verdict_lines(explorers: Sequence[Any], *, limit: int = 12) -> list[str]:
    """Per explorer, one line per claim: its status, its text and, unless verified, why."""
    lines: list[str] = []
    for e in explorers:
        index, model = _get(e, "index", 0), _get(e, "model", "")
        head = f"Q{index + 1} {_get(e, 'question', '')}" + (f"  [{model}]" if model else "")
        lines.append(head)
        if _get(e, "error"):
            lines.append(f"  explorer failed: {_get(e, 'error')}")
            continue
        verdicts = _get(e, "verdicts") or []
        for v in verdicts[:limit]:
            status = _get(v, "status")
            mark = STATUS_MARK.get(status, "?")
            text = " ".join(str(_get(v, "text", "")).split())[:100]
            why = _get(v, "reason") or ""
            label = {"dropped": f"dropped ({_get(v, 'kind')})", "adds_nothing": "adds nothing"}.get(
                status, "verified")
            lines.append(f"  {mark} claim {_get(v, 'index')}: {text}")
            lines.append(f"      {label}" + (f": {why}" if why else ""))
        if len(verdicts) > limit:
            lines.append(f"  ... {len(verdicts) - limit} more claim(s) in report.json")
        if not verdicts:
            lines.append("  (no claims)")
    return lines


def run_claims_cell(stats: Mapping[str, Any]) -> str:
    """``3/14 qwen05`` for the runs table: verified of submitted, and the explorer model(s)."""
    if not stats:
        return "-"
    total = ClaimStats()
    for raw in stats.values():
        total = total + (raw if isinstance(raw, ClaimStats) else ClaimStats.model_validate(raw))
    return f"{total.verified}/{total.submitted} {', '.join(stats)}"
