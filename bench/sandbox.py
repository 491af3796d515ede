"""What the sandbox costs per command, measured side by side in one run.

The same commands run through ``run_command`` (the builder's ``run`` tool and the verify step)
inside the bubblewrap sandbox and with ``[sandbox] mode = "none"``, interleaved so both see the
same machine load. Printed: the median wall time of each, the difference per command (target
< 15 ms) and the ratio. A builder runs hundreds of commands per run, so this is the figure that
multiplies.

    python bench/sandbox.py [--repeats 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestrator.config.schema import SandboxSettings
from orchestrator.sandbox import build_sandbox
from orchestrator.tools.shell import CommandPolicy, run_command

COMMANDS = {
    "true": "true",
    "git status": "git status --short",
    "python -c pass": f"{sys.executable} -c pass",
    "unittest (demo suite)": f"{sys.executable} -m unittest -q discover -s tests 2>/dev/null",
}


def _repo(root: Path) -> Path:
    from orchestrator.faces.demo import make_sample_repo

    return make_sample_repo(root / "repo")


async def _time(command: str, cwd: Path, box, policy: CommandPolicy) -> float:
    started = time.perf_counter()
    result = await run_command(command, cwd=cwd, sandbox=box, policy=policy, timeout=60)
    elapsed = time.perf_counter() - started
    if result.timed_out:
        raise SystemExit(f"{command!r} timed out")
    return elapsed * 1000


async def main(repeats: int) -> int:
    with tempfile.TemporaryDirectory(prefix="orchestrate-bench-sandbox-") as tmp:
        repo = _repo(Path(tmp))
        objects = repo / ".git" / "objects"
        boxed = build_sandbox(SandboxSettings(), worktree=repo, read_only=[objects])
        nocap = build_sandbox(SandboxSettings(process_cgroup=False), worktree=repo,
                              read_only=[objects])
        bare = build_sandbox(SandboxSettings(mode="none", process_cgroup=False), worktree=repo)
        policy = CommandPolicy()
        print(f"sandbox: {boxed.info.summary()}; process cap: {boxed.info.process_cap}")
        capped = boxed.info.process_cap == "cgroup"
        print(f"{'command':<24}{'sandboxed ms':>14}{'unsandboxed ms':>16}{'cost ms':>10}"
              f"{'ratio':>8}" + (f"{'no cgroup ms':>14}{'cost ms':>9}" if capped else ""))
        costs = []
        for name, command in COMMANDS.items():
            inside: list[float] = []
            outside: list[float] = []
            plain: list[float] = []
            for _ in range(repeats):  # interleaved: all feel the same load
                inside.append(await _time(command, repo, boxed, policy))
                outside.append(await _time(command, repo, bare, policy))
                if capped:
                    plain.append(await _time(command, repo, nocap, policy))
            a, b = statistics.median(inside), statistics.median(outside)
            costs.append(a - b)
            extra = ""
            if capped:  # as root: the same sandbox without the pids cgroup
                c = statistics.median(plain)
                extra = f"{c:>14.1f}{c - b:>9.1f}"
            print(f"{name:<24}{a:>14.1f}{b:>16.1f}{a - b:>10.1f}{a / b:>8.2f}{extra}")
        worst = max(costs)
        verdict = "meets" if worst < 15 else "MISSES"
        print(f"sandbox cost per command: median {statistics.median(costs):.1f} ms, worst "
              f"{worst:.1f} ms ({verdict} the < 15 ms target); load average "
              f"{os.getloadavg()[0]:.1f} on {os.cpu_count()} cores (a busy machine inflates both)")
        boxed.close()
        git = subprocess.run(["git", "--version"], capture_output=True, text=True).stdout.strip()
        print(f"({repeats} runs each, medians; {git}; python {sys.version.split()[0]})")
        return 0 if worst < 15 else 1


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=40)
    raise SystemExit(asyncio.run(main(parser.parse_args().repeats)))
