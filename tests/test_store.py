"""The detection store on both backends (SQLite and a real PostgreSQL server): round trips,
sessions, schema versions and migration, crash safety (SIGKILL), and rebuilding after a restart."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anticheat.detector import Detector
from anticheat.events import Detection, SessionEvent, ShotResult
from anticheat.judgement.operator import Operator
from anticheat.judgement.review import AppealStatus, ReviewItem, ReviewStatus
from anticheat.judgement.sanctions import (
    DAY_S,
    SanctionConfig,
    SanctionLevel,
    SanctionPolicy,
)
from anticheat.judgement.store import (
    SCHEMA_VERSION,
    DetectionStore,
    StoreConfig,
    StoreVersionError,
    open_store,
)
from anticheat.judgement.store.schema import migration, upsert
from anticheat.judgement.store.url import make_backend
from anticheat.pipeline import DetectionPipeline
from anticheat.skip import SkipBook, SkipConfig
from tests.synthetic import make_shot as shot

REPO = Path(__file__).resolve().parents[1]
NOW = 1_700_000_000.0
MANUAL = StoreConfig(autoflush=False)


def det(i: int, detector: str = "bustaim", player: int = 1, severity: float = 0.5) -> Detection:
    return Detection(player, i, i / 64, detector, "random_aim", 3.5 + i, severity, f"RandomAim-{i}", {"n": i, "w": "x"})


class Clock:
    def __init__(self, t: float = NOW) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@pytest.fixture(params=["sqlite", "postgres"])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """Where a test's store lives: a SQLite file, or a fresh database on a real PostgreSQL server."""
    if request.param == "sqlite":
        return str(tmp_path / "ac.db")
    return str(request.getfixturevalue("postgres_url"))


# --- round trips -------------------------------------------------------------------------


def test_detection_round_trip(target: str) -> None:
    with DetectionStore(target, MANUAL) as store:
        store.add_detection(1, "alice", det(1), NOW)
        weird = Detection(2, 9, 0.1, "iw4m", "Strain", math.nan, 0.9, "Strain-nan@5", {"inf": math.inf})
        odd = Detection(3, 9, 0.1, "x", "y", 1.0, 0.1, "", {"np": np.float32(1.5), "obj": object()})  # type: ignore[dict-item]
        store.add_detection(3, "bob", odd, NOW + 2)
        store.add_detection(2, "bob", weird, NOW + 1)
        assert store.pending == 3
        rows = store.load_detections()
        assert store.pending == 0  # reads flush first
        assert rows[0].detection == det(1) and rows[0].player_key == "alice" and rows[0].recorded_at == NOW
        assert math.isnan(rows[1].detection.value) and rows[1].detection.evidence == {"inf": math.inf}
        assert rows[2].detection.evidence["np"] == 1.5 and isinstance(rows[2].detection.evidence["obj"], str)
        assert store.load_detections("bob", since=NOW + 0.5)[0].id == 2
        assert store.max_detection_id() == 3
        store.mark_dismissed([1])
        evidence = store.load_evidence()
        assert [(e.id, e.player, e.dismissed) for e in evidence][:2] == [(1, "alice", True), (2, "bob", False)]
        assert store.schema_version == SCHEMA_VERSION


