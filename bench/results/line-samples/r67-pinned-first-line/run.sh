cd /work/main/bench
export ORCHESTRATE_LIVE_KEY=local
T="--task js-button-handlers --task js-median-sort --task js-missing-await --task js-query-filter --task py-config-merge --task py-date-format --task py-id-validation --task py-paging --task py-prune-stock --task py-shared-cart --task py-sort-names --task py-swallowed-error --task sh-backup-spaces"
/work/main/.venv/bin/python line_samples.py --roles live-05b-builder.toml --k 2 --first 0 --rest 0.8 --where failure $T --json /work/live/p4/05b.json > /work/live/p4/05b.log 2>&1
/work/main/.venv/bin/python line_samples.py --roles live-routed --k 2 --first 0 --rest 0.8 --where failure $T --json /work/live/p4/15b.json > /work/live/p4/15b.log 2>&1
