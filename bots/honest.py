"""The honest brain: a human-like player built from separable pieces.

``HonestBrain(skill, nav=..., aim=..., trigger=..., mover=..., targeting=...)`` wires four parts
that cheat profiles can replace or wrap one at a time:

* :class:`TargetSelector` - who to fight: rendered, alive enemies that are in line of sight and
  that the player has noticed (inside the field of view, or outside it when they shoot or hurt the
  player). A ``rendered=False`` entity is dropped before anything else looks at it.
* ``bots.aim.AimController`` - where the view points (reaction, flicks, pursuit, tremor, recoil).
* ``bots.aim.TriggerControl`` - when to fire (tolerance, bursts, fire interval).
* :class:`HonestMover` - how the body moves: roaming along navigation paths, A-D strafing with
  irregular timing in a fight, stopping or crouching to shoot, retreating to cover when hurt or
  reloading. Keys are digital (W/A/S/D are either pressed or not), steering comes from the view.

Units: meters, seconds, degrees. All randomness comes from the generator passed to ``think``.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass
from enum import Enum
from typing import NamedTuple

import numpy as np

from bots.aim import (
    AimController,
    AimOutput,
    AimPhase,
    AimPoint,
    AimTarget,
    TriggerControl,
    aim_point_world,
    angular_size_deg,
    body_height_m,
    direction_angles,
    raised_aim_points,
    sample_aim_point,
)
from bots.nav import NavGraph
from bots.perception import Intent, Perception, SeenEntity
from bots.skill import Skill
from physics.buttons import Buttons
from world.constants import CROUCHING_EYE_M, STANDING_EYE_M
from world.geometry import MapGeometry
from world.weapons import WeaponSpec, weapon

log = logging.getLogger(__name__)


@dataclass(frozen=True, slots=True)
class HonestConfig:
    """Behaviour constants of the honest brain that are not aim skill.

    Attributes:
        vertical_fov_deg: vertical field of view (deg); ~74 deg at 16:9 for a 106 deg horizontal.
        damage_window_s: after losing health, enemies outside the view that face the player are
            noticed for this long (s): the damage indicator says where it came from.
        shooter_facing_deg: ... "facing" means the enemy's view yaw points at the player within
            this angle (deg).
        memory_s: a target out of sight is remembered (last position, for looking and cover) this
            long (s).
        los_points_u: body coordinates checked for line of sight (chest and head); a target is
            visible when any of them is.
        los_period_s: line of sight to an entity is re-checked this often (s).
        aim_redraw_prob: at each new burst the aim point is redrawn with this probability.
        aim_visible_period_s: how often (s) the aim point is checked for being visible (raised
            above cover when it is not).
        waypoint_reached_m: a waypoint counts as reached within this distance (m).
        stuck_window_s, stuck_progress_m: replan when the player moved less than this (m) in that
            window (s) while following a path.
        key_threshold: a movement key is pressed when the wished direction's component along it
            exceeds this (0.38 = the 8 key combinations cover 45 deg sectors).
        look_ahead_m: when roaming, the view turns to the path point this far ahead (m).
        look_pitch_sd_deg: sd (deg) of the pitch a roaming player holds (crosshair at head level).
        strafe_median_s, strafe_sigma: duration of one strafe segment, log-normal (s, log sd).
        strafe_pause_prob: probability that a strafe segment is a pause (no A/D).
        settle_speed_m_s: a player stopping to shoot waits until it is slower than this (m/s),
            counter-strafing meanwhile (CS accuracy recovers below about a third of full speed).
        crouch_range_m, crouch_prob: per engagement at more than this range (m), crouch to shoot
            with this probability.
        approach_fraction: advance on a target beyond this fraction of the weapon's range.
        retreat_range_m: back off from a target closer than this (m).
        cover_health: retreat to cover below this health (hit points).
        cover_hold_s: (min, max) time (s) to hold a cover point before moving on.
        reload_idle_s, reload_fraction: reload after this long (s) without a target when the
            magazine holds less than this fraction.
        reload_press_gap_s: shortest time (s) between two RELOAD presses.
        switch_per_min: rate of an idle weapon switch (per minute, out of combat).
        switch_gap_s: shortest time (s) between two switch requests.
        cover_search_gap_s: shortest time (s) between two searches for cover that found none.
        repath_s: a roaming path is abandoned for a new destination after this long (s).
        max_dt_s: a think interval longer than this (s) is clipped (pause, hitch).
    """

    vertical_fov_deg: float = 74.0
    damage_window_s: float = 0.6
    shooter_facing_deg: float = 15.0
    memory_s: float = 2.0
    los_points_u: tuple[float, ...] = (0.5, 1.0)
    los_period_s: float = 0.1
    aim_redraw_prob: float = 0.3
    aim_visible_period_s: float = 0.25
    waypoint_reached_m: float = 0.8
    stuck_window_s: float = 2.0
    stuck_progress_m: float = 0.5
    key_threshold: float = 0.38
    look_ahead_m: float = 4.0
    look_pitch_sd_deg: float = 2.0
    strafe_median_s: float = 0.45
    strafe_sigma: float = 0.45
    strafe_pause_prob: float = 0.2
    settle_speed_m_s: float = 1.2
    crouch_range_m: float = 20.0
    crouch_prob: float = 0.35
    approach_fraction: float = 0.7
    retreat_range_m: float = 4.0
    cover_health: float = 40.0
    cover_hold_s: tuple[float, float] = (1.5, 4.0)
    reload_idle_s: float = 1.5
    reload_fraction: float = 0.5
    reload_press_gap_s: float = 0.5
    switch_per_min: float = 0.3
    switch_gap_s: float = 2.0
    cover_search_gap_s: float = 1.0
    repath_s: float = 30.0
    max_dt_s: float = 0.1


_CHEST_M = (body_height_m(0.5, False)[1], body_height_m(0.5, True)[1])
"""Height (m) of the upper-torso centre above the feet, standing and crouching."""
# Plain ints: OR-ing IntFlag members goes through the enum machinery on every tick.
_FIRE = int(Buttons.FIRE)
_CROUCH = int(Buttons.CROUCH)
_RELOAD = int(Buttons.RELOAD)


def _wrap(angle: float) -> float:
    return (angle + 180.0) % 360.0 - 180.0


def _sign(x: float) -> float:
    """``float(np.sign(x))`` of a float that is not NaN, without numpy's per-call cost."""
    return 1.0 if x > 0.0 else (-1.0 if x < 0.0 else 0.0)


