"""Offline re-detection: the detector suite run over a stored event stream, with score traces.

A corpus stores each match's event stream (the replay file's bytes, compressed). Running the
suite over it with some tolerances gives exactly what a live match with those tolerances would
have detected (DESIGN principle 3), so tolerances that change a detector's dynamics (windows,
decays, weights) are evaluated by re-running streams, never by replaying matches.

Besides detections and the sanction policy's decisions, a run samples every detector's
normalised scores (``Detector.scores``: 1.0 is the alarm threshold) for every connected player
every ``trace_every_s`` of match time, and keeps a row whenever a value changed: the score
traces that threshold sweeps read without re-running anything.

Times: ``time_s`` is match time (s); ``play_s`` is time since the player's own connect (s).
"""

from __future__ import annotations

import json
import lzma
import math
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from anticheat.detectors.aimdetect.model import TrainedModel
from anticheat.events import Detection, SessionEvent
from anticheat.judgement.sanctions import SanctionDecision
from anticheat.suite import build_pipeline
from server.recording import ReplayReader
from testbed.replay_summary import merge_tolerances

__all__ = ["CODECS", "Analysis", "analyse", "compress", "decompress"]

CODECS = ("xz", "zlib", "raw")
"""Stream codecs a corpus may hold: ``xz`` (LZMA preset 0: about 7 MB per player-hour against 26
raw, at ~10 MB/s), ``zlib``, ``raw``."""


_TRACE_LIMIT = 1e30
"""Trace values are clipped to +-this (within a 4-byte float's range)."""


def compress(data: bytes, codec: str = "xz") -> bytes:
    """``data`` compressed with ``codec`` (one of :data:`CODECS`)."""
    if codec == "xz":
        return lzma.compress(data, preset=0)
    if codec == "zlib":
        return zlib.compress(data, 6)
    if codec == "raw":
        return data
    raise ValueError(f"unknown stream codec {codec!r}; known: {', '.join(CODECS)}")


def decompress(data: bytes, codec: str) -> bytes:
    """The stream's raw bytes."""
    if codec == "xz":
        return lzma.decompress(data)
    if codec == "zlib":
        return zlib.decompress(data)
    if codec == "raw":
        return data
    raise ValueError(f"unknown stream codec {codec!r}; known: {', '.join(CODECS)}")


@dataclass(frozen=True, slots=True)
class Analysis:
    """One stream's re-run, as rows of the lab's tables (``testbed.lab.store``).

    Attributes:
        match_id: as given to :func:`analyse`. header: the replay header (scenario, labels, tolerances recorded live).
        detections: ``(match_id, run, name, time_s, play_s, detector, kind, value, severity,
            reason, evidence_json)`` rows, in detection order.
        decisions: ``(match_id, run, name, time_s, play_s, level, score)``: each change of a
            player's recommended sanction level.
        traces: ``(match_id, run, name, stat, play_s, value)``: score trace steps.
        exposure: player name -> (join_s, leave_s), match time (s).
        live: detections recorded live in the stream; matches_live: the re-run found the same
            ones (always, for a run with the live tolerances; a check of determinism).
        events_fed: events fed to the pipeline. truncated: the stream ended on a bad frame.
    """

    match_id: int
    header: Mapping[str, Any]
    detections: tuple[tuple[Any, ...], ...]
    decisions: tuple[tuple[Any, ...], ...]
    traces: tuple[tuple[Any, ...], ...]
    exposure: Mapping[str, tuple[float, float]]
    live: int
    matches_live: bool
    events_fed: int
    truncated: bool


def _key(d: Detection) -> tuple[Any, ...]:
    return (d.player, d.tick, d.detector, d.kind, d.value, d.reason)


class _Tracer:
    """Samples every connected player's scores; keeps a row per change."""

    def __init__(self, match_id: int, run: str) -> None:
        self.match_id = match_id
        self.run = run
        self.rows: list[tuple[Any, ...]] = []
        self._last: dict[tuple[str, str], float] = {}

    def sample(self, pipeline: Any, slots: Mapping[int, str], joins: Mapping[str, float], at_s: float) -> None:
        last = self._last
        for slot, name in slots.items():
            play = at_s - joins[name]
            for stat, value in pipeline.scores(slot).items():
                v = float(value) if math.isfinite(value) else 0.0
                # Traces are stored as 4-byte floats; a statistic far past its threshold (a
                # ratio against a zero mean) reads the same at 1e30 as at 1e308.
                v = min(max(v, -_TRACE_LIMIT), _TRACE_LIMIT)
                key = (name, stat)
                if last.get(key, 0.0) != v:
                    last[key] = v
                    self.rows.append((self.match_id, self.run, name, stat, round(play, 3), v))

    def forget(self, name: str) -> None:
        # A reconnecting player starts from zero, as the detectors do.
        for key in [k for k in self._last if k[0] == name]:
            del self._last[key]


