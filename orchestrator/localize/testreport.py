"""Test runners' output read into per-test failures: which tests failed, their error lines and
their stack frames.

Pure functions. ``parse`` recognises pytest (any ``--tb`` style, collection errors), unittest
(and any Python traceback), ``node --test`` (TAP and spec reporters) and plain exit codes
(shell ``line N:`` errors, stack frames wherever they appear) and returns a ``FailureReport``
whose frames run outermost first. ``clean`` drops what only gets in the way: warnings and their
summaries, plugin banners, session headers, passing tests, runner internals.
``failures.py`` turns a report into what a model reads.
"""

from __future__ import annotations

import re
from typing import Literal

from pydantic import BaseModel, ConfigDict

Runner = Literal["pytest", "unittest", "node", "plain"]
MAX_ERROR_LINES = 12


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Frame(_Frozen):
    """One stack frame as the output printed it: the path may be absolute or relative."""

    path: str
    line: int
    function: str = ""
    code: str = ""


class TestFailure(_Frozen):
    """One failing test (or, for plain output, the one failure): its error and its frames."""

    name: str
    error: tuple[str, ...] = ()
    frames: tuple[Frame, ...] = ()  # outermost first, as Python prints a traceback


class FailureReport(_Frozen):
    """A command's failure, parsed."""

    command: str = ""
    exit_code: int = 1
    runner: Runner = "plain"
    failures: tuple[TestFailure, ...] = ()
    summary: str = ""
    tail: tuple[str, ...] = ()  # the cleaned output's last lines, for what the parse missed


# --- noise -------------------------------------------------------------------------------------

_RULE = re.compile(r"^={3,}\s*(?P<title>.*?)\s*={3,}$")
_BANNER = re.compile(
    r"^(?:platform \S+ -- Python|rootdir: |configfile: |plugins: |cachedir: |asyncio: mode=|"
    r"collecting \.\.\.|collected \d+ items?|-- Docs: https?://|TAP version \d+|# Subtest: |"
    r"\s*duration_ms: |\s*\.\.\.$|\s*---$|ok \d+ - |\s+ok \d+ - |> \S+@\S+ \S+|"
    r"npm (?:ERR!|error) (?:A complete log|Lifecycle|code ELIFECYCLE|errno|path|command failed))"
)
_WARNING_START = re.compile(r"^\S.*?:\d+: \w*Warning: ")
_INTERNAL_FRAME = re.compile(r"\(?node:(?:internal|async_hooks)")
_LIBRARY = re.compile(r"site-packages/|dist-packages/|/lib/python3\.\d+/|^<frozen |^node:")
_DEF = re.compile(r"^\s*(?:async )?def (\w+)\(|^\s*(?:async )?function (\w+)\s*\(")


def clean(output: str) -> str:
    """``output`` without warnings, banners, session headers and runner internals."""
    out: list[str] = []
    lines = output.replace("\r\n", "\n").split("\n")
    i, skipping_section = 0, False
    while i < len(lines):
        line = lines[i]
        rule = _RULE.match(line)
        if rule:
            title = rule.group("title").lower()
            skipping_section = "warnings summary" in title or "test session starts" in title
            if not skipping_section:
                out.append(line)
            i += 1
            continue
        if skipping_section:
            i += 1
            continue
        if _WARNING_START.match(line):
            i = _after_warning(lines, i)
            continue
        if _BANNER.match(line) or _INTERNAL_FRAME.search(line):
            i += 1
            continue
        out.append(line)
        i += 1
    return "\n".join(out).strip("\n")


def _after_warning(lines: list[str], i: int) -> int:
    """Python prints ``file:N: Category: message`` (maybe several lines), then the source line
    indented by two spaces: skip through that line, or only the first when none follows."""
    for j in range(i + 1, min(i + 10, len(lines))):
        if lines[j].startswith("  ") and lines[j].strip():
            return j + 1
    return i + 1


# --- parsing -----------------------------------------------------------------------------------

