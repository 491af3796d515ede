"""Secret files by every path a hostile role has, judged by what the simulator received and what
the run wrote: a committed ``.npmrc`` token, ``.git-credentials``, an ``id_rsa`` and a ``*.pem``
(none in a key format the masking knows by shape) must not reach a model raw, base64- or
hex-encoded, through the read, search, list and history tools or the builder's shell (cat,
base64, python, tar, git show / cat-file, links, copies, error messages)."""

from __future__ import annotations

import base64
import json
import random
import secrets
import subprocess
from pathlib import Path

import pytest
from conftest import run_env, scenario_with, sim_roles
from test_hostile import call, sh, user_state

from orchestrator import api
from orchestrator.faces.demo import DEMO_TASK, demo_scenario
from orchestrator.sim import ModelBehavior
from orchestrator.tools.secretvalues import KnownSecrets

MARK = "tok" + secrets.token_hex(16)
FILES = {
    ".npmrc": f"//registry.npmjs.org/:_authToken=npm_{MARK}\n",
    ".git-credentials": f"https://bob:{MARK}@example.com\n",
    "deploy/id_rsa": f"-----BEGIN OPENSSH PRIVATE KEY-----\nb3Blbn{MARK}NzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQ\n"
                     "-----END OPENSSH PRIVATE KEY-----\n",
    "certs/server.pem": f"-----BEGIN CERTIFICATE-----\nMIIB{MARK}CCAVmgAwIBAgIUe\n-----END CERTIFICATE-----\n",
}
IGNORED = {".env": f"DB_PASSWORD={MARK}\n"}


def _plant(repo: Path) -> None:
    for rel, text in {**FILES, **IGNORED}.items():
        (repo / rel).parent.mkdir(parents=True, exist_ok=True)
        (repo / rel).write_text(text)
    (repo / ".gitignore").write_text(".env\n")
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "add", ".gitignore", *FILES], cwd=repo, check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "config"], cwd=repo, check=True)


def _forms() -> list[str]:
    """The secret as a model could be shown it: raw, base64 (any alignment), hex."""
    forms = [MARK, MARK.encode().hex()]
    for text in FILES.values():
        data = text.encode()
        for i in range(3):
            b64 = base64.b64encode(data[i:]).decode()
            forms += [b64[j:j + 24] for j in range(8, len(b64) - 32, 12)]
        forms += [data.hex()[j:j + 24] for j in range(0, len(data.hex()) - 24, 24)]
    return forms


def _leaks(text: str) -> list[str]:
    return [f for f in _forms() if f in text]


_TOOLS = [call("read", path=".npmrc"), call("read", path=".git-credentials"),
          call("read", path="deploy/id_rsa"), call("read", path="certs/server.pem"),
          call("read", path=".env"), call("search", pattern=MARK[:10]),
          call("search", pattern="tok[0-9a-f]{32}", glob="**/.*"),
          call("search", pattern="authToken", glob=".npmrc", context=3),
          call("search", pattern="PRIVATE", path="deploy"),
          call("search", pattern="bob", path=".git-credentials"),
          call("git_blame", path=".npmrc", start_line=1, end_line=5),
          call("git_blame", path="deploy/id_rsa", start_line=1, end_line=5),
          call("git_log", path=".git-credentials"), call("list", glob="**/*")]

_SHELL = [
    "cat .npmrc .git-credentials deploy/id_rsa certs/server.pem",
    "base64 deploy/id_rsa certs/server.pem .npmrc; base64 -w0 .git-credentials",
    "xxd -p .npmrc; od -An -tx1 .git-credentials | tr -d ' \\n'; echo",
    "python3 -c \"print(open('.git-credentials').read())\"",
    "python3 -c \"raise SystemExit(open('.npmrc').read())\"",
    "tar cf - deploy certs | base64",
    "git show HEAD:.npmrc; git cat-file -p HEAD:.git-credentials; git log -p -1 | cat",
    "ln -s .npmrc link.txt; ln .git-credentials hard.txt; cp deploy/id_rsa copy.txt; "
    "cat link.txt hard.txt copy.txt",
    "grep -o 'tok[0-9a-f]*' -r . --include='*' | head",
]
_AFTER_SHELL = [call("read", path="link.txt"), call("read", path="hard.txt"),
                call("read", path="copy.txt"), call("search", pattern="tok[0-9a-f]{8}"),
                call("git_blame", path="copy.txt", start_line=1, end_line=3),
                call("replace", path="hard.txt", old=f"https://bob:{MARK[:-1]}x@example.com",
                     new="x")]  # its error shows the closest lines


