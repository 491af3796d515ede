"""What a sandboxed command sees: bwrap's mount arguments, built in the order that layers them.

System directories read-only; private, size-capped scratch (``/tmp``, ``/run``, ``/var``,
``/dev/shm``, home) that hides host sockets; the toolchain on ``PATH`` read-only; secrets masked
wherever an exposed directory contains them; the worktree writable; the root read-only last.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from pathlib import Path

SYSTEM_ROOTS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32", "/etc", "/opt",
                "/nix", "/sys")
SCRATCH = ("/tmp", "/run", "/var", "/dev/shm")
# Masked wherever they are visible (inside an exposed directory, or the system).
SECRETS = (
    "~/.ssh", "~/.aws", "~/.azure", "~/.config", "~/.gnupg", "~/.docker", "~/.kube", "~/.netrc",
    "~/.git-credentials", "~/.gitconfig", "~/.pypirc", "~/.npmrc", "~/.yarnrc", "~/.pgpass",
    "~/.cargo/credentials", "~/.cargo/credentials.toml", "~/.local/share/keyrings",
    "~/.password-store", "~/.vault-token", "~/.terraform.d", "~/.m2/settings.xml",
    "~/.gradle/gradle.properties", "~/.bash_history", "~/.python_history",
    "/etc/shadow", "/etc/shadow-", "/etc/gshadow", "/etc/gshadow-", "/etc/sudoers",
    "/etc/sudoers.d", "/etc/ssh", "/etc/ssl/private", "/etc/security/opasswd",
)
TOOLCHAIN_DIRS = ("bin", "sbin", "shims")


def toolchain_paths(path_var: str, home: str | None) -> list[Path]:
    """What a toolchain on ``PATH`` needs: each entry, and its root for ``bin``/``shims`` dirs.

    ``~/.pyenv/shims`` brings ``~/.pyenv`` (the shims exec the versions there); a root is never
    the home directory itself or ``/``, so ``~/bin`` exposes only ``~/bin``.
    """
    found = [Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent]
    for entry in path_var.split(os.pathsep):
        if not entry or not os.path.isabs(entry) or not os.path.isdir(entry):
            continue
        p = Path(entry)
        found.append(p)
        parent = p.parent
        if p.name in TOOLCHAIN_DIRS and parent != Path("/") and str(parent) != home \
                and not (home and Path(home).is_relative_to(parent)):
            found.append(parent)
    return found


def expand(raw: str, home: str | None) -> Path:
    if raw.startswith("~") and home:
        return Path(home + raw[1:])
    return Path(raw)


def scratch_sizes(tmp_mb: int, home: bool) -> dict[str, int]:
    """Bytes of each scratch tmpfs (``~``: the home directory), adding up to ``tmp_mb``: /tmp
    half (three quarters without a home), home a quarter, /run, /var and /dev/shm the rest."""
    total, page = tmp_mb * 1024 * 1024, 4096  # tmpfs rounds a size up to whole pages
    small = total // 4 // len(SCRATCH[1:]) // page * page
    sizes = {s: small for s in SCRATCH[1:]}
    if home:
        sizes["~"] = total // 4 // page * page
    sizes["/tmp"] = total - sum(sizes.values())
    return {"/tmp": sizes.pop("/tmp"), **sizes}


class MountPlan:
    """bwrap's mount arguments, in the order that layers them right."""

    def __init__(self, *, home: str | None, tmp_mb: int) -> None:
        self.home = home
        self.args = ["--die-with-parent", "--new-session", "--unshare-all", "--cap-drop", "ALL"]
        self.visible: list[str] = []
        self.read_only: list[str] = []
        self.hidden: list[str] = []
        for root in SYSTEM_ROOTS:
            if os.path.islink(root):
                self.args += ["--symlink", os.readlink(root), root]
            elif os.path.isdir(root):
                self.args += ["--ro-bind", root, root]
                self.visible.append(root)
        self.args += ["--dev", "/dev", "--proc", "/proc"]
        with_home = bool(home and home != "/" and not self._covered(home))
        for scratch, size in scratch_sizes(tmp_mb, with_home).items():
            self.args += ["--size", str(size), "--tmpfs", str(home) if scratch == "~" else scratch]
        self.args += ["--remount-ro", "/dev"]  # device nodes stay usable; no files in /dev

    def _covered(self, path: str) -> bool:
        return any(path == v or path.startswith(v.rstrip("/") + "/") for v in self.visible)

    def expose(self, paths: Iterable[Path]) -> None:
        real = {os.path.realpath(p): str(p) for p in paths if os.path.exists(p)}
        for target in sorted(real, key=len):
            if self._covered(target):
                continue
            self.args += ["--ro-bind", target, target]
            self.visible.append(target)
            self.read_only.append(target)

    def hide(self, paths: Iterable[str]) -> None:
        for raw in paths:
            path = str(expand(raw, self.home))
            if not os.path.lexists(path) or not self._covered(path):
                continue
            real = os.path.realpath(path)
            if os.path.isdir(real):
                self.args += ["--tmpfs", path, "--remount-ro", path]
            else:
                self.args += ["--ro-bind", "/dev/null", path]
            self.hidden.append(path)

    def writable(self, path: Path) -> None:
        # last: the root (a tmpfs holding mount points) becomes read-only, so the worktree and
        # the size-capped scratch mounts are the only places a command can write
        self.args += ["--bind", str(path), str(path), "--remount-ro", "/"]
