"""What people see: the run summary, the explore answer, runs, quota and trust, via rich
(the live progress table is ``progress.py``).

Kept apart from the CLI's parsing so that the API never prints and the pictures can change
without touching the commands. Every byte of text a command prints goes through ``visible``
(``TerminalConsole`` applies it to whatever it renders, ``json_text`` to JSON): a model's text
cannot reach the terminal as a control sequence (OSC 52 clipboard writes, OSC 8 links, CSI 3J,
SGR 8 concealed text ...).
"""

from __future__ import annotations

import json as jsonlib
from collections.abc import Iterable, Mapping, Sequence
from typing import IO, TYPE_CHECKING, Any

from rich.console import Console, ConsoleOptions, RenderableType
from rich.highlighter import JSONHighlighter
from rich.markup import escape
from rich.segment import Segment
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:
    from orchestrator.results import ExploreResult, RunResult
    from orchestrator.state import Attempt, Race, RoleUsage

# C0 controls but tab and newline as their Unicode pictures (ESC is ␛), DEL as ␡, C1 controls
# and the bidirectional overrides (which reorder what a line seems to say) as escapes.
_SHOWN: dict[int, str] = {c: chr(0x2400 + c) for c in range(0x20) if c not in (0x09, 0x0A)}
_SHOWN[0x7F] = chr(0x2421)
_SHOWN.update({c: f"\\x{c:02x}" for c in range(0x80, 0xA0)})
_SHOWN.update({c: f"\\u{c:04x}" for c in (*range(0x202A, 0x202F), *range(0x2066, 0x206A))})
# in JSON: what json.dumps leaves raw (DEL, C1, bidi) as \u escapes, so the JSON stays valid
_JSON_SHOWN: dict[int, str] = {c: f"\\u{c:04x}" for c in (
    0x7F, *range(0x80, 0xA0), *range(0x202A, 0x202F), *range(0x2066, 0x206A))}


def visible(text: str) -> str:
    """``text`` with every terminal control character shown, not obeyed (newlines and tabs kept).

    The one neutraliser of the command line: a model's plan, answer, claim, question or error
    goes through it before any terminal sees it.
    """
    if text.isprintable():
        return text
    return text.replace("\r\n", "\n").translate(_SHOWN)  # a lone CR could overwrite a line


def json_text(data: Any, *, indent: int | None = None) -> str:
    """``data`` as JSON a terminal shows as written: controls escaped as ``\\uXXXX``."""
    return jsonlib.dumps(data, indent=indent, ensure_ascii=False, default=str).translate(_JSON_SHOWN)


class TerminalConsole(Console):
    """A rich ``Console`` whose text is ``visible``: strings before their layout, every other
    renderable's segments as they are rendered (rich's own control segments, the live display's
    cursor moves, are kept)."""

    def render_str(self, text: str, **kwargs: Any) -> Text:
        return super().render_str(visible(text), **kwargs)

    def render(self, renderable: RenderableType,
               options: ConsoleOptions | None = None) -> Iterable[Segment]:
        for segment in super().render(renderable, options):
            if segment.control or segment.text.isprintable():
                yield segment
            else:
                yield Segment(visible(segment.text), segment.style)

    def print_json(self, json: str | None = None, *, data: Any = None,  # noqa: A002 (rich's name)
                   indent: int | str | None = 2, highlight: bool = True, **_: Any) -> None:
        value = jsonlib.loads(json) if json is not None else data
        text = Text(json_text(value, indent=indent if isinstance(indent, int) else 2))
        self.print(JSONHighlighter()(text) if highlight else text, soft_wrap=True)


def terminal_console(*, stderr: bool = False, file: IO[str] | None = None,
                     **kwargs: Any) -> TerminalConsole:
    """The console every command prints through."""
    return TerminalConsole(stderr=stderr, file=file, **kwargs)


def gauge(fraction: float, width: int = 10) -> str:
    filled = min(width, round(fraction * width))
    return "█" * filled + "░" * (width - filled) + f" {fraction:4.0%}"


def _skipped(plan: bool, explore: bool, from_task: bool, unasked: bool) -> list[str]:
    """The roles a run did not need, and why."""
    return ([("plan      not asked: the first one-shot, asked before the planner "
              "(run.first_build = before_plan), ended the build")] if plan else []) + (
        [("plan      not asked: the failing tests point at the code; the attempts went on "
          "from the failure (run.plan_when_pinned = false)")] if unasked else []) + (
        [("plan      not asked: the failure pins no code; the explorers were asked about the "
          "names the task quotes (run.unpinned_questions = task)")] if from_task else []) + (
        [("explore   skipped: the failing tests already point at the code "
          "(run.explore_when_pinned = true explores anyway)")] if explore else [])


def print_run_summary(console: Console, result: RunResult, *, simulated: bool = False) -> None:
    from orchestrator.faces.claimviews import model_table

    ok = result.status == "succeeded"
    if result.status == "awaiting_approval":
        if result.plan is not None:
            print_plan(console, result.plan)
        console.print(f"[bold yellow]⏸ paused[/]: {escape(result.reason)}", highlight=False)
        return
    label = {"succeeded": "✔ task done", "stopped": "■ run stopped"}.get(
        result.status, "✘ task not achieved")
    if ok and result.losses:
        label += f" with {len(result.losses)} role session(s) lost (exit 3)"
    console.print(f"[bold {'green' if ok else 'red'}]{label}[/]: {escape(result.reason)}",
                  highlight=False)
    if simulated:
        console.print("(models simulated by the local simulator)")
    console.print(f"run       {result.run_id}")
    console.print(f"branch    {result.branch}" + (f" @ {result.commit[:10]}" if result.commit else " (no commit)"))
    if result.dirty:
        console.print("checkout  had uncommitted changes: "
                      + ("included (first commit on the branch)" if result.included_dirty
                         else "NOT included (use --include-dirty)"))
    console.print(f"artefacts {result.run_dir}")
    box = result.sandbox.summary() if result.sandbox else "none recorded"
    console.print(f"sandbox   {box}"
                  + (f" · {result.policy_violations} policy violation(s) refused"
                     if result.policy_violations else ""), highlight=False, markup=False)
    if result.diff_stat.strip():
        console.print(result.diff_stat.rstrip(), highlight=False, markup=False)
    if result.tests is not None:
        for check in result.tests.checks:
            mark = "pass" if check.exit_code == 0 else f"FAIL (exit {check.exit_code})"
            console.print(f"test      {check.command}: {mark}", highlight=False, markup=False)
    _print_attempts(console, result.attempt_log)
    console.print(_per_role_table(result.per_role))
    if result.races:
        console.print(_race_table(result.races))
    for line in _skipped(result.plan_skipped, result.explore_skipped, result.plan_from_task,
                         result.plan_unasked):
        console.print(line, highlight=False, markup=False)
    if result.explorers:
        console.print(_explorer_table(result))
    if any(s.submitted for s in result.claims_by_model.values()):
        console.print(model_table(result.claims_by_model))
    split = result.time_split
    if split:
        console.print(
            f"time      {split['wall_s']:.1f}s wall = model {split['model_s']:.1f}s + tools "
            f"{split['tool_s']:.1f}s + orchestration {split['orchestration_s']:.2f}s · "
            f"cost ${result.cost_usd:.4f}"
        )
    for w in result.warnings:
        console.print(f"[yellow]warning[/] {escape(w)}", highlight=False)


def _per_role_table(per_role: Mapping[str, RoleUsage | Mapping[str, Any]]) -> Table:
    """A result's per-role usage, or a report's (``show``: plain JSON)."""
    t = Table(title="per role", show_edge=False)
    for col in ("role", "model", "tier", "calls", "prompt", "cached", "output", "reasoning",
                "tok/s", "cost $"):
        left = col in {"role", "model", "tier"}
        t.add_column(col, justify="left" if left else "right", overflow="fold", no_wrap=not left)
    from orchestrator.state import (
        RoleUsage,  # here: printing a role map needs none of the engine's models
    )

    for role, raw in per_role.items():
        row = raw if isinstance(raw, RoleUsage) else RoleUsage.model_validate(raw)
        tps = row.tokens_per_s
        t.add_row(role, ", ".join(row.models), ", ".join(row.tiers), str(row.calls),
                  str(row.prompt_tokens), str(row.cached_tokens), str(row.output_tokens),
                  str(row.reasoning_tokens), f"{tps:.0f}" if tps else "-", f"{row.cost_usd:.4f}")
    return t


def _print_attempts(console: Console, log: Sequence[Attempt]) -> None:
    """The build attempts in one line: the ladder's rungs as they ran."""
    if log:
        console.print("attempts  " + " → ".join(_attempt_cell(a) for a in log),
                      highlight=False, markup=False)


def _attempt_cell(a: Attempt) -> str:
    """``one_shot (unchanged, 12.3s)``, ``tool_loop (passed, 40.1s, 2 samples)``, and the
    passing sample's operator when no model wrote it."""
    said = ["passed" if a.passed else "unchanged" if not a.changed else "failed"]
    said.append(f"{a.duration_s:.1f}s")
    if a.samples:
        said.append(f"{len(a.samples)} sample(s)")
    said += [f"passed by a mechanical edit ({s.mutant}), written by no model"
             for s in a.samples if s.passed and s.mutant]
    return f"{a.strategy} ({', '.join(said)})"


def _race_table(races: Sequence[Race | Mapping[str, Any]]) -> Table:
    """One row per candidate build of each race (a result's, or a report's plain JSON for
    ``show``): how it ended, how long, how big its change."""
    from orchestrator.state import (
        Race,  # here: printing a role map needs none of the engine's models
    )

    t = Table(title="candidate builds (first passing wins; the rest are cancelled)",
              show_edge=False)
    for col in ("round", "#", "temp", "status", "time s", "files", "lines", "note"):
        t.add_column(col, justify="left" if col in {"status", "note"} else "right")
    for raw in races:
        race = raw if isinstance(raw, Race) else Race.model_validate(raw)
        for c in race.candidates:
            kept = " ◀ kept" if c.index == (race.winner or 0) else ""
            temp = "-" if c.temperature is None else f"{c.temperature:g}"
            note = c.error or (", ".join(c.failing) and "failed: " + ", ".join(c.failing))
            t.add_row(str(race.round), str(c.index), temp, c.status + kept, f"{c.duration_s:.1f}",
                      str(c.files_changed), str(c.diff_lines), escape(note[:80]))
    return t


def _explorer_table(result: RunResult) -> Table:
    t = Table(title="explorers (claims submitted / verified / adding nothing / dropped)",
              show_edge=False)
    for col in ("#", "question", "model", "sub", "ok", "≡", "drop", "note"):
        t.add_column(col)
    for r in result.explorers:
        note = r.error or (r.drop_reasons[0] if r.drop_reasons else "")
        t.add_row(str(r.index + 1), escape(r.question[:60]), escape(r.model or "-"),
                  str(r.submitted), str(r.verified), str(r.adds_nothing), str(r.dropped),
                  escape(note))
    return t


def print_explore(console: Console, result: ExploreResult) -> None:
    from orchestrator.faces.claimviews import model_table

    console.print(f"[bold]{escape(result.question)}[/]", highlight=False)
    for r in result.explorers:
        console.print(f"\n[bold]Q{r.index + 1}[/] {escape(r.question)}", highlight=False)
        if r.error:
            console.print(f"  [red]explorer failed:[/] {escape(r.error)}", highlight=False)
            continue
        console.print(f"  {escape(r.answer.strip()) or '(no answer)'}", highlight=False)
        for claim in r.claims:
            refs = ", ".join(f"{c.path}:{c.start_line}-{c.end_line}" for c in claim.citations)
            console.print(f"  • {escape(claim.text)} [dim]\\[{escape(refs)}][/]", highlight=False)
            quote = claim.citations[0].quote.strip().splitlines()
            for line in quote[:4]:
                console.print(f"      [dim]│ {escape(line)}[/]", highlight=False)
        console.print(f"  [dim]claims: {r.submitted} submitted, {r.verified} verified, "
                      f"{r.dropped} dropped{' · ' + r.model if r.model else ''}[/]",
                      highlight=False)
        for reason in r.drop_reasons[:3]:
            console.print(f"  [dim]{escape(reason)}[/]", highlight=False)
    if any(s.submitted for s in result.claims_by_model.values()):
        console.print(model_table(result.claims_by_model))
    verified = sum(r.verified for r in result.explorers)
    console.print(f"\n{len(result.explorers)} explorers · {verified} verified claims · "
                  f"{len(result.failures)} failed · {result.time_split.get('wall_s', 0):.1f}s · "
                  f"${result.cost_usd:.4f} · record {escape(result.run_dir)}", highlight=False)
    for w in result.warnings:
        console.print(f"[yellow]warning[/] {escape(w)}", highlight=False)


def print_runs(console: Console, runs: list, claims: dict | None = None) -> None:
    """The runs, then (when any explorer made claims) each explorer model's record over them."""
    from orchestrator.faces.claimviews import model_table, run_claims_cell

    t = Table(title="runs", show_edge=False)
    for col in ("run", "state", "age", "branch", "worktree", "cost $", "claims ok", "attempts",
                "task"):
        t.add_column(col)
    for r in runs:
        t.add_row(r.run_id, r.state, r.age, r.branch or "(explore)", "yes" if r.has_worktree else "-",
                  f"{r.cost_usd:.4f}", escape(run_claims_cell(r.claims)),
                  escape(" ".join(getattr(r, "attempts", ())) or "-"), escape(r.task[:60]))
    console.print(t)
    if claims:
        console.print(model_table(claims, title=f"explorer claims per model over these {len(runs)} run(s)"))


def print_plan(console: Console, plan) -> None:
    console.print(f"[bold]plan[/]: {escape(plan.goal)}", highlight=False)
    for i, step in enumerate(plan.steps, 1):
        console.print(f"  {i}. {escape(step)}", highlight=False)
    for q in plan.questions:
        console.print(f"  ? {escape(q)}", highlight=False)
    for c in plan.acceptance:
        console.print(f"  $ {escape(c)}", highlight=False)


def print_details(console: Console, details) -> None:
    from orchestrator.faces.claimviews import model_table, verdict_lines

    report = details.report
    console.print(f"run {details.run_id}: [bold]{details.state}[/]"
                  + (f" — {escape(report.get('reason', ''))}" if report else ""), highlight=False)
    if report:
        console.print(f"task: {escape(report.get('task', ''))}", highlight=False)
        console.print(f"branch {report.get('branch') or '(explore: none)'} · "
                      f"cost ${report.get('cost_usd', 0):.4f} · {len(details.calls)} calls",
                      highlight=False)
        box = report.get("sandbox")
        if box:
            from orchestrator.sandbox import SandboxInfo

            info = SandboxInfo.model_validate(box)
            console.print(f"sandbox {info.summary()}", highlight=False, markup=False)
            if info.limits:
                lim = info.limits
                console.print(f"  limits: file {lim.file_size_mb} MiB · memory {lim.memory_mb} MiB"
                              f" · cpu {lim.cpu_s} s · processes {lim.processes} "
                              f"({info.process_cap})", highlight=False, markup=False)
            if info.hidden:
                console.print(f"  hidden: {', '.join(info.hidden)}", highlight=False,
                              markup=False)
        if report.get("per_role"):
            console.print(_per_role_table(report["per_role"]))
        if report.get("races"):
            console.print(_race_table(report["races"]))
        for line in _skipped(bool(report.get("plan_skipped")),
                             bool(report.get("explore_skipped")),
                             bool(report.get("plan_from_task")),
                             bool(report.get("plan_unasked"))):
            console.print(line, highlight=False, markup=False)
        if report.get("explorers"):
            console.print("claims (✔ verified · ≡ adds nothing · ✘ dropped):")
            for line in verdict_lines(report["explorers"]):
                console.print(escape(line), highlight=False)
        if report.get("claims_by_model"):
            console.print(model_table(report["claims_by_model"]))
    t = Table(title="sessions", show_edge=False)
    for col in ("session", "role", "model", "purpose", "peak context", "status", "forks"):
        t.add_column(col)
    for n in details.sessions:
        forks = "; ".join(f"→ {f.child}: {f.reason} ({f.tokens_before}→{f.tokens_after} tok)"
                          for f in n.forks)
        indent = "  " * n.session.count(".")
        t.add_row(indent + n.session, str(n.role or "-"), str(n.model or "-"), n.purpose,
                  gauge(n.peak_context), n.status, escape(forks) or "-")
    console.print(t)
    c = Table(title="calls", show_edge=False)
    for col in ("session", "requested", "served", "api", "tier", "prompt", "out", "reason",
                "ttft s", "s", "$"):
        c.add_column(col)
    for call in details.calls:
        tier = f"{call.requested_tier or '-'}→{call.served_tier or '?'}"
        c.add_row(str(call.session), call.requested_model, call.served_model or "?",
                  call.api or "-", tier, str(call.prompt_tokens),
                  f"{call.output_tokens}" + (f" ({call.stopped})" if call.stopped else ""),
                  str(call.reasoning_tokens),
                  f"{call.ttft_s:.2f}" if call.ttft_s is not None else "-",
                  f"{call.duration_s:.2f}", f"{call.cost_usd:.4f}")
    console.print(c)


def print_quota(console: Console, rows: list, claims: list | None = None) -> None:
    """Today's use per model; then, from ``claims`` (ledger ``ClaimRow``s), explorer truthfulness."""
    _print_usage(console, rows)
    if claims:
        from orchestrator.evidence.claimstats import ClaimStats
        from orchestrator.faces.claimviews import model_table

        stats = {r.model: ClaimStats(explorers=r.explorers, **r.counts) for r in claims}
        console.print(model_table(stats, title=f"explorer claims per model since {claims[0].since} "
                                               "(UTC; all runs of this user)"))


def _print_usage(console: Console, rows: list) -> None:
    t = Table(title="quota today (UTC)", show_edge=False)
    for col in ("model", "calls", "tokens", "cap", "usd", "exhausted until"):
        t.add_column(col)
    for r in rows:
        until = r.exhausted_until.isoformat(timespec="minutes") if r.exhausted_until else "-"
        t.add_row(r.model, str(r.calls), f"{r.tokens:,}", f"{r.cap_tokens:,}" if r.cap_tokens else "-",
                  f"{r.usd:.4f}", until + (f" ({escape(r.reason)})" if r.reason else ""))
    console.print(t if rows else "no model use recorded today")


def print_jobs(console: Console, jobs: list) -> None:
    t = Table(title="fleet jobs", show_edge=False)
    for col in ("job", "status", "attempts", "stalled", "run", "state", "host", "cost $",
                "commit", "repo", "task"):
        t.add_column(col)
    for j in jobs:
        t.add_row(str(j.job_id), j.status, str(j.attempts), "STALLED" if j.stalled else "",
                  j.run_id or "-", j.state or "-", escape(j.host or "-"),
                  "-" if j.cost_usd is None else f"{j.cost_usd:.4f}", (j.commit or "-")[:10],
                  escape(j.repo), escape(j.task[:40]))
    console.print(t if jobs else "the queue is empty")


def print_shared_runs(console: Console, runs: list) -> None:
    """The fleet's runs from the shared registry (``runs`` with a database)."""
    t = Table(title="runs (shared registry)", show_edge=False)
    for col in ("run", "state", "updated", "branch", "commit", "host", "job", "cost $", "task"):
        t.add_column(col)
    for r in runs:
        t.add_row(r.run_id, r.state, r.updated_at.strftime("%Y-%m-%d %H:%M:%S"), r.branch,
                  (r.commit or "-")[:10], escape(r.host), str(r.job_id or "-"),
                  f"{r.cost_usd:.4f}", escape(r.task[:50]))
    console.print(t if runs else "no runs in the shared registry")


def print_trust_request(console: Console, exc: Any) -> None:
    """What an untrusted repository config would change, before asking to trust it."""
    state = "changed since you trusted it" if exc.changed else "is not trusted yet"
    console.print(f"[bold yellow]{escape(str(exc.file))}[/] {state}; it sets:", highlight=False)
    for key, value in exc.keys:
        console.print(f"  {escape(key)} = {escape(repr(value))}", highlight=False)
    console.print("These keys decide where your API keys are sent and what commands may run.")


def print_trust(console: Console, data: dict) -> None:
    """The result of ``orchestrate trust``: what is trusted now, or the list of trusted repos."""
    if "trusted" in data:
        for rec in data["trusted"]:
            files = ", ".join(f"{n} ({h[:12]})" for n, h in rec["files"].items()) or "no files"
            console.print(f"{escape(rec['repo'])}: {escape(files)} · since {rec['trusted_at']}",
                          highlight=False)
        if not data["trusted"]:
            console.print("no trusted repositories")
        return
    if "revoked" in data:
        console.print(("no longer trusted: " if data["revoked"] else "was not trusted: ")
                      + escape(data["repo"]), highlight=False)
        return
    if not data["files"]:
        console.print(f"{escape(data['repo'])} has no roles.toml: nothing needs trust",
                      highlight=False)
    for f in data["files"]:
        console.print(f"trusted {escape(f['path'])} (sha256 {f['sha256'][:12]})", highlight=False)
        for item in f["protected"]:
            console.print(f"  {escape(item['key'])} = {escape(repr(item['value']))}",
                          highlight=False)
        if not f["protected"]:
            console.print("  (it sets no key that needs trust today)")
    for path in data["agent_overrides"]:
        console.print(f"agent prompt {escape(path)} (replaces an agent file of yours of the "
                      "same name only while trusted)",
                      highlight=False)
    console.print(f"recorded in {escape(data['store'])}; a change to the file needs trust again",
                  highlight=False)
