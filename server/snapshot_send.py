"""Snapshot sending (ARCHITECTURE.md, "A tick", step 5): which clients get a snapshot this tick,
what each one sees (its visible players, its phantom and its own baits), written by the tick's shared frame
(``server.snapshots``) and queued with the tick's datagrams."""

from __future__ import annotations

import numpy as np

from server.core_state import CoreState


def send_snapshots(core: CoreState, now_s: float) -> None:
    """Send this tick's share of the snapshots (server time ``now_s``, s): with one every N ticks,
    a client gets its snapshot on the ticks where slot % N == tick % N, so each tick encodes 1/N
    of them instead of every N-th tick encoding them all (the snapshot ticks were the slowest)."""
    every = core.config.snapshot_every
    phase = core.tick % every
    sessions = [s for s in core.by_slot.values() if s.slot % every == phase]
    if not sessions:
        return
    w = core.world
    frame = core.snapshots.frame(w, core.weapons, tick=core.tick, server_time_s=now_s)
    slots = [s.slot for s in sessions]
    viewers = np.array(slots, dtype=np.intp)
    # Every viewer's targets from one nonzero over the visibility rows (row-major, so each
    # viewer's targets come out in slot order, as flatnonzero of its row gives them).
    seen = core.culler.visible[viewers] & w.active[None, :]
    ends = np.cumsum(np.count_nonzero(seen, axis=1))
    targets = np.nonzero(seen)[1]
    baits: dict[int, list[tuple[int, tuple[float, float, float]]]] = {}
    for b in core._baits:
        baits.setdefault(b.shooter, []).append((b.entity_id, b.centre))
    if len(core._baits) > core._bait_room:
        # A viewer who sees everyone gets only the newest baits that fit (the default limits
        # leave room for all 56 up to 177 clients).
        room = core._bait_room
        baits = {shooter: shown[max(0, len(shown) - room):] if room else [] for shooter, shown in baits.items()}
    phantoms = core.phantoms.records(viewers) if core.phantoms.slot is not None else None
    snapshots = frame.datagrams_many(viewers, [s.last_applied_seq for s in sessions], targets, ends, baits,
                                     phantoms=None if phantoms is None else (core.phantoms.slot, *phantoms))
    out = core._out
    tick = core.tick
    on_sent = core.netstats.on_snapshot_sent
    for session, slot, datagrams in zip(sessions, slots, snapshots, strict=True):
        address = session.address
        for datagram in datagrams:
            out.append((address, datagram))
        on_sent(slot, tick, now_s)
