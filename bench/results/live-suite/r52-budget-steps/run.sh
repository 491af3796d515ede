export ORCHESTRATE_LIVE_KEY=local
export PYTHONPATH=/work/live/r51/code
cd /work/live/r52
bash /work/live/r51/code/scripts/live-model/start.sh all > servers.log 2>&1
/work/main/.venv/bin/python -m orchestrator bench live --roles /work/live/r52/live-solo-b100.toml --keep --out /work/live/r52/out-solo --task xp-parcel-weight > bench-solo.log 2>&1
/work/main/.venv/bin/python -m orchestrator bench live --roles /work/live/r52/live-routed-b45.toml --keep --out /work/live/r52/out-routed --task xp-catalog-sort > bench-routed.log 2>&1
