#!/usr/bin/env bash
# The GPU runner's job-started hook (ACTIONS_RUNNER_HOOK_JOB_STARTED, baked into its VM image):
# refuses every job but main's gpu.yml started by a push or a dispatch, on any GitHub plan (runner
# groups restrict workflows on Enterprise Cloud only). Setup: docs/self-hosted-gpu-runner.md.
#
# GPU_RUNNER_REPOSITORY=OWNER/REPO comes from the runner's .env: a workflow's `env:` does not reach
# a hook, and GITHUB_* come from GitHub's job message, so the job cannot choose what is compared.
set -euo pipefail

refuse() {
    echo "::error::GPU runner: $1"
    exit 1
}

repository=${GPU_RUNNER_REPOSITORY:-}
[[ $repository =~ ^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$ ]] \
    || refuse "GPU_RUNNER_REPOSITORY must be OWNER/REPO in the runner's .env, got $(printf %q "$repository")"
allowed="$repository/.github/workflows/gpu.yml@refs/heads/main"
workflow=${GITHUB_WORKFLOW_REF:-}
event=${GITHUB_EVENT_NAME:-}
[ "$workflow" = "$allowed" ] \
    || refuse "this runner runs $allowed only, not $(printf %q "$workflow")"
[ "$event" = push ] || [ "$event" = workflow_dispatch ] \
    || refuse "this runner runs push and workflow_dispatch events only, not $(printf %q "$event")"
echo "GPU runner: $allowed, $event"
