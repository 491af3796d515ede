"""A one-shot first build attempt (``[roles.builder] one_shot = true``): one call, no tools, the
pinned files shown whole with the failure; the reply's whole files are written through the edit
tools and verify decides; a failed attempt goes on with the tool loop. Judged against the
simulator by what it was sent and by the run branch's files."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from conftest import run_env, scenario_with

from orchestrator import api
from orchestrator.engine.replyfiles import parse_files, relabelled, stalled
from orchestrator.errors import SessionFailed
from orchestrator.faces.demo import DEMO_TASK, demo_roles_sets, scenario_path
from orchestrator.sim import ChatRequestView, ModelBehavior, Reply, ToolCallSpec

TEST_FILE = "tests/test_stats.py"
BUGGY_LINE = "    return ordered[mid]\n"
RIGHT_LINE = "    return (ordered[mid - 1] + ordered[mid]) / 2\n"
BUGGY = "        return ordered[mid]\n" + BUGGY_LINE  # unique in stats.py
RIGHT = "        return ordered[mid]\n" + RIGHT_LINE


def _call(name: str, **arguments) -> Reply:
    return Reply(tool_calls=[ToolCallSpec(name=name, arguments=arguments)])


def _setup(sim, repo: Path, *sets: str) -> dict:
    return dict(repo=repo, role_files=[scenario_path("demo-roles.toml")], env=run_env(),
                sets=[*demo_roles_sets(sim.local_url), "builder.one_shot=true", *sets])


def _show(repo: Path, rev: str) -> str:
    return subprocess.run(["git", "show", rev], cwd=repo, capture_output=True, text=True,
                          check=True).stdout


def _fixed(repo: Path) -> str:
    text = (repo / "stats.py").read_text(encoding="utf-8")
    head, _, _ = text.rpartition(BUGGY_LINE)
    return head + RIGHT_LINE


async def _run_replying(sim, repo: Path, reply: str) -> tuple[api.RunResult, list]:
    """The demo task, the builder's one-shot answered with ``reply``; the result and events."""
    sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=[Reply(content=reply)])}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **_setup(sim, repo))
    return result, events


def _builder_requests(sim) -> list[ChatRequestView]:
    return [ChatRequestView.from_body(r.body) for r in sim.state.requests_for("sim-builder")]


async def test_one_call_with_the_pinned_file_whole_fixes_the_bug(fresh_sim, sample_repo):
    fixed = _fixed(sample_repo)
    reply = f"The even case must average the two middle values.\n\nstats.py\n```python\n{fixed}```\n"
    result, events = await _run_replying(fresh_sim, sample_repo, reply)
    assert result.status == "succeeded", result.reason
    assert result.attempts == 1
    assert _show(sample_repo, f"{result.branch}:stats.py") == fixed
    sent = _builder_requests(fresh_sim)
    assert len(sent) == 1 and not sent[0].body.get("tools")  # one call, no tool loop
    prompt = json.dumps(sent[0].messages)
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")
    assert json.dumps(original)[1:-1] in prompt  # the pinned file, whole
    assert "2.5" in prompt and "test_median_even" in prompt  # the failure and the test
    started = [e for e in events if e.kind == "role_started" and e.role == "builder"]
    assert [e.purpose for e in started] == ["one_shot"]
    finished = [e for e in events if e.kind == "call_finished" and e.role == "builder"]
    assert len(finished) == 1 and finished[0].output_tokens > 0


