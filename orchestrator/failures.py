"""Acceptance failures trimmed to what a builder needs: failing tests, assertions, the end.

Pure functions. ``trim`` keeps the names of failing tests (pytest and unittest styles), the
assertion and error lines, and the tail of the output; ``signature`` reduces a failure to what
stays the same when nothing was fixed, so the verify loop can stop early on a repeat.
"""

from __future__ import annotations

import re

_TEST_LINE = re.compile(
    r"^(?:FAILED |ERROR |FAIL: |ERROR: )(?P<name>\S+(?: \([^)]*\))?)", re.M
)
_ASSERT_LINE = re.compile(
    r"^(?:E\s+.*|.*\b(?:AssertionError|Error|Exception|assert)\b.*)$", re.M
)
_VOLATILE = re.compile(r"\b\d+(?:\.\d+)?s\b|0x[0-9a-f]+|\bin \d+\.\d+ ?s(?:econds)?\b|/tmp/\S+")


def failing_tests(output: str) -> list[str]:
    seen: dict[str, None] = {}
    for m in _TEST_LINE.finditer(output):
        seen.setdefault(m.group("name").strip(), None)
    return list(seen)


def assertion_lines(output: str, limit: int = 12) -> list[str]:
    lines: list[str] = []
    for m in _ASSERT_LINE.finditer(output):
        line = m.group(0).rstrip()
        if line and line not in lines and not line.startswith(("FAILED ", "ERROR ")):
            lines.append(line[:300])
        if len(lines) >= limit:
            break
    return lines


def trim(output: str, *, tail_lines: int = 40, limit: int = 4000) -> str:
    """Failing tests, assertion lines, then the last lines of the output, within ``limit``."""
    parts: list[str] = []
    tests = failing_tests(output)
    if tests:
        parts.append("failing: " + ", ".join(tests[:20]))
    asserts = assertion_lines(output)
    if asserts:
        parts.append("errors:\n" + "\n".join(f"  {a}" for a in asserts))
    tail = output.rstrip().splitlines()[-tail_lines:]
    parts.append("end of output:\n" + "\n".join(tail))
    text = "\n".join(parts)
    return text if len(text) <= limit else text[: limit // 3] + "\n...\n" + text[-(2 * limit) // 3 :]


def signature(command: str, exit_code: int, output: str) -> str:
    """What stays the same across two attempts that fixed nothing."""
    tests = failing_tests(output)
    asserts = assertion_lines(output, limit=4)
    key = tests + asserts if tests or asserts else output.strip().splitlines()[-5:]
    return _VOLATILE.sub("#", f"{command}|{exit_code}|" + "|".join(key))
