"""Where to look, before an explorer's model is asked: a question turned into ranked windows.

The names and phrases a question holds (quoted strings, identifiers, flags, words) are searched
with ripgrep, twice: as text anywhere, and as the names of definitions (``def``, ``class``,
``function`` ... and module constants). Each hit is widened to the definition that holds it, by
the tree-sitter symbol map (or to a few lines around it in other files), and each definition is
one candidate. Candidates are ranked: more of the question's terms above fewer, rare terms above
common ones, a definition named by the question above its uses, code above tests and docs. In a
log, the first line that matches is shown with the rare warnings and errors logged before it: a
symptom's cause is usually logged once, long before the symptom floods the file.

Room left is filled with the definitions their code calls, one or two calls away
(``callees.py``), ranked by the task's rare words: a bug two modules from the names a task
spells is reached through the calls. The windows go into the explorer's first prompt with real
paths and line numbers, so a small model can often answer in one turn citing what it was shown;
its tools stay for when they miss. Everything is bounded: searches stop after a fixed number of
matches and a timeout, lines are cut, large files are windowed without parsing, and a long
definition is shown as a few lines around its hits.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Collection, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from orchestrator.errors import OrchestrateError
from orchestrator.localize import callees, repomap, texts
from orchestrator.localize.candidates import (
    CONSTANT_LINES,
    CONTEXT_SHARE,
    LOOSE_LINES,
    PLAIN_AROUND,
    candidates_of,
    context_shares,
    cut_around,
    definition_bonus,
    file_factor,
    shown_lines,
    term_weights,
)
from orchestrator.localize.terms import MAX_TERMS, Term, definitions_regex, quoted_text, terms
from orchestrator.localize.texts import MATCHES, PARSE_LIMIT, PER_FILE, Corpus, Lines, Sparse
from orchestrator.tools.jail import Jail, open_regular
from orchestrator.tools.search import LINE_CUT, Match, list_files, search

MAX_PER_FILE = 3
TINY = 3  # lines: a window this short (a constant) does not count against ``MAX_PER_FILE``
RELATIVE_FLOOR = 0.4  # a window scoring under this share of the best is not worth its tokens
LOG_RARE = 2  # a warning whose shape occurs at most this often in a log is shown
LOG_LEVELS = r"\b(WARN|WARNING|ERROR|FATAL|CRITICAL|SEVERE|PANIC)\b"
_LEVEL = re.compile(LOG_LEVELS)
NAMED_FILE = 2.0  # a file the question names: its windows count this many times
CONSTRUCTOR_SHARE = 0.5  # the best window is a class: its constructor ranks at least this share
_CONSTRUCTORS = ("__init__", "constructor", "new", "initialize")

_LOGS = (".log", ".out")


# --- windows ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Window:
    """Lines of ``path`` shown to a model: a definition (``symbol``) or the lines around hits;
    for a log, chosen lines (``note`` says which)."""

    path: str
    start: int
    end: int
    lines: tuple[tuple[int, str], ...]  # (line number, text), in order, maybe with gaps
    score: float = 0.0
    symbol: str = ""
    held: tuple[str, ...] = ()  # the terms it holds
    note: str = ""
    id: str = ""

    @property
    def numbers(self) -> frozenset[int]:
        return frozenset(n for n, _ in self.lines)

    def render(self) -> str:
        said = ", ".join(p for p in (self.symbol, self.note) if p)
        about = f" ({said})" if said else ""
        out = [f"[{self.id}] {self.path}:{self.start}-{self.end}{about}"]
        previous = None
        for n, text in self.lines:
            if previous is not None and n > previous + 1:
                out.append("   …")
            out.append(f"{n:>4}| {text}")
            previous = n
        return "\n".join(out)


@dataclass
class Retriever:
    """Retrieval over one tree; the searches and symbol maps are shared by a run's explorers
    (many ask about the same names)."""

    root: Path
    timeout: float = 10.0
    _hits: dict[tuple[str, str], list[Match]] = field(default_factory=dict, repr=False)
    _symbols: dict[str, list[repomap.Symbol]] = field(default_factory=dict, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _files: list[str] | None = field(default=None, repr=False)
    _loaded: Corpus | Literal[False] | None = field(default=None, repr=False)
    _corpus_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def windows(self, question: str, *, budget_chars: int = 3000, limit: int = 4,
                context: str = "") -> list[Window]:
        """The question's best windows, ids ``W1``.., within ``budget_chars`` of rendering;
        room left is filled with the definitions they call (``followed``), ranked by the words
        of ``context`` (the run's task) they hold."""
        asked = terms(question)
        named = [t.pattern for t in asked if t.kind == "path" and self._is_file(t.pattern)]
        wanted = [t for t in asked if t.kind != "path"]
        if not wanted:
            return []
        searches = [t.rg() for t in wanted]
        if any(t.kind == "word" for t in wanted):  # a name's definition is a hit already
            searches.append(definitions_regex(wanted))
        # a file the question names is searched for every term, beyond the per-file cap
        pairs: list[tuple[str, str | None]] = [(regex, None) for regex in searches]
        pairs += [(t.rg(), p) for p in named for t in wanted]
        if self._corpus_ready():  # in memory: no process to start
            results = [self._search(regex, path) for regex, path in pairs]
        else:
            with ThreadPoolExecutor(max_workers=4) as pool:
                results = list(pool.map(lambda a: self._search(*a), pairs))
        text_hits = results[:len(wanted)]
        def_hits = results[len(wanted)] if len(searches) > len(wanted) else []
        in_named = results[len(searches):]
        found = dict(zip(wanted, text_hits, strict=True))
        weights = term_weights(found)
        if not weights:
            return []
        by_file: dict[str, set[int]] = {}
        for m in [*def_hits, *(m for hits in [*text_hits, *in_named] for m in hits)]:
            by_file.setdefault(m.path, set()).add(m.line)
        candidates: list[Window] = []
        for path, lines in by_file.items():
            made = self._file_windows(path, sorted(lines), weights)
            if path in named:
                made = [replace(w, score=w.score * NAMED_FILE) for w in made]
            candidates += made
        about = [t for t in terms(context or question) if t.kind != "path"]
        rare: dict[Term, float] | None = None  # searched once, for either use below
        if context and context != question:  # the task's rare words rank a window higher
            rare = self.rarity(about)
            shares = context_shares([w.lines for w in candidates], rare)
            candidates = [replace(w, score=w.score * (1 + CONTEXT_SHARE * share))
                          for w, share in zip(candidates, shares, strict=True)]
        chosen = _choose(_with_constructor(candidates), budget_chars, limit, named=set(named))
        if len(chosen) >= limit:
            return chosen
        more = self.followed(chosen, weights, self.rarity(about) if rare is None else rare)
        out = callees.fill(chosen, more, budget_chars, limit)
        return [replace(w, id=f"W{i}") for i, w in enumerate(out, 1)]

    def followed(self, shown: Sequence[Window], weights: dict[Term, float],
                 rare: dict[Term, float], hops: int = 2) -> list[Window]:
        """The definitions the code of ``shown`` calls, one and two calls away (``callees``):
        the most of the task's rarity (``rare``, ``_rarity``) first, then the nearer, then in
        calling order. A name defined in more than two places is left out (which one is called
        is not known)."""
        seen = {(w.path, w.start) for w in shown}
        searched: set[str] = set()
        found: list[tuple[float, int, int, Window]] = []
        frontier = [w for w in shown if w.symbol and file_factor(w.path) == 1.0]
        for hop in range(1, hops + 1):
            reached: list[Window] = []
            for parent in frontier:
                caller = callees.own_name(parent.symbol)
                for name in callees.called(self._body(parent), caller):
                    if len(searched) >= callees.MAX_SEARCHES or name in searched:
                        continue
                    searched.add(name)
                    hits = [m for m in self._search(callees.definition_regex(name))
                            if file_factor(m.path) == 1.0 and repomap.supported(m.path)]
                    for m in hits if len(hits) <= 2 else []:
                        for w in self._file_windows(m.path, [m.line], weights):
                            if not w.symbol or (w.path, w.start) in seen:
                                continue
                            seen.add((w.path, w.start))
                            (held,) = context_shares([w.lines], rare)
                            w = replace(w, note=f"called by {caller}")
                            found.append((-held, hop, len(found), w))
                            reached.append(w)
            frontier = reached
        return [w for *_, w in sorted(found, key=lambda f: f[:3])]

    def specific(self, text: str, limit: int = 2) -> list[Term]:
        """The terms of a task that name something its code handles, rarest in the code
        first: identifiers, flags, and the words of what the task quotes (a command it ran, a
        message it saw), not the prose around them; each found in a source file that is not a
        test. The seeds of questions when a planner asked none worth an explorer."""
        quoted = quoted_text(text)
        ranked: list[tuple[int, float, int, Term]] = []
        for i, t in enumerate(terms(text, limit=2 * MAX_TERMS)):
            named = t.kind in ("flag", "quoted") or (t.kind == "name" and t.weight >= 3.0)
            if t.kind == "path" or not (named or (t.kind == "word" and t.pattern in quoted)):
                continue
            code = {m.path for m in self._search(t.rg())
                    if repomap.supported(m.path) and file_factor(m.path) == 1.0}
            if code:
                ranked.append((len(code), -t.weight, i, t))
        return [t for *_, t in sorted(ranked, key=lambda r: r[:3])[:limit]]

    def preload(self) -> None:
        """List the tree and read it into memory now (when small), ahead of the first search."""
        self._corpus()

    def _body(self, w: Window) -> list[str]:
        """All lines of ``w``'s definition (a long one's window shows only some)."""
        lines = self._lines(w.path, [w.start])
        return list(lines[w.start - 1:w.end]) if isinstance(lines, list) else [
            t for _, t in w.lines]

    def rarity(self, about: Sequence[Term]) -> dict[Term, float]:
        """A term's worth as a clue: one over the number of source files that hold it."""
        return {t: 1.0 / len(f) if (f := self.holding(t)) else 0.0 for t in about}

    def holding(self, term: Term) -> dict[str, list[str]]:
        """The source files (not tests or docs) that hold ``term``, with the lines that do."""
        out: dict[str, list[str]] = {}
        for m in (m for m in self._search(term.rg()) if file_factor(m.path) == 1.0):
            out.setdefault(m.path, []).append(m.text)
        return out

    def _corpus_ready(self) -> bool:
        return self._corpus() is not None

    def _corpus(self) -> Corpus | None:
        """The tree in memory when it is small (``CORPUS_BYTES``), loaded once: then a search
        starts no process. None for a larger tree (ripgrep searches it)."""
        with self._corpus_lock:
            if self._loaded is None:
                self._loaded = Corpus.load(self.root, self.files()) or False
            return self._loaded if isinstance(self._loaded, Corpus) else None

    def files(self) -> list[str]:
        """The tree's files as ripgrep lists them (ignored and hidden ones left out), once."""
        with self._lock:
            if self._files is None:
                try:
                    listed = list_files(self.root, max_entries=200_000, timeout=self.timeout)
                    self._files = [f for f in listed.splitlines()[1:]
                                   if f and not f.startswith(("... and ", "no files"))]
                except OrchestrateError:
                    self._files = []
            return self._files

    def _is_file(self, path: str) -> bool:
        try:
            return Jail(self.root).resolve(path).is_file()
        except (OrchestrateError, OSError):
            return False

    def _search(self, regex: str, path: str | None = None) -> list[Match]:
        key = (regex, path or "")
        with self._lock:
            cached = self._hits.get(key)
        if cached is not None:
            return cached
        corpus = self._corpus()
        if corpus is not None:
            hits = corpus.search(regex, path)
            with self._lock:
                self._hits[key] = hits
            return hits
        try:
            result = search(self.root, regex, path=path, max_matches=MATCHES,
                            per_file=None if path else PER_FILE,
                            max_bytes=MATCHES * (LINE_CUT + 80), timeout=self.timeout)
            hits = [m for m in result.matches if not m.context]
        except OrchestrateError:
            hits = []
        with self._lock:
            self._hits[key] = hits
        return hits

    def _file_windows(self, path: str, hit_lines: list[int], weights: dict[Term, float]
                      ) -> list[Window]:
        lines = self._lines(path, hit_lines)
        if lines is None or not len(lines):
            return []
        if path.endswith(_LOGS):
            return self._log_windows(path, lines, hit_lines, weights)
        syms = self._symbols_of(path, lines)
        units = candidates_of(lines, syms, hit_lines)
        factor = file_factor(path)
        out = []
        for (start, end, symbol), hits in units.items():
            shown = shown_lines(lines, start, end, hits, weights, syms)
            text = "\n".join(lines[n - 1] for n, _ in shown)
            held = [t for t in weights if t.found_in(text)]
            score = sum(weights[t] for t in held) * (1 + len(held) / len(weights))
            score = (score + definition_bonus(symbol, weights)) * factor
            if not symbol and syms:  # lines outside any definition of a code file: a
                score *= LOOSE_LINES  # docstring or imports say less than the code itself
            out.append(Window(path, shown[0][0], shown[-1][0], shown, score, symbol,
                              tuple(sorted(t.pattern for t in held))))
        return out

    def _log_windows(self, path: str, lines: Lines, hit_lines: list[int],
                     weights: dict[Term, float]) -> list[Window]:
        """The first line of the log that holds the question's strongest terms, and the rare
        warnings and errors logged before it."""

        def strength(n: int) -> float:  # a symptom is logged as a warning or an error
            level = 1.5 if _LEVEL.search(lines[n - 1]) else 1.0
            return level * sum(w for t, w in weights.items() if t.found_in(lines[n - 1]))

        valid = [n for n in hit_lines if n <= len(lines)]
        if not valid:
            return []
        best = max(strength(n) for n in valid)
        like = [n for n in valid if strength(n) >= best * 0.999]
        first = min(like)
        text = cut_around(lines[first - 1])
        held = tuple(t.pattern for t in weights if t.found_in(text))
        # the note says what the line is, in facts: a small model repeats a vague note back
        about = " and ".join(f"'{h}'" for h in held[:3]) or "the question's words"
        out = [Window(path, first, first, ((first, text),), best * 1.5, held=held,
                      note=f"the earliest of {len(like)} lines with {about}")]
        rare = self._rare_before(path, first, text, weights)
        return out + ([rare] if rare is not None else [])

    def _rare_before(self, path: str, before: int, symptom: str,
                     weights: dict[Term, float]) -> Window | None:
        try:
            result = search(self.root, LOG_LEVELS, path=path, max_matches=20_000,
                            max_bytes=20_000 * (LINE_CUT + 80), timeout=self.timeout)
        except OrchestrateError:
            return None
        shapes: dict[str, int] = {}
        for m in result.matches:
            shapes[texts.log_shape(m.text)] = shapes.get(texts.log_shape(m.text), 0) + 1
        about = texts.plain_words(symptom) | {t.pattern.lower() for t in weights}
        rare = [m for m in result.matches
                if m.line < before and shapes[texts.log_shape(m.text)] <= LOG_RARE]
        if not rare:
            return None
        # the rare lines that share a word with the symptom, when any does: a small model
        # shown three rare warnings picks one at random; the one naming the same thing
        # (``db.pool_size`` before ``[db] ... pool``) is the lead a person would follow
        sharing = [m for m in rare if texts.plain_words(m.text) & about]
        chosen = sharing or rare
        chosen.sort(key=lambda m: (-len(texts.plain_words(m.text) & about), m.line))
        kept = sorted(chosen[:6], key=lambda m: m.line)
        shared = sorted(set().union(*(texts.plain_words(m.text) & about for m in kept)))
        what = (f", sharing {', '.join(repr(w) for w in shared[:4])} with line {before}"
                if sharing else "")
        return Window(path, kept[0].line, kept[-1].line,
                      tuple((m.line, cut_around(m.text)) for m in kept), sum(weights.values()) * 2,
                      note=f"rare warnings and errors (each logged at most {LOG_RARE} times) "
                           f"before line {before}{what}")

    def _lines(self, path: str, wanted: Sequence[int]) -> Lines | None:
        """The file's lines: all of a file small enough to parse, else only the lines around
        ``wanted`` (each cut), read in chunks, so a huge file costs kilobytes."""
        corpus = self._corpus()
        if corpus is not None and path in corpus.files:
            return corpus.files[path]
        try:
            with open_regular(Jail(self.root).resolve(path), path) as fh:
                if b"\0" in fh.read(8192):
                    return None
                fh.seek(0)
                if fh.seek(0, 2) <= PARSE_LIMIT:
                    fh.seek(0)
                    return fh.read().decode("utf-8", "replace").split("\n")
                fh.seek(0)
                near = {k for n in wanted for k in range(n - CONSTANT_LINES, n + PLAIN_AROUND + 1)}
                return Sparse.read(fh, near)
        except (OrchestrateError, OSError):
            return None

    def _symbols_of(self, path: str, lines: Lines) -> list[repomap.Symbol]:
        if not isinstance(lines, list):
            return []  # too large to parse
        with self._lock:
            if path in self._symbols:
                return self._symbols[path]
        text = "\n".join(lines)
        found = repomap.symbols(path, text) if repomap.supported(path) else []
        with self._lock:
            self._symbols[path] = found
        return found


def _with_constructor(candidates: list[Window]) -> list[Window]:
    """When the best window is a class, its constructor ranks beside it if it holds a term of
    the question: a class's docstring says what its parameters mean, the constructor what they
    are when nobody says otherwise (``max_retries=DEFAULT_RETRIES``)."""
    if not candidates:
        return candidates
    best = max(candidates, key=lambda w: w.score)
    if not best.symbol.startswith("class "):
        return candidates
    owner = best.symbol.split(" ", 1)[1]
    made = {f"{owner}.{name}" for name in _CONSTRUCTORS}
    floor = best.score * CONSTRUCTOR_SHARE
    return [replace(w, score=floor)
            if w.path == best.path and w.held and w.score < floor
            and w.symbol.split(" ", 1)[-1] in made else w
            for w in candidates]


def _choose(candidates: Iterable[Window], budget_chars: int, limit: int,
            named: Collection[str] = ()) -> list[Window]:
    """The best windows that fit: no overlaps, at most ``MAX_PER_FILE`` a file (a tiny one,
    such as a constant's line, aside); a file the question ``named`` however low it scores
    (live r31: a task named ``report.sh``, which held few of its words, never shown)."""
    chosen: list[Window] = []
    used = 0
    per_file: dict[str, int] = {}
    ranked = sorted(candidates, key=lambda w: (-w.score, w.path, w.start))
    floor = ranked[0].score * RELATIVE_FLOOR if ranked else 0.0
    for w in ranked:
        if len(chosen) >= limit or (w.score <= floor and w.path not in named):
            continue
        tiny = len(w.lines) <= TINY
        if per_file.get(w.path, 0) >= MAX_PER_FILE and not tiny:
            continue
        if any(c.path == w.path and c.numbers & w.numbers for c in chosen):
            continue
        size = len(w.render()) + 1
        if used + size > budget_chars:
            continue
        chosen.append(w)
        used += size
        per_file[w.path] = per_file.get(w.path, 0) + (0 if tiny else 1)
    return [replace(w, id=f"W{i}") for i, w in enumerate(chosen, 1)]


def render(windows: Sequence[Window]) -> str:
    """The windows as the explorer's first prompt shows them."""
    return "\n\n".join(w.render() for w in windows)
