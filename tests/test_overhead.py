"""What keeps orchestration cheap, checked for what it must not change: request bodies built once
are the bodies the SDK would send, and go out with the headers it would send; incremental
journal keys are the keys; a journaled reply is in the file before the caller acts on it (and a
failed write stops the run); writes moved off the event loop still land (in order, with errors
raised); the phase split adds up to the wall time; git is asked less without the result
changing."""

from __future__ import annotations

import fnmatch
import json
import os
import random
import socket
import subprocess
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from conftest import JsonHandler, run_env, sim_roles

from orchestrator import api
from orchestrator.evidence.verify import GitCommitSource
from orchestrator.models.base import REASONING, Completion
from orchestrator.models.chat import ChatRequests
from orchestrator.models.journal import CallJournal, JournaledClient, RequestKeys, _key, turn_of
from orchestrator.models.pool import ClientPool
from orchestrator.models.quota import QuotaLedger, WriteBehindLedger
from orchestrator.models.responses import ResponsesRequests
from orchestrator.record.writer import Writer
from orchestrator.sim import ModelBehavior, Reply
from orchestrator.state import CallRecord
from orchestrator.timing import Phases, phase
from orchestrator.tools.shell import _SECRET_PATTERNS, scrubbed_env
from orchestrator.workspace.worktree import Workspace

TOOLS = [{"type": "function", "function": {
    "name": name, "description": f"{name} things.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}},
                   "required": ["path"]}}} for name in ("read", "submit")]
FORMAT = {"type": "json_schema", "json_schema": {"name": "out", "strict": True, "schema": {
    "type": "object", "properties": {"a": {"type": "string"}}, "required": ["a"],
    "additionalProperties": False}}}


def history(turns: int, source: str = "sim/sim-planner") -> list[dict]:
    """A session's messages: tool calls and results, unicode, reasoning carried on replies."""
    out: list[dict] = [{"role": "system", "content": "You plan. — ünïcode ✓"},
                       {"role": "user", "content": "Fix median()"}]
    for i in range(turns):
        reply: dict = {"role": "assistant", "content": "Reading." if i % 2 else None,
                       "tool_calls": [{"id": f"call_{i}", "type": "function", "function": {
                           "name": "read", "arguments": json.dumps({"path": f"f{i}.py"})}}]}
        if i % 3 == 0:
            reply[REASONING] = {"source": source, "tokens": 7,
                                "items": [{"type": "reasoning", "summary": [],
                                           "encrypted_content": f"enc-{i}"}]}
        out += [reply, {"role": "tool", "tool_call_id": f"call_{i}", "content": f"line {i}\n"}]
    return out


# --- request bodies ---------------------------------------------------------------------------


@pytest.mark.both_apis
async def test_a_body_built_once_is_what_the_sdk_itself_sends(fresh_sim, wire_api):
    """The SDK's per-call transform of the request would change nothing in ours: the same call
    made through the SDK's typed ``create`` reaches the server as the same JSON."""
    fresh_sim.set_scenario(fresh_sim.scenario.model_copy(update={"models": {
        "sim-planner": ModelBehavior(reasoning_tokens=5, script=[Reply(content='{"a": "x"}')])}}))
    roles = sim_roles(fresh_sim, "models.planner-sim.temperature=0.2")
    pool = ClientPool(roles, run_env())
    client = pool.client("planner", "planner-sim")
    messages = history(3, source="another/model")  # reasoning of another model: never sent
    try:
        first = await client.complete(messages, session="p-1")
        reply = {"role": "assistant", "content": first.content}
        if first.reasoning:  # the Responses API's encrypted reasoning, carried back as it came
            reply[REASONING] = dict(first.reasoning)
        messages += [reply, {"role": "user", "content": "Go on."}]
        for tools, fmt in ((TOOLS, None), (None, FORMAT)):
            await client.complete(messages, session="p-1", tools=tools, response_format=fmt)
            ours = fresh_sim.requests[-1].body
            sdk = pool.sdk("sim")
            create = sdk.responses.create if wire_api == "responses" else sdk.chat.completions.create
            stream = await create(**ours)
            async for _ in stream:
                pass
            assert fresh_sim.requests[-1].body == ours
            # and with the headers the SDK sends (auth is checked by the server)
            assert fresh_sim.requests[-1].headers == fresh_sim.requests[-2].headers
            assert fresh_sim.requests[-1].api == wire_api
            carried = "enc-" not in json.dumps(ours) and "encrypted_content" in json.dumps(ours)
            assert carried == (wire_api == "responses")
    finally:
        await pool.aclose()


