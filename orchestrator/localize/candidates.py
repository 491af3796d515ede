"""Retrieval's candidates: what a hit becomes, and what it is worth.

A hit becomes a candidate window: the outermost short definition around it (a small class with
its methods), else the innermost one, else the lines around it, stopping where a definition or a
module constant's table begins (a hit on any line of ``RATES = { ... }`` shows the whole table).
A long candidate shows its first line and the lines around its hits. Its worth is the weight of
the question's terms it holds (rare ones count more: ``weights``), more when it holds more of
them, more again when it defines what the question names (``definition_bonus``); tests and docs
count half, lines outside every definition of a parsed file less than code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from orchestrator.localize import repomap
from orchestrator.localize.localization import is_test
from orchestrator.localize.terms import Term, names_part
from orchestrator.localize.texts import Lines
from orchestrator.tools.search import LINE_CUT, Match

COMMON = 300  # a term with this many matches is common: it still counts, weakly

SHOWN_LINES = 16  # a window shows at most this many lines


LOOSE_LINES = 0.6  # weight of hits outside every definition of a parsed file


CONSTANT_LINES = 60  # lines a constant's table may run over and still be one candidate


SMALL_DEFINITION = 30  # lines: a class this short is one candidate with its methods


PLAIN_AROUND = 3  # lines each side of a hit in a file without a symbol map


PROSE_SHOWN = 0.4  # a docstring or comment line's terms count this much when choosing lines


NESTED_WHOLE = 8  # lines: a definition this short inside a long candidate is shown whole


DEFINITION = re.compile(r"\s*(?:async\s+def|def|class|function)\s+[A-Za-z_$]")


_PROSE_START = ("#", "//", "/*", "* ", "--")


CONSTANT = re.compile(r"^(?:export\s+)?(?:const\s+)?([A-Z][A-Z0-9_]*)\s*[:=][^=]")


TESTY = re.compile(r"(^|/)(tests?|spec|__tests__)/|(^|/)test_[^/]*$|_test\.\w+$|\.(test|spec)\.\w+$")


DOCS = (".md", ".rst", ".txt", ".adoc")


def term_weights(found: dict[Term, list[Match]]) -> dict[Term, float]:
    """Each found term's weight: how strongly it names a thing, times how rare it is."""
    out = {}
    for term, hits in found.items():
        if not hits:
            continue
        # how rare a term is, counted in the code: tests and docs repeat the code's names
        files = len({m.path for m in hits if file_factor(m.path) == 1.0}) or 1
        common = len(hits) >= COMMON
        out[term] = term.weight / math.log2(2 + files) * (0.5 if common else 1.0)
    return out


def unit_of(line: int, syms: Sequence[repomap.Symbol], total: int) -> tuple[int, int, str]:
    """The candidate a hit belongs to: the outermost definition around it that is short (a
    small class with its methods), else the innermost one, else the lines around the hit."""
    around = [s for s in syms if s.line <= line <= s.end_line]
    if not around:
        return max(1, line - PLAIN_AROUND), min(total, line + PLAIN_AROUND), ""
    small = [s for s in around if s.end_line - s.line + 1 <= SMALL_DEFINITION]
    inner = (max(small, key=lambda s: s.end_line - s.line) if small
             else min(around, key=lambda s: s.end_line - s.line))
    owner = f"{inner.parent}." if inner.parent else ""
    return inner.line, inner.end_line, f"{inner.kind} {owner}{inner.name}"


def candidates_of(lines: Lines, syms: Sequence[repomap.Symbol], hit_lines: Sequence[int]
           ) -> dict[tuple[int, int, str], list[int]]:
    """The candidates of one file, each with its hit lines: definitions, constants' tables,
    and the lines around the other hits (stopping where a definition or a table begins)."""
    units: dict[tuple[int, int, str], list[int]] = {}
    plain: list[int] = []
    for line in hit_lines:
        table = constant_at(lines, line) if not repomap.enclosing(syms, line) else None
        unit = table or unit_of(line, syms, len(lines))
        if unit[2]:
            units.setdefault(unit, []).append(line)
        else:
            plain.append(line)
    taken = {n for start, end, _ in units for n in range(start, end + 1)}
    for cluster in clusters(plain):
        start = max(1, cluster[0] - PLAIN_AROUND)
        end = min(len(lines), cluster[-1] + PLAIN_AROUND)
        before = [n for n in range(start, cluster[0]) if n in taken]
        after = [n for n in range(cluster[-1] + 1, end + 1) if n in taken]
        start, end = (max(before) + 1 if before else start), (min(after) - 1 if after else end)
        if start <= end and not any(n in taken for n in cluster):
            units[(start, end, "")] = cluster
    return units


def constant_at(lines: Lines, line: int) -> tuple[int, int, str] | None:
    """The module constant whose definition holds ``line``: its first line, or any line of the
    table or list it opens (``RATES = {`` ... ``}``), as the candidate ``constant NAME``."""
    for start in range(line, max(0, line - CONSTANT_LINES), -1):
        m = CONSTANT.match(lines[start - 1])
        if m is None:
            if start < line and not lines[start - 1][:1].isspace() \
                    and lines[start - 1].strip() and lines[start - 1][:1] not in ")]}":
                return None  # another top-level statement in between
            continue
        end = literal_end(lines, start)
        return (start, end, f"constant {m.group(1)}") if end >= line else None
    return None


