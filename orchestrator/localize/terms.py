"""A question's terms: the names, flags, quoted strings, file paths and informative words
that retrieval searches for (``retrieve.py``), each with the regex ripgrep and Python both run.

A name is searched whole, in its case (``IntRange``, ``no_proxy``, ``QC``); a word by its stem at
the start of a word or a camel-case hump (``param`` finds ``BoolParamType``), with the
abbreviations code uses for it (a question's "parameter" is the code's ``param``); a quoted
example's separators as string literals (``--name=value`` is split on ``"="``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

MAX_TERMS = 14


_DEF_WORDS = r"(?:def|class|function|func|fn|struct|interface|enum|trait|type)"


_QUOTED = re.compile(r"`([^`\n]{2,80})`|\"([^\"\n]{2,80})\"|'([^'\n]{3,80})'")


_FLAG = re.compile(r"(?<![\w-])(--?[A-Za-z][\w-]*)")


_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*")


_CODE = re.compile(r"[A-Z]{2,5}")  # QC, HTTP, EOF: an all-caps code names a thing


_CAMEL = re.compile(r"[a-z][A-Z]|[A-Z]{2}[a-z]")


_PATH = re.compile(r"(?<![\w/.-])(?:[\w.-]+/)+[\w.-]+\.\w+|(?<![\w/.-])[\w-]+\.(?:py|js|ts|jsx|tsx|go|"
                   r"rs|java|rb|c|h|cc|cpp|sh|md|rst|txt|json|ya?ml|toml|ini|cfg|log|csv|sql)\b")


# Words joined by hyphens: a header (Content-Type), a mode (read-only); code writes them
# with an underscore, a hyphen or nothing between the parts, in any case.
_COMPOUND = re.compile(r"(?<![\w/.-])[A-Za-z][A-Za-z0-9]*(?:-[A-Za-z0-9]+)+(?![\w/-])")


_COUNTING = re.compile(r"\bhow (?:many times|often)\b", re.IGNORECASE)


_SEPARATOR = re.compile(r"(?<=[A-Za-z0-9])([=:/@#|,;])(?=[A-Za-z0-9])")


PARTS = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")


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
unless otherwise told cannot can't
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
    kind: str  # "name" | "flag" | "quoted" | "separator" | "path" | "compound" | "word"
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
        if self.kind == "compound":  # Content-Type: content_type, ContentType, content-type
            parts = self.pattern.split("-")
            joined = "[-_]?".join(re.escape(p) for p in parts)
            humps = "".join(re.escape(p[:1].upper() + p[1:].lower()) for p in parts)
            return f"(?i:(?:\\b|_){joined})|[a-z0-9]{humps}"
        if self.whole:
            edge = r"\b" if self.pattern[:1].isalnum() or self.pattern[:1] == "_" else ""
            tail = r"\b" if self.pattern[-1:].isalnum() or self.pattern[-1:] == "_" else ""
            return f"{edge}{lit}{tail}"
        hump = re.escape(self.pattern[:1].upper() + self.pattern[1:])
        return f"(?i:\\b{lit}|_{lit})|[A-Za-z0-9]{hump}"

    @property
    def rx(self) -> re.Pattern[str]:
        return compiled(self.rg())

    def found_in(self, text: str) -> bool:
        return self.rx.search(text) is not None


_RX: dict[str, re.Pattern[str]] = {}


def compiled(regex: str) -> re.Pattern[str]:
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
        # its words stay where the question put them: a quoted command is the most specific
        # thing a task says, its words must not fall past the limit behind the prose
        rest = rest.replace(m.group(0), _quoted_terms(found, quoted) or " ", 1)
    for m in _FLAG.finditer(rest):
        if len(m.group(1)) > 3:
            _add(found, Term(m.group(1), "flag", 3.0))
    for m in _COMPOUND.finditer(rest):
        _add(found, Term(m.group(0), "compound", 2.0))
    rest = _COMPOUND.sub(" ", rest)
    rest = _COUNTING.sub(" ", rest)  # "how many times": a count is asked, not a time
    first = True
    for token in _NAME.findall(rest):
        for part in token.split("."):
            for term in _token_terms(part, first):
                _add(found, term)
        first = token.endswith((".", "?", "!"))
    ranked = sorted(found.values(), key=lambda t: -t.weight)  # stable: the question's order
    return ranked[:limit]


def quoted_text(question: str) -> str:
    """What the question quotes (a command, a message, a name), joined, lower-cased."""
    return " ".join(next(g for g in m.groups() if g is not None)
                    for m in _QUOTED.finditer(question)).lower()


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


def definitions_regex(wanted: Sequence[Term]) -> str:
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


def names_part(term: Term, name: str) -> bool:
    if term.kind != "word":
        return False
    for part in (p.lower() for p in PARTS.findall(name) + name.split("_")):
        # a word starts a part, or sits inside a long one (POOLSIZE holds "size")
        if part.startswith(term.pattern) or (len(part) >= len(term.pattern) + 3
                                            and term.pattern in part):
            return True
    return False
