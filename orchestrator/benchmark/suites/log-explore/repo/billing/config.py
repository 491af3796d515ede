"""Configuration: known keys, their defaults, and what happens to keys nobody knows."""

import logging

log = logging.getLogger("config")

DEFAULTS = {
    "http.port": 8080,
    "db.host": "localhost",
    "db.name": "billing",
    "db.timeout_ms": 5000,
    "db.pool_size": 2,
    "cache.ttl_s": 300,
}


def load(raw: dict) -> dict:
    """The settings: every known key from ``raw`` or its default; unknown keys are ignored."""
    settings = dict(DEFAULTS)
    for key, value in raw.items():
        if key not in DEFAULTS:
            log.warning("unknown key %r ignored; db.pool_size = %s (default)", key,
                        settings["db.pool_size"])
            continue
        settings[key] = value
    return settings
