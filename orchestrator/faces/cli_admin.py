"""The ``orchestrate`` commands around the runs: the role map (``roles``, ``init``, ``trust``,
``schema``), the runs after the fact (``runs``, ``clean``, ``apply``), the ``quota``, the fleet
(``submit``, ``worker``, ``jobs``), ``bench``, and the servers (``mcp``, ``sim``). Each parses
its options into a library call and prints what comes back.
"""

from __future__ import annotations

import os
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Annotated, Any

import typer

from orchestrator.errors import UsageError
from orchestrator.faces.cliapp import (
    DbOpt,
    JsonOpt,
    Machine,
    RepoOpt,
    RolesOpt,
    SetOpt,
    TeamOpt,
    TrustOpt,
    api,
    app,
    guarded,
    maybe_repo,
    need_database,
    out,
    run_async,
    trusting,
)
from orchestrator.faces.render import (
    print_jobs,
    print_quota,
    print_runs,
    print_shared_runs,
    print_trust,
)
from orchestrator.workspace.repo import repo_root


@app.command("roles")
def roles_cmd(
    repo: RepoOpt = None,
    roles: RolesOpt = [],  # noqa: B006 (typer reads the default)
    set_: SetOpt = [],  # noqa: B006
    team: TeamOpt = None,
    trust_repo_config: TrustOpt = False,
    explain: Annotated[bool, typer.Option("--explain", help="Show which layer set each value.")] = False,
    as_json: JsonOpt = False,
) -> None:
    """The pipeline and its roles (kind, agent file, model, tier, tools), after every layer and
    override; --explain shows where each value came from."""
    from orchestrator.config.layers import resolve
    from orchestrator.config.trust import user_config_dir
    from orchestrator.faces.rolesview import explain_data, print_explain, print_roles, roles_data

    def go(trusted: bool) -> Any:
        top = repo_root(repo) if repo is not None else maybe_repo()
        found = resolve(repo=top, files=roles, sets=set_, team=team, env=os.environ,
                        user_dir=user_config_dir(os.environ), trust_repo=trusted)
        return found, (explain_data(found) if explain else roles_data(found))

    found, data = guarded(lambda: trusting(go, interactive=not as_json,
                                           trust_flag=trust_repo_config), Machine(as_json))
    if as_json:
        out.print_json(data=data)
    elif explain:
        print_explain(out, found)
    else:
        guarded(lambda: print_roles(out, found))


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

    path, trusted = guarded(go, Machine(as_json))
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
    what: Annotated[str, typer.Argument(help="events (any line --events prints: an event of events.jsonl, the result line, the error line), result (a RunResult, what run --json prints) or error (what --json prints instead when a command fails).")] = "events",
) -> None:
    """Print a JSON Schema for bot authors: the lines of ``--events``, a run's result, or the
    error object."""
    def go() -> dict[str, Any]:
        from orchestrator.results import ErrorLine, RunResult, stream_schema

        if what == "events":
            return stream_schema()
        if what == "result":
            return RunResult.model_json_schema(mode="serialization")
        if what == "error":
            return ErrorLine.model_json_schema(mode="serialization")
        raise UsageError(f"schema {what!r}: expected events, result or error")

    out.print_json(data=guarded(go), highlight=False)


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

    data = guarded(go, Machine(as_json))
    if as_json:
        out.print_json(data=data)
    else:
        print_trust(out, data)


@app.command()
def runs(repo: RepoOpt = None, database_url: DbOpt = None, as_json: JsonOpt = False) -> None:
    """List the runs in the repository (id, state, branch, task, cost); with a shared database
    (--database-url or ORCHESTRATE_DATABASE_URL), the fleet's runs from any machine."""
    from orchestrator.runs import claims_by_model

    if database_url:
        shared = guarded(lambda: api.shared_runs(database_url=database_url), Machine(as_json))
        if as_json:
            out.print_json(data=[r.document() for r in shared])
        else:
            print_shared_runs(out, shared)
        return
    found = guarded(lambda: api.runs(repo=repo), Machine(as_json))
    if as_json:
        out.print_json(data=[r.summary() for r in found])
        return
    print_runs(out, found, claims_by_model(found))


@app.command()
def clean(repo: RepoOpt = None, as_json: JsonOpt = False) -> None:
    """Remove the worktrees of finished runs; branches and artefacts stay."""
    removed = guarded(lambda: api.clean(repo=repo), Machine(as_json))
    if as_json:
        out.print_json(data={"removed": removed})
    else:
        out.print(f"removed {len(removed)} worktree(s)" + (": " + ", ".join(removed) if removed else ""))


