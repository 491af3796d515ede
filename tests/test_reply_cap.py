"""The one-line reply's cap leaves room to reprint the code shown (``oneline.reply_cap``).

A small model asked which line of a table is wrong often reprints the whole table with the line
changed, and the reader takes that as the change. Live, the 1.5B's greedy reply to
xp-invoice-tax's 15-line rate table took 450 tokens (2.2 characters a token): cut at the
packaged maps' 256 it stopped before Quebec's line and changed nothing. Here a scripted builder
does what it did, paying a token for every two characters and cut where the request's cap
says, on the live suite's repository with the simulator."""

from __future__ import annotations

import re

from routing_kit import asked_line, show
from test_leads import LINES
from test_oneshot import _explore_task_one_shot

from orchestrator.engine.oneline import reply_cap
from orchestrator.localize.localization import Span
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply

TABLE = {"answer": "COMBINED_RATES", "claims": [{
    "text": "COMBINED_RATES gives QC a rate of 0.05",
    "citations": [{"path": "invoicer/tax/jurisdictions.py", "start_line": 16, "end_line": 16,
                   "quote": ""}]}]}
SHOWN = re.compile(r"^ *(\d+)\| (.*)$", re.M)
CHARS_PER_TOKEN = 2  # what the live 1.5B's reprint of this table cost
OLD, NEW = 'Decimal("0.05")', 'Decimal("0.14975")'


def _reprints(tmp_path):
    """Asked for a line, it gives a reason, then every line shown, numbered, Quebec's rate
    corrected, cut at the request's cap (the last whole line kept, as a server's stream ends
    mid-line); whole files come back unchanged."""

    def respond(req: ChatRequestView) -> Reply:
        if not asked_line(req):
            path = "invoicer/tax/jurisdictions.py"
            return Reply(content=f"{path}\n```python\n"
                         + (tmp_path / "repo" / path).read_text(encoding="utf-8") + "```\n")
        shown = SHOWN.findall(req.messages[-1]["content"])
        fixed = [(n, t.replace(OLD, NEW) if '"QC"' in t else t) for n, t in shown]
        said = ("Quebec's combined rate is GST 5% plus QST 9.975%, so the QC entry is wrong. "
                "The corrected code:\n" + "\n".join(f"{n}| {t}" for n, t in fixed))
        room = req.body["max_completion_tokens"] * CHARS_PER_TOKEN
        if len(said) <= room:
            return Reply(content=said)
        return Reply(content=said[:room], finish_reason="length")

    return respond


async def _run(fresh_sim, tmp_path, cap: int):
    return await _explore_task_one_shot(
        fresh_sim, tmp_path, "xp-invoice-tax", "Where is the rate for Quebec (QC) defined?",
        TABLE, builder=ModelBehavior(respond=_reprints(tmp_path)),
        sets=[*LINES, "builder.unpinned_lines_only=true", f"builder.line_max_output={cap}"])


async def test_a_table_reprinted_whole_with_its_line_corrected_fits_under_the_cap(
        fresh_sim, tmp_path):
    task, result, _ = await _run(fresh_sim, tmp_path, 256)
    assert result.status == "succeeded", result.reason
    assert task.sim.new.strip() in show(tmp_path / "repo", f"{result.branch}:{task.sim.path}")
    asked = [r.body for r in fresh_sim.state.requests_for("sim-builder")
             if asked_line(ChatRequestView.from_body(r.body))]
    table = tuple((tmp_path / "repo" / task.sim.path).read_text(encoding="utf-8")
                  .splitlines()[6:21])
    span = Span(path=task.sim.path, start=7, end=21, focus=16, text=table, why="found")
    samples = [s for a in result.attempt_log for s in a.samples]
    at = [i for i, s in enumerate(samples) if s.place == f"{task.sim.path}:7-21"]
    # the table's request (after the task's two leads) had room for it, and its reprint passed
    assert at and samples[at[0]].passed and asked[at[0]]["max_completion_tokens"] == reply_cap(
        256, span) > 256
    # shorter code shown is asked under the map's 256, or little more
    assert all(256 <= b["max_completion_tokens"] < 300 for i, b in enumerate(asked)
               if i not in at)


def test_short_code_keeps_the_cap_and_long_code_gets_room_for_its_reprint():
    short = Span(path="a.py", start=1, end=2, focus=1, text=("x = 1", "y = 2"), why="t")
    assert reply_cap(256, short) == 256 and reply_cap(None, short) is None
    rows = tuple(f'    "K{i}": Decimal("0.{i:02d}"),     # a province' for i in range(15))
    long = Span(path="a.py", start=1, end=15, focus=3, text=rows, why="t")
    room = reply_cap(256, long)
    assert room is not None and room * 2 >= sum(len(r) + 6 for r in rows) + 100
