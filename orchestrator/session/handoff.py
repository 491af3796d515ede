"""What a fork carries forward: the parent's transcript, saved for people, and the handoff the
child session starts from — the summariser's, or a plain one made of the transcript's tail when
there is no summariser or it fails."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from orchestrator.config.definitions import AgentDef
from orchestrator.config.prompts import text
from orchestrator.models.base import ModelClient
from orchestrator.session.context import ContextPolicy
from orchestrator.session.ledger import Ledger
from orchestrator.session.messages import submit_schema
from orchestrator.session.transcript import render_transcript
from orchestrator.state import Handoff, submit_model


@dataclass(frozen=True)
class Summarizer:
    """What a session needs to have a handoff written: the summarizer's agent, client, policy."""

    agent: AgentDef
    client: ModelClient
    policy: ContextPolicy
    max_turns: int = 3

    def budget(self, task: str, ledger: Ledger) -> int:
        """Local tokens of transcript that fit the summariser's window beside its prompt."""
        fixed = (self.agent.system + self.agent.render_task(task=task, transcript="")
                 + json.dumps(submit_schema(submit_model(self.agent))))
        room = self.policy.limit - ledger.tokens(fixed)
        return int(max(200, room) / max(ledger.ratio, 0.1) * 0.85)


def save_transcript(path: Path, record: Mapping[str, Any]) -> Path:
    """The forked session's conversation as JSON at ``path`` (``orchestrate show`` links it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(record, indent=1, default=str), encoding="utf-8")
    return path


def plain_handoff(task: str, messages: Sequence[Mapping[str, Any]], *, policy: ContextPolicy,
                  ledger: Ledger, count: Callable[[str], int]) -> Handoff:
    """A handoff without a model: the task, and as much of the transcript's end as fits."""
    budget = int(max(200, policy.limit // 4) / max(ledger.ratio, 0.1))
    tail = render_transcript(messages, budget=budget, count=count, skip=task)
    return Handoff(goal=" ".join(task.split())[:300],
                   facts=[text("session", "plain_handoff_facts", transcript=tail)],
                   remaining=[text("session", "plain_handoff_left")])
