"""Which layer of a role map set a bad key, and how its error reads: every leaf of the merged
map remembers its file (``layers.py``), so an error names the file, the key path and, for an
unknown key, the keys allowed there."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from pydantic import BaseModel


def source_of(loc: tuple[str, ...], sources: Mapping[tuple[str, ...], str]) -> str:
    """The layer that set ``loc`` (or the nearest key above or below it)."""
    for n in range(len(loc), 0, -1):
        if loc[:n] in sources:
            return sources[loc[:n]]
    prefix = [src for key, src in sources.items() if key[: len(loc)] == loc]
    return prefix[-1] if prefix else "role map"


def describe(err: Mapping[str, Any], loc: tuple[str, ...], sources: Mapping,
             root: type[BaseModel]) -> str:
    """A validation error as the user reads it: the layer, the key path, what is wrong (and,
    for an unknown key, the keys allowed there under ``root``)."""
    key = ".".join(loc) or "(top level)"
    src = source_of(loc, sources)
    kind = err["type"]
    if kind == "extra_forbidden":
        parent = loc[:-1]
        allowed = _allowed_keys(root, parent)
        hint = f" (allowed: {', '.join(allowed)})" if allowed else ""
        return f"{src}: unknown key {key}{hint}"
    if kind == "missing":
        return f"{src}: {key} is required"
    got = err.get("input")
    shown = f" (got {got!r})" if not isinstance(got, dict) else ""
    return f"{src}: {key}: {err['msg']}{shown}"


def _allowed_keys(root: type[BaseModel], parent: tuple[str, ...]) -> list[str]:
    """Walk the schema along ``parent`` (skipping dict keys) and list the fields found there."""
    annotation: Any = root
    for part in parent:
        model = _field_model(annotation)
        if model is not None and part in model.model_fields:
            annotation = model.model_fields[part].annotation
        elif getattr(annotation, "__origin__", None) is dict:
            annotation = annotation.__args__[1]
        else:
            return []
    model = _field_model(annotation)
    return sorted(model.model_fields) if model is not None else []


def _field_model(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if getattr(annotation, "__origin__", None) is dict:
        return None
    for arg in getattr(annotation, "__args__", ()):
        found = _field_model(arg)
        if found is not None:
            return found
    return None
