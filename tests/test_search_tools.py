"""The explorer tools against real files, a real git repository and the real ripgrep binary."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from orchestrator.errors import PolicyViolation, ToolError
from orchestrator.tools.base import Toolbox
from orchestrator.tools.explorer import explorer_tools
from orchestrator.tools.gitread import git_blame, git_log
from orchestrator.tools.jail import Jail, is_inside
from orchestrator.tools.reading import read
from orchestrator.tools.search import list_files, search

SECRET = "TOP-SECRET-VALUE"


def _git(repo: Path, *args: str) -> str:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@x", "-C", str(repo), *args]
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(
        "import os\n\n\ndef main():\n    return helper(1)\n\n\ndef helper(x):\n    return x + 1\n"
    )
    (root / "src" / "util.py").write_text("FLAGS = ['-flag', '--verbose']\n")
    (root / "README.md").write_text("# Demo\nCall main() to start.\n")
    (root / ".gitignore").write_text("build/\n*.log\n")
    (root / "build").mkdir()
    (root / "build" / "out.py").write_text("def main(): pass  # generated\n")
    (root / "debug.log").write_text("main crashed\n")
    (root / ".env").write_text("main=1\n")
    _git(root, "init", "-q")
    _git(root, "add", "-A")
    _git(root, "commit", "-q", "-m", "initial commit")
    return root


@pytest.fixture
def outside(tmp_path: Path) -> Path:
    secret_dir = tmp_path / "outside"
    secret_dir.mkdir()
    (secret_dir / "secret.txt").write_text(f"{SECRET} main\n")
    return secret_dir


# --- search ---------------------------------------------------------------------------------


def test_search_finds_matches_with_repo_relative_paths(repo: Path) -> None:
    result = search(repo, r"def \w+")
    found = {(m.path, m.line) for m in result.matches}
    assert found == {("src/app.py", 4), ("src/app.py", 8)}
    text = result.format_for_model()
    assert "src/app.py:4: def main():" in text
    assert str(repo) not in text


def test_no_match_is_a_clear_message(repo: Path) -> None:
    result = search(repo, "nothing_like_this_anywhere")
    assert result.matches == []
    assert result.format_for_model().startswith("no matches")


def test_bad_regex_is_a_readable_tool_error(repo: Path) -> None:
    with pytest.raises(ToolError) as err:
        search(repo, "foo(")
    message = str(err.value)
    assert "regex parse error" in message and "unclosed group" in message
    assert "fixed_strings" in message


def test_bad_regex_literal_with_fixed_strings(repo: Path) -> None:
    assert search(repo, "helper(", fixed_strings=True).matches


def test_pattern_starting_with_dash_is_searched_not_parsed_as_flag(repo: Path) -> None:
    result = search(repo, "-flag")
    assert [(m.path, m.line) for m in result.matches] == [("src/util.py", 1)]


def test_gitignored_and_hidden_files_are_not_searched(repo: Path) -> None:
    paths = {m.path for m in search(repo, "main").matches}
    assert "build/out.py" not in paths and "debug.log" not in paths and ".env" not in paths
    assert "src/app.py" in paths


def test_a_glob_does_not_reopen_ignored_or_hidden_files(repo: Path) -> None:
    assert search(repo, "main", glob="*.log").matches == []
    assert search(repo, "main", glob=".env").matches == []
    assert search(repo, "main", glob="**/*.py").matches  # still finds src/app.py
    assert {m.path for m in search(repo, "main", glob="src/*.py").matches} == {"src/app.py"}
    assert {m.path for m in search(repo, "main", glob="*.md").matches} == {"README.md"}
    assert "src/app.py" not in {m.path for m in search(repo, "main", glob="!*.py").matches}
    (repo / "src" / ".hidden.py").write_text("main\n")
    assert ".hidden.py" not in search(repo, "main", glob="*.py").format_for_model()
    assert search(repo, "main", glob="src/**").matches


def test_binary_file_is_skipped(repo: Path) -> None:
    (repo / "blob.bin").write_bytes(b"needle_in_binary\x00\x01\x02" * 10)
    assert search(repo, "needle_in_binary").matches == []


def test_file_over_max_filesize_is_skipped(repo: Path) -> None:
    (repo / "big.txt").write_text("needle_big\n" + "x" * 5000 + "\n")
    assert search(repo, "needle_big", max_filesize="1K").matches == []
    assert search(repo, "needle_big", max_filesize="1M").matches


def test_max_matches_caps_with_a_hint(repo: Path) -> None:
    (repo / "many.txt").write_text("hit\n" * 500)
    result = search(repo, "hit", max_matches=10)
    assert len(result.matches) == 10 and result.truncated
    text = result.format_for_model()
    assert "truncated" in text and "glob" in text


def test_search_context_and_path(repo: Path) -> None:
    result = search(repo, "helper", path="src", context=1)
    text = result.format_for_model()
    assert "src/app.py:8: def helper(x):" in text
    assert "src/app.py-9-" in text  # a context line


def test_long_lines_are_cut(repo: Path) -> None:
    (repo / "min.js").write_text("a" * 5000 + "NEEDLE" + "b" * 5000 + "\n")
    text = search(repo, "NEEDLE").format_for_model()
    assert "NEEDLE" in text and "line cut" in text and len(text) < 1000


def test_search_in_missing_path_is_a_tool_error(repo: Path) -> None:
    with pytest.raises(ToolError, match="no such file"):
        search(repo, "x", path="nope")


# --- read and list --------------------------------------------------------------------------


def test_read_returns_numbered_lines(repo: Path) -> None:
    text = read(repo, "src/app.py", 4, 5)
    assert "   4| def main():" in text and "   5|     return helper(1)" in text
    assert "   6|" not in text and "of 9" in text


def test_read_past_end_says_how_many_lines(repo: Path) -> None:
    with pytest.raises(ToolError, match="has 9 lines"):
        read(repo, "src/app.py", 50)


def test_read_caps_with_a_note(repo: Path) -> None:
    (repo / "long.txt").write_text("".join(f"line {i}\n" for i in range(1, 1001)))
    text = read(repo, "long.txt", max_lines=400)
    assert " 400| line 400" in text and " 401|" not in text
    assert "(truncated: file has 1000 lines; read from line 401" in text


def test_read_refuses_binary_and_missing(repo: Path) -> None:
    (repo / "blob.bin").write_bytes(b"\x00\x01")
    with pytest.raises(ToolError, match="binary"):
        read(repo, "blob.bin")
    with pytest.raises(ToolError, match="no such file"):
        read(repo, "src/missing.py")


def test_list_respects_gitignore(repo: Path) -> None:
    text = list_files(repo)
    assert "src/app.py" in text and "README.md" in text
    assert "build/out.py" not in text and "debug.log" not in text and ".env" not in text
    assert list_files(repo, glob="*.py").splitlines()[1:] == ["src/app.py", "src/util.py"]
    assert "src/util.py" in list_files(repo, path="src")


def test_list_caps_with_a_count(repo: Path) -> None:
    (repo / "many").mkdir()
    for i in range(30):
        (repo / "many" / f"f{i:02}.txt").write_text("x\n")
    text = list_files(repo, path="many", max_entries=10)
    assert "many/f09.txt" in text and "many/f10.txt" not in text
    assert "20 more" in text


# --- the jail -------------------------------------------------------------------------------


def test_symlink_to_outside_is_refused_and_never_followed(repo: Path, outside: Path) -> None:
    (repo / "link").symlink_to(outside)
    (repo / "src" / "leak.txt").symlink_to(outside / "secret.txt")
    with pytest.raises(PolicyViolation, match="inside the repository"):
        read(repo, "link/secret.txt")
    with pytest.raises(PolicyViolation):
        read(repo, "src/leak.txt")
    with pytest.raises(PolicyViolation):
        search(repo, "main", path="link")
    assert SECRET not in search(repo, SECRET).format_for_model()
    assert SECRET not in search(repo, "main").format_for_model()
    assert "secret" not in list_files(repo)


def test_dotdot_and_absolute_outside_are_refused(repo: Path, outside: Path) -> None:
    for bad in ("../outside/secret.txt", str(outside / "secret.txt"), "src/../../outside"):
        with pytest.raises(PolicyViolation, match="inside the repository"):
            read(repo, bad)
    with pytest.raises(PolicyViolation):
        list_files(repo, path="..")


def test_jail_accepts_inside_paths_and_guards_git_on_write(repo: Path, outside: Path) -> None:
    jail = Jail(repo)
    assert jail.relative(jail.resolve("./src/app.py")) == "src/app.py"
    assert jail.relative(jail.resolve(str(repo / "src" / "app.py"))) == "src/app.py"
    assert jail.resolve("new/file.py", write=True) == jail.root / "new" / "file.py"
    assert jail.resolve(".git/config") == jail.root / ".git" / "config"  # reading is fine
    with pytest.raises(PolicyViolation, match=".git"):
        jail.resolve(".git/config", write=True)
    (repo / "link").symlink_to(outside)
    with pytest.raises(PolicyViolation):
        jail.resolve("link/../repo/src/app.py")  # detour through an outside symlink
    assert is_inside(repo, repo / "src") and not is_inside(repo, outside)


# --- git ------------------------------------------------------------------------------------


def test_git_log_and_blame(repo: Path) -> None:
    (repo / "src" / "app.py").write_text((repo / "src" / "app.py").read_text() + "# more\n")
    _git(repo, "commit", "-q", "-am", "add a comment")
    log = git_log(repo).splitlines()
    assert len(log) == 2 and log[0].endswith("t: add a comment")
    assert git_log(repo, "README.md").endswith("t: initial commit")
    blame = git_blame(repo, "src/app.py", 4, 5)
    assert blame.splitlines()[0].startswith("   4| ") and "t: def main():" in blame
    with pytest.raises(PolicyViolation):
        git_blame(repo, "../outside/secret.txt", 1, 1)
    with pytest.raises(ToolError):
        git_blame(repo, "src/app.py", 500, 501)


# --- as tools -------------------------------------------------------------------------------


async def test_tools_return_error_text_instead_of_raising(repo: Path) -> None:
    box = Toolbox.of(explorer_tools(repo, git_root=repo))
    assert box.names() == ["git_blame", "git_log", "list", "read", "search"]
    ok = await box.call("search", {"pattern": "helper", "glob": "*.py"})
    assert ok.ok and "src/app.py:5:" in ok.text
    bad = await box.call("search", '{"pattern": "foo("}')
    assert not bad.ok and bad.text.startswith("error:") and "regex" in bad.text
    refused = await box.call("read", {"path": "../x"})
    assert not refused.ok and refused.policy_violation
    past = await box.call("read", {"path": "src/app.py", "start_line": 99})
    assert not past.ok and "9 lines" in past.text
    log = await box.call("git_log", {})
    assert log.ok and "initial commit" in log.text
    for tool in box.tools.values():
        assert tool.schema()["function"]["description"]


async def test_an_invented_file_name_too_long_for_the_os_is_a_tool_error(repo: Path) -> None:
    """A small model once asked for a 300-character path; that must not end its session."""
    box = Toolbox.of(explorer_tools(repo, git_root=repo))
    long = "src/IntRange.clamping." + "x" * 300 + ".py"
    for name, args in (("read", {"path": long}), ("search", {"pattern": "x", "path": long}),
                       ("list", {"path": long})):
        out = await box.call(name, args)
        assert not out.ok and out.text.startswith("error:") and len(out.text) < 400, (name, out)


def test_read_refuses_the_git_directory(tmp_path):
    import subprocess

    from orchestrator.errors import PolicyViolation

    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    subprocess.run(["git", "-C", str(tmp_path), "remote", "add", "origin",
                    "https://user:ghp_secret@example.invalid/r.git"], check=True)
    with pytest.raises(PolicyViolation, match="inside .git"):
        read(tmp_path, ".git/config")


def test_a_guessed_path_gets_real_suggestions(tmp_path):
    (tmp_path / "shop").mkdir()
    (tmp_path / "shop" / "pricing.py").write_text("def apply_discount(p, d):\n    return p\n")
    with pytest.raises(ToolError, match=r"did you mean shop/pricing\.py\?"):
        read(tmp_path, "src/pricing.py")


def test_a_search_reads_the_same_every_time(tmp_path):
    """ripgrep's threads finish files in any order; the result is by file, so a rerun's prompt
    is byte-identical (the call journal and prompt caches key on it)."""
    from orchestrator.tools.search import search

    for i in range(300):
        (tmp_path / f"d{i % 7}").mkdir(exist_ok=True)
        (tmp_path / f"d{i % 7}" / f"m{i:03}.py").write_text(f"x = 1\ndef median_{i}(): pass\n")
    runs = [search(tmp_path, "median", max_matches=1000) for _ in range(5)]
    paths = [[m.path for m in r.matches] for r in runs]
    assert len(paths[0]) == 300 and paths[0] == sorted(paths[0])
    assert all(p == paths[0] for p in paths) and len({r.format_for_model() for r in runs}) == 1
