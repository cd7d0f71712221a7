"""The GPU runner's job-started hook lets main's gpu.yml through on push and dispatch, and ends every
other job: it kills the Runner.Worker that started it, so no later step of the job runs; where it finds
none, it powers the VM off.

Each hook here runs under a stand-in worker: a copy of bash named Runner.Worker that starts the hook
as its child, as the runner does (`bash -e PATH`), then runs a "later step" that writes a file. A
stand-in `sudo` logs its arguments and powers the "VM" off: it kills every process of the job's session."""

from __future__ import annotations

import shutil
import signal
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
HOOK = ROOT / "tools" / "runner" / "job-started.sh"
GUIDE = ROOT / "docs" / "self-hosted-gpu-runner.md"
MAIN_GPU = "owner/repo/.github/workflows/gpu.yml@refs/heads/main"
# The stand-in worker's script: the hook, then a step that any condition (always()) would run.
JOB = 'bash -e "$1"; echo ran > "$2"'
POWEROFF = "-n /usr/bin/systemctl poweroff --force"
SUDOERS_RULE = "runner ALL=(root) NOPASSWD: /usr/bin/systemctl poweroff --force"
# Powering off ends every process of the machine: here, of the job's own session.
SUDO = '#!/bin/sh\necho "$*" >> "$SUDO_LOG"\n[ -z "$SUDO_REFUSES" ] || exit 1\nkill -KILL 0\n'


@pytest.fixture(scope="module")
def worker_exe(tmp_path_factory) -> Path:
    """An executable named Runner.Worker (a copy of bash: /proc/PID/exe names the copy)."""
    exe = tmp_path_factory.mktemp("runner") / "Runner.Worker"
    shutil.copy2(shutil.which("bash"), exe)
    return exe


def job_env(workflow_ref: str | None = MAIN_GPU, event: str | None = "push", repository: str | None = "owner/repo"):
    """Only what a runner's job gives the hook."""
    given = {"GITHUB_WORKFLOW_REF": workflow_ref, "GITHUB_EVENT_NAME": event, "GPU_RUNNER_REPOSITORY": repository}
    return {"PATH": "/usr/bin:/bin", **{k: v for k, v in given.items() if v is not None}}


def with_sudo(tmp_path: Path, env: dict[str, str], refuses: bool = False) -> dict[str, str]:
    """`env` with the stand-in sudo first on PATH, logging to tmp_path/sudo.log."""
    standin = tmp_path / "sudo-bin"
    standin.mkdir(exist_ok=True)
    (standin / "sudo").write_text(SUDO)
    (standin / "sudo").chmod(0o755)
    extra = {"SUDO_REFUSES": "1"} if refuses else {}
    return {**env, "PATH": f"{standin}:{env['PATH']}", "SUDO_LOG": str(tmp_path / "sudo.log"), **extra}


def sudo_log(tmp_path: Path) -> list[str]:
    log = tmp_path / "sudo.log"
    return log.read_text().splitlines() if log.exists() else []


def run_job(worker: Path, tmp_path: Path, env: dict[str, str], script: str = JOB, sudo_refuses: bool = False):
    """The stand-in worker runs the hook, then the later step, in a session of its own (the "VM" the
    stand-in sudo powers off); returns (the worker's result, whether the later step ran)."""
    later = tmp_path / "later-step-ran"
    later.unlink(missing_ok=True)
    done = subprocess.run([str(worker), "--norc", "-c", script, "worker", str(HOOK), str(later)],
                          env=with_sudo(tmp_path, env, sudo_refuses), capture_output=True, text=True, timeout=60,
                          start_new_session=True)  # fmt: skip
    return done, later.exists()


def hook(worker: Path, tmp_path: Path, *args):
    done, _ = run_job(worker, tmp_path, job_env(*args))
    return done


@pytest.mark.parametrize("event", ["push", "workflow_dispatch"])
def test_mains_gpu_workflow_on_push_or_dispatch_runs_to_its_later_steps(worker_exe, tmp_path, event):
    done, later_ran = run_job(worker_exe, tmp_path, job_env(event=event))
    assert done.returncode == 0 and later_ran, done.stdout + done.stderr
    assert f"GPU runner: {MAIN_GPU}, {event}" in done.stdout
    assert sudo_log(tmp_path) == []


REFUSED = [
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
]


