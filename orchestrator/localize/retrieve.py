"""Where to look, before an explorer's model is asked: a question turned into ranked windows.

The names and phrases a question holds (quoted strings, identifiers, flags, words) are searched
with ripgrep, twice: as text anywhere, and as the names of definitions (``def``, ``class``,
``function`` ... and module constants). Each hit is widened to the definition that holds it, by
the tree-sitter symbol map (or to a few lines around it in other files), and each definition is
one candidate. Candidates are ranked: more of the question's terms above fewer, rare terms above
common ones, a definition named by the question above its uses, code above tests and docs. In a
log, the first line that matches is shown with the rare warnings and errors logged before it: a
symptom's cause is usually logged once, long before the symptom floods the file.

The top windows go into the explorer's first prompt with their real paths and line numbers, so a
small model can often answer in one turn by citing what it was shown; its tools stay for when
the candidates miss. Everything is bounded: each search stops after a fixed number of matches
and a timeout, lines are cut, files past a size are windowed without parsing, and a window
shows a few lines around the hits of a long definition, not all of it.
"""

from __future__ import annotations

import math
import re
import threading
from collections.abc import Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO, Literal

from orchestrator.errors import OrchestrateError
from orchestrator.localize import repomap
from orchestrator.tools.jail import Jail, open_regular
from orchestrator.tools.search import LINE_CUT, Match, list_files, search

MAX_TERMS = 10
MATCHES = 300  # per search: past this a term is common; it still counts, weakly
PER_FILE = 30  # matches per file and search, so one file cannot take them all
SHOWN_LINES = 16  # a window shows at most this many lines
LOOSE_LINES = 0.6  # weight of hits outside every definition of a parsed file
CONSTANT_LINES = 60  # lines a constant's table may run over and still be one candidate
SMALL_DEFINITION = 30  # lines: a class this short is one candidate with its methods
PLAIN_AROUND = 3  # lines each side of a hit in a file without a symbol map
PARSE_LIMIT = 400_000  # bytes: larger files are windowed without parsing
CORPUS_BYTES = 8_000_000  # a tree this small is searched in memory, with no process to start
CORPUS_FILES = 5_000
READ_LINE = 4096  # characters kept of a line of a large file
MAX_PER_FILE = 3
RELATIVE_FLOOR = 0.4  # a window scoring under this share of the best is not worth its tokens
LOG_RARE = 2  # a warning whose shape occurs at most this often in a log is shown
LOG_LEVELS = r"\b(WARN|WARNING|ERROR|FATAL|CRITICAL|SEVERE|PANIC)\b"
_LEVEL = re.compile(LOG_LEVELS)
NAMED_FILE = 2.0  # a file the question names: its windows count this many times
_DEF_WORDS = r"(?:def|class|function|func|fn|struct|interface|enum|trait|type)"

_QUOTED = re.compile(r"`([^`\n]{2,80})`|\"([^\"\n]{2,80})\"|'([^'\n]{3,80})'")
_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")
_CODE = re.compile(r"[A-Z]{2,5}")  # QC, HTTP, EOF: an all-caps code names a thing
_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")
_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+\.\w+|(?<![\w/.-])[\w-]+\.(?:py|js|ts|jsx|tsx|go|"
                   r"rs|java|rb|c|h|cc|cpp|sh|md|rst|txt|json|ya?ml|toml|ini|cfg|log|csv|sql)\b")
_CONSTANT = re.compile(r"^(?:export\s+)?(?:const\s+)?([A-Z][A-Z0-9_]*)\s*[:=][^=]")
_SEPARATOR = re.compile(r"(?<=[A-Za-z0-9])([=:/@#|,;])(?=[A-Za-z0-9])")
_SHAPE = re.compile(r"0x[0-9a-f]+|[0-9a-f]{8,}|\d+(?:\.\d+)?")
_TIMESTAMP = re.compile(r"^\S*\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")
_TESTY = re.compile(r"(^|/)(tests?|spec|__tests__)/|(^|/)test_[^/]*$|_test\.\w+$|\.(test|spec)\.\w+$")
_DOCS = (".md", ".rst", ".txt", ".adoc")
_LOGS = (".log", ".out")
_PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Words of a question that name no thing in code.
STOP = frozenset("""
a an the and or but of to in on at by for with from as is are was were be been being it its this
that these those which what where when how why who whom whose there here has have had do does
did not no can could should would will may might must than then so such also only just into
onto over under about after before between both each either every all any some many much more
most other same own i we you they he she them us our your their my me if else while until get
gets got give gives given make makes made let lets use uses used using via instead whether
happen happens happened find found show shows shown look looks tell tells explain mean means
code function functions method methods class classes file files line lines module modules
variable variables value values returned return returns thing things way ways work works
""".split())

