"""Mechanical localisation: from the acceptance commands' failures to the code they point at,
before any model is asked.

Pure functions. ``localize`` takes the commands' outputs (run by the caller, in the sandbox)
and the repository's files, and finds: the failing tests and their errors (``failures.parse``),
the repository files their tracebacks pass through (absolute sandbox paths mapped back to
repository paths), the source files the failing tests import or run, the lines each frame
points at (the whole enclosing function when it is short), and a symbol map of those files
(``repomap``). ``render`` writes it for the planner and the builder; ``pinned`` says whether
the failure already names non-test code, so exploring can be skipped.
"""

from __future__ import annotations

import posixpath
import re
from collections.abc import Callable, Sequence

from pydantic import BaseModel, ConfigDict

from orchestrator.config.prompts import evidence as _t
from orchestrator.localize import failures, repomap
from orchestrator.localize.failures import FailureReport, Frame

WHOLE_SYMBOL_LINES = 40  # a frame's enclosing function up to this size is shown whole
CONTEXT = 3
MAX_SPANS = 8
Reader = Callable[[str], str | None]

_TEST_FILE = re.compile(
    r"(?:^|/)(?:test_[^/]+\.py|[^/]+_test\.py|tests?\.py|[^/]+\.(?:test|spec)\.[cm]?[jt]sx?|"
    r"test[^/]*\.sh|[^/]+_test\.sh)$|(?:^|/)(?:tests?|__tests__|spec)/")
_TOKEN = re.compile(r"[\w./-]+")


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Check(_Frozen):
    """One acceptance command as it ran before any change."""

    command: str
    exit_code: int
    output: str


class Span(_Frozen):
    """Lines of a repository file that a failure points at; ``focus`` is the frame's line."""

    path: str
    start: int
    end: int
    focus: int
    text: tuple[str, ...]
    why: str


class Localization(_Frozen):
    """What the acceptance commands show before anything changed."""

    checks: tuple[Check, ...] = ()
    reports: tuple[FailureReport, ...] = ()
    suspects: tuple[str, ...] = ()  # non-test files: traceback frames first, then imports
    tests: tuple[str, ...] = ()
    spans: tuple[Span, ...] = ()
    repo_map: str = ""
    traced: bool = False  # a traceback frame lies in the repository's non-test code
    unshown: int = 0  # the repository's source files no span shows (not tests)

    @property
    def passed(self) -> bool:
        """Every command exited 0: there is no failure to localise."""
        return bool(self.checks) and all(c.exit_code == 0 for c in self.checks)

    @property
    def pinned(self) -> bool:
        """The failure already names the code to change: it shows source lines, and either its
        traceback runs through them or the repository has no other source file to look in (a
        failure that only asserts on a value, in a project of many files, pins nothing: the
        code behind the value may be anywhere)."""
        return bool(self.suspects) and bool(self.spans) and (self.traced or self.unshown == 0)


def is_test(path: str) -> bool:
    """A test file by the usual naming conventions."""
    return bool(_TEST_FILE.search(path))


def resolve(path: str, files: Sequence[str], root: str = "") -> str | None:
    """The repository path a frame's path names: relative, under ``root`` (the sandbox shows
    the worktree at its own path) or, failing both, the longest repository path it ends with."""
    clean = path.removeprefix("file://")
    if root and clean.startswith(root.rstrip("/") + "/"):
        clean = clean[len(root.rstrip("/")) + 1:]
    clean = posixpath.normpath(clean).removeprefix("./")
    known = set(files)
    if clean in known:
        return clean
    ends = [f for f in files if clean.endswith("/" + f)]
    return max(ends, key=len) if ends else None


