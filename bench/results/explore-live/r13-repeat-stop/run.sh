cd /work/live/e1
export PYTHONPATH=/work/live/e1/code
export ORCHESTRATE_LIVE_KEY=local
bash /work/live/e1/code/scripts/live-model/start.sh all > start.log 2>&1
for s in builtin-explore log-explore requests-explore; do
  /work/main/.venv/bin/python -m orchestrator bench $s --roles live-solo --roles live-split --keep --out /work/live/e1/out-$s > $s.log 2>&1
done
echo done > finished
