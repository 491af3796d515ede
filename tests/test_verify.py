"""Citation verification against real files and a real git commit."""

from __future__ import annotations

import subprocess
import threading
from pathlib import Path

import pytest

from orchestrator.evidence.verify import (
    DirSource,
    GitCommitSource,
    check_citation,
    normalize_ws,
    verify_findings,
)
from orchestrator.state import Citation, Claim, Findings

APP = "".join(f"line {i} of app\n" for i in range(1, 10)) + "def   main(x,\n        y):\n"


def _git(repo: Path, *args: str) -> None:
    cmd = ["git", "-c", "user.name=t", "-c", "user.email=t@x", "-C", str(repo), *args]
    subprocess.run(cmd, check=True, capture_output=True)


@pytest.fixture
def repo(tmp_path: Path) -> Path:
    root = tmp_path / "repo"
    (root / "src").mkdir(parents=True)
    (root / "src" / "app.py").write_text(APP)  # 11 lines
    return root


def cite(path: str, start: int, end: int, quote: str) -> Citation:
    return Citation(path=path, start_line=start, end_line=end, quote=quote)


def test_normalize_ws() -> None:
    assert normalize_ws("  a\t\tb\n\n  c  ") == "a b c"


def test_only_the_correct_citation_survives(repo: Path) -> None:
    claim = Claim(
        text="main takes x and y",
        citations=[
            cite("src/nope.py", 1, 2, "line 1"),
            cite("src/app.py", 90, 95, "line 1"),
            cite("src/app.py", 1, 2, "line 7 of app"),
            cite("src/app.py", 10, 11, "def main(x, y):"),
        ],
    )
    result = verify_findings(DirSource(repo), Findings(answer="a", claims=[claim]), tool_calls=3)
    assert result.verified == 1 and result.dropped == 0 and result.submitted == 1
    assert result.claims[0].citations == [claim.citations[3]]
    assert result.reasons == [
        "claim 1: no such file: src/nope.py",
        "claim 1: lines 90-95 outside file (11 lines)",
        "claim 1: quote not found in src/app.py:1-2",
    ]
    (verdict,) = result.verdicts
    assert verdict.status == "verified" and verdict.kind is None
    assert [c.kind for c in verdict.citations] == ["path", "path", "quote", None]


def test_reasons_for_bad_ranges(repo: Path) -> None:
    src = DirSource(repo)
    assert check_citation(src, cite("src/app.py", 5, 3, "x")) == "start_line > end_line"
    assert check_citation(src, cite("src", 1, 1, "x")) == "no such file: src"
    assert check_citation(src, cite("../etc/passwd", 1, 1, "root")) == "no such file: ../etc/passwd"
    assert check_citation(src, cite("src/app.py", 0, 1, "line 1")) is not None


def test_quote_must_be_inside_the_cited_range(repo: Path) -> None:
    src = DirSource(repo)
    assert check_citation(src, cite("src/app.py", 3, 3, "line 3 of app")) is None
    assert check_citation(src, cite("src/app.py", 4, 5, "line 3 of app")) is not None


def test_whitespace_numbering_and_ellipses_are_forgiven(repo: Path) -> None:
    src = DirSource(repo)
    assert check_citation(src, cite("./src/app.py", 10, 11, "def main(x,\n y):")) is None
    numbered = "  10| def   main(x,\n  11|         y):"
    assert check_citation(src, cite("src/app.py", 10, 11, numbered)) is None
    assert check_citation(src, cite("src/app.py", 10, 11, "src/app.py:10: def main(x,")) is None
    assert check_citation(src, cite("src/app.py", 2, 3, "... of app line 3 ...")) is None
    assert check_citation(src, cite("src/app.py", 2, 3, " ... ")) is not None


def test_claim_without_valid_citation_is_dropped(repo: Path) -> None:
    findings = Findings(
        answer="a",
        claims=[
            Claim(text="the app says so", citations=[cite("src/app.py", 1, 1, "not there")]),
            Claim(text="none", citations=[]),
            Claim(text="the app's first line", citations=[cite("src/app.py", 1, 1, "line 1 of app")]),
        ],
    )
    result = verify_findings(DirSource(repo), findings, tool_calls=1)
    assert [c.text for c in result.claims] == ["the app's first line"]
    assert (result.submitted, result.verified, result.dropped) == (3, 1, 2)
    assert "claim 1 dropped (quote): quote not found in src/app.py:1-1" in result.reasons
    assert "claim 2 dropped (uncited): no citation" in result.reasons
    assert result.drops == {"quote": 1, "uncited": 1}


def test_no_tool_calls_drops_everything(repo: Path) -> None:
    good = Claim(text="the app", citations=[cite("src/app.py", 1, 1, "line 1 of app")])
    result = verify_findings(DirSource(repo), Findings(answer="a", claims=[good]), tool_calls=0)
    assert result.claims == [] and result.dropped == 1
    assert result.reasons == ["explorer made no tool call"]
    assert result.drops == {"unchecked": 1}


def test_git_commit_source_reads_the_committed_version(repo: Path) -> None:
    _git(repo, "init", "-q")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "c1")
    (repo / "src" / "app.py").write_text("dirty edit\n")
    (repo / "src" / "new.py").write_text("untracked\n")
    with GitCommitSource(repo, "HEAD") as src:
        assert src.lines("src/app.py")[:1] == ["line 1 of app"]
        assert check_citation(src, cite("src/app.py", 1, 1, "line 1 of app")) is None
        assert check_citation(src, cite("src/app.py", 1, 1, "dirty edit")) is not None
        assert src.lines("src/new.py") is None
        assert src.lines("src") is None  # a tree, not a file
        assert src.lines("../x") is None
        assert src.lines("src/missing file.py") is None
        assert src.lines("./src/app.py") == src.lines("src/app.py")
    assert check_citation(DirSource(repo), cite("src/app.py", 1, 1, "dirty edit")) is None


def test_sources_are_safe_for_concurrent_use(repo: Path) -> None:
    _git(repo, "init", "-q")
    for i in range(20):
        (repo / f"f{i}.txt").write_text(f"content {i}\n")
    _git(repo, "add", "-A")
    _git(repo, "commit", "-q", "-m", "c1")
    with GitCommitSource(repo, "HEAD") as git_src:
        for src in (DirSource(repo), git_src):
            failures: list[str | None] = []

            def work(src=src, failures=failures) -> None:
                for i in range(20):
                    failures.append(check_citation(src, cite(f"f{i}.txt", 1, 1, f"content {i}")))

            threads = [threading.Thread(target=work) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert failures == [None] * 80
