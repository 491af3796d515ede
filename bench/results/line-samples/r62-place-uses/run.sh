# Made at f80c242, where the engine showed the place from what it uses and `--place-alone`
# showed it alone; on the code after it (the engine shows the place alone again) the same two
# probes are `--at-fix` and `--at-fix --with-uses`:
export ORCHESTRATE_LIVE_KEY=local
cd bench
for v in alone uses; do
  flag=""; [ $v = uses ] && flag="--with-uses"
  python line_samples.py --roles live-routed --k 6 --first 0 --rest 0.8 --at-fix $flag --where found \
    --task xp-parcel-weight --task xp-loyalty-tier --task xp-payslip-rounding --json $v.json > $v.txt 2>&1
done
