"""The fleet at scale: 1, 2, 4 and 8 workers on the same queue of jobs, one PostgreSQL.

Every job is a whole demo run (plan, explorers, build, verify, review) against the simulator
in a child process, each model answering after a fixed latency (``--latency`` seconds a call,
tokens at once): the models are latency, not CPU, as on a real fleet. Each worker is a process
of its own (``orchestrate worker``'s code, its own clone cache). Per worker count, one fresh
database and ``--jobs`` jobs (each on a repository of its own, by ``file://`` URL) are queued,
the workers started, and the queue drained; then:

- jobs/min: jobs over the wall time from the first job queued (the workers already waiting) to
  the last job's end;
- p50/p95 in queue: from a job's queueing to its start (procrastinate's own events);
- run twice: jobs started more than once, and runs recorded per job beyond one (must be 0);
- connections: the most connections to the database seen at once (sampled every 0.2 s);
- speedup against one worker (target: 4 workers >= 3.2x).

    .venv/bin/python bench/fleet.py [--jobs 40] [--workers 1,2,4,8] [--latency 0.5] [--json out.json]

Needs PostgreSQL binaries (/usr/lib/postgresql/*/bin) and the fleet extra.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

from pg import PgCluster, create_database, pg_bin  # noqa: E402
from simproc import SimProcess  # noqa: E402

from orchestrator.faces.demo import (  # noqa: E402
    DEMO_TASK,
    demo_roles_sets,
    demo_scenario,
    make_sample_repo,
    scenario_path,
)
from orchestrator.faces.fleet import jobs, prepare, submit  # noqa: E402
from orchestrator.sim import Scenario  # noqa: E402

WORKER = """
import asyncio, sys
from pathlib import Path
from orchestrator.faces.fleet_worker import WorkerConfig, run_worker
from orchestrator.faces.logs import setup_logging
setup_logging(json=True)
asyncio.run(run_worker(WorkerConfig(database_url=sys.argv[1], cache_dir=Path(sys.argv[2]),
    name=sys.argv[3], poll_s=0.2,
    allow_set=("providers.*.base_url", "providers.*.api_key_env"))))
"""


def fixed_latency(latency: float) -> Scenario:
    """The demo scenario with every model answering after ``latency`` s, tokens at once."""
    base = demo_scenario()
    models = {k: m.model_copy(update={"delay_s": latency, "tokens_per_second": 1e6})
              for k, m in base.models.items()}
    return base.model_copy(update={"models": models})


class Connections:
    """The most connections to one database seen at once, sampled on a thread."""

    def __init__(self, url: str) -> None:
        import psycopg

        self.peak = 0
        self._stop = threading.Event()
        self._conn = psycopg.connect(url, autocommit=True)
        self._thread = threading.Thread(target=self._sample, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        while not self._stop.wait(0.2):
            row = self._conn.execute("SELECT count(*) FROM pg_stat_activity WHERE datname = "
                                     "current_database()").fetchone()
            self.peak = max(self.peak, int(row[0]) - 1 if row else 0)  # not our own

    def close(self) -> int:
        self._stop.set()
        self._thread.join()
        self._conn.close()
        return self.peak


def queue_times(url: str) -> tuple[list[float], int]:
    """Seconds from queueing to start per job, and how many jobs started more than once."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT job_id, type::text, at FROM procrastinate_events ORDER BY at").fetchall()
    deferred: dict[int, Any] = {}
    started: dict[int, list[Any]] = {}
    for job_id, kind, at in rows:
        if kind == "deferred":
            deferred[job_id] = at
        elif kind == "started":
            started.setdefault(job_id, []).append(at)
    waits = [(s[0] - deferred[j]).total_seconds() for j, s in started.items() if j in deferred]
    return waits, sum(1 for s in started.values() if len(s) > 1)


_AGAIN = ("job failed", "job was stalled (its worker stopped): queued again",
          "run cannot resume here: starting the task again")


def why_again(logs: list[Path]) -> list[str]:
    """The workers' log lines that say why a job failed or was started again."""
    found = []
    for log in logs:
        for text in log.read_text().splitlines():
            try:
                line = json.loads(text)
            except ValueError:
                continue
            if line.get("event") in _AGAIN:
                found.append(f"{line['event']}: job {line.get('job_id')} "
                             f"{line.get('error', '')[:200]}")
    return found


