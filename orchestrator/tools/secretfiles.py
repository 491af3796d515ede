"""Secrets stay home: files that look like credentials are not read by any role, and values that
look like keys are masked in whatever a tool returns.

``SecretFiles`` says which repository paths are secret files: the built-in ``DENY`` globs (``.env``
files, private keys, credential files), minus what the role map's ``[policy] secret_allow`` lets
through. A glob without ``/`` is matched against a path's file name, one with ``/`` against its
last components (``.aws/credentials``). ``read`` refuses them, ``search`` and ``list`` leave them
out, the edit tools do not open them. ``mask`` replaces common key formats (OpenAI/Anthropic
``sk-...``, AWS ``AKIA...``, GitHub ``ghp_...``/``github_pat_...``, Slack ``xox?-...``, PEM private key
blocks) in a tool's output; every tool result goes through it (``Toolbox.call``), so a key the
builder's shell prints is masked too.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import PurePosixPath

DENY: tuple[str, ...] = (
    ".env", ".env.*", "*.env", "*.pem", "*.key", "*.p12", "*.pfx", "*.jks", "*.keystore",
    "id_rsa*", "id_dsa*", "id_ecdsa*", "id_ed25519*", ".npmrc", ".pypirc", ".netrc", ".pgpass",
    ".git-credentials", ".htpasswd", "credentials*.json", ".aws/credentials", ".aws/config",
    ".docker/config.json", ".kube/config", "secrets.yml", "secrets.yaml", "*.tfvars",
)
MASK = "[masked secret]"
_KEYS = re.compile(
    r"-----BEGIN [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----.*?(-----END [A-Z0-9 ]*PRIVATE KEY( BLOCK)?-----"
    r"|\Z)"
    r"|\b(?:sk|rk|pk)-(?:[A-Za-z0-9]+-)*[A-Za-z0-9_-]{20,}"
    r"|\b(?:AKIA|ASIA|ABIA|ACCA)[0-9A-Z]{16}\b"
    r"|\b(?:ghp|gho|ghu|ghs|ghr)_[A-Za-z0-9]{30,}"
    r"|\bgithub_pat_[A-Za-z0-9_]{40,}"
    r"|\bglpat-[A-Za-z0-9_-]{20,}"
    r"|\bxox[abposr]-[A-Za-z0-9-]{10,}"
    r"|\bAIza[0-9A-Za-z_-]{35}",
    re.DOTALL,
)


# what each key format holds literally: the regex runs only on a text holding one (str.find is
# C speed, the regex's alternation is not: 30 KB of output costs ~0.1 ms instead of ~15)
_MARKS = ("PRIVATE KEY", "sk-", "rk-", "pk-", "AKIA", "ASIA", "ABIA", "ACCA", "ghp_", "gho_",
          "ghu_", "ghs_", "ghr_", "github_pat_", "glpat-", "xox", "AIza")


def mask(text: str) -> str:
    """``text`` with every value that looks like a key replaced by ``[masked secret]``."""
    if not any(m in text for m in _MARKS):
        return text
    return _KEYS.sub(MASK, text)


@dataclass(frozen=True)
class SecretFiles:
    """Which repository paths are secret files: ``deny`` globs, minus ``allow`` globs (matched
    against the whole repository-relative path)."""

    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = DENY

    def secret(self, rel: str) -> bool:
        """Whether the repository path ``rel`` is a secret file no tool reads."""
        return _secret(self, rel)

    def refusal(self, rel: str) -> str:
        return (f"{rel} looks like a secret file (keys, credentials); it is not read, so its "
                "contents never reach a model. If the task needs it, the user can allow it in "
                f'the role map: [policy] secret_allow = ["{rel}"]')


@functools.lru_cache(maxsize=8192)
def _secret(files: SecretFiles, rel: str) -> bool:
    """(asked once per path: a search asks for each of its matches)"""
    parts = PurePosixPath(rel).parts
    if not parts:
        return False
    name = parts[-1]
    for glob in files.deny:
        depth = glob.count("/") + 1
        subject = name if depth == 1 else "/".join(parts[-depth:])
        if fnmatchcase(subject, glob):
            return not any(fnmatchcase(rel, a) for a in files.allow)
    return False


DEFAULT = SecretFiles()
