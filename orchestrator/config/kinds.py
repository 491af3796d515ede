"""Kinds of role: what a role is decides its node, its submit schema and the tools it may have.

``plan`` breaks the task down, ``explore`` answers one question read-only (many in parallel),
``build`` changes the worktree, ``review`` and ``check`` judge the change after it passes its
acceptance commands and may send it back (a ``check`` is any number of extra judges: a security
reviewer, a test writer), ``summarize`` writes the handoffs of forked sessions. Adding a role of
an existing kind needs no code: an agent file and a few lines of the role map.

A role is any name an agent file defines (``definitions.py``); its kind, not its name, decides
what it does. ``ROLES`` are the packaged ones.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Literal

Kind = Literal["plan", "explore", "build", "review", "check", "summarize"]
KINDS: tuple[Kind, ...] = ("plan", "explore", "build", "review", "check", "summarize")

READ_TOOLS = ("list", "search", "read", "git_log", "git_blame")
EDIT_TOOLS = ("write_file", "replace", "replace_lines", "apply_patch")
RUN_TOOL = "run"
TOOLS: tuple[str, ...] = (*READ_TOOLS, *EDIT_TOOLS, RUN_TOOL)

Role = str  # a role's name: a key of [roles], an agent file's name
ROLES: tuple[Role, ...] = ("planner", "explorer", "builder", "reviewer", "summarizer")
ROLE_NAME = re.compile(r"^[a-z][a-z0-9_-]{0,63}$")
# the built-in roles, whose files need not say their kind
BUILTIN_KINDS: dict[str, Kind] = {
    "planner": "plan", "explorer": "explore", "builder": "build", "reviewer": "review",
    "summarizer": "summarize",
}
# node names of the graph that are not role names (a role may not take one)
RESERVED_NAMES = frozenset({"plan", "approve", "explore", "gather", "build", "verify", "review",
                            "report"})


@dataclass(frozen=True)
class KindSpec:
    """What a kind means for the roles of that kind."""

    name: Kind
    submit: str  # the schema its sessions submit (a name in ``state.SUBMIT_MODELS``)
    tools: tuple[str, ...]  # offered when the agent file lists none
    allowed: frozenset[str]  # what its agent file may ask for
    judge: bool = False  # runs after the build passes and may request changes
    summary: str = ""


SPECS: dict[Kind, KindSpec] = {
    "plan": KindSpec("plan", "Plan", ("list", "search", "read"), frozenset(READ_TOOLS),
                     summary="breaks the task into steps, questions and acceptance commands"),
    "explore": KindSpec("explore", "Findings", READ_TOOLS, frozenset(READ_TOOLS),
                        summary="answers one question read-only with checked citations"),
    "build": KindSpec("build", "BuildReport", ("list", "search", "read", *EDIT_TOOLS, RUN_TOOL),
                      frozenset(TOOLS), summary="changes the worktree until acceptance passes"),
    "review": KindSpec("review", "Review", ("read", "search"),
                       frozenset((*READ_TOOLS, RUN_TOOL)), judge=True,
                       summary="reads the diff; approves or requests changes"),
    "check": KindSpec("check", "Review", ("read", "search", "list"),
                      frozenset((*READ_TOOLS, RUN_TOOL)), judge=True,
                      summary="a read-only judge after the build; may request changes"),
    "summarize": KindSpec("summarize", "Handoff", (), frozenset(),
                          summary="writes the handoff when a session forks"),
}


def default_kind(role: str) -> Kind:
    """The kind of a role whose file does not say: built-in roles theirs, others ``check``."""
    return BUILTIN_KINDS.get(role, "check")
