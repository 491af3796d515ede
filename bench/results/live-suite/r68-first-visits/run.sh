#!/bin/bash
# r68 (a third draw of r65, r66): the eight xp-* tasks under live-routed with each place's first one-line sample at the attempt's temperature, repeats at the highest
# (code at the worktree's HEAD, d6297c8)
cd /work/live/r68
export PYTHONPATH=/work/live/r68/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --keep --out /work/live/r68/out \
  --task xp-catalog-sort --task xp-invoice-tax --task xp-js-label-address --task xp-js-weekly-runs \
  --task xp-logstat-slow --task xp-loyalty-tier --task xp-parcel-weight --task xp-payslip-rounding > bench.log 2>&1
