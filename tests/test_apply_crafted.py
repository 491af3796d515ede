"""`orchestrate apply` on a run branch an attacker crafted on the team's origin
(``refs/heads/orchestrate/<run-id>``, fetched as ``origin/orchestrate/<run-id>``): whatever the
tree holds — hook files, git's own control files, links out of the repository or into ``.git``,
a ``.git`` or ``..`` entry git itself would not check out — apply refuses (exit 2, or git's own
refusal as a clear error), and the user's checkout, ``.git`` and a sentinel outside are
byte-identical afterwards."""

from __future__ import annotations

import hashlib
import os
import subprocess
from pathlib import Path

import pytest
from conftest import cli

from orchestrator import api
from orchestrator.errors import UsageError
from orchestrator.workspace.autorun import unsafe_path

RUN_ID = "20261202-120000-c0ffee00"
EVIL = "#!/bin/sh\ntouch {sentinel}/pwned\n"


def _git(cwd: Path, *args: str, stdin: str | None = None) -> str:
    return subprocess.run(["git", "-c", "user.name=a", "-c", "user.email=a@x", *args], cwd=cwd,
                          input=stdin, capture_output=True, text=True, check=True).stdout.strip()


def _tree(git_dir: Path, entries: dict[str, tuple[str, str]], base: str) -> str:
    """A tree: ``base``'s entries plus ``entries`` (path -> (mode, content)), names unchecked
    (``git mktree`` takes ``.git`` or ``..`` as a name; ``update-index`` would refuse them)."""
    listing = _git(git_dir, "ls-tree", base)
    rows = {line.split("\t", 1)[1]: line for line in listing.splitlines()}
    subdirs: dict[str, dict[str, tuple[str, str]]] = {}
    for path, (mode, content) in entries.items():
        head, _, rest = path.partition("/")
        if rest:
            subdirs.setdefault(head, {})[rest] = (mode, content)
            continue
        sha = _git(git_dir, "hash-object", "-w", "--stdin", stdin=content)
        rows[head] = f"{mode} blob {sha}\t{head}"
    for name, sub in subdirs.items():
        old = rows.get(name, "")
        inner = old.split()[2] if " tree " in old else _git(git_dir, "mktree", stdin="")
        rows[name] = f"040000 tree {_tree(git_dir, sub, inner)}\t{name}"
    return _git(git_dir, "mktree", stdin="".join(r + "\n" for r in rows.values()))


def _state(repo: Path, sentinel: Path) -> dict[str, str]:
    """The checkout, the user's .git (but fetched objects and remote refs) and the sentinel:
    path -> hash of its bytes (or link target, or "dir")."""
    found = {}
    for root in (repo, sentinel):
        for path in sorted(root.rglob("*")):
            rel = f"{root.name}/{path.relative_to(root).as_posix()}"
            if rel.startswith(("repo/.git/objects/", "repo/.git/refs/remotes/", "repo/.git/logs/",
                               "repo/.git/FETCH_HEAD")):
                continue
            if path.is_symlink():
                found[rel] = "link:" + os.readlink(path)
            elif path.is_file():
                found[rel] = hashlib.sha256(path.read_bytes()).hexdigest()[:16]
            else:
                found[rel] = "dir"
    return found


@pytest.fixture
def world(sample_repo: Path, tmp_path: Path):
    origin = tmp_path / "origin.git"
    sentinel = tmp_path / "sentinel"
    sentinel.mkdir()
    (sentinel / "keep.txt").write_text("the user's\n")
    subprocess.run(["git", "clone", "-q", "--bare", str(sample_repo), str(origin)], check=True)
    _git(sample_repo, "remote", "add", "origin", str(origin))
    return sample_repo, origin, sentinel


def _publish(origin: Path, entries: dict[str, tuple[str, str]]) -> None:
    base = _git(origin, "rev-parse", "HEAD")
    tree = _tree(origin, entries, f"{base}^{{tree}}")
    commit = _git(origin, "commit-tree", tree, "-p", base, "-m", "orchestrate: fix median")
    _git(origin, "update-ref", f"refs/heads/orchestrate/{RUN_ID}", commit)


# (.gitattributes, .lfsconfig and the hook managers' files one by one: test_apply_guard.py)
ATTACKS: dict[str, dict[str, tuple[str, str]]] = {
    "husky hook": {".husky/pre-commit": ("100755", EVIL)},
    "hooks path of the user's config": {"ci/hooks/pre-commit": ("100755", EVIL)},
    "submodule url": {".gitmodules": ("100644", '[submodule "x"]\n\tpath = x\n\turl = ext::sh -c touch% /tmp/pwned\n')},
    "link out of the repository": {"docs/notes": ("120000", "{sentinel}")},
    "link up and out": {"docs/notes": ("120000", "../../sentinel/keep.txt")},
    "link into .git hooks": {"githooks": ("120000", ".git/hooks")},
    "link into .git via a subdirectory": {"src/cfg": ("120000", "../.git/config")},
    "a .git directory in a subdirectory": {
        "vendor/.git/config": ("100644", "[core]\n\tfsmonitor = touch {sentinel}/pwned\n"),
        "vendor/.git/HEAD": ("100644", "ref: refs/heads/main\n")},
    "a .git file in a subdirectory": {"vendor/.git": ("100644", "gitdir: {sentinel}\n")},
    "a dot-dot entry": {"../escaped.txt": ("100644", "x\n")},
    "a dot-dot directory": {"../../sentinel/pwned": ("100644", "x\n")},
    "a .GIT directory": {".GIT/hooks/pre-commit": ("100755", EVIL)},
}


@pytest.mark.parametrize("name", list(ATTACKS))
def test_apply_refuses_a_crafted_origin_branch(world, name: str) -> None:
    repo, origin, sentinel = world
    _git(repo, "config", "core.hooksPath", "ci/hooks")
    entries = {path: (mode, content.format(sentinel=sentinel))
               for path, (mode, content) in ATTACKS[name].items()}
    _publish(origin, entries)
    _git(repo, "fetch", "-q", "origin")
    before = _state(repo, sentinel)
    if name == "husky hook":  # one through the command line: exit 2, a reason, no traceback
        result = cli("apply", RUN_ID, "--repo", str(repo))
        assert result.returncode == 2, (result.returncode, result.stdout, result.stderr)
        assert "Traceback" not in result.stderr and ".husky/pre-commit" in result.stderr
    else:
        with pytest.raises(UsageError, match=f"orchestrate/{RUN_ID} changes files"):
            api.apply(RUN_ID, repo=repo)
    assert _state(repo, sentinel) == before
    assert not (sentinel / "pwned").exists()
    assert not (repo / "../escaped.txt").exists()


@pytest.mark.parametrize("path", [".git/config", "a/.git/hooks/x", "a/.GIT/x", "a/.git./x",
                                  "a/.g\u200cit/x", "a/git~1/config", "../x", "a/../../x",
                                  "a/./x", "a//x"])
def test_paths_git_would_not_check_out(path: str) -> None:
    assert unsafe_path(path)


@pytest.mark.parametrize("path", [".github/x", "a/.gitignore", "a/.gitkeep", "git/x", "..a/b"])
def test_paths_it_would(path: str) -> None:
    assert unsafe_path(path) is None
