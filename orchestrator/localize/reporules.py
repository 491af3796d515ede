"""The target repository's own instructions for agents (``AGENTS.md``, ``CLAUDE.md``), quoted to
the planner and the builder: capped, each file cited by path and line range.

Read from the run's commit, never the builder's worktree, so every attempt and a resumed run see
the same text. A ``CLAUDE.md`` that repeats ``AGENTS.md`` (or only points at it with
``@AGENTS.md``) is quoted once.
"""

from __future__ import annotations

from collections.abc import Callable

from orchestrator.config.prompts import text

RULE_FILES = ("AGENTS.md", "CLAUDE.md")
CHARS_PER_TOKEN = 4  # a cap, not a count: generous for prose


def repo_rules(read: Callable[[str], list[str] | None], *, max_tokens: int) -> str:
    """The quoted rules for a task template (``$repo_rules``), or "" when there are none.

    ``read(path)`` gives a file's lines, or None when there is no such file."""
    if max_tokens <= 0:
        return ""
    budget = max_tokens * CHARS_PER_TOKEN
    seen: list[str] = []
    blocks: list[str] = []
    names: list[str] = []
    for path in RULE_FILES:
        found = read(path)
        if found is None:
            continue
        body = "\n".join(found).strip()
        if not body or body in seen or _points_at(body, names):
            continue
        seen.append(body)
        block = _quote(path, body, budget)
        if block is None:
            break
        blocks.append(block)
        names.append(path)
        budget -= len(block)
    if not blocks:
        return ""
    return text("pipeline", "repo_rules", files=", ".join(names), body="\n".join(blocks)) + "\n"


def _points_at(body: str, names: list[str]) -> bool:
    """A file that only imports one already quoted (Claude Code's ``@AGENTS.md``)."""
    return bool(names) and body.split() == [f"@{names[0]}"]


def _quote(path: str, body: str, budget: int) -> str | None:
    """``path``'s first lines that fit ``budget`` characters, with the line range they cover."""
    lines = body.splitlines()
    kept: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) + 1 > budget:
            break
        kept.append(line)
        used += len(line) + 1
    if not kept:
        return None
    cut = text("pipeline", "repo_rules_cut") if len(kept) < len(lines) else ""
    return text("pipeline", "repo_rules_file", path=path, start=1, end=len(kept),
                total=len(lines), cut=cut, text="\n".join(kept))
