"""Citing by reference: an explorer cites lines it was shown, and the quote is copied for it.

A small model misquotes and invents places, so it is asked for less: a citation names a path and
a line range that its session was shown (a candidate window, ``read``'s lines, ``search``'s
matches; ``tools/shown.py``), or a window by its id (``W2``), and may leave the quote empty. At
``submit`` (``Cited.check``, the session's submission check):

- a citation of a window id becomes that window's path and lines;
- a path or lines the session was never shown are refused, naming the nearest paths it was
  shown and the nearest real files, so the model can correct itself in the same session; after
  ``MAX_REFUSALS`` refusals the submission is taken as it is;
- anything that is no repository path at all (a sentence, kilobytes, a NUL byte, an absolute
  path, ``..``) is refused the same way, never an error;
- a missing or misquoted quote is copied from the lines shown: the line of the cited range that
  shares a name with the claim (``support.py``), so the quote is the file's own text.

After the session (``Cited.screen``), citations of places never shown are taken out of the
findings, each claim left without one recorded as dropped (``path`` when no such file exists,
``unchecked`` when it does), so no invented path reaches verification. Verification then stays exactly as strict (``verify.py``).
"""

from __future__ import annotations

import difflib
import posixpath
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel

from orchestrator.config.prompts import text as _t
from orchestrator.evidence.support import claim_terms, marked_names, quote_names, shared_name
from orchestrator.localize.candidates import in_docstring
from orchestrator.state import Citation, ClaimVerdict, Findings
from orchestrator.tools.shown import shown as shown_lines

MAX_REFUSALS = 2  # submissions refused for their citations before one is taken as it is
MAX_PATH = 300  # characters: a longer "path" is a sentence
MAX_SPAN = 40  # lines: a wider citation is narrowed to the lines that back the claim
_WINDOW_ID = re.compile(r"^\[?(W\d+)\]?$")
_TEXT_CHARS = 300
PROSE_WEIGHT = 0.4
_PROSE = ("#", "//", "/*", "*", '"""', "'''", "--")  # a comment or docstring

Shown = dict[tuple[str, int], tuple[str, str]]


def clean_path(raw: str) -> tuple[str, str]:
    """``(path, "")`` when ``raw`` can be a repository-relative path, else ``("", why not)``."""
    path = raw.strip().strip("`'\"")
    if not path:
        return "", "an empty path"
    if len(path) > MAX_PATH or "\n" in path or "\0" in path or any(ord(c) < 32 for c in path):
        return "", "not a file path (too long, or control characters in it)"
    path = path.removeprefix("./")
    if posixpath.isabs(path) or path.startswith("~"):
        return "", "an absolute path: cite the repository-relative path"
    if ".." in path.split("/"):
        return "", "a path with '..': cite the repository-relative path"
    return posixpath.normpath(path), ""


