"""What another machine needs to continue a fleet run, kept where every worker reaches it.

A run's files that ``resume`` rebuilds it from (``run.json``, ``agents.json``,
``workspace.json``) and its event log (the calls it paid for: cost and history) are mirrored
into the ``orchestrate_run_files`` table as the run goes; its call journal is already in the
database (``models/journal_pg.py``) and so are its checkpoints. The files the last checkpoint
saw (its ``worktree_tree``) and the run branch's tip are pushed to the job's origin as one
commit under a private ref, ``refs/orchestrate/snapshots/<run-id>`` (tree: the checkpoint's
files; parent: the branch tip), before each checkpoint with new files is written
(``RunOptions.before_checkpoint``), so the files a checkpoint names are always there first.

``adopt`` is the other side: in a clone that has never seen the run, it fetches that ref,
writes the run's files into ``workspaces/<run-id>/`` and puts the run branch back, so
``api.aresume`` continues the run exactly as on the machine that started it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
from pathlib import Path
from typing import Any

import structlog

from orchestrator.gitsafe import git
from orchestrator.record.lease import LeaseLost, RunLease
from orchestrator.record.store import SharedConnection
from orchestrator.record.telemetry import Event

SNAPSHOTS = "refs/orchestrate/snapshots"
SEED_FILES = ("run.json", "agents.json", "workspace.json")
EVENTS = "events.jsonl"
_RUN_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,99}$")  # as a workspace's (worktree.py)
_SCHEMA = ("CREATE TABLE IF NOT EXISTS orchestrate_run_files (run_id TEXT NOT NULL, "
           "name TEXT NOT NULL, content TEXT NOT NULL, PRIMARY KEY (run_id, name))")
log = structlog.get_logger("orchestrate.fleet")


class RunFiles:
    """The ``orchestrate_run_files`` table, through one ``SharedConnection``."""

    def __init__(self, database_url: str) -> None:
        self._db = SharedConnection(database_url)
        self._db.create("orchestrate.run_files", (_SCHEMA,), None)

    def _run(self, sql: str, args: tuple[Any, ...]) -> list[tuple[Any, ...]]:
        return self._db.run(sql, args)

    def put(self, run_id: str, name: str, content: str) -> None:
        self._run("INSERT INTO orchestrate_run_files VALUES (%s, %s, %s) ON CONFLICT (run_id, "
                  "name) DO UPDATE SET content = excluded.content", (run_id, name, content))

    def append(self, run_id: str, name: str, content: str, *, epoch: int | None = None) -> None:
        """Append to a stored file; with ``epoch``, only while the run's lease has that epoch
        (a worker that lost the run adds nothing to its log)."""
        fence = ""
        args: tuple[Any, ...] = (run_id, name, content)
        if epoch is not None:
            fence = (" WHERE EXISTS (SELECT 1 FROM orchestrate_leases WHERE run_id = %s AND "
                     "epoch = %s)")
            args = (*args, run_id, epoch)
        self._run("INSERT INTO orchestrate_run_files SELECT %s, %s, %s" + fence +
                  " ON CONFLICT (run_id, name) DO UPDATE SET content = "
                  "orchestrate_run_files.content || excluded.content", args)

    def size(self, run_id: str, name: str) -> int:
        """The length in bytes of a stored file (0 when there is none)."""
        rows = self._run("SELECT octet_length(content) FROM orchestrate_run_files WHERE "
                         "run_id = %s AND name = %s", (run_id, name))
        return int(rows[0][0]) if rows else 0

    def get(self, run_id: str) -> dict[str, str]:
        rows = self._run("SELECT name, content FROM orchestrate_run_files WHERE run_id = %s",
                         (run_id,))
        return {str(name): str(content) for name, content in rows}

    def close(self) -> None:
        self._db.close()


class RunMirror:
    """A fleet run's listener: mirrors its files and events to the database; its
    ``before_checkpoint`` pushes the checkpoints' files to the origin."""

    def __init__(self, database_url: str, clone: Path, *, origin: str | None,
                 lease: RunLease | None = None) -> None:
        self.files = RunFiles(database_url)
        self.url, self.clone, self.origin, self.lease = database_url, clone, origin, lease
        self.run_id: str | None = None
        self._offset = 0

    @property
    def run_dir(self) -> Path:
        return self.clone / "workspaces" / str(self.run_id)

    def __call__(self, event: Event) -> None:
        if event.kind in ("run_started", "run_resumed"):
            self.run_id = event.run_id
            # the database holds a prefix of the log (all of it after ``adopt``): go on from there
            self._offset = self.files.size(event.run_id, EVENTS)
            for name in SEED_FILES:
                path = self.run_dir / name
                if path.is_file():
                    self.files.put(event.run_id, name, path.read_text("utf-8"))
        if self.run_id is None or event.kind == "progress":
            return
        self._mirror_events()

    def _mirror_events(self) -> None:
        """The event log's lines written since the last call, appended in the database."""
        try:
            with (self.run_dir / EVENTS).open("rb") as f:
                f.seek(self._offset)
                data = f.read()
        except OSError:
            return
        end = data.rfind(b"\n") + 1
        if end:
            epoch = self.lease.epoch if self.lease is not None and self.lease.held else None
            self.files.append(str(self.run_id), EVENTS, data[:end].decode("utf-8", "replace"),
                              epoch=epoch)
            self._offset += end

    async def before_checkpoint(self, run_id: str, tree: str) -> None:
        """``RunOptions.before_checkpoint``: the checkpoint's files go to the origin before the
        checkpoint that names them is written, so a resume elsewhere always finds them."""
        if self.origin is None:
            return
        try:
            await asyncio.to_thread(self._push_snapshot, run_id, tree)
        except LeaseLost:
            raise  # another worker owns the run now: this one stops here
        except Exception as exc:  # the run goes on; a resume elsewhere would say why it cannot
            log.warning("could not push the run's snapshot", run_id=run_id,
                        error=f"{type(exc).__name__}: {exc}")

    def _push_snapshot(self, run_id: str, tree: str) -> None:
        assert self.origin is not None
        if self.lease is None or not self.lease.held:
            push_snapshot(self.clone, run_id, tree, self.origin)
            return
        with self.lease.fenced():  # never over the snapshot of the worker that took the run
            push_snapshot(self.clone, run_id, tree, self.origin)

    async def aclose(self) -> None:
        if self.run_id is not None:
            with contextlib.suppress(Exception):
                self._mirror_events()
        await asyncio.to_thread(self.files.close)


