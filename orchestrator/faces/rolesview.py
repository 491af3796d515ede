"""What ``orchestrate roles`` shows: the pipeline, every role (its kind, agent file, model, tier,
effort, tools), files that could not be used and why, and with ``--explain`` the layer that set
each value. Plain data for ``--json``, rich tables for people; nothing here imports the engine.
"""

from __future__ import annotations

from typing import Any

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from orchestrator.config.layers import Resolved, explain
from orchestrator.config.pipeline import Pipeline, pipeline_of


def roles_data(found: Resolved) -> dict[str, Any]:
    """The resolved role map as JSON, plus the pipeline and the agents behind the roles."""
    data = found.roles.model_dump(mode="json")
    pipeline = pipeline_of(found.roles, found.registry, need_build=False)
    data["agents"] = [
        {"role": a.role, "kind": a.kind, "file": a.source, "format": a.format,
         "description": a.description, "tools": list(a.tools), "submit": a.submit_name,
         "in_pipeline": a.role in (*pipeline.steps, pipeline.summarizer)}
        for a in found.registry.values()]
    data["unusable_agents"] = dict(found.registry.unusable)
    data["notes"] = list(found.registry.notes)
    data["ignored"] = list(found.ignored)
    return data


def explain_data(found: Resolved) -> list[dict[str, Any]]:
    """``[{key, value, source}]`` for every key of the resolved map."""
    return [{"key": k, "value": v, "source": s} for k, v, s in explain(found)]


def print_roles(console: Console, found: Resolved) -> None:
    """The pipeline, then one row per role the pipeline or the role map names."""
    roles, registry = found.roles, found.registry
    pipeline = pipeline_of(roles, registry, need_build=False)
    console.print(f"pipeline  {escape(pipeline.describe())}  (handoffs: {pipeline.summarizer})",
                  highlight=False)
    t = Table(title="roles" + (f" (team {roles.team})" if roles.team else ""), show_edge=False)
    for col in ("role", "kind", "model", "api", "tier", "effort", "fallback", "tools",
                "agent file"):
        t.add_column(col, overflow="fold")
    for role in _listed(found, pipeline):
        agent = registry.get(role)
        spec = roles.roles.get(role)
        model = roles.models.get(spec.model) if spec else None
        provider = roles.providers.get(model.provider) if model else None
        used = role in (*pipeline.steps, pipeline.summarizer)
        t.add_row(
            role + ("" if used else " (unused)"), agent.kind if agent else "-",
            f"{spec.model} ({model.id})" if spec and model else "-",
            (model.api or provider.api) if model and provider else "-",
            spec.tier if spec else "-", (spec.effort or "-") if spec else "-",
            (" → ".join(spec.fallback) or "-") if spec else "-",
            ", ".join(agent.tools) if agent else "-",
            escape(agent.source) if agent else "(no agent file)")
    console.print(t)
    for name, reason in registry.unusable.items():
        console.print(f"[yellow]not usable[/] {escape(name)}: {escape(reason)}", highlight=False)
    for note in registry.notes:
        if note not in found.ignored:
            console.print(f"[dim]{escape(note)}[/]", highlight=False)
    for line in found.ignored:
        console.print(f"[yellow]ignored[/] {escape(line)}", highlight=False)


def _listed(found: Resolved, pipeline: Pipeline) -> list[str]:
    """Pipeline roles first, in order, then the rest of the registry and the role map."""
    first = [*pipeline.steps, pipeline.summarizer]
    rest = sorted({*found.registry, *found.roles.roles} - set(first))
    return [*first, *rest]


def print_explain(console: Console, found: Resolved) -> None:
    """Every key of the resolved map with its value and the layer that set it."""
    t = Table(title="where each value comes from", show_edge=False)
    for col in ("key", "value", "source"):
        t.add_column(col, overflow="fold")
    for key, value, source in explain(found):
        t.add_row(key, escape(_short(value)), escape(source))
    console.print(t)


def _short(value: Any) -> str:
    shown = repr(value) if not isinstance(value, str) else value
    return shown if len(shown) <= 60 else shown[:57] + "..."
