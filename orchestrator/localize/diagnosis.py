"""A diagnosis checked mechanically: the line a planner believes wrong must exist in a file the
failure points at, and the text it quotes must be that line's.

Pure. ``check`` returns why a diagnosis is refused ("" when it holds): a small planner's
"line 12 of stats.py" is handed to the builder only when line 12 of stats.py reads what it
quoted; an invented file, a line past the end or a misquote is dropped, never passed on.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

MIN_QUOTE = 3  # characters (spaces aside) a quote must have to identify a line
Reader = Callable[[str], str | None]


def _norm(text: str) -> str:
    return " ".join(text.split())


def check(path: str, line: int, quote: str, *, files: Sequence[str], read: Reader) -> str:
    """Why the diagnosis ``path`` line ``line`` reading ``quote`` does not hold ("" if it
    does); ``files`` are the files it may name (the ones the failure pinned or localised)."""
    path = path.strip().removeprefix("./")
    if path not in files:
        named = ", ".join(files) or "none"
        return f"{path} is not a file the failure points at (those are: {named})"
    body = read(path)
    if body is None:
        return f"{path} cannot be read"
    lines = body.splitlines()
    if not 0 < line <= len(lines):
        return f"{path} has {len(lines)} lines, there is no line {line}"
    said, there = _norm(quote.strip().strip("`")), _norm(lines[line - 1])
    if len(said.replace(" ", "")) < MIN_QUOTE:
        return f"the quote {quote!r} is too short to identify line {line}"
    if said not in there:
        return f"line {line} of {path} reads {there!r}, not {said!r}"
    return ""
