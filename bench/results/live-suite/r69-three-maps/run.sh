#!/bin/bash
# r69: the whole live suite (22 tasks) under live-routed, live-solo and single:live-solo in one draw,
# on the code with each place's first one-line sample at the attempt's temperature
# (code at the worktree's HEAD, 72dce0e)
cd /work/live/r69
export PYTHONPATH=/work/live/r69/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --roles single:live-solo \
  --keep --out /work/live/r69/out > bench.log 2>&1
