cd /work/live/r89s
export PYTHONPATH=/work/live/r89s/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles single:live-solo --keep --out /work/live/r89s/out > bench.log 2>&1
