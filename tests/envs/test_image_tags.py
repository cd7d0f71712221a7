"""Who writes which tag of the image (docker.yml): `main` and `buildcache` only a push to main, `X.Y.Z`
and `latest` only a push of a `v*` tag, each for its own commit and with the `images` environment's
token, which no other branch's workflow can use; everything else writes its `sha-` tag alone, and no
build reads a `sha-` tag."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
SHA = "0123456789abcdef0123456789abcdef01234567"


def image_job() -> dict:
    return yaml.safe_load((ROOT / ".github" / "workflows" / "docker.yml").read_text())["jobs"]["image"]


def step(id_: str) -> dict:
    return next(s for s in image_job()["steps"] if s.get("id") == id_)


def kind(event: str, ref: str, sha: str = SHA, pushed: str = SHA) -> str:
    """What the `kind` step decides, run by bash with what the runner gives it."""
    output = subprocess.run(["mktemp"], capture_output=True, text=True, check=True).stdout.strip()
    env = {"PATH": "/usr/bin:/bin", "GITHUB_EVENT_NAME": event, "GITHUB_REF": ref, "GITHUB_SHA": pushed, "SHA": sha,
           "GITHUB_OUTPUT": output}  # fmt: skip
    subprocess.run(["bash", "-e", "-c", step("kind")["run"]], env=env, check=True, capture_output=True)
    written = Path(output).read_text()
    Path(output).unlink()
    assert re.fullmatch(r"kind=(main|release|commit)\n", written), written
    return written.strip().split("=", 1)[1]


@pytest.mark.parametrize(
    "event, ref, sha, expected",
    [
        ("push", "refs/heads/main", SHA, "main"),
        ("push", "refs/tags/v1.2.3", SHA, "release"),
        ("push", "refs/heads/main", "f" * 40, "commit"),  # another commit than the one pushed
        ("push", "refs/tags/v1.2.3", "f" * 40, "commit"),
        ("workflow_dispatch", "refs/heads/main", SHA, "commit"),  # a dispatch, of main or a pull request
        ("workflow_dispatch", "refs/tags/v1.2.3", SHA, "commit"),
        ("push", "refs/heads/feature", SHA, "commit"),
        ("push", "refs/heads/main-2", SHA, "commit"),
        ("push", "refs/heads/v1.2.3", SHA, "commit"),  # a branch named like a tag
        ("push", "refs/tags/1.2.3", SHA, "commit"),
        ("pull_request", "refs/pull/7/merge", SHA, "commit"),
    ],
)
def test_main_and_release_tags_only_from_the_push_of_their_own_commit(event, ref, sha, expected):
    assert kind(event, ref, sha) == expected


def test_each_tag_and_the_cache_follow_the_kind():
    tags = step("meta")["with"]["tags"].splitlines()
    assert tags == [
        "type=raw,value=sha-${{ env.SHA }}",
        "type=raw,value=main,enable=${{ steps.kind.outputs.kind == 'main' }}",
        "type=semver,pattern={{version}},enable=${{ steps.kind.outputs.kind == 'release' }}",
    ]
    assert step("meta")["with"]["flavor"] == "latest=${{ steps.kind.outputs.kind == 'release' && 'auto' || 'false' }}"
    push = step("push")["with"]
    assert push["cache-to"] == (
        "${{ steps.kind.outputs.kind == 'main' && "
        "format('type=registry,ref={0}:buildcache,mode=max', steps.name.outputs.name) || '' }}"
    )
    # A release builds from its commit and the pinned base alone; no build reads a sha- tag.
    assert push["cache-from"] == (
        "${{ steps.kind.outputs.kind != 'release' && "
        "format('type=registry,ref={0}:buildcache', steps.name.outputs.name) || '' }}"
    )
    assert push["no-cache"] == "${{ steps.kind.outputs.kind == 'release' }}"
    for line in (ROOT / "Dockerfile").read_text().splitlines():
        assert not (line.startswith("FROM ") and "ghcr.io" in line), line  # no stage from the project's image


def test_only_the_images_environments_token_writes_the_package():
    job = image_job()
    assert job["environment"] == "images" and job["permissions"] == {"contents": "read"}
    login = next(s for s in job["steps"] if s.get("uses", "").startswith("docker/login-action@"))
    assert login["with"]["password"] == "${{ secrets.GHCR_PUSH_TOKEN }}"
    ids = [s.get("id") for s in job["steps"]]
    assert ids.index("kind") < ids.index("meta") and ids.index("token") < ids.index("push")
    for path in WORKFLOWS:  # GITHUB_TOKEN may only read packages; only docker.yml holds the push token
        text = path.read_text()
        assert "packages: write" not in text, path.name
        assert ("GHCR_PUSH_TOKEN" in text) == (path.name == "docker.yml"), path.name
        for name, other in yaml.safe_load(text)["jobs"].items():
            if (path.name, name) != ("docker.yml", "image"):
                assert other.get("environment") != "images", f"{path.name}:{name}"


def test_the_image_job_says_at_once_when_the_push_token_is_missing():
    for token_set, code in (("false", 1), ("true", 0)):
        done = subprocess.run(["bash", "-e", "-c", step("token")["run"]], capture_output=True, text=True,
                              env={"PATH": "/usr/bin:/bin", "TOKEN_SET": token_set})  # fmt: skip
        assert done.returncode == code, done.stdout
    assert done.stdout == "" and "GHCR_PUSH_TOKEN" in step("token")["run"]
    assert step("token")["env"] == {"TOKEN_SET": "${{ secrets.GHCR_PUSH_TOKEN != '' }}"}
