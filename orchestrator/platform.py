"""The graph served on LangGraph's platform (``langgraph.json``): a run as one JSON-in, JSON-out node.

Our own graph cannot be served as it is: its nodes take a runtime context of live objects
(model clients, the worktree, telemetry, the call journal) that cannot cross the platform's JSON
boundary, and it keeps its own checkpoints next to the worktree. So the platform sees a graph
whose input is plain data (task, repository path, role files and ``--set`` overrides) and whose
node runs :func:`orchestrator.api.arun` in a child process, streams the run's events as
``custom`` chunks and returns the ``RunResult`` as JSON. The child keeps a run's blocking git
and test work off the server's event loop, and a crashed run off the server.
"""

from __future__ import annotations

import asyncio
import json
import os
import sys
from typing import Any

from langgraph.config import get_stream_writer
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel, ConfigDict, Field

from orchestrator.errors import OrchestrateError

_LINE_LIMIT = 64 * 1024 * 1024


class PlatformInput(BaseModel):
    """What a platform client sends: everything a run needs, as plain data."""

    model_config = ConfigDict(extra="forbid")

    task: str
    repo: str = Field(description="path of a git repository on the server's machine")
    role_files: list[str] = Field(default_factory=list)
    sets: list[str] = Field(default_factory=list, description="role-map overrides, as --set")
    team: str | None = None


class PlatformOutput(BaseModel):
    """The run's ``RunResult``, as JSON."""

    result: dict[str, Any] | None = None


class PlatformState(PlatformInput, PlatformOutput):
    """Input and output together, the graph's state."""


class PlatformRunError(OrchestrateError, RuntimeError):
    """The run could not start or crashed; the message is the run's own error.

    A ``RuntimeError`` too, because the platform shows only such built-in errors' messages.
    """

    code = "platform_run"


async def run_task(state: PlatformState) -> dict[str, Any]:
    """Run the task in a child process; forward its events; return its result."""
    request = state.model_dump(include=set(PlatformInput.model_fields))
    writer = get_stream_writer()
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-m", "orchestrator.platform", stdin=asyncio.subprocess.PIPE,
        stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE, limit=_LINE_LIMIT,
    )
    assert proc.stdin and proc.stdout and proc.stderr
    proc.stdin.write(json.dumps(request).encode("utf-8"))
    proc.stdin.close()
    stderr = asyncio.ensure_future(proc.stderr.read())
    result, error = None, None
    async for line in proc.stdout:
        message = json.loads(line)
        if "event" in message:
            writer(message["event"])
        result, error = message.get("result", result), message.get("error", error)
    await proc.wait()
    if result is None:
        detail = error or (await stderr).decode("utf-8", "replace").strip()[-2000:]
        raise PlatformRunError(f"the run did not finish: {detail or f'exit {proc.returncode}'}")
    stderr.cancel()
    return {"result": result}


def make_graph() -> Any:
    """The compiled platform graph; the platform brings its own checkpointer."""
    g = StateGraph(PlatformState, input_schema=PlatformInput, output_schema=PlatformOutput)
    g.add_node("run", run_task)
    g.add_edge(START, "run")
    g.add_edge("run", END)
    return g.compile(name="orchestrate")


# --- the child process ---------------------------------------------------------------------------


def _event_json(event: Any) -> dict[str, Any]:
    return {"kind": event.kind, "run_id": event.run_id, "t": event.t, "role": event.role,
            "session": event.session, "data": dict(event.data)}


async def _child(request: dict[str, Any], out: Any) -> int:
    from orchestrator.api import arun

    def send(message: dict[str, Any]) -> None:
        out.write(json.dumps(message, default=str) + "\n")
        out.flush()

    try:
        result = await arun(request["task"], repo=request["repo"], role_files=request["role_files"],
                            sets=request["sets"], team=request["team"],
                            listeners=[lambda e: send({"event": _event_json(e)})])
    except OrchestrateError as exc:
        send({"error": f"{type(exc).__name__}: {exc}"})
        return 1
    send({"result": result.model_dump(mode="json")})
    return 0


def _main() -> int:
    # The protocol owns the real stdout; anything else printed goes to stderr.
    out = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)
    request = PlatformInput.model_validate_json(sys.stdin.read()).model_dump()
    return asyncio.run(_child(request, out))


if __name__ == "__main__":
    sys.exit(_main())
