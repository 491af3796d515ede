"""What the orchestrate Action reports from a run's ``--json --events`` stream: the step's
outputs (``GITHUB_OUTPUT``), the Markdown job summary and the pull-request comment.

Reads only the stream's last line, the one object every exit prints (``{"kind": "result"}`` or
``{"kind": "error"}``, see ``orchestrate schema events``); standard library only, so it runs
with whatever Python the runner has.

    python summarize.py EVENTS.jsonl --exit-code N --outputs FILE --summary FILE --comment FILE
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

ICON = {0: "✅", 3: "⚠️", 4: "⏸️"}


def last_object(path: Path) -> dict[str, Any] | None:
    lines = path.read_text(encoding="utf-8").splitlines() if path.exists() else []
    for line in reversed(lines):
        try:
            found = json.loads(line)
        except ValueError:
            continue
        if isinstance(found, dict) and found.get("kind") in ("result", "error"):
            return found
    return None


def outputs(final: dict[str, Any] | None, code: int, events: Path) -> dict[str, str]:
    found = {"exit-code": str(code), "events": str(events), "run-id": "", "status": "error",
             "branch": "", "commit": "", "patch": "", "report": "", "error-code": ""}
    if final is None:
        found["error-code"] = "no_result"
    elif final["kind"] == "error":
        found.update({"run-id": final.get("run_id") or "", "error-code": final["code"]})
    else:
        result = final["result"]
        run_dir = Path(result.get("run_dir") or "")
        found.update({"run-id": result["run_id"], "status": result["status"],
                      "branch": result.get("branch") or "", "commit": result.get("commit") or ""})
        for name, file in (("patch", "patch.diff"), ("report", "report.json")):
            if result.get("run_dir") and (run_dir / file).is_file():
                found[name] = str(run_dir / file)
    return found


def markdown(final: dict[str, Any] | None, code: int) -> str:
    if final is None:
        return (f"## ❌ orchestrate printed no result (exit {code})\n\n"
                "See the step's log.\n")
    if final["kind"] == "error":
        run = final.get("run_id")
        lines = [f"## ❌ orchestrate could not run (exit {code}, `{final['code']}`)", "",
                 final["message"]]
        if run:
            lines += ["", f"Run `{run}`: `orchestrate show {run}`, `orchestrate resume {run}`."]
        return "\n".join(lines) + "\n"
    return result_markdown(final["result"], code)


def result_markdown(result: dict[str, Any], code: int) -> str:
    commit = result.get("commit")
    lines = [f"## {ICON.get(code, '❌')} orchestrate: {result['task']}", "",
             f"**{result['status']}** (exit {code}) — {result['reason']}", "",
             f"- run `{result['run_id']}` · branch `{result['branch']}`"
             + (f" at `{commit[:10]}`" if commit else " (no commit)"),
             f"- cost ${result.get('cost_usd', 0):.4f} · wall "
             f"{result.get('time_split', {}).get('wall_s', 0):.1f}s"]
    if result.get("diff_stat", "").strip():
        lines += ["", "```", result["diff_stat"].rstrip(), "```"]
    tests = (result.get("tests") or {}).get("checks") or []
    if tests:
        lines += ["", "| acceptance command | exit |", "|---|---|"]
        lines += [f"| `{c['command']}` | {c['exit_code']} |" for c in tests]
    per_role = result.get("per_role") or {}
    if per_role:
        lines += ["", "| role | models | calls | tokens in / out | cost $ |", "|---|---|---|---|---|"]
        lines += [f"| {role} | {', '.join(row['models'])} | {row['calls']} | "
                  f"{row['prompt_tokens']} / {row['output_tokens']} | {row['cost_usd']:.4f} |"
                  for role, row in per_role.items()]
    judges = ([("reviewer", result["review"])] if result.get("review") else []) \
        + list((result.get("checks") or {}).items())
    if judges:
        lines += ["", "| judge | verdict | comments |", "|---|---|---|"]
        lines += [f"| {role} | {v['verdict']} | {'; '.join(v['comments']) or '-'} |"
                  for role, v in judges]
    lines += [f"> ⚠️ {w}" for w in result.get("warnings") or []]
    return "\n".join(lines) + "\n"


def write_outputs(path: Path, values: dict[str, str]) -> None:
    with path.open("a", encoding="utf-8") as out:
        for name, value in values.items():
            out.write(f"{name}={value.replace(chr(10), ' ')}\n")  # one line each


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("events", type=Path)
    p.add_argument("--exit-code", type=int, required=True)
    p.add_argument("--outputs", type=Path, required=True)
    p.add_argument("--summary", type=Path, required=True)
    p.add_argument("--comment", type=Path, required=True)
    args = p.parse_args()
    final = last_object(args.events)
    write_outputs(args.outputs, outputs(final, args.exit_code, args.events))
    text = markdown(final, args.exit_code)
    with args.summary.open("a", encoding="utf-8") as summary:
        summary.write(text)
    args.comment.write_text(text, encoding="utf-8")


if __name__ == "__main__":
    main()
