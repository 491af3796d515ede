"""A failed git call is an ``OrchestrateError`` like the rest: one line and an exit code for the
user, never a traceback."""

from __future__ import annotations

import pytest
from conftest import cli, run_env

from orchestrator.errors import GitError, OrchestrateError
from orchestrator.gitsafe import git


def test_a_failed_git_call_is_an_orchestrate_error(tmp_path):
    with pytest.raises(GitError, match="git rev-parse HEAD failed") as info:
        git("rev-parse", "HEAD", cwd=tmp_path)  # not a repository
    assert isinstance(info.value, OrchestrateError) and isinstance(info.value, RuntimeError)
    assert (info.value.exit_code, info.value.code) == (1, "git")


@pytest.mark.parametrize("args", [["roles"], ["runs"]])
def test_no_git_on_the_path_is_one_line_and_exit_1(tmp_path, args):
    proc = cli(*args, env=run_env(PATH=str(tmp_path)), cwd=tmp_path)  # finds no git there
    assert proc.returncode == 1, (proc.returncode, proc.stderr)
    assert "Traceback" not in proc.stderr
    assert [line for line in proc.stderr.splitlines() if line.strip()] == [
        "error: git was not found on PATH; install git"]