async def test_a_wrong_one_shot_goes_on_with_the_tool_loop_and_cannot_touch_the_tests(
        fresh_sim, sample_repo):
    cheat = _show(sample_repo, f"HEAD:{TEST_FILE}").replace("2.5)", "2)")
    reply = (f"{TEST_FILE}\n```python\n{cheat}```\n\nstats.py\n```python\n"
             f"{(sample_repo / 'stats.py').read_text(encoding='utf-8')}# tidied\n```\n")
    tool_loop = [_call("replace", path="stats.py", old=BUGGY, new=RIGHT),
                 _call("submit", summary="averaged the middle values", files_changed=["stats.py"])]

    def respond(req: ChatRequestView) -> Reply:
        if not req.body.get("tools"):
            return Reply(content=reply)
        return tool_loop[min(req.assistant_turns, len(tool_loop) - 1)]

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append],
                            **_setup(fresh_sim, sample_repo, "builder.temperatures=[0.0, 0.7]"))
    assert result.status == "succeeded", result.reason
    assert result.attempts == 2
    assert _show(sample_repo, f"{result.branch}:{TEST_FILE}") == _show(sample_repo,
                                                                       f"HEAD:{TEST_FILE}")
    assert RIGHT_LINE in _show(sample_repo, f"{result.branch}:stats.py")
    refused = [e for e in events if e.kind == "warning" and "one-shot write refused" in e.message]
    assert refused and TEST_FILE in refused[0].message
    sent = _builder_requests(fresh_sim)
    assert not sent[0].body.get("tools") and all(r.body.get("tools") for r in sent[1:])
    assert [r.body.get("temperature") for r in sent] == [0.0, 0.7, 0.7]
    assert "The acceptance commands failed" in json.dumps(sent[1].messages)  # the feedback


async def test_a_second_one_shot_sees_the_failure_and_what_the_first_did(fresh_sim, sample_repo):
    """``one_shot_attempts = 2``: the first answer gives stats.py back unchanged (what the live
    models did in every failed run); the second one-shot, sampled at its own temperature, is
    shown verify's failure and what the first did, and its fix passes. No tool loop runs."""
    original = (sample_repo / "stats.py").read_text(encoding="utf-8")
    replies = [f"stats.py\n```python\n{original}```\n",
               f"stats.py\n```python\n{_fixed(sample_repo)}```\n"]

    def respond(req: ChatRequestView) -> Reply:
        assert not req.body.get("tools"), "the tool loop ran"
        again = "The attempt before:" in json.dumps(req.messages)
        return Reply(content=replies[1 if again else 0])

    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(respond=respond)}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **_setup(
        fresh_sim, sample_repo, "builder.one_shot_attempts=2", "builder.temperatures=[0.0, 0.6]"))
    assert result.status == "succeeded", result.reason
    assert result.attempts == 2
    assert _show(sample_repo, f"{result.branch}:stats.py") == _fixed(sample_repo)
    sent = _builder_requests(fresh_sim)
    assert [r.body.get("temperature") for r in sent] == [0.0, 0.6]
    second = json.dumps(sent[1].messages)
    assert "The acceptance commands failed" in second and "test_median_even" in second
    assert "nothing was written" in second and "nothing changed" in second  # the first try
    # the first is asked as one model asked once is: the task, the files and the tests, no
    # failure output; the planner's unchecked reading of the failure is in neither prompt
    # (measured live: the 0.5B's reading sent the 1.5B to the wrong function)
    first = json.dumps(sent[0].messages)
    assert "What they print now" not in first and "AssertionError" not in first
    assert TEST_FILE in first and "stats.py" in first
    assert result.plan is not None and result.plan.goal.strip()
    goal = json.dumps(" ".join(result.plan.goal.split()))[1:-1]
    assert all(goal not in json.dumps(r.messages) for r in sent)
    started = [e for e in events if e.kind == "role_started" and e.role == "builder"]
    assert [(e.session, e.purpose) for e in started] == [("builder-1", "one_shot"),
                                                         ("builder-2", "one_shot")]


async def test_without_a_pinned_failure_the_tool_loop_runs_from_the_start(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=[
        _call("replace", path="stats.py", old=BUGGY, new=RIGHT),
        _call("submit", summary="fixed", files_changed=["stats.py"])])}))
    result = await api.arun(DEMO_TASK, **_setup(fresh_sim, sample_repo, "run.preflight=false"))
    assert result.status == "succeeded", result.reason
    assert all(r.body.get("tools") for r in _builder_requests(fresh_sim))


