"""How fast the CLI starts: ``orchestrate --help``, ``--version`` and ``roles`` next to the
interpreter's own start (``python -c pass``) and to importing the engine, in one run.

Each command runs ``--repeats`` times in a fresh process; the table shows the median wall
time, the time above ``python -c pass``, and whether that stays within the target (0.3 s).

    python bench/cli_startup.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.3


def commands() -> dict[str, list[str]]:
    script = Path(sys.executable).with_name("orchestrate")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "orchestrator"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "orchestrate --help": [*cli, "--help"],
        "orchestrate --version": [*cli, "--version"],
        "orchestrate roles": [*cli, "roles"],
        "import orchestrator.api (the engine)": [sys.executable, "-c", "import orchestrator.api"],
    }


def timed(argv: list[str], cwd: str) -> float:
    started = time.perf_counter()
    subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                   check=True, env={**os.environ, "COLUMNS": "100"})
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    cmds = commands()
    samples: dict[str, list[float]] = {name: [] for name in cmds}
    with tempfile.TemporaryDirectory() as cwd:  # not a repository: `roles` shows the defaults
        for argv in cmds.values():
            timed(argv, cwd)  # warm the file cache
        for _ in range(args.repeats):  # interleaved, so machine load hits every command alike
            for name, argv in cmds.items():
                samples[name].append(timed(argv, cwd))
    base = statistics.median(samples["python -c pass"])
    print(f"{'command':<40} {'median s':>9} {'above python':>13} {'within 0.3 s':>13}")
    for name, values in samples.items():
        median = statistics.median(values)
        above = median - base
        verdict = "-" if name.startswith(("python", "import")) else (
            "yes" if above <= TARGET_S else "NO")
        print(f"{name:<40} {median:>9.3f} {above:>13.3f} {verdict:>13}")
    print(f"({args.repeats} runs each, interleaved; {sys.version.split()[0]}, {os.cpu_count()} cpus)")


if __name__ == "__main__":
    main()