@app.command("apply")
def apply_cmd(
    run_id: Annotated[str, typer.Argument(help="The run whose branch to merge.")],
    repo: RepoOpt = None,
    allow: Annotated[list[str], typer.Option(
        "--allow", metavar="PATH",
        help="Merge this path's change even though it runs by itself (a hook, .gitattributes, "
             ".lfsconfig ...); a directory allows what is under it. Repeat per path.",
    )] = [],  # noqa: B006
    allow_git_config: Annotated[bool, typer.Option(
        "--allow-git-config",
        help="Merge every such change without naming it (prefer --allow PATH).",
    )] = False,
    guard_ci: Annotated[bool | None, typer.Option(
        "--guard-ci/--no-guard-ci",
        help="Refuse CI workflow changes too (default: git config orchestrate.guardCi).",
    )] = None,
    as_json: JsonOpt = False,
) -> None:
    """Merge a run's branch into your current branch (refuses on a dirty checkout, conflicts, or
    changes to files that run programs by themselves, unless allowed by name). Hooks do not run
    during the merge."""
    sha = guarded(lambda: api.apply(run_id, repo=repo, allow=allow,
                                    allow_git_config=allow_git_config, guard_ci=guard_ci),
                  Machine(as_json, run_id))
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
    report = guarded(lambda: api.quota(repo=repo, role_files=roles, sets=set_, team=team,
                                       database_url=database_url,
                                       trust_repo_config=trust_repo_config, days=days),
                     Machine(as_json))
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
    agent: Annotated[list[Path], typer.Option(
        "--agent", help="An agent definition file (.md) the job carries; repeat. Those of "
        "your agents/ folder that the role map names go with it anyway.")] = [],  # noqa: B006
    as_json: JsonOpt = False,
) -> None:
    """Queue TASK for the fleet (`orchestrate worker` on any machine takes it)."""
    from orchestrator.faces import fleet

    def go() -> int:
        return run_async(fleet.submit(task, repo, database_url=need_database(database_url),
                                      role_files=roles, sets=set_, team=team,
                                      trust_repo_config=trust_repo_config,
                                      agent_files=agent))

    job_id = guarded(go, Machine(as_json))
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
    allow_set: Annotated[list[str], typer.Option(
        "--allow-set", help="A protected key a job may set (providers.*.base_url, sandbox, "
        "policy.allow, trust_repo_config ...); repeat. Also [fleet] job_may_set.")] = [],  # noqa: B006
    push: Annotated[bool, typer.Option(
        "--push", help="Push each run's branch to the job's origin as orchestrate/<run-id>.")] = False,
    heartbeat: Annotated[float, typer.Option(help="Seconds between heartbeats.")] = 2.0,
    stalled_after: Annotated[float, typer.Option(
        help="A job whose worker was silent this long is queued again.")] = 10.0,
    log_json: Annotated[bool | None, typer.Option(
        "--log-json/--log-console", help="Log JSON lines (default when stderr is not a terminal).")] = None,
) -> None:
    """Take queued runs from the shared database until stopped (SIGTERM or Ctrl-C: the current
    runs finish, no new one is taken)."""
    from orchestrator.faces import fleet_worker
    from orchestrator.faces.logs import setup_logging

    def go() -> None:
        url = need_database(database_url)
        cache = (cache_dir or Path("~/.cache/orchestrate/repos")).expanduser()
        setup_logging(json=log_json)
        run_async(fleet_worker.run_worker(fleet_worker.WorkerConfig(
            database_url=url, cache_dir=cache, concurrency=concurrency, drain=drain,
            allow_set=tuple(allow_set), push=push, heartbeat_s=heartbeat,
            stalled_after_s=stalled_after)))

    guarded(go)


@app.command()
def jobs(
    database_url: DbOpt = None,
    as_json: JsonOpt = False,
    prune: Annotated[bool, typer.Option(
        "--prune", help="Remove finished jobs and runs (journal, run files, checkpoints) "
        "older than --older-than days; never a running one.")] = False,
    older_than: Annotated[float | None, typer.Option(
        "--older-than", help="Days: with --prune, what ended longer ago than this goes.")] = None,
    dry_run: Annotated[bool, typer.Option(
        "--dry-run", help="With --prune: count what would go, remove nothing.")] = False,
) -> None:
    """The fleet's queue: every job, its state, attempts, and whether its worker went silent."""
    from orchestrator.faces import fleet

    if prune or older_than is not None:
        _prune_jobs(database_url, older_than, dry_run, as_json)
        return
    found = guarded(lambda: run_async(fleet.jobs(need_database(database_url))),
                    Machine(as_json))
    if as_json:
        out.print_json(data=[asdict(j) for j in found])
    else:
        print_jobs(out, found)