def test_parse_files_takes_only_known_paths_named_next_to_the_fence():
    reply = ("Here is the fix.\n\n**src/a.py**\n```python\nA = 1\n```\n"
             "and an example:\n```python\nprint(A)\n```\n"
             "`../etc/passwd`\n```\nroot\n```\n"
             "```js src/b.js\nconst b = 2;\n```\n")
    assert parse_files(reply, ["src/a.py", "src/b.js"]) == {"src/a.py": "A = 1\n",
                                                           "src/b.js": "const b = 2;\n"}
    # what Qwen2.5-Coder 1.5B writes: the path in a fence of its own, then the code's fence
    live = "```\nsrc/a.py\n```\n```python\nA = 2\n```\n\n```\nsrc/b.js\n```\n```js\nB\n```\n"
    assert parse_files(live, ["src/a.py", "src/b.js"]) == {"src/a.py": "A = 2\n",
                                                          "src/b.js": "B\n"}



def test_a_comment_naming_the_file_as_the_first_line_of_its_block_labels_it():
    shown = {"catalog/cli.py": "import argparse\n", "catalog/query/ordering.py": "A = ('added',)\n",
             "bin/run.sh": "#!/bin/sh\necho hi\n", "head.py": "# head.py\nX = 1\n"}
    # live (the 1.5B, xp-catalog-sort): no path outside the fences, each named by a comment
    reply = ("```python\n# catalog/cli.py\nimport argparse\n```\n\n"
             "```python\n# catalog/query/ordering.py\nA = ('year',)\n```\n"
             "```sh\n// bin/run.sh\n#!/bin/sh\necho fixed\n```\n")
    assert parse_files(reply, shown) == {"catalog/cli.py": "import argparse\n",
                                         "catalog/query/ordering.py": "A = ('year',)\n",
                                         "bin/run.sh": "#!/bin/sh\necho fixed\n"}
    # a file whose own first line is that comment keeps it; a file the prompt never showed is
    # no label; a block holding only the path (the same reply's degenerate first try) is no file
    assert parse_files("```python\n# head.py\nX = 2\n```", shown) == {
        "head.py": "# head.py\nX = 2\n"}
    assert parse_files("```python\n# other.py\nX = 2\n```", shown) == {}
    assert parse_files("```\ncatalog/query/ordering.py\n```\n```", shown) == {}
    # named before the fence and again inside it: the comment line is not written
    assert parse_files("bin/run.sh\n```sh\n# bin/run.sh\n#!/bin/sh\n```", shown) == {
        "bin/run.sh": "#!/bin/sh\n"}


async def test_a_reply_that_names_the_file_and_stops_is_asked_once_more_in_its_session(
        fresh_sim, sample_repo):
    fixed = _fixed(sample_repo)
    # live (the 1.5B, first one-shot of xp-invoice-tax at temperature 0): 17 tokens and the end
    script = [Reply(content="```\nstats.py\n```\n```"),
              Reply(content=f"stats.py\n```python\n{fixed}```\n")]
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=script)}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **_setup(fresh_sim, sample_repo))
    assert result.status == "succeeded", result.reason
    assert result.attempts == 1  # the same attempt, not a rung climbed
    assert _show(sample_repo, f"{result.branch}:stats.py") == fixed
    first, second = _builder_requests(fresh_sim)
    assert second.messages[:len(first.messages)] == first.messages  # the cached prefix, as sent
    assert second.messages[-2] == {"role": "assistant", "content": "```\nstats.py\n```\n```"}
    assert "stats.py on a line of its own" in second.messages[-1]["content"]
    sessions = {e.session for e in events if e.kind == "call_finished" and e.role == "builder"}
    assert len(sessions) == 1
    assert any("named stats.py and stopped" in getattr(e, "message", "") for e in events)