# Programming abbreviations: a question says "parameter", the code says "param".
ABBREVIATIONS = {
    "boolean": "bool", "booleans": "bool", "parameter": "param", "parameters": "param",
    "integer": "int", "integers": "int", "string": "str", "strings": "str",
    "directory": "dir", "directories": "dir", "configuration": "config", "argument": "arg",
    "arguments": "arg", "option": "opt", "options": "opt", "message": "msg",
    "messages": "msg", "maximum": "max", "minimum": "min", "environment": "env",
    "variable": "var", "exception": "exc", "exceptions": "exc", "error": "err",
    "errors": "err", "request": "req", "requests": "req", "response": "resp",
    "responses": "resp", "length": "len", "attribute": "attr", "attributes": "attr",
    "reference": "ref", "initialize": "init", "initialise": "init", "database": "db",
    "connection": "conn", "connections": "conn", "temporary": "tmp", "previous": "prev",
    "character": "char", "characters": "char", "authentication": "auth",
    "authorization": "auth", "information": "info", "utility": "util", "utilities": "util",
    "command": "cmd", "commands": "cmd", "context": "ctx", "position": "pos",
    "dictionary": "dict",
}


@dataclass(frozen=True)
class Term:
    """What is searched for: a literal ``pattern`` of the question, how strongly it names a
    thing, and whether it is a whole name (case and word boundaries kept) or a word's start."""

    pattern: str
    kind: str  # "name" | "flag" | "quoted" | "separator" | "path" | "word"
    weight: float

    @property
    def whole(self) -> bool:
        return self.kind != "word"

    def rg(self) -> str:
        """The ripgrep regex: a whole name, a separator as a string literal (``"="``), or a
        word that starts a word or a camel-case hump."""
        lit = re.escape(self.pattern)
        if self.kind == "separator":
            return f"\"{lit}\"|'{lit}'"
        if self.whole:
            edge = r"\b" if self.pattern[:1].isalnum() or self.pattern[:1] == "_" else ""
            tail = r"\b" if self.pattern[-1:].isalnum() or self.pattern[-1:] == "_" else ""
            return f"{edge}{lit}{tail}"
        hump = re.escape(self.pattern[:1].upper() + self.pattern[1:])
        return f"(?i:\\b{lit}|_{lit})|[a-z0-9]{hump}"

    @property
    def rx(self) -> re.Pattern[str]:
        return _compiled(self.rg())

    def found_in(self, text: str) -> bool:
        return self.rx.search(text) is not None


_RX: dict[str, re.Pattern[str]] = {}


def _compiled(regex: str) -> re.Pattern[str]:
    found = _RX.get(regex)
    if found is None:
        found = _RX[regex] = re.compile(regex)
    return found


def terms(question: str, limit: int = MAX_TERMS) -> list[Term]:
    """The question's names, flags, quoted strings and informative words, strongest first."""
    found: dict[str, Term] = {}
    rest = question
    for m in _PATH.finditer(question):  # a file the question names: searched like a name
        _add(found, Term(m.group(0).strip("`'\""), "path", 3.0))
        rest = rest.replace(m.group(0), " ")
    for m in _QUOTED.finditer(rest):
        quoted = next(g for g in m.groups() if g is not None).strip()
        rest = rest.replace(m.group(0), " ") + _quoted_terms(found, quoted)
    for m in _FLAG.finditer(rest):
        if len(m.group(1)) > 3:
            _add(found, Term(m.group(1), "flag", 3.0))
    first = True
    for token in _NAME.findall(rest):
        for part in token.split("."):
            for term in _token_terms(part, first):
                _add(found, term)
        first = token.endswith((".", "?", "!"))
    ranked = sorted(found.values(), key=lambda t: -t.weight)  # stable: the question's order
    return ranked[:limit]


