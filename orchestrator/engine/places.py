"""Where a later one-shot and the one-line request point (``oneshot.py``): the place the
explorers' verified claims cite when the failure pins no code, else the code the failure points
at that the task names — the traceback's first source frame is often the caller (in the r15 live
suite three tasks' later one-shots were all pointed at the caller while the task named the
function to change) — and, for the one-line request, that function from the module constant it
uses (shown ``is_valid_id`` alone, the live 1.5B said its ``ID_PATTERN`` was "not defined
anywhere"). Pure functions of the localisation, the run's state and file texts.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping

from orchestrator.localize import repomap
from orchestrator.localize.candidates import CONSTANT, constant_at, file_factor, unit_of
from orchestrator.localize.localization import Localization, Span, imports
from orchestrator.state import RunState

FOUND_LINES = 40  # the explorers' place shown as the focus: at most this many lines
NEAR_CONSTANT = 12  # a constant this far above the function is shown with it (one-line request)
FOUND = "the explorers' verified claims cite it"  # why the explorers' place is shown


def found_span(state: RunState, sources: Mapping[str, str]) -> Span | None:
    """The definition around the first line of code the explorers' verified claims cite in a
    source file (not a doc or a test) the prompt shows (``sources``, by path): files the
    failure does not already show first (the explorers found what the traceback does not),
    then one the code it does show imports, then the most cited; the outermost short
    definition or constant table around the line (``candidates.unit_of``), at most
    ``FOUND_LINES`` long."""
    loc = state.localization
    cited: dict[str, list[int]] = {}
    split: dict[str, list[str]] = {}  # each file's lines, split once
    for c in (c for e in state.explorers for claim in e.claims for c in claim.citations):
        path = c.path.removeprefix("./")
        if path not in sources or file_factor(path) != 1.0:  # a doc or a test
            continue
        text = split.setdefault(path, sources[path].splitlines())
        low, high = sorted((c.start_line, c.end_line))
        first = next((n for n in range(max(1, low), min(high, len(text)) + 1)
                      if _is_code(text[n - 1])), None)
        if first is not None:
            cited.setdefault(path, []).append(first)
    if not cited:
        return None
    suspects = set(loc.suspects) if loc else set()
    # ...and of those, one the failure's code imports before one it does not (xp-js-weekly-runs:
    # summary.js, a suspect, requires the cited time/ranges.js, not the cited bin/runlog.js)
    reached = set(imports([s for s in sources if s in suspects], list(cited), sources.get))
    path = min(cited, key=lambda p: (p in suspects, p not in reached, -len(cited[p])))
    body = sources[path]
    lines = body.splitlines()
    line = Counter(cited[path]).most_common(1)[0][0]
    if not 0 < line <= len(lines):
        return None
    syms = repomap.symbols(path, body) if repomap.supported(path) else []
    table = constant_at(lines, line) if not repomap.enclosing(syms, line) else None
    start, end, _ = table or unit_of(line, syms, len(lines))
    if end - start + 1 > FOUND_LINES:
        start, end = max(start, line - FOUND_LINES // 2), min(end, line + FOUND_LINES // 2)
    return Span(path=path, start=start, end=end, focus=line,
                text=tuple(lines[start - 1:end]), why=FOUND)


_NOT_CODE = re.compile(r"^\s*(?:$|#|//|/\*|\*|\"\"\"|'''|import\s|from\s+\S+\s+import\s)")


def _is_code(line: str) -> bool:
    """A line a fix may change: not blank, a comment, a docstring's opening or an import (live,
    the 0.5B's one finding on xp-loyalty-tier cited a package's one-line docstring)."""
    return _NOT_CODE.match(line) is None


def focus_span(loc: Localization, task: str = "") -> Span | None:
    """The span of non-test code the failure points at (a function, when it is short) whose
    definition the ``task`` names, else whose file it names, else the first: the first frame is
    often the caller (r15: three tasks' later one-shots were all pointed at the caller)."""
    words = set(re.findall(r"[A-Za-z_$][\w$]*", task))

    def named(span: Span) -> int:
        if span.text and (name := defined(span.text[0])) is not None and name in words:
            return 2
        base = re.escape(span.path.rsplit("/", 1)[-1])
        return 1 if re.search(rf"(?<![\w./-]){base}(?![\w-])", task) else 0
    return max((s for s in loc.spans if s.path in loc.suspects), key=named, default=None)


_DEFINES = re.compile(r"^\s*(?:async\s+def|def|function|class)\s+(\w+)")


def defined(line: str) -> str | None:
    """The name a line defines: a function, a class, or a module constant (``RATES = {``)."""
    m = _DEFINES.match(line) or CONSTANT.match(line)
    return m.group(1) if m else None


def line_span(loc: Localization, span: Span, body: str) -> Span:
    """``span`` as the one-line request shows it, ``body`` being its file as it is now: from the
    module constant it uses, when the failure's localisation shows one at most
    ``NEAR_CONSTANT`` lines above it."""
    start = min([span.start, *(c.start for c in loc.spans if c.path == span.path
                               and c.start == c.end and c.text and CONSTANT.match(c.text[0])
                               and 0 < span.start - c.start <= NEAR_CONSTANT)])
    return span.model_copy(update={"start": start,
                                   "text": tuple(body.splitlines()[start - 1:span.end])})
