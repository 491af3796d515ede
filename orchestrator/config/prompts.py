"""Text the engine adds to conversations, read from ``agents/prompts/*.md``.

Every sentence a model reads comes from a file: agents' system prompts and task templates from
their definitions, and the rest (nudges, feedback headers, handoffs, JSON tool-mode
instructions, the default task of each kind) from the front matter of these prompt files, one
template per key. Templates use ``$name`` placeholders and fail loudly on a missing one. A
tool's own description and its error messages live with the tool.
"""

from __future__ import annotations

import functools
import string
from collections.abc import Mapping
from typing import Any

import yaml

from orchestrator.config.packaged import packaged_file
from orchestrator.errors import ConfigError

# libyaml's safe loader when PyYAML was built with it (ten times faster), else the pure one
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


def split_front_matter(text: str, source: str) -> tuple[dict[str, Any], str]:
    """``---`` YAML ``---`` body: the parsed front matter and the body, stripped."""
    lines = text.splitlines(keepends=True)
    if not lines or lines[0].rstrip() != "---":
        raise ConfigError(f"{source}: the file starts with a '---' front matter block")
    end = next((i for i, line in enumerate(lines[1:], 1) if line.rstrip() == "---"), None)
    if end is None:
        raise ConfigError(f"{source}: the front matter has no closing '---' line")
    front, body = "".join(lines[1:end]), "".join(lines[end + 1:])
    try:
        meta = yaml.load(front, Loader=_LOADER) or {}
    except yaml.YAMLError as exc:
        reason = " ".join(str(exc).split())
        raise ConfigError(f"{source}: cannot read the front matter: {reason}") from None
    if not isinstance(meta, dict):
        raise ConfigError(f"{source}: the front matter must be a YAML mapping of keys")
    return meta, body.strip()


@functools.cache
def texts(group: str) -> Mapping[str, Any]:
    """The templates of ``agents/prompts/<group>.md`` (read once per process)."""
    source = f"agents/prompts/{group}.md"
    meta, _ = split_front_matter(packaged_file(f"prompts/{group}.md").read_text("utf-8"), source)
    return meta


def fill(template: str, source: str, **values: Any) -> str:
    """``template`` with its ``$names`` replaced; a missing value is a ConfigError."""
    try:
        return string.Template(template).substitute({k: str(v) for k, v in values.items()})
    except KeyError as exc:
        raise ConfigError(f"{source}: the template needs ${exc.args[0]}") from None
    except ValueError as exc:
        raise ConfigError(f"{source}: bad placeholder in a template ({exc})") from None


def text(group: str, key: str, **values: Any) -> str:
    """The packaged template ``group.key`` filled with ``values``."""
    template = texts(group).get(key)
    if not isinstance(template, str):
        raise ConfigError(f"agents/prompts/{group}.md: no template {key!r}")
    return fill(template.rstrip("\n"), f"agents/prompts/{group}.md ({key})", **values)


def evidence(key: str, **values: Any) -> str:
    """``agents/prompts/evidence.md``: failures, localisation, known tests, the digest."""
    return text("evidence", key, **values)