def test_sqlite_runs_in_wal_mode_and_opens_by_url(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "ac.db"  # a missing directory is created
    with open_store(f"sqlite:///{path}", MANUAL) as store:
        store.upsert_player("alice", NOW)
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()
    with open_store(path, MANUAL) as store:
        assert store.load_players() == {"alice": None}
    with pytest.raises(ValueError, match="scheme"):
        open_store("mysql://x/y")


def test_review_appeal_player_profile_decision_round_trips(target: str) -> None:
    path = target
    item = ReviewItem(
        3,
        "alice",
        NOW,
        SanctionLevel.TEMP_BAN_REVIEW,
        0.84,
        SanctionLevel.MONITOR,
        ("bustaim=0.6", "iw4m=0.6"),
        (1, 2),
        ReviewStatus.CONFIRMED,
        "admin",
        "clear",
        NOW + 5,
        SanctionLevel.TEMP_BAN_REVIEW,
        NOW + 5 + DAY_S,
    )
    policy = SanctionPolicy()
    with DetectionStore(path, MANUAL) as store:
        store.save_review_item(item)
        store.upsert_player("alice", NOW, account_created=NOW - 3 * DAY_S)
        store.upsert_player("alice", NOW + 10)  # a later visit without the creation time keeps it
        store.upsert_player("bob", NOW)
        store.save_profile("alice", "bustaim", {"shots": 10, "per_weapon": {"1": [3, 4]}}, NOW)
        store.save_profile("alice", "iw4m", {"hits": 5}, NOW)
        store.add_decision(policy.evaluate("alice", NOW))
    with DetectionStore(path, MANUAL) as store:
        assert store.load_review_items() == [item]
        assert store.load_players() == {"alice": NOW - 3 * DAY_S, "bob": None}
        assert store.load_profile("alice", "bustaim") == {"shots": 10, "per_weapon": {"1": [3, 4]}}
        assert set(store.load_profiles("alice")) == {"bustaim", "iw4m"}
        store.delete_profiles("alice", "iw4m")
        assert set(store.load_profiles("alice")) == {"bustaim"}
        store.delete_profiles("alice")
        assert store.load_profiles("alice") == {} and store.load_profile("alice", "bustaim") is None
        decisions = store.load_decisions("alice")
        assert len(decisions) == 1 and decisions[0].recommended == SanctionLevel.LOG


def test_batching_commits_on_size_and_on_the_timer(target: str) -> None:
    mono = Clock(0.0)
    store = DetectionStore(target, StoreConfig(autoflush=False, max_batch=5, flush_interval_s=1.0), mono)
    for i in range(1, 5):
        store.add_detection(i, "p", det(i), NOW)
    assert store.pending == 4
    store.add_detection(5, "p", det(5), NOW)
    assert store.pending == 0  # the batch filled
    store.add_detection(6, "p", det(6), NOW)
    assert store.poll() == 0 and store.pending == 1
    mono.t = 1.2
    assert store.poll() == 1 and store.pending == 0
    mono.t = 3.0
    store.add_detection(7, "p", det(7), NOW)  # a write after the interval commits at once
    assert store.pending == 0
    store.close()
    with pytest.raises(RuntimeError, match="closed"):
        store.add_detection(8, "p", det(8), NOW)


def _set_version(target: str, version: int) -> None:
    if target.startswith("postgresql://"):
        import psycopg

        with psycopg.connect(target, autocommit=True) as conn:
            conn.execute("UPDATE referee_schema SET version = %s", (version,))
    else:
        conn = sqlite3.connect(target)
        conn.execute(f"PRAGMA user_version = {version}")
        conn.close()


def test_newer_schema_is_refused(target: str) -> None:
    DetectionStore(target, MANUAL).close()
    _set_version(target, SCHEMA_VERSION + 1)
    with pytest.raises(StoreVersionError, match="newer"):
        DetectionStore(target, MANUAL)


def test_a_version_1_database_is_migrated_keeping_its_rows(target: str) -> None:
    # A database as the first schema left it: no sessions table.
    backend = make_backend(target)
    assert backend.migrate(1, migration(1, backend.dialect))
    assert not backend.migrate(1, migration(1, backend.dialect))  # already there: nothing done
    backend.write([(upsert("profiles"), [("alice", "iw4m", '{"hits": 3}', NOW)])])
    with pytest.raises(backend.errors):
        backend.query("SELECT COUNT(*) FROM sessions")
    backend.close()
    with DetectionStore(target, MANUAL) as store:
        assert store.schema_version == SCHEMA_VERSION == 3
        assert store.load_profiles("alice") == {"iw4m": {"hits": 3}}
        store.open_session("s1", "alice", "alice", 3, "127.0.0.1:5000", "run-1", NOW)
        assert [s.id for s in store.load_sessions()] == ["s1"]


def test_sessions_round_trip(target: str) -> None:
    with DetectionStore(target, MANUAL) as store:
        store.open_session("a1", "alice", "alice", 0, "10.0.0.1:27015", "run-1", NOW)
        store.open_session("b1", "bob", "bob", 1, "10.0.0.2:27015", "run-1", NOW + 1)
        store.close_session("a1", NOW + 60, "timeout")
        store.open_session("a2", "alice", "alice", 4, "10.0.0.1:27016", "run-2", NOW + 100)
    with DetectionStore(target, MANUAL) as store:
        alice = store.load_sessions("alice")
        assert [(s.id, s.slot, s.server_id, s.disconnected_at, s.reason) for s in alice] == [
            ("a1", 0, "run-1", NOW + 60, "timeout"),
            ("a2", 4, "run-2", None, None),  # still open (or the server died without closing it)
        ]
        assert alice[0].address == "10.0.0.1:27015" and alice[0].connected_at == NOW
        assert [s.player_key for s in store.load_sessions(server_id="run-1")] == ["alice", "bob"]


def test_two_servers_share_lifetime_profiles_and_players(target: str) -> None:
    first = DetectionStore(target, MANUAL)
    second = DetectionStore(target, MANUAL)  # another server of the fleet, its own connection
    first.save_profile("alice", "iw4m", {"hits": 7}, NOW)
    first.upsert_player("alice", NOW, account_created=NOW - DAY_S)
    first.flush()
    assert second.load_profiles("alice") == {"iw4m": {"hits": 7}}
    assert second.load_account_created("alice") == NOW - DAY_S
    assert second.load_account_created("nobody") is None
    second.save_profile("alice", "iw4m", {"hits": 9}, NOW + 5)
    second.close()
    assert first.load_profile("alice", "iw4m") == {"hits": 9}
    first.close()


# --- ids shared by the servers of a fleet -------------------------------------------------


def test_two_stores_on_one_database_reserve_blocks_that_never_overlap(target: str) -> None:
    first = DetectionStore(target, MANUAL)
    second = DetectionStore(target, MANUAL)  # another server of the fleet, its own connection
    blocks: list[range] = []
    for size in range(1, 7):
        blocks.append(first.reserve_ids("detection", 10 + size))
        blocks.append(second.reserve_ids("detection", size))
    # Interleaved and back to back: together the blocks hold every id from 1 exactly once.
    ids = [i for block in blocks for i in block]
    assert ids == list(range(1, len(ids) + 1))
    # Each space counts on its own.
    assert second.reserve_ids("review", 16) == range(1, 17)
    assert first.reserve_ids("review", 16) == range(17, 33)
    assert first.reserve_ids("appeal", 1) == range(1, 2)
    with pytest.raises(ValueError, match="id space"):
        first.reserve_ids("sessions", 1)
    first.close()
    second.close()
    with pytest.raises(RuntimeError, match="closed"):
        first.reserve_ids("detection", 1)
    with DetectionStore(target, MANUAL) as again:  # the counters are in the database
        assert again.reserve_ids("detection", 1) == range(len(ids) + 1, len(ids) + 2)


def test_concurrent_reservations_while_flush_threads_commit(target: str) -> None:
    # Two servers, each with its flush thread committing every few ms on the connection that also
    # reserves ids, take ids and write detections at the same time.
    stores = [DetectionStore(target, StoreConfig(flush_interval_s=0.01)) for _ in range(2)]

    def run(k: int) -> list[int]:
        store, ids, taken = stores[k], stores[k].ids("detection", 8), []
        for n in range(200):
            evidence_id = ids.take()
            store.add_detection(evidence_id, f"server{k}", det(n + 1), NOW)
            taken.append(evidence_id)
        return taken

    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(run, k) for k in (0, 1)]
        taken = [f.result(timeout=120) for f in futures]  # re-raises a thread's exception
    for store in stores:
        store.close()
    assert len(set(taken[0])) == len(set(taken[1])) == 200 and set(taken[0]).isdisjoint(taken[1])
    with DetectionStore(target, MANUAL) as store:
        owner = {d.id: d.player_key for d in store.load_detections()}
    assert owner == {i: f"server{k}" for k in (0, 1) for i in taken[k]}


