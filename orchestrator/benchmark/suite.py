"""Task suites: a directory of tasks, each a ``task.toml`` (instruction, acceptance commands,
the repository to work in) next to that repository. Loading is strict and happens once; a run
gets its own fresh git repository copied from the task's (``materialize``). The optional
``[sim]`` table is the reference fix the simulated models apply; it stays in ``task.toml``,
outside the copied repository, so no prompt ever carries it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from orchestrator.errors import ConfigError

TASK_FILE = "task.toml"
_IDENT = ["-c", "user.name=bench", "-c", "user.email=bench@localhost", "-c", "commit.gpgSign=false",
          "-c", "core.hooksPath=/dev/null"]
_SKIP = shutil.ignore_patterns(".git", "__pycache__", "node_modules", "workspaces", ".orchestrate")


class SimFix(BaseModel):
    """The reference fix, for simulated models only: replace ``old`` by ``new`` in ``path``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    old: str
    new: str
    symbol: str | None = Field(None, description="What the simulated explorer searches for.")


class Task(BaseModel):
    """One benchmark task: where its code is, what to do, and how to tell it is done."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    instruction: str = Field(min_length=1)
    acceptance: tuple[str, ...] = Field(min_length=1)
    repo: Path
    language: str = ""
    sim: SimFix | None = None


class Suite(BaseModel):
    """A named, ordered set of tasks."""

    model_config = ConfigDict(frozen=True)

    name: str
    path: Path
    tasks: tuple[Task, ...]

    def select(self, names: list[str] | None) -> Suite:
        """The suite restricted to ``names`` (in suite order); unknown names are an error."""
        if not names:
            return self
        unknown = sorted(set(names) - {t.name for t in self.tasks})
        if unknown:
            known = ", ".join(t.name for t in self.tasks)
            raise ConfigError(f"suite {self.name}: unknown task(s) {', '.join(unknown)} (tasks: {known})")
        return self.model_copy(update={"tasks": tuple(t for t in self.tasks if t.name in names)})


PACKAGED = ("builtin", "live")  # suites shipped with the package, loadable by name


def packaged_suite_path(name: str) -> Path:
    return Path(str(resources.files("orchestrator.benchmark").joinpath("suites", name)))


def builtin_suite_path() -> Path:
    return packaged_suite_path("builtin")


def builtin_suite() -> Suite:
    return load_suite(builtin_suite_path())


def load_suite(path: str | os.PathLike[str]) -> Suite:
    """Every ``*/task.toml`` under ``path`` (sorted by directory name), or ``path`` itself if it
    is one task; ``builtin`` and ``live`` name the suites shipped with the package."""
    root = packaged_suite_path(str(path)) if str(path) in PACKAGED else Path(path)
    if (root / TASK_FILE).is_file():
        return Suite(name=root.name, path=root, tasks=(load_task(root),))
    if not root.is_dir():
        raise ConfigError(f"{root}: no such suite directory")
    tasks = tuple(load_task(d) for d in sorted(root.iterdir()) if (d / TASK_FILE).is_file())
    if not tasks:
        raise ConfigError(f"{root}: no tasks (expected subdirectories holding a {TASK_FILE})")
    return Suite(name=root.name, path=root, tasks=tasks)


def load_task(task_dir: Path) -> Task:
    file = task_dir / TASK_FILE
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read task: {exc}") from None
    repo = task_dir / str(data.pop("repo", "repo"))
    try:
        task = Task.model_validate({"name": task_dir.name, **data, "repo": repo.resolve()})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ConfigError(f"{file}: {loc}: {err['msg']}") from None
    if not task.repo.is_dir():
        raise ConfigError(f"{file}: repo {task.repo} is not a directory")
    return task


@dataclass(frozen=True)
class SimTask:
    """What the simulator knows about one task: how to recognise it and its reference fix."""

    name: str
    instruction: str
    path: str
    old: str
    new: str
    symbol: str
    acceptance: tuple[str, ...] = ()


def sim_tasks(suite: Suite) -> tuple[SimTask, ...]:
    """What the simulator may know about the suite's tasks (only those with a ``[sim]`` fix)."""
    return tuple(
        SimTask(name=t.name, instruction=t.instruction, path=t.sim.path, old=t.sim.old,
                new=t.sim.new, symbol=t.sim.symbol or Path(t.sim.path).stem,
                acceptance=t.acceptance)
        for t in suite.tasks if t.sim is not None
    )


def materialize(task: Task, dest: Path) -> Path:
    """A fresh git repository at ``dest`` holding a copy of the task's files, one commit."""
    return copy_repo(task.repo, dest)


def copy_repo(source: Path, dest: Path, *, extra: Mapping[str, str] | None = None) -> Path:
    """A fresh git repository at ``dest`` holding a copy of ``source``'s files (and ``extra``
    ones: path -> text), one commit."""
    shutil.copytree(source, dest, ignore=_SKIP)
    for rel, text in (extra or {}).items():
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text(text, encoding="utf-8")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-q", "-m", "task"]):
        subprocess.run(["git", *_IDENT, *args], cwd=dest, check=True, capture_output=True)
    return dest


def apply_fix(task: Task, repo: Path) -> None:
    """Apply the task's reference fix in ``repo`` (to check the task itself)."""
    if task.sim is None:
        raise ConfigError(f"task {task.name} has no [sim] reference fix")
    file = repo / task.sim.path
    text = file.read_text(encoding="utf-8")
    if text.count(task.sim.old) != 1:
        raise ConfigError(f"task {task.name}: [sim].old is not found exactly once in {task.sim.path}")
    file.write_text(text.replace(task.sim.old, task.sim.new), encoding="utf-8")
