"""Embedded SQLite persistence for detections, decisions, reviews, appeals, profiles and players.

The store only persists: the sanction and review logic live in ``sanctions`` and ``review``, which
rebuild from what ``load_*`` returns after a restart.

Durability: the database runs in WAL mode. Writes are buffered in memory (the inline path never
waits on the disk) and committed as one transaction when ``max_batch`` operations are pending, when
``flush_interval_s`` has passed since the last commit (checked on every write and by ``poll()``),
on ``flush()`` and on ``close()``. With ``autoflush=True`` a daemon thread also commits every
``flush_interval_s``, so pending writes reach the disk within about a second even when no further
write or poll arrives. Everything committed survives an abrupt stop of the process (SIGKILL): SQLite's
WAL with ``synchronous=NORMAL`` loses nothing committed on a process crash, only possibly the last
transactions on a power loss (set ``synchronous="FULL"`` for that). Reads flush first, so a reader
always sees its own writes.

Schema versioning: ``PRAGMA user_version`` holds the schema version. Opening a newer database than
this code knows refuses to run (``StoreVersionError``); an older one is migrated step by step by the
functions in ``_MIGRATIONS``.

Players: slots are reused, so everything is keyed by a stable *player key* (account id or name).
Times are wall-clock seconds since the epoch unless stated otherwise.
"""

from __future__ import annotations

import json
import logging
import math
import sqlite3
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from anticheat.events import Detection
from anticheat.judgement.review import Appeal, AppealStatus, ReviewItem, ReviewStatus
from anticheat.judgement.sanctions import Evidence, SanctionDecision, SanctionLevel

__all__ = ["SCHEMA_VERSION", "DetectionStore", "StoreConfig", "StoreVersionError", "StoredDetection"]

log = logging.getLogger(__name__)

SCHEMA_VERSION = 1
"""The schema version this code writes (``PRAGMA user_version``)."""

_SCHEMA_V1 = """
CREATE TABLE IF NOT EXISTS players (
    key TEXT PRIMARY KEY,
    account_created REAL,
    first_seen REAL NOT NULL,
    last_seen REAL NOT NULL
);
CREATE TABLE IF NOT EXISTS detections (
    id INTEGER PRIMARY KEY,
    player_key TEXT NOT NULL,
    slot INTEGER NOT NULL,
    tick INTEGER NOT NULL,
    time_s REAL NOT NULL,
    detector TEXT NOT NULL,
    kind TEXT NOT NULL,
    value REAL,
    severity REAL NOT NULL,
    reason TEXT NOT NULL,
    evidence TEXT NOT NULL,
    recorded_at REAL NOT NULL,
    dismissed INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS detections_player ON detections (player_key, recorded_at);
CREATE INDEX IF NOT EXISTS detections_time ON detections (recorded_at);
CREATE TABLE IF NOT EXISTS decisions (
    id INTEGER PRIMARY KEY AUTOINCREMENT,
    player_key TEXT NOT NULL,
    at REAL NOT NULL,
    recommended INTEGER NOT NULL,
    applied INTEGER NOT NULL,
    score REAL NOT NULL,
    needs_review INTEGER NOT NULL,
    reasons TEXT NOT NULL,
    evidence_ids TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS decisions_player ON decisions (player_key, at);
CREATE TABLE IF NOT EXISTS review_items (
    id INTEGER PRIMARY KEY,
    player_key TEXT NOT NULL,
    created REAL NOT NULL,
    recommended INTEGER NOT NULL,
    score REAL NOT NULL,
    applied INTEGER NOT NULL,
    reasons TEXT NOT NULL,
    evidence_ids TEXT NOT NULL,
    status TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    note TEXT NOT NULL,
    decided_at REAL,
    confirmed_level INTEGER,
    expires_at REAL
);
CREATE TABLE IF NOT EXISTS appeals (
    id INTEGER PRIMARY KEY,
    player_key TEXT NOT NULL,
    sanction_ref INTEGER NOT NULL,
    filed REAL NOT NULL,
    text TEXT NOT NULL,
    status TEXT NOT NULL,
    reviewer TEXT NOT NULL,
    decision_note TEXT NOT NULL,
    decided_at REAL
);
CREATE TABLE IF NOT EXISTS profiles (
    player_key TEXT NOT NULL,
    detector TEXT NOT NULL,
    blob TEXT NOT NULL,
    updated_at REAL NOT NULL,
    PRIMARY KEY (player_key, detector)
);
"""

_MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    # version v -> function upgrading a database at v-1 to v. Version 1 is the initial schema.
    1: lambda conn: _execute_script(conn, _SCHEMA_V1),
}


def _execute_script(conn: sqlite3.Connection, script: str) -> None:
    # Not ``executescript``: it commits first, which would split a migration from its version bump.
    for statement in script.split(";"):
        if statement.strip():
            conn.execute(statement)


_INSERT_DETECTION = (
    "INSERT OR REPLACE INTO detections (id, player_key, slot, tick, time_s, detector, kind, value, severity,"
    " reason, evidence, recorded_at, dismissed) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 0)"
)
_INSERT_DECISION = (
    "INSERT INTO decisions (player_key, at, recommended, applied, score, needs_review, reasons, evidence_ids)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_REVIEW = (
    "INSERT OR REPLACE INTO review_items (id, player_key, created, recommended, score, applied, reasons,"
    " evidence_ids, status, reviewer, note, decided_at, confirmed_level, expires_at)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_APPEAL = (
    "INSERT OR REPLACE INTO appeals (id, player_key, sanction_ref, filed, text, status, reviewer,"
    " decision_note, decided_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_PROFILE = "INSERT OR REPLACE INTO profiles (player_key, detector, blob, updated_at) VALUES (?, ?, ?, ?)"
_UPSERT_PLAYER = (
    "INSERT INTO players (key, account_created, first_seen, last_seen) VALUES (?, ?, ?, ?)"
    " ON CONFLICT(key) DO UPDATE SET last_seen = excluded.last_seen,"
    " account_created = COALESCE(excluded.account_created, players.account_created)"
)
_DISMISS = "UPDATE detections SET dismissed = 1 WHERE id = ?"


class StoreVersionError(RuntimeError):
    """The database was written by a newer schema than this code knows."""


@dataclass(frozen=True, slots=True)
class StoreConfig:
    """Durability and batching of the store.

    Attributes:
        flush_interval_s: commit pending writes at least this often (s; wall time). 1 s by brief.
        max_batch: commit as soon as this many writes are pending.
        autoflush: run a daemon thread committing every ``flush_interval_s`` (off for single-threaded
            tests that call ``poll``/``flush`` themselves).
        synchronous: SQLite ``synchronous`` pragma: NORMAL survives process crashes; FULL also power loss.
        busy_timeout_ms: how long to wait for a lock held by another connection (ms).
    """

    flush_interval_s: float = 1.0
    max_batch: int = 512
    autoflush: bool = True
    synchronous: str = "NORMAL"
    busy_timeout_ms: int = 5000

    def __post_init__(self) -> None:
        if not (math.isfinite(self.flush_interval_s) and self.flush_interval_s > 0.0):
            raise ValueError(f"flush_interval_s must be > 0, got {self.flush_interval_s!r}")
        if self.max_batch < 1:
            raise ValueError(f"max_batch must be >= 1, got {self.max_batch!r}")
        if self.synchronous.upper() not in ("OFF", "NORMAL", "FULL", "EXTRA"):
            raise ValueError(f"synchronous must be OFF, NORMAL, FULL or EXTRA, got {self.synchronous!r}")


@dataclass(frozen=True, slots=True)
class StoredDetection:
    """A detection as stored: the event plus its player key, evidence id and bookkeeping.

    Attributes: id (evidence id), player_key, detection (slot in ``detection.player``),
        recorded_at (epoch s), dismissed.
    """

    id: int
    player_key: str
    detection: Detection
    recorded_at: float
    dismissed: bool


class DetectionStore:
    """SQLite-backed persistence. Thread-safe: one connection, writes buffered under a short lock.

    Args:
        path: database file (``":memory:"`` for a throwaway store; durability needs a file).
        config: batching and durability settings.
        monotonic: clock for the flush timer (s, monotonic); injected so tests can drive it.
    """

    def __init__(
        self,
        path: str | Path,
        config: StoreConfig | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or StoreConfig()
        self.path = str(path)
        self._monotonic = monotonic
        # Two locks so that a writer on the inline path only ever waits for a list append: the
        # buffer lock guards the pending list; the database lock guards the connection and is held
        # through a whole commit.
        self._buffer_lock = threading.Lock()
        self._db_lock = threading.RLock()
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self._last_commit = monotonic()
        self._closed = False
        # isolation_level=None: we open and commit transactions explicitly, one per batch.
        self._conn = sqlite3.connect(self.path, isolation_level=None, check_same_thread=False)
        self._conn.execute(f"PRAGMA busy_timeout = {int(self.config.busy_timeout_ms)}")
        if self.path != ":memory:":
            mode = self._conn.execute("PRAGMA journal_mode = WAL").fetchone()[0]
            if str(mode).lower() != "wal":
                log.warning("store %s: journal_mode is %s, not wal", self.path, mode)
        self._conn.execute(f"PRAGMA synchronous = {self.config.synchronous.upper()}")
        self._migrate()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.config.autoflush:
            self._thread = threading.Thread(target=self._autoflush, name="detection-store-flush", daemon=True)
            self._thread.start()

    # --- lifecycle ------------------------------------------------------------------------

    def _migrate(self) -> None:
        version = int(self._conn.execute("PRAGMA user_version").fetchone()[0])
        if version > SCHEMA_VERSION:
            self._conn.close()
            raise StoreVersionError(f"{self.path}: schema version {version} is newer than this code's {SCHEMA_VERSION}")
        while version < SCHEMA_VERSION:
            target = version + 1
            self._conn.execute("BEGIN IMMEDIATE")
            try:
                _MIGRATIONS[target](self._conn)
                self._conn.execute(f"PRAGMA user_version = {target}")
                self._conn.execute("COMMIT")
            except BaseException:
                self._conn.execute("ROLLBACK")
                raise
            log.info("store %s: migrated schema %d -> %d", self.path, version, target)
            version = target

    @property
    def schema_version(self) -> int:
        """The schema version of the open database."""
        with self._db_lock:
            return int(self._conn.execute("PRAGMA user_version").fetchone()[0])

    def flush(self) -> int:
        """Commit every pending write in one transaction; returns how many were written."""
        with self._db_lock:
            with self._buffer_lock:
                pending = self._pending
                self._pending = []
            if not pending:
                self._last_commit = self._monotonic()
                return 0
            conn = self._conn
            conn.execute("BEGIN")
            try:
                # Consecutive writes with the same statement go through executemany; order is kept
                # because a later write (a dismissal) may depend on an earlier one (the insert).
                start = 0
                while start < len(pending):
                    sql = pending[start][0]
                    end = start + 1
                    while end < len(pending) and pending[end][0] == sql:
                        end += 1
                    rows = [params for _, params in pending[start:end]]
                    if sql is _INSERT_DETECTION:
                        rows = [(*r[:10], _dumps(dict(r[10])), *r[11:]) for r in rows]
                    conn.executemany(sql, rows)
                    start = end
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                # Keep the writes for the next attempt rather than silently losing them.
                with self._buffer_lock:
                    self._pending = pending + self._pending
                raise
            self._last_commit = self._monotonic()
            return len(pending)

    def poll(self) -> int:
        """Commit if ``flush_interval_s`` has passed since the last commit (call from the tick loop)."""
        with self._buffer_lock:
            due = bool(self._pending) and self._monotonic() - self._last_commit >= self.config.flush_interval_s
        return self.flush() if due else 0

    @property
    def pending(self) -> int:
        """Writes buffered and not yet committed."""
        with self._buffer_lock:
            return len(self._pending)

    def close(self) -> None:
        """Commit pending writes, stop the flush thread and close the database."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        with self._db_lock:
            with self._buffer_lock:
                if self._closed:
                    return
                self._closed = True  # refuse writes from here on; those already buffered are flushed
            self.flush()
            self._conn.close()

    def __enter__(self) -> DetectionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _autoflush(self) -> None:
        interval = self.config.flush_interval_s
        # Wake at half the interval so a write never waits much longer than the interval.
        while not self._stop.wait(interval / 2.0):
            try:
                self.poll()
            except sqlite3.Error:
                log.exception("store %s: background flush failed", self.path)

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self._buffer_lock:
            if self._closed:
                raise RuntimeError(f"store {self.path} is closed")
            self._pending.append((sql, params))
            # With the flush thread running, the timer is its job: the writer (often the inline
            # detection path) then only pays for a commit when the batch is full.
            due = len(self._pending) >= self.config.max_batch or (
                self._thread is None and self._monotonic() - self._last_commit >= self.config.flush_interval_s
            )
        if due:
            self.flush()

    # --- writes ---------------------------------------------------------------------------

    def add_detection(self, evidence_id: int, player_key: str, detection: Detection, recorded_at: float) -> None:
        """Persist ``detection`` of ``player_key`` under ``evidence_id``, recorded at ``recorded_at``."""
        d = detection
        self._write(
            _INSERT_DETECTION,
            (
                evidence_id,
                player_key,
                d.player,
                d.tick,
                d.time_s,
                d.detector,
                d.kind,
                _finite_or_none(d.value),
                d.severity,
                d.reason,
                d.evidence,  # encoded at flush time, off the inline path (often in the flush thread)
                recorded_at,
            ),
        )

    def mark_dismissed(self, evidence_ids: Iterable[int]) -> None:
        """Mark evidence as dismissed by a reviewer."""
        for evidence_id in evidence_ids:
            self._write(_DISMISS, (evidence_id,))

    def add_decision(self, decision: SanctionDecision) -> None:
        """Persist a sanction decision (the audit trail of recommended vs applied levels)."""
        self._write(
            _INSERT_DECISION,
            (
                decision.player,
                decision.at,
                int(decision.recommended),
                int(decision.applied),
                decision.score,
                int(decision.needs_review),
                json.dumps(list(decision.reasons)),
                json.dumps(list(decision.evidence_ids)),
            ),
        )

    def save_review_item(self, item: ReviewItem) -> None:
        """Insert or update a review item."""
        self._write(
            _UPSERT_REVIEW,
            (
                item.id,
                item.player,
                item.created,
                int(item.recommended),
                item.score,
                int(item.applied),
                json.dumps(list(item.reasons)),
                json.dumps(list(item.evidence_ids)),
                item.status.value,
                item.reviewer,
                item.note,
                item.decided_at,
                None if item.confirmed_level is None else int(item.confirmed_level),
                item.expires_at,
            ),
        )

    def save_appeal(self, appeal: Appeal) -> None:
        """Insert or update an appeal."""
        self._write(
            _UPSERT_APPEAL,
            (
                appeal.id,
                appeal.player,
                appeal.sanction_ref,
                appeal.filed,
                appeal.text,
                appeal.status.value,
                appeal.reviewer,
                appeal.decision_note,
                appeal.decided_at,
            ),
        )

    def upsert_player(self, key: str, seen_at: float, account_created: float | None = None) -> None:
        """Record that ``key`` was seen at ``seen_at``; ``account_created`` (epoch s) if known."""
        self._write(_UPSERT_PLAYER, (key, account_created, seen_at, seen_at))

    def save_profile(self, player_key: str, detector: str, profile: Mapping[str, Any], updated_at: float) -> None:
        """Persist ``detector``'s lifetime profile of ``player_key`` (a JSON-serialisable dict)."""
        self._write(_UPSERT_PROFILE, (player_key, detector, _dumps(profile), updated_at))

    def delete_profiles(self, player_key: str, detector: str | None = None) -> None:
        """Forget ``player_key``'s lifetime profiles (of one ``detector`` if given)."""
        if detector is None:
            self._write("DELETE FROM profiles WHERE player_key = ?", (player_key,))
        else:
            self._write("DELETE FROM profiles WHERE player_key = ? AND detector = ?", (player_key, detector))

    # --- reads (each flushes first) -------------------------------------------------------

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._db_lock:
            self.flush()
            return self._conn.execute(sql, tuple(params)).fetchall()

    def max_detection_id(self) -> int:
        """The largest evidence id stored (0 when none): the pipeline continues after it."""
        row = self._query("SELECT COALESCE(MAX(id), 0) FROM detections")
        return int(row[0][0])

    def load_detections(self, player_key: str | None = None, since: float | None = None) -> list[StoredDetection]:
        """Stored detections (of ``player_key``, recorded at or after ``since``), in id order."""
        sql = (
            "SELECT id, player_key, slot, tick, time_s, detector, kind, value, severity, reason, evidence,"
            " recorded_at, dismissed FROM detections WHERE 1=1"
        )
        params: list[Any] = []
        if player_key is not None:
            sql += " AND player_key = ?"
            params.append(player_key)
        if since is not None:
            sql += " AND recorded_at >= ?"
            params.append(since)
        out: list[StoredDetection] = []
        for row in self._query(sql + " ORDER BY id", params):
            (eid, key, slot, tick, time_s, detector, kind, value, severity, reason, evidence, at, dismissed) = row
            detection = Detection(
                player=slot,
                tick=tick,
                time_s=time_s,
                detector=detector,
                kind=kind,
                value=math.nan if value is None else value,
                severity=severity,
                reason=reason,
                evidence=json.loads(evidence),
            )
            out.append(StoredDetection(eid, key, detection, at, bool(dismissed)))
        return out

    def load_evidence(self, since: float | None = None) -> list[Evidence]:
        """Evidence for the sanction policy (recorded at or after ``since``), in id order."""
        sql = "SELECT id, player_key, detector, kind, severity, recorded_at, reason, dismissed FROM detections"
        params: list[Any] = []
        if since is not None:
            sql += " WHERE recorded_at >= ?"
            params.append(since)
        return [
            Evidence(eid, key, det, kind, sev, at, reason, bool(dis))
            for eid, key, det, kind, sev, at, reason, dis in self._query(sql + " ORDER BY id", params)
        ]

    def load_decisions(self, player_key: str | None = None) -> list[SanctionDecision]:
        """Stored decisions (of ``player_key``), oldest first (reasons and evidence ids only)."""
        sql = "SELECT player_key, at, recommended, applied, score, needs_review, reasons, evidence_ids FROM decisions"
        params: list[Any] = []
        if player_key is not None:
            sql += " WHERE player_key = ?"
            params.append(player_key)
        out: list[SanctionDecision] = []
        for key, at, rec, app, score, review, reasons, ids in self._query(sql + " ORDER BY id", params):
            out.append(
                SanctionDecision(
                    player=key,
                    at=at,
                    recommended=SanctionLevel(rec),
                    applied=SanctionLevel(app),
                    score=score,
                    raw_score=math.nan,
                    account_factor=math.nan,
                    needs_review=bool(review),
                    reasons=tuple(json.loads(reasons)),
                    evidence_ids=tuple(json.loads(ids)),
                )
            )
        return out

    def load_review_items(self) -> list[ReviewItem]:
        """Every review item, in id order."""
        rows = self._query(
            "SELECT id, player_key, created, recommended, score, applied, reasons, evidence_ids, status, reviewer,"
            " note, decided_at, confirmed_level, expires_at FROM review_items ORDER BY id"
        )
        return [
            ReviewItem(
                id=r[0],
                player=r[1],
                created=r[2],
                recommended=SanctionLevel(r[3]),
                score=r[4],
                applied=SanctionLevel(r[5]),
                reasons=tuple(json.loads(r[6])),
                evidence_ids=tuple(json.loads(r[7])),
                status=ReviewStatus(r[8]),
                reviewer=r[9],
                note=r[10],
                decided_at=r[11],
                confirmed_level=None if r[12] is None else SanctionLevel(r[12]),
                expires_at=r[13],
            )
            for r in rows
        ]

    def load_appeals(self) -> list[Appeal]:
        """Every appeal, in id order."""
        rows = self._query(
            "SELECT id, player_key, sanction_ref, filed, text, status, reviewer, decision_note, decided_at"
            " FROM appeals ORDER BY id"
        )
        return [Appeal(r[0], r[1], r[2], r[3], r[4], AppealStatus(r[5]), r[6], r[7], r[8]) for r in rows]

    def load_players(self) -> dict[str, float | None]:
        """``{player key: account creation time (epoch s) or None}``."""
        return {key: created for key, created in self._query("SELECT key, account_created FROM players")}

    def load_profile(self, player_key: str, detector: str) -> dict[str, Any] | None:
        """``detector``'s stored lifetime profile of ``player_key``, or None."""
        rows = self._query("SELECT blob FROM profiles WHERE player_key = ? AND detector = ?", (player_key, detector))
        return json.loads(rows[0][0]) if rows else None

    def load_profiles(self, player_key: str) -> dict[str, dict[str, Any]]:
        """Every stored lifetime profile of ``player_key``: ``{detector: profile}``."""
        rows = self._query("SELECT detector, blob FROM profiles WHERE player_key = ? ORDER BY detector", (player_key,))
        return {detector: json.loads(blob) for detector, blob in rows}


def _json_default(value: Any) -> Any:
    # Detectors often hand over numpy scalars or tuples of them; one value json cannot encode must
    # never poison a batch (a failing flush would keep failing with the same rows).
    item = getattr(value, "item", None)
    if callable(item):
        return item()
    if isinstance(value, (set, frozenset, tuple)):
        return list(value)
    return str(value)


def _dumps(value: Any) -> str:
    return json.dumps(value, default=_json_default)


def _finite_or_none(value: float) -> float | None:
    # SQLite stores NaN as NULL anyway; make that explicit so reading back restores NaN.
    return value if not (isinstance(value, float) and math.isnan(value)) else None
