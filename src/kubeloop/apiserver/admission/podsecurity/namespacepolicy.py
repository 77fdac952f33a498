"""A namespace's Pod Security policy: its ``pod-security.kubernetes.io/<mode>`` labels
(``enforce``, ``audit``, ``warn``; each with a ``-version``) read as upstream's
``api.PolicyToEvaluate`` reads them. An absent label is ``privileged`` at ``latest``; a level that
is not privileged, baseline or restricted is an error, and counts as restricted for enforce (it
fails closed) and privileged for audit and warn; a version that is not ``latest`` or ``v1.<n>``
is an error and counts as latest. Without a warn label, warn takes enforce's level (and version)
when that is stricter, so writing a Deployment warns of what its pods would be refused.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from kubeloop.api import fielderrors
from kubeloop.apiserver.admission.podsecurity.standards import LEVELS, PRIVILEGED
from kubeloop.errors import StatusCause

PREFIX = "pod-security.kubernetes.io/"
MODES = ("enforce", "audit", "warn")
LATEST = "latest"
_VERSION = re.compile(r"^v1\.([0-9]|[1-9][0-9]*)$")


@dataclass(frozen=True)
class LevelVersion:
    level: str
    #: "latest" or "v1.<n>", as the label says.
    version: str

    def __str__(self) -> str:
        return f"{self.level}:{self.version}"

    def minor(self, latest: int) -> int:
        """The minor version to evaluate at: the label's, at most the server's (``latest``)."""
        match = _VERSION.match(self.version)
        return min(int(match[1]), latest) if match else latest


PRIVILEGED_LATEST = LevelVersion(PRIVILEGED, LATEST)


@dataclass(frozen=True)
class Policy:
    enforce: LevelVersion = PRIVILEGED_LATEST
    audit: LevelVersion = PRIVILEGED_LATEST
    warn: LevelVersion = PRIVILEGED_LATEST

    def all_privileged(self) -> bool:
        return all(mode.level == PRIVILEGED for mode in (self.enforce, self.audit, self.warn))


def _stricter(level: str, than: str) -> bool:
    return LEVELS.index(level) > LEVELS.index(than)


def policy_of(labels: Mapping[str, str] | None) -> tuple[Policy, list[StatusCause]]:
    """The namespace's policy and what is wrong with its labels (field errors, in label order)."""
    labels = labels or {}
    problems: list[StatusCause] = []
    modes: dict[str, LevelVersion] = {}
    for mode in MODES:
        key = PREFIX + mode
        level = labels.get(key)
        if level is None:
            level = PRIVILEGED
        elif level not in LEVELS:
            problems.append(
                fielderrors.invalid(
                    f"metadata.labels[{key}]", level, "must be one of privileged, baseline, restricted"
                )
            )
            level = "restricted" if mode == "enforce" else PRIVILEGED
        version = labels.get(f"{key}-version")
        if version is None:
            version = LATEST
        elif version != LATEST and not _VERSION.match(version):
            problems.append(
                fielderrors.invalid(f"metadata.labels[{key}-version]", version, 'must be "latest" or "v1.x"')
            )
            version = LATEST
        modes[mode] = LevelVersion(level, version)
    enforce, warn = modes["enforce"], modes["warn"]
    enforce_valid = labels.get(PREFIX + "enforce") in LEVELS
    if PREFIX + "warn" not in labels and enforce_valid and _stricter(enforce.level, warn.level):
        version = warn.version if PREFIX + "warn-version" in labels else enforce.version
        modes["warn"] = LevelVersion(enforce.level, version)
    return Policy(**modes), problems
