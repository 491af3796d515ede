cd /work/live/r89
export PYTHONPATH=/work/live/r89/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --keep --out /work/live/r89/out > bench.log 2>&1
