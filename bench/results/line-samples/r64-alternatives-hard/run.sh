cd /work/main/bench
export ORCHESTRATE_LIVE_KEY=local
T="--task xp-js-weekly-runs --task xp-logstat-slow --task py-config-merge --task sh-pipeline-status --task js-missing-await --task xp-catalog-sort --task py-id-validation"
for v in alternatives engine; do
/work/main/.venv/bin/python line_samples.py --roles live-routed --k 4 --first 0 --rest 0.8 --at-fix --where found --variant $v $T --json /work/live/p1/$v.json > /work/live/p1/$v.log 2>&1
done