async def test_a_sample_asked_once_more_costs_both_calls(fresh_sim, sample_repo):
    fixed = _fixed(sample_repo)
    script = [Reply(content="```\nstats.py\n```\n```"),
              Reply(content=f"stats.py\n```python\n{fixed}```\n")]
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=script)}))
    events: list = []
    result = await api.arun(DEMO_TASK, listeners=[events.append], **_setup(
        fresh_sim, sample_repo, "builder.samples=2"))
    assert result.status == "succeeded", result.reason
    calls = [e for e in events if e.kind == "call_finished" and e.role == "builder"]
    assert len(calls) == 2 and len({e.session for e in calls}) == 1
    (sample,) = result.attempt_log[0].samples
    assert sample.passed and sample.output_tokens == sum(e.output_tokens for e in calls)
    assert sample.prompt_tokens == sum(e.prompt_tokens for e in calls)
    assert sample.call_s >= max(e.duration_s for e in calls)


def test_only_a_path_and_fences_is_a_stalled_reply():
    known = {"src/a.py": "A = 1\n", "tests/test_a.py": "T\n"}
    assert stalled("```\nsrc/a.py\n```\n```", known) == "src/a.py"
    assert stalled("```python\n./src/a.py\n```\n```python\n", known) == "src/a.py"
    assert stalled("src/a.py\n```python\nA = 2\n```", known) is None  # it wrote the file
    assert stalled("```\nsrc/b.py\n```\n```", known) is None  # never shown
    assert stalled("", known) is None and stalled("I cannot fix this.", known) is None

LISTING = ("from paging import page, page_count\n\n\ndef render(items, number, size=3):\n"
           "    shown = page(items, number, size)\n    return shown\n")
PAGING = ("def page_count(total, size):\n    return (total + size - 1) // size\n\n\n"
          "def page(items, number, size):\n    if number < 1:\n        raise ValueError('from 1')\n"
          "    start = (number - 1) * size\n    return items[start:start + size - 1]\n")


def test_a_block_under_the_wrong_name_goes_to_the_file_it_is():
    shown = {"listing.py": LISTING, "paging.py": PAGING}
    fixed = PAGING.replace("size - 1]", "size]")
    # live (the 1.5B, py-paging): the right fix of paging.py, named listing.py
    reply = f"```python\nlisting.py\n```\n```python\n{fixed}```"
    changed, notes = relabelled(parse_files(reply, shown), shown)
    assert changed == {"paging.py": fixed}
    assert notes == ["the block named listing.py holds paging.py's text: written to paging.py"]
    # named right, or a real rewrite of its own file: kept where it was put
    mine = LISTING.replace("return shown", "return list(shown)")
    assert relabelled({"listing.py": mine, "paging.py": fixed}, shown)[0] == {
        "listing.py": mine, "paging.py": fixed}
    # two files with swapped names both move; two blocks claiming one file keep their names
    assert relabelled({"listing.py": fixed, "paging.py": mine}, shown)[0] == {
        "paging.py": fixed, "listing.py": mine}
    third = {**shown, "other.py": "x = 1\n"}
    assert relabelled({"listing.py": fixed, "other.py": fixed}, third)[0] == {
        "listing.py": fixed, "other.py": fixed}
    # a block like no shown file (a new text) stays where it was named
    assert relabelled({"listing.py": "print('hi')\n"}, shown)[0] == {"listing.py": "print('hi')\n"}


