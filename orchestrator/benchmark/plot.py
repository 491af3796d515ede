"""The benchmark's picture: pass rate against wall time and against cost, one point per role map
with error bars over repeats, so the Pareto front is visible at a glance. matplotlib is an
optional extra (``pip install 'orchestrate[plot]'``); without it no PNG is written and the
report says why. The Agg backend is used, so no display is needed.
"""

from __future__ import annotations

import statistics
from collections import defaultdict
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from orchestrator.benchmark.compare import Spread, pass_rate, spread

MISSING = "no PNG: matplotlib is not installed (pip install 'orchestrate[plot]')"


class Point(BaseModel):
    """One role map on the chart: each axis as a median with its range over repeats."""

    model_config = ConfigDict(frozen=True)

    role_map: str
    pass_rate: Spread
    wall_s: Spread
    cost_usd: Spread


def points(report) -> list[Point]:
    """Per map and repeat: the pass rate, the median wall time and the mean cost per run."""
    out = []
    for name in report.role_maps:
        by_rep: dict[int, list] = defaultdict(list)
        for r in report.records:
            if r.role_map == name:
                by_rep[r.repeat].append(r)
        reps = list(by_rep.values())
        out.append(Point(
            role_map=name,
            pass_rate=spread(pass_rate(rs) for rs in reps),
            wall_s=spread(statistics.median(r.wall_s for r in rs) for rs in reps),
            cost_usd=spread(statistics.fmean(r.cost_usd for r in rs) for rs in reps),
        ))
    return out


def _bar(s: Spread) -> list[list[float]]:
    m = s.median or 0.0
    return [[m - (s.low if s.low is not None else m)], [(s.high if s.high is not None else m) - m]]


def write_png(report, path: Path) -> tuple[Path | None, str | None]:
    """Draw the two panels to ``path``; returns (path, None) or (None, why not)."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None, MISSING
    pts = points(report)
    fig, axes = plt.subplots(1, 2, figsize=(10, 4.2), sharey=True)
    for ax, attr, label in ((axes[0], "wall_s", "median wall time per run (s)"),
                            (axes[1], "cost_usd", "mean cost per run (USD)")):
        for p in pts:
            x, y = getattr(p, attr), p.pass_rate
            ax.errorbar(x.median, y.median, xerr=_bar(x), yerr=_bar(y), fmt="o", capsize=4,
                        label=p.role_map)
            ax.annotate(p.role_map, (x.median or 0, y.median or 0), textcoords="offset points",
                        xytext=(6, 6), fontsize=8)
        ax.set_xlabel(label)
        ax.set_xlim(left=0)
        ax.grid(True, alpha=0.3)
    axes[0].set_ylabel("pass rate")
    axes[0].set_ylim(-0.05, 1.05)
    axes[1].legend(loc="lower right", fontsize=8)
    fig.suptitle(f"{report.suite}: {len(report.tasks)} task(s) x {report.repeat} repeat(s); "
                 "bars: range over repeats")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path, None
