"""Kubernetes' ``$(VAR)`` expansion of a container's command, args, env values and
``subPathExpr``."""

from __future__ import annotations

import re

_REFERENCE = re.compile(r"\$\$|\$\(([-._a-zA-Z][-._a-zA-Z0-9]*)\)")


def expand(text: str, env: dict[str, str]) -> str:
    """A defined variable is replaced, ``$$`` is ``$``, and any other reference is left as it
    is."""

    def replace(match: re.Match[str]) -> str:
        if match.group(0) == "$$":
            return "$"
        name = match.group(1)
        return env.get(name, match.group(0))

    return _REFERENCE.sub(replace, text)
