"""Replay files: a header and a framed stream of the events the detectors consume.

Layout (all integers little-endian)::

    magic  b"REFEREE\\x00REPLAY\\x01\\x00\\x00"      16 bytes, the last byte pair reserved
    frame  u32 length | u32 crc32(payload) | payload (msgpack)
    ...

The first frame's payload is the header map (format version, config, map, seed, ground-truth
labels). Every later frame is ``[tick, time_s, [event, ...]]`` with events encoded by
:mod:`anticheat.codec`, and from format version 2 the last one is the end record
``{"end": {"tick", "time_s", "reason", "frames", "events"}}``, written by :meth:`ReplayWriter.close`.
A file cut off by a crash reads back up to its last complete frame: a short or corrupt tail frame
ends the stream and is reported, never raised; a version 2 file without its end record is *cut*
(the server stopped without closing it), even when every frame in it is whole. Version 1 files
(no end record) stay readable; whether they were cut cannot be told.
"""

from __future__ import annotations

import logging
import struct
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import msgpack

from anticheat.codec import CodecError, decode_event, encode_event

log = logging.getLogger(__name__)

MAGIC = b"REFEREE\x00REPLAY\x01\x00\x00"
FORMAT_VERSION = 2
"""Written by this code. 2 added the end record; 1 is still read."""
READABLE_VERSIONS = (1, 2)
_FRAME = struct.Struct("<II")
MAX_FRAME_BYTES = 64 * 1024 * 1024
"""A frame longer than this is treated as corruption (no tick holds 64 MiB of events)."""


class ReplayError(ValueError):
    """The file is not a replay, or its header is unreadable."""


class ReplayWriter:
    """Writes a replay: header first, then one frame per tick with events.

    Frames are buffered in memory and written to the file at least every ``flush_interval_s`` of
    server time (and on :meth:`flush` / :meth:`close`), so a crash loses at most that much.
    """

    def __init__(self, path: str | Path, header: dict[str, Any], flush_interval_s: float = 1.0) -> None:
        self.path = Path(path)
        self._file: IO[bytes] = open(self.path, "wb")  # noqa: SIM115 - closed by close()
        self._file.write(MAGIC)
        self._packer = msgpack.Packer(use_bin_type=True)
        self._buffer = bytearray()
        self._flush_interval_s = flush_interval_s
        self._last_flush_s: float | None = None
        self.frames = 0
        self.events = 0
        self._last_tick = 0
        self._last_time_s = 0.0
        self._write_frame(dict(header, format_version=FORMAT_VERSION))
        self.flush()

    def _write_frame(self, obj: Any) -> None:
        payload = self._packer.pack(obj)
        self._buffer += _FRAME.pack(len(payload), zlib.crc32(payload))
        self._buffer += payload

    def write_tick(self, tick: int, time_s: float, events: Sequence[Any]) -> None:
        """Append the events of one tick (skipped when there are none). ``time_s`` is server time (s)."""
        self._last_tick = tick
        self._last_time_s = time_s
        if events:
            self._write_frame([tick, time_s, [encode_event(e) for e in events]])
            self.frames += 1
            self.events += len(events)
        if self._last_flush_s is None:
            self._last_flush_s = time_s
        elif time_s - self._last_flush_s >= self._flush_interval_s:
            self.flush()
            self._last_flush_s = time_s

    def flush(self) -> None:
        """Write buffered frames to the operating system."""
        if self._buffer:
            self._file.write(self._buffer)
            self._buffer.clear()
        self._file.flush()

    def close(self, reason: str = "closed") -> None:
        """Write the end record (the last tick and server time seen, ``reason``), flush and close."""
        if not self._file.closed:
            end = {"tick": self._last_tick, "time_s": self._last_time_s, "reason": reason,
                   "frames": self.frames, "events": self.events}
            self._write_frame({"end": end})
            self.flush()
            self._file.close()

    def __enter__(self) -> ReplayWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclass(frozen=True, slots=True)
class ReplayFrame:
    """The events of one tick."""

    tick: int
    time_s: float
    events: tuple[Any, ...]


