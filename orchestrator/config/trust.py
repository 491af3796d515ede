"""Trust in a repository's own configuration, and the user's config directory that records it.

A repository's ``roles.toml`` is written by whoever controls the repository. Keys that decide
where the user's API key is sent or what the builder may run (a provider's ``base_url`` and
``api_key_env``, ``[policy] allow``, the whole ``[sandbox]`` table) count only once the user
trusts that file: ``orchestrate trust`` records the file's sha256 per repository in
``$XDG_CONFIG_HOME/orchestrate/trusted.json``, so a changed file needs trust again. What a team
legitimately commits (models, tiers, efforts, fallbacks, agent prompts) needs no trust, but may
not weaken what the user's own layers say (``weaken.py``).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from orchestrator.errors import ConfigError

# A key path is protected when it starts with one of these ("*" matches any name).
PROTECTED: tuple[tuple[str, ...], ...] = (
    ("providers", "*", "base_url"),
    ("providers", "*", "api_key_env"),
    ("policy", "allow"),
    ("policy", "secret_allow"),
    ("run", "max_result_mb"),
    ("run", "max_result_files"),
    ("sandbox",),
    ("fleet", "job_may_set"),
)
REPO_ROLES = "roles.toml"
USER_ROLES = "roles.toml"
TRUST_FILE = "trusted.json"
AGENTS_DIR = Path(".orchestrate") / "agents"
CLAUDE_AGENTS_DIR = Path(".claude") / "agents"
KeyPath = tuple[str, ...]


class UntrustedConfig(ConfigError):
    """The repository's own role map sets protected keys and the user has not trusted it."""

    code = "untrusted_config"

    def __init__(self, repo: Path, file: Path, keys: list[tuple[str, Any]], *, changed: bool,
                 digest: str = ""):
        self.repo, self.file, self.keys, self.changed = repo, file, keys, changed
        self.digest = digest  # sha256 of the content refused: what trusting it would record
        what = "changed since you trusted it and now sets" if changed else "sets"
        super().__init__(
            f"{file} {what} {describe(keys)}, which decide where API keys go or what commands "
            f"may run; review the file, then run `orchestrate trust --repo {repo}` "
            "(or pass --trust-repo-config for one run)"
        )


def user_config_dir(env: Mapping[str, str]) -> Path:
    """``$XDG_CONFIG_HOME/orchestrate``, by default ``~/.config/orchestrate``."""
    base = env.get("XDG_CONFIG_HOME", "")
    if not base or not Path(base).is_absolute():  # the XDG spec ignores relative paths
        home = env.get("HOME") or str(Path.home())
        base = str(Path(home) / ".config")
    return Path(base) / "orchestrate"


def is_protected(path: KeyPath) -> bool:
    return any(
        len(path) >= len(p) and all(want in ("*", got) for want, got in zip(p, path, strict=False))
        for p in PROTECTED
    )


def leaves(tree: Mapping[str, Any], prefix: KeyPath = ()) -> Iterator[tuple[KeyPath, Any]]:
    """Every ``(key path, value)`` below ``tree``; an empty table is a leaf of its own."""
    for key, value in tree.items():
        here = (*prefix, str(key))
        if isinstance(value, Mapping) and value:
            yield from leaves(value, here)
        else:
            yield here, value


def protected_settings(data: Mapping[str, Any]) -> list[tuple[str, Any]]:
    """The protected keys one file sets, its ``[teams.*]`` overlays included (for listings)."""
    found = []
    for path, value in leaves(data):
        inner = path[2:] if path[:1] == ("teams",) else path
        if is_protected(inner):
            found.append((".".join(path), value))
    return found


def describe(keys: list[tuple[str, Any]], limit: int = 6) -> str:
    """``providers.openai.base_url = "http://..."; policy.allow = [...]`` on one line."""
    shown = [f"{k} = {_short(v)}" for k, v in keys[:limit]]
    more = f" and {len(keys) - limit} more" if len(keys) > limit else ""
    return "; ".join(shown) + more


def _short(value: Any) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    text = " ".join(text.split())
    return text if len(text) <= 80 else text[:77] + "..."


