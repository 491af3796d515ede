export ORCHESTRATE_LIVE_KEY=local
export PYTHONPATH=/work/live/r60/code
cd /work/live/r60
bash /work/live/r60/code/scripts/live-model/start.sh all > servers.log 2>&1
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --keep --out /work/live/r60/out \
  --task xp-catalog-sort --task xp-invoice-tax --task xp-js-label-address --task xp-js-weekly-runs \
  --task xp-logstat-slow --task xp-loyalty-tier --task xp-parcel-weight --task xp-payslip-rounding > bench.log 2>&1
