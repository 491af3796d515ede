"""Orchestration overhead of a whole run: the demo scenario, every role at 1,200 tokens/s.

Prints, per repeat and as a median: wall time, model time, tool time, orchestration time
(wall minus the union of model and tool intervals), agent turns, overhead per turn in ms, and
overhead as a share of wall time.

    python bench/overhead.py [--repeats 5] [--tps 1200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
from pathlib import Path

from orchestrator.demo import arun_demo, demo_scenario


def scenario_at(tps: float):
    base = demo_scenario()
    models = {k: v.model_copy(update={"tokens_per_second": tps, "delay_s": 0.0})
              for k, v in base.models.items()}
    return base.model_copy(update={"models": models})


async def one(tps: float) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        result, _ = await arun_demo(workdir=Path(tmp), scenario=scenario_at(tps))
    assert result.status == "succeeded", result.reason
    split = result.time_split
    turns = sum(row["calls"] for row in result.per_role.values())
    return {**split, "turns": turns,
            "per_turn_ms": 1000 * split["orchestration_s"] / turns,
            "share": split["orchestration_s"] / split["wall_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tps", type=float, default=1200.0)
    args = parser.parse_args()
    asyncio.run(one(args.tps))  # warm-up: imports, tiktoken, git caches
    rows = [asyncio.run(one(args.tps)) for _ in range(args.repeats)]
    print(f"demo scenario, every role at {args.tps:.0f} tokens/s, {args.repeats} repeats")
    print(f"{'run':>4} {'wall s':>8} {'model s':>8} {'tool s':>8} {'orch s':>8} {'turns':>6} "
          f"{'ms/turn':>8} {'share':>7}")
    for i, r in enumerate(rows, 1):
        print(f"{i:>4} {r['wall_s']:8.3f} {r['model_s']:8.3f} {r['tool_s']:8.3f} "
              f"{r['orchestration_s']:8.3f} {r['turns']:6.0f} {r['per_turn_ms']:8.1f} {r['share']:7.1%}")
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"{'med':>4} {med['wall_s']:8.3f} {med['model_s']:8.3f} {med['tool_s']:8.3f} "
          f"{med['orchestration_s']:8.3f} {med['turns']:6.0f} {med['per_turn_ms']:8.1f} {med['share']:7.1%}")
    print(f"\norchestration overhead: {med['per_turn_ms']:.1f} ms per agent turn, "
          f"{med['share']:.1%} of wall time")


if __name__ == "__main__":
    main()
