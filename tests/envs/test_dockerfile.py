"""The Dockerfile: root only where it must be, a base Dependabot can refresh, apt pins that survive a
Debian point release, and nothing pulled unpinned."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TEXT = (ROOT / "Dockerfile").read_text()

# Each Debian release's series of the pinned packages: a pin to a series survives point releases and
# security updates (the mirrors keep only the newest build). A new codename in the base needs its row.
SERIES = {"bookworm": {"g++": "4:12.2", "git": "1:2.39"}}


def stages() -> dict[str, str]:
    """Each stage's text, by its name."""
    parts = re.split(r"^FROM ", TEXT, flags=re.M)[1:]
    return {re.match(r"\S+ AS (\S+)", part)[1]: part for part in parts}


def users_at_each_run() -> dict[str, list[str]]:
    """The user each RUN of each stage runs as: its stage's last USER so far, else its parent stage's."""
    last, found = {}, {}
    for name, text in stages().items():
        parent = text.split()[0]
        user = last.get(parent, "root")
        found[name] = []
        for line in text.splitlines():
            if line.startswith("USER "):
                user = line.split()[1]
            elif line.startswith("RUN "):
                found[name].append(user)
        last[name] = user
    return found


def test_only_the_base_stage_runs_as_root():
    users = users_at_each_run()
    assert set(users["base"]) == {"root"}  # apt-get and the system's pip
    for name in ("env", "build"):
        assert users[name] and set(users[name]) == {"1000:1000"}, f"{name} runs {users[name]}"
        for copy in re.findall(r"^COPY (?!--from).*$", stages()[name], flags=re.M):
            assert copy.startswith("COPY --chown=1000:1000 "), f"{name}: {copy} leaves root's files where 1000 writes"
    caches = re.findall(r"--mount=type=cache,([^ ]+)", stages()["env"])
    assert caches and all("uid=1000,gid=1000" in c for c in caches), caches
    assert "chown -R" not in TEXT  # nothing made by root needs handing over
    assert re.findall(r"^USER (\S+)", stages()["runtime"], flags=re.M)[-1] == "1000:1000"


def test_the_base_is_pinned_in_from_where_dependabot_reads_it_and_no_frontend_is_pulled():
    first = re.search(r"^FROM (\S+) AS base$", TEXT, flags=re.M)
    assert first and re.fullmatch(r"[\w./-]+:[\w.-]+@sha256:[0-9a-f]{64}", first[1]), first
    assert not re.search(r"^ARG BASE_IMAGE", TEXT, flags=re.M)  # Dependabot does not follow ARGs into FROM
    syntax = re.search(r"^# syntax=(\S+)", TEXT, flags=re.M)
    assert syntax is None or "@sha256:" in syntax[1], "a Dockerfile frontend pulled by tag"
    dependabot = (ROOT / ".github" / "dependabot.yml").read_text()
    assert 'package-ecosystem: "docker"' in dependabot and 'package-ecosystem: "github-actions"' in dependabot


def test_apt_pins_are_release_series_of_the_bases_debian_release():
    codename = re.search(r"^FROM \S+-(\w+)@sha256:", TEXT, flags=re.M)[1]
    assert codename in SERIES, f"the base is Debian {codename}: add its series of {sorted(SERIES['bookworm'])}"
    pins = dict(re.findall(r'"([\w+.-]+)=([^"]+)"', re.search(r"apt-get install[^\n]*", TEXT)[0]))
    assert pins == {name: f"{series}.*" for name, series in SERIES[codename].items()}, pins


def test_local_outputs_stay_out_of_the_build_context():
    ignored = set((ROOT / ".dockerignore").read_text().split())
    assert {".git", ".envs", ".venv", ".nox", "build", "bench-out", "dist"} <= ignored


def tools_modules_imported(path: Path, seen: set[Path]) -> set[Path]:
    """The files of the tools package that `path` imports, and those they import in turn."""
    import ast

    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ImportFrom) or node.level or not (node.module or "").startswith("tools"):
            continue
        base = ROOT / node.module.replace(".", "/")
        for name in node.names:
            for found in (base / f"{name.name}.py", base.with_suffix(".py"), base / "__init__.py"):
                if found.is_file() and found not in seen:
                    seen.add(found)
                    tools_modules_imported(found, seen)
    return seen


def test_the_env_stage_copies_every_tools_module_the_noxfile_imports():
    # `nox -s env` runs there on a partial checkout: an import it lacks fails the image build.
    copied = [
        ROOT / source
        for line in stages()["env"].replace("\\\n", " ").splitlines()  # continuation lines joined
        if line.startswith("COPY ") and "--from" not in line
        for source in line.split()[1:-1]
        if not source.startswith("--")
    ]
    needed = tools_modules_imported(ROOT / "noxfile.py", set())
    assert needed, "the noxfile imports nothing from tools/: point this test at what it does import"
    missing = [p for p in needed if not any(p == c or c in p.parents for c in copied)]
    assert not missing, f"the Dockerfile's env stage copies none of {sorted(str(p.relative_to(ROOT)) for p in missing)}"
