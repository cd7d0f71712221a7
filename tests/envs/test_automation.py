"""The Dockerfile and the GitHub workflows run only Nox sessions that exist, install from the
locks, and follow the security rules (pinned actions and images, least privilege)."""

from __future__ import annotations

import ast
import hashlib
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
DOCKERFILE = ROOT / "Dockerfile"


def nox_sessions() -> set[str]:
    """Session names in the noxfile: the function's name, or the decorator's name=."""
    names = set()
    for node in ast.parse((ROOT / "noxfile.py").read_text()).body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for decorator in node.decorator_list:
            if "nox.session" in ast.unparse(decorator):
                keywords = {k.arg: k.value for k in getattr(decorator, "keywords", [])}
                names.add(keywords["name"].value if "name" in keywords else node.name)
    return names


def sessions_in(command: str) -> list[str]:
    """Session names after each `-s` of each nox call in a shell command."""
    names = []
    for part in re.split(r"&&|;|\n", command.replace("\\\n", " ")):  # continuation lines joined
        if part.lstrip().startswith("#"):
            continue  # a comment
        words = shlex.split(part)
        if "-s" in words:
            for word in words[words.index("-s") + 1 :]:
                if word.startswith("-") or word in ("||", "|", "&"):  # an option, the next command, or the background
                    break
                names.append(word)
    return names


def steps(workflow: dict):
    for job in workflow["jobs"].values():
        yield from job.get("steps", [])


@pytest.fixture(params=WORKFLOWS, ids=lambda p: p.name)
def workflow(request):
    return request.param, yaml.safe_load(request.param.read_text())


def test_there_are_the_four_workflows():
    assert {p.name for p in WORKFLOWS} >= {"ci.yml", "gpu.yml", "lock.yml", "docker.yml"}


# Shell steps that run no Nox session: the GPU gate (no checkout in its job), the GPU job's image
# pull, load, logout, stop and scrub, the pull request image's archive (tests/envs/test_gpu_job.py,
# test_gpu_cancel.py, test_gpu_gate.py), and the image job's checks and name
# (tests/envs/test_image_tags.py).
PLAIN_SHELL_STEPS = {
    ("gpu.yml", "resolve"),
    ("gpu.yml", "pull"),
    ("gpu.yml", "logout"),
    ("gpu.yml", "stop"),
    ("gpu.yml", "load"),
    ("gpu.yml", "archive"),
    ("gpu.yml", "scrub"),
    ("docker.yml", "sha"),
    ("docker.yml", "kind"),
    ("docker.yml", "token"),
    ("docker.yml", "name"),
    ("ci.yml", "nox"),
    ("lock.yml", "nox"),
    ("lock.yml", "app-id"),
    ("lock.yml", "app-key"),
    ("lock.yml", "copy"),
}


def test_every_step_runs_a_nox_session_or_a_pinned_action(workflow):
    path, data = workflow
    text = path.read_text()
    known = nox_sessions()
    for step in steps(data):
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
            line = next(line for line in text.splitlines() if step["uses"] in line)
            assert re.search(r"# v\d", line), f"{path.name}: no version comment on {step['uses']}"
        elif (path.name, step.get("id")) not in PLAIN_SHELL_STEPS:
            names = sessions_in(step["run"])
            assert "nox" in step["run"] and names, f"{path.name}: step runs no Nox session: {step['run']!r}"
            assert set(names) <= known, f"{path.name}: unknown sessions {set(names) - known}"


# The first major of each action that runs on Node 24: GitHub's runners no longer run Node 20 actions.
NODE24_MAJORS = {
    "actions/checkout": 5,
    "actions/setup-python": 6,
    "actions/cache": 5,
    "actions/upload-artifact": 6,
    "actions/download-artifact": 7,
    "actions/create-github-app-token": 3,
    "docker/setup-buildx-action": 4,
    "docker/login-action": 4,
    "docker/metadata-action": 6,
    "docker/build-push-action": 7,
    "peter-evans/create-pull-request": 8,
}


def test_every_action_is_on_a_node24_major(workflow):
    path, _ = workflow
    for name, major in re.findall(r"uses: ([\w.-]+/[\w.-]+)@[0-9a-f]{40} # v(\d+)\.", path.read_text()):
        assert name in NODE24_MAJORS, f"{path.name}: {name} is new here: add its first Node 24 major to NODE24_MAJORS"
        assert int(major) >= NODE24_MAJORS[name], f"{path.name}: {name} v{major} runs on Node 20"


