"""Artefacts: tool outputs too large for a message, kept on disk and paged back on request.

A session stores an oversized tool result (or a masked old one) under
``<run_dir>/artifacts/<id>.txt``; the model sees a head/tail preview and a handle, and the
``read_artifact`` tool returns the original in pages by lines or characters, each page within the
size the session allows. Pages concatenate back to the exact original text.
"""

from __future__ import annotations

import itertools
import tempfile
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from orchestrator.config.prompts import text
from orchestrator.errors import ToolError
from orchestrator.tools.base import Tool

READ_ARTIFACT = "read_artifact"


@dataclass(frozen=True)
class Artifact:
    """One stored text: its handle, file, size and how many characters fit in one page."""

    id: str
    path: Path
    chars: int
    lines: int
    page_chars: int


class ArtifactStore:
    """The artefacts of one session lineage; ids are ``<prefix>.a<n>``, unique in the run."""

    def __init__(self, root: Path | None, prefix: str, *, page_chars: int = 24_000) -> None:
        self._root = root
        self.prefix = prefix
        self.page_chars = page_chars
        self._ids = itertools.count(1)
        self._items: dict[str, Artifact] = {}
        self._lock = threading.Lock()

    @property
    def root(self) -> Path:
        """The run directory, or a private temporary one when the run has none (``explore``)."""
        with self._lock:
            if self._root is None:
                self._root = Path(tempfile.mkdtemp(prefix="orchestrate-context-"))
            return self._root

    def put(self, text: str, *, page_chars: int | None = None) -> Artifact:
        art_id = f"{self.prefix}.a{next(self._ids)}"
        path = self.root / "artifacts" / f"{art_id}.txt"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", newline="")
        art = Artifact(art_id, path, len(text), len(text.splitlines()),
                       max(200, page_chars or self.page_chars))
        self._items[art_id] = art
        return art

    def page(self, art_id: str, offset: int = 0, limit: int | None = None,
             unit: Literal["lines", "chars"] = "lines") -> str:
        """A header line, then the exact slice of the original."""
        art = self._items.get(art_id)
        if art is None:
            known = ", ".join(self._items) or "none yet"
            raise ToolError(f"no artifact {art_id!r} (artifacts of this session: {known})")
        with art.path.open(encoding="utf-8", newline="") as f:
            text = f.read()
        if unit == "chars":
            return _char_page(art, text, offset, limit)
        return _line_page(art, text, offset, limit)

    def tool(self) -> Tool:
        return Tool(READ_ARTIFACT, _DOC, ReadArtifactArgs,
                    lambda a: self.page(a.id, a.offset, a.limit, a.unit))


def _char_page(art: Artifact, text: str, offset: int, limit: int | None) -> str:
    if offset > len(text):
        raise ToolError(f"offset {offset} is past the end of {art.id} ({len(text)} chars)")
    end = min(len(text), offset + min(limit or art.page_chars, art.page_chars))
    more = "end"
    if end < len(text):
        more = f'next: read_artifact("{art.id}", offset={end}, unit="chars")'
    return f"[artifact {art.id}: chars {offset}-{end} of {len(text)}; {more}]\n{text[offset:end]}"


def _line_page(art: Artifact, text: str, offset: int, limit: int | None) -> str:
    lines = text.splitlines(keepends=True)
    if offset > len(lines):
        raise ToolError(f"offset {offset} is past the end of {art.id} ({len(lines)} lines)")
    end, used = offset, 0
    stop = len(lines) if limit is None else min(len(lines), offset + limit)
    while end < stop and used + len(lines[end]) <= art.page_chars:
        used += len(lines[end])
        end += 1
    if end == offset and offset < stop:
        start = sum(len(line) for line in lines[:offset])
        raise ToolError(f"line {offset} of {art.id} is longer than a page; read it with "
                        f'read_artifact("{art.id}", offset={start}, unit="chars")')
    more = f'next: read_artifact("{art.id}", offset={end})' if end < len(lines) else "end"
    return (f"[artifact {art.id}: lines {offset}-{end} of {len(lines)} (0-based, end "
            f"exclusive); {more}]\n" + "".join(lines[offset:end]))


def preview(text: str, chars: int) -> str:
    """Whole lines from the head and the tail of ``text``, about ``chars`` in all."""
    lines = text.splitlines()
    head: list[str] = []
    tail: list[str] = []
    used = 0
    for line in lines:
        if used + len(line) > chars // 2:
            break
        head.append(line)
        used += len(line) + 1
    for line in reversed(lines[len(head):]):
        if used + len(line) > chars:
            break
        tail.append(line)
        used += len(line) + 1
    left = len(lines) - len(head) - len(tail)
    gap = [f"… ({left:,} lines omitted here) …"] if left else []
    return "\n".join([*head, *gap, *reversed(tail)])


def paged_message(call: str, art: Artifact, tokens: int, shown: str) -> str:
    per_page = max(1, art.page_chars * max(art.lines, 1) // max(art.chars, 1))
    return text("session", "paged", call=call, tokens=f"{tokens:,}", chars=f"{art.chars:,}",
                lines=f"{art.lines:,}", id=art.id, shown=shown, per_page=f"{per_page:,}")


class ReadArtifactArgs(BaseModel):
    model_config = ConfigDict(extra="forbid")

    id: str = Field(description="The artifact handle, e.g. explorer-1.a3.")
    offset: int = Field(0, ge=0, description="First line (0-based), or first char with unit=chars.")
    limit: int | None = Field(None, ge=1, description="At most this many lines (or chars).")
    unit: Literal["lines", "chars"] = "lines"


_DOC = (
    "Read a stored artifact (a large or masked tool output) page by page. Pages are exact "
    "slices of the original; the header line says where the next page starts."
)
