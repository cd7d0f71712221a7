"""Whether a conda channel can be reached: a name, a URL or a local folder, answered within seconds."""

from __future__ import annotations

import os
import urllib.error
import urllib.parse
import urllib.request
from pathlib import Path

import rattler

from .errors import ChannelUnreachableError

# Seconds to wait for a channel before saying it cannot be reached.
REACH_TIMEOUT = 5.0


def channel_url(channel: str) -> str:
    """A channel name (conda-forge), URL or local folder as the URL rattler fetches from."""
    if "://" in channel:
        return channel.rstrip("/")
    if os.path.isabs(channel) or channel.startswith("."):
        return Path(channel).resolve().as_uri()
    return str(rattler.Channel(channel).base_url).rstrip("/")


def check_reachable(channels: list[str], timeout: float = REACH_TIMEOUT) -> None:
    """Fails within `timeout` seconds per channel, with the reason and the way out."""
    for channel in channels:
        url = channel_url(channel)
        parsed = urllib.parse.urlparse(url)
        if parsed.scheme == "file":
            folder = Path(urllib.request.url2pathname(parsed.path))
            if not (folder / "noarch" / "repodata.json").exists():
                raise ChannelUnreachableError(f"local channel {folder} has no noarch/repodata.json")
            continue
        probe = f"{url}/noarch/repodata.json"
        try:
            request = urllib.request.Request(probe, method="HEAD")
            with urllib.request.urlopen(request, timeout=timeout):
                pass
        except (urllib.error.URLError, TimeoutError, OSError) as error:
            raise ChannelUnreachableError(
                f"conda channel {channel} ({url}) cannot be reached: {error}. Lock where it can be "
                "reached (e.g. the lock workflow), or point at a mirror or local channel: "
                "`nox -s lock -- --channel https://mirror.example/conda-forge` or `--channel /path/to/channel`; "
                "`nox -s lock -- --pypi-only` refreshes the PyPI locks alone"
            ) from error
