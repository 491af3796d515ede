"""What mechanical localisation costs and finds, per task of the live suite, in one run.

For each task: the acceptance commands run in the sandbox (as a run's preflight runs them),
then ``localize`` (parse, map frames to files, spans, tree-sitter map). Printed side by side:
the commands' time, localisation's own time, the size of what the planner and builder get,
and whether it shows the file and the line that the task's reference fix changes.

    python bench/localize.py [--suite live]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import tempfile
import time
from pathlib import Path

from orchestrator.benchmark import load_suite, materialize
from orchestrator.config.schema import SandboxSettings
from orchestrator.engine.preflight import localize_worktree
from orchestrator.localize.localization import Check, render
from orchestrator.sandbox import build_sandbox
from orchestrator.tools.shell import CommandPolicy, run_command


async def one(task, root: Path) -> tuple[float, float, int, bool, bool]:
    repo = materialize(task, root / task.name)
    box = build_sandbox(SandboxSettings(), worktree=repo, read_only=[repo / ".git" / "objects"],
                        env=os.environ)
    try:
        t0 = time.perf_counter()
        checks = []
        for command in task.acceptance:
            res = await run_command(command, cwd=repo, sandbox=box, timeout=120, env=os.environ,
                                    policy=CommandPolicy(deny=[]))
            checks.append(Check(command=command, exit_code=res.exit_code, output=res.output))
        t1 = time.perf_counter()
        loc = localize_worktree(repo, checks)
        t2 = time.perf_counter()
    finally:
        box.close()
    text = (repo / task.sim.path).read_text(encoding="utf-8")
    line = text[: text.index(task.sim.old)].count("\n") + 1
    shown = any(s.path == task.sim.path and s.start <= line <= s.end for s in loc.spans)
    return t1 - t0, t2 - t1, len(render(loc)), task.sim.path in loc.suspects, shown


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--suite", default="live")
    args = parser.parse_args()
    suite = load_suite(args.suite)
    rows = []
    with tempfile.TemporaryDirectory(prefix="bench-localize-") as tmp:
        for task in suite.tasks:
            rows.append((task.name, *await one(task, Path(tmp))))
    print(f"{'task':22} {'commands':>9} {'localize':>9} {'chars':>6}  file  line")
    for name, run_s, loc_s, chars, file, line in rows:
        print(f"{name:22} {run_s * 1000:7.0f}ms {loc_s * 1000:7.1f}ms {chars:6}  "
              f"{'yes' if file else 'NO':4}  {'yes' if line else 'NO'}")
    print(f"median: commands {statistics.median(r[1] for r in rows) * 1000:.0f} ms, localize "
          f"{statistics.median(r[2] for r in rows) * 1000:.1f} ms, "
          f"{statistics.median(r[3] for r in rows):.0f} chars; file shown "
          f"{sum(r[4] for r in rows)}/{len(rows)}, fixed line shown {sum(r[5] for r in rows)}/"
          f"{len(rows)}; load average {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    asyncio.run(main())
