"""What the server recorded of its players: one player's record (``report``'s entry, kept when the
player leaves), the match report and the live player list."""

from __future__ import annotations

from typing import Any

from server.core_state import CoreState
from server.session import ClientSession


def player_record(core: CoreState, session: ClientSession) -> dict[str, Any]:
    """One connected player's record as :func:`report` lists it (without ``connected``); link
    figures in ms, loss a fraction."""
    s = core.netstats.sample(session.slot, core.time_s)
    sanction = None
    if core.pipeline is not None and core.pipeline.policy is not None:
        decision = core.pipeline.evaluate(core.pipeline.key_of(session.slot))
        if decision is not None:
            sanction = {"recommended": decision.recommended.name.lower(), "applied": decision.applied.name.lower(),
                        "score": round(decision.score, 3), "needs_review": decision.needs_review}
    return {
        "slot": session.slot, "name": session.name,
        "rtt_ms": round(s.rtt_ms, 1), "jitter_ms": round(s.jitter_ms, 1), "loss": round(s.loss, 4),
        "shots": session.shots_fired, "hits": session.hits, "kills": session.kills, "deaths": session.deaths,
        "commands": session.commands_applied,
        "corrections": int(core.validator.desyncs[session.slot]),
        "detections": dict(core.detections.get(session.slot, {})),
        "sanction": sanction,
    }


def report(core: CoreState) -> dict[str, Any]:
    """What the server recorded: per player and for the server itself (plain JSON-able data);
    see ``ServerCore.report``."""
    players = []
    for session in sorted(core.by_slot.values(), key=lambda s: s.slot):
        record = player_record(core, session)
        record.update(connected=True, left_s=None, left_reason=None)
        players.append(record)
    for gone in core.departed:
        record = dict(gone.record)
        record.update(detections=dict(gone.detections), connected=False, left_s=round(gone.left_s, 3),
                      left_reason=gone.reason)
        players.append(record)
    return {
        "tick": core.tick,
        "time_s": core.time_s,
        "players": players,
        "rejections": dict(core.rejections),
        "counters": dict(core.counters),
        "tick_stats": core.tick_stats.summary(),
        "visibility_rays": core.culler.rays_cast,
        "visibility_rays_cached": core.culler.rays_cached,
    }


def live_players(core: CoreState) -> list[dict[str, Any]]:
    """The connected players now, by slot: each one's record plus ``connected_s`` (server time of
    connecting, s) and ``address`` ("host:port")."""
    players = []
    for session in sorted(core.by_slot.values(), key=lambda s: s.slot):
        record = player_record(core, session)
        record.update(connected_s=round(session.connected_s, 3),
                      address=f"{session.address[0]}:{session.address[1]}")
        players.append(record)
    return players
