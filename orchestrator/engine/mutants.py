"""Mechanical edits of one line: the small changes a one-token bug needs, with no model call.

A small model often finds the wrong line and writes the wrong fix on it: live (r87-r89) the
1.5B asked at xp-js-weekly-runs' line wrote ``-days - 1`` where ``-(days - 1)`` was needed,
and on xp-logstat-slow re-sorted the requests instead of writing the 500 the task states for
the 5000 there, in all six runs of each. Checking an edit costs a test run (under a second on
these tasks); a model's sample costs ten or more. So once a model's one-line sample at a
place has failed, the line it changed (or named) is edited the ways a one-token bug is fixed,
each edit checked by the acceptance commands like a sample, the first that passes kept
(``samples.py``, ``[roles.<build>] mutants``). The operators are the classic ones of
mutation-based repair, in this order:

- ``boundary``: a comparison's boundary (``<`` and ``<=``, ``>`` and ``>=``);
- ``arithmetic``: ``*`` and ``/``, binary ``+`` and ``-``;
- ``offset``: a ``+ 1`` or ``- 1`` dropped;
- ``number``: an integer one more or one less, or a number the task states in its place;
- ``operand``: a name used in an expression one more or one less (``days`` -> ``(days - 1)``);
- ``swap``: two names used as values exchanged between the line and the next
  (``dict(user)`` / ``update(DEFAULTS)`` -> ``dict(DEFAULTS)`` / ``update(user)``: live,
  py-config-merge's 1.5B wrote 15 wrong fixes at that place in r91).

Strings and comments are never edited. The risk is a change that passes the tests for the
wrong reason: the report names a passing edit as mechanical (``Sample.mutant``), and only
the lines a model's own sample chose are edited, or (``[roles.<build>] mutant_lines``) every
line of the place it was asked at when the place is that short: live, the 1.5B asked at
xp-logstat-slow's four-line function changed its sort, never the threshold above it.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from orchestrator.localize.localization import Span

LIMIT = 16  # edits of one line at most: each is a test run

_KEYWORDS = frozenset("""
    and as assert async await break case catch class const continue def del delete do elif else
    except export extends false False finally for from function global if import in instanceof
    is lambda let new None nonlocal not null of or pass raise return self static super switch
    this throw true True try typeof undefined var void while with yield echo then fi done esac
