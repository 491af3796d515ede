"""The pure parts of context care: ledger, calibration, policy, masking, transcript, tree."""

from __future__ import annotations

import json
import os

import pytest

from orchestrator.config.schema import ModelSpec, RoleSpec
from orchestrator.errors import ToolError
from orchestrator.record.events import BY_KIND
from orchestrator.session.context import (
    MASK_PREFIX,
    ContextPolicy,
    mask_old_outputs,
    parse_overflow,
    policy_for,
)
from orchestrator.session.ledger import Ledger
from orchestrator.session.tokens import PER_MESSAGE, token_counter
from orchestrator.session.transcript import render_transcript
from orchestrator.session.tree import session_tree
from orchestrator.tools.artifacts import ArtifactStore, preview


def chars(text: str) -> int:
    return len(text)


def msg(role: str, content: str, **extra) -> dict:
    return {"role": role, "content": content, **extra}


def test_estimate_is_anchor_plus_scaled_delta():
    ledger = Ledger(chars)
    ledger.append(msg("system", "s" * 100))
    assert ledger.estimate() == 100 + PER_MESSAGE  # no anchor yet: ratio 1 over local counts
    ledger.observe(206)  # the server counted twice what we did
    assert ledger.estimate() == 206 and ledger.ratio == pytest.approx(2.0)
    ledger.append(msg("user", "u" * 47))
    assert ledger.estimate() == 206 + 2 * (47 + PER_MESSAGE)


def test_calibration_follows_a_server_tokenizer_that_differs():
    ledger = Ledger(chars)
    ledger.append(msg("system", "x" * 400))
    ledger.observe(round(0.75 * ledger.local) + 11)
    for n in range(30):
        ledger.append(msg("tool", "y" * (50 + 13 * n)))
        server = round(0.6 * ledger.counts[-1])
        truth = ledger._anchor[0] + server  # type: ignore[index]
        if n > 3:
            assert abs(ledger.estimate() - truth) / truth < 0.02
        ledger.observe(truth)
    assert ledger.ratio == pytest.approx(0.6, rel=0.02)


def test_replace_and_reset_keep_running_totals_and_the_first_anchor():
    ledger = Ledger(chars)
    ledger.set_tools([{"type": "function", "function": {"name": "t"}}])
    tools = ledger.local
    ledger.reset([msg("system", "a" * 10), msg("user", "b" * 10)])
    base = ledger.local
    ledger.observe(base)  # the server agrees with us: ratio 1
    ledger.append(msg("tool", "c" * 300))
    before = ledger.estimate()
    ledger.replace(2, msg("tool", "c" * 30))
    assert ledger.estimate() == before - 270
    ledger.reset([msg("system", "a" * 10), msg("user", "b" * 10 + "d" * 40)])
    assert ledger.local == tools + 20 + 40 + 2 * PER_MESSAGE
    assert ledger.estimate() == base + 40  # first anchor plus the new opening's difference


def test_refusal_raises_the_estimate_to_what_the_server_counted():
    ledger = Ledger(chars)
    ledger.append(msg("user", "z" * 1000))
    ledger.refused(1500, 1200)
    assert ledger.estimate() == 1500
    ledger.refused(None, 2000)
    assert ledger.estimate() == 2001


def test_parse_overflow_messages():
    openai = ("This model's maximum context length is 8192 tokens. However, you requested 9000 "
              "tokens (8000 in the messages, 1000 in the completion).")
    sim = ("This model's maximum context length is 4096 tokens. However, your messages resulted "
           "in 5000 tokens. Please reduce the length of the messages.")
    assert parse_overflow(openai) == (8000, 8192)
    assert parse_overflow(sim) == (5000, 4096)
    llama = "request exceeds the available context size (4096 tokens)"
    assert parse_overflow(llama) == (None, 4096)
    assert parse_overflow("too long") == (None, None)


def test_policy_from_role_and_model():
    model = ModelSpec(provider="p", id="m", context_window=400_000, max_output=128_000)
    spec = RoleSpec(model="m", context_window_cap=128_000, context_fork_at=0.75)
    policy = policy_for(spec, model)
    assert policy.window == 128_000 and policy.reserve == 32_000 and policy.page_cap == 8_000
    assert policy.limit == 96_000 - 32_000
    small = policy_for(RoleSpec(model="m", output_reserve=256), model.model_copy(
        update={"context_window": 4096}))
    assert (small.window, small.reserve, small.page_cap, small.limit) == (4096, 256, 1024, 3020)
    assert small.shrunk(2000).window == 2000 and small.shrunk(9000).window == 4096
    assert ContextPolicy(4096).over(3000) and not ContextPolicy(4096).over(2000)


def _transcript(n: int) -> list[dict]:
    out = [msg("system", "sys"), msg("user", "task")]
    for i in range(n):
        out.append({"role": "assistant", "content": None, "tool_calls": [{
            "id": f"c{i}", "type": "function",
            "function": {"name": "read", "arguments": f'{{"path": "f{i}.py"}}'}}]})
        out.append({"role": "tool", "tool_call_id": f"c{i}", "content": f"out{i} " * 40})
    return out


