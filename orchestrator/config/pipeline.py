"""The run's pipeline: which roles run in which step, from the role map's ``[pipeline]`` and the
kinds their agent files declare.

``steps`` lists role names in order: one ``plan`` role first, at most one ``explore`` role, one
``build`` role, then any judges (``review``, ``check``) in the order they run after the build
passes its acceptance commands. The graph (``graph.py``) is wired from this value alone, so a
team adds a judge with an agent file and a line of TOML.
"""

from __future__ import annotations

from dataclasses import dataclass

from orchestrator.config.definitions import Registry
from orchestrator.config.kinds import Kind
from orchestrator.config.schema import RoleMap
from orchestrator.errors import ConfigError

PLAN_NODE, EXPLORE_NODE, BUILD_NODE, REVIEW_NODE = "plan", "explore", "build", "review"


@dataclass(frozen=True)
class Judge:
    """A role that judges the change after it passes: the reviewer, or a check."""

    role: str
    kind: Kind

    @property
    def node(self) -> str:
        """The graph node: ``review`` for the reviewer, the role's name for a check."""
        return REVIEW_NODE if self.kind == "review" else self.role


@dataclass(frozen=True)
class Pipeline:
    """Who plans, explores, builds and judges; what the graph is built from."""

    plan: str = "planner"
    explore: str | None = "explorer"
    build: str | None = "builder"
    judges: tuple[Judge, ...] = (Judge("reviewer", "review"),)
    summarizer: str = "summarizer"

    @property
    def steps(self) -> tuple[str, ...]:
        """The roles that run as steps, in order."""
        found = (self.plan, self.explore, self.build, *(j.role for j in self.judges))
        return tuple(r for r in found if r is not None)

    def roles(self, *, explore_only: bool = False) -> tuple[str, ...]:
        """The roles whose models a run (or an ``explore``) calls, the summarizer not included."""
        if explore_only:
            return tuple(r for r in (self.plan, self.explore) if r is not None)
        return self.steps

    def describe(self) -> str:
        """``planner → explorer → builder ⇄ verify → reviewer``, for messages and listings."""
        head = [r for r in (self.plan, self.explore) if r]
        build = [f"{self.build} ⇄ verify"] if self.build else []
        return " → ".join([*head, *build, *(j.role for j in self.judges)])


DEFAULT_PIPELINE = Pipeline()


def pipeline_of(roles: RoleMap, registry: Registry, *, need_build: bool = True) -> Pipeline:
    """The pipeline the role map asks for, checked against the agents' kinds."""
    steps = roles.pipeline.steps
    where = "[pipeline] steps"
    kinds = [(role, registry[role].kind) for role in steps]
    if len(set(steps)) != len(steps):
        raise ConfigError(f"{where}: a role appears twice in {list(steps)}")
    if not kinds or kinds[0][1] != "plan":
        raise ConfigError(f"{where}: the first step must be a plan role (got {list(steps)})")
    plan, rest = kinds[0][0], kinds[1:]
    explore = None
    if rest and rest[0][1] == "explore":
        explore, rest = rest[0][0], rest[1:]
    build = None
    if rest and rest[0][1] == "build":
        build, rest = rest[0][0], rest[1:]
    judges = tuple(Judge(role, kind) for role, kind in rest)
    for role, kind in rest:
        if kind not in ("review", "check") or build is None:
            raise ConfigError(
                f"{where}: {role} (kind {kind}) cannot come there: the order is one plan role, "
                "at most one explore role, one build role, then review/check roles")
    if sum(j.kind == "review" for j in judges) > 1:
        raise ConfigError(f"{where}: at most one review role (make the others kind check)")
    if need_build and build is None:
        raise ConfigError(f"{where}: a run needs a build role after the plan (got {list(steps)})")
    summarizer = roles.pipeline.summarizer
    if registry[summarizer].kind != "summarize":
        raise ConfigError(f"[pipeline] summarizer: {summarizer} is a {registry[summarizer].kind} "
                          "role; the summarizer must be of kind summarize")
    return Pipeline(plan, explore, build, judges, summarizer)
