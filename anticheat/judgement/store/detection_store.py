"""The detection store: detections, decisions, reviews, appeals, profiles, players and sessions.

The store only persists: the sanction and review logic live in ``sanctions`` and ``review``, which
rebuild from what ``load_*`` returns after a restart. It runs on SQLite (a file, the default) or
on PostgreSQL (``postgresql://...``, shared by a fleet); both speak the one schema of
:mod:`~anticheat.judgement.store.schema`.

Durability: writes are buffered in memory (the inline path never waits on the database) and
committed as one transaction when ``max_batch`` operations are pending, when ``flush_interval_s``
has passed since the last commit (checked on every write and by ``poll()``), on ``flush()`` and
on ``close()``. With ``autoflush=True`` a daemon thread also commits every ``flush_interval_s``,
so pending writes reach the database within about a second even when no further write or poll
arrives: a process killed outright (SIGKILL) loses at most the last second. Reads flush first, so
a reader always sees its own writes.

Schema versioning: opening a database of a newer schema than this code knows refuses to run
(``StoreVersionError``); an older one is migrated step by step.

Ids: detections, review items and appeals are written by id, and servers of a fleet share the
database, so their ids come from blocks reserved atomically from the ``id_blocks`` counters
(``reserve_ids``, or ``ids`` for a source handing them out one at a time); no two servers are
ever given the same id, so none overwrites another's rows.

Players: slots are reused, so everything is keyed by a stable *player key* (account id or name).
Times are wall-clock seconds since the epoch unless stated otherwise.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from anticheat.events import Detection
from anticheat.judgement.ids import IdBlocks
from anticheat.judgement.review import Appeal, AppealStatus, ReviewItem, ReviewStatus
from anticheat.judgement.sanctions import Evidence, SanctionDecision, SanctionLevel
from anticheat.judgement.store.backend import Backend
from anticheat.judgement.store.schema import (
    ID_SPACES,
    SCHEMA_VERSION,
    migration,
    upsert,
)
from anticheat.judgement.store.url import make_backend

__all__ = ["DetectionStore", "StoreConfig", "StoreVersionError", "StoredDetection", "StoredSession", "open_store"]

log = logging.getLogger(__name__)

_INSERT_DETECTION = upsert("detections")
_INSERT_DECISION = (
    "INSERT INTO decisions (player_key, at, recommended, applied, score, needs_review, reasons, evidence_ids)"
    " VALUES (?, ?, ?, ?, ?, ?, ?, ?)"
)
_UPSERT_REVIEW = upsert("review_items")
_UPSERT_APPEAL = upsert("appeals")
_UPSERT_PROFILE = upsert("profiles")
_UPSERT_PLAYER = (
    "INSERT INTO players (key, account_created, first_seen, last_seen) VALUES (?, ?, ?, ?)"
    " ON CONFLICT (key) DO UPDATE SET last_seen = excluded.last_seen,"
    " account_created = COALESCE(excluded.account_created, players.account_created)"
)
_OPEN_SESSION = upsert("sessions")
_CLOSE_SESSION = "UPDATE sessions SET disconnected_at = ?, reason = ? WHERE id = ?"
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
        busy_timeout_ms: how long SQLite waits for a lock held by another connection (ms).
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


@dataclass(frozen=True, slots=True)
class StoredSession:
    """One stay of a player on a server.

    Attributes: id; player_key; name (as the client sent it); slot; address (``host:port``);
        server_id (the server run or match that hosted it); connected_at, disconnected_at (epoch
        s; None while connected, or when the server died without closing it); reason (``client``,
        ``timeout``, ``kicked``, ``shutdown``; None while open).
    """

    id: str
    player_key: str
    name: str
    slot: int
    address: str
    server_id: str
    connected_at: float
    disconnected_at: float | None
    reason: str | None


def open_store(target: str | os.PathLike[str], config: StoreConfig | None = None) -> DetectionStore:
    """Open the store at ``target``: a path or ``sqlite:///`` URL (SQLite), ``postgresql://...``
    (PostgreSQL) or ``:memory:``."""
    return DetectionStore(target, config)


class DetectionStore:
    """Buffered persistence over a :class:`Backend`. Thread-safe: writes are buffered under a short lock.

    Args:
        target: a path, ``sqlite:///`` or ``postgresql://`` URL, ``":memory:"``, or an open backend.
        config: batching and durability settings.
        monotonic: clock for the flush timer (s, monotonic); injected so tests can drive it.
    """

    def __init__(
        self,
        target: str | os.PathLike[str] | Backend,
        config: StoreConfig | None = None,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self.config = config or StoreConfig()
        if isinstance(target, Backend):
            self._db = target
        else:
            self._db = make_backend(target, self.config.synchronous, self.config.busy_timeout_ms)
        self.path = self._db.name
        self.dialect = self._db.dialect
        self._monotonic = monotonic
        # Two locks so that a writer on the inline path only ever waits for a list append: the
        # buffer lock guards the pending list; the database lock guards the connection and is held
        # through a whole commit.
        self._buffer_lock = threading.Lock()
        self._db_lock = threading.RLock()
        self._pending: list[tuple[str, tuple[Any, ...]]] = []
        self._last_commit = monotonic()
        self._closed = False
        try:
            self._migrate()
        except BaseException:
            self._db.close()
            raise
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        if self.config.autoflush:
            self._thread = threading.Thread(target=self._autoflush, name="detection-store-flush", daemon=True)
            self._thread.start()

    # --- lifecycle ------------------------------------------------------------------------

    def _migrate(self) -> None:
        version = self._db.schema_version()
        if version > SCHEMA_VERSION:
            raise StoreVersionError(f"{self.path}: schema version {version} is newer than this code's {SCHEMA_VERSION}")
        while version < SCHEMA_VERSION:
            target = version + 1
            if self._db.migrate(target, migration(target, self.dialect)):
                log.info("store %s: migrated schema %d -> %d", self.path, version, target)
            # Another server may have migrated meanwhile: continue from what the database says.
            version = self._db.schema_version()
            if version > SCHEMA_VERSION:
                raise StoreVersionError(f"{self.path}: schema version {version} is newer than this code's {SCHEMA_VERSION}")

    @property
    def schema_version(self) -> int:
        """The schema version of the open database."""
        with self._db_lock:
            return self._db.schema_version()

    def flush(self) -> int:
        """Commit every pending write in one transaction; returns how many were written."""
        with self._db_lock:
            with self._buffer_lock:
                pending = self._pending
                self._pending = []
            if not pending:
                self._last_commit = self._monotonic()
                return 0
            try:
                self._db.write(_batches(pending))
            except BaseException:
                # Keep the writes for the next attempt rather than silently losing them.
                with self._buffer_lock:
                    self._pending = pending + self._pending
                raise
            self._last_commit = self._monotonic()
            return len(pending)

    def poll(self) -> int:
        """Commit if ``flush_interval_s`` has passed since the last commit (call from the tick loop).
        With the autoflush thread running this is its job, and the tick loop never waits on a commit."""
        if self._thread is not None:
            return 0
        return self._poll()

    def _poll(self) -> int:
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
            try:
                self.flush()
            finally:
                self._db.close()

    def __enter__(self) -> DetectionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _autoflush(self) -> None:
        interval = self.config.flush_interval_s
        # Wake at half the interval so a write never waits much longer than the interval.
        while not self._stop.wait(interval / 2.0):
            try:
                self._poll()
            except self._db.errors:
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

    # --- ids ------------------------------------------------------------------------------

    def reserve_ids(self, space: str, count: int) -> range:
        """Reserve ``count`` ids of ``space`` (``detection``, ``review`` or ``appeal``): committed at
        once, and never given to any other caller of this or any other store on the database.
        One round trip; it waits for a commit of the flush thread in progress."""
        if space not in ID_SPACES:
            raise ValueError(f"unknown id space {space!r}: one of {sorted(ID_SPACES)}")
        if count < 1:
            raise ValueError(f"count must be >= 1, got {count!r}")
        # The database lock: the SQLite connection is shared with the flush thread, whose commit
        # must not interleave with the reservation's transaction.
        with self._db_lock:
            if self._closed:
                raise RuntimeError(f"store {self.path} is closed")
            return self._db.reserve_ids(space, count)

    def ids(self, space: str, block_size: int = 256) -> IdBlocks:
        """A source of ``space`` ids reserving ``block_size`` at a time (see ``reserve_ids``)."""
        if space not in ID_SPACES:
            raise ValueError(f"unknown id space {space!r}: one of {sorted(ID_SPACES)}")
        return IdBlocks(lambda count: self.reserve_ids(space, count), block_size)

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
                0,
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

    def open_session(
        self,
        session_id: str,
        player_key: str,
        name: str,
        slot: int,
        address: str,
        server_id: str,
        connected_at: float,
    ) -> None:
        """Record that ``player_key`` joined ``server_id`` in ``slot`` at ``connected_at`` (epoch s)."""
        self._write(_OPEN_SESSION, (session_id, player_key, name, slot, address, server_id, connected_at, None, None))

    def close_session(self, session_id: str, disconnected_at: float, reason: str) -> None:
        """Record that session ``session_id`` ended at ``disconnected_at`` (epoch s) for ``reason``."""
        self._write(_CLOSE_SESSION, (disconnected_at, reason, session_id))

    # --- reads (each flushes first) -------------------------------------------------------

    def _query(self, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
        with self._db_lock:
            self.flush()
            return self._db.query(sql, params)

    def max_detection_id(self) -> int:
        """The largest evidence id stored (0 when none)."""
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

    def load_account_created(self, player_key: str) -> float | None:
        """``player_key``'s stored account creation time (epoch s), None when unknown."""
        rows = self._query("SELECT account_created FROM players WHERE key = ?", (player_key,))
        return rows[0][0] if rows else None

    def load_profile(self, player_key: str, detector: str) -> dict[str, Any] | None:
        """``detector``'s stored lifetime profile of ``player_key``, or None."""
        rows = self._query("SELECT blob FROM profiles WHERE player_key = ? AND detector = ?", (player_key, detector))
        return json.loads(rows[0][0]) if rows else None

    def load_profiles(self, player_key: str) -> dict[str, dict[str, Any]]:
        """Every stored lifetime profile of ``player_key``: ``{detector: profile}``."""
        rows = self._query("SELECT detector, blob FROM profiles WHERE player_key = ? ORDER BY detector", (player_key,))
        return {detector: json.loads(blob) for detector, blob in rows}

    def load_sessions(self, player_key: str | None = None, server_id: str | None = None) -> list[StoredSession]:
        """Stored sessions (of ``player_key`` / on ``server_id``), by connection time."""
        sql = (
            "SELECT id, player_key, name, slot, address, server_id, connected_at, disconnected_at, reason"
            " FROM sessions WHERE 1=1"
        )
        params: list[Any] = []
        if player_key is not None:
            sql += " AND player_key = ?"
            params.append(player_key)
        if server_id is not None:
            sql += " AND server_id = ?"
            params.append(server_id)
        return [StoredSession(*row) for row in self._query(sql + " ORDER BY connected_at, id", params)]


def _batches(pending: list[tuple[str, tuple[Any, ...]]]) -> list[tuple[str, list[tuple[Any, ...]]]]:
    # Consecutive writes with the same statement go through one executemany; order is kept
    # because a later write (a dismissal) may depend on an earlier one (the insert).
    out: list[tuple[str, list[tuple[Any, ...]]]] = []
    for sql, params in pending:
        if sql is _INSERT_DETECTION:
            params = (*params[:10], _dumps(dict(params[10])), *params[11:])
        if out and out[-1][0] is sql:
            out[-1][1].append(params)
        else:
            out.append((sql, [params]))
    return out


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

