"""The lab's database: one DuckDB file per corpus directory (``DIR/corpus.duckdb``).

Tables (every time is seconds; ``play_s`` is seconds since the player's own connect, the clock
the deadlines are read on):

``meta(key, value)``
    ``spec`` (the corpus spec as JSON), ``spec_hash``, ``created``, ``schema``.
``matches(match_id, seed, map, duration_s, tick_rate_hz, scenario, wall_s, runner, finished_at)``
    one row per played match; a match is written in one transaction with all its rows, so a
    match is either wholly in the corpus or absent (resume skips the present ones).
``players(match_id, name, slot, profile, cheat, blatant, skill, link, ping_ms, jitter_ms, loss,
params, param_bin, join_s, leave_s, play_s, shots, hits, kills, deaths)``
    ground truth and exposure: one row per bot per match. ``link`` is the link class's name,
    ``param_bin`` a label such as ``strength=0.5`` (``""`` when the profile has no varied
    parameter).
``streams(match_id, codec, raw_bytes, data)``
    the event stream the detectors consumed (a replay file's bytes, compressed with ``codec``),
    all that offline re-detection needs.
``detections(match_id, run, name, time_s, play_s, detector, kind, value, severity, reason, evidence)``
    every detection; ``run`` names the tolerance set (``base``: the spec's own; a tuned set
    gets its own name).
``decisions(match_id, run, name, time_s, play_s, level, score)``
    the sanction policy's recommended level each time it changed.
``traces(match_id, run, name, stat, play_s, value)``
    score traces: ``stat`` is ``detector:statistic``; values are normalised so that 1.0 is the
    detector's alarm threshold; a row is written only when the value changed since the last
    sample (sampled once per ``trace_every_s``), so a trace is a step function.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import duckdb

__all__ = ["DB_NAME", "SCHEMA_VERSION", "LabStore", "MatchRows", "open_store"]

DB_NAME = "corpus.duckdb"
SCHEMA_VERSION = "1"

_DDL = (
    "CREATE TABLE IF NOT EXISTS meta (key VARCHAR PRIMARY KEY, value VARCHAR)",
    """CREATE TABLE IF NOT EXISTS matches (
        match_id INTEGER PRIMARY KEY, seed BIGINT, map VARCHAR, duration_s DOUBLE,
        tick_rate_hz INTEGER, scenario VARCHAR, wall_s DOUBLE, runner VARCHAR,
        finished_at TIMESTAMP DEFAULT current_timestamp)""",
    """CREATE TABLE IF NOT EXISTS players (
        match_id INTEGER, name VARCHAR, slot INTEGER, profile VARCHAR, cheat BOOLEAN,
        blatant BOOLEAN, skill VARCHAR, link VARCHAR, ping_ms DOUBLE, jitter_ms DOUBLE,
        loss DOUBLE, params VARCHAR, param_bin VARCHAR, join_s DOUBLE, leave_s DOUBLE,
        play_s DOUBLE, shots INTEGER, hits INTEGER, kills INTEGER, deaths INTEGER,
        PRIMARY KEY (match_id, name))""",
    """CREATE TABLE IF NOT EXISTS streams (
        match_id INTEGER PRIMARY KEY, codec VARCHAR, raw_bytes BIGINT, data BLOB)""",
    """CREATE TABLE IF NOT EXISTS detections (
        match_id INTEGER, run VARCHAR, name VARCHAR, time_s DOUBLE, play_s DOUBLE,
        detector VARCHAR, kind VARCHAR, value DOUBLE, severity DOUBLE, reason VARCHAR,
        evidence VARCHAR)""",
    """CREATE TABLE IF NOT EXISTS decisions (
        match_id INTEGER, run VARCHAR, name VARCHAR, time_s DOUBLE, play_s DOUBLE,
        level VARCHAR, score DOUBLE)""",
    """CREATE TABLE IF NOT EXISTS traces (
        match_id INTEGER, run VARCHAR, name VARCHAR, stat VARCHAR, play_s REAL, value REAL)""",
)

_PLAYER_COLUMNS = ("match_id", "name", "slot", "profile", "cheat", "blatant", "skill", "link", "ping_ms",
                   "jitter_ms", "loss", "params", "param_bin", "join_s", "leave_s", "play_s", "shots", "hits",
                   "kills", "deaths")


@dataclass(frozen=True, slots=True)
class MatchRows:
    """Everything one played match adds to the corpus, written in one transaction.

    Attributes: match (the ``matches`` row as a mapping), players (``players`` rows), stream
        (codec, raw length in bytes, compressed bytes), detections / decisions / traces: rows of
        those tables as tuples in column order, ``match_id`` and ``run`` included.
    """

    match: Mapping[str, Any]
    players: Sequence[Mapping[str, Any]]
    stream: tuple[str, int, bytes] | None
    detections: Sequence[tuple[Any, ...]]
    decisions: Sequence[tuple[Any, ...]]
    traces: Sequence[tuple[Any, ...]]


class LabStore:
    """A corpus database. Only one process writes (the corpus runner's parent); workers return rows."""

    def __init__(self, path: str | os.PathLike[str], *, read_only: bool = False) -> None:
        self.path = Path(path)
        # No progress bar: the library writes nothing to the terminal (the CLI shows its own).
        self.con = duckdb.connect(os.fspath(self.path), read_only=read_only)
        self.con.execute("SET enable_progress_bar = false")
        if not read_only:
            for ddl in _DDL:
                self.con.execute(ddl)
            self.set_meta("schema", SCHEMA_VERSION)

    # --- meta -----------------------------------------------------------------------------

    def set_meta(self, key: str, value: str) -> None:
        """Store ``value`` under ``key`` (replacing it)."""
        self.con.execute("INSERT OR REPLACE INTO meta VALUES (?, ?)", [key, value])

    def meta(self, key: str) -> str | None:
        """The value stored under ``key``, or None."""
        row = self.con.execute("SELECT value FROM meta WHERE key = ?", [key]).fetchone()
        return None if row is None else str(row[0])

    # --- writing --------------------------------------------------------------------------

    def done_match_ids(self) -> set[int]:
        """Matches already in the corpus (a resumed build skips them)."""
        return {int(r[0]) for r in self.con.execute("SELECT match_id FROM matches").fetchall()}

    def add_match(self, rows: MatchRows) -> None:
        """Write one match and all its rows atomically."""
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            m = rows.match
            con.execute(
                "INSERT INTO matches (match_id, seed, map, duration_s, tick_rate_hz, scenario, wall_s, runner) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [m["match_id"], m["seed"], m["map"], m["duration_s"], m["tick_rate_hz"],
                 json.dumps(m["scenario"], sort_keys=True), m["wall_s"], m["runner"]],
            )
            if rows.players:
                con.executemany(
                    f"INSERT INTO players ({', '.join(_PLAYER_COLUMNS)}) VALUES ({', '.join('?' * len(_PLAYER_COLUMNS))})",
                    [[_column(p, c) for c in _PLAYER_COLUMNS] for p in rows.players],
                )
            if rows.stream is not None:
                codec, raw, data = rows.stream
                con.execute("INSERT INTO streams VALUES (?, ?, ?, ?)", [m["match_id"], codec, raw, data])
            self._insert_many("detections", rows.detections, 11)
            self._insert_many("decisions", rows.decisions, 7)
            self._insert_many("traces", rows.traces, 6)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def replace_run(self, run: str, match_id: int, detections: Sequence[tuple[Any, ...]],
                    decisions: Sequence[tuple[Any, ...]], traces: Sequence[tuple[Any, ...]]) -> None:
        """Store (or replace) one match's results under tolerance set ``run``, atomically."""
        con = self.con
        con.execute("BEGIN TRANSACTION")
        try:
            for table in ("detections", "decisions", "traces"):
                con.execute(f"DELETE FROM {table} WHERE run = ? AND match_id = ?", [run, match_id])
            self._insert_many("detections", detections, 11)
            self._insert_many("decisions", decisions, 7)
            self._insert_many("traces", traces, 6)
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise

    def _insert_many(self, table: str, rows: Sequence[tuple[Any, ...]], width: int) -> None:
        if not rows:
            return
        self.con.executemany(f"INSERT INTO {table} VALUES ({', '.join('?' * width)})", [list(r) for r in rows])

    # --- reading --------------------------------------------------------------------------

    def streams(self, match_ids: Iterable[int] | None = None) -> list[tuple[int, str, bytes]]:
        """``(match_id, codec, data)`` of every stored stream (or of ``match_ids``), by match id."""
        if match_ids is None:
            rows = self.con.execute("SELECT match_id, codec, data FROM streams ORDER BY match_id").fetchall()
        else:
            ids = sorted(set(match_ids))
            rows = self.con.execute(
                "SELECT match_id, codec, data FROM streams WHERE list_contains(?, match_id) ORDER BY match_id", [ids]
            ).fetchall()
        return [(int(a), str(b), bytes(c)) for a, b, c in rows]

    def runs(self) -> list[str]:
        """Tolerance sets with stored results."""
        return [str(r[0]) for r in self.con.execute("SELECT DISTINCT run FROM detections UNION SELECT DISTINCT run FROM traces ORDER BY 1").fetchall()]

    def size_bytes(self) -> int:
        """The database's size on disk (B), after a checkpoint folds the write-ahead log in."""
        self.con.execute("CHECKPOINT")
        wal = self.path.with_name(self.path.name + ".wal")
        return self.path.stat().st_size + (wal.stat().st_size if wal.exists() else 0)

    def compact(self) -> None:
        """Rewrite the database without the free blocks that appended blobs and a rolled-back
        match leave behind (a killed build's file was 13.5 MB per player-hour, 7.2 rewritten)."""
        tmp = self.path.with_name(self.path.name + ".compact")
        tmp.unlink(missing_ok=True)
        self.con.execute("CHECKPOINT")
        self.con.close()
        con = duckdb.connect(os.fspath(tmp))
        try:
            con.execute("SET enable_progress_bar = false")
            con.execute(f"ATTACH '{self.path.as_posix()}' AS src (READ_ONLY)")
            target = con.execute("SELECT current_database()").fetchone()[0]
            con.execute(f'COPY FROM DATABASE src TO "{target}"')
        finally:
            con.close()
        os.replace(tmp, self.path)
        self.con = duckdb.connect(os.fspath(self.path))
        self.con.execute("SET enable_progress_bar = false")

    def close(self) -> None:
        """Close the connection (commits nothing: every write is its own transaction)."""
        self.con.close()

    def __enter__(self) -> LabStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _column(row: Mapping[str, Any], column: str) -> Any:
    value = row.get(column)
    if column == "params":
        return json.dumps(value or {}, sort_keys=True)
    return value


def open_store(directory: str | os.PathLike[str], *, read_only: bool = False) -> LabStore:
    """The store of corpus directory ``directory`` (created when writing)."""
    d = Path(directory)
    if not read_only:
        d.mkdir(parents=True, exist_ok=True)
    elif not (d / DB_NAME).exists():
        raise FileNotFoundError(f"{d}: no lab corpus here (missing {DB_NAME}); build one with `referee lab corpus`")
    return LabStore(d / DB_NAME, read_only=read_only)
