"""Pieces of what roles are told, rendered from ``agents/prompts/*.md``: the plan as the builder
and the judges read it, the acceptance commands and the note naming them, and the preflight's
localisation of the failure.
"""

from __future__ import annotations

from orchestrator.config.prompts import text
from orchestrator.engine.runtime import RunContext
from orchestrator.localize import localization as localize
from orchestrator.state import Plan, RunState
from orchestrator.tools.secretfiles import mask


def plan_text(plan: Plan | None) -> str:
    """The plan as the builder and the judges read it."""
    if plan is None:
        return text("pipeline", "no_plan")
    steps = "\n".join(f"{i}. {s}" for i, s in enumerate(plan.steps, 1))
    accept = "\n".join(text("pipeline", "command", command=c) for c in plan.acceptance)
    return text("pipeline", "plan", goal=plan.goal, steps=steps,
                acceptance=accept or text("pipeline", "no_commands"))


def acceptance_commands(ctx: RunContext, state: RunState) -> list[str]:
    """The role map's acceptance commands, else the plan's."""
    configured = list(ctx.roles.verify.commands)
    return configured or (list(state.plan.acceptance) if state.plan else [])


def commands_note(commands: list[str]) -> str:
    """The note telling a builder which commands will judge its work ("" without any)."""
    if not commands:
        return ""
    listed = "\n".join(text("pipeline", "command", command=c) for c in commands)
    return text("pipeline", "commands_note", commands=listed)


def localized(loc: localize.Localization | None) -> str:
    """The preflight's localisation of the failure, as a block of the prompt ("" without); a
    key the failing commands printed is masked."""
    found = mask(localize.render(loc)) if loc is not None else ""
    return f"{found}\n" if found else ""
