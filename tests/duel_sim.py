"""A small in-process duel simulator for honest-bot tests and aim calibration.

One honest bot (the brain under test) faces one scripted target on an empty arena. Movement and
weapon mechanics are the real ones (``physics.movement.simulate``, ``physics.weapon_state``), shots
are the real spread and punch (``physics.weapon_state.shot_directions``) against the real bone
capsules (``world.hitbox``), so hit-location statistics are what the server would register for a
static world (no lag compensation or network: the target is seen where it is).

Not a server: no protocol, no latency, one shooter. Deterministic for a seed.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field

import numpy as np

from bots.honest import HonestBrain
from bots.perception import Intent, Perception, SeenEntity
from physics.buttons import Buttons
from physics.movement import MoveCommands, simulate
from physics.weapon_state import WeaponState, current_spread_deg, shot_directions
from world.constants import (
    CROUCHING_EYE_M,
    STANCE_CROUCHING,
    STANCE_STANDING,
    STANDING_EYE_M,
)
from world.geometry import MapGeometry
from world.hitbox import BONE_IDS, Bone, ray_capsule, world_capsules
from world.mapfile import GameMap, Spawn
from world.state import MAX_HEALTH
from world.weapons import WEAPONS, WeaponId

DT = 1.0 / 64.0
ARENA = 200.0


def empty_arena() -> MapGeometry:
    """A 200 x 200 m map without walls."""
    gm = GameMap(name="arena", bounds=(0.0, 0.0, ARENA, ARENA), walls=(), spawns=(Spawn("s", 100.0, 100.0, 0.0),))
    return MapGeometry(gm)


@dataclass
class DuelStats:
    """What happened in a duel run."""

    ticks: int = 0
    shots: int = 0
    hits: int = 0
    kills: int = 0
    bones: Counter[int] = field(default_factory=Counter)
    fire_times: list[float] = field(default_factory=list)
    first_shot_delays: list[float] = field(default_factory=list)
    views: list[tuple[float, float, float]] = field(default_factory=list)
    intents: list[Intent] = field(default_factory=list)
    target_angles: list[tuple[float, float]] = field(default_factory=list)

    def ratio(self, *bones: Bone) -> float:
        """Share of hits on ``bones``."""
        return sum(self.bones[int(b)] for b in bones) / self.hits if self.hits else float("nan")

    @property
    def headshot_ratio(self) -> float:
        """(head + neck) / hits, IW4MAdmin's headshot ratio."""
        return self.ratio(Bone.HEAD, Bone.NECK)

    @property
    def max_bone_ratio(self) -> float:
        """Largest single-bone share of hits."""
        return max(self.bones.values()) / self.hits if self.hits else float("nan")

    @property
    def chest_ratio(self) -> float:
        """Upper torso hits / lower torso hits (IW4MAdmin's Chest ratio)."""
        return self.bones[int(Bone.UPPER_TORSO)] / max(1, self.bones[int(Bone.LOWER_TORSO)])


@dataclass(frozen=True)
class DuelSetup:
    """Scenario: distance range (m), target speed (m/s) when strafing, strafing probability,
    crouch probability of the target, the shooter's weapon, how long (s), the gap (s) before a
    killed target reappears, whether a non-rendered bait hovers above the target, whether to
    record every intent, and ``kinematic`` (a cheap movement model instead of the physics)."""

    distance_m: tuple[float, float] = (6.0, 30.0)
    target_speed_m_s: float = 4.0
    strafe_prob: float = 0.6
    crouch_prob: float = 0.15
    weapon: WeaponId = WeaponId.ASSAULT_RIFLE
    duration_s: float = 60.0
    respawn_gap_s: float = 1.0
    bait: bool = False
    record: bool = False
    kinematic: bool = False


