"""Values the server chose that another process claimed first: chosen again.

A Service's cluster IP and node ports are chosen by the server when the client leaves them out
(``Strategy.finish``). Each process of ``kubeloop apiserver --workers N`` chooses from its own
cursor, so two writes made at once through two processes can choose the same value; the store
keeps claims unique and refuses the later write (``ClaimTaken``). A value the client asked for
is then refused, as upstream refuses it (422 "provided port is already allocated"); a value the
server chose is chosen again from the object as it was asked for, a few times, as upstream's
allocators retry on a conflict in etcd.
"""

from __future__ import annotations

import copy

from kubeloop.api.object import Obj
from kubeloop.apiserver.registry.strategies import Strategy
from kubeloop.apiserver.storage.claims import ClaimTaken

#: How often a write is finished again when a value the server chose was taken meanwhile.
CLAIM_ATTEMPTS = 8


class ClaimRetry:
    """One write's object as it was asked for (taken before ``finish``), to finish again when
    the store refuses a value ``finish`` chose."""

    def __init__(self, strategy: Strategy, unfinished: Obj) -> None:
        self._strategy = strategy
        self._requested = strategy.claims_requested(unfinished)
        self._unfinished = copy.deepcopy(unfinished) if self._requested is not None else None
        self._attempts = 1

    def again(self, written: Obj, taken: ClaimTaken) -> Obj:
        """The object as it was asked for, to be finished and written again; raises the claim's
        Status error when the client asked for the value itself or the attempts are spent."""
        if (
            self._unfinished is None
            or self._requested is None
            or taken.claim in self._requested
            or self._attempts >= CLAIM_ATTEMPTS
        ):
            raise self._strategy.claim_taken(written, taken) from None
        self._attempts += 1
        return copy.deepcopy(self._unfinished)
