export ORCHESTRATE_LIVE_KEY=local
export PYTHONPATH=/work/live/r62/code
cd /work/live/r62
bash /work/live/r62/code/scripts/live-model/stop.sh > servers.log 2>&1
bash /work/live/r62/code/scripts/live-model/start.sh all >> servers.log 2>&1
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --keep --out /work/live/r62/out > bench.log 2>&1
