"""The session tree of a run, for ``orchestrate show`` and the report: every session with its
lineage (forks, handoff writers) and the share of its window it filled, read from the events.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict

from orchestrator.record.events import EventBase, Forked, RoleFinished, RoleStarted


class SessionNode(BaseModel):
    """One session of a run as the report shows it."""

    model_config = ConfigDict(frozen=True)

    session: str
    role: str | None
    model: str | None = None
    parent: str | None = None
    purpose: str = "task"  # "task", "fork" (continues its parent) or "handoff" (summariser)
    window: int | None = None
    peak_context: float = 0.0
    forks: tuple[Forked, ...] = ()
    children: tuple[str, ...] = ()
    status: str = "open"  # "finished", "forked" or "open"


def session_tree(events: Sequence[EventBase]) -> list[SessionNode]:
    """Every session of a run's events, in order of start, with lineage and peaks."""
    nodes: dict[str, dict[str, Any]] = {}

    def node_of(sid: str, role: str | None) -> dict[str, Any]:
        return nodes.setdefault(sid, {"session": sid, "role": role, "forks": [], "children": []})

    for e in events:
        if not e.session or not isinstance(e, RoleStarted | Forked | RoleFinished):
            continue
        node = node_of(e.session, e.role)
        if isinstance(e, RoleStarted):
            node.update(role=node["role"] or e.role, model=e.model, window=e.window,
                        parent=e.parent, purpose=e.purpose)
            if e.parent:
                node_of(e.parent, None)["children"].append(e.session)
            continue
        node["peak_context"] = max(node.get("peak_context", 0.0), e.peak_context)
        if isinstance(e, Forked):
            node["forks"].append(e)
            node["status"] = "forked"
        else:
            node["status"] = "finished"
    return [SessionNode(**{**n, "forks": tuple(n["forks"]), "children": tuple(n["children"])})
            for n in nodes.values()]
