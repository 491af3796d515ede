#!/bin/bash
# p63: the one-line request at the reference fix's place, introduced as the explorers' find or as a lead, on the four
# explore-needed tasks whose in-run samples at the fix passed 1 of 55 (fix-reach.txt); code at de41883
cd /work/live/p63
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python /work/main/bench/line_samples.py --roles live-routed --at-fix --where found,lead \
  --k 6 --first 0 --rest 0.8 --task xp-catalog-sort --task xp-logstat-slow --task xp-parcel-weight \
  --task xp-js-weekly-runs --json /work/live/p63/found-lead.json > /work/live/p63/found-lead.txt 2>&1