def _frame(payload: Any) -> ReplayFrame:
    """The tick frame a decoded payload holds; CodecError when it is not one."""
    if not (isinstance(payload, list) and len(payload) == 3):
        raise CodecError("a tick frame is [tick, time_s, events]")
    tick, time_s, records = payload
    if type(tick) is not int or type(time_s) not in (float, int) or not isinstance(records, list):
        raise CodecError(f"tick {tick!r} and time {time_s!r} must be numbers, events a list")
    return ReplayFrame(tick, time_s, tuple(decode_event(r) for r in records))


class ReplayReader:
    """Reads a replay file written by :class:`ReplayWriter`.

    ``header`` is available after construction; iterate :meth:`frames` or :meth:`events`.
    ``truncated`` becomes True when the stream ended on an incomplete or corrupt frame. Once the
    frames were read, ``end`` holds the end record (None when there is none) and ``cut`` says
    whether the writer never closed the file (a crash, a kill): see :attr:`cut`.
    """

    def __init__(self, path: str | Path, data: bytes | None = None) -> None:
        self.path = Path(path)
        # ``data``: the file's bytes already in memory (a lab corpus keeps streams in its database).
        self._data = self.path.read_bytes() if data is None else data
        if not self._data.startswith(MAGIC):
            raise ReplayError(f"{self.path}: not a Referee replay (bad magic)")
        self._offset = len(MAGIC)
        self.truncated = False
        first = self._next_payload()
        if first is None or not isinstance(first, dict):
            raise ReplayError(f"{self.path}: missing or unreadable header")
        if first.get("format_version") not in READABLE_VERSIONS:
            raise ReplayError(f"{self.path}: unsupported format version {first.get('format_version')!r}")
        self.header: dict[str, Any] = first
        self.version = int(first["format_version"])
        self.end: dict[str, Any] | None = None
        self._body_offset = self._offset

    def _next_payload(self) -> Any | None:
        data = self._data
        if self._offset >= len(data):
            return None
        if self._offset + _FRAME.size > len(data):
            self._mark_truncated("short frame header")
            return None
        length, crc = _FRAME.unpack_from(data, self._offset)
        start = self._offset + _FRAME.size
        end = start + length
        if length > MAX_FRAME_BYTES or end > len(data):
            self._mark_truncated("incomplete frame")
            return None
        payload = data[start:end]
        if zlib.crc32(payload) != crc:
            self._mark_truncated("checksum mismatch")
            return None
        self._offset = end
        try:
            return msgpack.unpackb(payload, raw=False, strict_map_key=False)
        except (ValueError, msgpack.UnpackException) as exc:
            self._mark_truncated(f"undecodable frame: {exc}")
            return None

    def _mark_truncated(self, why: str) -> None:
        self.truncated = True
        log.warning("%s: replay ends at byte %d (%s)", self.path, self._offset, why)
        self._offset = len(self._data)

    @property
    def cut(self) -> bool | None:
        """After reading the frames: True when the file lacks its end record or ends on a broken
        frame (the server stopped without closing it), False when it was closed; None for a
        version 1 file that ends cleanly (that version had no end record)."""
        if self.truncated:
            return True
        if self.version < 2:
            return None
        return self.end is None

    def frames(self) -> Iterator[ReplayFrame]:
        """Every complete tick frame, in order (restartable)."""
        self._offset = self._body_offset
        self.truncated = False
        self.end = None
        while (payload := self._next_payload()) is not None:
            if isinstance(payload, dict) and self.version >= 2 and isinstance(payload.get("end"), dict):
                self.end = payload["end"]
                if self._offset < len(self._data):
                    self._mark_truncated("data after the end record")
                return
            try:
                frame = _frame(payload)
            except CodecError as exc:
                # A frame whose checksum holds but whose content is not a frame (a writer's bug, a
                # crafted file) ends the stream like a corrupt one: reported, never raised.
                self._mark_truncated(f"malformed frame: {exc}")
                return
            yield frame

    def events(self) -> Iterator[Any]:
        """Every event of every complete frame, in recorded order."""
        for frame in self.frames():
            yield from frame.events
