"""``orchestrate init``: a commented starter ``roles.toml`` for a repository.

The file says which provider and models the team's roles run on, lists the pipeline and shows,
commented out, how a team adds a judge of its own. Everything it does not set comes from the
packaged default, so it stays short; ``orchestrate roles --explain`` shows where each value
comes from. The text is checked by loading it as a role map before it is written.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Mapping
from pathlib import Path

from orchestrator.config.layers import load_roles
from orchestrator.config.schema import DEFAULT_STEPS
from orchestrator.errors import UsageError

ROLE_FILE = "roles.toml"
ROLES = (*DEFAULT_STEPS, "summarizer")
DEFAULT_WINDOW = 128_000
DEFAULT_OUTPUT = 16_000

_HEADER = """\
# The role map of this repository for orchestrate, written by `orchestrate init`; commit it.
# Layers, lowest first: the packaged default < your ~/.config/orchestrate/roles.toml < this file
# < --roles FILE < --team NAME < ORCHESTRATE_SECTION__KEY variables < --set KEY=VALUE.
# `orchestrate roles --explain` shows which layer set each value. Keys that decide where API
# keys go or what commands may run (a provider's base_url and api_key_env, [policy] allow,
# [sandbox]) count only once you trust this file: `orchestrate trust`.
"""

_PIPELINE = """\
[pipeline]
# Role names, in order: one plan role, at most one explore role, one build role, then judges
# (kind review or check) that read the change after its acceptance commands pass and may send
# it back to the builder. A role is an agent file: the packaged ones, yours in
# .orchestrate/agents/NAME.md, or a Claude Code sub-agent in .claude/agents/NAME.md.
steps = {steps}
# To add a judge, write .orchestrate/agents/security-reviewer.md (front matter: name, kind:
# check, description, tools: Read, Grep; the body is its system prompt), then:
# steps = ["planner", "explorer", "builder", "security-reviewer", "reviewer"]
# [roles.security-reviewer]
# model = "{example}"

# [verify]
# commands = ["python -m pytest -q"]     # acceptance commands; they win over the plan's
"""


def starter_roles(*, provider: str = "openai", base_url: str | None = None,
                  key_env: str | None = None, models: Mapping[str, str] | None = None) -> str:
    """The starter file's text. ``models`` maps role names (or ``all``) to provider model ids."""
    chosen = _per_role(models or {})
    lines = [_HEADER, f"[providers.{provider}]"]
    lines.append(f"api_key_env = {_q(key_env or _key_env(provider))}")
    if base_url:
        lines.append(f"base_url = {_q(base_url)}      # any OpenAI-compatible server")
    else:
        lines.append('# base_url = "http://127.0.0.1:8080/v1"   # any OpenAI-compatible server')
    if provider != "openai" or base_url:
        lines += [f"[providers.{provider}.tiers]      # our tier -> the provider's service_tier",
                  'standard = "default"', 'priority = "priority"', 'flex = "flex"',
                  'ultrafast = "priority"']
    lines.append("")
    for model_id in dict.fromkeys(chosen.values()):
        lines += [f"[models.{_alias(model_id)}]", f"provider = {_q(provider)}",
                  f"id = {_q(model_id)}",
                  f"context_window = {DEFAULT_WINDOW:_}     # check these two for your model",
                  f"max_output = {DEFAULT_OUTPUT:_}",
                  '# tools = "json"     # for models without native tool calls (small local ones)',
                  "# price = { input = 1.25, cached_input = 0.125, output = 10.0 }   "
                  "# USD per million tokens", ""]
    for role, model_id in chosen.items():
        lines += [f"[roles.{role}]", f"model = {_q(_alias(model_id))}", "fallback = []", ""]
    if not chosen:
        lines += ["# The packaged models and roles apply; to run a role on another model:",
                  "# [models.fast]", f'# provider = "{provider}"', '# id = "MODEL-ID"',
                  "# context_window = 128_000", "# max_output = 16_000",
                  "# [roles.explorer]", '# model = "fast"', ""]
    example = _alias(next(iter(chosen.values()))) if chosen else "sol"
    lines.append(_PIPELINE.format(steps=json.dumps(list(DEFAULT_STEPS)), example=example))
    return "\n".join(lines)


def _per_role(models: Mapping[str, str]) -> dict[str, str]:
    unknown = sorted(set(models) - {*ROLES, "all"})
    if unknown:
        raise UsageError(f"--model {unknown[0]}=...: not a role (roles: {', '.join(ROLES)}, "
                         "or all=MODEL-ID for every role)")
    chosen = {r: models.get(r) or models.get("all") for r in ROLES}
    return {r: m for r, m in chosen.items() if m}


def _key_env(provider: str) -> str:
    return "OPENAI_API_KEY" if provider == "openai" else f"{provider.upper().replace('-', '_')}_API_KEY"


def _alias(model_id: str) -> str:
    """A role map alias for a model id: ``gpt-5.1-mini`` -> ``gpt-5-1-mini``."""
    return "".join(c if c.isalnum() or c in "-_" else "-" for c in model_id).strip("-") or "model"


def _q(value: str) -> str:
    return json.dumps(value)  # a TOML basic string is a JSON string for these characters


def parse_models(items: list[str]) -> dict[str, str]:
    """``--model planner=gpt-5.1`` flags (or one bare ``--model ID`` for every role)."""
    out: dict[str, str] = {}
    for item in items:
        role, sep, model_id = item.partition("=")
        if not sep:
            role, model_id = "all", item
        if not model_id.strip():
            raise UsageError(f"--model {item!r}: expected ROLE=MODEL-ID (e.g. builder=gpt-5.1)")
        out[role.strip()] = model_id.strip()
    return out


def write_starter(repo: Path, text: str, *, force: bool = False) -> Path:
    """Check ``text`` as a role map, then write it as the repository's ``roles.toml``."""
    target = repo / ROLE_FILE
    if target.exists() and not force:
        raise UsageError(f"{target} exists; edit it, or pass --force to replace it")
    fd, tmp = tempfile.mkstemp(prefix=".roles-", suffix=".toml", dir=repo)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
        load_roles(files=[Path(tmp)])  # the starter itself must be a valid layer
        os.replace(tmp, target)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)
    return target


def init_repo(repo: Path, *, provider: str = "openai", base_url: str | None = None,
              key_env: str | None = None, models: Mapping[str, str] | None = None,
              force: bool = False, env: Mapping[str, str] | None = None) -> tuple[Path, bool]:
    """``orchestrate init``: write the starter ``roles.toml`` and, when it sets protected
    values (a provider URL, a key variable), trust it as written, since its writer chose them
    just now. The file's path, and whether it was trusted."""
    from orchestrator.config.layers import read_layer
    from orchestrator.config.trust import protected_settings, record_trust, user_config_dir

    text = starter_roles(provider=provider, base_url=base_url, key_env=key_env,
                         models=dict(models or {}))
    path = write_starter(repo, text, force=force)
    protected = bool(protected_settings(read_layer(path).data))
    if protected:
        record_trust(user_config_dir(os.environ if env is None else env), repo)
    return path, protected