class Duel:
    """Runs one brain against a scripted target."""

    def __init__(self, brain: HonestBrain, setup: DuelSetup, rng: np.random.Generator) -> None:
        self.brain = brain
        self.setup = setup
        self.rng = rng
        self.world_rng = np.random.default_rng(rng.integers(2**63))
        self.geometry = brain.geometry or empty_arena()
        self.ws = WeaponState(2)
        self.ws.spawn(0, [int(setup.weapon)], 0.0)
        self.pos = np.array([[ARENA / 2, ARENA / 2, 0.0]])
        self.vel = np.zeros((1, 3))
        self.on_ground = np.array([True])
        self.stance = np.array([STANCE_STANDING], dtype=np.int8)
        self.yaw, self.pitch = 0.0, 0.0
        self.t = 0.0
        self.stats = DuelStats()
        self._spawn_target()

    def _spawn_target(self) -> None:
        s, r = self.setup, self.world_rng
        d = float(r.uniform(*s.distance_m))
        bearing = self.yaw + float(r.uniform(-40.0, 40.0))
        b = math.radians(bearing)
        self.t_pos = np.array([self.pos[0, 0] + d * math.cos(b), self.pos[0, 1] + d * math.sin(b), 0.0])
        self.t_yaw = bearing + 180.0
        self.t_crouch = bool(r.random() < s.crouch_prob)
        self.t_strafe = bool(r.random() < s.strafe_prob) and not self.t_crouch
        self.t_dir = 1.0 if r.random() < 0.5 else -1.0
        self.t_flip = self.t + float(r.uniform(0.3, 1.0))
        self.t_alive = True
        self.t_vel = np.zeros(3)
        self.t_health = MAX_HEALTH
        self.t_seen_at = self.t
        self.t_first_shot = False
        self.t_dead_until = 0.0

    def _target_step(self) -> None:
        s, r = self.setup, self.world_rng
        if not self.t_alive:
            if self.t >= self.t_dead_until:
                self._spawn_target()
            return
        self.t_vel = np.zeros(3)
        if self.t_strafe:
            if self.t >= self.t_flip:
                self.t_dir = -self.t_dir
                self.t_flip = self.t + float(r.uniform(0.3, 1.0))
            y = math.radians(self.t_yaw)
            right = np.array([math.sin(y), -math.cos(y), 0.0])
            self.t_vel = right * self.t_dir * s.target_speed_m_s
            self.t_pos = self.t_pos + self.t_vel * DT
        # Keep the target facing the shooter.
        d = self.pos[0] - self.t_pos
        self.t_yaw = math.degrees(math.atan2(d[1], d[0]))

    def perception(self) -> Perception:
        ents: list[SeenEntity] = []
        if self.t_alive:
            ents.append(SeenEntity(
                slot=1, pos=tuple(self.t_pos), vel=tuple(self.t_vel), yaw_deg=self.t_yaw,
                pitch_deg=0.0, crouching=self.t_crouch, alive=True, weapon=int(WeaponId.RIFLE),
                health=int(self.t_health), rendered=True,
            ))
            if self.setup.bait:
                above = (self.t_pos[0], self.t_pos[1], self.t_pos[2] + 2.2)
                ents.append(SeenEntity(
                    slot=7, pos=above, vel=(0.0, 0.0, 0.0), yaw_deg=0.0, pitch_deg=0.0, crouching=False,
                    alive=True, weapon=0, health=100, rendered=False,
                ))
        self.ws.advance(self.t)
        held = int(self.ws.weapon[0])
        return Perception(
            now_s=self.t, view_time_s=self.t, tick=self.stats.ticks, slot=0,
            pos=tuple(self.pos[0]), vel=tuple(self.vel[0]), yaw_deg=self.yaw, pitch_deg=self.pitch,
            crouching=bool(self.stance[0] == STANCE_CROUCHING), on_ground=bool(self.on_ground[0]), alive=True,
            health=MAX_HEALTH, weapon=held, ammo=int(self.ws.ammo[0, held]), reserve=int(self.ws.reserve[0, held]),
            reloading=bool(self.ws.reloading(self.t)[0]), punch_pitch_deg=float(self.ws.punch_pitch_deg[0]),
            punch_yaw_deg=float(self.ws.punch_yaw_deg[0]), entities=tuple(ents),
        )

    def _fire(self, intent: Intent) -> None:
        out = self.ws.try_fire(0, int(self.ws.weapon[0]), self.t, tick=self.stats.ticks)
        if not out.accepted:
            if out.evidence is not None and out.evidence.kind.name == "TOO_SOON":
                raise AssertionError(f"honest bot fired too soon: {out.interval_s:.4f} < {out.allowed_s:.4f}")
            return
        self.stats.shots += 1
        self.stats.fire_times.append(self.t)
        if self.t_alive and not self.t_first_shot:
            self.t_first_shot = True
            self.stats.first_shot_delays.append(self.t - self.t_seen_at)
        spec = WEAPONS[WeaponId(int(self.ws.weapon[0]))]
        speed = float(np.hypot(self.vel[0, 0], self.vel[0, 1]))
        spread = float(current_spread_deg(int(spec.id), speed, bool(self.on_ground[0]), int(self.stance[0])))
        dirs = shot_directions(intent.yaw_deg, intent.pitch_deg, out.punch_pitch_deg, out.punch_yaw_deg, spread,
                               spec.pellets, spec.pellet_spread_deg, self.world_rng)
        if not self.t_alive:
            return
        eye = self.pos[0] + np.array([0.0, 0.0, CROUCHING_EYE_M if self.stance[0] == STANCE_CROUCHING else STANDING_EYE_M])
        a, b, r = world_capsules(self.t_pos[None, :], np.array([self.t_yaw]), np.array([1 if self.t_crouch else 0]))
        t = ray_capsule(eye[None, None, :], dirs[:, None, :], a, b, r)  # (pellets, bones)
        best = np.argmin(t, axis=1)
        for k, col in enumerate(best):
            if not np.isfinite(t[k, col]):
                continue
            bone = int(BONE_IDS[col])
            self.stats.hits += 1
            self.stats.bones[bone] += 1
            dmg = float(spec.damage_at(np.array([bone]), np.array([t[k, col]]))[0])
            self.t_health -= dmg
        if self.t_health <= 0.0 and self.t_alive:
            self.t_alive = False
            self.stats.kills += 1
            self.t_dead_until = self.t + self.setup.respawn_gap_s

    def _kinematic_move(self, intent: Intent, speed: float) -> None:
        """A cheap stand-in for the movement physics (calibration runs): the velocity approaches the
        wished one with a 0.1 s time constant; crouching slows to 0.34 of the speed."""
        crouch = bool(intent.buttons & Buttons.CROUCH)
        self.stance = np.array([STANCE_CROUCHING if crouch else STANCE_STANDING], dtype=np.int8)
        y = math.radians(intent.yaw_deg)
        f, sd = intent.forward, intent.side
        n = math.hypot(f, sd)
        top = speed * (0.34 if crouch else 1.0)
        wish = np.zeros(3)
        if n > 0:
            wish[0] = (f * math.cos(y) + sd * math.sin(y)) / n * top
            wish[1] = (f * math.sin(y) - sd * math.cos(y)) / n * top
        self.vel = self.vel + (wish - self.vel) * min(1.0, DT / 0.1)
        self.pos = self.pos + self.vel * DT

    def run(self) -> DuelStats:
        steps = int(self.setup.duration_s / DT)
        spec = WEAPONS[self.setup.weapon]
        for _ in range(steps):
            self._target_step()
            p = self.perception()
            intent = self.brain.think(p, self.rng)
            self.yaw, self.pitch = intent.yaw_deg, intent.pitch_deg
            if self.setup.record:
                self.stats.intents.append(intent)
                self.stats.views.append((self.t, intent.yaw_deg, intent.pitch_deg))
            if intent.buttons & Buttons.RELOAD:
                self.ws.start_reload(0, self.t)
            if self.setup.kinematic:
                self._kinematic_move(intent, spec.move_speed_m_s)
            else:
                cmd = MoveCommands.single(intent.forward, intent.side, intent.yaw_deg, intent.buttons, DT, intent.pitch_deg)
                res = simulate(self.pos, self.vel, self.on_ground, self.stance, cmd, spec.move_speed_m_s, self.geometry)
                self.pos, self.vel, self.on_ground, self.stance = res.pos, res.vel, res.on_ground, res.stance
            if intent.buttons & Buttons.FIRE:
                self._fire(intent)
            self.t += DT
            self.stats.ticks += 1
        return self.stats


