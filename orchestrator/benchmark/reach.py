"""Before a bench's runs: is every local server its role maps name up, and the variable its key
is read from set? One connection attempt per loopback endpoint, so a bench with no server (or no
key) says how to start one instead of erring once per run."""

from __future__ import annotations

import socket
from collections.abc import Mapping, Sequence
from urllib.parse import urlsplit

from orchestrator.config.schema import RoleMap
from orchestrator.errors import MissingCredentials, ModelUnavailable

LOOPBACK = frozenset({"127.0.0.1", "localhost", "::1"})
START_HINT = ("start it first; for the packaged live-* maps that is `bash "
              "scripts/live-model/start.sh` in a clone of orchestrate (both llama.cpp servers on "
              "127.0.0.1:8089 and :8090), then `export ORCHESTRATE_LIVE_KEY=local`")


def local_endpoints(role_map: RoleMap) -> dict[tuple[str, int], tuple[str, str]]:
    """``(host, port) -> ("provider P (model M)", key variable)`` for each loopback server a
    role's model is served by (a public endpoint is not checked: that would be a network
    call)."""
    found: dict[tuple[str, int], tuple[str, str]] = {}
    for spec in role_map.roles.values():
        model = role_map.models.get(spec.model)
        provider = role_map.providers.get(model.provider) if model else None
        if provider is None or not provider.base_url:
            continue
        url = urlsplit(provider.base_url)
        if url.hostname in LOOPBACK:
            port = url.port or (443 if url.scheme == "https" else 80)
            found.setdefault((url.hostname, port),
                             (f"provider {model.provider} (model {spec.model})",  # type: ignore[union-attr]
                              provider.api_key_env))
    return found


def answers(host: str, port: int, timeout_s: float = 2.0) -> bool:
    try:
        with socket.create_connection((host, port), timeout=timeout_s):
            return True
    except OSError:
        return False


def require_servers(maps: Sequence[tuple[str, RoleMap]], env: Mapping[str, str]) -> None:
    """Raise ``ModelUnavailable`` naming every local server no one answers at, and how to start
    one; ``MissingCredentials`` when one answers but its key variable is not set."""
    down: list[str] = []
    keys: dict[str, str] = {}
    for name, role_map in maps:
        for (host, port), (what, key_env) in local_endpoints(role_map).items():
            if not answers(host, port):
                down.append(f"{host}:{port} ({what} of role map {name})")
            elif not env.get(key_env):
                keys.setdefault(key_env, f"{what} of role map {name}")
    if down:
        raise ModelUnavailable(f"no server answers at {'; '.join(dict.fromkeys(down))}: "
                               + START_HINT)
    if keys:
        key_env, what = next(iter(keys.items()))
        raise MissingCredentials(f"{what} reads its key from {key_env}, which is not set: "
                                 f"export {key_env}=local (a local server ignores its value)")
