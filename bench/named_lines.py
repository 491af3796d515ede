"""Which line the kept live one-line replies that changed nothing picked, against each task's
reference fix: the figure behind asking such a reply once more for its line
(``oneline.named_line``, the ``line_again`` prompt).

Reads the rows ``bench/kept_replies.py`` collects (every kept one-line sample's task, map,
place, reply and live verdict); for each reply that changed nothing it asks ``named_line``
which line of the place's code the reply picked (read from the task's own files, as the
replies were), and counts the picks at the reference fix's lines (``[sim]``, never in a
prompt), those elsewhere in code that holds the fix, and those in code that does not. Asks
no model.

    python bench/kept_replies.py /work/live/r69/out /work/live/r72/out --json replies.json
    python bench/named_lines.py replies.json [--suite live] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path
from typing import Any

from orchestrator.benchmark.fixplace import FixLines, fix_lines
from orchestrator.benchmark.suite import load_suite
from orchestrator.engine.oneline import named_line
from orchestrator.localize.localization import Span


def verdict(row: dict[str, Any], code: str, fix: FixLines | None) -> str:
    """What an unchanged reply picked: "none", "at fix", "fix shown, elsewhere" or "fix not
    shown" (the place's code does not hold the reference fix)."""
    path, _, lines = row["span"].rpartition(":")
    start, end = (int(x) for x in lines.split("-"))
    span = Span(path=path, start=start, end=end, focus=start,
                text=tuple(code.splitlines()[start - 1:end]), why="found")
    line = named_line(code, span, row["reply"])
    if line is None:
        return "none"
    if fix is None or fix[0] != path or not start <= fix[1] <= end:
        return "fix not shown"
    return "at fix" if fix[1] <= line <= fix[2] else "fix shown, elsewhere"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", type=Path, help="a bench/kept_replies.py --json file")
    ap.add_argument("--suite", default="live")
    ap.add_argument("--json", type=Path, help="write the counts here too")
    args = ap.parse_args()
    suite = load_suite(args.suite)
    fixes = fix_lines(suite)
    repos = {t.name: t.repo for t in suite.tasks}
    rows = json.loads(args.rows.read_text(encoding="utf-8"))
    counts: Counter[tuple[str, str]] = Counter()
    at_fix: Counter[tuple[str, str]] = Counter()
    for row in rows:
        if row["changed"] or row["task"] not in repos:
            continue
        path = repos[row["task"]] / row["span"].rpartition(":")[0]
        if not path.is_file():
            continue
        said = verdict(row, path.read_text(encoding="utf-8"), fixes.get(row["task"]))
        counts[(row["map"], said)] += 1
        if said == "at fix":
            at_fix[(row["map"], row["task"])] += 1
    for role_map in sorted({m for m, _ in counts}):
        mine = {said: n for (m, said), n in counts.items() if m == role_map}
        total = sum(mine.values())
        picked = total - mine.get("none", 0)
        print(f"{role_map}: {total} one-line replies changed nothing; {picked} picked a line "
              f"of the code shown: {mine.get('at fix', 0)} the reference fix's, "
              f"{mine.get('fix shown, elsewhere', 0)} another line of code holding it, "
              f"{mine.get('fix not shown', 0)} a line of code not holding it")
        tasks = sorted((t, n) for (m, t), n in at_fix.items() if m == role_map)
        if tasks:
            print(f"{role_map}: at the fix, by task: "
                  + ", ".join(f"{t} {n}" for t, n in tasks))
    if args.json:
        args.json.write_text(json.dumps(
            [{"map": m, "verdict": v, "replies": n} for (m, v), n in sorted(counts.items())],
            indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
