"""The watch cache's key index: every stored key in order, for lists by prefix and pages.

One sorted Python list made a key's insertion or removal move every key after it: ~7 µs at
20,000 keys, 210 µs at a million when the key sorts near the front (a custom resource's group
before ``configmaps``, a namespace named ``a``). :class:`SortedKeys` keeps the keys in chunks of
at most ``2 * load`` (sortedcontainers' layout, without its positional index): an insertion or
removal is a bisection over the chunks' last keys and one within a chunk, so it costs the same
at a million keys as at a thousand; a range is read chunk by chunk from two bisections.

Readers may run on another thread (large writes' admission reads the cache from the worker
loop) while the serving loop changes the keys, as they could with one list, whose every change
was one C call: every change a reader can see is one step here too. A key goes into or out of
a chunk by one ``insert`` or ``del``; a chunk split, merged or dropped is a new pair of chunk
lists swapped in by one assignment, its old lists left as they were for readers still on them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

#: Keys per chunk a chunk is split back to; a chunk holds at most twice as many. At 1,000 a
#: chunk's move is ~8 KB and a million keys are ~1,000 chunks.
DEFAULT_LOAD = 1000

#: Non-empty sorted chunks, in order (every key of a chunk sorts before the next chunk's), and
#: each chunk's last (greatest) key.
_State = tuple[list[list[str]], list[str]]


class SortedKeys:
    """Strings in sorted order, without duplicates::

        keys = SortedKeys(["b", "a"])
        keys.add("c")
        list(keys.between("a", "c"))  # ["a", "b"]
    """

    __slots__ = ("_len", "_load", "_state")

    def __init__(self, keys: Iterable[str] = (), *, load: int = DEFAULT_LOAD) -> None:
        if load < 1:
            raise ValueError("load must be at least 1")
        self._load = load
        ordered = sorted(set(keys))
        chunks = [ordered[i : i + load] for i in range(0, len(ordered), load)]
        self._state: _State = (chunks, [chunk[-1] for chunk in chunks])
        self._len = len(ordered)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        for chunk in self._state[0]:
            yield from chunk[:]

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        chunks, lasts = self._state
        at = bisect.bisect_left(lasts, key)
        if at >= len(chunks):
            return False
        chunk = chunks[at]
        position = bisect.bisect_left(chunk, key)
        return position < len(chunk) and chunk[position] == key

    def add(self, key: str) -> None:
        """Insert ``key`` (nothing if it is there)."""
        chunks, lasts = self._state
        if not chunks:
            self._state = ([[key]], [key])
            self._len = 1
            return
        at = bisect.bisect_left(lasts, key)
        if at == len(chunks):  # after every key: the last chunk grows, then its last key
            at -= 1
            chunks[at].append(key)
            lasts[at] = key
        else:
            chunk = chunks[at]
            position = bisect.bisect_left(chunk, key)
            if position < len(chunk) and chunk[position] == key:
                return
            chunk.insert(position, key)
        self._len += 1
        if len(chunks[at]) > 2 * self._load:
            self._split(at)

    def discard(self, key: str) -> None:
        """Remove ``key`` (nothing if it is not there)."""
        chunks, lasts = self._state
        at = bisect.bisect_left(lasts, key)
        if at >= len(chunks):
            return
        chunk = chunks[at]
        position = bisect.bisect_left(chunk, key)
        if position >= len(chunk) or chunk[position] != key:
            return
        self._len -= 1
        if len(chunk) == 1:  # the chunk goes: new lists without it
            self._state = (chunks[:at] + chunks[at + 1 :], lasts[:at] + lasts[at + 1 :])
            return
        del chunk[position]
        lasts[at] = chunk[-1]
        if len(chunk) < self._load // 4 and len(chunks) > 1:
            self._merge(at)

    def between(self, low: str, high: str | None) -> Iterator[str]:
        """The keys ``k`` with ``low <= k < high`` (``high`` None: no upper bound), in order,
        read a chunk at a time: keys added or removed meanwhile may or may not be among them."""
        for part in self._parts(low, high):
            yield from part

    def slices_between(self, low: str, high: str | None) -> list[list[str]]:
        """:meth:`between` at once, as copies of the chunks' parts (a list of lists made in C)."""
        return list(self._parts(low, high))

    def _parts(self, low: str, high: str | None) -> Iterator[list[str]]:
        chunks, lasts = self._state
        at = bisect.bisect_left(lasts, low)
        while at < len(chunks):
            part = chunks[at][:]  # one step: the chunk as it is now
            start = bisect.bisect_left(part, low)
            if high is not None and part and part[-1] >= high:
                end = bisect.bisect_left(part, high, start)
                if end > start:
                    yield part[start:end]
                return
            if start < len(part):
                yield part[start:] if start else part
            at += 1

    def count_between(self, low: str, high: str | None) -> int:
        """How many keys ``k`` have ``low <= k < high`` (``high`` None: no upper bound): the
        whole chunks between the two ends by their lengths, the ends by bisection."""
        chunks, lasts = self._state
        first = bisect.bisect_left(lasts, low)
        if first >= len(chunks):
            return 0
        last = len(chunks) - 1 if high is None else min(bisect.bisect_left(lasts, high), len(chunks) - 1)
        if last < first:
            return 0
        if first == last:
            part = chunks[first][:]
            end = len(part) if high is None else bisect.bisect_left(part, high)
            return max(0, end - bisect.bisect_left(part, low))
        head, tail = chunks[first][:], chunks[last][:]
        whole = sum(len(chunks[index]) for index in range(first + 1, last))
        until = len(tail) if high is None else bisect.bisect_left(tail, high)
        return len(head) - bisect.bisect_left(head, low) + whole + until

    def _split(self, at: int) -> None:
        chunks, lasts = self._state
        chunk, load = chunks[at], self._load
        half, rest = chunk[:load], chunk[load:]
        self._state = (
            [*chunks[:at], half, rest, *chunks[at + 1 :]],
            [*lasts[:at], half[-1], rest[-1], *lasts[at + 1 :]],
        )

    def _merge(self, at: int) -> None:
        """Join the small chunk at ``at`` with a neighbour (split again if that is too large)."""
        chunks, lasts = self._state
        left = at - 1 if at > 0 else at
        joined = chunks[left] + chunks[left + 1]
        self._state = (
            [*chunks[:left], joined, *chunks[left + 2 :]],
            [*lasts[:left], joined[-1], *lasts[left + 2 :]],
        )
        if len(joined) > 2 * self._load:
            self._split(left)