@pytest.mark.parametrize("requests", [ChatRequests, ResponsesRequests])
def test_reused_pieces_give_the_body_a_fresh_encoder_would(requests, sim):
    """Appends, masked outputs replaced in place, forks to a new list, equal copies: the body
    from pieces encoded earlier is always the one encoded from scratch."""
    route = ClientPool(sim_roles(sim), run_env()).route("planner", "planner-sim")
    built, rng = requests(route), random.Random(7)
    messages = history(2)
    for step in range(60):
        action = rng.choice(["append", "append", "replace", "fork", "copy"])
        if action == "append":
            messages.append({"role": "tool", "tool_call_id": f"x{step}", "content": f"out {step}"})
        elif action == "replace" and len(messages) > 3:
            i = rng.randrange(2, len(messages))
            messages[i] = {**messages[i], "content": f"[masked {step}]"}
        elif action == "fork":
            messages = [*messages[:2], {"role": "user", "content": f"handoff {step}"}]
        else:
            messages = [dict(m) for m in messages]
        tools = TOOLS if step % 2 else TOOLS[-1:]
        assert built.body(messages, tools, None) == requests(route).body(messages, tools, None)
        json.loads(built.body(messages, tools, None))


# --- the call journal -------------------------------------------------------------------------


def test_incremental_keys_are_the_reference_keys():
    keys, rng = RequestKeys(), random.Random(3)
    messages = history(1)
    for step in range(80):
        action = rng.choice(["append", "append", "replace", "fork", "session"])
        if action == "append":
            messages.append({"role": rng.choice(["assistant", "tool"]), "content": f"m{step}"})
        elif action == "replace" and len(messages) > 2:
            i = rng.randrange(len(messages))
            messages[i] = {**messages[i], "content": f"masked {step}"}
        elif action == "fork":
            messages = messages[:2]
        session = "s-2" if action == "session" else "s-1"
        tools = None if step % 5 == 0 else TOOLS
        key, turn = keys.key(session, "m", messages, tools, FORMAT if step % 7 == 0 else None)
        assert key == _key(session, "m", messages, tools, FORMAT if step % 7 == 0 else None)
        assert turn == turn_of(messages)


def _done(content: str) -> Completion:
    return Completion(content, (), "stop", CallRecord(role="planner", session="s-1",
                                                      requested_model="m", cost_usd=0.25))


def _in_file(path: Path) -> set[str]:
    """The keys another process would find in the journal's file now."""
    import sqlite3

    with sqlite3.connect(path) as db:
        return {k for (k,) in db.execute("SELECT key FROM calls")}


def test_a_journaled_reply_is_in_the_file_when_put_returns_and_a_new_process_finds_it(tmp_path):
    path = tmp_path / "journal.sqlite"
    journal = CallJournal(path)
    for i in range(20):
        journal.put(f"k{i}", _done(f"reply {i}"), "s-1", i)
        assert f"k{i}" in _in_file(path)  # before the caller acts on the reply
        hit = journal.get(f"k{i}")
        assert hit is not None and hit.content == f"reply {i}" and hit.record.replayed
    journal.close()
    again = CallJournal(path)
    assert again.knows("k19") and not again.knows("k20")
    assert again.get("k7").content == "reply 7"  # type: ignore[union-attr]
    assert again.check_repeat("s-1", 3, "other-key") and again.repeats == [("s-1", 3)]
    again.close()


def test_a_journal_that_cannot_write_says_so_and_takes_no_more(tmp_path):
    journal = CallJournal(tmp_path / "j.sqlite")
    journal.put("k0", _done("a"), "s-1", 0)
    journal._open().execute("DROP TABLE calls")  # the disk refuses from now on
    with pytest.raises(Exception, match="calls"):
        journal.put("k1", _done("b"), "s-1", 1)
    assert not journal.knows("k1")
    with pytest.raises(Exception, match="calls"):
        journal.check()
    with pytest.raises(Exception, match="calls"):
        journal.put("k2", _done("c"), "s-1", 2)
    with pytest.raises(Exception, match="calls"):
        journal.close()