def localize(checks: Sequence[Check], *, files: Sequence[str], read: Reader,
             root: str = "", map_limit: int = 1500) -> Localization:
    """Everything the failed ``checks`` show about the repository (``files``, read by ``read``)."""
    failed = [c for c in checks if c.exit_code != 0]
    reports = tuple(failures.parse(c.output, command=c.command, exit_code=c.exit_code)
                    for c in failed)
    if root:
        reports = tuple(failures.relative(r, root) for r in reports)
    frames = [(f, resolve(f.path, files, root)) for r in reports for t in r.failures
              for f in reversed(t.frames)]  # innermost first
    in_repo = [(f, p) for f, p in frames if p is not None]
    tests = _unique([p for _, p in in_repo if is_test(p)]
                    + _named_tests(reports, [c.command for c in failed], files))
    suspects = _unique([p for _, p in in_repo if not is_test(p)])
    imported = [p for p in imports(tests, files, read) if p not in suspects]
    spans = _frame_spans(in_repo, read)
    named = _mentioned(reports) | _words([_line_at(read, p, f.line) for f, p in in_repo])
    spans += _symbol_spans(imported, named, read, room=MAX_SPANS - len(spans))
    # one hop further: what the code the tests call calls, in the files that code imports
    shown = {s.path for s in spans}
    deeper = [p for p in imports([s for s in shown if not is_test(s)], files, read)
              if p not in shown and p not in suspects]
    called = _words([line for s in spans if not is_test(s.path) for line in s.text])
    spans += _symbol_spans(deeper, called, read, room=MAX_SPANS - len(spans), whole_file=False)
    spans += _constants(spans, read, room=MAX_SPANS - len(spans))
    suspects = _unique([*suspects, *(s.path for s in spans if not is_test(s.path))])
    mapped = [*suspects, *tests] or [f for f in files if repomap.supported(f)][:12]
    texts = {p: t for p in mapped if (t := read(p)) is not None}
    shown_paths = {s.path for s in spans[:MAX_SPANS]}
    unshown = [f for f in files if repomap.supported(f) and not is_test(f)
               and f not in shown_paths and (read(f) or "").strip()]
    return Localization(checks=tuple(checks), reports=reports, suspects=tuple(suspects),
                        tests=tuple(tests), spans=tuple(spans[:MAX_SPANS]),
                        repo_map=repomap.render_map(texts, limit=map_limit),
                        traced=any(not is_test(p) for _, p in in_repo), unshown=len(unshown))


def _unique(items: Sequence[str]) -> list[str]:
    return list(dict.fromkeys(items))


def _named_tests(reports: Sequence[FailureReport], commands: Sequence[str],
                 files: Sequence[str]) -> list[str]:
    """Test files named by failing test ids (``path::test``) or by the commands themselves."""
    known = set(files)
    names = [t.name.split("::", 1)[0] for r in reports for t in r.failures]
    names += [tok for c in commands for tok in _TOKEN.findall(c)]
    return [n.removeprefix("./") for n in names if n.removeprefix("./") in known
            and is_test(n.removeprefix("./"))]


def imports(sources: Sequence[str], files: Sequence[str], read: Reader) -> list[str]:
    """Non-test files that ``sources`` name: ``from cart import``, ``require('./cart')``,
    ``bash max.sh``: any token that is a file's path or module name."""
    out: list[str] = []
    for test in sources:
        text = read(test) or ""
        tokens = set(_TOKEN.findall(text))
        here = posixpath.dirname(test)
        for f in files:
            if is_test(f) or f == test:
                continue
            stem = posixpath.splitext(f)[0]
            rel_stem, rel = (posixpath.relpath(p, here or ".") for p in (stem, f))
            names = {f, posixpath.basename(f), stem, stem.replace("/", "."), rel_stem, rel,
                     "./" + rel_stem, "./" + rel}
            if names & tokens or posixpath.basename(stem) in tokens and f.endswith(".py"):
                out.append(f)
    return _unique(out)


def _mentioned(reports: Sequence[FailureReport]) -> set[str]:
    """Identifiers in the failing tests' errors and the code lines their frames show."""
    return _words([text for r in reports for t in r.failures
                   for text in [*t.error, *(f.code for f in t.frames), t.name]])


def _words(texts: Sequence[str]) -> set[str]:
    return {w for text in texts for w in re.findall(r"[A-Za-z_$][\w$]*", text)}


def _line_at(read: Reader, path: str, line: int) -> str:
    lines = (read(path) or "").splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else ""


