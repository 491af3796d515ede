"""A simulated OpenAI-compatible model server for tests, the demo and benchmarks: scenarios
describe what each model id replies and how fast, and the server records every request."""

from orchestrator.sim.scenario import (
    BEHAVIORS,
    ChatRequestView,
    FaultSpec,
    ModelBehavior,
    Reply,
    Scenario,
    ToolCallSpec,
    count_completion_tokens,
    count_prompt_tokens,
    count_text_tokens,
    register_behavior,
)
from orchestrator.sim.server import RecordedRequest, SimServer, SimState, build_app, serve_forever

__all__ = [
    "BEHAVIORS",
    "ChatRequestView",
    "FaultSpec",
    "ModelBehavior",
    "RecordedRequest",
    "Reply",
    "Scenario",
    "SimServer",
    "SimState",
    "ToolCallSpec",
    "build_app",
    "count_completion_tokens",
    "count_prompt_tokens",
    "count_text_tokens",
    "register_behavior",
    "serve_forever",
]

from orchestrator.sim import behaviors as _behaviors  # noqa: E402,F401  (built-in computed replies)