def _prune_jobs(database_url: str | None, older_than: float | None, dry_run: bool,
                as_json: bool) -> None:
    from orchestrator.faces import fleet_prune

    def go() -> fleet_prune.Pruned:
        if older_than is None:
            raise UsageError("--prune needs --older-than DAYS: what ended longer ago goes, "
                             "e.g. --prune --older-than 30")
        return fleet_prune.prune(need_database(database_url), older_than, dry_run=dry_run)

    done = guarded(go, Machine(as_json))
    if as_json:
        out.print_json(data={**asdict(done), "dry_run": dry_run})
    else:
        verb = "would remove" if dry_run else "removed"
        out.print(f"{verb} {done.jobs} finished jobs and {done.runs} finished runs "
                  f"({done.rows} journal, file and checkpoint rows) older than "
                  f"{done.older_than_days:g} days")


@app.command()
def bench(
    suite: Annotated[str, typer.Argument(help="Suite directory, or a packaged suite: builtin, live, builtin-explore, requests-explore, log-explore.")],
    roles: Annotated[list[str], typer.Option("--roles", help="Role map file or packaged name (bench-careful, bench-fast, live-split, live-solo); repeat to compare.")] = [],  # noqa: B006
    repeat: Annotated[int, typer.Option("--repeat", help="Runs per task and role map.")] = 1,
    jobs: Annotated[int, typer.Option("--jobs", help="Runs at once (timings are fairest with 1).")] = 1,
    out_dir: Annotated[Path | None, typer.Option("--out", help="Where JSON, CSV and PNG go (default ./bench-results).")] = None,
    task: Annotated[list[str], typer.Option("--task", help="Only these tasks.")] = [],  # noqa: B006
    sim_models: Annotated[bool, typer.Option("--sim", help="Serve the simulated bench models (default maps: bench-careful, bench-fast).")] = False,
    keep: Annotated[bool, typer.Option("--keep", help="Keep each run's repository and workspace under OUT/runs/.")] = False,
    cold: Annotated[bool, typer.Option("--cold/--warm", help="Empty each local model server's prompt cache before each run (one run at a time), so no map reads the prompt the map before asked.")] = True,
    as_json: JsonOpt = False,
) -> None:
    """Time to working code per role map: pass rate, wall time and cost, compared at equal accuracy.

    A role map named single:MAP runs MAP's builder model alone: one prompt with the repository's
    files, the whole changed files back, checked by the same acceptance commands."""
    from orchestrator.benchmark import bench_main

    code = guarded(lambda: bench_main(suite, roles, repeat=repeat, jobs=jobs, out=out_dir,
                                      as_json=as_json, sim=sim_models, tasks=task, keep=keep,
                                      console=out, cold=cold),
                   Machine(as_json))
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

        top = repo_root(repo) if repo is not None else maybe_repo()
        serve(ServerSettings.checked(top, role_files=roles, sets=set_, team=team),
              "http" if http else "stdio", port)

    guarded(go)


@app.command()
def sim(
    scenario: Annotated[Path | None, typer.Option(help="Scenario file (TOML or JSON); default: the demo's.")] = None,
    port: Annotated[int, typer.Option(help="Port on 127.0.0.1 (0 picks a free one).")] = 8787,
    host: Annotated[str, typer.Option(help="Loopback address to bind.")] = "127.0.0.1",
) -> None:
    """Serve the simulated OpenAI-compatible models (for trying role maps by hand)."""
    from orchestrator.benchmark.behaviors import register_behaviors
    from orchestrator.faces.demo import demo_scenario
    from orchestrator.sim import Scenario, serve_forever

    def go() -> None:
        register_behaviors()  # a scenario may name the bench's (bench-sim.toml does)
        chosen = Scenario.load(scenario) if scenario else demo_scenario()
        try:
            serve_forever(chosen, host=host, port=port)
        except ValueError as exc:
            raise UsageError(str(exc)) from None

    guarded(go)

