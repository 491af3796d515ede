"""The one way into a run: ``open_run``, which gives an ``OpenRun`` (``openrun.py``), what a run
holds open until it ends.

Every entry opens its run here: ``arun`` and ``start`` (mode ``run``), ``aresume``
(``resume``), ``aexplore`` (``explore``) and each node of the platform graph (``node``: its
thread's run, made by the first node and re-opened after a pause or a restart, since live
objects cannot cross the platform's JSON boundary). ``open_run`` works out what the run is (role
map, pipeline), checks what would fail later while nothing is made (the quota ledger opens,
every role has its key, commands can be sandboxed: ``runplan.prepare``, which imports neither
LangGraph nor the OpenAI SDK, so bad input is refused before they load), makes the run's files
(``openrun.make_files``), then opens the run
lock, the registry entry, the telemetry, the client pool that reports to it, the call journal,
the sandbox and the checkpointer, and assembles the ``RunContext`` nodes receive. At the end
``OpenRun`` writes the result, the report and the registry's verdict, then closes everything.
"""

from __future__ import annotations

import asyncio
import importlib
from contextlib import AsyncExitStack
from typing import TYPE_CHECKING

from orchestrator.config.pipeline import Pipeline
from orchestrator.engine.options import Mode, RunOptions
from orchestrator.engine.runplan import prepare

if TYPE_CHECKING:
    from orchestrator.engine.openrun import OpenRun

__all__ = ["open_run"]


async def open_run(mode: Mode, options: RunOptions, subject: str = "", *,
                   run_id: str | None = None, served: Pipeline | None = None) -> OpenRun:
    """Open a run of ``mode`` as ``options`` say; the caller drives its graph, then ends it
    (``async with run:``, or ``finish``/``stop`` and ``aclose``).

    ``subject`` is the task (run, node) or the question (explore); ``run_id`` is the run to
    resume (resume) or the platform thread's run (node). ``served`` is the pipeline a platform
    graph was built for: a run whose role map gives another pipeline is refused.
    """
    options.check(mode)
    plan, ledger = await asyncio.to_thread(prepare, mode, options, subject, run_id, served)
    # what is left needs LangGraph and the OpenAI SDK: imported once the run is sure to open,
    # and in a thread: 1-3 s of imports (more on a loaded box) would stall every task on the
    # caller's loop - a fleet worker's heartbeat among them, and its job was taken as stalled
    await asyncio.to_thread(importlib.import_module, "orchestrator.engine.drive")
    saving = AsyncExitStack()  # the checkpointer, open from before the worktree is made
    try:
        from orchestrator.engine.openrun import OpenRun, make_files

        saver = await make_files(plan, options, saving)
        run = await asyncio.to_thread(OpenRun, plan, options, ledger)
    except BaseException:
        try:
            await saving.aclose()
        finally:
            await asyncio.to_thread(ledger.close)
        raise
    run.saving, run.saver = saving, saver
    try:
        run.announce()  # on the loop: listeners are only ever called from it
    except BaseException:
        await run.aclose()
        raise
    return run