def test_two_servers_on_one_database_keep_every_row(target: str) -> None:
    clock = Clock()
    east, west = server(target, clock), server(target, clock)  # running at once on one database
    east.connect(1, "alice")
    west.connect(1, "bob")
    for _ in range(100):  # 300 detections each: both cross block boundaries, interleaved
        east.pipeline.feed(shot(shooter=1, victim=2))
        west.pipeline.feed(shot(shooter=1, victim=2))
    (alice_item,) = east.review_queue()
    (bob_item,) = west.review_queue()
    alice_appeal = east.file_appeal("alice", alice_item.id, "my mouse")
    bob_appeal = west.file_appeal("bob", bob_item.id, "lag")
    east.close()
    west.close()
    with DetectionStore(target, MANUAL) as store:
        rows = store.load_detections()
        assert len({r.id for r in rows}) == len(rows) == 600
        assert Counter(r.player_key for r in rows) == {"alice": 300, "bob": 300}
        assert {i.id: i.player for i in store.load_review_items()} == {alice_item.id: "alice", bob_item.id: "bob"}
        assert {a.id: a.player for a in store.load_appeals()} == {alice_appeal.id: "alice", bob_appeal.id: "bob"}
        assert store.load_review_items()[0].evidence_ids  # the review counted evidence...
        stored = {r.id for r in rows}
        assert all(set(i.evidence_ids) <= stored for i in store.load_review_items())  # ...all of it stored