_PY_FRAME = re.compile(r'^\s*File "(?P<path>[^"]+)", line (?P<line>\d+)(?:, in (?P<func>.+))?$')
_PYTEST_LOC = re.compile(r"^(?P<path>[^\s:][^:]*?\.\w+):(?P<line>\d+):(?: in (?P<func>\S+)| (?P<exc>[\w.]+))?\s*$")
_JS_FRAME = re.compile(
    r"(?:^|\s|at )(?:(?P<func>[\w$.<>\[\] ]+?) )?\(?(?:file://)?(?P<path>/?[\w@./+-]+\.[cm]?[jt]sx?):"
    r"(?P<line>\d+):\d+\)?\s*$"
)
_SH_ERROR = re.compile(r"^(?P<path>[\w./+-]+\.(?:sh|bash)): line (?P<line>\d+): (?P<msg>.+)$")
_SECTION = re.compile(r"^_{3,} (?P<name>.+?) _{3,}$")
_SUMMARY_ITEM = re.compile(r"^(?P<kind>FAILED|ERROR) (?P<id>\S+)(?: - (?P<msg>.*))?$")
_UNITTEST_HEAD = re.compile(r"^(?P<kind>FAIL|ERROR): (?P<name>\S+(?: \([^)]*\))?)$")
_TAP_FAIL = re.compile(r"^(?P<indent>\s*)not ok \d+ - (?P<name>.+?)(?: # .*)?$")
_SPEC_FAIL = re.compile(r"^\s*✖ (?P<name>.+?)(?: \(\d[\d.]*m?s\))?$")
_PY_EXC = re.compile(r"^(?:[\w.]+(?:Error|Exception|Exit|Interrupt|Failure|Warning)|AssertionError|"
                     r"[\w.]+Error \[\w+\])(?::|$)")
_CARET = re.compile(r"^\s*[\^~]+\s*$")


def detect(output: str) -> Runner:
    """Which runner printed ``output`` (``plain`` when none is recognised)."""
    if re.search(r"^TAP version|^\s*not ok \d+ - |^ℹ tests \d+|^\s*✖ ", output, re.M):
        return "node"
    if re.search(r"^={3,} (?:FAILURES|ERRORS|short test summary info) ={3,}$|^(?:FAILED|ERROR) "
                 r"\S+::|^=+ .*\b(?:failed|passed|error)\b.* in [\d.]+s", output, re.M):
        return "pytest"
    if re.search(r"^Ran \d+ tests? in ", output, re.M) or _UNITTEST_HEAD.search(output):
        return "unittest"
    return "plain"


def parse(output: str, *, command: str = "", exit_code: int = 1) -> FailureReport:
    """What failed in ``output``, whichever runner printed it."""
    runner = detect(output)
    failures = {"pytest": _pytest, "unittest": _unittest, "node": _node, "plain": _plain}[runner](output)
    if runner != "plain" and not failures:
        failures = _plain(output)
    tail = tuple(clean(output).splitlines()[-15:])
    return FailureReport(command=command, exit_code=exit_code, runner=runner,
                         failures=tuple(failures), summary=_summary(output, runner), tail=tail)


def _pytest(output: str) -> list[TestFailure]:
    lines = clean(output).splitlines()
    summary = [m for m in map(_SUMMARY_ITEM.match, lines) if m]
    sections: dict[str, list[tuple[str, list[str]]]] = {"FAILED": [], "ERROR": []}
    kind, name = "FAILED", None
    block: list[str] = []
    for line in [*lines, "=== end ==="]:
        head, rule = _SECTION.match(line), _RULE.match(line)
        if head or rule:
            if name is not None:
                sections[kind].append((name, block))
            if rule:
                kind = "ERROR" if rule.group("title") == "ERRORS" else "FAILED"
            name, block = (head.group("name") if head else None), []
        elif name is not None:
            block.append(line)
    if not any(sections.values()):  # --tb=no, or -q: the summary lines are all there is
        return [TestFailure(name=m.group("id"), error=(m.group("msg") or "",)) for m in summary]
    found = []
    for kind, parts in sections.items():  # pytest prints ERRORS first, the summary FAILED first
        ids = _match_ids([n for n, _ in parts],
                         [m.group("id") for m in summary if m.group("kind") == kind])
        found += [_pytest_failure(i, b) for i, (_, b) in zip(ids, parts, strict=True)]
    return found


