"""The GPU job lends the code under test the image, the GPU and an empty output folder, nothing of the host:
no checkout (no .git to plant core.fsmonitor or a hook in), no credentials, no capabilities, and nothing
but regular files and folders reaches the upload or the job summary."""

from __future__ import annotations

import itertools
import os
import shlex
import socket
import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
GPU_YML = ROOT / ".github" / "workflows" / "gpu.yml"
OUT = "${{ runner.temp }}/bench-gpu"


def workflow() -> dict:
    return yaml.safe_load(GPU_YML.read_text())


def gpu_steps() -> list[dict]:
    return workflow()["jobs"]["gpu"]["steps"]


def step(id_: str) -> dict:
    return next(s for s in gpu_steps() if s.get("id") == id_)


def the_tests_step() -> dict:
    return next(s for s in gpu_steps() if "docker run" in s.get("run", ""))


def docker_run() -> list[str]:
    """The words of the tests' `docker run` command, continuation lines joined."""
    joined = the_tests_step()["run"].replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if line.strip().startswith("docker run"))
    return shlex.split(line)


def test_nothing_of_the_host_is_mounted_but_an_output_folder():
    words = docker_run()
    mounts = [words[i + 1] for i, w in enumerate(words) if w in ("-v", "--volume", "--mount")]
    assert mounts == ["$OUT:/workspace/build/bench"], mounts
    assert not any(w.startswith(("--volume=", "--mount=", "-v=", "--volumes-from")) for w in words)
    assert the_tests_step()["env"]["OUT"] == OUT
    # The job summary is the host's: the container writes its own into the output folder.
    assert "GITHUB_STEP_SUMMARY=/workspace/build/bench/summary.md" in words
    text = GPU_YML.read_text()
    assert "GITHUB_WORKSPACE" not in text and "docker.sock" not in text


def test_the_tree_is_the_images_own_and_no_git_repository_is_on_the_host():
    job = workflow()["jobs"]["gpu"]
    assert not any(s.get("uses", "").startswith("actions/checkout@") for s in job["steps"])
    for s in job["steps"]:
        assert "git " not in s.get("run", ""), s  # no git command runs on the host after the tests
    words = docker_run()
    assert not any(w in ("-w", "--workdir") or w.startswith("--workdir=") for w in words)  # the image's /workspace
    assert words[-5:] == ["$IMAGE", "nox", "-s", "test", "bench"]  # the library was built in the image
    pull = step("pull")["run"]
    assert 'org.opencontainers.image.revision" }}\' "$IMAGE")' in pull and '[ "$built" = "$SHA" ]' in pull


def test_the_container_has_no_network_capabilities_or_privileges():
    words = docker_run()
    pairs = set(itertools.pairwise(words))
    for pair in [
        ("--network", "none"),
        ("--cap-drop", "ALL"),
        ("--security-opt", "no-new-privileges"),
        ("--pull", "never"),
        ("--gpus", "all"),
        ("--user", "$user"),
    ]:
        assert pair in pairs, pair
    limit = words[words.index("--pids-limit") + 1]
    assert limit.isdigit() and 0 < int(limit) <= 65536
    assert not {"--privileged", "--cap-add", "--device", "--pid", "--ipc", "--userns"} & set(words)
    assert not any(w.startswith(("--cap-add=", "--security-opt=", "--network=host")) for w in words)


def test_credentials_leave_before_the_tests_and_the_upload_takes_only_what_the_scrub_kept():
    steps = gpu_steps()
    login = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("docker/login-action@"))
    order = [login, steps.index(step("pull")), steps.index(step("logout")), steps.index(the_tests_step())]
    order += [steps.index(step("scrub"))]
    upload = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert order + [upload] == sorted(order + [upload]) and upload == len(steps) - 1
    assert step("logout")["if"] == "always()" and step("logout")["run"].strip() == "docker logout ghcr.io"
    assert step("scrub")["if"] == "always()" and step("scrub")["env"]["OUT"] == OUT
    assert steps[upload]["if"] == "always() && steps.scrub.outcome == 'success'"
    assert steps[upload]["with"]["path"] == OUT
    assert workflow()["jobs"]["gpu"]["permissions"] == {"packages": "read"}


def scrub(out: Path, summary: Path) -> subprocess.CompletedProcess:
    """The scrub step's script, run by bash as the runner runs it."""
    env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "GITHUB_STEP_SUMMARY": str(summary)}
    return subprocess.run(["bash", "-e", "-c", step("scrub")["run"]], env=env, capture_output=True, text=True)


def test_the_scrub_removes_every_entry_but_regular_files_and_folders(tmp_path):
    secret = tmp_path / "host" / "config.json"  # as the docker config the login filled
    secret.parent.mkdir()
    secret.write_text("host secret\n")
    out, summary = tmp_path / "out", tmp_path / "summary"
    (out / "cuda" / "deep").mkdir(parents=True)
    (out / "bench.json").write_text("{}\n")
    (out / "cuda" / "deep" / "table.md").write_text("| a |\n")
    planted = {
        out / "config.json": secret,  # a symlink to a host file
        out / "cuda" / "host": secret.parent,  # to a host folder
        out / "summary.md": secret,  # what the summary would show
        out / "dangling": tmp_path / "nowhere",
    }
    for link, target in planted.items():
        link.symlink_to(target)
    os.mkfifo(out / "cuda" / "fifo")  # would hang the upload
    with socket.socket(socket.AF_UNIX) as sock:
        sock.bind(str(out / "sock"))
    done = scrub(out, summary)
    assert done.returncode == 0, done.stderr
    left = sorted(str(p.relative_to(out)) for p in out.rglob("*"))
    assert left == ["bench.json", "cuda", "cuda/deep", "cuda/deep/table.md"]
    assert secret.read_text() == "host secret\n"  # removed the links, not what they pointed at
    assert not summary.exists() or "host secret" not in summary.read_text()


def test_the_containers_summary_reaches_the_job_summary_as_a_regular_file_only(tmp_path):
    out, summary = tmp_path / "out", tmp_path / "summary"
    out.mkdir()
    (out / "summary.md").write_text("## Benchmark (cuda)\n")
    assert scrub(out, summary).returncode == 0
    assert summary.read_text() == "## Benchmark (cuda)\n"
    assert scrub(tmp_path / "absent", summary).returncode == 0  # the tests never ran: nothing to keep


def test_the_gpu_jobs_wait_for_the_runner_group_variable():
    data = workflow()
    for name, job in data["jobs"].items():
        assert job["if"] == "vars.GPU_RUNNER_GROUP != ''", name
    assert data["jobs"]["gpu"]["runs-on"] == {
        "group": "${{ vars.GPU_RUNNER_GROUP }}",
        "labels": ["self-hosted", "linux", "x64", "gpu"],
    }


def test_a_push_to_main_never_cancels_a_pull_requests_run_nor_is_replaced():
    concurrency = workflow()["concurrency"]
    # A pull request's group is pr-<number>; every other run's is its own, so no push to main waits
    # in a group where a newer run would replace it. Only a pull request's dispatch cancels.
    assert (
        concurrency["group"]
        == "gpu-${{ inputs.pull-request && format('pr-{0}', inputs.pull-request) || github.run_id }}"
    )
    assert concurrency["cancel-in-progress"] == "${{ inputs.pull-request != '' }}"
