"""The watch cache's key index: every stored key in order, for lists by prefix and pages.

One sorted Python list made a key's insertion or removal move every key after it: ~7 µs at
20,000 keys, 210 µs at a million when the key sorts near the front (a custom resource's group
before ``configmaps``, a namespace named ``a``). :class:`SortedKeys` keeps the keys in chunks of
at most ``2 * load`` (sortedcontainers' layout, without its positional index): an insertion or
removal is a bisection over the chunks' last keys and one within a chunk, so it costs the same
at a million keys as at a thousand; a range is read chunk by chunk from two bisections.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Iterator

#: Keys per chunk a chunk is split back to; a chunk holds at most twice as many. At 1,000 a
#: chunk's move is ~8 KB and a million keys are ~1,000 chunks.
DEFAULT_LOAD = 1000


class SortedKeys:
    """Strings in sorted order, without duplicates::

        keys = SortedKeys(["b", "a"])
        keys.add("c")
        list(keys.between("a", "c"))  # ["a", "b"]
    """

    __slots__ = ("_chunks", "_lasts", "_len", "_load")

    def __init__(self, keys: Iterable[str] = (), *, load: int = DEFAULT_LOAD) -> None:
        if load < 1:
            raise ValueError("load must be at least 1")
        self._load = load
        ordered = sorted(set(keys))
        #: Non-empty sorted chunks, in order: every key of a chunk sorts before the next chunk's.
        self._chunks: list[list[str]] = [ordered[i : i + load] for i in range(0, len(ordered), load)]
        #: Each chunk's last (greatest) key.
        self._lasts: list[str] = [chunk[-1] for chunk in self._chunks]
        self._len = len(ordered)

    def __len__(self) -> int:
        return self._len

    def __iter__(self) -> Iterator[str]:
        for chunk in self._chunks:
            yield from chunk

    def __contains__(self, key: object) -> bool:
        if not isinstance(key, str):
            return False
        at = bisect.bisect_left(self._lasts, key)
        if at == len(self._chunks):
            return False
        chunk = self._chunks[at]
        return chunk[bisect.bisect_left(chunk, key)] == key

    def add(self, key: str) -> None:
        """Insert ``key`` (nothing if it is there)."""
        chunks, lasts = self._chunks, self._lasts
        if not chunks:
            chunks.append([key])
            lasts.append(key)
            self._len = 1
            return
        at = bisect.bisect_left(lasts, key)
        if at == len(chunks):  # after every key: the last chunk grows
            at -= 1
            chunks[at].append(key)
            lasts[at] = key
        else:
            chunk = chunks[at]
            position = bisect.bisect_left(chunk, key)
            if chunk[position] == key:
                return
            chunk.insert(position, key)
        self._len += 1
        if len(chunks[at]) > 2 * self._load:
            self._split(at)

    def discard(self, key: str) -> None:
        """Remove ``key`` (nothing if it is not there)."""
        chunks, lasts = self._chunks, self._lasts
        at = bisect.bisect_left(lasts, key)
        if at == len(chunks):
            return
        chunk = chunks[at]
        position = bisect.bisect_left(chunk, key)
        if chunk[position] != key:
            return
        del chunk[position]
        self._len -= 1
        if not chunk:
            del chunks[at]
            del lasts[at]
            return
        lasts[at] = chunk[-1]
        if len(chunk) < self._load // 4 and len(chunks) > 1:
            self._merge(at)

    def between(self, low: str, high: str | None) -> Iterator[str]:
        """The keys ``k`` with ``low <= k < high`` (``high`` None: no upper bound), in order,
        read a chunk at a time: consume them before the keys next change."""
        for part in self._parts(low, high):
            yield from part

    def slices_between(self, low: str, high: str | None) -> list[list[str]]:
        """:meth:`between` at once, as copies of the chunks' parts (a list of lists made in C)."""
        return list(self._parts(low, high))

    def _parts(self, low: str, high: str | None) -> Iterator[list[str]]:
        chunks = self._chunks
        at = bisect.bisect_left(self._lasts, low)
        if at == len(chunks):
            return
        start = bisect.bisect_left(chunks[at], low)
        while at < len(chunks):
            chunk = chunks[at]
            if high is not None and chunk[-1] >= high:
                end = bisect.bisect_left(chunk, high, start)
                if end > start:
                    yield chunk[start:end]
                return
            yield chunk[start:]
            start = 0
            at += 1

    def count_between(self, low: str, high: str | None) -> int:
        """How many keys ``k`` have ``low <= k < high`` (``high`` None: no upper bound)."""
        chunks, lasts = self._chunks, self._lasts
        first = bisect.bisect_left(lasts, low)
        if first == len(chunks):
            return 0
        before = bisect.bisect_left(chunks[first], low)
        if high is None:
            last, until = len(chunks) - 1, len(chunks[-1])
        else:
            last = bisect.bisect_left(lasts, high)
            if last == len(chunks):
                last, until = len(chunks) - 1, len(chunks[-1])
            else:
                until = bisect.bisect_left(chunks[last], high)
        if last < first:
            return 0
        whole = sum(len(chunks[index]) for index in range(first, last))
        return max(0, whole + until - before)

    def _split(self, at: int) -> None:
        chunk = self._chunks[at]
        half = self._chunks[at] = chunk[: self._load]
        rest = chunk[self._load :]
        self._chunks.insert(at + 1, rest)
        self._lasts[at] = half[-1]
        self._lasts.insert(at + 1, rest[-1])

    def _merge(self, at: int) -> None:
        """Join the small chunk at ``at`` with a neighbour (split again if that is too large)."""
        left = at - 1 if at > 0 else at
        chunks, lasts = self._chunks, self._lasts
        chunks[left] = chunks[left] + chunks[left + 1]
        lasts[left] = chunks[left][-1]
        del chunks[left + 1]
        del lasts[left + 1]
        if len(chunks[left]) > 2 * self._load:
            self._split(left)
