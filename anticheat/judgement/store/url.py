"""Where a store lives: a path or URL turned into its backend.

``postgresql://...`` (or ``postgres://...``) is a PostgreSQL database; ``sqlite:///relative.db``,
``sqlite:////absolute.db`` (SQLAlchemy's spelling) or a plain path is a SQLite file;
``:memory:`` is a throwaway SQLite database.
"""

from __future__ import annotations

import os
from pathlib import Path

from anticheat.judgement.store.backend import Backend

__all__ = ["default_sqlite_path", "is_postgres_url", "make_backend", "sqlite_path"]

_SQLITE_PREFIX = "sqlite:///"


def is_postgres_url(target: str | os.PathLike[str]) -> bool:
    """Whether ``target`` names a PostgreSQL database."""
    return isinstance(target, str) and target.startswith(("postgresql://", "postgres://"))


def sqlite_path(target: str | os.PathLike[str]) -> str:
    """The SQLite file of a path or ``sqlite:///`` URL (``:memory:`` stays as it is)."""
    text = os.fspath(target)
    if text.startswith(_SQLITE_PREFIX):
        return text[len(_SQLITE_PREFIX):] or ":memory:"
    if "://" in text:
        raise ValueError(f"unknown database URL scheme in {text.split('://', 1)[0]!r}: use a path, sqlite:/// or postgresql://")
    return text


def default_sqlite_path() -> Path:
    """``$XDG_DATA_HOME/referee/referee.db`` (``~/.local/share/referee/referee.db`` by default)."""
    base = os.environ.get("XDG_DATA_HOME") or os.path.join(os.path.expanduser("~"), ".local", "share")
    return Path(base) / "referee" / "referee.db"


def make_backend(target: str | os.PathLike[str], synchronous: str = "NORMAL", busy_timeout_ms: int = 5000) -> Backend:
    """The backend for ``target``; a SQLite file's directory is created when missing."""
    if is_postgres_url(target):
        from anticheat.judgement.store.postgres import (
            PostgresBackend,  # the driver only when used
        )

        return PostgresBackend(str(target))
    from anticheat.judgement.store.sqlite import SqliteBackend

    path = sqlite_path(target)
    if path != ":memory:":
        Path(path).expanduser().parent.mkdir(parents=True, exist_ok=True)
        path = str(Path(path).expanduser())
    return SqliteBackend(path, synchronous, busy_timeout_ms)