def eye_position(pos: tuple[float, float, float] | np.ndarray, crouching: bool) -> tuple[float, float, float]:
    """Eye (m) of a player whose feet are at ``pos``."""
    return float(pos[0]), float(pos[1]), float(pos[2]) + (CROUCHING_EYE_M if crouching else STANDING_EYE_M)


def keys_toward(bearing_deg: float, view_yaw_deg: float, threshold: float = 0.38) -> tuple[float, float]:
    """Digital (forward, side) keys that move along ``bearing_deg`` while looking at
    ``view_yaw_deg`` (deg): each of W/S and A/D is pressed (+/-1) or not (0). Side is positive to
    the right, as in ``physics.movement``."""
    rel = math.radians(_wrap(bearing_deg - view_yaw_deg))
    f, s = math.cos(rel), -math.sin(rel)
    return (_sign(f) if abs(f) > threshold else 0.0, _sign(s) if abs(s) > threshold else 0.0)


def is_enemy(p: Perception, e: SeenEntity) -> bool:
    """Free-for-all when either team is unknown; else a different team."""
    return e.slot != p.slot and (p.team is None or e.team is None or e.team != p.team)


# ------------------------------------------------------------------------------ target choice


class Sighting(NamedTuple):
    """A target the player is fighting: the entity, its distance (m) and bearing/pitch from the eye (deg)."""

    entity: SeenEntity
    distance_m: float
    yaw_deg: float
    pitch_deg: float