@pytest.mark.parametrize("workflow_ref, event, repository", REFUSED)
def test_any_other_job_is_ended_before_its_later_steps(worker_exe, tmp_path, workflow_ref, event, repository):
    done, later_ran = run_job(worker_exe, tmp_path, job_env(workflow_ref, event, repository))
    assert done.returncode == -signal.SIGKILL, (done.returncode, done.stdout, done.stderr)  # the worker is gone
    assert not later_ran  # an `if: always()` step never starts
    assert done.stdout.startswith("::error::GPU runner: ") and "ending the job" in done.stdout, done.stdout
    assert sudo_log(tmp_path) == []  # its own worker killed: the VM is left to the runner's exit


def test_only_the_worker_that_started_the_hook_is_killed(worker_exe, tmp_path):
    bystander = subprocess.Popen([str(worker_exe), "--norc", "-c", "sleep 60"])  # another job's worker
    try:
        done, later_ran = run_job(worker_exe, tmp_path, job_env(event="schedule"))
        assert done.returncode == -signal.SIGKILL and not later_ran
        assert bystander.poll() is None, "a Runner.Worker that is not the hook's parent was killed"
    finally:
        bystander.kill()
        bystander.wait()


def test_a_parent_that_only_calls_itself_runner_worker_gets_the_vm_powered_off(tmp_path):
    # A link named Runner.Worker shows that name (comm), but its executable is bash.
    link = tmp_path / "link" / "Runner.Worker"
    link.parent.mkdir()
    link.symlink_to(shutil.which("bash"))
    done, later_ran = run_job(link, tmp_path, job_env(event="schedule"))
    assert done.returncode == -signal.SIGKILL and not later_ran  # the "VM" went, and the job with it
    assert sudo_log(tmp_path) == [POWEROFF]
    assert "no Runner.Worker to end" in done.stdout and "powering the VM off" in done.stdout


def test_a_worker_further_up_than_the_hooks_parent_gets_the_vm_powered_off(worker_exe, tmp_path):
    # The runner starts the hook as its own child; a wrapper between them is not the runner's layout.
    done, later_ran = run_job(
        worker_exe, tmp_path, job_env(event="schedule"), script='sh -c \'bash -e "$1"\' sh "$1"; echo ran > "$2"'
    )
    assert done.returncode == -signal.SIGKILL and not later_ran
    assert sudo_log(tmp_path) == [POWEROFF]


def test_a_missing_repository_setting_outside_a_worker_gets_the_vm_powered_off(tmp_path):
    done, later_ran = run_job(Path(shutil.which("bash")), tmp_path, job_env(repository=None))
    assert done.returncode == -signal.SIGKILL and not later_ran
    assert sudo_log(tmp_path) == [POWEROFF] and "GPU_RUNNER_REPOSITORY must be OWNER/REPO" in done.stdout


def test_without_the_sudoers_rule_it_says_the_later_steps_may_run(tmp_path):
    done, later_ran = run_job(Path(shutil.which("bash")), tmp_path, job_env(event="schedule"), sudo_refuses=True)
    assert sudo_log(tmp_path) == [POWEROFF]
    assert later_ran and "could not power the VM off" in done.stdout  # what the guide's check then catches


def test_the_guide_documents_the_one_sudoers_rule_the_hook_uses():
    assert f"sudo {POWEROFF}" in HOOK.read_text()
    text = GUIDE.read_text()
    assert SUDOERS_RULE in text
    assert text.count("NOPASSWD") == 1  # the runner user may run nothing else as root


def test_what_it_prints_cannot_write_a_workflow_command(worker_exe, tmp_path):
    done = hook(worker_exe, tmp_path, "owner/repo/.github/workflows/ci.yml@refs/heads/x\n::warning::planted", "push")
    assert done.returncode == -signal.SIGKILL
    assert [line for line in done.stdout.splitlines() if line.startswith("::")] == [done.stdout.splitlines()[0]]
    assert "::error::" in done.stdout and "\n::warning::" not in done.stdout


def test_the_guide_bakes_the_hook_into_the_runners_image_and_says_how_to_check_it():
    text = GUIDE.read_text()
    for needed in ("tools/runner/job-started.sh", "ACTIONS_RUNNER_HOOK_JOB_STARTED=", "GPU_RUNNER_REPOSITORY="):
        assert needed in text, needed
    check = text[text.index("### Checking the hook on a real runner") :]
    assert "if: always()" in check and "Runner.Worker" in check
