"""The GPU runner's job-started hook lets main's gpu.yml through on push and dispatch, and nothing else."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "tools" / "runner" / "job-started.sh"
GUIDE = ROOT / "docs" / "self-hosted-gpu-runner.md"
MAIN_GPU = "owner/repo/.github/workflows/gpu.yml@refs/heads/main"


def hook(workflow_ref: str | None = MAIN_GPU, event: str | None = "push", repository: str | None = "owner/repo"):
    """The hook as the runner starts it (`bash -e PATH`), with only what a runner's job would give it."""
    given = {"GITHUB_WORKFLOW_REF": workflow_ref, "GITHUB_EVENT_NAME": event, "GPU_RUNNER_REPOSITORY": repository}
    env = {"PATH": "/usr/bin:/bin", **{k: v for k, v in given.items() if v is not None}}
    return subprocess.run(["bash", "-e", str(HOOK)], env=env, capture_output=True, text=True)


@pytest.mark.parametrize("event", ["push", "workflow_dispatch"])
def test_mains_gpu_workflow_on_push_or_dispatch_runs(event):
    done = hook(event=event)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"GPU runner: {MAIN_GPU}, {event}" in done.stdout


@pytest.mark.parametrize(
    "workflow_ref, event, repository",
    [
        ("owner/repo/.github/workflows/ci.yml@refs/pull/7/merge", "pull_request", "owner/repo"),  # an edited ci.yml
        ("owner/repo/.github/workflows/ci.yml@refs/heads/main", "push", "owner/repo"),  # another workflow on main
        ("owner/repo/.github/workflows/gpu.yml@refs/pull/7/merge", "pull_request", "owner/repo"),
        ("owner/repo/.github/workflows/gpu.yml@refs/heads/feature", "workflow_dispatch", "owner/repo"),
        ("owner/repo/.github/workflows/gpu.yml@refs/tags/v1.0", "push", "owner/repo"),
        ("fork/repo/.github/workflows/gpu.yml@refs/heads/main", "push", "owner/repo"),  # another repository
        (MAIN_GPU, "pull_request_target", "owner/repo"),  # main's file, an event that carries a pull request
        (MAIN_GPU, "schedule", "owner/repo"),
        (MAIN_GPU, "workflow_run", "owner/repo"),
        (MAIN_GPU + "\n", "push", "owner/repo"),
        ("Owner/Repo/.github/workflows/gpu.yml@refs/heads/main", "push", "owner/repo"),  # compared exactly
        (None, "push", "owner/repo"),
        (MAIN_GPU, None, "owner/repo"),
        (MAIN_GPU, "push", None),  # the runner's .env does not name the repository
        (MAIN_GPU, "push", ""),
        ("x/.github/workflows/gpu.yml@refs/heads/main", "push", "*"),  # no pattern matching
        ("a/b/.github/workflows/gpu.yml@refs/heads/main", "push", "*/*"),
        (MAIN_GPU, "push", "owner/repo/extra"),
    ],
)
def test_any_other_workflow_ref_event_or_repository_is_refused(workflow_ref, event, repository):
    done = hook(workflow_ref, event, repository)
    assert done.returncode != 0, (workflow_ref, event, repository)
    assert done.stdout.startswith("::error::GPU runner: "), done.stdout


def test_what_it_prints_cannot_write_a_workflow_command():
    done = hook("owner/repo/.github/workflows/ci.yml@refs/heads/x\n::warning::planted", "push")
    assert done.returncode != 0
    assert [line for line in done.stdout.splitlines() if line.startswith("::")] == [done.stdout.splitlines()[0]]
    assert "::error::" in done.stdout and "\n::warning::" not in done.stdout


def test_the_guide_bakes_the_hook_into_the_runners_image():
    text = GUIDE.read_text()
    for needed in ("tools/runner/job-started.sh", "ACTIONS_RUNNER_HOOK_JOB_STARTED=", "GPU_RUNNER_REPOSITORY="):
        assert needed in text, needed
