"""Edit tools stay in the jail; the run tool is policed, capped, killable and offline."""

from __future__ import annotations

import asyncio
import fnmatch
import hashlib
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

from orchestrator.config.schema import SandboxSettings
from orchestrator.errors import PolicyViolation, ToolError
from orchestrator.sandbox import Sandbox, build_sandbox
from orchestrator.tools.base import Toolbox
from orchestrator.tools.edit import edit_tools
from orchestrator.tools.shell import (
    _SECRET_PATTERNS,
    CommandPolicy,
    run_command,
    scrubbed_env,
    shell_tool,
)

_ENV = {
    **os.environ,
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.invalid",
    "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@example.invalid",
}


def git(cwd: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=cwd, env=_ENV, check=True, capture_output=True, text=True
    ).stdout


def tree_hash(root: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(root.rglob("*")):
        h.update(str(p.relative_to(root)).encode())
        if p.is_file() and not p.is_symlink():
            h.update(p.read_bytes())
    return h.hexdigest()


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "deep" / "repo"
    root.mkdir(parents=True)
    git(root, "init", "-q")
    (root / "app.py").write_text("def greet(name):\n    return 'hi ' + name\n\nX = 1\nX = 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "init")
    return root


@pytest.fixture
def sentinel(tmp_path: Path) -> Path:
    outside = tmp_path / "outside"
    (outside / "etc").mkdir(parents=True)
    (outside / "etc" / "passwd").write_text("root:x:0:0\n")
    return outside


@pytest.fixture
def tools(repo: Path) -> Toolbox:
    return Toolbox.of(edit_tools(repo, max_file_bytes=1000))


# --- edit tools: the jail ------------------------------------------------------------------


async def test_writes_outside_the_jail_are_refused(
    tools: Toolbox, repo: Path, sentinel: Path
) -> None:
    os.symlink(sentinel / "etc", repo / "escape")
    before_outside, before_git = tree_hash(sentinel), tree_hash(repo / ".git")
    attempts = [
        {"path": "../../outside/etc/passwd", "content": "owned"},
        {"path": "../../../outside/etc/passwd", "content": "owned"},
        {"path": str(sentinel / "etc" / "passwd"), "content": "owned"},
        {"path": "escape/passwd", "content": "owned"},
        {"path": "escape/new.txt", "content": "owned"},
        {"path": ".git/hooks/pre-commit", "content": "#!/bin/sh\necho owned\n"},
    ]
    for args in attempts:
        out = await tools.call("write_file", args)
        assert out.policy_violation and out.text.startswith("refused:"), (args, out)
    for name, args in [
        ("replace", {"path": "escape/passwd", "old": "root", "new": "owned"}),
        ("apply_patch", {"patch": _patch("../../outside/etc/passwd", "root:x:0:0", "owned")}),
        ("apply_patch", {"patch": _patch("escape/passwd", "root:x:0:0", "owned")}),
        ("apply_patch", {"patch": _patch(".git/hooks/pre-commit", "", "echo owned", create=True)}),
        ("apply_patch", {"patch": "diff --git a/x b/y\nsimilarity index 100%\n"
                         "rename from ../../outside/etc/passwd\nrename to y\n"}),
    ]:
        out = await tools.call(name, args)
        assert out.policy_violation, (name, args, out)
    assert tree_hash(sentinel) == before_outside
    assert tree_hash(repo / ".git") == before_git


async def test_write_file_creates_parents_and_enforces_size(tools: Toolbox, repo: Path) -> None:
    out = await tools.call("write_file", {"path": "pkg/sub/mod.py", "content": "a\nb\n"})
    assert out.ok and out.text == "wrote pkg/sub/mod.py (2 lines)"
    assert (repo / "pkg" / "sub" / "mod.py").read_text() == "a\nb\n"
    out = await tools.call("write_file", {"path": "big.txt", "content": "x" * 1001})
    assert not out.ok and "limit is 1000 bytes" in out.text
    assert not (repo / "big.txt").exists()


async def test_replace_exact_absent_and_ambiguous(tools: Toolbox, repo: Path) -> None:
    out = await tools.call("replace", {"path": "app.py", "old": "'hi '", "new": "'hello '"})
    assert out.ok and out.text.startswith("replaced 1 occurrence in app.py; lines 2-2 now read:")
    assert "   2>     return 'hello ' + name" in out.text  # the edit as it now reads
    assert "'hello ' + name" in (repo / "app.py").read_text()

    out = await tools.call("replace", {"path": "app.py", "old": "def greet(nme):", "new": "x"})
    assert not out.ok and "not found" in out.text
    assert "   1> def greet(name):" in out.text  # the closest line, numbered
    assert "replace_lines with start_line=1 end_line=1" in out.text

    out = await tools.call(
        "replace", {"path": "app.py", "old": "def greet(name):\n  return", "new": "x"}
    )
    assert not out.ok and "closest lines (1-2" in out.text

    out = await tools.call("replace", {"path": "app.py", "old": "X = 1", "new": "X = 2"})
    assert not out.ok and "appears 2 times" in out.text and "replace_all=true" in out.text
    out = await tools.call(
        "replace", {"path": "app.py", "old": "X = 1", "new": "X = 2", "replace_all": True}
    )
    assert out.text.startswith("replaced 2 occurrences in app.py")

    out = await tools.call("replace", {"path": "missing.py", "old": "a", "new": "b"})
    assert not out.ok and "no such file" in out.text


def _patch(path: str, old: str, new: str, *, create: bool = False) -> str:
    if create:
        return f"--- /dev/null\n+++ b/{path}\n@@ -0,0 +1 @@\n+{new}\n"
    return f"--- a/{path}\n+++ b/{path}\n@@ -1 +1 @@\n-{old}\n+{new}\n"


async def test_apply_patch_good_and_bad(tools: Toolbox, repo: Path) -> None:
    (repo / "app.py").write_text("one\ntwo\nthree\n")
    good = "--- a/app.py\n+++ b/app.py\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n"
    out = await tools.call("apply_patch", {"patch": good})
    assert out.ok and out.text == "applied patch to 1 file: app.py"
    assert (repo / "app.py").read_text() == "one\nTWO\nthree\n"

    out = await tools.call("apply_patch", {"patch": good})  # already applied: context differs
    assert not out.ok and out.text.startswith("error: patch does not apply:")
    assert "app.py" in out.text

    # -p0 paths, wrong hunk counts, fenced, no trailing newline
    loose = "```diff\n--- app.py\n+++ app.py\n@@ -1,9 +1,9 @@\n one\n-TWO\n+2\n three\n```"
    out = await tools.call("apply_patch", {"patch": loose})
    assert out.ok, out.text
    assert (repo / "app.py").read_text() == "one\n2\nthree\n"

    two = (
        "diff --git a/app.py b/app.py\n--- a/app.py\n+++ b/app.py\n@@ -3 +3 @@\n-three\n+3\n"
        "diff --git a/new/file.txt b/new/file.txt\nnew file mode 100644\n--- /dev/null\n"
        "+++ b/new/file.txt\n@@ -0,0 +1 @@\n+hello\n"
    )
    out = await tools.call("apply_patch", {"patch": two})
    assert out.text == "applied patch to 2 files: app.py, new/file.txt"
    assert (repo / "new" / "file.txt").read_text() == "hello\n"
    assert (repo / "app.py").read_text() == "one\n2\n3\n"

    # A removed SQL comment looks like a file header; it must not confuse the path check.
    (repo / "q.sql").write_text("-- comment\nselect 1;\n")
    sql = "--- a/q.sql\n+++ b/q.sql\n@@ -1,2 +1,2 @@\n--- comment\n+-- note\n select 1;\n"
    out = await tools.call("apply_patch", {"patch": sql})
    assert out.ok, out.text

    link = (
        "diff --git a/l b/l\nnew file mode 120000\n--- /dev/null\n+++ b/l\n"
        "@@ -0,0 +1 @@\n+/etc\n"
    )
    out = await tools.call("apply_patch", {"patch": link})
    assert out.policy_violation and not (repo / "l").exists()


# --- shell: policy, environment, limits ----------------------------------------------------


@pytest.fixture
def box(tmp_path: Path) -> Sandbox:
    return build_sandbox(SandboxSettings(), worktree=tmp_path)


@pytest.mark.parametrize(
    "command",
    ["git push origin main", "curl http://127.0.0.1", "git -C . remote add x y", "sudo true"],
)
async def test_policy_refuses(command: str, tmp_path: Path, box: Sandbox) -> None:
    with pytest.raises(PolicyViolation, match="deny rule"):
        await run_command(command, cwd=tmp_path, sandbox=box)
    tool = shell_tool(tmp_path, sandbox=box, policy=CommandPolicy(), timeout=5, output_cap=1000, env={})
    out = await Toolbox.of([tool]).call("run", {"command": command})
    assert out.policy_violation and out.text.startswith("refused:")


def test_policy_allow_wins_and_ordinary_commands_pass() -> None:
    policy = CommandPolicy(allow=[r"^git push --dry-run"])
    policy.check("git push --dry-run origin")
    for ok in ["pytest -q", "ls src/curl/", "pip install libcurl-tools", 'git commit -m "push"']:
        CommandPolicy().check(ok)
    with pytest.raises(ValueError):
        CommandPolicy(deny=["("])
    with pytest.raises(ValueError):
        CommandPolicy(unknown=[])  # type: ignore[call-arg]


def test_scrubbed_env_drops_secrets() -> None:
    env = scrubbed_env({
        "PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8", "OPENAI_API_KEY": "sk-x",
        "MY_SERVICE_TOKEN": "t", "DB_PASSWORD": "p", "AWS_REGION": "r", "GH_HOST": "h",
        "GITHUB_TOKEN": "g", "ANTHROPIC_BASE_URL": "u", "CLIENT_SECRET_VALUE": "s",
        "GOOGLE_APPLICATION_CREDENTIALS": "/c", "AZURE_CLIENT_ID": "a",
    })
    assert env == {
        "PATH": "/bin", "HOME": "/h", "LANG": "C.UTF-8",
        "GIT_TERMINAL_PROMPT": "0", "PYTHONDONTWRITEBYTECODE": "1",
    }


def test_the_secret_filter_is_the_glob_list():
    names = ["OPENAI_API_KEY", "GH_TOKEN", "DB_PASSWORD", "aws_secret_access_key", "PATH", "HOME",
             "MY_SECRET_THING", "TOKENIZER", "LANG", "SSH_AUTH_SOCK", "API_KEYS_FILE"]
    kept = scrubbed_env(dict.fromkeys(names, "v"))
    for name in names:
        secret = any(fnmatch.fnmatchcase(name.upper(), p) for p in _SECRET_PATTERNS)
        assert (name in kept) is not secret, name


async def test_secret_from_passed_env_is_not_visible(tmp_path: Path, box: Sandbox) -> None:
    env = {**os.environ, "OPENAI_API_KEY": "sk-supersecret-123"}
    result = await run_command('echo "key=[$OPENAI_API_KEY]"', cwd=tmp_path, sandbox=box, env=env)
    assert result.exit_code == 0
    assert "sk-supersecret" not in result.output and "key=[]" in result.output


async def test_huge_output_is_capped(tmp_path: Path, box: Sandbox) -> None:
    result = await run_command("yes | head -c 50000000", cwd=tmp_path, sandbox=box, output_cap=10_000)
    assert result.exit_code == 0 and not result.timed_out
    assert result.output_bytes == 50_000_000 and result.truncated
    assert "bytes omitted ..." in result.output
    assert len(result.output) < 10_200


async def test_timeout_kills_the_whole_group(tmp_path: Path, box: Sandbox) -> None:
    marker = f"1000.{os.getpid()}{int(time.time() * 1000) % 100000}"
    command = f"sleep {marker} & sleep {marker} & echo started; wait"
    result = await run_command(command, cwd=tmp_path, sandbox=box, timeout=1)
    assert result.timed_out and result.exit_code != 0
    assert "started" in result.output
    deadline = time.monotonic() + 5
    while _live_processes(f"sleep {marker}") and time.monotonic() < deadline:
        await asyncio.sleep(0.1)
    assert _live_processes(f"sleep {marker}") == []


def _live_processes(needle: str) -> list[int]:
    """Pids (not zombies) whose command line contains ``needle``; like ``pgrep -f``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
            state = (entry / "stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if needle in cmdline and state != "Z":
            found.append(int(entry.name))
    return found


async def test_background_child_does_not_outlive_a_finished_command(tmp_path: Path, box: Sandbox) -> None:
    marker = f"999.{os.getpid()}"
    result = await run_command(f"sleep {marker} & echo done", cwd=tmp_path, sandbox=box, timeout=30)
    # not timed out: the command ended without waiting for its 999 s background child
    assert result.exit_code == 0 and not result.timed_out and "done" in result.output
    await asyncio.sleep(0.2)
    assert _live_processes(f"sleep {marker}") == []


async def test_commands_run_concurrently(tmp_path: Path, box: Sandbox) -> None:
    """Five commands at once: each was started before any of them ended."""
    command = "echo start $(date +%s%N); sleep 1; echo end $(date +%s%N)"
    results = await asyncio.gather(*(run_command(command, cwd=tmp_path, sandbox=box)
                                     for _ in range(5)))
    assert all(r.exit_code == 0 for r in results)
    stamps = [dict(line.split() for line in r.output.splitlines() if line.strip())
              for r in results]
    assert max(int(s["start"]) for s in stamps) < min(int(s["end"]) for s in stamps)


async def test_network_is_unreachable_inside(tmp_path: Path, box: Sandbox) -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        port = server.getsockname()[1]
        probe = (
            f"{sys.executable} -c \"import socket; "
            f"socket.create_connection(('127.0.0.1', {port}), 2); print('CONNECTED')\""
        )
        inside = await run_command(probe, cwd=tmp_path, sandbox=box, timeout=20)
        assert inside.sandbox == "bwrap"
        assert inside.exit_code != 0 and "CONNECTED" not in inside.output
        open_box = build_sandbox(SandboxSettings(mode="none"), worktree=tmp_path)
        outside = await run_command(probe, cwd=tmp_path, sandbox=open_box, timeout=20)
        assert outside.exit_code == 0 and "CONNECTED" in outside.output, outside.output


async def test_run_tool_reports_exit_code_and_timeout(tmp_path: Path, box: Sandbox) -> None:
    tool = shell_tool(tmp_path, sandbox=box, policy=CommandPolicy(), timeout=1, output_cap=1000, env={})
    box = Toolbox.of([tool])
    out = await box.call("run", {"command": "echo hi; exit 3"})
    assert out.ok and out.text == "exit code 3\nhi"
    out = await box.call("run", {"command": "sleep 30", "timeout_s": 100})
    assert "timed out after 1s" in out.text
    with pytest.raises(ToolError):
        await run_command("true", cwd=tmp_path / "missing", sandbox=box)