def analyse(
    data: bytes,
    overrides: Mapping[str, Mapping[str, Any]] | None = None,
    *,
    match_id: int = 0,
    run: str = "base",
    trace_every_s: float | None = 1.0,
    model: TrainedModel | None | str = "shipped",
) -> Analysis:
    """Re-run the suite over one stream (a replay file's raw bytes).

    Args:
        data: the replay's bytes. overrides: tolerance tables applied on top of the ones the
            stream was recorded with. match_id, run: copied into the rows.
        trace_every_s: score sampling period (s of match time); None records no traces.
        model: AimDetect's model (``"shipped"``, a model, or None to leave AimDetect out).
    """
    reader = ReplayReader(f"<corpus match {match_id}>", data)
    header = reader.header
    now = [0.0]
    pipeline = build_pipeline(merge_tolerances(header.get("tolerances"), overrides) or None, model=model,
                              clock=lambda: now[0])
    slots: dict[int, str] = {}
    joins: dict[str, float] = {}
    leaves: dict[str, float] = {}
    detections: list[tuple[Any, ...]] = []
    decisions: list[tuple[Any, ...]] = []
    levels: dict[str, str] = {}
    found: list[Detection] = []
    live: list[Detection] = []

    def on_decision(d: SanctionDecision) -> None:
        level = d.recommended.name.lower()
        if levels.get(d.player) != level:
            levels[d.player] = level
            join = joins.get(d.player, 0.0)
            decisions.append((match_id, run, d.player, now[0], round(now[0] - join, 3), level, float(d.score)))

    def on_detection(d: Detection) -> None:
        # The slot's key now: slots are reused, so a name looked up later could be another's.
        name = pipeline.key_of(d.player)
        join = joins.get(name, 0.0)
        detections.append((match_id, run, name, d.time_s, round(d.time_s - join, 3), d.detector, d.kind,
                           float(d.value), float(d.severity), d.reason, json.dumps(dict(d.evidence), sort_keys=True)))

    pipeline.subscribe(on_detection)
    pipeline.subscribe_decisions(on_decision)
    tracer = _Tracer(match_id, run) if trace_every_s else None
    next_sample = trace_every_s or math.inf
    fed = 0
    feed = pipeline.feed
    for frame in reader.frames():
        while tracer is not None and frame.time_s >= next_sample:
            tracer.sample(pipeline, slots, joins, next_sample)
            next_sample += trace_every_s  # type: ignore[operator]
        now[0] = frame.time_s
        for event in frame.events:
            if isinstance(event, Detection):
                live.append(event)
                continue
            if isinstance(event, SessionEvent):
                if event.kind == "connect":
                    slots[event.player] = event.name
                    joins[event.name] = event.time_s
                    leaves.pop(event.name, None)
                    if tracer is not None:
                        tracer.forget(event.name)
                elif event.kind == "disconnect":
                    name = slots.pop(event.player, None)
                    if name is not None:
                        leaves[name] = event.time_s
            fed += 1
            result = feed(event)
            if result:
                found.extend(result)
    end_s = max(now[0], float(header.get("duration_s") or 0.0))
    now[0] = end_s
    # The match's end, as the live server closed it: held-back detections come out now.
    found.extend(pipeline.flush())
    if tracer is not None:
        tracer.sample(pipeline, slots, joins, end_s)
    exposure = {name: (join, leaves.get(name, end_s)) for name, join in joins.items()}
    return Analysis(
        match_id=match_id,
        header=header,
        detections=tuple(detections),
        decisions=tuple(decisions),
        traces=tuple(tracer.rows) if tracer is not None else (),
        exposure=exposure,
        live=len(live),
        matches_live=[_key(d) for d in found] == [_key(d) for d in live],
        events_fed=fed,
        truncated=reader.truncated,
    )
