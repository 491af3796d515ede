"""One agent session: the tool-calling loop that every role shares.

A session sends the system prompt and the task, runs the tools the model calls, and ends when
the model calls the typed ``submit`` tool with a payload that validates (``messages.py``). An
invalid payload goes back to the model as the tool result, so it can correct itself. Tool calls
that a model writes into its content instead of ``tool_calls`` are accepted too.

Before every call the session consults its ledger (``ledger.py``). Past the role's threshold
(``context.py``) it first masks old tool outputs; if that is not enough it forks: the summarizer
writes a handoff (``handoff.py``) and a child session (``<root>.1``, ``<root>.2``, ...) continues
from the system prompt, the task and the handoff. Oversized tool results are paged into
artefacts, and a server's ``context_length_exceeded`` is handled the same way and retried.

In its last ``FINAL_TURNS`` turns a session offers only ``submit`` and says so, so a model that
keeps searching still ends with a result (weak models otherwise run out of turns mid-search).

Control flow is exceptions, as in mini-swe-agent's loop: a valid submission raises
``_Submitted``, a full window ``_Fork``, running out of turns or nudges ``SessionFailed``.
What it reports (events, counts, peaks) goes through its ``Account`` (``account.py``).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel

from orchestrator.config.definitions import AgentDef
from orchestrator.config.prompts import text
from orchestrator.errors import BudgetExhausted, ContextOverflow, OrchestrateError, SessionFailed
from orchestrator.models.base import Completion, ModelClient, ToolCallData
from orchestrator.models.errors import ModelRefused
from orchestrator.models.fallback import demote
from orchestrator.models.toolmode import parse_tool_calls
from orchestrator.record.events import Forked, Purpose
from orchestrator.record.telemetry import Telemetry
from orchestrator.session.account import Account, SessionOutcome
from orchestrator.session.context import (
    ContextPolicy,
    describe_call,
    mask_old_outputs,
    parse_overflow,
)
from orchestrator.session.handoff import Summarizer, plain_handoff, save_transcript
from orchestrator.session.ledger import Ledger
from orchestrator.session.messages import (
    SUBMIT,
    assistant_message,
    nudge,
    submission,
    submit_schema,
)
from orchestrator.session.tokens import TokenCounter, loaded_counter, token_counter
from orchestrator.session.transcript import render_transcript
from orchestrator.state import Handoff, RoleLoss, submit_model
from orchestrator.tools.artifacts import READ_ARTIFACT, ArtifactStore, paged_message, preview
from orchestrator.tools.base import Toolbox

__all__ = ["Session", "SubmitCheck"]

# What may look at a valid submission before it ends the session: the payload to accept (maybe
# fixed up), or None and what to tell the model (it then submits again).
SubmitCheck = Callable[[BaseModel, Sequence[Mapping[str, Any]]], tuple[BaseModel | None, str]]

MAX_NUDGES = 3
MAX_INVALID_SUBMITS = 2  # then the role's next fallback model takes over the session
MAX_REFUSALS = 4  # context_length_exceeded answers in a row before the session forks anyway
FINAL_TURNS = 2  # the last turns of a session offer only submit


class _Fork(Exception):
    def __init__(self, reason: str, tokens: int) -> None:
        super().__init__(reason)
        self.reason, self.tokens = reason, tokens


class _Submitted(Exception):
    def __init__(self, payload: BaseModel) -> None:
        super().__init__("submitted")
        self.payload = payload


class Session:
    """Runs one agent until it submits, with a turn limit shared by the lineage of its forks."""

    def __init__(
        self,
        *,
        session_id: str,
        agent: AgentDef,
        client: ModelClient,
        toolbox: Toolbox,
        telemetry: Telemetry,
        max_turns: int,
        policy: ContextPolicy | None = None,
        summarizer: Summarizer | None = None,
        run_dir: Path | None = None,
        parent: str | None = None,
        purpose: Purpose = "task",
        check: SubmitCheck | None = None,
        submit_first: bool = False,
    ) -> None:
        model = client.route.model
        self.agent = agent
        self.client = client
        self.telemetry = telemetry
        self.account = Account(telemetry, agent.role, session_id, agent.kind)
        self.max_turns = max_turns
        self.policy = policy or ContextPolicy(model.context_window, max_output=model.max_output)
        self.summarizer = summarizer
        self.store = ArtifactStore(run_dir, session_id)
        self.toolbox = toolbox
        if toolbox.tools:
            self.toolbox = replace(toolbox,
                                   tools={**toolbox.tools, READ_ARTIFACT: self.store.tool()})
        self.parent, self.purpose = parent, purpose
        self.check = check
        self._open = not submit_first  # answer first: only submit, until an answer is refused
        self._search_next = False  # that refusal's next turn: the tools, not submit
        self.invalid_submits = 0
        self.messages: list[dict[str, Any]] = []
        self._session_turns = self._nudges = 0
        self._refused = False

    @property
    def id(self) -> str:
        return self.account.session

    @property
    def masked(self) -> int:
        return self.account.masked

    async def run(self, task: str) -> SessionOutcome:
        counter = loaded_counter()  # no thread once the process has it
        if counter is None:
            counter = await asyncio.to_thread(token_counter)
        self.counter: TokenCounter = counter
        self.ledger = Ledger(self.counter.count)
        self.tools = [*self.toolbox.schemas(), submit_schema(submit_model(self.agent))]
        self.ledger.set_tools(self.tools)
        self._begin(task)
        self.account.started(self.client.route, window=self.policy.window, parent=self.parent,
                             purpose=self.purpose)
        while True:
            try:
                while True:
                    await self._step()
            except _Fork as fork:
                await self._fork(task, fork)
            except _Submitted as done:
                return self.account.finished(done.payload, self.messages)

    def _begin(self, opening: str) -> None:
        self.messages = [
            {"role": "system", "content": self.agent.system},
            {"role": "user", "content": opening},
        ]
        self.ledger.reset(self.messages)
        self._session_turns, self._nudges, self._refused = 0, 0, False

    def _add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.ledger.append(message)

    async def _step(self) -> None:
        """One turn: the model's call, then the tools it called (or a nudge to call one)."""
        if self.account.turns >= self.max_turns:
            raise self._failed()
        self._closing()
        completion = await self._call()
        self.account.turns += 1
        self._session_turns += 1
        calls = list(completion.tool_calls) or parse_tool_calls(completion.content)
        self._add(assistant_message(completion, calls))
        if calls:
            await self._run_calls(calls)
            return
        self._nudges += 1
        if self._nudges > MAX_NUDGES:
            raise self._failed()
        self._add(nudge(self.toolbox.names()))

    def _failed(self) -> SessionFailed:
        return SessionFailed(
            f"{self.agent.role} session {self.id} ended without a valid submission after "
            f"{self.account.turns} turns (max_turns={self.max_turns})"
        )

    def _closing(self) -> None:
        """Entering the last turns: say so once; ``_offered`` then narrows the tools to submit."""
        left = self.max_turns - self.account.turns
        if left == FINAL_TURNS and self._final_window():
            self._add({"role": "user", "content": text("session", "final_note", left=left,
                                                        submit=SUBMIT)})

    def _final_window(self) -> bool:
        return (self.max_turns > 2 * FINAL_TURNS and len(self.tools) > 1
                and self.max_turns - self.account.turns <= FINAL_TURNS)

    def _offered(self) -> list[dict[str, Any]]:
        if self._final_window() or not self._open:
            return self.tools[-1:]
        if self._search_next and len(self.tools) > 1:
            self._search_next = False  # once: an answer refused is looked for before resubmitting
            return self.tools[:-1]
        return self.tools

    # --- one model call, fitted to the window -------------------------------------------------

    async def _call(self) -> Completion:
        for _ in range(MAX_REFUSALS):
            self._fit()
            estimate = self.ledger.estimate()
            try:
                completion = await self.account.call(
                    self.client, self.messages, window=self.policy.window, estimate=estimate,
                    tools=self._offered())
            except ContextOverflow as exc:
                self._refusal(str(exc), estimate)
                continue
            self.ledger.observe(completion.record.prompt_tokens)
            return completion
        raise _Fork("context_length_exceeded", self.ledger.estimate())

    def _refusal(self, message: str, estimate: int) -> None:
        """The server said the prompt is too long: learn its window and recalibrate."""
        prompt, limit = parse_overflow(message)
        self._refused = True
        if limit is not None:
            self.policy = self.policy.shrunk(limit)
        elif prompt is None:
            self.policy = self.policy.shrunk(max(estimate, 1))
        self.ledger.refused(prompt, limit)

    def _fit(self) -> None:
        """Mask old tool outputs, then fork, while the next call would cross the threshold."""
        estimate = self.ledger.estimate()
        if not self.policy.over(estimate):
            return
        for keep in range(self.policy.keep_verbatim, 0, -1):
            self._mask(keep)
            if not self.policy.over(self.ledger.estimate()):
                return
        raise _Fork("context_length_exceeded" if self._refused else "threshold", estimate)

    def _mask(self, keep: int) -> None:
        sizes = [round(self.ledger.ratio * c) for c in self.ledger.counts]
        changes = mask_old_outputs(self.messages, sizes=sizes, keep=keep, store=self._keep)
        for i, message in changes:
            self.messages[i] = message
            self.ledger.replace(i, message)
        self.account.masked += len(changes)

    def _keep(self, text: str) -> str:
        return self.store.put(text, page_chars=self._page_chars(text)).id

    def _page_chars(self, text: str, tokens: int | None = None) -> int:
        """Characters per artefact page so that a page stays within the page cap."""
        tokens = tokens if tokens is not None else self.ledger.tokens(text)
        return int(0.9 * self.policy.page_cap * len(text) / max(tokens, 1))

    # --- forks ----------------------------------------------------------------------------------

    async def _fork(self, task: str, fork: _Fork) -> None:
        account, window = self.account, self.policy.window
        account.forks += 1
        if account.forks > self.policy.max_forks:
            raise SessionFailed(
                f"{self.agent.role} session {account.root} ran out of context {account.forks} "
                f"times (max {self.policy.max_forks} forks, window {window:,} tokens); give the "
                "role a model with a larger window, or split its task"
            )
        if self._session_turns == 0:
            raise SessionFailed(
                f"{self.agent.role} session {self.id} cannot start: its system prompt and task "
                f"need ~{fork.tokens:,} tokens, more than the {self.policy.limit:,} its context "
                f"policy allows (window {window:,}, context_fork_at {self.policy.fork_at}, output "
                f"reserve {self.policy.reserve:,}); raise the window or shorten the task"
            )
        transcript = save_transcript(self.store.root / "sessions" / f"{self.id}.json", {
            "session": self.id, "root": account.root, "role": self.agent.role,
            "reason": fork.reason, "tool_calls": account.tool_calls, "messages": self.messages})
        handoff, writer = await self._handoff(task)
        peak = account.session_peak
        parent = account.forked()
        self._begin(text("session", "continue", task=task, handoff=handoff.render()))
        self.telemetry.emit(Forked(
            role=self.agent.role, session=parent, child=self.id, reason=fork.reason,
            tokens_before=fork.tokens, tokens_after=self.ledger.estimate(), window=window,
            peak_context=round(peak, 4), transcript=str(transcript), summarizer=writer,
            tool_calls=account.tool_calls,
        ))
        account.started(self.client.route, window=self.policy.window, parent=parent,
                        purpose="fork")

    async def _handoff(self, task: str) -> tuple[Handoff, str | None]:
        """The summarizer's handoff, or a mechanical one when there is none or it fails."""
        s = self.summarizer
        if s is None:
            return self._plain_handoff(task), None
        transcript = render_transcript(self.messages, budget=s.budget(task, self.ledger),
                                       count=self.counter.count, skip=task)
        writer = Session(
            session_id=f"{self.id}.handoff", agent=s.agent, client=s.client, toolbox=Toolbox(),
            telemetry=self.telemetry, max_turns=s.max_turns, policy=replace(s.policy, max_forks=0),
            parent=self.id, purpose="handoff",
        )
        try:
            outcome = await writer.run(s.agent.render_task(task=task, transcript=transcript))
        except (BudgetExhausted, ModelRefused):
            raise  # a spent budget stops the run; a refusal means the role map is wrong
        except OrchestrateError as exc:
            self.telemetry.lose(RoleLoss(
                role=s.agent.role, session=writer.id, code=exc.code,
                message=f"the summarizer could not write a handoff for {self.id} "
                        f"({' '.join(str(exc).split())}); a plain one was used",
            ))
            return self._plain_handoff(task), writer.id
        return outcome.payload, writer.id  # type: ignore[return-value]

    def _plain_handoff(self, task: str) -> Handoff:
        return plain_handoff(task, self.messages, policy=self.policy, ledger=self.ledger,
                             count=self.counter.count)

    # --- tools ----------------------------------------------------------------------------------

    async def _run_calls(self, calls: list[ToolCallData]) -> None:
        """Answer every call of the turn; a valid submission among them ends the session."""
        payload: BaseModel | None = None
        for call in calls:
            if call.name == SUBMIT:
                answer, payload = submission(submit_model(self.agent), call.arguments)
                if payload is None:
                    self._invalid_submission()
                elif self.check is not None:
                    payload, refused = self.check(payload, self.messages)
                    answer = refused or answer
                    if payload is None and not self._open:
                        self._open = self._search_next = True
            else:
                answer = await self._tool(call)
            self._add({"role": "tool", "tool_call_id": call.id, "content": answer})
        if payload is not None:
            raise _Submitted(payload)

    async def _tool(self, call: ToolCallData) -> str:
        self.account.tool_calls += 1
        started = time.monotonic()
        with self.telemetry.busy("tool"):
            outcome = await self.toolbox.call(call.name, call.arguments)
        self.account.tool_ran(call.name, outcome, started)
        return outcome.text if call.name == READ_ARTIFACT else self._page(call, outcome.text)

    def _invalid_submission(self) -> None:
        """Twice invalid: the next model of the role's chain gets the rest of the session."""
        self.invalid_submits += 1
        if self.invalid_submits >= MAX_INVALID_SUBMITS:
            self.invalid_submits = 0
            demote(self.client, f"{self.agent.role} submitted invalid results "
                                f"{MAX_INVALID_SUBMITS} times")

    def _page(self, call: ToolCallData, text: str) -> str:
        """A result above the page cap becomes an artefact; the model gets a preview."""
        cap = self.policy.page_cap
        if len(text.encode("utf-8")) * max(1.0, self.ledger.ratio) <= cap:
            return text
        tokens = self.ledger.tokens(text)
        if tokens <= cap:
            return text
        page_chars = self._page_chars(text, tokens)
        art = self.store.put(text, page_chars=page_chars)
        self.account.paged += 1
        shown = preview(text, max(200, page_chars // 4))
        return paged_message(describe_call(call.name, call.arguments), art, tokens, shown)
