#!/bin/bash
# r67: the 14 pinned tasks under live-routed with each place's first one-line sample at the attempt's temperature, repeats at the highest
# (a check that first_visits costs the pinned tasks nothing; code at the worktree's HEAD, see git -C code log -1)
cd /work/live/r67
export PYTHONPATH=/work/live/r67/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --keep --out /work/live/r67/out \
  --task js-button-handlers --task js-median-sort --task js-missing-await --task js-query-filter --task py-config-merge --task py-date-format --task py-id-validation --task py-paging --task py-prune-stock --task py-shared-cart --task py-sort-names --task py-swallowed-error --task sh-backup-spaces --task sh-pipeline-status > bench.log 2>&1
