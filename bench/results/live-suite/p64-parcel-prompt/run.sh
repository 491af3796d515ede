#!/bin/bash
# p64: one live-routed run of xp-parcel-weight with its prompts captured (console spans), to read the one-line
# prompt at the fix as the engine asked it live; code at de41883
cd /work/live/p64
export ORCHESTRATE_LIVE_KEY=local OTEL_TRACES_EXPORTER=console OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true
/work/main/.venv/bin/python -m orchestrator bench live --roles live-routed --keep --out /work/live/p64/out \
  --task xp-parcel-weight > bench.log 2> spans.log
