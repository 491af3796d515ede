#!/usr/bin/env bash
# The run step of the orchestrate GitHub Action (action.yml at the repository's root), and of
# the GitLab CI job in docs/ci.md: lets bubblewrap start on the runner, runs
#   orchestrate run TASK --json --events
# writes the step's outputs (run-id, status, branch, commit, exit-code, patch, report, events),
# the Markdown summary, and optionally comments it on the pull request. Exits with orchestrate's
# own status (README: exit codes). Runs anywhere: set the INPUT_* variables below and, outside
# GitHub, GITHUB_OUTPUT / GITHUB_STEP_SUMMARY to files (tests/test_action.py does).
#
#   INPUT_TASK (required), INPUT_ROLES, INPUT_TEAM, INPUT_MAX_USD, INPUT_REPO (default .),
#   INPUT_API_KEY (the secret's value) and INPUT_API_KEY_ENV (the variable the role map reads it
#   from, default OPENAI_API_KEY), INPUT_COMMENT_ON_PR (true/false), INPUT_PR_NUMBER (default:
#   the pull request of GITHUB_EVENT_PATH), GH_TOKEN (for the comment)
#   ORCHESTRATE (the command, default orchestrate), ORCHESTRATE_USERNS_SYSCTL and
#   ORCHESTRATE_SUDO (the AppArmor switch and how to flip it; for tests)
set -uo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
python="$(command -v python3 || command -v python)"
work="$(mktemp -d "${RUNNER_TEMP:-${TMPDIR:-/tmp}}/orchestrate.XXXXXX")"
outputs="${GITHUB_OUTPUT:-$work/outputs}"
summary="${GITHUB_STEP_SUMMARY:-$work/summary.md}"

# Ubuntu 24.04 runners restrict unprivileged user namespaces through AppArmor, and bubblewrap
# (the builder's sandbox) needs one. Lift it when sudo can; else say exactly what to set.
allow_userns() {
  local knob="${ORCHESTRATE_USERNS_SYSCTL:-/proc/sys/kernel/apparmor_restrict_unprivileged_userns}"
  local sudo="${ORCHESTRATE_SUDO:-sudo}"
  [ -r "$knob" ] && [ "$(cat "$knob")" = 1 ] || return 0
  if command -v "$sudo" >/dev/null 2>&1 && "$sudo" -n sysctl -w \
       kernel.apparmor_restrict_unprivileged_userns=0 >/dev/null 2>&1; then
    echo "orchestrate: set kernel.apparmor_restrict_unprivileged_userns=0 (bubblewrap needs" \
         "unprivileged user namespaces)"
  else
    echo "::warning::orchestrate: unprivileged user namespaces are restricted by AppArmor and" \
         "sudo is not available; the builder's sandbox (bubblewrap) cannot start. Run" \
         "'sudo sysctl -w kernel.apparmor_restrict_unprivileged_userns=0' on the runner" \
         "(or set it in /etc/sysctl.d/), or use a runner without the restriction."
  fi
}

allow_userns

if [ -z "${INPUT_TASK:-}" ]; then
  echo "::error::orchestrate: the task input is empty: say what should be done" >&2
  exit 2
fi
key_env="${INPUT_API_KEY_ENV:-OPENAI_API_KEY}"
if ! [[ "$key_env" =~ ^[A-Za-z_][A-Za-z0-9_]*$ ]]; then
  echo "::error::orchestrate: api-key-env '$key_env' is not a variable name" >&2
  exit 2
fi
if [ -n "${INPUT_API_KEY:-}" ]; then
  export "$key_env=$INPUT_API_KEY"  # under the name the role map reads, and only there
fi
unset INPUT_API_KEY

args=(run "$INPUT_TASK" --json --events --repo "${INPUT_REPO:-.}")
[ -n "${INPUT_ROLES:-}" ] && args+=(--roles "$INPUT_ROLES")
[ -n "${INPUT_TEAM:-}" ] && args+=(--team "$INPUT_TEAM")
[ -n "${INPUT_MAX_USD:-}" ] && args+=(--max-usd "$INPUT_MAX_USD")

events="$work/events.jsonl"
"${ORCHESTRATE:-orchestrate}" "${args[@]}" | tee "$events"
code=${PIPESTATUS[0]}

"$python" "$here/summarize.py" "$events" --exit-code "$code" --outputs "$outputs" \
  --summary "$summary" --comment "$work/comment.md"

if [ "${INPUT_COMMENT_ON_PR:-false}" = true ]; then
  pr="${INPUT_PR_NUMBER:-}"
  if [ -z "$pr" ] && [ -r "${GITHUB_EVENT_PATH:-}" ]; then
    pr="$("$python" -c 'import json, sys
event = json.load(open(sys.argv[1]))
print((event.get("pull_request") or event.get("issue") or {}).get("number") or "")' \
      "$GITHUB_EVENT_PATH")"
  fi
  if [ -z "$pr" ]; then
    echo "::warning::orchestrate: comment-on-pr is set but this is not a pull request"
  elif ! gh pr comment "$pr" --body-file "$work/comment.md"; then
    echo "::warning::orchestrate: could not comment on #$pr (does the job have" \
         "'pull-requests: write' and GH_TOKEN?)"
  fi
fi
exit "$code"