def _add(found: dict[str, Term], term: Term) -> None:
    key = term.pattern.lower()
    if key not in found or found[key].weight < term.weight:
        found[key] = term


def _quoted_terms(found: dict[str, Term], quoted: str) -> str:
    """Terms of a quoted string (added to ``found``); the text whose words still count."""
    if _FLAG.fullmatch(quoted):
        _add(found, Term(quoted, "flag", 3.0))
    elif _NAME.fullmatch(quoted):
        for part in quoted.split("."):  # `Response.ok`: both are names
            if len(part) >= 2:
                _add(found, Term(part, "name", 3.0))
    elif len(quoted) >= 3:
        _add(found, Term(quoted, "quoted", 2.5))
        for sep in sorted(set(_SEPARATOR.findall(quoted))):  # `--name=value` is split on "="
            _add(found, Term(sep, "separator", 1.5))
        return " " + quoted  # its parts still count
    return ""


def _token_terms(part: str, first: bool) -> list[Term]:
    """A word of the question as terms: a name code uses, a capitalised name mid-sentence
    ("a Session": a class the question names, and its word), or an informative word."""
    if _is_identifier(part) or _CODE.fullmatch(part):
        return [Term(part, "name", 3.0)]
    word = _word_pattern(part)
    if part[:1].isupper() and not first and part.lower() not in STOP and len(part) > 2:
        named = [Term(part, "name", 2.0)]
        return named + ([Term(word, "word", 1.0)] if word and word != part.lower() else [])
    return [Term(word, "word", 1.0)] if word else []


def _is_identifier(token: str) -> bool:
    """A name only code uses: snake_case, CamelCase, or letters with digits."""
    return ("_" in token.strip("_") or bool(_CAMEL.search(token))
            or (any(c.isdigit() for c in token) and any(c.isalpha() for c in token)))


def _word_pattern(word: str) -> str | None:
    low = word.lower()
    if len(low) < 3 or low in STOP or low.isdigit():
        return None
    if low in ABBREVIATIONS:
        return ABBREVIATIONS[low]
    if low.endswith("y") and len(low) >= 5 and low[-2] not in "aeiou":
        return low[:-1]  # retry -> retr: retries, retried
    for suffix in ("ing", "ies", "ed", "es", "s"):  # clamping -> clamp, timeouts -> timeout
        if low.endswith(suffix) and not low.endswith(("ss", "us", "is")) \
                and len(low) - len(suffix) >= 4:
            stem = low[: -len(suffix)]
            if suffix in ("ing", "ed") and stem[-1] == stem[-2] and stem[-1] not in "lsz":
                stem = stem[:-1]  # mapping -> map, logged -> log; billing stays bill
            return stem
    return low


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
        about = f" ({self.symbol})" if self.symbol else (f" ({self.note})" if self.note else "")
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
    _loaded: _Corpus | Literal[False] | None = field(default=None, repr=False)
    _corpus_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def windows(self, question: str, *, budget_chars: int = 3000, limit: int = 4
                ) -> list[Window]:
        """The question's best windows, ids ``W1``.., within ``budget_chars`` of rendering."""
        asked = terms(question)
        named = [t.pattern for t in asked if t.kind == "path" and self._is_file(t.pattern)]
        wanted = [t for t in asked if t.kind != "path"]
        if not wanted:
            return []
        searches = [t.rg() for t in wanted]
        if any(t.kind == "word" for t in wanted):  # a name's definition is a hit already
            searches.append(_definitions_regex(wanted))
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
        weights = _weights(found)
        if not weights:
            return []
        by_file: dict[str, set[int]] = {}
        for m in [*def_hits, *(m for hits in [*text_hits, *in_named] for m in hits)]:
            by_file.setdefault(m.path, set()).add(m.line)
        candidates: list[Window] = []
        for path, lines in by_file.items():
            made = self._file_windows(path, sorted(lines), weights)
            if path in named:
                made = [_boosted(w, NAMED_FILE) for w in made]
            candidates += made
        return _choose(candidates, budget_chars, limit)

    def _corpus_ready(self) -> bool:
        return self._corpus() is not None

    def _corpus(self) -> _Corpus | None:
        """The tree in memory when it is small (``CORPUS_BYTES``), loaded once: then a search
        starts no process. None for a larger tree (ripgrep searches it)."""
        with self._corpus_lock:
            if self._loaded is None:
                self._loaded = _Corpus.load(self.root, self.files()) or False
            return self._loaded if isinstance(self._loaded, _Corpus) else None

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
        units = _units(lines, syms, hit_lines)
        factor = _file_factor(path)
        out = []
        for (start, end, symbol), hits in units.items():
            shown = _shown(lines, start, end, hits, weights)
            text = "\n".join(lines[n - 1] for n, _ in shown)
            held = [t for t in weights if t.found_in(text)]
            score = sum(weights[t] for t in held) * (1 + len(held) / len(weights))
            score = (score + _definition_bonus(symbol, weights)) * factor
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
        first = min(n for n in valid if strength(n) >= best * 0.999)
        text = _cut(lines[first - 1])
        held = tuple(t.pattern for t in weights if t.found_in(text))
        out = [Window(path, first, first, ((first, text),), best * 1.5, held=held,
                      note="the first line that matches")]
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
            shapes[_shape(m.text)] = shapes.get(_shape(m.text), 0) + 1
        about = _words(symptom) | {t.pattern.lower() for t in weights}
        rare = [m for m in result.matches
                if m.line < before and shapes[_shape(m.text)] <= LOG_RARE]
        if not rare:
            return None
        rare.sort(key=lambda m: (-len(_words(m.text) & about), m.line))
        kept = sorted(rare[:6], key=lambda m: m.line)
        return Window(path, kept[0].line, kept[-1].line,
                      tuple((m.line, _cut(m.text)) for m in kept), sum(weights.values()) * 2,
                      note=f"rare warnings and errors logged before line {before}")

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
                return _Sparse.read(fh, near)
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


