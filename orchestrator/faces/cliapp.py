"""What every ``orchestrate`` command shares: the typer app, the consoles, the common options,
and how a command reports an error, asks for trust, and ends with a result.

The engine (``api``: LangGraph, the OpenAI SDK) is imported on first use, so ``--help``,
``--version`` and ``roles`` start at once (``bench/cli_startup.py`` measures it).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.markup import escape

from orchestrator.config.trust import UntrustedConfig, record_trust, user_config_dir
from orchestrator.errors import OrchestrateError, UsageError
from orchestrator.faces.render import (
    json_text,
    print_run_summary,
    print_trust_request,
    terminal_console,
)
from orchestrator.workspace.repo import repo_root

if TYPE_CHECKING:
    from orchestrator import api
    from orchestrator.record.telemetry import Event
    from orchestrator.results import RunResult
else:

    class _Engine(ModuleType):
        """``orchestrator.api``, imported when a command first touches it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(import_module("orchestrator.api"), name)

    api = _Engine("orchestrator.api")

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Multi-agent coding orchestrator: planner, parallel explorers, builder, reviewer.",
)
# Piped output (CI logs, files) gets room for the tables instead of rich's 80-column default.
# Both show a model's control characters instead of obeying them (``render.visible``).
out = terminal_console(width=None if sys.stdout.isatty() else 140)
err = terminal_console(stderr=True, width=None if sys.stderr.isatty() else 140)

RepoOpt = Annotated[Path | None, typer.Option("--repo", help="Target git repository (default: current directory).")]
RolesOpt = Annotated[list[Path], typer.Option("--roles", help="Extra role map file(s), applied in order.")]
SetOpt = Annotated[list[str], typer.Option("--set", help="Override one key: ROLE.KEY=VALUE, e.g. explorer.parallel=20.")]
TeamOpt = Annotated[str | None, typer.Option("--team", help="Apply the [teams.NAME] overlay.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout (on failure, one error object: `orchestrate schema error`).")]
UsdOpt = Annotated[float | None, typer.Option("--max-usd", help="Stop (resumably) once this much is spent.")]
TokensOpt = Annotated[int | None, typer.Option("--max-tokens", help="Stop (resumably) after this many tokens.")]
DbOpt = Annotated[str | None, typer.Option("--database-url", envvar="ORCHESTRATE_DATABASE_URL",
                                              help="postgresql://... to share state (default: local SQLite).")]
TrustOpt = Annotated[bool, typer.Option(
    "--trust-repo-config",
    help="Trust the repository's roles.toml for this run only (see `orchestrate trust`).")]
EventsOpt = Annotated[bool, typer.Option(
    "--events", help="Stream the run's events as JSON lines on stdout (for CI logs); the last "
    'line is {"kind": "result", "result": ...}, or {"kind": "error", ...} when the command ends '
    "without a result. See `orchestrate schema events`.")]


def run_async(coroutine: Any) -> Any:
    import asyncio  # not at the top: the quick commands never need an event loop

    from orchestrator.faces.logs import setup_logging

    if not logging.getLogger().handlers:  # `worker` set its own up (info, its format)
        # what libraries log (warnings and worse) goes out through structlog: JSON lines for
        # a log system, readable at a terminal
        setup_logging(level=logging.WARNING)
    return asyncio.run(coroutine)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        out.print(f"orchestrate {version('orchestrate')}", highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    pass


class Machine:
    """What a command printing ``--json``/``--events`` needs to end in one JSON object on
    stdout whatever happens: whether it was asked for, and the run's id once the run has one
    (it listens to the run's events), so a bot learns the run it can resume or show."""

    def __init__(self, on: bool, run_id: str | None = None) -> None:
        self.on, self.run_id = on, run_id

    def __call__(self, event: Event) -> None:
        if self.run_id is None and event.run_id:
            self.run_id = event.run_id

    def error(self, exc: BaseException) -> None:
        if self.on:
            print_error_object(exc, run_id=self.run_id)


def print_error_object(exc: BaseException, *, run_id: str | None = None) -> None:
    from orchestrator.results import ErrorLine

    _line(ErrorLine.of(exc, run_id=run_id).model_dump(mode="json", exclude_none=True))


def fail(exc: OrchestrateError, machine: Machine | None = None) -> None:
    line = escape(" ".join(str(exc).split()))  # one line, whatever the message carried
    err.print(f"[bold red]error:[/] {line}", highlight=False, markup=True, soft_wrap=True)
    if machine is not None:
        machine.error(exc)
    raise typer.Exit(exc.exit_code)


def trusting(call: Callable[[bool], Any], *, interactive: bool, trust_flag: bool) -> Any:
    """``call(trust_repo_config)``; at a terminal, an untrusted repository config is shown and
    the user asked once (as the peers ask before trusting a folder); elsewhere it is refused."""
    try:
        return call(trust_flag)
    except UntrustedConfig as exc:
        if not interactive or not sys.stdin.isatty():
            raise
        print_trust_request(err, exc)
        if not typer.confirm("Trust this file (recorded until it changes)?", default=False,
                             err=True):
            raise
        record_trust(user_config_dir(os.environ), exc.repo, {exc.file.name: exc.digest})
        return call(trust_flag)


def guarded(fn: Callable[[], Any], machine: Machine | None = None) -> Any:
    """``fn()``; an error of ours ends the command with one line and its exit code; with
    ``machine.on`` (``--json``/``--events``) any way out prints one error object on stdout."""
    machine = machine or Machine(False)
    try:
        return fn()
    except OrchestrateError as exc:
        fail(exc, machine)
    except KeyboardInterrupt as exc:
        err.print("interrupted; the user's checkout is untouched (see `orchestrate clean`)")
        machine.error(exc)
        raise typer.Exit(130) from None
    except (typer.Exit, typer.Abort):
        raise
    except Exception as exc:  # a bug: its traceback goes to stderr, the bot still gets a line
        machine.error(exc)
        raise


def emit_result(result: RunResult, as_json: bool, *, simulated: bool = False,
                events: bool = False) -> None:
    if events:  # the last JSON line of the stream
        _line({"kind": "result", "result": result.model_dump(mode="json")})
    elif as_json:
        out.print_json(result.model_dump_json())
    else:
        print_run_summary(out, result, simulated=simulated)
    raise typer.Exit(result.exit_code)


def _line(data: dict[str, Any]) -> None:
    sys.stdout.write(json_text(data) + "\n")
    sys.stdout.flush()


def event_lines(event: Event) -> None:
    """``--events``: every event but the live ticks, one JSON line each, as it happens."""
    if event.kind != "progress":
        _line(event.model_dump(mode="json"))


def maybe_repo() -> Path | None:
    """The current directory's repository, or None outside one."""
    try:
        return repo_root(None)
    except UsageError:  # not in a repository; a git that fails is still an error
        return None


def need_database(database_url: str | None) -> str:
    if not database_url:
        raise UsageError("the fleet needs a shared database: pass --database-url postgresql://... "
                         "or set ORCHESTRATE_DATABASE_URL")
    return database_url
