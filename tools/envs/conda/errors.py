"""What the conda backend raises: each message says what was expected and the way out."""

from __future__ import annotations


class CondaEnvError(RuntimeError):
    pass


class ChannelUnreachableError(CondaEnvError):
    pass


class HashMismatchError(CondaEnvError):
    pass


class StaleCondaLockError(CondaEnvError):
    pass
