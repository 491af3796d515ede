"""One agent session: the tool-calling loop that every role shares, and its context care.

A session sends the system prompt and the task, runs the tools the model calls, and ends when
the model calls the typed ``submit`` tool with a payload that validates. An invalid payload goes
back to the model as the tool result, so it can correct itself. Tool calls that a model writes
into its content instead of ``tool_calls`` are accepted too.

Before every call the session consults its context ledger (``context.py``). Past the role's
threshold it first masks old tool outputs; if that is not enough it forks: the summarizer writes
a handoff and a child session (``<root>.1``, ``<root>.2``, ...) continues from the system prompt,
the task and the handoff. Oversized tool results are paged into artefacts, and a server's
``context_length_exceeded`` is handled the same way and retried.

In its last ``FINAL_TURNS`` turns a session offers only ``submit`` and says so, so a model that
keeps searching still ends with a result (weak models otherwise run out of turns mid-search).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from orchestrator.config.definitions import AgentDef
from orchestrator.config.prompts import text
from orchestrator.errors import BudgetExhausted, ContextOverflow, OrchestrateError, SessionFailed
from orchestrator.models.base import REASONING
from orchestrator.models.client import Completion, ModelClient, ToolCallData
from orchestrator.models.errors import ModelRefused
from orchestrator.models.fallback import demote
from orchestrator.models.toolmode import parse_tool_calls
from orchestrator.record.telemetry import Telemetry
from orchestrator.session.context import (
    ContextPolicy,
    describe_call,
    mask_old_outputs,
    parse_overflow,
)
from orchestrator.session.ledger import Ledger
from orchestrator.session.tokens import TokenCounter, loaded_counter, token_counter
from orchestrator.session.transcript import render_transcript
from orchestrator.state import Handoff, RoleLoss
from orchestrator.tools.artifacts import READ_ARTIFACT, ArtifactStore, paged_message, preview
from orchestrator.tools.base import Toolbox, parameters

SUBMIT = "submit"
MAX_NUDGES = 3
MAX_INVALID_SUBMITS = 2  # then the role's next fallback model takes over the session
MAX_REFUSALS = 4  # context_length_exceeded answers in a row before the session forks anyway
FINAL_TURNS = 2  # the last turns of a session offer only submit
PROGRESS_EVERY_S = 0.1  # a streaming tick at most this often per call: a live display's pace


@dataclass
class SessionOutcome:
    """What a finished session produced; counts cover the whole lineage of forks."""

    session: str
    payload: BaseModel
    tool_calls: int
    turns: int
    messages: list[dict[str, Any]] = field(default_factory=list)
    forks: int = 0
    peak_context: float = 0.0
    lineage: tuple[str, ...] = ()


@dataclass(frozen=True)
class Summarizer:
    """What a session needs to have a handoff written: the summarizer's agent, client, policy."""

    agent: AgentDef
    client: ModelClient
    policy: ContextPolicy
    max_turns: int = 3


class _Fork(Exception):
    def __init__(self, reason: str, tokens: int) -> None:
        super().__init__(reason)
        self.reason, self.tokens = reason, tokens


