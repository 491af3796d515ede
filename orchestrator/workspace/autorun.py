"""Which paths of a tree run by themselves: files a git client or a common hook manager executes
or obeys without the user asking, once they are in the user's checkout.

``orchestrate apply`` lists a run branch's changes to these and refuses them unless the user
allows each by name (``runs.apply``). Pure functions over paths; the git calls are the caller's.
"""

from __future__ import annotations

# A file of this name, in any directory, is read by git or a hook manager and can name a program
# to run or a place to fetch from.
_FILES: dict[str, str] = {
    ".gitattributes": "git filter and diff drivers",
    ".gitmodules": "git submodule URLs",
    ".lfsconfig": "git-lfs settings (endpoints, transfer agents)",
    ".pre-commit-config.yaml": "pre-commit hooks",
    ".pre-commit-hooks.yaml": "pre-commit hook definitions",
    ".overcommit.yml": "overcommit hooks",
    ".envrc": "direnv: run by the shell on entering the directory",
}
_LEFTHOOK = ("lefthook", ".lefthook", "lefthook-local", ".lefthook-local")
for _stem in _LEFTHOOK:
    for _ext in ("yml", "yaml", "json", "jsonc", "toml"):
        _FILES[f"{_stem}.{_ext}"] = "lefthook hooks"

# A directory of this name, anywhere in the tree, holds hook scripts a manager installs.
_DIRS: dict[str, str] = {
    ".husky": "husky git hooks",
    ".lefthook": "lefthook hook scripts",
    ".git-hooks": "overcommit hook scripts",
    ".githooks": "git hook scripts",
}

# CI workflows run where the repository is pushed, with its secrets: guarded on request
# (``apply --guard-ci`` or ``git config orchestrate.guardCi true``).
_CI_PREFIXES = (".github/workflows/", ".github/actions/", ".circleci/", ".buildkite/",
                ".gitlab/ci/")
_CI_FILES = (".gitlab-ci.yml", ".gitlab-ci.yaml", ".travis.yml", "azure-pipelines.yml",
             "bitbucket-pipelines.yml", "Jenkinsfile", ".drone.yml", "appveyor.yml")


def runs_by_itself(path: str, *, hooks_dir: str | None = None, ci: bool = False) -> str | None:
    """Why ``path`` (relative, ``/``-separated) runs or steers a program by itself, or None.

    ``hooks_dir`` is the configured ``core.hooksPath`` relative to the repository (if inside it);
    ``ci`` adds CI workflow files to the list.
    """
    parts = path.split("/")
    if hooks_dir and (path == hooks_dir or path.startswith(hooks_dir + "/")):
        return f"a git hook: core.hooksPath = {hooks_dir}"
    reason = _FILES.get(parts[-1])
    if reason:
        return reason
    for part in parts[:-1]:
        if part in _DIRS:
            return _DIRS[part]
    if ci and (path in _CI_FILES or path.startswith(_CI_PREFIXES)):
        return "a CI workflow"
    return None


# characters HFS+ ignores in a name (git's is_hfs_dotgit): ".g\u200cit" is ".git" there
_IGNORED_BY_HFS = frozenset("\u200b\u200c\u200d\u200e\u200f\u202a\u202b\u202c\u202d\u202e"
                            "\u206a\u206b\u206c\u206d\u206e\u206f\ufeff")


def unsafe_path(path: str) -> str | None:
    """Why git would refuse to check ``path`` out (a ``.git`` component in any spelling an
    NTFS or HFS+ checkout reads as ``.git``, ``..``, ``.``, an empty one), or None. A branch
    holding one was crafted: no run writes such a tree."""
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return f"a path with a {part or 'empty'!r} component"
        plain = "".join(c for c in part.lower() if c not in _IGNORED_BY_HFS).rstrip(". ")
        if plain in (".git", "git~1"):
            return "a path inside a .git directory"
    return None


def allowed(path: str, names: tuple[str, ...]) -> bool:
    """Whether the user named ``path`` (or a directory holding it) to be let through."""
    for name in names:
        name = name.strip().removeprefix("./").rstrip("/")
        if name and (path == name or path.startswith(name + "/")):
            return True
    return False
