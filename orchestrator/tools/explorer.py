"""The explorer's toolbox: the read-only functions of ``search.py`` and ``gitread.py`` as tools.

Argument models are strict (unknown fields are refused), and each description tells a model how
to use the tool well: search to find, read to quote, cite what was read.
"""

from __future__ import annotations

import functools
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.tools import gitread
from orchestrator.tools.base import Tool
from orchestrator.tools.reading import read
from orchestrator.tools.search import list_files, search
from orchestrator.tools.secretfiles import DEFAULT, SecretFiles

MAX_BYTES = 20_000  # what one call returns by default
MAX_LINES = 400
MIN_LINES = 60


class _Args(BaseModel):
    model_config = ConfigDict(extra="forbid")


class SearchArgs(_Args):
    pattern: str = Field(min_length=1, description="Rust regex (or literal with fixed_strings).")
    path: str | None = Field(None, description="Directory or file to search in (repo-relative).")
    glob: str | None = Field(None, description="File glob such as '*.py' or 'src/**/*.ts'.")
    fixed_strings: bool = Field(False, description="Treat pattern as literal text.")
    ignore_case: bool = False
    context: int = Field(0, ge=0, le=10, description="Lines of context around each match.")


class ReadArgs(_Args):
    path: str = Field(description="Repo-relative file path.")
    start_line: int = Field(1, ge=1)
    end_line: int | None = Field(None, ge=1)


class ListArgs(_Args):
    glob: str | None = Field(None, description="File glob such as '*.md' or 'docs/**'.")
    path: str | None = Field(None, description="Directory to list (repo-relative).")


def explorer_tools(
    root: Path, *, git_root: Path | None = None, history: gitread.GitHistory | None = None,
    max_bytes: int = MAX_BYTES, secrets: SecretFiles = DEFAULT,
) -> list[Tool]:
    """The read-only tools an explorer gets for the tree at ``root`` (plus git history).

    ``history`` says where git history comes from; ``git_root`` is a shorthand for a trusted
    repository's own history at HEAD. ``max_bytes`` caps what one call returns (a small model's
    window is ~8k tokens: one read of 400 lines would fill half of it). ``secrets`` are the
    files no tool reads; git-ignored files are not read either (search and list skip them).
    """
    lines = max(MIN_LINES, min(MAX_LINES, max_bytes // 40))
    matches = max(20, min(100, max_bytes // 120))
    if history is None and git_root is not None:
        history = gitread.GitHistory(Path(git_root))
    ignored = functools.partial(gitread.is_ignored, history or gitread.GitHistory(Path(root)))

    def read_tool(a: ReadArgs) -> str:
        return read(root, a.path, a.start_line, a.end_line, max_bytes=max_bytes, max_lines=lines,
                    secrets=secrets, ignored=ignored)

    tools = [
        Tool("search", _SEARCH_DOC.format(matches=matches), SearchArgs,
             lambda a: _search_tool(root, a, max_bytes, matches, secrets)),
        Tool("read", _READ_DOC.format(lines=lines), ReadArgs, read_tool),
        Tool("list", _LIST_DOC, ListArgs,
             lambda a: list_files(root, a.glob, a.path, secrets=secrets)),
    ]
    return tools + (gitread.git_tools(history, secrets) if history is not None else [])


def _search_tool(root: Path, a: SearchArgs, max_bytes: int, matches: int,
                 secrets: SecretFiles) -> str:
    options = a.model_dump(exclude={"pattern"})
    return search(root, a.pattern, max_matches=matches, max_bytes=max_bytes, secrets=secrets,
                  **options).format_for_model()



_SEARCH_DOC = (
    "Search file contents with ripgrep (Rust regex; set fixed_strings=true for literal text). "
    "Returns up to {matches} 'path:line: text' lines (context lines as 'path-line- text'). Skips "
    ".gitignored, hidden, binary and large files. Narrow with glob or path. Before citing, "
    "read the lines to quote them exactly."
)
_READ_DOC = (
    "Read a text file as numbered lines '  12| text', up to {lines} lines per call; page with "
    "start_line/end_line. Cite quotes copied verbatim from these lines, without the number prefix."
)
_LIST_DOC = (
    "List files (sorted; .gitignored and hidden files omitted). Filter with glob "
    "(e.g. '*.py', 'src/**/*.ts') or path (a directory)."
)
