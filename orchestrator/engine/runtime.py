"""What every node receives through LangGraph's runtime context: the run's injected parts.

Nodes never build clients, workspaces or loggers themselves; the API assembles a ``RunContext``
once per run and LangGraph hands it to each node. Nothing here is checkpointed.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from orchestrator.config.definitions import Registry
from orchestrator.config.pipeline import DEFAULT_PIPELINE, Pipeline
from orchestrator.config.schema import RoleMap
from orchestrator.engine.ahead import Ahead, ahead_of_loop
from orchestrator.evidence.sources import DirSource, FileSource, GitCommitSource
from orchestrator.localize.retrieve import Retriever
from orchestrator.models.base import ModelClient
from orchestrator.record.telemetry import Telemetry
from orchestrator.state import Role

if TYPE_CHECKING:
    from orchestrator.sandbox import Sandbox
    from orchestrator.workspace.worktree import Workspace


class RolePool(Protocol):
    """Where nodes get each role's model client (a ``ClientPool``, maybe journaled)."""

    def for_role(self, role: Role, *, temperature: float | None = None, start: int = 0,
                 max_output: int | None = None, choices: int = 1) -> ModelClient: ...


@dataclass
class RunContext:
    """The parts of one run that nodes use."""

    run_id: str
    roles: RoleMap
    agents: Registry
    pool: RolePool
    telemetry: Telemetry
    repo: Path
    worktree: Path
    run_dir: Path
    base_commit: str
    env: Mapping[str, str]
    workspace: Workspace | None = None  # None for `explore`, which has no worktree
    sandbox: Sandbox | None = None  # where builder and verify commands run; None for `explore`
    pipeline: Pipeline = DEFAULT_PIPELINE  # which roles plan, explore, build and judge
    # the repository's AGENTS.md / CLAUDE.md, quoted (reporules.py), or how to read them, or
    # their reading on a thread (``read_rules_ahead``, ``rules``)
    repo_rules: str | Callable[[], str] | asyncio.Future[str] = ""
    # the run's commit, read for every explorer's citations by one `git cat-file` (run only)
    citations: GitCommitSource | None = None
    # work done ahead of the critical path (the worktree's tree while the builder's model
    # writes, the commit while the judges read, the line counts while explorers think)
    ahead: Ahead = field(default_factory=Ahead)
    # the lines mechanical edits were checked on (tree, path, line): once a run each
    mutated: set[tuple[str, str, int]] = field(default_factory=set)
    # candidate windows for explorers' questions; its searches are shared by the run's explorers
    _retriever: Retriever | None = field(default=None, repr=False)

    def read_rules_ahead(self) -> None:
        """Start reading the repository's rules on a worker thread of the event loop (while the
        preflight's commands run), unless they are read or being read."""
        if callable(self.repo_rules):
            self.repo_rules = ahead_of_loop(self.repo_rules)

    async def rules(self) -> str:
        """The repository's rules, quoted: read now, or their reading ahead waited for (its
        error is raised here)."""
        if isinstance(self.repo_rules, asyncio.Future):
            self.repo_rules = await self.repo_rules
        elif callable(self.repo_rules):
            self.repo_rules = self.repo_rules()
        return self.repo_rules

    def retriever(self) -> Retriever:
        """The run's retrieval over its worktree (the run's commit; the checkout for explore)."""
        if self._retriever is None:  # the one loaded ahead, if it still holds
            self._retriever = self.ahead.retrieval() or Retriever(self.worktree)
        return self._retriever

    def retrieval_ahead(self) -> None:
        """Start loading the explorers' retriever on a thread (``Ahead.start_retrieval``),
        unless one is made already."""
        if self._retriever is None:
            self.ahead.start_retrieval(Retriever(self.worktree))

    def start_files(self) -> Callable[[str], bytes | None] | None:
        """A reader of the files at the commit the run started from, without a git process per
        file: the run's citation reader (it reads ``base_commit``, dirty state included); None
        outside a run (ask git)."""
        return None if self.citations is None else self.citations.raw

    @contextlib.contextmanager
    def source(self) -> Iterator[FileSource]:
        """Files at the run's commit, or the working tree for `explore`."""
        if self.workspace is None:
            yield DirSource(self.worktree)
            return
        if self.citations is not None:  # the run's one reader of its commit
            yield self.citations
            return
        with GitCommitSource(self.repo, self.base_commit) as source:
            yield source

    async def worktree_tree(self) -> str:
        """The worktree's files as a tree object, recorded in the checkpoint for an exact
        resume ("" without a worktree of the run's own)."""
        return await asyncio.to_thread(self.workspace.snapshot) if self.workspace else ""
