"""The ``orchestrate`` command: a thin shell over the library API.

Parsing is typer's, tables and live progress are rich's. Every command takes ``--json`` where
it prints a result; errors of ours print one line and exit with their code (2 for usage and
configuration, 1 for a task not achieved), never a traceback. A result exits with its own
``exit_code``: 0 clean, 1 not achieved, 3 done with a role session lost (see ``results``).

The engine (``api``: LangGraph, the OpenAI SDK) is imported on first use, so ``--help``,
``--version`` and ``roles`` start at once (``bench/cli_startup.py`` measures it).
"""

from __future__ import annotations

import json
import os
import sys
from collections.abc import Callable
from dataclasses import asdict
from importlib import import_module
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape

from orchestrator.config.trust import UntrustedConfig, record_trust, user_config_dir
from orchestrator.errors import OrchestrateError, UsageError
from orchestrator.faces.progress import Progress
from orchestrator.faces.render import (
    print_details,
    print_explore,
    print_jobs,
    print_plan,
    print_quota,
    print_run_summary,
    print_runs,
    print_trust,
    print_trust_request,
)
from orchestrator.record.tracing import configure_from_env
from orchestrator.workspace.repo import repo_root

if TYPE_CHECKING:
    from orchestrator import api
    from orchestrator.record.telemetry import Event
    from orchestrator.results import RunResult
else:

    class _Engine(ModuleType):
        """``orchestrator.api``, imported when a command first touches it."""

        def __getattr__(self, name: str) -> Any:
            return getattr(import_module("orchestrator.api"), name)

    api = _Engine("orchestrator.api")

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Multi-agent coding orchestrator: planner, parallel explorers, builder, reviewer.",
)
# Piped output (CI logs, files) gets room for the tables instead of rich's 80-column default.
out = Console(width=None if sys.stdout.isatty() else 140)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 140)

RepoOpt = Annotated[Path | None, typer.Option("--repo", help="Target git repository (default: current directory).")]
RolesOpt = Annotated[list[Path], typer.Option("--roles", help="Extra role map file(s), applied in order.")]
SetOpt = Annotated[list[str], typer.Option("--set", help="Override one key: ROLE.KEY=VALUE, e.g. explorer.parallel=20.")]
TeamOpt = Annotated[str | None, typer.Option("--team", help="Apply the [teams.NAME] overlay.")]
JsonOpt = Annotated[bool, typer.Option("--json", help="Print the result as JSON on stdout.")]
UsdOpt = Annotated[float | None, typer.Option("--max-usd", help="Stop (resumably) once this much is spent.")]
TokensOpt = Annotated[int | None, typer.Option("--max-tokens", help="Stop (resumably) after this many tokens.")]
DbOpt = Annotated[str | None, typer.Option("--database-url", envvar="ORCHESTRATE_DATABASE_URL",
                                              help="postgresql://... to share state (default: local SQLite).")]
TrustOpt = Annotated[bool, typer.Option(
    "--trust-repo-config",
    help="Trust the repository's roles.toml for this run only (see `orchestrate trust`).")]


def _run(coroutine: Any) -> Any:
    import asyncio  # not at the top: the quick commands never need an event loop

    return asyncio.run(coroutine)


def _version(value: bool) -> None:
    if value:
        from importlib.metadata import version

        out.print(f"orchestrate {version('orchestrate')}", highlight=False)
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True,
                                          help="Print the version and exit.")] = False,
) -> None:
    pass


def _fail(exc: OrchestrateError) -> None:
    line = escape(" ".join(str(exc).split()))  # one line, whatever the message carried
    err.print(f"[bold red]error:[/] {line}", highlight=False, markup=True, soft_wrap=True)
    raise typer.Exit(exc.exit_code)