def _match_ids(names: list[str], ids: list[str]) -> list[str]:
    """Each section's test id: pytest lists the summary in the sections' order, so pair them
    when the counts agree; otherwise match ``Class.test`` against ``path::Class::test``."""
    if len(names) == len(ids):
        return ids
    out = []
    for name in names:
        key = "::" + name.removeprefix("ERROR collecting ").replace(".", "::")
        out.append(next((i for i in ids if i.endswith(key) or i == name), name))
    return out


def _pytest_failure(test_id: str, block: list[str]) -> TestFailure:
    errors = [ln[1:].strip() for ln in block if ln.startswith("E ")]
    frames: list[Frame] = []
    pointed = defined = ""
    for i, line in enumerate(block):
        if line.startswith(">"):
            pointed = line[1:].strip()
        elif (d := _DEF.match(line)) is not None:
            defined = d.group(1) or d.group(2)  # long tracebacks show the frame's def line
        loc = _PYTEST_LOC.match(line)
        if loc:
            code = pointed
            if loc.group("func") and i + 1 < len(block) and block[i + 1].startswith("    "):
                code = block[i + 1].strip()
            frames.append(Frame(path=loc.group("path"), line=int(loc.group("line")),
                                function=loc.group("func") or defined, code=code))
            pointed = defined = ""
        elif _PY_FRAME.match(line):  # --tb=native
            frames.append(_py_frame(block, i))
    if not errors:
        errors = [ln.strip() for ln in block if _PY_EXC.match(ln.strip())]
    return TestFailure(name=test_id, error=_squeeze(errors), frames=_own(frames))


def _py_frame(lines: list[str], i: int) -> Frame:
    m = _PY_FRAME.match(lines[i])
    assert m is not None
    code = lines[i + 1].strip() if i + 1 < len(lines) and not _PY_FRAME.match(lines[i + 1]) else ""
    return Frame(path=m.group("path"), line=int(m.group("line")),
                 function=(m.group("func") or "").strip(), code="" if _CARET.match(code) else code)


def _python_traceback(lines: list[str]) -> tuple[list[str], list[Frame]]:
    """The last traceback in ``lines``: its frames and the exception lines after them."""
    frames: list[Frame] = []
    last = -1
    for i, line in enumerate(lines):
        if line.startswith("Traceback (most recent call last)"):
            frames, last = [], i
        elif _PY_FRAME.match(line):
            frames.append(_py_frame(lines, i))
            last = i + 1
    rest = [ln for ln in lines[last + 1:] if ln.strip() and not _CARET.match(ln)]
    start = next((k for k, ln in enumerate(rest) if _PY_EXC.match(ln.strip())), 0)
    return [ln.rstrip() for ln in rest[start:]], frames


def _unittest(output: str) -> list[TestFailure]:
    found: list[TestFailure] = []
    chunks = re.split(r"^={50,}$", clean(output), flags=re.M)
    for chunk in chunks:
        lines = chunk.strip("\n").splitlines()
        head = _UNITTEST_HEAD.match(lines[0]) if lines else None
        if head is None:
            continue
        body = [ln for ln in lines[1:] if not re.match(r"^-{50,}$", ln)]
        body = body[: next((i for i, ln in enumerate(body) if ln.startswith("Ran ")), len(body))]
        errors, frames = _python_traceback(body)
        found.append(TestFailure(name=head.group("name"), error=_squeeze(errors),
                                 frames=_own(frames)))
    return found


