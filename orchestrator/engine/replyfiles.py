"""A one-shot reply's files: fenced blocks under the names of files the prompt showed.

``parse_files`` reads ``path`` + fence pairs out of a model's reply (the name on the fence line
or one of the two lines before it, or a comment naming it as the block's first line);
``stalled`` finds a reply that named a file and stopped; ``relabelled`` moves a block put under
the wrong name to the shown file it is; ``splice`` and ``spliced`` put a function given alone
into its file; ``fenced`` writes a file the way the prompts show one.
"""

from __future__ import annotations

import difflib
import re
from collections import Counter
from collections.abc import Mapping, Sequence

from orchestrator.engine.places import defined
from orchestrator.localize.localization import Span

_FENCE = re.compile(r"```[^\n`]*\n(.*?)```", re.S)
_PATHISH = re.compile(r"[\w./-]+\.\w+")
# a block's first line that only names its file, as a comment: `# a.py`, `// a.js`, `-- a.sql`,
# `/* a.css */`, `<!-- a.html -->`, or the bare path
_LABEL = re.compile(
    r"\s*(?:#|//|--|/\*|<!--)?\s*(?:file:\s*)?`?([\w./-]+\.\w+)`?\s*(?:\*/|-->)?\s*", re.I)


def parse_files(reply: str, known: Mapping[str, str] | Sequence[str]) -> dict[str, str]:
    """``path -> new content`` for each fenced block whose path (on the fence line or one of
    the two lines before it) is one of ``known``; other blocks are ignored. A block whose
    first line is only a comment naming a known file (live, the 1.5B opened a python fence
    with ``# catalog/query/ordering.py`` over the right fix, and nothing else named it) is
    that file's, without that line — unless the file itself starts with it (``known`` a
    mapping of the shown texts); a block holding only a path is no file."""
    out: dict[str, str] = {}
    for m in _FENCE.finditer(reply or ""):
        before = reply[: m.start()].splitlines()[-2:] + [reply[m.start():].split("\n", 1)[0]]
        tokens = [t for line in before for t in _PATHISH.findall(line)]
        path = next(filter(None, (_known(t, known) for t in reversed(tokens))), None)
        body = m.group(1)
        first, _, rest = body.partition("\n")
        label = _LABEL.fullmatch(first)
        named = _known(label.group(1), known) if label else None
        if named is not None and rest.strip() and path in (None, named):
            original = known.get(named) if isinstance(known, Mapping) else None
            own = original is not None and original.partition("\n")[0].strip() == first.strip()
            path, body = named, body if own else rest
        if path is not None:
            out[path] = body
    return out


_FENCE_MARK = re.compile(r"```[\w+-]*")


def stalled(reply: str, known: Mapping[str, str] | Sequence[str]) -> str | None:
    """The file a reply named and then stopped at: nothing in it but fences and one of
    ``known``'s paths (live, the 1.5B answered "```", the path, "```", "```" and ended, 12-17
    tokens, on the first one-shot of explore-needed tasks at temperature 0)."""
    words = _FENCE_MARK.sub(" ", reply or "").split()
    return _known(words[0], known) if len(words) == 1 else None


def _known(token: str, known: Mapping[str, str] | Sequence[str]) -> str | None:
    """``token`` as one of ``known``'s paths, once the marks around it and a ``./`` are off."""
    path = token.strip("`*:#'\"").removeprefix("./")
    return path if path in known else None


RELABEL_MIN = 0.6  # a block this like another shown file, and
RELABEL_MARGIN = 0.3  # this much more like it than the file it names, is that file's


def relabelled(changed: dict[str, str], shown: Mapping[str, str]
               ) -> tuple[dict[str, str], list[str]]:
    """Blocks put under the wrong name, moved to the file they are: live, the 1.5B answered
    ``listing.py`` over the text of ``paging.py`` with the right fix in it, and the listing
    module, overwritten, broke every import. Judged by lines in common (difflib), each block
    against every shown file; two blocks claiming one file keep the names they were given."""
    moved: dict[str, str] = {}
    for path, body in changed.items():
        lines = body.splitlines()
        like = {p: difflib.SequenceMatcher(None, lines, text.splitlines(), autojunk=False).ratio()
                for p, text in shown.items()}
        own = like.pop(path, 0.0)
        best = max(like, key=like.__getitem__, default=None)
        if best is not None and like[best] >= RELABEL_MIN and like[best] >= own + RELABEL_MARGIN:
            moved[path] = best
    targets = Counter(moved.values())
    out: dict[str, str] = {}
    notes: list[str] = []
    for path, body in changed.items():
        to = moved.get(path)
        if to is None or targets[to] > 1 or (to in changed and to not in moved):
            out.setdefault(path, body)
            continue
        out[to] = body
        notes.append(f"the block named {path} holds {to}'s text: written to {to}")
    return out, notes


def fenced(path: str, body: str) -> str:
    """A file as the prompts show it: its path, then its text in a fence."""
    return f"{path}\n```\n{body}```" if body.endswith("\n") else f"{path}\n```\n{body}\n```"


def splice(current: str, span: Span, block: str) -> str | None:
    """``current`` with ``span``'s lines replaced by ``block`` when ``block`` is that one
    function's new text (it opens with the same definition and leaves out most of what lies
    outside it), re-indented to the original; None when it is not (a whole file)."""
    lines = current.splitlines(keepends=True)
    if not 0 < span.start <= span.end <= len(lines):
        return None
    head = defined(lines[span.start - 1])
    new = block.splitlines(keepends=True)
    first = next((line for line in new if line.strip()), "")
    opens = defined(first)
    if head is None or opens is None or opens != head:
        return None
    outside = [line for line in lines[:span.start - 1] + lines[span.end:] if line.strip()]
    if not outside or 2 * sum(line in new for line in outside) > len(outside):
        return None  # the function is the whole file, or the reply is the whole file
    want = len(lines[span.start - 1]) - len(lines[span.start - 1].lstrip())
    have = len(first) - len(first.lstrip())
    if have < want:
        new = [" " * (want - have) + line if line.strip() else line for line in new]
    if new and not new[-1].endswith("\n"):
        new[-1] += "\n"
    return "".join(lines[:span.start - 1] + new + lines[span.end:])


def spliced(changed: dict[str, str], focus: Span, current: str | None) -> dict[str, str]:
    """A reply's blocks, the ``focus`` function given alone put into its file (``current``:
    that file now, None when it cannot be read); a block that is neither that function nor
    the whole file (a fragment) is left out, never written as the file."""
    if focus.path not in changed or current is None:
        return changed
    block = changed[focus.path]
    whole = splice(current, focus, block)
    if whole is not None:
        return {**changed, focus.path: whole}
    kept = [line for line in current.splitlines() if line.strip()]
    if kept and 2 * sum(line in block for line in kept) < len(kept):
        return {p: b for p, b in changed.items() if p != focus.path}  # a fragment
    return changed
