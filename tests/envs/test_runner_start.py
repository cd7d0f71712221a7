"""The GPU VM's start script starts the runner only when the runner's .env names the job-started hook
installed beside it, once, and that hook's sha256 is the one pinned beside it: a runner without its hook
would run any workflow's job. A stand-in run.sh records how it was started."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
RUNNER_TOOLS = ROOT / "tools" / "runner"
GUIDE = ROOT / "docs" / "self-hosted-gpu-runner.md"
ENV = "ACTIONS_RUNNER_HOOK_JOB_STARTED={hook}\nGPU_RUNNER_REPOSITORY=owner/repo\n"


def test_the_pinned_sha256_is_the_hooks():
    pinned = (RUNNER_TOOLS / "job-started.sh.sha256").read_text().strip()
    assert pinned == hashlib.sha256((RUNNER_TOOLS / "job-started.sh").read_bytes()).hexdigest()


class Vm:
    """/opt/gpu-runner (the start script, the hook, its pin) and the runner's folder, in tmp_path."""

    def __init__(self, tmp_path: Path):
        self.opt, self.runner = tmp_path / "opt" / "gpu-runner", tmp_path / "actions-runner"
        self.opt.mkdir(parents=True)
        self.runner.mkdir()
        for name in ("start-runner.sh", "job-started.sh", "job-started.sh.sha256"):
            shutil.copy2(RUNNER_TOOLS / name, self.opt / name)
        self.hook = self.opt / "job-started.sh"
        self.started = tmp_path / "run-sh-args"
        (self.runner / "run.sh").write_text(f'#!/bin/sh\nprintf "%s\\n" "$@" > {self.started}\n')
        (self.runner / "run.sh").chmod(0o755)
        self.env_file = self.runner / ".env"
        self.env_file.write_text(ENV.format(hook=self.hook))
        self.jitconfig = tmp_path / "jitconfig"
        self.jitconfig.write_text("eyJqaXQiOiAiY29uZmlnIn0=")

    def start(self) -> tuple[subprocess.CompletedProcess, list[str] | None]:
        done = subprocess.run([str(self.opt / "start-runner.sh"), str(self.jitconfig)], capture_output=True,
                              text=True, env={"PATH": "/usr/bin:/bin", "GPU_RUNNER_DIR": str(self.runner)})  # fmt: skip
        return done, self.started.read_text().splitlines() if self.started.exists() else None


def test_the_runner_starts_with_its_hook_named_and_pinned(tmp_path):
    done, started = Vm(tmp_path).start()
    assert done.returncode == 0, done.stderr
    assert started == ["--jitconfig", "eyJqaXQiOiAiY29uZmlnIn0="]


def edit_hook(vm: Vm) -> None:
    vm.hook.write_text(vm.hook.read_text().replace("refuse ", "true ", 1))


def edit_env(text: str):
    return lambda vm: vm.env_file.write_text(text.format(hook=vm.hook))


@pytest.mark.parametrize(
    "break_it, said",
    [
        (edit_hook, "not the pinned"),
        (lambda vm: vm.hook.unlink(), "no hook at"),
        (lambda vm: (vm.opt / "job-started.sh.sha256").unlink(), "no pinned sha256"),
        (lambda vm: (vm.opt / "job-started.sh.sha256").write_text("\n"), "must hold a sha256"),
        (lambda vm: vm.env_file.unlink(), "no "),
        (edit_env("GPU_RUNNER_REPOSITORY=owner/repo\n"), "ACTIONS_RUNNER_HOOK_JOB_STARTED="),
        (edit_env("ACTIONS_RUNNER_HOOK_JOB_STARTED=/tmp/other.sh\nGPU_RUNNER_REPOSITORY=owner/repo\n"), "the one line"),
        (edit_env(ENV + "ACTIONS_RUNNER_HOOK_JOB_STARTED=\n"), "the one line"),  # a later line overrides
        (edit_env(ENV + " ACTIONS_RUNNER_HOOK_JOB_STARTED = /tmp/x\n"), "the one line"),
        (edit_env("ACTIONS_RUNNER_HOOK_JOB_STARTED={hook}\n"), "GPU_RUNNER_REPOSITORY=OWNER/REPO"),
        (edit_env(ENV + "GPU_RUNNER_REPOSITORY=other/repo\n"), "GPU_RUNNER_REPOSITORY=OWNER/REPO"),
    ],
    ids=[
        "hook-edited",
        "hook-missing",
        "pin-missing",
        "pin-empty",
        "env-missing",
        "hook-unnamed",
        "another-hook",
        "hook-overridden",
        "hook-overridden-spaced",
        "repository-unnamed",
        "repository-twice",
    ],  # fmt: skip
)
def test_the_runner_is_not_started_without_its_pinned_hook(tmp_path, break_it, said):
    vm = Vm(tmp_path)
    break_it(vm)
    done, started = vm.start()
    assert done.returncode == 1 and started is None
    assert done.stderr.startswith("GPU runner not started: ") and said in done.stderr, done.stderr


def test_the_guide_installs_and_pins_the_hook_and_boots_through_the_start_script():
    text = GUIDE.read_text()
    install = "for f in job-started.sh job-started.sh.sha256 start-runner.sh; do"
    assert install in text and '"tools/runner/$f" "/opt/gpu-runner/$f"' in text
    assert "/opt/gpu-runner/start-runner.sh jitconfig" in text
    assert "./run.sh --jitconfig" not in text  # the VM never starts the runner around the script
