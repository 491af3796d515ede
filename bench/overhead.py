"""Orchestration overhead of a whole run: the demo scenario, every role at 1,200 tokens/s,
over each wire API (Chat Completions, the Responses API) in one run.

Prints, per API, per repeat and as a median: wall time, model time, tool time, orchestration
time (wall minus the union of model and tool intervals), agent turns, overhead per turn in ms,
and overhead as a share of wall time; then the APIs side by side.

    python bench/overhead.py [--repeats 5] [--tps 1200] [--apis chat,responses]
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


async def one(tps: float, wire: str = "chat") -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        result, _ = await arun_demo(workdir=Path(tmp), scenario=scenario_at(tps),
                                    sets=[f'providers.sim.api="{wire}"'])
    assert result.status == "succeeded", result.reason
    split = result.time_split
    turns = sum(row.calls for row in result.per_role.values())
    return {**split, "turns": turns,
            "per_turn_ms": 1000 * split["orchestration_s"] / turns,
            "share": split["orchestration_s"] / split["wall_s"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tps", type=float, default=1200.0)
    parser.add_argument("--apis", default="chat,responses")
    args = parser.parse_args()
    wires = [w.strip() for w in args.apis.split(",") if w.strip()]
    medians = {}
    for wire in wires:
        asyncio.run(one(args.tps, wire))  # warm-up: imports, tiktoken, git caches
        rows = [asyncio.run(one(args.tps, wire)) for _ in range(args.repeats)]
        medians[wire] = table(wire, rows, args.tps)
    print(f"\n{'api':<10} {'ms/turn':>8} {'share':>7} {'wall s':>8}")
    for wire, med in medians.items():
        print(f"{wire:<10} {med['per_turn_ms']:8.1f} {med['share']:7.1%} {med['wall_s']:8.3f}")
    if len(medians) == 2:
        a, b = (medians[w] for w in wires)
        print(f"{wires[1]} / {wires[0]} overhead per turn: {b['per_turn_ms'] / a['per_turn_ms']:.2f}x")


def table(wire: str, rows: list[dict[str, float]], tps: float) -> dict[str, float]:
    print(f"demo scenario over {wire}, every role at {tps:.0f} tokens/s, {len(rows)} repeats")
    print(f"{'run':>4} {'wall s':>8} {'model s':>8} {'tool s':>8} {'orch s':>8} {'turns':>6} "
          f"{'ms/turn':>8} {'share':>7}")
    for i, r in enumerate(rows, 1):
        print(f"{i:>4} {r['wall_s']:8.3f} {r['model_s']:8.3f} {r['tool_s']:8.3f} "
              f"{r['orchestration_s']:8.3f} {r['turns']:6.0f} {r['per_turn_ms']:8.1f} {r['share']:7.1%}")
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(f"{'med':>4} {med['wall_s']:8.3f} {med['model_s']:8.3f} {med['tool_s']:8.3f} "
          f"{med['orchestration_s']:8.3f} {med['turns']:6.0f} {med['per_turn_ms']:8.1f} {med['share']:7.1%}")
    print(f"orchestration overhead over {wire}: {med['per_turn_ms']:.1f} ms per agent turn, "
          f"{med['share']:.1%} of wall time\n")
    return med


if __name__ == "__main__":
    main()
