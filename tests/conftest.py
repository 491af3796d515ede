"""Shared fixtures: one simulator per test module, sample repositories, checkout snapshots."""

from __future__ import annotations

import hashlib
import io
import json
import os
import signal
import subprocess
import sys
import tempfile
import threading
import traceback
from http.server import BaseHTTPRequestHandler
from pathlib import Path

import pytest

from orchestrator.config.layers import load_roles
from orchestrator.config.schema import RoleMap
from orchestrator.faces.demo import demo_roles_sets, demo_scenario, make_sample_repo, scenario_path
from orchestrator.sim import Scenario, SimServer
from orchestrator.sim.local import serve_local

SIM_ENV = {"ORCHESTRATE_SIM_KEY": "simulated-key"}
# Runs record usage in the per-user quota ledger (XDG state dir), and read the user's role map
# and trust records (XDG config dir): keep the tests' out of $HOME.
os.environ["XDG_STATE_HOME"] = tempfile.mkdtemp(prefix="orchestrate-test-state-")
os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="orchestrate-test-config-")

# A shell starting the suite in the background (`cmd &` without job control) leaves SIGINT
# ignored, and every process the tests start would inherit that: the Ctrl-C tests would then
# test nothing. A handler of our own is not inherited across exec, so the children get the
# default again.
if signal.getsignal(signal.SIGINT) == signal.SIG_IGN:
    signal.signal(signal.SIGINT, signal.default_int_handler)


# The demo's models wait 50 ms per call and stream at 1,200 tok/s, as a fast tier would; tests
# that do not measure time get the same replies this many times faster (a whole run is a dozen
# calls, and hundreds of tests are whole runs). A test that needs a window sets its own delay.
TEST_SPEED = 5.0


def faster(scenario: Scenario, factor: float = TEST_SPEED) -> Scenario:
    """``scenario`` with every model ``factor`` times faster: same replies, same ratios."""
    models = {k: m.model_copy(update={"delay_s": m.delay_s / factor,
                                      "tokens_per_second": m.tokens_per_second * factor})
              for k, m in scenario.models.items()}
    return scenario.model_copy(update={"models": models})


def sim_scenario() -> Scenario:
    """The demo scenario at test speed (what ``sim`` and ``fresh_sim`` serve)."""
    return faster(demo_scenario())


class Sim(SimServer):
    """The module's simulator, one state reached two ways: in-process at ``local_url`` (a
    ``sim://`` URL: the real SDK, no socket; what ``sim_roles`` uses) and over HTTP at
    ``base_url``, served from the first time a test asks for it (a CLI in another process, a
    test about the wire)."""

    def __init__(self, scenario: Scenario) -> None:
        super().__init__(scenario)
        self.local_url = serve_local(self.state)

    @property
    def base_url(self) -> str:
        self.start()
        return super().base_url


@pytest.fixture(scope="module")
def sim():
    server = Sim(sim_scenario())
    try:
        yield server
    finally:
        server.stop()


WIRE_APIS = ("chat", "responses")


@pytest.fixture
def wire_api() -> str:
    """The API the simulated provider speaks (``fresh_sim``, ``sim_roles``)."""
    return "chat"


REACHES = ("in-process", "http")


@pytest.fixture
def reach() -> str:
    """How role maps built by ``sim_roles`` reach the simulator (``fresh_sim``)."""
    return "in-process"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Tests marked ``both_apis`` that use the simulator run once per wire API; tests marked
    ``both_reaches`` once in-process and once over HTTP."""
    if metafunc.definition.get_closest_marker("both_apis") and "wire_api" in metafunc.fixturenames:
        metafunc.parametrize("wire_api", WIRE_APIS)
    if metafunc.definition.get_closest_marker("both_reaches") and "reach" in metafunc.fixturenames:
        metafunc.parametrize("reach", REACHES)


@pytest.fixture
def fresh_sim(sim, wire_api, reach):
    """The module's simulator, reset to the demo scenario with no recorded requests; role maps
    built by ``sim_roles`` for it speak ``wire_api`` and reach it as ``reach`` says."""
    sim.set_scenario(sim_scenario())
    sim.state.clear()
    sim.wire_api, sim.http = wire_api, reach == "http"
    yield sim
    sim.wire_api, sim.http = "chat", False


@pytest.fixture
async def pools_closed():
    """Closes every pool ``routing_kit.pool_for`` made during the test, in the test's loop."""
    import routing_kit

    yield
    while routing_kit.OPEN:
        await routing_kit.OPEN.pop().aclose()


