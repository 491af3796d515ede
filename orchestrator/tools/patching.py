"""``apply_patch``'s machinery: unfence a model's diff, list every path it touches (git's own
reading and the headers, so the jail checks both), and run ``git apply`` against a private empty
repository so that no configuration in the workspace's ``.git`` is ever read.
"""

from __future__ import annotations

import codecs
import functools
import re
import subprocess
import tempfile
from pathlib import Path

from orchestrator.errors import GitError, ToolError
from orchestrator.gitsafe import git

_FENCE = re.compile(r"^```[\w-]*\n(.*?)\n?```\s*$", re.S)
_HUNK = re.compile(r"^@@ -\d+(?:,(\d+))? \+\d+(?:,(\d+))? @@")
SYMLINK_MODE = re.compile(r"^(?:new file mode|new mode) 120000\s*$", re.M)


def unfence(patch: str) -> str:
    match = _FENCE.match(patch.strip())
    body = match.group(1) if match else patch
    return body if body.endswith("\n") else body + "\n"


def patch_paths(root: Path, patch: str, strip: int) -> list[str]:
    """Every file path the patch reads or writes, ``strip`` leading components removed.

    The union of git's own reading (``--numstat``) and the headers, so a rename's source and
    anything git might parse differently from us are both checked against the jail.
    """
    numstat = git_apply(root, patch, strip, "--numstat", "-z")
    if numstat.returncode != 0:
        raise ToolError(trim(numstat.stderr))
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


def git_apply(root: Path, patch: str, strip: int, *flags: str) -> subprocess.CompletedProcess:
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


def trim(stderr: str | bytes, max_lines: int = 6) -> str:
    text = stderr.decode("utf-8", "replace") if isinstance(stderr, bytes) else stderr
    lines = [
        line.removeprefix("error: ").strip()
        for line in text.splitlines()
        if line.strip()
    ]
    text = "; ".join(lines[:max_lines]) + (" ..." if len(lines) > max_lines else "")
    return text or "git apply failed without a message"
