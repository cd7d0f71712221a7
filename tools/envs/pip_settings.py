"""pip's settings on this machine, passed on to uv (standard library only).

uv reads no pip configuration: the indexes, local wheel folders, constraints and CA bundle that
pip.conf or PIP_* variables give pip are read here and handed to uv, so both install the same
files under the same caps.
"""

from __future__ import annotations

import ast
import subprocess

# pip's precedence: PIP_* variables over the [install] section over [global].
_SECTION_RANK = {"global": 0, "install": 1, ":env:": 2}
_TRUE = {"1", "true", "yes", "on"}


def read(python: str) -> dict[str, str]:
    """The settings `python -m pip install` would use: {"find-links": "/opt/wheels", ...}."""
    listed = subprocess.run([python, "-m", "pip", "config", "list"], capture_output=True, text=True)
    return parse(listed.stdout) if listed.returncode == 0 else {}


def parse(listing: str) -> dict[str, str]:
    """`pip config list` output (`section.key='value'` lines), each key at its winning section."""
    ranked: dict[str, tuple[int, str]] = {}
    for line in listing.splitlines():
        key, equals, value = line.partition("=")
        section, _, name = key.rpartition(".")
        if not equals or section not in _SECTION_RANK:
            continue
        rank = _SECTION_RANK[section]
        if name not in ranked or rank >= ranked[name][0]:
            ranked[name] = (rank, ast.literal_eval(value))
    return {name: value for name, (_, value) in ranked.items()}


def uv_index_options(settings: dict[str, str]) -> list[str]:
    """uv pip install options with the meaning of pip's index and find-links settings."""
    options = []
    if settings.get("index-url"):
        options += ["--default-index", settings["index-url"]]
    for url in settings.get("extra-index-url", "").split():
        options += ["--index", url]
    for place in settings.get("find-links", "").split():
        options += ["--find-links", place]
    if settings.get("no-index", "").lower() in _TRUE:
        options.append("--no-index")
    return options


def uv_constraint_options(settings: dict[str, str]) -> list[str]:
    """pip's constraint files (a machine-wide cap such as torch<=X) as uv options."""
    return [option for path in settings.get("constraint", "").split() for option in ("--constraints", path)]


def uv_environ(settings: dict[str, str], environ: dict[str, str]) -> dict[str, str]:
    """SSL_CERT_FILE from pip's `cert` where the caller gives uv no CA of its own: uv trusts only its
    bundled roots otherwise, which a TLS-inspecting proxy's certificate is not signed by."""
    own = environ.get("SSL_CERT_FILE") or environ.get("UV_SYSTEM_CERTS") or environ.get("UV_NATIVE_TLS")
    return {"SSL_CERT_FILE": settings["cert"]} if settings.get("cert") and not own else {}