@dataclass
class Cited:
    """One explorer session's citations: checked at submit against what it was shown."""

    files: Callable[[], Sequence[str]]  # the repository's files, for "did you mean"
    # answer first: the claims of a first submission that verify (None: no such check); a
    # first answer of which none does is refused once, and the session's tools open
    verify: Callable[[Findings], tuple[int, list[str]]] | None = None
    refusals: int = 0
    answered: bool = False
    events: list[str] = field(default_factory=list)  # what was refused or filled, for the report

    def check(self, payload: BaseModel, messages: Sequence[Mapping[str, Any]]
              ) -> tuple[BaseModel | None, str]:
        """The submission to accept (quotes filled, window ids resolved), or None and what to
        tell the model."""
        if not isinstance(payload, Findings):
            return payload, ""
        seen = shown_lines(messages)
        windows = _windows(seen)
        claims, problems = [], []
        for i, claim in enumerate(payload.claims, 1):
            cites = []
            for c in claim.citations:
                fixed, problem = self._cite(claim.text, c, seen, windows)
                cites.append(fixed)
                if problem:
                    problems.append(f"claim {i}: {problem}")
                elif (code := self._code_for(claim.text, fixed, seen)) is not None \
                        and code not in claim.citations:
                    cites.append(code)
            claims.append(claim.model_copy(update={"citations": cites}))
        unique = list({(c.text, tuple(c.citations)): c for c in reversed(claims)}.values())[::-1]
        checked = payload.model_copy(update={"claims": unique})  # a small model repeats itself
        if problems and self.refusals < MAX_REFUSALS:
            self.refusals += 1
            self.events.append(f"refused ({len(problems)}): " + "; ".join(problems)[:500])
            return None, _t("session", "citations_refused", problems="\n".join(
                f"- {p}" for p in problems[:8]), shown=_shown_files(seen))
        first, self.answered = not self.answered, True
        if first and self.verify is not None:
            verified, reasons = self.verify(checked)
            if verified == 0:
                self.events.append("first answer backed by nothing: the tools open")
                return None, _t("session", "answer_unbacked", reasons="\n".join(
                    f"- {r}" for r in reasons[:6]) or "- no claim cited anything")
        return checked, ""

    def _cite(self, claim: str, c: Citation, seen: Shown,
              windows: Mapping[str, tuple[str, list[int]]]) -> tuple[Citation, str]:
        """The citation as it will be checked, and what is wrong with it ("" if nothing)."""
        window = _WINDOW_ID.match(c.path.strip())
        if window and window.group(1) in windows:
            path, numbers = windows[window.group(1)]
            inside = [n for n in numbers if c.start_line <= n <= c.end_line] or numbers
            c = c.model_copy(update={"path": path, "start_line": min(inside),
                                     "end_line": max(inside)})
        path, why = clean_path(c.path)
        if why:
            return c, f"{_brief(c.path)} is {why}"
        lines = sorted(n for (p, n) in seen if p == path)
        if not lines:
            return c, (f"{path} was never shown in this session ({self._nearest(path, seen)}); "
                       "cite a file you read or were shown")
        start, end = min(c.start_line, c.end_line), max(c.start_line, c.end_line)
        inside = [n for n in lines if start <= n <= end]
        if not inside:
            return c, (f"lines {start}-{end} of {path} were never shown; shown: "
                       f"{_ranges(lines)}")
        return self._quoted(claim, c.model_copy(update={"path": path}), inside, seen), ""

    def _quoted(self, claim: str, c: Citation, inside: list[int], seen: Shown) -> Citation:
        """``c`` with a quote from the lines shown: its own when it is there, else the line that
        shares a name with the claim (the most of its words), narrowed to that line."""
        shown_text = "\n".join(seen[(c.path, n)][0] for n in inside)
        quote = " ".join(c.quote.split())
        if quote and quote in " ".join(shown_text.split()) and c.end_line - c.start_line < MAX_SPAN:
            return c
        prose = _prose(seen, c.path)
        best = max(inside, key=lambda n: _backing(claim, seen[(c.path, n)][0], n in prose))
        if _backing(claim, seen[(c.path, best)][0]) <= 0 and c.end_line - c.start_line < MAX_SPAN:
            if quote:
                return c  # nothing better: verification judges the model's own quote
            best = inside[0]
        self.events.append(f"quote copied from {c.path}:{best}")
        return c.model_copy(update={"start_line": best, "end_line": best,
                                    "quote": seen[(c.path, best)][0].strip()})

    def _code_for(self, claim: str, c: Citation, seen: Shown) -> Citation | None:
        """The code line of the same shown window that backs ``claim``, when ``c`` quotes a
        docstring or comment (prose restates the code; the code is the evidence) or does not
        show a name the claim marks (`` `_clamp` `` cited at its class's header line): added
        beside the model's citation, never instead of it. None when no other line does."""
        path, start, end = c.path, min(c.start_line, c.end_line), max(c.start_line, c.end_line)
        window = next((seen[(path, n)][1] for n in range(start, end + 1)
                       if (path, n) in seen and seen[(path, n)][1]), "")
        if not window:
            return None
        lines = sorted(n for (p, n), (_, w) in seen.items() if p == path and w == window)
        docs = _prose(seen, path)
        prose = {n for n in lines if n in docs or _is_prose(seen[(path, n)][0])}
        cited = [n for n in lines if start <= n <= end]
        quoted = "\n".join(seen[(path, n)][0] for n in cited)
        missing = [m.lower() for m in marked_names(claim) if m.lower() not in quoted.lower()]
        code = [n for n in lines if n not in prose and not start <= n <= end]
        naming = [n for n in code if any(m in seen[(path, n)][0].lower() for m in missing)]
        if naming:  # the line that shows what the claim names and its quote does not
            code = naming
        elif not (cited and prose.issuperset(cited)):
            return None
        best = max(code, key=lambda n: _backing(claim, seen[(path, n)][0]), default=None)
        if best is None or _backing(claim, seen[(path, best)][0]) <= 0:
            return None
        self.events.append(f"code line added for a prose quote: {path}:{best}")
        return Citation(path=path, start_line=best, end_line=best,
                        quote=seen[(path, best)][0].strip())

    def _nearest(self, path: str, seen: Shown) -> str:
        shown = sorted({p for p, _ in seen})
        close = difflib.get_close_matches(path, shown, n=3, cutoff=0.3)
        files = list(self.files())
        real = [f for f in difflib.get_close_matches(path, files, n=3, cutoff=0.5)
                if f not in close]
        by_name = {f.rsplit("/", 1)[-1]: f for f in files}
        real += [by_name[n] for n in difflib.get_close_matches(path.rsplit("/", 1)[-1],
                                                                list(by_name), n=2, cutoff=0.6)
                 if by_name[n] not in real and by_name[n] not in close]
        said = []
        if close:
            said.append("shown: " + ", ".join(close))
        if real:
            said.append("files with a similar name: " + ", ".join(real[:3]))
        return "; ".join(said) or "no file of that name"

    def screen(self, findings: Findings, messages: Sequence[Mapping[str, Any]]
               ) -> tuple[Findings, list[ClaimVerdict]]:
        """``findings`` without citations of places the session was never shown; a claim left
        without any is dropped here (``unchecked``), with the reason."""
        seen = shown_lines(messages)
        kept, dropped = [], []
        for i, claim in enumerate(findings.claims, 1):
            cites = [c for c in claim.citations if _was_shown(c, seen)]
            if cites or not claim.citations:
                kept.append(claim.model_copy(update={"citations": cites}))
                continue
            where = ", ".join(sorted({_brief(c.path).strip("'\"") for c in claim.citations}))[:200]
            files = set(self.files())
            invented = all(clean_path(c.path)[0] not in files for c in claim.citations)
            dropped.append(ClaimVerdict(
                index=i, text=claim.text[:_TEXT_CHARS], status="dropped",
                kind="path" if invented else "unchecked",
                reason=(f"no such file: {where} (never shown)" if invented
                        else f"cites what the explorer was never shown: {where}")))
        return findings.model_copy(update={"claims": kept}), dropped


