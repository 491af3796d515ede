"""orchestrate: a multi-agent coding orchestrator with model-role routing.

The public API: run / arun / resume / aresume / start (a run with an event stream),
explore / aexplore, what they are given (``RunOptions``), load_roles, and the typed results and
errors they use. Names are imported
on first use, so ``import orchestrator.config.schema`` (and the CLI's quick commands) do not pay for
the engine (LangGraph, the OpenAI SDK) until something needs it.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from orchestrator.api import (
        RunHandle,
        RunOptions,
        aexplore,
        aresume,
        arun,
        explore,
        resume,
        run,
        start,
    )
    from orchestrator.config.layers import load_roles
    from orchestrator.config.schema import RoleMap
    from orchestrator.config.trust import UntrustedConfig
    from orchestrator.errors import (
        BudgetExhausted,
        ConfigError,
        DatabaseUnavailable,
        MissingCredentials,
        ModelError,
        ModelUnavailable,
        OrchestrateError,
        SessionFailed,
        UsageError,
    )
    from orchestrator.record.telemetry import Event
    from orchestrator.results import ExploreResult, RunResult
    from orchestrator.state import (
        Citation,
        Claim,
        ExplorerResult,
        Findings,
        Plan,
        Review,
        RoleLoss,
        VerifyResult,
    )

_WHERE = {
    **dict.fromkeys(("RunHandle", "RunOptions", "aexplore", "aresume", "arun", "explore",
                     "resume", "run", "start"), "api"),
    "RoleMap": "config.schema",
    "load_roles": "config.layers",
    **dict.fromkeys(("BudgetExhausted", "ConfigError", "DatabaseUnavailable", "MissingCredentials",
                     "ModelError", "ModelUnavailable", "OrchestrateError", "SessionFailed",
                     "UsageError"), "errors"),
    **dict.fromkeys(("ExploreResult", "RunResult"), "results"),
    **dict.fromkeys(("Citation", "Claim", "ExplorerResult", "Findings", "Plan", "Review",
                     "RoleLoss", "VerifyResult"), "state"),
    "Event": "record.telemetry",
    "UntrustedConfig": "config.trust",
}

__all__ = [
    "BudgetExhausted", "Citation", "Claim", "ConfigError", "DatabaseUnavailable", "Event",
    "ExploreResult", "ExplorerResult", "Findings", "MissingCredentials", "ModelError",
    "ModelUnavailable", "OrchestrateError", "Plan", "Review", "RoleLoss", "RoleMap", "RunHandle",
    "RunOptions", "RunResult", "SessionFailed", "UntrustedConfig", "UsageError", "VerifyResult",
    "aexplore", "aresume", "arun", "explore", "load_roles", "resume", "run", "start",
]


def __getattr__(name: str) -> Any:
    module = _WHERE.get(name)
    if module is None:
        raise AttributeError(f"module 'orchestrator' has no attribute {name!r}")
    value = getattr(import_module(f".{module}", __name__), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
