"""Mechanical citation checks: a claim survives only if one of its citations exists and supports it.

A citation *exists* when its file is there (at the run's commit, or in the working tree), its
lines are inside the file and its quote is in them (whitespace, the tools' line-number prefixes
and leading or trailing ellipses forgiven). It *supports* its claim when the quote is informative
and shares a name with the claim (``support.py``). A claim counts when one citation does both; a
verified claim whose supporting citations all sit in test files the builder already has adds
nothing. Every claim gets a ``ClaimVerdict`` with its reason, which the run's report keeps.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from orchestrator.evidence.sources import (
    CachedSource,
    DirSource,
    FileLines,
    FileSource,
    GitCommitSource,
    LineCounts,
    normalize_ws,
)
from orchestrator.evidence.support import marked_names, shared_name, uninformative
from orchestrator.state import (
    Citation,
    CitationVerdict,
    Claim,
    ClaimVerdict,
    DropKind,
    Findings,
    KnownTests,
)

__all__ = [
    "DirSource", "FileSource", "GitCommitSource", "LineCounts", "Verified", "check_citation",
    "judge_citation", "locate_quote", "normalize_ws", "verify_findings",
]

_READ_PREFIX = re.compile(r"(?m)^[ \t]*\d+[ \t]*\|[ \t]?")  # "  12| " from the read tool
_SEARCH_PREFIX = re.compile(r"(?m)^[^\s:]+:\d+[:-][ \t]?")  # "src/a.py:12: " from search
_ELLIPSES = ("...", "…")
# How far a failing citation got: a claim is dropped for the furthest of its citations.
_STAGE: dict[DropKind, int] = {"path": 0, "quote": 1, "trivial": 2, "unrelated": 3}
_TEXT_CHARS = 300
_CITES = 20  # citations checked per claim; a claim rarely needs more than two


@dataclass(frozen=True)
class Verified:
    """The claims that survived, with counts, a verdict per claim, and the reasons as lines."""

    claims: list[Claim]
    submitted: int
    verified: int
    dropped: int
    reasons: list[str]
    adds_nothing: int = 0
    verdicts: list[ClaimVerdict] = field(default_factory=list)

    @property
    def drops(self) -> dict[str, int]:
        """Drop kind -> number of claims dropped for it."""
        out: dict[str, int] = {}
        for v in self.verdicts:
            if v.status == "dropped" and v.kind:
                out[v.kind] = out.get(v.kind, 0) + 1
        return out


def _file(src: FileSource, path: str) -> FileLines | None:
    if isinstance(src, CachedSource):
        return src.file(path)
    lines = src.lines(path)
    return None if lines is None else FileLines(lines)


def _exists(src: FileSource, c: Citation) -> tuple[DropKind | None, str, str]:
    """(None, "", the quote as matched) when the quote is in the cited lines, else (kind, why, "")."""
    f = _file(src, c.path)
    if f is None:
        return "path", f"no such file: {c.path}", ""
    if c.start_line > c.end_line:
        return "path", "start_line > end_line", ""
    if c.start_line < 1 or c.end_line > len(f.lines):
        return "path", f"lines {c.start_line}-{c.end_line} outside file ({len(f.lines)} lines)", ""
    haystack = f.text(c.start_line, c.end_line)
    empty = True
    for norm, raw in _quote_forms(c.quote):
        if norm and norm in haystack:
            return None, "", raw
        empty = empty and not norm
    where = f"{c.path}:{c.start_line}-{c.end_line}"
    return "quote", (f"empty quote for {where}" if empty else f"quote not found in {where}"), ""


def _unrelated(claim: str, quote: str) -> str:
    marked = [m for m in marked_names(claim) if m.lower() not in quote.lower()]
    if marked and len(marked) == len(marked_names(claim)):
        names = ", ".join(f"`{m}`" for m in marked[:3])
        return f"the claim names {names}, which its quote does not show: {_short(quote)}"
    return f"quote shares no name with the claim: {_short(quote)}"


def check_citation(src: FileSource, c: Citation) -> str | None:
    """None if the quote is in ``c.path`` lines ``start_line``..``end_line``, else why not."""
    kind, why, _ = _exists(src, c)
    return None if kind is None else why


def judge_citation(src: FileSource, claim: str, c: Citation,
                   line_count: Callable[[str], int] | None = None) -> CitationVerdict:
    """Whether ``c`` exists and supports ``claim``; ``line_count`` gives a line's repository count."""
    kind, why, matched = _exists(src, c)
    if kind is None:
        trivial = uninformative(matched, line_count)
        if trivial is not None:
            kind, why = "trivial", f"{trivial}: {_short(matched)}"
        elif shared_name(claim, matched) is None:
            kind, why = "unrelated", _unrelated(claim, matched)
    return CitationVerdict(path=c.path, start_line=c.start_line, end_line=c.end_line, kind=kind,
                           reason=why)


