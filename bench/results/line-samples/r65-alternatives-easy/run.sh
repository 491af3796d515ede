cd /work/main/bench
export ORCHESTRATE_LIVE_KEY=local
T="--task xp-invoice-tax --task xp-loyalty-tier --task xp-payslip-rounding --task xp-parcel-weight --task xp-js-label-address --task py-paging --task py-shared-cart"
for v in alternatives engine; do
/work/main/.venv/bin/python line_samples.py --roles live-routed --k 2 --first 0 --rest 0.8 --at-fix --where found --variant $v $T --json /work/live/p2/$v.json > /work/live/p2/$v.log 2>&1
done
