"""Replay files: round trip, crash-truncated tails, and the event codec."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from anticheat.codec import CodecError, decode_event, encode_event
from anticheat.events import (
    AimSample,
    ConnectionSample,
    Detection,
    FireEvidence,
    FireKind,
    KillEvent,
    MovementEvidence,
    MovementKind,
    RewindDecision,
    SessionEvent,
    ShotClaim,
    ShotResult,
    SpawnEvent,
)
from server.recording import MAGIC, ReplayError, ReplayReader, ReplayWriter


def _events() -> list[object]:
    claim = ShotClaim(shooter=1, weapon=2, yaw_deg=10.0, pitch_deg=-2.0, view_time_s=1.25, claimed_victim=3,
                      claimed_hit_point=(1.0, 2.0, 1.5), claimed_bone=2, recoil_pitch_deg=0.5, seq=77)
    shot = ShotResult(shooter=1, tick=80, time_s=1.25, weapon=2, pellet=0, origin=(0.0, 0.0, 1.64),
                      direction=(1.0, 0.0, 0.0), rewind_time_s=1.1, rewind_decision=RewindDecision.CLAIMED,
                      rewind_clamped=False, victim=3, victim_generation=4, bone=2, hit_point=(5.0, 0.0, 1.6),
                      distance_m=5.0, blocked_by_wall=False, victim_pos=(5.1, 0.0, 0.0), victim_speed_m_s=2.0,
                      damage=180.0, claim=claim, bait_hit=True)
    miss_claim = ShotClaim(shooter=1, weapon=2, yaw_deg=10.0, pitch_deg=0.0)
    miss = ShotResult(shooter=1, tick=81, time_s=1.26, weapon=2, pellet=0, origin=(0.0, 0.0, 1.64),
                      direction=(1.0, 0.0, 0.0), rewind_time_s=1.1, rewind_decision=RewindDecision.ESTIMATE,
                      rewind_clamped=True, victim=None, victim_generation=0, bone=0, hit_point=(9.0, 0.0, 1.64),
                      distance_m=9.0, blocked_by_wall=True, victim_pos=None, victim_speed_m_s=0.0, damage=0.0,
                      claim=miss_claim)
    return [
        shot,
        miss,
        KillEvent(1, 3, 80, 1.25, 2, 2, 5.0, 0, True),
        AimSample(1, 80, 1.25, 77, 10.0, -2.0, 0.5, 0.0, 0.5, 0.0, 5, 2, 0, 0, True, 3.2, 3, 1.5, 5.0),
        MovementEvidence(2, 90, 1.4, MovementKind.SPEED, 9.5, 8.9, (1.0, 2.0, 0.0), (0.9, 2.0, 0.0), True),
        FireEvidence(1, 91, 1.42, 1, FireKind.TOO_SOON, 0.1, 0.6),
        ConnectionSample(1, 1.5, 120.0, 8.0, 0.01, 0.02),
        SpawnEvent(3, 100, 1.6),
        SessionEvent(3, 99, 1.59, "connect", "carol"),
        Detection(1, 80, 1.25, "iw4m", "Strain", 1.39, 0.6, "Strain-1.39@136", {"hits": 136}),
    ]


def test_codec_round_trips_every_event_type() -> None:
    for event in _events():
        assert decode_event(encode_event(event)) == event


def test_codec_rejects_unknown_tags_and_junk() -> None:
    with pytest.raises(CodecError):
        decode_event([99, 1, 2])
    with pytest.raises(CodecError):
        decode_event([])
    with pytest.raises(TypeError):
        encode_event("not an event")


def test_replay_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "m.replay"
    events = _events()
    with ReplayWriter(path, {"map": "city", "seed": 7, "labels": {"0": "honest"}}) as writer:
        writer.write_tick(80, 1.25, events[:4])
        writer.write_tick(81, 1.26, [])
        writer.write_tick(90, 1.4, events[4:])
    reader = ReplayReader(path)
    assert reader.header["seed"] == 7 and reader.header["labels"] == {"0": "honest"}
    frames = list(reader.frames())
    assert [f.tick for f in frames] == [80, 90]
    assert list(reader.events()) == events
    assert not reader.truncated


def test_crash_cut_file_reads_up_to_last_complete_frame(tmp_path: Path) -> None:
    path = tmp_path / "m.replay"
    events = _events()
    with ReplayWriter(path, {"seed": 1}) as writer:
        for tick in range(10):
            writer.write_tick(tick, tick / 64, events[:3])
        writer.flush()
        data = path.read_bytes()  # as a crash leaves it: never closed, so no end record
    # Cut in the middle of the last frame, as a crash during a write would.
    path.write_bytes(data[:-7])
    reader = ReplayReader(path)
    frames = list(reader.frames())
    assert [f.tick for f in frames] == list(range(9))
    assert reader.truncated
    # A flipped byte inside a frame ends the stream at that frame, it does not raise.
    corrupt = bytearray(data)
    corrupt[len(data) // 2] ^= 0xFF
    path.write_bytes(bytes(corrupt))
    reader = ReplayReader(path)
    assert len(list(reader.frames())) < 10
    assert reader.truncated


@pytest.mark.parametrize("bad", [
    "not a frame",
    [1, 2.0],  # two items
    [{"t": 1}, 0.5, []],  # a map where the tick goes
    [7, 0.5, 3],  # events not a list
    [7, 0.5, [[{"tag": 1}]]],  # an event tag that is a map (raised TypeError: unhashable)
    [7, 0.5, [[4294967296, 1]]],  # no such tag
    [7, 0.5, [7.5]],  # an event that is not a record
])
def test_a_checksummed_frame_that_is_not_a_frame_ends_the_stream(tmp_path: Path, bad: object) -> None:
    """A writer's bug or a crafted file: the checksum holds, the content is not a tick frame.
    The stream ends there, reported as truncated, with every frame before it read."""
    import zlib

    import msgpack

    path = tmp_path / "m.replay"
    events = _events()
    with ReplayWriter(path, {"seed": 1}) as writer:
        for tick in range(3):
            writer.write_tick(tick, tick / 64, events[:2])
    payload = msgpack.packb(bad, use_bin_type=True)
    with path.open("ab") as f:
        f.write(struct.pack("<II", len(payload), zlib.crc32(payload)) + payload)
    reader = ReplayReader(path)
    assert [f.tick for f in reader.frames()] == [0, 1, 2]
    assert reader.truncated


def test_writer_flushes_at_least_every_second_of_server_time(tmp_path: Path) -> None:
    path = tmp_path / "m.replay"
    writer = ReplayWriter(path, {"seed": 1}, flush_interval_s=1.0)
    size_after_header = path.stat().st_size
    for tick in range(64):
        writer.write_tick(tick, tick / 64, _events()[:1])
    assert path.stat().st_size == size_after_header  # still buffered: less than 1 s elapsed
    writer.write_tick(64, 1.0, _events()[:1])
    assert path.stat().st_size > size_after_header
    assert len(list(ReplayReader(path).frames())) == 65
    writer.close()


def test_not_a_replay(tmp_path: Path) -> None:
    path = tmp_path / "x.replay"
    path.write_bytes(b"hello world, definitely not a replay")
    with pytest.raises(ReplayError):
        ReplayReader(path)
    path.write_bytes(MAGIC)
    with pytest.raises(ReplayError):
        ReplayReader(path)


def test_a_header_whose_entries_are_not_what_a_match_writes_is_read_without_them(tmp_path: Path) -> None:
    """``referee replay`` reads labels and tolerances from the header: entries of another type
    (a crafted file) leave the profiles unknown and the tolerances at their defaults."""
    from testbed.replay_summary import detect, summarize

    path = tmp_path / "m.replay"
    with ReplayWriter(path, {"seed": 1, "labels": 5, "tolerances": [1, 2]}) as writer:
        writer.write_tick(1, 1 / 64, _events()[:2])
    assert summarize(path).frames == 1
    assert detect(path).events_fed == 2
