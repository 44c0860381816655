"""Shots: pending shots fired during the input phase, their lag-compensated resolution in one
batch (with the crosshair probes of first contact), damage, kills, and AimDetect's bait spheres
(ARCHITECTURE.md, "A tick", step 2). Every function takes the server core
(:class:`~server.core_state.CoreState`)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from anticheat.events import KillEvent
from lagcomp.exposure import exposure_masks
from lagcomp.hitreg import (
    BaitTargets,
    ShotBatch,
    eye_positions,
    hit_damage,
    register_shots,
    to_shot_results,
)
from lagcomp.rewind_policy import DECISIONS, rewind_time
from lagcomp.shot import ShotClaim
from physics.weapon_state import current_spread_deg, shot_directions
from server import protocol as proto
from server.core_state import CoreState
from server.session import ClientSession
from world.hitbox import Bone
from world.weapons import WEAPONS, WeaponId

MAX_RANGE_M = {int(w): spec.max_range_m for w, spec in WEAPONS.items()}
"""Weapon range (m) by plain int id: constructing the WeaponId enum per ray cost more than the lookup."""
_REWIND_COUNTERS = tuple(f"rewind_{d.value}" for d in DECISIONS)
"""``core.counters`` key of each rewind decision code (read by the metrics endpoint)."""


@dataclass(slots=True)
class Bait:
    """A bait sphere: entity id, the shooter who sees it, centre (m), expiry (server time, s)."""

    entity_id: int
    shooter: int
    centre: tuple[float, float, float]
    expires_s: float


@dataclass(slots=True)
class PendingShot:
    """An accepted shot waiting for the tick's resolution: its rays (origin, directions in m) and what
    the firing command said."""

    session: ClientSession
    shot: proto.Shot
    origin: np.ndarray
    directions: np.ndarray
    cmd_time_s: float
    recoil: tuple[float, float]
    view: tuple[float, float]
    """(yaw, pitch) of the command that fired (deg)."""
    punch: tuple[float, float]
    """(pitch, yaw) kick the shot flew with (deg)."""
    prev_aim: tuple[float, float, float, float] | None
    """(yaw, pitch, punch pitch, punch yaw) after the command before (deg), None when unknown."""
    cmd_dt_s: float


def crosshairs(aims: list[tuple[float, float, float, float]]) -> np.ndarray:
    """(M, 3) unit directions of the spread-free crosshairs of (yaw, pitch, punch pitch, punch yaw)
    aims (deg): view plus punch, as physics.shot_directions aims; ``view_direction``'s values.
    The yaws and pitches share one array, so one radians, one cos and one sin call serve them
    all (numpy's trigonometry gives each element the same bits whatever the array)."""
    m = len(aims)
    angles = [y - punch_yaw for y, _, _, punch_yaw in aims]
    angles += [min(90.0, max(-90.0, p + punch_pitch)) for _, p, punch_pitch, _ in aims]
    rad = np.radians(np.array(angles))
    cos, sin = np.cos(rad), np.sin(rad)
    out = np.empty((m, 3))
    out[:, 0] = cos[m:] * cos[:m]
    out[:, 1] = cos[m:] * sin[:m]
    out[:, 2] = sin[m:]
    return out


def fire(
    core: CoreState, session: ClientSession, cmd: proto.Command, shot: proto.Shot, t_cmd: float, now_s: float
) -> PendingShot | None:
    """Fire ``shot`` of command ``cmd`` at the player's command clock ``t_cmd`` (s): the pending
    shot (its rays, spread drawn now), or None when the weapon refused it (evidence, counted)."""
    slot = session.slot
    w = core.world
    outcome = core.weapons.try_fire(slot, shot.weapon, t_cmd, core.tick, alive=bool(w.alive[slot]))
    if not outcome.accepted:
        if outcome.evidence is not None:
            core._tick_events.append(outcome.evidence)
        core.rejections[f"shot_{outcome.evidence.kind.value if outcome.evidence else 'refused'}"] += 1
        return None
    spec = WEAPONS[WeaponId(shot.weapon)]
    speed = float(np.hypot(w.vel[slot, 0], w.vel[slot, 1]))
    spread = float(current_spread_deg(spec.id, speed, bool(w.on_ground[slot]), int(w.stance[slot])))
    directions = shot_directions(
        shot.yaw_deg, shot.pitch_deg, outcome.punch_pitch_deg, outcome.punch_yaw_deg,
        spread, spec.pellets, spec.pellet_spread_deg, core._spread_rng,
    )
    origin = eye_positions(w, np.array([slot]))[0]
    session.shots_fired += 1
    last = session.last_aim
    prev_aim = None
    if last is not None and last.seq == cmd.seq - 1:
        prev_aim = (last.yaw_deg, last.pitch_deg, last.server_punch_pitch_deg, last.server_punch_yaw_deg)
    return PendingShot(session, shot, origin, directions, t_cmd, (cmd.recoil_pitch_deg, cmd.recoil_yaw_deg),
                        (cmd.yaw_deg, cmd.pitch_deg), (outcome.punch_pitch_deg, outcome.punch_yaw_deg),
                        prev_aim, float(cmd.duration_s))

def resolve_shots(core: CoreState, pending: list[PendingShot], now_s: float) -> None:
    """Resolve the tick's accepted shots at server time ``now_s`` (s) in one lag-compensated
    batch with their probe rays; ShotResults to the tick's events, damage and kills in row order."""
    if not pending:
        return
    # Columns as Python lists, turned into arrays once: a tick has a few rays, and numpy's
    # fixed cost per call, not the arithmetic, was most of this phase.
    policy = core.config.rewind
    rows: list[tuple[PendingShot, int]] = []
    time_list: list[float] = []
    codes: list[int] = []
    for p in pending:
        # A shot's pellets share its rewind: rewind_times' values, one shot at a time in Python.
        t, code = rewind_time(now_s, latency_s(core, p.session.slot), p.shot.view_time_s, policy)
        core.counters[_REWIND_COUNTERS[code]] += 1
        for k in range(p.directions.shape[0]):
            rows.append((p, k))
            time_list.append(t)
            codes.append(code)
    n_rows = len(rows)
    shooter = [p.session.slot for p, _ in rows]
    weapon_ids = [p.shot.weapon for p, _ in rows]
    origin = [p.origin for p, _ in rows]
    direction = [p.directions for p in pending]
    # Probe rays ride in the same batch and never deal damage: the spread-free crosshair of
    # the shot, and that of the previous command one command earlier (first contact).
    probed = [row for row, (p, k) in enumerate(rows) if k == 0 and p.prev_aim is not None]
    n_probed = len(probed)
    if probed:
        pend = [rows[r][0] for r in probed]
        shooter += [shooter[r] for r in probed] * 2
        origin += [origin[r] for r in probed] * 2
        direction.append(crosshairs([(*p.view, *p.punch) for p in pend] + [p.prev_aim for p in pend]))
        # (max(0, t), not np.maximum: the two differ only on a -0.0 back time, which never occurs.)
        time_list += [time_list[r] for r in probed] + [max(0.0, time_list[r] - p.cmd_dt_s) for r, p in zip(probed, pend)]
        weapon_ids += [weapon_ids[r] for r in probed] * 2
    batch = ShotBatch.build(
        shooter=shooter,
        origin=origin,
        direction=np.concatenate(direction),
        time_s=time_list,
        max_range=[MAX_RANGE_M[w] for w in weapon_ids],
        weapon=weapon_ids,
        pellet=[k for _, k in rows] + [0] * (2 * n_probed),
    )
    hits = register_shots(batch, core.history, core.geometry, now_s, core.config.hitreg, baits=bait_targets(core))
    victims = hits.victim.tolist()
    first_contact: list[bool | None] = [None] * n_rows
    for j, row in enumerate(probed):
        now_on = victims[n_rows + j]
        if now_on >= 0:
            first_contact[row] = victims[n_rows + n_probed + j] != now_on
    damage = hit_damage(batch, hits)[:n_rows].tolist()  # the probes' rows deal nothing
    # Damage row by row, in order: a pellet can kill a victim the next rows then cannot damage.
    # The health each row leaves is worked out here, as the world stores it (float32), but the
    # world changes below, row after row with each result, as before: a kill's subscribers see
    # the world as it is when that kill happens.
    w = core.world
    stored = w.health.dtype.type
    health: dict[int, float] = {}
    left: list[float | None] = [None] * n_rows
    for row in range(n_rows):
        victim = victims[row]
        now_health = health.get(victim) if victim >= 0 else None
        if victim < 0 or (now_health is None and not w.alive[victim]) or now_health == 0.0:
            damage[row] = 0.0
            continue
        if damage[row] <= 0.0:
            continue
        before = float(w.health[victim]) if now_health is None else now_health
        left[row] = health[victim] = float(stored(max(0.0, before - damage[row])))
    claims = {id(p): claim(p) for p in pending}
    claimed_pos = claimed_victims(core, rows, time_list)
    results = to_shot_results(
        batch, hits, claims=[claims[id(p)] for p, _ in rows], tick=core.tick, time_s=now_s,
        decisions=[DECISIONS[c] for c in codes], damage=damage, first_contact=first_contact,
        claimed_victim_pos=[claimed_pos.get(row) for row in range(n_rows)],
        exposed=exposures(core, rows, victims, time_list),
    )
    for row, result in enumerate(results):
        core._tick_events.append(result)
        remaining = left[row]
        if remaining is None:
            continue
        p, k = rows[row]
        victim = victims[row]
        if k == 0 or victim not in victims[row - k : row]:
            p.session.hits += 1
        w.health[victim] = remaining
        if remaining <= 0.0:
            kill(core, p.session, victim, int(p.shot.weapon), result.bone, result.distance_m, now_s)

def exposures(
    core: CoreState, rows: list[tuple[PendingShot, int]], victims: list[int], times: list[float]
) -> list[int | None]:
    """Per row, which of the victim's head and torso bones were in view from the shot's origin at
    the rewind time (``times[row]``, s), as ``ShotResult.exposed`` records it: pellet 0 rows that
    hit a player only, None elsewhere."""
    out: list[int | None] = [None] * len(rows)
    hit = [r for r, (_, k) in enumerate(rows) if k == 0 and victims[r] >= 0]
    if not hit:
        return out
    h = core.history
    b = h.bracket([times[r] for r in hit])
    body = h.pairs(b.ring, b.frac, np.array([victims[r] for r in hit], dtype=np.intp))
    origins = np.array([rows[r][0].origin for r in hit])
    for r, mask in zip(hit, exposure_masks(origins, body.pos, body.yaw, body.stance, core.geometry.los_clear), strict=True):
        out[r] = mask
    return out

def claimed_victims(
    core: CoreState, rows: list[tuple[PendingShot, int]], times: list[float]
) -> dict[int, tuple[float, float, float]]:
    """Rewound feet of each claimed victim (pellet 0 rows whose claims name a victim and a hit
    point), by row: where the victim the client says it hit really was at the rewind time
    (``times[row]``, s)."""
    cap = core.config.max_clients
    claimed = [r for r, (p, k) in enumerate(rows)
               if k == 0 and p.shot.claimed_hit_point is not None and p.shot.claimed_victim is not None
               and 0 <= p.shot.claimed_victim < cap]
    if not claimed or len(core.history) == 0:
        return {}
    pos, alive = core.history.feet([times[r] for r in claimed], [rows[r][0].shot.claimed_victim for r in claimed])
    return {r: (x, y, z) for r, (x, y, z), ok in zip(claimed, pos.tolist(), alive.tolist(), strict=True) if ok}

def claim(p: PendingShot) -> ShotClaim:
    """The client's claims about a shot, as hit registration reports them next to its verdict."""
    s = p.shot
    return ShotClaim(
        shooter=p.session.slot,
        weapon=s.weapon,
        yaw_deg=s.yaw_deg,
        pitch_deg=s.pitch_deg,
        view_time_s=s.view_time_s,
        claimed_victim=s.claimed_victim,
        claimed_hit_point=s.claimed_hit_point,
        claimed_bone=s.claimed_bone,
        recoil_pitch_deg=p.recoil[0],
        recoil_yaw_deg=p.recoil[1],
        seq=s.cmd_seq,
        view=p.view,
        prev_view=None if p.prev_aim is None else p.prev_aim[:2],
        clock_s=p.cmd_time_s,
    )

def kill(
    core: CoreState, killer: ClientSession, victim: int, weapon_id: int, bone: int, distance: float, now_s: float
) -> None:
    """``victim`` dies (distance in m): counted, KillEvent to the events and the bus, and a bait
    placed above where it fell, for the killer only."""
    w = core.world
    victim_pos = w.pos[victim].copy()
    w.kill(victim)
    killer.kills += 1
    victim_session = core.by_slot.get(victim)
    if victim_session is not None:
        victim_session.deaths += 1
        victim_session.respawn_at_s = now_s + core.config.respawn_delay_s
    event = KillEvent(
        killer=killer.slot, victim=victim, tick=core.tick, time_s=now_s, weapon=weapon_id, bone=bone,
        distance_m=distance, killer_stance=int(w.stance[killer.slot]), headshot=bone == int(Bone.HEAD),
    )
    core._tick_events.append(event)
    core.bus.publish(event)
    victim_name = victim_session.name if victim_session is not None else f"#{victim}"
    notice = proto.Notice(
        code=proto.NoticeCode.KILL, text=f"{killer.name} killed {victim_name}",
        numbers=(float(killer.slot), float(victim), float(weapon_id), float(bone), float(distance)),
    )
    # The kill feed: one datagram, to every player (it reveals no position).
    datagram = proto.encode(notice, core.config.protocol)
    core._out.extend((s.address, datagram) for s in core.by_slot.values())
    if core.config.bait.enabled:
        place_bait(core, killer.slot, victim_pos, now_s)

def place_bait(core: CoreState, shooter: int, victim_pos: np.ndarray, now_s: float) -> None:
    """An AimDetect bait sphere (entity ids 200-255) above ``victim_pos`` (m), shown to ``shooter``."""
    used = {b.entity_id for b in core._baits}
    for _ in range(56):
        candidate = core._next_bait_id
        core._next_bait_id = 200 + (core._next_bait_id - 199) % 56
        if candidate not in used:
            centre = (float(victim_pos[0]), float(victim_pos[1]), float(victim_pos[2] + core.config.bait.height_m))
            core._baits.append(Bait(candidate, shooter, centre, now_s + core.config.bait.duration_s))
            core._bait_cache = None
            core.counters["baits_placed"] += 1
            return

def bait_targets(core: CoreState) -> BaitTargets | None:
    """The live baits as hit registration takes them (None without any)."""
    # Built once per change of the baits (placed or expired), not on every tick with a shot.
    if core._bait_cache is None and core._baits:
        core._bait_cache = BaitTargets.spheres(
            np.array([b.centre for b in core._baits]),
            core.config.bait.radius_m,
            np.array([b.shooter for b in core._baits]),
        )
    return core._bait_cache

def latency_s(core: CoreState, slot: int) -> float:
    """Age of the client's view when its command arrives, less interpolation (s): the smoothed
    round trip. The client renders what the server sent one downstream trip ago and its
    command takes an upstream trip back; Source's "outgoing latency" is measured send-to-ack,
    a round trip too."""
    return core.netstats.rtt_ms(slot) / 1000.0

def expire_baits(core: CoreState, now_s: float) -> None:
    """Forget the baits whose time is up at ``now_s`` (s)."""
    if any(b.expires_s <= now_s for b in core._baits):
        core._baits = [b for b in core._baits if b.expires_s > now_s]
        core._bait_cache = None
