"""A cancelled or timed-out GPU job leaks nothing of the host: the runner ends only the tests step's shell,
and dockerd's container would live on beside the job's `always()` steps. Here a stand-in dockerd runs a
hostile "container" that outlives the shell and, whenever the test lets it, plants a link to a host file
in the output folder and swaps summary.md for one; the test lets it after each of the later steps.

Synchronised by FIFOs: the container says `ready` once its files are written, and holds a read end of
`go` open for as long as it lives, so a non-blocking open of `go` for writing tells whether it is alive."""

from __future__ import annotations

import errno
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
GPU_YML = ROOT / ".github" / "workflows" / "gpu.yml"
CONTAINER = "gpu-tests-7-1"

DOCKER = """#!{python}
# A stand-in for the docker CLI and its daemon: a container is a process in a session of its own (not the
# step shell's child, as dockerd's are not), recorded in the state folder under its name.
import os, select, signal, subprocess, sys
from pathlib import Path

state = Path(os.environ["FAKE_DOCKERD"])
args = sys.argv[1:]


def wait_gone(pid):
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    select.select([fd], [], [])
    os.close(fd)


if args[0] == "info":
    print("[]")
elif args[0] == "run":
    if "--name" not in args:  # the test waits for `ready`: say why no container came instead
        (state / "ready").write_text("a container without a name")
        sys.exit(125)
    name, out = args[args.index("--name") + 1], args[args.index("-v") + 1].split(":")[0]
    container = subprocess.Popen(["bash", os.environ["FAKE_CONTAINER"], out], start_new_session=True,
                                 stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    (state / name).write_text(str(container.pid))
    code = container.wait()
    (state / name).unlink(missing_ok=True)  # --rm
    sys.exit(128 - code if code < 0 else code)
elif args[:2] == ["rm", "--force"]:
    record = state / args[2]
    if not record.exists() or os.environ.get("FAKE_RM_FAILS"):
        sys.exit("Error response from daemon: cannot remove container " + args[2])
    pid = int(record.read_text())
    os.kill(pid, signal.SIGKILL)
    wait_gone(pid)
    record.unlink(missing_ok=True)
elif args[0] == "ps":
    name = args[args.index("--filter") + 1].removeprefix("name=^/?").removesuffix("$")
    if (state / name).exists():
        print("0123456789ab")
else:
    sys.exit("stand-in docker: unexpected " + " ".join(args))
"""

# The hostile container: its results, then `ready`; then, each time it is woken, a link to the host's
# secret in place of summary.md and beside it.
WRITER = """exec 4<>"$FAKE_DOCKERD/go"
echo '{"ok": 1}' > "$1/bench.json"
mkdir "$1/cuda" && echo '| op |' > "$1/cuda/table.md"
echo '## Benchmark' > "$1/summary.md"
echo ready > "$FAKE_DOCKERD/ready"
while read -r _ <&4; do
    ln -sfn "$SECRET" "$1/summary.md"
    ln -sfn "$SECRET" "$1/leak"
    ln -sfn "$(dirname "$SECRET")" "$1/cuda/host"
    echo planted > "$FAKE_DOCKERD/planted"
done
"""


def steps() -> dict[str, dict]:
    return {s["id"]: s for s in yaml.safe_load(GPU_YML.read_text())["jobs"]["gpu"]["steps"] if "id" in s}


def upload_step() -> dict:
    gpu = yaml.safe_load(GPU_YML.read_text())["jobs"]["gpu"]["steps"]
    return next(s for s in gpu if s.get("uses", "").startswith("actions/upload-artifact@"))


