"""orchestrate: a multi-agent coding orchestrator with model-role routing.

The public API: run / arun / resume / aresume / start (a run with an event stream),
explore / aexplore, load_roles, and the typed results and errors they use.
"""

from .api import RunHandle, aexplore, aresume, arun, explore, resume, run, start
from .config import RoleMap, load_roles
from .errors import (
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
from .results import ExploreResult, RunResult
from .state import Citation, Claim, ExplorerResult, Findings, Plan, Review, RoleLoss, VerifyResult
from .telemetry import Event
from .trust import UntrustedConfig

__all__ = [
    "BudgetExhausted", "Citation", "Claim", "ConfigError", "DatabaseUnavailable", "Event",
    "ExploreResult", "ExplorerResult", "Findings", "MissingCredentials", "ModelError",
    "ModelUnavailable", "OrchestrateError", "Plan", "Review", "RoleLoss", "RoleMap", "RunHandle",
    "RunResult", "SessionFailed", "UntrustedConfig", "UsageError", "VerifyResult", "aexplore",
    "aresume", "arun", "explore", "load_roles", "resume", "run", "start",
]