def test_no_workflow_restores_an_actions_cache(workflow):
    # Any job of a run on main (the lock job's new tools) can save any key in main's scope, which pull
    # requests' runs read too, and a restore unpacks with `tar -P`, writing where the archive says.
    path, data = workflow
    for step in steps(data):
        uses = step.get("uses", "")
        assert not uses.startswith("actions/cache"), f"{path.name}: {uses}"
        if uses.startswith("actions/setup-python@"):
            assert "cache" not in step.get("with", {}), f"{path.name}: setup-python's cache restores one"
        for value in step.get("with", {}).values():
            assert "type=gha" not in str(value), f"{path.name}: a BuildKit cache in the Actions cache"


def test_only_a_pull_requests_newer_run_cancels_an_older_one_and_every_push_to_main_runs():
    concurrency = load("ci.yml")["concurrency"]
    assert concurrency["cancel-in-progress"] == "${{ github.event_name == 'pull_request' }}"
    # A push's group is its own run (no pending run to be replaced); a pull request's is pr-<number>.
    assert concurrency["group"] == (
        "ci-${{ github.event_name == 'pull_request' && format('pr-{0}', github.event.pull_request.number)"
        " || github.run_id }}"
    )
    for name in ("docker.yml", "lock.yml"):
        assert load(name)["concurrency"]["cancel-in-progress"] is False, name
    # gpu.yml: tests/envs/test_gpu_job.py


NOX_INSTALL = "python -m pip install --require-hashes --only-binary :all: -r requirements/nox-lock.txt"


def test_nox_comes_from_its_hash_checked_lock(workflow):
    path, data = workflow
    assert "pipx" not in path.read_text() and "nox==" not in path.read_text()
    for name, job in data["jobs"].items():
        runs = [s.get("run", "").strip() for s in job.get("steps", [])]
        first_session = next((i for i, r in enumerate(runs) if r.startswith("nox ")), None)
        if first_session is not None:
            assert NOX_INSTALL in runs[:first_session], f"{path.name}:{name} runs nox without installing it hashed"
    nox_in = (ROOT / "requirements" / "nox.in").read_text()
    lock = (ROOT / "requirements" / "nox-lock.txt").read_text()
    pin = next(line for line in nox_in.splitlines() if line.startswith("nox=="))
    assert f"{pin} \\\n    --hash=sha256:" in lock, "nox-lock.txt does not pin what nox.in names: nox -s lock"
    made_from = hashlib.sha256((ROOT / "requirements" / "nox.in").read_bytes()).hexdigest()
    assert f"# input-sha256: {made_from}\n" in lock, "nox-lock.txt is stale: nox.in changed since it was locked"


def test_least_privilege_and_hygiene(workflow):
    path, data = workflow
    assert data.get("permissions") == {}, f"{path.name}: top-level permissions must be {{}}"
    assert "concurrency" in data, path.name
    for name, job in data["jobs"].items():
        assert "permissions" in job, f"{path.name}:{name}"
        assert "timeout-minutes" in job or "uses" in job, f"{path.name}:{name}"  # a called workflow sets its own
        for step in job.get("steps", []):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step.get("with", {}).get("persist-credentials") is False, f"{path.name}:{name}"


def load(name: str) -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / name).read_text())


def test_only_mains_gpu_workflow_reaches_the_gpu_and_only_for_the_reviewed_commit():
    data = load("gpu.yml")
    assert set(data[True]) == {"push", "workflow_dispatch"}  # PyYAML reads the key `on` as True
    assert data[True]["push"] == {"branches": ["main"]}
    assert set(data[True]["workflow_dispatch"]["inputs"]) == {"pull-request", "sha"}
    commit, image, gpu = data["jobs"]["commit"], data["jobs"]["image"], data["jobs"]["gpu"]
    assert "steps" in commit and not any("uses" in s for s in commit["steps"])  # the gate checks nothing out
    assert (
        image["uses"] == "./.github/workflows/docker.yml" and image["with"]["sha"] == "${{ needs.commit.outputs.sha }}"
    )
    assert gpu["needs"] == ["commit", "image", "pr-image"] and gpu["permissions"] == {"packages": "read"}
    assert gpu["runs-on"]["labels"] == ["self-hosted", "linux", "x64", "gpu"]
    assert "container" not in gpu  # a job container would get the host's docker socket
    steps = {s.get("id"): s for s in gpu["steps"]}
    assert steps["pull"]["env"]["IMAGE"] == "${{ needs.image.outputs.image }}"  # by digest
    assert steps["tests"]["env"]["IMAGE"] == "${{ steps.pull.outputs.image || steps.load.outputs.image }}"
    for id_ in ("pull", "load"):  # the image this run built for the resolved commit
        assert steps[id_]["env"]["SHA"] == "${{ needs.commit.outputs.sha }}"
    # Pull requests: tests/envs/test_gpu_gate.py


