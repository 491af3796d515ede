cd /work/live/r73
export PYTHONPATH=/work/live/r73/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --keep --out /work/live/r73/out --task xp-js-weekly-runs --task xp-loyalty-tier --task xp-invoice-tax --task xp-payslip-rounding > bench.log 2>&1
