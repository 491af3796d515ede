export ORCHESTRATE_LIVE_KEY=local
export PYTHONPATH=/work/live/r61/code
cd /work/live/r61
bash /work/live/r61/code/scripts/live-model/start.sh all > servers.log 2>&1
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --keep --out /work/live/r61/out \
  --task js-button-handlers --task js-missing-await --task py-config-merge --task py-id-validation \
  --task py-paging --task py-shared-cart > bench.log 2>&1
