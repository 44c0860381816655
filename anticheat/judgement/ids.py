"""Where record ids come from: a counter in memory, or blocks reserved from a shared store.

Detections (evidence), review items and appeals are written to the store by id. Servers of one
fleet share the database, so an id must be unique across all of them: with a store, ids come
from blocks the store reserves atomically (``DetectionStore.reserve_ids``), one database round
trip per block rather than per record. Without a store, ids are counted in memory from 1.
Ids of a block are handed out in order, so ids of one source rise; ids of two servers interleave
block by block.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

__all__ = ["IdBlocks", "IdCounter", "IdSource"]


class IdSource(Protocol):
    """Hands out unique positive integer ids."""

    def take(self) -> int:
        """The next id (never handed out before by this source or any other sharing its space)."""
        ...

    def skip_past(self, used: int) -> None:
        """``used`` is taken (a record restored from storage): never hand it out."""
        ...


class IdCounter:
    """Ids 1, 2, 3, ... counted in memory: for a process that shares its ids with no one."""

    def __init__(self, start: int = 1) -> None:
        self._next = start

    def take(self) -> int:
        value = self._next
        self._next = value + 1
        return value

    def skip_past(self, used: int) -> None:
        if used >= self._next:
            self._next = used + 1


class IdBlocks:
    """Ids taken from blocks of ``block_size`` that ``reserve(count) -> range`` reserves.

    A block is reserved when the first id is needed and again each time one runs out, so the
    caller pays for a reservation once per ``block_size`` ids; ids left in a block when the
    process ends are never used (gaps are normal).
    """

    def __init__(self, reserve: Callable[[int], range], block_size: int = 256) -> None:
        if block_size < 1:
            raise ValueError(f"block_size must be >= 1, got {block_size!r}")
        self._reserve = reserve
        self.block_size = block_size
        self._next = 0
        self._end = 0  # the current block is [_next, _end)

    def take(self) -> int:
        if self._next >= self._end:
            block = self._reserve(self.block_size)
            if len(block) < 1 or block.step != 1:
                raise ValueError(f"reserved block {block!r} is not a run of ids")
            self._next, self._end = block.start, block.stop
        value = self._next
        self._next = value + 1
        return value

    def skip_past(self, used: int) -> None:
        # Nothing to do: the store's counter is above every id stored (the schema migration set it
        # past the largest, and every later id came from it).
        pass
