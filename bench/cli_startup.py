"""How fast the CLI starts: ``orchestrate --help``, ``--version``, ``roles``, ``runs`` and a
``run`` refused for a missing key, next to the interpreter's own start (``python -c pass``) and
to importing the engine, in one run (in a fresh repository with one commit).

Each command runs ``--repeats`` times in a fresh process; the table shows the median wall
time, the time above ``python -c pass``, whether that stays within the target (0.3 s), and
the median CPU time (user + system) of the process, which a machine busy with other work
inflates far less than the wall time.

    python bench/cli_startup.py [--repeats 9]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TARGET_S = 0.3
REFUSED = "orchestrate run (no key: exit 2)"


def commands() -> dict[str, list[str]]:
    script = Path(sys.executable).with_name("orchestrate")
    cli = [str(script)] if script.exists() else [sys.executable, "-m", "orchestrator"]
    return {
        "python -c pass": [sys.executable, "-c", "pass"],
        "orchestrate --help": [*cli, "--help"],
        "orchestrate --version": [*cli, "--version"],
        "orchestrate roles": [*cli, "roles"],
        "orchestrate runs": [*cli, "runs"],
        REFUSED: [*cli, "run", "fix it"],
        "import the engine (openrun, drive)": [
            sys.executable, "-c", "import orchestrator.engine.openrun, orchestrator.engine.drive"],
    }


def timed(argv: list[str], cwd: str) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one run of ``argv``."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    started = time.perf_counter()
    code = subprocess.run(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                          env={**env, "COLUMNS": "100"}).returncode
    wall = time.perf_counter() - started
    if code != (2 if "run" in argv else 0):
        raise SystemExit(f"{argv} exited {code}")
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return wall, (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=9)
    args = parser.parse_args()
    cmds = commands()
    samples: dict[str, list[tuple[float, float]]] = {name: [] for name in cmds}
    with tempfile.TemporaryDirectory() as cwd:  # no roles.toml: `roles` shows the defaults
        for git in (["init", "-q"], ["-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q",
                                     "--allow-empty", "-m", "one"]):
            subprocess.run(["git", *git], cwd=cwd, check=True)
        for argv in cmds.values():
            timed(argv, cwd)  # warm the file cache
        for _ in range(args.repeats):  # interleaved, so machine load hits every command alike
            for name, argv in cmds.items():
                samples[name].append(timed(argv, cwd))
    base = statistics.median(w for w, _ in samples["python -c pass"])
    base_cpu = statistics.median(c for _, c in samples["python -c pass"])
    print(f"{'command':<38} {'median s':>9} {'above python':>13} {'within 0.3 s':>13} "
          f"{'cpu s':>7} {'cpu above':>10}")
    for name, values in samples.items():
        wall = statistics.median(w for w, _ in values)
        cpu = statistics.median(c for _, c in values)
        verdict = "-" if name.startswith(("python", "import")) else (
            "yes" if wall - base <= TARGET_S else "NO")
        print(f"{name:<38} {wall:>9.3f} {wall - base:>13.3f} {verdict:>13} {cpu:>7.3f} "
              f"{cpu - base_cpu:>10.3f}")
    load = os.getloadavg()[0]
    print(f"({args.repeats} runs each, interleaved; {sys.version.split()[0]}, {os.cpu_count()} cpus, "
          f"load average {load:.1f})")


if __name__ == "__main__":
    main()
