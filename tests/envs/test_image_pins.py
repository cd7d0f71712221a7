"""Every container image a workflow or the runner guide starts is pinned by digest: BuildKit, which
performs the push with the token, and the runner's image, which runs every GPU job."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
GUIDE = ROOT / "docs" / "self-hosted-gpu-runner.md"
BUILDKIT = re.compile(r"image=moby/buildkit:v\d+\.\d+\.\d+@sha256:[0-9a-f]{64}")


def buildx_steps():
    for path in WORKFLOWS:
        for name, job in yaml.safe_load(path.read_text())["jobs"].items():
            for step in job.get("steps", []):
                if step.get("uses", "").startswith("docker/setup-buildx-action@"):
                    yield f"{path.name}:{name}", step


def test_every_buildkit_is_pinned_by_digest():
    found = list(buildx_steps())
    assert found, "no setup-buildx-action step"
    for where, step in found:
        options = step.get("with", {}).get("driver-opts", "")
        assert BUILDKIT.fullmatch(options.strip()), f"{where}: BuildKit from a floating tag: {options!r}"


def test_the_guides_runner_image_is_pinned_by_digest():
    text = GUIDE.read_text()
    images = re.findall(r"^\s*image: (\S+)", text, flags=re.MULTILINE)
    assert any("actions-runner" in image for image in images), images
    for image in images:
        if "${{" in image:  # the job's own image, by digest from docker.yml
            continue
        assert re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", image), f"not pinned by digest: {image}"
    assert ":latest" not in text
