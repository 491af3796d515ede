"""Does a quote that exists also support its claim? Mechanical word checks, no model.

A quote is *informative* when it holds a name that is neither a language keyword nor a generic
name (``self``, ``str``, ``Exception``), and it is not made only of lines that occur many times
in the repository (``return rv``, ``import os``). A quote *supports* a claim when they share a
name: one of the quote's names is a word of the claim (case aside, simple plurals and tenses
forgiven), or every part of a compound name is (``ClickException`` needs both "click" and
"exception"; a part that runs two words together, ``POOLSIZE``, counts as both). A claim that marks code names (`` `ValueError` ``) is about those: its quote must
show one of them, so "the exception is `ValueError`" is not backed by a line that only shares
the word "value". Pure functions on short strings, so a citation costs microseconds.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable
from functools import lru_cache

COMMON_LINE = 6  # a normalised line seen this often in the repository says nothing by itself

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_MARKED = re.compile(r"`([A-Za-z_][A-Za-z0-9_.]*)(?:\(\))?`")
_PART = re.compile(r"[A-Z]+(?![a-z])|[A-Z]?[a-z]+|[0-9]+")

# Keywords of the languages explorers meet most (Python, JS/TS, shell, C-family, Go, Rust),
# leaving out those that are common names too (range, map, default, delete, include, ...).
KEYWORDS = frozenset("""
False None True and as assert async await break class continue def del elif else except finally
for from global if import in is lambda nonlocal not or pass raise return try while with yield
var let const function new typeof instanceof of this extends super export catch throw void null
undefined true false static enum interface implements private protected public readonly
declare require then fi do done esac until local case
int char float double unsigned signed struct union typedef sizeof switch goto
func chan defer fallthrough nil fn mut impl pub crate trait where dyn
""".split())

# Names so common in code that sharing one says nothing about what a claim is about.
GENERIC = frozenset("""
self cls args kwargs object Exception BaseException str int float bool bytes list dict tuple
set frozenset type len print isinstance Any Optional Union typing annotations __future__
__init__ __name__ __main__ it describe expect assertEqual assertTrue assertFalse TestCase
string number boolean Object Array String Number console exports
""".split())

# Words of a claim that say where, not what ("appears in ... at line 12").
STOP = frozenset("""
the an and or of to in on at by for with from as is are was were be been being it its this
that these those which what where when how why who there here has have had do does did not no
can could should would will may might must than then so such also only just into onto over
under about after before between both each either every all any some many much more most
other same own line lines file files appears appear found see shows shown defined
define defines located contains contain called call calls uses use used returns return
function method class variable module instead whether via using
""".split())


def parts(name: str) -> list[str]:
    """The lower-cased words of a compound name: ``_OptionParser`` -> option, parser."""
    return [p.lower() for p in _PART.findall(name)]


def _stems(word: str) -> Iterable[str]:
    """The word and its likely roots: clamps -> clamp, wrapping -> wrap, parsed -> parse."""
    yield word
    for suffix, repl in (("ies", "y"), ("es", ""), ("s", ""), ("ed", ""), ("ed", "e"),
                         ("ing", ""), ("ing", "e")):
        if word.endswith(suffix) and len(word) - len(suffix) >= 3:
            stem = word[: -len(suffix)] + repl
            yield stem
            if not repl and stem[-1] == stem[-2] and stem[-1] not in "aeiouls":
                yield stem[:-1]  # doubled consonant: wrapping -> wrapp -> wrap


@lru_cache(maxsize=4096)
def claim_terms(text: str) -> frozenset[str]:
    """The words a claim is about: names, their parts, and simple stems, lower-cased."""
    terms: set[str] = set()
    for token in _NAME.findall(text):
        for word in (token.lower(), *parts(token)):
            if len(word) >= 2 and word not in STOP:
                terms.update(_stems(word))
    return frozenset(terms)


def _names(quote: str) -> list[str]:
    return [t for t in _NAME.findall(quote)
            if len(t) >= 2 and t not in KEYWORDS and not t.strip("_").isdigit()]


@lru_cache(maxsize=16384)
def quote_names(quote: str) -> tuple[str, ...]:
    """The names in a quote that could tell something: not keywords, not generic, not one
    letter."""
    return tuple(dict.fromkeys(t for t in _names(quote) if t not in GENERIC))


def uninformative(quote: str, line_count: Callable[[str], int] | None = None) -> str | None:
    """None if the quote can tell something, else why not."""
    if not quote_names(quote):
        return "quote is only punctuation, keywords or generic names"
    if line_count is None:
        return None
    lines = [n for n in (" ".join(raw.split()) for raw in quote.splitlines()) if n]
    counts = [line_count(n) for n in lines]
    if lines and min(counts) >= COMMON_LINE:
        if len(lines) == 1:
            return f"quote is a line that occurs {counts[0]} times in the repository"
        return f"each line of the quote occurs at least {min(counts)} times in the repository"
    return None


def shared_name(claim: str, quote: str) -> str | None:
    """A name of the quote that the claim is also about, or None.

    A claim that marks code names in backticks needs a quote that shows one of them. Generic
    names count only when the claim spells them exactly (``len``, ``Exception``), so a
    claim about "the BadParameter exception" is not supported by ``class X(Exception)``.
    """
    marked = marked_names(claim)
    if marked and not any(m.lower() in quote.lower() for m in marked):
        return None
    terms = claim_terms(claim)
    for name in quote_names(quote):
        if name.lower() in terms or name.lower().strip("_") in terms:  # `_clamp`: "clamped"
            return name
        words = parts(name)
        if len(words) >= 2 and all(w in terms or _joined(w, terms) for w in words):
            return name
    generic = {t for t in _names(quote) if t in GENERIC}
    exact = generic.intersection(_NAME.findall(claim)) if generic else set()
    return min(exact) if exact else None


def _joined(word: str, terms: frozenset[str]) -> bool:
    """Whether ``word`` is two of the claim's words run together (``poolsize``: "pool",
    "size"), as all-caps names write them."""
    return any(word[:i] in terms and word[i:] in terms for i in range(3, len(word) - 2))


@lru_cache(maxsize=4096)
def marked_names(claim: str) -> tuple[str, ...]:
    """The code names a claim marks in backticks (`ValueError`, `Session.send`, `wrap()`),
    the last part of a dotted one; keywords, generic names and one letter left out."""
    out = []
    for raw in _MARKED.findall(claim):
        name = raw.rstrip(".").rsplit(".", 1)[-1]
        if len(name) >= 2 and name not in KEYWORDS and name not in GENERIC \
                and name.lower() not in {"true", "false", "none", "null"}:
            out.append(name)
    return tuple(dict.fromkeys(out))
