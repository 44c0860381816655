"""Movement cheats: speed hack (timer), teleport and noclip.

* ``speedhack`` (:class:`Speedhack`): the game runs ``factor`` times faster than real time: each
  client tick generates ``factor`` commands on average (an accumulator: 1.5 gives 2 commands on
  every second tick), each one a full tick of movement. Every command is ordinary; there are
  just too many of them per second (Grim's timer check).
* ``teleport`` (:class:`Teleport`): now and then (every ``interval_s``) one command claims a
  position at a random free spot of the map (a navigation node) at least ``min_jump_m`` away.
  The client then believes itself there until the server corrects it.
* ``noclip`` (:class:`Noclip`): now and then the player walks straight at a destination on the
  other side of a wall (an enemy it knows of from the snapshots, else a random place), and claims
  the positions of that walk simulated without any wall: the movement code of the game with the
  walls removed. Until the wall the claims are exactly the honest ones; then the client claims
  nothing new while its walk is inside the wall (it never claims a position in solid geometry)
  and, once through, claims the positions beyond it.

Units: meters, seconds.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass, replace

import numpy as np

from bots.cheats.base import BuildContext, CheatHooks
from bots.cheats.params import check_positive, check_range
from bots.cheats.targeting import enemies, held_spec
from bots.perception import Intent, Perception
from bots.prediction import MoveState
from physics.movement import MoveCommands, simulate
from server.protocol import Command
from world.geometry import MapGeometry

__all__ = [
    "Noclip",
    "NoclipParams",
    "Speedhack",
    "SpeedhackParams",
    "Teleport",
    "TeleportParams",
]

_WALL_PROBE_M = 0.05
"""Height (m) at which a path is tested against walls (below low cover, as the server's check)."""
_EMPTY_HAND_SPEED_M_S = 6.0


@dataclass(frozen=True, slots=True)
class SpeedhackParams:
    """Speed hack.

    Attributes:
        factor: game speed relative to real time (1.5 = 50 % more commands per second); at
            most 8 (the client's cap of commands per tick).
    """

    factor: float = 1.5

    def __post_init__(self) -> None:
        if not (math.isfinite(self.factor) and 1.0 <= self.factor <= 8.0):
            raise ValueError(f"SpeedhackParams.factor must be in [1, 8], got {self.factor!r}")


class Speedhack(CheatHooks):
    """``speedhack``: ``factor`` commands per client tick on average."""

    name = "speedhack"

    def __init__(self, params: SpeedhackParams = SpeedhackParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self._credit = 0.0

    def commands_this_step(self, now_s: float, rng: np.random.Generator) -> int:
        self._credit += self.params.factor
        n = math.floor(self._credit + 1e-9)
        self._credit -= n
        return max(n, 1)


@dataclass(frozen=True, slots=True)
class TeleportParams:
    """Teleport.

    Attributes:
        interval_s: (min, max) time (s) between two teleports, drawn uniformly.
        min_jump_m: a teleport claims a spot at least this far (m) from the current position
            (Nex-AC calls >= 40 m a teleport). When the map has no such spot from here, the
            teleport waits until there is one.
        first_after_s: the first teleport comes no earlier than this (s) after the first spawn.
    """

    interval_s: tuple[float, float] = (3.0, 8.0)
    min_jump_m: float = 41.0
    first_after_s: float = 1.0

    def __post_init__(self) -> None:
        check_range("TeleportParams", "interval_s", *self.interval_s, allow_zero=False)
        check_positive("TeleportParams", "min_jump_m", self.min_jump_m)
        check_positive("TeleportParams", "first_after_s", self.first_after_s, allow_zero=True)


class Teleport(CheatHooks):
    """``teleport``: occasionally one command claims a far, free spot of the map."""

    name = "teleport"

    def __init__(self, params: TeleportParams = TeleportParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self._next_s: float | None = None
        self._jump: tuple[float, float, float] | None = None
        self.jumps = 0
        """Teleport claims sent."""

    def _spots(self) -> np.ndarray:
        nav = self.ctx.nav if self.ctx is not None else None
        if nav is not None and len(nav.nodes):
            return nav.nodes
        if self.ctx is not None:
            return np.array([[s.x, s.y] for s in self.ctx.game_map.spawns], dtype=np.float64).reshape(-1, 2)
        return np.zeros((0, 2))

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        self._jump = None
        if not p.alive:
            return honest
        if self._next_s is None:
            self._next_s = p.now_s + self.params.first_after_s
        if p.now_s < self._next_s:
            return honest
        spots = self._spots()
        if len(spots):
            d = np.hypot(spots[:, 0] - p.pos[0], spots[:, 1] - p.pos[1])
            far = np.flatnonzero(np.hypot(d, p.pos[2]) >= self.params.min_jump_m)
            if len(far):
                i = int(far[int(rng.integers(len(far)))])
                self._jump = (float(spots[i, 0]), float(spots[i, 1]), 0.0)
                self._next_s = p.now_s + float(rng.uniform(*self.params.interval_s))
        return honest

    def command(self, cmd: Command, p: Perception) -> Command:
        if self._jump is None:
            return cmd
        jump, self._jump = self._jump, None
        self.jumps += 1
        return cmd._replace(pos=jump)


@dataclass(frozen=True, slots=True)
class NoclipParams:
    """Noclip.

    Attributes:
        interval_s: (min, max) pause (s) between two walks through walls, drawn uniformly.
        walk_s: a walk through walls ends after this long (s) if the destination is not reached.
        dest_range_m: (min, max) distance (m) of a destination from the player.
        prefer_enemies: walk at an enemy known from the snapshots when one lies behind a wall.
        tries: random destinations tried per attempt when no enemy qualifies.
    """

    interval_s: tuple[float, float] = (1.5, 4.0)
    walk_s: float = 3.0
    dest_range_m: tuple[float, float] = (5.0, 25.0)
    prefer_enemies: bool = True
    tries: int = 8

    def __post_init__(self) -> None:
        check_range("NoclipParams", "interval_s", *self.interval_s)
        check_positive("NoclipParams", "walk_s", self.walk_s)
        check_range("NoclipParams", "dest_range_m", *self.dest_range_m, allow_zero=False)
        if self.tries < 1:
            raise ValueError(f"NoclipParams.tries must be >= 1, got {self.tries!r}")


class Noclip(CheatHooks):
    """``noclip``: walks through walls, claiming positions simulated without walls."""

    name = "noclip"

    def __init__(self, params: NoclipParams = NoclipParams(), ctx: BuildContext | None = None) -> None:
        super().__init__(ctx)
        self.params = params
        self._free: MapGeometry | None = None
        self._next_s: float | None = None
        self._dest: tuple[float, float] | None = None
        self._until_s = 0.0
        self._ghost: MoveState | None = None
        self._speed = _EMPTY_HAND_SPEED_M_S
        self.walks = 0
        """Walks through walls started."""

    @property
    def walking(self) -> bool:
        """A walk through walls is under way."""
        return self._dest is not None

    def _free_geometry(self) -> MapGeometry | None:
        """The map without its walls (bounds kept): the world as noclip moves in it."""
        if self._free is None and self.ctx is not None:
            self._free = MapGeometry(dataclasses.replace(self.ctx.game_map, walls=()))
        return self._free

    def _blocked(self, a: tuple[float, float], b: tuple[float, float]) -> bool:
        geo = self.geometry
        if geo is None:
            return False
        seg = np.array([[a[0], a[1], _WALL_PROBE_M]]), np.array([[b[0], b[1], _WALL_PROBE_M]])
        return not bool(geo.los_clear(*seg)[0])

    def _destination(self, p: Perception, rng: np.random.Generator) -> tuple[float, float] | None:
        lo, hi = self.params.dest_range_m
        here = (p.pos[0], p.pos[1])
        if self.params.prefer_enemies:
            known = [(math.hypot(e.pos[0] - here[0], e.pos[1] - here[1]), e) for e in enemies(p, include_hidden=False)]
            for d, e in sorted(known, key=lambda de: de[0]):
                if lo <= d <= hi and self._blocked(here, (e.pos[0], e.pos[1])):
                    return e.pos[0], e.pos[1]
        nav = self.ctx.nav if self.ctx is not None else None
        if nav is None or not len(nav.nodes):
            return None
        dist = np.hypot(nav.nodes[:, 0] - here[0], nav.nodes[:, 1] - here[1])
        pool = np.flatnonzero((dist >= lo) & (dist <= hi))
        for _ in range(min(self.params.tries, len(pool))):
            i = int(pool[int(rng.integers(len(pool)))])
            goal = (float(nav.nodes[i, 0]), float(nav.nodes[i, 1]))
            if self._blocked(here, goal):
                return goal
        return None

    def _stop(self, now_s: float, rng: np.random.Generator | None) -> None:
        self._dest = None
        self._ghost = None
        lo, hi = self.params.interval_s
        self._next_s = now_s + (float(rng.uniform(lo, hi)) if rng is not None else lo)

    def intent(self, p: Perception, honest: Intent, rng: np.random.Generator) -> Intent:
        if not p.alive:
            if self._dest is not None:
                self._stop(p.now_s, rng)
            return honest
        if self._next_s is None:
            self._next_s = p.now_s + float(rng.uniform(*self.params.interval_s))
        if self._dest is not None:
            gx, gy = self._dest
            base = self._ghost.pos if self._ghost is not None else p.pos
            if p.now_s >= self._until_s or math.hypot(gx - base[0], gy - base[1]) < 0.5:
                self._stop(p.now_s, rng)
        elif p.now_s >= self._next_s:
            dest = self._destination(p, rng)
            if dest is None:
                self._next_s = p.now_s + 0.5
            else:
                self._dest = dest
                self._until_s = p.now_s + self.params.walk_s
                self._ghost = None
                self.walks += 1
        if self._dest is None:
            return honest
        base = self._ghost.pos if self._ghost is not None else p.pos
        yaw = math.degrees(math.atan2(self._dest[1] - base[1], self._dest[0] - base[0]))
        spec = held_spec(p)
        self._speed = spec.move_speed_m_s if spec is not None else _EMPTY_HAND_SPEED_M_S
        return replace(honest, forward=1.0, side=0.0, yaw_deg=yaw)

    def command(self, cmd: Command, p: Perception) -> Command:
        if self._dest is None or self.client is None:
            return cmd
        if self._ghost is None:
            # The walk starts from where this command leaves the player (still honest).
            self._ghost = self.client.predicted
            return cmd
        free = self._free_geometry()
        if free is None:
            return cmd
        g = self._ghost
        move = MoveCommands.single(cmd.forward, cmd.side, cmd.yaw_deg, cmd.buttons, cmd.duration_s, cmd.pitch_deg)
        r = simulate(np.array([g.pos]), np.array([g.vel]), np.array([g.on_ground]), np.array([g.stance]), move,
                     self._speed, free)
        pos = (float(r.pos[0, 0]), float(r.pos[0, 1]), float(r.pos[0, 2]))
        vel = (float(r.vel[0, 0]), float(r.vel[0, 1]), float(r.vel[0, 2]))
        self._ghost = MoveState(pos, vel, bool(r.on_ground[0]), int(r.stance[0]))
        geo = self.geometry
        if geo is not None and bool(geo.circle_blocked(np.array([pos[:2]]))[0]):
            # Inside the wall: no claim there (the client would then predict from inside solid
            # geometry); the next claim past the wall has gone straight through it.
            return cmd
        return cmd._replace(pos=pos)
