"""The call journal: incremental keys are the reference keys; a journaled reply is in the file
before the caller acts on it, a new process finds it, and a failed write stops the session
before it pays again."""

from __future__ import annotations

import random
import threading
from pathlib import Path

import pytest
from conftest import run_env, sim_roles
from messages_kit import FORMAT, TOOLS, history

from orchestrator.models.base import Completion
from orchestrator.models.journal import (
    CallJournal,
    JournaledClient,
    RequestKeys,
    _key,
    kept_replies,
    turn_of,
)
from orchestrator.models.pool import ClientPool
from orchestrator.sim import ModelBehavior, Reply
from orchestrator.state import CallRecord


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
    before = path.read_bytes()
    kept = kept_replies(path)  # a finished run's replies, the file left as it was
    assert sorted(kept) == [("s-1", i) for i in range(20)]
    assert kept[("s-1", 7)].content == "reply 7" and path.read_bytes() == before


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
