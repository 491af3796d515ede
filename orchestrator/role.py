"""The role names. Kept apart from the values in ``state.py`` so that loading a role map (and
``orchestrate roles``) does not build every model the engine passes around."""

from __future__ import annotations

from typing import Literal

Role = Literal["planner", "explorer", "builder", "reviewer", "summarizer"]
ROLES: tuple[Role, ...] = ("planner", "explorer", "builder", "reviewer", "summarizer")
