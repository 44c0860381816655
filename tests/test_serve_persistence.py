"""``referee serve --db``: a real server killed with SIGKILL mid-match loses nothing it concluded
more than a second before, its sessions are on record, and its replay reads back as cut; a
server that stops cleanly closes its sessions and its replay."""

from __future__ import annotations

import asyncio
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from datetime import datetime
from pathlib import Path
from typing import Any

import pytest

from anticheat.events import Detection
from anticheat.judgement.store import open_store
from server.recording import ReplayReader
from testbed.replay_summary import NOT_CLOSED, summarize

REPO = Path(__file__).resolve().parents[1]


def _lines(stream: Any, out: queue.Queue[str | None]) -> None:
    for line in stream:
        out.put(line)
    out.put(None)


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "testbed.cli", *args],
        stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, cwd=REPO, env=dict(os.environ),
    )


def _stop(proc: subprocess.Popen[str]) -> None:
    if proc.poll() is None:
        proc.kill()
    proc.wait(timeout=10)


@pytest.fixture(params=["sqlite", "postgres"])
def db(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The server's database: a SQLite file, or a fresh database on a real PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "referee.db")
    return str(request.getfixturevalue("postgres_url"))


def test_sigkill_mid_match_loses_nothing_older_than_a_second(tmp_path: Path, db: str) -> None:
    replay = tmp_path / "killed.replay"
    server = _spawn("serve", "--port", "0", "--map", "corridors", "--db", db, "--replay", str(replay), "--log-json")
    bots = None
    lines: queue.Queue[str | None] = queue.Queue()
    assert server.stderr is not None
    threading.Thread(target=_lines, args=(server.stderr, lines), daemon=True).start()
    logged: list[dict[str, Any]] = []
    seen: list[str] = []
    try:
        deadline = time.monotonic() + 30.0
        while bots is None or len(logged) < 4 or time.time() - _epoch(logged[0]) < 3.0:
            assert time.monotonic() < deadline, "no detections within 30 s:\n" + "".join(seen[-30:])
            try:
                line = lines.get(timeout=max(0.1, deadline - time.monotonic()))
            except queue.Empty:
                continue
            assert line is not None, "serve exited:\n" + "".join(seen[-30:])
            seen.append(line)
            record = json.loads(line)
            if record.get("event") == "listening" and bots is None:
                # A speed hack is caught within a few seconds of play, then every 10 s (timer cooldown).
                bots = _spawn("bots", "--server", record["address"], "--count", "2", "--profile", "speedhack",
                              "--duration", "60")
            elif record.get("event") == "detection":
                logged.append(record)
        killed_at = time.time()
        server.send_signal(signal.SIGKILL)
        server.wait(timeout=10)
        assert server.returncode == -signal.SIGKILL
    finally:
        _stop(server)
        if bots is not None:
            _stop(bots)

    older = [r for r in logged if _epoch(r) <= killed_at - 1.0]
    assert older, "no detection logged more than a second before the kill"
    with open_store(db) as store:
        stored = store.load_detections()
        keys = {(s.player_key, f"{s.detection.detector}:{s.detection.kind}", s.detection.reason,
                 round(s.detection.time_s, 6)) for s in stored}
        missing = [r for r in older if (r["player"], r["check"], r["reason"], round(r["server_time_s"], 6)) not in keys]
        assert not missing, f"{len(missing)} of {len(older)} detections logged before the kill are not stored: {missing[:3]}"
        # Every stored detection has its evidence and reason as the log showed them.
        assert all(s.detection.reason and isinstance(s.detection.evidence, dict) for s in stored)
        sessions = store.load_sessions()
        players = {s.player_key for s in sessions}
        assert {"speedhack-1", "speedhack-2"} <= players
        # Killed outright: the bots' sessions were never closed.
        assert all(s.disconnected_at is None for s in sessions if s.player_key in ("speedhack-1", "speedhack-2"))
        # The replay holds every detection (the log is rate-limited), written out every second of
        # server time. Server time at the kill, from the log lines' wall and server times (the
        # smallest gap: a line is written just after its tick starts; an estimate never late).
        offset = min(_epoch(r) - r["server_time_s"] for r in logged)
        cutoff_s = killed_at - offset - 1.0
        rows = {(s.detection.player, s.detection.tick, s.detection.detector, s.detection.kind, s.detection.reason)
                for s in stored}
        recorded = [e for e in ReplayReader(replay).events() if isinstance(e, Detection) and e.time_s <= cutoff_s]
        assert len(recorded) >= len(older)
        assert all((d.player, d.tick, d.detector, d.kind, d.reason) in rows for d in recorded)
    summary = summarize(replay)
    assert summary.truncated and summary.end is None
    assert summary.cut_reason in (NOT_CLOSED, "ends on an incomplete or corrupt frame")


def _epoch(record: dict[str, Any]) -> float:
    return datetime.fromisoformat(record["time"]).timestamp()


@pytest.mark.asyncio
async def test_a_clean_stop_closes_sessions_and_the_replay(tmp_path: Path) -> None:
    from testbed.standalone import run_bot_swarm, serve
    from world.mapfile import builtin_map

    db = tmp_path / "referee.db"
    replay = tmp_path / "clean.replay"
    listening: asyncio.Future[tuple[str, int]] = asyncio.get_running_loop().create_future()
    task = asyncio.create_task(serve(builtin_map("corridors"), duration_s=4.0, replay_path=replay, db=db,
                                     server_id="clean-run", on_listening=listening.set_result))
    address = await asyncio.wait_for(listening, 30.0)
    await run_bot_swarm(address, count=1, profile="honest", duration_s=1.5, name_prefix="calm")
    await asyncio.wait_for(task, 30.0)
    with open_store(db) as store:
        sessions = {s.player_key: s for s in store.load_sessions(server_id="clean-run")}
        assert sessions["calm-1"].reason == "client" and sessions["calm-1"].disconnected_at is not None
        assert sessions["calm-1"].address.startswith("127.0.0.1:") and sessions["calm-1"].name == "calm-1"
        assert sessions["calm-1"].connected_at < sessions["calm-1"].disconnected_at
        # The probe session of run_bot_swarm came and went too.
        assert "calm-probe" in sessions
        assert "iw4m" in store.load_profiles("calm-1")  # saved when the bot left
    reader = ReplayReader(replay)
    frames = list(reader.frames())
    assert reader.cut is False and reader.end is not None and reader.end["reason"] == "closed"
    assert reader.end["tick"] >= frames[-1].tick and reader.end["frames"] == len(frames)
    summary = summarize(replay)
    assert not summary.truncated and summary.cut_reason is None