def test_the_image_comes_back_by_digest_tagged_with_its_commit():
    data = load("docker.yml")
    assert set(data[True]) == {"workflow_call", "push"} and data[True]["push"] == {"tags": ["v*"]}
    assert data[True]["workflow_call"]["outputs"]["image"]["value"] == "${{ jobs.image.outputs.image }}"
    job = data["jobs"]["image"]
    assert job["outputs"]["image"] == "${{ steps.name.outputs.name }}@${{ steps.push.outputs.digest }}"
    meta = next(s for s in job["steps"] if s.get("id") == "meta")
    assert "type=raw,value=sha-${{ env.SHA }}" in meta["with"]["tags"].splitlines()
    push = next(s for s in job["steps"] if s.get("id") == "push")
    assert push["with"]["push"] is True
    # Which other tags and which cache: tests/envs/test_image_tags.py


def test_the_image_job_refuses_a_sha_that_is_not_a_full_commit_before_anything_else(tmp_path):
    steps = load("docker.yml")["jobs"]["image"]["steps"]
    assert steps[0]["id"] == "sha"  # before the checkout, in the job that can write packages
    # A full commit, and the run's own: a pull request's commit never reaches the push token.
    for sha, ok in [(GATE_SHA, True), (GATE_SHA.upper(), False), (GATE_SHA[:7], False), ("", False),
                    (f"{GATE_SHA}\n::warning::planted", False), ("main", False), ("9" * 40, False)]:  # fmt: skip
        done = subprocess.run(["bash", "-e", "-c", steps[0]["run"]], capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", "SHA": sha, "GITHUB_SHA": GATE_SHA})  # fmt: skip
        assert (done.returncode == 0) == ok, sha
        assert not any(line.startswith("::warning::") for line in done.stdout.splitlines())


def test_the_lock_pull_request_is_opened_by_an_app_from_an_unprivileged_lock_job():
    data = load("lock.yml")
    lock, pull_request = data["jobs"]["lock"], data["jobs"]["pull-request"]
    assert lock["permissions"] == {"contents": "read"}
    # What it runs can be new releases: it gets no secret, no environment, no token beyond reading.
    assert "environment" not in lock and "secrets." not in yaml.safe_dump(lock), lock
    assert [n for s in lock["steps"] if "run" in s for n in sessions_in(s["run"])] == ["lock"]
    assert pull_request["needs"] == "lock" and pull_request["permissions"] == {"contents": "read"}
    # It runs none of the repository's code: its only scripts are the workflow's own checks and copy.
    assert [s["id"] for s in pull_request["steps"] if "run" in s] == ["app-key", "copy"]
    for s in pull_request["steps"]:
        assert not re.search(r"\b(nox|python|pip|make|bash|sh)\b|\./", s.get("run", "")), s["run"]
    app = next(s for s in pull_request["steps"] if s.get("id") == "app")
    assert app["uses"].startswith("actions/create-github-app-token@")
    assert {k for k in app["with"] if k.startswith("permission-")} == {
        "permission-contents",
        "permission-pull-requests",
    }
    opened = next(s for s in pull_request["steps"] if s.get("uses", "").startswith("peter-evans/create-pull-request@"))
    assert opened["with"]["token"] == "${{ steps.app.outputs.token }}"


def lock_step(job: str, id_: str) -> dict:
    return next(s for s in load("lock.yml")["jobs"][job]["steps"] if s.get("id") == id_)


def test_the_lock_workflow_says_at_once_when_the_app_is_not_set_up():
    lock, pull_request = load("lock.yml")["jobs"]["lock"], load("lock.yml")["jobs"]["pull-request"]
    assert lock["steps"][0]["id"] == "app-id" and pull_request["steps"][0]["id"] == "app-key"
    for step, env in [(lock["steps"][0], {"LOCK_APP_ID": ""}), (pull_request["steps"][0], {"KEY_SET": "false"})]:
        done = subprocess.run(["bash", "-e", "-c", step["run"]], env={"PATH": "/usr/bin:/bin", **env},
                              capture_output=True, text=True)  # fmt: skip
        assert done.returncode == 1 and done.stdout.startswith("::error::") and "docs/ci.md" in done.stdout
    for step, env in [(lock["steps"][0], {"LOCK_APP_ID": "123"}), (pull_request["steps"][0], {"KEY_SET": "true"})]:
        assert subprocess.run(["bash", "-e", "-c", step["run"]], env={"PATH": "/usr/bin:/bin", **env}).returncode == 0


def test_only_regular_lock_files_of_mains_inputs_leave_the_artifact(tmp_path):
    download = next(
        s for s in load("lock.yml")["jobs"]["pull-request"]["steps"]
        if s.get("uses", "").startswith("actions/download-artifact@")
    )  # fmt: skip
    assert download["with"]["path"] == "${{ runner.temp }}/locks"  # never into the checkout
    copy = lock_step("pull-request", "copy")
    assert copy["env"]["LOCKS"] == "${{ runner.temp }}/locks"
    checkout, locks = tmp_path / "checkout", tmp_path / "temp" / "locks"
    (checkout / "requirements").mkdir(parents=True)
    (locks / "requirements").mkdir(parents=True)
    for name in ("venv", "tools", "nox"):
        (checkout / "requirements" / f"{name}.in").write_text(f"{name}\n")
    host = tmp_path / "host-secret"
    host.write_text("secret\n")
    (locks / "conda-lock.yml").write_text("conda\n")
    (locks / "requirements" / "venv-lock.txt").write_text("venv\n")
    (locks / "requirements" / "tools-lock.txt").symlink_to(host)  # a link: not copied
    (locks / "requirements" / "nox-lock.txt").mkdir()  # a folder: not copied
    (locks / "requirements" / "evil-lock.txt").write_text("evil\n")  # main has no evil.in
    (locks / ".git").mkdir()
    (locks / ".git" / "config").write_text("[core]\n\tfsmonitor = touch pwned\n")  # never looked at
    done = subprocess.run(["bash", "-e", "-c", copy["run"]], cwd=checkout, capture_output=True, text=True,
                          env={"PATH": "/usr/bin:/bin", "LOCKS": str(locks)})  # fmt: skip
    assert done.returncode == 0, done.stderr
    copied = sorted(str(p.relative_to(checkout)) for p in checkout.rglob("*") if p.is_file() and p.suffix != ".in")
    assert copied == ["conda-lock.yml", "requirements/venv-lock.txt"], done.stdout
    assert (checkout / "requirements" / "venv-lock.txt").read_text() == "venv\n"
    assert not (checkout / ".git").exists()


def test_a_linked_requirements_folder_in_the_artifact_brings_nothing_in(tmp_path):
    checkout, locks, elsewhere = tmp_path / "checkout", tmp_path / "locks", tmp_path / "elsewhere"
    (checkout / "requirements").mkdir(parents=True)
    (checkout / "requirements" / "venv.in").write_text("venv\n")
    elsewhere.mkdir()
    (elsewhere / "venv-lock.txt").write_text("not from the lock job\n")
    locks.mkdir()
    (locks / "requirements").symlink_to(elsewhere)
    done = subprocess.run(["bash", "-e", "-c", lock_step("pull-request", "copy")["run"]], cwd=checkout,
                          env={"PATH": "/usr/bin:/bin", "LOCKS": str(locks)}, capture_output=True, text=True)  # fmt: skip
    assert done.returncode == 0 and not (checkout / "requirements" / "venv-lock.txt").exists()


GATE_SHA = "0123456789abcdef0123456789abcdef01234567"


def test_dockerfile_runs_existing_sessions_and_installs_from_locks():
    text = DOCKERFILE.read_text()
    joined = text.replace("\\\n", " ")  # continuation lines
    known = nox_sessions()
    commands = re.findall(r"^RUN .*nox -s .*$", joined, flags=re.M)
    cmd = re.search(r"^CMD (\[.*\])$", text, flags=re.M)
    assert cmd, "no CMD"
    named = [name for c in commands for name in sessions_in(c.split("nox", 1)[1].join(["nox", ""]))]
    named += sessions_in(" ".join(yaml.safe_load(cmd[1])))
    assert {"env", "build", "test", "bench"} <= set(named) <= known
    # Environments come from the locks, never from a solve.
    assert not re.search(r"\b(conda|mamba|micromamba)\s+(env\s+)?(create|install|update)\b", text)
    installs = re.findall(r"pip install .*", joined)
    assert installs == ["pip install --require-hashes --only-binary :all: -r /opt/custom-op/nox-lock.txt"], installs
    assert "COPY requirements/nox-lock.txt /opt/custom-op/nox-lock.txt" in text  # nox alone, hash-checked
    assert "conda-lock.y[m]l" in text and "requirements/" in text
    stages = set(re.findall(r"^FROM \S+ AS (\S+)", text, flags=re.M))
    for image in re.findall(r"^FROM (\S+)", text, flags=re.M):
        assert image in stages or "@sha256:" in image, f"unpinned base image {image}"
    assert re.search(r"^USER 1000", text, flags=re.M), "runs as root"


def test_lint_runs_zizmor_in_both_personas():
    lint = next(n for n in ast.parse((ROOT / "noxfile.py").read_text()).body if getattr(n, "name", "") == "lint")
    source = ast.unparse(lint)
    assert "for persona in ('regular', 'auditor')" in source and "'--persona', persona" in source, source