def test_migration_to_version_3_starts_the_id_counters_past_stored_ids(target: str) -> None:
    # A database as schema version 2 left it, with rows: ids were then counted from the largest.
    backend = make_backend(target)
    for version in (1, 2):
        assert backend.migrate(version, migration(version, backend.dialect))
    kick = int(SanctionLevel.KICK)
    backend.write(
        [
            (upsert("detections"), [(i, "alice", 1, i, 0.0, "a", "hit", 1.0, 0.9, "a-hit", "{}", NOW, 0) for i in (5, 9)]),
            (upsert("review_items"), [(4, "alice", NOW, kick, 0.6, 1, "[]", "[5, 9]", "pending", "", "", None, None, None)]),
            (upsert("appeals"), [(2, "alice", 4, NOW, "not me", "pending", "", "", None)]),
        ]
    )
    backend.close()
    op = server(target, Clock())  # migrates, then restores alice's evidence, item and appeal
    assert op.store is not None and op.store.schema_version == SCHEMA_VERSION == 3
    assert [i.id for i in op.review.items()] == [4] and [a.id for a in op.appeals()] == [2]
    op.connect(1, "bob")
    op.pipeline.feed(shot(shooter=1, victim=2))
    (bob_item,) = [i for i in op.review_queue() if i.player == "bob"]
    bob_appeal = op.file_appeal("bob", bob_item.id, "lag")
    op.close()
    with DetectionStore(target, MANUAL) as store:
        assert [(d.id, d.player_key) for d in store.load_detections()] == [
            (5, "alice"), (9, "alice"), (10, "bob"), (11, "bob"), (12, "bob")
        ]
        assert [(i.id, i.player) for i in store.load_review_items()] == [(4, "alice"), (bob_item.id, "bob")]
        assert bob_item.id == 5
        assert [(a.id, a.player) for a in store.load_appeals()] == [(2, "alice"), (bob_appeal.id, "bob")]
        assert bob_appeal.id == 3


# --- crash safety ------------------------------------------------------------------------

_CHILD = textwrap.dedent(
    """
    import sys, time
    from anticheat.events import Detection
    from anticheat.judgement.store import DetectionStore, StoreConfig
    mode, path = sys.argv[1], sys.argv[2]
    def det(i):
        return Detection(1, i, i / 64, "bustaim", "random_aim", float(i), 0.5, f"R-{i}", {"i": i})
    if mode == "explicit":
        store = DetectionStore(path, StoreConfig(autoflush=False, max_batch=10**9, flush_interval_s=3600.0))
        i = 0
        while True:
            for _ in range(100):
                i += 1
                store.add_detection(i, "p", det(i), 1000.0 + i)
            store.flush()
            print(i, flush=True)
    else:
        store = DetectionStore(path, StoreConfig(autoflush=True, max_batch=10**9, flush_interval_s=0.5))
        for i in range(1, 51):
            store.add_detection(i, "p", det(i), 1000.0 + i)
        print("added", flush=True)
        time.sleep(60)
    """
)


def _child(mode: str, path: str) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, mode, str(path)], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO
    )


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def test_everything_flushed_survives_sigkill_mid_write(target: str) -> None:
    path = target
    proc = _child("explicit", path)
    committed = 0
    deadline = time.monotonic() + 15.0
    try:
        assert proc.stdout is not None
        # Kill while the child is busy writing: it flushes every 100 rows and never stops.
        while committed < 3000 and time.monotonic() < deadline:
            line = proc.stdout.readline()
            if not line:
                break
            committed = int(line)
    finally:
        _kill(proc)
    assert committed >= 3000
    with DetectionStore(path, MANUAL) as store:
        ids = [s.id for s in store.load_detections()]
        assert ids[:committed] == list(range(1, committed + 1))
        assert len(ids) % 100 == 0  # whole transactions only: the one in flight is all or nothing
        assert store.load_detections()[committed - 1].detection.evidence == {"i": committed}
    if not path.startswith("postgresql://"):
        conn = sqlite3.connect(path)
        assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
        conn.close()


def test_autoflush_thread_commits_within_a_second_without_explicit_flush(target: str) -> None:
    path = target
    proc = _child("timer", path)
    try:
        assert proc.stdout is not None
        assert proc.stdout.readline().strip() == "added"
        time.sleep(1.0)  # interval 0.5 s: the thread wakes every 0.25 s
    finally:
        _kill(proc)
    with DetectionStore(path, MANUAL) as store:
        assert [s.id for s in store.load_detections()] == list(range(1, 51))


