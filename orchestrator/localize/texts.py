"""The files retrieval reads: a small tree held in memory (``Corpus``: searched with Python's
``re`` and the same regexes ripgrep is given, so a question's searches start no process), and a
large file read in chunks keeping only the lines a window shows (``Sparse``), so a 30 MB line
costs kilobytes.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from pathlib import Path
from typing import BinaryIO

from orchestrator.errors import OrchestrateError
from orchestrator.localize.terms import STOP, compiled
from orchestrator.tools.jail import Jail, open_regular
from orchestrator.tools.search import LINE_CUT, Match

PARSE_LIMIT = 400_000  # bytes: larger files are windowed without parsing


CORPUS_BYTES = 8_000_000  # a tree this small is searched in memory, with no process to start


CORPUS_FILES = 5_000


READ_LINE = 4096  # characters kept of a line of a large file


MATCHES = 300  # per search: past this a term is common; it still counts, weakly


PER_FILE = 30  # matches per file and search, so one file cannot take them all


class Corpus:
    """A small tree's text files in memory, searched with the same regexes ripgrep is given
    (the files ripgrep lists: ignored, hidden and binary files left out)."""

    def __init__(self, files: dict[str, list[str]]) -> None:
        self.files = files

    @classmethod
    def load(cls, root: Path, listed: Sequence[str]) -> Corpus | None:
        if len(listed) > CORPUS_FILES:
            return None
        jail, files, total = Jail(root), {}, 0
        for path in listed:
            try:
                with open_regular(jail.resolve(path), path) as fh:
                    data = fh.read(CORPUS_BYTES + 1)
            except (OrchestrateError, OSError):
                continue
            total += len(data)
            if total > CORPUS_BYTES or len(data) > PARSE_LIMIT:
                return None  # a large file: ripgrep searches faster than a regex line by line
            if b"\0" not in data[:8192]:
                files[path] = data.decode("utf-8", "replace").split("\n")
        return cls(files)

    def search(self, regex: str, path: str | None = None) -> list[Match]:
        rx = compiled(regex)
        out: list[Match] = []
        for name, lines in ([(path, self.files.get(path, []))] if path else self.files.items()):
            found = 0
            for n, line in enumerate(lines, 1):
                if rx.search(line):
                    out.append(Match(name, n, cut_line(line)))
                    found += 1
                    if len(out) >= MATCHES:
                        return out
                    if path is None and found >= PER_FILE:
                        break
        return out


class Sparse:
    """Some lines of a large file, by number (others read as empty), and how many it has."""

    def __init__(self, kept: dict[int, str], total: int) -> None:
        self.kept, self.total = kept, total

    def __len__(self) -> int:
        return self.total

    def __getitem__(self, index: int) -> str:
        return self.kept.get(index + 1, "")

    @classmethod
    def read(cls, fh: BinaryIO, wanted: set[int]) -> Sparse:
        kept: dict[int, str] = {}
        n, current, keep = 1, bytearray(), 1 in wanted
        for chunk in iter(lambda: fh.read(1 << 20), b""):
            start = 0
            while True:
                end = chunk.find(b"\n", start)
                piece = chunk[start:] if end < 0 else chunk[start:end]
                if keep and len(current) < READ_LINE:
                    current += piece[: READ_LINE - len(current)]
                if end < 0:
                    break
                if keep:
                    kept[n] = current.decode("utf-8", "replace")
                n, current, start = n + 1, bytearray(), end + 1
                keep = n in wanted
        if current or keep:
            kept[n] = current.decode("utf-8", "replace")
        return cls(kept, n if current else n - 1)


Lines = list[str] | Sparse


def cut_line(text: str) -> str:
    """A line as a search shows it: cut at ``LINE_CUT`` characters."""
    text = text.rstrip("\r")
    return text if len(text) <= LINE_CUT else text[:LINE_CUT] + "… (line cut)"


_SHAPE = re.compile(r"0x[0-9a-f]+|[0-9a-f]{8,}|\d+(?:\.\d+)?")
_TIMESTAMP = re.compile(r"^\S*\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def log_shape(text: str) -> str:
    """A log line with its timestamp, numbers and ids masked: lines of one shape are one event."""
    body = _TIMESTAMP.sub("", text.strip())
    return _SHAPE.sub("#", body.lower())


def plain_words(text: str) -> set[str]:
    """The words of ``text``, lower-cased, stop words left out."""
    return {w.lower() for w in re.findall(r"[A-Za-z][A-Za-z0-9]+", text)} - STOP
