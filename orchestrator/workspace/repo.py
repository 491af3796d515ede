"""The target repository: finding its top level, with one clear line when there is none.

Kept apart from the API so that quick commands (``orchestrate roles``) find the repository
without importing the engine.
"""

from __future__ import annotations

import os
from pathlib import Path

from orchestrator.errors import UsageError
from orchestrator.gitsafe import git


def repo_root(path: str | os.PathLike[str] | None) -> Path:
    """The top level of the git repository at or above ``path``; a clear error otherwise."""
    start_at = Path(path or ".").resolve()
    if not start_at.exists():
        raise UsageError(f"repository path does not exist: {start_at}")
    proc = git("rev-parse", "--show-toplevel", cwd=start_at if start_at.is_dir() else start_at.parent,
               check=False)
    if proc.returncode != 0:
        raise UsageError(
            f"not a git repository: {start_at} (run inside a repository or pass --repo PATH)"
        )
    return Path(proc.stdout.strip())
