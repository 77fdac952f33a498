"""``TargetError``: an operator's TARGET, setup or model that cannot be used.

Its own module so that the CLI can report it without loading the manager for commands that never
load a target (``kubeloop apiserver`` among them)."""

from __future__ import annotations


class TargetError(Exception):
    """A TARGET, setup or model that cannot be used: what is wrong, and a hint."""

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(f"{message} ({hint})" if hint else message)
        self.message = message
        self.hint = hint
