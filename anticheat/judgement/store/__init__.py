"""Persistence for the anti-cheat's conclusions, on SQLite (default) or PostgreSQL.

``open_store(path_or_url)`` opens it: a path or ``sqlite:///`` URL is a SQLite file (WAL),
``postgresql://...`` a PostgreSQL database shared by a fleet. Modules: ``schema`` (the one schema,
rendered per dialect), ``backend`` (what a database must provide), ``sqlite`` and ``postgres``
(the two backends), ``url`` (path or URL to backend), ``detection_store`` (the buffered store).
"""

from anticheat.judgement.store.detection_store import (
    DetectionStore,
    StoreConfig,
    StoredDetection,
    StoredSession,
    StoreVersionError,
    open_store,
)
from anticheat.judgement.store.schema import SCHEMA_VERSION
from anticheat.judgement.store.url import default_sqlite_path, is_postgres_url

__all__ = [
    "SCHEMA_VERSION",
    "DetectionStore",
    "StoreConfig",
    "StoreVersionError",
    "StoredDetection",
    "StoredSession",
    "default_sqlite_path",
    "is_postgres_url",
    "open_store",
]