class _Corpus:
    """A small tree's text files in memory, searched with the same regexes ripgrep is given
    (the files ripgrep lists: ignored, hidden and binary files left out)."""

    def __init__(self, files: dict[str, list[str]]) -> None:
        self.files = files

    @classmethod
    def load(cls, root: Path, listed: Sequence[str]) -> _Corpus | None:
        if len(listed) > CORPUS_FILES:
            return None
        jail, files, total = Jail(root), {}, 0
        for path in listed:
            try:
                with open_regular(jail.resolve(path), path) as fh:
                    data = fh.read(CORPUS_BYTES + 1)
            except (OrchestrateError, OSError):
                continue
            total += len(data)
            if total > CORPUS_BYTES or len(data) > PARSE_LIMIT:
                return None  # a large file: ripgrep searches faster than a regex line by line
            if b"\0" not in data[:8192]:
                files[path] = data.decode("utf-8", "replace").split("\n")
        return cls(files)

    def search(self, regex: str, path: str | None = None) -> list[Match]:
        rx = _compiled(regex)
        out: list[Match] = []
        for name, lines in ([(path, self.files.get(path, []))] if path else self.files.items()):
            found = 0
            for n, line in enumerate(lines, 1):
                if rx.search(line):
                    out.append(Match(name, n, _cut(line)))
                    found += 1
                    if len(out) >= MATCHES:
                        return out
                    if path is None and found >= PER_FILE:
                        break
        return out


class _Sparse:
    """Some lines of a large file, by number (others read as empty), and how many it has."""

    def __init__(self, kept: dict[int, str], total: int) -> None:
        self.kept, self.total = kept, total

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index: int) -> str:
        return self.kept.get(index + 1, "")

    @classmethod
    def read(cls, fh: BinaryIO, wanted: set[int]) -> _Sparse:
        kept: dict[int, str] = {}
        n, current, keep = 1, bytearray(), 1 in wanted
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if keep and len(current) < READ_LINE:
                    current += piece[: READ_LINE - len(current)]
                if end < 0:
                    break
                if keep:
                    kept[n] = current.decode("utf-8", "replace")
                n, current, start = n + 1, bytearray(), end + 1
                keep = n in wanted
        if current or keep:
            kept[n] = current.decode("utf-8", "replace")
        return cls(kept, n if current else n - 1)


Lines = list[str] | _Sparse