class TargetSelector:
    """Picks the enemy to fight among those a human could see and has noticed."""

    def __init__(self, skill: Skill, config: HonestConfig = HonestConfig(), geometry: MapGeometry | None = None) -> None:
        self.skill = skill
        self.config = config
        self.geometry = geometry
        self.current: int | None = None
        self._noticed: dict[int, float] = {}
        self._last_health: float | None = None
        self._hurt_at = -math.inf
        self.last_seen_pos: tuple[float, float, float] | None = None
        self.last_seen_s = -math.inf
        self._los: dict[int, tuple[float, bool]] = {}

    def reset(self) -> None:
        """Forget everything (respawn)."""
        self.current = None
        self._los.clear()
        self._noticed.clear()
        self._last_health = None
        self._hurt_at = -math.inf
        self.last_seen_pos = None
        self.last_seen_s = -math.inf

    def candidates(self, p: Perception) -> list[SeenEntity]:
        """Rendered, alive enemies in line of sight of the own eye. Entities that are not rendered
        are removed first: nothing downstream ever sees them. Line of sight is re-checked every
        ``los_period_s`` per entity (a human's visual sampling is no faster)."""
        own, team = p.slot, p.team
        # is_enemy(p, e), inlined: this runs for every entity of every bot every tick.
        ents = [e for e in p.entities if e.rendered and e.alive and e.slot != own
                and (team is None or e.team is None or e.team != team)]
        if not ents or self.geometry is None:
            return ents
        now = p.now_s
        period = self.config.los_period_s
        los = self._los
        refresh = False
        for e in ents:
            checked = los.get(e.slot)
            if checked is None or now - checked[0] >= period:
                refresh = True
                break
        if refresh:
            # Refresh everyone at once: one batched query instead of one per entity.
            stale = ents
            eye = eye_position(p.pos, p.crouching)
            us = self.config.los_points_u
            pts = [aim_point_world(e.pos, e.yaw_deg, e.crouching, AimPoint(u, 0.0), eye) for e in stale for u in us]
            clear = self.geometry.los_clear(np.tile(np.asarray(eye), (len(pts), 1)), np.asarray(pts))
            vis = clear.reshape(len(stale), len(us)).any(axis=1)
            for e, v in zip(stale, vis.tolist()):
                self._los[e.slot] = (now, bool(v))
        if len(self._los) > 4 * len(ents) + 16:
            live = {e.slot for e in ents}
            self._los = {k: v for k, v in self._los.items() if k in live}
        return [e for e in ents if self._los[e.slot][1]]

    def select(self, p: Perception, view_yaw_deg: float, view_pitch_deg: float) -> Sighting | None:
        """The target this tick, or None. Keeps the current target while it stays visible."""
        cfg = self.config
        now = p.now_s
        if self._last_health is not None and p.health < self._last_health:
            self._hurt_at = now
        self._last_health = p.health
        seen = self.candidates(p)
        if not seen:
            # Nobody to fight (most ticks): what the general case below ends with.
            noticed = self._noticed
            if noticed:
                for slot in [s for s, t in noticed.items() if now - t > cfg.memory_s]:
                    del noticed[slot]
            self.current = None
            return None
        eye = eye_position(p.pos, p.crouching)
        sightings: dict[int, Sighting] = {}
        for e in seen:
            # The chest line straight above the feet: bearings need no more precision than that.
            chest = (e.pos[0], e.pos[1], e.pos[2] + _CHEST_M[1 if e.crouching else 0])
            yaw, pitch, dist = direction_angles(eye, chest)
            sightings[e.slot] = Sighting(e, dist, yaw, pitch)
            in_fov = (abs(_wrap(yaw - view_yaw_deg)) <= 0.5 * self.skill.fov_deg
                      and abs(pitch - view_pitch_deg) <= 0.5 * cfg.vertical_fov_deg)
            heard = e.firing
            hurt = now - self._hurt_at <= cfg.damage_window_s and self._faces(e, p.pos)
            if e.slot in self._noticed or in_fov or heard or hurt:
                self._noticed[e.slot] = now
        # Forget who has been out of sight for a while: they must be noticed again.
        for slot in [s for s, t in self._noticed.items() if now - t > cfg.memory_s]:
            del self._noticed[slot]
        if self.current is not None and self.current in sightings and self.current in self._noticed:
            chosen = sightings[self.current]
        else:
            options = [s for slot, s in sightings.items() if slot in self._noticed]
            if not options:
                self.current = None
                return None
            chosen = min(options, key=lambda s: abs(_wrap(s.yaw_deg - view_yaw_deg)) + s.distance_m)
            self.current = chosen.entity.slot
        self.last_seen_pos = chosen.entity.pos
        self.last_seen_s = now
        return chosen

    def _faces(self, e: SeenEntity, own_pos: tuple[float, float, float]) -> bool:
        bearing = math.degrees(math.atan2(own_pos[1] - e.pos[1], own_pos[0] - e.pos[0]))
        return abs(_wrap(bearing - e.yaw_deg)) <= self.config.shooter_facing_deg


