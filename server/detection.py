"""Detect (ARCHITECTURE.md, "A tick", step 3): the tick's events, connection samples included,
feed the anticheat pipeline in order; its detections are counted per player and published on
the operator bus (the pipeline routes them to the sanction policy and the store)."""

from __future__ import annotations

from collections.abc import Iterable

from anticheat.events import ConnectionSample, Detection
from server.core_state import CoreState


def connection_samples(core: CoreState, now_s: float) -> None:
    """Every ``connection_sample_interval_s``, each player's link figures as a ConnectionSample."""
    if now_s < core._next_conn_sample_s:
        return
    core._next_conn_sample_s = now_s + core.config.connection_sample_interval_s
    for session in core.by_slot.values():
        s = core.netstats.sample(session.slot, now_s)
        silences = core.netstats.client(session.slot).take_silences()
        core._tick_events.append(
            ConnectionSample(
                player=session.slot, time_s=now_s, rtt_ms=s.rtt_ms, jitter_ms=s.jitter_ms,
                loss=s.loss, since_update_s=s.since_update_s,
                silences_ms=tuple(g * 1000.0 for g in silences), tick=core.tick,
            )
        )


def detect(core: CoreState) -> list[Detection]:
    """Feed the tick's events to the pipeline; returns its detections (none without a pipeline)."""
    if core.pipeline is None:
        return []
    found = core.pipeline.feed_many(core._tick_events)
    _deliver(core, found)
    return found


def flush(core: CoreState) -> None:
    """End of the match: the detections the detectors still hold, delivered and recorded like any
    tick's (a replay re-run ends the same way)."""
    if core.pipeline is None:
        return
    held = core.pipeline.flush()
    _deliver(core, held)
    if held and core.recorder is not None:
        core.recorder.write_tick(core.tick, core.time_s, held)


def _deliver(core: CoreState, found: Iterable[Detection]) -> None:
    for d in found:
        counter = core.detections.get(d.player)
        if counter is not None:
            counter[f"{d.detector}:{d.kind}"] += 1
        core.bus.publish(d)