def runs_per_job(url: str) -> tuple[int, int]:
    """Runs recorded beyond one per job (a job run twice would record two), and runs that
    succeeded (the demo task fixed and reviewed)."""
    import psycopg

    with psycopg.connect(url) as conn:
        rows = conn.execute("SELECT job_id, count(*), count(*) FILTER (WHERE state = "
                            "'succeeded') FROM orchestrate_runs GROUP BY job_id").fetchall()
    return sum(n - 1 for _, n, _ in rows), sum(ok for _, _, ok in rows)


async def one(cluster: PgCluster, base_url: str, n_workers: int, n_jobs: int,
              work: Path) -> dict[str, Any]:
    url = create_database(cluster.url())
    here = work / f"w{n_workers}"
    repos = [make_sample_repo(here / "repos" / f"r{i}") for i in range(n_jobs)]
    await prepare(url)
    env = {**os.environ, "ORCHESTRATE_SIM_KEY": "simulated-key"}
    logs = [here / f"worker{i}.log" for i in range(n_workers)]
    procs = [subprocess.Popen([sys.executable, "-c", WORKER, url, str(here / f"cache{i}"),
                               f"bench-{i}"], env=env, stdout=subprocess.DEVNULL,
                              stderr=logs[i].open("w"))
             for i in range(n_workers)]
    try:
        while not all("worker started" in log.read_text() for log in logs):  # imports done
            await asyncio.sleep(0.2)
        sampler = Connections(url)
        start = time.monotonic()
        for i, repo in enumerate(repos):
            await submit(f"{DEMO_TASK} [bench {i}]", f"file://{repo}", database_url=url,
                         role_files=[str(scenario_path("demo-roles.toml"))],
                         sets=demo_roles_sets(base_url))
        while True:
            found = await jobs(url)
            if all(j.status in ("succeeded", "failed") for j in found):
                break
            await asyncio.sleep(0.5)
        wall = time.monotonic() - start
        peak = sampler.close()
    finally:
        for p in procs:
            p.send_signal(signal.SIGTERM)
        for p in procs:
            p.wait()
    waits, twice = queue_times(url)
    extra_runs, runs_ok = runs_per_job(url)
    for line in why_again(logs):  # what made a job start again, from the workers' own logs
        print(f"  w{n_workers}: {line}", flush=True)
    done = sum(1 for j in found if j.status == "succeeded")
    return {"workers": n_workers, "jobs": n_jobs, "succeeded": done, "runs_ok": runs_ok,
            "wall_s": round(wall, 1),
            "jobs_per_min": round(done / wall * 60, 2),
            "queue_p50_s": round(statistics.median(waits), 1) if waits else None,
            "queue_p95_s": round(statistics.quantiles(waits, n=20)[-1], 1)
            if len(waits) >= 2 else None,
            "run_twice": twice + extra_runs, "connections": peak,
            "load": round(os.getloadavg()[0], 1)}


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--jobs", type=int, default=40)
    parser.add_argument("--workers", default="1,2,4,8")
    parser.add_argument("--latency", type=float, default=0.5)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    pgbin = pg_bin()
    if pgbin is None:
        raise SystemExit("needs PostgreSQL binaries under /usr/lib/postgresql/*/bin")
    cluster = PgCluster.start(pgbin)
    rows = []
    try:
        with SimProcess(fixed_latency(args.latency)) as sim, \
                tempfile.TemporaryDirectory(prefix="fleet-bench-") as work:
            for n in (int(x) for x in args.workers.split(",")):
                rows.append(await one(cluster, sim.base_url, n, args.jobs, Path(work)))
                print(json.dumps(rows[-1]), flush=True)
    finally:
        cluster.stop()
    first = rows[0]["jobs_per_min"] or 1e-9
    print(f"\n{args.jobs} demo runs per row, every model call {args.latency} s; one PostgreSQL; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores\n")
    print("| workers | jobs/min | speedup | queue p50 s | queue p95 s | runs ok | run twice "
          "| connections |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['workers']} | {r['jobs_per_min']} | {r['jobs_per_min'] / first:.2f}x | "
              f"{r['queue_p50_s']} | {r['queue_p95_s']} | {r['runs_ok']}/{r['jobs']} | "
              f"{r['run_twice']} | {r['connections']} |")
    if args.json:
        args.json.write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    asyncio.run(main())
