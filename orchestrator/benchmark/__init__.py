"""``orchestrate bench``: measure time to working code per role map on a suite of tasks, and
compare role maps at equal accuracy (pass rates always next to speed-ups); or, on an explore
suite, measure explorer models' truthfulness (questions answered with a supporting citation in
range, claims verified and dropped by reason) next to their time and tokens.

``run_bench``/``arun_bench`` run a ``Suite`` under several ``(name, RoleMap)`` pairs and return
a ``BenchReport`` (also written as JSON, CSV and, with matplotlib, a PNG); ``print_report``
prints it; ``bench_main`` is the whole command for the CLI. ``BenchSimulator`` serves the
simulated models the built-in suite and the packaged ``bench-careful``/``bench-fast`` maps use.
"""

from orchestrator.benchmark.command import bench_main
from orchestrator.benchmark.compare import (
    MapSummary,
    PairComparison,
    Spread,
    compare_all,
    compare_pair,
    summarize,
)
from orchestrator.benchmark.explore_report import (
    ExploreRecord,
    ExploreReport,
    ExploreSummary,
    print_explore_report,
)
from orchestrator.benchmark.explore_runner import arun_explore_bench
from orchestrator.benchmark.explore_suite import (
    ExploreSuite,
    Question,
    builtin_explore_path,
    load_explore_suite,
)
from orchestrator.benchmark.records import RunRecord
from orchestrator.benchmark.report import BenchReport, print_report
from orchestrator.benchmark.runner import arun_bench, run_bench
from orchestrator.benchmark.simulator import SIM_MAPS, BenchSimulator, bench_scenario, load_role_map
from orchestrator.benchmark.suite import (
    Suite,
    Task,
    apply_fix,
    builtin_suite,
    load_suite,
    materialize,
)

__all__ = [
    "SIM_MAPS", "BenchReport", "BenchSimulator", "ExploreRecord", "ExploreReport",
    "ExploreSuite", "ExploreSummary", "MapSummary", "PairComparison", "Question", "RunRecord",
    "Spread", "Suite", "Task", "apply_fix", "arun_bench", "arun_explore_bench", "bench_main",
    "bench_scenario", "builtin_explore_path", "builtin_suite", "compare_all", "compare_pair",
    "load_explore_suite", "load_role_map", "load_suite", "materialize", "print_explore_report",
    "print_report", "run_bench", "summarize",
]
