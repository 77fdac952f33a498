"""Mistakes a person made on the command line, told in one line with a hint.

A command raises :class:`UsageError` for a TARGET that names nothing, a module without
``setup``, a kubeconfig that cannot be used, a model with no structural schema; ``kubeloop``
prints ``kubeloop <command>: <what is wrong> (<hint>)`` on standard error and exits with 2,
with no traceback. :class:`ClusterUnusable` is the cluster's side: it cannot be reached, or
refuses the credentials or the operator's permissions; it exits with 1.
"""

from __future__ import annotations


class UsageError(Exception):
    """What was asked cannot be done as asked; exit code 2."""

    exit_code = 2

    def __init__(self, message: str, hint: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint

    def line(self, command: str) -> str:
        """The one line printed for it."""
        text = f"kubeloop {command}: {self.message}"
        return f"{text} ({self.hint})" if self.hint else text


class ClusterUnusable(UsageError):
    """The cluster cannot be used as configured (unreachable, credentials or permissions
    refused); exit code 1."""

    exit_code = 1