# --- the operator facade and restart -----------------------------------------------------


class Profiled(Detector):
    """Reports every hit and keeps a lifetime profile (shots per slot)."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.shots: dict[int, int] = {}

    def on_shot(self, shot: ShotResult, skip: SkipBook) -> Sequence[Detection]:
        self.shots[shot.shooter] = self.shots.get(shot.shooter, 0) + 1
        if shot.victim is None:
            return ()
        return (Detection(shot.shooter, shot.tick, shot.time_s, self.name, "hit", 1.0, 0.9, f"{self.name}-hit"),)

    def reset_player(self, player: int) -> None:
        self.shots.pop(player, None)

    def export_profile(self, player: int) -> dict[str, Any]:
        return {"shots": self.shots.get(player, 0)}

    def import_profile(self, player: int, profile: dict[str, Any]) -> None:
        self.shots[player] = int(profile["shots"])


def server(path: str, clock: Clock, config: SanctionConfig | None = None, follow_sessions: bool = False) -> Operator:
    detectors = [Profiled("a"), Profiled("b"), Profiled("c")]
    store = DetectionStore(path, StoreConfig(autoflush=False))
    pipeline = DetectionPipeline(
        detectors, SkipBook(SkipConfig(require_connection=False)), SanctionPolicy(config), store, clock
    )
    return Operator(pipeline, follow_sessions=follow_sessions)


def test_operator_end_to_end_and_rebuild_after_restart(target: str) -> None:
    path = target
    clock = Clock()
    op = server(path, clock)
    op.connect(1, "alice", account_created=NOW - 100 * DAY_S)
    op.connect(2, "bob")
    only_a: list[Detection] = []
    alice: list[Detection] = []
    op.subscribe(only_a.append, detector="a")
    op.subscribe(alice.append, player="alice")
    opened: list[ReviewItem] = []
    op.subscribe_reviews(opened.append)
    op.set_flags("bob", "c", False)

    op.pipeline.feed(shot(shooter=1, victim=2))
    op.pipeline.feed(shot(shooter=2, victim=1))
    assert [d.player for d in only_a] == [1, 2]
    assert {d.detector for d in alice} == {"a", "b", "c"} and all(d.player == 1 for d in alice)
    # Alice: three detectors at 0.9 -> temp ban recommended, only monitoring applied, queued for review.
    queue = op.review_queue()
    assert [i.player for i in queue] == ["alice", "bob"]
    assert queue[0].recommended == SanctionLevel.TEMP_BAN_REVIEW and queue[0].applied == SanctionLevel.MONITOR
    assert opened == list(queue)
    decision = op.decision("alice")
    assert decision is not None and decision.applied == SanctionLevel.MONITOR and decision.needs_review

    confirmed = op.confirm(queue[0].id, "admin", "spectated: locks onto heads")
    appeal = op.file_appeal("alice", confirmed.id, "it was my mouse")
    op.dismiss(queue[1].id, "admin", "bob was lagging")
    assert op.decision("bob").score == 0.0  # type: ignore[union-attr]
    assert op.profile("alice") == {"a": {"shots": 1}, "b": {"shots": 1}, "c": {"shots": 1}}
    assert op.profile("bob")["c"] == {"shots": 0}  # c disabled for bob: it never saw his shot
    op.disconnect(1)
    clock.t += 3600
    op.close()

    # Restart: nothing lost.
    op2 = server(path, clock)
    assert op2.review.items() == op.review.items()
    assert op2.appeals() == (appeal,)
    assert op2.decision("alice") == op.policy.evaluate("alice", clock.t)  # type: ignore[union-attr]
    assert op2.decision("bob").score == 0.0  # type: ignore[union-attr]  # the dismissal persisted
    assert op2.policy.account_created("alice") == NOW - 100 * DAY_S  # type: ignore[union-attr]
    assert op2.profile("alice") == {"a": {"shots": 1}, "b": {"shots": 1}, "c": {"shots": 1}}
    op2.connect(5, "alice")  # a different slot: the profile follows the key
    op2.pipeline.feed(shot(shooter=5, victim=None))
    assert op2.profile("alice")["a"] == {"shots": 2}
    assert [d.id for d in op2.store.load_detections()] == [1, 2, 3, 4, 5]  # type: ignore[union-attr]  # 3 alice + 2 bob

    granted = op2.decide_appeal(appeal.id, "senior", True, "mouse firmware macro, not aimbot")
    assert granted.status == AppealStatus.GRANTED
    assert op2.review.get(confirmed.id).status == ReviewStatus.OVERTURNED
    assert op2.decision("alice").score == 0.0  # type: ignore[union-attr]
    op2.reset_profile("alice")
    assert op2.profile("alice")["a"] == {"shots": 0}
    op2.close()
    op3 = server(path, clock)
    assert op3.decision("alice").score == 0.0  # type: ignore[union-attr]
    assert op3.review.get(confirmed.id).status == ReviewStatus.OVERTURNED
    # Alice is still connected when op2 closes: her live (reset) profiles are what is saved.
    assert op3.profile("alice") == {"a": {"shots": 0}, "b": {"shots": 0}, "c": {"shots": 0}}
    op3.close()


def test_operator_following_sessions_carries_profiles_across_slots_and_restarts(target: str) -> None:
    clock = Clock()
    op = server(target, clock, follow_sessions=True)
    op.pipeline.feed(SessionEvent(player=2, tick=1, time_s=0.0, kind="connect", name="alice"))
    op.pipeline.feed_many([shot(shooter=2, victim=None), shot(shooter=2, victim=None)])
    # Leaving saves her profiles before the slot is reset; the next player of slot 2 starts fresh.
    op.pipeline.feed(SessionEvent(player=2, tick=5, time_s=1.0, kind="disconnect", name="alice"))
    op.pipeline.feed(SessionEvent(player=2, tick=6, time_s=1.0, kind="connect", name="bob"))
    assert op.profile("bob")["a"] == {"shots": 0}
    op.pipeline.feed(shot(shooter=2, victim=None))
    op.close()  # bob is still connected: close saves his profile too
    op2 = server(target, clock, follow_sessions=True)
    assert op2.store.load_profiles("bob")["a"] == {"shots": 1}  # type: ignore[union-attr]
    # Alice comes back in another slot: the connect resets the slot, then loads her profile.
    op2.pipeline.feed(SessionEvent(player=7, tick=1, time_s=0.0, kind="connect", name="alice"))
    op2.pipeline.feed(shot(shooter=7, victim=None))
    assert op2.profile("alice")["a"] == {"shots": 3}
    op2.close()


def test_restart_ignores_evidence_outside_the_window(target: str) -> None:
    path = target
    clock = Clock()
    op = server(path, clock)
    op.connect(1, "carol")
    op.pipeline.feed(shot(shooter=1, victim=2))
    op.close()
    clock.t += 31 * DAY_S
    op2 = server(path, clock)
    assert op2.policy.evidence("carol") == ()  # type: ignore[union-attr]
    assert len(op2.store.load_detections("carol")) == 3  # type: ignore[union-attr]  # history kept
    op2.close()


def test_operator_config_can_allow_automatic_bans(target: str) -> None:
    clock = Clock()
    op = server(target, clock, SanctionConfig(auto_apply_max=SanctionLevel.PERMANENT_BAN))
    decisions: list[Any] = []
    op.subscribe_decisions(decisions.append)
    op.connect(1, "dave")
    op.pipeline.feed(shot(shooter=1, victim=2))
    assert decisions[-1].applied == SanctionLevel.TEMP_BAN_REVIEW
    assert op.review_queue()[0].applied == SanctionLevel.TEMP_BAN_REVIEW  # still reviewed and appealable
    op.close()


def test_poll_prunes_expired_evidence_from_memory_only(target: str) -> None:
    clock = Clock()
    op = server(target, clock)
    op.connect(1, "erin")
    op.pipeline.feed(shot(shooter=1, victim=2))
    op.poll()
    assert len(op.policy.evidence("erin")) == 3  # type: ignore[union-attr]
    clock.t += 31 * DAY_S
    op.poll()
    assert op.policy.evidence("erin") == ()  # type: ignore[union-attr]
    assert len(op.store.load_detections("erin")) == 3  # type: ignore[union-attr]
    op.close()


def test_a_corrupt_stored_profile_does_not_block_connect(target: str) -> None:
    clock = Clock()
    op = server(target, clock)
    op.store.save_profile("frank", "a", {"nonsense": True}, NOW)  # type: ignore[union-attr]
    op.connect(1, "frank")  # Profiled.import_profile raises KeyError on it
    assert op.profile("frank")["a"] == {"shots": 0}
    op.close()
