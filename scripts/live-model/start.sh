#!/usr/bin/env bash
# Start the live kit's two llama.cpp servers on 127.0.0.1, one after the other (2 cores):
#   qwen05 (Qwen2.5-Coder-0.5B) on :8089 and qwen15 (Qwen2.5-Coder-1.5B) on :8090, 8192 tokens
# of context each, as the packaged live-*.toml maps expect. Installs them first when missing
# (setup.sh). Idempotent: a server already answering is left alone.
#   usage: start.sh [0.5b|1.5b|all]   (default all)
#   env:   LIVE_HOME (default ~/.cache/orchestrate-live), LIVE_CTX (default 8192),
#          LIVE_SPEC (the 1.5B's speculative decoding, serve.py --spec; default ngram_simple; several joined by commas),
#          LIVE_SLOTS (prompts each server keeps cached at once, serve.py --slots; default 2)
set -euo pipefail
here="$(cd "$(dirname "$0")" && pwd)"
which="${1:-all}"
home="${LIVE_HOME:-$HOME/.cache/orchestrate-live}"
ctx="${LIVE_CTX:-8192}"
spec="${LIVE_SPEC:-ngram_simple}"
slots="${LIVE_SLOTS:-2}"
mkdir -p "$home/run"
bash "$here/setup.sh" "$which"

up() {  # port
  "$home/venv/bin/python" - "$1" <<'PY'
import sys, urllib.request
try:
    urllib.request.urlopen(f"http://127.0.0.1:{sys.argv[1]}/v1/models", timeout=2)
except Exception:
    sys.exit(1)
PY
}

serve() {  # model-file port alias [serve.py options]
  local model=$1 port=$2 alias=$3 log="$home/run/$3.log"; shift 3
  if up "$port"; then echo "$alias: already serving on 127.0.0.1:$port"; return; fi
  nohup "$home/venv/bin/python" "$here/serve.py" "$home/models/$model.gguf" --port "$port" \
    --alias "$alias" --ctx "$ctx" --slots "$slots" "$@" >"$log" 2>&1 &
  echo $! >"$home/run/$alias.pid"
  for _ in $(seq 1 240); do
    if grep -q READY "$log" 2>/dev/null; then echo "$alias: $(grep READY "$log")"; return; fi
    if ! kill -0 "$(cat "$home/run/$alias.pid")" 2>/dev/null; then
      echo "$alias: the server exited; see $log" >&2; exit 1
    fi
    sleep 0.5
  done
  echo "$alias: not ready after 120 s; see $log" >&2; exit 1
}

if [ "$which" = 0.5b ] || [ "$which" = all ]; then
  serve qwen2.5-coder-0.5b-instruct 8089 qwen05
fi
if [ "$which" = 1.5b ] || [ "$which" = all ]; then
  serve qwen2.5-coder-1.5b-instruct 8090 qwen15 --spec "$spec"
fi
echo "export ORCHESTRATE_LIVE_KEY=local   # the live maps name a key variable; llama.cpp ignores it"
