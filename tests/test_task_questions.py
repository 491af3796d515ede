"""``run.unpinned_questions = "task"``: when the failing tests pin no code, the explorers are
asked about the names the task quotes and no planner is asked (the live 0.5B planner's questions
on the explore-needed tasks fell back to those in 22 of 25 runs, at 25 s a run). Runs against
the simulator, on the live suite's vendored repositories."""

from __future__ import annotations

import json
from pathlib import Path

from routing_kit import asked_line, show
from test_leads import CALLER_FOUND, CENTS, LINES, UNPINNED, _payslip_builder
from test_oneshot import _explore_task_one_shot

from orchestrator.config.layers import load_roles
from orchestrator.faces.demo import scenario_path
from orchestrator.record.events import PlanFromTask, read_events
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply

ASKED = "Where is `run_payroll` defined, and what does it call?"  # the task's one name
# ...and the word of the failing tests' names that the task uses and at most two source files
# hold (test_half_cent_is_rounded_up; test_deductions_and_net's `net` is not in the task)
HALF = "Where does the code handle `half`?"


def _from_task(result) -> list[PlanFromTask]:
    events = read_events(Path(result.run_dir) / "events.jsonl")
    return [e for e in events if isinstance(e, PlanFromTask)]


def _explorer_asked(fresh_sim) -> list[str]:
    return [ChatRequestView.from_body(r.body).messages[-1]["content"]
            for r in fresh_sim.state.requests_for("sim-explorer")]


async def test_an_unpinned_failure_asks_the_explorers_the_tasks_names_and_no_planner(
        fresh_sim, tmp_path):
    """xp-payslip-rounding: the planner is scripted to ask something else, but is never called;
    the explorers are asked about ``run_payroll``, the name the task spells, and ``half``, the
    failing test's clue; the run passes from their places and the task's leads, and the result
    and its report say why no plan."""
    task = next(t for t in UNPINNED if t.name == "xp-payslip-rounding")
    task, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, task.name, "What prints the payslip?", CALLER_FOUND,
        builder=ModelBehavior(respond=_payslip_builder(tmp_path, task.sim.new.strip())),
        sets=[*LINES, "builder.unpinned_lines_only=true", "run.unpinned_questions=task"])
    assert result.status == "succeeded", result.reason
    assert fresh_sim.state.requests_for("sim-planner") == []
    asked = _explorer_asked(fresh_sim)
    assert not any("What prints the payslip?" in a for a in asked)
    assert {q for q in (ASKED, HALF) if any(a.startswith(f"Question: {q}") for a in asked)} \
        == {ASKED, HALF}
    assert [e.question for e in result.explorers] == [ASKED, HALF]
    assert result.plan_from_task and not result.plan_skipped and "planner" not in result.per_role
    assert result.plan is not None and result.plan.questions == [ASKED, HALF]
    assert result.plan.acceptance == list(task.acceptance)
    said = _from_task(result)
    assert len(said) == 1 and said[0].questions == [ASKED, HALF]
    assert "`half` of the failing test's name \"half cent is rounded up\"" in said[0].reason
    report = json.loads((Path(result.run_dir) / "report.json").read_text(encoding="utf-8"))
    assert report["plan_from_task"] is True
    assert task.sim.new.strip() in show(tmp_path / "repo", f"{result.branch}:{task.sim.path}")


async def test_by_default_the_planner_asks_the_explorers_questions(fresh_sim, tmp_path):
    task = next(t for t in UNPINNED if t.name == "xp-payslip-rounding")
    task, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, task.name, "What prints the payslip?", CALLER_FOUND,
        builder=ModelBehavior(respond=_payslip_builder(tmp_path, task.sim.new.strip())),
        sets=[*LINES, "builder.unpinned_lines_only=true"])
    assert result.status == "succeeded", result.reason
    assert len(fresh_sim.state.requests_for("sim-planner")) == 1
    assert [e.question for e in result.explorers] == ["What prints the payslip?"]
    assert not result.plan_from_task
    assert not _from_task(result)


async def test_a_pinned_failure_is_planned_with_unpinned_questions_from_the_task(
        fresh_sim, tmp_path):
    """py-paging's failing test runs through the code to change: the setting does not apply,
    the planner plans (its question is the one the explorer is asked)."""
    _, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, "py-paging", "Where is `page` defined?", CALLER_FOUND,
        sets=["run.unpinned_questions=task"])
    assert result.status == "succeeded", result.reason
    assert len(fresh_sim.state.requests_for("sim-planner")) == 1
    assert not result.plan_from_task
    assert [e.question for e in result.explorers] == ["Where is `page` defined?"]


async def test_the_one_line_reply_is_capped_and_a_cut_last_line_is_not_written(
        fresh_sim, tmp_path):
    """``builder.line_max_output``: the one-line requests ask for that many tokens, or room to
    reprint their code (the whole-file ones keep the model's cap). A reply cut at the cap mid-line — here in the middle
    of ``to_cents``'s line — writes nothing (its unfinished line would be a syntax error); the
    next round's draw gives the whole line and passes."""
    task = next(t for t in UNPINNED if t.name == "xp-payslip-rounding")
    fix = task.sim.new.strip()
    drawn = {"cents": 0}
    elsewhere = _payslip_builder(tmp_path, fix)  # whole files and other lines: given back

    def respond(req: ChatRequestView) -> Reply:
        shown = req.messages[-1]["content"]
        m = CENTS.search(shown) if asked_line(req) else None
        if m is None:
            return elsewhere(req)
        drawn["cents"] += 1
        if drawn["cents"] == 1:
            return Reply(content=f"Half a cent must round up.\n{m.group(1)}: {fix[:30]}",
                         finish_reason="length")
        return Reply(content=f"Half a cent must round up.\n{m.group(1)}: {fix}")

    task, result, _ = await _explore_task_one_shot(
        fresh_sim, tmp_path, task.name, ASKED, CALLER_FOUND,
        builder=ModelBehavior(respond=respond),
        sets=[*LINES, "builder.unpinned_lines_only=true", "builder.line_max_output=64"])
    assert result.status == "succeeded", result.reason
    bodies = [r.body for r in fresh_sim.state.requests_for("sim-builder")]
    lines = [b for b in bodies if asked_line(ChatRequestView.from_body(b))]
    # each one-line request asks for 64 tokens or room to reprint its code (reply_cap: these
    # spans are a few lines, 250-400 tokens), never near the model's whole cap
    model = load_roles(base_text=scenario_path("demo-roles.toml").read_text(encoding="utf-8"))
    whole = model.models[model.roles["builder"].model].max_output
    assert lines and all(64 <= b["max_completion_tokens"] < whole / 4 for b in lines)
    cut = [s for a in result.attempt_log for s in a.samples
           if s.place == "payroll/money/amounts.py:17-19"]
    assert [(s.changed, s.passed) for s in cut] == [(False, False), (True, True)]
