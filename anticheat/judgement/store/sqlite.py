"""The store on SQLite: one file in WAL mode (the default backend).

WAL with ``synchronous=NORMAL`` loses nothing committed when the process dies (SIGKILL); only a
power loss can take the last transactions (``synchronous="FULL"`` guards against that too).
Several processes may share the file; ``busy_timeout_ms`` bounds how long a writer waits for
another's lock. The schema version is ``PRAGMA user_version``.
"""

from __future__ import annotations

import logging
import sqlite3
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from anticheat.judgement.store.backend import Backend, Batch
from anticheat.judgement.store.schema import RESERVE_IDS, Dialect

__all__ = ["SqliteBackend"]

log = logging.getLogger(__name__)


class SqliteBackend(Backend):
    """A SQLite database file (``":memory:"`` for a throwaway one).

    Args:
        path: the database file. synchronous: SQLite's ``synchronous`` pragma.
        busy_timeout_ms: how long to wait for a lock held by another connection (ms).
    """

    dialect = Dialect.SQLITE
    errors = (sqlite3.Error,)

    def __init__(self, path: str | Path, synchronous: str = "NORMAL", busy_timeout_ms: int = 5000) -> None:
        self.name = str(path)
        # isolation_level=None: transactions are opened and committed explicitly, one per batch.
        self._conn = sqlite3.connect(self.name, isolation_level=None, check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout = {int(busy_timeout_ms)}")
        if self.name != ":memory:":
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                log.warning("store %s: journal_mode is %s, not wal", self.name, mode)
        self._conn.execute(f"PRAGMA synchronous = {synchronous.upper()}")

    def schema_version(self) -> int:
        return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def migrate(self, target: int, statements: Sequence[str]) -> bool:
        conn = self._conn
        # IMMEDIATE takes the write lock first: a second process migrating waits, then sees the
        # new version and does nothing.
        conn.execute("BEGIN IMMEDIATE")
        try:
            if self.schema_version() != target - 1:
                conn.execute("ROLLBACK")
                return False
            # Not ``executescript``: it commits first, which would split the migration from its version bump.
            for statement in statements:
                conn.execute(statement)
            conn.execute(f"PRAGMA user_version = {int(target)}")
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return True

    def write(self, batch: Batch) -> None:
        conn = self._conn
        conn.execute("BEGIN")
        try:
            for sql, rows in batch:
                conn.executemany(sql, rows)
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise

    def reserve_ids(self, space: str, count: int) -> range:
        conn = self._conn
        # IMMEDIATE takes the write lock before reading the counter: a second process reserving
        # waits (up to busy_timeout) and then reads the advanced counter.
        conn.execute("BEGIN IMMEDIATE")
        try:
            # fetchall: the statement must run to its end before COMMIT.
            ((next_id,),) = conn.execute(RESERVE_IDS, (space, count, count)).fetchall()
            conn.execute("COMMIT")
        except BaseException:
            conn.execute("ROLLBACK")
            raise
        return range(int(next_id) - count, int(next_id))

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._conn.execute(sql, tuple(params)).fetchall()

    def close(self) -> None:
        self._conn.close()
