#!/usr/bin/env bash
# Starts the GPU runner for its one job (the VM's boot runs it as `runner`, with the just-in-time
# configuration), and only when the runner's .env names the job-started hook installed beside this
# script, and that hook's sha256 is the one pinned beside it in job-started.sh.sha256: without its
# hook a runner would run any workflow's job. Setup: docs/self-hosted-gpu-runner.md.
#
#     /opt/gpu-runner/start-runner.sh JITCONFIG_FILE
set -euo pipefail

here=$(dirname "$(readlink -f "$0")")
hook="$here/job-started.sh"
runner=${GPU_RUNNER_DIR:-/home/runner/actions-runner}
env_file="$runner/.env"

refuse() {
    echo "GPU runner not started: $1" >&2
    exit 1
}

[ $# -eq 1 ] && [ -f "$1" ] || refuse "usage: $0 JITCONFIG_FILE"
pinned=$(cat "$here/job-started.sh.sha256" 2> /dev/null) || refuse "no pinned sha256 at $here/job-started.sh.sha256"
[[ $pinned =~ ^[0-9a-f]{64}$ ]] || refuse "$here/job-started.sh.sha256 must hold a sha256 (64 hex digits)"
[ -f "$hook" ] || refuse "no hook at $hook"
actual=$(sha256sum < "$hook")
actual=${actual%% *}
[ "$actual" = "$pinned" ] || refuse "$hook has sha256 $actual, not the pinned $pinned"
[ -f "$env_file" ] || refuse "no $env_file"
# The runner reads .env line by line, a later line overriding an earlier: exactly one line each.
hooks=$(grep -E '^[[:space:]]*ACTIONS_RUNNER_HOOK_JOB_STARTED[[:space:]]*=' "$env_file" || true)
[ "$hooks" = "ACTIONS_RUNNER_HOOK_JOB_STARTED=$hook" ] \
    || refuse "$env_file must have the one line ACTIONS_RUNNER_HOOK_JOB_STARTED=$hook"
repository=$(grep -E '^[[:space:]]*GPU_RUNNER_REPOSITORY[[:space:]]*=' "$env_file" || true)
[[ $repository =~ ^GPU_RUNNER_REPOSITORY=[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] \
    || refuse "$env_file must have the one line GPU_RUNNER_REPOSITORY=OWNER/REPO"
exec "$runner/run.sh" --jitconfig "$(cat "$1")"
