"""The GPU job lends the code under test the image, the GPU and an empty output folder, nothing of the host:
no checkout (no .git to plant core.fsmonitor or a hook in), no credentials, no capabilities; only a copy of
its regular files and folders reaches the upload or the job summary, the summary shows as text, and the
tests' output runs no workflow command. A cancelled job: tests/envs/test_gpu_cancel.py."""

from __future__ import annotations

import itertools
import os
import re
import shlex
import socket
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GPU_YML = ROOT / ".github" / "workflows" / "gpu.yml"
OUT = "${{ runner.temp }}/bench-gpu"
UPLOAD = "${{ runner.temp }}/bench-gpu-upload"


def workflow() -> dict:
    return yaml.safe_load(GPU_YML.read_text())


def gpu_steps() -> list[dict]:
    return workflow()["jobs"]["gpu"]["steps"]


def step(id_: str) -> dict:
    return next(s for s in gpu_steps() if s.get("id") == id_)


def the_tests_step() -> dict:
    return next(s for s in gpu_steps() if "docker run" in s.get("run", ""))


def docker_run() -> list[str]:
    """The words of the tests' `docker run` command, continuation lines joined, without its `&`."""
    joined = the_tests_step()["run"].replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if line.strip().startswith("docker run"))
    words = shlex.split(line)
    assert words[-1] == "&", words  # in the background, so that the step's trap runs on a cancel
    return words[:-1]


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
        ("--name", "$CONTAINER"),  # what the stop step removes, whatever became of this step
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
    order += [steps.index(step("stop")), steps.index(step("scrub"))]
    upload = next(i for i, s in enumerate(steps) if s.get("uses", "").startswith("actions/upload-artifact@"))
    assert order + [upload] == sorted(order + [upload]) and upload == len(steps) - 1
    assert step("logout")["if"] == "always()" and step("logout")["run"].strip() == "docker logout ghcr.io"
    assert step("stop")["if"] == "always()"
    assert step("scrub")["if"] == "always() && steps.stop.outcome == 'success'"
    assert step("scrub")["env"] == {"OUT": OUT, "UPLOAD": UPLOAD}
    assert steps[upload]["if"] == "always() && steps.scrub.outcome == 'success'"
    assert steps[upload]["with"]["path"] == UPLOAD
    assert workflow()["jobs"]["gpu"]["permissions"] == {"packages": "read"}


def scrub(out: Path, summary: Path) -> subprocess.CompletedProcess:
    """The scrub step's script, run by bash as the runner runs it; its copy lands in upload/ beside `out`."""
    upload = out.parent / "upload"
    env = {"PATH": "/usr/bin:/bin", "OUT": str(out), "UPLOAD": str(upload), "GITHUB_STEP_SUMMARY": str(summary)}
    return subprocess.run(["bash", "-e", "-c", step("scrub")["run"]], env=env, capture_output=True, text=True)


def test_the_scrub_copies_out_regular_files_and_folders_only(tmp_path):
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
    upload = tmp_path / "upload"
    copied = sorted(str(p.relative_to(upload)) for p in upload.rglob("*"))
    assert copied == ["bench.json", "cuda", "cuda/deep", "cuda/deep/table.md"]
    assert (upload / "cuda" / "deep" / "table.md").read_text() == "| a |\n"
    assert secret.read_text() == "host secret\n"  # nothing the links point at was touched
    assert not summary.exists() or "host secret" not in summary.read_text()


def test_the_containers_summary_reaches_the_job_summary_as_a_regular_file_only(tmp_path):
    out, summary = tmp_path / "out", tmp_path / "summary"
    out.mkdir()
    (out / "summary.md").write_text("## Benchmark (cuda)\n")
    assert scrub(out, summary).returncode == 0
    assert summary.read_text() == "```\n## Benchmark (cuda)\n\n```\n"
    summary.unlink()
    assert scrub(tmp_path / "absent", summary).returncode == 0  # the tests never ran: nothing to keep
    assert not summary.exists()


