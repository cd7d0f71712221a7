"""One package and what it needs, cut from a pip-compile lock with its hashes (`# via` comments name
who needs each package): how a venv of torch alone is installed hash-checked (standard library only)."""

from __future__ import annotations

import re


def _name(text: str) -> str:
    return re.sub(r"[-_.]+", "-", text).lower()


def _entries(lock: str) -> dict[str, tuple[str, set[str]]]:
    """Each pinned package's name -> (its lines, the packages its `# via` names)."""
    entries, name = {}, None
    for line in lock.splitlines():
        if line and not line[0].isspace() and not line.startswith("#"):
            name = _name(re.split(r"[=<>!~ ;\[]", line, maxsplit=1)[0])
            entries[name] = ([line], set())
        elif name is not None and line.startswith("    "):
            entries[name][0].append(line)
            via = re.fullmatch(r"\s*#\s+(?:via\s+)?([A-Za-z0-9][\w.-]*)\s*", line)
            if via and via[1] != "via":
                entries[name][1].add(_name(via[1]))
    return {name: ("\n".join(lines), needed_by) for name, (lines, needed_by) in entries.items()}


def subset(lock: str, package: str) -> str:
    """The lock's entries for `package` and everything it needs, in the lock's order."""
    entries = _entries(lock)
    if _name(package) not in entries:
        raise KeyError(f"the lock pins no {package}")
    kept = {_name(package)}
    while True:
        more = {name for name, (_, needed_by) in entries.items() if name not in kept and needed_by & kept}
        if not more:
            break
        kept |= more
    return "".join(f"{text}\n" for name, (text, _) in entries.items() if name in kept)


def pinned_version(lock: str, package: str) -> str | None:
    match = re.search(rf"^{re.escape(package)}==(\S+)", lock, flags=re.MULTILINE | re.IGNORECASE)
    return match[1] if match else None
