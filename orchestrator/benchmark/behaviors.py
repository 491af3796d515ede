"""Computed replies for ``orchestrate bench``: simulated planners and builders that work a task
suite for real. A behaviour recognises its task by the instruction text in the prompt, looks up
the task's reference fix (the ``[sim]`` table of its ``task.toml``, which no model prompt ever
carries) and applies it with the builder's own tools, so the acceptance commands decide the
outcome as they would for a real model. ``bench-builder-hasty`` is the fast, careless builder:
it skips running the tests and, on tasks whose name hashes odd, submits without fixing anything.

The simulator knows nothing of the bench: ``register_behaviors`` hands it the ``bench-*``
behaviours (acting on the built-in suite) before a scenario that names them is loaded, and
``bind_tasks`` points a loaded scenario at another suite.
"""

from __future__ import annotations

import functools
import hashlib
from collections.abc import Callable, Sequence

from orchestrator.benchmark.suite import SimTask, builtin_suite, sim_tasks
from orchestrator.sim.scenario import (
    ChatRequestView,
    ModelBehavior,
    Reply,
    ReplyFn,
    Scenario,
    ToolCallSpec,
    register_behavior,
)

BENCH_PREFIX = "bench-"


def hashes_odd(name: str) -> bool:
    """The deterministic coin of the hasty builder: the last byte of sha256(name) is odd."""
    return hashlib.sha256(name.encode("utf-8")).digest()[-1] % 2 == 1


def find_task(tasks: Sequence[SimTask], req: ChatRequestView) -> SimTask | None:
    """The task whose instruction the conversation's first user message quotes (longest wins)."""
    first = next((m.get("content") for m in req.messages if m.get("role") == "user"), "")
    text = first if isinstance(first, str) else req.last_user_text()
    found = [t for t in tasks if t.instruction.strip() and t.instruction.strip() in text]
    return max(found, key=lambda t: len(t.instruction), default=None)


def _call(name: str, **arguments: object) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=dict(arguments))])


def _called(req: ChatRequestView) -> list[str]:
    return [name or "" for _, name, _ in req.tool_results()]


def planner_for(tasks: Sequence[SimTask]) -> ReplyFn:
    """Plans in one turn: one explorer question about the task's symbol, the task's tests."""

    def respond(req: ChatRequestView) -> Reply:
        task = find_task(tasks, req)
        if task is None:
            return _call("submit", goal="unknown task", steps=["Do the task."], questions=[])
        return _call(
            "submit",
            goal=task.instruction,
            steps=[f"Read {task.path}", "Fix the bug", "Run the acceptance commands"],
            questions=[f"Where is `{task.symbol}` defined in {task.path}?"],
            files_to_touch=[task.path],
            acceptance=list(task.acceptance),
        )

    return respond


def builder_for(tasks: Sequence[SimTask], *, hasty: bool = False) -> ReplyFn:
    """Reads the file, applies the fix, runs the tests (unless hasty), then submits."""

    def respond(req: ChatRequestView) -> Reply:
        task = find_task(tasks, req)
        if not req.body.get("tools") and not req.body.get("response_format"):
            return _whole_file(task, req.last_user_text(), careless=hasty)
        if task is None:
            return _call("submit", summary="I could not tell which task this is.")
        done = _called(req)
        if "read" not in done:
            return _call("read", path=task.path)
        if hasty and hashes_odd(task.name):
            return _call("submit", summary=f"Fixed {task.path}.", files_changed=[task.path])
        if "replace" not in done:
            return _call("replace", path=task.path, old=task.old, new=task.new)
        if not hasty and task.acceptance and "run" not in done:
            return _call("run", command=task.acceptance[0])
        return _call("submit", summary=f"Fixed {task.path}.", files_changed=[task.path])

    return respond


def _whole_file(task: SimTask | None, prompt: str, *, careless: bool) -> Reply:
    """Asked once with no tools (the bench's single-prompt baseline): the task's file back,
    whole, fixed (the careless builder sends it back unchanged on odd-hashed tasks)."""
    if task is None:
        return Reply(content="I could not tell which task this is.")
    head = f"{task.path}\n```\n"
    start = prompt.find(head)
    if start < 0:
        return Reply(content=f"I did not see {task.path}.")
    body = prompt[start + len(head):].split("```", 1)[0]
    if not (careless and hashes_odd(task.name)):
        body = body.replace(task.old, task.new)
    return Reply(content=f"Here is the fix.\n\n{task.path}\n```\n{body}```\n")


def _approve(req: ChatRequestView) -> Reply:
    return _call("submit", verdict="approve", comments=["The change is minimal and the tests pass."])


@functools.cache
def builtin_tasks() -> tuple[SimTask, ...]:
    """The built-in suite's tasks, read on first use (not at import)."""
    return sim_tasks(builtin_suite())


FACTORIES: dict[str, Callable[[Sequence[SimTask]], ReplyFn]] = {
    "bench-planner": planner_for,
    "bench-builder": builder_for,
    "bench-builder-hasty": functools.partial(builder_for, hasty=True),
    "bench-reviewer": lambda _tasks: _approve,
}

def _lazy(factory: Callable[[Sequence[SimTask]], ReplyFn]) -> ReplyFn:
    return lambda req: factory(builtin_tasks())(req)


def register_behaviors() -> None:
    """Make every ``bench-*`` behaviour available to scenarios by name, answering for the
    built-in suite (its tasks are read on the first request); calling it again changes nothing."""
    for name, factory in FACTORIES.items():
        register_behavior(name)(_lazy(factory))


def bind_tasks(scenario: Scenario, tasks: Sequence[SimTask]) -> Scenario:
    """The scenario with every ``bench-*`` behaviour answering for ``tasks`` instead."""
    models = {}
    for model_id, behavior in scenario.models.items():
        factory = FACTORIES.get(behavior.behavior or "")
        if factory is not None:
            data = behavior.model_dump(exclude={"behavior", "respond"})
            behavior = ModelBehavior.model_validate({**data, "respond": factory(tuple(tasks))})
        models[model_id] = behavior
    return scenario.model_copy(update={"models": models})