class _GatedJournal(CallJournal):
    """A journal whose new file is made only when the test opens the gate, and whose disk
    refuses every write when ``broken``."""

    def __init__(self, path: Path, *, broken: bool = False) -> None:
        self.gate, self.broken = threading.Event(), broken
        super().__init__(path)

    def _create(self) -> None:
        self.gate.wait(10)
        super()._create()

    def _write(self, rows: list) -> None:
        if self.broken:
            raise OSError("disk full")
        super()._write(rows)


def test_a_new_journal_file_is_made_off_the_caller_and_the_first_put_waits_for_it(tmp_path):
    path = tmp_path / "j.sqlite"
    journal = _GatedJournal(path)  # returns while its file is still being made
    assert not path.exists()
    putting = threading.Thread(target=journal.put, args=("k0", _done("a"), "s-1", 0))
    putting.start()
    putting.join(0.3)
    assert putting.is_alive() and not journal.knows("k0")  # the reply waits for the file
    journal.gate.set()
    putting.join(10)
    assert not putting.is_alive() and "k0" in _in_file(path)
    journal.close()
    assert CallJournal(path).knows("k0")


async def test_a_journal_that_cannot_write_stops_the_session_before_it_pays_again(fresh_sim,
                                                                                 tmp_path):
    fresh_sim.set_scenario(fresh_sim.scenario.model_copy(update={"models": {
        "sim-planner": ModelBehavior(script=[Reply(content="one"), Reply(content="two")])}}))
    pool = ClientPool(sim_roles(fresh_sim), run_env())
    journal = _GatedJournal(tmp_path / "j.sqlite", broken=True)
    journal.gate.set()
    client = JournaledClient(pool.client("planner", "planner-sim"), journal)
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"}]
    try:
        # the reply could not be kept: the session never gets it to act on
        with pytest.raises(OSError, match="disk full"):
            await client.complete(messages, session="p-1")
        assert len(fresh_sim.state.requests_for("sim-planner")) == 1
        messages += [{"role": "assistant", "content": "one"}, {"role": "user", "content": "go"}]
        with pytest.raises(OSError, match="disk full"):
            await client.complete(messages, session="p-1")
        assert len(fresh_sim.state.requests_for("sim-planner")) == 1  # the second never sent
    finally:
        await pool.aclose()
        with pytest.raises(OSError):
            journal.close()


def test_a_writer_applies_batches_in_order_and_reports_errors():
    seen: list[list[int]] = []
    started, gate = threading.Event(), threading.Event()

    def apply(batch: list[int]) -> None:
        started.set()
        gate.wait(5)
        if 13 in batch:
            raise ValueError("thirteen")
        seen.append(batch)

    writer: Writer[int] = Writer(apply, name="test-writer")
    writer.submit(0)
    assert started.wait(5)  # the thread took item 0 alone and waits at the gate
    for i in range(1, 6):
        writer.submit(i)
    gate.set()
    writer.flush()
    assert [i for batch in seen for i in batch] == list(range(6))
    assert len(seen) == 2  # item 0 alone, then the five that queued meanwhile together
    writer.submit(13)
    with pytest.raises(ValueError, match="thirteen"):
        writer.flush()
    with pytest.raises(ValueError, match="thirteen"):
        writer.close()


# --- the quota ledger -------------------------------------------------------------------------


def test_a_write_behind_ledger_keeps_caps_exact_and_writes_everything(tmp_path):
    path, now = tmp_path / "quota.sqlite", datetime.now(UTC)
    ledger = WriteBehindLedger(QuotaLedger(path), refresh_s=0.0)
    assert ledger.reserve("sim/m", 100, 1000, now)
    ledger.settle("sim/m", 100, 400, 0.5, now)  # queued: counted before it is written
    assert ledger.used_today("sim/m", now) == 400
    ledger.mark_exhausted("sim/x", now + timedelta(hours=1), "insufficient_quota")
    assert ledger.exhausted_until("sim/x", now) is not None  # at once, before it is written
    ledger.flush()
    other = QuotaLedger(path)  # another process marks another model
    other.mark_exhausted("sim/y", now + timedelta(hours=1), "usage limit")
    assert ledger.exhausted_until("sim/y", now) is None  # not yet seen: a refresh is asked for
    ledger.flush()
    assert ledger.exhausted_until("sim/y", now) is not None
    ledger.close()
    rows = {r.model: r for r in other.rows(now)}
    assert (rows["sim/m"].tokens, rows["sim/m"].calls, rows["sim/m"].usd) == (400, 1, 0.5)
    assert rows["sim/x"].exhausted_until is not None
    other.close()


