"""Scratch and disk inside the sandbox, judged by effect: every scratch mount together holds no
more than ``tmp_mb``; a command that makes the worktree grow past ``worktree_mb`` fails with the
reason, and what it wrote is not committed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from test_hostile import live_processes

from orchestrator.config.schema import SandboxSettings
from orchestrator.errors import ResultTooLarge
from orchestrator.sandbox import build_sandbox
from orchestrator.tools.shell import run_command
from orchestrator.workspace.worktree import Workspace

MIB = 1024 * 1024


async def test_all_scratch_together_holds_tmp_mb(tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    home = tmp_path / "home"
    home.mkdir()
    box = build_sandbox(SandboxSettings(tmp_mb=32), worktree=wt,
                        env={**os.environ, "HOME": str(home)})
    fill = "; ".join(f"head -c 40M /dev/zero > {d}/fill 2>/dev/null"
                     for d in ("/tmp", "/run", "/var", "/dev/shm", "$HOME"))
    res = await run_command(f"{fill}; du -cb /tmp/fill /run/fill /var/fill /dev/shm/fill "
                            "$HOME/fill | tail -1", cwd=wt, sandbox=box, timeout=60)
    written = int(res.output.split()[-2])
    assert 20 * MIB < written <= 32 * MIB, res.output
    assert not (home / "fill").exists()


async def test_scratch_counts_against_memory(tmp_path: Path) -> None:
    wt = tmp_path / "wt"
    wt.mkdir()
    box = build_sandbox(SandboxSettings(memory_mb=512, tmp_mb=200), worktree=wt)
    # 400 MiB fits in memory_mb alone, not beside the 200 MiB of scratch
    grab = "python3 -c \"b = bytearray(400 * 1024 * 1024); print('held')\""
    res = await run_command(grab, cwd=wt, sandbox=box, timeout=60)
    assert "held" not in res.output and res.exit_code != 0, res.output


async def test_a_command_past_the_worktree_quota_fails(sample_repo: Path) -> None:
    ws = Workspace.create(sample_repo, "quota-1")
    box = build_sandbox(SandboxSettings(worktree_mb=20), worktree=ws.worktree)
    small = await run_command("head -c 5M /dev/urandom > small.bin", cwd=ws.worktree,
                              sandbox=box, timeout=60)
    assert small.exit_code == 0, small.output
    big = await run_command("head -c 30M /dev/urandom > big.bin", cwd=ws.worktree,
                            sandbox=box, timeout=60)
    assert big.exit_code != 0 and "worktree_mb" in big.output
    objects = sum(p.stat().st_size for p in (sample_repo / ".git" / "objects").rglob("*")
                  if p.is_file())
    with pytest.raises(ResultTooLarge):  # nor is it committed: over run.max_result_mb too
        ws.bounded(ws.bounds or _default_bounds()).snapshot()
    after = sum(p.stat().st_size for p in (sample_repo / ".git" / "objects").rglob("*")
                if p.is_file())
    assert after - objects < MIB


def _default_bounds():
    from orchestrator.workspace.tree import Bounds

    return Bounds(max_mb=20)


async def test_a_command_is_stopped_when_it_passes_the_quota_not_after(sample_repo: Path) -> None:
    # many files each under file_size_mb, in one long command: measured only when it ends, it
    # would write 1.5 GiB; stopped while it runs, little more than worktree_mb lands on disk
    ws = Workspace.create(sample_repo, "quota-2")
    box = build_sandbox(SandboxSettings(worktree_mb=20), worktree=ws.worktree)
    marker = f"quota-writer-{os.getpid()}"
    fill = (f"(exec -a {marker} sleep 600) & for i in $(seq 300); do head -c 5M /dev/zero "
            "> f$i.bin; sleep 0.05; done; echo all")
    res = await run_command(fill, cwd=ws.worktree, sandbox=box, timeout=120)
    written = sum(p.stat().st_size for p in ws.worktree.glob("f*.bin"))
    assert res.exit_code != 0 and "worktree_mb" in res.output and "all" not in res.output
    assert written < 200 * MIB, written // MIB
    assert live_processes(marker) == []  # the command and what it left running are gone


async def test_a_file_hidden_below_a_too_deep_directory_still_counts(sample_repo: Path) -> None:
    # below ~4096 characters of path a walk by path name sees nothing: 15 MiB there, twice,
    # went past a 20 MiB quota unnoticed
    ws = Workspace.create(sample_repo, "quota-3")
    box = build_sandbox(SandboxSettings(worktree_mb=20), worktree=ws.worktree)
    deep = ("d=$(printf 'a%.0s' $(seq 200)); mkdir {top} && cd {top} && for i in $(seq 25); do "
            "mkdir $d && cd $d; done && head -c 15M /dev/zero > big && echo wrote")
    for top in ("one", "two"):
        res = await run_command(deep.format(top=top), cwd=ws.worktree, sandbox=box, timeout=60)
        assert "wrote" in res.output, res.output
        assert res.exit_code != 0 and "worktree_mb" in res.output, res.output