async def test_a_fix_named_as_the_test_is_written_to_the_source_it_is(fresh_sim, sample_repo):
    fixed = _fixed(sample_repo)
    reply = f"{TEST_FILE}\n```python\n{fixed}```\n"  # the fixed stats.py, under the test's name
    result, events = await _run_replying(fresh_sim, sample_repo, reply)
    assert result.status == "succeeded", result.reason
    assert result.attempts == 1
    assert _show(sample_repo, f"{result.branch}:stats.py") == fixed
    assert _show(sample_repo, f"{result.branch}:{TEST_FILE}") == (
        sample_repo / TEST_FILE).read_text(encoding="utf-8")
    warned = [e.message for e in events if getattr(e, "kind", "") == "warning"]
    assert any(f"the block named {TEST_FILE} holds stats.py's text" in m for m in warned), warned


async def test_relabelling_cannot_carry_a_block_into_a_protected_test(fresh_sim, sample_repo):
    # a hostile reply: the test file with its assertion weakened, named as the source
    test_text = (sample_repo / TEST_FILE).read_text(encoding="utf-8")
    weakened = test_text.replace("assert ", "assert True or ", 1)
    before = _show(sample_repo, "HEAD:stats.py"), _show(sample_repo, f"HEAD:{TEST_FILE}")
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        script=[Reply(content=f"stats.py\n```\n{weakened}```\n")])}))
    events: list = []
    with pytest.raises(SessionFailed):  # the tool loop after it gets no script: the run fails
        await api.arun(DEMO_TASK, listeners=[events.append], **_setup(fresh_sim, sample_repo))
    warned = [e.message for e in events if getattr(e, "kind", "") == "warning"]
    assert any(f"holds {TEST_FILE}'s text" in m for m in warned), warned
    assert any("one-shot write refused" in m and TEST_FILE in m for m in warned), warned
    assert (sample_repo / TEST_FILE).read_text(encoding="utf-8") == test_text
    assert (_show(sample_repo, "HEAD:stats.py"), _show(sample_repo, f"HEAD:{TEST_FILE}")) == before


async def test_a_pinned_failure_lets_the_planner_plan_without_reading(fresh_sim, sample_repo):
    """``run.plan_tools_when_pinned = false``: the planner is offered only ``submit`` when the
    failure already names the code (the live 0.5B planner re-read it for five turns)."""
    fixed = _fixed(sample_repo)
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(
        script=[Reply(content=f"stats.py\n```python\n{fixed}```\n")])}))
    result = await api.arun(DEMO_TASK, **_setup(fresh_sim, sample_repo,
                                                "run.plan_tools_when_pinned=false"))
    assert result.status == "succeeded", result.reason
    offered = [[t["function"]["name"] for t in r.body.get("tools") or []]
               for r in fresh_sim.state.requests_for("sim-planner")]
    assert offered and all(names == ["submit"] for names in offered)


async def test_by_default_the_planner_keeps_its_tools(fresh_sim, sample_repo):
    fresh_sim.set_scenario(scenario_with())
    result = await api.arun(DEMO_TASK, **_setup(fresh_sim, sample_repo, "builder.one_shot=false"))
    assert result.status == "succeeded", result.reason
    first = fresh_sim.state.requests_for("sim-planner")[0].body
    assert {"read", "search", "submit"} <= {t["function"]["name"] for t in first["tools"]}


def _digest(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*"))
            if p.is_file() and not p.is_symlink()}


