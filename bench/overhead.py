"""Orchestration overhead per agent turn, with every simulated role at 1,200 tokens/s.

1. The demo scenario over each wire API (Chat Completions, the Responses API), per repeat and as
   a median: wall time, model time (the HTTP exchanges with the model server), tool time,
   orchestration time (the rest), agent turns, orchestration per turn in wall ms and in our
   process's CPU ms, and its share of the wall time; then where the orchestration went, per
   phase (``orchestrator/timing.py``: building requests, call journal, quota ledger, git, the
   rest of a call, the nodes' own work, LangGraph between nodes, setup).
2. A long session: a run whose builder takes ``--turns`` turns (reading a file each time); our
   CPU time and the wall time outside model and tool per turn near turn 10 and near the last
   turn, and the ratio (target <= 1.2: the cost of a turn does not grow with the history), per
   run and as the median of ``--long-repeats`` runs.

The simulator runs in a child process (``--sim thread`` puts it in ours, as `orchestrate demo`
does), so the CPU time is ours alone. Each block prints the load average beside its figures,
since the machine may be shared.

    python bench/overhead.py [--repeats 5] [--tps 1200] [--apis chat,responses] [--turns 200]
                             [--long-repeats 3] [--sim process|thread] [--parts demo,long]
                             [--json out.json]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import tempfile
import time
from pathlib import Path
from typing import Any

from demokit import demo_env, demo_roles
from simproc import simulator

from orchestrator.api import arun
from orchestrator.faces.demo import DEMO_TASK, demo_scenario, make_sample_repo
from orchestrator.sim import ModelBehavior, Reply, Scenario, ToolCallSpec

TARGET_MS = 5.0
LONG_MODEL = "sim-builder-long"
ORCH_PHASES = ("request", "journal", "quota", "git", "call", "node", "graph", "setup", "finish",
               "other")
_FIXED = "        return ordered[mid]\n    return (ordered[mid - 1] + ordered[mid]) / 2\n"
_BUGGY = "        return ordered[mid]\n    return ordered[mid]\n"


def load() -> str:
    return f"load average {os.getloadavg()[0]:.1f}"


def long_builder(turns: int) -> ModelBehavior:
    """Fixes the bug on its first turn, reads the file until its last, then submits."""
    def call(name: str, **args: Any) -> Reply:
        return Reply(tool_calls=[ToolCallSpec(name=name, arguments=args)])

    script = [call("replace", path="stats.py", old=_BUGGY, new=_FIXED)]
    script += [call("read", path="stats.py") for _ in range(turns - 2)]
    script.append(call("submit", summary="median fixed", files_changed=["stats.py"]))
    return ModelBehavior(script=script)


def scenario_at(tps: float, turns: int) -> Scenario:
    base = demo_scenario()
    models = {k: v.model_copy(update={"tokens_per_second": tps, "delay_s": 0.0})
              for k, v in base.models.items()}
    models[LONG_MODEL] = long_builder(turns).model_copy(update={"tokens_per_second": tps})
    return base.model_copy(update={"models": models})


async def one_run(base_url: str, wire: str, sets: list[str] = (),  # type: ignore[assignment]
                  listeners: list[Any] = ()) -> dict[str, Any]:  # type: ignore[assignment]
    """One demo run; its time split, turns, CPU time and phases."""
    with tempfile.TemporaryDirectory() as tmp:
        repo = make_sample_repo(Path(tmp) / "sample")
        roles = demo_roles(base_url, f'providers.sim.api="{wire}"', *sets)
        env = demo_env()
        cpu = time.process_time()
        result = await arun(DEMO_TASK, repo=repo, roles=roles, env=env, listeners=listeners)
        cpu = time.process_time() - cpu
        report = json.loads((Path(result.run_dir) / "report.json").read_text(encoding="utf-8"))
    assert result.status == "succeeded", result.reason
    split = result.time_split
    turns = sum(row.calls for row in result.per_role.values())
    return {**split, "turns": turns, "cpu_s": cpu,
            "per_turn_ms": 1000 * split["orchestration_s"] / turns,
            "cpu_ms": 1000 * cpu / turns,
            "share": split["orchestration_s"] / split["wall_s"],
            "phases": report.get("phases_s", {})}


def demo(base_url: str, wire: str, repeats: int, tps: float) -> dict[str, Any]:
    asyncio.run(one_run(base_url, wire))  # warm-up: imports, tokenizer, git caches
    before = load()
    rows = [asyncio.run(one_run(base_url, wire)) for _ in range(repeats)]
    print(f"1. demo scenario over {wire}, every role at {tps:.0f} tokens/s, {repeats} repeats "
          f"({before} before, {load()} after)")
    print(f"{'run':>5} {'wall s':>7} {'model s':>8} {'tool s':>7} {'orch s':>7} {'turns':>6} "
          f"{'ms/turn':>8} {'cpu ms/turn':>12} {'share':>6}")
    keys = ("wall_s", "model_s", "tool_s", "orchestration_s", "turns", "per_turn_ms", "cpu_ms",
            "share")
    for i, r in enumerate(rows, 1):
        print(_row(str(i), r))
    med: dict[str, Any] = {k: statistics.median(r[k] for r in rows) for k in keys}
    print(_row("med", med))
    names = sorted({k for r in rows for k in r["phases"]}, key=_phase_order)
    med["phases"] = {k: statistics.median(r["phases"].get(k, 0.0) for r in rows) for k in names}
    if names:
        print("   where the wall time went, ms per run (median), and per agent turn:")
        print("   " + "  ".join(f"{k} {1000 * v:.1f} ({1000 * v / med['turns']:.2f})"
                                 for k, v in med["phases"].items()))
    verdict = "within" if med["per_turn_ms"] <= TARGET_MS else "OVER"
    print(f"   orchestration over {wire}: {med['per_turn_ms']:.1f} ms per agent turn ({verdict} "
          f"the {TARGET_MS:g} ms target), {med['cpu_ms']:.1f} ms CPU per turn, "
          f"{med['share']:.1%} of wall time\n")
    return med


def _row(label: str, r: dict[str, Any]) -> str:
    return (f"{label:>5} {r['wall_s']:7.3f} {r['model_s']:8.3f} {r['tool_s']:7.3f} "
            f"{r['orchestration_s']:7.3f} {r['turns']:6.0f} {r['per_turn_ms']:8.1f} "
            f"{r['cpu_ms']:12.1f} {r['share']:6.1%}")


def _phase_order(name: str) -> int:
    order = ("model", "tool", *ORCH_PHASES)
    return order.index(name) if name in order else len(order)


class TurnClock:
    """Listens to the builder's events: when each call ended (wall and CPU), how long the call
    and the tool after it took."""

    def __init__(self) -> None:
        self.ends: list[tuple[float, float, float]] = []  # (wall, cpu, call duration)
        self.tools: list[float] = []

    def __call__(self, event: Any) -> None:
        if event.role != "builder":
            return
        if event.kind == "call_finished":
            self.ends.append((time.perf_counter(), time.process_time(),
                              float(getattr(event, "duration_s", 0.0) or 0.0)))
        elif event.kind == "tool_called":
            self.tools.append(float(getattr(event, "duration_s", 0.0) or 0.0))

    def per_turn(self) -> list[tuple[float, float]]:
        """(wall ms outside model and tool, CPU ms) of turns 2..N: from the end of the previous
        call to the end of this one."""
        out = []
        for k in range(1, len(self.ends)):
            (w0, c0, _), (w1, c1, call) = self.ends[k - 1], self.ends[k]
            tool = self.tools[k - 1] if k - 1 < len(self.tools) else 0.0
            out.append((1000 * max(0.0, w1 - w0 - call - tool), 1000 * (c1 - c0)))
        return out


def long_session(base_url: str, wire: str, turns: int) -> dict[str, Any]:
    """One run whose builder takes ``turns`` turns: per-turn cost near turn 10 and near the end."""
    sets = [f'models.builder-sim.id="{LONG_MODEL}"', "models.builder-sim.context_window=2000000",
            f"builder.max_turns={turns + 10}"]
    clock = TurnClock()
    run = asyncio.run(one_run(base_url, wire, sets, [clock]))
    rows = clock.per_turn()
    assert len(rows) == turns - 1, (len(rows), turns)

    def window(last: int) -> tuple[float, float]:
        chosen = rows[max(0, last - 10):last - 1]  # turns last-9 .. last
        return (statistics.median(w for w, _ in chosen), statistics.median(c for _, c in chosen))

    (ew, ec), (lw, lc) = window(10), window(turns)
    return {"early_wall_ms": ew, "early_cpu_ms": ec, "late_wall_ms": lw, "late_cpu_ms": lc,
            "ratio_wall": lw / max(ew, 1e-6), "ratio_cpu": lc / max(ec, 1e-6),
            "per_turn_ms": run["per_turn_ms"]}


def long_sessions(base_url: str, wire: str, turns: int, repeats: int) -> dict[str, Any]:
    before = load()
    rows = [long_session(base_url, wire, turns) for _ in range(repeats)]
    print(f"2. long session over {wire}: the builder takes {turns} turns in one run, {repeats} "
          f"runs ({before} before, {load()} after); per turn, median of 10 turns, wall outside "
          "model and tool")
    print(f"   {'run':>5} {'wall 1-10':>10} {f'wall {turns - 9}-{turns}':>13} {'ratio':>6} "
          f"{'cpu 1-10':>9} {f'cpu {turns - 9}-{turns}':>12} {'ratio':>6} {'run ms/turn':>12}")
    for i, r in enumerate(rows, 1):
        print(_long_row(str(i), r))
    med = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
    print(_long_row("med", med))
    verdict = "within" if med["ratio_wall"] <= 1.2 and med["ratio_cpu"] <= 1.2 else "OVER"
    print(f"   late / early: wall {med['ratio_wall']:.2f}x, cpu {med['ratio_cpu']:.2f}x ({verdict} "
          "the 1.2 target)\n")
    return med


def _long_row(label: str, r: dict[str, Any]) -> str:
    return (f"{label:>5} {r['early_wall_ms']:10.2f} {r['late_wall_ms']:13.2f} "
            f"{r['ratio_wall']:6.2f} {r['early_cpu_ms']:9.2f} {r['late_cpu_ms']:12.2f} "
            f"{r['ratio_cpu']:6.2f} {r['per_turn_ms']:12.1f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tps", type=float, default=1200.0)
    parser.add_argument("--apis", default="chat,responses")
    parser.add_argument("--turns", type=int, default=200)
    parser.add_argument("--long-repeats", type=int, default=3)
    parser.add_argument("--sim", choices=("process", "thread"), default="process")
    parser.add_argument("--parts", default="demo,long")
    parser.add_argument("--json", type=Path, help="also write the medians to this file")
    args = parser.parse_args()
    wires = [w.strip() for w in args.apis.split(",") if w.strip()]
    parts = {p.strip() for p in args.parts.split(",")}
    out: dict[str, Any] = {"sim": args.sim, "demo": {}, "long": {}}
    with simulator(scenario_at(args.tps, args.turns), args.sim) as sim:
        print(f"simulator in a {args.sim}, {os.cpu_count()} cpus\n")
        if "demo" in parts:
            for wire in wires:
                out["demo"][wire] = demo(sim.base_url, wire, args.repeats, args.tps)
            print(f"{'api':<10} {'ms/turn':>8} {'cpu ms/turn':>12} {'share':>7} {'wall s':>7}")
            for wire, med in out["demo"].items():
                print(f"{wire:<10} {med['per_turn_ms']:8.1f} {med['cpu_ms']:12.1f} "
                      f"{med['share']:7.1%} {med['wall_s']:7.3f}")
            if len(out["demo"]) == 2:
                a, b = (out["demo"][w] for w in wires)
                print(f"{wires[1]} / {wires[0]} overhead per turn: "
                      f"{b['per_turn_ms'] / a['per_turn_ms']:.2f}x\n")
        if "long" in parts:
            for wire in wires:
                out["long"][wire] = long_sessions(sim.base_url, wire, args.turns,
                                                  args.long_repeats)
    if args.json:
        args.json.write_text(json.dumps(out, indent=2), encoding="utf-8")


if __name__ == "__main__":
    main()
