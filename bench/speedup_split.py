"""Where a speed-up at equal accuracy comes from: the runs two role maps both passed, split by
whether both passed at their first build call, and each run's time apart into building and the
rest (localising, planning, exploring, the planner between attempts).

The routed map and the big model in every role ask the same builder for the same first call on a
task whose failing test pins the code (`run.first_build = "before_plan"`): when that call passes
under both maps, the two runs are the same run and their ratio is 1 by construction, whatever the
other roles cost. This prints, for a pair of maps (A against B, B's time over A's: above 1, A is
faster), the median ratio over all the runs both passed in the same repeat, over the ones both
passed at their first build call, and over the rest; and a ceiling: B's time over A's *build*
time alone, the ratio A would reach if every role but its builder took no time at all; and,
over the rest, how much faster A's other roles were than B's (runs where they took over 1 s).

    python bench/speedup_split.py bench/results/live-suite/r55/bench.json \\
        [more bench.json files, as repeats] [--pair live-routed live-solo] [--json]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from pathlib import Path

from suite_figures import merged  # bench/ is the script's folder, on sys.path when it runs

from orchestrator.benchmark.compare import passed_at_first_call
from orchestrator.benchmark.records import RunRecord


def build_s(rec: RunRecord) -> float:
    """The time ``rec`` spent in its build attempts (their calls and checks)."""
    return sum(a.duration_s for a in rec.attempt_log)


def rows(records: list[RunRecord], a: str, b: str) -> list[dict[str, object]]:
    """One row per task and repeat that both maps passed."""
    held = {(r.task, r.role_map, r.repeat): r for r in records}
    out: list[dict[str, object]] = []
    for (task, role_map, repeat), ra in held.items():
        rb = held.get((task, b, repeat))
        if role_map != a or rb is None or not ra.passed or not rb.passed:
            continue
        out.append({
            "task": task, "repeat": repeat,
            "a_s": ra.wall_s, "a_build_s": build_s(ra), "a_calls": ra.calls,
            "a_strategy": ra.attempt_log[-1].strategy if ra.attempt_log else "",
            "b_s": rb.wall_s, "b_build_s": build_s(rb), "b_calls": rb.calls,
            "b_strategy": rb.attempt_log[-1].strategy if rb.attempt_log else "",
            "both_first_call": passed_at_first_call(ra) and passed_at_first_call(rb),
            "ratio": rb.wall_s / ra.wall_s if ra.wall_s else None,
            "ceiling": rb.wall_s / build_s(ra) if build_s(ra) else None,
            "others": ((rb.wall_s - build_s(rb)) / (ra.wall_s - build_s(ra))
                       if ra.wall_s - build_s(ra) > 1.0 else None),
        })
    return out


def _median(values: list[object]) -> float | None:
    nums = [float(v) for v in values if isinstance(v, (int, float))]
    return round(statistics.median(nums), 2) if nums else None


def summary(table: list[dict[str, object]]) -> dict[str, object]:
    first = [r for r in table if r["both_first_call"]]
    rest = [r for r in table if not r["both_first_call"]]
    return {
        "both_passed": len(table), "both_first_call": len(first),
        "ratio": _median([r["ratio"] for r in table]),
        "ratio_first_call": _median([r["ratio"] for r in first]),
        "ratio_rest": _median([r["ratio"] for r in rest]),
        "ceiling": _median([r["ceiling"] for r in table]),
        "ceiling_rest": _median([r["ceiling"] for r in rest]),
        "others_rest": _median([r["others"] for r in rest]),
    }


def _fmt(v: object) -> str:
    return "-" if v is None else f"{v:.2f}×" if isinstance(v, float) else str(v)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="bench.json files (later ones are "
                        "further repeats)")
    parser.add_argument("--pair", nargs=2, metavar=("A", "B"), default=None,
                        help="the two role maps (default: the first two the files ran)")
    parser.add_argument("--json", action="store_true", help="the rows and figures as JSON")
    args = parser.parse_args(argv)
    report, _ = merged(args.files, as_repeats=True)
    if args.pair is None and len(report.role_maps) < 2:
        raise SystemExit(f"these files ran one role map ({', '.join(report.role_maps)}): "
                         "a split needs two")
    a, b = args.pair or report.role_maps[:2]
    for name in (a, b):
        if name not in report.role_maps:
            raise SystemExit(f"--pair {name}: no run of it in these files (their maps: "
                             f"{', '.join(report.role_maps)})")
    table = rows(list(report.records), a, b)
    figures = summary(table)
    if args.json:
        print(json.dumps({"a": a, "b": b, "rows": table, "figures": figures}, indent=2))
        return 0
    print(f"{a} (A) against {b} (B): the runs both passed; times in s, build = the attempts'")
    print(f"{'task':<22} {'rep':>3} {'A':>7} {'A build':>8} {'B':>7} {'B build':>8} "
          f"{'B/A':>6} {'B/A build':>9}  first call")
    for r in table:
        print(f"{r['task']:<22} {r['repeat']:>3} {r['a_s']:>7.1f} {r['a_build_s']:>8.1f} "
              f"{r['b_s']:>7.1f} {r['b_build_s']:>8.1f} {_fmt(r['ratio']):>6} "
              f"{_fmt(r['ceiling']):>9}  {'both' if r['both_first_call'] else ''}")
    f = figures
    print(f"\nboth passed {f['both_passed']} run(s), {f['both_first_call']} of them at both maps' "
          f"first build call")
    print(f"B/A median: all {_fmt(f['ratio'])}, both at the first call "
          f"{_fmt(f['ratio_first_call'])}, the rest {_fmt(f['ratio_rest'])}")
    print(f"ceiling (A's roles but the builder free): all {_fmt(f['ceiling'])}, the rest "
          f"{_fmt(f['ceiling_rest'])}")
    print(f"the other roles' time (all but the builds), B/A median over the rest: "
          f"{_fmt(f['others_rest'])}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