# ------------------------------------------------------------------------------------ movement


class MoveMode(str, Enum):
    """What the legs are doing."""

    ROAM = "roam"
    FIGHT = "fight"
    COVER = "cover"


class MoveOutput(NamedTuple):
    """Movement keys, an optional look request (yaw, pitch deg) for when no target is aimed at,
    and ``settling``: the player is stopping to shoot and waits for the body to slow down."""

    forward: float
    side: float
    crouch: bool
    look: tuple[float, float] | None
    settling: bool = False


class FightInfo(NamedTuple):
    """What the legs need to know about the fight this tick.

    Attributes: target (None when none visible); threat_pos: last known enemy position (m) or None;
    aim_ready: the aim is on target (about to shoot or shooting); reloading; spec: held weapon.
    """

    target: Sighting | None
    threat_pos: tuple[float, float, float] | None
    aim_ready: bool
    reloading: bool
    spec: WeaponSpec | None


class HonestMover:
    """Roams along navigation paths, strafes in fights, takes cover when hurt or reloading."""

    def __init__(self, skill: Skill, config: HonestConfig = HonestConfig(), nav: NavGraph | None = None) -> None:
        self.skill = skill
        self.config = config
        self.nav = nav
        self.mode = MoveMode.ROAM
        self.path: list[tuple[float, float]] = []
        self._path_started_s = -math.inf
        self._progress_ref: tuple[float, float, float] = (math.inf, math.inf, -math.inf)  # x, y, t
        self._strafe = 0
        self._strafe_until_s = -math.inf
        self._stop_to_shoot = False
        self._crouch_engagement: int | None = None
        self._crouch = False
        self._crouched = False
        self._cover_until_s = -math.inf
        self._cover_done_health = math.inf
        self._cover_searched_s = -math.inf
        self._look_pitch = 0.0
        self._wander_yaw: float | None = None

    def reset(self) -> None:
        """New life: roam."""
        self.mode = MoveMode.ROAM
        self.path = []
        self._progress_ref = (math.inf, math.inf, -math.inf)
        self._strafe = 0
        self._strafe_until_s = -math.inf
        self._crouch_engagement = None
        self._crouch = False
        self._crouched = False
        self._cover_until_s = -math.inf
        self._cover_done_health = math.inf
        self._cover_searched_s = -math.inf
        self._wander_yaw = None

    # -- paths -------------------------------------------------------------------------------------

    def _new_path(self, p: Perception, rng: np.random.Generator, goal: tuple[float, float] | None = None) -> None:
        self.path = []
        self._path_started_s = p.now_s
        self._progress_ref = (p.pos[0], p.pos[1], p.now_s)
        self._look_pitch = self.config.look_pitch_sd_deg * float(rng.standard_normal())
        if self.nav is None:
            return
        if goal is None:
            goal = self.nav.random_destination(rng, near=p.pos[:2])
        found = self.nav.find_path(p.pos[:2], goal)
        self.path = list(found) if found else []

    def _follow(self, p: Perception, view_yaw: float, rng: np.random.Generator) -> tuple[float, float, tuple[float, float] | None]:
        """Keys and look heading that follow the current path; replans when done or stuck."""
        cfg = self.config
        x, y = p.pos[0], p.pos[1]
        path = self.path
        while path and math.hypot(path[0][0] - x, path[0][1] - y) < cfg.waypoint_reached_m:
            path.pop(0)
        rx, ry, rt = self._progress_ref
        if p.now_s - rt >= cfg.stuck_window_s:
            if self.path and math.hypot(x - rx, y - ry) < cfg.stuck_progress_m:
                self.path = []
            self._progress_ref = (x, y, p.now_s)
        if not self.path or p.now_s - self._path_started_s > cfg.repath_s:
            if self.mode is MoveMode.COVER:
                return 0.0, 0.0, None
            self._new_path(p, rng)
        if not self.path:
            return self._wander(p, view_yaw, rng)
        wx, wy = self.path[0]
        bearing = math.degrees(math.atan2(wy - y, wx - x))
        look = self._look_point(x, y)
        fwd, side = keys_toward(bearing, view_yaw, cfg.key_threshold)
        return fwd, side, look

    def _look_point(self, x: float, y: float) -> tuple[float, float]:
        """Heading (yaw, pitch) to the path point ``look_ahead_m`` ahead."""
        remaining = self.config.look_ahead_m
        px, py = x, y
        tx, ty = self.path[0]
        for wx, wy in self.path:
            seg = math.hypot(wx - px, wy - py)
            tx, ty = wx, wy
            if seg >= remaining:
                break
            remaining -= seg
            px, py = wx, wy
        return math.degrees(math.atan2(ty - y, tx - x)), self._look_pitch

    def _wander(self, p: Perception, view_yaw: float, rng: np.random.Generator) -> tuple[float, float, tuple[float, float] | None]:
        """Without a navigation graph: walk forward, turning to a new random heading now and then."""
        if self._wander_yaw is None or float(rng.random()) < 0.01:
            self._wander_yaw = float(rng.uniform(-180.0, 180.0))
        return 1.0, 0.0, (self._wander_yaw, self._look_pitch)

    # -- fighting ------------------------------------------------------------------------------

    def _strafe_keys(
        self, p: Perception, view_yaw: float, fight: FightInfo, rng: np.random.Generator
    ) -> tuple[float, float, bool, bool]:
        cfg = self.config
        sk = self.skill
        tgt = fight.target
        if p.now_s >= self._strafe_until_s:
            self._strafe_until_s = p.now_s + cfg.strafe_median_s * math.exp(cfg.strafe_sigma * float(rng.standard_normal()))
            if float(rng.random()) < cfg.strafe_pause_prob:
                self._strafe = 0
            else:
                self._strafe = -self._strafe if self._strafe else (1 if float(rng.random()) < 0.5 else -1)
            self._stop_to_shoot = float(rng.random()) < sk.stop_to_shoot_prob
        if tgt is not None and self._crouch_engagement != tgt.entity.slot:
            self._crouch_engagement = tgt.entity.slot
            self._crouch = tgt.distance_m > cfg.crouch_range_m and float(rng.random()) < cfg.crouch_prob
            self._crouched = False
        side = float(self._strafe)
        if side and self.nav is not None:
            yaw = math.radians(view_yaw)
            right = (math.sin(yaw), -math.cos(yaw))
            probe = (p.pos[0] + side * right[0], p.pos[1] + side * right[1])
            if not self.nav.free_at(probe):
                self._strafe = -self._strafe
                side = -side
        fwd = 0.0
        if tgt is not None and fight.spec is not None:
            if tgt.distance_m > cfg.approach_fraction * fight.spec.max_range_m:
                fwd = 1.0
            elif tgt.distance_m < cfg.retreat_range_m:
                fwd = -1.0
        settling = False
        if self._crouch and fight.aim_ready:
            # Once down to shoot at range the player stays down for the rest of the engagement:
            # bobbing up and down between bursts would press crouch right after shots, the
            # pattern of the crouch-cancel exploit.
            self._crouched = True
        if self._crouched or (fight.aim_ready and self._stop_to_shoot):
            fwd, side, settling = self._counter_strafe(p, view_yaw)
        return fwd, side, self._crouched, settling

    def _counter_strafe(self, p: Perception, view_yaw: float) -> tuple[float, float, bool]:
        """Keys that stop the body quickly (tap the key opposite to the motion, as players do
        before shooting) and whether it is still faster than ``settle_speed_m_s``."""
        yaw = math.radians(view_yaw)
        vf = p.vel[0] * math.cos(yaw) + p.vel[1] * math.sin(yaw)
        vs = p.vel[0] * math.sin(yaw) - p.vel[1] * math.cos(yaw)
        limit = self.config.settle_speed_m_s
        fwd = -_sign(vf) if abs(vf) > limit else 0.0
        side = -_sign(vs) if abs(vs) > limit else 0.0
        return fwd, side, math.hypot(vf, vs) > limit

    def _want_cover(self, p: Perception, fight: FightInfo) -> bool:
        cfg = self.config
        if self.nav is None or fight.threat_pos is None:
            return False
        hurt = p.health < cfg.cover_health and p.health < self._cover_done_health
        return hurt or (fight.reloading and fight.target is not None)

    # -- the tick ------------------------------------------------------------------------------

    def step(self, p: Perception, view_yaw: float, fight: FightInfo, rng: np.random.Generator) -> MoveOutput:
        """Keys for this tick."""
        cfg = self.config
        if (self.mode is not MoveMode.COVER and self._want_cover(p, fight)
                and p.now_s - self._cover_searched_s >= cfg.cover_search_gap_s):
            assert self.nav is not None and fight.threat_pos is not None
            self._cover_searched_s = p.now_s
            spots = self.nav.cover_points_near(p.pos, fight.threat_pos)
            if spots:
                self.mode = MoveMode.COVER
                self._new_path(p, rng, goal=spots[0])
                self._cover_until_s = math.inf
                self._cover_done_health = p.health
        if self.mode is MoveMode.COVER:
            fwd, side, _ = self._follow(p, view_yaw, rng)
            arrived = not self.path
            if arrived and self._cover_until_s == math.inf:
                self._cover_until_s = p.now_s + float(rng.uniform(*cfg.cover_hold_s))
            if arrived and p.now_s >= self._cover_until_s and not fight.reloading:
                self.mode = MoveMode.ROAM
                self.path = []
            look = None
            if fight.target is None and fight.threat_pos is not None:
                look = self._look_at(p, fight.threat_pos)
            return MoveOutput(fwd, side, arrived, look)
        if fight.target is not None:
            self.mode = MoveMode.FIGHT
            fwd, side, crouch, settling = self._strafe_keys(p, view_yaw, fight, rng)
            return MoveOutput(fwd, side, crouch, None, settling)
        if self.mode is MoveMode.FIGHT:
            self.mode = MoveMode.ROAM
            self.path = []
            self._crouch_engagement = None
            self._crouched = False
        fwd, side, look = self._follow(p, view_yaw, rng)
        if fight.threat_pos is not None:
            look = self._look_at(p, fight.threat_pos)
        return MoveOutput(fwd, side, False, look)

    def _look_at(self, p: Perception, point: tuple[float, float, float]) -> tuple[float, float]:
        eye = eye_position(p.pos, p.crouching)
        yaw, pitch, _ = direction_angles(eye, (point[0], point[1], point[2] + STANDING_EYE_M))
        return yaw, pitch


