"""The store on PostgreSQL (psycopg 3): one database shared by the servers of a fleet.

The connection runs in autocommit mode and each batch is one explicit transaction, so no read
leaves the session idle in a transaction. A migration holds a transaction-level advisory lock, so
servers starting together migrate once. The schema version is the one row of ``referee_schema``.
A connection the server dropped is opened again at the next call; the store keeps the batch that
failed and writes it then.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

import psycopg

from anticheat.judgement.store.backend import Backend, Batch
from anticheat.judgement.store.schema import RESERVE_IDS, Dialect

__all__ = ["PostgresBackend", "redact"]

_MIGRATION_LOCK = 0x52_45_46_45_52_45_45  # "REFEREE": the advisory lock key of schema migrations
_VERSION_TABLE = "CREATE TABLE IF NOT EXISTS referee_schema (version INTEGER NOT NULL)"


def redact(url: str) -> str:
    """``url`` without its password (for log lines and error messages)."""
    return re.sub(r"(://[^:/@]+):[^@]*@", r"\1:***@", url)


class PostgresBackend(Backend):
    """A PostgreSQL database.

    Args:
        url: a libpq connection string (``postgresql://user:pw@host:port/db`` or ``key=value`` pairs).
        connect_timeout_s: give up connecting after this long (s).
    """

    dialect = Dialect.POSTGRES
    errors = (psycopg.Error,)

    def __init__(self, url: str, connect_timeout_s: float = 10.0) -> None:
        self.name = redact(url)
        self._url = url
        self._timeout = max(1, round(connect_timeout_s))
        self._conn = self._connect()
        self._sql: dict[str, str] = {}

    def _connect(self) -> psycopg.Connection[Any]:
        return psycopg.connect(self._url, autocommit=True, connect_timeout=self._timeout)

    def _live(self) -> psycopg.Connection[Any]:
        if self._conn.closed or self._conn.broken:
            self._conn = self._connect()
        return self._conn

    def _convert(self, sql: str) -> str:
        converted = self._sql.get(sql)
        if converted is None:
            converted = self._sql[sql] = self.dialect.sql(sql)
        return converted

    def schema_version(self) -> int:
        conn = self._live()
        with conn.transaction():
            conn.execute(_VERSION_TABLE)
            row = conn.execute("SELECT version FROM referee_schema").fetchone()
        return 0 if row is None else int(row[0])

    def migrate(self, target: int, statements: Sequence[str]) -> bool:
        conn = self._live()
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_MIGRATION_LOCK,))
            conn.execute(_VERSION_TABLE)
            row = conn.execute("SELECT version FROM referee_schema").fetchone()
            if (0 if row is None else int(row[0])) != target - 1:
                return False
            for statement in statements:
                conn.execute(statement)  # type: ignore[arg-type]  # DDL built from the schema's own names
            conn.execute("DELETE FROM referee_schema")
            conn.execute("INSERT INTO referee_schema (version) VALUES (%s)", (target,))
        return True

    def write(self, batch: Batch) -> None:
        conn = self._live()
        with conn.transaction(), conn.cursor() as cur:
            for sql, rows in batch:
                cur.executemany(self._convert(sql), rows)  # type: ignore[arg-type]

    def reserve_ids(self, space: str, count: int) -> range:
        # One statement in autocommit mode: atomic, and committed before any other server's
        # reservation of the same space can read the counter (the update holds the row lock).
        row = self._live().execute(self._convert(RESERVE_IDS), (space, count, count)).fetchone()  # type: ignore[arg-type]
        assert row is not None  # RETURNING of an upsert always yields its row
        next_id = int(row[0])
        return range(next_id - count, next_id)

    def query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        return self._live().execute(self._convert(sql), tuple(params)).fetchall()  # type: ignore[arg-type]

    def close(self) -> None:
        self._conn.close()