def _frame_spans(frames: Sequence[tuple[Frame, str | None]], read: Reader) -> list[Span]:
    """The lines each frame points at: source frames first (where it failed), then tests."""
    spans: list[Span] = []
    ordered = sorted(frames, key=lambda fp: is_test(fp[1] or ""))
    for frame, path in ordered:
        if path is None or any(s.path == path and s.start <= frame.line <= s.end for s in spans):
            continue
        text = read(path)
        if text is None:
            continue
        why = "the test, where it failed" if is_test(path) else "in the traceback"
        spans.append(_span(path, text, frame.line, why, whole=not is_test(path)))
        if len(spans) >= MAX_SPANS:
            break
    return spans


def _symbol_spans(paths: Sequence[str], names: set[str], read: Reader, room: int, *,
                  whole_file: bool = True) -> list[Span]:
    """For files the tests import: the definitions the failure names (or the whole small file)."""
    spans: list[Span] = []
    for path in paths:
        text = read(path)
        if text is None or room <= len(spans):
            continue
        syms = [s for s in repomap.symbols(path, text) if s.name in names and s.kind != "class"]
        lines = text.splitlines()
        if not syms and whole_file and len(lines) <= WHOLE_SYMBOL_LINES:
            spans.append(Span(path=path, start=1, end=len(lines), focus=1, text=tuple(lines),
                              why=_t("why_imported")))
        for s in syms[: room - len(spans)]:
            end = min(s.end_line, s.line + WHOLE_SYMBOL_LINES - 1)
            spans.append(Span(path=path, start=s.line, end=end, focus=s.line,
                              text=tuple(lines[s.line - 1:end]),
                              why=_t("why_named", name=s.name)))
    return spans


_CONSTANT = re.compile(r"^(?:const |let |var |export )?([A-Z_][A-Z0-9_]*)\s*=")


def _constants(spans: Sequence[Span], read: Reader, room: int) -> list[Span]:
    """Module-level constants (``DATE_FORMAT = ...``) that the shown source code uses: a bug
    often sits in one, outside every function."""
    out: list[Span] = []
    for span in spans:
        if is_test(span.path) or room <= len(out):
            continue
        used = _words(list(span.text))
        lines = (read(span.path) or "").splitlines()
        for n, line in enumerate(lines, 1):
            m = _CONSTANT.match(line)
            if m and m.group(1) in used and not span.start <= n <= span.end \
                    and not any(o.path == span.path and o.start == n for o in out):
                out.append(Span(path=span.path, start=n, end=n, focus=n, text=(line,),
                                why=_t("why_constant", name=m.group(1))))
    return out[:room]


def _span(path: str, text: str, line: int, why: str, *, whole: bool) -> Span:
    lines = text.splitlines()
    sym = repomap.enclosing(repomap.symbols(path, text), line) if whole else None
    if sym is not None and sym.end_line - sym.line < WHOLE_SYMBOL_LINES:
        start, end = sym.line, sym.end_line
        why = _t("why_in", why=why, name=sym.name)
    else:
        start, end = max(1, line - CONTEXT), min(len(lines), line + CONTEXT)
    return Span(path=path, start=start, end=end, focus=line,
                text=tuple(lines[start - 1:end]), why=why)


def render(loc: Localization, *, limit: int = 3500) -> str:
    """What the failing acceptance commands show, for the planner and the builder."""
    if not loc.checks:
        return ""
    if loc.passed:
        return _t("localized_passed")
    parts = [_t("localized_head")]
    parts += [failures.render(r, limit=1200) for r in loc.reports]
    if loc.suspects:
        parts.append(_t("localized_suspects", files=", ".join(loc.suspects)))
    for s in loc.spans:
        body = "\n".join(f"{n:>4}{'>' if n == s.focus else '|'} {t}"
                         for n, t in enumerate(s.text, s.start))
        parts.append(_t("localized_span", path=s.path, start=s.start, end=s.end, why=s.why,
                        body=body))
    if loc.repo_map:
        parts.append(_t("localized_map", map=loc.repo_map))
    text = "\n\n".join(parts)
    cut = _t("localized_cut")
    return text if len(text) <= limit else text[: limit - 20].rsplit("\n", 1)[0] + "\n" + cut
