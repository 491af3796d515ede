cd /work/live/r76
export PYTHONPATH=/work/live/r76/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-solo --keep --out /work/live/r76/out  --task js-button-handlers --task js-median-sort --task js-missing-await --task js-query-filter --task py-config-merge --task py-date-format --task py-id-validation --task py-paging --task py-prune-stock --task py-shared-cart --task py-sort-names --task py-swallowed-error --task sh-backup-spaces --task sh-pipeline-status > bench.log 2>&1
