cd /work/main/bench
export ORCHESTRATE_LIVE_KEY=local
T="--task xp-js-weekly-runs --task xp-logstat-slow --task py-config-merge --task js-missing-await"
/work/main/.venv/bin/python line_samples.py --roles live-routed --k 4 --first 0 --rest 0 --at-fix --where found --variant told $T --json /work/live/p3/told-greedy.json > /work/live/p3/told-greedy.log 2>&1
/work/main/.venv/bin/python line_samples.py --roles live-routed --k 4 --first 0 --rest 0.8 --at-fix --where found --variant told $T --json /work/live/p3/told-08.json > /work/live/p3/told-08.log 2>&1
