"""The ``orchestrate`` command: a thin shell over the library API.

Parsing is typer's, tables and live progress are rich's. Every command takes ``--json`` where
it prints a result; errors of ours print one line and exit with their code (2 for usage and
configuration, 1 for a task not achieved), never a traceback. A result exits with its own
``exit_code``: 0 clean, 1 not achieved, 3 done with a role session lost, 4 a plan awaiting
approval (see ``results``). With ``--json`` or ``--events`` every exit, a mistake on the
command line too, prints one JSON object on stdout: the result, or an ``ErrorLine``.

The commands live by subject: ``cli_run`` (run, resume, show, demo, explore) and ``cli_admin``
(the role map, the runs after the fact, the quota, the fleet, bench and the servers), on the
app and helpers of ``cliapp``. The engine is imported on first use, so ``--help``,
``--version`` and ``roles`` start at once (``bench/cli_startup.py`` measures it).
"""

from __future__ import annotations

import os
import sys

import typer

from orchestrator.errors import OrchestrateError, UsageError
from orchestrator.faces.cliapp import app, err, print_error_object
from orchestrator.record.tracing import configure_from_env

# each module adds its commands to app, and --help lists them in that order
# isort: off
from orchestrator.faces import cli_run  # noqa: F401
from orchestrator.faces import cli_admin  # noqa: F401
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    machine = _machine(sys.argv[1:])
    try:
        # spans as the SDK's standard variables say: OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_*
        configure_from_env(os.environ, warn=lambda message: err.print(
            f"warning: {message}", markup=False, highlight=False))
        if not machine:
            app()
        sys.exit(app(standalone_mode=False))
    except OrchestrateError as exc:  # raised outside a command body
        err.print(f"error: {' '.join(str(exc).split())}", markup=False, highlight=False)
        if machine:
            print_error_object(exc)
        sys.exit(exc.exit_code)
    except typer.TyperException as exc:  # --json/--events given, the command line is wrong
        exc.show()  # type: ignore[attr-defined]  # typer's usage errors all have it
        print_error_object(UsageError(exc.format_message()))
        sys.exit(getattr(exc, "exit_code", 2))
    except (KeyboardInterrupt, typer.Abort):
        if machine:
            print_error_object(KeyboardInterrupt())
        sys.exit(130)


def _machine(args: list[str]) -> bool:
    """``--json`` or ``--events`` among the options (before a ``--``): then every way out,
    the command line's own mistakes too, prints one JSON object on stdout."""
    options = args[:args.index("--")] if "--" in args else args
    return "--json" in options or "--events" in options
