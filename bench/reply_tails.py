"""What a one-line reply says after it has given its line, and what stopping it there would cost.

A sample's wall time is mostly generation (issue 27: samples 2..k read their prompt from the
server's cache), so a reply stopped as soon as it has said its line would cost less. This asks
no model: it reads the kept replies of ``bench/line_samples.py --json`` files and finds, in each,
the first point where the line has been given — the end of a fence that held code, or the first
line after a run of numbered lines outside a fence — and prints the share of the replies' text
after that point (the generation a stop there would save) and how many replies the engine's
reader (``oneline.line_edit``) reads to a different edit when cut there (what it would lose).

    python bench/reply_tails.py results/line-samples/r2-reason-k4.json \
        results/line-samples/r56-batch-1-2/line-samples.json
"""

from __future__ import annotations

import argparse
import json
import re
import tempfile
from pathlib import Path

from orchestrator.benchmark.suite import load_suite, materialize
from orchestrator.engine import oneline
from orchestrator.localize.localization import Span

_FENCE = re.compile(r"^\s*```")


def given_at(reply: str) -> int | None:
    """Where ``reply`` has given its line: the end of the first fence that held code, or the
    start of the first line after numbered lines outside a fence; None if it never did."""
    pos, fenced, code, numbered = 0, False, False, False
    for line in reply.splitlines(keepends=True):
        if not line.endswith("\n"):
            return None  # the reply's last line: nothing comes after it
        text = line.rstrip("\n")
        if _FENCE.match(text):
            if fenced and code:
                return pos + len(line)
            fenced, code = not fenced, False
        elif fenced:
            code = code or bool(text.strip())
        elif text.strip() and oneline._LINE.match(text):
            numbered = True
        elif numbered:
            return pos
        pos += len(line)
    return None


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("files", type=Path, nargs="+", help="line_samples.py --json files")
    ap.add_argument("--suite", default="live")
    ap.add_argument("--show", action="store_true", help="print each reply read differently")
    args = ap.parse_args()
    tasks = {t.name: t for t in load_suite(args.suite).tasks}
    total = kept = replies = stopped = passed = 0
    differ: list[tuple[str, bool]] = []
    with tempfile.TemporaryDirectory() as tmp:
        sources: dict[tuple[str, str], str] = {}
        for file in args.files:
            for row in json.loads(file.read_text(encoding="utf-8")):
                reply = row.get("reply")
                if row.get("task") not in tasks or not reply:
                    continue
                path, lines = row["span"].rsplit(":", 1)
                start, end = (int(x) for x in lines.split("-"))
                key = (row["task"], path)
                if key not in sources:
                    copy = materialize(tasks[row["task"]], Path(tmp) / str(len(sources)))
                    sources[key] = (copy / path).read_text(encoding="utf-8")
                source = sources[key]
                span = Span(path=path, start=start, end=end, focus=start, why="found",
                            text=tuple(source.splitlines()[start - 1:end]))
                at = given_at(reply)
                short = reply if at is None else reply[:at]
                replies += 1
                stopped += at is not None
                passed += bool(row.get("passed"))
                total += len(reply)
                kept += len(short)
                if oneline.line_edit(source, span, reply)[0] != oneline.line_edit(
                        source, span, short)[0]:
                    differ.append((row["task"], bool(row.get("passed"))))
                    if args.show:
                        print(f"{row['task']}: {short[-160:]!r} || {reply[len(short):][:200]!r}")
    print(f"{replies} one-line replies ({passed} passed); {stopped} gave their line before "
          "their end")
    print(f"text after the line given: {1 - kept / max(total, 1):.0%} of all the replies' text "
          f"({total - kept} of {total} characters)")
    print(f"read to a different edit when stopped there: {len(differ)} "
          f"({sum(p for _, p in differ)} of them had passed)")


if __name__ == "__main__":
    main()
