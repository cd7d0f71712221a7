#!/usr/bin/env bash
# The GPU runner's job-started hook (ACTIONS_RUNNER_HOOK_JOB_STARTED, baked into its VM image):
# admits main's gpu.yml started by a push or a dispatch, and ends every other job before its
# first step, on any GitHub plan (runner groups restrict workflows on Enterprise Cloud only).
# Setup, and how to check it on a real runner: docs/self-hosted-gpu-runner.md.
#
# A failing hook fails only its own step: the runner would still run the job's `if: always()`
# steps and its actions' `pre:` steps. So a refusal kills the Runner.Worker running the job, which
# starts this hook as its own child. SIGKILL: on SIGTERM the worker cancels the job, and a
# cancelled job still runs its `always()` steps. The runner then reports the job failed, and a
# just-in-time runner exits, so its VM is discarded. Where it finds no Runner.Worker of its own to
# kill, it powers the VM off (the one sudoers rule of the guide), so no step of the job runs.
#
# GPU_RUNNER_REPOSITORY=OWNER/REPO comes from the runner's .env: a workflow's `env:` does not reach
# a hook, and GITHUB_* come from GitHub's job message, so the job cannot choose what is compared.
set -euo pipefail

# The worker running this job: the hook's parent, when that process's executable (which a
# process cannot rename, unlike the name it shows) is the runner's Runner.Worker.
job_worker() {
    local exe
    exe=$(readlink "/proc/$PPID/exe") || return 1
    exe=${exe% (deleted)} # the runner updated itself while this job ran
    [ "${exe##*/}" = Runner.Worker ] || return 1
    echo "$PPID"
}

refuse() {
    local worker
    if worker=$(job_worker); then
        # Said before the kill: the worker is what reads this output.
        echo "::error::GPU runner: $1; ending the job (SIGKILL to its Runner.Worker, pid $worker)"
        kill -KILL "$worker" && exit 1
    fi
    # Fails closed: with no worker of its own to end, the job's if: always() steps would run.
    echo "::error::GPU runner: $1; no Runner.Worker to end (the hook's parent is pid $PPID): powering the VM off"
    if sudo -n /usr/bin/systemctl poweroff --force; then
        exec sleep infinity # the hook never returns, so no step starts before the VM is gone
    fi
    echo "::error::GPU runner: could not power the VM off (no sudoers rule for it): the job's if: always() steps may run"
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