def _trusting(call: Callable[[bool], Any], *, interactive: bool, trust_flag: bool) -> Any:
    """``call(trust_repo_config)``; at a terminal, an untrusted repository config is shown and
    the user asked once (as the peers ask before trusting a folder); elsewhere it is refused."""
    try:
        return call(trust_flag)
    except UntrustedConfig as exc:
        if not interactive or not sys.stdin.isatty():
            raise
        print_trust_request(err, exc)
        if not typer.confirm("Trust this file (recorded until it changes)?", default=False,
                             err=True):
            raise
        record_trust(user_config_dir(os.environ), exc.repo, {exc.file.name: exc.digest})
        return call(trust_flag)


def _guarded(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except OrchestrateError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        err.print("interrupted; the user's checkout is untouched (see `orchestrate clean`)")
        raise typer.Exit(130) from None


def _emit_result(result: RunResult, as_json: bool, *, simulated: bool = False,
                 events: bool = False) -> None:
    if events:  # the last JSON line of the stream
        _line({"kind": "result", "result": result.model_dump(mode="json")})
    elif as_json:
        out.print_json(result.model_dump_json())
    else:
        print_run_summary(out, result, simulated=simulated)
    raise typer.Exit(result.exit_code)


def _line(data: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(data, default=str) + "\n")
    sys.stdout.flush()


def _event_lines(event: Event) -> None:
    """``--events``: every event but the live ticks, one JSON line each, as it happens."""
    if event.kind != "progress":
        _line(event.model_dump(mode="json"))


EventsOpt = Annotated[bool, typer.Option(
    "--events", help="Stream the run's events as JSON lines on stdout (for CI logs); the last "
    'line is {"kind": "result", "result": ...}. See `orchestrate schema events`.')]


@app.command()
def run(
    task: Annotated[str, typer.Argument(help="What should be done, in plain words.")],
    repo: RepoOpt = None,
    roles: RolesOpt = [],  # noqa: B006 (typer reads the default)
    set_: SetOpt = [],  # noqa: B006
    team: TeamOpt = None,
    include_dirty: Annotated[bool, typer.Option("--include-dirty", help="Start from the uncommitted changes too.")] = False,
    approve_plan: Annotated[bool, typer.Option("--approve-plan", help="Pause after planning for your approval.")] = False,
    max_usd: UsdOpt = None,
    max_tokens: TokensOpt = None,
    database_url: DbOpt = None,
    trust_repo_config: TrustOpt = False,
    as_json: JsonOpt = False,
    events: EventsOpt = False,
) -> None:
    """Plan, explore, build and review TASK in an isolated worktree of the repository."""
    as_json = as_json or events
    progress = Progress(err, enabled=not as_json)
    approver = _ask_approval(progress) if approve_plan and sys.stdin.isatty() and not as_json else None
    listeners = [_event_lines] if events else [progress.on_event]

    def go(trusted: bool) -> RunResult:
        with progress:
            return _run(
                api.arun(task, repo=repo, role_files=roles, sets=set_, team=team,
                         listeners=listeners, include_dirty=include_dirty,
                         approve_plan=approve_plan, approver=approver, max_usd=max_usd,
                         max_tokens=max_tokens, database_url=database_url,
                         trust_repo_config=trusted)
            )

    _emit_result(_guarded(lambda: _trusting(go, interactive=not as_json,
                                            trust_flag=trust_repo_config)), as_json,
                 events=events)


def _ask_approval(progress: Progress):
    def ask(plan) -> bool:
        progress.pause()
        print_plan(err, plan)
        answer = typer.confirm("Approve this plan?", default=False, err=True)
        progress.resume()
        return answer

    return ask


@app.command()
def resume(
    run_id: Annotated[str, typer.Argument(help="The run to continue (see `orchestrate runs`).")],
    repo: RepoOpt = None,
    approve: Annotated[bool | None, typer.Option("--approve/--reject", help="Answer a pending plan approval.")] = None,
    max_usd: UsdOpt = None,
    max_tokens: TokensOpt = None,
    database_url: DbOpt = None,
    as_json: JsonOpt = False,
    events: EventsOpt = False,
) -> None:
    """Continue a run stopped by a crash, Ctrl-C, a budget or a pending plan approval."""
    as_json = as_json or events
    progress = Progress(err, enabled=not as_json)
    approver = _ask_approval(progress) if approve is None and sys.stdin.isatty() and not as_json else None
    listeners = [_event_lines] if events else [progress.on_event]

    def go() -> RunResult:
        with progress:
            return _run(api.aresume(run_id, repo=repo, approve=approve, approver=approver,
                                    listeners=listeners, max_usd=max_usd,
                                           max_tokens=max_tokens, database_url=database_url))

    _emit_result(_guarded(go), as_json, events=events)


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run to show.")],
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The full record of a run: outcome, per role, per session (context peaks, forks), per call."""
    details = _guarded(lambda: api.show(run_id, repo=repo))
    if as_json:
        out.print_json(data=details.document())
        return
    print_details(out, details)


@app.command()
def demo(
    as_json: JsonOpt = False,
    workdir: Annotated[Path | None, typer.Option(help="Where to create the sample repository (default: a temp dir).")] = None,
) -> None:
    """Run the whole pipeline on a sample repo with SIMULATED models (no API key needed)."""
    from orchestrator.faces.demo import arun_demo

    if not as_json:
        err.print(
            "[bold]orchestrate demo[/]: the models are SIMULATED (a local OpenAI-compatible "
            "simulator on 127.0.0.1 plays every role); the git repository, the edits, ripgrep "
            "and the tests are real."
        )
    progress = Progress(err, enabled=not as_json)

    def go():
        with progress:
            return _run(arun_demo(workdir=workdir, listeners=[progress.on_event]))

    result, repo = _guarded(go)
    if not as_json:
        err.print(f"sample repository: {repo}")
    _emit_result(result, as_json, simulated=True)


@app.command()
def explore(
    question: Annotated[str, typer.Argument(help="A question about the code.")],
    repo: RepoOpt = None,
    parallel: Annotated[int | None, typer.Option(help="Explorers at once (1-32).")] = None,
    roles: RolesOpt = [],  # noqa: B006
    set_: SetOpt = [],  # noqa: B006
    team: TeamOpt = None,
    trust_repo_config: TrustOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Answer QUESTION with the explorer swarm; every citation is checked. Your checkout is
    only read; the record goes to workspaces/<run-id>/ (see `orchestrate runs`)."""
    progress = Progress(err)  # on stderr in --json mode too: stdout carries only the result

    def go(trusted: bool):
        with progress:
            return _run(api.aexplore(question, repo=repo, role_files=roles, sets=set_,
                                            team=team, parallel=parallel,
                                            listeners=[progress.on_event],
                                            trust_repo_config=trusted))

    result = _guarded(lambda: _trusting(go, interactive=not as_json, trust_flag=trust_repo_config))
    if as_json:
        out.print_json(result.model_dump_json())
    else:
        print_explore(out, result)
    raise typer.Exit(result.exit_code)


@app.command("roles")
def roles_cmd(
    repo: RepoOpt = None,
    roles: RolesOpt = [],  # noqa: B006
    set_: SetOpt = [],  # noqa: B006
    team: TeamOpt = None,
    trust_repo_config: TrustOpt = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show which layer set each value.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The pipeline and its roles (kind, agent file, model, tier, tools), after every layer and
    override; --explain shows where each value came from."""
    from orchestrator.config.layers import resolve
    from orchestrator.faces.rolesview import explain_data, print_explain, print_roles, roles_data

    def go(trusted: bool):
        top = repo_root(repo) if repo is not None else _maybe_repo()
        found = resolve(repo=top, files=roles, sets=set_, team=team, env=os.environ,
                        user_dir=user_config_dir(os.environ), trust_repo=trusted)
        return found, (explain_data(found) if explain else roles_data(found))

    found, data = _guarded(lambda: _trusting(go, interactive=not as_json,
                                             trust_flag=trust_repo_config))
    if as_json:
        out.print_json(data=data)
    elif explain:
        print_explain(out, found)
    else:
        _guarded(lambda: print_roles(out, found))


@app.command()
def init(
    repo: RepoOpt = None,
    provider: Annotated[str | None, typer.Option(help="Provider name in the role map (default openai).")] = None,
    base_url: Annotated[str | None, typer.Option("--base-url", help="An OpenAI-compatible endpoint (default: the provider's public one).")] = None,
    api_key_env: Annotated[str | None, typer.Option("--api-key-env", help="The variable holding the API key (default OPENAI_API_KEY, or NAME_API_KEY).")] = None,
    model: Annotated[list[str], typer.Option("--model", help="ROLE=MODEL-ID (planner, explorer, builder, reviewer, summarizer, all), or a bare MODEL-ID for every role; repeat.")] = [],  # noqa: B006
    force: Annotated[bool, typer.Option("--force", help="Replace an existing roles.toml.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Write a commented starter roles.toml for the repository (asks at a terminal when no
    flag says; never asks elsewhere)."""
    from orchestrator.faces import starter

    ask = sys.stdin.isatty() and not as_json and provider is base_url is api_key_env is None \
        and not model

    def go() -> tuple[Path, bool]:
        top = repo_root(repo)
        chosen: dict[str, Any] = dict(provider=provider or "openai", base_url=base_url,
                                      key_env=api_key_env, models=starter.parse_models(model))
        if ask:
            chosen = _ask_starter()
        return starter.init_repo(top, **chosen, force=force, env=os.environ)

    path, trusted = _guarded(go)
    if as_json:
        out.print_json(data={"path": str(path), "trusted": trusted})
        return
    out.print(f"wrote {path}" + (" (trusted as written; `orchestrate trust --revoke` undoes "
                                 "that)" if trusted else ""), highlight=False)
    out.print("next: `orchestrate roles --explain`, then commit it with your agents in "
              ".orchestrate/agents/", highlight=False)


def _ask_starter() -> dict[str, Any]:
    from orchestrator.faces import starter

    chosen_provider = typer.prompt("Provider name", default="openai", err=True)
    url = typer.prompt("Base URL (empty: the provider's public endpoint)", default="",
                       show_default=False, err=True) or None
    key = typer.prompt("Variable holding the API key", err=True,
                       default=starter._key_env(chosen_provider))
    ids = typer.prompt("Model id for every role (empty: keep the packaged models)", default="",
                       show_default=False, err=True)
    return dict(provider=chosen_provider, base_url=url, key_env=key,
                models={"all": ids} if ids else {})


@app.command()
def schema(
    what: Annotated[str, typer.Argument(help="events (one line of events.jsonl or --events) or result (a RunResult).")] = "events",
) -> None:
    """Print a JSON Schema for bot authors: the events of a run, or a run's result."""
    def go() -> dict[str, Any]:
        from orchestrator.record.events import event_schema
        from orchestrator.results import RunResult

        if what == "events":
            return event_schema()
        if what == "result":
            return RunResult.model_json_schema(mode="serialization")
        raise UsageError(f"schema {what!r}: expected events or result")

    out.print(json.dumps(_guarded(go), indent=2), highlight=False, soft_wrap=True)


def _maybe_repo() -> Path | None:
    try:
        return repo_root(None)
    except OrchestrateError:
        return None


@app.command()
def trust(
    repo: RepoOpt = None,
    revoke: Annotated[bool, typer.Option("--revoke", help="Forget the trust given to the repository.")] = False,
    list_: Annotated[bool, typer.Option("--list", help="List the repositories you trust.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Trust the repository's own roles.toml (provider URLs and key variables, policy allows,
    sandbox), as it is now; a change to the file needs trust again."""
    def go() -> dict[str, Any]:
        if list_:
            return api.trusted_repos()
        if revoke:
            return api.revoke_trust(repo=repo)
        return api.trust(repo=repo)

    data = _guarded(go)
    if as_json:
        out.print_json(data=data)
    else:
        print_trust(out, data)


@app.command()
def runs(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """List the runs in the repository (id, state, branch, task, cost)."""
    from orchestrator.runs import claims_by_model

    found = _guarded(lambda: api.runs(repo=repo))
    if as_json:
        out.print_json(data=[r.summary() for r in found])
        return
    print_runs(out, found, claims_by_model(found))


@app.command()
def clean(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """Remove the worktrees of finished runs; branches and artefacts stay."""
    removed = _guarded(lambda: api.clean(repo=repo))
    if as_json:
        out.print_json(data={"removed": removed})
    else:
        out.print(f"removed {len(removed)} worktree(s)" + (": " + ", ".join(removed) if removed else ""))


@app.command("apply")
def apply_cmd(
    run_id: Annotated[str, typer.Argument(help="The run whose branch to merge.")],
    repo: RepoOpt = None,
    allow_git_config: Annotated[bool, typer.Option(
        "--allow-git-config",
        help="Merge even if the run changes .gitattributes, .gitmodules, hooks or symlinks out.",
    )] = False,
    as_json: JsonOpt = False,
) -> None:
    """Merge a run's branch into your current branch (refuses on a dirty checkout, conflicts, or
    changes to files that make git run programs). Hooks do not run during the merge."""
    sha = _guarded(lambda: api.apply(run_id, repo=repo, allow_git_config=allow_git_config))
    if as_json:
        out.print_json(data={"run_id": run_id, "merge_commit": sha})
    else:
        out.print(f"merged orchestrate/{run_id} into your branch: {sha[:10]}")


@app.command()
def quota(
    repo: RepoOpt = None,
    roles: RolesOpt = [],  # noqa: B006
    set_: SetOpt = [],  # noqa: B006
    team: TeamOpt = None,
    database_url: DbOpt = None,
    trust_repo_config: TrustOpt = False,
    days: Annotated[int, typer.Option("--days", help="Explorer claim history to show, in days.")] = 7,
    as_json: JsonOpt = False,
) -> None:
    """Today's token and USD use per model, caps, exhaustion, and explorer models' claim drop rates."""
    report = _guarded(lambda: api.quota(repo=repo, role_files=roles, sets=set_, team=team,
                                        database_url=database_url,
                                        trust_repo_config=trust_repo_config, days=days))
    if as_json:
        out.print_json(data=report.document())
    else:
        print_quota(out, report.usage, report.claims)


@app.command()
def submit(
    task: Annotated[str, typer.Argument(help="What should be done.")],
    repo: Annotated[str, typer.Option("--repo", help="A git URL to clone, or a path every worker can reach.")],
    roles: RolesOpt = [],  # noqa: B006
    set_: SetOpt = [],  # noqa: B006
    team: TeamOpt = None,
    database_url: DbOpt = None,
    trust_repo_config: TrustOpt = False,
    as_json: JsonOpt = False,
) -> None:
    """Queue TASK for the fleet (`orchestrate worker` on any machine takes it)."""
    from orchestrator.faces import fleet

    def go() -> int:
        return _run(fleet.submit(task, repo, database_url=_need_database(database_url),
                                 role_files=roles, sets=set_, team=team,
                                 trust_repo_config=trust_repo_config))

    job_id = _guarded(go)
    if as_json:
        out.print_json(data={"job_id": job_id})
    else:
        out.print(f"queued job {job_id}")


@app.command()
def worker(
    database_url: DbOpt = None,
    cache_dir: Annotated[Path | None, typer.Option(help="Where URL repositories are cloned.")] = None,
    concurrency: Annotated[int, typer.Option(help="Runs at once on this worker.")] = 1,
    drain: Annotated[bool, typer.Option("--drain", help="Exit when the queue is empty.")] = False,
) -> None:
    """Take queued runs from the shared database until stopped (Ctrl-C finishes the current one)."""
    from orchestrator.faces import fleet

    def go() -> None:
        url = _need_database(database_url)
        cache = (cache_dir or Path("~/.cache/orchestrate/repos")).expanduser()
        _run(fleet.run_worker(fleet.WorkerConfig(
            database_url=url, cache_dir=cache, concurrency=concurrency, drain=drain)))

    _guarded(go)


@app.command()
def jobs(database_url: DbOpt = None, as_json: JsonOpt = False) -> None:
    """The fleet's queue: every job, its state, attempts, and whether its worker went silent."""
    from orchestrator.faces import fleet

    found = _guarded(lambda: _run(fleet.jobs(_need_database(database_url))))
    if as_json:
        out.print_json(data=[asdict(j) for j in found])
    else:
        print_jobs(out, found)


def _need_database(database_url: str | None) -> str:
    if not database_url:
        raise UsageError("the fleet needs a shared database: pass --database-url postgresql://... "
                         "or set ORCHESTRATE_DATABASE_URL")
    return database_url


@app.command()
def bench(
    suite: Annotated[str, typer.Argument(help="Suite directory, or 'builtin'.")],
    roles: Annotated[list[str], typer.Option("--roles", help="Role map file or packaged name (bench-careful, bench-fast, live-split, live-solo); repeat to compare.")] = [],  # noqa: B006
    repeat: Annotated[int, typer.Option("--repeat", help="Runs per task and role map.")] = 1,
    jobs: Annotated[int, typer.Option("--jobs", help="Runs at once (timings are fairest with 1).")] = 1,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Where JSON, CSV and PNG go (default ./bench-results).")] = None,
    task: Annotated[list[str], typer.Option("--task", help="Only these tasks.")] = [],  # noqa: B006
    sim_models: Annotated[bool, typer.Option("--sim", help="Serve the simulated bench models (default maps: bench-careful, bench-fast).")] = False,
    keep: Annotated[bool, typer.Option("--keep", help="Keep each run's repository and workspace under OUT/runs/.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """Time to working code per role map: pass rate, wall time and cost, compared at equal accuracy.

    A role map named single:MAP runs MAP's builder model alone: one prompt with the repository's
    files, the whole changed files back, checked by the same acceptance commands."""
    from orchestrator.benchmark import bench_main

    code = _guarded(lambda: bench_main(suite, roles, repeat=repeat, jobs=jobs, out=out_dir,
                                       as_json=as_json, sim=sim_models, tasks=task, keep=keep,
                                       console=out))
    raise typer.Exit(code)


@app.command()
def mcp(
    repo: RepoOpt = None,
    roles: RolesOpt = [],  # noqa: B006
    set_: SetOpt = [],  # noqa: B006
    team: TeamOpt = None,
    http: Annotated[bool, typer.Option("--http", help="Serve streamable HTTP on 127.0.0.1 instead of stdio.")] = False,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 for --http.")] = 8765,
) -> None:
    """Serve explore, run, show and runs as MCP tools (Claude Code, Codex, Cursor)."""
    import importlib.util

    def go() -> None:
        if importlib.util.find_spec("mcp") is None:
            raise UsageError("the MCP server needs the mcp extra: pip install 'orchestrate[mcp]'")
        from orchestrator.faces.mcp_server import ServerSettings, serve

        top = repo_root(repo) if repo is not None else _maybe_repo()
        serve(ServerSettings.checked(top, role_files=roles, sets=set_, team=team),
              "http" if http else "stdio", port)

    _guarded(go)


@app.command()
def sim(
    scenario: Annotated[Path | None, typer.Option(help="Scenario file (TOML or JSON); default: the demo's.")] = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 picks a free one).")] = 8787,
    host: Annotated[str, typer.Option(help="Loopback address to bind.")] = "127.0.0.1",
) -> None:
    """Serve the simulated OpenAI-compatible models (for trying role maps by hand)."""
    from orchestrator.faces.demo import demo_scenario
    from orchestrator.sim import Scenario, bench_behaviors, serve_forever  # noqa: F401 (bench behaviours)

    def go() -> None:
        chosen = Scenario.load(scenario) if scenario else demo_scenario()
        try:
            serve_forever(chosen, host=host, port=port)
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    _guarded(go)


def main() -> None:
    try:
        # spans go out over OTLP when the standard OTEL_EXPORTER_OTLP_* variables say where
        configure_from_env(os.environ)
        app()
    except OrchestrateError as exc:  # raised outside a command body
        err.print(f"error: {' '.join(str(exc).split())}", markup=False, highlight=False)
        sys.exit(exc.exit_code)
    except KeyboardInterrupt:
        sys.exit(130)