def fingerprint(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def repo_key(repo: Path) -> str:
    """Records are keyed by the repository's real path (symlinks resolved)."""
    return os.path.realpath(repo)


# --- the records ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class TrustRecord:
    """The user trusted ``files`` (name -> sha256) of the repository at ``repo``."""

    repo: str
    files: dict[str, str]
    trusted_at: str


def _store(user_dir: Path) -> Path:
    return user_dir / TRUST_FILE


def load_records(user_dir: Path) -> dict[str, TrustRecord]:
    path = _store(user_dir)
    try:
        raw = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        return {}
    except (OSError, ValueError) as exc:
        raise ConfigError(f"{path}: cannot read the trust records ({exc}); fix or delete the "
                          "file, then trust your repositories again") from None
    repos = raw.get("repos", {}) if isinstance(raw, dict) else {}
    return {
        key: TrustRecord(key, dict(rec.get("files", {})), str(rec.get("trusted_at", "")))
        for key, rec in repos.items() if isinstance(rec, dict)
    }


def _save(user_dir: Path, records: Mapping[str, TrustRecord]) -> None:
    user_dir.mkdir(parents=True, exist_ok=True)
    data = {"repos": {k: {"files": r.files, "trusted_at": r.trusted_at}
                      for k, r in sorted(records.items())}}
    # Write then rename, so a reader never sees half a file.
    fd, tmp = tempfile.mkstemp(prefix=".trusted-", dir=user_dir)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(data, fh, indent=2)
            fh.write("\n")
        os.replace(tmp, _store(user_dir))
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def repo_config_files(repo: Path) -> list[Path]:
    """The repository's own role map files whose protected keys need trust."""
    path = repo / REPO_ROLES
    return [path] if path.is_file() else []


def agent_overrides(repo: Path) -> list[Path]:
    """``.orchestrate/agents/*.md`` and Claude Code's ``.claude/agents/*.md``: agents a team
    commits (prompts, tools within what their kind allows); used without trust, but listed (one
    replacing the user's own agent of the same name only once trusted, ``load_registry``)."""
    found = []
    for folder in (repo / AGENTS_DIR, repo / CLAUDE_AGENTS_DIR):
        found += sorted(folder.glob("*.md")) if folder.is_dir() else []
    return found


def trust_state(user_dir: Path | None, repo: Path, file: Path, digest: str) -> str:
    """``trusted``, ``changed`` (trusted once, edited since) or ``untrusted``, for the content
    whose sha256 is ``digest``."""
    if user_dir is None:
        return "untrusted"
    record = load_records(user_dir).get(repo_key(repo))
    if record is None or file.name not in record.files:
        return "untrusted"
    return "trusted" if record.files[file.name] == digest else "changed"


def repo_trusted(user_dir: Path | None, repo: Path, files: Mapping[Path, str]) -> bool:
    """Whether the user trusts the repository as it is: a trust record for it, and each of its
    config ``files`` (path -> sha256) as it was trusted."""
    if user_dir is None:
        return False
    record = load_records(user_dir).get(repo_key(repo))
    return record is not None and all(record.files.get(f.name) == d for f, d in files.items())


def record_trust(user_dir: Path, repo: Path, digests: Mapping[str, str] | None = None
                 ) -> TrustRecord:
    """Trust the repository's config files: the content with ``digests`` (file name -> sha256,
    e.g. what the user was shown), by default the files as they are now."""
    records = load_records(user_dir)
    key = repo_key(repo)
    files = dict(digests) if digests is not None else {
        f.name: fingerprint(f) for f in repo_config_files(repo)}
    record = TrustRecord(key, files, datetime.now(UTC).isoformat(timespec="seconds"))
    _save(user_dir, {**records, key: record})
    return record


def revoke_trust(user_dir: Path, repo: Path) -> bool:
    """Forget the trust given to the repository; False when there was none."""
    records = load_records(user_dir)
    key = repo_key(repo)
    if key not in records:
        return False
    _save(user_dir, {k: v for k, v in records.items() if k != key})
    return True


_MISSING = object()


def _get(tree: Mapping[str, Any], path: KeyPath) -> Any:
    for key in path:
        if not isinstance(tree, Mapping) or key not in tree:
            return _MISSING
        tree = tree[key]
    return tree


def check(
    repo: Path,
    files: Mapping[Path, str],
    merged: Mapping[str, Any],
    below: Mapping[str, Any],
    set_by_repo: Callable[[KeyPath], bool],
    user_dir: Path | None,
) -> None:
    """Refuse the protected keys of ``merged`` that the repository's ``files`` (path -> sha256
    of the content parsed) set, and that differ from what the layers below them say, unless
    the user trusts that content."""
    keys = [
        (".".join(path), value) for path, value in leaves(merged)
        if is_protected(path) and set_by_repo(path) and _get(below, path) != value
    ]
    if not keys:
        return
    for file, digest in files.items():
        state = trust_state(user_dir, repo, file, digest)
        if state != "trusted":
            raise UntrustedConfig(repo, file, keys, changed=state == "changed", digest=digest)
