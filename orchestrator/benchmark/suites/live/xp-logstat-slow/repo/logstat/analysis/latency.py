"""Latency over parsed requests; durations are in milliseconds."""

import math


def percentile(values, p):
    """The nearest-rank ``p``-th percentile of ``values``."""
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    rank = max(1, math.ceil(p / 100 * len(ordered)))
    return ordered[rank - 1]


def slow_requests(requests, threshold_ms=5000):
    """The requests that took longer than ``threshold_ms``, slowest first."""
    slow = [r for r in requests if r.duration_ms > threshold_ms]
    return sorted(slow, key=lambda r: (-r.duration_ms, r.time))
