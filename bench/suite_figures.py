"""Whole-suite figures from several ``orchestrate bench`` runs, read from their ``bench.json``.

A live suite of 22 tasks under three role maps takes two hours on the 2-core kit, so it is
often measured in parts (the 14 pinned tasks one evening, the explore-needed ``xp-*`` tasks
the next). This merges the parts' records and prints what ``orchestrate bench`` prints for one
run: per role map the pass rate, the median time to a verified pass, the pass rate within 30,
60, 120 and 300 s, what bought each pass, why each failure failed, and for each pair of maps
the speed-up at equal accuracy. A later file's record replaces an earlier one's for the same
task, role map and repeat (say so with ``--show-sources``); with ``--as-repeats`` it is kept as
the next repeat instead, so two runs of the same tasks give each map's figures over both (a
single live run's pass count moves by one or two tasks from draw to draw). A map missing from a
part is missing from the pair figures on that part's tasks, never counted as failing them.

    python bench/suite_figures.py bench/results/live-suite/r21/bench.json \\
        bench/results/xp-live/r21/bench.json [--json] [--show-sources] [--as-repeats]
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Mapping
from fnmatch import fnmatch
from pathlib import Path

from rich.console import Console

from orchestrator.benchmark.attempts import summarize_attempts
from orchestrator.benchmark.compare import compare_all
from orchestrator.benchmark.fixplace import FixReach
from orchestrator.benchmark.records import RunRecord
from orchestrator.benchmark.report import BenchReport, print_report, reaches
from orchestrator.benchmark.suite import PACKAGED, Suite, load_suite
from orchestrator.errors import ConfigError


def merged(paths: list[Path], *, common: bool = False, maps: tuple[str, ...] = (),
           as_repeats: bool = False, suite: str | None = None, tasks_like: tuple[str, ...] = (),
           same: Mapping[str, str] | None = None
           ) -> tuple[BenchReport, dict[tuple[str, str, int], Path]]:
    """One report over every record of ``paths`` (only ``maps`` when given; with ``common``,
    only the tasks every role map ran; with ``as_repeats``, a later record of a task and map
    already held is the next repeat, not a replacement; with ``tasks_like``, only the tasks
    whose name matches one of these shell patterns; ``same`` counts a map's records as another
    map's: a map file run under its own name before it became that map); where each kept
    record came from.
    The one-line samples are set against the reference fixes of ``suite`` (a directory, or a
    packaged suite's name; by default the packaged suite the files name, if they name one)."""
    reports = []
    for path in paths:
        try:
            reports.append(BenchReport.model_validate_json(path.read_text(encoding="utf-8")))
        except (OSError, ValueError) as exc:
            raise SystemExit(f"{path}: not a readable bench.json ({exc}); pass the files "
                             "`orchestrate bench --out DIR` wrote as DIR/bench.json") from None
    records: dict[tuple[str, str, int], RunRecord] = {}
    source: dict[tuple[str, str, int], Path] = {}
    next_repeat: dict[tuple[str, str], int] = {}  # with as_repeats: a task and map's next number
    tasks: list[str] = []
    order: list[str] = []
    for path, report in zip(paths, reports, strict=True):
        tasks += [t for t in report.tasks if t not in tasks]
        named = [same.get(m, m) for m in report.role_maps] if same else report.role_maps
        order += [m for m in dict.fromkeys(named) if m not in order]
        for rec in report.records:
            if same and rec.role_map in same:
                rec = rec.model_copy(update={"role_map": same[rec.role_map]})
            if maps and rec.role_map not in maps or \
                    tasks_like and not any(fnmatch(rec.task, p) for p in tasks_like):
                continue
            key = (rec.task, rec.role_map, rec.repeat)
            if as_repeats and key in records:
                n = next_repeat[key[:2]]
                rec, key = rec.model_copy(update={"repeat": n}), (*key[:2], n)
            next_repeat[key[:2]] = max(next_repeat.get(key[:2], 0), key[2] + 1)
            records[key] = rec
            source[key] = path
    if maps:
        missing = [m for m in maps if m not in order]
        if missing:
            raise SystemExit(f"no run of {', '.join(missing)} in these files (their maps: "
                             f"{', '.join(order)})")
        order = list(maps)
    ran = {m: {r.task for r in records.values() if r.role_map == m} for m in order}
    notes = [f"part {i + 1}: {p} ({len(r.records)} runs, maps {', '.join(r.role_maps)})"
             for i, (p, r) in enumerate(zip(paths, reports, strict=True))]
    if common:
        shared = set.intersection(*ran.values())
        records = {k: v for k, v in records.items() if v.task in shared}
        notes.append(f"only the {len(shared)} task(s) every role map ran")
    elif len({frozenset(v) for v in ran.values()}) > 1:
        notes.append("the role maps ran different tasks (" + ", ".join(
            f"{m} {len(v)}" for m, v in ran.items()) + "): each pass rate is over its own "
            "map's tasks; --common compares on the tasks all ran")
    held = {r.task for r in records.values()}
    tasks = [t for t in tasks if t in held]
    rank = {t: i for i, t in enumerate(tasks)}
    column = {m: i for i, m in enumerate(order)}
    ordered = sorted(records.values(), key=lambda r: (rank[r.task], column[r.role_map], r.repeat))
    summaries, pairs = compare_all(ordered, order)
    report = BenchReport(
        suite=" + ".join(dict.fromkeys(r.suite for r in reports)), tasks=tuple(tasks),
        role_maps=tuple(order), repeat=max([r.repeat + 1 for r in ordered] or [1]), jobs=1,
        started=min(r.started for r in reports), machine=reports[0].machine,
        records=tuple(ordered), summaries=summaries, comparisons=pairs,
        attempts=tuple(summarize_attempts(m, [r for r in ordered if r.role_map == m])
                       for m in order),
        reach=_reach(suite, [r.suite for r in reports], order, ordered),
        notes=tuple(notes))
    return report, {key: path for key, path in source.items() if key in records}


def _reach(suite: str | None, named: list[str], order: list[str], records: list[RunRecord]
           ) -> tuple[FixReach, ...]:
    """``report.reaches`` over ``suite``, else over the one packaged suite the files ran."""
    names = set(named)
    if suite is None and (len(names) != 1 or not names <= set(PACKAGED)):
        return ()
    try:
        tasks: Suite = load_suite(suite or names.pop())
    except ConfigError as exc:
        raise SystemExit(f"--suite: {exc}") from None
    return reaches(tasks, order, records)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("files", nargs="+", type=Path, help="bench.json files, oldest first")
    parser.add_argument("--json", action="store_true", help="print the merged report as JSON")
    parser.add_argument("--map", action="append", default=[], dest="maps",
                        help="only this role map (repeat; the order is the report's)")
    parser.add_argument("--tasks", action="append", default=[], dest="tasks_like",
                        metavar="PATTERN", help="only the tasks whose name matches this shell "
                        "pattern (repeat), e.g. 'xp-*'")
    parser.add_argument("--common", action="store_true",
                        help="only the tasks every role map ran")
    parser.add_argument("--as-repeats", action="store_true",
                        help="keep a later run of a task and map as its next repeat, not as a "
                        "replacement (two runs of the suite: figures over both)")
    parser.add_argument("--suite", help="set the one-line samples against this suite's "
                        "reference fixes (a directory or a packaged suite's name; by default "
                        "the packaged suite the files ran)")
    parser.add_argument("--same", action="append", default=[], metavar="MAP=AS",
                        help="count MAP's runs as AS's (repeat): a map file run under its own "
                        "name before it became AS")
    parser.add_argument("--show-sources", action="store_true",
                        help="print which file each kept record came from")
    args = parser.parse_args(argv)
    bad = [pair for pair in args.same if pair.count("=") != 1 or "" in pair.split("=")]
    if bad:
        parser.error(f"--same {bad[0]}: give it as MAP=AS, e.g. live-solo-task=live-solo")
    report, source = merged(args.files, common=args.common, maps=tuple(args.maps),
                            as_repeats=args.as_repeats, suite=args.suite,
                            tasks_like=tuple(args.tasks_like),
                            same=dict(pair.split("=") for pair in args.same))
    if args.json:
        print(report.model_dump_json(indent=2))
        return 0
    console = Console(width=160)
    print_report(report, console)
    if args.show_sources:
        for (task, role_map, repeat), path in sorted(source.items()):
            console.print(f"{task} {role_map} #{repeat}: {path}", highlight=False, markup=False)
    return 0


if __name__ == "__main__":
    sys.exit(main())
