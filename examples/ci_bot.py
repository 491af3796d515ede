"""A CI bot: run a task on a checked-out pull request and write the result as Markdown.

    python examples/ci_bot.py "fix the failing test" --repo . --out orchestrate.md \
        [--roles roles.toml] [--set builder.model=terra] [--set run.max_attempts=2]

From an installed package (the wheel ships this file as ``orchestrator/examples/ci_bot.py``):
``python -m orchestrator.examples.ci_bot ...`` with the same arguments.

(``--roles`` and ``--set`` repeat, as with ``orchestrate run``; any role map key goes through
``--set``.) It drives the library API exactly as any bot would: ``orchestrator.start`` for a
run with an event stream (progress goes to stderr as plain lines), then the typed
``RunResult``. It exits with ``result.exit_code``: 0 when the task was achieved cleanly, 3 when
achieved but a role session was lost on the way (see ``result.losses``), 4 when a plan awaits
approval, 1 when not achieved, 2 on a configuration error — and always writes the Markdown
file, so the CI job can post it as a comment. Without Python glue, the GitHub Action
(``action.yml``) and ``scripts/ci/action.sh`` do the same from ``orchestrate run --json
--events`` (docs/ci.md).
"""

from __future__ import annotations

import argparse
import asyncio
import sys
from pathlib import Path

import orchestrator


def to_markdown(result: orchestrator.RunResult) -> str:
    icon = {0: "✅", 3: "⚠️", 4: "⏸️"}.get(result.exit_code, "❌")
    lines = [
        f"## {icon} orchestrate: {result.task}",
        "",
        f"**{result.status}** — {result.reason}",
        "",
        f"- branch `{result.branch}`" + (f" at `{result.commit[:10]}`" if result.commit else ""),
        f"- cost ${result.cost_usd:.4f}, wall {result.time_split.get('wall_s', 0):.1f}s",
    ]
    if result.diff_stat.strip():
        lines += ["", "```", result.diff_stat.rstrip(), "```"]
    if result.tests:
        lines += ["", "| acceptance command | exit |", "|---|---|"]
        lines += [f"| `{c.command}` | {c.exit_code} |" for c in result.tests.checks]
    lines += ["", "| role | models | calls | tokens in / out | cost $ |", "|---|---|---|---|---|"]
    for role, row in result.per_role.items():
        lines.append(f"| {role} | {', '.join(row.models)} | {row.calls} | "
                     f"{row.prompt_tokens} / {row.output_tokens} | {row.cost_usd:.4f} |")
    judges = ([("reviewer", result.review)] if result.review else []) + list(result.checks.items())
    if judges:  # the reviewer and any check roles of the team's pipeline
        lines += ["", "| judge | verdict | comments |", "|---|---|---|"]
        lines += [f"| {role} | {v.verdict} | {'; '.join(v.comments) or '-'} |" for role, v in judges]
    findings = result.verified_findings
    if findings:
        lines += ["", "<details><summary>verified findings</summary>", ""]
        for claim in findings:
            refs = ", ".join(f"`{c.path}:{c.start_line}-{c.end_line}`" for c in claim.citations)
            lines.append(f"- {claim.text} ({refs})")
        lines += ["", "</details>"]
    for warning in result.warnings:
        lines.append(f"> ⚠️ {warning}")
    return "\n".join(lines) + "\n"


async def main() -> int:
    p = argparse.ArgumentParser(description="Run orchestrate on a checkout and write Markdown.")
    p.add_argument("task")
    p.add_argument("--repo", default=".")
    p.add_argument("--out", default="orchestrate.md")
    p.add_argument("--roles", action="append", default=[])
    p.add_argument("--set", dest="sets", action="append", default=[])
    args = p.parse_args()
    out = Path(args.out)
    try:
        handle = orchestrator.start(args.task, repo=args.repo, role_files=args.roles,
                                    sets=args.sets)
        async for event in handle.events():
            if event.kind in ("role_started", "explorer_finished", "test_result", "warning",
                              "role_lost"):
                print(f"[{event.t:6.1f}s] {event.kind} {event.session or event.role or ''}",
                      file=sys.stderr)
        result = await handle.result()
    except orchestrator.OrchestrateError as exc:
        out.write_text(f"## ❌ orchestrate could not run\n\n{exc}\n", encoding="utf-8")
        print(f"error: {exc}", file=sys.stderr)
        return exc.exit_code
    out.write_text(to_markdown(result), encoding="utf-8")
    return result.exit_code


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