def verify_findings(
    src: FileSource,
    findings: Findings,
    *,
    tool_calls: int,
    line_counts: LineCounts | None = None,
    known: KnownTests | None = None,
    screened: bool = False,
) -> Verified:
    """A verdict per claim; the verified claims keep only their supporting citations.

    Without ``screened``, an explorer that made no tool call gets nothing accepted (it saw
    nothing); ``screened`` findings had every citation checked against what their explorer was
    shown (``cite.Cited.screen``), which covers that case and candidates shown before any call.
    """
    submitted = len(findings.claims)
    if tool_calls == 0 and not screened:
        unchecked = [ClaimVerdict(index=i, text=cl.text[:_TEXT_CHARS], status="dropped",
                                  kind="unchecked", reason="explorer made no tool call")
                     for i, cl in enumerate(findings.claims, 1)]
        return Verified([], submitted, 0, submitted, ["explorer made no tool call"],
                        verdicts=unchecked)
    count = _line_count(src, line_counts)
    kept: list[Claim] = []
    verdicts: list[ClaimVerdict] = []
    for i, claim in enumerate(findings.claims, 1):
        checks = [judge_citation(src, claim.text, c, count) for c in claim.citations[:_CITES]]
        verdict = _claim_verdict(i, claim, checks, known)
        verdicts.append(verdict)
        if verdict.status == "verified":
            good = [c for c, v in zip(claim.citations, checks, strict=False) if v.kind is None]
            kept.append(claim if len(good) == len(claim.citations)
                        else claim.model_copy(update={"citations": good}))
    dropped = sum(v.status == "dropped" for v in verdicts)
    useless = sum(v.status == "adds_nothing" for v in verdicts)
    return Verified(kept, submitted, len(kept), dropped, _reason_lines(verdicts),
                    adds_nothing=useless, verdicts=verdicts)


def _line_count(src: FileSource, counts: LineCounts | None) -> Callable[[str], int] | None:
    if counts is None:
        return None
    return lambda line: counts.of(src).get(line, 0)  # counted on first need, then shared


def _claim_verdict(i: int, claim: Claim, checks: list[CitationVerdict],
                   known: KnownTests | None) -> ClaimVerdict:
    text = claim.text[:_TEXT_CHARS]
    good = [v for v in checks if v.kind is None]
    if good and known is not None and all(known.covers(v.path) for v in good):
        files = ", ".join(sorted({v.path for v in good}))
        return ClaimVerdict(index=i, text=text, status="adds_nothing", citations=checks,
                            reason=f"only restates {files}, which the builder already has")
    if good:
        return ClaimVerdict(index=i, text=text, status="verified", citations=checks)
    if not checks:
        return ClaimVerdict(index=i, text=text, status="dropped", kind="uncited",
                            reason="no citation")
    best = max(checks, key=lambda v: _STAGE[v.kind] if v.kind else -1)
    return ClaimVerdict(index=i, text=text, status="dropped", kind=best.kind, reason=best.reason,
                        citations=checks)


def _reason_lines(verdicts: list[ClaimVerdict]) -> list[str]:
    lines = []
    for v in verdicts:
        if v.status == "verified":
            lines += [f"claim {v.index}: {c.reason}" for c in v.citations if c.kind is not None]
        else:
            label = "adds nothing" if v.status == "adds_nothing" else f"dropped ({v.kind})"
            lines.append(f"claim {v.index} {label}: {v.reason}")
    return lines


def locate_quote(src: FileSource, c: Citation) -> tuple[int, int] | None:
    """The narrowest lines inside the citation that hold its quote, or None if it is not there."""
    f = _file(src, c.path)
    if f is None or c.start_line < 1 or c.end_line > len(f.lines) or c.start_line > c.end_line:
        return None
    forms = [norm for norm, _ in _quote_forms(c.quote) if norm]
    # a quote's lines are usually file lines; a quote written on fewer lines may span up to 40
    widest = min(c.end_line - c.start_line + 1, max(40, c.quote.strip().count("\n") + 2))
    for size in range(1, widest + 1):
        for first in range(c.start_line, c.end_line - size + 2):
            text = f.text(first, first + size - 1)
            if any(q in text for q in forms):
                return first, first + size - 1
    return None


def _short(quote: str, limit: int = 80) -> str:
    text = normalize_ws(quote)
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _quote_forms(quote: str) -> Iterator[tuple[str, str]]:
    """(normalised, raw) forms of a quote to look for: as given, then without tool prefixes."""
    raw = _strip_ellipses(quote)
    yield normalize_ws(raw), raw
    # Models often paste tool output with its numbering; strip it and try again.
    for prefix in (_READ_PREFIX, _SEARCH_PREFIX):
        stripped = prefix.sub("", quote)
        if stripped != quote:
            raw = _strip_ellipses(stripped)
            yield normalize_ws(raw), raw


def _strip_ellipses(s: str) -> str:
    s = s.strip()
    while True:
        before = s
        for e in _ELLIPSES:
            s = s.removeprefix(e).removesuffix(e).strip()
        if s == before:
            return s
