cd /work/live/r88
export PYTHONPATH=/work/live/r88/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --roles single:live-solo --keep --out /work/live/r88/out > bench.log 2>&1
