"""The transcript of a run or a conversation: JSON lines on standard output, one per model turn
and tool call, so that ``kubectl logs`` of the pod reads it. (A module of its own: the agent's
server writes it too, without loading the model's SDK until a conversation needs it.)"""

from __future__ import annotations

import json
from typing import Any, TextIO


class Transcript:
    """JSON lines on ``out``: what each turn said and each tool did."""

    def __init__(self, out: TextIO) -> None:
        self.out = out

    def line(self, event: str, **fields: Any) -> None:
        self.out.write(json.dumps({"event": event, **fields}, ensure_ascii=False) + "\n")
        self.out.flush()
