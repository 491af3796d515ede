"""Context ledger figures, side by side (not a timed unit test).

1. Estimate vs the server's ``prompt_tokens`` over a 200-turn session against the simulator,
   whose tokenizer differs from the client's: median and max relative error.
2. The ledger's own per-turn work (append the new messages, estimate, observe) at turn 1,000 vs
   turn 10, without HTTP: the ratio should stay near 1 (targets: <= 2).

Run: .venv/bin/python bench/context_ledger.py
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import statistics
import sys
import tempfile
import time
from pathlib import Path

from orchestrator.config.definitions import load_agents
from orchestrator.config.layers import load_roles
from orchestrator.faces.demo import demo_roles_sets, demo_scenario, make_sample_repo, scenario_path
from orchestrator.models.pool import ClientPool
from orchestrator.record.telemetry import Event, Telemetry
from orchestrator.session.ledger import Ledger
from orchestrator.session.loop import Session
from orchestrator.session.tokens import token_counter
from orchestrator.sim import (
    ChatRequestView,
    ModelBehavior,
    Reply,
    SimServer,
    ToolCallSpec,
    register_behavior,
)
from orchestrator.tools.base import Toolbox
from orchestrator.tools.explorer import explorer_tools

TURNS = 200
FILES = ["stats.py", "tests/test_stats.py", "README.md", "notes.md", "data.csv", "app.log"]


@register_behavior("bench-reader")
def _reader(req: ChatRequestView) -> Reply:
    """Reads the bench files round-robin in small windows; submits after TURNS reads."""
    n = len(req.tool_results())
    if n >= TURNS:
        return Reply(tool_calls=[ToolCallSpec(name="submit", arguments={"answer": "done"})])
    path = FILES[n % len(FILES)]
    start = 1 + (n // len(FILES)) * 3 % 40
    return Reply(content="Reading on." if n % 3 == 0 else None, tool_calls=[ToolCallSpec(
        name="read", arguments={"path": path, "start_line": start, "end_line": start + 3})])


def _bench_repo(root: Path) -> Path:
    repo = make_sample_repo(root / "repo")
    prose = "The ledger anchors on the server's count and estimates what was added since. " * 3
    (repo / "notes.md").write_text("\n".join(f"{i}. {prose[i % 50:]}" for i in range(60)) + "\n")
    (repo / "data.csv").write_text("\n".join(
        f"{i},{hashlib.md5(str(i).encode()).hexdigest()},{i * 3.14159:.4f}" for i in range(60)))
    (repo / "app.log").write_text("\n".join(
        f"2024-05-01T10:00:{i % 60:02d} INFO worker-{i % 7} id={i} took {i % 97}ms"
        for i in range(60)))
    return repo


async def estimate_errors(tokenizer: str) -> list[float]:
    scenario = demo_scenario()
    scenario = scenario.model_copy(update={"tokenizer": tokenizer, "models": {
        **scenario.models, "sim-explorer": ModelBehavior(behavior="bench-reader")}})
    with tempfile.TemporaryDirectory() as tmp, SimServer(scenario) as sim:
        repo = _bench_repo(Path(tmp))
        roles = load_roles(
            base_text=scenario_path("demo-roles.toml").read_text(encoding="utf-8"),
            sets=[*demo_roles_sets(sim.base_url), "models.explorer-sim.context_window=1000000",
                  "explorer.max_turns=400"],
        )
        pool = ClientPool(roles, {"ORCHESTRATE_SIM_KEY": "bench"})
        ticks: list[Event] = []  # progress ticks reach listeners only; the run keeps no copy
        telemetry = Telemetry("bench", listeners=(ticks.append,))
        session = Session(session_id="bench-1", agent=load_agents()["explorer"],
                          client=pool.for_role("explorer"),
                          toolbox=Toolbox.of(explorer_tools(repo)), telemetry=telemetry,
                          max_turns=400, run_dir=Path(tmp) / "run")
        await session.run("Question: read the files, in small windows.")
        await pool.aclose()
    pairs = [(e.data["estimate"], e.data["prompt_tokens"]) for e in ticks
             if e.kind == "progress" and "estimate" in e.data and e.data.get("prompt_tokens")]
    errors = [abs(est - real) / real for est, real in pairs[1:]]  # the first call has no anchor
    if not errors:
        raise SystemExit("bench/context_ledger.py: the session reported no estimate/prompt_tokens "
                         f"pairs ({len(ticks)} events seen); the ledger's progress events changed")
    return errors


def per_turn_cost(turn: int, count, repeats: int = 400) -> float:
    """Seconds the ledger spends on one turn (two new messages, estimate, observe) at ``turn``."""
    ledger = Ledger(count)
    tool_text = "  12| def median(values):\n  13|     ordered = sorted(values)\n" * 4
    call = {"role": "assistant", "content": None, "tool_calls": [{"id": "c", "type": "function",
            "function": {"name": "read", "arguments": '{"path": "stats.py", "start_line": 12}'}}]}
    for _ in range(turn):
        ledger.append(call)
        ledger.append({"role": "tool", "tool_call_id": "c", "content": tool_text})
        ledger.observe(ledger.estimate() + 1)
    started = time.perf_counter()
    for _ in range(repeats):
        ledger.append(call)
        ledger.append({"role": "tool", "tool_call_id": "c", "content": tool_text})
        ledger.observe(ledger.estimate() + 1)
    return (time.perf_counter() - started) / repeats


def main() -> int:
    argparse.ArgumentParser(description=__doc__.splitlines()[0]).parse_args()
    counter = token_counter()
    print(f"client tokenizer: {counter.name}")
    header = f"{'server tokenizer':<18}{'turns':>7}{'median err':>12}{'max err':>10}"
    print(header + "   targets 2% / 5%")
    ok = True
    for tokenizer in ("chars4", "words", "bytes3"):
        errors = asyncio.run(estimate_errors(tokenizer))
        median, worst = statistics.median(errors), max(errors)
        ok &= median <= 0.02 and worst <= 0.05
        print(f"{tokenizer:<18}{len(errors) + 1:>7}{median:>11.2%}{worst:>10.2%}")
    t10 = statistics.median(per_turn_cost(10, counter.count) for _ in range(5))
    t1000 = statistics.median(per_turn_cost(1000, counter.count) for _ in range(5))
    ratio = t1000 / t10
    ok &= ratio <= 2
    print(f"ledger per turn: turn 10 {t10 * 1e6:.1f} µs, turn 1000 {t1000 * 1e6:.1f} µs, "
          f"ratio {ratio:.2f}   target <= 2")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
