cd /work/live/r81
export PYTHONPATH=/work/live/r80/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-solo --keep --out /work/live/r81/out --task xp-catalog-sort --task xp-invoice-tax --task xp-js-label-address --task xp-js-weekly-runs --task xp-logstat-slow --task xp-loyalty-tier --task xp-parcel-weight --task xp-payslip-rounding --task sh-pipeline-status > bench.log 2>&1
