"""The Dockerfile and the GitHub workflows run only Nox sessions that exist, install from the
locks, and follow the security rules (pinned actions and images, least privilege)."""

from __future__ import annotations

import ast
import re
import shlex
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
    for part in re.split(r"&&|;|\n", command):
        words = shlex.split(part)
        if "-s" in words:
            for word in words[words.index("-s") + 1 :]:
                if word.startswith("-"):
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


def test_every_step_runs_a_nox_session_or_a_pinned_action(workflow):
    path, data = workflow
    text = path.read_text()
    known = nox_sessions()
    for step in steps(data):
        if "uses" in step:
            assert re.fullmatch(r"[\w.-]+/[\w./-]+@[0-9a-f]{40}", step["uses"]), step["uses"]
            line = next(line for line in text.splitlines() if step["uses"] in line)
            assert re.search(r"# v\d", line), f"{path.name}: no version comment on {step['uses']}"
        else:
            names = sessions_in(step["run"])
            assert "nox" in step["run"] and names, f"{path.name}: step runs no Nox session: {step['run']!r}"
            assert set(names) <= known, f"{path.name}: unknown sessions {set(names) - known}"


def test_least_privilege_and_hygiene(workflow):
    path, data = workflow
    assert data.get("permissions") == {}, f"{path.name}: top-level permissions must be {{}}"
    assert "concurrency" in data, path.name
    for name, job in data["jobs"].items():
        assert "permissions" in job and "timeout-minutes" in job, f"{path.name}:{name}"
        for step in job.get("steps", []):
            if step.get("uses", "").startswith("actions/checkout@"):
                assert step.get("with", {}).get("persist-credentials") is False, f"{path.name}:{name}"


def test_gpu_workflow_never_runs_untrusted_code_by_itself():
    data = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu.yml").read_text())
    triggers = data[True]  # PyYAML reads the key `on` as True
    assert "pull_request_target" not in triggers
    assert set(triggers) == {"push", "merge_group", "workflow_dispatch", "pull_request"}
    assert triggers["pull_request"] == {"types": ["labeled"]}
    job = data["jobs"]["gpu"]
    assert "github.event.label.name ==" in job["if"]
    assert job["runs-on"] == ["self-hosted", "linux", "x64", "gpu"]
    assert job["container"]["options"] == "--gpus all"
    assert sessions_in(job["steps"][1]["run"]) == ["build", "test", "bench"]


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
    assert not re.search(r"pip install (?!nox==)", text), "pip installs only the pinned nox; the rest comes from locks"
    assert "conda-lock.y[m]l" in text and "requirements/" in text
    stages = set(re.findall(r"^FROM \S+ AS (\S+)", text, flags=re.M))
    for image in re.findall(r"^(?:ARG BASE_IMAGE=|FROM )(\S+)", text, flags=re.M):
        assert image in stages or image.startswith("${") or "@sha256:" in image, f"unpinned base image {image}"
    assert re.search(r"^USER 1000", text, flags=re.M), "runs as root"
