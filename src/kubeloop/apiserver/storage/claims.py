"""Values an object holds alone among the objects under a key prefix: a Service's cluster IP and
node ports (upstream keeps them in allocators beside etcd).

The store decides, as it takes a write: a value another key holds — committed, or in a write
still on its way to the log — refuses the write (:class:`ClaimTaken`), so two requests in flight
cannot both take one value, whatever checks they made before. A write's new values are held from
the moment it is taken and let go if it fails; the values it gives up are freed once it commits.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from kubeloop.api.object import Obj

#: The values an object claims (``"ip/10.96.0.10"``, ``"nodeport/30080"``).
ClaimsOf = Callable[[Obj], Iterable[str]]

_NONE: frozenset[str] = frozenset()


class ClaimTaken(Exception):
    """``claim`` is held by the object at ``holder`` (a key)."""

    def __init__(self, claim: str, holder: str) -> None:
        super().__init__(f"{claim} is held by {holder}")
        self.claim = claim
        self.holder = holder


@dataclass(frozen=True, slots=True)
class Reservation:
    """What one write of ``key`` changes: the values it held before and those it will hold."""

    key: str
    before: frozenset[str]
    after: frozenset[str]


class Claims:
    """Who holds each claimed value, for the prefixes that have a rule."""

    def __init__(self) -> None:
        self._rules: list[tuple[str, ClaimsOf]] = []
        #: The rules' prefixes: most keys are under none, found in one test.
        self._prefixes: tuple[str, ...] = ()
        self._holders: dict[str, str] = {}
        self._held: dict[str, frozenset[str]] = {}

    def add_rule(self, prefix: str, claims_of: ClaimsOf, stored: Iterable[tuple[str, Obj]]) -> None:
        """Objects under ``prefix`` claim ``claims_of(obj)``; ``stored`` are those there now (two
        stored objects claiming one value keep it both: the first one found holds it)."""
        self._rules.append((prefix, claims_of))
        self._prefixes = (*self._prefixes, prefix)
        for key, obj in stored:
            values = frozenset(claims_of(obj))
            self._held[key] = values
            for value in values:
                self._holders.setdefault(value, key)

    def record(self, key: str, obj: Obj | None) -> None:
        """Record a change committed by the store of another process (an index of its committed
        claims, which that store has checked): ``key`` now holds what ``obj`` claims (None: nothing)."""
        claims_of = self._rule_of(key)
        if claims_of is None:
            return
        before = self._held.get(key, _NONE)
        after = frozenset(claims_of(obj)) if obj is not None else _NONE
        for value in before - after:
            if self._holders.get(value) == key:
                del self._holders[value]
        for value in after - before:
            self._holders[value] = key
        if after:
            self._held[key] = after
        else:
            self._held.pop(key, None)

    def _rule_of(self, key: str) -> ClaimsOf | None:
        if not key.startswith(self._prefixes):
            return None
        return next((rule for prefix, rule in self._rules if key.startswith(prefix)), None)

    def holder(self, claim: str) -> str | None:
        """The key holding ``claim`` (committed or in flight), or None."""
        return self._holders.get(claim)

    def reserve(self, key: str, obj: Obj | None) -> Reservation | None:
        """Hold what ``obj`` (None: a delete) claims for ``key``; None when no rule covers the key.
        Raises :class:`ClaimTaken`, holding nothing, when another key holds one of the values."""
        claims_of = self._rule_of(key)
        if claims_of is None:
            return None
        before = self._held.get(key, _NONE)
        after = frozenset(claims_of(obj)) if obj is not None else _NONE
        new = after - before
        for value in new:
            holder = self._holders.get(value)
            if holder is not None and holder != key:
                raise ClaimTaken(value, holder)
        for value in new:
            self._holders[value] = key
        return Reservation(key, before, after)

    def settle(self, reservation: Reservation, *, committed: bool) -> None:
        """The write ended: committed, it now holds only its new values; failed, the values it
        had taken are free again."""
        key = reservation.key
        let_go = reservation.before - reservation.after if committed else reservation.after - reservation.before
        for value in let_go:
            if self._holders.get(value) == key:
                del self._holders[value]
        if committed:
            if reservation.after:
                self._held[key] = reservation.after
            else:
                self._held.pop(key, None)