def code_block(markdown: str) -> tuple[str, str, str]:
    """(opening fence, the block's text, what follows it): the block that opens the text, closed as
    CommonMark closes it (a line of the fence's character, at least as long, indented 3 spaces at most;
    a carriage return ends a line too)."""
    lines = markdown.replace("\r\n", "\n").replace("\r", "\n").split("\n")
    fence = re.match(r"(`{3,})$", lines[0])
    assert fence, lines[0]
    for i, line in enumerate(lines[1:], 1):
        if re.fullmatch(rf" {{0,3}}`{{{len(fence[1])},}}\s*", line):
            return fence[1], "\n".join(lines[1:i]), "\n".join(lines[i + 1 :])
    raise AssertionError("the code block is never closed")


@pytest.mark.parametrize(
    "planted",
    [
        "```\n<img src=x onerror=alert(1)>\n# Owned\n",  # closes a 3-backtick block, then Markdown and HTML
        "ok\n``````````\n[click](https://evil.example)\n",
        "ok\r```\r**bold**\n",  # lines ended by carriage returns
        "   ````\n<script>x</script>",  # an indented closing fence, no final newline
        "a ` b `` c ``` d\n```` e\n",
    ],
)
def test_the_containers_summary_is_shown_as_text_that_cannot_close_its_block(tmp_path, planted):
    out, summary = tmp_path / "out", tmp_path / "summary"
    out.mkdir()
    (out / "summary.md").write_text(planted)
    assert scrub(out, summary).returncode == 0
    fence, text, after = code_block(summary.read_text())
    assert after.strip() == "", after  # nothing of it is outside the block
    assert text.replace("\r\n", "\n").replace("\r", "\n").rstrip("\n") == planted.replace("\r", "\n").rstrip("\n")


def test_a_large_summary_is_cut(tmp_path):
    out, summary = tmp_path / "out", tmp_path / "summary"
    out.mkdir()
    (out / "summary.md").write_text("x" * 200_000 + "\n" + "`" * 100 + "\n")
    assert scrub(out, summary).returncode == 0
    fence, text, after = code_block(summary.read_text())
    assert len(text) <= 65536 and after.strip() == ""


def run_tests_step(tmp_path: Path, docker: str) -> subprocess.CompletedProcess:
    """The tests step's script, run by bash with a stand-in `docker` (this script) on PATH."""
    fake = tmp_path / "bin"
    fake.mkdir(exist_ok=True)
    (fake / "docker").write_text(f"#!/bin/sh\n{docker}\n")
    (fake / "docker").chmod(0o755)
    env = {"PATH": f"{fake}:/usr/bin:/bin", "OUT": str(tmp_path / "out"), "IMAGE": "ghcr.io/o/r@sha256:" + "0" * 64,
           "CONTAINER": "gpu-tests-7-1"}  # fmt: skip
    return subprocess.run(["bash", "-e", "-c", the_tests_step()["run"]], env=env, capture_output=True, text=True)


PLANTED = 'case "$1" in info) echo "[]";; run) echo "::warning::planted"; echo "::stop-commands::guess"; ' \
          'echo "::guess::"; echo "::error::planted" >&2; exit 3;; esac'  # fmt: skip


def test_the_tests_output_runs_no_workflow_command(tmp_path):
    done = run_tests_step(tmp_path, PLANTED)
    assert done.returncode == 3  # the tests' failure is the step's
    lines = done.stdout.splitlines()
    stop = re.fullmatch(r"::stop-commands::([0-9a-f]{32})", lines[0])
    assert stop, lines[0]  # before anything of the container's
    assert lines[-1] == f"::{stop[1]}::"  # resumed only after it, failed or not
    assert "::warning::planted" in lines[1:-1] and "::error::planted" in done.stderr
    again = re.fullmatch(r"::stop-commands::([0-9a-f]{32})", run_tests_step(tmp_path, PLANTED).stdout.splitlines()[0])
    assert again[1] != stop[1]  # a new random token each run: the tests cannot know it
    passed = run_tests_step(tmp_path, 'case "$1" in info) echo "[]";; run) echo ok;; esac')
    assert passed.returncode == 0 and passed.stdout.splitlines()[-1].startswith("::")


def test_the_gpu_jobs_wait_for_the_runner_group_variable():
    data = workflow()
    for name, job in data["jobs"].items():
        assert job["if"].startswith("vars.GPU_RUNNER_GROUP != ''"), name
        assert " || " not in job["if"].split("&&")[0] and not job["if"].startswith("always()"), name
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
