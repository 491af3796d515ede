"""Computed replies for the bundled scenarios: simulated agents that act on what they were sent.

``explorer-cite`` searches for the term the question names (in backticks, else its longest
word), reads the first hit and submits a claim that cites exactly the line it found, which is
what a well-behaved explorer does. The others misbehave on purpose, for tests.
"""

from __future__ import annotations

import json
import re

from .scenario import ChatRequestView, Reply, ToolCallSpec, register_behavior

_HIT = re.compile(r"^(?P<path>[^\s:][^:]*):(?P<line>\d+): (?P<text>.*)$", re.M)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_STOP = {"where", "which", "what", "does", "defined", "function", "test", "tests", "file", "the"}


def _question(req: ChatRequestView) -> str:
    for message in req.messages:
        if message.get("role") == "user" and isinstance(message.get("content"), str):
            m = re.search(r"Question:\s*(.+)", message["content"])
            if m:
                return m.group(1).strip()
    return req.last_user_text()


def search_term(question: str) -> str:
    quoted = re.findall(r"`([^`]+)`", question)
    if quoted:
        return quoted[0]
    words = [w for w in _WORD.findall(question) if w.lower() not in _STOP]
    return max(words, key=len) if words else question.split()[0]


def _call(name: str, **arguments: object) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=dict(arguments))])


@register_behavior("explorer-cite")
def explorer_cite(req: ChatRequestView) -> Reply:
    question = _question(req)
    results = req.tool_results()
    if not results:
        return _call("search", pattern=search_term(question), fixed_strings=True)
    hits = [m for _, _, content in results for m in _HIT.finditer(content)]
    if not hits:
        return _call("submit", answer=f"Nothing in the repository matches {search_term(question)!r}.", claims=[])
    first = hits[0]
    line = int(first.group("line"))
    if len(results) == 1:
        return _call("read", path=first.group("path"), start_line=max(1, line - 2), end_line=line + 2)
    claim = {
        "text": f"{search_term(question)} appears in {first.group('path')} at line {line}.",
        "citations": [{"path": first.group("path"), "start_line": line, "end_line": line,
                       "quote": first.group("text").strip()}],
    }
    return _call("submit", answer=f"See {first.group('path')}:{line}.", claims=[claim])


@register_behavior("explorer-no-tools")
def explorer_no_tools(req: ChatRequestView) -> Reply:
    """Submits a plausible finding without having looked at anything."""
    claim = {"text": "The entry point is main.", "citations": [
        {"path": "README.md", "start_line": 1, "end_line": 1, "quote": "#"}]}
    return _call("submit", answer="It is in main.", claims=[claim])


@register_behavior("explorer-fabricate")
def explorer_fabricate(req: ChatRequestView) -> Reply:
    """Searches once, then cites a file that does not exist next to one real hit."""
    results = req.tool_results()
    if not results:
        return _call("search", pattern=search_term(_question(req)), fixed_strings=True)
    hits = list(_HIT.finditer(results[0][2]))
    citations = [{"path": "src/imaginary.py", "start_line": 10, "end_line": 12, "quote": "def x():"}]
    if hits:
        h = hits[0]
        citations.append({"path": h.group("path"), "start_line": int(h.group("line")),
                          "end_line": int(h.group("line")), "quote": h.group("text").strip()})
    claims = [{"text": "invented", "citations": citations[:1]}, {"text": "real", "citations": citations}]
    return Reply(tool_calls=[ToolCallSpec(name="submit", arguments=json.dumps(
        {"answer": "mixed", "claims": claims}))])
