cd /work/live/r92
export PYTHONPATH=/work/live/r92/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --keep --out /work/live/r92/out > bench.log 2>&1
