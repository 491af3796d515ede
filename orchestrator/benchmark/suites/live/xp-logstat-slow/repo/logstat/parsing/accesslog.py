"""Parsing access-log lines: ``TIMESTAMP METHOD PATH STATUS DURATIONms``."""

import re
from dataclasses import dataclass

_LINE = re.compile(r"^(\S+)\s+([A-Z]+)\s+(\S+)\s+(\d{3})\s+(\d+)ms\s*$")


@dataclass(frozen=True)
class Request:
    time: str
    method: str
    path: str
    status: int
    duration_ms: int

    @property
    def endpoint(self):
        return f"{self.method} {self.path.split('?', 1)[0]}"


@dataclass(frozen=True)
class Parsed:
    requests: list
    skipped: int


def parse_line(line):
    m = _LINE.match(line)
    if not m:
        return None
    time, method, path, status, ms = m.groups()
    return Request(time, method, path, int(status), int(ms))


def read_log(path):
    requests, skipped = [], 0
    with open(path, encoding="utf-8") as fh:
        for line in fh:
            if not line.strip():
                continue
            req = parse_line(line)
            if req is None:
                skipped += 1
            else:
                requests.append(req)
    return Parsed(requests, skipped)