REFERENCE = DuelSetup(distance_m=(5.0, 20.0), strafe_prob=0.5, kinematic=True, respawn_gap_s=0.5)
"""The calibration scenario of the honest presets (``bots/skill.py``): assault rifle, targets at
5-20 m, half of them strafing at 4 m/s, 15 % crouching, 60 s per bot, cheap movement model."""


@dataclass(frozen=True)
class HitMix:
    """Hit-location figures of a population (IW4MAdmin's ratios, REFERENCES section 3)."""

    bots: int
    shots: int
    hits: int
    kills: int
    headshot_ratio: float
    max_bone_ratio: float
    max_bone: int
    chest_ratio: float
    limb_ratio: float
    median_first_shot_s: float


def hit_mix(level: str, bots: int, seed: int = 0, setup: DuelSetup = REFERENCE,
            skill_changes: dict[str, float] | None = None) -> HitMix:
    """Run ``bots`` honest bots of ``level`` (each with its own sampled skill and seed) through
    ``setup`` and pool their hits. ``skill_changes`` overrides skill fields (calibration)."""
    import dataclasses

    from bots.skill import sample_skill

    geo = empty_arena()
    bones: Counter[int] = Counter()
    shots = kills = 0
    delays: list[float] = []
    for i in range(bots):
        rng = np.random.default_rng(seed + i)
        skill = sample_skill(rng, level)
        if skill_changes:
            skill = dataclasses.replace(skill, **skill_changes)
        stats = Duel(HonestBrain(skill, geometry=geo), setup, rng).run()
        bones.update(stats.bones)
        shots += stats.shots
        kills += stats.kills
        delays += stats.first_shot_delays
    hits = sum(bones.values())
    top, top_n = bones.most_common(1)[0] if bones else (0, 0)
    limbs = sum(n for b, n in bones.items() if b not in (Bone.HEAD, Bone.NECK, Bone.UPPER_TORSO, Bone.LOWER_TORSO))
    return HitMix(
        bots=bots, shots=shots, hits=hits, kills=kills,
        headshot_ratio=(bones[Bone.HEAD] + bones[Bone.NECK]) / max(1, hits),
        max_bone_ratio=top_n / max(1, hits), max_bone=int(top),
        chest_ratio=bones[Bone.UPPER_TORSO] / max(1, bones[Bone.LOWER_TORSO]),
        limb_ratio=limbs / max(1, hits),
        median_first_shot_s=float(np.median(delays)) if delays else float("nan"),
    )
