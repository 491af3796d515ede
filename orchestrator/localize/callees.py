"""Following calls: the definitions a shown window calls, for a bug two modules away.

A task names what a user sees (``run_payroll``, ``weeklySummary``, a CLI command); the bug is
often in a helper the named function reaches through a call or two (``run_payroll`` ->
``make_payslip`` -> ``to_cents``), whose name the task never spells, so no term search finds
it. Here the names a window calls are read off its lines (``called``), each one's definition is
found with one search for its ``def``/``function``/``class``/assignment line
(``definition_regex``), and the definitions are ranked by the task's own words they hold (the
helper that rounds holds "round" and "cent"), one hop above two. Pure helpers: the retriever
(``retrieve.Retriever.followed``) does the searching and makes the windows.
"""

from __future__ import annotations

import keyword
import re
from collections.abc import Iterable
from typing import Protocol, TypeVar

# a name followed by "(", and whether a dot comes before it (a method: ``week.entries.append(``)
_CALL = re.compile(r"(\.?)\b([A-Za-z_$][\w$]*)\s*\(")
# calls of the language or its standard library that are never the task's code
_COMMON = frozenset("""
    print len sum min max abs str int float bool list dict set tuple sorted reversed range
    enumerate zip map filter isinstance issubclass getattr setattr hasattr super type repr
    format open iter next round any all append extend insert pop get items keys values join
    split strip rstrip lstrip replace startswith endswith lower upper encode decode read write
    update copy sort add remove Decimal quantize datetime date timedelta strftime strptime
    function require console log push slice map forEach reduce then catch toString parseInt
    parseFloat Number String Array Object Math Date JSON stringify parse Promise resolve reject
    assert assertEqual raise return if for while switch catch new typeof await async def class
    echo printf test local exit
""".split()) | frozenset(keyword.kwlist)
_COMMENT = re.compile(r"(?:^|\s)(?:#|//)")  # a comment to the line's end (Python, JS, shell)
MIN_NAME = 3  # shorter names (``f``, ``ok``) are too common to follow
PER_WINDOW = 6  # callees followed from one window, in the order it calls them
MAX_SEARCHES = 16  # definitions searched for one question (each a search of the tree)


def called(lines: Iterable[str], own: str = "") -> list[str]:
    """The names ``lines`` call, once each: not ``own`` (the window's own definition), not
    the language's common calls, not on a definition's line; plain calls (``statement_for(``)
    before methods (``parser.add_argument(``), which are more often a library's."""
    plain: list[str] = []
    methods: list[str] = []
    for line in lines:
        code = "" if line.lstrip().startswith("*") else _COMMENT.split(line, maxsplit=1)[0]
        if re.match(r"\s*(?:async\s+)?(?:def|function|class)\b", code):
            continue
        for dot, name in _CALL.findall(code):
            if name != own and len(name) >= MIN_NAME and name not in _COMMON:
                (methods if dot else plain).append(name)
    return list(dict.fromkeys([*plain, *methods]))[:PER_WINDOW]


def definition_regex(name: str) -> str:
    """The lines that define ``name``: ``def``/``class``/``function`` (exported or not), a
    ``const``/``let``/``var`` bound to it, or a method or property ``name(...) {``/``name:``."""
    n = re.escape(name)
    return (rf"\b(?:def|class|function)\s+{n}\b|\b(?:const|let|var)\s+{n}\s*=|"
            rf"^\s*(?:async\s+)?{n}\s*\([^)]*\)\s*\{{|^\s*{n}\s*:\s*(?:async\s+)?function\b")


def own_name(symbol: str) -> str:
    """The name a window's symbol defines (``def Cart.add`` -> ``add``)."""
    return symbol.split(" ", 1)[-1].rsplit(".", 1)[-1] if symbol else ""


class _Shown(Protocol):
    @property
    def path(self) -> str: ...

    @property
    def numbers(self) -> frozenset[int]: ...

    def render(self) -> str: ...


_W = TypeVar("_W", bound=_Shown)


def fill(chosen: list[_W], more: Iterable[_W], budget_chars: int, limit: int) -> list[_W]:
    """``chosen``, then as many of ``more`` as fit: no overlap, within the budget (rendered
    characters) and ``limit`` windows."""
    out = list(chosen)
    used = sum(len(w.render()) + 1 for w in out)
    for w in more:
        if len(out) >= limit:
            break
        size = len(w.render()) + 1
        if used + size > budget_chars or any(
                c.path == w.path and c.numbers & w.numbers for c in out):
            continue
        out.append(w)
        used += size
    return out
