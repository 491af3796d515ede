"""The contents of the repository's secret files, masked wherever a tool's output shows them.

``secretfiles`` keeps the read, search, list, blame and edit tools away from secret files, and
masks values that look like keys by their shape. The builder's shell still sees the checkout (and
the object store): ``cat .npmrc``, ``base64 id_rsa`` or ``git show HEAD:.git-credentials`` print
a token no shape rule knows. ``KnownSecrets`` is built from the secret files the worktree holds
when a session starts and masks, in whatever a tool returns, any 16-character stretch of their
contents as text, as base64 (in each of the three alignments, so a file inside a tar or after a
prefix is caught too) or as hex, plus every value of 8 characters or more with a digit, or of 20 or more
(``key=value``, ``user:password@``). What it cannot see through is a transformation it does not know (``rev``,
a cipher): the sandbox's boundary is the repository's objects, which the shell can read.
"""

from __future__ import annotations

import base64
import functools
import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from orchestrator.tools.secretfiles import MASK, SecretFiles

WINDOW = 16  # the shortest stretch masked by the windows
_STRIDE = 4  # windows kept at every 4th offset: any run of WINDOW + 3 characters holds one
MAX_FILE_BYTES = 64 * 1024
MAX_TOTAL_BYTES = 256 * 1024
_SKIP_DIRS = {".git", "node_modules", ".venv", "venv", "__pycache__", ".tox", "workspaces"}
_RUN = re.compile(r"\S{" + str(WINDOW) + ",}")
_VALUE_SPLIT = re.compile(r"[\s=:\"'@,;<>()\[\]{}]+")


@dataclass(frozen=True)
class KnownSecrets:
    """The stretches and values of secret files' contents a tool's output must not show."""

    windows: frozenset[str] = frozenset()
    values: tuple[str, ...] = ()
    _values_re: re.Pattern[str] | None = field(default=None, compare=False)

    @classmethod
    def of(cls, contents: list[bytes]) -> KnownSecrets:
        windows: set[str] = set()
        values: set[str] = set()
        for data in contents:
            text = data.decode("utf-8", "replace")
            streams = [*text.split(), *(base64.b64encode(data[i:]).decode() for i in range(3))]
            hexes = (data.hex(), data.hex().upper())
            windows.update(w for s in streams for w in _windows(s) if len(set(w)) >= 6)
            # hex of text has few distinct digits (every byte of a hex token is 3x or 6x), so a
            # hex window is also kept for the 8 bytes it spells (windows start at even offsets)
            windows.update(w for s in hexes for w in _windows(s)
                           if len(set(w)) >= 6 or len(set(bytes.fromhex(w))) >= 4)
            values.update(v for v in _VALUE_SPLIT.split(text) if _value(v))
        ordered = tuple(sorted(values, key=len, reverse=True))
        pattern = re.compile("|".join(map(re.escape, ordered))) if ordered else None
        return cls(frozenset(windows), ordered, pattern)

    def __bool__(self) -> bool:
        return bool(self.windows or self.values)

    def mask(self, text: str) -> str:
        """``text`` with every stretch of a secret file's contents replaced by the mask."""
        if not self:
            return text
        if self._values_re is not None:
            text = self._values_re.sub(MASK, text)
        spans: list[tuple[int, int]] = []
        for run in _RUN.finditer(text):
            s, start = run.group(), run.start()
            for i in range(len(s) - WINDOW + 1):
                if s[i:i + WINDOW] in self.windows:
                    a, b = start + i, start + i + WINDOW
                    if spans and a <= spans[-1][1]:
                        spans[-1] = (spans[-1][0], b)
                    else:
                        spans.append((a, b))
        for a, b in reversed(spans):
            text = text[:a] + MASK + text[b:]
        return text


def _windows(s: str) -> Iterator[str]:
    """The WINDOW-long stretches of ``s`` at every _STRIDE-th offset."""
    return (s[i:i + WINDOW] for i in range(0, len(s) - WINDOW + 1, _STRIDE))


def _value(v: str) -> bool:
    """Whether a piece of a secret file looks like a value (a token, a password), not a word or
    a host name that code shows too: 8 characters or more, with a digit, or 20 or more."""
    if len(v) < 8 or len(set(v)) < 5:
        return False
    return len(v) >= 20 or any(c.isdigit() for c in v)


def known_secrets(root: Path, files: SecretFiles) -> KnownSecrets:
    """What the secret files under ``root`` (a worktree) hold, read once per root and policy."""
    return _known(str(root), files)


@functools.lru_cache(maxsize=32)
def _known(root: str, files: SecretFiles) -> KnownSecrets:
    contents: list[bytes] = []
    total = 0
    for top, dirs, names in os.walk(root):
        dirs[:] = [d for d in dirs if d not in _SKIP_DIRS]
        for name in names:
            path = os.path.join(top, name)
            rel = os.path.relpath(path, root).replace(os.sep, "/")
            if not files.secret(rel) or os.path.islink(path) or not os.path.isfile(path):
                continue
            try:
                with open(path, "rb") as f:
                    data = f.read(MAX_FILE_BYTES)
            except OSError:
                continue
            contents.append(data)
            total += len(data)
            if total >= MAX_TOTAL_BYTES:
                return KnownSecrets.of(contents)
    return KnownSecrets.of(contents)
