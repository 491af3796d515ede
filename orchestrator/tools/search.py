"""The explorer's read-only tools: ripgrep search, numbered file reads and file listing.

Everything is sized for large repositories: ripgrep respects ``.gitignore`` and skips hidden,
binary and oversized files, output is read incrementally and the process is killed once enough
matches are in, and every result is capped with a hint on how to narrow the query. Every path a
model names goes through ``Jail``. ``tools/explorer.py`` wraps the functions as ``Tool`` objects.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path

from orchestrator.errors import ConfigError, ToolError
from orchestrator.tools.jail import Jail, open_regular
from orchestrator.tools.secretfiles import DEFAULT, SecretFiles

LINE_CUT = 300  # search shows at most this many characters of a matching line
# ripgrep prints at most this much of a line (a preview), so a 30 MB one-line file costs
# kilobytes per match, not its size, however many explorers search it at once
MAX_COLUMNS = 4096
_MATCH_LINE = re.compile(rb"(\d+)([:-])(?:(\d+):)?(\d+)[:-](.*?)\r?\n?$", re.S)
_PREVIEW_NOTE = re.compile(rb" \[\.\.\. (?:\d+ more match(?:es)?|omitted end of long line)\]$")
_STATS = re.compile(rb"^(\d+) files searched")
READ_LINE_CUT = 2000  # read shows at most this many characters of one line
LARGE_FILE = 1_000_000  # bytes: search results say where in such a file each match is
NARROW_HINT = "narrow the query: add a glob (e.g. '*.py'), a path, or a more specific pattern"


@lru_cache(maxsize=1)
def rg_binary() -> str:
    """The ripgrep executable: on PATH, else beside this interpreter (venv need not be active)."""
    found = shutil.which("rg") or os.path.join(sysconfig.get_path("scripts"), "rg")
    if not (os.path.isfile(found) and os.access(found, os.X_OK)):
        raise ConfigError(
            "ripgrep (rg) was not found on PATH or next to the Python interpreter; "
            "install it with 'pip install ripgrep' or put rg on PATH"
        )
    return found


def decode_lines(data: bytes) -> list[str]:
    """File bytes as lines numbered the way ripgrep and ``read`` number them (split on ``\\n``)."""
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [_decode_line(raw) for raw in lines]


def _decode_line(raw: bytes) -> str:
    raw = raw[:-1] if raw.endswith(b"\n") else raw
    raw = raw[:-1] if raw.endswith(b"\r") else raw
    return raw.decode("utf-8", "replace")


# --- search ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Match:
    """One line of a search result; ``context`` lines surround a match but do not match."""

    path: str
    line: int
    text: str
    column: int = 0
    context: bool = False
    offset: int = 0  # byte offset of the line in its file


@dataclass(frozen=True)
class SearchResult:
    """Matches by file, each file's in line order; ``truncated`` when more exist than were
    collected."""

    matches: list[Match]
    truncated: bool = False
    files_searched: int = 0
    errors: list[str] = field(default_factory=list)
    max_bytes: int = 20_000
    sizes: dict[str, int] = field(default_factory=dict)  # bytes of each matched file

    def format_for_model(self, max_bytes: int | None = None) -> str:
        budget = self.max_bytes if max_bytes is None else max_bytes
        hits = [m for m in self.matches if not m.context]
        warnings = [f"warning: {e}" for e in self.errors[:5]]
        if not hits:
            return "\n".join([_NO_MATCHES, *warnings])
        files = len({m.path for m in hits})
        head = f"{len(hits)} matches in {files} files{' (truncated)' if self.truncated else ''}:"
        body, cut = _render(self.matches, budget - len(head) - 200)
        more = [f"(results truncated; {NARROW_HINT})"] if self.truncated or cut else []
        return "\n".join([head, *body, *more, *self._offsets(hits), *warnings])

    def _offsets(self, hits: list[Match]) -> list[str]:
        """Where the matches of large files are, so a read can start right there."""
        out = []
        for path, size in self.sizes.items():
            if size < LARGE_FILE:
                continue
            spots = [f"line {m.line} at byte {m.offset:,}" for m in hits if m.path == path][:5]
            out.append(f"({path} is {size / 1e6:.1f} MB; matches: {'; '.join(spots)}. Read "
                       "around one with start_line and end_line.)")
        return out


def search(
    root: Path,
    pattern: str,
    *,
    path: str | None = None,
    glob: str | None = None,
    fixed_strings: bool = False,
    ignore_case: bool = False,
    context: int = 0,
    max_matches: int = 100,
    max_bytes: int = 20_000,
    max_filesize: str = "256M",
    timeout: float = 30,
    per_file: int | None = None,
    secrets: SecretFiles = DEFAULT,
) -> SearchResult:
    """Search file contents under ``root`` (optionally within ``path``) with ripgrep; at most
    ``per_file`` matches of one file when given, so that one file cannot take them all. Secret
    files (``secrets``) are left out."""
    if not pattern:
        raise ToolError("pattern is empty; give the text or regex to search for")
    jail = Jail(root)
    target = _target(jail, path)
    cmd = [rg_binary(), "--no-config", "--null", "--line-number", "--column", "--byte-offset",
           "--no-heading", "--with-filename", "--color", "never", "--stats",
           "--max-columns", str(MAX_COLUMNS), "--max-columns-preview",
           "--max-filesize", max_filesize]
    cmd += ["--max-count", str(per_file or max_matches + 1)]
    cmd += ["--fixed-strings"] if fixed_strings else []
    cmd += ["--ignore-case"] if ignore_case else []
    cmd += ["--context", str(context)] if context > 0 else []
    with _glob_scope(glob, target) as (glob_args, visible):
        def keep(p: str) -> bool:
            return visible(p) and not secrets.secret(p)

        collector = _Collector(keep, max_matches, max_bytes, context, jail.root)
        cmd += [*glob_args, "-e", pattern, "--", target]
        rc, stderr, timed_out = _stream(cmd, jail.root, collector, timeout)
    errors = _error_lines(stderr)
    if rc == 2 and not collector.summary_seen and not collector.matches and not timed_out:
        raise ToolError(_explain_failure(errors))
    if timed_out:
        errors.insert(0, f"search timed out after {timeout:g}s; results are partial")
    return SearchResult(
        # by file: ripgrep's threads finish files in any order, and the same search must read
        # the same on a rerun (a resumed run's call journal and a server's prompt cache key on
        # the exact text; one CI run paid a replayed session's call again for it). A truncated
        # result may still hold other files on a rerun: which ones rg reached first decides
        matches=sorted(collector.matches, key=lambda m: m.path),
        truncated=collector.truncated or timed_out,
        files_searched=max(collector.searched, len(collector.files)),
        errors=errors,
        max_bytes=max_bytes,
        sizes={p: _size(jail.root / p) for p in sorted(collector.files)},
    )


def _size(path: Path) -> int:
    try:
        return path.stat().st_size
    except OSError:
        return 0


class _Collector:
    """Turns ripgrep's output lines (``path NUL line:column:offset:text``, context lines with
    ``-``) into ``Match``es; ``feed`` returns False when full."""

    def __init__(self, keep: Callable[[str], bool], max_matches: int, max_bytes: int, ctx: int,
                 root: Path):
        self.keep, self.max_matches, self.max_bytes, self.ctx = keep, max_matches, max_bytes, ctx
        self.root = root
        self.matches: list[Match] = []
        self.count = self.used = self.searched = 0
        self.truncated = self.summary_seen = False
        self.files: set[str] = set()

    def feed(self, raw: bytes) -> bool:
        if b"\0" not in raw:  # "--" between context groups, or --stats at the end
            stats = _STATS.match(raw)
            if stats:
                self.summary_seen = True
                self.searched = int(stats.group(1))
            return True
        name, _, rest = raw.partition(b"\0")
        hit = _MATCH_LINE.match(rest)
        if hit is None:
            return True  # a binary-file note or anything else that is no line of a file
        path = _repo_path(name.decode("utf-8", "replace"))
        if not self.keep(path):
            return True
        context = hit.group(2) == b"-"
        if context:
            return self._add_context(path, hit)
        if self.count >= self.max_matches or self.used >= self.max_bytes:
            self.truncated = True
            return False
        self._add(path, hit, context=False)
        self.count += 1
        self.files.add(path)
        return True

    def _around(self, path: str, offset: int) -> str:
        try:
            with open_regular(self.root / path, path) as fh:
                fh.seek(offset)
                piece = fh.read(LINE_CUT).split(b"\n", 1)[0]
        except (ToolError, OSError):
            return "… (a line too long to show)"
        return f"…{piece.decode('utf-8', 'replace')}… (line cut: over {MAX_COLUMNS:,} characters)"

    def _add_context(self, path: str, hit: re.Match[bytes]) -> bool:
        if self.count >= self.max_matches:
            last = self.matches[-1]  # once full, keep only the trailing context of the last hit
            if last.path != path or int(hit.group(1)) > last.line + self.ctx:
                return True
        self._add(path, hit, context=True)
        return True

    def _add(self, path: str, hit: re.Match[bytes], *, context: bool) -> None:
        line = hit.group(5)
        note = _PREVIEW_NOTE.search(line)
        raw = line[:note.start()] if note else line  # ripgrep printed a preview of a long line
        text = _decode_line(raw)
        column = 0 if context or not hit.group(3) else len(
            raw[: int(hit.group(3)) - 1].decode("utf-8", "ignore"))
        if note is not None and int(hit.group(3) or 0) > len(raw):
            # the match lies past the preview: read just the bytes around it from the file
            start = int(hit.group(4)) + int(hit.group(3)) - 1 - LINE_CUT // 3
            text, column = self._around(path, max(int(hit.group(4)), start)), LINE_CUT // 3
        elif note is not None:
            text += " … (line cut)"
        self.matches.append(Match(path, int(hit.group(1)), text, column, context,
                                  int(hit.group(4))))
        self.used += len(path) + min(len(text), LINE_CUT) + 12


def _stream(cmd: list[str], cwd: Path, collector: _Collector, timeout: float):
    with tempfile.TemporaryFile() as err:  # a file, so a chatty stderr can never block rg
        proc = subprocess.Popen(
            cmd, cwd=cwd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=err
        )
        fired = threading.Event()

        def expire() -> None:
            fired.set()
            proc.kill()

        timer = threading.Timer(timeout, expire)
        timer.start()
        try:
            assert proc.stdout is not None
            for raw in proc.stdout:
                if not collector.feed(raw):
                    break
        finally:
            timer.cancel()
            if proc.poll() is None:
                proc.kill()  # enough matches: stop rg walking the rest of a huge tree
            proc.stdout.close()  # type: ignore[union-attr]
            rc = proc.wait()
        err.seek(0)
        return rc, err.read().decode("utf-8", "replace"), fired.is_set()


def _repo_path(path: str) -> str:
    path = path.replace(os.sep, "/")
    return path[2:] if path.startswith("./") else path


def _error_lines(stderr: str) -> list[str]:
    lines = [ln.removeprefix("rg: ").rstrip() for ln in stderr.splitlines()]
    return [ln for ln in lines if ln.strip()][:20]


def _explain_failure(errors: list[str]) -> str:
    message = "\n".join(errors[:8]) or "ripgrep failed without a message"
    if "regex" in message or "look-around" in message or "not allowed" in message:
        return f"invalid search pattern:\n{message}\n{_REGEX_HINT}"
    return f"search failed:\n{message}"


_REGEX_HINT = (
    "hint: use fixed_strings=true for literal text, or escape regex metacharacters such as "
    "( ) [ ] { } . * + ? | \\ (look-around and backreferences are not supported)"
)
_NO_MATCHES = (
    "no matches (.gitignored, hidden and binary files are not searched). "
    "Try a shorter or case-insensitive pattern, or another path."
)


def _render(matches: list[Match], budget: int) -> tuple[list[str], bool]:
    """``path:line: text`` lines (context ``path-line- text``), files split by a blank line."""
    out: list[str] = []
    used, prev = 0, None
    with_context = any(m.context for m in matches)
    for m in matches:
        sep = "-" if m.context else ":"
        line = f"{m.path}{sep}{m.line}{sep} {_cut(m.text, m.column)}"
        if prev is not None and m.path != prev.path:
            line = "\n" + line
        elif prev is not None and with_context and m.line > prev.line + 1:
            line = "--\n" + line  # a gap between context hunks of one file
        if used + len(line) + 1 > budget:
            return out, True
        out.append(line)
        used, prev = used + len(line) + 1, m
    return out, False


def _cut(text: str, column: int) -> str:
    text = text.rstrip()
    if len(text) <= LINE_CUT:
        return text
    start = max(0, min(column - LINE_CUT // 3, len(text) - LINE_CUT))
    head = "…" if start else ""
    tail = "…" if start + LINE_CUT < len(text) else ""
    return f"{head}{text[start:start + LINE_CUT]}{tail} (line cut, {len(text)} chars)"


# --- paths and globs ------------------------------------------------------------------------


def _target(jail: Jail, path: str | None) -> str:
    if path is None or path.strip() in ("", ".", "./"):
        return "."
    resolved = jail.resolve(path)
    if not resolved.exists():
        raise ToolError(f"no such file or directory: {path!r}; use list to see what exists")
    if not resolved.is_dir():
        open_regular(resolved, path).close()  # ripgrep would block on a FIFO named directly
    return jail.relative(resolved)


@contextmanager
def _glob_scope(glob: str | None, target: str) -> Iterator[tuple[list[str], Callable[[str], bool]]]:
    """ripgrep arguments and a path filter for ``glob`` that keep .gitignore and hidden rules.

    ``rg --glob`` whitelists override .gitignore and the hidden-file rule, so a positive glob is
    written as a lowest-precedence ignore file instead: ignore every file, then re-include the
    glob. .gitignore still wins; hidden files the glob names are dropped here.
    """

    def visible(p: str) -> bool:
        return p == target or not p.rsplit("/", 1)[-1].startswith(".")

    g = (glob or "").strip()
    if "\n" in g or "\r" in g:
        raise ToolError("glob must be a single line, such as '*.py' or 'src/**/*.ts'")
    if not g or g.startswith("!"):
        yield (["--glob", g] if g else []), visible  # an exclusion can only hide more
        return
    g = g + "**" if g.endswith("/") else g  # "src/" means everything under src
    with tempfile.TemporaryDirectory(prefix="orchestrate-glob-") as tmp:
        ignore = Path(tmp) / "glob.ignore"
        ignore.write_text(f"*\n!*/\n.*\n!{g}\n", encoding="utf-8")
        yield ["--ignore-file", str(ignore)], visible


# --- list -----------------------------------------------------------------------------------


def list_files(
    root: Path,
    glob: str | None = None,
    path: str | None = None,
    max_entries: int = 500,
    timeout: float = 30,
    secrets: SecretFiles = DEFAULT,
) -> str:
    """Files under ``root`` (or ``path``) that ripgrep would search, sorted and capped; secret
    files (``secrets``) are left out."""
    jail = Jail(root)
    target = _target(jail, path)
    with _glob_scope(glob, target) as (glob_args, keep):
        cmd = [rg_binary(), "--files", "--no-config", *glob_args, "--", target]
        try:
            proc = subprocess.run(cmd, cwd=jail.root, capture_output=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise ToolError(f"listing timed out after {timeout:g}s; {NARROW_HINT}") from None
    names = proc.stdout.decode("utf-8", "replace").splitlines()
    files = sorted(p for p in map(_repo_path, names) if p and keep(p) and not secrets.secret(p))
    if proc.returncode == 2 and not files:
        raise ToolError("list failed:\n" + "\n".join(_error_lines(proc.stderr.decode())[:8]))
    if not files:
        return "no files match (.gitignored and hidden files are not listed)"
    shown = files[:max_entries]
    parts = [f"{len(files)} files:", *shown]
    if len(files) > len(shown):
        parts.append(f"... and {len(files) - len(shown)} more; narrow with a glob or path")
    return "\n".join(parts)
