export ORCHESTRATE_LIVE_KEY=local
export PYTHONPATH=/work/live/r54/code
cd /work/live/r54
bash /work/live/r54/code/scripts/live-model/start.sh all > servers.log 2>&1
for m in live-solo-b100:xp-parcel-weight live-routed-b45:xp-catalog-sort live-routed-b100:xp-catalog-sort; do
  map=${m%%:*}; task=${m##*:}
  /work/main/.venv/bin/python -m orchestrator bench live --roles /work/live/r54/$map.toml --keep --out /work/live/r54/out-$map --task $task > bench-$map.log 2>&1
done
bash /work/live/r54/code/scripts/live-model/stop.sh >> servers.log 2>&1