# --- where the time goes ----------------------------------------------------------------------


def test_the_phase_split_gives_each_instant_to_one_phase():
    phases = Phases()
    phases.add("graph", 0.0, 10.0)
    phases.add("node", 1.0, 9.0)
    phases.add("model", 2.0, 4.0)
    phases.add("model", 3.0, 5.0)  # a parallel call: counted once
    phases.add("tool", 4.5, 6.0)
    phases.add("journal", 7.0, 7.5)
    split = phases.split(0.0, 12.0)
    assert split["model"] == 3.0 and split["tool"] == 1.0 and split["journal"] == 0.5
    assert split["node"] == 3.5 and split["graph"] == 2.0 and split["other"] == 2.0
    assert sum(split.values()) == pytest.approx(12.0)
    with phase("tool"):  # no run recording: nothing happens
        pass


@pytest.mark.both_apis
def test_a_run_reports_where_its_wall_time_went(fresh_sim, sample_repo):
    result = api.run("Fix median()", repo=sample_repo, roles=sim_roles(fresh_sim), env=run_env())
    assert result.status == "succeeded", result.reason
    report = json.loads((Path(result.run_dir) / "report.json").read_text())
    phases, split = report["phases_s"], result.time_split
    assert sum(phases.values()) == pytest.approx(split["wall_s"], abs=1e-3)
    assert phases["model"] == pytest.approx(split["model_s"], abs=1e-3)
    for name in ("request", "journal", "git", "graph", "node", "setup"):
        assert phases[name] > 0, name
    calls = report["calls"]  # a call's time starts when its request is on the wire
    assert all(0 < c["duration_s"] < 5 for c in calls)


# --- git asked less -----------------------------------------------------------------------------


def test_a_repository_made_inside_the_worktree_stays_out_of_every_snapshot(sample_repo):
    ws = Workspace.create(sample_repo, "run-nested")
    first = ws.snapshot()
    sub = ws.worktree / "sub"
    sub.mkdir()
    git = ["git", "-c", "user.name=b", "-c", "user.email=b@x"]
    for args in (["init", "-q"], ["commit", "-q", "--allow-empty", "-m", "x"]):
        subprocess.run([*git, *args], cwd=sub, check=True, capture_output=True)
    (ws.worktree / "new.txt").write_text("new\n")
    second = ws.snapshot()
    listed = subprocess.run(["git", "ls-tree", "-r", second], cwd=sample_repo, check=True,
                            capture_output=True, text=True).stdout
    assert "new.txt" in listed and "sub" not in listed and "160000" not in listed
    assert second != first and ws.snapshot() == second  # and the next snapshot agrees
    stat, patch = ws.diff_stat(second), ws.patch(second)
    assert stat == ws.diff_stat() and patch == ws.patch()  # the tree's diff is the worktree's
    assert "new.txt" in stat and "+new" in patch
    commit = ws.commit("work", second)
    assert commit and ws.tip() == commit and ws.commit("again", second) is None
    reopened = Workspace.open(sample_repo, "run-nested")
    assert reopened.tip() == commit and reopened.snapshot() == second