async def test_a_one_shot_neither_reads_nor_writes_outside_the_worktree(sample_repo, tmp_path):
    """What a later one-shot is shown and writes, when the code an earlier attempt wrote has
    replaced files with a symlink out, a hard link to an outside file and a FIFO while the tests
    ran, and the failure names paths out of the worktree: nothing outside is shown to the model
    or changed, the FIFO is never opened, the user's checkout and .git are as they were."""
    import asyncio
    import os
    import stat

    from conftest import snapshot

    from orchestrator.engine.oneshot import shown_files, write_files
    from orchestrator.localize.localization import Localization, Span
    from orchestrator.workspace.worktree import Workspace

    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.py").write_text("TOKEN = 'outside-secret'\n")
    (outside / "linked.py").write_text("LINKED = 'outside-linked'\n")
    ws = Workspace.create(sample_repo, "20990101-000000-oneshot")
    before = (_digest(outside), _digest(sample_repo / ".git"), snapshot(sample_repo))
    root = ws.worktree
    (root / "stats.py").unlink()
    (root / "stats.py").symlink_to(outside / "secret.py")
    os.link(outside / "linked.py", root / "linked.py")
    os.mkfifo(root / "fifo.py")
    paths = ["stats.py", "fifo.py", f"../../../{tmp_path.name}/outside/secret.py", ".git/config",
             str(outside / "secret.py"), "/etc/hostname", "linked.py"]
    loc = Localization(suspects=tuple(paths), tests=("tests/test_stats.py",),
                       spans=(Span(path="stats.py", start=1, end=2, focus=1, text=("x",),
                                   why="frame"),))
    shown = await asyncio.wait_for(asyncio.to_thread(shown_files, root, loc), 10)
    seen = "" if shown is None else "".join([*shown.sources.values(), *shown.tests.values()])
    assert "outside-secret" not in seen and "[core]" not in seen and shown is None
    written, refused = await asyncio.wait_for(
        write_files(root, dict.fromkeys(paths, "pwned = 1\n"), frozenset()), 10)
    assert written == ["linked.py"] and len(refused) == len(paths) - 1  # only the file inside
    assert before == (_digest(outside), _digest(sample_repo / ".git"), snapshot(sample_repo))
    assert (outside / "secret.py").read_text() == "TOKEN = 'outside-secret'\n"
    assert (outside / "linked.py").read_text() == "LINKED = 'outside-linked'\n"
    assert stat.S_ISFIFO(os.lstat(root / "fifo.py").st_mode)
    assert not (root / ".git" / "config").read_text().count("pwned")


async def _explore_task_one_shot(fresh_sim, tmp_path, task_id: str, question: str,
                                 claim: dict, block: str | None = None,
                                 builder: ModelBehavior | None = None, sets: tuple = ()):
    """A live explore task run with the simulator: the planner asks ``question``, the explorer
    submits ``claim``, the builder's one-shot gives the task's reference fix (the whole file,
    or ``block``'s lines of it with the fix: one definition alone). Returns the task, the
    result and the builder's first prompt as JSON text."""
    from orchestrator.benchmark.suite import copy_repo, load_suite

    task = load_suite("live").select([task_id]).tasks[0]
    repo = copy_repo(task.repo, tmp_path / "repo")
    path, old, new = task.sim.path, task.sim.old, task.sim.new
    fixed = (repo / path).read_text(encoding="utf-8").replace(old, new)
    if block is not None:  # "start-end": those lines of the fixed file, alone
        start, end = (int(n) for n in block.split("-"))
        fixed = "".join(fixed.splitlines(keepends=True)[start - 1:end])
    plan = {"goal": "fix it", "steps": ["fix it"], "acceptance": list(task.acceptance),
            "questions": [question]}
    fresh_sim.set_scenario(scenario_with(**{
        "sim-planner": ModelBehavior(script=[_call("submit", **plan)]),
        "sim-explorer": ModelBehavior(script=[_call("submit", **claim)]),
        "sim-builder": builder or ModelBehavior(
            script=[Reply(content=f"{path}\n```python\n{fixed}```\n")]),
    }))
    result = await api.arun(task.instruction, repo=repo,
                            role_files=[scenario_path("demo-roles.toml")], env=run_env(),
                            sets=[*demo_roles_sets(fresh_sim.local_url), "builder.one_shot=true",
                                  "run.explore_when_pinned=true",
                                  f'verify.commands=["{task.acceptance[0]}"]', *sets])
    asked = _builder_requests(fresh_sim) if result.status == "succeeded" else []
    assert builder is not None or len(asked) <= 1  # the reference fix: one call
    first = asked[0] if asked else None
    return task, result, json.dumps(first.messages) if first is not None else ""