# --------------------------------------------------------------------------------------- brain


class HonestBrain:
    """A human-like player: ``think`` once per client tick.

    Args:
        skill: the player's skill (``bots.skill.sample_skill``).
        nav: navigation graph of the map (paths, cover); None: wander without paths.
        geometry: the map's geometry for line of sight (defaults to ``nav.geometry``); None: trust
            the server's visibility culling alone.
        aim, trigger, mover, targeting: replaceable parts (defaults built from ``skill``).
        config: behaviour constants.
    """

    def __init__(
        self,
        skill: Skill,
        nav: NavGraph | None = None,
        geometry: MapGeometry | None = None,
        aim: AimController | None = None,
        trigger: TriggerControl | None = None,
        mover: HonestMover | None = None,
        targeting: TargetSelector | None = None,
        config: HonestConfig = HonestConfig(),
    ) -> None:
        self.skill = skill
        self.config = config
        self.nav = nav
        self.geometry = geometry if geometry is not None else (nav.geometry if nav is not None else None)
        self.aim = aim or AimController(skill)
        self.trigger = trigger or TriggerControl(skill)
        self.mover = mover or HonestMover(skill, config, nav)
        self.targeting = targeting or TargetSelector(skill, config, self.geometry)
        self._alive = False
        self._last_now: float | None = None
        self._view = (0.0, 0.0)
        self._aim_point: AimPoint | None = None
        self._aim_shown: AimPoint | None = None
        self._aim_slot: int | None = None
        self._aim_checked_s = -math.inf
        self._redraw_aim = False
        self._last_target_s = -math.inf
        self._last_reload_press_s = -math.inf
        self._last_switch_s = -math.inf
        self._last_aim: AimOutput | None = None
        self._weapon = 0
        self._spec_id: int | None = None
        self._spec: WeaponSpec | None = None
        self.last_fire_s = -math.inf

    def _respawn(self, p: Perception) -> None:
        self.aim.reset(p.yaw_deg, p.pitch_deg)
        self.trigger.reset()
        self.mover.reset()
        self.targeting.reset()
        self._view = (p.yaw_deg, p.pitch_deg)
        self._aim_point = None
        self._aim_shown = None
        self._aim_slot = None
        self._redraw_aim = False
        self._last_aim = None
        self._last_target_s = p.now_s

    def think(self, p: Perception, rng: np.random.Generator) -> Intent:
        """One client tick: see, aim, decide to fire, move."""
        cfg = self.config
        if not p.alive:
            self._alive = False
            self._last_now = p.now_s
            return Intent(yaw_deg=p.yaw_deg, pitch_deg=p.pitch_deg)
        if not self._alive:
            self._respawn(p)
            self._alive = True
        dt = 1.0 / 64.0 if self._last_now is None else min(max(p.now_s - self._last_now, 0.0), cfg.max_dt_s)
        self._last_now = p.now_s
        now = p.now_s

        if p.weapon != self._spec_id:
            # The specs are constants: looked up again only when the held weapon changes.
            self._spec_id = p.weapon
            try:
                self._spec = weapon(p.weapon)
            except KeyError:
                self._spec = None
        spec = self._spec
        if p.weapon != self._weapon:
            # A new weapon has its own recoil: the pull of the old spray is gone.
            self._weapon = p.weapon
            self.aim.recoil.reset()
            self.trigger.reset()

        sighting = self.targeting.select(p, self._view[0], self._view[1])
        aim_target = self._aim_target(p, sighting, rng) if sighting is not None else None
        if sighting is not None:
            self._last_target_s = now
        threat = self.targeting.last_seen_pos if now - self.targeting.last_seen_s <= cfg.memory_s else None

        last = self._last_aim
        aim_ready = (
            last is not None and sighting is not None and last.target == sighting.entity.slot
            and (last.phase is AimPhase.CORRECT or last.phase is AimPhase.TRACK)
            and last.perceived_error_deg <= 2.0 * self.skill.fire_tolerance * 0.5 * max(last.width_deg, 1e-6)
        )
        fight = FightInfo(sighting, threat, aim_ready, p.reloading, spec)
        move = self.mover.step(p, self._view[0], fight, rng)

        out = self.aim.step(now, dt, aim_target, rng, look=move.look, punch=(p.punch_pitch_deg, p.punch_yaw_deg))
        self._last_aim = out
        self._view = (out.yaw_deg, out.pitch_deg)

        buttons = 0
        fire = False
        if spec is not None and sighting is not None:
            fire = self.trigger.decide(now, spec, p.ammo, p.reloading, out, sighting.distance_m, rng, hold=move.settling)
            if self.trigger.spray_started:
                self.aim.recoil.new_spray(rng)
                if float(rng.random()) < cfg.aim_redraw_prob:
                    # Next burst aims somewhere else on the body (taken up at the next tick).
                    self._redraw_aim = True
        elif spec is not None:
            self.trigger.decide(now, spec, p.ammo, p.reloading, out, math.inf, rng)
        if fire:
            buttons |= _FIRE
            self.last_fire_s = now
        if move.crouch:
            buttons |= _CROUCH

        switch = 0
        if spec is not None and not fire:
            if self._wants_reload(p, spec, now):
                buttons |= _RELOAD
                self._last_reload_press_s = now
            switch = self._weapon_switch(p, now, dt, rng)
        # Positional, in field order (forward, side, yaw, pitch, buttons, switch, aim target).
        return Intent(move.forward, move.side, out.yaw_deg, out.pitch_deg, int(buttons), switch, out.target)

    def _aim_target(self, p: Perception, s: Sighting, rng: np.random.Generator) -> AimTarget:
        """Angles to this engagement's aim point on the target (drawn per engagement, raised to a
        visible body part when the chosen one is behind cover)."""
        e = s.entity
        eye = eye_position(p.pos, p.crouching)
        before = self._aim_shown if self._aim_slot == e.slot else None
        if self._aim_slot != e.slot or self._aim_point is None or self._redraw_aim:
            self._aim_slot = e.slot
            self._aim_point = self._aim_shown = sample_aim_point(rng, self.skill)
            self._aim_checked_s = -math.inf
            self._redraw_aim = False
        if self.geometry is not None and p.now_s - self._aim_checked_s >= self.config.aim_visible_period_s:
            self._aim_checked_s = p.now_s
            # Raised from the drawn point at every check: the player aims back down at it as soon
            # as the cover no longer hides it (a raise kept for the engagement made chest hits).
            self._aim_shown = self._visible_point(eye, e, self._aim_point)
        shown = self._aim_shown or self._aim_point
        point = aim_point_world(e.pos, e.yaw_deg, e.crouching, shown, eye)
        if before is not None and before != shown:
            old = aim_point_world(e.pos, e.yaw_deg, e.crouching, before, eye)
            self.aim.shift_target((point[0] - old[0], point[1] - old[1], point[2] - old[2]))
        width = angular_size_deg(self.skill.target_width_m, s.distance_m)
        return AimTarget(slot=e.slot, point_m=point, eye_m=eye, width_deg=width)

    def _visible_point(self, eye: np.ndarray, e: SeenEntity, point: AimPoint) -> AimPoint:
        """``point`` if the eye sees it, else the lowest body line above it that the eye sees
        (``bots.aim.raised_aim_points``: a human aims at what shows just above cover), else
        ``point`` unchanged."""
        assert self.geometry is not None
        options = raised_aim_points(point)
        pts = np.asarray([aim_point_world(e.pos, e.yaw_deg, e.crouching, o, eye) for o in options])
        clear = self.geometry.los_clear(np.tile(np.asarray(eye), (len(pts), 1)), pts)
        for o, c in zip(options, clear):
            if c:
                return o
        return point

    def _wants_reload(self, p: Perception, spec: WeaponSpec, now: float) -> bool:
        cfg = self.config
        if p.reloading or p.reserve <= 0 or now - self._last_reload_press_s < cfg.reload_press_gap_s:
            return False
        if p.ammo <= 0:
            return True
        idle = now - self._last_target_s >= cfg.reload_idle_s and now - self.last_fire_s >= cfg.reload_idle_s
        return idle and p.ammo < cfg.reload_fraction * spec.magazine

    def _weapon_switch(self, p: Perception, now: float, dt: float, rng: np.random.Generator) -> int:
        cfg = self.config
        others = [w for w in p.weapons_owned if w != p.weapon]
        if not others or now - self._last_switch_s < cfg.switch_gap_s:
            return 0
        choice = 0
        if p.ammo <= 0 and p.reserve <= 0:
            choice = int(others[int(rng.integers(len(others)))])
        else:
            idle = now - self._last_target_s >= cfg.reload_idle_s
            # Probability of a Poisson event in this tick at the configured rate per minute.
            if idle and float(rng.random()) < cfg.switch_per_min / 60.0 * dt:
                choice = int(others[int(rng.integers(len(others)))])
        if choice:
            self._last_switch_s = now
        return choice


__all__ = [
    "FightInfo",
    "HonestBrain",
    "HonestConfig",
    "HonestMover",
    "MoveMode",
    "MoveOutput",
    "Sighting",
    "TargetSelector",
    "eye_position",
    "is_enemy",
    "keys_toward",
]
