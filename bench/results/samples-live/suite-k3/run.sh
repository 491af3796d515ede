cd /work/main/bench
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python samples.py --roles live-routed --k 3 --suite live --json /work/live/p5/samples.json > /work/live/p5/samples.log 2>&1
