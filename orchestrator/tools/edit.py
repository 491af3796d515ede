"""The builder's file-editing tools: write a file, replace text, replace a range of lines,
apply a unified diff.

Made for small models: ``replace`` finds ``old`` exactly, else ignoring trailing whitespace,
blank lines and a changed indentation (``new`` is re-indented to fit); when nothing matches it
answers with the file's closest lines, numbered, so the next call can copy them. ``replace_lines``
edits by line numbers, which needs no copying at all. Every successful edit answers with the
edited region as it now reads, and ``write_file`` refuses to rewrite a file with what it already
holds (a model "fixing" a file by writing it back unchanged learns so at once).

Every path goes through ``Jail.resolve(..., write=True)`` before anything is written, so edits stay
inside the workspace root and never reach ``.git``. Files are replaced atomically (a temporary file
renamed over the old one), so a write never goes through a hard link to a file elsewhere; FIFOs,
sockets and devices are refused, never opened. ``apply_patch`` runs ``git apply`` against a private
empty repository (``patching.py``). Failures the model can fix raise ``ToolError`` with a hint;
escapes raise ``PolicyViolation``.
"""

from __future__ import annotations

import contextlib
import functools
import os
import re
import stat
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from orchestrator.config.schema import EditFormat
from orchestrator.errors import PolicyViolation, ToolError
from orchestrator.tools import fuzzy
from orchestrator.tools.base import Tool
from orchestrator.tools.jail import Jail, open_regular
from orchestrator.tools.patching import SYMLINK_MODE, git_apply, patch_paths, trim, unfence
from orchestrator.tools.secretfiles import DEFAULT, SecretFiles

# which edit tools each format offers; write_file is always there, for new files
FORMAT_TOOLS: dict[str, tuple[str, ...]] = {
    "any": ("write_file", "replace", "replace_lines", "apply_patch"),
    "replace": ("write_file", "replace"),
    "lines": ("write_file", "replace_lines"),
    "patch": ("write_file", "apply_patch"),
    "whole": ("write_file",),
}
AROUND = 3  # lines of context shown around an edit


class WriteFileArgs(BaseModel):
    path: str = Field(description="Repository-relative path of the file to create or overwrite.")
    content: str = Field(description="The complete new content of the file.")


class ReplaceArgs(BaseModel):
    path: str = Field(description="Repository-relative path of an existing file.")
    old: str = Field(description="The text to replace, copied from the file (whole lines).")
    new: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of one.")


class ReplaceLinesArgs(BaseModel):
    path: str = Field(description="Repository-relative path of an existing file.")
    start_line: int = Field(ge=1, description="First line to replace (1-based, as `read` shows).")
    end_line: int = Field(ge=0, description="Last line to replace, inclusive; start_line - 1 "
                          "inserts before start_line without removing anything.")
    new: str = Field(description="The new lines (empty to delete the range).")


class ApplyPatchArgs(BaseModel):
    patch: str = Field(description="A unified diff (as `git diff` prints), repo-relative paths.")


def edit_tools(root: Path, *, max_file_bytes: int = 1_000_000,
               edit_format: EditFormat = "any", protected: frozenset[str] = frozenset(),
               secrets: SecretFiles = DEFAULT) -> list[Tool]:
    """The write tools for a session whose workspace is ``root``, as ``edit_format`` offers;
    ``protected`` paths (the failing tests) cannot be written, ``secrets`` not opened."""
    return EditTools(root, max_file_bytes=max_file_bytes, protected=protected,
                     secrets=secrets).tools(edit_format)


