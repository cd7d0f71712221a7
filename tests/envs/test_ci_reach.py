"""docs/ci.md's table says, for every job of every workflow, what it can reach and what stops each
adversary: a new job cannot land without its row."""

from __future__ import annotations

from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[2]
WORKFLOWS = sorted((ROOT / ".github" / "workflows").glob("*.yml"))
HEADER = ["Job", "Tokens and secrets", "Network", "Caches", "GPU host", "Fork", "Writer's branch",
          "Compromised dependency", "Compromised test", "Cancelled"]  # fmt: skip


def table() -> list[list[str]]:
    text = (ROOT / "docs" / "ci.md").read_text()
    section = text[text.index("## What each job can reach, and what stops each adversary") :]
    lines = []
    for line in section.splitlines()[1:]:
        if line.startswith("## "):
            break
        if line.startswith("| ") and not line.startswith("| ---"):
            lines.append([cell.strip() for cell in line.strip("|").split(" | ")])
    return lines


def test_the_table_has_a_column_for_each_reach_and_each_adversary():
    rows = table()
    assert rows[0] == HEADER
    for row in rows[1:]:
        assert len(row) == len(HEADER) and all(row), row


def test_every_job_of_every_workflow_has_a_row():
    described = set()
    for row in table()[1:]:  # "`ci.yml` lint, build-test"
        workflow, jobs = row[0].split(" ", 1)
        described |= {(workflow.strip("`"), job) for job in jobs.split(", ")}
    jobs = {
        (path.name, name)
        for path in WORKFLOWS
        for name, job in yaml.safe_load(path.read_text())["jobs"].items()
        if "uses" not in job  # a called workflow's own jobs have the rows
    }
    assert described == jobs
