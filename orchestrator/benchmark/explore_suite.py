"""Explore suites: a repository and questions about it, each with the line ranges a right
answer must cite. ``explore.toml`` names the repository (a directory next to it), where the
code came from and its licence, and the questions; loading checks that every answer range
exists in the repository, so a suite cannot silently drift from its code.

    name = "click"
    repo = "repo"
    source = "click 8.5.1 from PyPI, four modules, unmodified"
    license = "BSD-3-Clause (repo/LICENSE.txt)"

    [[questions]]
    id = "usage-exit-code"
    question = "What exit code does `UsageError` exit with?"
    answers = [{ path = "src/click/exceptions.py", lines = [68, 77] }]
"""

from __future__ import annotations

import functools
import os
import tomllib
from importlib import resources
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from orchestrator.benchmark.logs import GENERATORS
from orchestrator.benchmark.suite import copy_repo
from orchestrator.errors import ConfigError

SUITE_FILE = "explore.toml"
BUILTIN = "builtin-explore"


class AnswerRange(BaseModel):
    """Lines ``lines[0]``..``lines[1]`` (1-based, inclusive) of ``path`` hold the answer."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str
    lines: tuple[int, int]

    @model_validator(mode="after")
    def _ordered(self) -> AnswerRange:
        if not 1 <= self.lines[0] <= self.lines[1]:
            raise ValueError(f"lines {list(self.lines)} must be [first, last] with 1 <= first <= last")
        return self

    def overlaps(self, path: str, start: int, end: int) -> bool:
        """True when ``path`` lines ``start``..``end`` share a line with this range."""
        return path.removeprefix("./") == self.path and start <= self.lines[1] and end >= self.lines[0]

    def __str__(self) -> str:
        return f"{self.path}:{self.lines[0]}-{self.lines[1]}"


class Question(BaseModel):
    """One question and where its answer is."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    id: str = Field(pattern=r"^[A-Za-z0-9][\w.-]*$")
    question: str = Field(min_length=1)
    answers: tuple[AnswerRange, ...] = Field(min_length=1)


class Generated(BaseModel):
    """A file of the repository made when the suite is copied (``benchmark/logs.py``)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    path: str = Field(pattern=r"^[\w][\w./-]*$")
    kind: Literal["service-log"]

    def text(self) -> str:
        return _generated_text(self.kind)


@functools.cache
def _generated_text(kind: str) -> str:
    return GENERATORS[kind]()


class ExploreSuite(BaseModel):
    """A repository and the questions to ask explorers about it."""

    model_config = ConfigDict(frozen=True)

    name: str
    path: Path
    repo: Path
    source: str = ""
    license: str = ""
    generated: tuple[Generated, ...] = ()
    questions: tuple[Question, ...]

    def materialize(self, dest: Path) -> Path:
        """A fresh git repository at ``dest``: the suite's files and its generated ones."""
        extra = {g.path: g.text() for g in self.generated}
        return copy_repo(self.repo, dest, extra=extra)

    def select(self, ids: list[str] | None) -> ExploreSuite:
        """The suite restricted to the questions ``ids`` (in suite order)."""
        if not ids:
            return self
        unknown = sorted(set(ids) - {q.id for q in self.questions})
        if unknown:
            known = ", ".join(q.id for q in self.questions)
            raise ConfigError(f"suite {self.name}: unknown question(s) {', '.join(unknown)} "
                              f"(questions: {known})")
        return self.model_copy(update={"questions": tuple(q for q in self.questions if q.id in ids)})


# explore suites shipped with the package, loadable by name (a directory of that name wins)
PACKAGED_EXPLORE = (BUILTIN, "requests-explore", "log-explore")


def builtin_explore_path() -> Path:
    return _packaged(BUILTIN)


def _packaged(name: str) -> Path:
    return Path(str(resources.files("orchestrator.benchmark").joinpath("suites", name)))


def _root(path: str | os.PathLike[str]) -> Path:
    if str(path) in PACKAGED_EXPLORE and not (Path(path) / SUITE_FILE).is_file():
        return _packaged(str(path))
    return Path(path)


def is_explore_suite(path: str | os.PathLike[str]) -> bool:
    """True for the packaged explore suites' names (``builtin-explore``, ``requests-explore``,
    ``log-explore``) and for directories holding an ``explore.toml``."""
    return (_root(path) / SUITE_FILE).is_file()


def load_explore_suite(path: str | os.PathLike[str]) -> ExploreSuite:
    """The suite in ``path`` (or a packaged one, by name); errors name the file and the key."""
    root = _root(path)
    file = root / SUITE_FILE
    try:
        data = tomllib.loads(file.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise ConfigError(f"{file}: cannot read explore suite: {exc}") from None
    repo = (root / str(data.pop("repo", "repo"))).resolve()
    try:
        suite = ExploreSuite.model_validate(
            {"name": root.name, **data, "path": root, "repo": repo})
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = ".".join(str(p) for p in err["loc"]) or "(top level)"
        raise ConfigError(f"{file}: {loc}: {err['msg']}") from None
    _check(suite, file)
    return suite


def _check(suite: ExploreSuite, file: Path) -> None:
    if not suite.repo.is_dir():
        raise ConfigError(f"{file}: repo {suite.repo} is not a directory")
    if not suite.questions:
        raise ConfigError(f"{file}: no [[questions]]")
    ids = [q.id for q in suite.questions]
    if len(set(ids)) != len(ids):
        raise ConfigError(f"{file}: question ids must be distinct (got {ids})")
    made = {g.path: g for g in suite.generated}
    for q in suite.questions:
        for a in q.answers:
            target = suite.repo / a.path
            if a.path in made:
                total = made[a.path].text().count("\n")
            elif not target.is_file():
                raise ConfigError(f"{file}: question {q.id}: no file {a.path} in {suite.repo}")
            else:
                with target.open("rb") as fh:
                    total = sum(1 for _ in fh)
            if a.lines[1] > total:
                raise ConfigError(f"{file}: question {q.id}: {a} is past the end of "
                                  f"{a.path} ({total} lines)")
