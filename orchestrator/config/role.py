"""Role names. Kept apart from the values in ``state.py`` so that loading a role map (and
``orchestrate roles``) does not build every model the engine passes around.

A role is any name an agent file defines (``definitions.py``); its kind, not its name, decides
what it does. ``ROLES`` are the packaged ones.
"""

from __future__ import annotations

Role = str  # a role's name: a key of [roles], an agent file's name
ROLES: tuple[Role, ...] = ("planner", "explorer", "builder", "reviewer", "summarizer")
