"""What the workflows rely on in GitHub's settings, which no file can set, is on the owner's checklist in
docs/ci.md: every environment, secret and variable a workflow names, and the rules that keep each
credential to main (and `v*` tags)."""

from __future__ import annotations

import re
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
CI_DOC = ROOT / "docs" / "ci.md"
HOOK = ROOT / "tools" / "runner" / "job-started.sh"
GUIDE = ROOT / "docs" / "self-hosted-gpu-runner.md"


def checklist() -> dict[str, str]:
    """The checklist's rows, by their first cell."""
    text = CI_DOC.read_text()
    section = text[text.index("## The owner's checklist") :]
    rows = [line for line in section.splitlines() if line.startswith("| ") and not line.startswith("| ---")]
    return {row.split(" | ")[0][2:]: row for row in rows[1:]}  # rows[0]: the header


def named_in_workflows() -> dict[str, set[str]]:
    found = {"vars": set(), "secrets": set(), "environments": set()}
    for path in WORKFLOWS:
        text = path.read_text()
        found["vars"] |= set(re.findall(r"\bvars\.(\w+)", text))
        found["secrets"] |= set(re.findall(r"\bsecrets\.(\w+)", text)) - {"GITHUB_TOKEN"}
        for job in yaml.safe_load(text)["jobs"].values():
            if "environment" in job:
                environment = job["environment"]
                found["environments"].add(environment["name"] if isinstance(environment, dict) else environment)
    return found


def test_every_environment_secret_and_variable_a_workflow_names_is_on_the_checklist():
    rows = " ".join(checklist())
    named = named_in_workflows()
    assert named["environments"] == {"images", "locks"} and named["vars"] and named["secrets"], named
    for kind, names in named.items():
        for name in names:
            assert f"`{name}`" in rows, f"docs/ci.md's checklist does not name the {kind[:-1]} {name}"


def row_naming(name: str) -> str:
    return next(row for first, row in checklist().items() if first.startswith(f"Environment `{name}`"))


def environments_a_tag_push_runs() -> set[str]:
    """The environments of the jobs a `v*` tag's push starts (workflows called by them included)."""
    found = set()
    for path in WORKFLOWS:
        data = yaml.safe_load(path.read_text())
        if "tags" not in (data[True].get("push") or {}):  # PyYAML reads the key `on` as True
            continue
        for job in data["jobs"].values():
            environment = job.get("environment")
            if environment:
                found.add(environment["name"] if isinstance(environment, dict) else environment)
    return found


def test_every_environment_is_created_with_its_rules_before_a_run_could_create_it_without():
    first, row = next((f, r) for f, r in checklist().items() if "before the first `v*` tag" in f)
    assert environments_a_tag_push_runs() == {"images"}
    for name in named_in_workflows()["environments"] | environments_a_tag_push_runs():
        assert f"`{name}`" in first, f"the checklist does not say to create {name} before Actions can"
        assert row_naming(name)  # and its rules have a row of their own
    assert "creates it with no rules" in row


def test_the_gpu_gate_trusts_write_access_and_the_checklist_keeps_it_to_maintainers():
    gate = yaml.safe_load((ROOT / ".github" / "workflows" / "gpu.yml").read_text())["jobs"]["commit"]
    assert "collaborators/$who/permission" in gate["steps"][0]["run"]
    row = next(row for first, row in checklist().items() if first.startswith("Write access"))
    assert "maintainers alone" in row and "approving review of its head SHA" in row


def test_each_credential_is_kept_to_main_and_release_tags():
    assert re.search(r"`main` and the tag pattern `v\*`", row_naming("images").split(" | ")[0])
    assert "`main` only" in row_naming("locks").split(" | ")[0]
    package = next(row for first, row in checklist().items() if "Manage Actions access" in first)
    assert "role **Read**" in package and "Inherit access from source repository" in package
    tags = next(row for first, row in checklist().items() if "tag ruleset" in first)
    assert "`v*`" in tags and "maintainers" in tags
    main = next(row for first, row in checklist().items() if first.startswith("Rules for `main`"))
    assert "no force pushes" in main and "review" in main


def test_the_runner_group_and_the_hook_admit_the_same_workflow_ref():
    admitted = re.search(r'allowed="\$repository/(\S+)"', HOOK.read_text())[1]
    assert admitted == ".github/workflows/gpu.yml@refs/heads/main"
    assert (ROOT / admitted.split("@")[0]).is_file()
    assert yaml.safe_load((ROOT / admitted.split("@")[0]).read_text())[True]["push"] == {"branches": ["main"]}
    group = next(row for first, row in checklist().items() if first.startswith("Runner group"))
    assert f"`OWNER/REPO/{admitted}`" in group
    assert f"`OWNER/REPO/{admitted}`" in GUIDE.read_text()


def test_the_checklist_and_the_guide_ask_for_the_same_patched_container_toolkit():
    minimum = re.search(r"nvidia-container-toolkit (\d+\.\d+\.\d+) or later", GUIDE.read_text())[1]
    assert tuple(map(int, minimum.split("."))) >= (1, 17, 8)  # CVE-2025-23266, CVE-2025-23267 fixed
    assert f'nvidia-container-toolkit)" ge {minimum}' in GUIDE.read_text()  # the image build checks it
    image = next(row for first, row in checklist().items() if first.startswith("The runner's VM image"))
    assert f"nvidia-container-toolkit {minimum} or later" in image