""".split())
# keywords a declared name follows: the name is no value there
_DECLARING = frozenset("as class const def export from function global import lambda let "
                       "local nonlocal var".split())
# a string (with its escapes and prefix: f"..."), a number, a name, then operators longest first
_TOKEN = re.compile(r"""
    (?P<string>(?:[rRbBuUfF]{1,2}(?=["']))?
               (?:"(?:\\.|[^"\\])*"?|'(?:\\.|[^'\\])*'?|`(?:\\.|[^`\\])*`?))
  | (?P<number>\d+(?:\.\d+)?(?![\w.]))
  | (?P<name>[A-Za-z_$][\w$]*)
  | (?P<op>===|!==|\*\*=?|//=?|<<=?|>>=?|[<>!=+\-*/%&|^]=|=>|->|&&|\|\||\+\+|--|[^\s\w])
  | (?P<space>\s+)
""", re.X)
_NUMBER = re.compile(r"(?<![\w.])\d+(?:\.\d+)?(?![\w.])")
_BOUNDARY = {"<": "<=", "<=": "<", ">": ">=", ">=": ">"}
_ARITHMETIC = {"*": "/", "/": "*", "+": "-", "-": "+"}
_ENDS_OPERAND = frozenset(")]}")


_SLASHES = frozenset({".js", ".mjs", ".cjs", ".jsx", ".ts", ".tsx", ".java", ".c", ".h", ".cc",
                      ".cpp", ".go", ".rs", ".cs", ".kt", ".swift", ".scala", ".dart", ".php"})


def comment_for(path: str) -> str:
    """What starts a comment in ``path``'s language: ``//`` for the C family, else ``#``."""
    dot = path.rfind(".")
    return "//" if dot >= 0 and path[dot:].lower() in _SLASHES else "#"


@dataclass(frozen=True)
class Mutant:
    """One mechanical edit of a line: the new text and the operator that made it."""

    text: str
    operator: str


def task_numbers(task: str, limit: int = 6) -> list[str]:
    """The numbers ``task`` states, in order, each once: a date's parts aside, a thousands
    separator dropped (``1,000`` is 1000)."""
    plain = re.sub(r"\d{4}-\d{2}-\d{2}", " ", task)
    plain = re.sub(r"(?<![\w.,])(\d{1,3}(?:,\d{3})+)(?![\w,]|\.\d)",
                   lambda m: m.group(1).replace(",", ""), plain)
    out: list[str] = []
    for m in _NUMBER.finditer(plain):
        if m.group() not in out:
            out.append(m.group())
    return out[:limit]


def mutants(line: str, *, comment: str = "#", numbers: tuple[str, ...] = (),
            limit: int = LIMIT) -> list[Mutant]:
    """Up to ``limit`` different edits of ``line`` (its indentation kept), by operator in the
    order the module names. ``comment`` starts a comment in the line's language (``#``,
    ``//``); ``numbers`` are the task's own (``task_numbers``)."""
    tokens = _tokens(line, comment)
    made: dict[str, str] = {}
    for operator, edits in (("boundary", _swapped(tokens, _BOUNDARY)),
                            ("arithmetic", _swapped(tokens, _ARITHMETIC)),
                            ("offset", _offset(tokens)),
                            ("number", _numbers(tokens, numbers)),
                            ("operand", _operand(tokens))):
        for start, end, new in edits:
            text = line[:start] + new + line[end:]
            if text != line and text not in made:
                made[text] = operator
    return [Mutant(t, o) for t, o in made.items()][:limit]


def swaps(line: str, below: str | None = None, *, comment: str = "#") -> list[tuple[str, str]]:
    """Two names used as values (as ``operand`` takes them) exchanged between ``line`` and
    ``below``, the next line: a name of one that the other does not mention for one of the
    other's, every use of each. Each as the two lines become.

    Not within one line: that turns ``a > b`` into ``b > a``, and on the builtin suite's
    sh-max it passed the tests by computing the smallest argument (bench/mutants.py)."""
    if below is None:
        return []
    tokens, under = _tokens(line, comment), _tokens(below, comment)
    own, theirs = _values(tokens), _values(under)
    here, there = {t.text for t in tokens}, {t.text for t in under}
    out = [(_renamed(line, tokens, {a: b}), _renamed(below, under, {b: a}))
           for a in own for b in theirs if a not in there and b not in here]
    return list(dict.fromkeys(out))


def chosen(current: str | None, new: str | None, span: Span, named: int | None
           ) -> tuple[int, ...]:
    """The lines of ``span`` a one-line reply chose, in order, each once: the one it named
    (``named``) and those its edit changed (``new``: the file as the reply makes it of
    ``current``). Where mechanical edits go when its change fails."""
    out: list[int] = [] if named is None else [named]
    if current is not None and new is not None:
        old_lines, new_lines = current.splitlines(), new.splitlines()
        for tag, i1, i2, _, _ in difflib.SequenceMatcher(
                None, old_lines, new_lines, autojunk=False).get_opcodes():
            if tag != "equal":
                out += range(i1 + 1, max(i2, i1 + 1) + 1)
    return tuple(dict.fromkeys(k for k in out if span.start <= k <= span.end))


def place_lines(span: Span, lines: tuple[int, ...], most: int) -> tuple[int, ...]:
    """``lines``, then the other lines of ``span`` when it has at most ``most`` lines."""
    rest = range(span.start, span.end + 1) if 0 < span.end - span.start + 1 <= most else ()
    return tuple(dict.fromkeys([*lines, *rest]))


def pieces(current: str, span: Span, lines: tuple[int, ...], *, numbers: tuple[str, ...] = (),
           limit: int = LIMIT) -> list[tuple[str, str]]:
    """Each mechanical edit of ``lines`` of ``current`` as a one-line reply reads it (``N:
    text``, two such lines for a swap with the line below or above; ``oneline.line_edit``),
    with its operator: up to ``limit`` a line, a line's own edits before its swaps, each
    edit once."""
    text = current.splitlines()
    comment = comment_for(span.path)
    out: dict[str, str] = {}
    for n in lines:
        if not 1 <= n <= len(text):
            continue
        made = [(f"{n}: {m.text.strip()}", m.operator)
                for m in mutants(text[n - 1], comment=comment, numbers=numbers, limit=limit)]
        for k in (n, n - 1):  # with the line below, then the line above
            if span.start <= k < min(span.end, len(text)):
                made += [(f"{k}: {new.strip()}\n{k + 1}: {under.strip()}", "swap")
                         for new, under in swaps(text[k - 1], text[k], comment=comment)]
        for said, operator in [m for m in made if m[0] not in out][:limit]:
            out[said] = operator
    return list(out.items())


@dataclass(frozen=True)
class _Tok:
    kind: str
    text: str
    start: int
    end: int


def _tokens(line: str, comment: str) -> list[_Tok]:
    """``line``'s tokens up to a comment, spaces left out."""
    out: list[_Tok] = []
    at = 0
    while at < len(line):
        if line.startswith(comment, at):
            break
        m = _TOKEN.match(line, at)
        if m is None:  # a character no token takes: left as it is
            at += 1
            continue
        kind = m.lastgroup or "op"
        if kind != "space":
            out.append(_Tok(kind, m.group(), m.start(), m.end()))
        at = m.end()
    return out


def _operand_before(tokens: list[_Tok], i: int) -> bool:
    """Whether token ``i`` follows an operand (so an operator there is binary)."""
    if i == 0:
        return False
    prev = tokens[i - 1]
    return (prev.kind in ("number", "string") or prev.text in _ENDS_OPERAND
            or (prev.kind == "name" and prev.text not in _KEYWORDS))


def _swapped(tokens: list[_Tok], table: dict[str, str]) -> list[tuple[int, int, str]]:
    """Each binary operator of ``table`` replaced by its counterpart there."""
    return [(t.start, t.end, table[t.text]) for i, t in enumerate(tokens)
            if t.kind == "op" and t.text in table and _operand_before(tokens, i)
            and i + 1 < len(tokens)]


def _offset(tokens: list[_Tok]) -> list[tuple[int, int, str]]:
    """A binary ``+ 1`` / ``- 1`` dropped (``size - 1`` -> ``size``)."""
    out = []
    for i, t in enumerate(tokens[:-1]):
        nxt = tokens[i + 1]
        if (t.text in "+-" and t.kind == "op" and nxt.text == "1"
                and _operand_before(tokens, i)):
            out.append((tokens[i - 1].end, nxt.end, ""))
    return out


def _numbers(tokens: list[_Tok], numbers: tuple[str, ...]) -> list[tuple[int, int, str]]:
    out = []
    for t in tokens:
        if t.kind != "number":
            continue
        if "." not in t.text:
            value = int(t.text)
            out += [(t.start, t.end, str(value + 1))]
            out += [(t.start, t.end, str(value - 1))] if value > 0 else []
        out += [(t.start, t.end, n) for n in numbers if n != t.text]
    return out


def _is_value(tokens: list[_Tok], i: int) -> bool:
    """Whether token ``i`` is a name used as a value: not a call, an attribute, a key, what a
    line assigns, a step, a declared name or a parameter's type."""
    t = tokens[i]
    if t.kind != "name" or t.text in _KEYWORDS:
        return False
    prev = tokens[i - 1].text if i else ""
    nxt = tokens[i + 1].text if i + 1 < len(tokens) else ""
    if prev in (".", "++", "--") or nxt in ("(", ".", "=", "=>", "?.", "++", "--"):
        return False  # a call, an attribute, what is assigned, a step
    if nxt == "[" or nxt == ":" and prev in ("{", ",", "("):
        return False  # indexed, a key or an annotated parameter (not a slice's bound)
    if prev == ":" and nxt in (",", ")", "="):
        return False  # a parameter's type
    # a line's first name, or a name declared (`const total`, `int n`)
    return not (not prev or prev in _DECLARING or prev.isidentifier() and prev not in _KEYWORDS)


def _operand(tokens: list[_Tok]) -> list[tuple[int, int, str]]:
    """A name used as a value (``_is_value``), one less and one more."""
    if _declares(tokens):
        return []
    out = []
    for i, t in enumerate(tokens):
        if _is_value(tokens, i):
            out += [(t.start, t.end, f"({t.text} - 1)"), (t.start, t.end, f"({t.text} + 1)")]
    return out


def _declares(tokens: list[_Tok]) -> bool:
    """Whether the line declares a function or class (``def f(a, b):``): its names are
    parameters, not values."""
    head = [t.text for t in tokens[:2]]
    return bool(head) and (head[0] in ("def", "function", "class")
                           or head == ["async", "def"] or head == ["async", "function"])


def _values(tokens: list[_Tok]) -> list[str]:
    """The names used as values in ``tokens``, in order, each once."""
    if _declares(tokens):
        return []
    return list(dict.fromkeys(t.text for i, t in enumerate(tokens) if _is_value(tokens, i)))


def _renamed(line: str, tokens: list[_Tok], names: dict[str, str]) -> str:
    """``line`` with each use as a value of a name of ``names`` given its new name."""
    for i in reversed(range(len(tokens))):
        t = tokens[i]
        if t.text in names and _is_value(tokens, i):
            line = line[:t.start] + names[t.text] + line[t.end:]
    return line
