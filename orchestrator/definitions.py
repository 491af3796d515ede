"""Agent definitions: Markdown files with a YAML front matter block and the system prompt.

The packaged ``agents/`` folder holds the defaults; a repository may override any of them (or
add its own) in ``.orchestrate/agents/``. Task templates use ``$name`` placeholders and fail
loudly on a missing one, so a prompt never goes out half-rendered.
"""

from __future__ import annotations

import string
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from pydantic import BaseModel

from .config import packaged_file
from .errors import ConfigError
from .state import ROLES, SUBMIT_MODELS, Role

_FIELDS = {"name", "role", "description", "tools", "submit", "task", "templates", "max_turns"}


@dataclass(frozen=True)
class AgentDef:
    """One agent: who it is, what it may use, what it submits, how its prompts read."""

    name: str
    role: Role
    description: str
    tools: tuple[str, ...]
    submit: type[BaseModel]
    system: str
    task_template: str
    source: str
    max_turns: int | None = None
    templates: Mapping[str, str] = field(default_factory=dict)

    def render_task(self, template: str = "task", **values: Any) -> str:
        """Fill the named template (``task`` or one of ``templates``); a missing value fails."""
        text = self.task_template if template == "task" else self.templates.get(template)
        if text is None:
            raise ConfigError(f"{self.source}: no template {template!r} in the front matter")
        try:
            return string.Template(text).substitute({k: str(v) for k, v in values.items()})
        except KeyError as exc:
            raise ConfigError(f"{self.source}: template {template} needs ${exc.args[0]}") from None


def parse_agent(text: str, source: str) -> AgentDef:
    """Parse one definition file; errors name the file and the field."""
    if not text.startswith("---"):
        raise ConfigError(f"{source}: an agent file starts with a '---' front matter block")
    try:
        _, front, body = text.split("---", 2)
        meta = yaml.safe_load(front) or {}
    except (ValueError, yaml.YAMLError) as exc:
        raise ConfigError(f"{source}: cannot read the front matter: {exc}") from None
    unknown = set(meta) - _FIELDS
    if unknown:
        raise ConfigError(
            f"{source}: unknown front matter key {sorted(unknown)[0]} (allowed: {', '.join(sorted(_FIELDS))})"
        )
    role = meta.get("role", meta.get("name"))
    if role not in ROLES:
        raise ConfigError(f"{source}: role {role!r} is not one of {', '.join(ROLES)}")
    submit = SUBMIT_MODELS.get(meta.get("submit", ""))
    if submit is None:
        raise ConfigError(
            f"{source}: submit {meta.get('submit')!r} is not one of {', '.join(SUBMIT_MODELS)}"
        )
    return AgentDef(
        name=str(meta.get("name", role)),
        role=role,
        description=str(meta.get("description", "")),
        tools=tuple(meta.get("tools") or ()),
        submit=submit,
        system=body.strip(),
        task_template=str(meta.get("task", "$task")),
        source=source,
        max_turns=meta.get("max_turns"),
        templates={str(k): str(v) for k, v in (meta.get("templates") or {}).items()},
    )


def load_agents(repo: Path | None = None) -> dict[Role, AgentDef]:
    """The packaged definitions, each replaced by the repository's own file when it has one."""
    agents: dict[Role, AgentDef] = {}
    for role in ROLES:
        path = packaged_file(f"{role}.md")
        agents[role] = parse_agent(path.read_text(encoding="utf-8"), f"agents/{role}.md")
    if repo is not None:
        local = repo / ".orchestrate" / "agents"
        for path in sorted(local.glob("*.md")) if local.is_dir() else ():
            agent = parse_agent(path.read_text(encoding="utf-8"), str(path))
            agents[agent.role] = agent
    return agents