def _was_shown(c: Citation, seen: Shown) -> bool:
    path, why = clean_path(c.path)
    if why:
        return False
    start, end = min(c.start_line, c.end_line), max(c.start_line, c.end_line)
    return any(p == path and start <= n <= end for p, n in seen)


def _windows(seen: Shown) -> dict[str, tuple[str, list[int]]]:
    out: dict[str, tuple[str, list[int]]] = {}
    for (path, line), (_, window) in seen.items():
        if window:
            out.setdefault(window, (path, []))[1].append(line)
    return out


def _backing(claim: str, line: str, prose: bool = False) -> float:
    """How well a shown line backs a claim: 0 if it shares no name with it, else how many of
    the claim's words its names hold; a comment or docstring line counts for less than code
    that shares a name (the answer is the code; prose about it restates it)."""
    if shared_name(claim, line) is None:
        return 0
    terms = claim_terms(claim)
    names = sum(name.lower() in terms for name in quote_names(line))
    # between lines holding the same names: the one holding more of the claim's other words
    # ("returns" and a `return` line)
    words = {w[:5] for w in re.findall(r"[a-z]{3,}", line.lower())}
    said = sum(w[:5] in words for w in set(re.findall(r"[a-z]{3,}", claim.lower())))
    score = 1 + names + 0.1 * said
    return score * PROSE_WEIGHT if prose or _is_prose(line) else score


def _is_prose(line: str) -> bool:
    return line.strip().startswith(_PROSE)


def _prose(seen: Shown, path: str) -> set[int]:
    """The shown lines of ``path`` inside a docstring or a block comment, as far as the shown
    lines tell (a triple quote opens and closes one)."""
    numbers = sorted(n for (p, n) in seen if p == path)
    return {numbers[i] for i in in_docstring([seen[(path, n)][0] for n in numbers], numbers)}


def _ranges(lines: list[int]) -> str:
    spans: list[list[int]] = []
    for n in lines:
        if spans and n == spans[-1][1] + 1:
            spans[-1][1] = n
        else:
            spans.append([n, n])
    shown = [f"{a}-{b}" if a != b else str(a) for a, b in spans[:8]]
    return ", ".join(shown) + (", ..." if len(spans) > 8 else "")


def _shown_files(seen: Shown) -> str:
    paths = list(dict.fromkeys(p for p, _ in seen))
    return ", ".join(paths[:10]) + (" ..." if len(paths) > 10 else "") if paths else "none"


def _brief(path: str) -> str:
    clean = " ".join(path.split())
    return repr(clean if len(clean) <= 60 else clean[:60] + "...")
