"""SQLite store: round trips, schema versions, crash safety (SIGKILL), and rebuilding after a restart."""

from __future__ import annotations

import math
import os
import signal
import sqlite3
import subprocess
import sys
import textwrap
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from anticheat.detector import Detector
from anticheat.events import Detection, ShotResult
from anticheat.judgement.operator import Operator
from anticheat.judgement.review import AppealStatus, ReviewItem, ReviewStatus
from anticheat.judgement.sanctions import DAY_S, SanctionConfig, SanctionLevel, SanctionPolicy
from anticheat.judgement.store import (
    SCHEMA_VERSION,
    DetectionStore,
    StoreConfig,
    StoreVersionError,
)
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




# --- round trips -------------------------------------------------------------------------


def test_detection_round_trip_and_wal(tmp_path: Path) -> None:
    path = tmp_path / "ac.db"
    with DetectionStore(path, MANUAL) as store:
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
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
    assert conn.execute("PRAGMA user_version").fetchone()[0] == SCHEMA_VERSION
    conn.close()


def test_review_appeal_player_profile_decision_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "ac.db"
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


def test_batching_commits_on_size_and_on_the_timer(tmp_path: Path) -> None:
    mono = Clock(0.0)
    store = DetectionStore(tmp_path / "ac.db", StoreConfig(autoflush=False, max_batch=5, flush_interval_s=1.0), mono)
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


def test_newer_schema_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "ac.db"
    DetectionStore(path, MANUAL).close()
    conn = sqlite3.connect(path)
    conn.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 1}")
    conn.close()
    with pytest.raises(StoreVersionError, match="newer"):
        DetectionStore(path, MANUAL)


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


def _child(mode: str, path: Path) -> subprocess.Popen[str]:
    env = dict(os.environ, PYTHONPATH=str(REPO))
    return subprocess.Popen(
        [sys.executable, "-c", _CHILD, mode, str(path)], stdout=subprocess.PIPE, text=True, env=env, cwd=REPO
    )


def _kill(proc: subprocess.Popen[str]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=10)
    assert proc.returncode == -signal.SIGKILL


def test_everything_flushed_survives_sigkill_mid_write(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
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
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    conn.close()


def test_autoflush_thread_commits_within_a_second_without_explicit_flush(tmp_path: Path) -> None:
    path = tmp_path / "crash.db"
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


def server(path: Path, clock: Clock, config: SanctionConfig | None = None) -> Operator:
    detectors = [Profiled("a"), Profiled("b"), Profiled("c")]
    store = DetectionStore(path, StoreConfig(autoflush=False))
    pipeline = DetectionPipeline(
        detectors, SkipBook(SkipConfig(require_connection=False)), SanctionPolicy(config), store, clock
    )
    return Operator(pipeline)


def test_operator_end_to_end_and_rebuild_after_restart(tmp_path: Path) -> None:
    path = tmp_path / "ac.db"
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
    assert op2.pipeline._next_id == 6  # 3 for alice + 2 for bob, continued

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
    assert op3.profile("alice") == {}
    op3.close()


def test_restart_ignores_evidence_outside_the_window(tmp_path: Path) -> None:
    path = tmp_path / "ac.db"
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


def test_operator_config_can_allow_automatic_bans(tmp_path: Path) -> None:
    clock = Clock()
    op = server(tmp_path / "ac.db", clock, SanctionConfig(auto_apply_max=SanctionLevel.PERMANENT_BAN))
    decisions: list[Any] = []
    op.subscribe_decisions(decisions.append)
    op.connect(1, "dave")
    op.pipeline.feed(shot(shooter=1, victim=2))
    assert decisions[-1].applied == SanctionLevel.TEMP_BAN_REVIEW
    assert op.review_queue()[0].applied == SanctionLevel.TEMP_BAN_REVIEW  # still reviewed and appealable
    op.close()


def test_poll_prunes_expired_evidence_from_memory_only(tmp_path: Path) -> None:
    clock = Clock()
    op = server(tmp_path / "ac.db", clock)
    op.connect(1, "erin")
    op.pipeline.feed(shot(shooter=1, victim=2))
    op.poll()
    assert len(op.policy.evidence("erin")) == 3  # type: ignore[union-attr]
    clock.t += 31 * DAY_S
    op.poll()
    assert op.policy.evidence("erin") == ()  # type: ignore[union-attr]
    assert len(op.store.load_detections("erin")) == 3  # type: ignore[union-attr]
    op.close()


def test_a_corrupt_stored_profile_does_not_block_connect(tmp_path: Path) -> None:
    clock = Clock()
    op = server(tmp_path / "ac.db", clock)
    op.store.save_profile("frank", "a", {"nonsense": True}, NOW)  # type: ignore[union-attr]
    op.connect(1, "frank")  # Profiled.import_profile raises KeyError on it
    assert op.profile("frank")["a"] == {"shots": 0}
    op.close()
