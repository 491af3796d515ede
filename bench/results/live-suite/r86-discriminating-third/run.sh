cd /work/live/r86
export PYTHONPATH=/work/live/r86/code
export ORCHESTRATE_LIVE_KEY=local
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --roles live-solo --keep --out /work/live/r86/out --task xp-catalog-sort --task xp-loyalty-tier --task xp-js-label-address --task sh-pipeline-status > bench.log 2>&1
