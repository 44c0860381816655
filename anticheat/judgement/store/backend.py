"""What the store needs from a database: the interface its SQLite and PostgreSQL backends implement.

A backend owns one connection in autocommit mode and opens transactions explicitly, so a read never
leaves a transaction (and a snapshot) open between batches. Statements reach it with ``?``
placeholders; the backend's :class:`~anticheat.judgement.store.schema.Dialect` rewrites them.
Callers serialise access (the store holds a lock around every call).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from typing import Any, ClassVar

from anticheat.judgement.store.schema import Dialect

__all__ = ["Backend", "Batch"]

Batch = Sequence[tuple[str, Sequence[tuple[Any, ...]]]]
"""Statements in order, each with its rows of parameters (``executemany``)."""


class Backend(ABC):
    """One database connection of the store.

    Attributes:
        dialect: the SQL dialect. name: where the database is, for messages (no password).
        errors: the driver's exception classes (a failed background flush is logged, not raised).
    """

    dialect: ClassVar[Dialect]
    errors: tuple[type[BaseException], ...]
    name: str

    @abstractmethod
    def schema_version(self) -> int:
        """The schema version of the database (0 for an empty one)."""

    @abstractmethod
    def migrate(self, target: int, statements: Sequence[str]) -> bool:
        """Run ``statements`` and set the version to ``target`` in one transaction, holding a lock
        that keeps other servers of a fleet from migrating at the same time. Returns False (and
        changes nothing) when the database is no longer at ``target - 1`` once the lock is held."""

    @abstractmethod
    def write(self, batch: Batch) -> None:
        """Run every statement of ``batch`` in one transaction (all or nothing)."""

    @abstractmethod
    def reserve_ids(self, space: str, count: int) -> range:
        """Reserve ``count`` ids of ``space`` (a row of ``id_blocks``) atomically and commit at once:
        no other connection, in this process or another, is ever given any of them."""

    @abstractmethod
    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        """Rows of one read."""

    @abstractmethod
    def close(self) -> None:
        """Close the connection."""
