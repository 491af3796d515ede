"""Acceptance failures as a model should see them: which tests failed, the assertion, the
traceback, and nothing else.

Pure functions over a command's output, read by ``testreport.parse``. ``render`` puts each
failing test's error and traceback first (repeats collapsed, frames of the project's own code,
paths relative to the worktree) and caps the text; ``trim`` is parse and render in one call.
``signature`` reduces a failure to what stays the same when nothing was fixed, so the verify
loop can stop early on a repeat; ``failing`` names what fails, so an attempt that fixed some
tests and broke none can be told from one that did not (``engine/building.undo``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from orchestrator.config.prompts import evidence as _t
from orchestrator.localize.testreport import (
    FailureReport,
    Frame,
    TestFailure,
    clean,
    detect,
    parse,
)

__all__ = ["FailureReport", "Frame", "TestFailure", "clean", "detect", "failing", "failing_tests",
           "parse", "relative", "render", "signature", "trim"]
MAX_FRAMES = 8
MAX_SHOWN = 5


# --- for the model -----------------------------------------------------------------------------


def render(report: FailureReport, *, limit: int = 2500) -> str:
    """The failure for a model: each test's error, then its frames; the cleaned tail when the
    parse found nothing more specific. At most ``limit`` characters."""
    head = (_t("failure_head", command=report.command, exit_code=report.exit_code)
            if report.command else "")
    parts = [p for p in (head, report.summary) if p]
    shown = report.failures[:MAX_SHOWN]
    previous: tuple[tuple[str, ...], tuple[Frame, ...]] | None = None
    for failure in shown:
        if previous == (failure.error, failure.frames):
            parts.append(_t("failure_same", name=failure.name))
            continue
        previous = (failure.error, failure.frames)
        parts.append(_render_failure(failure))
    if len(report.failures) > len(shown):
        rest = ", ".join(f.name for f in report.failures[len(shown):][:10])
        parts.append(_t("failure_more", count=len(report.failures) - len(shown), names=rest))
    if not report.failures and report.tail:
        parts.append(_t("failure_tail", tail="\n".join(report.tail)))
    return _cap("\n".join(parts), limit)


def _render_failure(failure: TestFailure) -> str:
    out = [_t("failure_name", name=failure.name) if failure.name != "(command)"
           else _t("failure_command")]
    out += [f"  {e}" for e in failure.error]
    frames = list(failure.frames)
    if len(frames) > MAX_FRAMES:
        frames = frames[:2] + frames[-(MAX_FRAMES - 2):]
    if frames:
        out.append(_t("failure_traceback"))
        for f in frames:
            where = f"{f.path}:{f.line}" + (f" in {f.function}" if f.function else "")
            out.append(f"    {where}" + (f": {f.code}" if f.code else ""))
    return "\n".join(out)


def _cap(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    keep = text[: limit - 40].rsplit("\n", 1)[0]
    return keep + "\n" + _t("failure_cut", limit=limit)


def relative(report: FailureReport, root: str) -> FailureReport:
    """``report`` with frame paths under ``root`` (the worktree) made relative to it."""
    prefix = root.rstrip("/") + "/"

    def fix(f: Frame) -> Frame:
        return f.model_copy(update={"path": f.path.removeprefix(prefix)})

    tests = tuple(t.model_copy(update={"frames": tuple(map(fix, t.frames))})
                  for t in report.failures)
    return report.model_copy(update={"failures": tests})


def trim(output: str, *, limit: int = 2500, command: str = "", exit_code: int = 1,
         root: str = "") -> str:
    """``render(parse(output))``: what a builder reads about a failed command (frame paths
    relative to ``root`` when given)."""
    report = parse(output, command=command, exit_code=exit_code)
    return render(relative(report, root) if root else report, limit=limit)


def failing_tests(output: str) -> list[str]:
    """The names of the failing tests, in the order the output lists them."""
    return list(dict.fromkeys(f.name for f in parse(output).failures if f.name != "(command)"))


def failing(checks: Iterable[tuple[str, int, str]]) -> list[str]:
    """What fails in the ``(command, exit code, output)`` of each check: every failing test as
    ``command: test``, or the failing command alone when its output names no test; sorted."""
    out: set[str] = set()
    for command, exit_code, output in checks:
        if exit_code:
            out.update(f"{command}: {name}" for name in failing_tests(output) or ["(command)"])
    return sorted(out)


_VOLATILE = re.compile(r"\b\d+(?:\.\d+)?m?s\b|0x[0-9a-f]+|\bin \d+\.\d+ ?s(?:econds)?\b|/tmp/\S+")


def signature(command: str, exit_code: int, output: str) -> str:
    """What stays the same across two attempts that fixed nothing."""
    report = parse(output, command=command, exit_code=exit_code)
    key = [f"{f.name}:{' '.join(f.error[:2])}" for f in report.failures]
    key = key or list(report.tail[-5:])
    return _VOLATILE.sub("#", f"{command}|{exit_code}|" + "|".join(key))
