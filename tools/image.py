"""nox -s image: build the Dockerfile and run it, as users and the GPU workflow do.

    python tools/image.py [--engine docker|buildah] [--arch 9.0] [--ca-bundle PATH]

1. Build the runtime image: docker where a Docker engine answers, else buildah (a Dockerfile
   builder that needs no daemon: `--isolation chroot`, layers shared through fuse-overlayfs).
   Where the pinned base image cannot be pulled (no registry reachable), buildah builds on a
   stand-in made by debootstrap from Debian's packages: bookworm with Python, as the base is.
2. Run the image's tests without a GPU (the CPU suite), as its default user.
3. Run a job container's layout: the checkout mounted at another path (/__w/<repo>/<repo>),
   the environments from the image, as a user whose uid is not 1000.
4. Run the GPU workflow's layout: that uid in the image's own checkout, which it cannot write,
   an output folder its only mount, no capabilities: the tests, then a quick benchmark whose
   results and summary must land in the output folder.
Every run has no network, as in the GPU job.

Behind a TLS-inspecting proxy the CA bundle goes in as a build secret (`--ca-bundle`, default:
the host's SSL_CERT_FILE or /etc/ssl/certs/ca-certificates.crt), never into a layer.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = next(p.parent.name for p in ROOT.glob("*/_library.py"))
TAG = f"localhost/{PACKAGE.replace('_', '-')}:local"
STAND_IN_BASE = f"localhost/{PACKAGE.replace('_', '-')}-base:bookworm"
GPU_JOB_UID = "1001"  # a runner account that is not the image's uid 1000
GPU_JOB_OUTPUT = "/workspace/build/bench"  # gpu.yml's only mount
ENVS_VARIABLE = f"{PACKAGE.upper()}_ENVS_DIR"


def log(message: str) -> None:
    print(f"image: {message}", flush=True)


def run(*command: str, **kwargs) -> subprocess.CompletedProcess:
    log(" ".join(command))
    return subprocess.run(command, check=True, **kwargs)


def docker_works() -> bool:
    return (
        shutil.which("docker") is not None and subprocess.run(["docker", "info"], capture_output=True).returncode == 0
    )


def buildah() -> list[str]:
    if shutil.which("buildah") is None:
        sys.exit("image: neither a Docker engine nor buildah is here: install docker, or `apt-get install buildah`")
    if shutil.which("unshare") is None or shutil.which("ip") is None:
        sys.exit("image: the runs without network need unshare and ip: `apt-get install util-linux iproute2`")
    command = ["buildah"]
    if shutil.which("fuse-overlayfs"):  # layers shared, not copied (vfs copies each one)
        command += ["--storage-driver", "overlay", "--storage-opt", "overlay.mount_program=/usr/bin/fuse-overlayfs"]
    return command


def stand_in_base(b: list[str]) -> str:
    """Debian bookworm with Python, from Debian's packages, for when the pinned base cannot be pulled."""
    if subprocess.run([*b, "inspect", STAND_IN_BASE], capture_output=True).returncode == 0:
        return STAND_IN_BASE
    if shutil.which("debootstrap") is None:
        sys.exit("image: the base image cannot be pulled and debootstrap is missing: `apt-get install debootstrap`")
    with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as tmp:
        rootfs = Path(tmp) / "rootfs"
        packages = "python3,python3-dev,python3-venv,python3-pip,python-is-python3,ca-certificates,passwd"
        run("debootstrap", "--variant=minbase", f"--include={packages}", "bookworm", str(rootfs),
            "http://deb.debian.org/debian", stdout=subprocess.DEVNULL)  # fmt: skip
        archive = Path(tmp) / "rootfs.tar"
        run("tar", "-C", str(rootfs), "-cf", str(archive), ".")
        container = run(*b, "from", "scratch", capture_output=True, text=True).stdout.strip()
        run(*b, "add", container, str(archive), "/", stdout=subprocess.DEVNULL)
        # As the python image: headers (Inductor compiles against them), and pip may install into the
        # system Python (Debian marks it externally managed).
        run(*b, "config", "--env", "PIP_BREAK_SYSTEM_PACKAGES=1", "--env",
            "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", container)  # fmt: skip
        run(*b, "commit", "--quiet", container, STAND_IN_BASE, stdout=subprocess.DEVNULL)
        run(*b, "rm", container, stdout=subprocess.DEVNULL)
    return STAND_IN_BASE


def base_pullable(b: list[str], base: str) -> bool:
    return subprocess.run([*b, "pull", "--quiet", base], capture_output=True).returncode == 0


def default_base() -> str:
    """The image of the Dockerfile's first FROM (the base, pinned by digest)."""
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        if line.startswith("FROM "):
            return line.split()[1]
    raise SystemExit("image: the Dockerfile has no FROM")


@dataclass(frozen=True)
class Run:
    command: list[str]
    user: str | None = None  # None: the image's own user
    mounts: tuple[tuple[Path, str], ...] = ()  # (host folder, where the container sees it)
    workdir: str | None = None  # None: the image's /workspace
    confined: bool = False  # gpu.yml's options: no capabilities, no new privileges, a pids limit


