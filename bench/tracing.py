"""What OpenTelemetry spans cost a run: the demo scenario with tracing off and on, interleaved.

"On" records every span with the SDK (a ``SimpleSpanProcessor`` into the in-memory exporter, so
export cost is left out); "off" is a run with no tracer provider. Prints the orchestration
overhead per agent turn for both, their ratio, and the spans per run.

    python bench/tracing.py [--repeats 5] [--tps 1200] [--sim process|thread]

The simulator runs in a child process (``bench/simproc.py``), so the time is ours alone.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider
from overhead import one_run, scenario_at  # bench/overhead.py: one demo run, its time split
from simproc import simulator

from orchestrator.record.tracing import traced_by


async def measured(base_url: str, traced: bool) -> tuple[dict[str, float], int]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with traced_by(provider if traced else NoOpTracerProvider()):
        row = await one_run(base_url, "chat")
    spans = len(memory.get_finished_spans())
    provider.shutdown()
    return row, spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tps", type=float, default=1200.0)
    parser.add_argument("--sim", choices=("process", "thread"), default="process")
    args = parser.parse_args()
    off, on, spans = [], [], 0
    with simulator(scenario_at(args.tps, 10), args.sim) as sim:
        asyncio.run(measured(sim.base_url, True))  # warm-up: imports, tiktoken, git caches
        for _ in range(args.repeats):  # interleaved, so drift hits both sides alike
            off.append(asyncio.run(measured(sim.base_url, False))[0])
            row, spans = asyncio.run(measured(sim.base_url, True))
            on.append(row)
    print(f"demo scenario, every role at {args.tps:.0f} tokens/s, {args.repeats} repeats each")
    print(f"{'tracing':>8} {'wall s':>8} {'orch s':>8} {'turns':>6} {'ms/turn':>8}")
    med = {}
    for name, rows in (("off", off), ("on", on)):
        med[name] = {k: statistics.median(r[k] for r in rows) for k in rows[0] if k != "phases"}
        m = med[name]
        print(f"{name:>8} {m['wall_s']:8.3f} {m['orchestration_s']:8.3f} {m['turns']:6.0f} "
              f"{m['per_turn_ms']:8.1f}")
    ratio = med["on"]["per_turn_ms"] / med["off"]["per_turn_ms"]
    print(f"\n{spans} spans per run; overhead per turn with spans / without: {ratio:.2f}x "
          f"({med['on']['per_turn_ms'] - med['off']['per_turn_ms']:+.1f} ms per turn)")


if __name__ == "__main__":
    main()