def _node(output: str) -> list[TestFailure]:
    lines = output.replace("\r\n", "\n").split("\n")
    found: list[TestFailure] = []
    seen: set[str] = set()
    for i, line in enumerate(lines):
        head = _TAP_FAIL.match(line) or _SPEC_FAIL.match(line)
        if head is None or head.group("name").strip() in ("failing tests:", *seen):
            continue  # the spec reporter lists every failure twice
        block = _indented_block(lines, i + 1, len(line) - len(line.lstrip()))
        if any("subtestsFailed" in b or "subtests failed" in b for b in block):
            continue  # a describe() block failing because its tests did: they are listed
        errors, frames = _node_block(block)
        seen.add(head.group("name").strip())
        found.append(TestFailure(name=head.group("name").strip(), error=_squeeze(errors),
                                 frames=_own(list(reversed(frames)))))
    return found


def _indented_block(lines: list[str], start: int, indent: int) -> list[str]:
    out = []
    for line in lines[start:]:
        if line.strip() and len(line) - len(line.lstrip()) <= indent:
            break
        out.append(line)
    return out


def _node_block(block: list[str]) -> tuple[list[str], list[Frame]]:
    errors: list[str] = []
    frames: list[Frame] = []
    mode = ""
    for line in block:
        text = line.strip()
        key = re.match(r"^(\w+): ?(.*)$", text)
        if key and key.group(1) in ("error", "stack", "location", "code", "name", "expected",
                                    "actual", "operator", "failureType", "duration_ms"):
            mode = key.group(1)
            value = key.group(2).strip().strip("'|-")
            if mode == "error" and value:
                errors.append(value)
            continue
        if (frame := _JS_FRAME.search(text)) and not _INTERNAL_FRAME.search(text):
            frames.append(_js_frame(frame))
        elif text.startswith("at "):
            mode = mode or "stack"  # spec reporter: the error's properties follow its stack
        elif mode in ("error", "") and text:
            errors.append(text)
    return errors, frames


def _js_frame(m: re.Match[str]) -> Frame:
    func = (m.group("func") or "").strip().removeprefix("at ").strip()
    return Frame(path=m.group("path"), line=int(m.group("line")), function=func)


def _plain(output: str) -> list[TestFailure]:
    lines = clean(output).splitlines()
    errors, frames = _python_traceback(lines)
    if not frames:
        errors = []
        js = [_js_frame(m) for ln in lines if (m := _JS_FRAME.search(ln))]
        frames = list(reversed(js))
        for ln in lines:
            if (sh := _SH_ERROR.match(ln)) is not None:
                frames.append(Frame(path=sh.group("path"), line=int(sh.group("line"))))
                errors.append(ln.strip())
            elif re.search(r"\b(?:Error|error|FAIL|fail|expected|Expected|assert)\b", ln):
                errors.append(ln.strip())
    if not errors and not frames:
        return []
    return [TestFailure(name="(command)", error=_squeeze(errors), frames=_own(frames))]


def _own(frames: list[Frame]) -> tuple[Frame, ...]:
    """Frames in the project's code; a library frame only where the error was raised."""
    mine = [f for f in frames if not _LIBRARY.search(f.path)]
    if frames and mine and frames[-1] is not mine[-1]:
        mine.append(frames[-1])
    return tuple(mine or frames[-1:])


def _squeeze(errors: list[str]) -> tuple[str, ...]:
    seen: dict[str, None] = {}
    for e in errors:
        if e.strip():
            seen.setdefault(e.rstrip()[:300], None)
    return tuple(list(seen)[:MAX_ERROR_LINES])


def _summary(output: str, runner: Runner) -> str:
    patterns = {
        "pytest": r"^=+ (.*\b(?:failed|passed|error|errors|no tests ran)\b.*?) =+$"
                  r"|^(\d+ (?:failed|passed|error).* in [\d.]+s.*)$",
        "unittest": r"^((?:FAILED|OK)\b.*)$",
        "node": r"^# (fail \d+)$|^ℹ (fail \d+)$",
    }
    if runner not in patterns:
        return ""
    found = [next((g for g in m.groups() if g), "")
             for m in re.finditer(patterns[runner], output, re.M)]
    return found[-1].strip() if found else ""
