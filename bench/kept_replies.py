"""The one-line replies of kept live runs, as rows ``line_samples.py --reread`` reads again.

``orchestrate bench live --keep --out DIR`` keeps each run's workspace: its events (each one-line
sample's place, attempt, and whether it changed anything and passed) and its journal (each
call's reply). This collects, for every ``sample_finished`` at a place (``path:start-end``), the
task, the map, the reply and the live verdict; ``--reread`` then applies each reply with the
reader as it is now to a fresh copy of the task's repository and checks it. The place is read
from the task's own files: a sample asked over a kept partial fix is read against the start's
files.

    python bench/kept_replies.py /work/live/r37/out /work/live/r39/out --json replies.json
    python bench/line_samples.py --roles live-routed --reread replies.json
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path
from typing import Any

from orchestrator.benchmark.suite import load_suite
from orchestrator.models.journal import kept_replies

_PLACE = re.compile(r"^.+:\d+-\d+$")
_MAP = re.compile(r"^(?P<map>.+)-r\d+$")


def replies(out: Path, tasks: list[str]) -> list[dict[str, Any]]:
    """The rows of every kept run of ``tasks`` under ``out`` (a ``bench live --out``
    directory), whose runs are named ``0008-py-config-merge-live-routed-r1``."""
    rows: list[dict[str, Any]] = []
    longest_first = sorted(tasks, key=len, reverse=True)
    for events in sorted(out.glob("runs/*/*/workspaces/*/events.jsonl")):
        rest = events.parents[2].name.partition("-")[2]  # after the run's index
        task = next((t for t in longest_first if rest.startswith(f"{t}-")), None)
        if task is None or (named := _MAP.match(rest[len(task) + 1:])) is None:
            continue
        said = {session: done.content for (session, turn), done
                in kept_replies(events.with_name("journal.sqlite")).items() if turn == 0}
        for line in events.read_text(encoding="utf-8").splitlines():
            e = json.loads(line)
            if e.get("kind") != "sample_finished" or not _PLACE.match(str(e.get("place"))):
                continue
            reply = said.get(e["session"])
            if not isinstance(reply, str):
                continue
            rows.append({"task": task, "map": named["map"], "run": str(out),
                         "span": e["place"], "reply": reply, "where": "live",
                         "attempt": e["attempt"], "sample": e["index"],
                         "changed": e["changed"] is True, "passed": e["passed"] is True})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", type=Path, nargs="+", help="bench live --keep --out directories")
    ap.add_argument("--suite", default="live")
    ap.add_argument("--json", type=Path, required=True)
    args = ap.parse_args()
    tasks = [t.name for t in load_suite(args.suite).tasks]
    rows = [row for out in args.out for row in replies(out, tasks)]
    args.json.write_text(json.dumps(rows, indent=1), encoding="utf-8")
    print(f"{len(rows)} one-line replies: {sum(r['changed'] for r in rows)} changed something, "
          f"{sum(r['passed'] for r in rows)} passed")


if __name__ == "__main__":
    main()
