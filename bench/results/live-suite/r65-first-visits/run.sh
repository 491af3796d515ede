#!/bin/bash
# r65: the eight xp-* tasks under live-routed with each place's first one-line sample at the attempt's temperature, repeats at the highest
# (code at the worktree's HEAD, 1c8ef61)
cd /work/live/r65
export PYTHONPATH=/work/live/r65/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --keep --out /work/live/r65/out \
  --task xp-catalog-sort --task xp-invoice-tax --task xp-js-label-address --task xp-js-weekly-runs \
  --task xp-logstat-slow --task xp-loyalty-tier --task xp-parcel-weight --task xp-payslip-rounding > bench.log 2>&1
