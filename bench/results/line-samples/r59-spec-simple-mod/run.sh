#!/usr/bin/env bash
# A/B of the kit 1.5B's speculative decoding for best-of-k one-line samples
set -u
home=$HOME/.cache/orchestrate-live
out=/work/live/spec-ab
export ORCHESTRATE_LIVE_KEY=local
variant() {  # name serve-options...
  local name=$1; shift
  "$home/venv/bin/python" /work/main/scripts/live-model/serve.py "$home/models/qwen2.5-coder-1.5b-instruct.gguf" \
    --port 8090 --alias qwen15 --ctx 8192 --slots 2 "$@" > "$out/$name.server.log" 2>&1 &
  local pid=$!
  for _ in $(seq 1 240); do grep -q READY "$out/$name.server.log" && break; sleep 0.5; done
  echo "== $name $* $(date +%T)"
  (cd /work/main/bench && /work/main/.venv/bin/python line_samples.py --roles live-routed --k 4 --first 0.6 --rest 0.8 \
    --task js-button-handlers --task js-missing-await --task py-config-merge --task py-id-validation \
    --task py-paging --task py-shared-cart --json "$out/$name.json" > "$out/$name.txt" 2>&1)
  tail -6 "$out/$name.txt"
  kill "$pid"; wait "$pid" 2>/dev/null
}
variant simple --spec ngram_simple
variant mod --spec ngram_mod --mod-match 12 --mod-draft 8,32
variant both --spec ngram_simple,ngram_mod --mod-match 12 --mod-draft 8,32
echo "== done $(date +%T)"
