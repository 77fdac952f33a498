"""What a run's pod says when it ends: its termination message. The agent runner writes JSON:
``{"result", "memory", "usage"}`` when it answered, ``{"reason", "message", "usage"}`` when it
did not; any other message (another image's) is the answer as it is. :meth:`RunReport.parse`
takes only what the AgentRun's status can hold: a reason in CamelCase, counts that are whole
non-negative numbers. :func:`cost_estimate` prices the usage at the runtime's prices."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

_REASON = re.compile(r"[A-Z][A-Za-z]{0,63}")
_COUNTS = ("promptTokens", "completionTokens", "totalTokens", "turns", "toolCalls")


@dataclass(frozen=True)
class RunReport:
    #: The answer (empty when the run did not answer).
    result: str
    #: What the run asks its agent to remember.
    memory: str | None = None
    #: As ``status.usage`` has it.
    usage: dict[str, Any] | None = None
    #: Why the run did not answer, and how it says so.
    reason: str | None = None
    message: str | None = None

    @classmethod
    def parse(cls, message: str) -> RunReport:
        try:
            document = json.loads(message)
        except ValueError:
            return cls(message)
        if not isinstance(document, dict):
            return cls(message)
        usage = _usage(document.get("usage"))
        if isinstance(document.get("result"), str):
            memory = document.get("memory")
            return cls(document["result"], memory if isinstance(memory, str) and memory.strip() else None, usage)
        reason = document.get("reason")
        if isinstance(reason, str) and _REASON.fullmatch(reason):
            return cls("", None, usage, reason, str(document.get("message") or ""))
        return cls(message)


def _usage(found: Any) -> dict[str, Any] | None:
    if not isinstance(found, dict):
        return None
    usage: dict[str, Any] = {
        key: found[key] for key in _COUNTS if isinstance(found.get(key), int) and found[key] >= 0
    }
    if isinstance(found.get("model"), str) and found["model"]:
        usage["model"] = found["model"][:253]
    return usage or None


def cost_estimate(usage: dict[str, Any], pricing: dict[str, Any] | None) -> str | None:
    """What ``usage`` cost at a runtime's ``pricing`` (prices per million tokens), as
    ``"0.000350 USD"``; None without prices."""
    if not pricing:
        return None
    million = Decimal(1_000_000)
    cost = (
        Decimal(usage.get("promptTokens", 0)) * Decimal(str(pricing["inputPerMillion"]))
        + Decimal(usage.get("completionTokens", 0)) * Decimal(str(pricing["outputPerMillion"]))
    ) / million
    return f"{cost:.6f} {pricing.get('currency') or 'USD'}"
