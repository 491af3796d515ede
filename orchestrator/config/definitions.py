"""Agent definitions: Markdown files with a YAML front matter block and the system prompt.

One parser reads two formats. Ours: ``name``, ``kind`` (see ``kinds.py``), ``description``,
``tools``, ``submit``, ``model`` / ``effort`` / ``max_turns`` (the role's defaults; the role map
wins), and optional ``task`` / ``templates`` replacing the kind's task. Claude Code's sub-agent
files (``name``, ``description``, ``tools: Read, Grep, Bash``, ``model``, ``maxTurns`` ...) read
as they are: their tool names map onto ours, a tool we do not have is an error, and a file that
does not say its kind is a ``check``. Ours is a superset, so such a file can be moved into
``.orchestrate/agents/`` and extended.

Where definitions come from, lowest first: the packaged ``agents/``, the user's
``$XDG_CONFIG_HOME/orchestrate/agents/``, the repository's ``.claude/agents/`` (these add roles,
never replace one, and a broken one only matters once a pipeline uses it), then the
repository's ``.orchestrate/agents/``.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from orchestrator.config.kinds import (
    KINDS,
    RESERVED_NAMES,
    ROLE_NAME,
    SPECS,
    TOOLS,
    Kind,
    default_kind,
)
from orchestrator.config.packaged import packaged_agents
from orchestrator.config.prompts import fill, split_front_matter, texts
from orchestrator.errors import ConfigError

Format = Literal["orchestrate", "claude"]
_FIELDS = frozenset({"name", "role", "kind", "description", "tools", "disallowed_tools", "submit",
                     "model", "effort", "max_turns", "task", "templates"})
_SYNONYMS = {"disallowedTools": "disallowed_tools", "maxTurns": "max_turns"}
# Claude Code keys about its own interface and permissions; the sandbox and the worktree decide
# those here, so they are read and left alone.
_IGNORED = frozenset({"color", "permissionMode", "isolation", "background", "memory"})
_UNSUPPORTED = {"hooks": "hooks", "skills": "skills", "mcpServers": "MCP servers"}
CLAUDE_TOOLS = {"Read": "read", "Grep": "search", "Glob": "list", "LS": "list", "Bash": "run",
                "Edit": "replace", "MultiEdit": "replace", "Write": "write_file"}
_WHY_NOT = {"run": "it runs commands", "write_file": "it writes files",
            "replace": "it edits files", "replace_lines": "it edits files",
            "apply_patch": "it edits files"}


@dataclass(frozen=True)
class AgentDef:
    """One role: its kind, what it may use, what it submits, how its prompts read."""

    role: str
    kind: Kind
    description: str
    tools: tuple[str, ...]
    submit_name: str  # the schema it submits, by name (its model: ``state.submit_model``)
    system: str
    task_template: str
    source: str
    templates: Mapping[str, str] = field(default_factory=dict)
    model: str | None = None
    effort: str | None = None
    max_turns: int | None = None
    format: Format = "orchestrate"
    text: str = ""  # the file as read: a run keeps it, so a resume sends the same prompts

    @property
    def name(self) -> str:
        return self.role

    def render_task(self, template: str = "task", **values: Any) -> str:
        """Fill the named template (``task``, one of ``templates`` or its kind's); a missing
        value fails."""
        text = self.task_template if template == "task" else (
            self.templates.get(template) or kind_templates(self.kind).get(template))
        if text is None:
            raise ConfigError(f"{self.source}: no template {template!r} for a {self.kind} role")
        return fill(text, f"{self.source} ({template})", **values)

    def defaults(self) -> dict[str, Any]:
        """The role map keys this file sets for its role, beneath every role map."""
        keys = {"model": self.model, "effort": self.effort, "max_turns": self.max_turns}
        return {k: v for k, v in keys.items() if v is not None}


def kind_templates(kind: Kind) -> dict[str, str]:
    """The packaged task (``task``) and named templates of a kind (``agents/prompts/kinds.md``)."""
    entry = texts("kinds").get(kind) or {}
    return {"task": str(entry.get("task", "$task")).rstrip("\n"),
            **{str(k): str(v).rstrip("\n") for k, v in (entry.get("templates") or {}).items()}}


# --- parsing -------------------------------------------------------------------------------------


@functools.lru_cache(maxsize=128)
def parse_agent(text: str, source: str, *, stem: str | None = None,
                format: Format = "orchestrate") -> AgentDef:
    """Parse one definition file; errors name the file and the field. (Each text is parsed
    once per process: every run reads the same files.)"""
    meta, body = split_front_matter(text, source)
    meta = {_SYNONYMS.get(str(k), str(k)): v for k, v in meta.items()}
    _check_keys(meta, source)
    role = str(meta.get("role") or meta.get("name") or stem or "")
    if not ROLE_NAME.match(role):
        raise ConfigError(f"{source}: name {role!r} is not a role name (lower case letters, "
                          "digits, '-' and '_', starting with a letter)")
    if role in RESERVED_NAMES:
        raise ConfigError(f"{source}: name {role!r} is taken by a step of the graph "
                          f"({', '.join(sorted(RESERVED_NAMES))}); pick another name")
    kind = meta.get("kind", default_kind(role))
    if kind not in KINDS:
        raise ConfigError(f"{source}: kind {kind!r} is not one of {', '.join(KINDS)}")
    spec = SPECS[kind]
    submit_name = str(meta.get("submit") or spec.submit)
    if submit_name != spec.submit:
        raise ConfigError(f"{source}: a {kind} role submits {spec.submit}, not {submit_name!r} "
                          "(drop submit: or change kind:)")
    wanted = _tools(meta.get("tools"), source)
    tools = tuple(wanted) if wanted is not None else spec.tools
    dropped = set(_tools(meta.get("disallowed_tools"), source) or ())
    tools = tuple(t for t in tools if t not in dropped)
    _check_allowed(tools, kind, source)
    own = kind_templates(kind)
    named = {str(k): str(v) for k, v in (meta.get("templates") or {}).items()}
    return AgentDef(
        role=role, kind=kind, description=" ".join(str(meta.get("description", "")).split()),
        tools=tools, submit_name=spec.submit, system=body,
        task_template=str(meta.get("task") or own["task"]), source=source, templates=named,
        model=_model(meta.get("model")), effort=_optional_str(meta.get("effort")),
        max_turns=_max_turns(meta.get("max_turns"), source), format=format, text=text,
    )


def _check_keys(meta: Mapping[str, Any], source: str) -> None:
    for key, what in _UNSUPPORTED.items():
        if key in meta:
            raise ConfigError(f"{source}: {key}: orchestrate cannot run Claude Code {what}; "
                              f"remove the key (or keep the file for Claude Code only)")
    unknown = sorted(set(meta) - _FIELDS - _IGNORED)
    if unknown:
        allowed = ", ".join(sorted(_FIELDS | set(_SYNONYMS)))
        raise ConfigError(f"{source}: unknown front matter key {unknown[0]} (allowed: {allowed})")


def _tools(raw: Any, source: str) -> list[str] | None:
    """Tool names as ours: a YAML list or a ``Read, Grep`` string, Claude Code names mapped."""
    if raw is None:
        return None
    items = raw if isinstance(raw, list) else re.split(r"[,\s]+", str(raw))
    names: list[str] = []
    unknown: list[str] = []
    for item in (str(i).strip() for i in items):
        if not item:
            continue
        ours = item if item in TOOLS else CLAUDE_TOOLS.get(item)
        if ours is None:
            unknown.append(item)
        elif ours not in names:
            names.append(ours)
    if unknown:
        claude = ", ".join(f"{k} ({v})" for k, v in CLAUDE_TOOLS.items())
        raise ConfigError(
            f"{source}: tools {', '.join(unknown)}: not available in orchestrate (ours: "
            f"{', '.join(TOOLS)}; Claude Code names map: {claude}); remove them")
    return names


def _check_allowed(tools: Iterable[str], kind: Kind, source: str) -> None:
    allowed = SPECS[kind].allowed
    for tool in tools:
        if tool not in allowed:
            why = _WHY_NOT.get(tool, "it is not offered to this kind")
            hint = "give it kind: build" if tool in _WHY_NOT else "drop it"
            raise ConfigError(
                f"{source}: tool {tool} is not for a {kind} role ({why}); {hint}, or drop the "
                f"tool (a {kind} role may use: {', '.join(sorted(allowed)) or 'no tools'})")


def _model(raw: Any) -> str | None:
    """``inherit`` (Claude Code) and nothing both leave the model to the role map."""
    value = _optional_str(raw)
    return None if value in (None, "inherit") else value


def _optional_str(raw: Any) -> str | None:
    return None if raw is None or str(raw).strip() == "" else str(raw).strip()


def _max_turns(raw: Any, source: str) -> int | None:
    if raw is None:
        return None
    if isinstance(raw, bool) or not isinstance(raw, int) or not 1 <= raw <= 500:
        raise ConfigError(f"{source}: max_turns must be a whole number from 1 to 500 "
                          f"(got {raw!r})")
    return raw


# --- the registry --------------------------------------------------------------------------------


class Registry(Mapping[str, AgentDef]):
    """Every role a run may use, by name, with the files that could not be used and why."""

    def __init__(self, agents: Mapping[str, AgentDef], unusable: Mapping[str, str] | None = None,
                 notes: Iterable[str] = (), ignored: Iterable[str] = ()) -> None:
        self._agents = dict(agents)
        self.unusable = dict(unusable or {})
        self.ignored = tuple(ignored)  # files an untrusted repository may not use (a run warns)
        self.notes = (*notes, *self.ignored)

    def __getitem__(self, role: str) -> AgentDef:
        agent = self._agents.get(role)
        if agent is not None:
            return agent
        if role in self.unusable:
            raise ConfigError(self.unusable[role])
        raise ConfigError(
            f"no agent definition for role {role!r} (roles: {', '.join(sorted(self._agents))}); "
            f"add .orchestrate/agents/{role}.md")

    def __contains__(self, role: object) -> bool:
        return role in self._agents

    def get(self, role: str, default: Any = None) -> Any:
        return self._agents.get(role, default)

    def __iter__(self) -> Iterator[str]:
        return iter(self._agents)

    def __len__(self) -> int:
        return len(self._agents)

    def snapshot(self) -> dict[str, dict[str, str]]:
        """What a run keeps of its definitions (``agents.json``), enough to rebuild them."""
        return {name: {"source": a.source, "format": a.format, "text": a.text}
                for name, a in self._agents.items()}

    @classmethod
    def from_snapshot(cls, data: Mapping[str, Mapping[str, str]]) -> Registry:
        agents = {}
        for name, entry in data.items():
            fmt: Format = "claude" if entry.get("format") == "claude" else "orchestrate"
            agents[name] = parse_agent(entry["text"], entry["source"], stem=name, format=fmt)
        return cls(agents)


def load_registry(repo: Path | None = None, *, user_dir: Path | None = None,
                  trusted: bool = True, agent_files: Sequence[Path] = ()) -> Registry:
    """The packaged definitions, the user's, then the repository's (see the module doc), then
    ``agent_files``: definitions given for this run (a fleet job's), which replace any other.

    Unless ``trusted``, a repository file never replaces one of the user's own agents: it is
    left out and listed in ``Registry.ignored``."""
    agents: dict[str, AgentDef] = {}
    for f in packaged_agents():
        agent = parse_agent(f.read_text(encoding="utf-8"), f"agents/{f.name}", stem=_stem(f.name))
        agents[agent.role] = agent
    users = _read_dir(user_dir / "agents") if user_dir else {}
    agents.update(users)
    unusable: dict[str, str] = {}
    notes: list[str] = []
    ignored: list[str] = []
    if repo is not None:
        for name, found in _read_claude(repo / ".claude" / "agents").items():
            if isinstance(found, str):
                unusable[name] = found
            elif name in agents:
                notes.append(f"{found.source}: role {name} is defined by {agents[name].source}; "
                             "this file is not used")
            else:
                agents[name] = found
        for name, agent in _read_dir(repo / ".orchestrate" / "agents").items():
            if not trusted and name in users:
                ignored.append(f"{agent.source}: the repository is not trusted, so it does not "
                               f"replace your agent {name} ({users[name].source}); review it, "
                               "then run `orchestrate trust` to use it")
                continue
            agents[name] = agent
            unusable.pop(name, None)
    for path in agent_files:
        agent = parse_agent(_read(path), str(path), stem=path.stem)
        agents[agent.role] = agent
        unusable.pop(agent.role, None)
    return Registry(agents, unusable, notes, ignored)


def _stem(name: str) -> str:
    return name.rsplit(".", 1)[0]


def _files(folder: Path) -> list[Path]:
    return sorted(folder.glob("*.md")) if folder.is_dir() else []


def _read(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: cannot read the agent file ({exc})") from None


def _read_dir(folder: Path) -> dict[str, AgentDef]:
    agents = {}
    for path in _files(folder):
        agent = parse_agent(_read(path), str(path), stem=path.stem)
        agents[agent.role] = agent
    return agents


def _read_claude(folder: Path) -> dict[str, AgentDef | str]:
    """Claude Code sub-agents: a file that does not fit is kept as the reason why."""
    found: dict[str, AgentDef | str] = {}
    for path in _files(folder):
        try:
            agent = parse_agent(_read(path), str(path), stem=path.stem, format="claude")
        except ConfigError as exc:
            found[path.stem] = str(exc)
            continue
        found[agent.role] = agent
    return found


def load_agents(repo: Path | None = None) -> Registry:
    """The packaged and the repository's definitions (``load_registry`` without a user dir)."""
    return load_registry(repo)
