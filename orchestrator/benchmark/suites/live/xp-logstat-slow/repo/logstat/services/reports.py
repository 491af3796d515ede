"""The reports the command line prints."""

from logstat.analysis.latency import percentile, slow_requests
from logstat.analysis.traffic import by_endpoint, error_rate, server_errors
from logstat.output.tables import table

SHOWN = 20


def summary_report(requests):
    if not requests:
        return "no requests"
    durations = [r.duration_ms for r in requests]
    rows = [("requests", len(requests)), ("endpoints", len(by_endpoint(requests))),
            ("error rate", f"{error_rate(requests):.1%}")]
    rows += [(f"p{p}", f"{percentile(durations, p)} ms") for p in (50, 90, 99)]
    return table(rows)


def slow_report(requests):
    slow = slow_requests(requests)
    if not slow:
        return "no slow requests"
    rows = [(r.time, r.endpoint, r.status, f"{r.duration_ms} ms") for r in slow[:SHOWN]]
    return table(rows)


def errors_report(requests):
    counts = server_errors(requests)
    if not counts:
        return "no server errors"
    return table(sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])))
