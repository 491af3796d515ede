"""The error hierarchy: every error a user can meet carries a code and says what to do next."""

from __future__ import annotations


class OrchestrateError(Exception):
    """Base of every error the engine raises on purpose; ``exit_code`` is what the CLI returns."""

    exit_code = 1
    code = "error"


class ConfigError(OrchestrateError):
    """A role map, flag or agent definition is invalid; the message names the file and key."""

    exit_code = 2
    code = "config"


class UsageError(OrchestrateError):
    """The command was called wrongly (not a git repository, unknown run id, ...)."""

    exit_code = 2
    code = "usage"


class SandboxUnavailable(OrchestrateError):
    """Builder commands cannot be sandboxed here; the message names why and the fix."""

    exit_code = 2
    code = "sandbox_unavailable"


class DatabaseUnavailable(ConfigError):
    """The configured database URL cannot be used: unreachable, login refused, malformed."""

    code = "database"


class MissingCredentials(ConfigError):
    """A provider needed by the role map has no API key in the environment."""

    code = "missing_credentials"


class ModelError(OrchestrateError):
    """A model call failed in a way that retrying the same model will not fix."""

    code = "model"


class ModelUnavailable(ModelError):
    """Every model in a role's chain is exhausted, rate limited or down."""

    code = "model_unavailable"


class ContextOverflow(ModelError):
    """The server said the prompt is larger than the model's context window."""

    code = "context_length_exceeded"


class BudgetExhausted(OrchestrateError):
    """A run budget (--max-usd / --max-tokens) is spent; the run can be resumed."""

    code = "budget"


class SessionFailed(OrchestrateError):
    """An agent session ended without submitting a valid result (turn limit, no progress)."""

    code = "session_failed"


class GitError(OrchestrateError, RuntimeError):
    """A git command failed unexpectedly, or git is missing; carries git's own message (still a
    ``RuntimeError``, as it was before it joined this hierarchy)."""

    code = "git"


class ResultTooLarge(OrchestrateError):
    """What a run would add to the user's repository is over its bound (``run.max_result_mb``,
    ``run.max_result_files``); nothing of it was written to the object store."""

    code = "result_too_large"


class ToolError(Exception):
    """A tool refused or failed; the message goes back to the model as the tool result."""


class PolicyViolation(ToolError):
    """A command or path broke the workspace policy; answered to the model and counted."""