class EditTools:
    """The write tools of one workspace, one method each, sharing its jail and file limit."""

    def __init__(self, root: Path, *, max_file_bytes: int = 1_000_000,
                 protected: frozenset[str] = frozenset(), secrets: SecretFiles = DEFAULT) -> None:
        self.jail = Jail(root, protected=protected)
        self.max_file_bytes = max_file_bytes
        self.secrets = secrets

    def _not_secret(self, target: Path) -> str:
        """``target``'s repository path; ``PolicyViolation`` for a secret file (an edit
        answers with its lines, and a failed match with what is near)."""
        rel = self.jail.relative(target)
        if self.secrets.secret(rel):
            raise PolicyViolation(self.secrets.refusal(rel))
        return rel

    def tools(self, edit_format: EditFormat = "any") -> list[Tool]:
        """The tools ``edit_format`` offers (``FORMAT_TOOLS``)."""
        made = [
            Tool(
                "write_file",
                "Create or overwrite a file with the given content (parent folders are created).",
                WriteFileArgs, self.write_file, read_only=False,
            ),
            Tool(
                "replace",
                "Replace a piece of a file: copy `old` from the file (whole lines; indentation "
                "and trailing spaces may differ) and give `new`. It must match once unless "
                "replace_all is true. Answers with the edited lines as they now read.",
                ReplaceArgs, self.replace, read_only=False,
            ),
            Tool(
                "replace_lines",
                "Replace lines start_line..end_line of a file (numbers as `read` shows them) "
                "with `new`. Answers with the edited lines as they now read.",
                ReplaceLinesArgs, self.replace_lines, read_only=False,
            ),
            Tool(
                "apply_patch",
                "Apply a unified diff (git diff format, a/ and b/ prefixes) to the workspace.",
                ApplyPatchArgs, self.apply_patch, read_only=False,
            ),
        ]
        wanted = FORMAT_TOOLS[edit_format]
        return [t for t in made if t.name in wanted]

    def write_file(self, args: WriteFileArgs) -> str:
        limit = self.max_file_bytes
        target = self.jail.resolve(args.path, write=True)
        size = len(args.content.encode("utf-8"))
        if size > limit:
            raise ToolError(f"content is {size} bytes; the limit is {limit} bytes per file")
        if target.is_dir():
            raise ToolError(f"{args.path} is a directory")
        existed = target.exists()
        rel = self._not_secret(target) if existed else self.jail.relative(target)
        _not_an_echo(args.content, "content")
        if existed and _same(_read_text(target, rel, limit), args.content):
            raise ToolError(f"{rel} already has exactly this content: nothing changed. "
                            "Change the lines that are wrong.")
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(target, args.content.encode("utf-8"), args.path)
        verb = "overwrote" if existed else "wrote"
        return f"{verb} {rel} ({_line_count(args.content)} lines)"

    def replace(self, args: ReplaceArgs) -> str:
        target, rel, text = self._load(args.path)
        if not args.old.strip():
            raise ToolError("`old` is empty; give the text to replace, or use replace_lines")
        found = fuzzy.locate(text, args.old)
        if not found:
            raise ToolError(_not_found(text, args.old, rel))
        _not_an_echo(args.new, "new")
        if len(found) > 1 and not args.replace_all:
            lines = [text.count("\n", 0, f.start) + 1 for f in found[:10]]
            raise ToolError(
                f"`old` appears {len(found)} times in {rel} (lines {', '.join(map(str, lines))}); "
                "include more surrounding lines so it matches once, pass replace_all=true, or "
                "use replace_lines"
            )
        updated = text
        for where in reversed(found if args.replace_all else found[:1]):
            updated = updated[:where.start] + fuzzy.fit(args.new, where) + updated[where.end:]
        if updated == text:
            raise ToolError("`new` is the same as the text it replaces: nothing changed")
        self._save(target, rel, updated)
        first = found[0]
        line = text.count("\n", 0, first.start) + 1
        count = len(updated.splitlines()) - len(text.splitlines())
        span = args.new.count("\n") + 1 if args.new else 0
        note = "" if first.how == "exact" else f" (matched ignoring {first.how})"
        done = len(found) if args.replace_all else 1
        return (f"replaced {done} occurrence{'s' if done != 1 else ''} in {rel}{note}; "
                f"{_shown(updated, line, line + max(span, 1) - 1, count)}")

    def replace_lines(self, args: ReplaceLinesArgs) -> str:
        target, rel, text = self._load(args.path)
        lines = text.splitlines(keepends=True)
        if args.start_line > len(lines) + 1:
            raise ToolError(f"start_line {args.start_line} is past the end of {rel} "
                            f"({len(lines)} lines)")
        if args.end_line < args.start_line - 1 or args.end_line > len(lines):
            raise ToolError(f"end_line must be between {args.start_line - 1} and {len(lines)} "
                            f"({rel} has {len(lines)} lines)")
        _not_an_echo(args.new, "new")
        new = args.new if not args.new or args.new.endswith("\n") else args.new + "\n"
        updated = "".join(lines[:args.start_line - 1]) + new + "".join(lines[args.end_line:])
        if updated == text:
            raise ToolError("the new lines are the same as the old ones: nothing changed")
        self._save(target, rel, updated)
        span = new.count("\n")
        count = span - (args.end_line - args.start_line + 1)
        return (f"replaced lines {args.start_line}-{args.end_line} of {rel} with {span} "
                f"line{'s' if span != 1 else ''}; "
                f"{_shown(updated, args.start_line, args.start_line + span - 1, count)}")

    def apply_patch(self, args: ApplyPatchArgs) -> str:
        patch = unfence(args.patch)
        if not patch.strip():
            raise ToolError("the patch is empty")
        if SYMLINK_MODE.search(patch):
            raise PolicyViolation("patches may not create symlinks")
        errors: list[str] = []
        for strip in (1, 0):
            try:
                paths = patch_paths(self.jail.root, patch, strip)
            except ToolError as exc:
                errors.append(str(exc))
                continue
            targets = [self.jail.resolve(p, write=True) for p in paths]
            for target in (t for t in targets if t.exists()):
                self._not_secret(target)
            check = git_apply(self.jail.root, patch, strip, "--check")
            if check.returncode != 0:
                errors.append(trim(check.stderr))
                continue
            done = git_apply(self.jail.root, patch, strip)
            if done.returncode != 0:
                raise ToolError(f"patch did not apply: {trim(done.stderr)}")
            return _applied(sorted({self.jail.relative(t) for t in targets}))
        raise ToolError(
            f"patch does not apply: {errors[0]}. Re-read the file(s) and resend a unified diff "
            "whose context lines match exactly, or use `replace` for small edits"
        )

    def _load(self, path: str) -> tuple[Path, str, str]:
        target = self.jail.resolve(path, write=True)
        rel = self._not_secret(target)
        return target, rel, _read_text(target, rel, self.max_file_bytes)

    def _save(self, target: Path, rel: str, text: str) -> None:
        if len(text.encode("utf-8")) > self.max_file_bytes:
            raise ToolError(f"the result would exceed the {self.max_file_bytes}-byte file limit")
        _write_atomic(target, text.encode("utf-8"), rel)


