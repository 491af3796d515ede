"""What a run knows about its tests before exploring, and how explorers and the builder see it.

When the acceptance commands ran before any model call (the preflight's ``Localization``),
``known_tests`` takes the failing tests' files, their failure report and the code they point at
from it (``source="check"``). Otherwise it derives what it can from the plan without running
anything: test files named in the acceptance commands or the task, directories an acceptance
command names (``-s tests``), test files among the plan's files, and the conventional test file
of each file the plan will touch (``clamp.py`` -> ``test_clamp.py``, ``cart.js`` ->
``cart.test.js``). Either way the assertion lines of those files come along. Explorers are told
it so they look for the code under test; the builder gets it at the top of the digest (without
the failure report, which its prompt already opens with); the verifier marks claims that only
cite these files as adding nothing.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from orchestrator.config.prompts import evidence as _t
from orchestrator.evidence.sources import FileSource
from orchestrator.localize.failures import render as render_failure
from orchestrator.state import AssertLine, KnownTests

if TYPE_CHECKING:
    from orchestrator.localize.localization import Localization

MAX_FILES = 4
MAX_LINES = 12
MAX_LINE_CHARS = 160
MAX_REPORT_CHARS = 1200
EXPLORER_REPORT_CHARS = 800

_TOKEN = re.compile(r"[\w./@+-]+")
_TEST_NAME = re.compile(
    r"^(?:test_.+\.py|.+_test\.py|tests?\.py|.+\.(?:test|spec)\.[cm]?[jt]sx?|test.*\.sh"
    r"|.+_test\.go|.+Tests?\.(?:java|kt)|.+_spec\.rb)$"
)
_TEST_DIRS = {"test", "tests", "__tests__", "spec", "specs"}
_AFFIX = re.compile(r"^test_|_test$|^test$|\.test$|\.spec$|_spec$|Tests?$")
_ASSERT = re.compile(
    r"^\s*(?:assert|check|expect)\w*(?!\s*\(\)\s*\{)[\s(.]|self\.assert\w*\(|\bassert\.\w+\(|\bexpect\("
    r"|pytest\.raises|\bt\.(?:Error|Fatal)f?\("
)


def is_test_path(path: str) -> bool:
    """A test file by the usual naming conventions (or inside a ``tests/`` directory)."""
    parts = path.split("/")
    return bool(_TEST_NAME.match(parts[-1])) or (
        any(p in _TEST_DIRS for p in parts[:-1]) and "." in parts[-1]
        and not parts[-1].startswith(("__init__", "conftest")))


def _stem(path: str) -> str:
    name = posixpath.basename(path)
    return name.split(".", 1)[0] if not name.startswith(".") else name


def _subject(test_path: str) -> str:
    """What a test file is named after: test_clamp.py -> clamp, cart.test.js -> cart."""
    name = posixpath.basename(test_path)
    base = name.rsplit(".", 1)[0] if "." in name else name
    return _AFFIX.sub("", base.removesuffix(".test").removesuffix(".spec"))


def counterparts(path: str, tests: Iterable[str]) -> list[str]:
    """The test files conventionally named after ``path`` (nearest directory first)."""
    stem = _stem(path)
    here = posixpath.dirname(path)
    found = [t for t in tests if _subject(t) == stem]
    return sorted(found, key=lambda t: (not posixpath.dirname(t).startswith(here), len(t), t))


def _mentioned(texts: Iterable[str], files: set[str], dirs: set[str],
               tests: Sequence[str]) -> list[str]:
    """Test files named in ``texts``, and those under a directory they name."""
    out: list[str] = []
    for text in texts:
        for token in _TOKEN.findall(text):
            path = posixpath.normpath(token.split("::", 1)[0].rstrip(":,.").removeprefix("./"))
            if path in files and is_test_path(path):
                out.append(path)
            elif path in dirs:
                out += [t for t in tests if t.startswith(path + "/")]
    return out


def assertion_lines(path: str, lines: Sequence[str], limit: int = MAX_LINES) -> list[AssertLine]:
    """The lines of a test file that state what must hold."""
    out = []
    for n, text in enumerate(lines, 1):
        if _ASSERT.search(text):
            out.append(AssertLine(path=path, line=n, text=text.strip()[:MAX_LINE_CHARS]))
            if len(out) >= limit:
                break
    return out


def known_tests(src: FileSource, *, commands: Sequence[str], files: Sequence[str] = (),
                task: str = "", localization: Localization | None = None) -> KnownTests | None:
    """What the acceptance commands test: from ``localization`` when they ran, else as far as
    the plan tells; None with neither."""
    if localization is not None and localization.checks:
        return _from_check(src, localization)
    if not commands:
        return None
    paths = src.paths()
    present = set(paths)
    dirs = {posixpath.dirname(p) for p in paths} - {""}
    dirs |= {d.rsplit("/", i)[0] for d in list(dirs) for i in range(1, d.count("/") + 1)}
    tests = [p for p in paths if is_test_path(p)]
    found = _mentioned([*commands, task, *files], present, dirs, tests)
    for f in files:
        if f in present and not is_test_path(f):
            found += counterparts(f, tests)[:1]
    chosen = list(dict.fromkeys(found))[:MAX_FILES]
    lines: list[AssertLine] = []
    for path in chosen:
        lines += assertion_lines(path, src.lines(path) or [], MAX_LINES - len(lines))
    return KnownTests(source="plan", commands=list(commands), files=chosen, lines=lines)


def _from_check(src: FileSource, loc: Localization) -> KnownTests:
    chosen = list(loc.tests)[:MAX_FILES]
    lines: list[AssertLine] = []
    for path in chosen:
        lines += assertion_lines(path, src.lines(path) or [], MAX_LINES - len(lines))
    if loc.passed:
        report = _t("known_passed")
    else:
        report = "\n".join(render_failure(r, limit=MAX_REPORT_CHARS) for r in loc.reports)
    return KnownTests(source="check", commands=[c.command for c in loc.checks], files=chosen,
                      lines=lines, report=report[:MAX_REPORT_CHARS],
                      suspects=list(loc.suspects)[:MAX_FILES])


def for_explorer(known: KnownTests | None, max_lines: int = 6) -> str:
    """The explorer prompt's paragraph on what is already known ("" when nothing is)."""
    if known is None or not (known.files or known.report):
        return ""
    out = [_t("known_head"),
           _t("known_commands", commands=", ".join(f"`{c}`" for c in known.commands))]
    if known.files:
        out.append(_t("known_files", files=", ".join(known.files)))
        out += [f"  {a.path}:{a.line}: {a.text}" for a in known.lines[:max_lines]]
    if known.report:
        out.append(_t("known_report", report=_indent(known.report[:EXPLORER_REPORT_CHARS])))
    if known.suspects:
        out.append(_t("known_suspects", files=", ".join(known.suspects)))
    out.append(_t("known_tail") + "\n")
    return "\n".join(out)


def for_builder(known: KnownTests | None) -> str:
    """The digest's opening paragraph on the tests ("" when nothing is known). A preflight's
    failure report is left out: the builder's prompt opens with it already."""
    if known is None or not (known.files or known.report):
        return ""
    how = _t("known_how_check" if known.source == "check" else "known_how_plan")
    out = [_t("known_builder", how=how, files=", ".join(known.files) or _t("known_no_files"))]
    out += [f"  {a.path}:{a.line}: {a.text}" for a in known.lines]
    return "\n".join(out)


def _indent(text: str) -> str:
    return "\n".join("    " + line for line in text.strip().splitlines())