def submit_schema(model: type[BaseModel]) -> dict[str, Any]:
    params = parameters(model)
    return {
        "type": "function",
        "function": {
            "name": SUBMIT,
            "description": text("session", "submit_description", schema=model.__name__),
            "parameters": params,
        },
    }


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
        purpose: str = "task",
    ) -> None:
        model = client.route.model
        self.id = self.root = session_id
        self.agent = agent
        self.client = client
        self.telemetry = telemetry
        self.max_turns = max_turns
        self.policy = policy or ContextPolicy(model.context_window, max_output=model.max_output)
        self.summarizer = summarizer
        self.store = ArtifactStore(run_dir, session_id)
        self.toolbox = toolbox
        if toolbox.tools:
            self.toolbox = replace(toolbox,
                                   tools={**toolbox.tools, READ_ARTIFACT: self.store.tool()})
        self.parent, self.purpose = parent, purpose
        self.tool_calls = self.turns = self.forks = self.masked = self.paged = 0
        self.invalid_submits = 0
        self.peak = self._session_peak = 0.0
        self.lineage = [session_id]
        self.messages: list[dict[str, Any]] = []
        self._session_turns = 0
        self._refused = False

    async def run(self, task: str) -> SessionOutcome:
        counter = loaded_counter()  # no thread once the process has it
        if counter is None:
            counter = await asyncio.to_thread(token_counter)
        self.counter: TokenCounter = counter
        self.ledger = Ledger(self.counter.count)
        self.tools = [*self.toolbox.schemas(), submit_schema(self.agent.submit)]
        self.ledger.set_tools(self.tools)
        self._begin(task)
        self._announce(self.parent, self.purpose)
        while True:
            try:
                return await self._loop()
            except _Fork as fork:
                await self._fork(task, fork)

    def _begin(self, opening: str) -> None:
        self.messages = [
            {"role": "system", "content": self.agent.system},
            {"role": "user", "content": opening},
        ]
        self.ledger.reset(self.messages)
        self._session_turns, self._session_peak, self._refused = 0, 0.0, False

    def _announce(self, parent: str | None, purpose: str) -> None:
        route = self.client.route
        self.telemetry.emit(
            "role_started", role=self.agent.role, session=self.id, model=route.model.id,
            provider=route.provider_name, tier=route.tier, effort=route.effort, parent=parent,
            purpose=purpose, window=self.policy.window,
        )

    def _add(self, message: dict[str, Any]) -> None:
        self.messages.append(message)
        self.ledger.append(message)

    async def _loop(self) -> SessionOutcome:
        nudges = 0
        while self.turns < self.max_turns:
            self._closing()
            completion = await self._call()
            self.turns += 1
            self._session_turns += 1
            calls = list(completion.tool_calls) or parse_tool_calls(completion.content)
            self._add(_assistant_message(completion, calls))
            if not calls:
                nudges += 1
                if nudges > MAX_NUDGES:
                    break
                self._add({"role": "user", "content": _nudge(self.toolbox)})
                continue
            payload = await self._run_calls(calls)
            if payload is not None:
                return self._finish(payload)
        raise SessionFailed(
            f"{self.agent.role} session {self.id} ended without a valid submission after "
            f"{self.turns} turns (max_turns={self.max_turns})"
        )

    def _closing(self) -> None:
        """Entering the last turns: say so once; ``_offered`` then narrows the tools to submit."""
        left = self.max_turns - self.turns
        if left == FINAL_TURNS and self._final_window():
            self._add({"role": "user", "content": text("session", "final_note", left=left,
                                                        submit=SUBMIT)})

    def _final_window(self) -> bool:
        return (self.max_turns > 2 * FINAL_TURNS and len(self.tools) > 1
                and self.max_turns - self.turns <= FINAL_TURNS)

    def _offered(self) -> list[dict[str, Any]]:
        return self.tools[-1:] if self._final_window() else self.tools

    def _finish(self, payload: BaseModel) -> SessionOutcome:
        self.telemetry.emit(
            "role_finished", role=self.agent.role, session=self.id, turns=self.turns,
            tool_calls=self.tool_calls, peak_context=round(self._session_peak, 4),
            lineage_peak_context=round(self.peak, 4), forks=self.forks, masked=self.masked,
            paged=self.paged, root=self.root,
        )
        return SessionOutcome(self.id, payload, self.tool_calls, self.turns, self.messages,
                              self.forks, self.peak, tuple(self.lineage))

    # --- one model call, fitted to the window -------------------------------------------------

    async def _call(self) -> Completion:
        for _ in range(MAX_REFUSALS):
            self._fit()
            estimate = self.ledger.estimate()
            started = time.monotonic()
            due = [started]  # when the next streaming tick may go out

            def progress(pieces: int, started: float = started, due: list[float] = due) -> None:
                # a tick per streamed piece would cost one event per token on the one event
                # loop all sessions share (20 explorers at 1,200 tokens/s: 24,000 a second);
                # the first piece still shows at once, then ten ticks a second at most
                now = time.monotonic()
                if now < due[0] or not self.telemetry.listeners:
                    return
                due[0] = now + PROGRESS_EVERY_S
                self.telemetry.emit("progress", role=self.agent.role, session=self.id,
                                    pieces=pieces, elapsed=now - started)

            try:
                with self.telemetry.busy("call"):
                    completion = await self.client.complete(
                        self.messages, session=self.id, tools=self._offered(), progress=progress
                    )
            except ContextOverflow as exc:
                self._refusal(str(exc), estimate)
                continue
            self._account(completion, estimate, started)
            return completion
        raise _Fork("context_length_exceeded", self.ledger.estimate())

    def _account(self, completion: Completion, estimate: int, started: float) -> None:
        record = completion.record
        self.telemetry.call(record, (started, time.monotonic()), messages=self.messages,
                            reply=completion.content)
        self.ledger.observe(record.prompt_tokens)
        used = (record.prompt_tokens or estimate) + record.output_tokens
        fraction = used / self.policy.window
        self.peak = max(self.peak, fraction)
        self._session_peak = max(self._session_peak, fraction)
        self.telemetry.emit(
            "progress", role=self.agent.role, session=self.id, context=fraction,
            estimate=estimate, prompt_tokens=record.prompt_tokens,
        )

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
        self.masked += len(changes)

    def _keep(self, text: str) -> str:
        return self.store.put(text, page_chars=self._page_chars(text)).id

    def _page_chars(self, text: str, tokens: int | None = None) -> int:
        """Characters per artefact page so that a page stays within the page cap."""
        tokens = tokens if tokens is not None else self.ledger.tokens(text)
        return int(0.9 * self.policy.page_cap * len(text) / max(tokens, 1))

    # --- forks ----------------------------------------------------------------------------------

    async def _fork(self, task: str, fork: _Fork) -> None:
        self.forks += 1
        role, window = self.agent.role, self.policy.window
        if self.forks > self.policy.max_forks:
            raise SessionFailed(
                f"{role} session {self.root} ran out of context {self.forks} times "
                f"(max {self.policy.max_forks} forks, window {window:,} tokens); give the role a "
                "model with a larger window, or split its task"
            )
        if self._session_turns == 0:
            raise SessionFailed(
                f"{role} session {self.id} cannot start: its system prompt and task need "
                f"~{fork.tokens:,} tokens, more than the {self.policy.limit:,} its context policy "
                f"allows (window {window:,}, context_fork_at {self.policy.fork_at}, output "
                f"reserve {self.policy.reserve:,}); raise the window or shorten the task"
            )
        transcript = self._save_transcript(fork.reason)
        handoff, writer = await self._handoff(task)
        parent, self.id = self.id, f"{self.root}.{self.forks}"
        self.lineage.append(self.id)
        self._begin(text("session", "continue", task=task, handoff=handoff.render()))
        self.telemetry.emit(
            "fork", role=role, session=parent, child=self.id, reason=fork.reason,
            tokens_before=fork.tokens, tokens_after=self.ledger.estimate(), window=window,
            peak_context=round(self._session_peak, 4),
            transcript=str(transcript), summarizer=writer, tool_calls=self.tool_calls,
        )
        self._announce(parent, "fork")

    def _save_transcript(self, reason: str) -> Path:
        path = self.store.root / "sessions" / f"{self.id}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        record = {"session": self.id, "root": self.root, "role": self.agent.role,
                  "reason": reason, "tool_calls": self.tool_calls, "messages": self.messages}
        path.write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
        return path

    async def _handoff(self, task: str) -> tuple[Handoff, str | None]:
        """The summarizer's handoff, or a mechanical one when there is none or it fails."""
        s = self.summarizer
        if s is None:
            return self._plain_handoff(task), None
        fixed = (s.agent.system + s.agent.render_task(task=task, transcript="")
                 + json.dumps(submit_schema(s.agent.submit)))
        room = s.policy.limit - self.ledger.tokens(fixed)
        budget = int(max(200, room) / max(self.ledger.ratio, 0.1) * 0.85)
        text = render_transcript(self.messages, budget=budget, count=self.counter.count, skip=task)
        writer = Session(
            session_id=f"{self.id}.handoff", agent=s.agent, client=s.client, toolbox=Toolbox(),
            telemetry=self.telemetry, max_turns=s.max_turns, policy=replace(s.policy, max_forks=0),
            parent=self.id, purpose="handoff",
        )
        try:
            outcome = await writer.run(s.agent.render_task(task=task, transcript=text))
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
        budget = int(max(200, self.policy.limit // 4) / max(self.ledger.ratio, 0.1))
        tail = render_transcript(self.messages, budget=budget, count=self.counter.count, skip=task)
        return Handoff(goal=" ".join(task.split())[:300],
                       facts=[text("session", "plain_handoff_facts", transcript=tail)],
                       remaining=[text("session", "plain_handoff_left")])

    # --- tools ----------------------------------------------------------------------------------

    async def _run_calls(self, calls: list[ToolCallData]) -> BaseModel | None:
        payload: BaseModel | None = None
        for call in calls:
            if call.name == SUBMIT:
                text, payload = self._submit(call.arguments)
                if payload is None:
                    self._invalid_submission()
            else:
                self.tool_calls += 1
                started = time.monotonic()
                with self.telemetry.busy("tool"):
                    outcome = await self.toolbox.call(call.name, call.arguments)
                text = outcome.text
                if outcome.policy_violation:
                    self.telemetry.count("policy_violations")
                    self.telemetry.emit(
                        "warning", role=self.agent.role, session=self.id,
                        category="policy_violation", message=f"policy violation: {call.name}: {text}",
                    )
                self.telemetry.emit(
                    "tool_called", role=self.agent.role, session=self.id, tool=call.name,
                    ok=outcome.ok, chars=len(text), duration_s=round(time.monotonic() - started, 4),
                )
                if call.name != READ_ARTIFACT:
                    text = self._page(call, text)
            self._add({"role": "tool", "tool_call_id": call.id, "content": text})
        return payload

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
        self.paged += 1
        shown = preview(text, max(200, page_chars // 4))
        return paged_message(describe_call(call.name, call.arguments), art, tokens, shown)

    def _submit(self, arguments: str) -> tuple[str, BaseModel | None]:
        try:
            raw = json.loads(arguments or "{}")
            return text("session", "submitted"), self.agent.submit.model_validate(raw)
        except json.JSONDecodeError as exc:
            return text("session", "submit_not_json", error=exc), None
        except ValidationError as exc:
            problems = "; ".join(
                f"{'.'.join(str(p) for p in e['loc']) or '(root)'}: {e['msg']}"
                for e in exc.errors()[:8]
            )
            return text("session", "submit_invalid", problems=problems), None


def _assistant_message(completion: Completion, calls: list[ToolCallData]) -> dict[str, Any]:
    message: dict[str, Any] = {"role": "assistant", "content": completion.content}
    if completion.reasoning:  # carried back to the model that wrote it (Responses API)
        message[REASONING] = dict(completion.reasoning)
    if calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in calls
        ]
    return message


def _nudge(toolbox: Toolbox) -> str:
    names = ", ".join([*toolbox.names(), SUBMIT])
    return text("session", "nudge", names=names, submit=SUBMIT)
