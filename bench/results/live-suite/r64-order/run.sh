#!/bin/bash
# r64: the eight xp-* tasks under live-routed with the first attempt's one-line samples ordered P, L1 ... Ln, P, P
# (code at the worktree's HEAD, b5ded46)
cd /work/live/r64
export PYTHONPATH=/work/live/r64/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --keep --out /work/live/r64/out \
  --task xp-catalog-sort --task xp-invoice-tax --task xp-js-label-address --task xp-js-weekly-runs \
  --task xp-logstat-slow --task xp-loyalty-tier --task xp-parcel-weight --task xp-payslip-rounding > bench.log 2>&1
