"""What the inbound endpoint remembers of deliveries whose runs are gone.

A delivery's run is its record: posted again, the same delivery id names the same run, and the
endpoint answers that it is a duplicate. Once the agent prunes the run (``runHistoryLimit``),
that record is gone, and the sender's retry, or a recorded post replayed, would start the work
again. So the agent writes the runs of deliveries it prunes into a ConfigMap of its own,
``<agent>-deliveries`` (run name → when it was pruned), and the endpoint answers a delivery
found there as a duplicate too, for ``window_seconds`` after its run went. The record is
bounded: entries older than the window are dropped at each write, and past ``capacity`` the
oldest go first (a delivery retried after that is taken as new).

The ConfigMap is controlled by its agent and goes with it; one of that name the agent does not
control is someone else's, never read as the record (the agent reports ``NameConflict``).
A run deleted by hand is not recorded: deleting it says the work may be done again.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

import kubeloop
from kubeloop import kinds

from ..api.v1alpha1 import GROUP, Agent, AgentRun
from .builders import labels, named

DELIVERY_ANNOTATION = f"{GROUP}/delivery-id"


def ledger_name(agent: str) -> str:
    return f"{agent}-deliveries"


class DeliveryLedger:
    """Reads and writes the agents' records of pruned deliveries."""

    def __init__(
        self, client: kubeloop.Client, *, window_seconds: float = 86_400, capacity: int = 5_000
    ) -> None:
        self.client = client
        self.window_seconds = window_seconds
        self.capacity = capacity

    async def remember(self, agent: Agent, runs: Iterable[AgentRun]) -> None:
        """Record the runs of deliveries among ``runs`` (about to be pruned) in the agent's
        ledger; :class:`kubeloop.NotControlledError` if its name is someone else's."""
        pruned = [
            run.metadata.name or "" for run in runs if DELIVERY_ANNOTATION in (run.metadata.annotations or {})
        ]
        if not pruned:
            return
        now = datetime.now(UTC)
        stamp = kubeloop.timestamps.format_time(now)

        def record(obj: kubeloop.Obj) -> None:
            kubeloop.set_controller_reference(agent, obj)
            obj["metadata"]["labels"] = labels("deliveries", agent.metadata.name or "")
            entries = {
                name: when for name, when in (obj.get("data") or {}).items() if self._within_window(when, now)
            }
            entries.update(dict.fromkeys(pruned, stamp))
            newest = sorted(entries.items(), key=lambda entry: (entry[1], entry[0]))[-self.capacity :]
            obj["data"] = dict(sorted(newest))

        name, namespace = ledger_name(agent.metadata.name or ""), agent.metadata.namespace or ""
        await kubeloop.create_or_update(
            self.client, named(kinds.ConfigMap, name, namespace), record, controlled_by=agent
        )

    async def remembers(self, agent: Agent, run: str) -> bool:
        """Whether the agent's ledger holds ``run`` (pruned less than the window ago)."""
        try:
            ledger = await self.client.get(
                kinds.ConfigMap, ledger_name(agent.metadata.name or ""), namespace=agent.metadata.namespace
            )
        except kubeloop.errors.NotFound:
            return False
        if not kubeloop.is_controlled_by(ledger, agent):
            return False  # someone else's ConfigMap of that name is no record
        when = (ledger.get("data") or {}).get(run)
        return when is not None and self._within_window(when, datetime.now(UTC))

    def _within_window(self, when: object, now: datetime) -> bool:
        recorded = kubeloop.timestamps.parse_time(when) if isinstance(when, str) else None
        return recorded is not None and (now - recorded).total_seconds() < self.window_seconds
