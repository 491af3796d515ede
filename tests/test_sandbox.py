"""The sandbox itself: what a command can see, its limits, dying with us, and where it can't start."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from conftest import cli, run_env, scenario_with, snapshot
from test_hostile import live_processes

from orchestrator.config.layers import load_roles
from orchestrator.config.schema import SandboxSettings
from orchestrator.errors import ConfigError
from orchestrator.faces.demo import DEMO_TASK, scenario_path
from orchestrator.sandbox import Sandbox, build_sandbox
from orchestrator.sim import ModelBehavior, Reply, ToolCallSpec
from orchestrator.tools.base import Toolbox
from orchestrator.tools.edit import edit_tools
from orchestrator.tools.explorer import explorer_tools
from orchestrator.tools.shell import run_command


def _args(sim, repo: Path, *extra: str) -> list[str]:
    return ["--repo", str(repo), "--roles", str(scenario_path("demo-roles.toml")),
            "--set", f'providers.sim.base_url="{sim.base_url}"', *extra]


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    wt = tmp_path / "wt"
    wt.mkdir()
    return build_sandbox(SandboxSettings(), worktree=wt)


async def _run(box: Sandbox, command: str, **kw):
    return await run_command(command, cwd=box.worktree, sandbox=box, **kw)


async def test_only_the_worktree_and_scratch_are_writable(box: Sandbox, tmp_path: Path) -> None:
    (tmp_path / "outside.txt").write_text("outside\n")
    probe = ("touch ok && echo wt-ok; touch /tmp/t && echo tmp-ok; touch ~/h && echo home-ok; "
             "touch /usr/x /etc/x /x /dev/x 2>&1 | grep -c 'Read-only'; touch ../x; "
             f"cat {tmp_path}/outside.txt 2>&1")
    res = await _run(box, probe)
    assert "wt-ok" in res.output and "tmp-ok" in res.output and "home-ok" in res.output
    assert "\n4\n" in res.output, res.output  # /usr, /etc, / and /dev: read-only
    assert "No such file" in res.output and "outside\n" not in res.output
    assert (box.worktree / "ok").exists() and not (tmp_path / "x").exists()
    assert box.info.mechanism == "bwrap" and box.info.network == "off"
    assert str(box.worktree) in box.info.writable


async def test_scratch_does_not_persist_between_commands(box: Sandbox) -> None:
    await _run(box, "echo 1 > /tmp/keep; echo 1 > ~/keep")
    res = await _run(box, "cat /tmp/keep ~/keep 2>&1 | grep -c 'No such'")
    assert res.output.strip() == "2"


async def test_secrets_inside_exposed_toolchains_are_masked(tmp_path: Path) -> None:
    home = tmp_path / "home"
    tool = home / ".mytool"
    (tool / "bin").mkdir(parents=True)
    (tool / "bin" / "hello").write_text("#!/bin/sh\necho hello-from-tool\n")
    (tool / "bin" / "hello").chmod(0o755)
    (home / ".ssh").mkdir()
    (home / ".ssh" / "id_rsa").write_text("PRIVATE\n")
    (home / ".netrc").write_text("machine x password p\n")
    wt = tmp_path / "wt"
    wt.mkdir()
    env = {"HOME": str(home), "PATH": f"{tool / 'bin'}:/usr/bin:/bin"}
    box = build_sandbox(SandboxSettings(read_only=("~",)), worktree=wt, env=env)
    res = await run_command("hello; cat ~/.ssh/id_rsa ~/.netrc; ls -A ~/.ssh | wc -l",
                            cwd=wt, sandbox=box, env=env)
    assert "hello-from-tool" in res.output
    assert "PRIVATE" not in res.output and "password" not in res.output
    assert str(home / ".ssh") in box.info.hidden


async def test_limits_are_reported_to_the_model(tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    box = build_sandbox(SandboxSettings(file_size_mb=1, cpu_s=1, memory_mb=256, processes=32),
                        worktree=wt)
    big = await run_command("head -c 5000000 /dev/zero > f", cwd=wt, sandbox=box)
    assert big.limit_note and "size limit of 1 MiB" in big.limit_note
    assert (wt / "f").stat().st_size == 1024 * 1024
    cpu = await run_command("while :; do :; done", cwd=wt, sandbox=box, timeout=30)
    assert cpu.limit_note and "CPU time" in cpu.limit_note and not cpu.timed_out
    mem = await run_command(f"{sys.executable} -c 'bytearray(1 << 30)'", cwd=wt, sandbox=box)
    assert mem.limit_note and "memory limit" in mem.limit_note
    procs = await run_command("for i in $(seq 60); do sleep 2 & done; wait", cwd=wt,
                              sandbox=box, timeout=30)
    assert procs.limit_note and "32 processes" in procs.limit_note


async def test_a_killed_sandbox_leaves_no_process(box: Sandbox) -> None:
    marker = f"777.{os.getpid()}{int(time.time() * 1000) % 10000}"
    res = await _run(box, f"setsid sleep {marker} & (sleep {marker} &) ; nohup sleep {marker} "
                          "> /dev/null 2>&1 & echo started; wait", timeout=1)
    assert res.timed_out and "started" in res.output
    time.sleep(0.3)
    assert live_processes(marker) == []


def test_kill_9_of_the_orchestrator_kills_its_commands(fresh_sim, sample_repo: Path) -> None:
    marker = f"888.{os.getpid()}{int(time.time() * 1000) % 10000}"
    long = [Reply(tool_calls=[ToolCallSpec(name="run", arguments={
        "command": f"setsid sleep {marker} & (sleep {marker} &); sleep {marker}"})])]
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=long)}))
    before = snapshot(sample_repo)
    proc = subprocess.Popen([sys.executable, "-m", "orchestrator", "run", DEMO_TASK,
                             *_args(fresh_sim, sample_repo, "--json")], env=run_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and len(live_processes(marker)) < 3:
        time.sleep(0.05)
    assert len(live_processes(marker)) >= 3, proc.stderr.read1().decode() if proc.stderr else ""
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=10)
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and live_processes(marker):
        time.sleep(0.05)
    assert live_processes(marker) == []
    assert snapshot(sample_repo) == before


@pytest.mark.skipif(not shutil.which("unshare") or not shutil.which("setpriv"),
                    reason="needs util-linux unshare and setpriv")
def test_where_the_sandbox_cannot_start_the_run_refuses(fresh_sim, sample_repo: Path) -> None:
    # a user namespace with nested user namespaces disabled and no capabilities: as on a host
    # with unprivileged user namespaces turned off
    inner = ("echo 0 > /proc/sys/user/max_user_namespaces && exec setpriv --bounding-set=-all "
             "--inh-caps=-all --ambient-caps=-all -- \"$@\"")
    argv = ["unshare", "-Ur", "sh", "-c", inner, "sh", sys.executable, "-m", "orchestrator",
            "run", DEMO_TASK, *_args(fresh_sim, sample_repo)]
    proc = subprocess.run(argv, capture_output=True, text=True, env=run_env(), timeout=120)
    if "unshare failed" in proc.stderr:
        pytest.skip("this machine does not allow user namespaces for the test itself")
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and "cannot sandbox builder commands" in lines[0]
    assert "Fix:" in lines[0] and 'mode = "none"' in lines[0] and "Traceback" not in proc.stderr
    assert fresh_sim.state.requests == []  # refused before any model was paid
    assert not (sample_repo / "workspaces").exists() or not any(
        (sample_repo / "workspaces").iterdir())


def test_mode_none_runs_unsandboxed_with_a_loud_warning(fresh_sim, sample_repo: Path) -> None:
    unsafe = ("--set", 'sandbox.mode="none"')
    proc = cli("run", DEMO_TASK, *_args(fresh_sim, sample_repo, *unsafe, "--json"))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["sandbox"]["mechanism"] == "none"
    assert any("WITHOUT a sandbox" in w for w in result["warnings"])
    report = json.loads((Path(result["run_dir"]) / "report.json").read_text())
    assert report["sandbox"]["mechanism"] == "none"
    people = cli("run", DEMO_TASK, *_args(fresh_sim, sample_repo, *unsafe))
    assert people.returncode == 0 and "WITHOUT a sandbox" in people.stderr + people.stdout


def test_the_run_header_report_and_show_name_the_sandbox(fresh_sim, sample_repo: Path) -> None:
    proc = cli("run", DEMO_TASK, *_args(fresh_sim, sample_repo))
    assert proc.returncode == 0, proc.stderr
    assert "sandbox: bubblewrap" in proc.stderr and "network off" in proc.stderr
    run_id = next(p.name for p in (sample_repo / "workspaces").iterdir())
    report = json.loads((sample_repo / "workspaces" / run_id / "report.json").read_text())
    assert report["sandbox"]["mechanism"] == "bwrap" and report["sandbox"]["network"] == "off"
    assert report["sandbox"]["writable"][0].endswith(f"{run_id}/worktree")
    shown = cli("show", run_id, "--repo", str(sample_repo))
    assert shown.returncode == 0 and "sandbox" in shown.stdout and "bubblewrap" in shown.stdout


def test_a_repository_cannot_configure_its_own_sandbox(sample_repo: Path) -> None:
    (sample_repo / "roles.toml").write_text('[sandbox]\nmode = "none"\n')
    with pytest.raises(ConfigError, match=r"roles.toml sets sandbox\.mode = \"none\""):
        load_roles(repo=sample_repo)  # until the user trusts the file (see test_trust.py)
    roles = load_roles(sets=['sandbox.mode="none"'])  # the user's own flag may
    assert roles.sandbox.mode == "none"


def test_writes_never_go_through_a_hard_link(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("outside original\n")
    root = tmp_path / "wt"
    root.mkdir()
    os.link(outside, root / "linked.txt")
    os.link(outside, root / "linked2.txt")
    tools = Toolbox.of(edit_tools(root))
    import asyncio

    async def go() -> None:
        assert (await tools.call("write_file", {"path": "linked.txt", "content": "new\n"})).ok
        out = await tools.call("replace", {"path": "linked2.txt", "old": "original",
                                           "new": "changed"})
        assert out.ok, out.text
        patch = ("--- a/linked.txt\n+++ b/linked.txt\n@@ -1 +1 @@\n-new\n+patched\n")
        assert (await tools.call("apply_patch", {"patch": patch})).ok

    asyncio.run(go())
    assert outside.read_text() == "outside original\n"
    assert (root / "linked.txt").read_text() == "patched\n"
    assert (root / "linked2.txt").read_text() == "outside changed\n"


async def test_read_tools_refuse_fifos_without_blocking(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "pipe")
    (tmp_path / "a.txt").write_text("hello\n")
    tools = Toolbox.of([*explorer_tools(tmp_path), *edit_tools(tmp_path)])
    started = time.monotonic()
    for name, args in (("read", {"path": "pipe"}), ("search", {"pattern": "x", "path": "pipe"}),
                       ("replace", {"path": "pipe", "old": "a", "new": "b"}),
                       ("write_file", {"path": "pipe", "content": "x"})):
        out = await tools.call(name, args)
        assert not out.ok and ("FIFO" in out.text or "not a regular file" in out.text), out.text
    found = await tools.call("search", {"pattern": "hello"})
    assert "a.txt" in found.text
    assert time.monotonic() - started < 10


def test_explore_in_a_checkout_with_a_fifo_does_not_hang(fresh_sim, sample_repo: Path) -> None:
    os.mkfifo(sample_repo / "stats.fifo")
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": ModelBehavior(script=[
        Reply(tool_calls=[ToolCallSpec(name="read", arguments={"path": "stats.fifo"})]),
        Reply(tool_calls=[ToolCallSpec(name="search", arguments={"pattern": "median"})]),
        Reply(tool_calls=[ToolCallSpec(name="submit", arguments={
            "answer": "no", "claims": []})]),
    ])}))
    proc = cli("explore", "Where is median?", *_args(fresh_sim, sample_repo, "--json"),
               timeout=120)
    assert proc.returncode in (0, 1), proc.stderr
    sent = json.dumps([r.body for r in fresh_sim.state.requests_for("sim-explorer")])
    assert "FIFO" in sent


def test_our_git_calls_ignore_everything_the_builder_configured(tmp_path: Path) -> None:
    """Unsandboxed on purpose: our own calls must be safe even when the builder wrote .git."""
    from orchestrator.evidence.verify import GitCommitSource
    from orchestrator.tools.gitread import GitHistory, git_blame, git_log
    from orchestrator.workspace.worktree import Workspace

    repo = tmp_path / "repo"
    repo.mkdir()
    (repo / "f.txt").write_text("a\nb\n")
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "one"]):
        subprocess.run(["git", "-c", "user.name=t", "-c", "user.email=t@x", *args], cwd=repo,
                       check=True)
    ws = Workspace.create(repo, "r1")
    trace = tmp_path / "trace"
    evil = ws.worktree / "evil.sh"
    evil.write_text(f"#!/bin/sh\necho ran >> {trace}\ncat\n")
    evil.chmod(0o755)
    config = ws.worktree / ".git" / "config"
    config.write_text(config.read_text() + (
        f"[core]\n\tfsmonitor = {evil}\n\thooksPath = {ws.worktree}\n\tpager = {evil}\n"
        f"[diff]\n\texternal = {evil}\n[filter \"x\"]\n\tclean = {evil}\n\tsmudge = {evil}\n"
        f"[diff \"x\"]\n\ttextconv = {evil}\n[include]\n\tpath = {evil}\n"))
    for hook in ("pre-commit", "post-commit", "post-checkout", "reference-transaction"):
        (ws.worktree / hook).write_text(evil.read_text())
        (ws.worktree / hook).chmod(0o755)
    (ws.worktree / ".gitattributes").write_text("* filter=x diff=x\n")
    (ws.worktree / "f.txt").write_text("a\nchanged\n")

    sha = ws.commit("work")
    assert sha and "changed" in ws.patch() and ".gitattributes" in ws.changed_files()
    history = GitHistory(ws.worktree, ws.git_dir, ws.base_commit)
    assert "Not Committed Yet" in git_blame(ws.worktree, "f.txt", 1, 2, history=history)
    assert "one" in git_log(ws.worktree, "f.txt", history=history)
    patch = "--- a/f.txt\n+++ b/f.txt\n@@ -1,2 +1,2 @@\n a\n-changed\n+again\n"
    import asyncio

    assert asyncio.run(Toolbox.of(edit_tools(ws.worktree)).call(
        "apply_patch", {"patch": patch})).ok
    with GitCommitSource(repo, sha) as source:
        assert source.lines("f.txt") == ["a", "changed"]
    ws.remove()
    again = Workspace.open(repo, "r1")
    assert (again.worktree / "f.txt").read_text() == "a\nchanged\n"
    assert not trace.exists()
