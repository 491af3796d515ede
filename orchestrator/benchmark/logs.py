"""Generated files of explore suites: data too large to keep in the repository, made the same
way every time from a seed (``explore.toml``: ``generated = [{ path = ..., kind = ... }]``).

``service-log``: a ~5 MB log of a billing service over one day. A deploy at noon restarts it
with a typo in a configuration key, logged once as a warning; the database pool then runs at its
default size of 2, and when traffic rises hours later, timeouts acquiring a connection flood the
log. The cause sits tens of thousands of lines before the first symptom, among other warnings
that are noise (a certificate's expiry, a slow job, a cache's miss rate, repeated all day).
"""

from __future__ import annotations

import datetime
import random
from collections.abc import Callable

SIZE = 5_200_000  # bytes
_PATHS = ("/v1/invoices", "/v1/invoices/{id}", "/v1/customers/{id}", "/v1/payments", "/healthz",
          "/v1/plans")


class _Log:
    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.t = datetime.datetime(2026, 11, 3, 0, 0, 0)
        self.lines: list[str] = []
        self.size = 0

    def __call__(self, level: str, component: str, message: str) -> None:
        self.t += datetime.timedelta(milliseconds=self.rng.randint(50, 2500))
        line = f"{self.t.isoformat(timespec='milliseconds')}Z {level:<5} [{component}] {message}"
        self.lines.append(line)
        self.size += len(line) + 1

    def request(self, status: int = 200, ms: int | None = None) -> None:
        rng = self.rng
        path = rng.choice(_PATHS).replace("{id}", str(rng.randint(1000, 99999)))
        method = rng.choice(("GET", "GET", "GET", "POST"))
        took = ms if ms is not None else rng.randint(3, 90)
        self("INFO", "http", f"{method} {path} {status} {took}ms req={len(self.lines):08x}")

    def traffic(self, until: int, *, pool: int, busy: bool = False) -> None:
        rng, n = self.rng, 0
        while self.size < until:
            n += 1
            if busy and rng.random() < 0.35:
                waiting = rng.randint(3, 60)
                self("ERROR", "db", "timeout acquiring connection from pool after 5000ms "
                     f"(in use {pool}/{pool}, waiting {waiting})")
                self.request(503, 5000 + rng.randint(0, 40))
            else:
                self.request(ms=rng.randint(40, 900) if busy else None)
            if n % 97 == 0:
                rps, p99 = ((rng.randint(150, 400), rng.randint(2000, 5100)) if busy
                            else (rng.randint(40, 90), rng.randint(60, 140)))
                used = pool if busy else rng.randint(0, pool)
                self("INFO", "metrics", f"rps={rps} p99={p99}ms pool_in_use={used}/{pool}")
            if n % 411 == 0:
                self("WARN", "cache", f"miss rate {rng.randint(21, 35)}% above 20% threshold")

    def start(self, *, version: str, pool_key: str, pool: int) -> None:
        self("INFO", "main", f"billing-api {version} starting (pid {self.rng.randint(2000, 9000)})")
        self("INFO", "config", "loading /etc/billing/config.yaml")
        for key, value in (("http.port", "8080"), ("db.host", "db-primary.internal"),
                           ("db.name", "billing"), ("db.timeout_ms", "5000"),
                           ("cache.ttl_s", "300")):
            self("INFO", "config", f"{key} = {value}")
        if pool_key == "db.pool_size":
            self("INFO", "config", f"db.pool_size = {pool}")
        else:
            self("WARN", "config", f"unknown key '{pool_key}' ignored; "
                 f"db.pool_size = {pool} (default)")
        self("INFO", "db", "connecting to db-primary.internal:5432/billing")
        self("INFO", "db", f"pool ready: {pool} connections")
        self("INFO", "main", "listening on :8080")


def service_log(seed: int = 26) -> str:
    """The billing service's log: see the module's docstring."""
    log = _Log(seed)
    log.start(version="4.11.2", pool_key="db.pool_size", pool=20)
    log.traffic(SIZE // 4, pool=20)
    log("WARN", "tls", "certificate for billing.internal expires in 29 days")
    log("INFO", "main", "received SIGTERM: draining (deploy 4.12.0)")
    log.start(version="4.12.0", pool_key="db.pool_szie", pool=2)
    log.traffic(SIZE // 4 + SIZE // 8, pool=2)
    log("WARN", "scheduler", "job 'nightly-export' took 14.2s (limit 10s)")
    log.traffic(SIZE * 2 // 5, pool=2)
    log("INFO", "http", "traffic ramp: campaign 'black-friday' enabled")
    log.traffic(SIZE, pool=2, busy=True)
    return "\n".join(log.lines) + "\n"


GENERATORS: dict[str, Callable[[], str]] = {"service-log": service_log}
