#!/bin/bash
# r70: xp-loyalty-tier under live-routed, two runs, with the leads first when the explorers verify nothing
# and the TIERS table joined to tier_for (code at the worktree's HEAD)
cd /work/live/r70
export PYTHONPATH=/work/live/r70/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --repeat 2 --keep --out /work/live/r70/out \
  --task xp-loyalty-tier > bench.log 2>&1
