"""What the planner bought on the pinned tasks: the figure behind ``run.plan_when_pinned``.

For each kept live run whose failure pinned the code and whose first attempt failed, reads its
events: whether the planner was asked and how long it took, whether its diagnosis checked
(``diagnosis_checked``), and whether the run passed with an attempt shown that diagnosis (a
later whole-file one-shot; the one-line request is never shown it). Runs that asked no planner
(``run.plan_when_pinned = false``) are counted apart, with their time to a pass. Asks no model.

    python bench/plan_value.py /work/live/r69/out /work/live/r75/out [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import statistics
from collections import defaultdict
from pathlib import Path
from typing import Any

SHOWN = {"one_shot", "one_shot_fact"}  # the rungs whose prompt carries a checked diagnosis


def run_row(events: list[dict[str, Any]]) -> dict[str, Any] | None:
    """One pinned run whose first attempt failed, as the figures need it; else ``None``."""
    kinds = {e["kind"] for e in events}
    loc = next((e for e in events if e["kind"] == "localized"), None)
    attempts = [e for e in events if e["kind"] == "attempt_finished"]
    if "run_finished" not in kinds or not loc or not loc.get("pinned") or not attempts:
        return None
    if attempts[0]["passed"]:
        return None
    started = next((e for e in events if e["kind"] == "role_started"
                    and e["role"] == "planner"), None)
    ended = next((e for e in events if e["kind"] == "role_finished"
                  and e["role"] == "planner"), None)
    checked = next((e for e in events if e["kind"] == "diagnosis_checked"), None)
    finished = next(e for e in events if e["kind"] == "run_finished")
    passing = next((a for a in attempts if a["passed"]), None)
    kept = bool(checked and checked["kept"])
    return {
        "planner": started["model"] if started else None,
        "planner_s": round(ended["t"] - started["t"], 1) if started and ended else None,
        "diagnosis_kept": kept,
        "passed": finished["status"] == "succeeded",
        "passed_by": passing["strategy"] if passing else None,
        "shown_diagnosis": kept and passing is not None and passing["strategy"] in SHOWN,
        "attempts": len(attempts),
        "wall_s": round(finished["t"], 1),
    }


def rows(roots: list[Path]) -> list[dict[str, Any]]:
    """Every such run under the kept bench ``out`` directories ``roots``."""
    found = []
    for root in roots:
        for path in sorted(root.glob("runs/*/*/workspaces/*/events.jsonl")):
            events = [json.loads(line) for line in path.read_text("utf-8").splitlines() if line]
            row = run_row(events)
            if row is not None:
                found.append({"run": path.parts[-8] if len(path.parts) > 8 else "",
                              "task": path.parts[-4], **row})
    return found


def figures(found: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per planner model (``none``: no planner asked): runs, time, checked diagnoses, passes."""
    groups: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in found:
        groups[row["planner"] or "none"].append(row)
    out = {}
    for name, group in sorted(groups.items()):
        times = [r["planner_s"] for r in group if r["planner_s"] is not None]
        passes = [r for r in group if r["passed"]]
        out[name] = {
            "runs": len(group),
            "planner_s_median": statistics.median(times) if times else None,
            "planner_s_range": [min(times), max(times)] if times else None,
            "diagnosis_kept": sum(r["diagnosis_kept"] for r in group),
            "passed": len(passes),
            "passed_shown_diagnosis": sum(r["shown_diagnosis"] for r in group),
            "pass_s_median": statistics.median(r["wall_s"] for r in passes) if passes else None,
        }
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("roots", nargs="+", type=Path, help="kept `orchestrate bench --out` dirs")
    ap.add_argument("--json", type=Path, help="write the rows and figures here too")
    a = ap.parse_args()
    found = rows(a.roots)
    said = figures(found)
    print("pinned runs whose first attempt failed, by the model that planned them")
    print(f"{'planner':8} {'runs':>5} {'plan s (median, range)':>24} {'checked':>8} "
          f"{'passed':>7} {'shown it':>9} {'pass s':>7}")
    for name, f in said.items():
        span = (f"{f['planner_s_median']:.1f} ({f['planner_s_range'][0]:.0f}-"
                f"{f['planner_s_range'][1]:.0f})" if f["planner_s_range"] else "-")
        pass_s = f"{f['pass_s_median']:.1f}" if f["pass_s_median"] is not None else "-"
        print(f"{name:8} {f['runs']:>5} {span:>24} {f['diagnosis_kept']:>8} {f['passed']:>7} "
              f"{f['passed_shown_diagnosis']:>9} {pass_s:>7}")
    if a.json:
        a.json.write_text(json.dumps({"rows": found, "figures": said}, indent=1), "utf-8")


if __name__ == "__main__":
    main()
