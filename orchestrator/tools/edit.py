"""The builder's file-editing tools: write a file, replace exact text, apply a unified diff.

Every path goes through ``Jail.resolve(..., write=True)`` before anything is written, so edits stay
inside the workspace root and never reach ``.git``. Files are replaced atomically (a temporary file
renamed over the old one), so a write never goes through a hard link to a file elsewhere; FIFOs,
sockets and devices are refused, never opened. ``apply_patch`` runs ``git apply`` against a private
empty repository, so no configuration in the workspace's ``.git`` is ever read. Failures the model
can fix (text not found, ambiguous match, a patch that does not apply) raise ``ToolError`` with a
hint; escapes raise ``PolicyViolation``. Each tool answers with a one-line confirmation.
"""

from __future__ import annotations

import codecs
import contextlib
import difflib
import functools
import os
import re
import stat
import subprocess
import tempfile
from pathlib import Path

from pydantic import BaseModel, Field

from ..errors import PolicyViolation, ToolError
from ..gitsafe import GitError, git
from .base import Tool
from .jail import Jail, open_regular

_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n?```\s*$", re.S)
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
_SYMLINK_MODE = re.compile(r"^(?:new file mode|new mode) 120000\s*$", re.M)


class WriteFileArgs(BaseModel):
    path: str = Field(description="Repository-relative path of the file to create or overwrite.")
    content: str = Field(description="The complete new content of the file.")


class ReplaceArgs(BaseModel):
    path: str = Field(description="Repository-relative path of an existing file.")
    old: str = Field(description="Exact text to find, including whitespace and indentation.")
    new: str = Field(description="Text to put in its place.")
    replace_all: bool = Field(False, description="Replace every occurrence instead of one.")


class ApplyPatchArgs(BaseModel):
    patch: str = Field(description="A unified diff (as `git diff` prints), repo-relative paths.")


def edit_tools(root: Path, *, max_file_bytes: int = 1_000_000) -> list[Tool]:
    """The write tools for a session whose workspace is ``root``."""
    jail = Jail(root)

    def write_file(args: WriteFileArgs) -> str:
        target = jail.resolve(args.path, write=True)
        size = len(args.content.encode("utf-8"))
        if size > max_file_bytes:
            raise ToolError(
                f"content is {size} bytes; the limit is {max_file_bytes} bytes per file"
            )
        if target.is_dir():
            raise ToolError(f"{args.path} is a directory")
        existed = target.exists()
        target.parent.mkdir(parents=True, exist_ok=True)
        _write_atomic(target, args.content.encode("utf-8"), args.path)
        verb = "overwrote" if existed else "wrote"
        return f"{verb} {jail.relative(target)} ({_line_count(args.content)} lines)"

    def replace(args: ReplaceArgs) -> str:
        target = jail.resolve(args.path, write=True)
        rel = jail.relative(target)
        text = _read_text(target, rel, max_file_bytes)
        if not args.old:
            raise ToolError("`old` is empty; give the exact text to replace")
        count = text.count(args.old)
        if count == 0:
            raise ToolError(_not_found(text, args.old, rel))
        if count > 1 and not args.replace_all:
            lines = _match_lines(text, args.old)
            raise ToolError(
                f"`old` appears {count} times in {rel} (lines {', '.join(map(str, lines))}); "
                "include more surrounding context so it matches once, or pass replace_all=true"
            )
        updated = text.replace(args.old, args.new) if args.replace_all else text.replace(
            args.old, args.new, 1
        )
        if len(updated.encode("utf-8")) > max_file_bytes:
            raise ToolError(f"the result would exceed the {max_file_bytes}-byte file limit")
        _write_atomic(target, updated.encode("utf-8"), rel)
        done = count if args.replace_all else 1
        return f"replaced {done} occurrence{'s' if done != 1 else ''} in {rel}"

    def apply_patch(args: ApplyPatchArgs) -> str:
        patch = _unfence(args.patch)
        if not patch.strip():
            raise ToolError("the patch is empty")
        if _SYMLINK_MODE.search(patch):
            raise PolicyViolation("patches may not create symlinks")
        errors: list[str] = []
        for strip in (1, 0):
            try:
                paths = _patch_paths(jail.root, patch, strip)
            except ToolError as exc:
                errors.append(str(exc))
                continue
            targets = [jail.resolve(p, write=True) for p in paths]
            check = _git_apply(jail.root, patch, strip, "--check")
            if check.returncode != 0:
                errors.append(_trim(check.stderr))
                continue
            done = _git_apply(jail.root, patch, strip)
            if done.returncode != 0:
                raise ToolError(f"patch did not apply: {_trim(done.stderr)}")
            names = sorted({jail.relative(t) for t in targets})
            shown = ", ".join(names[:5]) + (f", +{len(names) - 5} more" if len(names) > 5 else "")
            return f"applied patch to {len(names)} file{'s' if len(names) != 1 else ''}: {shown}"
        raise ToolError(
            f"patch does not apply: {errors[0]}. Re-read the file(s) and resend a unified diff "
            "whose context lines match exactly, or use `replace` for small edits"
        )

    return [
        Tool(
            "write_file",
            "Create or overwrite a file with the given content (parent folders are created).",
            WriteFileArgs, write_file, read_only=False,
        ),
        Tool(
            "replace",
            "Replace an exact piece of text in a file. `old` must match exactly once unless "
            "replace_all is true; include enough context lines to make it unique.",
            ReplaceArgs, replace, read_only=False,
        ),
        Tool(
            "apply_patch",
            "Apply a unified diff (git diff format, a/ and b/ prefixes) to the workspace.",
            ApplyPatchArgs, apply_patch, read_only=False,
        ),
    ]


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


def _match_lines(text: str, old: str) -> list[int]:
    lines: list[int] = []
    start = 0
    while (at := text.find(old, start)) != -1 and len(lines) < 10:
        lines.append(text.count("\n", 0, at) + 1)
        start = at + 1
    return lines


def _not_found(text: str, old: str, rel: str) -> str:
    pattern = r"\s*".join(re.escape(token) for token in old.split())
    loose = re.search(pattern, text) if pattern else None
    if loose:
        line = text.count("\n", 0, loose.start()) + 1
        return (
            f"`old` text not found in {rel}, but it matches near line {line} when whitespace is "
            "ignored; copy the exact indentation and spacing from the file"
        )
    lines = text.splitlines()
    stripped = [line.strip() for line in lines]
    probe = next((w.strip() for w in old.splitlines() if w.strip()), old.strip())
    close = set(difflib.get_close_matches(probe, stripped, n=3, cutoff=0.5))
    shown = [f"  {i + 1}: {lines[i]}" for i, s in enumerate(stripped) if s in close][:3]
    hint = ("closest lines:\n" + "\n".join(shown)) if shown else "no similar line found"
    return f"`old` text not found in {rel}; {hint}\nRe-read the file and copy the text exactly."


def _unfence(patch: str) -> str:
    match = _FENCE.match(patch.strip())
    body = match.group(1) if match else patch
    return body if body.endswith("\n") else body + "\n"


def _patch_paths(root: Path, patch: str, strip: int) -> list[str]:
    """Every file path the patch reads or writes, ``strip`` leading components removed.

    The union of git's own reading (``--numstat``) and the headers, so a rename's source and
    anything git might parse differently from us are both checked against the jail.
    """
    numstat = _git_apply(root, patch, strip, "--numstat", "-z")
    if numstat.returncode != 0:
        raise ToolError(_trim(numstat.stderr))
    tokens = numstat.stdout.decode("utf-8", "surrogateescape").split("\0")
    paths = [t.split("\t", 2)[2] if t.count("\t") >= 2 else t for t in tokens]
    for name, prefixed in _header_paths(patch):
        if name == "/dev/null":
            continue
        parts = name.split("/")
        if prefixed and strip:
            if len(parts) <= strip:
                continue
            parts = parts[strip:]
        paths.append("/".join(parts))
    return list(dict.fromkeys(p for p in paths if p and p != "/dev/null"))


def _header_paths(patch: str) -> list[tuple[str, bool]]:
    """(path, carries an a/ b/ prefix) for each file header, skipping hunk bodies by count."""
    found: list[tuple[str, bool]] = []
    old_left = new_left = 0
    for line in patch.splitlines():
        if old_left > 0 or new_left > 0:
            tag = line[:1]
            if tag in (" ", ""):
                old_left, new_left = old_left - 1, new_left - 1
                continue
            if tag in ("-", "+", "\\"):
                old_left -= tag == "-"
                new_left -= tag == "+"
                continue
            old_left = new_left = 0
        if hunk := _HUNK.match(line):
            old_left = int(hunk.group(1) or 1)
            new_left = int(hunk.group(2) or 1)
        elif line.startswith(("--- ", "+++ ")):
            found.append((_unquote(line[4:].split("\t")[0].rstrip()), True))
        elif line.startswith(("rename from ", "rename to ", "copy from ", "copy to ")):
            found.append((_unquote(line.split(" ", 2)[2].rstrip()), False))
        elif line.startswith("diff --git "):
            found.extend((_unquote(t), True) for t in _git_header_paths(line[11:]))
    return found


def _git_header_paths(rest: str) -> list[str]:
    if rest.startswith('"'):
        return [m.group(0) for m in re.finditer(r'"(?:[^"\\]|\\.)*"|\S+', rest)]
    half = (len(rest) - 1) // 2
    first, second = rest[:half], rest[half + 1 :]
    # "a/x b/x": both halves name the same file after their one-letter prefix.
    if rest[half : half + 1] == " " and first[2:] == second[2:]:
        return [first, second]
    return []


def _unquote(token: str) -> str:
    if len(token) >= 2 and token[0] == '"' and token[-1] == '"':
        raw = codecs.escape_decode(token[1:-1].encode("utf-8"))[0]
        return raw.decode("utf-8", "surrogateescape")
    return token


def _git_apply(root: Path, patch: str, strip: int, *flags: str) -> subprocess.CompletedProcess:
    """``git apply`` on the files under ``root``, reading no repository config but our own."""
    try:
        return git("apply", "--recount", "--whitespace=nowarn", f"-p{strip}", *flags, "-",
                   git_dir=_private_repo(), work_tree=root, cwd=root,
                   input=patch.encode("utf-8"), text=False, check=False, timeout=60)
    except GitError as exc:
        raise ToolError(str(exc)) from None


@functools.cache
def _private_repo() -> Path:
    """An empty repository of our own: ``git apply`` needs one, and must not find the builder's."""
    path = Path(tempfile.mkdtemp(prefix="orchestrate-apply-")) / "git"
    git("init", "-q", "--bare", "--template=", str(path), cwd=path.parent)
    return path


def _trim(stderr: str | bytes, max_lines: int = 6) -> str:
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    lines = [
        line.removeprefix("error: ").strip()
        for line in text.splitlines()
        if line.strip()
    ]
    text = "; ".join(lines[:max_lines]) + (" ..." if len(lines) > max_lines else "")
    return text or "git apply failed without a message"
