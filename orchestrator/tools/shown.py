"""What a session was shown of the repository's files, read back from its messages.

Three formats carry file lines to a model, and each is parsed here: ``read``'s numbered lines
under its ``path (lines a-b of n):`` header, ``search``'s ``path:line: text`` matches, and the
candidate windows an explorer is given before it asks anything (``[W1] path:a-b (symbol)``
followed by ``read``'s line format). Two readers need this: citations are grounded in it (a
grammar lets a weak model cite only shown lines, ``models/toolmode.py``) and checked against it
(a claim may cite only what its session was shown, ``evidence/cite.py``).
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Any

READ_HEADER = re.compile(r"^(\S[^\n]*?) \(lines \d+-\d+ of \d+\):$")
WINDOW_HEADER = re.compile(r"^\[(W\d+)\] (\S+?):(\d+)-(\d+)(?: \(.*\))?$")
NUMBERED = re.compile(r"^\s*(\d+)\| ?(.*)$")
SEARCH_LINE = re.compile(r"^([^\s:]+):(\d+): ?(.*)$")
GAP = re.compile(r"^\s*…$")

Where = tuple[str, int]  # (path, line)


def lines_in(text: str, *, tool: bool) -> Iterable[tuple[Where, str, str]]:
    """``((path, line), text, window id)`` for every file line ``text`` shows. A tool result
    may hold ``read`` or ``search`` output; any message may hold candidate windows."""
    path: str | None = None
    window = ""
    for line in text.splitlines():
        head = WINDOW_HEADER.match(line)
        if head:
            path, window = head.group(2), head.group(1)
            continue
        if tool and (read := READ_HEADER.match(line)):
            path, window = read.group(1), ""
            continue
        numbered = NUMBERED.match(line)
        if numbered and path:
            yield (path, int(numbered.group(1))), numbered.group(2), window
            continue
        if path and window and GAP.match(line):
            continue  # lines left out of a window
        match = SEARCH_LINE.match(line) if tool else None
        if match:
            yield (match.group(1), int(match.group(2))), match.group(3), ""
        path, window = None, ""


def shown(messages: Iterable[Mapping[str, Any]]) -> dict[Where, tuple[str, str]]:
    """Every file line the messages showed, the most recently shown last: ``(path, line) ->
    (text, window id or "")``. Lines of tool results and of the user's messages (where candidate
    windows come) count; what the model itself wrote does not."""
    found: dict[Where, tuple[str, str]] = {}
    for m in messages:
        role = m.get("role")
        if role not in ("tool", "user"):
            continue
        for where, text, window in lines_in(str(m.get("content") or ""), tool=role == "tool"):
            if text.strip():
                window = window or found.get(where, ("", ""))[1]
                found.pop(where, None)
                found[where] = (text, window)
    return found


def windows(messages: Iterable[Mapping[str, Any]]) -> dict[str, tuple[str, list[int]]]:
    """The candidate windows the messages showed: id -> (path, its line numbers)."""
    out: dict[str, tuple[str, list[int]]] = {}
    for (path, line), (_, window) in shown(messages).items():
        if window:
            out.setdefault(window, (path, []))[1].append(line)
    return out


def places(messages: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The places a session was shown, as citations a grammar can offer a weak model to pick:
    each ``read`` (its path and the lines it showed) and each ``search`` match (its line and
    text), the most recent first, then the candidate windows in their rank order. A read's or a
    window's quote is empty: the line that backs the claim is copied from it at submit
    (``evidence/cite.py``)."""
    shown_reads: list[dict[str, Any]] = []
    windows: list[dict[str, Any]] = []
    for m in messages:
        role = m.get("role")
        if role not in ("tool", "user"):
            continue
        blocks: dict[tuple[str, str], list[int]] = {}
        for (path, line), text, window in lines_in(str(m.get("content") or ""),
                                                   tool=role == "tool"):
            if not text.strip():
                continue
            if window or (role == "tool" and _is_read_line(m, path)):
                blocks.setdefault((path, window), []).append(line)
            elif role == "tool":
                shown_reads.append({"path": path, "start_line": line, "end_line": line,
                                    "quote": text.strip()})
        for (path, window), lines in blocks.items():
            place = {"path": path, "start_line": min(lines), "end_line": max(lines), "quote": ""}
            (windows if window else shown_reads).append(place)
    unique = list(dict.fromkeys(_key(p) for p in [*reversed(shown_reads), *windows]))
    by_key = {_key(p): p for p in [*shown_reads, *windows]}
    return [by_key[k] for k in unique]


def _is_read_line(message: Mapping[str, Any], path: str) -> bool:
    return f"{path} (lines " in str(message.get("content") or "")


def _key(place: Mapping[str, Any]) -> tuple[str, int, int, str]:
    return (place["path"], place["start_line"], place["end_line"], place["quote"])