def push_snapshot(clone: Path, run_id: str, tree: str, origin: str) -> str:
    """Push a commit of ``tree`` (default: the start's files) on top of the run branch's tip
    to ``refs/orchestrate/snapshots/<run-id>`` of ``origin``; the commit."""
    tip = git("rev-parse", "--verify", "-q", f"refs/heads/orchestrate/{run_id}^{{commit}}",
              cwd=clone).stdout.strip()
    tree = tree or git("rev-parse", f"{tip}^{{tree}}", cwd=clone).stdout.strip()
    commit = git("commit-tree", tree, "-p", tip, "-m", f"orchestrate snapshot of {run_id}",
                 cwd=clone).stdout.strip()
    _push(clone, origin, f"+{commit}:{SNAPSHOTS}/{run_id}")
    return commit


def push_branch(clone: Path, run_id: str, origin: str) -> str:
    """Push the run branch to ``origin`` as ``refs/heads/orchestrate/<run-id>``."""
    ref = f"refs/heads/orchestrate/{run_id}"
    _push(clone, origin, f"+{ref}:{ref}")
    return ref


def _push(clone: Path, origin: str, refspec: str) -> None:
    proc = git("push", "-q", "--", origin, refspec, cwd=clone, check=False, timeout=600,
               network=True)
    if proc.returncode != 0:
        raise OSError(f"git push to {origin} failed: "
                      f"{proc.stderr.strip() or proc.stdout.strip()}")


def spent(database_url: str, run_id: str) -> float:
    """What run ``run_id`` paid for, by its mirrored event log (its calls' cost)."""
    files = RunFiles(database_url)
    try:
        log_text = files.get(run_id).get(EVENTS, "")
    finally:
        files.close()
    total = 0.0
    for line in log_text.splitlines():
        if '"call_finished"' not in line:
            continue
        with contextlib.suppress(ValueError):
            event = json.loads(line)
            if event.get("kind") == "call_finished":
                total += float(event.get("cost_usd") or 0.0)
    return total


def adopt(database_url: str, clone: Path, run_id: str, origin: str | None) -> bool:
    """Make run ``run_id``, started on another machine, resumable in ``clone``; False when the
    database holds nothing of it (then it starts again)."""
    run_dir = clone / "workspaces" / run_id
    if (run_dir / "workspace.json").is_file():
        return True  # this clone has it already
    files = RunFiles(database_url)
    try:
        saved = files.get(run_id)
    finally:
        files.close()
    if not all(name in saved for name in SEED_FILES) or not _RUN_ID.match(run_id):
        return False
    meta = json.loads(saved["workspace.json"])
    start = str(meta.get("start_commit") or meta["base_commit"])
    branch = f"refs/heads/orchestrate/{run_id}"
    tip = start  # nothing was pushed: the run had not moved its branch yet
    if origin is not None:
        fetched = git("fetch", "-q", "--", origin, f"+{SNAPSHOTS}/{run_id}:{SNAPSHOTS}/{run_id}",
                      cwd=clone, check=False, timeout=600, network=True)
        if fetched.returncode == 0:
            pushed = git("rev-parse", "--verify", "-q", f"{SNAPSHOTS}/{run_id}^^{{commit}}",
                         cwd=clone, check=False).stdout.strip()
            # the run branch grows from the run's start: a tip that does not (a ref someone
            # else pushed) would carry a history the run never made into its result
            if pushed and git("merge-base", "--is-ancestor", start, pushed, cwd=clone,
                              check=False).returncode == 0:
                tip = pushed
            else:
                log.warning("the run's snapshot does not grow from its start: not used",
                            run_id=run_id, snapshot_parent=pushed or None)
    run_dir.mkdir(parents=True, exist_ok=True)
    for name in (*SEED_FILES, EVENTS):  # only the files a run mirrors, by their own names
        if name in saved:
            (run_dir / name).write_text(saved[name], "utf-8")
    git("update-ref", branch, tip, cwd=clone)
    return True