def literal_end(lines: Lines, start: int) -> int:
    """The last line of the literal a constant's definition opens (its own line if none)."""
    depth = 0
    for n in range(start, min(len(lines), start + CONSTANT_LINES) + 1):
        text = re.sub(r"([\"'])(?:\\.|(?!\1).)*\1|#.*$", "", lines[n - 1])  # strings, comments
        depth += sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
        if depth <= 0:
            return n
    return start


def clusters(lines: list[int]) -> list[list[int]]:
    """Hit lines that lie within ``2 * PLAIN_AROUND`` of each other, grouped."""
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n - out[-1][-1] <= 2 * PLAIN_AROUND:
            out[-1].append(n)
        else:
            out.append([n])
    return out


def shown_lines(lines: Lines, start: int, end: int, hits: Sequence[int],
                weights: dict[Term, float], syms: Sequence[repomap.Symbol] = ()
                ) -> tuple[tuple[int, str], ...]:
    """The lines of a candidate to show: all of a short one; else its first line and the
    lines around its hits, code before prose (a docstring repeats the question's words, the
    code answers it) and the lines holding the most terms first, within ``SHOWN_LINES``. A
    short definition inside it whose first line is a hit is shown whole (a method's body)."""
    end = min(end, len(lines))
    if end - start + 1 <= SHOWN_LINES:
        return tuple((n, cut_around(lines[n - 1], weights)) for n in range(start, end + 1))
    prose = prose_lines(lines, start, end)

    def value(n: int) -> float:
        held = sum(w for t, w in weights.items() if t.found_in(lines[n - 1]))
        return held * (PROSE_SHOWN if n in prose else 1.0)

    nested = {s.line: s.end_line for s in syms
              if start < s.line and s.end_line <= end and s.end_line - s.line < NESTED_WHOLE}
    keep = {start}
    for n in sorted(set(hits), key=lambda n: (-value(n), n)):
        last = nested.get(n)
        around = (range(n, last + 1) if last is not None
                  else [k for k in (n - 1, n, n + 1) if start <= k <= end])
        if len(keep | set(around)) > SHOWN_LINES:
            continue
        keep.update(around)
    return tuple((n, cut_around(lines[n - 1], weights)) for n in sorted(keep))


def prose_lines(lines: Lines, start: int, end: int) -> set[int]:
    """The lines of ``start..end`` that are comments or inside a docstring (triple quotes)."""
    numbers = range(start, end + 1)
    texts = [lines[n - 1] for n in numbers]
    docs = in_docstring(texts)
    return {n for i, n in enumerate(numbers)
            if i in docs or texts[i].strip().startswith(_PROSE_START)}


def in_docstring(texts: Sequence[str], numbers: Sequence[int] = ()) -> set[int]:
    """The indices of ``texts`` (consecutive lines, as far as they tell) inside a docstring or
    on a triple-quote line: one opens and the next closes it. With the lines' ``numbers``, a
    definition after a gap starts outside (the docstring closed in the lines not shown)."""
    out: set[int] = set()
    inside = False
    for i, raw in enumerate(texts):
        if inside and numbers and i and numbers[i] != numbers[i - 1] + 1 \
                and DEFINITION.match(raw):
            inside = False
        quotes = raw.count('"""') + raw.count("'''")
        if inside or quotes:
            out.add(i)
        if quotes % 2:
            inside = not inside
    return out


def definition_bonus(symbol: str, weights: dict[Term, float]) -> float:
    """A candidate that defines what the question names: the name itself, or its parts (the
    class a method belongs to counts half)."""
    if not symbol:
        return 0.0
    qualified = symbol.split(" ", 1)[-1]
    owner, _, name = qualified.rpartition(".")
    bonus = 0.0
    for term, weight in weights.items():
        if term.pattern == name or term.pattern.lower() == name.lower():
            bonus += 2.0 * weight
        elif names_part(term, name):
            bonus += 1.5 * weight
        elif owner and (term.pattern == owner or names_part(term, owner)):
            bonus += 0.35 * weight
    return bonus


def file_factor(path: str) -> float:
    # a test as the localisation names them too: live (r31, sh-pipeline-status) a shell
    # suite's ``test.sh``, counted as code, was a one-line place in every attempt
    if TESTY.search(path) or is_test(path):
        return 0.5
    if path.endswith(DOCS) or path.startswith(("docs/", "doc/")):
        return 0.4
    return 1.0


def cut_around(text: str, weights: dict[Term, float] | None = None) -> str:
    """The line, or the part of a long line around the first term it holds."""
    text = text.rstrip("\r")
    if len(text) <= LINE_CUT:
        return text
    found = [m.start() for t in (weights or {}) if (m := t.rx.search(text))]
    start = max(0, min(min(found, default=0) - LINE_CUT // 3, len(text) - LINE_CUT))
    head = "…" if start else ""
    tail = "…" if start + LINE_CUT < len(text) else ""
    return f"{head}{text[start:start + LINE_CUT]}{tail} (line cut, {len(text)} chars)"


CONTEXT_SHARE = 1.0  # a window holding all of the task's rare words counts this much more


def context_shares(windows: Sequence[Sequence[tuple[int, str]]], rare: dict[Term, float]
                   ) -> list[float]:
    """How much of the task's rarity (``rare``: a word's worth as a clue) each window's lines
    hold, 0..1. An explorer's question is a piece of the task: asked where the code handles
    `newest`, the sort table that says ``added`` beside it (the task says "published" and
    "year") ranks above the option's list of choices, which holds only the question's word."""
    whole = sum(rare.values())
    if not whole:
        return [0.0] * len(windows)
    texts = ["\n".join(line for _, line in lines) for lines in windows]
    return [sum(v for t, v in rare.items() if t.found_in(text)) / whole for text in texts]
