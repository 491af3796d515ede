export ORCHESTRATE_LIVE_KEY=local
export PYTHONPATH=/work/live/r51/code
cd /work/live/r51
bash /work/live/r51/code/scripts/live-model/start.sh all > servers.log 2>&1
/work/main/.venv/bin/python -m orchestrator bench live --roles /work/live/r51/live-routed-p2.toml --keep --out /work/live/r51/out \
  --task xp-catalog-sort --task xp-invoice-tax --task xp-js-label-address --task xp-js-weekly-runs \
  --task xp-logstat-slow --task xp-loyalty-tier --task xp-parcel-weight --task xp-payslip-rounding > bench.log 2>&1