def _definitions_regex(wanted: Sequence[Term]) -> str:
    """One regex for definitions whose names hold a term: ``def``/``class``/``function``
    lines (any case) and module constants (``DEFAULT_POOLSIZE = 10``)."""
    alts = "|".join(re.escape(t.pattern) for t in wanted if t.pattern[:1].isalnum()
                     or t.pattern[:1] == "_")
    upper = "|".join(re.escape(t.pattern.upper()) for t in wanted
                     if re.fullmatch(r"[A-Za-z0-9_]+", t.pattern))
    parts = [f"(?i:\\b{_DEF_WORDS}\\s+[\\w$]*(?:{alts}))"] if alts else []
    if upper:
        parts.append(f"^(?:export\\s+)?(?:const\\s+)?[A-Z0-9_]*(?:{upper})[A-Z0-9_]*\\s*[:=][^=]")
    return "|".join(parts) or "(?!)"


def _weights(found: dict[Term, list[Match]]) -> dict[Term, float]:
    """Each found term's weight: how strongly it names a thing, times how rare it is."""
    out = {}
    for term, hits in found.items():
        if not hits:
            continue
        # how rare a term is, counted in the code: tests and docs repeat the code's names
        files = len({m.path for m in hits if _file_factor(m.path) == 1.0}) or 1
        common = len(hits) >= MATCHES
        out[term] = term.weight / math.log2(2 + files) * (0.5 if common else 1.0)
    return out


def _unit(line: int, syms: Sequence[repomap.Symbol], total: int) -> tuple[int, int, str]:
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


def _units(lines: Lines, syms: Sequence[repomap.Symbol], hit_lines: Sequence[int]
           ) -> dict[tuple[int, int, str], list[int]]:
    """The candidates of one file, each with its hit lines: definitions, constants' tables,
    and the lines around the other hits (stopping where a definition or a table begins)."""
    units: dict[tuple[int, int, str], list[int]] = {}
    plain: list[int] = []
    for line in hit_lines:
        table = _constant_at(lines, line) if not repomap.enclosing(syms, line) else None
        unit = table or _unit(line, syms, len(lines))
        if unit[2]:
            units.setdefault(unit, []).append(line)
        else:
            plain.append(line)
    taken = {n for start, end, _ in units for n in range(start, end + 1)}
    for cluster in _clusters(plain):
        start = max(1, cluster[0] - PLAIN_AROUND)
        end = min(len(lines), cluster[-1] + PLAIN_AROUND)
        before = [n for n in range(start, cluster[0]) if n in taken]
        after = [n for n in range(cluster[-1] + 1, end + 1) if n in taken]
        start, end = (max(before) + 1 if before else start), (min(after) - 1 if after else end)
        if start <= end and not any(n in taken for n in cluster):
            units[(start, end, "")] = cluster
    return units


def _constant_at(lines: Lines, line: int) -> tuple[int, int, str] | None:
    """The module constant whose definition holds ``line``: its first line, or any line of the
    table or list it opens (``RATES = {`` ... ``}``), as the candidate ``constant NAME``."""
    for start in range(line, max(0, line - CONSTANT_LINES), -1):
        m = _CONSTANT.match(lines[start - 1])
        if m is None:
            if start < line and not lines[start - 1][:1].isspace() \
                    and lines[start - 1].strip() and lines[start - 1][:1] not in ")]}":
                return None  # another top-level statement in between
            continue
        end = _literal_end(lines, start)
        return (start, end, f"constant {m.group(1)}") if end >= line else None
    return None


def _literal_end(lines: Lines, start: int) -> int:
    """The last line of the literal a constant's definition opens (its own line if none)."""
    depth = 0
    for n in range(start, min(len(lines), start + CONSTANT_LINES) + 1):
        text = re.sub(r"([\"'])(?:\\.|(?!\1).)*\1|#.*$", "", lines[n - 1])  # strings, comments
        depth += sum(text.count(c) for c in "([{") - sum(text.count(c) for c in ")]}")
        if depth <= 0:
            return n
    return start


def _boosted(w: Window, factor: float) -> Window:
    return Window(w.path, w.start, w.end, w.lines, w.score * factor, w.symbol, w.held, w.note)


