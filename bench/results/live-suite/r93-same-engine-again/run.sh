cd /work/live/r93
export PYTHONPATH=/work/live/r93/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --keep --out /work/live/r93/out > bench.log 2>&1
