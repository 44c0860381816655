"""The server's activity log: one line per event, a flood of detections cut down, JSON lines."""

from __future__ import annotations

import io
import json
import logging
import sys

import pytest

from anticheat.events import Detection
from anticheat.judgement.sanctions import SanctionDecision, SanctionLevel
from server.activity_log import ActivityLog
from server.events import EventBus, PlayerConnected, PlayerDisconnected
from testbed.logsetup import JsonFormatter


def detection(slot: int, t: float, kind: str = "timer") -> Detection:
    return Detection(player=slot, tick=int(t * 64), time_s=t, detector="movement", kind=kind, value=125.0,
                     severity=0.5, reason=f"Movement-{kind}-125.00/120.00x3")


def decision(player: str, level: SanctionLevel) -> SanctionDecision:
    return SanctionDecision(player=player, at=0.0, recommended=level, applied=min(level, SanctionLevel.MONITOR),
                            score=0.4, raw_score=0.4, account_factor=1.0, needs_review=level >= SanctionLevel.KICK,
                            reasons=("movement=0.400 (3 detections)",))


@pytest.fixture
def records() -> list[logging.LogRecord]:
    """What a private logger at INFO receives (no global logging configuration touched)."""
    caught: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            caught.append(record)

    logger = logging.getLogger("test.activity_log")
    logger.setLevel(logging.INFO)
    logger.propagate = False
    handler = Keep()
    logger.addHandler(handler)
    yield caught
    logger.removeHandler(handler)


def test_a_detection_flood_is_cut_to_a_few_lines_per_player_and_summed_up(records: list[logging.LogRecord]) -> None:
    bus = EventBus()
    activity = ActivityLog(bus, max_per_window=3, window_s=1.0, logger=logging.getLogger("test.activity_log"))
    bus.publish(PlayerConnected(slot=4, name="cheater", address="127.0.0.1:5000", time_s=0.0))
    bus.publish(PlayerConnected(slot=5, name="other", address="127.0.0.1:5001", time_s=0.0))
    for i in range(20):  # 20 detections in 0.5 s: 3 lines, 17 held back
        bus.publish(detection(4, 1.0 + i * 0.025, kind="timer" if i % 2 else "speed"))
    bus.publish(detection(5, 1.2))  # another player has a window of its own
    lines = [r for r in records if r.event == "detection"]  # type: ignore[attr-defined]
    assert [(r.player, r.slot) for r in lines] == [("cheater", 4)] * 3 + [("other", 5)]  # type: ignore[attr-defined]
    assert not [r for r in records if r.event == "detections_suppressed"]  # type: ignore[attr-defined]
    bus.publish(detection(4, 2.5))  # the next window opens: the held-back count first, then the line
    summary, line = records[-2:]
    assert summary.event == "detections_suppressed" and summary.count == 17  # type: ignore[attr-defined]
    assert summary.checks == {"movement:timer": 9, "movement:speed": 8}  # type: ignore[attr-defined]
    assert "17 more detections not logged" in summary.getMessage()
    assert line.event == "detection" and line.server_time_s == 2.5  # type: ignore[attr-defined]
    for i in range(5):
        bus.publish(detection(4, 2.6 + i * 0.01))
    bus.publish(PlayerDisconnected(slot=4, name="cheater", reason="kicked", time_s=2.7))
    summary, gone = records[-2:]
    assert summary.event == "detections_suppressed" and summary.count == 3  # type: ignore[attr-defined]
    assert gone.event == "disconnect" and gone.reason == "kicked"  # type: ignore[attr-defined]
    # A detection the detectors deliver after the player left still names the player.
    bus.publish(detection(4, 3.0))
    assert records[-1].player == "cheater"  # type: ignore[attr-defined]
    activity.close()
    bus.publish(detection(4, 9.0))
    assert records[-1].server_time_s == 3.0  # type: ignore[attr-defined]  # closed: no longer listening


def test_sanction_lines_only_when_the_recommended_level_changes(records: list[logging.LogRecord]) -> None:
    activity = ActivityLog(EventBus(), logger=logging.getLogger("test.activity_log"))
    for level in (SanctionLevel.LOG, SanctionLevel.MONITOR, SanctionLevel.MONITOR, SanctionLevel.KICK):
        activity._decision(decision("cheater", level))
    assert [(r.previous, r.level, r.needs_review) for r in records] == [  # type: ignore[attr-defined]
        ("log", "monitor", False), ("monitor", "kick", True)]
    assert records[-1].getMessage().startswith("sanction: cheater monitor -> kick (score 0.400, applied monitor")


def test_json_lines_hold_time_level_logger_message_and_the_fields(records: list[logging.LogRecord]) -> None:
    bus = EventBus()
    ActivityLog(bus, logger=logging.getLogger("test.activity_log"))
    bus.publish(PlayerConnected(slot=2, name='quote " name', address="127.0.0.1:5000", time_s=1.5))
    bus.publish(detection(2, 2.0))
    try:
        raise ValueError("boom")
    except ValueError:
        records.append(logging.LogRecord("x", logging.ERROR, __file__, 1, "failed %s", ("here",), sys.exc_info()))
    # What a library's record factory adds (Ray's, once imported) is not a field.
    records[0]._ray_timestamp_ns = 1  # type: ignore[attr-defined]
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    for r in records:
        handler.emit(r)
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    docs = [json.loads(line) for line in lines]
    connect, found, failed = docs
    assert set(connect) == {"time", "level", "logger", "message", "event", "player", "slot", "address", "server_time_s"}
    assert connect["time"].endswith("+00:00") and connect["level"] == "INFO" and connect["logger"] == "test.activity_log"
    assert connect["player"] == 'quote " name' and connect["slot"] == 2 and connect["server_time_s"] == 1.5
    assert found["check"] == "movement:timer" and found["value"] == 125.0 and found["reason"].startswith("Movement-")
    assert failed["message"] == "failed here" and "ValueError: boom" in failed["exc_info"]
