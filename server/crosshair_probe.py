"""The crosshair probe: on every command, whom the player's crosshair was on as its client saw it.

A shot's first-contact probe (``server.shots``) tells whether the crosshair had just come onto a
player when a shot left, but only for commands that fired. A triggerbot is told apart by the
commands that did not fire: it fires every time its crosshair comes onto an enemy with the weapon
ready, and an honest player lets many such moments pass (the crosshair wobbling over a hitbox's
edge, sweeping past a target, a target stepping into view under it). So each command's spread-free
crosshair (view angles plus the server's punch before the command fired) is cast with the world
rewound to the command's rewind time, as a shot of that command would be, and the command's
``AimSample`` carries the player it met (``crosshair_target``) and whether the held weapon could
have fired then (``fire_ready``).

Casting costs a ray per command, so only commands whose nearest visible enemy (un-rewound) lies
within ``CrosshairProbeConfig.cone_deg`` (``server.config``) of the view, or nearer than
``near_m``, are cast: the crosshair cannot be on anyone else.
"""

from __future__ import annotations

import numpy as np

from lagcomp.hitreg import ShotBatch, eye_positions, register_shots
from server.core_state import CoreState
from server.shots import MAX_RANGE_M, crosshairs
from server.tick_commands import Round, TickCommands

__all__ = ["probe_crosshairs"]


def probe_crosshairs(core: CoreState, round_: Round, commands: TickCommands, now_s: float,
                     rewind_s: np.ndarray | None) -> tuple[list[int | None], list[bool]]:
    """Per command of ``round_`` (its movement applied, its weapon actions not yet): the slot its
    crosshair ray meets with the world rewound to the command's rewind time (None: nobody, a wall
    first, or not probed), and whether its held weapon was ready to fire at the command's clock.
    Server time ``now_s`` (s); ``rewind_s``: the round's rewind times (s, ``rewind_view_times``),
    None only when the probe is off."""
    a, b = round_.start, round_.stop
    n = b - a
    slots = commands.slots[a:b]
    wpn = core.weapons
    live = np.zeros(n, dtype=bool)
    live[round_.live] = True
    ready = (wpn.ready(slots, commands.times[a:b]) & live).tolist()
    targets: list[int | None] = [None] * n
    cfg = core.config.crosshair
    if not cfg.enabled or rewind_s is None or not round_.live.size:
        return targets, ready
    angle, distance, target = commands.aim[1][a:b], commands.aim[2][a:b], commands.aim[4][a:b]
    held = wpn.weapon[slots].tolist()
    rows = [i for i in round_.live.tolist()
            if held[i] and target[i] >= 0 and (angle[i] < cfg.cone_deg or distance[i] < cfg.near_m)]
    if not rows:
        return targets, ready
    idx = np.array(rows, dtype=np.intp)
    probed = slots[idx]
    eye = eye_positions(core.world, probed)
    pitch_punch, yaw_punch = wpn.punch_pitch_deg[probed].tolist(), wpn.punch_yaw_deg[probed].tolist()
    aims = [(commands.view_yaw[a + i], commands.view_pitch[a + i], pp, py)
            for i, pp, py in zip(rows, pitch_punch, yaw_punch, strict=True)]
    times = rewind_s[idx]
    weapons = [held[i] for i in rows]
    batch = ShotBatch.build(shooter=probed, origin=eye, direction=crosshairs(aims), time_s=times,
                            max_range=[MAX_RANGE_M[wid] for wid in weapons], weapon=weapons, pellet=0)
    hits = register_shots(batch, core.history, core.geometry, now_s, core.config.hitreg)
    for i, victim in zip(rows, hits.victim.tolist(), strict=True):
        if victim >= 0:
            targets[i] = victim
    return targets, ready
