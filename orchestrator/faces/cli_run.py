"""The ``orchestrate`` commands that run the pipeline: ``run``, ``resume``, ``show``, ``demo``
and ``explore``. Each parses its options into the library API's call and prints the result."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from orchestrator.faces.cliapp import (
    DbOpt,
    EventsOpt,
    JsonOpt,
    Machine,
    RepoOpt,
    RolesOpt,
    SetOpt,
    TeamOpt,
    TokensOpt,
    TrustOpt,
    UsdOpt,
    api,
    app,
    emit_result,
    err,
    event_lines,
    guarded,
    out,
    run_async,
    trusting,
)
from orchestrator.faces.progress import Progress
from orchestrator.faces.render import print_details, print_explore, print_plan

if TYPE_CHECKING:
    from orchestrator.results import RunResult
    from orchestrator.state import Plan


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
    machine = Machine(as_json)
    listeners = [event_lines if events else progress.on_event, machine]

    def go(trusted: bool) -> RunResult:
        with progress:
            return run_async(
                api.arun(task, repo=repo, role_files=roles, sets=set_, team=team,
                         listeners=listeners, include_dirty=include_dirty,
                         approve_plan=approve_plan, approver=approver, max_usd=max_usd,
                         max_tokens=max_tokens, database_url=database_url,
                         trust_repo_config=trusted)
            )

    emit_result(guarded(lambda: trusting(go, interactive=not as_json,
                                         trust_flag=trust_repo_config), machine), as_json,
                events=events)


def _ask_approval(progress: Progress) -> Any:
    def ask(plan: Plan) -> bool:
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
    machine = Machine(as_json, run_id)
    listeners = [event_lines if events else progress.on_event, machine]

    def go() -> RunResult:
        with progress:
            return run_async(api.aresume(run_id, repo=repo, approve=approve, approver=approver,
                                         listeners=listeners, max_usd=max_usd,
                                         max_tokens=max_tokens, database_url=database_url))

    emit_result(guarded(go, machine), as_json, events=events)


@app.command()
def show(
    run_id: Annotated[str, typer.Argument(help="The run to show.")],
    repo: RepoOpt = None,
    as_json: JsonOpt = False,
) -> None:
    """The full record of a run: outcome, per role, per session (context peaks, forks), per call."""
    details = guarded(lambda: api.show(run_id, repo=repo), Machine(as_json, run_id))
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

    def go() -> Any:
        with progress:
            return run_async(arun_demo(workdir=workdir, listeners=[progress.on_event]))

    result, repo = guarded(go, Machine(as_json))
    if not as_json:
        err.print(f"sample repository: {repo}")
    emit_result(result, as_json, simulated=True)


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
    machine = Machine(as_json)

    def go(trusted: bool) -> Any:
        with progress:
            return run_async(api.aexplore(question, repo=repo, role_files=roles, sets=set_,
                                          team=team, parallel=parallel,
                                          listeners=[progress.on_event, machine],
                                          trust_repo_config=trusted))

    result = guarded(lambda: trusting(go, interactive=not as_json, trust_flag=trust_repo_config),
                     machine)
    if as_json:
        out.print_json(result.model_dump_json())
    else:
        print_explore(out, result)
    raise typer.Exit(result.exit_code)