def _sent(sim) -> str:
    return json.dumps([r.body for r in sim.state.requests])


def _written(run_dir: str) -> dict[str, list[str]]:
    """What the run's own files (events, report, patch, logs; not its worktree) show."""
    files = [p for p in Path(run_dir).rglob("*")
             if p.is_file() and "worktree" not in p.relative_to(run_dir).parts]
    assert any(p.name == "report.json" for p in files)
    found = {p.name: _leaks(p.read_text(errors="replace")) for p in files}
    return {name: leaks for name, leaks in found.items() if leaks}


async def test_explorer_tools_never_show_secret_files(fresh_sim, sample_repo: Path) -> None:
    _plant(sample_repo)
    explorer = ModelBehavior(first=_TOOLS, behavior="explorer-cite")
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": explorer}))
    await api.aexplore("Where is `median` defined?", repo=sample_repo,
                       roles=sim_roles(fresh_sim, "run.explore_candidates=0"), env=run_env(),
                       split=False)
    assert fresh_sim.state.requests_for("sim-explorer")
    assert _leaks(_sent(fresh_sim)) == []


async def test_a_builder_shell_never_shows_secret_files(fresh_sim, sample_repo: Path) -> None:
    _plant(sample_repo)
    before = user_state(sample_repo)
    builder = demo_scenario().models["sim-builder"].script or []
    script = [*_TOOLS, *[sh(c) for c in _SHELL], *_AFTER_SHELL,
              sh("rm -f link.txt hard.txt copy.txt"), *builder]
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=script)}))
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(
        fresh_sim, "roles.builder.max_turns=60"), env=run_env())
    assert result.status == "succeeded", result.reason
    sent = _sent(fresh_sim)
    assert _leaks(sent) == []
    assert _written(result.run_dir) == {}
    assert user_state(sample_repo) == before


_LEAK_TEST = (
    "import base64, unittest\n\nclass T(unittest.TestCase):\n    def test_leak(self):\n"
    "        key = base64.b64encode(open('deploy/id_rsa', 'rb').read()).decode()\n"
    "        self.assertEqual(key + open('.npmrc').read() + open('.git-credentials').read(), '')\n")


async def test_a_test_that_prints_secret_files_does_not_show_them_to_the_next_attempt(
        fresh_sim, sample_repo: Path) -> None:
    # the builder writes a failing test that prints the secrets: verify's failure output is the
    # next attempt's feedback
    _plant(sample_repo)
    write = f"cat > tests/test_leak.py <<'EOF'\n{_LEAK_TEST}EOF"
    submit = call("submit", summary="done", files_changed=["tests/test_leak.py"])
    fix = demo_scenario().models["sim-builder"].script or []
    script = [sh(write), submit, *fix]
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=script)}))
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(
        fresh_sim, "run.max_attempts=2"), env=run_env())
    assert result.status == "failed"  # the leaking test stays; what matters is what was shown
    second = json.dumps(fresh_sim.state.requests_for("sim-builder")[2].body)
    assert "test_leak" in second  # verify's failure was the second attempt's feedback
    sent = _sent(fresh_sim)
    assert _leaks(sent) == []
    assert _written(result.run_dir) == {}


def test_known_secrets_mask_encodings_and_leave_other_text_alone() -> None:
    known = KnownSecrets.of([text.encode() for text in FILES.values()])
    code = "def median(values):\n    ordered = sorted(values)  # https://example.com\n" * 50
    assert known.mask(code) == code
    for text in FILES.values():
        data = b"tar-header" + text.encode()
        for shown in (text, base64.encodebytes(data).decode(), data.hex(), f"x={MARK};"):
            assert _leaks(known.mask(shown)) == [], shown


async def test_citing_a_secret_file_does_not_quote_it(fresh_sim, sample_repo: Path) -> None:
    # the explorer cites lines of secret files: checking a citation reads the file; what it
    # read must not come back in the report, the judge's prompt or the answer
    _plant(sample_repo)
    claims = [{"text": f"{path} holds the token.", "citations": [
        {"path": path, "start_line": 1, "end_line": 3, "quote": quote}]}
        for path, quote in ((".npmrc", "authToken"), (".git-credentials", "bob"),
                            ("deploy/id_rsa", "BEGIN"), (".env", "DB_PASSWORD"))]
    submit = call("submit", answer="See the config files.", claims=claims)
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": ModelBehavior(script=[submit])}))
    result = await api.aexplore("Where is the npm token configured?", repo=sample_repo,
                                roles=sim_roles(fresh_sim, "run.explore_candidates=0"),
                                env=run_env(), split=False)
    assert _leaks(_sent(fresh_sim)) == []
    assert _leaks(result.model_dump_json()) == []
    assert _written(result.run_dir) == {}


