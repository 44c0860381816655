"""Detect (ARCHITECTURE.md, "A tick", step 3): the tick's events, connection samples included,
feed the anticheat pipeline in order; its detections are counted per player and published on
the operator bus (the pipeline routes them to the sanction policy and the store)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from anticheat.events import ConnectionSample, Detection
from server.core_state import CoreState


def connection_samples(core: CoreState, now_s: float) -> None:
    """Every ``connection_sample_interval_s``, each player's link figures as a ConnectionSample,
    with the silences (``server.netstats``) that ended one interval ago or earlier and that most
    other players did not share (``shared_silence``; counted in ``silences_shared``)."""
    if now_s < core._next_conn_sample_s:
        return
    interval = core.config.connection_sample_interval_s
    core._next_conn_sample_s = now_s + interval
    clients = {session.slot: core.netstats.client(session.slot) for session in core.by_slot.values()}
    # One interval late, so that the other players' silences ending just after are known too.
    ripe = {slot: c.take_silences(now_s - interval) for slot, c in clients.items()}
    recent = {slot: c.recent_silences() for slot, c in clients.items()}
    for slot in clients:
        s = core.netstats.sample(slot, now_s)
        kept = []
        others = [r for o, r in recent.items() if o != slot] if ripe[slot] else []
        for end, length in ripe[slot]:
            if shared_silence(end, length, others):
                core.counters["silences_shared"] += 1
            else:
                kept.append(length * 1000.0)
        core._tick_events.append(
            ConnectionSample(
                player=slot, time_s=now_s, rtt_ms=s.rtt_ms, jitter_ms=s.jitter_ms,
                loss=s.loss, since_update_s=s.since_update_s, silences_ms=tuple(kept), tick=core.tick,
            )
        )


def shared_silence(end_s: float, length_s: float, others: Sequence[Sequence[tuple[float, float]]]) -> bool:
    """Whether the silence ending at ``end_s`` and lasting ``length_s`` (s) has a common cause: with
    at least two other players, at least half of them had a silence covering half of it or more.
    A server's own stall, a network outage near it or a starved process running many clients
    silences everyone at once; a player who holds datagrams (fake lag) is silent alone."""
    if len(others) < 2:
        return False
    start = end_s - length_s
    hit = 0
    for silences in others:
        for e, n in silences:
            if min(end_s, e) - max(start, e - n) >= 0.5 * length_s:
                hit += 1
                break
    return 2 * hit >= len(others)


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
