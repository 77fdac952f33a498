"""The JSONPath subset CustomResourceDefinitions use in additionalPrinterColumns.

``.spec.replicas``, ``.items[0].name``, ``.list[*].name`` and filters such as
``.status.conditions[?(@.type=="Ready")].status`` — kubectl's template syntax without braces,
as upstream's CRD table convertor evaluates it (the first value found is printed).
"""

from __future__ import annotations

import re
from typing import Any

_STEP = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_\-]+)"""
    r"""|\[(?P<index>-?\d+|\*)\]"""
    r"""|\[\?\(@\.(?P<key>[A-Za-z0-9_.\-]+)\s*==\s*(?P<quote>["'])(?P<value>.*?)(?P=quote)\)\]"""
    r"""|\['(?P<quoted>[^']+)'\]"""
)


class JSONPathError(ValueError):
    """A path outside the supported subset."""


def compile_path(path: str) -> list[tuple[str, Any]]:
    """The steps of ``path``; :class:`JSONPathError` when it cannot be read."""
    text = path.strip()
    if text.startswith("{") and text.endswith("}"):
        text = text[1:-1]
    steps: list[tuple[str, Any]] = []
    position = 0
    while position < len(text):
        match = _STEP.match(text, position)
        if match is None:
            raise JSONPathError(f"unsupported JSONPath {path!r} at {text[position:]!r}")
        if match["field"] is not None:
            steps.append(("field", match["field"]))
        elif match["quoted"] is not None:
            steps.append(("field", match["quoted"]))
        elif match["index"] is not None:
            steps.append(("all", None) if match["index"] == "*" else ("index", int(match["index"])))
        else:
            steps.append(("filter", (match["key"].split("."), match["value"])))
        position = match.end()
    return steps


def find(obj: Any, steps: list[tuple[str, Any]]) -> list[Any]:
    """Every value the steps reach in ``obj``."""
    current = [obj]
    for kind, arg in steps:
        found: list[Any] = []
        for value in current:
            if (kind == "field" and isinstance(value, dict) and arg in value) or (
                kind == "index" and isinstance(value, list) and -len(value) <= arg < len(value)
            ):
                found.append(value[arg])
            elif kind == "all" and isinstance(value, list):
                found.extend(value)
            elif kind == "filter" and isinstance(value, list):
                keys, wanted = arg
                for item in value:
                    probe = item
                    for key in keys:
                        probe = probe.get(key) if isinstance(probe, dict) else None
                    if probe is not None and str(probe) == wanted:
                        found.append(item)
        current = found
    return current