def job_container_checkout(tmp: Path) -> Path:
    """A copy of the checkout owned by a runner's uid, where the runner would have checked it out."""
    checkout = tmp / "__w" / PACKAGE / PACKAGE
    listed = subprocess.run(
        ["git", "ls-files", "-z", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT, capture_output=True, text=True, check=True,
    ).stdout  # fmt: skip
    for name in filter(None, listed.split("\0")):
        if (ROOT / name).is_file():
            (checkout / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, checkout / name)
    run("chown", "-R", f"{GPU_JOB_UID}:{GPU_JOB_UID}", str(tmp / "__w"))
    return checkout


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="nox -s image")
    parser.add_argument("--engine", choices=("docker", "buildah"))
    parser.add_argument("--arch", default="9.0", help="TORCH_CUDA_ARCH_LIST of the image's build (default 9.0)")
    default_ca = os.environ.get("SSL_CERT_FILE") or "/etc/ssl/certs/ca-certificates.crt"
    parser.add_argument("--ca-bundle", default=default_ca if Path(default_ca).is_file() else None)
    args = parser.parse_args(argv)
    engine = args.engine or ("docker" if docker_works() else "buildah")
    secret = ["--secret", f"id=ca_bundle,src={args.ca_bundle}"] if args.ca_bundle else []
    build_args = ["--build-arg", f"TORCH_CUDA_ARCH_LIST={args.arch}"]

    if engine == "docker":
        run("docker", "build", *secret, *build_args, "--target", "runtime", "-t", TAG, str(ROOT))
        with tempfile.TemporaryDirectory() as tmp:
            for r in runs(Path(tmp)):
                confined = ["--cap-drop", "ALL", "--security-opt", "no-new-privileges", "--pids-limit", "4096"]
                run("docker", "run", "--rm", "--network", "none", *options(r, "-v", "-w"),
                    *(confined if r.confined else []), TAG, *r.command)  # fmt: skip
            check_gpu_job_output(Path(tmp))
        log(f"built and ran {TAG} with docker")
        return 0

    b = buildah()
    base = default_base()
    if not base_pullable(b, base):
        log(f"{base} cannot be pulled here: building on a stand-in made by debootstrap")
        base = stand_in_base(b)
    # --from replaces the first FROM's image: the pinned base, or its stand-in.
    run(*b, "bud", "--isolation", "chroot", "--layers", *secret, *build_args, "--from", base,
        "--target", "runtime", "-t", TAG, str(ROOT))  # fmt: skip
    container = run(*b, "from", TAG, capture_output=True, text=True).stdout.strip()
    try:
        with tempfile.TemporaryDirectory(dir=os.environ.get("TMPDIR", "/var/tmp")) as tmp:
            for r in runs(Path(tmp)):
                confined = ["--cap-drop", "ALL"] if r.confined else []  # buildah run has no --security-opt
                # No network: chroot isolation cannot take --network none, a network namespace of its
                # own can; its loopback brought up, as docker's --network none has it (gloo binds to it).
                run("unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$@"', "sh", *b, "run",
                    "--isolation", "chroot", *options(r, "--volume", "--workingdir"), *confined, container, "--",
                    *r.command)  # fmt: skip
            check_gpu_job_output(Path(tmp))
    finally:
        subprocess.run([*b, "rm", container], capture_output=True)
    log(f"built and ran {TAG} with buildah")
    return 0


def runs(tmp: Path) -> list[Run]:
    """Each run of the image; all without network, as the GPU job runs."""
    other = f"{GPU_JOB_UID}:{GPU_JOB_UID}"
    checkout = job_container_checkout(tmp)
    output = ((gpu_job_output(tmp), GPU_JOB_OUTPUT),)
    summary = f"GITHUB_STEP_SUMMARY={GPU_JOB_OUTPUT}/summary.md"
    return [
        # The default command's tests, as the image's user: the CPU suite (no GPU here); the
        # multi-process and export suites run once, in CI's own `nox -s test`.
        Run(["nox", "-s", "test", "--", "-m", "not multiprocess and not export"]),
        # A job container's layout: the checkout at another path, another uid, the image's environments.
        Run(
            ["nox", "-s", "build", "test", "--", "-k", "test_forward"],
            other,
            ((checkout, str(checkout)),),
            str(checkout),
        ),
        # gpu.yml's: the image's own checkout, read-only to that uid, and an output folder its only mount.
        Run(["nox", "-s", "test", "--", "-k", "test_forward"], other, output, confined=True),
        Run(
            ["env", summary, "nox", "-s", "bench", "--", "--quick", "--part", "matrix", "--dtype", "float32"],
            other,
            output,
            confined=True,
        ),
    ]


def options(r: Run, volume: str, workdir: str) -> list[str]:
    """--user, the mounts and the working folder of a run, in the engine's spelling."""
    user = ["--user", r.user] if r.user else []
    mounts = [arg for host, inside in r.mounts for arg in (volume, f"{host}:{inside}")]
    return user + mounts + ([workdir, r.workdir] if r.workdir else [])


def gpu_job_output(tmp: Path) -> Path:
    """An empty folder only the GPU job's uid can enter, as gpu.yml makes it under $RUNNER_TEMP."""
    folder = tmp / "bench-gpu"
    folder.mkdir(mode=0o700)
    run("chown", f"{GPU_JOB_UID}:{GPU_JOB_UID}", str(folder))
    return folder


def check_gpu_job_output(tmp: Path) -> None:
    folder = tmp / "bench-gpu"
    written = sorted(p.name for p in folder.iterdir())
    if "summary.md" not in written or not any(name.endswith(".json") for name in written):
        raise SystemExit(f"image: the GPU job's layout left {written} in its output folder, not a JSON and summary.md")
    log(f"the GPU job's layout wrote {', '.join(written)} to its output folder")


if __name__ == "__main__":
    sys.exit(main())
