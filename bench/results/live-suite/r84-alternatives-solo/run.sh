# r84 ran from r83's run.sh (the second half), from the same worktree:
cd /work/live/r84
export PYTHONPATH=/work/live/r83/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-solo --keep --out /work/live/r84/out > bench.log 2>&1
