cd /work/live/r83
export PYTHONPATH=/work/live/r83/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --keep --out /work/live/r83/out > bench.log 2>&1
mkdir -p /work/live/r84 && cd /work/live/r84
/work/main/.venv/bin/python -m orchestrator bench live --roles live-solo --keep --out /work/live/r84/out > bench.log 2>&1
