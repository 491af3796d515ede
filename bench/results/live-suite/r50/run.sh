export ORCHESTRATE_LIVE_KEY=local
export PYTHONPATH=/work/live/r50/code
cd /work/live/r50
bash /work/live/r50/code/scripts/live-model/start.sh all > servers.log 2>&1
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --keep --out /work/live/r50/out \
  --task js-button-handlers --task js-median-sort --task js-missing-await --task js-query-filter \
  --task py-date-format --task py-paging --task py-prune-stock --task py-sort-names \
  --task py-swallowed-error --task sh-backup-spaces --task xp-parcel-weight --task xp-payslip-rounding > bench.log 2>&1
