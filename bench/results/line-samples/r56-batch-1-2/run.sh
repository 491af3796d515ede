export ORCHESTRATE_LIVE_KEY=local
cd /work/main/bench
/work/main/.venv/bin/python line_samples.py --roles live-routed --k 3 --first 0.6 --rest 0.8 --batch 1,2 \
  --task js-button-handlers --task js-missing-await --task py-config-merge --task py-id-validation \
  --task py-paging --task py-shared-cart --task sh-pipeline-status \
  --json /work/live/r56/line-samples.json > /work/live/r56/printed.txt 2>&1