def test_masking_keeps_the_last_outputs_and_stores_the_rest():
    messages = _transcript(5)
    messages.append({"role": "tool", "tool_call_id": "x", "content": "tiny"})
    stored: dict[str, str] = {}

    def store(text: str) -> str:
        stored[f"h{len(stored)}"] = text
        return f"h{len(stored) - 1}"

    sizes = [len(m.get("content") or "") for m in messages]
    changes = mask_old_outputs(messages, sizes=sizes, keep=3, store=store)
    assert [i for i, _ in changes] == [3, 5, 7]  # outputs 0..2 of 5 (tool messages at 3,5,..)
    first = changes[0][1]["content"]
    assert first.startswith(MASK_PREFIX) and "read(path=f0.py)" in first
    assert 'read_artifact("h0")' in first and f"{sizes[3]:,} tokens" in first
    assert stored["h0"] == messages[3]["content"]
    for i, m in changes:
        messages[i] = m
    assert mask_old_outputs(messages, sizes=sizes, keep=3, store=store) == []  # nothing left


def test_transcript_fits_the_budget_and_keeps_opening_and_latest():
    messages = _transcript(30)
    messages[1] = msg("user", "task\n\nYou are continuing ... Handoff: read f.py up to line 9")
    text = render_transcript(messages, budget=600, count=chars)
    assert len(text) <= 700 and "Handoff: read f.py" in text and "out29" in text
    assert "earlier messages omitted" in text and "sys" not in text.split("\n")[0]
    short = render_transcript(messages[:4], budget=10_000, count=chars)
    assert short.count("ASSISTANT called") == 1


def test_session_tree_from_event_records():
    def ev(kind: str, **fields):
        return BY_KIND[kind](run_id="r", **fields)

    started = {"provider": "p", "window": 4096, "model": "m"}
    finished = {"turns": 1, "tool_calls": 0, "lineage_peak_context": 0.1, "forks": 0,
                "masked": 0, "paged": 0}
    events = [
        ev("role_started", session="explorer-1", role="explorer", **started),
        ev("role_started", session="explorer-1.handoff", role="summarizer",
           parent="explorer-1", purpose="handoff", **started),
        ev("role_finished", session="explorer-1.handoff", peak_context=0.1,
           root="explorer-1.handoff", **finished),
        ev("fork", session="explorer-1", role="explorer", child="explorer-1.1",
           reason="threshold", tokens_before=3300, tokens_after=1500, peak_context=0.74,
           window=4096, transcript="t.json", tool_calls=3),
        ev("role_started", session="explorer-1.1", role="explorer", parent="explorer-1",
           purpose="fork", **started),
        ev("call_finished", session="explorer-1.1", role="explorer", requested_model="m"),
        ev("role_finished", session="explorer-1.1", peak_context=0.6, root="explorer-1",
           **finished),
    ]
    tree = {n.session: n for n in session_tree(events)}
    root = tree["explorer-1"]
    assert root.status == "forked" and root.peak_context == 0.74 and root.window == 4096
    assert root.children == ("explorer-1.handoff", "explorer-1.1")
    assert root.forks[0].child == "explorer-1.1" and root.forks[0].tokens_after == 1500
    assert tree["explorer-1.1"].purpose == "fork" and tree["explorer-1.1"].status == "finished"
    assert tree["explorer-1.handoff"].role == "summarizer"


def test_o200k_loads_offline_without_leaving_env_changes():
    had = "TIKTOKEN_CACHE_DIR" in os.environ
    counter = token_counter()
    assert counter.name == "o200k_base"
    assert counter.count("hello world") == 2
    assert ("TIKTOKEN_CACHE_DIR" in os.environ) == had


def test_artifact_pages_concatenate_to_the_original(tmp_path):
    store = ArtifactStore(tmp_path, "s-1", page_chars=500)
    text = "".join(f"line {i} " + "é" * (i % 30) + "\n" for i in range(300)) + "no newline"
    art = store.put(text)
    for unit in ("lines", "chars"):
        pages, offset = [], 0
        while True:
            page = store.page(art.id, offset, unit=unit)
            header, body = page.split("\n", 1)
            assert len(body) <= 500
            pages.append(body)
            if header.endswith("end]"):
                break
            offset = int(header.split("offset=")[1].split(",")[0].rstrip(")]"))
        assert "".join(pages) == text
    with pytest.raises(ToolError, match="no artifact"):
        store.page("s-1.a9")
    shown = preview(text, 400)
    assert shown.startswith("line 0") and shown.endswith("no newline") and "omitted" in shown


def test_tool_declarations_are_counted_once_and_counted_again_when_anything_changes():
    from orchestrator.session.tokens import tools_tokens as _tools_tokens

    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return len(text)

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}

    def declared(description: str, params: dict, **extra: object) -> list[dict]:
        return [{"type": "function", **extra, "function": {
            "name": "read", "description": description, "parameters": params}}]

    first = declared("Read a file.", schema)
    assert _tools_tokens(count, first) == len(json.dumps(first)) and len(seen) == 1
    assert _tools_tokens(count, declared("Read a file.", schema)) == len(json.dumps(first))
    assert len(seen) == 1  # a fresh declaration of the same tools: not serialised again
    for changed in (declared("Read one file.", schema), declared("Read a file.", dict(schema)),
                    declared("Read a file.", schema, strict=True)):
        assert _tools_tokens(count, changed) == len(json.dumps(changed))
    assert len(seen) == 4
