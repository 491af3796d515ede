"""Traffic over parsed requests: per endpoint, error rates."""

from collections import Counter


def by_endpoint(requests):
    return Counter(r.endpoint for r in requests)


def error_rate(requests):
    """The share of requests answered with a 5xx status."""
    if not requests:
        return 0.0
    return sum(1 for r in requests if r.status >= 500) / len(requests)


def server_errors(requests):
    return Counter(r.endpoint for r in requests if r.status >= 500)
