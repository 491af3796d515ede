"""What a run may add is bounded, judged by effect: a builder that writes 100+ MiB fails the run
with the reason, the user's ``.git`` does not grow, the orchestrator's memory stays flat; a
job's repository or a revision that begins with '-' runs nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import run_env, scenario_with
from test_hostile import sh

from orchestrator.errors import ResultTooLarge, UsageError
from orchestrator.faces.demo import DEMO_TASK, demo_scenario, scenario_path
from orchestrator.sim import ModelBehavior
from orchestrator.workspace.worktree import Bounds, Workspace

MIB = 1024 * 1024
# a child that runs the CLI and prints the peak RSS (KiB) of its descendants: the orchestrator's
# own process and every git it ran
_PEAK = ("import resource, subprocess, sys; p = subprocess.run(sys.argv[1:]); "
         "print(p.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")


def _du(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_huge_result_fails_the_run_and_adds_nothing_to_git(fresh_sim, sample_repo: Path,
                                                              tmp_path: Path) -> None:
    fix = demo_scenario().models["sim-builder"].script
    attack = [sh("head -c 120M /dev/urandom > blob.bin && ls -l blob.bin")]
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=[*attack,
                                                                                 *fix])}))
    before = _du(sample_repo / ".git")
    argv = [sys.executable, "-m", "orchestrator", "run", DEMO_TASK, "--repo", str(sample_repo),
            "--roles", str(scenario_path("demo-roles.toml")),
            "--set", f'providers.sim.base_url="{fresh_sim.base_url}"', "--json"]
    proc = subprocess.run([sys.executable, "-c", _PEAK, *argv], capture_output=True, text=True,
                          env=run_env(), timeout=300)
    code, peak_kib = (int(x) for x in proc.stdout.strip().splitlines()[-1].split())
    grown = _du(sample_repo / ".git") - before
    assert grown < 2 * MIB, f".git grew by {grown / MIB:.1f} MiB"
    assert code == 1, proc.stderr
    report = json.loads(proc.stdout.strip().splitlines()[-2]) if proc.stdout.count("\n") > 1 \
        else {}
    assert "max_result_mb" in (report.get("reason", "") + proc.stderr), proc.stdout + proc.stderr
    # the file never went through git or our memory: below the file's own size over a baseline
    assert peak_kib * 1024 < 300 * MIB, f"peak RSS {peak_kib // 1024} MiB"
    assert "Traceback" not in proc.stderr


def test_too_many_files_are_refused_before_staging(sample_repo: Path) -> None:
    ws = Workspace.create(sample_repo, "bounded-1", bounds=Bounds(max_mb=1, max_files=5))
    objects = _du(sample_repo / ".git" / "objects")
    for i in range(8):
        (ws.worktree / f"f{i}.txt").write_text(f"unique content {i} {'x' * 100}\n")
    with pytest.raises(ResultTooLarge, match="max_result_files"):
        ws.snapshot()
    assert _du(sample_repo / ".git" / "objects") == objects
    for i in range(4, 8):
        (ws.worktree / f"f{i}.txt").unlink()
    tree = ws.snapshot()  # within the bound again: staged and written
    assert ws.commit("four files", tree) is not None
    # what was staged before counts: one more file of 1 MiB goes over the bytes
    (ws.worktree / "big.bin").write_bytes(b"\1" * (MIB + 10))
    with pytest.raises(ResultTooLarge, match="max_result_mb"):
        ws.snapshot()


def test_a_large_patch_is_written_without_holding_it(sample_repo: Path) -> None:
    ws = Workspace.create(sample_repo, "bounded-2")
    (ws.worktree / "data.bin").write_bytes(bytes(range(256)) * 4096)
    path = ws.write_patch(ws.snapshot())
    text = path.read_text()
    assert text.startswith("diff --git a/data.bin b/data.bin") and "GIT binary patch" in text
    assert ws.patch() == text  # the worktree's diff is the tree's


# --- operands that begin with '-' -----------------------------------------------------------


@pytest.mark.parametrize("repo", ["--upload-pack=touch {s}", "-u@h:touch {s}",
                                  "-oProxyCommand=touch@{s}:x"])
def test_a_job_repository_that_looks_like_an_option_runs_nothing(repo: str,
                                                                 tmp_path: Path) -> None:
    from orchestrator.faces import fleet

    sentinel = tmp_path / "sentinel"
    with pytest.raises((UsageError, OSError)):
        fleet.checkout(repo.format(s=sentinel), tmp_path / "cache")
    assert not sentinel.exists()
    assert not fleet.is_url(repo.format(s=sentinel))


def test_a_revision_that_looks_like_an_option_runs_nothing(sample_repo: Path,
                                                           tmp_path: Path) -> None:
    from orchestrator.evidence.sources import GitCommitSource
    from orchestrator.tools.gitread import GitHistory, git_log

    out = tmp_path / "written"
    with pytest.raises(Exception):  # noqa: B017, PT011 - refused one way or another
        git_log(sample_repo, history=GitHistory(sample_repo, rev=f"--output={out}"))
    assert not out.exists()
    with pytest.raises(UsageError):
        GitCommitSource(sample_repo, f"--output={out}").commit  # noqa: B018
    assert not out.exists()


# --- a bounded snapshot stages only what its listing names -----------------------------------


def _tree_files(repo: Path, tree: str) -> str:
    return subprocess.run(["git", "ls-tree", "-r", tree], cwd=repo, check=True,
                          capture_output=True, text=True).stdout


def test_a_bounded_snapshot_sees_every_kind_of_change(sample_repo: Path) -> None:
    """``add -A`` runs only when the bound's listing names a file: a file gone, a mode, a
    link in place of a file, a new file each are named, and an ignored one is not staged."""
    ws = Workspace.create(sample_repo, "kinds", bounds=Bounds())
    trees = [ws.snapshot()]
    changes = [lambda w: (w / "README.md").unlink(),
               lambda w: (w / "stats.py").chmod(0o755),
               lambda w: ((w / "tests" / "__init__.py").unlink(),
                          (w / "tests" / "__init__.py").symlink_to("test_stats.py")),
               lambda w: (w / "new" / "deep").mkdir(parents=True) or
               (w / "new" / "deep" / "f.txt").write_text("new\n")]
    for change in changes:
        change(ws.worktree)
        trees.append(ws.snapshot())
        assert trees[-1] != trees[-2]
    listing = _tree_files(sample_repo, trees[-1])
    assert "README.md" not in listing and "100755 blob" in listing and "120000 blob" in listing
    assert "new/deep/f.txt" in listing
    (ws.worktree / "__pycache__").mkdir()
    (ws.worktree / "__pycache__" / "x.pyc").write_bytes(b"ignored")
    assert ws.snapshot() == trees[-1]


def test_a_trees_diff_is_gits_however_often_and_in_what_order_it_is_asked(
        sample_repo: Path) -> None:
    """A tree's diff is made once and kept for the tree asked last: asking for another tree
    and back gives each its own diff, stat and patch.diff, as git gives them."""
    ws = Workspace.create(sample_repo, "diffs", bounds=Bounds())
    base_tree = ws.snapshot()
    (ws.worktree / "stats.py").write_text("x = 1\n")
    one = ws.snapshot()
    (ws.worktree / "data.bin").write_bytes(bytes(range(256)))
    two = ws.snapshot()
    for tree, files in ((one, 1), (two, 2), (one, 1), (two, 2)):
        patch = ws.patch(tree)
        assert patch == subprocess.run(
            ["git", "diff", "--no-color", "--binary", "--full-index", ws.base_commit, tree],
            cwd=sample_repo, check=True, capture_output=True, text=True).stdout
        assert patch.count("diff --git ") == files
        assert ws.write_patch(tree).read_text() == patch
        assert f"{files} file{'s' * (files > 1)} changed" in ws.diff_stat(tree)
    assert ws.patch() == ws.patch(two)  # the worktree's diff is its tree's
    assert not ws.files.changes(base_tree) and ws.files.changes(one)
