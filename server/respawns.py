"""Respawns: players whose respawn time has come are placed at a spawn point with a fresh
loadout, and told by a CORRECTION (re-sent by ``server.inputs.resend_corrections`` until a claim
shows it arrived) and a NOTICE SPAWN."""

from __future__ import annotations

from anticheat.events import SpawnEvent
from server import protocol as proto
from server.core_state import CoreState, send
from server.spawns import choose_spawn
from world.weapons import WeaponId


def respawn_due(core: CoreState, now_s: float) -> None:
    """Spawn every player whose ``respawn_at_s`` is at or before ``now_s`` (s)."""
    for session in core.by_slot.values():
        if session.respawn_at_s is None or session.respawn_at_s > now_s:
            continue
        slot = session.slot
        spawn = choose_spawn(core.map, core.world, slot, core._spawn_rng)
        core.world.spawn(slot, (spawn.x, spawn.y, 0.0), spawn.yaw_deg)
        primary = int(core._spawn_rng.choice(core.config.primaries))
        session.cmd_time_s = max(session.cmd_time_s, now_s - core.config.validation.timer_lag_floor_s)
        core.weapons.spawn(slot, [primary, int(WeaponId.PISTOL)], session.cmd_time_s)
        core.validator.reset(slot, now_s)
        # The timer balance is not reset: the client's clock did not change, and a reset taken
        # mid-lag would make the lag's end look like a lead (an honest player's timer evidence).
        session.respawn_at_s = None
        core._tick_events.append(SpawnEvent(player=slot, tick=core.tick, time_s=now_s,
                                            yaw_deg=float(core.world.yaw[slot]), pitch_deg=float(core.world.pitch[slot])))
        correction = proto.Correction(
            cmd_seq=max(session.last_applied_seq, 0), pos=(spawn.x, spawn.y, 0.0), vel=(0.0, 0.0, 0.0)
        )
        send(core, session, correction)
        # To the spawned player only: the others learn where it is from their snapshots, when
        # visibility allows.
        spawned = (float(slot), float(spawn.x), float(spawn.y), 0.0)
        send(core, session, proto.Notice(code=proto.NoticeCode.SPAWN, numbers=spawned))
        session.last_correction_s = now_s
    core.weapons.sync_to(core.world)