async def test_a_secret_file_copied_into_the_result_is_not_shown_to_the_judges(
        fresh_sim, sample_repo: Path) -> None:
    # the builder copies secret files into files it leaves in its result: the diff the
    # reviewer reads (and the run's patch) would carry them
    _plant(sample_repo)
    builder = demo_scenario().models["sim-builder"].script or []
    copy = sh("cp .npmrc notes.txt; base64 deploy/id_rsa > data.txt; "
              "sed 's/^/# /' .git-credentials >> stats.py")
    fresh_sim.set_scenario(scenario_with(**{"sim-builder": ModelBehavior(script=[copy, *builder])}))
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    reviewer = json.dumps([r.body for r in fresh_sim.state.requests_for("sim-reviewer")])
    assert "notes.txt" in reviewer  # the reviewer saw the change
    assert _leaks(_sent(fresh_sim)) == []
    assert result.status in ("succeeded", "failed")


async def test_a_one_shot_build_is_not_shown_the_secret_files_explorers_cited(
        fresh_sim, sample_repo: Path) -> None:
    # a one-shot builder is shown whole the files the explorers' verified claims cite
    _plant(sample_repo)
    claims = [{"text": f"{path} is where the median is configured.", "citations": [
        {"path": path, "start_line": 1, "end_line": 1, "quote": quote}]}
        for path, quote in ((".npmrc", "authToken"), (".git-credentials", "bob"),
                            ("stats.py", "def median"))]
    explorer = ModelBehavior(script=[call("submit", answer="See these.", claims=claims)] * 8)
    builder = demo_scenario().models["sim-builder"].script or []
    fresh_sim.set_scenario(scenario_with(**{"sim-explorer": explorer,
                                            "sim-builder": ModelBehavior(script=builder)}))
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(
        fresh_sim, "builder.one_shot=true"), env=run_env())
    assert fresh_sim.state.requests_for("sim-explorer") and result.status
    first = json.dumps(fresh_sim.state.requests_for("sim-builder")[0].body)
    assert "def median" in first and ".npmrc" not in first  # shown: the code, not the secrets
    assert _leaks(_sent(fresh_sim)) == []


@pytest.mark.parametrize("sets", [(), ("builder.one_shot=true",)], ids=["tool_loop", "one_shot"])
async def test_the_repositorys_own_failing_test_printing_secret_files_is_masked(
        fresh_sim, sample_repo: Path, sets: tuple[str, ...]) -> None:
    # before any model call the preflight runs the tests; a failing one prints secret files,
    # and the failure is what the planner and the builder are shown
    _plant(sample_repo)
    (sample_repo / "tests" / "test_leak.py").write_text(_LEAK_TEST)
    ident = ["-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run(["git", "add", "-A"], cwd=sample_repo, check=True)
    subprocess.run(["git", *ident, "commit", "-qm", "leak test"], cwd=sample_repo, check=True)
    result = await api.arun(DEMO_TASK, repo=sample_repo, roles=sim_roles(
        fresh_sim, "run.max_attempts=1", *sets), env=run_env())
    sent = _sent(fresh_sim)
    assert "test_leak" in sent  # the failure was shown
    assert _leaks(sent) == []
    assert _written(result.run_dir) == {}


def test_hex_of_a_token_is_masked_though_its_digits_repeat() -> None:
    # hex of a hex token is all 3x and 6x digits: a window of it can have only 5 distinct
    # characters, yet it spells 8 distinct bytes (this let ``xxd -p .npmrc`` show a stretch)
    rng = random.Random(26)
    for _ in range(400):
        mark = "tok" + rng.randbytes(16).hex()
        data = f"//registry.npmjs.org/:_authToken=npm_{mark}\n".encode()
        known = KnownSecrets.of([data])
        stretches = [data.hex()[j:j + 24] for j in range(0, len(data.hex()) - 24, 12)]
        for shown in (data.hex(), data.hex().upper()):
            masked = known.mask(shown).lower()
            assert [s for s in stretches if s in masked] == [], mark
    # and the other way round: six hex digits spelling only three bytes stay masked
    data = b"\x12\x34\x56" * 8
    assert data.hex() not in KnownSecrets.of([data]).mask(f"dump: {data.hex()}")
