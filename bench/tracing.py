"""What OpenTelemetry spans cost a run: the demo scenario with tracing off and on, interleaved.

"On" records every span with the SDK (a ``SimpleSpanProcessor`` into the in-memory exporter, so
export cost is left out); "off" is a run with no tracer provider. Prints the orchestration
overhead per agent turn for both, their ratio, and the spans per run.

    python bench/tracing.py [--repeats 5] [--tps 1200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics

from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import NoOpTracerProvider
from overhead import one  # bench/overhead.py: one demo run, its time split

from orchestrator.tracing import traced_by


async def measured(tps: float, traced: bool) -> tuple[dict[str, float], int]:
    memory = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(memory))
    with traced_by(provider if traced else NoOpTracerProvider()):
        row = await one(tps)
    spans = len(memory.get_finished_spans())
    provider.shutdown()
    return row, spans


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--tps", type=float, default=1200.0)
    args = parser.parse_args()
    asyncio.run(measured(args.tps, True))  # warm-up: imports, tiktoken, git caches
    off, on, spans = [], [], 0
    for _ in range(args.repeats):  # interleaved, so drift hits both sides alike
        off.append(asyncio.run(measured(args.tps, False))[0])
        row, spans = asyncio.run(measured(args.tps, True))
        on.append(row)
    print(f"demo scenario, every role at {args.tps:.0f} tokens/s, {args.repeats} repeats each")
    print(f"{'tracing':>8} {'wall s':>8} {'orch s':>8} {'turns':>6} {'ms/turn':>8}")
    med = {}
    for name, rows in (("off", off), ("on", on)):
        med[name] = {k: statistics.median(r[k] for r in rows) for k in rows[0]}
        m = med[name]
        print(f"{name:>8} {m['wall_s']:8.3f} {m['orchestration_s']:8.3f} {m['turns']:6.0f} "
              f"{m['per_turn_ms']:8.1f}")
    ratio = med["on"]["per_turn_ms"] / med["off"]["per_turn_ms"]
    print(f"\n{spans} spans per run; overhead per turn with spans / without: {ratio:.2f}x "
          f"({med['on']['per_turn_ms'] - med['off']['per_turn_ms']:+.1f} ms per turn)")


if __name__ == "__main__":
    main()