@pytest.fixture
def sample_repo(tmp_path: Path) -> Path:
    return make_sample_repo(tmp_path / "repo")


def sim_roles(sim: SimServer, *sets: str, http: bool = False) -> RoleMap:
    """The demo's role map pointed at ``sim``: in-process when it has a ``local_url`` (the
    module's ``sim``), over HTTP when it has not or ``http`` (or the test's ``reach``) asks
    for the wire."""
    text = scenario_path("demo-roles.toml").read_text(encoding="utf-8")
    api = f'providers.sim.api="{getattr(sim, "wire_api", "chat")}"'
    http = http or getattr(sim, "http", False)
    url = sim.base_url if http else getattr(sim, "local_url", sim.base_url)
    return load_roles(base_text=text, sets=[*demo_roles_sets(url), api, *sets])


def run_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.endswith("_API_KEY")}
    return {**env, **SIM_ENV, **extra}


def snapshot(repo: Path) -> dict[str, object]:
    """Everything of the user's checkout a run must not change."""

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True,
                              check=True).stdout

    files = {}
    for path in sorted(repo.rglob("*")):
        rel = path.relative_to(repo).as_posix()
        if rel.startswith((".git/", "workspaces/", ".orchestrate/")) or not path.is_file():
            continue
        files[rel] = hashlib.sha256(path.read_bytes()).hexdigest()
    return {
        "files": files,
        "status": git("status", "--porcelain"),
        "branch": git("rev-parse", "--abbrev-ref", "HEAD"),
        "head": git("rev-parse", "HEAD"),
        "index": git("ls-files", "-s"),
        "stash": git("stash", "list"),
    }


def cli_process(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
                timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``orchestrate ARGS`` in a process of its own: the real entry point, for tests about the
    process (its start, its signals, what it loads, process-wide settings like tracing)."""
    return subprocess.run([sys.executable, "-m", "orchestrator", *args], capture_output=True,
                          text=True, env=env or run_env(), cwd=cwd, timeout=timeout)


def cli(*args: str, env: dict[str, str] | None = None, cwd: Path | None = None,
        timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """``orchestrate ARGS`` run in this process as ``python -m orchestrator`` would run it:
    the entry point's ``main`` with that argv, environment and working directory, on a thread
    of its own (its own event loop, whatever the test's), stdout and stderr captured as text,
    the exit code ``SystemExit``'s. It saves a CLI test the engine's imports (~1.5 s each)."""
    from orchestrator.faces.cli import main

    streams = {name: io.TextIOWrapper(io.BytesIO(), encoding="utf-8", write_through=True)
               for name in ("stdout", "stderr")}
    code: list[int] = []

    def target() -> None:
        try:
            main()
            code.append(0)
        except SystemExit as exc:
            if exc.code is None or isinstance(exc.code, int):
                code.append(exc.code or 0)
            else:
                print(exc.code, file=sys.stderr)
                code.append(1)
        except BaseException:  # noqa: BLE001 (what the interpreter does with it)
            traceback.print_exc()
            code.append(1)

    wanted = env or run_env()
    saved = (dict(os.environ), os.getcwd(), sys.argv, sys.stdout, sys.stderr)
    os.environ.clear()
    os.environ.update(wanted)
    try:
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = ["orchestrate", *args]
        sys.stdout, sys.stderr = streams["stdout"], streams["stderr"]
        thread = threading.Thread(target=target, name="orchestrate-cli", daemon=True)
        thread.start()
        thread.join(timeout)
        if thread.is_alive():
            raise subprocess.TimeoutExpired(["orchestrate", *args], timeout)
    finally:
        os.environ.clear()
        os.environ.update(saved[0])
        os.chdir(saved[1])
        sys.argv, sys.stdout, sys.stderr = saved[2:]

    def text(name: str) -> str:
        raw = streams[name].buffer.getvalue()  # type: ignore[attr-defined]
        return raw.decode("utf-8").replace("\r\n", "\n").replace("\r", "\n")

    return subprocess.CompletedProcess(["orchestrate", *args], code[0], text("stdout"),
                                       text("stderr"))


def scenario_with(**models) -> Scenario:
    """The demo scenario (at test speed) with some models' behaviour replaced."""
    base = sim_scenario()
    return base.model_copy(update={"models": {**base.models, **models}})


class JsonHandler(BaseHTTPRequestHandler):
    """A quiet ``http.server`` handler for a test's own endpoint: ``reply`` answers with JSON."""

    def reply(self, status: int, payload: object) -> None:
        """Read the request's body, then answer ``status`` with ``payload`` as JSON."""
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass
