"""Probe: first one-shot prompt variants for a live task, each sent to the 1.5B at temp 0."""

import glob
import json
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from pathlib import Path

from openai import OpenAI

from orchestrator.benchmark.single import render_prompt, repo_files
from orchestrator.config.prompts import text
from orchestrator.engine.oneshot import messages, shown_files
from orchestrator.engine.preflight import localize_worktree
from orchestrator.engine.replyfiles import parse_files
from orchestrator.localize.localization import Check

SUITE = Path("/work/live-wt/orchestrator/benchmark/suites/live")
client = OpenAI(base_url="http://127.0.0.1:8090/v1", api_key="x")


def goal_of(task):
    runs = glob.glob(f"/work/live/r5/suite/runs/*/*-{task}-live-routed-r1/workspaces/*/report.json")
    if not runs:
        return ""
    r = json.load(open(runs[0]))
    return (r.get("plan") or {}).get("goal", "")


def run(repo, cmds, changed, shown_all):
    tmp = Path(tempfile.mkdtemp())
    r2 = tmp / "r"
    shutil.copytree(repo, r2)
    n = 0
    for p, b in changed.items():
        if b != shown_all.get(p):
            (r2 / p).write_text(b)
            n += 1
    ok = all(
        subprocess.run(c, shell=True, cwd=r2, capture_output=True).returncode == 0 for c in cmds
    )
    return n, ok


variants = sys.argv[1].split(",")
for task in sys.argv[2:]:
    spec = tomllib.loads((SUITE / task / "task.toml").read_text())
    tmp = Path(tempfile.mkdtemp())
    repo = tmp / "r"
    shutil.copytree(SUITE / task / "repo", repo)
    cmds = spec["acceptance"]
    checks = []
    for c in cmds:
        p = subprocess.run(c, shell=True, cwd=repo, capture_output=True, text=True)
        checks.append(
            Check(command=c, exit_code=p.returncode, output=(p.stdout + p.stderr)[-4000:])
        )
    loc = localize_worktree(repo, checks)
    shown = shown_files(repo, loc)
    if shown is None:
        print(task, "nothing shown (not pinned)", flush=True)
        continue
    task_text = spec["instruction"]
    shown_all = {**shown.sources, **shown.tests}
    for label in variants:
        if label == "single":
            files = repo_files(repo)
            msgs = render_prompt(task_text, tuple(cmds), files)
            allf = files
        else:
            goal = goal_of(task) if label in ("goal", "goal-nofail") else ""
            kw = dict(failure=text("pipeline", "none")) if "nofail" in label else {}
            if label.startswith("facts"):
                from orchestrator.localize import facts as F

                said = F.facts(loc.reports)
                kw = dict(
                    failure=text("oneshot", "facts", facts="\n".join(f"- {f}" for f in said))
                    if said
                    else text("pipeline", "none")
                )
                if label == "facts":
                    print(kw["failure"][:300].replace("\n", " / "))
            msgs = messages(
                system=text("oneshot", "system"),
                task=task_text,
                loc=loc,
                shown=shown,
                commands=cmds,
                goal=goal,
                **kw,
            )
            allf = shown_all
        t = time.time()
        out = (
            client.chat.completions.create(
                model="qwen15",
                messages=msgs,
                temperature=float(label.split("@")[1]) if "@" in label else 0.0,
                max_tokens=800,
            )
            .choices[0]
            .message.content
        )
        changed = parse_files(out, list(allf))
        n, ok = run(repo, cmds, changed, allf)
        print(
            f"{task:18} {label:12} changed={n} pass={ok} {time.time() - t:.0f}s prompt={sum(len(m['content']) for m in msgs)}",
            flush=True,
        )