async def test_the_file_the_explorers_found_is_shown_whole_when_the_failure_does_not_pin_it(
        fresh_sim, tmp_path):
    """An explore task: the test imports only the entry point, the wrong rate sits two modules
    away. The explorer cites the candidate table; the one-shot prompt shows that file whole
    (the failure alone pins only the entry modules), and the builder's fix there passes."""
    found = {"answer": "COMBINED_RATES", "claims": [{
        "text": "COMBINED_RATES gives QC a rate of 0.05",
        "citations": [{"path": "W1", "start_line": 1, "end_line": 99, "quote": ""}]}]}
    task, result, shown = await _explore_task_one_shot(
        fresh_sim, tmp_path, "xp-invoice-tax",
        "Where is the sales tax rate for Quebec (QC) defined?", found)
    assert result.status == "succeeded", result.reason
    assert result.explorers[0].verified == 1
    assert f"{task.sim.path}\\n```" in shown and "COMBINED_RATES = {" in shown


async def test_the_files_of_the_windows_an_explorer_was_shown_follow_the_ones_it_cites(
        fresh_sim, tmp_path):
    """The live 0.5B on xp-catalog-sort: asked where the code handles `newest`, it cited the
    first window (cli.py's ORDERS) though the second held the bug (ordering.py's SORT_FIELDS).
    The one-shot prompt shows the cited file, then the files of the windows it was shown, so
    the table is in front of the builder, whose fix there passes."""
    found = {"answer": "ORDERS", "claims": [{
        "text": "`ORDERS` lists newest", "citations": [
            {"path": "catalog/cli.py", "start_line": 9, "end_line": 9, "quote": ""}]}]}
    task, result, shown = await _explore_task_one_shot(
        fresh_sim, tmp_path, "xp-catalog-sort", "Where does the code handle `newest`?", found)
    assert result.status == "succeeded", result.reason
    assert result.explorers[0].verified == 1
    assert any(w.startswith(task.sim.path) for w in result.explorers[0].candidates)
    assert "catalog/cli.py\\n```" in shown and f"{task.sim.path}\\n```" in shown
    assert "SORT_FIELDS = {" in shown


# xp-invoice-tax: the explorer's verified claim cites the QC line of the rate table
QC_QUESTION = "Where is the sales tax rate for Quebec (QC) defined?"
QC_FOUND = {"answer": "QC", "claims": [{
    "text": "COMBINED_RATES gives QC a rate of 0.05",
    "citations": [{"path": "invoicer/tax/jurisdictions.py", "start_line": 18, "end_line": 18,
                   "quote": ""}]}]}


async def test_the_definition_the_explorers_cite_is_the_focus_and_may_be_given_alone(
        fresh_sim, tmp_path):
    """An explore task the failure does not pin: the explorer's verified claim cites the QC
    line of the rate table two modules away. The first one-shot prompt names that table as
    what the explorers found (its numbered lines), and a reply with only the table's new text
    (a small model's short answer) is put into the file and passes."""
    task, result, shown = await _explore_task_one_shot(
        fresh_sim, tmp_path, "xp-invoice-tax", QC_QUESTION, QC_FOUND, block="7-21")
    assert result.status == "succeeded", result.reason
    assert "The explorers found this code, invoicer/tax/jurisdictions.py lines 7-21" in shown
    assert '   7| COMBINED_RATES = {' in shown
    diff = subprocess.run(["git", "-C", str(tmp_path / "repo"), "diff", result.base_commit,
                           result.commit, "--unified=0"], capture_output=True, text=True,
                          check=True).stdout
    changed = [line for line in diff.splitlines() if line[:1] in "+-" and line[:3] not in
               ("+++", "---")]
    assert len(changed) == 2 and changed[0].startswith(f"-{task.sim.old}")  # one line
    assert changed[1].startswith(f"+{task.sim.new}")  # the block spliced in, the rest kept
