cd /work/live/r79
while [ ! -f /work/live/r78/out/bench.json ]; do sleep 10; done
sleep 5
export PYTHONPATH=/work/live/r78/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles /work/live/r79/live-solo-task.toml --keep --out /work/live/r79/out --task xp-catalog-sort --task xp-invoice-tax --task xp-js-label-address --task xp-js-weekly-runs --task xp-logstat-slow --task xp-loyalty-tier --task xp-parcel-weight --task xp-payslip-rounding --task sh-pipeline-status > bench.log 2>&1
