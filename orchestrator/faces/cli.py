"""The ``orchestrate`` command: a thin shell over the library API.

Parsing is typer's, tables and live progress are rich's. Every command takes ``--json`` where
it prints a result; errors of ours print one line and exit with their code (2 for usage and
configuration, 1 for a task not achieved), never a traceback. A result exits with its own
``exit_code``: 0 clean, 1 not achieved, 3 done with a role session lost (see ``results``).

The commands live by subject: ``cli_run`` (run, resume, show, demo, explore) and ``cli_admin``
(the role map, the runs after the fact, the quota, the fleet, bench and the servers), on the
app and helpers of ``cliapp``. The engine is imported on first use, so ``--help``,
``--version`` and ``roles`` start at once (``bench/cli_startup.py`` measures it).
"""

from __future__ import annotations

import os
import sys

from orchestrator.errors import OrchestrateError
from orchestrator.faces.cliapp import app, err
from orchestrator.record.tracing import configure_from_env

# each module adds its commands to app, and --help lists them in that order
# isort: off
from orchestrator.faces import cli_run  # noqa: F401
from orchestrator.faces import cli_admin  # noqa: F401
# isort: on

__all__ = ["app", "main"]


def main() -> None:
    try:
        # spans as the SDK's standard variables say: OTEL_TRACES_EXPORTER, OTEL_EXPORTER_OTLP_*
        configure_from_env(os.environ, warn=lambda message: err.print(
            f"warning: {message}", markup=False, highlight=False))
        app()
    except OrchestrateError as exc:  # raised outside a command body
        err.print(f"error: {' '.join(str(exc).split())}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)
