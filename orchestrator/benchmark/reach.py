"""Before a bench's runs: is every local server its role maps name up, and the variable its key
is read from set? One connection attempt per loopback endpoint, so a bench with no server (or no
key) says how to start one instead of erring once per run. Before each run: a local server's
prompt cache is emptied of the run before (``evict_prompt_caches``)."""

from __future__ import annotations

import socket
import uuid
from collections.abc import Iterator, Mapping, Sequence
from urllib.parse import urlsplit

import openai

from orchestrator.config.schema import ModelSpec, Provider, RoleMap
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
    for alias, model, provider in _loopback_models(role_map):
        url = urlsplit(provider.base_url or "")
        port = url.port or (443 if url.scheme == "https" else 80)
        found.setdefault((url.hostname or "", port),
                         (f"provider {model.provider} (model {alias})", provider.api_key_env))
    return found


def _loopback_models(role_map: RoleMap) -> Iterator[tuple[str, ModelSpec, Provider]]:
    """``(alias, model, provider)`` for each role's model served on this machine."""
    for spec in role_map.roles.values():
        model = role_map.models.get(spec.model)
        provider = role_map.providers.get(model.provider) if model else None
        if model and provider and provider.base_url and \
                urlsplit(provider.base_url).hostname in LOOPBACK:
            yield spec.model, model, provider


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


async def evict_prompt_caches(role_map: RoleMap, env: Mapping[str, str]) -> list[str]:
    """Send each local server a role of ``role_map`` uses one unrelated one-token request per
    slot, so that its prompt cache (llama.cpp keeps the last prompt's KV cache per slot) holds
    nothing of the run before. Two maps that ask the same first prompt otherwise differ by the
    cache alone: in live r8 the second map's first call read 400-550 cached tokens in 0.1 s
    where the first read them in 4-8 s (and at temperature 0 a cached prompt can even answer
    differently). A llama.cpp server says how many slots it has (``total_slots`` in ``/props``;
    the live kit serves two, so that two prompts that differ early both stay cached) and each
    gets its own request (``id_slot``); a server that does not say gets one. llama.cpp's
    host-memory prompt cache (``--cache-ram``, on by default in its server) would restore the
    prompt all the same, so the live kit's ``scripts/live-model/serve.py`` turns it off. Public
    endpoints are never called. Returns what could not be evicted (the run goes on)."""
    failed: list[str] = []
    served = {(p.base_url or "", m.id): p.api_key_env for _, m, p in _loopback_models(role_map)}
    for (base_url, model), key_env in served.items():
        client = openai.AsyncOpenAI(base_url=base_url, api_key=env.get(key_env) or "local",
                                    timeout=60.0, max_retries=0)
        try:
            slots = await _slots(client, base_url)
            for slot in range(slots) if slots else [None]:
                await client.chat.completions.create(
                    model=model, max_tokens=1, temperature=0,
                    messages=[{"role": "system", "content": f"cache eviction {uuid.uuid4().hex}"},
                              {"role": "user", "content": "ok"}],
                    extra_body=None if slot is None else {"id_slot": slot})
        except openai.OpenAIError as exc:
            failed.append(f"{model} at {base_url}: {type(exc).__name__}")
        finally:
            await client.close()
    return failed


# a llama.cpp server with more slots than this is not one a bench evicts slot by slot
MAX_SLOTS = 16


async def _slots(client: openai.AsyncOpenAI, base_url: str) -> int | None:
    """The number of slots a llama.cpp server at ``base_url`` keeps prompts in (``GET /props``
    at its root), or None when it does not answer that with a number."""
    root = base_url.rstrip("/").removesuffix("/v1")
    try:
        props = await client.get(f"{root}/props", cast_to=object)
    except openai.OpenAIError:
        return None
    n = props.get("total_slots") if isinstance(props, dict) else None
    return n if isinstance(n, int) and not isinstance(n, bool) and 0 < n <= MAX_SLOTS else None
