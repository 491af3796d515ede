"""The processes' own logs (the worker's, the CLI's warnings): structlog, one JSON object a
line for a log system, or readable lines on a terminal.

Every line has ``event``, ``level``, ``logger`` and ``timestamp``; what is bound with
``structlog.contextvars`` (a worker binds ``job_id``, ``run_id``, ``attempt``, ``worker``) is
added to every line logged under it, from asyncio tasks and ``to_thread`` calls too. Other
libraries' standard logging goes through the same renderer. Tracebacks are plain (never rich's
with local variables: API keys live in locals).
"""

from __future__ import annotations

import logging
import sys
from typing import Any, TextIO

import structlog

_SHARED: list[Any] = [
    structlog.contextvars.merge_contextvars,
    structlog.stdlib.add_log_level,
    structlog.stdlib.add_logger_name,
    structlog.processors.TimeStamper(fmt="iso", utc=True),
]
_QUIET = ("asyncio", "httpx", "httpx2", "httpcore", "httpcore2", "psycopg", "psycopg.pool",
          "procrastinate")


def setup_logging(*, json: bool | None = None, stream: TextIO | None = None,
                  level: int = logging.INFO) -> None:
    """Route structlog and standard logging to ``stream`` (stderr): JSON lines unless ``json``
    is False, or None and the stream is a terminal (then a readable console)."""
    stream = stream or sys.stderr
    as_json = json if json is not None else not stream.isatty()
    renderer: Any = (structlog.processors.JSONRenderer() if as_json else
                     structlog.dev.ConsoleRenderer(colors=stream.isatty(),
                                                  exception_formatter=structlog.dev.plain_traceback))
    # tracebacks as data, without local variables (keys and tokens live in locals)
    tail: list[Any] = [structlog.processors.ExceptionRenderer(
        structlog.tracebacks.ExceptionDictTransformer(show_locals=False))] if as_json else []
    structlog.configure(
        processors=[*_SHARED, structlog.stdlib.ProcessorFormatter.wrap_for_formatter],
        logger_factory=structlog.stdlib.LoggerFactory(),
        wrapper_class=structlog.stdlib.BoundLogger,
        cache_logger_on_first_use=False,
    )
    handler = logging.StreamHandler(stream)
    handler.setFormatter(structlog.stdlib.ProcessorFormatter(
        foreign_pre_chain=_SHARED,
        processors=[structlog.stdlib.ProcessorFormatter.remove_processors_meta, *tail, renderer]))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for name in _QUIET:
        logging.getLogger(name).setLevel(logging.WARNING)