# What these tools answer, and how they number lines: text a small model copied from a reply
# into what it writes ("replaced 1 occurrence in a.js; lines 1-1 now read:\n   1> ...").
_ECHO = re.compile(r"^(?:replaced \d+ occurrences? in |replaced lines \d+-\d+ of |"
                   r"(?:over)?wrote \S+ \(\d+ lines?\)|lines \d+-\d+ now read)", re.MULTILINE)
_NUMBERED = re.compile(r"^ *\d+[|>] ")


def _not_an_echo(text: str, field: str) -> None:
    """Refuse text that holds a tool's own reply, or lines all numbered as the tools show them:
    written into a file, they would replace the code with our transcript."""
    lines = [line for line in text.splitlines() if line.strip()]
    if _ECHO.search(text) or (len(lines) >= 2 and all(_NUMBERED.match(x) for x in lines)):
        raise ToolError(
            f"`{field}` holds a tool's reply or numbered lines as the tools show them "
            "(`replaced 1 occurrence in ...`, `  12| code`), not the file's text: send the "
            "lines as they should read, without the reply and without line numbers")


def _applied(names: list[str]) -> str:
    shown = ", ".join(names[:5]) + (f", +{len(names) - 5} more" if len(names) > 5 else "")
    return f"applied patch to {len(names)} file{'s' if len(names) != 1 else ''}: {shown}"


def _same(current: str, content: str) -> bool:
    return current.rstrip("\n") == content.rstrip("\n")


def _shown(text: str, first: int, last: int, delta: int) -> str:
    """The edited lines with a little context, as they now read."""
    last = max(first, last)
    moved = f" ({delta:+d} lines in the file)" if delta else ""
    body = fuzzy.numbered(text, first - AROUND, last + AROUND, mark=(first, last))
    return f"lines {first}-{last} now read{moved}:\n{body}"


def _not_found(text: str, old: str, rel: str) -> str:
    near = fuzzy.nearest(text, old)
    if near is None or near.ratio < 0.3:
        return (f"`old` text not found in {rel} and no similar lines either; read the file "
                "and copy the lines to change, or use replace_lines with line numbers")
    body = fuzzy.numbered(text, near.start_line - 1, near.end_line + 1,
                          mark=(near.start_line, near.end_line))
    return (f"`old` text not found in {rel}. The closest lines ({near.start_line}-"
            f"{near.end_line}, marked >) read:\n{body}\nCopy `old` from these lines exactly "
            f"(without the number prefix), or use replace_lines with start_line="
            f"{near.start_line} end_line={near.end_line}.")


def _line_count(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


def _read_text(target: Path, rel: str, limit: int) -> str:
    if not target.exists():
        raise ToolError(f"no such file: {rel} (use write_file to create a new file)")
    with open_regular(target, rel) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise ToolError(f"{rel} is larger than the {limit}-byte limit; edit it with apply_patch")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise ToolError(f"{rel} is not UTF-8 text; it cannot be edited with replace") from None


def _write_atomic(target: Path, data: bytes, shown: str) -> None:
    """Replace ``target`` by a new file holding ``data`` (same permissions), never in place.

    Writing into the existing inode would also change every hard link to it, wherever it is.
    """
    mode = 0o666 & ~_umask()
    if os.path.lexists(target):
        st = os.lstat(target)
        if not stat.S_ISREG(st.st_mode):
            raise ToolError(f"{shown} is not a regular file; only regular files can be written")
        mode = stat.S_IMODE(st.st_mode)
    fd, tmp = tempfile.mkstemp(prefix=".orchestrate-", suffix=".tmp", dir=target.parent)
    try:
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
        os.chmod(tmp, mode)
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


@functools.cache
def _umask() -> int:
    current = os.umask(0o022)
    os.umask(current)
    return current