def test_a_snapshot_with_nothing_staged_since_the_last_is_that_tree(sample_repo):
    """The tree written last is reused only while ``git add`` stages nothing new; every change
    (edit, delete, mode, new file, an edit reverted), also one staged by a diff in between,
    gives the tree git itself writes."""
    ws = Workspace.create(sample_repo, "run-memo")
    first = ws.snapshot()
    target = ws.worktree / "stats.py"

    def written() -> str:  # the tree of the worktree, from a fresh index of git's own
        env = {"GIT_INDEX_FILE": str(ws.run_dir / "check-index"), "GIT_WORK_TREE": str(ws.worktree),
               "GIT_DIR": str(sample_repo / ".git")}
        for args in (["read-tree", "--empty"], ["add", "-A"], ["write-tree"]):
            out = subprocess.run(["git", *args], env={**os.environ, **env},
                                 cwd=ws.worktree, check=True, capture_output=True, text=True)
        return out.stdout.strip()

    assert ws.snapshot() == first == written()
    original = target.read_text()
    target.write_text(original + "# more\n")
    assert ws.diff_stat()  # stages the edit before the next snapshot
    edited = ws.snapshot()
    assert edited != first and edited == written()
    target.write_text(original)
    assert ws.snapshot() == first  # reverted: staged again, not the tree kept from before
    target.chmod(0o755)
    assert ws.snapshot() == written() != first
    (ws.worktree / "new.txt").write_text("x\n")
    (ws.worktree / "tests" / "test_stats.py").unlink()
    last = ws.snapshot()
    assert last == written() and ws.snapshot() == last
    ws.restore(edited)
    assert ws.snapshot() == edited == written()


def test_the_citation_reader_checks_a_commit_only_when_asked_to(sample_repo):
    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=sample_repo, check=True,
                          capture_output=True, text=True).stdout.strip()
    with GitCommitSource(sample_repo, head, resolved=True) as src:
        assert src.lines("stats.py") and src.lines("missing.py") is None
    with GitCommitSource(sample_repo, "HEAD") as src:
        assert src.commit == head
    bad = GitCommitSource(sample_repo, "no-such-rev")
    with pytest.raises(Exception, match="unknown commit"):
        bad.lines("stats.py")


def test_closing_the_commit_reader_waits_for_a_read_in_flight_and_ends_its_git(sample_repo):
    """A read on another thread (the line counts) that is starting its git process when the
    run closes the reader: the close waits for it and ends that process, so none outlives the
    run."""
    src = GitCommitSource(sample_repo, "HEAD")
    with src._io:  # the read in flight holds the reader
        closer = threading.Thread(target=src.close)
        closer.start()
        closer.join(0.3)
        assert closer.is_alive()  # close waits for it
        stdin, _ = src._pipes()  # ... which starts its git process now
        proc = src._proc
    closer.join(10)
    assert not closer.is_alive() and src._proc is None
    assert proc is not None and proc.wait(5) is not None and stdin.closed


def test_the_secret_filter_is_the_glob_list():
    names = ["OPENAI_API_KEY", "GH_TOKEN", "DB_PASSWORD", "aws_secret_access_key", "PATH", "HOME",
             "MY_SECRET_THING", "TOKENIZER", "LANG", "SSH_AUTH_SOCK", "API_KEYS_FILE"]
    kept = scrubbed_env(dict.fromkeys(names, "v"))
    for name in names:
        secret = any(fnmatch.fnmatchcase(name.upper(), p) for p in _SECRET_PATTERNS)
        assert (name in kept) is not secret, name


def test_tool_declarations_are_counted_once_and_counted_again_when_anything_changes():
    from orchestrator.session.tokens import tools_tokens as _tools_tokens

    seen: list[str] = []

    def count(text: str) -> int:
        seen.append(text)
        return len(text)

    schema = {"type": "object", "properties": {"path": {"type": "string"}}}

    def declared(description: str, params: dict, **extra: object) -> list[dict]:
        return [{"type": "function", **extra, "function": {
            "name": "read", "description": description, "parameters": params}}]

    first = declared("Read a file.", schema)
    assert _tools_tokens(count, first) == len(json.dumps(first)) and len(seen) == 1
    assert _tools_tokens(count, declared("Read a file.", schema)) == len(json.dumps(first))
    assert len(seen) == 1  # a fresh declaration of the same tools: not serialised again
    for changed in (declared("Read one file.", schema), declared("Read a file.", dict(schema)),
                    declared("Read a file.", schema, strict=True)):
        assert _tools_tokens(count, changed) == len(json.dumps(changed))
    assert len(seen) == 4


class _Refusing(JsonHandler):
    """Answers every POST with the status its path names, an OpenAI-style error body."""

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        status = int(self.path.rstrip("/").rsplit("/", 1)[-1])
        self.reply(status, {"error": {"message": f"refused with {status}", "type": "x",
                                      "code": "c"}})


