"""The explorer's ``read``: numbered lines of a text file from any line on, capped, with a
pointer to where to continue; a wrong path gets the nearest real ones suggested.

Lines are numbered the way ripgrep numbers them, so a search hit's line number is the line
``read`` starts at, however large the file (a 5 MB log is read from line 23,418 as easily as
from line 1).
"""

from __future__ import annotations

import difflib
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import IO

from orchestrator.errors import PolicyViolation, ToolError
from orchestrator.tools.jail import Jail, open_regular
from orchestrator.tools.search import READ_LINE_CUT, _decode_line, rg_binary
from orchestrator.tools.secretfiles import DEFAULT, SecretFiles


def read(
    root: Path,
    path: str,
    start: int = 1,
    end: int | None = None,
    max_bytes: int = 20_000,
    max_lines: int = 400,
    *,
    secrets: SecretFiles = DEFAULT,
    ignored: Callable[[str], bool] | None = None,
) -> str:
    """Lines ``start``..``end`` of a text file, numbered ``  12| text``, capped. Secret files
    (``secrets``) are refused, and so are git-ignored ones (``ignored``: local settings and
    build output are not the repository's, and search and list do not show them either)."""
    jail = Jail(root)
    file = jail.resolve(path)
    rel = jail.relative(file)
    if ".git" in Path(rel).parts:  # git config may hold credentials in remote URLs
        raise PolicyViolation(f"{rel} is inside .git; use git_log and git_blame for history")
    if secrets.secret(rel):
        raise PolicyViolation(secrets.refusal(rel))
    if ignored is not None and file.is_file() and ignored(rel):
        raise PolicyViolation(f"{rel} is git-ignored (local settings, build output, secrets): "
                              "it is not read; read the files the repository tracks")
    if not file.exists():
        raise ToolError(f"no such file: {rel}; {_suggest(jail, rel)}")
    if file.is_dir():
        raise ToolError(f"{rel} is a directory; use list with path={rel!r}")
    if start < 1:
        raise ToolError("start_line must be 1 or more")
    if end is not None and end < start:
        raise ToolError(f"end_line {end} is before start_line {start}")
    with open_regular(file, rel) as f:
        if b"\0" in f.read(8192):
            raise ToolError(f"{rel} is a binary file; read works on text files only")
        f.seek(0)
        shown, total, resume = _numbered(f, start, end, max_bytes, max_lines)
    if total == 0:
        return f"{rel}: empty file (0 lines)"
    if start > total:
        raise ToolError(f"start_line {start} is past the end of {rel}, which has {total} lines")
    last = start + len(shown) - 1
    parts = [f"{rel} (lines {start}-{last} of {total}):", *shown]
    if resume is not None:
        parts.append(f"(truncated: file has {total} lines; read from line {resume} to continue)")
    return "\n".join(parts)


def _suggest(jail: Jail, rel: str) -> str:
    """Name real files that look like the one asked for: small models guess paths."""
    proc = subprocess.run([rg_binary(), "--files", "--no-config"], cwd=jail.root,
                          capture_output=True, timeout=10, check=False)
    files = proc.stdout.decode("utf-8", "replace").splitlines()
    by_name: dict[str, list[str]] = {}
    for f in files:
        by_name.setdefault(f.rsplit("/", 1)[-1], []).append(f)
    close = difflib.get_close_matches(rel, files, n=3, cutoff=0.5)
    for name in difflib.get_close_matches(rel.rsplit("/", 1)[-1], list(by_name), n=3, cutoff=0.6):
        close += [f for f in by_name[name] if f not in close]
    if close:
        return "did you mean " + ", ".join(close[:5]) + "?"
    return "use list or search to find the right path"


def _numbered(f: IO[bytes], start: int, end: int | None, max_bytes: int, max_lines: int):
    shown: list[str] = []
    used, n, resume = 0, 0, None
    raw = b""
    for n, raw in enumerate(f, 1):
        if n < start:
            continue
        if end is not None and n > end:
            break
        text = _decode_line(raw)
        if len(text) > READ_LINE_CUT:
            text = f"{text[:READ_LINE_CUT]}… (line cut, {len(text)} chars)"
        line = f"{n:>4}| {text}"
        if len(shown) >= max_lines or used + len(line) + 1 > max_bytes:
            resume = n
            break
        shown.append(line)
        used += len(line) + 1
    return shown, _count_rest(f, n, raw), resume


def _count_rest(f: IO[bytes], n: int, last_raw: bytes) -> int:
    """Total line count given that line ``n`` (``last_raw``) was the last one consumed."""
    if n and not last_raw.endswith(b"\n"):
        return n
    newlines, tail = 0, b""
    for chunk in iter(lambda: f.read(1 << 20), b""):
        newlines += chunk.count(b"\n")
        tail = chunk
    return n + newlines + (1 if tail and not tail.endswith(b"\n") else 0)


