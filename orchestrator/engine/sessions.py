"""The session factory: one session of a role, on its model, with its tools, context policy
and the summarizer that writes its forks' handoffs.
"""

from __future__ import annotations

from orchestrator.engine.race import session_of
from orchestrator.engine.runtime import RunContext
from orchestrator.engine.toolbox import toolbox_for
from orchestrator.errors import MissingCredentials
from orchestrator.session.account import SessionOutcome
from orchestrator.session.context import policy_for
from orchestrator.session.handoff import Summarizer
from orchestrator.session.loop import Session, SubmitCheck
from orchestrator.state import Role
from orchestrator.tools.base import Toolbox, WriteWatch


async def run_session(ctx: RunContext, role: Role, task: str, n: int, *, candidate: int = 1,
                      temperature: float | None = None,
                      protected: frozenset[str] = frozenset(),
                      tools: bool = True, watch: WriteWatch | None = None,
                      check: SubmitCheck | None = None,
                      submit_first: bool = False, model_step: int = 0) -> SessionOutcome:
    """One session of ``role`` on ``task``; ``candidate`` > 1 is a racing build's other
    candidates (``race.py``); ``temperature`` overrides the model's; ``protected`` files (the
    failing tests) cannot be edited; without ``tools`` the session can only submit; ``watch``
    sees its writing tools run; ``check`` may refuse a submission or fix it up (an explorer's
    citations); ``submit_first`` offers only ``submit`` until a submission is refused;
    ``model_step`` starts the role's model chain further on (a build's ``next_model`` rung)."""
    agent = ctx.agents[role]
    spec = ctx.roles.roles[role]
    session = Session(
        # derived from the state, never a counter: a resumed run must send the same ids
        session_id=session_of(role, n, candidate),
        agent=agent,
        client=ctx.pool.for_role(role, temperature=temperature, start=model_step),
        toolbox=toolbox_for(ctx, role, protected, watch) if tools else Toolbox.of(()),
        telemetry=ctx.telemetry,
        max_turns=spec.max_turns,
        policy=policy_for(spec, ctx.roles.model_for(role)),
        summarizer=_summarizer(ctx) if agent.kind != "summarize" else None,
        run_dir=ctx.run_dir,
        check=check,
        submit_first=submit_first,
    )
    return await session.run(task)


def _summarizer(ctx: RunContext) -> Summarizer | None:
    """The summarizer role's own agent, client and window, for the handoffs of forks."""
    role = ctx.pipeline.summarizer
    agent, spec = ctx.agents[role], ctx.roles.roles[role]
    try:
        client = ctx.pool.for_role(role)
    except MissingCredentials:  # forks then get a plain handoff instead of failing the role
        return None
    return Summarizer(agent=agent, client=client, policy=policy_for(spec, ctx.roles.model_for(role)),
                      max_turns=spec.max_turns)