def _clusters(lines: list[int]) -> list[list[int]]:
    """Hit lines that lie within ``2 * PLAIN_AROUND`` of each other, grouped."""
    out: list[list[int]] = []
    for n in sorted(set(lines)):
        if out and n - out[-1][-1] <= 2 * PLAIN_AROUND:
            out[-1].append(n)
        else:
            out.append([n])
    return out


def _shown(lines: Lines, start: int, end: int, hits: Sequence[int],
           weights: dict[Term, float]) -> tuple[tuple[int, str], ...]:
    """The lines of a candidate to show: all of a short one; else its first line and the
    lines around its hits, those holding the most terms first, within ``SHOWN_LINES``."""
    end = min(end, len(lines))
    if end - start + 1 <= SHOWN_LINES:
        return tuple((n, _cut(lines[n - 1], weights)) for n in range(start, end + 1))

    def value(n: int) -> float:
        return sum(w for t, w in weights.items() if t.found_in(lines[n - 1]))

    keep = {start}
    for n in sorted(set(hits), key=lambda n: (-value(n), n)):
        around = [k for k in (n - 1, n, n + 1) if start <= k <= end]
        if len(keep | set(around)) > SHOWN_LINES:
            break
        keep.update(around)
    return tuple((n, _cut(lines[n - 1], weights)) for n in sorted(keep))


def _definition_bonus(symbol: str, weights: dict[Term, float]) -> float:
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
        elif _names_part(term, name):
            bonus += 1.5 * weight
        elif owner and (term.pattern == owner or _names_part(term, owner)):
            bonus += 0.35 * weight
    return bonus


def _names_part(term: Term, name: str) -> bool:
    if term.kind != "word":
        return False
    for part in (p.lower() for p in _PARTS.findall(name) + name.split("_")):
        # a word starts a part, or sits inside a long one (POOLSIZE holds "size")
        if part.startswith(term.pattern) or (len(part) >= len(term.pattern) + 3
                                            and term.pattern in part):
            return True
    return False


def _file_factor(path: str) -> float:
    if _TESTY.search(path):
        return 0.5
    if path.endswith(_DOCS) or path.startswith(("docs/", "doc/")):
        return 0.4
    return 1.0


def _choose(candidates: Iterable[Window], budget_chars: int, limit: int) -> list[Window]:
    """The best windows that fit: no overlaps, at most ``MAX_PER_FILE`` a file."""
    chosen: list[Window] = []
    used = 0
    per_file: dict[str, int] = {}
    ranked = sorted(candidates, key=lambda w: (-w.score, w.path, w.start))
    floor = ranked[0].score * RELATIVE_FLOOR if ranked else 0.0
    for w in ranked:
        if len(chosen) >= limit or w.score <= floor:
            break
        if per_file.get(w.path, 0) >= MAX_PER_FILE:
            continue
        if any(c.path == w.path and c.numbers & w.numbers for c in chosen):
            continue
        size = len(w.render()) + 1
        if used + size > budget_chars:
            continue
        chosen.append(w)
        used += size
        per_file[w.path] = per_file.get(w.path, 0) + 1
    return [Window(w.path, w.start, w.end, w.lines, w.score, w.symbol, w.held, w.note, f"W{i}")
            for i, w in enumerate(chosen, 1)]


def _cut(text: str, weights: dict[Term, float] | None = None) -> str:
    """The line, or the part of a long line around the first term it holds."""
    text = text.rstrip("\r")
    if len(text) <= LINE_CUT:
        return text
    found = [m.start() for t in (weights or {}) if (m := t.rx.search(text))]
    start = max(0, min(min(found, default=0) - LINE_CUT // 3, len(text) - LINE_CUT))
    head = "…" if start else ""
    tail = "…" if start + LINE_CUT < len(text) else ""
    return f"{head}{text[start:start + LINE_CUT]}{tail} (line cut, {len(text)} chars)"


def _shape(text: str) -> str:
    """A log line with its timestamp, numbers and ids masked: lines of one shape are one event."""
    body = _TIMESTAMP.sub("", text.strip())
    return _SHAPE.sub("#", body.lower())


def _words(text: str) -> set[str]:
    return {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]+", text)} - STOP


def render(windows: Sequence[Window]) -> str:
    """The windows as the explorer's first prompt shows them."""
    return "\n\n".join(w.render() for w in windows)