class Host:
    """The runner VM: a stand-in docker on PATH, a host secret, the job's folders."""

    def __init__(self, tmp_path: Path):
        self.state = tmp_path / "dockerd"
        self.state.mkdir()
        for fifo in ("go", "ready", "planted"):
            os.mkfifo(self.state / fifo)
        self.secret = tmp_path / "runner" / ".credentials"
        self.secret.parent.mkdir()
        self.secret.write_text("host secret\n")
        bin_ = tmp_path / "bin"
        bin_.mkdir()
        (bin_ / "docker").write_text(DOCKER.replace("{python}", sys.executable))
        (bin_ / "docker").chmod(0o755)
        (tmp_path / "container.sh").write_text(WRITER)
        self.out, self.upload = tmp_path / "temp" / "bench-gpu", tmp_path / "temp" / "bench-gpu-upload"
        self.out.parent.mkdir()
        self.summary = tmp_path / "job-summary"
        self.env = {
            "PATH": f"{bin_}:/usr/bin:/bin",
            "FAKE_DOCKERD": str(self.state),
            "FAKE_CONTAINER": str(tmp_path / "container.sh"),
            "SECRET": str(self.secret),
            "OUT": str(self.out),
            "UPLOAD": str(self.upload),
            "CONTAINER": CONTAINER,
            "IMAGE": "ghcr.io/o/r@sha256:" + "0" * 64,
            "GITHUB_STEP_SUMMARY": str(self.summary),
        }

    def start_tests(self) -> subprocess.Popen:
        """The tests step, returned once the container has written its results."""
        step = subprocess.Popen(["bash", "-e", "-c", steps()["tests"]["run"]], env=self.env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)  # fmt: skip
        said = (self.state / "ready").read_text()
        assert said == "ready\n", said
        return step

    def run(self, id_: str, **env: str) -> subprocess.CompletedProcess:
        return subprocess.run(["bash", "-e", "-c", steps()[id_]["run"]], env={**self.env, **env},
                              capture_output=True, text=True)  # fmt: skip

    def wake_writer(self) -> bool:
        """Lets the container plant its links, if it is still alive; whether it was."""
        try:
            fd = os.open(self.state / "go", os.O_WRONLY | os.O_NONBLOCK)
        except OSError as error:
            assert error.errno == errno.ENXIO  # no reader: the container is gone
            return False
        os.write(fd, b"plant\n")
        os.close(fd)
        (self.state / "planted").read_text()
        return True

    def assert_only_the_results_reach_the_upload(self) -> None:
        found = sorted(str(p.relative_to(self.upload)) for p in self.upload.rglob("*"))
        assert found == ["bench.json", "cuda", "cuda/table.md", "summary.md"], found
        for path in self.upload.rglob("*"):
            assert not path.is_symlink() and (path.is_dir() or path.is_file()), path
            assert path.is_dir() or "host secret" not in path.read_text(), path
        assert "host secret" not in self.summary.read_text()
        assert "## Benchmark" in self.summary.read_text()


@pytest.mark.parametrize("cancel", [signal.SIGTERM, signal.SIGKILL], ids=["signalled", "killed"])
def test_a_cancelled_tests_step_leaves_no_container_and_no_link_reaches_the_upload(tmp_path, cancel):
    host = Host(tmp_path)
    tests = host.start_tests()
    tests.send_signal(cancel)  # the runner signals, then kills, the step's shell alone
    assert tests.wait() != 0
    if cancel == signal.SIGTERM:  # the trap removed the container
        assert not (host.state / CONTAINER).exists()
    stop = host.run("stop")
    assert stop.returncode == 0, stop.stdout + stop.stderr
    said, _ = tests.communicate()  # the stand-in docker run, holding the step's output, ended with its container
    if cancel == signal.SIGTERM:  # and the trap resumed workflow commands
        token = said.splitlines()[0].removeprefix("::stop-commands::")
        assert said.splitlines()[-1] == f"::{token}::"
    assert not host.wake_writer()  # gone before the copy: nothing plants a link while it is made
    assert host.run("scrub").returncode == 0
    assert not host.wake_writer()
    host.assert_only_the_results_reach_the_upload()
    assert host.secret.read_text() == "host secret\n"


def test_a_container_that_cannot_be_removed_stops_the_copy_and_the_upload(tmp_path):
    host = Host(tmp_path)
    tests = host.start_tests()
    tests.kill()
    tests.wait()
    try:
        stop = host.run("stop", FAKE_RM_FAILS="1")
        assert stop.returncode == 1 and f"the test container {CONTAINER} is still there" in stop.stdout
        assert host.wake_writer()  # it lives on: what it writes must not leave the VM
        assert steps()["scrub"]["if"] == "always() && steps.stop.outcome == 'success'"
        assert upload_step()["if"] == "always() && steps.scrub.outcome == 'success'"
    finally:
        assert host.run("stop").returncode == 0
        tests.communicate()


def test_the_copy_is_the_uploads_own_and_a_living_writer_cannot_reach_it(tmp_path):
    # Were a container ever still running, its links land in the output folder, never in the copy.
    host = Host(tmp_path)
    tests = host.start_tests()
    try:
        assert host.wake_writer()  # summary.md is now a link to the host's secret
        (host.out / "summary.md").unlink()
        (host.out / "summary.md").write_text("## Benchmark\n")
        os.mkfifo(host.out / "cuda" / "fifo")  # would hang the upload
        assert host.run("scrub").returncode == 0
        assert host.wake_writer()  # after the copy, links in place of its files
        host.assert_only_the_results_reach_the_upload()
    finally:
        tests.kill()
        assert host.run("stop").returncode == 0
        tests.communicate()
    assert upload_step()["with"]["path"] == steps()["scrub"]["env"]["UPLOAD"] == "${{ runner.temp }}/bench-gpu-upload"
    assert steps()["stop"]["env"]["CONTAINER"] == steps()["tests"]["env"]["CONTAINER"]
    assert steps()["tests"]["env"]["CONTAINER"] == "gpu-tests-${{ github.run_id }}-${{ github.run_attempt }}"
