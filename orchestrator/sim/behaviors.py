"""Computed replies for the bundled scenarios: simulated agents that act on what they were sent.

``explorer-cite`` searches for the term the question names (in backticks, else its longest
word; within the file the question names, "... in stats.py?"), reads the first hit and submits
a claim that cites exactly the line it found, which is what a well-behaved explorer does. The
others misbehave on purpose, for tests.
"""

from __future__ import annotations

import json
import re

from orchestrator.sim.scenario import ChatRequestView, Reply, ToolCallSpec, register_behavior

_HIT = re.compile(r"^(?P<path>[^\s:][^:]*):(?P<line>\d+): (?P<text>.*)$", re.M)
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]{2,}")
_STOP = {"where", "which", "what", "does", "defined", "function", "test", "tests", "file", "the"}
_IN_FILE = re.compile(r"\bin ([\w./-]+\.[A-Za-z]\w*)\b")


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
        where = _IN_FILE.search(question)
        scope = {"path": where.group(1)} if where else {}
        return _call("search", pattern=search_term(question), fixed_strings=True, **scope)
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
    term = search_term(_question(req))
    citations = [{"path": "src/imaginary.py", "start_line": 10, "end_line": 12, "quote": "def x():"}]
    if hits:
        h = hits[0]
        citations.append({"path": h.group("path"), "start_line": int(h.group("line")),
                          "end_line": int(h.group("line")), "quote": h.group("text").strip()})
    claims = [{"text": f"{term} is defined in src/imaginary.py", "citations": citations[:1]},
              {"text": f"{term} is used here", "citations": citations}]
    return Reply(tool_calls=[ToolCallSpec(name="submit", arguments=json.dumps(
        {"answer": "mixed", "claims": claims}))])


# --- long sessions: reading a big log, and the handoffs that carry the reading forward ------

_LEAD = re.compile(r"(\d+) lines before")
_WINDOW = re.compile(r"windows of (\d+) lines")
_READ_UP_TO = re.compile(r"read (\S+) up to line (\d+)")
_CALLED_READ = re.compile(r"read\(path=([^,)]+), start_line=(\d+), end_line=(\d+)")
_MASKED_SEARCH = re.compile(r'^\[masked: output of search\(.*read_artifact\("([^"]+)"\)', re.M)


def _read_ends(req: ChatRequestView, path: str) -> list[int]:
    """Where this conversation's reads of ``path`` ended, from its calls and any handoff."""
    ends = []
    for m in req.messages:
        for call in m.get("tool_calls") or []:
            fn = call.get("function", {})
            args = json.loads(fn.get("arguments") or "{}") if fn.get("name") == "read" else {}
            if args.get("path") == path and args.get("end_line"):
                ends.append(int(args["end_line"]))
        if m.get("role") == "user" and isinstance(m.get("content"), str):
            ends += [int(n) for p, n in _READ_UP_TO.findall(m["content"]) if p == path]
    return ends


def _texts(req: ChatRequestView) -> list[str]:
    users = [m["content"] for m in req.messages
             if m.get("role") == "user" and isinstance(m.get("content"), str)]
    return users + [content for _, _, content in req.tool_results()]


@register_behavior("log-scan")
def log_scan(req: ChatRequestView) -> Reply:
    """Finds `TERM` in `PATH` with one search, then reads the N lines before it in windows.

    The question names both in backticks ("Find the `ERROR` in `app.log` and read the 600 lines
    before it in windows of 30 lines"). Where it is comes from its own read calls or, after a
    fork, from the handoff ("read app.log up to line N", "app.log:E: ..."); a search result the
    session masked is read back with ``read_artifact``. It cites the line.
    """
    question = _question(req)
    term, path = (re.findall(r"`([^`]+)`", question) + ["ERROR", "app.log"])[:2]
    lead = int((_LEAD.findall(question) or [200])[0])
    window = int((_WINDOW.findall(question) or [40])[0])
    hit = re.compile(rf"{re.escape(path)}:(\d+): (.*{re.escape(term)}.*)$", re.M)
    found = [m for text in _texts(req) for m in hit.finditer(text)]
    if not found:
        masked = [m.group(1) for text in _texts(req) for m in _MASKED_SEARCH.finditer(text)]
        if masked:  # the session masked the search result: look at it again, as asked
            return _call("read_artifact", id=masked[-1])
        if any(name == "search" and not text.startswith("[masked: ")
               for _, name, text in req.tool_results()):
            return _call("submit", answer=f"No {term} in {path}.", claims=[])
        return _call("search", pattern=term, path=path, fixed_strings=True)
    line = int(found[0].group(1))
    ends = _read_ends(req, path)
    start = max(ends) + 1 if ends else max(1, line - lead)
    if start <= line:
        return _call("read", path=path, start_line=start, end_line=start + window - 1)
    shown = re.compile(rf"^\s*{line}\| (.*)$", re.M)
    quotes = [m.group(1) for _, _, text in req.tool_results() for m in shown.finditer(text)]
    if not quotes:
        return _call("read", path=path, start_line=line, end_line=line)
    claim = {"text": f"The {term} is at {path} line {line}.",
             "citations": [{"path": path, "start_line": line, "end_line": line,
                            "quote": quotes[-1].strip()}]}
    return _call("submit", answer=f"{path}:{line}: {quotes[-1].strip()}", claims=[claim])


@register_behavior("handoff-carry")
def handoff_carry(req: ChatRequestView) -> Reply:
    """A summarizer that carries forward search hits and how far each file was read."""
    prompt = req.last_user_text()
    task = prompt.split("Its task:", 1)[-1].split("Its transcript", 1)[0].strip()
    goal = next((line.strip() for line in task.splitlines() if line.strip()), "continue")
    hits = re.findall(r"^(?:- )?([\w./-]+\.\w+:\d+: .+)$", prompt, re.M)
    reached: dict[str, int] = {}
    for path, _start, end in _CALLED_READ.findall(prompt):
        reached[path] = max(reached.get(path, 0), int(end))
    for path, end in _READ_UP_TO.findall(prompt):
        reached[path] = max(reached.get(path, 0), int(end))
    facts = list(dict.fromkeys(hits)) + [f"read {p} up to line {n}" for p, n in reached.items()]
    nxt = "; ".join(f"read {p} from line {n + 1}" for p, n in reached.items())
    return _call("submit", goal=goal, facts=facts, remaining=["finish the task"], next_step=nxt)
