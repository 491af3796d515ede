cd /work/live/r78
while [ ! -f /work/live/r77/out/bench.json ] || [ ! -f /tmp/go-r78 ]; do sleep 10; done
sleep 5
export PYTHONPATH=/work/live/r78/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --keep --out /work/live/r78/out --task js-button-handlers --task js-missing-await --task py-config-merge --task py-id-validation --task py-paging --task py-shared-cart > bench.log 2>&1
