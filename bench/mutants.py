"""How often a mechanical edit of one line fixes a suite's bug, and how often one passes the
tests for the wrong reason.

No model is asked. For each task of a suite, every line of the file its reference fix changes
is edited the ways ``engine/mutants.py`` edits a line a model chose (the task's numbers
given; a swap with the next line included), and each edit is checked by the task's
acceptance commands in a copy of its repository.
An edit that passes is counted as *the fix* when the file it makes is the reference fix's,
at the fix's line when it makes another file from that line (another change that passes there),
and *elsewhere* when it edits a line the fix does not touch: a pass the engine would take only
if a model chose that line, and the tests' blind spot the report's warning is for. Prints a
table by task and the totals, with the time an edit's check took (the cost of one mechanical
candidate against a model's sample).

    python bench/mutants.py                 # the live suite
    python bench/mutants.py builtin --json out.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from orchestrator.benchmark.suite import Task, load_suite, materialize
from orchestrator.engine.mutants import comment_for, mutants, swaps, task_numbers

TIMEOUT_S = 30.0


def check(repo: Path, commands: list[str]) -> tuple[bool, float]:
    """Whether every acceptance command passes in ``repo``, and the time they took."""
    started = time.monotonic()
    for command in commands:
        try:
            done = subprocess.run(command, shell=True, cwd=repo, capture_output=True,
                                  timeout=TIMEOUT_S)
        except subprocess.TimeoutExpired:
            return False, time.monotonic() - started
        if done.returncode != 0:
            return False, time.monotonic() - started
    return True, time.monotonic() - started


def task_figures(task: Task, scratch: Path) -> dict[str, object]:
    """Every edit of every line of the task's fix file, checked; what passed and where."""
    assert task.sim is not None
    repo = materialize(task, scratch / task.name)
    path = repo / task.sim.path
    source = path.read_text(encoding="utf-8")
    fixed = source.replace(task.sim.old, task.sim.new, 1)
    start = source.index(task.sim.old)
    first = source.count("\n", 0, start) + 1
    fix_lines = set(range(first, first + task.sim.old.count("\n") + 1))
    numbers = tuple(task_numbers(task.instruction))
    lines = source.splitlines(keepends=True)
    passed: dict[str, list[str]] = {"fix": [], "fix_line": [], "elsewhere": []}
    times: list[float] = []
    edits = 0
    comment = comment_for(task.sim.path)
    for n, line in enumerate(lines, 1):
        body = line.rstrip("\r\n")
        below = lines[n].rstrip("\r\n") if n < len(lines) else None
        made = [(m.operator, {n: m.text}) for m in mutants(body, comment=comment,
                                                           numbers=numbers)]
        made += [("swap", {n: a, n + 1: b}) for a, b in swaps(body, below, comment=comment)]
        for operator, edit in made:
            edits += 1
            new = "".join(edit[k] + text[len(text.rstrip("\r\n")):] if k in edit else text
                          for k, text in enumerate(lines, 1))
            path.write_text(new, encoding="utf-8")
            ok, took = check(repo, list(task.acceptance))
            times.append(took)
            if ok:
                where = ("fix" if new == fixed else "fix_line" if fix_lines & set(edit)
                         else "elsewhere")
                said = " / ".join(edit[k].strip() for k in sorted(edit) if edit[k] != lines[k - 1]
                                  .rstrip("\r\n"))
                passed[where].append(f"{n}:{operator}: {said}")
        path.write_text(source, encoding="utf-8")
    return {"task": task.name, "lines": len(lines), "edits": edits, "passed": passed,
            "check_s": round(statistics.median(times), 3) if times else 0.0}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("suite", nargs="?", default="live", help="a suite (default: live)")
    ap.add_argument("--task", action="append", default=[], help="only these tasks")
    ap.add_argument("--json", type=Path, help="write the figures here too")
    args = ap.parse_args(argv)
    tasks = [t for t in load_suite(args.suite).tasks
             if t.sim is not None and (not args.task or t.name in args.task)]
    if not tasks:
        print("no task with a reference fix ([sim]) to edit", file=sys.stderr)
        return 2
    rows = []
    with tempfile.TemporaryDirectory(prefix="mutants-") as tmp:
        for task in tasks:
            row = task_figures(task, Path(tmp))
            rows.append(row)
            got = row["passed"]
            assert isinstance(got, dict)
            print(f"{task.name:24} {row['lines']:>4} lines {row['edits']:>4} edits  "
                  f"fix {len(got['fix']):>2}  at its line {len(got['fix_line']):>2}  "
                  f"elsewhere {len(got['elsewhere']):>2}  check {row['check_s']:.2f}s",
                  flush=True)
            for where in ("fix_line", "elsewhere"):
                for said in got[where]:
                    print(f"    {where}: {said}")
    fixed = sum(1 for r in rows if r["passed"]["fix"])  # type: ignore[index]
    wrong = sum(1 for r in rows if r["passed"]["elsewhere"])  # type: ignore[index]
    edits = sum(int(r["edits"]) for r in rows)  # type: ignore[call-overload]
    print(f"\n{len(rows)} tasks, {edits} edits: the reference fix among the edits of its line "
          f"in {fixed}; an edit elsewhere passing in {wrong}; median check "
          f"{statistics.median(float(r['check_s']) for r in rows):.2f}s")  # type: ignore[arg-type]
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
