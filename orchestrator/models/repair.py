"""JSON that small models actually write, made valid before it costs a turn.

Fast, small models write tool calls and submissions with trailing commas, single quotes,
Python literals (``True``, ``None``), raw newlines inside strings, prose around the object, or
an object cut off by the output limit. ``json-repair`` (a library made for exactly this) turns
each into the object meant. A cut-off object is repaired only when the cut fell between values:
what the model finished writing is kept, but a value it never finished (a string cut in the
middle, a key with no value) is not invented, so such a reply stays unparsed and the session
says so. What is not an object at all stays as it was, for the session's own error.
"""

from __future__ import annotations

import json
from typing import Any

import json_repair


def loads(text: str) -> Any:
    """``text`` as JSON, repaired when it is not valid; ``None`` when no object is in it or it
    was cut inside a value."""
    try:
        return json.loads(text)
    except (json.JSONDecodeError, TypeError):
        pass
    if not isinstance(text, str) or not repairable(text):
        return None
    try:
        value = json_repair.repair_json(text, return_objects=True, skip_json_loads=True)
    except Exception:  # the library's own failure on garbage: treat as nothing found
        return None
    return value if isinstance(value, dict | list) else None


def value(text: Any) -> Any:
    """What a model wrote as JSON: the value ``text`` holds (repaired as ``loads`` does), else
    ``text`` itself; what is not a string, as it is."""
    if not isinstance(text, str):
        return text
    loaded = loads(text)
    return text if loaded is None else loaded


def arguments(text: str) -> str:
    """A tool call's arguments as valid JSON text: as written when they parse, repaired when
    they are an object a model spoilt, else unchanged, so the tool's error says why."""
    if not text or not text.strip():
        return text
    try:
        json.loads(text)
        return text
    except json.JSONDecodeError:
        pass
    value = loads(text)
    return json.dumps(value) if isinstance(value, dict) else text


def repairable(text: str) -> bool:
    """Whether the first object in ``text`` closes, or was cut between two values (not inside a
    string, not after a key or a colon)."""
    start = text.find("{")
    if start < 0:
        return False
    depth, quote, escaped, last = 0, "", False, ""
    for ch in text[start:]:
        if quote:
            if escaped:
                escaped = False
            elif ch == "\\":
                escaped = True
            elif ch == quote:
                quote, last = "", ch
            continue
        if ch in "\"'":
            quote = ch
        elif ch in "{[":
            depth += 1
        elif ch in "}]":
            depth -= 1
            if depth == 0:
                return True
        if not ch.isspace():
            last = ch
    return not quote and last not in (":", "{") and not _dangling_key(text)


def _dangling_key(text: str) -> bool:
    """``{"a": 1, "b"`` ends with a key whose value never came."""
    tail = text.rstrip()
    if not tail.endswith(('"', "'")):
        return False
    before = tail[:-1]
    opening = max(before.rfind('"'), before.rfind("'"))
    return opening >= 0 and before[:opening].rstrip().endswith((",", "{"))
