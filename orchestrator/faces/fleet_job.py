"""What a fleet job carries, and what a worker lets it decide.

A job holds the *content* of its role map files, never paths on the submitter's disk (another
machine has none of them), and the agent definition files (``.md``) of the submitter's own
``agents/`` folder that its role map names (``agent_contents``): the worker's home has other
ones, or none. The worker writes them into a folder of its own and runs the task
with them; but a role map file or ``--set`` from the queue is anyone's word who can write to
the database, so the protected settings (``providers.*.base_url`` and ``api_key_env``, where
API keys go; ``policy.allow``; ``sandbox``, off included) and ``trust_repo_config`` are taken
from a job only when the worker's owner allows them: ``orchestrate worker --allow-set KEY``
or ``[fleet] job_may_set = [...]`` in the owner's own ``roles.toml``. A job asking for more is
refused, before any model is called, with the keys it asked for and how to allow them.
"""

from __future__ import annotations

import fnmatch
import os
import re
import tomllib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from orchestrator.config.definitions import load_registry, parse_agent
from orchestrator.config.layers import parse_set
from orchestrator.config.trust import USER_ROLES, protected_settings, user_config_dir
from orchestrator.errors import ConfigError, UsageError

TRUST_KEY = "trust_repo_config"


class JobRefused(UsageError):
    """A job sets what this worker's owner does not let a job set; it is never retried."""

    code = "job_refused"


def role_contents(role_files: Sequence[str | os.PathLike[str]]) -> list[dict[str, str]]:
    """The role map files as the job carries them: each file's name and text, in order."""
    found = []
    for f in role_files:
        path, text = _read(f, "role map file")
        _parse(text, str(path))  # a broken file is refused here, not on some worker later
        found.append({"name": path.name, "text": text})
    return found


def _read(f: str | os.PathLike[str], what: str) -> tuple[Path, str]:
    """A file the submitter named, read for the job; one line naming it when it cannot be."""
    path = Path(f).expanduser()
    try:
        return path, path.read_text("utf-8")
    except OSError as exc:
        raise UsageError(f"cannot read {what} {path}: {exc.strerror or exc}; "
                         "give a file that exists") from None


def agent_contents(roles: Sequence[Mapping[str, str]], sets: Sequence[str],
                   env: Mapping[str, str],
                   agent_files: Sequence[str | os.PathLike[str]] = ()) -> list[dict[str, str]]:
    """The agent files a job carries: ``agent_files`` as given, and each role its role map
    names (``[roles.NAME]``, ``[pipeline] steps``, a team's roles) that the submitter's own
    ``agents/`` folder defines (where a worker's would not)."""
    found: dict[str, dict[str, str]] = {}
    user_dir = user_config_dir(env)
    own = load_registry(None, user_dir=user_dir)
    mine = str(user_dir / "agents")
    for name in _role_names([*(_parse(r["text"], r["name"]) for r in roles),
                             *(parse_set(s) for s in sets)]):
        agent = own.get(name)
        if agent is not None and agent.source.startswith(mine):
            found[agent.role] = {"name": Path(agent.source).name, "text": agent.text}
    for f in agent_files:
        path, text = _read(f, "agent file")
        agent = parse_agent(text, str(path), stem=path.stem)  # broken: refused here
        found[agent.role] = {"name": path.name, "text": text}
    return list(found.values())


def _role_names(tables: Sequence[Mapping[str, Any]]) -> list[str]:
    names: list[str] = []
    for table in tables:
        names += list(table.get("roles", {}) or {})
        names += [s for s in (table.get("pipeline", {}) or {}).get("steps", []) or []
                  if isinstance(s, str)]
        for team in (table.get("teams", {}) or {}).values():
            if isinstance(team, Mapping):
                names += _role_names([team])
    return list(dict.fromkeys(names))


def write_agents(agents: Sequence[Mapping[str, str]], folder: Path) -> list[Path]:
    """The job's agent files written into ``folder``, each under its role's file name."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for item in agents:
        name = re.sub(r"[^\w.-]+", "-", item["name"]).lstrip(".") or "agent.md"
        path = folder / name
        path.write_text(item["text"], "utf-8")
        paths.append(path)
    return paths


def _parse(text: str, name: str) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{name}: {exc}; fix the TOML") from None


def asked_settings(roles: Sequence[Mapping[str, str]], sets: Sequence[str],
                   trust_repo_config: bool) -> list[str]:
    """The protected settings a job asks for, as dotted keys (``providers.sim.base_url``)."""
    asked = [key for item in roles
             for key, _ in protected_settings(_parse(item["text"], item["name"]))]
    asked += [key for s in sets for key, _ in protected_settings(parse_set(s))]
    if trust_repo_config:
        asked.append(TRUST_KEY)
    return list(dict.fromkeys(asked))


def owner_allows(env: Mapping[str, str]) -> tuple[str, ...]:
    """``[fleet] job_may_set`` of the worker owner's own ``roles.toml`` (none without one)."""
    path = user_config_dir(env) / USER_ROLES
    if not path.is_file():
        return ()
    fleet = _parse(path.read_text("utf-8"), str(path)).get("fleet", {})
    allowed = fleet.get("job_may_set", []) if isinstance(fleet, Mapping) else []
    if not isinstance(allowed, list) or not all(isinstance(a, str) for a in allowed):
        raise ConfigError(f"{path}: [fleet] job_may_set must be a list of keys, "
                          'e.g. ["providers.*.base_url"]')
    return tuple(allowed)


def is_allowed(key: str, allowed: Sequence[str]) -> bool:
    """``key`` matches an allowed pattern, or sits below one (``sandbox`` allows
    ``sandbox.mode``); ``*`` stands for one part of the key."""
    parts = key.split(".")
    for pattern in allowed:
        want = pattern.split(".")
        if len(parts) >= len(want) and all(fnmatch.fnmatchcase(p, w)
                                           for p, w in zip(parts, want, strict=False)):
            return True
    return False


def check_job(job_id: int, roles: Sequence[Mapping[str, str]], sets: Sequence[str],
              trust_repo_config: bool, allowed: Sequence[str]) -> None:
    """Raise ``JobRefused`` when the job sets a protected key this worker does not allow."""
    refused = [k for k in asked_settings(roles, sets, trust_repo_config)
               if not is_allowed(k, allowed)]
    if refused:
        flags = " ".join(f"--allow-set {_pattern(k)}" for k in refused)
        raise JobRefused(
            f"job {job_id} sets {', '.join(refused)}, which this worker does not take from a "
            f"job (they decide where API keys go, what commands may do, or the sandbox); "
            f"start the worker with {flags}, or list them in [fleet] job_may_set of its "
            "owner's roles.toml, if you trust whoever queues jobs")


def _pattern(key: str) -> str:
    parts = key.split(".")
    return ".".join(["providers", "*", *parts[2:]]) if parts[0] == "providers" else key


def write_roles(roles: Sequence[Mapping[str, str]], folder: Path) -> list[Path]:
    """The job's role map files written into ``folder`` (numbered: their order is precedence)."""
    folder.mkdir(parents=True, exist_ok=True)
    paths = []
    for i, item in enumerate(roles):
        name = re.sub(r"[^\w.-]+", "-", item["name"]) or "roles.toml"
        path = folder / f"{i:02d}-{name}"
        path.write_text(item["text"], "utf-8")
        paths.append(path)
    return paths
