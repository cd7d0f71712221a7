"""A pull request reaches the GPU only at the head SHA that someone with write access, other than its
author, approved on GitHub (the reviews API, `commit_id` equal to the SHA), checked by a job that runs no
code of the pull request; its image is built by a job that holds no token and no secret and reaches the
GPU job as an archive, while the push token builds only main's commit or a tag's.

The gate's script runs under a stand-in `gh` that answers the pull request, its reviews and each
reviewer's access as GitHub's API would, after `--jq`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
GPU_YML = ROOT / ".github" / "workflows" / "gpu.yml"
SHA = "0123456789abcdef0123456789abcdef01234567"
OTHER = "9" * 40

GH = """#!/bin/sh
# gh api [--paginate] PATH --jq ...: the answer for PATH, from files the test wrote.
[ "$2" = --paginate ] && path=$3 || path=$2
case "$path" in
  */reviews) cat "$FAKE_GH/reviews" ;;
  */collaborators/*/permission) who=${path%/permission}; who=${who##*/}; cat "$FAKE_GH/access-$who" 2>/dev/null || echo read ;;
  */pulls/*) cat "$FAKE_GH/pull" ;;
  *) echo "stand-in gh: unexpected $*" >&2; exit 1 ;;
esac
"""


def load() -> dict:
    return yaml.safe_load(GPU_YML.read_text())


def gate(tmp_path: Path, reviews: list[tuple[str, str, str]], head: str = SHA, author: str = "alice",
         access: dict[str, str] | None = None, **inputs: str):  # fmt: skip
    """(exit status, GITHUB_OUTPUT, stdout) of the gate step for pull request #12 (or `inputs`)."""
    script = next(s for s in load()["jobs"]["commit"]["steps"] if s.get("id") == "resolve")["run"]
    answers = tmp_path / "gh"
    answers.mkdir(exist_ok=True)
    (answers / "pull").write_text(f"{head}\topen\tmain\t{author}\n")
    (answers / "reviews").write_text("".join(f"{who}\t{state}\t{sha}\n" for who, state, sha in reviews))
    for who, level in (access or {}).items():
        (answers / f"access-{who}").write_text(f"{level}\n")
    (tmp_path / "bin").mkdir(exist_ok=True)
    (tmp_path / "bin" / "gh").write_text(GH)
    (tmp_path / "bin" / "gh").chmod(0o755)
    output, summary = tmp_path / "output", tmp_path / "summary"
    output.write_text("")
    env = {
        "PATH": f"{tmp_path / 'bin'}:/usr/bin:/bin",
        "FAKE_GH": str(answers),
        "GITHUB_REF": inputs.get("ref", "refs/heads/main"),
        "GITHUB_SHA": "f" * 40,
        "GITHUB_REPOSITORY": "owner/repo",
        "GITHUB_OUTPUT": str(output),
        "GITHUB_STEP_SUMMARY": str(summary),
        "DEFAULT_BRANCH": "main",
        "PULL_REQUEST": inputs.get("pull_request", "12"),
        "REVIEWED": inputs.get("sha", SHA),
    }
    done = subprocess.run(["bash", "-c", script], env=env, capture_output=True, text=True)
    return done.returncode, output.read_text(), done.stdout + done.stderr


WRITERS = {"bob": "write", "carol": "admin"}


def test_an_approval_of_the_head_by_a_writer_other_than_the_author_lets_it_run(tmp_path):
    code, output, said = gate(tmp_path, [("bob", "APPROVED", SHA)], access=WRITERS)
    assert (code, output) == (0, f"sha={SHA}\n"), said
    assert (tmp_path / "summary").read_text() == f"GPU run of pull request #12 at {SHA}, approved by bob\n"
    assert gate(tmp_path, [("carol", "APPROVED", SHA)], access=WRITERS)[:2] == (0, f"sha={SHA}\n")


def refused(tmp_path, reviews, **kwargs) -> str:
    code, output, said = gate(tmp_path, reviews, access=kwargs.pop("access", WRITERS), **kwargs)
    assert code == 1 and output == "", said
    assert "has no approving review of" in said
    return said


def test_no_approval_of_exactly_that_commit_by_another_writer_refuses_it(tmp_path):
    refused(tmp_path, [])
    refused(tmp_path, [("bob", "APPROVED", OTHER)])  # an earlier commit's approval
    refused(tmp_path, [("bob", "COMMENTED", SHA), ("carol", "DISMISSED", SHA)])
    said = refused(tmp_path, [("alice", "APPROVED", SHA)], access={"alice": "admin"})  # the author's own
    assert "other than its author alice" in said
    refused(tmp_path, [("mallory", "APPROVED", SHA)], access={"mallory": "read"})  # anyone may approve a public PR
    refused(tmp_path, [("mallory", "APPROVED", SHA)], access={"mallory": "triage"})
    refused(tmp_path, [("bob", "APPROVED", SHA), ("bob", "CHANGES_REQUESTED", SHA)])  # the last verdict counts


def test_a_later_approval_after_requested_changes_counts(tmp_path):
    code, output, _ = gate(tmp_path, [("bob", "CHANGES_REQUESTED", SHA), ("bob", "APPROVED", SHA)], access=WRITERS)
    assert (code, output) == (0, f"sha={SHA}\n")


def test_a_moved_closed_or_foreign_pull_request_is_refused_before_its_reviews(tmp_path):
    code, output, said = gate(tmp_path, [("bob", "APPROVED", SHA)], head=OTHER, access=WRITERS)
    assert code == 1 and output == "" and f"is at {OTHER}, not the reviewed {SHA}" in said
    for inputs in ({"sha": SHA[:7]}, {"pull_request": "12; curl evil"}, {"ref": "refs/heads/feature"}):
        code, output, said = gate(tmp_path, [("bob", "APPROVED", SHA)], access=WRITERS, **inputs)
        assert code == 1 and output == "" and "::error::" in said, inputs


def test_a_push_or_a_plain_run_is_its_own_commit(tmp_path):
    code, output, _ = gate(tmp_path, [], pull_request="", sha="")
    assert (code, output) == (0, f"sha={'f' * 40}\n")


def test_inputs_and_logins_are_printed_quoted_so_they_write_no_workflow_command(tmp_path):
    for inputs in ({"pull_request": "12\n::warning::planted"}, {"sha": f"{SHA}\n::add-mask::x"}):
        code, output, said = gate(tmp_path, [], **inputs)
        assert code == 1 and output == ""
        assert [line for line in said.splitlines() if line.startswith("::")] == [said.splitlines()[0]], said
    _, _, said = gate(tmp_path, [], author="x\n::warning::planted")
    assert not any(line.startswith("::warning::") for line in said.splitlines())


def test_the_run_is_named_after_the_pull_request_and_sha():
    name = load()["run-name"]
    assert "format('GPU: pull request #{0} at {1}', inputs.pull-request, inputs.sha)" in name
    assert "github.sha" in name


def test_a_pull_requests_image_is_built_with_no_token_and_loaded_from_its_checked_archive():
    jobs = load()["jobs"]
    build = jobs["pr-image"]
    assert build["permissions"] == {} and "environment" not in build and "secrets." not in yaml.safe_dump(build)
    assert build["if"] == "vars.GPU_RUNNER_GROUP != '' && inputs.pull-request != ''"
    assert jobs["image"]["if"] == "vars.GPU_RUNNER_GROUP != '' && inputs.pull-request == ''"  # the push token's
    steps = {s.get("uses", "").split("@")[0] or s["id"]: s for s in build["steps"]}
    assert steps["actions/checkout"]["with"]["ref"] == "${{ needs.commit.outputs.sha }}"
    built = steps["docker/build-push-action"]["with"]
    assert built["push"] is False and built["outputs"].startswith("type=docker,")
    assert "cache-from" not in built and "cache-to" not in built
    gpu = {s.get("id"): s for s in jobs["gpu"]["steps"]}
    assert gpu["load"]["if"] == "needs.pr-image.result == 'success'"
    assert gpu["load"]["env"]["ARCHIVE_SHA256"] == "${{ needs.pr-image.outputs.archive-sha256 }}"
    load_script = gpu["load"]["run"]
    assert load_script.index('[ "$actual" = "$ARCHIVE_SHA256" ]') < load_script.index("docker load")
    assert '[ "$built" = "$SHA" ]' in load_script
    login = next(s for s in jobs["gpu"]["steps"] if s.get("uses", "").startswith("docker/login-action@"))
    assert login["if"] == gpu["pull"]["if"] == "needs.image.result == 'success'"


def test_only_jobs_that_build_main_or_a_tag_hold_the_push_token():
    for path in sorted((ROOT / ".github" / "workflows").glob("*.yml")):
        for name, job in yaml.safe_load(path.read_text())["jobs"].items():
            if "GHCR_PUSH_TOKEN" in yaml.safe_dump(job):
                assert (path.name, name) == ("docker.yml", "image")
    sha_step = yaml.safe_load((ROOT / ".github" / "workflows" / "docker.yml").read_text())["jobs"]["image"]["steps"][0]
    assert '[ "$SHA" = "$GITHUB_SHA" ]' in sha_step["run"]  # docker.yml's run is on main or a tag