async def test_a_request_sent_once_built_fails_as_the_sdk_would(tmp_path):
    """``client.post`` (the SDK's public ``post``, over our aiohttp transport) raises what the
    SDK's ``post`` raises over its default transport, type and message: HTTP errors, a refused
    connection, a server that hangs up, a server that never answers."""
    from http.server import ThreadingHTTPServer

    import openai

    from orchestrator.models.client import _OPTIONS, _http_client, post

    server = ThreadingHTTPServer(("127.0.0.1", 0), _Refusing)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen()  # accepts, never answers
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    closed_port = closed.getsockname()[1]
    closed.close()  # nothing listens there

    async def both(base_url: str, path: str) -> tuple[BaseException, BaseException]:
        ours = openai.AsyncOpenAI(api_key="sk-test-key", base_url=base_url, max_retries=0,
                                  timeout=0.5, http_client=_http_client())
        sdk = openai.AsyncOpenAI(api_key="sk-test-key", base_url=base_url, max_retries=0,
                                 timeout=0.5)
        errors = []
        try:
            for send in (lambda: post(ours, path, b"{}"),
                         lambda: sdk.post(path, cast_to=object, content=b"{}", options=_OPTIONS,
                                          stream=True, stream_cls=openai.AsyncStream[object])):
                with pytest.raises(openai.APIError) as caught:
                    await send()
                errors.append(caught.value)
        finally:
            await ours.close()
            await sdk.close()
        return errors[0], errors[1]

    hangup = _hanging_up(b"")  # reads the request, closes without a word

    try:
        cases = [(f"http://127.0.0.1:{server.server_address[1]}/v1", f"/status/{status}")
                 for status in (400, 401, 403, 404, 429, 500, 503)]
        cases += [(f"http://127.0.0.1:{closed_port}/v1", "/chat/completions"),
                  (f"http://127.0.0.1:{hangup.getsockname()[1]}/v1", "/chat/completions"),
                  (f"http://127.0.0.1:{silent.getsockname()[1]}/v1", "/chat/completions")]
        kinds = []
        for base_url, path in cases:
            ours, sdks = await both(base_url, path)
            assert type(ours) is type(sdks) and str(ours) == str(sdks), (path, ours, sdks)
            assert getattr(ours, "body", None) == getattr(sdks, "body", None)
            kinds.append(type(ours).__name__)
        assert kinds[:5] == ["BadRequestError", "AuthenticationError", "PermissionDeniedError",
                             "NotFoundError", "RateLimitError"]
        # refused, hung up: a connection error, not "Request timed out."; silent: a timeout
        assert kinds[-3:] == ["APIConnectionError", "APIConnectionError", "APITimeoutError"]
    finally:
        server.shutdown()
        silent.close()
        hangup.close()


def _hanging_up(sent: bytes) -> socket.socket:
    """A server that reads each request, sends ``sent`` and closes the connection."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen()

    def serve() -> None:
        while True:
            try:
                conn, _ = listener.accept()
            except OSError:
                return  # the test closed the listener
            with conn:
                conn.recv(65536)
                conn.sendall(sent)

    threading.Thread(target=serve, daemon=True).start()
    return listener


async def test_a_stream_cut_off_midway_is_a_connection_error_as_over_the_sdks_transport():
    """A server that stops after one streamed event (its body promised more): iterating the
    stream fails with ``APIConnectionError`` over our transport as over the SDK's default,
    which ``classify`` makes a transient error, retried and then failed over."""
    import openai

    from orchestrator.models.client import _http_client, post

    cut = _hanging_up(b"HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\n"
                      b"Content-Length: 4000\r\n\r\ndata: {\"choices\": []}\n\n")
    base_url = f"http://127.0.0.1:{cut.getsockname()[1]}/v1"
    failures = []
    try:
        for http_client in (_http_client(), None):
            sdk = openai.AsyncOpenAI(api_key="sk-test-key", base_url=base_url, max_retries=0,
                                     timeout=2, http_client=http_client)
            try:
                stream = await post(sdk, "/chat/completions", b"{}")
                events = []
                with pytest.raises(openai.APIConnectionError) as caught:
                    async for event in stream:
                        events.append(event)
                assert events == [{"choices": []}]
                failures.append(caught.value)
            finally:
                await sdk.close()
    finally:
        cut.close()
    ours, sdks = failures
    assert type(ours) is type(sdks) is openai.APIConnectionError
