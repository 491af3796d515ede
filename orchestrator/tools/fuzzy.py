"""Finding the text a small model meant to replace: exact first, then tolerant of the drift
such models produce (trailing spaces, a different indentation, blank lines dropped), and, when
nothing matches, the closest lines so the next try can copy them.

Pure functions over strings; ``edit.py`` does the file work.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass


@dataclass(frozen=True)
class Located:
    """Where ``old`` was found: character offsets of the match, and how ``new`` must be
    re-indented to fit (``indent`` replaces ``old_indent`` at the start of each line)."""

    start: int
    end: int
    how: str  # "exact", "whitespace" or "indentation"
    old_indent: str = ""
    indent: str = ""


@dataclass(frozen=True)
class Nearest:
    """The lines most like ``old`` (1-based, inclusive) and how alike they are (0..1)."""

    start_line: int
    end_line: int
    ratio: float


def locate(text: str, old: str) -> list[Located]:
    """Every place ``old`` matches ``text``: exactly, else line by line ignoring trailing
    whitespace and blank lines, else also ignoring a common indentation change."""
    exact = _exact(text, old)
    if exact:
        return exact
    for how in ("whitespace", "indentation"):
        found = _by_lines(text, old, how)
        if found:
            return found
    return []


def _exact(text: str, old: str) -> list[Located]:
    out, at = [], text.find(old)
    while at != -1:
        out.append(Located(at, at + len(old), "exact"))
        at = text.find(old, at + 1)
    return out


def _lines_with_offsets(text: str) -> list[tuple[int, str]]:
    out, pos = [], 0
    for line in text.splitlines(keepends=True):
        out.append((pos, line))
        pos += len(line)
    return out


def _key(line: str, how: str) -> str:
    return line.strip() if how == "indentation" else line.rstrip()


def _by_lines(text: str, old: str, how: str) -> list[Located]:
    want = [_key(ln, how) for ln in old.splitlines() if ln.strip()]
    if not want:
        return []
    lines = _lines_with_offsets(text)
    body = [(i, _key(ln, how)) for i, (_, ln) in enumerate(lines) if ln.strip()]
    found = []
    for k in range(len(body) - len(want) + 1):
        if [t for _, t in body[k:k + len(want)]] != want:
            continue
        first, last = body[k][0], body[k + len(want) - 1][0]
        start = lines[first][0]
        end = lines[last][0] + len(lines[last][1].rstrip("\r\n"))
        file_indent = _indent(lines[first][1])
        old_indent = _indent(next(ln for ln in old.splitlines() if ln.strip()))
        found.append(Located(start, end, how, old_indent, file_indent))
    return found


def _indent(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


def fit(new: str, where: Located) -> str:
    """``new`` re-indented the way the match was: the model's indentation of ``old`` becomes
    the file's, line by line; trailing newline handling follows the matched span."""
    if where.how == "exact":
        return new
    lines = new.rstrip("\n").split("\n") if where.how != "exact" else [new]
    if where.how == "indentation" and where.old_indent != where.indent:
        lines = [_reindent(ln, where.old_indent, where.indent) for ln in lines]
    return "\n".join(lines)


def _reindent(line: str, old: str, new: str) -> str:
    if not line.strip():
        return ""
    if line.startswith(old):
        return new + line[len(old):]
    return new + line.lstrip()  # less indented than the first line: keep it at the base


def nearest(text: str, old: str) -> Nearest | None:
    """The window of ``text``'s lines most like ``old``'s lines (ignoring indentation)."""
    want = [ln.strip() for ln in old.splitlines() if ln.strip()]
    lines = text.splitlines()
    if not want or not lines:
        return None
    size = min(len(want), len(lines))
    probe = "\n".join(want)
    best: Nearest | None = None
    stripped = [ln.strip() for ln in lines]
    for i in range(len(lines) - size + 1):
        window = "\n".join(stripped[i:i + size])
        matcher = difflib.SequenceMatcher(None, probe, window, autojunk=False)
        if matcher.real_quick_ratio() < (best.ratio if best else 0.0):
            continue
        ratio = matcher.ratio()
        if best is None or ratio > best.ratio:
            best = Nearest(i + 1, i + size, ratio)
    return best


def numbered(text: str, start: int, end: int, *, mark: tuple[int, int] | None = None) -> str:
    """Lines ``start``..``end`` of ``text`` as ``  12| code`` (``>`` marks lines in ``mark``)."""
    lines = text.splitlines()
    start, end = max(1, start), min(len(lines), end)
    out = []
    for n in range(start, end + 1):
        sep = ">" if mark and mark[0] <= n <= mark[1] else "|"
        out.append(f"{n:>4}{sep} {lines[n - 1]}")
    return "\n".join(out)
